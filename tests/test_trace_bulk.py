"""Traced runs on the page engine's bulk paths (issue 39): the pages a run settles in bulk are
written as rows of runs and ticks (trace schema 3, docs/trace-format.md), and those rows stand
for exactly the per-page events of the per-page reference engine's trace.

The emission kernels (`_emit_merge`, `_emit_ticked`) are checked against a plain-Python twin
that lists the per-page events each call stands for; whole runs, written through the HDF5
writer, against the per-page engine's trace (`compare_events`, event for event)."""

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


def _twin(t, ii, per, off, kind, tensor, page, n, src, dst, value):
    """The per-page events of one `_emit_ticked` call, as the twin sees them: page
    page + j is the batch's page off + j, which moves in tick (off + j) // per."""
    tick = [t + ((off + j) // per) * ii for j in range(n)]
    return [(tick[j], kind, 2, 5, tensor, page + j, 1, src, dst, value, 1, 0) for j in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_emit_ticked_against_twin(seed):
    rng = np.random.default_rng(seed)
    ev = np.zeros((1 << 12, pk.EV_COLS), dtype=np.int64)
    S = np.zeros(pk.NS, dtype=np.int64)
    for i in (pk.S_IN_OPEN, pk.S_OUT_OPEN, pk.S_IN_OPEN2, pk.S_OUT_OPEN2):
        S[i] = -1
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
    another count, another tensor or a range row in the same tick does not extend it; two
    runs that alternate tick by tick both extend (the second open row)."""
    ev = np.zeros((64, pk.EV_COLS), dtype=np.int64)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.S_IN_OPEN] = -1
    S[pk.S_IN_OPEN2] = -1
    o = pk.S_IN_OPEN

    def emit(t, page, n, ticks=1, period=0, tensor=7):
        src, dst = pk.IN_CPU, pk.IN_GPU
        pk._emit_merge(ev, S, o, t, pk.EV_FETCH, 0, 1, tensor, page, n, ticks, period, src, dst, 1)

    emit(100, 10, 4)
    emit(100, 14, 6)  # same tick: one row of 10 pages
    emit(110, 20, 10)  # next tick, 10 pages: 2 ticks of 10
    emit(120, 30, 20, 2, 10)  # two more ticks of 10, as a range: 4 ticks
    emit(160, 50, 10)  # not the next tick (150): a new row
    emit(170, 61, 10)  # the next tick, a gap of one page: 2 ticks of 10, stride 11
    emit(170, 71, 5, tensor=8)  # another tensor: a new row
    emit(180, 76, 3, tensor=8)  # the next tick with 3 pages, not 5: a new row
    for t in (200, 210, 220):  # two runs alternating tick by tick: both become range rows
        emit(t, 1000 + (t - 200) // 10 * 4, 4, tensor=9)
        emit(t, 2000 + (t - 200) // 10 * 2, 2, tensor=10)
    rows = ev[: S[pk.S_NEV]]
    want = [
        (100, 10, 40, 4, 10),
        (160, 50, 20, 2, 10),
        (170, 71, 5, 1, 0),
        (180, 76, 3, 1, 0),
        (200, 1000, 12, 3, 10),
        (200, 2000, 6, 3, 10),
    ]
    assert [tuple(int(x) for x in r[[0, 5, 6, 10, 11]]) for r in rows] == want
    assert rows[:, pk.EV_STRIDE].tolist() == [0, 11, 0, 0, 0, 0]


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
