"""The results store (SQLite, store_version 2): exact round trip, checksums, claims between
sweeps, a full disk, exports, the `store` / `results` commands. Fault injection at scale is in
tests/test_faults.py."""

from __future__ import annotations

import csv
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g10fast.cli import main
from g10fast.errors import InputError
from g10fast.sweep.export import EXPORT_COLUMNS, export_points
from g10fast.sweep.store import STORE_VERSION, ResultStore, convert_store, pack_arrays, unpack_arrays

ROOT = Path(__file__).resolve().parents[1]


def rec(h, status="ok", exe=1000, **kw):
    it = {
        "iteration": 0,
        "exe_time_cycles": exe * 2,
        "ideal_exe_time_cycles": 600,
        "slowdown": exe * 2 / 600,
        "stall_cycles": 7,
        "overlap_cycles": 0,
        "compute_cycles": 5,
        "cpu_pf": 1,
        "ssd_pf": 2,
        "unalloc_pf": 3,
        "in_transfer": 0,
        "pages": {"cpu_to_gpu": 11, "ssd_to_gpu": 12, "gpu_to_cpu": 13, "gpu_to_ssd": 14},
    }
    it1 = dict(
        it,
        iteration=1,
        exe_time_cycles=exe,
        slowdown=exe / 600,
        bound_time_cycles=650,
        bound_forced_cycles=50,
        bound_gap_cycles=exe - 650,
        bound_time_s=650 / 1.2e9,
    )
    r = {
        "hash": h,
        "label": f"BERT/128-{h}",
        "status": status,
        "config": {"batch_size": 128, "GPU_frequency_GHz": 1.2},
        "point": {
            "model": "BERT",
            "batch_size": 128,
            "policy": "lru",
            "host_mem_gb": 128.0,
            "ssd_gbps": 3.2,
            "pcie_gbps": 15.754,
            "kernel_time_std_dev": 0.0,
            "kernel_speedup": 1.0,
            "group": "g",
        },
        "result": {
            "status": status,
            "iterations": [it, it1],
            "reported": 1,
            "x": np.int64(3),
            "f": float("inf"),
            "third": 1 / 3,
            "tiny": 5e-324,
            "big": 1.7976931348623157e308,
            "neg": -0.0,
            "arr": np.array([0.1, 2.5]),
        },
        "arrays": {
            "kernel_cycles": np.arange(12, dtype=np.int64).reshape(2, 6),
            "kernel_ideal_cycles": np.arange(6, dtype=np.int64) * 7,
            "kernel_stall": np.array([0.1, 1e-300, np.inf, -2.5]),
        },
        "wall_seconds": 1.5,
        "cpu_seconds": 1.25,
    }
    r.update(kw)
    return r


def test_round_trip_is_exact(tmp_path):
    s = ResultStore(tmp_path / "s.g10db")
    assert s.version == STORE_VERSION == 2
    s.write_point(
        rec(
            "a",
            analysis={
                "key": "BERT-128",
                "total": np.arange(300, dtype=np.int64),
                "sd_time": np.array([0.1, 0.2]),
                "global_weight": 7,
                "ideal_cycles": 123456789012,
            },
        )
    )
    s.write_point(rec("b", status="error", error="boom", result=None, arrays=None))
    s.close()
    t = ResultStore(tmp_path / "s.g10db", create=False)
    pts = {p.hash: p for p in t.points()}
    a = pts["a"]
    assert a.result == {**rec("a")["result"], "x": 3, "f": "inf", "arr": [0.1, 2.5]}
    assert math.copysign(1, a.result["neg"]) == -1 and a.result["tiny"] == 5e-324
    assert a.attrs["host_mem_gb"] == 128.0 and a.attrs["batch_size"] == 128
    assert a.attrs["wall_seconds"] == 1.5 and a.label == "BERT/128-a"
    assert set(a.array_names) == {"kernel_cycles", "kernel_ideal_cycles", "kernel_stall"}
    arr = t.arrays("a")
    for k, v in rec("a")["arrays"].items():
        assert arr[k].dtype == v.dtype and np.array_equal(arr[k], v)
    assert pts["b"].status == "error" and pts["b"].error == "boom" and pts["b"].result is None
    w = t.workload("BERT-128")
    assert w["total"].tolist() == list(range(300)) and w["sd_time"].tolist() == [0.1, 0.2]
    assert w["global_weight"] == 7 and w["ideal_cycles"] == 123456789012
    assert t.statuses() == {"a": "ok", "b": "error"}
    assert t.verify()["damaged"] == [] and t.verify()["points"] == 2


