"""Where a sweep point's CPU goes outside the engine: cProfile (CPU clock) over the artifact
matrix's points of some (model, batch) groups, run as a sweep worker runs them (the sweep's
order, `worker.execute`, the store's write) in this one process, warm Numba cache assumed.

    python benchmarks/sweep_profile.py ResNet152-1280 --policies prefetch_lru
    python benchmarks/sweep_profile.py BERT-128 --stats /tmp/bert.pstats

Prints the CPU total and the cumulative CPU of the stages (workload build, vitality, planner,
page and tensor engines, bound, store write, ...). A process's first point also loads the
Numba cache of each kernel it calls (`_compile_for_args`, once per worker process).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = (
    "execute",
    "workload_of",
    "vitality",
    "plan_of",
    "main_loop",
    "run_engine",
    "simulate_tensors",
    "bound_summary",
    "_compile_for_args",
    "write_point",
    "kernel_arrays",
    "workload_analysis",
    "plan_digest",
)


def main(argv=None) -> int:
    from g10fast.sweep import worker
    from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points
    from g10fast.sweep.runner import _group_key, plan_sweep
    from g10fast.sweep.store import ResultStore

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="+", help="(model, batch) groups, e.g. SENet154-1024")
    ap.add_argument("--policies", nargs="+", help="keep only these policies' points")
    ap.add_argument("--matrix", default="artifact")
    ap.add_argument("--g10", default=str(ROOT.parent / "shared" / "g10-artifact"))
    ap.add_argument("--stats", help="also write the pstats file here")
    args = ap.parse_args(argv)
    res = [
        r
        for r in resolve_points(expand_matrix(named_matrix(args.matrix)), args.g10)
        if _group_key(r) in set(args.groups) and (not args.policies or r.point.policy in set(args.policies))
    ]
    with tempfile.TemporaryDirectory() as d:
        store = ResultStore(os.path.join(d, "profile.h5"))
        tasks, _ = plan_sweep(res, store)
        pr = cProfile.Profile(time.process_time)
        c0 = time.process_time()
        pr.enable()
        for t in tasks:
            store.write_point(worker.execute(t))
        pr.disable()
        cpu = time.process_time() - c0
        store.close()
    st = pstats.Stats(pr)
    if args.stats:
        st.dump_stats(args.stats)
    rows: dict = {}
    for (f, _line, fn), (_cc, nc, _tt, ct, _callers) in st.stats.items():
        if fn in STAGES:
            r = rows.setdefault(f"{Path(f).parent.name}/{Path(f).name}:{fn}", [0, 0.0])
            r[0] += nc
            r[1] += ct
    print(f"{len(tasks)} points of {', '.join(args.groups)}: {cpu:.2f} CPU s")
    for k, (n, ct) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:48s} {n:6d} calls {ct:8.2f} s  {100 * ct / cpu:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
