"""Numba kernels of the driver engine (the real nvidia-uvm, docs/driver-engine.md).

Plain arrays and scalars in, plain arrays out; the validating wrapper is
`g10fast.engine.driver`. Simulated time is integer GPU cycles (the system's clock).

State (sized up front, no Python objects), per 2 MiB VA block as the driver keeps it:
  residency bitmaps uint64[nb, 8] (bit o of block b = page b*512 + o): BG on the GPU, BH on
                   the host, BS on the SSD (none of them: not populated), CH / CS a still-valid
                   clean copy of a GPU page on the host / SSD (only with skip_clean)
  per block        gcount int32 (pages resident on the GPU; > 0 = the block holds a root
                   chunk), barr int64 (arrival time of its last prefetch), bprev/bnext int32
                   (the root-chunk list: head = next victim), prot int64 (batch stamp)
  per page (lru4k, tbn64k) pprev/pnext int32: the true-LRU page list
A fault batch, a migration, an eviction and a kernel's scan of its pages work on the 8 words
of a block at once (popcounts, runs of set bits), never page by page (except lru4k's list);
a whole VA block with no page on the GPU that a kernel touches from an empty fault batch is
settled a block at a time (_empty_block, where _aligned_template shows its batches migrate
exactly their faults). Scalars live in S (int64): see the S_* indices.
"""

from __future__ import annotations

import importlib

import numpy as np

from g10fast import aot
from g10fast.engine.driver import blocks
from g10fast.jit import cache_depends_on, kernel
from g10fast.engine.driver.bits import (
    _emit,
    _emit_runs,
    _kernel,
    _kth,
    _l_append,
    _l_remove,
    C_BATCHES,
    C_COLS,
    C_DENSITY,
    C_FAULTS,
    C_IN_CPU,
    C_IN_SSD,
    C_OUT_CPU,
    C_OUT_SSD,
    C_PF_CYCLES,
    C_PREFETCHED,
    ctz,
    EV_ACCESS2M,
    EV_FAULT,
    EV_HINT,
    EV_KERNEL,
    EV_LRU4K,
    FAIL_NONE,
    HINT_DISCARD,
    HINT_EVICT,
    HINT_PREEVICT,
    HINT_PREFETCH,
    K_BATCHES,
    K_COLS,
    K_END,
    K_FAULTS,
    K_GPU,
    K_IN,
    K_ITER,
    K_KERNEL,
    K_OUT,
    K_STALL,
    K_START,
    LOC_GPU,
    LOC_HOST,
    LOC_NONE,
    LOC_SSD,
    N_TMP,
    ONE,
    popc,
    R_LH,
    R_LS,
    R_MARK,
    R_MIG,
    R_MISS,
    R_REM,
    R_X,
    S_BHEAD,
    S_BTAIL,
    S_CHUNKS,
    S_FAIL,
    S_GPU,
    S_HOST,
    S_LEN,
    S_NPAGES,
    S_PHEAD,
    S_PTAIL,
    S_STAMP,
    VA_PAGES,
    W,
    wmask,
    ZERO,
)
from g10fast.engine.driver.blocks import (
    _aligned_template,
    _discard_range,
    _drop_copies,
    _empty_block,
    _evict_range,
    _land,
    _make_room,
    prefetch_bits,
)


