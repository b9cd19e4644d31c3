"""HDF5 event trace (g10fast/trace.py): round trip, attributes, atomic publish, errors, memory."""

from __future__ import annotations

import gc
import json
import os
import tracemalloc

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from g10fast.errors import InputError
from g10fast.trace import (
    COL_COUNT,
    COL_KIND,
    COL_PAGE,
    COL_PERIOD,
    COL_STRIDE,
    COL_SRC,
    COL_TICKS,
    COL_TIME,
    COLUMN_DTYPES,
    COLUMNS,
    FORMAT_NAME,
    KIND_NAMES,
    LOCATION_NAMES,
    N_COLS,
    SCHEMA_VERSION,
    EventKind,
    EventTraceWriter,
    Location,
    open_trace,
)


def random_events(n: int, seed: int = 0, t0: int = 0) -> np.ndarray:
    """Engine-like events: all kinds, extreme values in every column's stored range."""
    r = np.random.default_rng(seed)
    buf = np.empty((n, N_COLS), dtype=np.int64)
    kind = r.integers(0, len(EventKind), n)
    buf[:, COL_TIME] = t0 + np.cumsum(r.integers(0, 1000, n))
    buf[:, COL_KIND] = kind
    buf[:, 2] = r.integers(-1, 32767, n, endpoint=True)  # iteration (int16)
    buf[:, 3] = r.integers(-1, 2**31 - 1, n, endpoint=True)  # kernel (int32)
    buf[:, 4] = r.integers(-1, 2**31 - 1, n, endpoint=True)  # tensor (int32)
    buf[:, COL_PAGE] = r.integers(-1, 2**62, n)  # page (int64)
    buf[:, COL_COUNT] = r.integers(0, 2**31 - 1, n, endpoint=True)  # count (int32)
    buf[:, COL_SRC] = r.integers(-1, len(Location), n)
    buf[:, 8] = r.integers(-1, len(Location), n)  # dst
    buf[:, 9] = r.integers(-(2**63), 2**63 - 1, n, endpoint=True)  # value (int64)
    buf[:, COL_TICKS] = 1  # ordinary rows (range rows: tests/test_trace_ranges.py)
    buf[:, COL_PERIOD] = 0
    buf[:, COL_STRIDE] = 0
    return buf


def assert_same(trace_cols: dict, buf: np.ndarray) -> None:
    for c, col in enumerate(COLUMNS):
        assert trace_cols[col].dtype == COLUMN_DTYPES[col], col
        np.testing.assert_array_equal(trace_cols[col], buf[:, c], err_msg=col)


def no_temp_files(directory) -> bool:
    return not [p for p in os.listdir(directory) if p.endswith(".tmp")]


