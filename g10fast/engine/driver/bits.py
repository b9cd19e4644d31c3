"""The driver engine's state layout, its bit helpers and its event rows (Numba kernels; the
engine and its state are described in `g10fast.engine.driver.kernels`)."""

from __future__ import annotations

import numpy as np

from g10fast.jit import jit, kernel, kernel_nonrt_internal, on_first_kernel

objmode = None  # numba.objmode, set before the first kernel is made (g10fast.jit)


def _numba_objmode(numba):
    global objmode
    objmode = numba.objmode


on_first_kernel(_numba_objmode)

VA_PAGES = 512  # 2 MiB VA block / 4 KiB
LEVELS = 10  # tree levels: 1, 2, 4, ..., 512 pages

LOC_NONE, LOC_SSD, LOC_HOST, LOC_GPU = 0, 1, 2, 3

PF_NONE, PF_DENSITY, PF_TBN = 0, 1, 2
EV_ALLOC2M, EV_ACCESS2M, EV_LRU4K, EV_TBN64K = 0, 1, 2, 3
# modes >= EV_LRU4K count capacity in pages and keep the 4 KiB LRU list
BB_PAGES = 16  # UVMSmart's 64 KiB basic block (MIN_PREFETCH_SIZE)

HINT_PREFETCH, HINT_EVICT, HINT_DISCARD, HINT_PREEVICT = 0, 1, 2, 3

# scalar state
S_BHEAD, S_BTAIL, S_PHEAD, S_PTAIL, S_CHUNKS, S_GPU, S_HOST, S_STAMP, S_FAIL, S_NEV, S_NPAGES = range(11)
S_LEN = 11

# per-iteration counters
(
    C_ALLOC,
    C_IN_CPU,
    C_IN_SSD,
    C_OUT_CPU,
    C_OUT_SSD,
    C_CLEAN_DROP,
    C_DISCARD,
    C_PREFETCHED,
    C_FAULTS,
    C_BATCHES,
    C_PF_CYCLES,
    C_DENSITY,
) = range(12)
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


W = VA_PAGES // 64  # words per block bitmap
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
        pos = 0  # halve the word until the bit is found
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
