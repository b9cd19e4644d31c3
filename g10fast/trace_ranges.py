"""Range rows of the event trace (schema versions 2 to 4, docs/trace-format.md "Range rows").

A row whose ``ticks`` is m > 1 stands for m ordinary rows: for i = 0 .. m-1 the row at
``time + i*period`` moving ``count // m`` pages from ``page + i*s``, every other column equal,
where s is the row's ``stride`` (version 3), or ``count // m`` when the stride is 0 (the ticks'
runs follow one another; every range row of a version 2 file). A FAULT row of several runs
(version 4) is the same with period 0: its runs all at its time. The bulk page engine writes
them (``merge_ticks`` joins the rows of its ticks); everything else writes ordinary rows.

* ``expand_ticks(buf)``: every range row replaced by its ordinary rows, in its place.
* ``per_page(buf)``: then every row of a page kind split into one row per page.
* ``normal_form(buf)``: the canonical rows two traces of the same run share however their
  engines grouped pages into rows (per page, per run of pages, per range of ticks).
* ``iter_expanded(trace, ...)``: an open trace's chunks with their range rows expanded, in
  bounded memory (the timeline export and the figure read rows by time).
* ``iter_normal_form(trace)``, ``compare_events(trace_a, trace_b)``: the normal form of a whole
  trace, streamed in time order, and the first event where two traces differ (``trace diff``).
* ``merge_ticks(buf)``: rows of consecutive ticks joined into range rows (strided where the
  ticks' runs do not follow one another); the same events, fewer rows.

Every function takes or returns the int64 ``[n, 13]`` layout (``g10fast.trace``'s ``COL_*``);
the ones that take a buffer also take ``[n, 12]`` (a version 2 buffer: stride 0) and ``[n, 10]``
(a version 1 buffer: ticks 1, period 0, stride 0). They are numpy throughout (no loop over rows
in Python), but for ``merge_ticks``, a Numba kernel (``trace_kernels.merge_ticks``).
"""

from __future__ import annotations

import numpy as np

from .locations import EV_ALLOC, EV_DEALLOC, EV_EVICT, EV_FAULT, EV_FETCH
from .trace import (
    COL_COUNT,
    COL_DST,
    COL_ITERATION,
    COL_KERNEL,
    COL_KIND,
    COL_PAGE,
    COL_PERIOD,
    COL_SRC,
    COL_STRIDE,
    COL_TENSOR,
    COL_TICKS,
    COL_TIME,
    COL_VALUE,
    ABSENT_DEFAULTS,
    BUFFER_WIDTHS,
    COLUMN_DTYPES,
    COLUMNS,
    N_COLS,
    N_COLS_V1,
    N_COLS_V2,
)

#: kinds whose rows carry pages: ``per_page`` splits them into one row per page and
#: ``normal_form`` merges their contiguous pages (KERNEL, HINT and TRANSFER rows stay as they are)
PAGE_KINDS = (EV_FAULT, EV_FETCH, EV_ALLOC, EV_EVICT, EV_DEALLOC)
#: the columns that identify a page event besides its page: rows equal in all of them and
#: holding contiguous pages are one row of the normal form
KEY_COLS = (COL_TIME, COL_KIND, COL_ITERATION, COL_KERNEL, COL_TENSOR, COL_SRC, COL_DST, COL_VALUE)
#: ``normal_form``'s row order, first key first
NORMAL_ORDER = KEY_COLS + (COL_PAGE, COL_COUNT)
#: at most this many expanded rows at once in ``iter_expanded`` / ``iter_normal_form`` (~100
#: MB as int64 ``[n, 12]``, 4 of the export's read chunks): a read chunk whose ticks stand
#: for more is expanded in parts
MAX_EXPANDED_ROWS = 1 << 20

_PAGE = COLUMNS[COL_PAGE]  # the column (a name, not a literal: engine-name scans)


def as_buffer(buf) -> np.ndarray:
    """``buf`` (integers, ``[n, 13]``, ``[n, 12]`` or ``[n, 10]``) as int64 ``[n, 13]``; a
    twelve-column buffer gets stride 0, a ten-column one also ticks 1 and period 0. ValueError
    on any other shape."""
    b = np.asarray(buf)
    if b.ndim != 2 or b.shape[1] not in BUFFER_WIDTHS:
        raise ValueError(
            f"event buffer must have shape (n, {N_COLS}), (n, {N_COLS_V2}) or (n, {N_COLS_V1}), got {b.shape}"
        )
    if b.dtype.kind not in "iu":
        raise TypeError(f"event buffer must hold integers, got dtype {b.dtype}")
    if b.shape[1] == N_COLS:
        return b.astype(np.int64, copy=False)
    out = np.empty((b.shape[0], N_COLS), np.int64)
    out[:, : b.shape[1]] = b
    for c in range(b.shape[1], N_COLS):
        out[:, c] = ABSENT_DEFAULTS[COLUMNS[c]]
    return out