# -- round trip ------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [0, 2])
def test_round_trip_with_empty_and_oversized_appends(tmp_path, threads):
    path = tmp_path / "t.h5"
    sizes = [0, 5, 0, 2500, 999, 1, 0, 10_000, 3]  # chunk_rows = 1000
    buf = random_events(sum(sizes), seed=1)
    with EventTraceWriter(path, {"model": "BERT"}, {"run": 1}, chunk_rows=1000, threads=threads) as w:
        pos = 0
        for s in sizes:
            w.append(buf[pos : pos + s])
            pos += s
            assert w.n_events == pos
    assert path.exists() and no_temp_files(tmp_path)

    with open_trace(path, threads=threads) as tr:
        assert tr.n_events == len(tr) == 13_508
        assert_same(tr.read(), buf)
        np.testing.assert_array_equal(tr.to_buffer(), buf)
        part = tr.read(["page", "kind"], start=1234, stop=9876)
        assert sorted(part) == ["kind", "page"]
        np.testing.assert_array_equal(part["page"], buf[1234:9876, COL_PAGE])
        np.testing.assert_array_equal(tr.read("time", start=-10)["time"], buf[-10:, COL_TIME])
        np.testing.assert_array_equal(tr.to_buffer(5, 4005), buf[5:4005])
        chunks = list(tr.iter_chunks(rows=777))
        assert [len(ch["time"]) for ch in chunks] == [777] * 17 + [13_508 - 17 * 777]
        assert_same({c: np.concatenate([ch[c] for ch in chunks]) for c in COLUMNS}, buf)
        sub = list(tr.iter_chunks(rows=3000, columns=["count"], start=100, stop=7100))
        assert [list(ch) for ch in sub] == [["count"]] * 3
        np.testing.assert_array_equal(np.concatenate([ch["count"] for ch in sub]), buf[100:7100, COL_COUNT])

        counts = tr.count_by_kind()
        assert list(counts) == list(EventKind)
        assert [counts[k] for k in EventKind] == np.bincount(buf[:, COL_KIND], minlength=8).tolist()
        pages = tr.pages_by_kind()
        for k in EventKind:
            assert pages[k] == int(buf[buf[:, COL_KIND] == k, COL_COUNT].sum())

    # Plain h5py (HDF5's own filter pipeline) reads the same values and layout.
    with h5py.File(path, "r") as f:
        for c, col in enumerate(COLUMNS):
            ds = f["events"][col]
            assert ds.dtype == COLUMN_DTYPES[col] and ds.chunks == (1000,) and ds.maxshape == (None,)
            assert ds.compression == "gzip" and ds.shuffle
            np.testing.assert_array_equal(ds[...], buf[:, c])


def test_exact_chunk_multiple_and_empty_trace(tmp_path):
    buf = random_events(4000, seed=2)
    with EventTraceWriter(tmp_path / "a.h5", {}, {}, chunk_rows=1000) as w:
        w.append(buf)
    with open_trace(tmp_path / "a.h5") as tr:
        assert tr.n_events == 4000
        assert_same(tr.read(), buf)

    with EventTraceWriter(tmp_path / "e.h5", {}, {}) as w:
        w.append(np.zeros((0, N_COLS), dtype=np.int64))
    with open_trace(tmp_path / "e.h5") as tr:
        assert tr.n_events == 0
        assert list(tr.iter_chunks()) == []
        assert all(v.shape == (0,) for v in tr.read().values())
        assert set(tr.count_by_kind().values()) == {0}
        assert tr.to_buffer().shape == (0, N_COLS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 300), max_size=8),
    chunk_rows=st.integers(8, 128),
    threads=st.sampled_from([0, 1, 3]),
    rows=st.integers(1, 500),
)
def test_round_trip_any_split(tmp_path, sizes, chunk_rows, threads, rows):
    path = tmp_path / "h.h5"
    buf = random_events(sum(sizes), seed=sum(sizes))
    with EventTraceWriter(path, {}, {}, chunk_rows=chunk_rows, threads=threads) as w:
        pos = 0
        for s in sizes:
            w.append(buf[pos : pos + s])
            pos += s
    with open_trace(path, threads=threads) as tr:
        got = list(tr.iter_chunks(rows=rows))
        assert tr.n_events == len(buf)
        if got:
            assert_same({c: np.concatenate([ch[c] for ch in got]) for c in COLUMNS}, buf)


def test_other_integer_dtypes_are_accepted(tmp_path):
    buf = random_events(50, seed=3)
    small = buf.copy()
    small[:, [COL_PAGE, 9]] %= 2**31
    small[:, COL_TIME] %= 2**31
    with EventTraceWriter(tmp_path / "i.h5", {}, {}) as w:
        w.append(small.astype(np.int32))
    with open_trace(tmp_path / "i.h5") as tr:
        assert_same(tr.read(), small)