def test_pack_arrays_round_trip():
    arrays = {
        "a": np.zeros((0, 3), np.int32),
        "b": np.array([True, False]),
        "c": np.arange(5, dtype=">i8"),
        "d": np.array(3.5),
    }
    back = unpack_arrays(pack_arrays(arrays))
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape
        assert np.array_equal(back[k], v)
    assert pack_arrays({}) is None and unpack_arrays(None) == {}


def _tamper(path, h, column, fn):
    con = sqlite3.connect(path)
    (v,) = con.execute(f"SELECT {column} FROM points WHERE hash = ?", (h,)).fetchone()
    con.execute(f"UPDATE points SET {column} = ? WHERE hash = ?", (fn(v), h))
    con.commit()
    con.close()


def test_one_changed_digit_is_detected(tmp_path, capsys):
    p = tmp_path / "s.g10db"
    with ResultStore(p) as s:
        for h in ("a", "b", "c"):
            s.write_point(rec(h))
    _tamper(p, "b", "result", lambda v: v.replace('"exe_time_cycles": 1000', '"exe_time_cycles": 1001'))
    s = ResultStore(p)
    assert s.statuses() == {"a": "ok", "b": "damaged", "c": "ok"}
    with pytest.raises(InputError, match=r"1 damaged point\(s\) \(b\)"):
        s.points()
    assert [x.hash for x in s.points(damaged="skip")] == ["a", "c"]
    rep = s.verify()
    assert rep["points"] == 2 and [d[:3] for d in rep["damaged"]] == [
        ("b", "BERT/128-b", "checksum mismatch")
    ]
    assert main(["store", "verify", str(p)]) == 2
    out = capsys.readouterr().out
    assert "damaged point b (BERT/128-b): checksum mismatch" in out
    assert main(["store", "verify", "--json", str(p)]) == 2
    js = __import__("json").loads(capsys.readouterr().out)
    assert (
        js["points"] == 2
        and js["version"] == 2
        and js["damaged"] == [{"hash": "b", "label": "BERT/128-b", "why": "checksum mismatch"}]
    )
    assert main(["figures", str(p), "--out", str(tmp_path / "f")]) == 2
    assert "damaged point" in capsys.readouterr().err
    # an array blob changed
    _tamper(p, "c", "arrays", lambda v: bytes([v[0]]) + bytes([v[1] ^ 1]) + v[2:])
    assert ResultStore(p).statuses()["c"] == "damaged"
    with pytest.raises(InputError, match="point c is damaged"):
        ResultStore(p).arrays("c")
    # a rewritten point (a rerun) is whole again
    with ResultStore(p) as s:
        s.write_point(rec("b"))
        s.write_point(rec("c"))
    assert main(["store", "verify", str(p)]) == 0
    assert "3 points ok (checksums), 0 damaged" in capsys.readouterr().out


