"""Experiment matrices, the results store, and sweeps (resume, failures, Dask)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from g10fast.cli import main
from g10fast.config import config_hash, read_g10_config
from g10fast.errors import InputError
from g10fast.sweep.matrix import Point, expand_matrix, expand_matrix_dict, matrix_dir, resolve_points
from g10fast.sweep.runner import SweepProgress, run_sweep
from g10fast.sweep.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"


def need_artifact():
    if not (ARTIFACT / "frontend" / "Nets").is_dir():
        pytest.skip("G10 artifact not available")


# ------------------------------------------------------------------------------ matrices
def test_artifact_matrix_is_the_artifacts_1410_configs():
    need_artifact()
    resolved = resolve_points(expand_matrix(matrix_dir() / "artifact.toml"), ARTIFACT)
    assert len(resolved) == 1410
    files = sorted((ARTIFACT / "src" / "configs").glob("*/*.config"))
    by_hash = {config_hash(read_g10_config(f)): f for f in files}
    assert len(by_hash) == 1410
    assert {r.hash for r in resolved} == set(by_hash)
    for r in resolved:  # labels name the artifact's files; configs are equal field for field
        f = by_hash[r.hash]
        assert r.label == f"{f.parent.name}/{f.stem.replace('-sim_', '-')}"
    for r in resolved[::97]:
        assert read_g10_config(by_hash[r.hash]) == r.config


def test_figure_matrices_are_subsets_of_the_artifacts():
    need_artifact()
    full = {r.hash for r in resolve_points(expand_matrix(matrix_dir() / "artifact.toml"), ARTIFACT)}
    sizes = {}
    for n in (2, 3, 4, 11, 12, 13, 14, 15, 16, 17, 18, 19):
        rs = resolve_points(expand_matrix(matrix_dir() / f"fig{n}.toml"), ARTIFACT)
        assert {r.hash for r in rs} <= full, n
        sizes[n] = len(rs)
    assert sizes == {
        2: 4,
        3: 4,
        4: 4,
        11: 30,
        12: 20,
        13: 20,
        14: 20,
        15: 100,
        16: 128,
        17: 26,
        18: 100,
        19: 30,
    }


def test_expansion_product_zip_and_model_tables():
    pts = expand_matrix_dict(
        {
            "group": [
                {
                    "models": ["BERT", "ResNet152"],
                    "policies": ["lru", "G10"],
                    "batch": {"BERT": [128, 256], "default": [512]},
                    "host_mem_gb": {"ResNet152": [0, 192]},
                    "ssd_gbps": [6.4, 32],
                    "pcie_gbps": [32, 64],
                    "zip": [["ssd_gbps", "pcie_gbps"]],
                }
            ]
        }
    )
    # BERT: 2 batches x 2 policies x 1 host x 2 (zipped ssd/pcie) = 8; ResNet: 1 x 2 x 2 x 2 = 8
    assert len(pts) == 16
    assert pts[0] == Point("BERT", 128, "lru", 128.0, 6.4, 32.0, 0.0, None, 1.0, "group1")
    assert pts[1].ssd_gbps == 32 and pts[1].pcie_gbps == 64
    assert {p.policy for p in pts} == {"lru", "prefetch_lru"}
    assert sorted({p.host_mem_gb for p in pts if p.model == "ResNet152"}) == [0.0, 192.0]
    assert {p.batch for p in pts if p.model == "ResNet152"} == {512}


@pytest.mark.parametrize(
    "doc, text",
    [
        ({}, "at least one [[group]]"),
        ({"group": [{"models": ["BERT"], "policies": ["lru"]}]}, "missing axis 'batch'"),
        ({"group": [{"models": ["BERT"], "policies": ["lru"], "batch": 1, "sd": 2}]}, "unknown axis 'sd'"),
        ({"group": [{"models": ["GPT"], "policies": ["lru"], "batch": 1}]}, "unknown model"),
        ({"group": [{"models": ["BERT"], "policies": ["foo"], "batch": 1}]}, "unknown policy"),
        (
            {"group": [{"models": ["BERT"], "policies": ["lru"], "batch": {"VIT": [1]}}]},
            "no value for model BERT",
        ),
        (
            {
                "group": [
                    {
                        "models": ["BERT"],
                        "policies": ["lru"],
                        "batch": 1,
                        "ssd_gbps": [1, 2],
                        "pcie_gbps": [3],
                        "zip": [["ssd_gbps", "pcie_gbps"]],
                    }
                ]
            },
            "different lengths",
        ),
        ({"group": [{"models": ["BERT"], "policies": ["lru"], "batch": -1}]}, "positive integer"),
        ({"x": 1, "group": []}, "unknown top-level key"),
    ],
)
def test_matrix_errors(doc, text):
    with pytest.raises(InputError, match=text.replace("[", r"\[").replace("]", r"\]")):
        expand_matrix_dict(doc, source="m.toml")


def test_matrix_file_errors(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[[group]\nmodels = 1\n")
    with pytest.raises(InputError, match="bad.toml: not valid TOML"):
        expand_matrix(f)
    with pytest.raises(InputError, match="not found"):
        expand_matrix(tmp_path / "none.toml")


# ------------------------------------------------------------------------------ store
def rec(h, status="ok", **kw):
    r = {
        "hash": h,
        "label": f"M/{h}",
        "status": status,
        "config": {"batch_size": 1},
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
            "iterations": [{"exe_time_cycles": 5}],
            "x": np.int64(3),
            "f": float("inf"),
        },
    }
    r.update(kw)
    return r


def test_store_round_trip(tmp_path):
    p = tmp_path / "s.h5"
    s = ResultStore(p)
    kc = np.arange(10, dtype=np.int64).reshape(2, 5)
    s.write_point(
        rec(
            "a",
            arrays={"kernel_cycles": kc},
            wall_seconds=1.5,
            analysis={"key": "BERT-128", "total": np.arange(3), "global_weight": 7},
        )
    )
    s.write_point(rec("b", status="error", error="boom", result=None))
    s.write_point(rec("b", status="ok"))  # overwritten by a rerun
    s2 = ResultStore(p, create=False)
    assert s2.statuses() == {"a": "ok", "b": "ok"}
    pts = {x.hash: x for x in s2.points()}
    a = pts["a"]
    assert a.result == {"status": "ok", "iterations": [{"exe_time_cycles": 5}], "x": 3, "f": "inf"}
    assert a.attrs["model"] == "BERT" and a.attrs["batch_size"] == 128 and a.label == "M/a"
    assert a.attrs["wall_seconds"] == 1.5 and a.config == {"batch_size": 1}
    assert np.array_equal(s2.arrays("a")["kernel_cycles"], kc)
    w = s2.workload("BERT-128")
    assert w["total"].tolist() == [0, 1, 2] and w["global_weight"] == 7
    assert s2.workload_keys() == {"BERT-128"}


def test_store_errors(tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5 at all" * 10)
    with pytest.raises(InputError, match="bad.h5: cannot open the results store"):
        ResultStore(bad)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.attrs["format"] = "something"
    with pytest.raises(InputError, match="not a g10fast results store"):
        ResultStore(other)
    with pytest.raises(InputError, match="results store not found"):
        ResultStore(tmp_path / "none.h5", create=False)
    # truncated file (a crash of the file system, not of g10fast)
    good = tmp_path / "t.h5"
    with ResultStore(good) as s:
        for i in range(20):
            s.write_point(rec(f"a{i}", arrays={"kernel_cycles": np.arange(3000)}))
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 3])
    with pytest.raises(
        InputError,
        match=r"t.h5: results store is damaged \(database disk image "
        r"is malformed\); `g10fast store verify",
    ):
        ResultStore(good).statuses()
    # CLI: exit status 2 and the file named
    assert main(["figures", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert main(["sweep", "smoke", "--store", str(bad), "--g10", str(ARTIFACT)]) == 2 or not ARTIFACT.is_dir()


def legacy_store(path, points=(("a", "ok"),)):
    """A version-1 (HDF5) store as g10fast before store version 2 wrote it."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "g10fast-results-store"
        f.attrs["store_version"] = 1
        pts = f.create_group("points")
        wl = f.create_group("workloads")
        for h, st in points:
            g = pts.create_group(h)
            g.attrs["status"] = st
            g.attrs["label"] = f"M/{h}"
            g.attrs["model"] = "BERT"
            g.attrs["batch_size"] = 128
            g.create_dataset("config", data=json.dumps({"batch_size": 128}))
            g.create_dataset("result", data=json.dumps({"status": st, "x": 1.25}))
            g.create_group("arrays").create_dataset("kernel_cycles", data=np.arange(6).reshape(2, 3))
        w = wl.create_group("BERT-128")
        w.create_dataset("total", data=np.arange(4))
        w.attrs["kernels"] = 4


