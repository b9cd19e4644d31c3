"""Extrapolate the time of the whole artifact matrix (1,410 points) from a measured sample.

    python benchmarks/sweep_extrapolate.py STORE.h5 [STORE.h5 ...] [--workers 2] [--note ...]

The stores hold points of the artifact matrix run by `g10fast sweep` (e.g. the Figure-11
subset and benchmarks/sweep_cost_sample.toml). Each stored point has its CPU seconds in its
worker and the CPU seconds of its workload parse (0 on a worker cache hit). CPU time, not wall
time, because this 2-core machine is shared with other jobs while the sample runs: a worker is
a single thread, so on two free cores a point's wall time is its CPU time.

Model, per matrix point (model m, batch b, policy p, system variation v):

    run(m, b, p)      measured simulation CPU (point CPU - workload CPU) at the default system;
                      between measured batches of (m, p) linear in b; a policy measured at one
                      batch only is scaled by b / b_measured
    factor(p, kind)   the mean ratio run(variant) / run(base) measured on the variation
                      stratum (kinds: ssd = SSD/PCIe bandwidth, host = host memory, ktv =
                      kernel-time variation), 1 for the default system
    parse(m, b)       workload CPU, measured or linear in b (per model)

Then the sweep's own schedule (`plan_sweep`: longest first, groups kept together) is replayed
on N workers, each worker with its two-workload cache, each task to the first free worker:
the makespan is the estimated wall time of the full matrix. A point measured in one of the
stores counts with its own CPU seconds (a point derived from a run at another host size, with
its own small cost; derived points are left out of the fit); when every point is measured the
record is labelled a replay. Appends one JSON line to
benchmarks/results/sweep_extrapolation.jsonl, labelled as an extrapolation with the number
of measured points.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import OrderedDict, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast import __version__  # noqa: E402
from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points  # noqa: E402
from g10fast.sweep.runner import plan_sweep  # noqa: E402
from g10fast.sweep.store import ResultStore  # noqa: E402
from g10fast.sweep.worker import MAX_CACHED_WORKLOADS  # noqa: E402

DEFAULT = {"host_mem_gb": 128.0, "ssd_gbps": 3.2, "pcie_gbps": 15.754, "kernel_time_std_dev": 0.0}


def variation_kind(a) -> str:
    if float(a.get("kernel_time_std_dev", 0) or 0) > 0:
        return "ktv"
    if (
        abs(float(a.get("ssd_gbps", 3.2)) - 3.2) > 1e-9
        or abs(float(a.get("pcie_gbps", 15.754)) - 15.754) > 1e-6
    ):
        return "ssd"
    if abs(float(a.get("host_mem_gb", 128)) - 128) > 1e-9 and a.get("policy") != "G10GDSSSD":
        return "host"
    return "base"


def measured(stores):
    """{hash: (attrs dict, cpu, workload_cpu)} of every ok/failed point with CPU time, newest
    store last (a later store's measurement of the same hash wins)."""
    out = {}
    for path in stores:
        s = ResultStore(path, create=False)
        for p in s.points():
            a = dict(p.attrs)
            if "cpu_seconds" not in a or p.status not in ("ok", "failed"):
                continue
            out[p.hash] = (a, float(a["cpu_seconds"]), float(a.get("workload_cpu_seconds", 0.0)))
    return out


def fit(meas):
    base = defaultdict(dict)  # (model, policy) -> {batch: run cpu}
    parse = defaultdict(dict)  # model -> {batch: parse cpu}
    var = defaultdict(list)  # (model, batch, policy, kind) -> [run cpu]
    for a, cpu, wcpu in meas:
        if a.get("source_cpu_seconds"):
            continue  # derived from another host size: not a run
        m, b, pol = a["model"], int(a["batch_size"]), a["policy"]
        run = max(cpu - wcpu, 0.0)
        if wcpu > 0.2:  # a parse, not a cache hit
            parse[m][b] = max(parse[m].get(b, 0.0), wcpu)
        kind = variation_kind(a)
        if kind == "base":
            base[(m, pol)][b] = run
        else:
            var[(m, b, pol, kind)].append(run)
    factors = defaultdict(list)  # (policy, kind) -> [ratio]
    for (m, b, pol, kind), runs in var.items():
        b0 = base.get((m, pol), {}).get(b)
        if b0:
            factors[(pol, kind)].extend(r / b0 for r in runs)
    factor = {k: float(np.mean(v)) for k, v in factors.items()}
    return base, parse, factor


def interp(table: dict, b: int) -> float | None:
    if not table:
        return None
    xs = sorted(table)
    if len(xs) == 1:
        return table[xs[0]] * b / xs[0]
    ys = [table[x] for x in xs]
    if b < xs[0] or b > xs[-1]:  # linear through the two nearest
        i = (0, 1) if b < xs[0] else (-2, -1)
        x0, x1 = xs[i[0]], xs[i[1]]
        y0, y1 = ys[i[0]], ys[i[1]]
        return max(y0 + (y1 - y0) * (b - x0) / (x1 - x0), 0.0)
    return float(np.interp(b, xs, ys))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--matrix", default="artifact")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--g10", default=str(ROOT.parent / "shared" / "g10-artifact"))
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sweep_extrapolation.jsonl"))
    args = ap.parse_args(argv)

    meas_by_hash = measured(args.stores)
    meas = list(meas_by_hash.values())
    base, parse, factor = fit(meas)
    resolved = resolve_points(expand_matrix(named_matrix(args.matrix)), args.g10)
    measured_hash = set()
    for path in args.stores:
        measured_hash |= {h for h, st in ResultStore(path, create=False).statuses().items()}
    # the sweep's order, from an empty store
    import tempfile

    with tempfile.TemporaryDirectory() as td:
        tasks, _ = plan_sweep(resolved, ResultStore(os.path.join(td, "empty.h5")))
    by_hash = {rp.hash: rp for rp in resolved}
    missing = set()
    est = {}
    for t in tasks:
        rp = by_hash[t["hash"]]
        pt = rp.point
        a = {
            "policy": pt.policy,
            "host_mem_gb": pt.host_mem_gb,
            "ssd_gbps": pt.ssd_gbps,
            "pcie_gbps": pt.pcie_gbps,
            "kernel_time_std_dev": pt.kernel_time_std_dev,
        }
        if t["hash"] in meas_by_hash:  # measured: its own CPU (a derived point: its own)
            _a, cpu, wcpu = meas_by_hash[t["hash"]]
            est[t["hash"]] = max(cpu - wcpu, 0.0)
            continue
        r = interp(base.get((pt.model, pt.policy), {}), pt.batch)
        if r is None:
            missing.add((pt.model, pt.policy))
            r = 0.0
        kind = variation_kind(a)
        if kind != "base":
            r *= factor.get((pt.policy, kind), 1.0)
        est[t["hash"]] = r
    parse_est = {}
    for rp in resolved:
        key = (rp.point.model, rp.point.batch)
        if key not in parse_est:
            parse_est[key] = interp(parse.get(rp.point.model, {}), rp.point.batch) or 0.0

    # replay the schedule: each task to the first free worker, LRU workload cache per worker
    free = [0.0] * args.workers
    caches = [OrderedDict() for _ in range(args.workers)]
    parse_total = 0.0
    for t in tasks:
        rp = by_hash[t["hash"]]
        key = (rp.point.model, rp.point.batch)
        w = int(np.argmin(free))
        c = caches[w]
        cost = est[t["hash"]]
        if key in c:
            c.move_to_end(key)
        else:
            cost += parse_est[key]
            parse_total += parse_est[key]
            c[key] = True
            while len(c) > MAX_CACHED_WORKLOADS:
                c.popitem(last=False)
        free[w] += cost
    makespan = max(free)
    run_total = sum(est.values())
    costs = np.array(list(est.values()))
    by_policy = defaultdict(float)
    by_group = defaultdict(float)
    for rp in resolved:
        by_policy[rp.point.policy] += est[rp.hash]
        by_group[rp.point.group] += est[rp.hash]
    peak_worker = max((int(a.get("worker_peak_rss_bytes", 0)) for a, _, _ in meas), default=0)
    rec = {
        "benchmark": "sweep_extrapolation",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "g10fast_version": __version__,
        "kind": (
            f"REPLAY of the measured CPU seconds of all {len(resolved)} points on "
            f"{args.workers} workers (not an end-to-end run)"
            if set(by_hash) <= set(meas_by_hash)
            else f"EXTRAPOLATION of the {len(resolved)}-point matrix from {len(meas)} measured "
            "points (CPU seconds per point; not a measured full sweep)"
        ),
        "stores": [str(p) for p in args.stores],
        "measured_points": len(meas),
        "matrix_points": len(resolved),
        "matrix_points_measured": len(measured_hash & set(by_hash)),
        "workers": args.workers,
        "estimated_wall_seconds": round(makespan, 1),
        "estimated_cpu_seconds_total": round(run_total + parse_total, 1),
        "estimated_parse_cpu_seconds": round(parse_total, 1),
        "per_point_estimated_seconds": {
            "min": round(float(costs.min()), 3),
            "median": round(float(np.median(costs)), 3),
            "p90": round(float(np.percentile(costs, 90)), 3),
            "max": round(float(costs.max()), 3),
        },
        "histogram_seconds": {
            f"<{e}": int(n)
            for e, n in zip(
                [1, 5, 15, 60, 180, 600, "inf"], np.histogram(costs, [0, 1, 5, 15, 60, 180, 600, np.inf])[0]
            )
        },
        "estimated_cpu_by_policy": {k: round(v, 1) for k, v in sorted(by_policy.items())},
        "estimated_cpu_by_group": {k: round(v, 1) for k, v in sorted(by_group.items())},
        "variation_factors": {f"{p}/{k}": round(v, 3) for (p, k), v in sorted(factor.items())},
        "measured_run_cpu": {
            f"{m}/{p}": {str(b): round(v, 2) for b, v in sorted(t.items())}
            for (m, p), t in sorted(base.items())
        },
        "measured_parse_cpu": {
            m: {str(b): round(v, 2) for b, v in sorted(t.items())} for m, t in sorted(parse.items())
        },
        "unmeasured_model_policy": sorted(f"{m}/{p}" for m, p in missing),
        "peak_worker_rss_bytes_measured": peak_worker,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "note": args.note,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(
        json.dumps(
            {
                k: rec[k]
                for k in (
                    "kind",
                    "estimated_wall_seconds",
                    "estimated_cpu_seconds_total",
                    "per_point_estimated_seconds",
                    "histogram_seconds",
                    "estimated_cpu_by_policy",
                    "estimated_cpu_by_group",
                    "variation_factors",
                    "unmeasured_model_policy",
                )
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
