"""Traced runs on the page engine's bulk paths (issue 39): the pages a run settles in bulk are
written as rows of runs and ticks (trace schema 4, docs/trace-format.md), and those rows stand
for exactly the per-page events of the per-page reference engine's trace.

The emission kernels (`_emit_merge`, `_emit_ticked`, `_fault_row`) are checked against a
plain-Python twin that lists the per-page events each call stands for; whole runs, written
through the HDF5 writer, against the per-page engine's trace (`compare_events`, event for
event)."""

from __future__ import annotations

import numpy as np
import pytest
from synth import kernel_pages, make_workload, random_hints, tiny_cfg

from g10fast.engine.page import kernels as pk
from g10fast.engine.page import simulate_pages
from g10fast.trace import COL_TICKS, EventTraceWriter, open_trace
from g10fast.trace_ranges import as_buffer, compare_events, per_page

BIG = 1 << 40


def _sorted(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])]


def _fresh_state() -> np.ndarray:
    """The engine's state array with no open row (as the wrapper sets it up)."""
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.S_IN_OPEN] = S[pk.S_OUT_OPEN] = -1
    S[pk.S_IN_OPEN2 : pk.S_IN_OPEN2 + pk.N_OPEN] = -1
    S[pk.S_OUT_OPEN2 : pk.S_OUT_OPEN2 + pk.N_OPEN] = -1
    return S


