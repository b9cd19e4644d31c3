"""The driver engine's speed table from a driver-figure CSV (benchmarks/driver_figure.py):
every driver-engine run's warm wall and CPU seconds and peak RSS, beside the G10-compatible
page engine's run of the same workload and setting (its counterpart policy: uvm, tbnp and
pump beside Base UVM `lru`, deepum_driver beside `deepUM`, g10_driver beside
`prefetch_lru`), and the ratio page wall / driver wall.

    python benchmarks/driver_speed.py benchmarks/results/driver_figure_paper.csv \
        --out benchmarks/results/driver_speed.csv
"""

from __future__ import annotations

import argparse
import csv
import os

PAIR = {"uvm": "lru", "tbnp": "lru", "pump": "lru", "deepum_driver": "deepUM", "g10_driver": "prefetch_lru"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("figure_csv")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    with open(a.figure_csv) as f:
        rows = list(csv.DictReader(f))
    page = {(r["model"], r["batch"], r["setting"], r["policy"]): r for r in rows if r["engine"] == "page"}
    out = []
    for r in rows:
        if r["engine"] != "driver":
            continue
        p = page.get((r["model"], r["batch"], r["setting"], PAIR.get(r["policy"], "")))
        dw = float(r["wall_s"])
        out.append(
            {
                "model": r["model"],
                "batch": r["batch"],
                "setting": r["setting"],
                "gpu_gb": r["gpu_gb"],
                "footprint_gb": r["footprint_gb"],
                "driver_policy": r["policy"],
                "driver_wall_s": r["wall_s"],
                "driver_cpu_s": r.get("cpu_s", ""),
                "driver_peak_rss_mib": r["peak_rss_mib"],
                "page_policy": p["policy"] if p else "",
                "page_wall_s": p["wall_s"] if p else "",
                "page_peak_rss_mib": p["peak_rss_mib"] if p else "",
                "wall_ratio_page_over_driver": round(float(p["wall_s"]) / dw, 2) if p and dw > 0 else "",
            }
        )
    tmp = a.out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out)
    cpu = [float(r["driver_cpu_s"]) for r in out if r["driver_cpu_s"]]
    wall = [float(r["driver_wall_s"]) for r in out]
    rss = [int(float(r["driver_peak_rss_mib"])) for r in out]
    print(
        f"{len(out)} driver runs: CPU {min(cpu):.2f}-{max(cpu):.2f} s, wall "
        f"{min(wall):.2f}-{max(wall):.2f} s, peak RSS {min(rss)}-{max(rss)} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
