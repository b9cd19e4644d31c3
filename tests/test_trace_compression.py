"""The event-trace writer's compression option (g10fast/trace.py, docs/trace-format.md
"Compression"): "none" stores chunks unfiltered; every reader path works on such files, the
per-chunk CRC-32 still catches damage, and the default "deflate" files are unchanged."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from synth_trace import engine_like_batch
from test_trace import _chunk_offset, _flip, assert_same, no_temp_files, random_events

from g10fast.cli import main
from g10fast.errors import InputError
from g10fast.perfetto import export_trace, inspect_json
from g10fast.trace import COLUMN_DTYPES, COLUMNS, EventTraceWriter, open_trace, verify_trace

H5Z_SHUFFLE, H5Z_DEFLATE = 2, 1


def _filters(ds) -> list:
    plist = ds.id.get_create_plist()
    return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]


def _write(path, buf, compression, chunk_rows=1000, threads=2, sizes=None):
    with EventTraceWriter(
        path, {"model": "BERT"}, {"run": 1}, chunk_rows=chunk_rows, threads=threads, compression=compression
    ) as w:
        w.set_kernel_times(np.arange(50) * 7)
        pos = 0
        for s in sizes or [len(buf)]:
            w.append(buf[pos : pos + s])
            pos += s
    return path


@pytest.mark.parametrize("threads", [0, 2])
def test_uncompressed_round_trip(tmp_path, threads):
    sizes = [0, 5, 2500, 999, 1, 0, 10_000, 3]  # partial chunks, a partial last chunk
    buf = random_events(sum(sizes), seed=11)
    path = _write(tmp_path / "n.h5", buf, "none", threads=threads, sizes=sizes)
    assert no_temp_files(tmp_path)
    with h5py.File(path, "r") as f:  # plain HDF5: no filters, same values
        for c, col in enumerate(COLUMNS):
            ds = f["events"][col]
            assert _filters(ds) == [] and ds.compression is None and ds.chunks == (1000,)
            np.testing.assert_array_equal(ds[()], buf[:, c], err_msg=col)
            # the stored bytes are the values themselves (the last chunk padded with zeros),
            # and the checksum is their CRC-32
            mask, data = ds.id.read_direct_chunk((13_000,))
            want = np.zeros(1000, COLUMN_DTYPES[col])
            want[:508] = buf[13_000:, c]
            assert mask == 0 and data == want.tobytes()
            assert int(f["checksums"][col][13]) == zlib.crc32(data)
    with open_trace(path, threads=threads) as tr:
        assert tr.compression == "none" and tr.n_events == len(buf) and tr.chunk_rows == 1000
        assert_same(tr.read(), buf)
        got = list(tr.iter_chunks(rows=2100, start=333, columns=["time", "value"]))
        np.testing.assert_array_equal(np.concatenate([g["value"] for g in got]), buf[333:, 9])
        np.testing.assert_array_equal(tr.to_buffer(777, 5000), buf[777:5000])
        np.testing.assert_array_equal(tr.kernel_exec_cycles(), np.arange(50) * 7)
        assert tr.verify() == []
    rep = verify_trace(path)
    assert rep["damaged"] == [] and rep["chunks"] == 14 * len(COLUMNS) and rep["checksums"]


def test_default_is_deflate_and_unchanged(tmp_path):
    """The default is shuffle + deflate (level 1 in the filter's parameters), each chunk a zlib
    stream (ISA-L's) that plain zlib, and so HDF5's own deflate filter, inflates to the
    chunk's byte planes; "deflate" named explicitly writes the same file."""
    buf = random_events(3500, seed=12)
    with EventTraceWriter(tmp_path / "d.h5", {"model": "BERT"}, {"run": 1}, chunk_rows=1000, threads=2) as w:
        w.set_kernel_times(np.arange(50) * 7)
        w.append(buf)
    _write(tmp_path / "e.h5", buf, "deflate")
    assert (tmp_path / "d.h5").read_bytes() == (tmp_path / "e.h5").read_bytes()
    with h5py.File(tmp_path / "d.h5", "r") as f:
        ds = f["events"]["page"]
        assert _filters(ds) == [H5Z_SHUFFLE, H5Z_DEFLATE] and ds.compression_opts == 1
        _, data = ds.id.read_direct_chunk((1000,))
        planes = buf[1000:2000, 5].astype("<i8").view(np.uint8).reshape(-1, 8).T.copy()
        assert zlib.decompress(data) == planes.tobytes()
        np.testing.assert_array_equal(ds[1000:2000], buf[1000:2000, 5])  # HDF5's filters
    with open_trace(tmp_path / "d.h5") as tr:
        assert tr.compression == "deflate"
        assert_same(tr.read(), buf)


def test_unknown_compression_is_refused(tmp_path):
    with pytest.raises(
        InputError, match="parameter 'compression': unknown trace compression 'lzf'; choose deflate or none"
    ):
        EventTraceWriter(tmp_path / "x.h5", {}, compression="lzf")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("threads", [0, 2])
def test_verify_catches_a_flipped_byte(tmp_path, capsys, threads):
    path = _write(tmp_path / "n.h5", random_events(5500, seed=13), "none", threads=threads)
    assert main(["trace", "verify", str(path)]) == 0
    assert "ok, 78 chunks checked" in capsys.readouterr().out  # 6 chunks x 13 columns
    off, size = _chunk_offset(path, "value", 2)
    assert size == 8000  # stored as is: 1000 int64
    _flip(path, off + 4321)
    want = "column 'value' chunk 2 (events 2000-2999): checksum mismatch"
    assert verify_trace(path)["damaged"] == [want]
    assert main(["trace", "verify", str(path)]) == 2
    assert want in capsys.readouterr().out
    assert main(["trace", "inspect", str(path)]) == 2
    assert "event trace is damaged: column 'value' chunk 2" in capsys.readouterr().err
    with open_trace(path, threads=threads) as tr:
        assert tr.read(["value"], 0, 2000)["value"].shape == (2000,)
        with pytest.raises(InputError, match="column 'value' chunk 2 .*checksum mismatch"):
            tr.read(["value"])
        with pytest.raises(InputError, match="checksum mismatch"):
            list(tr.iter_chunks(rows=700))


def test_incomplete_uncompressed_trace_reads_up_to_its_last_chunk(tmp_path):
    w = EventTraceWriter(tmp_path / "t.h5", {}, {}, chunk_rows=100, threads=0, compression="none")
    buf = random_events(250)
    w.append(buf)  # two chunks stored, 50 rows buffered
    w._file.flush()
    with open_trace(w.tmp_path, allow_incomplete=True) as tr:
        assert tr.n_events == 200
        assert_same(tr.read(), buf[:200])
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_rewind_of_an_uncompressed_trace(tmp_path):
    buf, extra = random_events(150, seed=3), random_events(40, seed=4, t0=10**9)
    with EventTraceWriter(tmp_path / "r.h5", {}, chunk_rows=32, threads=1, compression="none") as w:
        w.append(buf)
        w.rewind(70)
        w.append(extra)
    with open_trace(tmp_path / "r.h5") as tr:
        assert_same(tr.read(), np.concatenate([buf[:70], extra]))


def test_export_and_inspect_are_the_same_as_for_deflate(tmp_path, capsys):
    """`trace export` (perfetto and json) and `trace inspect --json` of an uncompressed trace
    give byte for byte what they give for the same events compressed."""
    buf = engine_like_batch(12_345, seed=3)
    meta = {
        "model": "Synth",
        "batch_size": 8,
        "policy": "lru",
        "kernel_names": [f"kern_{i}" for i in range(1000)],
    }
    cfg = {
        "system": {"gpu_frequency_ghz": 1.2, "ssd_bandwidth_gbps": 3.2, "host_link_gbps": 15.754},
        "policy": {"name": "x"},
    }
    paths = {}
    for comp in ("deflate", "none"):
        p = tmp_path / f"{comp}.h5"
        with EventTraceWriter(p, cfg, meta, chunk_rows=4096, compression=comp) as w:
            w.set_kernel_times(np.arange(1000) * 100 + 500_000)
            w.append(buf)
        paths[comp] = p
    assert paths["none"].stat().st_size > 3 * paths["deflate"].stat().st_size
    outs = {}
    for comp, p in paths.items():
        rep = export_trace(p, tmp_path / f"{comp}.pftrace", merge_gap=0)
        assert rep["packets"] > 13
        assert (
            main(
                [
                    "trace",
                    "export",
                    str(p),
                    "--perfetto",
                    str(tmp_path / f"{comp}.json"),
                    "--format",
                    "json",
                    "--no-progress",
                ]
            )
            == 0
        )
        js = inspect_json(p)
        js.pop("file")
        outs[comp] = (
            (tmp_path / f"{comp}.pftrace").read_bytes(),
            json.loads((tmp_path / f"{comp}.json").read_text()),
            js,
        )
    capsys.readouterr()
    assert outs["none"][0] == outs["deflate"][0]
    assert outs["none"][1] == outs["deflate"][1] and len(outs["none"][1]["traceEvents"]) > 13
    assert outs["none"][2].pop("compression") == "none"
    assert outs["deflate"][2].pop("compression") == "deflate"
    assert outs["none"][2] == outs["deflate"][2] and outs["none"][2]["events"] == 12_345


ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"


@pytest.mark.skipif(
    not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="../shared/g10-artifact not present"
)
def test_cli_run_writes_an_uncompressed_trace(tmp_path, capsys):
    from test_cli import _config

    cfg = _config(tmp_path, {"is_UVM": "0"})
    for comp in ("deflate", "none"):
        argv = ["run", str(cfg), "--json", "--no-progress", "--trace", str(tmp_path / f"{comp}.h5")]
        assert main(argv + (["--trace-compression", comp] if comp == "none" else [])) == 0
    capsys.readouterr()
    with open_trace(tmp_path / "none.h5") as a, open_trace(tmp_path / "deflate.h5") as b:
        assert a.compression == "none" and b.compression == "deflate"
        assert a.n_events == b.n_events == 2 * 1369
        ra, rb = a.read(), b.read()
        for col in COLUMNS:
            np.testing.assert_array_equal(ra[col], rb[col], err_msg=col)
    with pytest.raises(SystemExit) as e:  # argparse: one usage line, status 2
        main(["run", str(cfg), "--trace", str(tmp_path / "x.h5"), "--trace-compression", "lzf"])
    assert e.value.code == 2
    assert "lzf" in capsys.readouterr().err


# -- the writer's Numba kernels against plain numpy (g10fast/trace_kernels.py) ----------------


def test_split_checked_kernel_matches_numpy():
    """The writer's one-pass kernel: every column split exactly, and a value just outside a
    column's range (and only such a value) reported; the bounds are those of _CHECKED."""
    from g10fast.trace import _CHECK_HI, _CHECK_LO, _CHECKED
    from g10fast.trace_kernels import split_checked

    r = np.random.default_rng(21)
    good = random_events(3000, seed=21)
    cols = [np.full(4000, 99, COLUMN_DTYPES[c]) for c in COLUMNS]
    assert not split_checked(good, 100, _CHECK_LO, _CHECK_HI, *cols)
    for c, col in enumerate(COLUMNS):
        np.testing.assert_array_equal(cols[c][100:3100], good[:, c].astype(COLUMN_DTYPES[col]))
        assert (cols[c][:100] == 99).all() and (cols[c][3100:] == 99).all()
    checked = {c for c, _, _ in _CHECKED}
    assert [c for c in range(len(COLUMNS)) if _CHECK_LO[c] > np.iinfo(np.int64).min] == sorted(checked)
    for c, col, (lo, hi) in _CHECKED:
        assert (_CHECK_LO[c], _CHECK_HI[c]) == (lo, hi)
        # ticks above 1 and a period or stride above 0 are in range but make a range row,
        # which has rules of its own (tests/test_trace_ranges.py); their top is int64's
        values = {"ticks": (lo - 1, hi + 1, lo), "period": (lo - 1, lo), "stride": (lo - 1, lo)}.get(
            col, (lo - 1, hi + 1, lo, hi)
        )
        for v in values:
            b = good.copy()
            b[int(r.integers(0, len(b))), c] = v
            want = bool(((b[:, c] < lo) | (b[:, c] > hi)).any())
            assert split_checked(b, 0, _CHECK_LO, _CHECK_HI, *cols) == want, (col, v)
            assert want == (v in (lo - 1, hi + 1))


def test_shuffle_is_hdf5s_shuffle():
    """The writer's shuffle gives the byte planes (what HDF5's shuffle filter stores), and the
    reader's numpy unshuffle inverts it, for every column width."""
    from g10fast.trace import _decode, _shuffle

    r = np.random.default_rng(23)
    for size in (2, 4, 8):
        src = r.integers(0, 256, size=(1001, size), dtype=np.uint8)
        planes = np.empty((size, 1001), np.uint8)
        _shuffle(src, planes)
        for j in range(size):
            np.testing.assert_array_equal(planes[j], src[:, j])
        dt = np.dtype(f"<i{size}")
        back = _decode(planes.tobytes(), 2, dt, 1001)  # filter mask 2: not deflated
        np.testing.assert_array_equal(back, src.reshape(-1).view(dt))


def test_bad_batch_over_several_chunks_leaves_the_trace_unchanged(tmp_path):
    """A batch spanning several chunks with one bad value in its last chunk raises, and the
    trace holds exactly the rows appended before it; the writer goes on."""
    buf = random_events(5000, seed=24)
    bad = random_events(3500, seed=25)
    bad[3400, 1] = 99  # kind out of range, in the 4th chunk
    path = tmp_path / "b.h5"
    with EventTraceWriter(path, {"model": "BERT"}, chunk_rows=1000, threads=2) as w:
        w.append(buf[:1700])
        with pytest.raises(ValueError, match=r"event 5100: column 'kind' = 99"):
            w.append(bad)
        assert w.n_events == 1700
        w.append(buf[1700:])
    with open_trace(path) as tr:
        assert_same(tr.read(), buf)
