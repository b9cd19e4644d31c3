"""Range rows (event trace schema version 2): expand_ticks, per_page and normal_form against
hand-worked cases and a plain-Python twin; the writer's rules; version 1 files read by every
reader (open_trace, inspect, export, diff, plot)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import h5py
import numpy as np
import pytest

from g10fast.cli import main
from g10fast.errors import InputError
from g10fast.trace import (
    COLUMN_DTYPES,
    COLUMNS,
    N_COLS,
    N_COLS_V1,
    N_COLS_V2,
    EventKind,
    EventTraceWriter,
    _attrs_digest,
    open_trace,
)
from g10fast.trace_ranges import (
    compare_events,
    expand_ticks,
    iter_expanded,
    iter_normal_form,
    merge_ticks,
    normal_form,
    per_page,
)
from g10fast.trace_kernels import MERGE_OPEN

sys.path.insert(0, str(Path(__file__).parent))
from synth_trace import engine_like_batch, with_ranges  # noqa: E402

K, FAULT, FETCH, ALLOC, EVICT, HINT, DEALLOC, TRANSFER = range(8)


def row(
    time,
    kind,
    page=-1,
    count=-1,
    ticks=1,
    period=0,
    it=0,
    kernel=3,
    tensor=7,
    src=1,
    dst=3,
    value=1,
    stride=0,
):
    return [time, kind, it, kernel, tensor, page, count, src, dst, value, ticks, period, stride]


def arr(rows) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(-1, N_COLS)


# -- hand-worked -----------------------------------------------------------------------------


def test_expand_ticks_by_hand():
    b = arr(
        [
            row(100, FETCH, page=40, count=6, ticks=3, period=50),
            row(0, K, count=5, value=900),
            row(7, EVICT, page=9, count=2, ticks=2, period=10, src=3, dst=2),
        ]
    )
    want = arr(
        [
            row(100, FETCH, page=40, count=2),
            row(150, FETCH, page=42, count=2),
            row(200, FETCH, page=44, count=2),
            row(0, K, count=5, value=900),
            row(7, EVICT, page=9, count=1, src=3, dst=2),
            row(17, EVICT, page=10, count=1, src=3, dst=2),
        ]
    )
    np.testing.assert_array_equal(expand_ticks(b), want)
    np.testing.assert_array_equal(
        expand_ticks(b[:, :N_COLS_V1]), np.c_[b[:, :10], np.ones(3), np.zeros(3), np.zeros(3)]
    )
    plain = want.copy()
    assert expand_ticks(plain) is plain  # nothing to expand: the buffer itself
    with pytest.raises(ValueError, match=r"event 1: column 'ticks' = 0"):
        expand_ticks(arr([row(0, K), row(1, FETCH, page=1, count=1, ticks=0)]))
    with pytest.raises(ValueError, match=r"shape \(n, 13\), \(n, 12\) or \(n, 10\)"):
        expand_ticks(np.zeros((2, 11), np.int64))


def test_per_page_by_hand():
    b = arr(
        [
            row(5, ALLOC, page=10, count=4, ticks=2, period=3, src=0),
            row(5, HINT, page=0, count=100, src=4, dst=3),  # hints keep their count
            row(6, TRANSFER, src=-1, dst=-1, tensor=-1),
            row(8, FAULT, page=70, count=1, src=2),
            row(9, DEALLOC, page=-1, count=3),  # no first page: kept as it is
        ]
    )
    want = arr(
        [
            row(5, ALLOC, page=10, count=1, src=0),
            row(5, ALLOC, page=11, count=1, src=0),
            row(8, ALLOC, page=12, count=1, src=0),
            row(8, ALLOC, page=13, count=1, src=0),
            row(5, HINT, page=0, count=100, src=4, dst=3),
            row(6, TRANSFER, src=-1, dst=-1, tensor=-1),
            row(8, FAULT, page=70, count=1, src=2),
            row(9, DEALLOC, page=-1, count=3),
        ]
    )
    np.testing.assert_array_equal(per_page(b), want)


def test_normal_form_by_hand():
    # contiguous rows of one key merge, across the order they came in; a gap of one page, a
    # different value or another tick does not
    b = arr(
        [
            row(10, FETCH, page=4, count=2),
            row(10, FETCH, page=0, count=4),
            row(10, FETCH, page=7, count=1),  # gap: page 6 is missing
            row(10, FETCH, page=8, count=2, value=0),  # prefetch, not demand
            row(0, K, count=3, value=99),
            row(10, FETCH, page=0, count=2, ticks=2, period=5),  # 0 at 10, 1 at 15
        ]
    )
    want = arr(
        [
            row(0, K, count=3, value=99),
            row(10, FETCH, page=8, count=2, value=0),
            row(10, FETCH, page=0, count=1),  # page 0 again: a second layer (count sorts)
            row(10, FETCH, page=0, count=6),
            row(10, FETCH, page=7, count=1),
            row(15, FETCH, page=1, count=1),
        ]
    )
    np.testing.assert_array_equal(normal_form(b), want)
    # a page held twice: the same rows however it was grouped ({1, 2, 2, 3})
    x = normal_form(arr([row(1, EVICT, page=1, count=3), row(1, EVICT, page=2, count=1)]))
    y = normal_form(arr([row(1, EVICT, page=2, count=2), row(1, EVICT, page=1, count=2)]))
    np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(x, arr([row(1, EVICT, page=1, count=3), row(1, EVICT, page=2, count=1)]))
    assert normal_form(np.zeros((0, N_COLS_V1), np.int64)).shape == (0, N_COLS)


# -- plain-Python twin -----------------------------------------------------------------------

KEY = (0, 1, 2, 3, 4, 7, 8, 9)  # time kind iteration kernel tensor src dst value
ORDER = KEY + (5, 6)  # ... page count
PAGE_KINDS_TWIN = {FAULT, FETCH, ALLOC, EVICT, DEALLOC}


def twin_expand(rows):
    out = []
    for r in rows:
        m = r[10]
        for i in range(m):
            x = list(r)
            x[0] += i * r[11]
            x[5] += i * (r[12] if r[12] > 0 else r[6] // m)
            x[6] = r[6] // m
            x[10], x[11], x[12] = 1, 0, 0
            out.append(x)
    return out


def twin_units(rows):
    """(unit page events of page rows, other rows) of the expanded rows, as Counters."""
    units, other = Counter(), Counter()
    for x in twin_expand(rows):
        if x[1] in PAGE_KINDS_TWIN and x[6] > 0 and x[5] >= 0:
            for p in range(x[5], x[5] + x[6]):
                units[tuple(x[c] for c in KEY) + (p,)] += 1
        else:
            other[tuple(x)] += 1
    return units, other


def twin_normal_form(rows):
    units, other = twin_units(rows)
    out = [list(x) for x, n in other.items() for _ in range(n)]
    groups = {}
    for u, n in units.items():
        groups.setdefault(u[:-1], Counter())[u[-1]] += n
    for key, mult in groups.items():
        k = 0
        while True:
            layer = sorted(p for p, n in mult.items() if n > k)
            if not layer:
                break
            runs, start, prev = [], layer[0], layer[0]
            for p in layer[1:]:
                if p != prev + 1:
                    runs.append((start, prev))
                    start = p
                prev = p
            runs.append((start, prev))
            for a, z in runs:
                x = [0] * 13
                for c, v in zip(KEY, key):
                    x[c] = v
                x[5], x[6], x[10], x[11] = a, z - a + 1, 1, 0
                out.append(x)
            k += 1
    out.sort(key=lambda x: tuple(x[c] for c in ORDER))
    return out


def random_buffer(rng, n) -> np.ndarray:
    """Small buffers where everything collides: pages 0..11 (duplicates, gaps, contiguous
    runs), two times, tensors and values; ranges on the kinds that may have them; page rows
    without pages; pageless kinds."""
    rows = []
    for _ in range(n):
        kind = int(rng.integers(0, 8))
        ticks, period, stride = 1, 0, 0
        count = int(rng.integers(1, 5))
        page = int(rng.integers(0, 12))
        if kind in (FETCH, ALLOC, EVICT, DEALLOC) and rng.random() < 0.4:
            ticks = int(rng.integers(2, 4))
            stride = count + int(rng.integers(1, 3)) if rng.random() < 0.3 else 0  # (schema 3)
            count *= ticks
            period = int(rng.integers(1, 3))
        elif kind in PAGE_KINDS_TWIN and rng.random() < 0.1:
            count, page = (0, page) if rng.random() < 0.5 else (count, -1)
        elif kind == TRANSFER:
            page, count = -1, -1
        rows.append(
            row(
                int(rng.integers(0, 2)),
                kind,
                page=page,
                count=count,
                ticks=ticks,
                period=period,
                stride=stride,
                tensor=int(rng.integers(0, 2)),
                value=int(rng.integers(0, 2)),
            )
        )
    return arr(rows)


def disjoint_buffer(rng, n) -> np.ndarray:
    """Rows whose pages never repeat within a key (normal_form's path without layers): pages
    handed out in order with gaps of 0 or 1, rows shuffled; rows of the same key and first
    page that hold no pages (count 0); kernel ids beyond what the sort packs (2**40) in some
    buffers."""
    big = 2**40 if rng.random() < 0.2 else 0
    rows, nxt = [], 0
    for _ in range(n):
        kind = int(rng.choice([FETCH, EVICT, FAULT, K, HINT]))
        count = int(rng.integers(1, 4))
        ticks = 2 if kind in (FETCH, EVICT) and rng.random() < 0.3 else 1
        rows.append(
            row(
                int(rng.integers(0, 2)),
                kind,
                page=nxt,
                count=count * ticks,
                ticks=ticks,
                period=ticks - 1,
                kernel=3 + big,
                value=int(rng.integers(0, 2)),
            )
        )
        if rng.random() < 0.1:
            rows.append(row(rows[-1][0], kind, page=nxt, count=0, value=rows[-1][9]))
        nxt += count * ticks + int(rng.integers(0, 2))
    b = arr(rows)
    return b[rng.permutation(len(b))]


def regrouped(rng, b) -> np.ndarray:
    """The same per-page events grouped another way: expanded, page rows cut at random pages,
    shuffled."""
    x = expand_ticks(b)
    out = []
    for r in x.tolist():
        if r[1] in PAGE_KINDS_TWIN and r[6] > 1 and r[5] >= 0 and rng.random() < 0.7:
            cut = int(rng.integers(1, r[6]))
            out += [r[:5] + [r[5], cut] + r[7:], r[:5] + [r[5] + cut, r[6] - cut] + r[7:]]
        else:
            out.append(r)
    out = arr(out)
    return out[rng.permutation(len(out))]


def test_normal_form_against_its_twin():
    rng = np.random.default_rng(39)
    for trial in range(400):
        gen = random_buffer if trial % 4 else disjoint_buffer
        b = gen(rng, int(rng.integers(0, 25)))
        nf = normal_form(b)
        assert nf.tolist() == twin_normal_form(b.tolist()), trial
        assert expand_ticks(b).tolist() == twin_expand(b.tolist())
        # per_page: the other rows and one row per unit page event (key + page)
        u, o = twin_units(b.tolist())
        pp = per_page(b)
        unit_rows = Counter({k[:5] + (k[8], 1) + k[5:8] + (1, 0, 0): n for k, n in u.items()})
        assert Counter(map(tuple, pp.tolist())) == o + unit_rows, trial
        # the same events grouped otherwise: the same normal form
        np.testing.assert_array_equal(normal_form(regrouped(rng, b)), nf)
        np.testing.assert_array_equal(normal_form(pp[rng.permutation(len(pp))]), nf)
        # one page event less: another normal form
        m = np.flatnonzero(pp[:, 6] == 1)
        if m.size:
            fewer = np.delete(pp, int(rng.choice(m)), axis=0)
            assert normal_form(fewer).tolist() != nf.tolist()


# -- the writer's rules ----------------------------------------------------------------------


def ranged_batch(n: int, seed: int) -> np.ndarray:
    """Engine-like rows with range rows among the page moves (valid by the rules)."""
    return with_ranges(engine_like_batch(n, seed=seed), seed=seed)


@pytest.mark.parametrize("n", [40, 700])  # numpy's check (< 256 rows) and the kernel's
def test_writer_refuses_broken_range_rows(tmp_path, n):
    good = ranged_batch(n, seed=5)
    r0 = int(np.flatnonzero(good[:, 1] == FETCH)[3])
    k0 = int(np.flatnonzero(good[:, 1] == K)[0])
    path = tmp_path / "t.h5"
    with EventTraceWriter(path, {}, chunk_rows=64, threads=0) as w:
        w.append(good[:10])
        for edit, msg in (
            (lambda b: b.__setitem__((r0, 10), 0), rf"event {10 + r0}: column 'ticks' = 0 is outside \[1, "),
            (
                lambda b: b[k0].__setitem__(slice(10, 12), (2, 5)),
                rf"event {10 + k0}: column 'ticks' = 2 on a KERNEL row: only FETCH, ALLOC",
            ),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, FETCH, page=0, count=7, ticks=2, period=3)),
                rf"event {10 + r0}: column 'count' = 7 is not a positive multiple of ticks = 2",
            ),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, FETCH, page=0, count=0, ticks=2, period=3)),
                rf"event {10 + r0}: column 'count' = 0 is not a positive multiple",
            ),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, EVICT, page=0, count=4, ticks=2, period=0)),
                rf"event {10 + r0}: column 'period' = 0 with ticks = 2: a range row's period must be > 0",
            ),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, EVICT, page=0, count=4, period=8)),
                rf"event {10 + r0}: column 'period' = 8 with ticks = 1: an ordinary row's period is 0",
            ),
            (lambda b: b.__setitem__((r0, 11), -1), rf"event {10 + r0}: column 'period' = -1 is outside"),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, EVICT, page=0, count=4, stride=5)),
                rf"event {10 + r0}: column 'stride' = 5 with ticks = 1: an ordinary row's stride is 0",
            ),
            (
                lambda b: b[r0].__setitem__(
                    slice(None), row(9, FETCH, page=0, count=4, ticks=2, period=3, stride=2)
                ),
                rf"event {10 + r0}: column 'stride' = 2 is not above the pages of a tick",
            ),
            (lambda b: b.__setitem__((r0, 12), -1), rf"event {10 + r0}: column 'stride' = -1 is outside"),
            (
                lambda b: b[r0].__setitem__(
                    slice(None), row(9, FAULT, page=0, count=4, ticks=2, period=3, stride=5)
                ),
                rf"event {10 + r0}: column 'period' = 3 on a FAULT row of 2 runs: its runs' period is 0",
            ),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, FAULT, page=0, count=4, ticks=2)),
                rf"event {10 + r0}: column 'stride' = 0 on a FAULT row of 2 runs: give its runs' stride",
            ),
            (
                lambda b: b[r0].__setitem__(slice(None), row(9, FAULT, page=0, count=4, ticks=2, stride=2)),
                rf"event {10 + r0}: column 'stride' = 2 is not above the pages of a tick",
            ),
        ):
            bad = good.copy()
            edit(bad)
            with pytest.raises(ValueError, match=msg):
                w.append(bad)
            assert w.n_events == 10  # a refused batch is not written
        w.append(good[10:])
        w.append(good[:, :N_COLS_V1])  # ten columns: ordinary rows
        runs = (good[:, 1] == FAULT) & (good[:, 10] > 1)  # FAULT rows of several runs
        assert runs.any()
        one = good.copy()  # (a row of several runs needs its stride: each its first run here)
        one[runs, 6] //= one[runs, 10]
        one[runs, 10] = 1
        w.append(one[:, :N_COLS_V2])  # twelve columns: stride 0
        with pytest.raises(ValueError, match="on a FAULT row of .* runs: give its runs' stride"):
            w.append(good[:, :N_COLS_V2])
    with open_trace(path) as tr:
        assert tr.schema_version == 4
        got = tr.to_buffer()
    want = np.concatenate([good, good, one])
    want[n : 2 * n, 10], want[n : 2 * n, 11], want[n:, 12] = 1, 0, 0
    np.testing.assert_array_equal(got, want)


def test_range_rows_round_trip_and_per_kind_sums(tmp_path):
    b = ranged_batch(5000, seed=8)
    assert (b[:, 10] > 1).sum() > 500
    path = tmp_path / "r.h5"
    with EventTraceWriter(path, {}, chunk_rows=1000) as w:
        w.append(b[:2345])
        w.append(b[2345:, :N_COLS])
    with open_trace(path) as tr:
        np.testing.assert_array_equal(tr.to_buffer(), b)
        cols = tr.read(["ticks", "period"])
        assert cols["ticks"].dtype == COLUMN_DTYPES["ticks"] == np.int32
        assert cols["period"].dtype == np.int64
        kinds = b[:, 1]
        assert tr.count_by_kind() == {k: int((kinds == k).sum()) for k in EventKind}
        assert tr.ticks_by_kind() == {k: int(b[kinds == k, 10].sum()) for k in EventKind}
        assert tr.pages_by_kind()[EventKind.FETCH] == int(b[kinds == FETCH, 6].sum())
        # expanded in bounded parts: the same rows as expand_ticks of the whole
        parts = list(iter_expanded(tr, rows=700, max_rows=500))
        assert max(len(p["time"]) for p in parts) <= 700
        got = np.stack([np.concatenate([p[c] for p in parts]).astype(np.int64) for c in COLUMNS], axis=1)
        np.testing.assert_array_equal(got, expand_ticks(b))
        sub = list(iter_expanded(tr, rows=1000, columns=["page", "kind"], max_rows=300))
        assert sorted(sub[0]) == ["kind", "page"] and sub[0]["page"].dtype == np.int64
        np.testing.assert_array_equal(np.concatenate([p["page"] for p in sub]), expand_ticks(b)[:, 5])
        # the normal form streamed in bounded parts is the normal form of the whole
        nf = np.concatenate(list(iter_normal_form(tr, rows=600, max_rows=400)))
        np.testing.assert_array_equal(nf, normal_form(b))


def test_iter_normal_form_with_rows_out_of_time_order(tmp_path):
    b = ranged_batch(3000, seed=9)
    rng = np.random.default_rng(9)
    b = b[rng.permutation(len(b))]  # far from time order: rows wait for the watermark
    path = tmp_path / "o.h5"
    with EventTraceWriter(path, {}, chunk_rows=256) as w:
        w.append(b)
    with open_trace(path) as tr:
        parts = list(iter_normal_form(tr, rows=500, max_rows=700))
    np.testing.assert_array_equal(np.concatenate(parts), normal_form(b))


# -- version 1 files -------------------------------------------------------------------------


def write_v1(path, buf10, config=None, meta=None, chunk_rows=1000):
    """A version 1 trace as the version 1 writer left it: ten columns with their checksums,
    schema_version 1, its column list, its attribute digests."""
    with EventTraceWriter(path, config or {}, meta, chunk_rows=chunk_rows) as w:
        w.append(buf10)
    with h5py.File(path, "a", libver=("v110", "v110")) as f:
        for g in ("events", "checksums"):
            del f[g]["ticks"], f[g]["period"], f[g]["stride"]
        a = f.attrs
        a["schema_version"] = np.int64(1)
        a["columns"] = json.dumps(list(COLUMNS[:N_COLS_V1]))
        a["header_sha256"] = _attrs_digest(
            a, ("format", "schema_version", "columns", "kind_names", "location_names", "config", "meta")
        )
        a["attrs_sha256"] = _attrs_digest(
            a,
            (
                "format",
                "schema_version",
                "columns",
                "kind_names",
                "location_names",
                "config",
                "meta",
                "n_events",
                "complete",
                "summary",
            ),
        )
    return path


def run_meta():
    return (
        {"system": {"gpu_frequency_ghz": 1.2, "ssd_bandwidth_gbps": 3.2, "host_link_gbps": 16.0}},
        {"model": "synth", "batch_size": 1, "policy": "lru"},
    )


def test_a_version_1_file_is_read_by_every_reader(tmp_path, capsys):
    """The same run's events as ordinary rows in a version 1 file and as range rows in a
    version 2 file: open_trace, inspect, export and plot read both alike; diff finds them, and
    a version 1 file of the same events one row per page, equal."""
    ranged = ranged_batch(6000, seed=12)
    ticks = expand_ticks(ranged)  # a row per tick, where the range row stood
    flat = per_page(ranged)  # a row per page and tick, in time order
    flat = flat[np.argsort(flat[:, 0], kind="stable")]
    config, meta = run_meta()
    v1 = write_v1(tmp_path / "v1.h5", ticks[:, :N_COLS_V1], config, meta)
    v1p = write_v1(tmp_path / "v1p.h5", flat[:, :N_COLS_V1], config, meta)
    v2 = tmp_path / "v2.h5"
    with EventTraceWriter(v2, config, meta, chunk_rows=1000) as w:
        w.append(ranged)
    with open_trace(v1) as tr:
        assert tr.schema_version == 1 and tr.stored_columns == COLUMNS[:N_COLS_V1]
        assert tr.verify() == []
        cols = tr.read()
        assert list(cols) == list(COLUMNS)
        assert (cols["ticks"] == 1).all() and (cols["period"] == 0).all()
        assert cols["ticks"].dtype == np.int32 and cols["period"].dtype == np.int64
        np.testing.assert_array_equal(tr.to_buffer(), ticks)
        ch = next(tr.iter_chunks(rows=100, columns=["period", "kind"]))
        assert sorted(ch) == ["kind", "period"] and (ch["period"] == 0).all()
        assert tr.ticks_by_kind() == tr.count_by_kind()
        assert tr.pages_by_kind() == open_trace(v2).pages_by_kind()
    # inspect: the version, and for version 2 the rows the ranges stand for
    assert main(["trace", "inspect", str(v1)]) == 0
    out1 = capsys.readouterr().out
    assert "schema 1" in out1 and "ticks" not in out1
    assert main(["trace", "verify", str(v1)]) == 0
    assert f"ok, {10 * -(-len(ticks) // 1000)} chunks checked" in capsys.readouterr().out  # ten columns
    assert main(["trace", "inspect", str(v2)]) == 0
    out2 = capsys.readouterr().out
    fetch = next(x for x in out2.splitlines() if x.strip().startswith("FETCH"))
    with open_trace(v2) as tr:
        n, t, p = (
            f(tr)[EventKind.FETCH]
            for f in (type(tr).count_by_kind, type(tr).ticks_by_kind, type(tr).pages_by_kind)
        )
    assert "schema 4" in out2 and fetch.split() == [
        "FETCH",
        f"{n:,}",
        "events",
        f"{p:,}",
        "pages",
        "(as",
        f"{t:,}",
        "rows",
        "of",
        "ticks)",
    ]
    fault = next(x for x in out2.splitlines() if x.strip().startswith("FAULT"))
    with open_trace(v2) as tr:
        runs, rows = tr.ticks_by_kind()[EventKind.FAULT], tr.count_by_kind()[EventKind.FAULT]
    assert runs > rows and fault.endswith(f"(as {runs:,} rows of runs)")
    assert main(["trace", "inspect", "--json", str(v2)]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["schema_version"] == 4 and js["ticks_by_kind"]["FETCH"] == t
    # export: the same timeline from both (each move placed on its link by time)
    for v in (v1, v2):
        assert main(["trace", "export", str(v), "--out", str(tmp_path / f"{v.stem}.json"), "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["link_slices"] != [0, 0, 0, 0]
    a = json.loads((tmp_path / "v1.json").read_text())
    b = json.loads((tmp_path / "v2.json").read_text())
    assert a == b
    for v in (v1, v2):  # Perfetto protobuf, page-level detail: byte for byte
        assert (
            main(["trace", "export", str(v), "--perfetto", str(tmp_path / f"{v.stem}.pftrace"), "--pages"])
            == 0
        )
    capsys.readouterr()
    assert (tmp_path / "v1.pftrace").read_bytes() == (tmp_path / "v2.pftrace").read_bytes()
    # plot
    for v in (v1, v2):
        assert main(["trace", "plot", str(v), "--out", str(tmp_path / f"{v.stem}.png")]) == 0
        assert f"{v.stem}.png (kernels 0..5)" in capsys.readouterr().out
    assert (tmp_path / "v1.png").read_bytes() == (tmp_path / "v2.png").read_bytes()
    # diff: equal events in normal form, and the first difference otherwise
    for v in (v1, v1p):
        assert main(["trace", "diff", str(v), str(v2), "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["events"]["equal"] and rep["events"]["rows"] == len(normal_form(ranged))
        assert rep["first_start_difference"] is None and rep["top"] == []
    assert main(["trace", "diff", str(v1p), str(v2)]) == 0
    assert "events: the same" in capsys.readouterr().out
    assert main(["trace", "diff", str(v1p), str(v2), "--json", "--no-events"]) == 0
    assert "events" not in json.loads(capsys.readouterr().out)
    changed = flat.copy()
    i = int(np.flatnonzero(changed[:, 1] == EVICT)[100])
    changed[i, 8] = 1 if changed[i, 8] != 1 else 2  # one page evicted elsewhere
    v1b = write_v1(tmp_path / "v1b.h5", changed[:, :N_COLS_V1], config, meta)
    assert main(["trace", "diff", str(v1b), str(v2), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)["events"]
    assert not ev["equal"]
    d = ev["first_difference"]
    assert d["a"]["kind_name"] == "EVICT" and d["a"]["dst"] == changed[i, 8]
    assert d["a"]["time"] == changed[i, 0] and d["b"]["time"] <= changed[i, 0]
    with open_trace(v1b) as ta, open_trace(v2) as tb:
        nfa, nfb = normal_form(ta.to_buffer()), normal_form(tb.to_buffer())
        assert compare_events(ta, tb, rows=777) == ev
    j = d["index"]
    assert (nfa[:j] == nfb[:j]).all() and (nfa[j] != nfb[j]).any()
    assert main(["trace", "diff", str(v1b), str(v2)]) == 0
    assert f"events: first difference at normal-form row {j:,}" in capsys.readouterr().out


def test_a_version_1_file_from_plain_h5py_is_read(tmp_path):
    """A version 1 file built with h5py alone (HDF5's own filters, no checksums, no digests):
    ten columns read as twelve."""
    from g10fast.trace import FORMAT_NAME

    b = engine_like_batch(3000, seed=14)
    path = tmp_path / "plain-v1.h5"
    with h5py.File(path, "w") as f:
        f.attrs.update(
            format=FORMAT_NAME, schema_version=1, complete=True, n_events=len(b), config="{}", meta="{}"
        )
        g = f.create_group("events")
        for c, col in enumerate(COLUMNS[:N_COLS_V1]):
            g.create_dataset(col, data=b[:, c].astype(COLUMN_DTYPES[col]), chunks=(700,), compression="gzip")
    with open_trace(path) as tr:
        assert tr.schema_version == 1 and not tr.has_checksums and tr.verify() == []
        np.testing.assert_array_equal(tr.to_buffer(), b)  # engine_like_batch: ticks 1, period 0
        np.testing.assert_array_equal(tr.to_buffer(100, 200), b[100:200])
        parts = list(iter_expanded(tr, rows=999))
        np.testing.assert_array_equal(np.concatenate([p["period"] for p in parts]), np.zeros(3000))
        np.testing.assert_array_equal(np.concatenate(list(iter_normal_form(tr))), normal_form(b))
    # a version 2 file without its new columns is damaged, not a version 1 file
    with h5py.File(path, "a") as f:
        f.attrs["schema_version"] = 2
    with pytest.raises(InputError, match=r"missing column\(s\) ticks, period"):
        open_trace(path)
    with h5py.File(path, "a") as f:
        f.attrs["schema_version"] = 3
    with pytest.raises(InputError, match=r"missing column\(s\) ticks, period, stride"):
        open_trace(path)


def test_a_version_2_file_reads_with_stride_0(tmp_path, capsys):
    """A version 2 file (twelve columns, range rows without strides) reads as thirteen columns
    with stride 0, and holds the same events as the version 3 file of the same rows."""
    ranged = with_ranges(engine_like_batch(4000, seed=15), seed=15, strided=0.0, faults=0.0)
    assert (ranged[:, 12] == 0).all() and (ranged[:, 10] > 1).any()
    v3 = tmp_path / "v3.h5"
    with EventTraceWriter(v3, {}, chunk_rows=700) as w:
        w.append(ranged)
    v2 = tmp_path / "v2.h5"
    with EventTraceWriter(v2, {}, chunk_rows=700) as w:
        w.append(ranged[:, :N_COLS_V2])
    with h5py.File(v2, "a", libver=("v110", "v110")) as f:
        for g in ("events", "checksums"):
            del f[g]["stride"]
        a = f.attrs
        a["schema_version"] = np.int64(2)
        a["columns"] = json.dumps(list(COLUMNS[:N_COLS_V2]))
        head = ("format", "schema_version", "columns", "kind_names", "location_names", "config", "meta")
        a["header_sha256"] = _attrs_digest(a, head)
        a["attrs_sha256"] = _attrs_digest(a, head + ("n_events", "complete", "summary"))
    with open_trace(v2) as tr:
        assert tr.schema_version == 2 and tr.stored_columns == COLUMNS[:N_COLS_V2] and tr.verify() == []
        np.testing.assert_array_equal(tr.to_buffer(), ranged)
        assert (tr.read(["stride"])["stride"] == 0).all()
        parts = list(iter_expanded(tr, rows=500, max_rows=900))
        np.testing.assert_array_equal(np.concatenate([p["page"] for p in parts]), expand_ticks(ranged)[:, 5])
    assert main(["trace", "diff", str(v2), str(v3)]) == 0
    assert "events: the same" in capsys.readouterr().out


# -- merge_ticks -----------------------------------------------------------------------------


def twin_merge(rows, n_open=MERGE_OPEN):
    """Plain Python of ``merge_ticks``: each page-moving row joins the most recent of the last
    ``n_open`` kept rows of its kind that it continues (same tick and next pages, or its next
    ticks: same pages a tick, period, stride), else is kept (stride 0 for a twelve-column row)."""
    out, opens = [], {}
    for r in rows:
        r = list(r) + [0] * (13 - len(r))
        t, kind, page, n, m = r[0], r[1], r[5], r[6], r[10]
        joined = False
        if kind in (FETCH, ALLOC, EVICT, DEALLOC) and n > 0 and page >= 0 and m >= 1:
            lst = opens.setdefault(kind, [])
            for j, o in enumerate(lst):
                x = out[o]
                if [x[c] for c in (2, 3, 4, 7, 8, 9)] != [r[c] for c in (2, 3, 4, 7, 8, 9)]:
                    continue
                if x[6] + n > 2**31 - 1 or x[10] + m > 2**31 - 1:
                    continue
                if x[10] == 1 and m == 1 and x[0] == t and x[5] + x[6] == page:
                    x[6] += n
                else:
                    c = x[6] // x[10]
                    per = x[11] if x[10] > 1 else t - x[0]
                    s = (x[12] or c) if x[10] > 1 else page - x[5]
                    if n // m != c or per <= 0 or t != x[0] + x[10] * per or s < c:
                        continue
                    if page != x[5] + x[10] * s:
                        continue
                    if m > 1 and (r[11] != per or (r[12] or c) != s):
                        continue
                    x[6] += n
                    x[10] += m
                    x[11] = per
                    x[12] = 0 if s == c else s
                lst.insert(0, lst.pop(j))
                joined = True
                break
            if not joined:
                lst.insert(0, len(out))
                del lst[n_open:]
        if not joined:
            out.append(r)
    return out


def tick_streams(rng, n_rows: int, width: int = 12) -> np.ndarray:
    """Engine-like rows of a few interleaved streams that move pages tick by tick: each a kind,
    tensor and destination, a run of c pages a tick at a stride, now and then a gap, a change of
    count, period or stride, a tick in two pieces, or a range row of several ticks; FAULT and
    KERNEL rows between them."""
    streams = []
    for _ in range(int(rng.integers(1, 11))):
        c = int(rng.integers(1, 6))
        streams.append(
            dict(
                kind=int(rng.choice([FETCH, ALLOC, EVICT, DEALLOC])),
                tensor=int(rng.integers(0, 4)),
                dst=int(rng.integers(0, 3)),
                c=c,
                s=c + int(rng.integers(0, 3)),
                page=int(rng.integers(0, 1000)) * 100,
                t=1000,
                per=int(rng.choice([7, 10])),
            )
        )
    rows = []
    while len(rows) < n_rows:
        st = streams[int(rng.integers(0, len(streams)))]
        u = rng.random()
        if u < 0.05:
            rows.append(row(st["t"], FAULT, page=st["page"], count=3, tensor=st["tensor"]))
            continue
        if u < 0.08:
            st["page"] += int(rng.integers(1, 4))  # a gap
        elif u < 0.1:
            st["c"] = int(rng.integers(1, 6))
            st["s"] = st["c"] + int(rng.integers(0, 3))
        elif u < 0.12:
            st["t"] += int(rng.integers(1, 3))  # off the period
        kw = dict(tensor=st["tensor"], dst=st["dst"], src=3)
        c, s = st["c"], st["s"]
        if u > 0.9 and c > 1:  # the tick in two pieces
            rows.append(row(st["t"], st["kind"], page=st["page"], count=1, **kw))
            rows.append(row(st["t"], st["kind"], page=st["page"] + 1, count=c - 1, **kw))
            st["page"] += s
            st["t"] += st["per"]
        elif u > 0.8 and s == c:  # a range row of a few ticks
            m = int(rng.integers(2, 5))
            rows.append(
                row(st["t"], st["kind"], page=st["page"], count=c * m, ticks=m, period=st["per"], **kw)
            )
            st["page"] += s * m
            st["t"] += st["per"] * m
        else:
            rows.append(row(st["t"], st["kind"], page=st["page"], count=c, **kw))
            st["page"] += s
            st["t"] += st["per"]
    return arr(rows)[:, :width]


def test_merge_ticks_against_its_twin():
    """The kernel writes the rows of its plain-Python twin; they hold the same events (normal
    form), fewer rows where streams run tick by tick, strided where their pages skip."""
    from g10fast.trace_kernels import merge_ticks as kernel

    rng = np.random.default_rng(41)
    strided = joined = 0
    for trial in range(200):
        width = 12 if trial % 2 else 13
        b = tick_streams(rng, int(rng.integers(0, 120)), width)
        got = merge_ticks(b)
        assert got.shape[1] == N_COLS and got.tolist() == twin_merge(b.tolist()), trial
        np.testing.assert_array_equal(normal_form(got), normal_form(b))
        strided += int((got[:, 12] > 0).sum())
        joined += len(b) - len(got)
        # a reused output buffer, and the open rows of a fresh call
        out = np.full((len(b) + 5, N_COLS), 77, np.int64)
        np.testing.assert_array_equal(merge_ticks(b, out), got)
        m = kernel(np.ascontiguousarray(b), out, np.full((4, MERGE_OPEN), -1, np.int64))
        assert m == len(got)
    assert strided > 100 and joined > 2000
    # engine-like rows and ranges (the writer's random batches): the same events, writable
    b = ranged_batch(3000, seed=41)
    got = merge_ticks(b)
    np.testing.assert_array_equal(normal_form(got), normal_form(b))
    assert got.tolist() == twin_merge(b.tolist())


def test_merge_ticks_by_hand():
    kw = dict(src=3, dst=2)
    b = arr(
        [
            row(100, EVICT, page=0, count=1, **kw),  # a stream of 1 page a tick, stride 10
            row(100, EVICT, page=1, count=9, dst=1, src=3),  # another: 9 pages, stride 10
            row(110, EVICT, page=10, count=1, **kw),
            row(110, EVICT, page=11, count=9, dst=1, src=3),
            row(120, EVICT, page=21, count=4, dst=1, src=3),  # a tick in two pieces: joined
            row(120, EVICT, page=25, count=5, dst=1, src=3),  # in their tick, not to the ticks
            row(120, EVICT, page=20, count=1, **kw),
            row(120, FETCH, page=500, count=6, ticks=2, period=10, src=2, dst=3),
            row(140, FETCH, page=506, count=3, src=2, dst=3),  # its next tick
            row(130, EVICT, page=29, count=1, **kw),  # overlapping the stride: not joined
            row(150, FETCH, page=509, count=2, src=2, dst=3),  # another count: not joined
        ]
    )
    got = merge_ticks(b)
    want = arr(
        [
            row(100, EVICT, page=0, count=3, ticks=3, period=10, stride=10, **kw),
            row(100, EVICT, page=1, count=18, ticks=2, period=10, stride=10, dst=1, src=3),
            row(120, EVICT, page=21, count=9, dst=1, src=3),
            row(120, FETCH, page=500, count=9, ticks=3, period=10, src=2, dst=3),
            row(130, EVICT, page=29, count=1, **kw),
            row(150, FETCH, page=509, count=2, src=2, dst=3),
        ]
    )
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(normal_form(got), normal_form(b))
    with pytest.raises(ValueError, match="int64 rows of 12 or 13 columns"):
        merge_ticks(b[:, :10])
    with pytest.raises(ValueError, match=r"out must be int64 \[>= 11, 13\]"):
        merge_ticks(b, np.empty((3, 13), np.int64))
