"""Fault injection: processes killed (SIGKILL) at random instants while they write a results
store or an event trace, full disks, bit flips at random offsets of a store and of a trace,
two sweeps and a reader on one store at once (docs/fault-injection.md).

The quick cases run in CI (a few dozen kills and a few hundred flips). The long mode runs
the counts recorded in docs/fault-injection.md:

    G10FAST_LONG_FAULTS=1 pytest -q tests/test_faults.py

G10FAST_FAULTS_REPORT=FILE appends one JSON line per case (kills, flips, detected, lost) to FILE.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.sweep.store import ResultStore
from g10fast.trace import N_COLS, EventTraceWriter, find_temporaries, open_trace

ROOT = Path(__file__).resolve().parents[1]
LONG = os.environ.get("G10FAST_LONG_FAULTS", "") not in ("", "0")
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
SEED = int(os.environ.get("G10FAST_FAULTS_SEED", "1234"))


def report(case: str, **figures) -> None:
    path = os.environ.get("G10FAST_FAULTS_REPORT")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"case": case, "long": LONG, "seed": SEED, **figures}) + "\n")


# -- what the children write: deterministic, so the parent knows what each point must hold ----


def point_record(i: int) -> dict:
    rng = np.random.default_rng(i)
    exe = int(rng.integers(10**9, 10**10))
    return {
        "hash": f"p{i:05d}",
        "label": f"BERT/128-p{i}",
        "status": "ok",
        "config": {"batch_size": 128, "GPU_frequency_GHz": 1.2, "i": i},
        "point": {
            "model": "BERT",
            "batch_size": 128,
            "policy": "lru",
            "host_mem_gb": float(i),
            "ssd_gbps": 3.2,
            "pcie_gbps": 15.754,
            "kernel_time_std_dev": 0.0,
            "kernel_speedup": 1.0,
            "group": "f",
        },
        "result": {
            "status": "ok",
            "reported": 0,
            "third": i / 3,
            "iterations": [
                {"exe_time_cycles": exe, "ideal_exe_time_cycles": exe // 2, "pages": {"cpu_to_gpu": i}}
            ],
        },
        "arrays": {
            "kernel_cycles": rng.integers(0, 2**40, (2, 3000)),
            "kernel_ideal_cycles": rng.integers(0, 2**30, 3000),
        },
        "analysis": {"key": f"W-{i % 3}", "total": np.arange(500) * (i % 3)},
        "wall_seconds": 0.25,
    }


def expected_point(i: int):
    r = point_record(i)
    return r["status"], r["result"], r["config"], r["arrays"]


CHILD_STORE = r"""
import sys
sys.path.insert(0, sys.argv[3])
from tests.test_faults import point_record
from g10fast.sweep.store import ResultStore
s = ResultStore(sys.argv[1])
start = int(sys.argv[2])
print("ready", flush=True)
i = start
while True:
    s.write_point(point_record(i))
    print(i, flush=True)         # committed
    i += 1