def test_files_from_other_writers_are_read(tmp_path):
    """Chunks HDF5 encoded itself (shuffle+deflate, decoded in parallel) and other filters (lzf)."""
    buf = random_events(5000, seed=4)
    for name, kw in [
        ("gz.h5", dict(compression="gzip", shuffle=True)),
        ("lzf.h5", dict(compression="lzf")),
        ("plain.h5", dict()),
    ]:
        path = tmp_path / name
        with h5py.File(path, "w") as f:
            f.attrs.update(
                format=FORMAT_NAME,
                schema_version=SCHEMA_VERSION,
                complete=True,
                n_events=len(buf),
                config="{}",
                meta="{}",
            )
            g = f.create_group("events")
            for c, col in enumerate(COLUMNS):
                g.create_dataset(
                    col, data=buf[:, c].astype(COLUMN_DTYPES[col]), chunks=(700,), maxshape=(None,), **kw
                )
        with open_trace(path, threads=2) as tr:
            assert tr.chunk_rows == 700
            assert_same(tr.read(), buf)
            got = list(tr.iter_chunks(rows=2100, start=333))
            np.testing.assert_array_equal(np.concatenate([ch["value"] for ch in got]), buf[333:, 9])


# -- attributes ------------------------------------------------------------------------------


def test_attributes(tmp_path):
    path = tmp_path / "t.h5"
    config = {
        "policy": "G10",
        "gpu_mem_gb": np.float64(16.0),
        "n": np.int64(3),
        "sizes": np.arange(3),
        "out": tmp_path / "x",
        "big": "x" * 100_000,
    }
    meta = {"version": "0.1.0", "wall_s": 1.5}
    summary = {"iterations": [{"exec_cycles": 123, "faults": 4}, {"exec_cycles": 120, "faults": 0}]}
    with EventTraceWriter(path, config, meta, chunk_rows=64) as w:
        w.append(random_events(100))
        w.set_summary(summary)
    with h5py.File(path, "r") as f:
        a = f.attrs
        assert a["format"] == "g10fast-event-trace"
        assert int(a["schema_version"]) == SCHEMA_VERSION == 4 and a["schema_version"].dtype.kind == "i"
        assert bool(a["complete"]) is True and int(a["n_events"]) == 100
        assert json.loads(a["kind_names"]) == [
            "KERNEL",
            "FAULT",
            "FETCH",
            "ALLOC",
            "EVICT",
            "HINT",
            "DEALLOC",
            "TRANSFER",
        ]
        assert json.loads(a["location_names"]) == [
            "NOT_PRESENT",
            "IN_SSD",
            "IN_CPU",
            "IN_GPU",
            "NOT_KNOWN",
            "IN_GPU_LEAST",
        ]
        assert json.loads(a["columns"]) == list(COLUMNS)
        assert json.loads(a["summary"]) == summary
    expected_config = {
        "policy": "G10",
        "gpu_mem_gb": 16.0,
        "n": 3,
        "sizes": [0, 1, 2],
        "out": str(tmp_path / "x"),
        "big": "x" * 100_000,
    }
    with open_trace(path) as tr:
        assert tr.schema_version == 4
        assert tr.config == expected_config
        assert tr.meta == meta and tr.summary == summary
        assert tr.kind_names == KIND_NAMES and tr.location_names == LOCATION_NAMES

    with EventTraceWriter(tmp_path / "s.h5", {"a": 1}, None) as w:
        pass
    with open_trace(tmp_path / "s.h5") as tr:
        assert tr.summary is None and tr.meta == {} and tr.config == {"a": 1}
        assert tr.n_events == 0

    w = EventTraceWriter(tmp_path / "c.h5", {}, {})
    w.close(summary={"total": 7})
    with open_trace(tmp_path / "c.h5") as tr:
        assert tr.summary == {"total": 7}


def test_enums_and_column_constants():
    assert [int(k) for k in EventKind] == list(range(8))
    assert EventKind.EVICT == 4 and EventKind.TRANSFER == 7
    assert Location.IN_GPU_LEAST == 5 and Location.NOT_PRESENT == 0
    assert COLUMNS.index("kind") == COL_KIND == 1 and COLUMNS.index("page") == COL_PAGE == 5
    assert N_COLS == len(COLUMNS) == 13 and COLUMNS[COL_TICKS] == "ticks" and COLUMNS[COL_PERIOD] == "period"
    assert COLUMNS[COL_STRIDE] == "stride"
    assert sum(COLUMN_DTYPES[c].itemsize for c in COLUMNS) == 61