def _ticks(b: np.ndarray) -> np.ndarray:
    t = b[:, COL_TICKS]
    if t.size and t.min() < 1:
        i = int(np.flatnonzero(t < 1)[0])
        raise ValueError(f"event {i}: column 'ticks' = {int(t[i])} is below 1")
    return t


def _tick_index(t: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[lo, hi)`` of the expansion of rows with ``t`` ticks: -> (the row each comes
    from, its tick within that row)."""
    ends = np.cumsum(t)
    o = np.arange(lo, hi, dtype=np.int64)
    r = np.searchsorted(ends, o, side="right")
    return r, o - (ends[r] - t[r])


def expand_ticks(buf) -> np.ndarray:
    """Every row with ``ticks`` m > 1 replaced, where it stands, by its m ordinary rows (in tick
    order): ``time + i*period``, ``page + i*s`` (s: the stride, or ``count // m`` when it is
    0), ``count // m`` pages, ticks 1, period 0, stride 0, every other column equal. -> int64
    ``[n', 13]``; ``buf`` itself (as int64 ``[n, 13]``, not a copy) when it holds no range
    row."""
    b = as_buffer(buf)
    t = _ticks(b)
    if not (t > 1).any():
        return b
    n = b.shape[0]
    r = np.repeat(np.arange(n), t)
    i = np.arange(r.size, dtype=np.int64) - np.repeat(np.cumsum(t) - t, t)
    return _expanded(b, r, i)


def _expanded(b: np.ndarray, r: np.ndarray, i: np.ndarray) -> np.ndarray:
    out = b[r]
    m = out[:, COL_TICKS]
    per = out[:, COL_COUNT] // m
    out[:, COL_TIME] += i * out[:, COL_PERIOD]
    out[:, COL_PAGE] += i * np.where(out[:, COL_STRIDE] > 0, out[:, COL_STRIDE], per)
    out[:, COL_COUNT] = per
    out[:, COL_TICKS] = 1
    out[:, COL_PERIOD] = 0
    out[:, COL_STRIDE] = 0
    return out


def _splittable(b: np.ndarray) -> np.ndarray:
    """Rows that hold pages: a page kind, a count of at least one, a first page (>= 0)."""
    return np.isin(b[:, COL_KIND], PAGE_KINDS) & (b[:, COL_COUNT] > 0) & (b[:, COL_PAGE] >= 0)


def per_page(buf) -> np.ndarray:
    """``expand_ticks``, then every row of a page kind (FAULT, FETCH, ALLOC, EVICT, DEALLOC)
    with pages split into one row per page (count 1), in page order where the row stands;
    KERNEL, HINT and TRANSFER rows, and page-kind rows without pages (count < 1 or page -1),
    stay as they are. -> int64 ``[n'', 13]``."""
    b = expand_ticks(buf)
    split = _splittable(b)
    reps = np.where(split, b[:, COL_COUNT], 1)
    r = np.repeat(np.arange(b.shape[0]), reps)
    i = np.arange(r.size, dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    out = b[r]
    out[:, COL_PAGE] += i
    out[:, COL_COUNT] = np.where(split[r], 1, out[:, COL_COUNT])
    return out


#: packed sort keys: (column, offset, bits) of the fields packed into one int64 each, low
#: bits last; a field outside ``[-offset, 2**bits - offset)`` makes the sort use the columns
_PACK = (
    ((COL_KIND, 1, 4), (COL_ITERATION, 1, 17), (COL_KERNEL, 1, 33)),
    ((COL_TENSOR, 1, 33), (COL_SRC, 1, 4), (COL_DST, 1, 4)),
)


def _group_keys(b: np.ndarray) -> list:
    """Arrays whose lexicographic order (first array first) is that of ``KEY_COLS``: time,
    (kind, iteration, kernel) packed into one int64, (tensor, src, dst) into another, value
    (six keys sort in about half the time of ten); the columns themselves when a value does
    not fit its field."""
    keys = [b[:, COL_TIME]]
    for fields in _PACK:
        packed = np.zeros(b.shape[0], np.int64)
        for col, off, bits in fields:
            v = b[:, col] + off
            if v.size and (v.min() < 0 or v.max() >= 1 << bits):
                return [b[:, c] for c in KEY_COLS]
            packed = (packed << bits) | v
        keys.append(packed)
    keys.append(b[:, COL_VALUE])
    return keys


def _sort(b: np.ndarray) -> np.ndarray:
    """The rows of ``b`` in ``NORMAL_ORDER``."""
    keys = _group_keys(b) + [b[:, COL_PAGE], b[:, COL_COUNT]]
    return b[np.lexsort(keys[::-1])]


def normal_form(buf) -> np.ndarray:
    """The canonical rows of ``buf``'s events: equal for two buffers exactly when their
    ``per_page`` rows are the same multiset, however the pages were grouped into rows.

    ``expand_ticks``; then, per group of page-kind rows equal in ``KEY_COLS`` (time, kind,
    iteration, kernel, tensor, src, dst, value), the pages they hold, with their multiplicity
    m(p), are written as the maximal runs of contiguous pages of each layer k = 0, 1, ...
    (layer k: the pages with m(p) > k), one row per run; every other row is kept; all rows
    sorted by ``NORMAL_ORDER`` (time, kind, iteration, kernel, tensor, src, dst, value, page,
    count). Without a page held twice in one group that is: sort, then merge each row into the
    one before it when it continues it (same key, page = previous page + previous count). The
    layers make it canonical when pages repeat ({1, 2, 2, 3} is rows (1, 3 pages) and (2, 1
    page) whether it came as those or as (1, 2) and (2, 2)). -> int64 ``[n, 13]`` with ticks
    1, period 0 and stride 0; a row per page only where pages are not contiguous."""
    s = _sort(expand_ticks(buf))
    m = _splittable(s)
    mi = np.flatnonzero(m)
    if mi.size == 0:
        return s
    gk = [k[mi] for k in _group_keys(s)]
    first = np.zeros(mi.size, bool)  # the first row of its group
    first[0] = True
    for k in gk:
        first[1:] |= k[1:] != k[:-1]
    page = s[mi, COL_PAGE]
    end = page + s[mi, COL_COUNT]
    same = ~first[1:]
    if not (same & (end[:-1] > page[1:])).any():
        # no page twice in a group: a row that continues the one before it joins it; the
        # joined row keeps its first row's place (a row of the same key and page that is not
        # merged has count < 1 or page -1, and sorts before it either way)
        cont = np.zeros(mi.size, bool)
        cont[1:] = same & (page[1:] == end[:-1])
        head = np.flatnonzero(~cont)
        last = np.append(head[1:] - 1, mi.size - 1)
        s[mi[head], COL_COUNT] = end[last] - page[head]
        m[mi[head]] = False
        return s[~m]
    return _sort(np.concatenate([s[~m], _layers(s[mi], np.cumsum(first) - 1, first)]))


def _layers(rows: np.ndarray, gid: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``normal_form``'s rows of the page rows ``rows`` (sorted, group ``gid``, ``first``: the
    first row of each group) when pages repeat: the maximal runs of every layer."""
    group_keys = rows[first]
    # coverage of each group's pages: +1 at every row's first page, -1 after its last
    page, count = rows[:, COL_PAGE], rows[:, COL_COUNT]
    pg = np.concatenate([gid, gid])
    px = np.concatenate([page, page + count])
    pd = np.concatenate([np.ones(page.size, np.int64), -np.ones(page.size, np.int64)])
    o = np.lexsort((px, pg))
    pg, px, pd = pg[o], px[o], pd[o]
    new = np.ones(pg.size, bool)
    new[1:] = (pg[1:] != pg[:-1]) | (px[1:] != px[:-1])
    at = np.flatnonzero(new)
    ug, ux = pg[at], px[at]
    # cov[j]: pages held on [ux[j], ux[j+1]); every group's deltas sum to 0, so cov is 0 at a
    # group's last point, and the point before a group's first has cov 0
    cov = np.cumsum(np.add.reduceat(pd, at))
    prev = np.concatenate([[0], cov[:-1]])
    nxt = np.concatenate([cov[1:], [0]])
    pos = np.flatnonzero(cov > 0)
    c = cov[pos]
    seg = np.repeat(pos, c)  # one (segment, layer) pair per layer the segment is in
    layer = np.arange(seg.size, dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
    st = layer >= prev[seg]  # a run of layer k starts here
    en = layer >= nxt[seg]  # ... ends here
    s_seg, s_lay = seg[st], layer[st]
    e_seg, e_lay = seg[en], layer[en]
    s_seg = s_seg[np.lexsort((s_seg, s_lay, ug[s_seg]))]
    e_seg = e_seg[np.lexsort((e_seg, e_lay, ug[e_seg]))]
    merged = group_keys[ug[s_seg]]
    merged[:, COL_PAGE] = ux[s_seg]
    merged[:, COL_COUNT] = ux[e_seg + 1] - ux[s_seg]
    return merged


# -- whole traces, in bounded memory ---------------------------------------------------------


def iter_expanded(trace, rows: int | None = None, columns=None, max_rows: int = MAX_EXPANDED_ROWS):
    """``trace.iter_chunks(rows, columns)`` (an open ``EventTrace``) with every range row
    expanded into its ordinary rows (as ``expand_ticks``), in order: dicts of column arrays in
    their stored dtypes, each of at most ``max(rows, max_rows)`` rows (a read chunk whose ticks
    stand for more than ``max_rows`` rows comes in parts)."""
    want = list(COLUMNS) if columns is None else ([columns] if isinstance(columns, str) else list(columns))
    need = set(want) | {"ticks"}
    if "time" in want:
        need.add("period")
    if _PAGE in want or "count" in want:
        need.add("count")
    if _PAGE in want:
        need.add("stride")
    read = [c for c in COLUMNS if c in need] + [c for c in want if c not in COLUMNS]
    max_rows = max(1, int(max_rows))
    for ch in trace.iter_chunks(rows=rows, columns=read):
        t = ch["ticks"].astype(np.int64)
        if not (t > 1).any():
            yield {c: ch[c] for c in want}
            continue
        total = int(t.sum())
        for lo in range(0, total, max_rows):
            r, i = _tick_index(t, lo, min(total, lo + max_rows))
            out = {}
            for c in want:
                v = ch[c][r]
                if c == "time":
                    v = v + i * ch["period"][r].astype(np.int64)
                elif c == _PAGE:
                    sr = ch["stride"][r].astype(np.int64)
                    v = v + i * np.where(sr > 0, sr, ch["count"][r].astype(np.int64) // t[r])
                elif c == "count":
                    v = (v.astype(np.int64) // t[r]).astype(COLUMN_DTYPES[c])
                elif c in ABSENT_DEFAULTS:
                    v = np.full(r.size, ABSENT_DEFAULTS[c], COLUMN_DTYPES[c])
                out[c] = v
            yield out


def iter_normal_form(trace, rows: int | None = None, max_rows: int = MAX_EXPANDED_ROWS):
    """The ``normal_form`` of a whole open trace, streamed in its order: int64 ``[k, 13]``
    arrays whose concatenation is ``normal_form(trace.to_buffer())``.

    Two passes: the first reads the times to know, after each read chunk, the earliest time
    any later row has (a range row's ticks are at or after its time); the second expands the
    rows and hands out the normal form of every row earlier than that, keeping the rest (the
    normal form sorts by time first and merges only rows of one time). Memory: a read chunk
    plus the rows emitted out of time order (the engines emit nearly in time order)."""
    mins = []
    for ch in trace.iter_chunks(rows=rows, columns=["time"]):
        t = ch["time"]
        mins.append(int(t.min()) if t.size else np.iinfo(np.int64).max)
    # later[k]: the earliest time of chunks k, k+1, ... (later[-1]: none left)
    later = np.minimum.accumulate(np.array(mins + [np.iinfo(np.int64).max], np.int64)[::-1])[::-1]
    pending = np.zeros((0, N_COLS), np.int64)
    for k, ch in enumerate(trace.iter_chunks(rows=rows)):
        b = np.empty((ch["time"].size, N_COLS), np.int64)
        for c, col in enumerate(COLUMNS):
            b[:, c] = ch[col]
        t = b[:, COL_TICKS]
        total = int(t.sum())
        parts = (
            [(0, total)]
            if total <= max_rows or not (t > 1).any()
            else [(lo, min(total, lo + max_rows)) for lo in range(0, total, max_rows)]
        )
        if len(parts) > 1:
            ends = np.cumsum(t)  # the tick index after each row's last
            rest = np.minimum.accumulate(b[::-1, COL_TIME])[::-1]  # earliest time of rows i..
        for lo, hi in parts:
            piece = expand_ticks(b) if len(parts) == 1 else _expanded(b, *_tick_index(t, lo, hi))
            # no row still to come is earlier than the chunk's rows not yet wholly expanded
            # (a range row's ticks are at or after its time) and the later chunks' rows
            mark = later[k + 1]
            if hi < total:
                mark = min(mark, int(rest[int(np.searchsorted(ends, hi, side="right"))]))
            pending = np.concatenate([pending, piece])
            done = pending[:, COL_TIME] < mark
            if done.any():
                yield normal_form(pending[done])
                pending = pending[~done]
    if pending.shape[0]:
        yield normal_form(pending)


def _row(v) -> dict | None:
    """An event row as {column: value} with its kind's name (None: no row)."""
    if v is None:
        return None
    from .trace import EventKind

    d = {c: int(x) for c, x in zip(COLUMNS, v)}
    k = d["kind"]
    d["kind_name"] = EventKind(k).name if 0 <= k < len(EventKind) else str(k)
    return d


class _Stream:
    """A stream of row arrays read row by row: ``peek()`` the rows not yet taken (None at its
    end), ``take(m)`` of them."""

    def __init__(self, arrays):
        self._it, self._buf = iter(arrays), np.zeros((0, N_COLS), np.int64)

    def peek(self) -> np.ndarray | None:
        while self._buf.shape[0] == 0:
            nxt = next(self._it, None)
            if nxt is None:
                return None
            self._buf = nxt
        return self._buf

    def take(self, m: int) -> None:
        self._buf = self._buf[m:]


def compare_events(trace_a, trace_b, rows: int | None = None) -> dict:
    """Whether two open traces hold the same events (their normal forms are equal: the same
    per-page events, however grouped into rows and ranges), and where they first differ:
    -> {"equal", "rows" (normal-form rows of each, when equal; None otherwise: the comparison
    stops at the first difference), "first_difference": None or {"index" (normal-form row),
    "a", "b" (the rows as dicts; None past a trace's end)}}."""
    sa, sb = _Stream(iter_normal_form(trace_a, rows)), _Stream(iter_normal_form(trace_b, rows))
    first, at = None, 0
    while True:
        a, b = sa.peek(), sb.peek()
        if a is None or b is None:
            if a is not None or b is not None:
                first = {
                    "index": at,
                    "a": _row(None if a is None else a[0]),
                    "b": _row(None if b is None else b[0]),
                }
            break
        m = min(a.shape[0], b.shape[0])
        ne = np.flatnonzero((a[:m] != b[:m]).any(axis=1))
        if ne.size:
            i = int(ne[0])
            first = {"index": at + i, "a": _row(a[i]), "b": _row(b[i])}
            break
        sa.take(m)
        sb.take(m)
        at += m
    return {"equal": first is None, "rows": at if first is None else None, "first_difference": first}


def merge_ticks(buf, out: np.ndarray | None = None) -> np.ndarray:
    """``buf``'s rows with the rows of consecutive ticks joined into range rows
    (``trace_kernels.merge_ticks``: a row joins one of the last few rows of its kind when its
    pages are that row's next tick, a strided range row where the ticks' runs do not follow one
    another): the same events (``expand_ticks`` of both holds the same rows, in another
    order), usually far fewer rows. ``buf``: int64 ``[n, 12]`` or ``[n, 13]``; ``out``: int64
    ``[>= n, 13]`` to write into (reused by a caller that merges many batches), else a new
    array. -> int64 ``[m, 13]``, a view of ``out``."""
    b = np.asarray(buf)
    if b.ndim != 2 or b.shape[1] not in (N_COLS, N_COLS_V2) or b.dtype != np.int64:
        raise ValueError(
            f"merge_ticks takes int64 rows of {N_COLS_V2} or {N_COLS} columns, got {b.shape} {b.dtype}"
        )
    b = np.ascontiguousarray(b)
    n = b.shape[0]
    if out is None:
        out = np.empty((n, N_COLS), np.int64)
    elif out.dtype != np.int64 or out.ndim != 2 or out.shape[0] < n or out.shape[1] != N_COLS:
        raise ValueError(f"merge_ticks: out must be int64 [>= {n}, {N_COLS}], got {out.shape} {out.dtype}")
    from . import aot
    from .trace_kernels import MERGE_OPEN
    from .trace_kernels import merge_ticks as kernel

    m = aot.entry(kernel)(b, out, np.full((4, MERGE_OPEN), -1, np.int64))
    return out[:m]