def test_legacy_hdf5_store_is_read_and_refuses_writes(tmp_path):
    p = tmp_path / "old.h5"
    legacy_store(p, [("a", "ok"), ("b", "failed")])
    with h5py.File(p, "r+") as f:  # what a writer killed mid-point left behind
        f["points"].create_group(".tmp-zzz")
    s = ResultStore(p)
    assert s.version == 1 and s.statuses() == {"a": "ok", "b": "failed"}
    pts = {x.hash: x for x in s.points()}
    assert pts["a"].result == {"status": "ok", "x": 1.25} and pts["a"].label == "M/a"
    assert s.arrays("a")["kernel_cycles"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert s.workload("BERT-128")["kernels"] == 4
    assert s.verify()["points"] == 2 and s.verify()["damaged"] == []
    with pytest.raises(InputError, match="version-1 .* read-only"):
        s.write_point(rec("c"))


def test_progress_line():
    import io

    buf = io.StringIO()
    pr = SweepProgress(3, stream=buf, tty=False, interval=0)
    pr.update("BERT/128-lru", "ok", 1.0)
    pr.update("BERT/128-deepUM", "error", 0.1)
    pr.update("x", "ok", 1.0)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and "1/3" in lines[0] and "1 not ok" in lines[1] and "3/3" in lines[2]
    assert "ETA" in lines[0] and "last: BERT/128-lru ok 1.0s" in lines[0]


# ------------------------------------------------------------------------------ sweeps
TINY = """
name = "tiny"
[[group]]
models = ["VIT"]
policies = ["lru", "ideal", "prefetch_lru"]
batch = [256]
"""


def _tiny(tmp_path):
    need_artifact()
    m = tmp_path / "tiny.toml"
    m.write_text(TINY)
    return resolve_points(expand_matrix(m), ARTIFACT), m


def test_tiny_sweep_resume_and_failures(tmp_path):
    """VIT-256 lru + ideal run (in this process); prefetch_lru is recorded with its error if
    g10fast cannot run it yet; a sweep stopped after one point resumes without redoing it."""
    resolved, _ = _tiny(tmp_path)
    store = tmp_path / "r.h5"
    s1 = run_sweep(resolved, store, workers=0, progress=False, max_points=1)
    assert (s1.ran, s1.skipped) == (1, 0)
    first = ResultStore(store).points()
    assert len(first) == 1
    s2 = run_sweep(resolved, store, workers=0, progress=False)
    assert s2.skipped == 1 and s2.ran == 2
    pts = {p.attrs["policy"]: p for p in ResultStore(store).points()}
    # the point from the first session was not redone
    assert pts[first[0].attrs["policy"]].attrs["finished_at"] == first[0].attrs["finished_at"]
    assert pts["lru"].status == "ok" and pts["ideal"].status == "ok"
    for pol in ("lru", "ideal"):  # ViT-256 fits in GPU memory: everything equals Ideal (spec §6)
        r = pts[pol].result
        assert r["iterations"][r["reported"]]["exe_time_cycles"] == 2549893347
    p = pts["prefetch_lru"]
    assert p.status in ("ok", "error")
    if p.status == "error":
        assert "InputError" in p.attrs["error_type"] and p.error
    # the workload analysis of VIT-256 was stored once
    w = ResultStore(store).workload("VIT-256")
    assert w["kernels"] == 1489 and len(w["total"]) == 1489 and w["ideal_cycles"] == 2549893347
    assert (w["active"] <= w["total"]).all()
    # a third run does nothing but retry errors
    s3 = run_sweep(resolved, store, workers=0, progress=False, retry_errors=False)
    assert s3.ran == 0 and s3.skipped == 3


def test_in_process_sweep_kept_states(tmp_path):
    """A sweep run in this process keeps the page states from point to point and gives them
    back at its end; with keep_buffers=False every point maps its own; the results are the
    same."""
    from g10fast.engine import page

    resolved, _ = _tiny(tmp_path)
    runs = page.STATES.runs
    run_sweep(resolved, tmp_path / "kept.h5", workers=0, progress=False)
    assert page.STATES.runs >= runs + 1  # (the UVM points took it: lru, and prefetch_lru if it ran)
    assert not page.STATES.keep and page.STATES.nbytes == 0
    runs = page.STATES.runs
    run_sweep(resolved, tmp_path / "own.h5", workers=0, progress=False, keep_buffers=False)
    assert page.STATES.runs == runs
    a = {p.attrs["policy"]: p for p in ResultStore(tmp_path / "kept.h5").points()}
    b = {p.attrs["policy"]: p for p in ResultStore(tmp_path / "own.h5").points()}
    assert a.keys() == b.keys()
    for pol in a:
        assert a[pol].status == b[pol].status
        if a[pol].status == "ok":
            ra, rb = a[pol].result, b[pol].result
            assert ra["iterations"] == rb["iterations"]


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sweep_cli_in_worker_processes_and_killed_sweep(tmp_path):
    """End to end through the CLI with a worker process; a sweep killed (SIGKILL) after its
    first stored point leaves a store that opens, and the rerun does only the rest."""
    resolved, m = _tiny(tmp_path)
    store = tmp_path / "r.h5"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "-m",
        "g10fast.cli",
        "sweep",
        str(m),
        "--store",
        str(store),
        "--g10",
        str(ARTIFACT),
        "--workers",
        "1",
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    import time

    t0 = time.time()
    while time.time() - t0 < 240:
        if proc.poll() is not None:
            break
        try:
            if store.exists() and len(ResultStore(store, create=False).statuses()) >= 1:
                break
        except InputError:
            pass  # caught mid-creation
        time.sleep(0.2)
    killed = proc.poll() is None
    children = _children(proc.pid)
    if killed:
        proc.kill()
        proc.wait()
        # the pool's worker outlives the parent briefly (it does not write the store) and
        # then exits on its own
        t1 = time.time()
        while time.time() - t1 < 15 and any(_alive(c) for c in children):
            time.sleep(0.2)
        assert not any(_alive(c) for c in children), "sweep workers outlived the killed sweep"
    done_before = ResultStore(store).statuses()
    assert len(done_before) >= 1
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"{len(done_before)} already stored" in out.stdout
    final = ResultStore(store).statuses()
    assert len(final) == 3 and final["%s" % resolved[0].hash] == "ok"


def test_dask_local_cluster_gives_the_same_store(tmp_path):
    distributed = pytest.importorskip("distributed")
    resolved, _ = _tiny(tmp_path)
    resolved = [r for r in resolved if r.point.policy in ("lru", "ideal")]
    local = run_sweep(resolved, tmp_path / "local.h5", workers=0, progress=False)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = run_sweep(resolved, tmp_path / "dask.h5", dask=client, progress=False)
    assert local.ok == remote.ok == 2
    a = {p.hash: p.result for p in ResultStore(tmp_path / "local.h5").points()}
    b = {p.hash: p.result for p in ResultStore(tmp_path / "dask.h5").points()}
    assert a.keys() == b.keys()
    for h in a:
        for k in ("iterations", "reported", "workload", "status", "policy"):
            assert a[h][k] == b[h][k]


def test_dask_missing_gives_clear_error(tmp_path, monkeypatch):
    resolved, _ = _tiny(tmp_path)
    import builtins

    real = builtins.__import__

    def fake(name, *a, **kw):
        if name.startswith("distributed"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(InputError, match="pip install 'g10fast\\[dask\\]'"):
        run_sweep(resolved[:1], tmp_path / "x.h5", dask="tcp://127.0.0.1:1", progress=False)


# ------------------------------------------------------------------------------ shared work


def test_plan_shared_with_kernel_time_variation_points(tmp_path):
    """A Fig. 19 point (kernel_time_std_dev > 0) reuses its base point's G10
    plan (variation is applied after planning, planner spec §3.4) and gives the same result
    as a run that plans afresh; a point with another SSD bandwidth gets its own plan."""
    need_artifact()
    from g10fast.run import run
    from g10fast.sweep import worker
    from g10fast.sweep.worker import execute, plan_key, task_for

    m = tmp_path / "var.toml"
    m.write_text(
        '[[group]]\nmodels = ["VIT"]\npolicies = ["prefetch_lru"]\nbatch = [256]\n'
        "kernel_time_std_dev = [0, 0.1]\n"
        '[[group]]\nmodels = ["VIT"]\npolicies = ["prefetch_lru"]\nbatch = [256]\n'
        "ssd_gbps = 6.4\n"
    )
    base, var, ssd = resolve_points(expand_matrix(m), ARTIFACT)
    assert var.config.kernel_time_std_dev == 0.1
    assert plan_key(base.config) == plan_key(var.config) != plan_key(ssd.config)
    worker.clear_cache()
    r0, r1, r2 = (execute(task_for(rp)) for rp in (base, var, ssd))
    assert [r["status"] for r in (r0, r1, r2)] == ["ok"] * 3, r0["error"]
    assert (r0["cache"], r1["cache"], r2["cache"]) == (
        {"workload": False, "plan": False},
        {"workload": True, "plan": True},
        {"workload": True, "plan": False},
    )
    fresh = run(var.config)
    assert r1["result"]["reported"] == fresh["reported"]
    it = r1["result"]["reported"]
    assert r1["result"]["iterations"][it]["exe_time_cycles"] == fresh["iterations"][it]["exe_time_cycles"]
    assert r1["result"]["plan"]["hints"] == fresh["plan"]["hints"]
    assert r1["cpu_seconds"] > 0
    worker.clear_cache()


def test_longest_first_schedule(tmp_path):
    """Groups of (model, batch) by estimated total cost, descending; tensor-engine points
    after page-engine points of the same workload; a fitting workload is cheap."""
    need_artifact()
    from g10fast.sweep.runner import estimate_cost, plan_sweep

    m = tmp_path / "s.toml"
    m.write_text(
        '[[group]]\nmodels = ["VIT", "SENet154"]\n'
        'policies = ["FlashNeuron", "lru", "prefetch_lru"]\n'
        "[group.batch]\nVIT = [256, 1280]\nSENet154 = [1024]\n"
    )
    resolved = resolve_points(expand_matrix(m), ARTIFACT)
    tasks, skipped = plan_sweep(resolved, ResultStore(tmp_path / "r.h5"))
    assert skipped == 0 and len(tasks) == 9
    labels = [t["label"] for t in tasks]
    assert labels[0].startswith("SENet154/1024-") and labels[-1].startswith("VIT/256-")
    assert labels[2].endswith("FlashNeuron")
    costs = [t["cost"] for t in tasks]
    assert costs[0] >= costs[1] >= costs[2]
    vit = {rp.point.batch: rp for rp in resolved if rp.point.model == "VIT" and rp.point.policy == "lru"}
    assert estimate_cost(vit[256]) < 0.2 * estimate_cost(vit[1280])
    # the analyses are computed by the first task of each group
    assert sum(t["analyze"] is not None for t in tasks) == 3


def test_worker_caches_drop_with_their_workload(tmp_path, monkeypatch):
    """The vitality and plan caches hold entries of cached workloads only."""
    from g10fast.sweep import worker

    worker.clear_cache()
    monkeypatch.setattr(worker, "MAX_CACHED_WORKLOADS", 1)

    class Cfg:
        def __init__(self, name):
            self.name = name

    keys = {}
    monkeypatch.setattr(worker, "_workload_key", lambda cfg: ("w", cfg.name))
    import g10fast.run as run_mod

    monkeypatch.setattr(run_mod, "workload_of", lambda cfg: keys.setdefault(cfg.name, object()))
    a, b = Cfg("a"), Cfg("b")
    worker._workload(a)
    worker._VITALITY[(("w", "a"), 1.2)] = "va"
    worker._PLANS[(("w", "a"), ("G10",))] = "pa"
    worker._workload(b)  # evicts a, with its vitality and plan
    assert list(worker._WORKLOADS) == [("w", "b")]
    assert not worker._VITALITY and not worker._PLANS
    worker.clear_cache()


def test_numba_cache_warm_asks_numba(tmp_path, monkeypatch):
    """numba_cache_warm: a module of kernels is warm once one of them is in Numba's cache for
    this CPU and these sources; not before, and not after an edit of the module (its index
    is then stale, though the file is still there)."""
    import importlib

    from g10fast.sweep.runner import numba_cache_warm

    src = tmp_path / "warm_probe_mod.py"
    src.write_text("from g10fast.jit import kernel\n\n\n@kernel\ndef f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("warm_probe_mod")
    try:
        assert numba_cache_warm(("warm_probe_mod",)) is False  # nothing compiled yet
        assert mod.f(1) == 2  # compiled and cached
        assert numba_cache_warm(("warm_probe_mod",)) is True
        src.write_text(src.read_text() + "\n\n@kernel\ndef g(x):\n    return x - 1\n")
        importlib.reload(mod)
        assert numba_cache_warm(("warm_probe_mod",)) is False  # stale index
        assert numba_cache_warm(("no_such_module_here",)) is False
    finally:
        sys.modules.pop("warm_probe_mod", None)
