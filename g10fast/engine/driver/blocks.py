"""The driver engine's block operations (Numba kernels): eviction of a range and of root chunks,
room for a migration, a batch's landing, the density and tree prefetchers' bits, discards,
and a whole empty VA block settled at once (`g10fast.engine.driver.kernels` describes the
state)."""

from __future__ import annotations

import numpy as np

from g10fast.jit import jit
from g10fast.engine.driver.bits import (
    _emit_runs,
    _kernel,
    _kth,
    _l_append,
    _l_remove,
    _or_range,
    ALL,
    BB_PAGES,
    C_ALLOC,
    C_CLEAN_DROP,
    C_DISCARD,
    C_IN_CPU,
    C_IN_SSD,
    C_OUT_CPU,
    C_OUT_SSD,
    ctz,
    EV_ALLOC,
    EV_DEALLOC,
    EV_EVICT,
    EV_FAULT,
    EV_FETCH,
    EV_LRU4K,
    EV_TBN64K,
    FAIL_NO_VICTIM,
    FAIL_NONE,
    LEVELS,
    LOC_GPU,
    LOC_HOST,
    LOC_NONE,
    LOC_SSD,
    N_TMP,
    ONE,
    PF_DENSITY,
    PF_TBN,
    popc,
    R_D,
    R_E,
    R_H,
    R_LH,
    R_LS,
    R_MARK,
    R_MIG,
    R_REM,
    R_S,
    R_X,
    range_count,
    run_cost,
    S_BHEAD,
    S_BTAIL,
    S_CHUNKS,
    S_FAIL,
    S_GPU,
    S_HOST,
    S_NPAGES,
    S_PHEAD,
    S_PTAIL,
    S_STAMP,
    VA_PAGES,
    W,
    wmask,
    ZERO,
)

# The three operations of every migration and eviction, inlined into their callers (Numba's
# IR inlining) in the untraced engine: each call passed 15 arrays and 15 scalars, which LLVM
# did not inline, a quarter of a PUMP run's engine (benchmarks/results/driver-bulk-journal.md).
# Each call site compiles the body again (the engine's compile about tripled): paid once, when
# the install compiles the untraced engine ahead of time (g10fast.aot). A traced run's engine,
# compiled on its first use (`kernels.simulate_traced`), keeps the calls: its compile stays
# short. Numba asks `_inline_here` at each call site while it compiles a caller; the answer
# changes only how the engine is compiled, never what it computes. (A flag of the process: an
# untraced engine that another thread compiles while a traced run goes on keeps its calls
# too, slower and with the same results; with the compiled module it is never compiled.)
_INLINE = [True]


def _inline_here(expr, caller, callee) -> bool:
    """Numba's inlining cost model (`inline=`): inline unless a traced engine is being
    compiled (`_INLINE[0]` False, set by `kernels.simulate_traced`)."""
    return _INLINE[0]


_kernel_inline = jit(_nrt=False, internal=True, inline=_inline_here)