@kernel
def simulate(
    K,
    n_iter,
    req_ptr,
    req_start,
    req_n,
    req_write,
    exec_cycles,
    hint_ptr,
    hint_start,
    hint_n,
    hint_kind,
    wait_hint,
    npages,
    gpu_pages,
    gpu_chunks,
    host_pages,
    fault_batch,
    fault_lat,
    big,
    prefetcher,
    threshold,
    evict_mode,
    skip_clean,
    h2d,
    d2h,
    ssd_r,
    ssd_w,
    log_iter,
    log_cap,
    init_loc,
    inflight_overlap,
    preevict_pages,
    ev,
    tr,
):
    """Run n_iter iterations of K kernels. Kernel k touches the page runs
    req_*[req_ptr[k]:req_ptr[k+1]] in order (req_write: the run is written).
    Hints of global kernel g = it*K + k: rows hint_ptr[g]:hint_ptr[g+1], issued at the
    kernel's start (before its barrier) on the one prefetch stream, FIFO; wait_hint[g] >= 0:
    the kernel starts only once that hint (and so every earlier one) is done (E2).

    Returns (kernels int64[n_iter*K, K_COLS], cnt int64[n_iter, C_COLS], BG, BH, BS, CH, CS
    (the final bitmaps, uint64[nb, W]), hint_done int64[H], S, log_k, log_b, n_log): the
    faulted (kernel, block) pairs of iteration log_iter (first fault of each block per
    kernel), at most log_cap.
    init_loc int8[npages]: the start tier of every page (empty: none populated).
    inflight_overlap: a kernel touching a page whose prefetch is in flight does not stall;
    its end is max(its end, the arrival) (compute overlaps the wait), else it stalls.
    A HINT_PREEVICT row evicts its range only while more than preevict_pages are on the GPU
    (checked when the row is processed).
    tr: True to write the event trace (docs/trace-format.md) through ev int64[cap, EV_COLS]:
    full buffers go to _SINK[0] (object mode), the last rows stay in ev[:S[S_NEV]]; None for
    none. A type, not a value: Numba drops every `tr is not None` branch of the untraced
    compile (its dead-branch pruning of None arguments), so the untraced engine holds no
    object-mode code and is compiled ahead of time (below)."""
    nb = (npages + VA_PAGES - 1) // VA_PAGES
    BG = np.zeros((nb, W), np.uint64)
    BH = np.zeros((nb, W), np.uint64)
    BS = np.zeros((nb, W), np.uint64)
    ncl = nb if skip_clean else 1
    CH = np.zeros((ncl, W), np.uint64)
    CS = np.zeros((ncl, W), np.uint64)
    gcount = np.zeros(nb, np.int32)
    barr = np.zeros(nb, np.int64)
    prot = np.full(nb, -1, np.int64)
    lastlog = np.full(nb, -1, np.int64)
    bprev = np.full(nb, -1, np.int32)
    bnext = np.full(nb, -1, np.int32)
    npl = npages if evict_mode >= EV_LRU4K else 1
    pprev = np.full(npl, -1, np.int32)
    pnext = np.full(npl, -1, np.int32)
    S = np.zeros(S_LEN, np.int64)
    S[S_BHEAD] = -1
    S[S_BTAIL] = -1
    S[S_PHEAD] = -1
    S[S_PTAIL] = -1
    S[S_NPAGES] = npages
    H = hint_start.shape[0]
    hint_done = np.zeros(H, np.int64)
    row_t = np.zeros(H, np.int64)
    kern = np.zeros((n_iter * K, K_COLS), np.int64)
    cnt = np.zeros((n_iter, C_COLS), np.int64)
    log_k = np.zeros(max(log_cap, 1), np.int64)
    log_b = np.zeros(max(log_cap, 1), np.int64)
    blist = np.zeros(fault_batch, np.int64)
    fcount = np.zeros(fault_batch, np.int64)
    fbits = np.zeros((fault_batch, W), np.uint64)
    tmp = np.zeros((N_TMP, W), np.uint64)
    n_log = _simulate(
        K,
        n_iter,
        req_ptr,
        req_start,
        req_n,
        req_write,
        exec_cycles,
        hint_ptr,
        hint_start,
        hint_n,
        hint_kind,
        wait_hint,
        npages,
        gpu_pages,
        gpu_chunks,
        host_pages,
        fault_batch,
        fault_lat,
        big,
        prefetcher,
        threshold,
        evict_mode,
        skip_clean,
        h2d,
        d2h,
        ssd_r,
        ssd_w,
        log_iter,
        log_cap,
        init_loc,
        inflight_overlap,
        preevict_pages,
        ev,
        tr,
        BG,
        BH,
        BS,
        CH,
        CS,
        gcount,
        barr,
        prot,
        lastlog,
        bprev,
        bnext,
        pprev,
        pnext,
        S,
        hint_done,
        row_t,
        kern,
        cnt,
        log_k,
        log_b,
        blist,
        fcount,
        fbits,
        tmp,
    )
    return kern, cnt, BG, BH, BS, CH, CS, hint_done, S, log_k, log_b, n_log


