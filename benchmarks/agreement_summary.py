"""Summarise an agreement.csv written by `g10fast figures` (relative errors against the
artifact's example_results) and record it.

    python benchmarks/agreement_summary.py FIGURES_DIR/agreement.csv --label fig11-store \
        [--csv-out benchmarks/results/agreement_fig11.csv]

Appends one JSON line to benchmarks/results/agreement.jsonl: per figure (and all) the rows,
the rows compared (both values present), median and max relative error (finite; "inf" rows,
one side failed, counted apart), and every compared row over 2 %. --csv-out keeps the
compared rows only (the small text copy that is committed; the store and figures are not).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def summarise(rows):
    out = {}
    figs = sorted({r["figure"] for r in rows}, key=int)
    for f in figs + ["all"]:
        rs = [r for r in rows if f == "all" or r["figure"] == f]
        comp = [r for r in rs if r["relative_error"] != ""]
        errs = sorted(float(r["relative_error"]) for r in comp)
        fin = [e for e in errs if math.isfinite(e)]
        n = len(errs)
        med = (errs[n // 2] if n % 2 else 0.5 * (errs[n // 2 - 1] + errs[n // 2])) if n else None
        out[f] = {
            "rows": len(rs),
            "compared": n,
            "median": med,
            "max_finite": max(fin) if fin else None,
            "one_side_failed": sum(not math.isfinite(e) for e in errs),
            "over_2pct": sum(e > 0.02 for e in errs),
            "within_0_5pct": sum(e <= 0.005 for e in errs),
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--label", default="")
    ap.add_argument("--note", default="")
    ap.add_argument("--csv-out")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "agreement.jsonl"))
    args = ap.parse_args(argv)
    with open(args.csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    summ = summarise(rows)
    over = [
        {
            "figure": r["figure"],
            "point": r["point"],
            "g10fast": r["g10fast"],
            "artifact": r["artifact"],
            "relative_error": r["relative_error"],
        }
        for r in rows
        if r["relative_error"] != "" and float(r["relative_error"]) > 0.02
    ]
    rec = {
        "benchmark": "agreement",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "label": args.label,
        "summary": summ,
        "over_2pct": over,
        "note": args.note,
    }
    with open(args.out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    if args.csv_out:
        with open(args.csv_out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()) if rows else [])
            w.writeheader()
            for r in rows:
                if r["relative_error"] != "":
                    w.writerow(r)
    for f, s in summ.items():
        med = "-" if s["median"] is None else f"{100 * s['median']:.3f}%"
        mx = "-" if s["max_finite"] is None else f"{100 * s['max_finite']:.2f}%"
        print(
            f"fig {f:>3}: {s['compared']:>4}/{s['rows']:<4} compared, median {med:>8}, "
            f"max finite {mx:>9}, inf {s['one_side_failed']:>2}, >2% {s['over_2pct']:>3}, "
            f"<=0.5% {s['within_0_5pct']:>4}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
