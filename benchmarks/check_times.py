"""What `--check` costs: artifact points run plain, with `check=True` (state) and with
`check="full"`, best of N each, in one process (the Numba cache warm).

    python benchmarks/check_times.py                       # BERT-128, ResNet152-256 x lru, G10, DeepUM+
    python benchmarks/check_times.py --points BERT:128:lru --repeats 5 --no-full

One JSON line per point goes to benchmarks/results/check_times.jsonl with the commit: the
three times (seconds of `g10fast.run.run`, front end included, as the CLI pays them), the
ratios to the plain run, the checks and page-table scans of each checked run, and the load
average (a shared machine's timings drift with it). Every checked run's iterations are
asserted equal to the plain run's.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _bench import append_record, git_commit

HERE = Path(__file__).resolve().parent
ARTIFACT = HERE.parents[1] / "shared" / "g10-artifact"
POINTS = (
    "BERT:128:lru",
    "BERT:128:prefetch_lru",
    "BERT:128:deepUM",
    "ResNet152:256:lru",
    "ResNet152:256:prefetch_lru",
    "ResNet152:256:deepUM",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", nargs="+", default=list(POINTS), metavar="MODEL:BATCH:POLICY")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-full", action="store_true", help='skip check="full" (slow)')
    ap.add_argument("--out", type=Path, default=HERE / "results" / "check_times.jsonl")
    args = ap.parse_args()

    from g10fast.config import read_g10_config
    from g10fast.run import run

    for point in args.points:
        model, batch, policy = point.split(":")
        cfg = read_g10_config(ARTIFACT / "src" / "configs" / model / f"{batch}-sim_{policy}.config")
        levels = [False, True] + ([] if args.no_full else ["full"])
        run(cfg, check=True)  # compile / load the cache
        best, res = {}, {}
        for rep in range(args.repeats):
            for lvl in levels:
                if lvl == "full" and rep:  # once: it is slow
                    continue
                t0 = time.perf_counter()
                r = run(cfg, check=lvl)
                dt = time.perf_counter() - t0
                best[lvl] = min(best.get(lvl, float("inf")), dt)
                res[lvl] = r
        for lvl in levels[1:]:
            assert res[lvl]["iterations"] == res[False]["iterations"], (point, lvl)
        rec = {
            "commit": git_commit(),
            "point": point,
            "repeats": args.repeats,
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "plain_s": round(best[False], 3),
            "check_s": round(best[True], 3),
            "check_ratio": round(best[True] / best[False], 2),
            "checks": res[True].get("invariant_checks"),
            "page_table_scans": res[True].get("page_table_scans"),
        }
        if "full" in best:
            rec.update(
                {
                    "check_full_s": round(best["full"], 3),
                    "check_full_ratio": round(best["full"] / best[False], 1),
                    "full_page_table_scans": res["full"].get("page_table_scans"),
                }
            )
        append_record(args.out, rec)


if __name__ == "__main__":
    main()
