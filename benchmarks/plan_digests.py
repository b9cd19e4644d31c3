"""Every G10 plan of a matrix (prefetch_lru points), hashed: a check that a planner change
leaves every plan as it was, and the planner's CPU over the matrix.

    python benchmarks/plan_digests.py /tmp/before.json [--tree /tmp/wt-base]
    python benchmarks/plan_digests.py /tmp/after.json && cmp /tmp/before.json /tmp/after.json

Plans are made as a sweep worker makes them (`sweep.worker._plan`: one plan per workload and
plan key, the kernel-time variants sharing their base point's), in one process. Each point's
label maps to the SHA-256 of every field of its MigrationPlan (hints, emitted rows,
per-interval decisions and kernels, the estimates and lanes; `info` without its timings).
Prints the number of distinct plans and the planner's CPU (the first plan loads the
planner's Numba cache).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def digest(plan) -> str:
    import numpy as np

    h = hashlib.sha256()
    for f in dataclasses.fields(plan):
        a = getattr(plan, f.name)
        if f.name == "info":
            a = {k: v for k, v in a.items() if "second" not in k}
        h.update(f.name.encode())
        h.update(np.ascontiguousarray(a).tobytes() if isinstance(a, np.ndarray) else repr(a).encode())
    return h.hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="JSON file: point label -> plan digest")
    ap.add_argument("--tree", default=str(ROOT), help="source tree to import (default: this)")
    ap.add_argument("--matrix", default="artifact")
    ap.add_argument("--g10", default=str(ROOT.parent / "shared" / "g10-artifact"))
    args = ap.parse_args(argv)
    sys.path.insert(0, args.tree)
    from g10fast.spec import from_g10_config
    from g10fast.sweep import worker
    from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points
    from g10fast.sweep.runner import _group_key

    pts = [p for p in expand_matrix(named_matrix(args.matrix)) if p.policy == "prefetch_lru"]
    res = sorted(resolve_points(pts, args.g10), key=_group_key)
    out, seen = {}, {}
    cpu_plan = 0.0
    for rp in res:
        spec = from_g10_config(rp.config)
        w, _ = worker._workload(spec)
        key = (worker._workload_key(spec), worker.plan_key(spec))
        if key not in seen:
            c = time.process_time()
            plan = worker._plan(spec, w)
            cpu_plan += time.process_time() - c
            seen[key] = digest(plan)
        out[rp.label] = seen[key]
    Path(args.out).write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"{len(res)} points, {len(seen)} distinct plans, planner CPU {cpu_plan:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