"""


def _check_store(path, committed: set, allowed: set, checked: set) -> tuple[int, int, int]:
    """-> (unreadable 0/1, points lost, damaged points). A point the child had not reported
    may be there (committed just before the kill) and must then be whole too. Every row is
    verified against its checksum; the content of the points not `checked` yet is compared
    with what the child wrote."""
    try:
        s = ResultStore(path, create=False)
        st = s.statuses()
        rep = s.verify()
    except InputError:
        return 1, len(committed), 0
    lost = sum(1 for i in committed if st.get(f"p{i:05d}") != "ok")
    damaged = len(rep["damaged"]) + len(rep["structure"])
    for p in s.points(damaged="skip"):
        i = int(p.hash[1:])
        assert i in allowed
        if i in checked:
            continue
        want = expected_point(i)
        arr = s.arrays(p.hash)
        if (p.status, p.result, p.config) != want[:3] or any(
            not np.array_equal(arr[k], v) for k, v in want[3].items()
        ):
            damaged += 1
        checked.add(i)
    s.close()
    return 0, lost, damaged


#: kills per store file (a new store after these, so that checking stays quick)
KILLS_PER_STORE = 20


def test_store_survives_kills_at_random_instants(tmp_path):
    kills = 500 if LONG else 8
    rnd = random.Random(SEED)
    unreadable = lost = damaged = 0
    nxt = 0
    n_committed = n_stored = 0
    for j in range(kills):
        if j % KILLS_PER_STORE == 0:
            path = tmp_path / f"s{j}.g10db"
            committed: set = set()
            allowed: set = set()
            checked: set = set()
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_STORE, str(path), str(nxt), str(ROOT)],
            stdout=subprocess.PIPE,
            env=ENV,
            text=True,
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        out = proc.communicate()[0]
        done = [int(x) for x in out.split()]
        committed.update(done)
        n_committed += len(done)
        allowed |= set(range(nxt, nxt + len(done) + 1))  # + the one committed, not printed
        u, lo, d = _check_store(path, committed, allowed, checked)
        unreadable += u
        lost += lo
        damaged += d
        nxt += len(done) + 1
        if j % KILLS_PER_STORE == KILLS_PER_STORE - 1 or j == kills - 1:
            n_stored += len(ResultStore(path, create=False).statuses())
    report(
        "store-kill",
        kills=kills,
        committed=n_committed,
        stored=n_stored,
        unreadable=unreadable,
        lost=lost,
        damaged=damaged,
    )
    assert (unreadable, lost, damaged) == (0, 0, 0)
    assert n_committed >= kills // 2  # the kills did land among writes


CHILD_TRACE = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
from tests.test_faults import trace_batch
import os, tempfile
from g10fast.trace import EventTraceWriter
with tempfile.TemporaryDirectory() as d:   # warm up: the writer's Numba kernels load (or, on a
    with EventTraceWriter(os.path.join(d, "warm.h5"), {}, {}, chunk_rows=1000) as ww:
        ww.append(np.concatenate([trace_batch(0), trace_batch(1)]))   # fresh machine, compile)
w = EventTraceWriter(sys.argv[1], {"run": "killed"}, {"m": 1}, chunk_rows=1000,
                     threads=int(sys.argv[3]))
print("ready", flush=True)
i = 0
while True:
    w.append(trace_batch(i))
    i += 1
"""


def trace_batch(i: int, n: int = 700) -> np.ndarray:
    rows = np.arange(i * n, (i + 1) * n, dtype=np.int64)
    b = np.zeros((n, N_COLS), np.int64)
    b[:, 0] = rows * 3
    b[:, 1] = rows % 8
    b[:, 2] = rows % 2
    b[:, 3] = rows % 1000
    b[:, 5] = rows * 7
    b[:, 6] = rows % 50
    b[:, 9] = rows ^ 0x5555
    b[:, 10] = 1  # ticks: ordinary rows (period 0)
    return b


