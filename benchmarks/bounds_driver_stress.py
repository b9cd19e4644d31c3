"""A stress check of the driver engine's bound (issue 24, docs/bounds.md): every driver policy
under five option sets (the driver's defaults; a flat transfer curve without fault latency;
4 KiB LRU eviction with compute overlapping in-flight prefetches; no prefetcher with 16-fault
batches; access-ordered chunks dropping clean pages) on 12 synthetic workloads of a few MiB per
tensor, three GPU sizes and links, two host sizes, three iterations: counts the iterations
below their bound (none expected) and the smallest time / bound.

    python benchmarks/bounds_driver_stress.py
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import git_commit  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bounds_driver_stress.jsonl"

COMPATS = [
    {},
    {"transfer_curve": "flat", "fault_latency_us": 0.0},
    {"evict": "lru4k", "transfer_curve": "flat", "fault_latency_us": 0.0, "inflight_overlap": True},
    {"prefetcher": "none", "fault_batch": 16, "fault_latency_us": 0.0},
    {"evict": "access2m", "skip_clean_writeback": True, "fault_latency_us": 0.0, "transfer_curve": "flat"},
]


def main():
    from synth import kernel_pages, make_workload

    from g10fast import policies
    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec
    from g10fast.system import System
    from g10fast.workload.model import PAGE_SIZE

    drv = [r.name for r in policies.records() if r.engine == "driver"]
    src = WorkloadSource("artifact", "synth", 1)
    n = bad = above = 0
    worst = float("inf")
    for seed in range(10, 22):
        w = make_workload(seed, n_kernels=10, n_tensors=22, max_pages=900, p_global=0.4)
        kp = int(kernel_pages(w).max())
        for mul, link in [(1.0, 32.0), (1.2, 2.0), (1.5, 0.5)]:
            frames = int(kp * mul) + 520
            host = (2 if seed % 2 else 30) * frames * PAGE_SIZE / 2**30
            system = System(
                gpu_memory_gb=frames * PAGE_SIZE / 2**30,
                gpu_frequency_ghz=1.2,
                host_memory_gb=host,
                host_link_gbps=link,
                ssd_bandwidth_gbps=link / 3,
                fault_latency_us=1,
                ssd_latency_us=1,
            )
            for name in drv:
                for c in COMPATS:
                    r = run(
                        make_spec(src, system, name, engine={"compat": c, "num_iteration": 3}), workload=w
                    )
                    if r["status"] != "ok":
                        continue
                    for it in r["iterations"]:
                        n += 1
                        worst = min(worst, it["exe_time_cycles"] / max(it["bound_time_cycles"], 1))
                        if it["exe_time_cycles"] < it["bound_time_cycles"]:
                            bad += 1
                            print("BELOW", seed, mul, name, c, it["iteration"], flush=True)
                    ideal = r["iterations"][-1]["ideal_exe_time_cycles"]
                    above += r["bound"]["time_cycles"] > ideal
    rec = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": git_commit(),
        "nproc": os.cpu_count(),
        "iterations": n,
        "below": bad,
        "runs_bound_above_ideal": above,
        "min_time_over_bound": worst,
    }
    with open(OUT, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
