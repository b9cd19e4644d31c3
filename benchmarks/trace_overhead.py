"""What writing an event trace costs: the same artifact point untraced and traced (`run(...,
trace_path=...)`, the trace written to a temporary file and removed), in fresh processes that
alternate (untraced, traced, traced, untraced, ...) on one source tree, each after a warm-up
run of the same kind (`paired_timing.measure`: BERT-128 untraced, or traced, which loads the
traced engine and the trace writer; records before 2026-11-29 warmed both up untraced, so
their traced runs also paid those loads, about 0.3-0.5 CPU s). Issue 39 asks a traced run
for at most 1.5x the CPU of the same run untraced.

    python benchmarks/trace_overhead.py --tree . \\
        --points ResNet152:1280:lru ResNet152:1280:prefetch_lru SENet154:1024:deepUM --repeats 3

It reports per point the CPU seconds of the run untraced and traced, the median ratio, the
trace's rows and bytes, and whether the results agree; one JSON line goes to
benchmarks/results/trace_overhead.jsonl with the tree's commit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _bench import append_record, git_commit
from paired_timing import ARTIFACT, HERE, measure


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE.parent)
    ap.add_argument(
        "--points",
        nargs="+",
        default=["ResNet152:1280:lru", "ResNet152:1280:prefetch_lru", "SENet154:1024:deepUM"],
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--g10", type=Path, default=ARTIFACT)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "trace_overhead.jsonl")
    a = ap.parse_args(argv)
    if not (a.g10 / "frontend" / "Nets").is_dir():
        sys.stderr.write(f"no G10 artifact at {a.g10}\n")
        return 2
    tree = a.tree.resolve()
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for point in a.points:
            runs = {"untraced": [], "traced": []}
            for rep in range(a.repeats):
                order = ("untraced", "traced") if rep % 2 == 0 else ("traced", "untraced")
                for kind in order:
                    path = str(Path(tmp, "run.h5")) if kind == "traced" else None
                    r = measure(tree, a.g10, point, trace=path)
                    runs[kind].append(r)
                    sys.stderr.write(f"{point} {kind}: cpu {r['cpu_s']:.2f} s, {r['peak_rss_mib']:.0f} MiB\n")
            u = [r["cpu_s"] for r in runs["untraced"]]
            t = [r["cpu_s"] for r in runs["traced"]]
            summary[point] = {
                "untraced_cpu_s": [round(x, 3) for x in u],
                "traced_cpu_s": [round(x, 3) for x in t],
                "median_ratio_traced_over_untraced": round(statistics.median(t) / statistics.median(u), 3),
                "trace_rows": runs["traced"][0]["trace_rows"],
                "trace_mib": round(runs["traced"][0]["trace_bytes"] / 2**20, 1),
                "untraced_peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs["untraced"])),
                "traced_peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs["traced"])),
                "same_result": len({r["exe_time_cycles"] for r in runs["untraced"] + runs["traced"]}) == 1,
            }
    append_record(a.out, {"commit": git_commit(tree), "repeats": a.repeats, "points": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
