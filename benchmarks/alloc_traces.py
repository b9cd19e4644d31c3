"""Every allocator on SINGA's real traces (../shared/external/singa-traces): peak reserved
against peak live per model and trace, the SINGA pool against cnmem, and the time of each
allocator on each trace (best of 3, after a warm-up that compiles the Numba kernels; reading
the trace not included). Appends to benchmarks/results/alloc_traces.jsonl and draws
docs/alloc-traces-{alex,vgg,resnet}.png (memory over op index, one line per allocator).

    python benchmarks/alloc_traces.py [--no-figures]

The traces themselves are never copied into the repository; only these summaries are."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from g10fast.alloc.allocators import ALLOCATORS, run_allocator
from g10fast.alloc.report import memory_figure
from g10fast.alloc.trace import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import git_commit

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "external" / "singa-traces"
FILES = {
    "alex": ("memInfo_alex_20itr_100size.text", "blockInfo_Alex_315.text", "vec_run_5_alex.csv"),
    "vgg": ("memInfo_vgg_20itr_100size.text", "blockInfo_VGG_315.text", "vec_run_5_vgg.csv"),
    "resnet": ("memInfo_resnet_20itr_100size.text", "blockInfo_resnet_315.text", "vec_run_5_resnet.csv"),
}
MiB = 1 << 20
#: (label, allocator, options): every allocator at its defaults (`singa_colour`: SmartMemPool
#: as the authors' code runs it), the offline colouring of the whole trace [ours], and cnmem as
#: SINGA's CnMemPool configures it (256 MB reserved up front, core.proto)
VARIANTS = [(a, a, {}) for a in ALLOCATORS] + [
    ("singa_colour_trace", "singa_colour", {"scope": "trace"}),
    ("cnmem_singa", "cnmem", {"init_bytes": 256 * MiB}),
]


def main() -> int:
    if not TRACES.is_dir():
        print("../shared/external/singa-traces not found: nothing to do")
        return 0
    figures = "--no-figures" not in sys.argv
    out = ROOT / "benchmarks" / "results" / "alloc_traces.jsonl"
    commit = git_commit()
    machine = f"{platform.machine()} {os.cpu_count()} cpus {platform.python_version()}"
    run_allocator(read_trace(TRACES / FILES["alex"][2]), "singa_colour")  # compile
    worst = 0.0
    for model, files in FILES.items():
        for fname in files:
            tr = read_trace(TRACES / fname)
            results = []
            for a, name, opts in VARIANTS:
                best = 1e9
                for _ in range(3):
                    t0 = time.perf_counter()
                    res = run_allocator(tr, name, **opts)
                    best = min(best, time.perf_counter() - t0)
                worst = max(worst, best)
                res.allocator = a
                results.append(res)
                rec = {
                    "model": model,
                    "trace": fname,
                    "ops": tr.num_ops,
                    "blocks": tr.num_blocks,
                    "allocator": a,
                    "status": res.status,
                    "peak_live_bytes": res.peak_live,
                    "peak_reserved_bytes": res.peak_reserved,
                    "frag_at_live_peak_bytes": res.frag_at_live_peak,
                    "seconds": round(best, 4),
                    "commit": commit,
                    "machine": machine,
                }
                with open(out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
            by = {r.allocator: r.peak_reserved for r in results}
            print(
                f"{model:7s} {fname:34s} live {results[0].peak_live / MiB:7.1f} MiB  "
                + "  ".join(f"{a} {by[a] / MiB:7.1f}" for a, _, _ in VARIANTS)
                + f"  pool vs cnmem {100 * (1 - by['singa_colour'] / by['cnmem']):+.1f}%"
                f" vs cnmem_singa {100 * (1 - by['singa_colour'] / by['cnmem_singa']):+.1f}%"
                f" (offline colouring vs cnmem "
                f"{100 * (1 - by['singa_colour_trace'] / by['cnmem']):+.1f}%)",
                flush=True,
            )
            if figures and fname.startswith("memInfo"):
                memory_figure(
                    tr,
                    results,
                    ROOT / "docs" / f"alloc-traces-{model}.png",
                    f"SINGA {model} (CIFAR-10, batch 100), {fname}",
                )
    print(f"slowest allocator on one trace: {worst:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
