"""Numba kernels of the event-trace writer and reader (g10fast/trace.py): the split of a batch
into its columns with its range check (and the range-row rules of schema versions 2 to 4),
and the join of rows of consecutive ticks into range rows.

``split_checked`` is wrapped by ``EventTraceWriter.append``, which calls it only on
C-contiguous int64 batches (the engines' event buffers) and, when it reports a value outside
its column's range, drops the batch and names the first bad value with numpy (the error path
is rare).
``merge_ticks`` is wrapped by ``trace_ranges.merge_ticks`` and called by the page engine (the
bulk paths' rows, before they are appended).
Both are compiled ahead of time at install (g10fast.aot), with the traced page engine, so that
a traced run needs no compile.
"""

from __future__ import annotations

import numpy as np

from g10fast import aot
from g10fast.jit import kernel_nonrt
from g10fast.locations import EV_ALLOC, EV_DEALLOC, EV_EVICT, EV_FAULT, EV_FETCH


@kernel_nonrt
def split_checked(piece, at, lo, hi, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12):
    """``cK[at:at + n] = piece[:, K]`` for the thirteen columns of an int64 batch of ``n`` rows
    (a batch of twelve columns: ``c12`` = stride 0; of ten: also ``c10`` = ticks 1, ``c11`` =
    period 0), in one pass over its rows; -> True when some ``piece[i, K]`` is outside
    ``[lo[K], hi[K]]`` (unchecked columns carry the int64 range) or a row breaks the range-row
    rules (ticks > 1 only on FETCH, ALLOC, EVICT, DEALLOC rows with count a positive multiple
    of ticks and period > 0, and on FAULT rows of several runs: period 0, a stride above
    count // ticks; period 0 when ticks is 1; a stride above 0 only with ticks > 1 and above
    count // ticks), in which case the caller drops what was written (the columns then hold
    truncated values)."""
    lo0, lo1, lo2, lo3, lo4 = lo[0], lo[1], lo[2], lo[3], lo[4]
    lo5, lo6, lo7, lo8, lo9 = lo[5], lo[6], lo[7], lo[8], lo[9]
    hi0, hi1, hi2, hi3, hi4 = hi[0], hi[1], hi[2], hi[3], hi[4]
    hi5, hi6, hi7, hi8, hi9 = hi[5], hi[6], hi[7], hi[8], hi[9]
    lo10, lo11, hi10, hi11 = lo[10], lo[11], hi[10], hi[11]
    lo12, hi12 = lo[12], hi[12]
    wide = piece.shape[1] >= 12
    strided = piece.shape[1] >= 13
    bad = False
    for i in range(piece.shape[0]):
        j = at + i
        v0, v1, v2, v3, v4 = piece[i, 0], piece[i, 1], piece[i, 2], piece[i, 3], piece[i, 4]
        v5, v6, v7, v8, v9 = piece[i, 5], piece[i, 6], piece[i, 7], piece[i, 8], piece[i, 9]
        v10, v11, v12 = 1, 0, 0
        if wide:
            v10, v11 = piece[i, 10], piece[i, 11]
            if strided:
                v12 = piece[i, 12]
            bad |= (v10 < lo10) | (v10 > hi10) | (v11 < lo11) | (v11 > hi11) | (v12 < lo12) | (v12 > hi12)
            if v10 > 1:
                per = v6 // v10  # (one division: the range rows are most rows of a merged trace)
                if v1 == EV_FAULT:  # a fault scan's runs: one time, strided
                    bad |= (v6 <= 0) | (v6 != per * v10) | (v11 != 0) | (v12 <= per)
                else:
                    bad |= (
                        ((v1 != EV_FETCH) & (v1 != EV_ALLOC) & (v1 != EV_EVICT) & (v1 != EV_DEALLOC))
                        | (v6 <= 0)
                        | (v11 <= 0)
                        | (v6 != per * v10)
                        | ((v12 != 0) & (v12 <= per))
                    )
            else:
                bad |= (v11 != 0) | (v12 != 0)
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
        c12[j] = v12
    return bad


#: open rows ``merge_ticks`` keeps a kind (the rows a new row may join), most recent first
MERGE_OPEN = 8