@_kernel_inline
def _evict_range(
    b,
    lo,
    hi,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    bprev,
    bnext,
    pprev,
    pnext,
    S,
    evict_mode,
    skip_clean,
    host_pages,
    d2h,
    ssd_w,
    cnt,
    it,
    tmp,
    ev,
    tr,
    tm,
    k,
    cause,
):
    """Evict (write back or drop) the GPU pages of block b at offsets [lo, hi); returns the
    cycles of the write-back transfers (one per contiguous run to one tier). tr (True, or None:
    no trace): EVICT events at time tm (value = cause: 1 victim, 0 planned)."""
    ne = 0
    nd = 0
    nclean = 0
    for w in range(W):
        e = BG[b, w] & wmask(lo, hi, w)
        tmp[R_E, w] = e
        d = e
        if skip_clean and e != ZERO:  # clean, a valid copy remains: dropped
            ch = e & CH[b, w]
            cs = e & CS[b, w]
            BH[b, w] |= ch
            BS[b, w] |= cs
            CH[b, w] &= ~ch
            CS[b, w] &= ~cs
            nclean += popc(ch | cs)
            d = e & ~(ch | cs)
        tmp[R_X, w] = e & ~d
        tmp[R_D, w] = d
        BG[b, w] &= ~e
        ne += popc(e)
        nd += popc(d)
    if ne == 0:
        return 0
    cnt[it, C_CLEAN_DROP] += nclean
    # dirty pages, in page order: to the host while it has room, then to the SSD
    nh = host_pages - S[S_HOST]
    if nh < 0:
        nh = 0
    if nh > nd:
        nh = nd
    cut = 512 if nh == nd else (-1 if nh == 0 else _kth(tmp, R_D, nh) + 1)
    for w in range(W):
        h = tmp[R_D, w] & wmask(0, cut, w) if cut > 0 else ZERO
        tmp[R_H, w] = h
        tmp[R_S, w] = tmp[R_D, w] & ~h
        BH[b, w] |= h
        BS[b, w] |= tmp[R_S, w]
    S[S_HOST] += nh
    cnt[it, C_OUT_CPU] += nh
    cnt[it, C_OUT_SSD] += nd - nh
    gcount[b] -= ne
    S[S_GPU] -= ne
    if evict_mode >= EV_LRU4K:
        for w in range(W):
            x = tmp[R_E, w]
            while x != ZERO:
                _l_remove(pprev, pnext, S, S_PHEAD, S_PTAIL, b * VA_PAGES + 64 * w + ctz(x))
                x &= x - ONE
    cycles = 0
    if nh > 0:
        cycles += run_cost(tmp, R_H, d2h)
    if nd > nh:
        cycles += run_cost(tmp, R_S, ssd_w)
    if tr is not None:
        base = b * VA_PAGES
        if nclean > 0:
            _emit_runs(ev, S, tmp, R_X, base, tm, EV_EVICT, it, k, LOC_GPU, LOC_NONE, cause)
        if nh > 0:
            _emit_runs(ev, S, tmp, R_H, base, tm, EV_EVICT, it, k, LOC_GPU, LOC_HOST, cause)
        if nd > nh:
            _emit_runs(ev, S, tmp, R_S, base, tm, EV_EVICT, it, k, LOC_GPU, LOC_SSD, cause)
    if gcount[b] == 0 and evict_mode < EV_LRU4K and (bprev[b] >= 0 or S[S_BHEAD] == b):
        _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
        S[S_CHUNKS] -= 1
    return cycles


@_kernel
def _tree_preevict(
    b,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    bprev,
    bnext,
    pprev,
    pnext,
    S,
    evict_mode,
    skip_clean,
    host_pages,
    d2h,
    ssd_w,
    cnt,
    it,
    tmp,
    ev,
    tr,
    tm,
    k,
):
    """UVMSmart's tree pre-eviction (traverse_and_remove_lp_tree) after a basic block of VA
    block b left: bottom-up from the 64 KiB leaves, every subtree with 0 < resident <
    pages / 2 (strictly; existing pages) evicts its remaining resident pages, cascading
    upwards. Returns the write-back cycles."""
    n_exist = S[S_NPAGES] - b * VA_PAGES
    if n_exist > VA_PAGES:
        n_exist = VA_PAGES
    cycles = 0
    size = BB_PAGES
    while size <= VA_PAGES:
        for lo in range(0, VA_PAGES, size):
            e = n_exist - lo
            if e <= 0:
                break
            if e > size:
                e = size
            c = range_count(BG[b], lo, lo + size)
            if c > 0 and c * 2 < e:
                cycles += _evict_range(
                    b,
                    lo,
                    lo + size,
                    BG,
                    BH,
                    BS,
                    CH,
                    CS,
                    gcount,
                    bprev,
                    bnext,
                    pprev,
                    pnext,
                    S,
                    evict_mode,
                    skip_clean,
                    host_pages,
                    d2h,
                    ssd_w,
                    cnt,
                    it,
                    tmp,
                    ev,
                    tr,
                    tm + cycles,
                    k,
                    1,
                )
        size *= 2
    return cycles