# -- atomic publication ----------------------------------------------------------------------


def test_exception_inside_with_leaves_nothing(tmp_path):
    path = tmp_path / "t.h5"
    with pytest.raises(RuntimeError, match="engine failed"):
        with EventTraceWriter(path, {}, {}, chunk_rows=100) as w:
            w.append(random_events(1000))
            assert not path.exists()  # only the temporary file exists while writing
            assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(w.tmp_path)]
            assert os.path.dirname(w.tmp_path) == str(tmp_path)
            raise RuntimeError("engine failed")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_existing_target(tmp_path):
    path = tmp_path / "t.h5"
    path.write_bytes(b"previous trace")
    with pytest.raises(KeyboardInterrupt):
        with EventTraceWriter(path, {}, {}) as w:
            w.append(random_events(10))
            raise KeyboardInterrupt
    assert path.read_bytes() == b"previous trace"
    assert no_temp_files(tmp_path)
    with EventTraceWriter(path, {}, {}) as w:  # a successful write replaces it
        w.append(random_events(10))
    assert open_trace(path).n_events == 10


def test_abort_and_unclosed_writer(tmp_path):
    w = EventTraceWriter(tmp_path / "a.h5", {}, {})
    w.append(random_events(10))
    w.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="aborted"):
        w.append(random_events(1))
    w.abort()  # idempotent

    with EventTraceWriter(tmp_path / "b.h5", {}, {}) as w:
        w.append(random_events(10))
        w.abort()  # leaving the block normally after an explicit abort publishes nothing
    assert list(tmp_path.iterdir()) == []

    w = EventTraceWriter(tmp_path / "c.h5", {}, {}, threads=2)
    w.append(random_events(10))
    del w
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_closed_writer_rejects_appends(tmp_path):
    w = EventTraceWriter(tmp_path / "a.h5", {}, {})
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        w.append(random_events(1))


# -- bad input -------------------------------------------------------------------------------


def test_append_rejects_bad_batches_without_side_effects(tmp_path):
    path = tmp_path / "t.h5"
    good = random_events(30, seed=5)
    with EventTraceWriter(path, {}, {}, chunk_rows=8) as w:
        w.append(good[:10])
        with pytest.raises(ValueError, match=r"shape \(n, 13\), \(n, 12\) or \(n, 10\)"):
            w.append(np.zeros((3, 9), dtype=np.int64))
        with pytest.raises(ValueError, match=r"shape"):
            w.append(np.zeros(10, dtype=np.int64))
        with pytest.raises(TypeError, match="integers"):
            w.append(np.zeros((3, 10)))
        bad = good[10:30].copy()
        bad[15, COL_KIND] = 8
        with pytest.raises(ValueError, match=r"event 25: column 'kind' = 8 is outside \[0, 7\]"):
            w.append(bad)
        bad = good[10:30].copy()
        bad[3, 2] = 40_000
        with pytest.raises(ValueError, match=r"event 13: column 'iteration' = 40000"):
            w.append(bad)
        bad = good[10:30].copy()
        bad[19, COL_SRC] = -2
        with pytest.raises(ValueError, match=r"column 'src' = -2 is outside \[-1, 5\]"):
            w.append(bad)
        assert w.n_events == 10
        w.append(good[10:])
    with open_trace(path) as tr:
        assert_same(tr.read(), good)


def test_writer_argument_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        EventTraceWriter(tmp_path / "no" / "t.h5", {}, {})
    with pytest.raises(InputError, match="is a directory"):
        EventTraceWriter(tmp_path, {}, {})
    with pytest.raises(TypeError, match="config cannot be stored as JSON"):
        EventTraceWriter(tmp_path / "t.h5", {"f": object()}, {})
    with pytest.raises(ValueError, match="chunk_rows"):
        EventTraceWriter(tmp_path / "t.h5", {}, {}, chunk_rows=0)
    assert [p for p in tmp_path.iterdir()] == []


