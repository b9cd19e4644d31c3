"""SINGA's swap planner and AppObMem on SINGA's real traces with accesses
(../shared/external/singa-traces/vec_run_5_*.csv): overhead per iteration against the memory
limit, one curve per score, and the largest memory reduction at zero overhead. SINGA's measured
link costs. Appends to benchmarks/results/swap_traces.jsonl and draws
docs/swap-{model}-{policy}.png.

    python benchmarks/swap_traces.py [--no-figures]"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from g10fast.alloc.report import swap_figure
from g10fast.alloc.swap import check_plan, plan_swaps, sweep_limits
from g10fast.alloc.trace import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import git_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "external" / "singa-traces"
MiB = 1 << 20


def main() -> int:
    if not TRACES.is_dir():
        print("../shared/external/singa-traces not found: nothing to do")
        return 0
    figures = "--no-figures" not in sys.argv
    out = ROOT / "benchmarks" / "results" / "swap_traces.jsonl"
    commit = git_commit()
    machine = f"{platform.machine()} {os.cpu_count()} cpus {platform.python_version()}"
    for model in ("alex", "vgg", "resnet"):
        tr = read_trace(TRACES / f"vec_run_5_{model}.csv")
        for policy in ("singa_swap", "appobmem"):
            top = plan_swaps(tr, 1 << 62, policy)
            peak = top.peak_before
            limits = [int(peak * f) for f in np.linspace(0.40, 1.0, 31)]
            t0 = time.perf_counter()
            rows = sweep_limits(tr, limits, policy)
            secs = time.perf_counter() - t0
            for sc in ("vote", "doa", "aoa", "wdoa"):
                p = plan_swaps(tr, int(0.7 * peak), policy, sc)
                check_plan(tr, p)
            best = {}
            for r in rows:
                if r["status"] == "ok" and r["overhead_per_iteration_s"] == 0.0:
                    red = 1 - r["peak_bytes"] / r["peak_before_bytes"]
                    best[r["score"]] = max(best.get(r["score"], 0.0), red)
            rec = {"model": model, "trace": tr.name, "policy": policy,
                   "peak_live_bytes": int(peak), "iteration_s": rows[0]["iteration_s"],
                   "zero_overhead_reduction": best,
                   "curve": [{k: r[k] for k in ("score", "limit_bytes", "peak_bytes", "swaps",
                                                "overhead_per_iteration_s", "status")}
                             for r in rows],
                   "sweep_seconds": round(secs, 3), "commit": commit, "machine": machine}
            with open(out, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"{model:7s} {policy:10s} peak {peak / MiB:7.1f} MiB, iteration "
                  f"{rows[0]['iteration_s']:.3f} s; largest reduction at zero overhead: " +
                  ", ".join(f"{k} {100 * v:.1f}%" for k, v in best.items()) +
                  f"  ({len(rows)} plans in {secs:.2f} s)", flush=True)
            if figures:
                swap_figure(rows, ROOT / "docs" / f"swap-{model}-{policy}.png",
                            f"{policy} on SINGA {model} (vec_run_5), SINGA's link costs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
