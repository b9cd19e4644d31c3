"""Numba kernel of the event-trace writer (g10fast/trace.py): the range check of a batch.

``out_of_range`` is wrapped by ``EventTraceWriter._check_ranges``, which calls it only on
C-contiguous int64 batches (the engines' event buffers) and, when it finds a value outside its
column's range, finds and names the first one with numpy (the error path is rare).
"""

from __future__ import annotations

from g10fast.jit import kernel_nonrt


@kernel_nonrt
def out_of_range(buf, cols, lo, hi):
    """True when some ``buf[i, cols[j]]`` is outside ``[lo[j], hi[j]]`` (one pass over the rows:
    faster than a min and a max per column on the strided columns)."""
    bad = False
    for i in range(buf.shape[0]):
        for j in range(cols.shape[0]):
            v = buf[i, cols[j]]
            bad |= (v < lo[j]) | (v > hi[j])
    return bad


@kernel_nonrt
def split_columns(piece, at, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9):
    """``cK[at:at + n] = piece[:, K]`` for the ten columns of a range-checked int64 batch of
    ``n`` rows, in one pass over its rows (the values fit their column's dtype)."""
    for i in range(piece.shape[0]):
        j = at + i
        c0[j] = piece[i, 0]
        c1[j] = piece[i, 1]
        c2[j] = piece[i, 2]
        c3[j] = piece[i, 3]
        c4[j] = piece[i, 4]
        c5[j] = piece[i, 5]
        c6[j] = piece[i, 6]
        c7[j] = piece[i, 7]
        c8[j] = piece[i, 8]
        c9[j] = piece[i, 9]