def test_trace_of_a_killed_run_reads_up_to_its_last_complete_chunk(tmp_path, capsys):
    from g10fast.cli import main

    kills = 100 if LONG else 5
    rnd = random.Random(SEED + 1)
    unreadable = wrong = 0
    rows = []
    target = tmp_path / "run.h5"
    for k in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_TRACE, str(target), str(ROOT), str(k % 3)],
            stdout=subprocess.PIPE,
            env=ENV,
            text=True,
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        tmps = find_temporaries(target)
        assert len(tmps) == 1 and not tmps[0][2]  # the previous ones were cleaned
        tmp = tmps[0][0]
        try:
            with open_trace(tmp, allow_incomplete=True) as tr:
                assert not tr.complete and tr.n_events % 1000 == 0
                got = tr.to_buffer()
                assert tr.config == {"run": "killed"}
                bad = tr.verify()
        except InputError:
            unreadable += 1
            continue
        n = len(got)
        rows.append(n)
        want = np.concatenate([trace_batch(i) for i in range(n // 700 + 1)])[:n] if n else got
        wrong += int(not np.array_equal(got, want)) + len(bad)
    # the CLI finds the killed run's file and offers it
    assert main(["trace", "inspect", str(target)]) == 2
    err = capsys.readouterr().err
    assert "did not finish; its incomplete trace is" in err and "--allow-incomplete" in err
    assert err.count("\n") == 1
    assert main(["trace", "inspect", "--allow-incomplete", str(tmp)]) == 0
    assert "(incomplete: up to the last complete chunk)" in capsys.readouterr().out
    with pytest.raises(InputError, match="incomplete event trace"):
        open_trace(tmp)
    # a rerun cleans the killed run's file
    with EventTraceWriter(target, {}, {}) as w:
        w.append(trace_batch(0))
    assert find_temporaries(target) == []
    report(
        "trace-kill",
        kills=kills,
        unreadable=unreadable,
        wrong=wrong,
        events_min=min(rows, default=0),
        events_max=max(rows, default=0),
    )
    assert unreadable == 0 and wrong == 0
    assert max(rows) > 0


# -- full disks ---------------------------------------------------------------------------------

CHILD_TRACE_FULL = r"""
import resource, signal, sys
sys.path.insert(0, sys.argv[2])
from tests.test_faults import trace_batch
from g10fast.errors import InputError
from g10fast.trace import EventTraceWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
try:
    with EventTraceWriter(sys.argv[1], {}, {}, chunk_rows=1000, threads=1) as w:
        for i in range(10_000):
            w.append(trace_batch(i))
except InputError as e:
    print(e)
"""


def test_full_disk_during_a_trace(tmp_path):
    target = tmp_path / "t.h5"
    out = subprocess.run(
        [sys.executable, "-c", CHILD_TRACE_FULL, str(target), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert out.returncode == 0, out.stderr
    assert "cannot write the event trace" in out.stdout and "nothing was published" in out.stdout
    assert "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []  # no target, no temporary file


def test_full_disk_during_a_sweep(tmp_path, monkeypatch):
    """The store cannot grow after the third point (SQLite's page limit: the same SQLITE_FULL
    a full disk gives): the sweep stops with one message, the three points are kept, and the
    next sweep does the rest."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_sweep_reuse import synth_points, synth_workload

    import g10fast.run as run_mod
    from g10fast.cli import main  # noqa: F401 - the CLI maps the InputError to exit 2
    from g10fast.sweep import worker
    from g10fast.sweep.runner import run_sweep

    w = synth_workload()
    monkeypatch.setattr(run_mod, "workload_of", lambda spec: w)
    worker.clear_cache()
    pts = synth_points()[:6]
    orig = ResultStore.write_point
    calls = []

    def write_point(self, rec):
        orig(self, rec)
        calls.append(rec["hash"])
        if len(calls) == 3:
            (n,) = self._connect().execute("PRAGMA page_count").fetchone()
            self._connect().execute(f"PRAGMA max_page_count = {n}")

    monkeypatch.setattr(ResultStore, "write_point", write_point)
    path = tmp_path / "s.g10db"
    with pytest.raises(InputError, match="the disk is full .* every point stored before is safe"):
        run_sweep(pts, path, workers=0, progress=False, reuse=False)
    monkeypatch.setattr(ResultStore, "write_point", orig)
    st = ResultStore(path).statuses()
    assert sorted(st) == sorted(calls[:3]) and set(st.values()) == {"ok"}
    assert ResultStore(path).claims() == []  # released by the stopped sweep
    again = run_sweep(pts, path, workers=0, progress=False, reuse=False)
    assert (again.skipped, again.ran) == (3, 3)
    worker.clear_cache()


# -- bit flips ------------------------------------------------------------------------------------


def _store_snapshot(s) -> dict:
    snap = {}
    for p in s.points():
        arr = s.arrays(p.hash)
        snap[p.hash] = (
            p.status,
            p.attrs,
            p.config,
            p.result,
            {k: (v.dtype.str, v.shape, v.tobytes()) for k, v in arr.items()},
        )
    for k in s.workload_keys():
        w = s.workload(k)
        snap["w:" + k] = {a: (v.tobytes() if isinstance(v, np.ndarray) else v) for a, v in (w or {}).items()}
    return snap


def test_bit_flips_in_a_store_are_detected_or_harmless(tmp_path):
    flips = 3000 if LONG else 150
    rnd = random.Random(SEED + 2)
    path = tmp_path / "s.g10db"
    with ResultStore(path) as s:
        for i in range(8):
            s.write_point(point_record(i))
    assert not os.path.exists(str(path) + "-wal")
    data = path.read_bytes()
    with ResultStore(path, create=False) as s:
        base = _store_snapshot(s)
    detected = harmless = undetected = 0
    bad = tmp_path / "b.g10db"
    for _ in range(flips):
        off = rnd.randrange(len(data))
        flipped = bytearray(data)
        flipped[off] ^= 1 << rnd.randrange(8)
        bad.write_bytes(bytes(flipped))
        for x in ("-wal", "-shm"):
            if os.path.exists(str(bad) + x):
                os.unlink(str(bad) + x)
        try:
            s = ResultStore(bad, create=False)
            rep = s.verify()
            if rep["damaged"] or rep["structure"]:
                detected += 1
                s.close()
                continue
            snap = _store_snapshot(s)
            s.close()
        except InputError:
            detected += 1
            continue
        if snap == base:
            harmless += 1
        else:
            undetected += 1
    report(
        "store-flip",
        flips=flips,
        detected=detected,
        harmless=harmless,
        undetected=undetected,
        file_bytes=len(data),
    )
    assert undetected == 0
    assert detected > flips // 4


CHILD_TRACE_FLIPS = r"""
import json, random, sys, numpy as np
sys.path.insert(0, sys.argv[1])
from g10fast.errors import InputError
from g10fast.trace import open_trace, verify_trace
src, bad = sys.argv[2], sys.argv[3]
seed, first, last = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
data = open(src, "rb").read()
with open_trace(src) as tr:
    base = (tr.read(), tr.config, tr.meta, tr.summary, tr.n_events)
for t in range(first, last):
    rnd = random.Random(seed * 1_000_003 + t)
    off = rnd.randrange(len(data))
    b = bytearray(data)
    b[off] ^= 1 << rnd.randrange(8)
    open(bad, "wb").write(bytes(b))
    print(json.dumps({"t": t, "off": off, "outcome": "start"}), flush=True)
    try:
        rep = verify_trace(bad)
        if rep["damaged"]:
            outcome = "detected"
        else:
            with open_trace(bad) as tr:
                got = (tr.read(), tr.config, tr.meta, tr.summary, tr.n_events)
            same = (all(np.array_equal(got[0][c], base[0][c]) for c in base[0])
                    and got[1:] == base[1:])
            outcome = "harmless" if same else "undetected"
    except InputError:
        outcome = "detected"
    except Exception as e:
        outcome = "traceback:" + type(e).__name__ + ":" + str(e)[:200]
    print(json.dumps({"t": t, "off": off, "outcome": outcome}), flush=True)
"""


def test_bit_flips_in_a_trace_are_detected_or_harmless(tmp_path):
    flips = 2000 if LONG else 150
    src = tmp_path / "t.h5"
    with EventTraceWriter(src, {"model": "x" * 50}, {"v": 1}, chunk_rows=1000, threads=0) as w:
        for i in range(6):
            w.append(trace_batch(i))
        w.set_summary({"iterations": [{"exe_time_cycles": 123456789}]})
    outcomes: dict = {}
    t = 0
    crashes = []
    while t < flips:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD_TRACE_FLIPS,
                str(ROOT),
                str(src),
                str(tmp_path / "b.h5"),
                str(SEED),
                str(t),
                str(flips),
            ],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=600,
        )
        last = t
        for line in out.stdout.splitlines():
            r = json.loads(line)
            if r["outcome"] == "start":
                last = r["t"]
                continue
            outcomes[r["t"]] = r
            last = r["t"] + 1
        if out.returncode != 0:  # the process died on this flip (HDF5 crashed)
            crashes.append(last)
            outcomes[last] = {"t": last, "outcome": f"crash rc={out.returncode}"}
            last += 1
        t = last
    kinds = [r["outcome"] for r in outcomes.values()]
    detected, harmless = kinds.count("detected"), kinds.count("harmless")
    bad = [r for r in outcomes.values() if r["outcome"] not in ("detected", "harmless")]
    report(
        "trace-flip",
        flips=flips,
        detected=detected,
        harmless=harmless,
        undetected=len(bad),
        file_bytes=src.stat().st_size,
        bad=[(r["off"] if "off" in r else None, r["outcome"]) for r in bad][:20],
    )
    assert bad == []
    assert detected > flips // 10


# -- two sweeps and a reader ----------------------------------------------------------------------

CHILD_SWEEP = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2] + "/tests")
sys.path.insert(0, sys.argv[2])
from test_sweep_reuse import synth_points, synth_workload
import g10fast.run as run_mod
from g10fast.sweep import runner, worker
w = synth_workload()
run_mod.workload_of = lambda spec: w
ran = []
orig = worker.execute
def slow(task):
    time.sleep(0.15)
    ran.append(task["hash"])
    return orig(task)
runner.execute = slow
s = runner.run_sweep(synth_points(), sys.argv[1], workers=0, progress=False, reuse=False)
print(json.dumps({"ran": ran, "elsewhere": s.elsewhere, "skipped": s.skipped, "n": s.ran}))
"""


def test_two_sweeps_and_a_reader_on_one_store(tmp_path):
    from g10fast.sweep.export import export_rows

    path = tmp_path / "s.g10db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD_SWEEP, str(path), str(ROOT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
            text=True,
        )
        for _ in range(2)
    ]
    reads, seen = 0, []
    while any(p.poll() is None for p in procs):
        if path.exists():
            s = ResultStore(path, create=False)  # never an error while they write
            rows, damaged = export_rows(s)
            assert damaged == 0 and all(r["status"] == "ok" for r in rows)
            seen.append(len(rows))
            s.close()
            reads += 1
        time.sleep(0.05)
    outs = []
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    a, b = (set(o["ran"]) for o in outs)
    st = ResultStore(path).statuses()
    report("two-sweeps", points=len(st), ran_a=len(a), ran_b=len(b), both=len(a & b), reads=reads)
    assert a.isdisjoint(b)  # no point run twice
    assert len(a | b) == len(st) == 15 and set(st.values()) == {"ok"}
    assert len(a) > 0 and len(b) > 0  # both did work
    assert reads >= 3 and seen == sorted(seen)  # the reader saw the store grow
    assert ResultStore(path).claims() == []


def test_a_resumed_sweep_runs_damaged_points_again(tmp_path, monkeypatch):
    import sqlite3

    sys.path.insert(0, str(ROOT / "tests"))
    from test_sweep_reuse import synth_points, synth_workload

    import g10fast.run as run_mod
    from g10fast.sweep import worker
    from g10fast.sweep.runner import run_sweep

    w = synth_workload()
    monkeypatch.setattr(run_mod, "workload_of", lambda spec: w)
    worker.clear_cache()
    pts = synth_points()[:4]
    path = tmp_path / "s.g10db"
    first = run_sweep(pts, path, workers=0, progress=False, reuse=False)
    assert first.ran == 4
    before = {p.hash: p for p in ResultStore(path).points()}
    victim = pts[2].hash
    con = sqlite3.connect(path)  # one changed digit in a stored result
    (r,) = con.execute("SELECT result FROM points WHERE hash = ?", (victim,)).fetchone()
    i = r.index('"exe_time_cycles": ') + len('"exe_time_cycles": ')
    r = r[:i] + str((int(r[i]) + 1) % 10) + r[i + 1 :]
    con.execute("UPDATE points SET result = ? WHERE hash = ?", (r, victim))
    con.commit()
    con.close()
    assert ResultStore(path).statuses()[victim] == "damaged"
    again = run_sweep(pts, path, workers=0, progress=False, reuse=False)
    assert (again.skipped, again.ran, again.damaged) == (3, 1, 1)
    assert "1 damaged stored points run again" in again.text()
    after = {p.hash: p for p in ResultStore(path).points()}
    assert after[victim].result["iterations"] == before[victim].result["iterations"]
    assert after[victim].attrs["finished_at"] >= before[victim].attrs["finished_at"]
    assert ResultStore(path).verify()["damaged"] == []
    worker.clear_cache()


CHILD_SWEEP_KILLED = r"""
import sys, time
sys.path.insert(0, sys.argv[2] + "/tests")
sys.path.insert(0, sys.argv[2])
from test_sweep_reuse import synth_points, synth_workload
import g10fast.run as run_mod
from g10fast.sweep import runner, worker
w = synth_workload()
run_mod.workload_of = lambda spec: w
orig = worker.execute
def slow(task):
    time.sleep(0.05)
    return orig(task)
runner.execute = slow
print("ready", flush=True)
s = runner.run_sweep(synth_points(), sys.argv[1], workers=0, progress=False, reuse=False)
print("done", s.ran, flush=True)
"""

TIMING_KEYS = ("wall_seconds", "peak_rss_bytes")


def _untimed(x):
    """A result without its timings (wall, memory, planner seconds)."""
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k not in TIMING_KEYS and not k.endswith("_seconds")}
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def test_sweeps_killed_at_random_instants_resume_to_the_same_store(tmp_path, monkeypatch):
    """`run_sweep` killed (SIGKILL) at random instants, again and again: every store opens
    and verifies, the claims of the killed sweeps are taken over, and the finished store
    equals a sweep that was never killed."""
    kills = 40 if LONG else 2
    rnd = random.Random(SEED + 3)
    path = tmp_path / "k.g10db"
    killed = runs = 0
    while True:
        runs += 1
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_SWEEP_KILLED, str(path), str(ROOT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
            text=True,
        )
        assert proc.stdout.readline().strip() == "ready"
        if killed < kills:
            time.sleep(rnd.uniform(0.0, 1.5))
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        if proc.returncode == -signal.SIGKILL:
            killed += 1
        else:
            assert proc.returncode == 0 and "done" in out, err
        if path.exists():
            s = ResultStore(path, create=False)
            rep = s.verify()
            assert rep["damaged"] == [] and rep["structure"] == []
            s.close()
        if proc.returncode == 0:
            break
    ref = tmp_path / "ref.g10db"  # the same sweep, never killed (in this process)
    sys.path.insert(0, str(ROOT / "tests"))
    from test_sweep_reuse import synth_points, synth_workload

    import g10fast.run as run_mod
    from g10fast.sweep import worker
    from g10fast.sweep.runner import run_sweep

    w = synth_workload()
    monkeypatch.setattr(run_mod, "workload_of", lambda spec: w)
    worker.clear_cache()
    run_sweep(synth_points(), ref, workers=0, progress=False, reuse=False)
    worker.clear_cache()
    a = {p.hash: p for p in ResultStore(path).points()}
    b = {p.hash: p for p in ResultStore(ref).points()}
    assert a.keys() == b.keys() and len(a) == 15
    for h in a:
        assert a[h].status == b[h].status == "ok"
        assert _untimed(a[h].result) == _untimed(b[h].result)
        assert all(
            np.array_equal(v, ResultStore(ref).arrays(h)[k]) for k, v in ResultStore(path).arrays(h).items()
        )
    assert ResultStore(path).claims() == []
    report("sweep-kill", kills=killed, runs=runs, points=len(a), unreadable=0, lost=0)