def _twin(t, ii, per, off, kind, tensor, page, n, src, dst, value):
    """The per-page events of one `_emit_ticked` call, as the twin sees them: page
    page + j is the batch's page off + j, which moves in tick (off + j) // per."""
    tick = [t + ((off + j) // per) * ii for j in range(n)]
    return [(tick[j], kind, 2, 5, tensor, page + j, 1, src, dst, value, 1, 0) for j in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_emit_ticked_against_twin(seed):
    rng = np.random.default_rng(seed)
    ev = np.zeros((1 << 12, pk.EV_COLS), dtype=np.int64)
    S = _fresh_state()
    ii = int(rng.choice([7, 10]))
    t, page, want = 1000, 100, []
    for _ in range(300):
        per = int(rng.choice([1, 2, 3, 5, BIG]))
        off = int(rng.integers(0, 2 * per)) if per < BIG and rng.random() < 0.5 else 0
        n = int(rng.integers(1, 16))
        kind = int(rng.choice([pk.EV_FETCH, pk.EV_EVICT]))
        open_idx = pk.S_IN_OPEN if kind == pk.EV_FETCH else pk.S_OUT_OPEN
        tensor = int(rng.choice([3, 4]))
        src, dst = (pk.IN_SSD, pk.IN_GPU) if kind == pk.EV_FETCH else (pk.IN_GPU, pk.IN_CPU)
        value = int(rng.random() < 0.8)
        if rng.random() < 0.3:
            page += int(rng.integers(1, 50))  # a gap: no merge
        if rng.random() < 0.4:
            t += ii * int(rng.integers(1, 3))
        pk._emit_ticked(ev, S, open_idx, t, ii, per, off, kind, 2, 5, tensor, page, n, src, dst, value)
        want += _twin(t, ii, per, off, kind, tensor, page, n, src, dst, value)
        page += n
    rows = ev[: S[pk.S_NEV]]
    assert S[pk.S_ERROR] == 0
    m = rows[:, COL_TICKS]
    assert (m >= 1).all() and (m > 1).any()
    ranges = rows[m > 1]
    assert (ranges[:, 6] % ranges[:, 10] == 0).all() and (ranges[:, 11] > 0).all()
    assert len(rows) < len(want)  # runs and ticks were merged
    got = _sorted(per_page(rows))
    assert np.array_equal(got, _sorted(as_buffer(np.array(want, dtype=np.int64))))


def test_emit_merge_cases():
    """Hand-worked: the same tick extends the open row; the next tick with as many pages
    makes it a range row (strided when its pages skip some: trace schema 3); a tick with
    another count, another tensor or a range row in the same tick does not extend it; runs
    that take turns tick by tick all extend (the older open rows), up to N_OPEN + 1 of them;
    a strided range row extends a row of its stride."""
    assert pk.N_OPEN == 2  # (the cases below are worked for three open rows)
    ev = np.zeros((64, pk.EV_COLS), dtype=np.int64)
    S = _fresh_state()
    o = pk.S_IN_OPEN

    def emit(t, page, n, ticks=1, period=0, tensor=7, stride=0):
        src, dst = pk.IN_CPU, pk.IN_GPU
        pk._emit_merge(ev, S, o, t, pk.EV_FETCH, 0, 1, tensor, page, n, ticks, period, stride, src, dst, 1)

    emit(100, 10, 4)
    emit(100, 14, 6)  # same tick: one row of 10 pages
    emit(110, 20, 10)  # next tick, 10 pages: 2 ticks of 10
    emit(120, 30, 20, 2, 10)  # two more ticks of 10, as a range: 4 ticks
    emit(160, 50, 10)  # not the next tick (150): a new row
    emit(170, 61, 10)  # the next tick, a gap of one page: 2 ticks of 10, stride 11
    emit(170, 71, 5, tensor=8)  # another tensor: a new row
    emit(180, 76, 3, tensor=8)  # the next tick with 3 pages, not 5: a new row
    for t in (200, 210, 220):  # three runs taking turns tick by tick: all become range rows
        emit(t, 1000 + (t - 200) // 10 * 4, 4, tensor=9)
        emit(t, 2000 + (t - 200) // 10 * 2, 2, tensor=10)
        emit(t, 3000 + (t - 200) // 10 * 3, 3, tensor=11)
    emit(300, 500, 6, 2, 10, tensor=12, stride=5)  # a strided range row: 2 ticks of 3, 5 apart
    emit(320, 510, 9, 3, 10, tensor=12, stride=5)  # its next 3 ticks at its stride: joins it
    emit(350, 530, 6, 2, 10, tensor=12, stride=4)  # the next ticks at another stride: a new row
    for t in (400, 410):  # four runs taking turns: the oldest is no longer open
        for j in range(4):
            emit(t, 4000 + 100 * j + (t - 400) // 10 * 2, 2, tensor=20 + j)
    rows = ev[: S[pk.S_NEV]]
    want = [
        (100, 10, 40, 4, 10),
        (160, 50, 20, 2, 10),
        (170, 71, 5, 1, 0),
        (180, 76, 3, 1, 0),
        (200, 1000, 12, 3, 10),
        (200, 2000, 6, 3, 10),
        (200, 3000, 9, 3, 10),
        (300, 500, 15, 5, 10),
        (350, 530, 6, 2, 10),
        (400, 4000, 2, 1, 0),
        (400, 4100, 2, 1, 0),
        (400, 4200, 2, 1, 0),
        (400, 4300, 2, 1, 0),
        (410, 4002, 2, 1, 0),
        (410, 4102, 2, 1, 0),
        (410, 4202, 2, 1, 0),
        (410, 4302, 2, 1, 0),
    ]
    assert [tuple(int(x) for x in r[[0, 5, 6, 10, 11]]) for r in rows] == want
    assert rows[:, pk.EV_STRIDE].tolist() == [0, 11, 0, 0, 0, 0, 0, 5, 4] + [0] * 8


def _fault_twin(runs):
    """Plain Python of the FAULT rows `_fault_row` writes for one scan's runs (page, count,
    location), in page order: a run joins the last row of its location when it has that
    row's pages a run and starts that row's stride (the first distance, above its pages)
    after the row's last run; -> rows (page, count, location, runs, stride)."""
    rows, last = [], {}
    for p, c, u in runs:
        j = last.get(u)
        if j is not None:
            p0, n0, _, m, s = rows[j]
            if n0 == m * c and (m > 1 and p == p0 + m * s or m == 1 and p - p0 > c):
                rows[j] = (p0, n0 + c, u, m + 1, s if m > 1 else p - p0)
                continue
        last[u] = len(rows)
        rows.append((p, c, u, 1, 0))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_fault_rows_against_twin(seed):
    """A bulk fault scan's runs (`_fault_row`, one open row per location) against the twin:
    the same rows, and as per-page events exactly the runs' pages; a tensor whose pages
    alternate between two places in runs of fixed lengths is two rows."""
    rng = np.random.default_rng(seed)
    locs = [pk.IN_CPU, pk.IN_SSD, pk.NOT_PRESENT]
    runs, p = [], 1000
    pattern = [(int(rng.integers(1, 6)), locs[j % 2]) for j in range(2)]
    for i in range(200):
        if rng.random() < 0.9:
            c, u = pattern[i % 2]
        else:
            c, u = int(rng.integers(1, 6)), locs[int(rng.integers(0, 3))]
        if rng.random() < 0.05:
            p += int(rng.integers(1, 5))  # pages in the GPU between runs
        runs.append((p, c, u))
        p += c
    ev = np.zeros((512, pk.EV_COLS), dtype=np.int64)
    S = _fresh_state()
    open_row = {u: -1 for u in locs}
    for q, c, u in runs:
        open_row[u] = pk._fault_row(ev, S, open_row[u], 77, 1, 4, 9, q, c, u)
    rows = ev[: S[pk.S_NEV]]
    got = [tuple(int(x) for x in r[[5, 6, 7, 10, 12]]) for r in rows]
    assert got == _fault_twin(runs)
    assert (rows[:, 0] == 77).all() and (rows[:, 11] == 0).all() and (rows[:, 1] == pk.EV_FAULT).all()
    want = [(77, pk.EV_FAULT, 1, 4, 9, q + j, 1, u, pk.IN_GPU, 0, 1, 0) for q, c, u in runs for j in range(c)]
    assert np.array_equal(_sorted(per_page(rows)), _sorted(as_buffer(np.array(want, dtype=np.int64))))
    assert len(rows) < len(runs) // 2
    # the alternating pattern alone: one row for each place
    ev[:] = 0
    S = _fresh_state()
    (c0, u0), (c1, u1) = pattern
    a = b = -1
    for k in range(10):
        a = pk._fault_row(ev, S, a, 5, 0, 0, 1, 100 + k * (c0 + c1), c0, u0)
        b = pk._fault_row(ev, S, b, 5, 0, 0, 1, 100 + k * (c0 + c1) + c0, c1, u1)
    assert S[pk.S_NEV] == 2 and ev[0, 10] == ev[1, 10] == 10 and ev[0, 12] == ev[1, 12] == c0 + c1


def test_no_room_asks_for_a_pause():
    """`_rp_batch` finding no room for its ticks' rows lowers the pause line to the rows held
    (the wrapper then writes them out), and leaves it alone when the buffer is empty."""
    S = _fresh_state()
    none = (0, 5, 1, 2, 3, 4, 6)
    S[pk.S_EV_PAUSE], S[pk.S_NEV] = 1000, 321
    assert pk._rp_no_room(S, none) == none and S[pk.S_EV_PAUSE] == 321
    S[pk.S_EV_PAUSE], S[pk.S_NEV] = 1000, 0
    assert pk._rp_no_room(S, none) == none and S[pk.S_EV_PAUSE] == 1000


def _run(tmp_path, name, w, cfg, hints, bulk):
    path = tmp_path / f"{name}.h5"
    with EventTraceWriter(path, config={}, threads=0) as wr:
        r = simulate_pages(w, cfg, hints=hints, trace=wr, bulk=bulk)
    return path, r


@pytest.mark.parametrize(
    "seed,policy",
    [(1, "lru"), (2, "prefetch_lru"), (1, "deepUM"), (9, "lru"), (11, "prefetch_lru")],
)
def test_traced_bulk_run_equals_per_page_trace(tmp_path, seed, policy):
    """A traced bulk run writes ranges of pages and ticks; its trace holds exactly the events
    of the per-page engine's trace (compared event for event in normal form), in fewer rows,
    and the run's results are the per-page engine's."""
    rng = np.random.default_rng(7000 + seed)
    w = make_workload(seed, n_kernels=14, n_tensors=30, max_pages=200)
    frames = int(kernel_pages(w).max() * rng.uniform(1.05, 1.5)) + 1
    batch = int(rng.integers(4, 24))
    cfg = tiny_cfg(frames, frames // 2, policy, num_iteration=3, PCIe_batch_size_page=batch)
    hints = None if policy == "lru" else random_hints(w, seed, n_hints=40)
    if policy == "deepUM":
        hints = [h for h in hints if h[3] not in (pk.IN_SSD, pk.IN_CPU)]
    a, ra = _run(tmp_path, "bulk", w, cfg, hints, True)
    b, rb = _run(tmp_path, "per-page", w, cfg, hints, False)
    assert np.array_equal(ra.kernels, rb.kernels) and np.array_equal(ra.pcie, rb.pcie)
    with open_trace(a) as ta, open_trace(b) as tb:
        ticks = np.asarray(ta.read(["ticks"])["ticks"])
        assert (ticks > 1).any(), "the bulk run wrote no range row"
        assert (np.asarray(tb.read(["ticks"])["ticks"]) == 1).all()
        assert len(ta) < len(tb)
        assert sum(ta.pages_by_kind().values()) == sum(tb.pages_by_kind().values())
        cmp = compare_events(ta, tb)
        assert cmp["equal"], cmp["first_difference"]