@_kernel
def _simulate(
    K,
    n_iter,
    req_ptr,
    req_start,
    req_n,
    req_write,
    exec_cycles,
    hint_ptr,
    hint_start,
    hint_n,
    hint_kind,
    wait_hint,
    npages,
    gpu_pages,
    gpu_chunks,
    host_pages,
    fault_batch,
    fault_lat,
    big,
    prefetcher,
    threshold,
    evict_mode,
    skip_clean,
    h2d,
    d2h,
    ssd_r,
    ssd_w,
    log_iter,
    log_cap,
    init_loc,
    inflight_overlap,
    preevict_pages,
    ev,
    tr,
    BG,
    BH,
    BS,
    CH,
    CS,
    gcount,
    barr,
    prot,
    lastlog,
    bprev,
    bnext,
    pprev,
    pnext,
    S,
    hint_done,
    row_t,
    kern,
    cnt,
    log_k,
    log_b,
    blist,
    fcount,
    fbits,
    tmp,
):
    """The engine of `simulate` on its state, allocated there (no reference counting here).
    Returns n_log."""
    hq = 0  # next queued hint row
    n_log = 0
    chunk_mode = evict_mode < EV_LRU4K
    # whole empty VA blocks touched from an empty batch are settled a block at a time
    aligned = chunk_mode and _aligned_template(fault_batch, prefetcher, threshold, big, tmp)
    if init_loc.shape[0] == npages:  # a given start state (per-kernel checks)
        for p in range(npages):
            v = init_loc[p]
            b = p // VA_PAGES
            w = (p - b * VA_PAGES) >> 6
            bit = ONE << np.uint64(p & 63)
            if v == LOC_GPU:
                if gcount[b] == 0 and chunk_mode:
                    _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                    S[S_CHUNKS] += 1
                BG[b, w] |= bit
                gcount[b] += 1
                S[S_GPU] += 1
                if not chunk_mode:
                    _l_append(pprev, pnext, S, S_PHEAD, S_PTAIL, p)
            elif v == LOC_HOST:
                BH[b, w] |= bit
                S[S_HOST] += 1
            elif v == LOC_SSD:
                BS[b, w] |= bit
    t = 0  # end of the previous kernel
    pf_free = 0  # the prefetch stream is busy until
    for g in range(n_iter * K):
        it = g // K
        k = g - it * K
        # --- hints issued at this kernel (cudaMemPrefetchAsync-style) join the FIFO stream;
        # a queued row takes effect at the first kernel boundary at which the stream is free
        # (it started by then), or when this kernel waits for it (E2)
        for h in range(hint_ptr[g], hint_ptr[g + 1]):
            row_t[h] = t
        while hq < hint_ptr[g + 1] and (pf_free <= t or hq <= wait_hint[g]):
            h = hq
            hq += 1
            cur = max(row_t[h], pf_free)
            s0 = hint_start[h]
            s1 = min(s0 + hint_n[h], npages)
            if tr is not None:
                hk = hint_kind[h]
                _emit(
                    ev,
                    S,
                    cur,
                    EV_HINT,
                    it,
                    k,
                    s0,
                    s1 - s0,
                    -1,
                    LOC_GPU if hk == HINT_PREFETCH else (LOC_NONE if hk == HINT_DISCARD else LOC_HOST),
                    hk,
                )
            p = s0
            if hint_kind[h] == HINT_DISCARD:  # freed memory: the range in one call
                _discard_range(
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
                    cur,
                    k,
                )
                p = s1
            while p < s1:
                b = p // VA_PAGES
                lo = p - b * VA_PAGES
                hi = min(s1 - b * VA_PAGES, VA_PAGES)
                kind = hint_kind[h]
                if kind == HINT_PREFETCH:
                    need = 0
                    for w in range(W):
                        m = wmask(lo, hi, w) & ~BG[b, w]
                        tmp[R_MIG, w] = m
                        need += popc(m)
                    if need > 0:
                        S[S_STAMP] += 1
                        prot[b] = S[S_STAMP]
                        if not chunk_mode or gcount[b] == 0:  # else it holds its chunk
                            cur += _make_room(
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
                                cur,
                                k,
                            )
                            if S[S_FAIL] != FAIL_NONE:
                                return n_log
                        x = _land(
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
                            cur,
                            k,
                            0,
                        )
                        cur += x
                        cnt[it, C_PREFETCHED] += need
                        cnt[it, C_PF_CYCLES] += x
                        if cur > barr[b]:
                            barr[b] = cur
                elif kind == HINT_EVICT or (kind == HINT_PREEVICT and S[S_GPU] > preevict_pages):
                    cur += _evict_range(
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
                        cur,
                        k,
                        0,
                    )
                p = b * VA_PAGES + hi
            pf_free = cur
            hint_done[h] = cur
        # --- stream barrier (E2)
        start = t
        if wait_hint[g] >= 0 and hint_done[wait_hint[g]] > start:
            start = hint_done[wait_hint[g]]
        clock = start
        arr = 0
        faults = 0
        batches = 0
        in0 = cnt[it, C_IN_CPU] + cnt[it, C_IN_SSD]
        out0 = cnt[it, C_OUT_CPU] + cnt[it, C_OUT_SSD]
        # --- the kernel touches its pages in order, a VA block's segment of a run at a time;
        # the missing ones are faults, serviced in batches of fault_batch
        r = req_ptr[k]
        r_end = req_ptr[k + 1]
        j = 0  # page within run r
        last_b = -1
        while True:
            np_ = 0
            nbl = 0
            # the batch is empty: whole VA blocks with no page on the GPU, a block at a time
            while aligned and r < r_end:
                p = req_start[r] + j
                b = p // VA_PAGES
                if p != b * VA_PAGES or req_n[r] - j < VA_PAGES or (b + 1) * VA_PAGES > npages:
                    break
                x = ZERO
                for w in range(W):
                    x |= BG[b, w]
                if x != ZERO:
                    break
                clock = _empty_block(
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
                )
                if S[S_FAIL] != FAIL_NONE:
                    return n_log
                faults += VA_PAGES
                batches += VA_PAGES // fault_batch
                if it == log_iter and lastlog[b] != g and n_log < log_cap:
                    lastlog[b] = g
                    log_k[n_log] = k
                    log_b[n_log] = b
                    n_log += 1
                j += VA_PAGES
                if j >= req_n[r]:
                    r += 1
                    j = 0
            while r < r_end and np_ < fault_batch:
                p = req_start[r] + j
                b = p // VA_PAGES
                lo = p - b * VA_PAGES
                hi = lo + req_n[r] - j
                if hi > VA_PAGES:
                    hi = VA_PAGES
                nm = 0
                for w in range(W):
                    m = wmask(lo, hi, w) & ~BG[b, w]
                    tmp[R_MISS, w] = m
                    nm += popc(m)
                take = nm
                stop = hi
                room = fault_batch - np_
                if nm >= room:  # the batch fills at the room-th missing page
                    take = room
                    stop = _kth(tmp, R_MISS, room) + 1
                    for w in range(W):
                        tmp[R_MISS, w] &= wmask(lo, stop, w)
                if stop - lo > take:  # resident pages touched
                    if inflight_overlap:
                        if barr[b] > arr:
                            arr = barr[b]
                    elif barr[b] > clock:
                        clock = barr[b]  # wait for an in-flight prefetch
                    if evict_mode >= EV_LRU4K:
                        for w in range(W):
                            x = BG[b, w] & wmask(lo, stop, w)
                            while x != ZERO:
                                q = b * VA_PAGES + 64 * w + ctz(x)
                                _l_remove(pprev, pnext, S, S_PHEAD, S_PTAIL, q)
                                _l_append(pprev, pnext, S, S_PHEAD, S_PTAIL, q)
                                x &= x - ONE
                    elif evict_mode == EV_ACCESS2M and b != last_b:
                        _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                        _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                    last_b = b
                    if skip_clean and req_write[r]:
                        _drop_copies(b, lo, stop, BG, CH, CS, S)
                if take > 0:
                    q = 0
                    while q < nbl and blist[q] != b:
                        q += 1
                    if q == nbl:
                        blist[q] = b
                        fcount[q] = 0
                        for w in range(W):
                            fbits[q, w] = ZERO
                        nbl += 1
                    for w in range(W):
                        fbits[q, w] |= tmp[R_MISS, w]
                    fcount[q] += take
                    np_ += take
                j += stop - lo
                if j >= req_n[r]:
                    r += 1
                    j = 0
            if np_ == 0:
                break
            # --- service one batch, VA block by VA block in order of first fault
            faults += np_
            batches += 1
            cyc = fault_lat
            for q in range(nbl):
                b = blist[q]
                S[S_STAMP] += 1  # the block being serviced is never the victim
                prot[b] = S[S_STAMP]
                n_exist = npages - b * VA_PAGES
                if n_exist > VA_PAGES:
                    n_exist = VA_PAGES
                for w in range(W):
                    tmp[R_MARK, w] = BG[b, w]
                    tmp[R_MIG, w] = ZERO
                prefetch_bits(
                    tmp[R_MARK], n_exist, fbits[q], prefetcher, threshold, big, tmp[R_MIG], tmp[R_REM]
                )
                need = 0
                for w in range(W):
                    m = tmp[R_MIG, w] & ~BG[b, w]
                    tmp[R_MIG, w] = m
                    need += popc(m)
                cnt[it, C_DENSITY] += need - fcount[q]
                if tr is not None:  # the faulted pages, by where they are
                    base = b * VA_PAGES
                    for w in range(W):
                        tmp[R_LH, w] = fbits[q, w] & BH[b, w]
                        tmp[R_LS, w] = fbits[q, w] & BS[b, w]
                        tmp[R_X, w] = fbits[q, w] & ~(BH[b, w] | BS[b, w])
                    _emit_runs(ev, S, tmp, R_X, base, clock, EV_FAULT, it, k, LOC_NONE, LOC_GPU, 0)
                    _emit_runs(ev, S, tmp, R_LS, base, clock, EV_FAULT, it, k, LOC_SSD, LOC_GPU, 0)
                    _emit_runs(ev, S, tmp, R_LH, base, clock, EV_FAULT, it, k, LOC_HOST, LOC_GPU, 0)
                if not chunk_mode or (need > 0 and gcount[b] == 0):
                    cyc += _make_room(
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
                        clock + cyc,
                        k,
                    )
                    if S[S_FAIL] != FAIL_NONE:
                        return n_log
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
                if it == log_iter and lastlog[b] != g and n_log < log_cap:
                    lastlog[b] = g
                    log_k[n_log] = k
                    log_b[n_log] = b
                    n_log += 1
            clock += cyc
        # written runs: their pages lose any clean copy (after the faults landed them)
        if skip_clean:
            for rr in range(req_ptr[k], r_end):
                if req_write[rr]:
                    p = req_start[rr]
                    pe = p + req_n[rr]
                    while p < pe:
                        b = p // VA_PAGES
                        lo = p - b * VA_PAGES
                        hi = min(pe - b * VA_PAGES, VA_PAGES)
                        _drop_copies(b, lo, hi, BG, CH, CS, S)
                        p = b * VA_PAGES + hi
        end = clock + exec_cycles[k]
        if arr > end:
            end = arr
        kern[g, K_ITER] = it
        kern[g, K_KERNEL] = k
        kern[g, K_START] = start
        kern[g, K_END] = end
        kern[g, K_FAULTS] = faults
        kern[g, K_BATCHES] = batches
        kern[g, K_STALL] = end - t - exec_cycles[k]
        kern[g, K_IN] = cnt[it, C_IN_CPU] + cnt[it, C_IN_SSD] - in0
        kern[g, K_OUT] = cnt[it, C_OUT_CPU] + cnt[it, C_OUT_SSD] - out0
        kern[g, K_GPU] = S[S_GPU]
        if tr is not None:
            _emit(ev, S, start, EV_KERNEL, it, k, -1, faults, -1, -1, end)
        cnt[it, C_FAULTS] += faults
        cnt[it, C_BATCHES] += batches
        t = end
    return n_log


