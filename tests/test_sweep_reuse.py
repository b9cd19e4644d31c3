"""Reuse of a page-engine run at another host memory size (g10fast/sweep/reuse.py, issue 6):
a run whose peak host use stays below two host lines is the same run at both; a sweep derives
such points instead of simulating them and gives the store a sweep without reuse gives."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import ARTIFACT_DEFAULTS, POLICIES, make_workload  # noqa: E402

from g10fast.config import G10Config, config_hash  # noqa: E402
from g10fast.engine.page import simulate_pages  # noqa: E402
from g10fast.run import run  # noqa: E402
from g10fast.sweep import worker  # noqa: E402
from g10fast.sweep.matrix import Point, ResolvedPoint, expand_matrix, resolve_points  # noqa: E402
from g10fast.sweep.reuse import DERIVATION, ReuseScheduler, host_group  # noqa: E402
from g10fast.sweep.runner import run_sweep  # noqa: E402
from g10fast.sweep.store import ResultStore  # noqa: E402
from g10fast.workload.model import PAGE_SIZE  # noqa: E402

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"
GPU_PAGES = 150
BIG = 100_000  # host pages: far above any peak of the synthetic workload
#: peak host pages of the synthetic workload (seed 3) at BIG pages of host memory
PEAK = {"lru": 2058, "deepUM": 856, "prefetch_lru": 798}
#: timing fields: the only ones a derived point may differ in
TIMING = ("wall_seconds", "peak_rss_bytes")


def synth_workload():
    return make_workload(3, n_kernels=40, n_tensors=120, max_pages=40)


def synth_cfg(policy: str, host_pages: int) -> G10Config:
    d = dict(ARTIFACT_DEFAULTS)
    d.update(POLICIES[policy])
    d.update(
        GPU_memory_size_GB=GPU_PAGES * PAGE_SIZE / 2**30,
        CPU_memory_line_GB=host_pages * PAGE_SIZE / 2**30,
        batch_size=1,
        is_transformer=1,
        GPU_free_uspB=0.0,
        delta_parameter=0.5,
    )
    for k in (
        "nn_model_input_file",
        "orig_kernel_time_file",
        "pf_kernel_time_file",
        "input_pf_kernel_time_file",
        "workspace_size_file",
    ):
        d[k] = f"/synthetic/{k}"  # never read: the workload is given
    return G10Config(**d)


def _same_result(a: dict, b: dict, *, host_line_differs=True):
    keys = set(a) | set(b)
    for k in keys - set(TIMING) - {"kernels", "plan_object", "planner", "system", "plan"}:
        assert a[k] == b[k], k
    assert np.array_equal(a["kernels"], b["kernels"])
    sa, sb = dict(a["system"]), dict(b["system"])
    if host_line_differs:
        assert sa.pop("host_line") != sb.pop("host_line")
    assert sa == sb


@pytest.mark.parametrize("policy", ["lru", "deepUM", "prefetch_lru"])
def test_runs_above_the_peak_are_the_same_run(policy):
    """At BIG host pages and at peak + 1 (both above the peak) everything the engine reports
    is equal; at half the peak (the host fills up) the run differs."""
    w = synth_workload()
    big = run(synth_cfg(policy, BIG), workload=w)
    peak = big["host_peak_pages"]
    assert peak == PEAK[policy] and big["system"]["host_line"] == BIG
    near = run(synth_cfg(policy, peak + 1), workload=w)
    assert near["host_peak_pages"] == peak
    _same_result(big, near)
    if policy == "prefetch_lru":
        # the G10 planner reads the host size, but neither line constrains this plan
        assert np.array_equal(big["plan_object"].hints, near["plan_object"].hints)
    # the raw engine output too: per-kernel table, PCIe counters, iteration boundaries
    hints = None if big.get("plan_object") is None else big["plan_object"].hints
    ra = simulate_pages(w, synth_cfg(policy, BIG), hints=hints, keep_state=True)
    rb = simulate_pages(w, synth_cfg(policy, peak + 1), hints=hints, keep_state=True)
    for f in ("kernels", "pcie", "boundaries", "pstate"):
        assert np.array_equal(getattr(ra, f), getattr(rb, f)), f
    assert (ra.gpu_used, ra.host_used, ra.host_peak, ra.live_page_evictions) == (
        rb.gpu_used,
        rb.host_used,
        rb.host_peak,
        rb.live_page_evictions,
    )
    assert np.array_equal(ra.kernels, big["kernels"])
    # below the peak the host line comes into play: another run
    low = run(synth_cfg(policy, peak // 2), workload=w)
    assert low["host_peak_pages"] == peak // 2
    assert low["iterations"] != big["iterations"]
    assert [it["exe_time_cycles"] for it in low["iterations"]] > [
        it["exe_time_cycles"] for it in big["iterations"]
    ]


# ------------------------------------------------------------------------------ sweeps
#: host lines of the synthetic sweep, pages: 0 (never derivable), below and above the peaks
LINES = (0, 500, 1000, 3000, BIG)


def synth_points(lines=LINES):
    out = []
    for policy in ("lru", "deepUM", "prefetch_lru"):
        for pages in lines:
            cfg = synth_cfg(policy, pages)
            gb = cfg.CPU_memory_line_GB
            pt = Point("VIT", 1, policy, host_mem_gb=gb, group="synth")
            out.append(ResolvedPoint(pt, cfg, config_hash(cfg), f"SYN/1-{policy}-host{pages}"))
    return out


@pytest.fixture
def synthetic_builds(monkeypatch):
    """The sweep's workers (in this process) build the synthetic workload."""
    import g10fast.run as run_mod

    w = synth_workload()
    monkeypatch.setattr(run_mod, "workload_of", lambda spec: w)
    worker.clear_cache()
    yield w
    worker.clear_cache()