@kernel_nonrt
def merge_ticks(b, out, opens):
    """Rows of ``b`` (int64 ``[n, 12]`` or ``[n, 13]``, the engine's order) written to ``out``
    (int64 ``[n, 13]``; ``opens``: int64 ``[4, MERGE_OPEN]`` of -1, the open rows), each row
    of a page-moving kind (FETCH, ALLOC, EVICT, DEALLOC) with pages joining, where it can,
    one of the last ``MERGE_OPEN`` rows kept of its kind: -> the rows written. A row r joins
    an open row o equal in kind, iteration, kernel, tensor, src, dst and value when
    * both are ordinary rows of one time and r's pages follow o's (o's count grows), or
    * r's ticks are o's next ones: the same pages a tick c, o's period (o of one tick: r's
      time less o's, > 0), r's first tick at o's time + o's ticks x that period, its first
      page at o's page + o's ticks x the stride s (o of one tick: r's page less o's, at least
      c), r (a range row) of that period and stride. o then stands for its ticks and r's, of
      period and stride s (stride written 0 when s = c: runs that follow one another).
    A tick that comes in pieces joins in its tick (an ordinary row), not then to earlier ticks
    (the bulk engine writes a tick's run as one row where it can). Every other row is written
    as it is (a twelve-column row with stride 0). The rows written
    stand for exactly the ordinary rows of ``b`` (``trace_ranges.expand_ticks``), in another
    grouping; an open row's place is where it was first written."""
    n = b.shape[0]
    strided = b.shape[1] >= 13
    m = 0
    for i in range(n):
        kind = b[i, 1]
        d = -1
        if kind == EV_FETCH:
            d = 0
        elif kind == EV_ALLOC:
            d = 1
        elif kind == EV_EVICT:
            d = 2
        elif kind == EV_DEALLOC:
            d = 3
        t = b[i, 0]
        p = b[i, 5]
        nr = b[i, 6]
        mr = b[i, 10]
        sr = b[i, 12] if strided else 0
        if d >= 0 and nr > 0 and p >= 0 and mr >= 1:
            T = b[i, 4]
            src = b[i, 7]
            dst = b[i, 8]
            val = b[i, 9]
            kk = b[i, 3]
            it = b[i, 2]
            cr = nr if mr == 1 else nr // mr
            du = np.uint64(d)
            for j in range(MERGE_OPEN):
                o = opens[du, j]
                if o < 0:
                    break
                ou = np.uint64(o)
                if not (
                    out[ou, 4] == T
                    and out[ou, 7] == src
                    and out[ou, 8] == dst
                    and out[ou, 9] == val
                    and out[ou, 3] == kk
                    and out[ou, 2] == it
                ):
                    continue
                mo = out[ou, 10]
                no = out[ou, 6]
                if no + nr > 2147483647 or mo + mr > 2147483647:
                    continue
                to = out[ou, 0]
                po = out[ou, 5]
                if mo == 1 and mr == 1 and to == t and po + no == p:
                    out[ou, 6] = no + nr
                else:
                    c = no // mo if mo > 1 else no
                    if cr != c:
                        continue
                    per = out[ou, 11] if mo > 1 else t - to
                    if per <= 0 or t != to + mo * per or (mr > 1 and b[i, 11] != per):
                        continue
                    so = out[ou, 12]
                    s = (so if so > 0 else c) if mo > 1 else p - po
                    if s < c or p != po + mo * s or (mr > 1 and (sr if sr > 0 else c) != s):
                        continue
                    out[ou, 6] = no + nr
                    out[ou, 10] = mo + mr
                    out[ou, 11] = per
                    out[ou, 12] = 0 if s == c else s
                for q in range(j, 0, -1):
                    opens[du, q] = opens[du, q - 1]
                opens[du, 0] = o
                d = -2
                break
            if d == -2:
                continue
        mu = np.uint64(m)
        for c in range(12):
            out[mu, c] = b[i, c]
        out[mu, 12] = sr
        if d >= 0:
            du = np.uint64(d)
            for q in range(MERGE_OPEN - 1, 0, -1):
                opens[du, q] = opens[du, q - 1]
            opens[du, 0] = m
        m += 1
    return m


# compiled ahead of time at install (g10fast.aot): the writer's split of the engines' int64
# batches into its column buffers (their dtypes: trace.COLUMN_DTYPES) and the page engine's
# join of its rows
aot.export(
    split_checked,
    "b1(i8[:, ::1], i8, i8[::1], i8[::1], i8[::1], i1[::1], i2[::1], i4[::1], i4[::1], i8[::1],"
    " i4[::1], i1[::1], i1[::1], i8[::1], i4[::1], i8[::1], i8[::1])",
)
aot.export(merge_ticks, "i8(i8[:, ::1], i8[:, ::1], i8[:, ::1])")