def _valid_trace(path, n=20):
    with EventTraceWriter(path, {}, {}) as w:
        w.append(random_events(n))
    return path


def test_open_errors(tmp_path):
    with pytest.raises(InputError, match="no such event trace file") as e:
        open_trace(tmp_path / "missing.h5")
    assert e.value.path == str(tmp_path / "missing.h5")

    with pytest.raises(InputError, match="directory"):
        open_trace(tmp_path)

    text = tmp_path / "notes.h5"
    text.write_text("kernel 0 start\n")
    with pytest.raises(InputError, match="not an HDF5 file"):
        open_trace(text)

    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.attrs["format"] = "g10fast-workload-trace"
    with pytest.raises(InputError, match="not a g10fast event trace.*'g10fast-workload-trace'"):
        open_trace(other)
    with h5py.File(other, "w") as f:
        f["x"] = 1
    with pytest.raises(InputError, match="format attribute is None"):
        open_trace(other)

    def edited(name, edit, keep_digest=False):
        path = _valid_trace(tmp_path / name)
        with h5py.File(path, "a") as f:
            edit(f)
            if not keep_digest:  # as a writer without attribute checksums leaves it
                for k in ("attrs_sha256", "header_sha256"):
                    if k in f.attrs:
                        del f.attrs[k]
        return path

    for attr, value in (
        ("complete", False),
        ("n_events", 19),
        ("config", '{"a": 2}'),
        ("summary", '{"x": 1}'),
    ):
        changed = edited(f"d-{attr}.h5", lambda f: f.attrs.__setitem__(attr, value), True)
        with pytest.raises(InputError, match="root attributes are damaged"):
            open_trace(changed, allow_incomplete=True)

    future = edited("v5.h5", lambda f: f.attrs.__setitem__("schema_version", 5))
    with pytest.raises(
        InputError, match="unsupported event trace schema_version 5 .*reads versions 1, 2, 3, 4"
    ):
        open_trace(future)
    no_version = edited("v0.h5", lambda f: f.attrs.__delitem__("schema_version"))
    with pytest.raises(InputError, match="schema_version"):
        open_trace(no_version)

    missing = edited("m.h5", lambda f: (f["events"].__delitem__("page"), f["events"].__delitem__("dst")))
    with pytest.raises(InputError, match=r"missing column\(s\) page, dst"):
        open_trace(missing)
    no_group = edited("g.h5", lambda f: f.__delitem__("events"))
    with pytest.raises(InputError, match="missing group /events"):
        open_trace(no_group)

    short = edited("short.h5", lambda f: f["events"]["time"].resize((5,)))
    with pytest.raises(InputError, match=r"column lengths \[5, 20\] disagree with n_events = 20"):
        open_trace(short)

    incomplete = edited("inc.h5", lambda f: f.attrs.__setitem__("complete", False))
    with pytest.raises(InputError, match="incomplete event trace"):
        open_trace(incomplete)
    with open_trace(incomplete, allow_incomplete=True) as tr:
        assert tr.n_events == 20 and not tr.complete

    bad_json = edited("j.h5", lambda f: f.attrs.__setitem__("config", "{not json"))
    with pytest.raises(InputError, match="attribute 'config' is not valid JSON"):
        open_trace(bad_json)

    with open_trace(_valid_trace(tmp_path / "ok.h5")) as tr:
        with pytest.raises(InputError, match="unknown column.*pages"):
            tr.read(["pages"])


