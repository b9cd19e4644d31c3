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

import numpy as np
from numba import objmode

from g10fast.jit import jit, kernel, kernel_nonrt_internal

VA_PAGES = 512                     # 2 MiB VA block / 4 KiB
LEVELS = 10                        # tree levels: 1, 2, 4, ..., 512 pages

LOC_NONE, LOC_SSD, LOC_HOST, LOC_GPU = 0, 1, 2, 3

PF_NONE, PF_DENSITY, PF_TBN = 0, 1, 2
EV_ALLOC2M, EV_ACCESS2M, EV_LRU4K, EV_TBN64K = 0, 1, 2, 3
# modes >= EV_LRU4K count capacity in pages and keep the 4 KiB LRU list
BB_PAGES = 16                      # UVMSmart's 64 KiB basic block (MIN_PREFETCH_SIZE)

HINT_PREFETCH, HINT_EVICT, HINT_DISCARD, HINT_PREEVICT = 0, 1, 2, 3

# scalar state
S_BHEAD, S_BTAIL, S_PHEAD, S_PTAIL, S_CHUNKS, S_GPU, S_HOST, S_STAMP, S_FAIL, S_NEV, \
    S_NPAGES = range(11)
S_LEN = 11

# per-iteration counters
C_ALLOC, C_IN_CPU, C_IN_SSD, C_OUT_CPU, C_OUT_SSD, C_CLEAN_DROP, C_DISCARD, C_PREFETCHED, \
    C_FAULTS, C_BATCHES, C_PF_CYCLES, C_DENSITY = range(12)
C_COLS = 12

# kernel table columns (0-3 and 9 as the page engine's)
K_ITER, K_KERNEL, K_START, K_END, K_FAULTS, K_BATCHES, K_STALL, K_IN, K_OUT, K_GPU = range(10)
K_COLS = 10

FAIL_NONE, FAIL_NO_VICTIM = 0, 1

# event trace (docs/trace-format.md; the kinds of g10fast.trace.EventKind, the locations are
# LOC_*): rows go to ev[S[S_NEV]], and a full buffer is handed to the sink in _SINK[0]
EV_KERNEL, EV_FAULT, EV_FETCH, EV_ALLOC, EV_EVICT, EV_HINT, EV_DEALLOC = range(7)
EV_COLS = 10
_SINK = [None]


def _flush_events(ev, n):
    """Called from the kernel (object mode): hand ev[:n] to the trace sink."""
    if _SINK[0] is not None and n > 0:
        _SINK[0].append(ev[:n])


W = VA_PAGES // 64                 # words per block bitmap
ZERO = np.uint64(0)
ONE = np.uint64(1)
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_DB = np.uint64(0x03F79D71B4CB0A89)
_DBTAB = np.zeros(64, np.int64)
for _i in range(64):
    _DBTAB[(((1 << _i) * 0x03F79D71B4CB0A89) & (2**64 - 1)) >> 58] = _i

# The helpers below and the engine's core (`_simulate`) run without Numba's reference counting
# (`kernel_nonrt_internal`: link-only, compiled once into `simulate`, the entry that allocates):
# the atomic increments and decrements around every array view (`tmp[R_MARK]`, `BG[b]`) cost
# a third of a paper-scale run (benchmarks/results/driver-bulk-journal.md, step 1). Called
# from Python (a test), a helper compiles a twin of itself on first use.
_kernel = kernel_nonrt_internal

# scratch rows of `tmp` (uint64[N_TMP, W])
R_E, R_D, R_H, R_S, R_LH, R_LS, R_MIG, R_MISS, R_MARK, R_REM, R_X = range(11)
N_TMP = 11