def _stored(path):
    s = ResultStore(path, create=False)
    return {p.hash: p for p in s.points()}, s


def _strip(result: dict) -> dict:
    r = {k: v for k, v in result.items() if k not in TIMING}
    if "plan" in r:
        r["plan"] = {k: v for k, v in r["plan"].items() if k != "plan_seconds"}
    return r


def _assert_same_stores(a_path, b_path):
    a, sa = _stored(a_path)
    b, sb = _stored(b_path)
    assert a.keys() == b.keys()
    for h in a:
        assert a[h].status == b[h].status == "ok", a[h].label
        assert _strip(a[h].result) == _strip(b[h].result), a[h].label
        assert a[h].config == b[h].config
        xa, xb = sa.arrays(h), sb.arrays(h)
        assert xa.keys() == xb.keys(), a[h].label
        for k in xa:
            assert np.array_equal(xa[k], xb[k]), (a[h].label, k)
    return a, b


def test_sweep_with_and_without_reuse_gives_the_same_store(tmp_path, synthetic_builds):
    pts = synth_points()
    by = {(rp.point.policy, round(rp.config.CPU_memory_line_GB * 2**30 / PAGE_SIZE)): rp for rp in pts}
    off = run_sweep(pts, tmp_path / "plain.h5", workers=0, progress=False, reuse=False)
    on = run_sweep(pts, tmp_path / "reuse.h5", workers=0, progress=False)
    assert off.ok == on.ok == len(pts) == 15
    assert off.reused == 0
    # derived: every line above the policy's peak at BIG pages (lru 2058: 3000; deepUM 856
    # and prefetch_lru 798: 1000, 3000 — the G10 plan is the same at those lines)
    want = {("lru", 3000), ("deepUM", 1000), ("deepUM", 3000), ("prefetch_lru", 1000), ("prefetch_lru", 3000)}
    assert on.reused == len(want) and on.reuse_saved_cpu_seconds >= 0
    plain, reuse = _assert_same_stores(tmp_path / "plain.h5", tmp_path / "reuse.h5")
    for (policy, pages), rp in by.items():
        attrs = reuse[rp.hash].attrs
        if (policy, pages) in want:
            assert attrs["derived_from"] == by[(policy, BIG)].hash
            assert attrs["derivation"] == DERIVATION
            assert reuse[rp.hash].result["host_peak_pages"] == PEAK[policy]
        else:
            assert "derived_from" not in attrs and "derived_from" not in plain[rp.hash].attrs
        if policy == "prefetch_lru":
            assert len(attrs["plan_hints_sha256"]) == 64
    # the derived results carry their own host line
    d = reuse[by[("deepUM", 1000)].hash].result
    assert d["system"]["host_line"] == 1000
    assert d["iterations"] == reuse[by[("deepUM", BIG)].hash].result["iterations"]


