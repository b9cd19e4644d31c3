"""Numba kernels of the event-trace writer and reader (g10fast/trace.py): the split of a batch
into its columns with its range check (and the range-row rules of schema version 2), and
HDF5's byte shuffle.

``split_checked`` is wrapped by ``EventTraceWriter.append``, which calls it only on
C-contiguous int64 batches (the engines' event buffers) and, when it reports a value outside
its column's range, drops the batch and names the first bad value with numpy (the error path
is rare).
``shuffle`` runs in the writer's worker threads (``nogil``) on whole chunks, wrapped by
``_encode`` in trace.py (readers unshuffle with numpy: they need not import Numba).
"""

from __future__ import annotations

from g10fast.jit import jit, kernel_nonrt
from g10fast.locations import EV_ALLOC, EV_DEALLOC, EV_EVICT, EV_FETCH

kernel_nogil = jit(_nrt=False, nogil=True)


@kernel_nonrt
def split_checked(piece, at, lo, hi, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11):
    """``cK[at:at + n] = piece[:, K]`` for the twelve columns of an int64 batch of ``n`` rows
    (a batch of ten columns: ``c10`` = ticks 1, ``c11`` = period 0), in one pass over its rows;
    -> True when some ``piece[i, K]`` is outside ``[lo[K], hi[K]]`` (unchecked columns carry
    the int64 range) or a row breaks the range-row rules (ticks > 1 only on FETCH, ALLOC,
    EVICT, DEALLOC rows with count a positive multiple of ticks and period > 0; period 0 when
    ticks is 1), in which case the caller drops what was written (the columns then hold
    truncated values)."""
    lo0, lo1, lo2, lo3, lo4 = lo[0], lo[1], lo[2], lo[3], lo[4]
    lo5, lo6, lo7, lo8, lo9 = lo[5], lo[6], lo[7], lo[8], lo[9]
    hi0, hi1, hi2, hi3, hi4 = hi[0], hi[1], hi[2], hi[3], hi[4]
    hi5, hi6, hi7, hi8, hi9 = hi[5], hi[6], hi[7], hi[8], hi[9]
    lo10, lo11, hi10, hi11 = lo[10], lo[11], hi[10], hi[11]
    wide = piece.shape[1] >= 12
    bad = False
    for i in range(piece.shape[0]):
        j = at + i
        v0, v1, v2, v3, v4 = piece[i, 0], piece[i, 1], piece[i, 2], piece[i, 3], piece[i, 4]
        v5, v6, v7, v8, v9 = piece[i, 5], piece[i, 6], piece[i, 7], piece[i, 8], piece[i, 9]
        v10, v11 = 1, 0
        if wide:
            v10, v11 = piece[i, 10], piece[i, 11]
            bad |= (v10 < lo10) | (v10 > hi10) | (v11 < lo11) | (v11 > hi11)
            if v10 > 1:
                bad |= (
                    ((v1 != EV_FETCH) & (v1 != EV_ALLOC) & (v1 != EV_EVICT) & (v1 != EV_DEALLOC))
                    | (v6 <= 0)
                    | (v11 <= 0)
                    | (v6 % v10 != 0)
                )
            else:
                bad |= v11 != 0
        bad |= (
            (v0 < lo0)
            | (v0 > hi0)
            | (v1 < lo1)
            | (v1 > hi1)
            | (v2 < lo2)
            | (v2 > hi2)
            | (v3 < lo3)
            | (v3 > hi3)
            | (v4 < lo4)
            | (v4 > hi4)
            | (v5 < lo5)
            | (v5 > hi5)
            | (v6 < lo6)
            | (v6 > hi6)
            | (v7 < lo7)
            | (v7 > hi7)
            | (v8 < lo8)
            | (v8 > hi8)
            | (v9 < lo9)
            | (v9 > hi9)
        )
        c0[j] = v0
        c1[j] = v1
        c2[j] = v2
        c3[j] = v3
        c4[j] = v4
        c5[j] = v5
        c6[j] = v6
        c7[j] = v7
        c8[j] = v8
        c9[j] = v9
        c10[j] = v10
        c11[j] = v11
    return bad


@kernel_nogil
def shuffle(src, out):
    """HDF5's shuffle filter: ``out[j, i] = src[i, j]`` for ``src`` the ``n`` values of a chunk
    seen as ``uint8[n, size]`` and ``out`` its ``uint8[size, n]`` byte planes."""
    n, size = src.shape
    for j in range(size):
        for i in range(n):
            out[j, i] = src[i, j]
