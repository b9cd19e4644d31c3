"""An Adam step on this machine's CPU against the ranks engine's CPU model fed this machine's
own figures (g10fast/engine/ranks/cpu.py).

    python benchmarks/cpu_adam.py [--elements 50e6] [--threads 2] [--repeat 5]

Measures, with `--threads` threads (torch.set_num_threads and numpy's element-wise work on
one thread per process, so the triad runs on torch too):

* a triad a = b + s c over fp32 arrays (12 B of DRAM traffic an element: two reads, one
  write; the STREAM convention) -> the machine's achievable bandwidth;
* one core's triad -> the per-core bandwidth;
* one step of torch.optim.AdamW (fused=True, the CPU kernel; fp32 params, grads and both
  moments: 16 B read + 12 B written an element, the traffic of DeepSpeed's CPU Adam) and
  its unfused for-each form.

The model's prediction for the fused step is `cpu.adam_ns(elements, CpuPool(threads, ...,
per_core=one core's triad, bandwidth=the triad))`; the ratio measured / model is what this
checks (a bandwidth-bound step reads about 1). One JSON line per run goes to
benchmarks/results/cpu_adam.jsonl with the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _best(fn, repeat: int) -> float:
    fn()  # warm-up: page faults, thread pool
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def main(argv=None):
    import torch

    from _bench import append_record, git_commit
    from g10fast.engine.ranks import cpu as cm

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=float, default=50e6)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--no-record", action="store_true", help="print the record only (g10fast validate runs it so)"
    )
    a = ap.parse_args(argv)
    n = int(a.elements)

    def triad(threads):
        torch.set_num_threads(threads)
        b = torch.rand(n)
        c = torch.rand(n)
        out = torch.empty(n)
        best, med = _best(lambda: torch.add(b, c, alpha=1.5, out=out), a.repeat)
        return 12 * n / best / 1e9, 12 * n / med / 1e9

    one_core, _ = triad(1)
    all_cores, all_med = triad(a.threads)
    torch.set_num_threads(a.threads)
    steps = {}
    for name, kw in (("fused", {"fused": True}), ("foreach", {"foreach": True})):
        p = torch.nn.Parameter(torch.rand(n))
        p.grad = torch.rand(n)
        opt = torch.optim.AdamW([p], lr=1e-3, **kw)
        steps[name] = _best(opt.step, a.repeat)
        del opt, p
    # compute is not what binds here: clock and lanes only matter through CYCLES_PER_VECTOR
    pool = cm.CpuPool(a.threads, 2.0, 8, one_core, all_cores)
    model_s = cm.adam_ns(n, pool) / 1e9
    rec = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "commit": git_commit(),
        "machine": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "threads": a.threads,
        "elements": n,
        "torch": torch.__version__,
        "triad_gbps_one_core": round(one_core, 2),
        "triad_gbps": round(all_cores, 2),
        "triad_gbps_median": round(all_med, 2),
        "adamw_fused_s": round(steps["fused"][0], 5),
        "adamw_fused_median_s": round(steps["fused"][1], 5),
        "adamw_foreach_s": round(steps["foreach"][0], 5),
        "model_s": round(model_s, 5),
        "fused_over_model": round(steps["fused"][0] / model_s, 3),
        "fused_effective_gbps": round(cm.ADAM_BYTES * n / steps["fused"][0] / 1e9, 2),
    }
    if a.no_record:
        print(json.dumps(rec, indent=1))
    else:
        append_record(HERE / "results" / "cpu_adam.jsonl", rec)


if __name__ == "__main__":
    main()