def test_resumed_sweep_reuses_stored_runs(tmp_path, synthetic_builds):
    """The runs at BIG pages stored by an earlier session are the sources of a later one."""
    pts = synth_points()
    big = [rp for rp in pts if rp.config.CPU_memory_line_GB * 2**30 / PAGE_SIZE == BIG]
    store = tmp_path / "r.h5"
    first = run_sweep(big, store, workers=0, progress=False)
    assert first.ran == 3 and first.reused == 0
    second = run_sweep(pts, store, workers=0, progress=False)
    assert second.skipped == 3 and second.ran == 12 and second.reused == 5
    run_sweep(pts, tmp_path / "plain.h5", workers=0, progress=False, reuse=False)
    _, reuse = _assert_same_stores(tmp_path / "plain.h5", store)
    assert sum(p.attrs.get("derivation") == DERIVATION for p in reuse.values()) == 5
    # stored points of an older g10fast (no host_peak_pages) are not sources
    old = tmp_path / "old.h5"
    run_sweep(big, old, workers=0, progress=False)
    import json
    import sqlite3

    from g10fast.sweep.store import point_checksum

    con = sqlite3.connect(old)
    for row in con.execute("SELECT hash, status, attrs, config, result, arrays FROM points").fetchall():
        r = json.loads(row[4])
        r.pop("host_peak_pages")
        row = row[:4] + (json.dumps(r), row[5])
        con.execute(
            "UPDATE points SET result = ?, checksum = ? WHERE hash = ?",
            (row[4], point_checksum(*row), row[0]),
        )
    con.commit()
    con.close()
    third = run_sweep(pts, old, workers=0, progress=False)
    # ... the largest line left (3000 pages) runs first and is the source of 1000 for the
    # policies whose peak is below 1000 pages
    assert third.reused == 2
    by = {(rp.point.policy, round(rp.config.CPU_memory_line_GB * 2**30 / PAGE_SIZE)): rp.hash for rp in pts}
    got = {p.hash: p.attrs.get("derived_from") for p in ResultStore(old).points()}
    assert {h: s for h, s in got.items() if s} == {
        by[("deepUM", 1000)]: by[("deepUM", 3000)],
        by[("prefetch_lru", 1000)]: by[("prefetch_lru", 3000)],
    }


def test_scheduler_runs_the_largest_line_first_and_holds_the_rest():
    pts = synth_points()
    from g10fast.sweep.worker import task_for

    tasks = [task_for(rp) for rp in pts]
    s = ReuseScheduler([dict(t) for t in tasks], None, reuse=True)
    out = []
    while True:
        t = s.next()
        if t is None:
            break
        out.append(t["label"])
    # per policy: the BIG line first, then the line 0 (never derivable); the rest wait
    assert out == [f"SYN/1-{p}-host{n}" for p in ("lru", "deepUM", "prefetch_lru") for n in (BIG, 0)]
    assert s.pending() == 9 and s.next() is None
    # the BIG run of deepUM ends with a peak of 900 pages: 1000 and 3000 are derived (by
    # the parent: no plan to compare), 500 is released
    big = next(t for t in tasks if t["label"] == f"SYN/1-deepUM-host{BIG}")
    s.completed(
        {
            "hash": big["hash"],
            "status": "ok",
            "result": {
                "engine": "page",
                "policy": "deepUM",
                "host_peak_pages": 900,
                "system": {"host_line": BIG},
            },
            "arrays": {},
            "cpu_seconds": 1.0,
        }
    )
    assert sorted(t["label"] for t in s.take_local()) == ["SYN/1-deepUM-host1000", "SYN/1-deepUM-host3000"]
    assert s.next()["label"] == "SYN/1-deepUM-host500" and s.next() is None
    # without reuse: matrix order, nothing held
    s = ReuseScheduler([dict(t) for t in tasks], None, reuse=False)
    assert [s.next()["label"] for _ in range(len(tasks))] == [t["label"] for t in tasks]
    # groups: everything but the host line; tensor-engine points form none
    a, b = synth_cfg("lru", 10).to_dict(), synth_cfg("lru", 20).to_dict()
    assert host_group(a) == host_group(b) != host_group(synth_cfg("deepUM", 10).to_dict())
    fn = synth_cfg("lru", 10).replace(migration_policy="FLASHNEURON").to_dict()
    assert host_group(fn) is None


