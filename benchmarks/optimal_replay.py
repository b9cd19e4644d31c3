"""The sandwich on small synthetic workloads (issue 24, docs/bounds.md, "Tier 3"): window
bound, full LP, the bound's MILP (with and without the engine's tick slack), the engine-shaped
MILP, its plan replayed by the page engine, and every page-engine policy.

    python benchmarks/optimal_replay.py [--seeds 0-5]

Workloads: tests/synth.make_workload(seed, 20 kernels, 40 tensors, 30 pages max), GPU 1.2 x the
largest kernel's pages, 0.3 GB/s host link, SSD 0.075 GB/s, 4-page batcher ticks. Appends JSON
lines to benchmarks/results/optimal_replay.jsonl and prints a Markdown row per seed.
"""

from __future__ import annotations

import argparse
import dataclasses
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

OUT = ROOT / "benchmarks" / "results" / "optimal_replay.jsonl"


def one(seed: int) -> dict:
    import numpy as np
    from synth import kernel_pages, make_workload

    from g10fast import policies
    from g10fast.analysis.bounds import traffic_bound, window_bound
    from g10fast.analysis.bounds_lp import lp_bound, milp_engine_schedule, milp_optimum
    from g10fast.engine.bound_models import page_engine_model
    from g10fast.engine.page import PageMode, page_params
    from g10fast.planner.optimal import plan_from_engine_schedule, plan_from_schedule
    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec
    from g10fast.system import System
    from g10fast.workload.model import PAGE_SIZE

    w = make_workload(seed, n_kernels=20, n_tensors=40, max_pages=30)
    kp = int(kernel_pages(w).max())
    system = System(
        gpu_memory_gb=int(kp * 1.2) * PAGE_SIZE / 2**30,
        gpu_frequency_ghz=1.2,
        host_memory_gb=1.0,
        host_link_gbps=0.3,
        ssd_bandwidth_gbps=0.075,
        batch_pages=4,
        fault_latency_us=45,
        ssd_latency_us=20,
    )
    params = page_params(system, PageMode(True, True, num_iteration=2))
    m = page_engine_model(w, params)
    m0 = dataclasses.replace(m, slack=0.0)
    opt = milp_optimum(m, time_limit=60)
    opt0 = milp_optimum(m0, time_limit=60)
    es = milp_engine_schedule(m0, w.is_global, time_limit=120)
    src = WorkloadSource("artifact", "synth", 1)

    def replay(plan):
        r = run(make_spec(src, system, "prefetch_lru"), workload=w, plan=plan)
        kt = np.asarray(r["kernels"])
        rows = kt[kt[:, 0] == r["reported"]]
        stalled = int(((rows[:, 3] - rows[:, 2]) > w.exec_cycles[rows[:, 1]]).sum())
        return int(r["iterations"][r["reported"]]["exe_time_cycles"]), stalled

    t_rep, stalled = replay(plan_from_engine_schedule(es, m0, w.is_global))
    t_old, _ = replay(plan_from_schedule(opt, m))
    pol = {}
    for rec in policies.records():
        if rec.engine == "page" and rec.name != "ideal":
            r = run(make_spec(src, system, rec.name), workload=w)
            pol[rec.name] = int(r["iterations"][r["reported"]]["exe_time_cycles"])
    return {
        "seed": seed,
        "kernels": w.num_kernels,
        "tick": int(params.tick),
        "ideal": float(m.c.sum()),
        "window": window_bound(m).time,
        "traffic": traffic_bound(m).time,
        "lp": lp_bound(m).time,
        "milp": opt.time,
        "milp_optimal": bool(opt.optimal),
        "milp_s": opt.seconds,
        "milp0": opt0.time,
        "engine_milp": es.time,
        "engine_milp_optimal": bool(es.optimal),
        "engine_milp_s": es.seconds,
        "replay": t_rep,
        "replay_stalled_kernels": stalled,
        "replay_old_plan": t_old,
        "policies": pol,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-5")
    a = ap.parse_args(argv)
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    commit = git_commit()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        d = one(seed)
        d.update(
            date=datetime.datetime.now().isoformat(timespec="seconds"), commit=commit, nproc=os.cpu_count()
        )
        with open(OUT, "a") as f:
            f.write(json.dumps(d) + "\n")
        t = d["tick"]
        print(
            f"| {seed} | {d['ideal']:,.0f} | {d['window']:,.0f} | {d['lp']:,.0f} | "
            f"{d['milp']:,.0f} | {d['milp0']:,.0f} | {d['engine_milp']:,.0f} | "
            f"{d['replay']:,} | {100 * (d['replay'] / d['milp'] - 1):+.1f} % "
            f"({(d['replay'] - d['milp']) / t:.1f} ticks) | "
            f"{(d['replay'] - d['milp0']) / t:.1f} ticks | {d['replay_stalled_kernels']} | "
            f"{d['replay_old_plan']:,} | {d['policies'].get('prefetch_lru', 0):,} | "
            f"{d['policies'].get('lru', 0):,} | {d['policies'].get('deepUM', 0):,} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
