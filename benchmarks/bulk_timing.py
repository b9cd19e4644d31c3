"""Paired timings of the page engine's bulk paths against the per-page reference engine.

    python benchmarks/bulk_timing.py --points SENet154:1024:prefetch_lru ResNet152:1280:lru \
        --repeats 2

Each measurement is a fresh process of this tree running one engine
(`g10fast.engine.page.BULK_DEFAULT` set to True for "bulk", False for "per-page"): a warm-up
run of BERT-128 under the same policy first (loads the Numba cache), then the timed run of
the point (CPU and wall seconds of the run alone), and the process's peak RSS. The engines
alternate (per-page, bulk, bulk, per-page, ...), so that a drift of the shared machine hits
both. Each run's result (every iteration's statistics) is hashed and the two engines' hashes
compared. One JSON line per invocation goes to benchmarks/results/bulk_timing.jsonl.
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
ROOT = HERE.parent
ARTIFACT = ROOT.parent / "shared" / "g10-artifact"

CHILD = r"""
import hashlib, json, resource, sys, time
import g10fast.engine.page as page
from g10fast.config import genconfig
from g10fast.run import run
art, model, batch, policy, bulk = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
page.BULK_DEFAULT = bulk
t0 = time.perf_counter(); c0 = time.process_time()
run(genconfig(art, "BERT", 128, policy))
t1 = time.perf_counter(); c1 = time.process_time()
res = run(genconfig(art, model, batch, policy))
t2 = time.perf_counter(); c2 = time.process_time()
it = res["iterations"][res["reported"]]
digest = hashlib.sha256(json.dumps(res["iterations"], sort_keys=True, default=str).encode()).hexdigest()
print(json.dumps({"warmup_wall_s": t1 - t0, "wall_s": t2 - t1, "cpu_s": c2 - c1,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "exe_time_cycles": it["exe_time_cycles"], "digest": digest}))
"""


def measure(art: Path, point: str, bulk: bool) -> dict:
    model, batch, policy = point.split(":")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(art), model, batch, policy, "1" if bulk else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    if p.returncode != 0:
        raise SystemExit(f"{point} bulk={bulk}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--points",
        nargs="+",
        default=[
            "SENet154:1024:prefetch_lru",
            "SENet154:1024:deepUM",
            "ResNet152:1280:lru",
            "ResNet152:1280:deepUM",
            "ResNet152:1280:prefetch_lru",
            "Inceptionv3:1536:lru",
        ],
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--g10", type=Path, default=ARTIFACT)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "bulk_timing.jsonl")
    a = ap.parse_args(argv)
    if not (a.g10 / "frontend" / "Nets").is_dir():
        sys.stderr.write(f"no G10 artifact at {a.g10}\n")
        return 2
    load_start = os.getloadavg()
    out = {p: {"per-page": [], "bulk": []} for p in a.points}
    for rep in range(a.repeats):
        for point in a.points:
            order = ("per-page", "bulk") if rep % 2 == 0 else ("bulk", "per-page")
            for name in order:
                r = measure(a.g10, point, name == "bulk")
                out[point][name].append(r)
                sys.stderr.write(
                    f"{point} {name}: cpu {r['cpu_s']:.2f} s, wall {r['wall_s']:.2f}"
                    f" s, {r['peak_rss_mib']:.0f} MiB\n"
                )
    summary = {}
    for point, d in out.items():
        summary[point] = {
            "per_page_cpu_s": [round(r["cpu_s"], 3) for r in d["per-page"]],
            "bulk_cpu_s": [round(r["cpu_s"], 3) for r in d["bulk"]],
            "per_page_peak_rss_mib": round(max(r["peak_rss_mib"] for r in d["per-page"])),
            "bulk_peak_rss_mib": round(max(r["peak_rss_mib"] for r in d["bulk"])),
            "min_ratio_bulk_over_per_page": round(
                min(r["cpu_s"] for r in d["bulk"]) / min(r["cpu_s"] for r in d["per-page"]), 4
            ),
            "median_ratio_bulk_over_per_page": round(
                statistics.median(r["cpu_s"] for r in d["bulk"])
                / statistics.median(r["cpu_s"] for r in d["per-page"]),
                4,
            ),
            "same_result": len({r["digest"] for r in d["per-page"] + d["bulk"]}) == 1,
        }
    rec = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": git_commit(ROOT),
        "machine": os.uname().nodename,
        "cpus": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "repeats": a.repeats,
        "points": summary,
    }
    append_record(a.out, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
