"""Engine-like synthetic event streams for the trace export tests and benchmarks/trace_bench.py:
kernels one after another, each with its hints, faults, page moves on every link, allocations,
evictions, de-allocations and transfer marks (values in the ranges the engines produce)."""

from __future__ import annotations

import numpy as np

from g10fast.trace import COL_PERIOD, COL_STRIDE, COL_TICKS, N_COLS, EventKind

ROWS_PER_KERNEL = 1000
KERNEL_CYCLES = 1_000_000
KERNELS_PER_ITERATION = 1000


def engine_like_batch(n: int, seed: int = 0, first: int = 0) -> np.ndarray:
    """Rows ``first .. first + n - 1`` of the stream (int64 [n, N_COLS]); the stream is the
    same whatever the batch boundaries, except for the random kinds (seeded per batch)."""
    r = np.random.default_rng([seed, first])
    row = first + np.arange(n, dtype=np.int64)
    ex = row // ROWS_PER_KERNEL  # kernel execution
    j = row % ROWS_PER_KERNEL
    buf = np.full((n, N_COLS), -1, dtype=np.int64)
    start = ex * KERNEL_CYCLES
    buf[:, 0] = start + j * (KERNEL_CYCLES // ROWS_PER_KERNEL)
    kinds = np.array(
        [
            EventKind.FAULT,
            EventKind.FETCH,
            EventKind.FETCH,
            EventKind.FETCH,
            EventKind.ALLOC,
            EventKind.EVICT,
            EventKind.EVICT,
            EventKind.HINT,
            EventKind.DEALLOC,
            EventKind.TRANSFER,
        ],
        np.int64,
    )
    kind = kinds[r.integers(0, kinds.size, n)]
    kind[j == 0] = EventKind.KERNEL
    buf[:, 1] = kind
    buf[:, 2] = ex // KERNELS_PER_ITERATION
    buf[:, 3] = ex % KERNELS_PER_ITERATION
    tensor = r.integers(0, 5000, n)
    page = tensor * 1000 + r.integers(0, 900, n)
    count = r.integers(1, 51, n)
    src = r.integers(1, 3, n)  # SSD or host
    isk = kind == EventKind.KERNEL
    buf[isk, 0] = start[isk]
    buf[isk, 6] = r.integers(0, 2, int(isk.sum())) * r.integers(1, 5000, int(isk.sum()))
    buf[isk, 9] = start[isk] + KERNEL_CYCLES - 10_000  # end
    m = kind == EventKind.FAULT
    buf[m, 4], buf[m, 5], buf[m, 6], buf[m, 7], buf[m, 8], buf[m, 9] = (
        tensor[m],
        page[m],
        count[m],
        r.integers(0, 3, int(m.sum())),
        3,
        0,
    )
    m = kind == EventKind.FETCH
    buf[m, 4], buf[m, 5], buf[m, 6], buf[m, 7], buf[m, 8], buf[m, 9] = (
        tensor[m],
        page[m],
        count[m],
        src[m],
        3,
        r.integers(0, 2, int(m.sum())),
    )
    m = kind == EventKind.ALLOC
    buf[m, 4], buf[m, 5], buf[m, 6], buf[m, 7], buf[m, 8], buf[m, 9] = tensor[m], page[m], count[m], 0, 3, 1
    m = kind == EventKind.EVICT
    buf[m, 4], buf[m, 5], buf[m, 6], buf[m, 7], buf[m, 8], buf[m, 9] = (
        tensor[m],
        page[m],
        count[m],
        3,
        r.integers(0, 3, int(m.sum())),
        1,
    )
    m = kind == EventKind.HINT
    buf[m, 4], buf[m, 5], buf[m, 6], buf[m, 7], buf[m, 8] = (
        tensor[m],
        page[m],
        count[m],
        4,
        np.array([0, 1, 2, 3])[r.integers(0, 4, int(m.sum()))],
    )
    buf[m, 0] = start[m]  # hints at the kernel's start
    m = kind == EventKind.DEALLOC
    buf[m, 4], buf[m, 5], buf[m, 6], buf[m, 7], buf[m, 8], buf[m, 9] = tensor[m], page[m], count[m], 3, 0, 0
    m = kind == EventKind.TRANSFER  # a tensor's transfer on a link (tensor engine)
    buf[m, 4], buf[m, 7], buf[m, 8], buf[m, 9] = tensor[m], src[m], 3, r.integers(0, 2, int(m.sum()))
    buf[:, COL_TICKS], buf[:, COL_PERIOD], buf[:, COL_STRIDE] = (
        1,
        0,
        0,
    )  # ordinary rows (range rows: with_ranges)
    return buf


def with_ranges(
    buf: np.ndarray, seed: int = 0, share: float = 0.5, strided: float = 0.3, faults: float = 0.3
) -> np.ndarray:
    """``buf`` with about ``share`` of its FETCH, ALLOC, EVICT and DEALLOC rows made range rows
    (schema version 2): ticks 2-8, count multiplied by the ticks, period 1-19,999 cycles; about
    ``strided`` of those with a stride (version 3) of 1-4 pages above the pages of a tick; and
    about ``faults`` of its FAULT rows made rows of several runs (version 4): 2-8 runs at the
    row's time (period 0), 1-4 pages apart beyond each run."""
    out = buf.copy()
    r = np.random.default_rng(seed)
    n = len(out)
    kinds = [EventKind.FETCH, EventKind.ALLOC, EventKind.EVICT, EventKind.DEALLOC]
    m = np.isin(out[:, 1], kinds) & (r.random(n) < share)
    t = r.integers(2, 9, n)
    c = out[:, 6].copy()
    out[m, COL_TICKS] = t[m]
    out[m, 6] *= t[m]
    out[m, COL_PERIOD] = r.integers(1, 20_000, n)[m]
    s = m & (c > 0) & (r.random(n) < strided)
    out[s, COL_STRIDE] = c[s] + r.integers(1, 5, n)[s]
    f = (out[:, 1] == EventKind.FAULT) & (c > 0) & (out[:, 5] >= 0) & (r.random(n) < faults)
    if f.any():
        t = r.integers(2, 9, n)
        out[f, COL_TICKS] = t[f]
        out[f, 6] *= t[f]
        out[f, COL_STRIDE] = c[f] + r.integers(1, 5, n)[f]
    return out