# ------------------------------------------------------------------------------ the artifact
def test_vit1024_host_variants_reused_in_a_worker_process(tmp_path):
    """ViT-1024 DeepUM+ and G10 at 64, 128 and 256 GiB: one run each (in a worker process),
    the other two lines derived (G10's in the worker, after comparing its plan). The totals
    over both iterations are those of g10fast.run at each line (DeepUM+ 18,077,181,932
    cycles, G10 15,320,642,657, peak host use 21.3 GiB)."""
    if not (ARTIFACT / "frontend" / "Nets").is_dir():
        pytest.skip("G10 artifact not available")
    m = tmp_path / "vit.toml"
    m.write_text(
        '[[group]]\nmodels = ["VIT"]\npolicies = ["deepUM", "prefetch_lru"]\n'
        "batch = [1024]\nhost_mem_gb = [64, 128, 256]\n"
    )
    resolved = resolve_points(expand_matrix(m), ARTIFACT)
    s = run_sweep(resolved, tmp_path / "r.h5", workers=1, progress=False)
    assert s.ok == 6 and s.reused == 4
    pts, _ = _stored(tmp_path / "r.h5")
    src = {p.attrs["policy"]: p.hash for p in pts.values() if p.attrs["host_mem_gb"] == 256}
    for p in pts.values():
        r = p.result
        total = sum(it["exe_time_cycles"] for it in r["iterations"])
        if p.attrs["policy"] == "deepUM":
            assert total == 18_077_181_932
        else:
            assert total == 15_320_642_657
        assert r["system"]["host_line"] == int(p.attrs["host_mem_gb"] * 2**30 // PAGE_SIZE)
        if p.attrs["host_mem_gb"] != 256:
            assert p.attrs["derived_from"] == src[p.attrs["policy"]]
            assert r["host_peak_pages"] < r["system"]["host_line"]


SMALL = (
    '[[group]]\nmodels = ["VIT"]\npolicies = ["lru", "prefetch_lru"]\nbatch = [256]\n'
    "host_mem_gb = [64, 256]\n"
)


def test_cli_no_reuse_and_default(tmp_path, capsys):
    """ViT-256 fits in GPU memory (peak host use 0): with reuse the 64 GiB points are derived
    from the 256 GiB ones; --no-reuse simulates all four (here also with --no-keep-buffers:
    page states mapped per point, the same results as the kept ones of the second sweep)."""
    if not (ARTIFACT / "frontend" / "Nets").is_dir():
        pytest.skip("G10 artifact not available")
    from g10fast.cli import main

    m = tmp_path / "small.toml"
    m.write_text(SMALL)
    args = ["sweep", str(m), "--g10", str(ARTIFACT), "--workers", "0", "--no-progress"]
    assert main(args + ["--store", str(tmp_path / "a.h5"), "--no-reuse", "--no-keep-buffers"]) == 0
    out = capsys.readouterr().out
    assert "4 run (4 ok" in out and "reused" not in out
    assert main(args + ["--store", str(tmp_path / "b.h5")]) == 0
    out = capsys.readouterr().out
    assert "4 run (4 ok" in out and "2 of them reused a run at another host memory size" in out
    _assert_same_stores(tmp_path / "a.h5", tmp_path / "b.h5")
    pts, _ = _stored(tmp_path / "b.h5")
    assert sorted(
        (p.attrs["policy"], p.attrs["host_mem_gb"]) for p in pts.values() if p.attrs.get("derived_from")
    ) == [("lru", 64.0), ("prefetch_lru", 64.0)]
    assert all(p.result["host_peak_pages"] == 0 for p in pts.values())


def test_dask_sweep_reuses(tmp_path):
    distributed = pytest.importorskip("distributed")
    if not (ARTIFACT / "frontend" / "Nets").is_dir():
        pytest.skip("G10 artifact not available")
    m = tmp_path / "small.toml"
    m.write_text(SMALL)
    resolved = resolve_points(expand_matrix(m), ARTIFACT)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        s = run_sweep(resolved, tmp_path / "dask.h5", dask=client, progress=False)
    assert s.ok == 4 and s.reused == 2
    run_sweep(resolved, tmp_path / "plain.h5", workers=0, progress=False, reuse=False)
    _assert_same_stores(tmp_path / "plain.h5", tmp_path / "dask.h5")