def test_crashed_writer_temp_file_reads_as_incomplete(tmp_path):
    """What a killed process leaves behind: the temporary file, marked incomplete."""
    w = EventTraceWriter(tmp_path / "t.h5", {}, {}, chunk_rows=100, threads=0)
    w.append(random_events(250))  # two chunks stored, 50 rows buffered
    w._file.flush()
    with pytest.raises(InputError, match="incomplete"):
        open_trace(w.tmp_path)
    with open_trace(w.tmp_path, allow_incomplete=True) as tr:
        assert tr.n_events == 200
        np.testing.assert_array_equal(tr.read(["time"])["time"], random_events(250)[:200, 0])
    w.abort()
    assert list(tmp_path.iterdir()) == []


# -- bounded memory --------------------------------------------------------------------------


def test_five_million_events_in_bounded_memory(tmp_path):
    """Write 5 M events (480 MB as int64 batches) and read them back with < 31 MiB of allocations.

    The writer holds up to threads + 3 sets of 65,536 rows: with 2 threads 19.1 MiB were
    measured at schema 1's 41 bytes a row (when the limit was 24 MiB) and 24.2 MiB at schema 2's
    53 (numpy's range check; 23.6 with the kernel): the limit grew with the row, 24 * 53 / 41."""
    n_batches, batch_rows = 50, 100_000
    r = np.random.default_rng(6)
    batch = np.zeros((batch_rows, N_COLS), dtype=np.int64)  # engine-like, compressible values
    batch[:, COL_TIME] = np.cumsum(r.integers(0, 300, batch_rows))
    batch[:, COL_KIND] = r.integers(0, 3, batch_rows)
    batch[:, 3] = np.arange(batch_rows) // 200
    batch[:, 4] = r.integers(0, 3000, batch_rows)
    batch[:, COL_PAGE] = batch[:, 4] * 5000 + r.integers(0, 5000, batch_rows)
    batch[:, COL_COUNT] = r.integers(1, 64, batch_rows)
    batch[:, COL_SRC] = r.integers(0, 3, batch_rows)
    batch[:, 8] = 3
    batch[:, 9] = r.integers(0, 2, batch_rows)
    batch[:, COL_TICKS] = 1
    span = int(batch[-1, COL_TIME]) + 1
    path = tmp_path / "big.h5"
    limit = 31 * 2**20
    # first use (the writer's kernel loaded from Numba's cache, the codecs' imports) allocates
    # ~40 MB once, which run alone the test counted (61.8 MB at 3ba86b1): warmed up first
    with EventTraceWriter(tmp_path / "warm.h5", {}, {}, threads=2) as w:
        w.append(batch[:70_000])
    with open_trace(tmp_path / "warm.h5", threads=2) as tr:
        list(tr.iter_chunks(columns=["time", "kind", "count"]))
        tr.count_by_kind(), tr.pages_by_kind()

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with EventTraceWriter(path, {}, {}, threads=2) as w:
            for i in range(n_batches):
                w.append(batch)
                batch[:, COL_TIME] += span  # the engine reuses its buffer
        write_peak = tracemalloc.get_traced_memory()[1] - base

        tracemalloc.reset_peak()
        total_time = 0
        n_read = 0
        with open_trace(path, threads=2) as tr:
            assert tr.n_events == n_batches * batch_rows
            for ch in tr.iter_chunks(columns=["time", "kind", "count"]):
                n_read += len(ch["time"])
                total_time += int(ch["time"][-1])
            counts = tr.count_by_kind()
            pages = tr.pages_by_kind()
        read_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()

    assert n_read == n_batches * batch_rows
    assert total_time > 0
    per_batch = np.bincount(batch[:, COL_KIND], minlength=8)
    assert [counts[k] for k in EventKind] == (per_batch * n_batches).tolist()
    assert pages[EventKind.FETCH] == n_batches * int(batch[batch[:, COL_KIND] == 2, COL_COUNT].sum())
    assert write_peak < limit, write_peak
    assert read_peak < limit, read_peak