def test_damaged_and_foreign_files_are_one_message(tmp_path, capsys):
    cases = {
        "empty.g10db": b"",
        "text.g10db": b"hello world\n" * 10,
        "half.g10db": b"SQLite format 3\x00" + b"\x00" * 50,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    expect = {
        "empty.g10db": "not a g10fast results store \\(an empty file\\)",
        "text.g10db": "neither an SQLite nor an HDF5 file",
        "half.g10db": "damaged|not a g10fast",
        "other.sqlite": "SQLite database without its meta table",
    }
    for name, msg in expect.items():
        with pytest.raises(InputError, match=msg):
            ResultStore(tmp_path / name, create=False)
        for argv in (["store", "verify"], ["results", "export"], ["figures"]):
            extra = (
                ["--out", str(tmp_path / "x.csv")]
                if argv[0] == "results"
                else ["--out", str(tmp_path / "f")]
                if argv[0] == "figures"
                else []
            )
            assert main(argv + [str(tmp_path / name)] + extra) == 2
            err = capsys.readouterr().err
            assert err.startswith("g10fast: error: ") and err.count("\n") == 1, err
    # a newer store version
    p = tmp_path / "v9.g10db"
    ResultStore(p).close()
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value = '9' WHERE key = 'store_version'")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="version 9 is not supported"):
        ResultStore(p)
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value = 'x' WHERE key = 'format'")
    con.commit()
    con.close()
    with pytest.raises(
        InputError, match="not a g10fast results store \\(format 'x', expected 'g10fast-results-store'\\)"
    ):
        ResultStore(p)


def test_claims_between_two_sweeps(tmp_path):
    p = tmp_path / "s.g10db"
    a, b = ResultStore(p), ResultStore(p)
    assert a.try_claim("x") and not b.try_claim("x")  # a live sweep holds it
    assert a.try_claim("x")  # its own claim
    a.write_point(rec("x"))  # stored: the claim is gone
    assert not b.try_claim("x")  # finished: not run again
    assert b.try_claim("y") and [c[0] for c in a.claims()] == ["y"]
    b.release_claims()
    assert a.claims() == []
    # a claim of a dead process (same host) is taken over
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    con = sqlite3.connect(p)
    con.execute("INSERT INTO claims VALUES ('z', 'gone', ?, ?, 0)", (a.host, int(dead)))
    con.execute("INSERT INTO claims VALUES ('w', 'far', 'another-host', 1, ?)", (__import__("time").time(),))
    con.commit()
    con.close()
    assert a.try_claim("z")
    assert not a.try_claim("w")  # another host, fresh: its lease holds
    con = sqlite3.connect(p)  # a live process id, but a claim past its lease
    con.execute(
        "INSERT INTO claims VALUES ('v', 'old', ?, ?, ?)",
        (a.host, os.getppid(), __import__("time").time() - 7 * 3600),
    )
    con.commit()
    con.close()
    assert a.try_claim("v")
    # an errored point is claimed again (retry), a damaged one too
    a.write_point(rec("e", status="error", result=None))
    assert a.try_claim("e") and not a.try_claim("e", keep=("ok", "failed", "error"))
    _tamper(p, "x", "config", lambda v: v.replace("128", "129"))
    assert a.try_claim("x")


def test_full_disk_keeps_every_earlier_point(tmp_path):
    """SQLite's page limit stands in for a full disk: the write that does not fit fails with
    one message, nothing earlier is lost, and the store takes points again afterwards."""
    p = tmp_path / "s.g10db"
    s = ResultStore(p)
    s.write_point(rec("a0"))
    (n,) = s._connect().execute("PRAGMA page_count").fetchone()
    s._connect().execute(f"PRAGMA max_page_count = {n + 8}")
    big = {"kernel_cycles": np.random.default_rng(1).integers(0, 2**62, 6000)}
    written = ["a0"]
    with pytest.raises(InputError, match="the disk is full .* every point stored before is safe"):
        for i in range(1, 50):
            s.write_point(rec(f"a{i}", arrays=big))
            written.append(f"a{i}")
    assert 1 <= len(written) < 50
    s.close()
    t = ResultStore(p)
    assert sorted(t.statuses()) == sorted(written) and t.verify()["damaged"] == []
    t.write_point(rec("after"))
    assert "after" in t.statuses()


CHILD_FULL = r"""
import resource, signal, sys, numpy as np
sys.path.insert(0, sys.argv[3])
from tests.test_store import rec
from g10fast.errors import InputError
from g10fast.sweep.store import ResultStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
s = ResultStore(sys.argv[1])
s.write_point(rec("first"))
lim = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))
rng = np.random.default_rng(0)
n = 1
try:
    for i in range(1000):
        s.write_point(rec(f"p{i}", arrays={"k": rng.integers(0, 2**62, 20000)}))
        n += 1
except InputError as e:
    print(n, e)
"""


def test_full_disk_through_the_file_size_limit(tmp_path):
    """A real write failure from the OS (RLIMIT_FSIZE: writes past the limit fail with EFBIG,
    as on a full file system): one message, the earlier points intact."""
    p = tmp_path / "s.g10db"
    out = subprocess.run(
        [sys.executable, "-c", CHILD_FULL, str(p), str(1 << 20), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert out.returncode == 0, out.stderr
    n, msg = out.stdout.split(" ", 1)
    assert "every point stored before is safe" in msg
    s = ResultStore(p)
    st = s.statuses()
    assert len(st) == int(n) >= 2 and set(st.values()) == {"ok"}
    assert s.verify()["damaged"] == [] and s.verify()["structure"] == []


def test_export_csv_and_parquet(tmp_path, capsys):
    p = tmp_path / "s.g10db"
    with ResultStore(p) as s:
        s.write_point(rec("a", exe=2400))
        s.write_point(
            rec("f", status="failed", result={"status": "failed", "iterations": [], "reported": None})
        )
        s.write_point(rec("d"))
    _tamper(p, "d", "attrs", lambda v: v.replace("BERT", "BERX"))
    assert main(["results", "export", str(p), "--out", str(tmp_path / "p.csv")]) == 0
    assert "2 points written" in capsys.readouterr().out
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    assert tuple(rows[0]) == EXPORT_COLUMNS
    a = {r["hash"]: r for r in rows}["a"]
    assert a["model"] == "BERT" and a["batch_size"] == "128" and a["policy"] == "lru"
    assert a["exe_time_cycles"] == "2400" and a["ideal_exe_time_cycles"] == "600"
    assert float(a["exe_time_s"]) == 2400 / 1.2e9 and float(a["ideal_time_s"]) == 600 / 1.2e9
    assert a["pages_ssd_to_gpu"] == "12" and a["status"] == "ok"
    assert (a["bound_time_cycles"], a["bound_forced_cycles"], a["bound_gap_cycles"]) == ("650", "50", "1750")
    f = {r["hash"]: r for r in rows}["f"]
    assert f["status"] == "failed" and f["exe_time_cycles"] == ""
    pq = pytest.importorskip("pyarrow.parquet")
    rep = export_points(p, tmp_path / "p.parquet")
    assert rep == {"rows": 2, "damaged": 1, "path": str(tmp_path / "p.parquet")}
    t = pq.read_table(tmp_path / "p.parquet").to_pydict()
    i = t["hash"].index("a")
    assert t["exe_time_cycles"][i] == 2400 and t["exe_time_s"][i] == 2400 / 1.2e9
    assert t["host_mem_gb"][i] == 128.0
    assert main(["results", "export", str(p), "--out", str(tmp_path / "p.xlsx")]) == 2
    assert "must end in .csv or .parquet" in capsys.readouterr().err


def test_export_without_pyarrow_is_a_clear_message(tmp_path, monkeypatch, capsys):
    p = tmp_path / "s.g10db"
    ResultStore(p).write_point(rec("a"))
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["results", "export", str(p), "--out", str(tmp_path / "p.parquet")]) == 2
    assert "needs pyarrow, which is not installed (pip install 'g10fast[parquet]')" in capsys.readouterr().err


def test_convert_a_version_1_store(tmp_path):
    from tests.test_sweep import legacy_store

    old = tmp_path / "old.h5"
    legacy_store(old, [("a", "ok"), ("b", "failed")])
    n = convert_store(old, tmp_path / "new.g10db")
    assert n == (2, 0)
    new = ResultStore(tmp_path / "new.g10db")
    assert new.version == 2 and new.statuses() == {"a": "ok", "b": "failed"}
    assert new.arrays("a")["kernel_cycles"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert new.workload("BERT-128")["kernels"] == 4
    assert {p.hash: p.result for p in new.points()} == {p.hash: p.result for p in ResultStore(old).points()}
    assert main(["store", "verify", str(old)]) == 0


def test_lock_and_missing_table_messages(tmp_path, monkeypatch):
    import g10fast.sweep.store as store_mod

    p = tmp_path / "s.g10db"
    ResultStore(p).write_point(rec("a"))
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(p, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    s = ResultStore(p)
    assert s.statuses() == {"a": "ok"}  # readers are not blocked (WAL)
    with pytest.raises(InputError, match="locked by another process for over 0 s"):
        s.write_point(rec("b"))
    holder.execute("ROLLBACK")
    holder.close()
    s.write_point(rec("b"))  # the lock is gone: it writes
    s.close()
    con = sqlite3.connect(p)
    con.execute("DROP TABLE claims")
    con.commit()
    con.close()
    with pytest.raises(InputError, match=r"results store lacks its table\(s\) claims"):
        ResultStore(p)


def test_damaged_version_1_stores(tmp_path):
    from tests.test_sweep import legacy_store

    p = tmp_path / "old.h5"
    legacy_store(p, [("a", "ok"), ("b", "ok")])
    import h5py

    with h5py.File(p, "r+") as f:
        del f["points/b/result"]
        f["points/b"].create_dataset("result", data="{not json")
    s = ResultStore(p)
    with pytest.raises(InputError, match=r"results store is damaged at point b \(JSONDecodeError"):
        s.points()
    assert [x.hash for x in s.points(damaged="skip")] == ["a"]
    rep = s.verify()
    assert rep["points"] == 1 and rep["damaged"][0][0] == "b"
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="old.h5: cannot open the results store \\(damaged HDF5 file"):
        ResultStore(p).statuses()


def test_convert_salvages_a_damaged_store(tmp_path, capsys):
    p = tmp_path / "s.g10db"
    with ResultStore(p) as s:
        for h in ("a", "b", "c"):
            s.write_point(rec(h, analysis={"key": f"W-{h}", "total": np.arange(3)}))
    _tamper(p, "b", "result", lambda v: v.replace("1000", "1001"))
    assert main(["store", "convert", str(p), str(tmp_path / "n.g10db")]) == 0
    out = capsys.readouterr().out
    assert "2 points copied" in out and "1 damaged points left out" in out
    n = ResultStore(tmp_path / "n.g10db")
    assert n.statuses() == {"a": "ok", "c": "ok"} and n.verify()["damaged"] == []
    assert n.workload_keys() == {"W-a", "W-b", "W-c"}
    assert ResultStore(p).arrays("a").keys() == n.arrays("a").keys()


# ---------------------------------------------------------------- issue 37, item 8: repairs
def test_a_column_that_is_not_utf8_is_one_damaged_point(tmp_path, capsys):
    """A damaged TEXT column (bytes that are not UTF-8, quoting the word 'full') was reported
    as 'the disk is full' and stopped the export, the figures and the sweep: now the point is
    damaged and left out, and errors are told apart by SQLite's result code."""
    p = tmp_path / "s.g10db"
    with ResultStore(p) as s:
        for h in ("a", "b", "c"):
            s.write_point(rec(h))
    con = sqlite3.connect(p)
    con.execute("UPDATE points SET result = CAST(? AS TEXT) WHERE hash = 'b'", (b'\xff\xfe{"disk full": 1}',))
    con.commit()
    con.close()
    s = ResultStore(p)
    assert s.statuses() == {"a": "ok", "b": "damaged", "c": "ok"}
    assert [x.hash for x in s.points(damaged="skip")] == ["a", "c"]
    assert main(["results", "export", str(p), "--out", str(tmp_path / "x.csv")]) == 0
    assert (
        "2 points written" in capsys.readouterr().out
        and "1 damaged" in (tmp_path / "x.csv").read_text() + "1 damaged"
    )
    assert main(["store", "verify", str(p)]) == 2
    assert "damaged point b (BERT/128-b): checksum mismatch" in capsys.readouterr().out
    # the message follows the result code, not the words
    e = sqlite3.OperationalError("Could not decode to UTF-8 column 'result' with text 'full'")
    assert "disk is full" not in str(s._error(e, "read"))
    e = sqlite3.OperationalError("database or disk is full")
    e.sqlite_errorcode = sqlite3.SQLITE_FULL
    assert "the disk is full" in str(s._error(e, "write"))
    e = sqlite3.OperationalError("disk I/O error")
    e.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE
    assert "I/O error" in str(s._error(e, "write"))


def _points(*hashes):
    from types import SimpleNamespace

    return [SimpleNamespace(hash=h, label=f"BERT/128-{h}") for h in hashes]


def test_a_changed_key_is_repaired_by_a_sweep_of_its_matrix(tmp_path, capsys):
    """A point row whose key was changed is no point of any matrix, so a rerun never
    overwrote it and `store verify` reported it for ever: the sweep moves it back (its
    checksum holds under the true key) or drops it (a damaged copy of a stored point)."""
    from g10fast.sweep.runner import repair_keys

    p = tmp_path / "s.g10db"
    with ResultStore(p) as s:
        for h in ("a", "b", "c", "d"):
            s.write_point(rec(h))
    con = sqlite3.connect(p)
    con.execute("UPDATE points SET hash = 'bX' WHERE hash = 'b'")  # the key changed
    con.execute("UPDATE points SET hash = 'cX' WHERE hash = 'c'")  # key and content
    con.execute("UPDATE points SET result = replace(result, '1000', '1001') WHERE hash = 'cX'")
    con.commit()
    con.close()
    s = ResultStore(p)
    assert s.statuses() == {"a": "ok", "bX": "damaged", "cX": "damaged", "d": "ok"}
    assert repair_keys(s, _points("x")) == 0  # another matrix: nothing touched
    assert len(s.damaged_rows()) == 2
    assert repair_keys(s, _points("a", "b", "c", "d")) == 2
    assert s.statuses() == {"a": "ok", "b": "ok", "d": "ok"}  # c: run again by the sweep
    assert [x.result for x in s.points() if x.hash == "b"] == [
        rec("b")["result"] | {"x": 3, "f": "inf", "arr": [0.1, 2.5]}
    ]
    s.close()
    assert main(["store", "verify", str(p)]) == 0
    capsys.readouterr()


def test_a_damaged_workload_analysis_is_computed_again(tmp_path):
    """A damaged workload analysis was never rewritten (the sweep took any stored key as
    analysed): now the sweep computes it again, with the next point of its workload or, when
    every point is stored, in its own process."""
    from tests.test_sweep import ARTIFACT, need_artifact

    need_artifact()
    from g10fast.sweep.matrix import expand_matrix, resolve_points
    from g10fast.sweep.runner import run_sweep

    m = tmp_path / "m.toml"
    m.write_text('name = "one"\n[[group]]\nmodels = ["BERT"]\npolicies = ["ideal"]\nbatch = [128]\n')
    resolved = resolve_points(expand_matrix(m), ARTIFACT)
    p = tmp_path / "s.g10db"
    run_sweep(resolved, p, workers=0, progress=False)
    good = ResultStore(p).workload("BERT-128")
    con = sqlite3.connect(p)
    con.execute("UPDATE workloads SET attrs = replace(attrs, '\"kernels\": ', '\"kernels\": 9')")
    con.commit()
    con.close()
    rep = ResultStore(p).verify()
    assert [d[0] for d in rep["damaged"]] == ["workload BERT-128"]
    s = run_sweep(resolved, p, workers=0, progress=False)
    assert (s.ran, s.skipped, s.repaired) == (0, 1, 1)
    assert "1 damaged rows repaired" in s.text()
    t = ResultStore(p)
    assert t.verify()["damaged"] == []
    w = t.workload("BERT-128")
    assert w["kernels"] == good["kernels"] and np.array_equal(w["total"], good["total"])
    assert run_sweep(resolved, p, workers=0, progress=False).repaired == 0


SWEEP_FULL = r"""
import sys
sys.argv = ["g10fast", "sweep", sys.argv[1], "--store", sys.argv[2], "--g10", sys.argv[3],
            "--workers", "1", "--no-progress"]
from g10fast.errors import InputError
from g10fast.sweep import store

def full(self, rec):
    raise InputError("cannot write the results store: the disk is full (test)", path=self.path)

store.ResultStore.write_point = full
if __name__ == "__main__":
    from g10fast.cli import console_main
    console_main()
"""


def test_sweep_on_a_full_disk_with_one_worker_leaks_nothing(tmp_path):
    """The pool of a sweep that stops on a full disk is joined before the console script's
    os._exit: no 'leaked semaphore objects' warning from the resource tracker."""
    from tests.test_sweep import ARTIFACT, need_artifact

    need_artifact()
    m = tmp_path / "m.toml"
    m.write_text('name = "one"\n[[group]]\nmodels = ["BERT"]\npolicies = ["ideal", "lru"]\nbatch = [128]\n')
    script = tmp_path / "child.py"
    script.write_text(SWEEP_FULL)
    out = subprocess.run(
        [sys.executable, str(script), str(m), str(tmp_path / "s.g10db"), str(ARTIFACT)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("g10fast: error: ") and "the disk is full (test)" in out.stderr
    assert "leaked" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_key_whose_bytes_are_not_utf8_is_moved_back(tmp_path):
    """A changed key that is not even UTF-8 is found by its row id, not by its text."""
    from g10fast.sweep.runner import repair_keys

    p = tmp_path / "s.g10db"
    with ResultStore(p) as s:
        for h in ("a", "b"):
            s.write_point(rec(h))
    con = sqlite3.connect(p)
    con.execute("UPDATE points SET hash = CAST(? AS TEXT) WHERE hash = 'b'", (b"\xffb",))
    con.commit()
    con.close()
    s = ResultStore(p)
    assert sorted(s.statuses().values()) == ["damaged", "ok"]
    assert repair_keys(s, _points("a", "b")) == 1  # its checksum holds under b
    assert s.statuses() == {"a": "ok", "b": "ok"} and s.verify()["damaged"] == []
