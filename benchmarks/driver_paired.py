"""Paired before/after timings of driver-engine runs on two source trees, alternating.

    python benchmarks/driver_paired.py --base /tmp/wt-base --new . \
        --points bert-base:256:uvm resnet152:1280:uvm:1.5 --repeats 1

A point is MODEL:BATCH:POLICY[:R] (builtin workload on the g10-artifact preset; R: GPU
memory = footprint / R, else the preset's 40 GB). Each measurement is a fresh process
running one tree (PYTHONPATH=tree): a warm-up run of bert-base 8 under the same policy first
(loads the Numba cache), then the timed run; it reports the run's CPU and wall seconds, the
process's peak RSS and a digest of the result (kernel table and counters of every
iteration), so that "identical results" is checked, not assumed. Trees alternate. One JSON
line per invocation goes to benchmarks/results/driver_paired.jsonl, with both commits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _bench import append_record, git_commit

HERE = Path(__file__).resolve().parent

CHILD = r"""
import hashlib, json, resource, sys, time
import numpy as np
from g10fast import api
from g10fast.hardware import load_preset
from g10fast.run import run
from g10fast.spec import builtin_spec
from g10fast.system import System
model, batch, policy, ratio = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
base = System.from_preset(load_preset("g10-artifact"))
t0 = time.perf_counter()
ws = api.builtin_workload("bert-base", 8, "g10-artifact")
run(builtin_spec("bert-base", 8, base.replace(gpu_memory_gb=ws.footprint_bytes / 2 / 2**30),
                 policy), workload=ws)
w = api.builtin_workload(model, batch, "g10-artifact")
system = base if ratio <= 0 else base.replace(gpu_memory_gb=w.footprint_bytes / ratio / 2**30)
spec = builtin_spec(model, batch, system, policy)
t1 = time.perf_counter(); c1 = time.process_time()
res = run(spec, workload=w)
t2 = time.perf_counter(); c2 = time.process_time()
h = hashlib.sha256(np.ascontiguousarray(res["kernels"]).tobytes())
h.update(json.dumps(res["iterations"], sort_keys=True, default=str).encode())
it = res["iterations"][res["reported"]]
print(json.dumps({"warmup_wall_s": t1 - t0, "wall_s": t2 - t1, "cpu_s": c2 - c1,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "exe_time_cycles": it["exe_time_cycles"], "digest": h.hexdigest()[:16]}))
"""


def measure(tree: Path, point: str) -> dict:
    f = point.split(":")
    model, batch, policy = f[:3]
    ratio = f[3] if len(f) > 3 else "0"
    env = dict(os.environ, PYTHONPATH=str(tree))
    p = subprocess.run(
        [sys.executable, "-c", CHILD, model, batch, policy, ratio],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tree),
    )
    if p.returncode != 0:
        raise SystemExit(f"{tree} {point}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--points", nargs="+", default=["bert-base:256:uvm"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "driver_paired.jsonl")
    a = ap.parse_args(argv)
    trees = {"base": a.base.resolve(), "new": a.new.resolve()}
    out = {p: {"base": [], "new": []} for p in a.points}
    for rep in range(a.repeats):
        for point in a.points:
            order = ("base", "new") if rep % 2 == 0 else ("new", "base")
            for name in order:
                r = measure(trees[name], point)
                out[point][name].append(r)
                sys.stderr.write(
                    f"{point} {name}: cpu {r['cpu_s']:.2f} s, wall {r['wall_s']:.2f}"
                    f" s, {r['peak_rss_mib']:.0f} MiB, {r['digest']}\n"
                )
    summary = {}
    for point, d in out.items():
        summary[point] = {
            "base_cpu_s": [round(r["cpu_s"], 3) for r in d["base"]],
            "new_cpu_s": [round(r["cpu_s"], 3) for r in d["new"]],
            "base_wall_s": [round(r["wall_s"], 3) for r in d["base"]],
            "new_wall_s": [round(r["wall_s"], 3) for r in d["new"]],
            "base_peak_rss_mib": max(r["peak_rss_mib"] for r in d["base"]),
            "new_peak_rss_mib": max(r["peak_rss_mib"] for r in d["new"]),
            "min_cpu_ratio_new_over_base": round(
                min(r["cpu_s"] for r in d["new"]) / min(r["cpu_s"] for r in d["base"]), 4
            ),
            "median_cpu_ratio_new_over_base": round(
                statistics.median(r["cpu_s"] for r in d["new"])
                / statistics.median(r["cpu_s"] for r in d["base"]),
                4,
            ),
            "same_result": len({r["digest"] for r in d["base"] + d["new"]}) == 1,
        }
    rec = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "base": git_commit(trees["base"]),
        "new": git_commit(trees["new"]),
        "machine": os.uname().nodename,
        "cpus": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "repeats": a.repeats,
        "points": summary,
    }
    append_record(a.out, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