@pytest.mark.parametrize("keep", [0, 5, 64, 100, 130, 150])
def test_rewind_drops_the_tail(tmp_path, keep):
    """rewind(n) keeps exactly the first n events, wherever n falls (written chunk, pending
    chunk or buffer), and the writer goes on appending after them."""
    buf = random_events(150, seed=3)
    extra = random_events(40, seed=4, t0=10**9)
    path = tmp_path / "r.h5"
    with EventTraceWriter(path, config={}, chunk_rows=32, threads=1) as w:
        w.append(buf)
        w.rewind(keep)
        assert w.n_events == keep
        w.append(extra)
    with open_trace(path) as tr:
        assert len(tr) == keep + 40
        assert_same(tr.read(), np.concatenate([buf[:keep], extra]))


# -- damage: checksums, verify, messages (docs/damaged-files.md) ------------------------------


def _chunk_offset(path, col: str, k: int) -> tuple[int, int]:
    """(file offset, size) of chunk k of a column."""
    with h5py.File(path, "r") as f:
        info = f["events"][col].id.get_chunk_info(k)
        return info.byte_offset, info.size


def _flip(path, off: int) -> None:
    data = bytearray(open(path, "rb").read())
    data[off] ^= 0x10
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("threads", [0, 2])
def test_a_damaged_chunk_is_named_by_verify_inspect_and_reads(tmp_path, capsys, threads):
    from g10fast.cli import main
    from g10fast.trace import verify_trace

    path = tmp_path / "t.h5"
    with EventTraceWriter(path, {}, {}, chunk_rows=1000) as w:
        w.append(random_events(5500))
    assert main(["trace", "verify", str(path)]) == 0
    assert "ok, 78 chunks checked" in capsys.readouterr().out  # 6 chunks x 13 columns
    off, size = _chunk_offset(path, "time", 3)
    _flip(path, off + size // 2)
    rep = verify_trace(path)
    assert rep["damaged"] == ["column 'time' chunk 3 (events 3000-3999): checksum mismatch"]
    assert main(["trace", "verify", str(path)]) == 2
    out = capsys.readouterr().out
    assert main(["trace", "verify", "--json", str(path)]) == 2
    js = json.loads(capsys.readouterr().out)
    assert js["damaged"] == ["column 'time' chunk 3 (events 3000-3999): checksum mismatch"]
    assert js["checksums"] and js["complete"] and js["n_events"] == 5500
    assert "damaged column 'time' chunk 3 (events 3000-3999): checksum mismatch" in out
    assert main(["trace", "inspect", str(path)]) == 2  # inspect reads kind/count only
    err = capsys.readouterr().err
    assert "event trace is damaged: column 'time' chunk 3" in err and err.count("\n") == 1
    with open_trace(path, threads=threads) as tr:
        assert tr.read(["time"], 0, 3000)["time"].shape == (3000,)  # chunks before it
        with pytest.raises(
            InputError,
            match=r"column 'time' chunk 3 \(events 3000-3999\): "
            r"checksum mismatch",
        ):
            tr.read(["time"])
        with pytest.raises(InputError, match="checksum mismatch"):
            list(tr.iter_chunks(rows=500))


def test_a_damaged_chunk_of_a_trace_without_checksums_is_an_input_error(tmp_path):
    """Traces written before the checksums: a chunk that no longer decodes is named (never a
    zlib.error traceback)."""
    from g10fast.trace import verify_trace

    path = tmp_path / "old.h5"
    with EventTraceWriter(path, {}, {}, chunk_rows=1000) as w:
        w.append(random_events(3000))
    with h5py.File(path, "a") as f:
        del f["checksums"]
        for k in ("attrs_sha256", "header_sha256"):
            del f.attrs[k]
    off, size = _chunk_offset(path, "page", 1)
    data = bytearray(open(path, "rb").read())
    data[off : off + size] = bytes(size)  # the chunk's bytes zeroed
    open(path, "wb").write(bytes(data))
    rep = verify_trace(path)
    assert not rep["checksums"] and len(rep["damaged"]) == 1
    assert rep["damaged"][0].startswith("column 'page' chunk 1 (events 1000-1999): unreadable")
    for threads in (0, 2):
        with open_trace(path, threads=threads) as tr:
            with pytest.raises(InputError, match="event trace is damaged: column 'page'"):
                tr.read(["page"])


def test_damaged_trace_structure_messages(tmp_path):
    path = _valid_trace(tmp_path / "t.h5", n=3000)
    with h5py.File(path, "a") as f:  # a checksum table cut short
        f["checksums"]["kind"].resize((0,))
    with pytest.raises(InputError, match="event trace is damaged: 0 chunk checksums for 1 chunks"):
        open_trace(path)
    trunc = _valid_trace(tmp_path / "u.h5", n=3000)
    data = open(trunc, "rb").read()
    open(trunc, "wb").write(data[: len(data) // 2])
    with pytest.raises(InputError, match="u.h5: cannot open event trace \\(damaged HDF5 file"):
        open_trace(trunc)


def test_a_trace_being_written_is_named(tmp_path):
    w = EventTraceWriter(tmp_path / "t.h5", {}, {}, chunk_rows=100, threads=0)
    w.append(random_events(250))
    with pytest.raises(
        InputError, match=f"no such event trace file yet: process {os.getpid()} is writing it"
    ):
        open_trace(tmp_path / "t.h5")
    with open_trace(w.tmp_path, allow_incomplete=True) as tr:  # read while it writes
        assert tr.n_events == 200
    w.close()
    with open_trace(tmp_path / "t.h5") as tr:
        assert tr.n_events == 250 and tr.verify() == []


def test_a_file_left_open_for_writing_by_another_program(tmp_path):
    """A killed non-SWMR HDF5 writer (not g10fast's) leaves the "open for write" flag: one
    message, not a traceback."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "other.h5"
    child = (
        "import h5py, sys, time\n"
        "f = h5py.File(sys.argv[1], 'w', libver=('v110', 'v110'))\n"
        "f.attrs['format'] = 'g10fast-event-trace'\n"
        "f.flush()\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", child, str(path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGKILL)
    p.wait()
    with pytest.raises(
        InputError,
        match="cannot open event trace \\(open for writing by another program, or a damaged HDF5 file",
    ):
        open_trace(path, allow_incomplete=True)


def test_two_runs_write_byte_identical_traces(tmp_path):
    """Issue 37 item 9: the planner's wall time (plan_seconds) was in the hashed summary
    attribute, so two prefetch_lru traces of one configuration differed; wall-clock
    measurements (g10fast.trace.TIMING_KEYS) stay in the result and out of the trace."""
    from g10fast.run import run
    from g10fast.spec import builtin_spec
    from g10fast.trace import TIMING_KEYS, open_trace, without_timings

    spec = builtin_spec("bert-base", 8, "g10-artifact", "prefetch_lru", overrides={"gpu.memory_gb": 3.0})
    paths = [tmp_path / f"t{i}.h5" for i in range(2)]
    results = [run(spec, trace_path=str(p)) for p in paths]
    assert all(r["plan"]["hints"] > 0 for r in results)  # a real plan was made
    assert "plan_seconds" in results[0]["plan"]  # still in the result
    assert paths[0].read_bytes() == paths[1].read_bytes()
    tr = open_trace(paths[0])
    try:
        assert "plan_seconds" not in tr.summary["plan"]
        assert tr.summary["plan"]["hints"] == results[0]["plan"]["hints"]
    finally:
        tr.close()
    assert without_timings(
        {
            "a": [{"plan_seconds": 1, "b": 2}],
            "wall_seconds": 3,
            "c": {"cpu_seconds": 4, "peak_rss_bytes": 5, "d": 6},
        }
    ) == {"a": [{"b": 2}], "c": {"d": 6}}
    assert TIMING_KEYS == {"plan_seconds", "wall_seconds", "cpu_seconds", "peak_rss_bytes"}