@_kernel
def popc(x):
    """Set bits of a uint64."""
    x = x - ((x >> ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@_kernel
def ctz(x):
    """Trailing zeros of a uint64 != 0 (de Bruijn)."""
    lsb = x & (~x + ONE)
    return _DBTAB[np.int64((lsb * _DB) >> np.uint64(58))]


@_kernel
def wmask(lo, hi, w):
    """The bits of word w that lie in pages [lo, hi) of a block."""
    a = lo - 64 * w
    e = hi - 64 * w
    if a < 0:
        a = 0
    if e > 64:
        e = 64
    n = e - a
    if n <= 0:
        return ZERO
    if n >= 64:
        return ALL
    return ((ONE << np.uint64(n)) - ONE) << np.uint64(a)


@_kernel
def range_count(m, lo, hi):
    """Set bits of the block bitmap m[W] in pages [lo, hi)."""
    s = 0
    for w in range(lo >> 6, ((hi - 1) >> 6) + 1):
        s += popc(m[w] & wmask(lo, hi, w))
    return s


@_kernel
def _or_range(m, lo, hi):
    for w in range(lo >> 6, ((hi - 1) >> 6) + 1):
        m[w] |= wmask(lo, hi, w)


@_kernel
def _next_bit(m, pos):
    """Offset of the first set bit of the block bitmap m[W] at or after pos; VA_PAGES if none."""
    w = pos >> 6
    if w >= W:
        return VA_PAGES
    x = m[w] & ~wmask(0, pos, w)
    while True:
        if x != ZERO:
            return 64 * w + ctz(x)
        w += 1
        if w >= W:
            return VA_PAGES
        x = m[w]


@_kernel
def _kth(A, i, k):
    """Page offset of the k-th (1-based) set bit of A[i]; -1 if fewer."""
    for w in range(W):
        x = A[i, w]
        c = popc(x)
        if k > c:
            k -= c
            continue
        pos = 0                              # halve the word until the bit is found
        sh = 32
        while sh > 0:
            c = popc(x & ((ONE << np.uint64(sh)) - ONE))
            if k > c:
                k -= c
                x = x >> np.uint64(sh)
                pos += sh
            sh >>= 1
        return 64 * w + pos
    return -1


@_kernel
def run_cost(A, i, table):
    """Sum of table[len] over the maximal runs of set bits of A[i] (one transfer per run)."""
    cyc = 0
    run = 0
    for w in range(W):
        x = A[i, w]
        pos = 0
        while pos < 64:
            if x == ZERO:
                if run > 0:
                    cyc += table[run]
                    run = 0
                break
            tz = ctz(x)
            if tz > 0:
                if run > 0:
                    cyc += table[run]
                    run = 0
                x = x >> np.uint64(tz)
                pos += tz
            inv = ~x
            ones = 64 if inv == ZERO else ctz(inv)
            run += ones
            pos += ones
            if pos >= 64:
                break
            x = x >> np.uint64(ones)
    if run > 0:
        cyc += table[run]
    return cyc


@kernel
def _flush(ev, S):
    n = S[S_NEV]
    with objmode():
        _flush_events(ev, n)
    S[S_NEV] = 0


@_kernel
def _emit(ev, S, tm, kind, it, k, page, count, src, dst, value):
    """One event row (tensor -1: the driver knows addresses, not tensors)."""
    n = S[S_NEV]
    if n >= ev.shape[0]:
        _flush(ev, S)
        n = 0
    ev[n, 0] = tm
    ev[n, 1] = kind
    ev[n, 2] = it
    ev[n, 3] = k
    ev[n, 4] = -1
    ev[n, 5] = page
    ev[n, 6] = count
    ev[n, 7] = src
    ev[n, 8] = dst
    ev[n, 9] = value
    S[S_NEV] = n + 1


@_kernel
def _emit_runs(ev, S, A, i, base, tm, kind, it, k, src, dst, value):
    """One event per maximal run of set bits of A[i] (pages base + offset)."""
    p = _next_bit(A[i], 0)
    while p < VA_PAGES:
        w = p >> 6
        e = VA_PAGES
        x = ~A[i, w] & ~wmask(0, p, w)
        while True:
            if x != ZERO:
                e = 64 * w + ctz(x)
                break
            w += 1
            if w >= W:
                break
            x = ~A[i, w]
        _emit(ev, S, tm, kind, it, k, base + p, e - p, src, dst, value)
        if e >= VA_PAGES:
            break
        p = _next_bit(A[i], e)


@jit(inline="always")
def _l_remove(prev, nxt, S, H, T, x):
    p = prev[x]
    n = nxt[x]
    if p >= 0:
        nxt[p] = n
    else:
        S[H] = n
    if n >= 0:
        prev[n] = p
    else:
        S[T] = p
    prev[x] = -1
    nxt[x] = -1


@jit(inline="always")
def _l_append(prev, nxt, S, H, T, x):
    t = S[T]
    prev[x] = t
    nxt[x] = -1
    if t >= 0:
        nxt[t] = x
    else:
        S[H] = x
    S[T] = x


@_kernel
def _evict_range(b, lo, hi, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S,
                 evict_mode, skip_clean, host_pages, d2h, ssd_w, cnt, it, tmp, ev, tr, tm, k,
                 cause):
    """Evict (write back or drop) the GPU pages of block b at offsets [lo, hi); returns the
    cycles of the write-back transfers (one per contiguous run to one tier). tr: EVICT
    events at time tm (value = cause: 1 victim, 0 planned)."""
    ne = 0
    nd = 0
    nclean = 0
    for w in range(W):
        e = BG[b, w] & wmask(lo, hi, w)
        tmp[R_E, w] = e
        d = e
        if skip_clean and e != ZERO:      # clean, a valid copy remains: dropped
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
    if tr:
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
def _tree_preevict(b, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S, evict_mode,
                   skip_clean, host_pages, d2h, ssd_w, cnt, it, tmp, ev, tr, tm, k):
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
                cycles += _evict_range(b, lo, lo + size, BG, BH, BS, CH, CS, gcount, bprev,
                                       bnext, pprev, pnext, S, evict_mode, skip_clean,
                                       host_pages, d2h, ssd_w, cnt, it, tmp, ev, tr,
                                       tm + cycles, k, 1)
        size *= 2
    return cycles


@_kernel
def _make_room(b, need, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, prot, S,
               evict_mode, skip_clean, gpu_pages, gpu_chunks, host_pages, d2h, ssd_w, cnt, it,
               tmp, ev, tr, tm, k):
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
            if evict_mode == EV_TBN64K:        # the LRU page's whole 64 KiB basic block
                lo = (o // BB_PAGES) * BB_PAGES
                hi = lo + BB_PAGES
            cycles += _evict_range(vb, lo, hi, BG, BH, BS, CH, CS, gcount, bprev, bnext,
                                   pprev, pnext, S, evict_mode, skip_clean, host_pages, d2h,
                                   ssd_w, cnt, it, tmp, ev, tr, tm + cycles, k, 1)
            if evict_mode == EV_TBN64K:
                cycles += _tree_preevict(vb, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev,
                                         pnext, S, evict_mode, skip_clean, host_pages, d2h,
                                         ssd_w, cnt, it, tmp, ev, tr, tm + cycles, k)
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
        cycles += _evict_range(v, 0, VA_PAGES, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev,
                               pnext, S, evict_mode, skip_clean, host_pages, d2h, ssd_w, cnt,
                               it, tmp, ev, tr, tm + cycles, k, 1)
    return cycles


@_kernel
def _land(b, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S, evict_mode,
          skip_clean, h2d, ssd_r, cnt, it, tmp, ev, tr, tm, k, cause):
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
    if tr:
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
        r1 = ALL // gm                         # the lowest bit of every group
        hb = r1 << np.uint64(big - 1)          # the highest bit of every group
        lb = hb - r1                           # the other bits of every group
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
def _discard_range(s0, s1, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S,
                   evict_mode, skip_clean, cnt, it, tmp, ev, tr, tm, k):
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
        if tr:
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
        prefetch_bits(tmp[R_MARK], VA_PAGES, tmp[R_D], prefetcher, threshold, big, tmp[R_MIG],
                      tmp[R_REM])
        for w in range(W):
            if tmp[R_MIG, w] & ~tmp[R_E, w] != tmp[R_D, w]:
                ok = False
            tmp[R_E, w] |= tmp[R_D, w]
    for w in range(N_TMP):
        for v in range(W):
            tmp[w, v] = ZERO
    return ok


@_kernel
def _empty_block(b, clock, fault_batch, fault_lat, BG, BH, BS, CH, CS, gcount, bprev, bnext,
                 pprev, pnext, prot, S, evict_mode, skip_clean, gpu_pages, gpu_chunks,
                 host_pages, h2d, d2h, ssd_r, ssd_w, cnt, it, tmp, ev, tr, k):
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
    if x == ZERO and not tr:
        # no page populated: the batches zero-fill (no transfer), so the block lands at once;
        # the chunk is found at the first batch, after one fault latency
        S[S_STAMP] += n
        prot[b] = S[S_STAMP]
        cyc = _make_room(b, fault_batch, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev,
                         pnext, prot, S, evict_mode, skip_clean, gpu_pages, gpu_chunks,
                         host_pages, d2h, ssd_w, cnt, it, tmp, ev, tr, clock + fault_lat, k)
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
        if tr:
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
            cyc += _make_room(b, fault_batch, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev,
                              pnext, prot, S, evict_mode, skip_clean, gpu_pages, gpu_chunks,
                              host_pages, d2h, ssd_w, cnt, it, tmp, ev, tr, clock + cyc, k)
            if S[S_FAIL] != FAIL_NONE:
                return clock
        cyc += _land(b, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S, evict_mode,
                     skip_clean, h2d, ssd_r, cnt, it, tmp, ev, tr, clock + cyc, k, 1)
        clock += cyc
    return clock


@kernel
def simulate(K, n_iter, req_ptr, req_start, req_n, req_write, exec_cycles,
             hint_ptr, hint_start, hint_n, hint_kind, wait_hint,
             npages, gpu_pages, gpu_chunks, host_pages, fault_batch, fault_lat, big,
             prefetcher, threshold, evict_mode, skip_clean, h2d, d2h, ssd_r, ssd_w,
             log_iter, log_cap, init_loc, inflight_overlap, preevict_pages, ev, tr):
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
    tr: write the event trace (docs/trace-format.md) through ev int64[cap, EV_COLS]: full
    buffers go to _SINK[0] (object mode), the last rows stay in ev[:S[S_NEV]]."""
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
    n_log = _simulate(K, n_iter, req_ptr, req_start, req_n, req_write, exec_cycles,
                      hint_ptr, hint_start, hint_n, hint_kind, wait_hint,
                      npages, gpu_pages, gpu_chunks, host_pages, fault_batch, fault_lat, big,
                      prefetcher, threshold, evict_mode, skip_clean, h2d, d2h, ssd_r, ssd_w,
                      log_iter, log_cap, init_loc, inflight_overlap, preevict_pages, ev, tr,
                      BG, BH, BS, CH, CS, gcount, barr, prot, lastlog, bprev, bnext, pprev,
                      pnext, S, hint_done, row_t, kern, cnt, log_k, log_b, blist, fcount,
                      fbits, tmp)
    return kern, cnt, BG, BH, BS, CH, CS, hint_done, S, log_k, log_b, n_log


@_kernel
def _simulate(K, n_iter, req_ptr, req_start, req_n, req_write, exec_cycles,
              hint_ptr, hint_start, hint_n, hint_kind, wait_hint,
              npages, gpu_pages, gpu_chunks, host_pages, fault_batch, fault_lat, big,
              prefetcher, threshold, evict_mode, skip_clean, h2d, d2h, ssd_r, ssd_w,
              log_iter, log_cap, init_loc, inflight_overlap, preevict_pages, ev, tr,
              BG, BH, BS, CH, CS, gcount, barr, prot, lastlog, bprev, bnext, pprev, pnext, S,
              hint_done, row_t, kern, cnt, log_k, log_b, blist, fcount, fbits, tmp):
    """The engine of `simulate` on its state, allocated there (no reference counting here).
    Returns n_log."""
    hq = 0                          # next queued hint row
    n_log = 0
    chunk_mode = evict_mode < EV_LRU4K
    # whole empty VA blocks touched from an empty batch are settled a block at a time
    aligned = chunk_mode and _aligned_template(fault_batch, prefetcher, threshold, big, tmp)
    if init_loc.shape[0] == npages:            # a given start state (per-kernel checks)
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
    t = 0                          # end of the previous kernel
    pf_free = 0                    # the prefetch stream is busy until
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
            if tr:
                hk = hint_kind[h]
                _emit(ev, S, cur, EV_HINT, it, k, s0, s1 - s0, -1,
                      LOC_GPU if hk == HINT_PREFETCH else (LOC_NONE if hk == HINT_DISCARD
                                                           else LOC_HOST), hk)
            p = s0
            if hint_kind[h] == HINT_DISCARD:     # freed memory: the range in one call
                _discard_range(s0, s1, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext,
                               S, evict_mode, skip_clean, cnt, it, tmp, ev, tr, cur, k)
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
                        if not chunk_mode or gcount[b] == 0:   # else it holds its chunk
                            cur += _make_room(b, need, BG, BH, BS, CH, CS, gcount, bprev,
                                              bnext, pprev, pnext, prot, S, evict_mode,
                                              skip_clean, gpu_pages, gpu_chunks, host_pages,
                                              d2h, ssd_w, cnt, it, tmp, ev, tr, cur, k)
                            if S[S_FAIL] != FAIL_NONE:
                                return n_log
                        x = _land(b, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S,
                                  evict_mode, skip_clean, h2d, ssd_r, cnt, it, tmp, ev, tr, cur,
                                  k, 0)
                        cur += x
                        cnt[it, C_PREFETCHED] += need
                        cnt[it, C_PF_CYCLES] += x
                        if cur > barr[b]:
                            barr[b] = cur
                elif kind == HINT_EVICT or (kind == HINT_PREEVICT
                                            and S[S_GPU] > preevict_pages):
                    cur += _evict_range(b, lo, hi, BG, BH, BS, CH, CS, gcount, bprev, bnext,
                                        pprev, pnext, S, evict_mode, skip_clean, host_pages,
                                        d2h, ssd_w, cnt, it, tmp, ev, tr, cur, k, 0)
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
        j = 0                          # page within run r
        last_b = -1
        while True:
            np_ = 0
            nbl = 0
            # the batch is empty: whole VA blocks with no page on the GPU, a block at a time
            while aligned and r < r_end:
                p = req_start[r] + j
                b = p // VA_PAGES
                if p != b * VA_PAGES or req_n[r] - j < VA_PAGES \
                        or (b + 1) * VA_PAGES > npages:
                    break
                x = ZERO
                for w in range(W):
                    x |= BG[b, w]
                if x != ZERO:
                    break
                clock = _empty_block(b, clock, fault_batch, fault_lat, BG, BH, BS, CH, CS,
                                     gcount, bprev, bnext, pprev, pnext, prot, S, evict_mode,
                                     skip_clean, gpu_pages, gpu_chunks, host_pages, h2d, d2h,
                                     ssd_r, ssd_w, cnt, it, tmp, ev, tr, k)
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
                if nm >= room:                 # the batch fills at the room-th missing page
                    take = room
                    stop = _kth(tmp, R_MISS, room) + 1
                    for w in range(W):
                        tmp[R_MISS, w] &= wmask(lo, stop, w)
                if stop - lo > take:           # resident pages touched
                    if inflight_overlap:
                        if barr[b] > arr:
                            arr = barr[b]
                    elif barr[b] > clock:
                        clock = barr[b]        # wait for an in-flight prefetch
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
                S[S_STAMP] += 1            # the block being serviced is never the victim
                prot[b] = S[S_STAMP]
                n_exist = npages - b * VA_PAGES
                if n_exist > VA_PAGES:
                    n_exist = VA_PAGES
                for w in range(W):
                    tmp[R_MARK, w] = BG[b, w]
                    tmp[R_MIG, w] = ZERO
                prefetch_bits(tmp[R_MARK], n_exist, fbits[q], prefetcher, threshold, big,
                              tmp[R_MIG], tmp[R_REM])
                need = 0
                for w in range(W):
                    m = tmp[R_MIG, w] & ~BG[b, w]
                    tmp[R_MIG, w] = m
                    need += popc(m)
                cnt[it, C_DENSITY] += need - fcount[q]
                if tr:                     # the faulted pages, by where they are
                    base = b * VA_PAGES
                    for w in range(W):
                        tmp[R_LH, w] = fbits[q, w] & BH[b, w]
                        tmp[R_LS, w] = fbits[q, w] & BS[b, w]
                        tmp[R_X, w] = fbits[q, w] & ~(BH[b, w] | BS[b, w])
                    _emit_runs(ev, S, tmp, R_X, base, clock, EV_FAULT, it, k, LOC_NONE,
                               LOC_GPU, 0)
                    _emit_runs(ev, S, tmp, R_LS, base, clock, EV_FAULT, it, k, LOC_SSD,
                               LOC_GPU, 0)
                    _emit_runs(ev, S, tmp, R_LH, base, clock, EV_FAULT, it, k, LOC_HOST,
                               LOC_GPU, 0)
                if not chunk_mode or (need > 0 and gcount[b] == 0):
                    cyc += _make_room(b, need, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev,
                                      pnext, prot, S, evict_mode, skip_clean, gpu_pages,
                                      gpu_chunks, host_pages, d2h, ssd_w, cnt, it, tmp, ev, tr,
                                      clock + cyc, k)
                    if S[S_FAIL] != FAIL_NONE:
                        return n_log
                cyc += _land(b, BG, BH, BS, CH, CS, gcount, bprev, bnext, pprev, pnext, S,
                             evict_mode, skip_clean, h2d, ssd_r, cnt, it, tmp, ev, tr,
                             clock + cyc, k, 1)
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
        if tr:
            _emit(ev, S, start, EV_KERNEL, it, k, -1, faults, -1, -1, end)
        cnt[it, C_FAULTS] += faults
        cnt[it, C_BATCHES] += batches
        t = end
    return n_log


def unpack_loc(BG, BH, BS, npages):
    """int8[npages]: the tier of every page (LOC_*) from the residency bitmaps."""
    def bits(A):
        return np.unpackbits(np.ascontiguousarray(A).view(np.uint8),
                             bitorder="little")[:npages].astype(np.bool_)
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
        cp[np.unpackbits(np.ascontiguousarray(A).view(np.uint8),
                         bitorder="little")[:npages].astype(np.bool_)] = v
    return cp
