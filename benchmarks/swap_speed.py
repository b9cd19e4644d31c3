"""Speed of the allocators on SINGA's real traces and of a swap plan for Llama-7B (issue 20's
targets: each real trace through each allocator under 1 s; a swap plan for Llama-7B under
5 s). Best of `--repeat` after one warm-up call (Numba compilation timed on its own).

    python benchmarks/swap_speed.py [--shared ../shared] [--repeat 3]

Appends one JSON line per measurement to benchmarks/results/swap_speed.jsonl with the commit,
the machine's core count and load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from _bench import git_commit  # noqa: E402  (benchmarks/, the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.alloc.allocators import ALLOCATORS, run_allocator  # noqa: E402
from g10fast.alloc.trace import read_trace  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "swap_speed.jsonl"
TRACES = [f"{kind}_{m}" for m in ("alex", "vgg", "resnet") for kind in ("memInfo", "blockInfo", "vec_run_5")]
VARIANTS = [(a, {}) for a in ALLOCATORS] + [
    ("singa_colour", {"scope": "trace"}),
    ("singa_colour", {"scope": "pool_opt"}),
]


def best_of(fn, repeat):
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return first, min(ts)


def trace_path(shared: Path, name: str) -> Path | None:
    d = shared / "external" / "singa-traces"
    for p in sorted(d.glob("*")):
        if p.stem.lower().startswith(name.lower()):
            return p
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-traces", action="store_true")
    a = ap.parse_args(argv)
    stamp = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": git_commit(),
        "nproc": os.cpu_count(),
    }
    rows = []
    if not a.skip_traces:
        for name in TRACES:
            p = trace_path(a.shared, name)
            if p is None:
                print(f"{name}: not found under {a.shared}, skipped", file=sys.stderr)
                continue
            tr = read_trace(p)
            for alloc, opts in VARIANTS:
                first, best = best_of(lambda: run_allocator(tr, alloc, **opts), a.repeat)
                res = run_allocator(tr, alloc, **opts)
                label = alloc + "".join(f" {k}={v}" for k, v in opts.items())
                row = dict(
                    stamp,
                    what="allocator",
                    trace=p.name,
                    ops=tr.num_ops,
                    blocks=tr.num_blocks,
                    allocator=label,
                    first_call_s=round(first, 4),
                    best_s=round(best, 4),
                    peak_live_mib=round(res.peak_live / 2**20, 1),
                    peak_reserved_mib=round(res.peak_reserved / 2**20, 1),
                    load_average=[round(x, 2) for x in os.getloadavg()],
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
    # Llama-7B: the derived trace, a plan, and a whole run (plan + tensor engine + allocator)
    from g10fast import api
    from g10fast.alloc.swap import LinkCost, plan_swaps
    from g10fast.alloc.trace import from_workload
    from g10fast.policies.trace_swap import absolute_kernels
    from g10fast.run import run
    from g10fast.spec import builtin_spec

    w = api.builtin_workload("llama-7b", 1, "h100-80-pcie5")
    first, best = best_of(lambda: from_workload(w, iterations=3), a.repeat)
    tr = from_workload(w, iterations=3)
    rows.append(
        dict(
            stamp,
            what="llama-7b derived trace (3 iterations)",
            ops=tr.num_ops,
            first_call_s=round(first, 4),
            best_s=round(best, 4),
        )
    )
    print(json.dumps(rows[-1]), flush=True)
    peak = plan_swaps(tr, 1 << 62, "singa_swap").peak_before
    link = LinkCost.from_gbps(50.0)
    for policy in ("singa_swap", "appobmem"):
        for frac in (0.7, 0.5, 0.3):

            def plan():
                return plan_swaps(
                    tr, int(frac * peak), policy, link=link, periodic=True, op_group=absolute_kernels(tr)
                )

            first, best = best_of(plan, a.repeat)
            p = plan()
            rows.append(
                dict(
                    stamp,
                    what="llama-7b swap plan",
                    policy=policy,
                    limit_fraction=frac,
                    swaps=p.num_swaps,
                    candidates=p.info["candidates"],
                    first_call_s=round(first, 4),
                    best_s=round(best, 4),
                    load_average=[round(x, 2) for x in os.getloadavg()],
                )
            )
            print(json.dumps(rows[-1]), flush=True)
    for policy in ("singa_swap", "appobmem"):
        spec = builtin_spec(
            "llama-7b",
            1,
            "h100-80-pcie5",
            policy,
            options={"limit_fraction": 0.5, "profile_policy": "none"}
            if policy == "appobmem"
            else {"limit_fraction": 0.5},
            engine={"allocator": "cnmem"},
        )
        first, best = best_of(lambda: run(spec, workload=w), a.repeat)
        rows.append(
            dict(
                stamp,
                what="llama-7b whole run (plan, tensor engine, cnmem)",
                policy=policy,
                first_call_s=round(first, 4),
                best_s=round(best, 4),
                load_average=[round(x, 2) for x in os.getloadavg()],
            )
        )
        print(json.dumps(rows[-1]), flush=True)
    with open(OUT, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"appended {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