def unpack_loc(BG, BH, BS, npages):
    """int8[npages]: the tier of every page (LOC_*) from the residency bitmaps."""

    def bits(A):
        return np.unpackbits(np.ascontiguousarray(A).view(np.uint8), bitorder="little")[:npages].astype(
            np.bool_
        )

    loc = np.zeros(npages, np.int8)
    loc[bits(BS)] = LOC_SSD
    loc[bits(BH)] = LOC_HOST
    loc[bits(BG)] = LOC_GPU
    return loc


def unpack_copy(BG, CH, CS, npages):
    """int8[npages]: the tier of a GPU page's clean copy (LOC_NONE: none)."""
    cp = np.zeros(npages, np.int8)
    if CH.shape[0] * VA_PAGES < npages:
        return cp
    for A, v in ((CS, LOC_SSD), (CH, LOC_HOST)):
        cp[
            np.unpackbits(np.ascontiguousarray(A).view(np.uint8), bitorder="little")[:npages].astype(np.bool_)
        ] = v
    return cp


# the module's callers (the wrapper, the fit, the tests) read every name of the engine's kernel
# modules as `dk.<name>`: the two modules' names are this module's too
def _reexport():
    from g10fast.engine.driver import bits, blocks

    for m in (bits, blocks):
        for name, value in vars(m).items():
            if not name.startswith("__") and name != "annotations" and not isinstance(value, type(np)):
                globals().setdefault(name, value)