@_kernel_inline
def _make_room(
    b,
    need,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    bprev,
    bnext,
    pprev,
    pnext,
    prot,
    S,
    evict_mode,
    skip_clean,
    gpu_pages,
    gpu_chunks,
    host_pages,
    d2h,
    ssd_w,
    cnt,
    it,
    tmp,
    ev,
    tr,
    tm,
    k,
):
    """Room on the GPU for `need` more pages of block b; returns write-back cycles.
    Blocks whose prot equals the current stamp are never chosen. Sets S[S_FAIL] on failure."""
    cycles = 0
    if evict_mode >= EV_LRU4K:
        while S[S_GPU] + need > gpu_pages:
            v = S[S_PHEAD]
            if v < 0:
                S[S_FAIL] = FAIL_NO_VICTIM
                return cycles
            vb = v // VA_PAGES
            o = v - vb * VA_PAGES
            lo = o
            hi = o + 1
            if evict_mode == EV_TBN64K:  # the LRU page's whole 64 KiB basic block
                lo = (o // BB_PAGES) * BB_PAGES
                hi = lo + BB_PAGES
            cycles += _evict_range(
                vb,
                lo,
                hi,
                BG,
                BH,
                BS,
                CH,
                CS,
                gcount,
                bprev,
                bnext,
                pprev,
                pnext,
                S,
                evict_mode,
                skip_clean,
                host_pages,
                d2h,
                ssd_w,
                cnt,
                it,
                tmp,
                ev,
                tr,
                tm + cycles,
                k,
                1,
            )
            if evict_mode == EV_TBN64K:
                cycles += _tree_preevict(
                    vb,
                    BG,
                    BH,
                    BS,
                    CH,
                    CS,
                    gcount,
                    bprev,
                    bnext,
                    pprev,
                    pnext,
                    S,
                    evict_mode,
                    skip_clean,
                    host_pages,
                    d2h,
                    ssd_w,
                    cnt,
                    it,
                    tmp,
                    ev,
                    tr,
                    tm + cycles,
                    k,
                )
        return cycles
    if gcount[b] > 0 or need == 0:
        return cycles
    while S[S_CHUNKS] >= gpu_chunks:
        v = S[S_BHEAD]
        while v >= 0 and prot[v] == S[S_STAMP]:
            v = bnext[v]
        if v < 0:
            S[S_FAIL] = FAIL_NO_VICTIM
            return cycles
        cycles += _evict_range(
            v,
            0,
            VA_PAGES,
            BG,
            BH,
            BS,
            CH,
            CS,
            gcount,
            bprev,
            bnext,
            pprev,
            pnext,
            S,
            evict_mode,
            skip_clean,
            host_pages,
            d2h,
            ssd_w,
            cnt,
            it,
            tmp,
            ev,
            tr,
            tm + cycles,
            k,
            1,
        )
    return cycles


@_kernel_inline
def _land(
    b,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    bprev,
    bnext,
    pprev,
    pnext,
    S,
    evict_mode,
    skip_clean,
    h2d,
    ssd_r,
    cnt,
    it,
    tmp,
    ev,
    tr,
    tm,
    k,
    cause,
):
    """Migrate the pages of block b set in tmp[R_MIG] (none on the GPU, all existing) to the
    GPU; returns the cycles of the transfers (one per contiguous run from one tier;
    unpopulated pages are zero-filled)."""
    nh = 0
    ns = 0
    na = 0
    for w in range(W):
        m = tmp[R_MIG, w]
        fh = m & BH[b, w]
        fs = m & BS[b, w]
        tmp[R_LH, w] = fh
        tmp[R_LS, w] = fs
        tmp[R_X, w] = m & ~(fh | fs)
        if m == ZERO:
            continue
        nh += popc(fh)
        ns += popc(fs)
        na += popc(m & ~(fh | fs))
        if skip_clean:
            CH[b, w] |= fh
            CS[b, w] |= fs
        BH[b, w] &= ~fh
        BS[b, w] &= ~fs
        BG[b, w] |= m
    landed = nh + ns + na
    if landed == 0:
        return 0
    cnt[it, C_IN_CPU] += nh
    cnt[it, C_IN_SSD] += ns
    cnt[it, C_ALLOC] += na
    if not skip_clean:
        S[S_HOST] -= nh
    if evict_mode >= EV_LRU4K:
        for w in range(W):
            x = tmp[R_MIG, w]
            while x != ZERO:
                _l_append(pprev, pnext, S, S_PHEAD, S_PTAIL, b * VA_PAGES + 64 * w + ctz(x))
                x &= x - ONE
    cycles = 0
    if nh > 0:
        cycles += run_cost(tmp, R_LH, h2d)
    if ns > 0:
        cycles += run_cost(tmp, R_LS, ssd_r)
    if tr is not None:
        base = b * VA_PAGES
        if na > 0:
            _emit_runs(ev, S, tmp, R_X, base, tm, EV_ALLOC, it, k, LOC_NONE, LOC_GPU, cause)
        if nh > 0:
            _emit_runs(ev, S, tmp, R_LH, base, tm, EV_FETCH, it, k, LOC_HOST, LOC_GPU, cause)
        if ns > 0:
            _emit_runs(ev, S, tmp, R_LS, base, tm, EV_FETCH, it, k, LOC_SSD, LOC_GPU, cause)
    was_empty = gcount[b] == 0
    gcount[b] += landed
    S[S_GPU] += landed
    if was_empty and evict_mode < EV_LRU4K:
        _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
        S[S_CHUNKS] += 1
    return cycles


@_kernel
def prefetch_bits(mark, n_exist, fb, prefetcher, threshold, big, out, rem):
    """The pages of one VA block a fault batch migrates (before removing resident ones), on
    bitmaps of W words.

    mark: resident pages (changed in place: grown and filled marks); n_exist: pages of the
    block that exist (512 but in the last block); fb: faulted pages. out (ORed): faulted pages
    grown to their big page (`big` pages), plus the prefetcher's regions: density (the
    driver): per faulted page, the largest ancestor subtree with marked*100 > pages*threshold
    (existing pages counted); tbn (UVMSmart): bottom-up from `big`-page leaves, every subtree
    with marked*2 > pages that is not full is filled (cascading). rem: W words of scratch."""
    # the growth, a word at a time: a big page with a faulted page is filled (existing
    # pages only); within a word, groups of `big` bits with any bit set (SWAR), across words,
    # groups of words with any word set
    if big <= 64:
        gm = ALL if big == 64 else (ONE << np.uint64(big)) - ONE
        r1 = ALL // gm  # the lowest bit of every group
        hb = r1 << np.uint64(big - 1)  # the highest bit of every group
        lb = hb - r1  # the other bits of every group
        for w in range(W):
            x = fb[w]
            if x != ZERO:
                nz = (((x & lb) + lb) | x) & hb
                g = (nz >> np.uint64(big - 1)) * gm & wmask(0, n_exist, w)
                mark[w] |= g
                out[w] |= g
    else:
        nw = big >> 6
        for w0 in range(0, W, nw):
            x = ZERO
            for v in range(w0, w0 + nw):
                x |= fb[v]
            if x != ZERO:
                for v in range(w0, w0 + nw):
                    g = wmask(0, n_exist, v)
                    mark[v] |= g
                    out[v] |= g
    if prefetcher == PF_DENSITY:
        # per faulted page the largest ancestor over the threshold: top-down, a node is
        # tested only while it holds a faulted page not yet covered by a larger passing
        # node; below lmin (the big page) a subtree lies inside a grown big page and adds
        # nothing. Nodes of >= 64 pages are whole words, smaller ones parts of one word.
        lmin = 1
        while (1 << lmin) < big:
            lmin += 1
        for w in range(W):
            rem[w] = fb[w]
        for lv in range(LEVELS - 1, lmin - 1, -1):
            size = 1 << lv
            if lv >= 6:
                nw = size >> 6
                for w0 in range(0, W, nw):
                    x = ZERO
                    for v in range(w0, w0 + nw):
                        x |= rem[v]
                    if x == ZERO:
                        continue
                    e = n_exist - 64 * w0
                    if e > size:
                        e = size
                    c = 0
                    for v in range(w0, w0 + nw):
                        c += popc(mark[v])
                    if e > 0 and c * 100 > e * threshold:
                        for v in range(w0, w0 + nw):
                            out[v] |= wmask(0, n_exist, v)
                            rem[v] = ZERO
            else:
                sm = (ONE << np.uint64(size)) - ONE
                for w in range(W):
                    x = rem[w]
                    while x != ZERO:
                        off = (ctz(x) >> lv) << lv
                        nm = sm << np.uint64(off)
                        e = n_exist - 64 * w - off
                        if e > size:
                            e = size
                        if e > 0 and popc(mark[w] & nm) * 100 > e * threshold:
                            out[w] |= nm & wmask(0, n_exist, w)
                            rem[w] &= ~nm
                        x &= ~nm
    elif prefetcher == PF_TBN:
        size = big
        while size <= VA_PAGES:
            lo = 0
            while lo < VA_PAGES:
                e = n_exist - lo
                if e <= 0:
                    break
                if size < 64 and (lo & 63) == 0:
                    x = mark[lo >> 6]
                    if x == ZERO or x == ALL:  # every node in this word empty or full
                        lo += 64
                        continue
                if e > size:
                    e = size
                c = range_count(mark, lo, lo + size)
                if c < e and c * 2 > e:
                    _or_range(mark, lo, lo + e)
                    _or_range(out, lo, lo + e)
                lo += size
            size *= 2


@_kernel
def _discard_range(
    s0,
    s1,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    bprev,
    bnext,
    pprev,
    pnext,
    S,
    evict_mode,
    skip_clean,
    cnt,
    it,
    tmp,
    ev,
    tr,
    tm,
    k,
):
    """Drop pages [s0, s1) wherever they are, without write-back (freed memory), VA block by
    VA block (one call for a hint's range)."""
    p = s0
    while p < s1:
        b = p // VA_PAGES
        lo = p - b * VA_PAGES
        hi = min(s1 - b * VA_PAGES, VA_PAGES)
        p = b * VA_PAGES + hi
        ng = 0
        noff = 0
        for w in range(W):
            rm = wmask(lo, hi, w)
            g = BG[b, w] & rm
            hh = BH[b, w] & rm
            ss = BS[b, w] & rm
            tmp[R_E, w] = g
            tmp[R_H, w] = hh
            tmp[R_S, w] = ss
            S[S_HOST] -= popc(hh)
            if skip_clean:
                S[S_HOST] -= popc(g & CH[b, w])
                CH[b, w] &= ~rm
                CS[b, w] &= ~rm
            ng += popc(g)
            noff += popc(hh | ss)
            if evict_mode >= EV_LRU4K:
                x = g
                while x != ZERO:
                    _l_remove(pprev, pnext, S, S_PHEAD, S_PTAIL, b * VA_PAGES + 64 * w + ctz(x))
                    x &= x - ONE
            BG[b, w] &= ~rm
            BH[b, w] &= ~rm
            BS[b, w] &= ~rm
        gcount[b] -= ng
        S[S_GPU] -= ng
        cnt[it, C_DISCARD] += ng + noff
        if tr is not None:
            base = b * VA_PAGES
            _emit_runs(ev, S, tmp, R_E, base, tm, EV_DEALLOC, it, k, LOC_GPU, LOC_NONE, 0)
            _emit_runs(ev, S, tmp, R_H, base, tm, EV_DEALLOC, it, k, LOC_HOST, LOC_NONE, 0)
            _emit_runs(ev, S, tmp, R_S, base, tm, EV_DEALLOC, it, k, LOC_SSD, LOC_NONE, 0)
        if gcount[b] == 0 and evict_mode < EV_LRU4K and (bprev[b] >= 0 or S[S_BHEAD] == b):
            _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
            S[S_CHUNKS] -= 1


@_kernel
def _drop_copies(b, lo, hi, BG, CH, CS, S):
    """Written pages [lo, hi) of block b on the GPU lose their clean copy."""
    for w in range(W):
        cm = BG[b, w] & wmask(lo, hi, w) & (CH[b, w] | CS[b, w])
        if cm != ZERO:
            S[S_HOST] -= popc(cm & CH[b, w])
            CH[b, w] &= ~cm
            CS[b, w] &= ~cm


@_kernel
def _aligned_template(fault_batch, prefetcher, threshold, big, tmp):
    """Whether a VA block with no page on the GPU, whose pages a kernel touches from its first
    to its last with an empty fault batch at its start, is serviced as VA_PAGES / fault_batch
    batches that each migrate exactly their own fault_batch pages (and nothing else): the
    prefetcher's answer for such a block depends only on the options, so it is worked out
    here once, on scratch rows of tmp (R_E: the block's GPU pages, R_D: a batch's faults)."""
    if fault_batch > VA_PAGES or VA_PAGES % fault_batch != 0:
        return False
    ok = True
    for w in range(W):
        tmp[R_E, w] = ZERO
    for i in range(VA_PAGES // fault_batch):
        for w in range(W):
            tmp[R_D, w] = wmask(i * fault_batch, (i + 1) * fault_batch, w)
            tmp[R_MARK, w] = tmp[R_E, w]
            tmp[R_MIG, w] = ZERO
        prefetch_bits(tmp[R_MARK], VA_PAGES, tmp[R_D], prefetcher, threshold, big, tmp[R_MIG], tmp[R_REM])
        for w in range(W):
            if tmp[R_MIG, w] & ~tmp[R_E, w] != tmp[R_D, w]:
                ok = False
            tmp[R_E, w] |= tmp[R_D, w]
    for w in range(N_TMP):
        for v in range(W):
            tmp[w, v] = ZERO
    return ok


@_kernel
def _empty_block(
    b,
    clock,
    fault_batch,
    fault_lat,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    bprev,
    bnext,
    pprev,
    pnext,
    prot,
    S,
    evict_mode,
    skip_clean,
    gpu_pages,
    gpu_chunks,
    host_pages,
    h2d,
    d2h,
    ssd_r,
    ssd_w,
    cnt,
    it,
    tmp,
    ev,
    tr,
    k,
):
    """The fault batches of a whole VA block b with no page on the GPU, touched from its first
    page to its last from an empty batch, when _aligned_template holds (chunk eviction): batch
    i faults and migrates pages [i*F, (i+1)*F) (F = fault_batch) — what the general path
    does, without collecting the faults page run by page run or asking the prefetcher. The
    block's chunk is found at its first batch (make_room), as there. Returns the clock after
    the last batch (S[S_FAIL] set: no chunk)."""
    base = b * VA_PAGES
    n = VA_PAGES // fault_batch
    x = ZERO
    for w in range(W):
        x |= BH[b, w] | BS[b, w]
    if x == ZERO and tr is None:
        # no page populated: the batches zero-fill (no transfer), so the block lands at once;
        # the chunk is found at the first batch, after one fault latency
        S[S_STAMP] += n
        prot[b] = S[S_STAMP]
        cyc = _make_room(
            b,
            fault_batch,
            BG,
            BH,
            BS,
            CH,
            CS,
            gcount,
            bprev,
            bnext,
            pprev,
            pnext,
            prot,
            S,
            evict_mode,
            skip_clean,
            gpu_pages,
            gpu_chunks,
            host_pages,
            d2h,
            ssd_w,
            cnt,
            it,
            tmp,
            ev,
            tr,
            clock + fault_lat,
            k,
        )
        if S[S_FAIL] != FAIL_NONE:
            return clock
        # _land of the whole block, every page zero-filled (chunk eviction: no page list)
        for w in range(W):
            BG[b, w] = ALL
        cnt[it, C_ALLOC] += VA_PAGES
        gcount[b] = VA_PAGES
        S[S_GPU] += VA_PAGES
        _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
        S[S_CHUNKS] += 1
        return clock + cyc + n * fault_lat
    for i in range(n):
        lo = i * fault_batch
        hi = lo + fault_batch
        cyc = fault_lat
        S[S_STAMP] += 1
        prot[b] = S[S_STAMP]
        for w in range(W):
            tmp[R_MIG, w] = wmask(lo, hi, w)
        if tr is not None:
            for w in range(W):
                f = tmp[R_MIG, w]
                tmp[R_LH, w] = f & BH[b, w]
                tmp[R_LS, w] = f & BS[b, w]
                tmp[R_X, w] = f & ~(BH[b, w] | BS[b, w])
            _emit_runs(ev, S, tmp, R_X, base, clock, EV_FAULT, it, k, LOC_NONE, LOC_GPU, 0)
            _emit_runs(ev, S, tmp, R_LS, base, clock, EV_FAULT, it, k, LOC_SSD, LOC_GPU, 0)
            _emit_runs(ev, S, tmp, R_LH, base, clock, EV_FAULT, it, k, LOC_HOST, LOC_GPU, 0)
            for w in range(W):
                tmp[R_MIG, w] = wmask(lo, hi, w)
        if gcount[b] == 0:
            cyc += _make_room(
                b,
                fault_batch,
                BG,
                BH,
                BS,
                CH,
                CS,
                gcount,
                bprev,
                bnext,
                pprev,
                pnext,
                prot,
                S,
                evict_mode,
                skip_clean,
                gpu_pages,
                gpu_chunks,
                host_pages,
                d2h,
                ssd_w,
                cnt,
                it,
                tmp,
                ev,
                tr,
                clock + cyc,
                k,
            )
            if S[S_FAIL] != FAIL_NONE:
                return clock
        cyc += _land(
            b,
            BG,
            BH,
            BS,
            CH,
            CS,
            gcount,
            bprev,
            bnext,
            pprev,
            pnext,
            S,
            evict_mode,
            skip_clean,
            h2d,
            ssd_r,
            cnt,
            it,
            tmp,
            ev,
            tr,
            clock + cyc,
            k,
            1,
        )
        clock += cyc
    return clock