_reexport()
cache_depends_on(
    simulate,
    [importlib.import_module(m) for m in ("g10fast.engine.driver.bits", "g10fast.engine.driver.blocks")],
)


def simulate_traced(*args):
    """`simulate(*args, True)`: the run with its event trace. Its first call compiles the
    traced engine (object-mode sink and all) with the block operations called, not inlined
    (`blocks._INLINE`): about 16 s with an empty cache, against about 48 s inlined."""
    blocks._INLINE[0] = False
    try:
        return simulate(*args, True)
    finally:
        blocks._INLINE[0] = True


# compiled ahead of time at install (g10fast.aot), untraced (`tr` None): a first run without a
# compile (a traced run compiles on first use)
aot.export(
    simulate,
    "Tuple((i8[:, ::1], i8[:, ::1], u8[:, ::1], u8[:, ::1], u8[:, ::1], u8[:, ::1], u8[:, ::1], i8[::1],"
    " i8[::1], i8[::1], i8[::1], i8))(i8, i8, i8[::1], i8[::1], i8[::1], b1[::1], i8[::1], i8[::1], i8[::1],"
    " i8[::1], i8[::1], i8[::1], i8, i8, i8, i8, i8, i8, i8, i8, i8, i8, b1, i8[::1], i8[::1], i8[::1],"
    " i8[::1], i8, i8, i1[::1], b1, i8, i8[:, ::1])",
    bind=(None,),
)
