"""The driver-engine figure: naive UM, TBNp, PUMP, G10@driver, DeepUM+@driver (driver engine)
beside Base UVM, DeepUM+ and G10 (the G10-compatible page engine), normalised to Ideal, per
workload at its batch and at GPU memory = footprint / R for each oversubscription ratio R.

    python benchmarks/driver_figure.py                      # the reduced set (see MODELS)
    python benchmarks/driver_figure.py --paper              # the five paper workloads/batches
    python benchmarks/driver_figure.py --models bert-base:32 --ratios 1.5,3

Writes benchmarks/results/driver_figure.csv (one row per run: model, batch, setting,
engine, policy, ideal/time, wall seconds of the run, peak RSS) and driver_figure.png.
Wall time is the run's (workload built once per model, Numba compiled before timing).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import ROOT, git_commit  # noqa: E402

PAPER = [("bert-base", 256), ("vit", 1280), ("inceptionv3", 1536), ("resnet152", 1280),
         ("senet154", 1024)]
MODELS = [("bert-base", 32), ("vit", 160), ("resnet152", 160)]
DRIVER = ["uvm", "tbnp", "pump", "g10_driver", "deepum_driver"]
PAGE = ["lru", "deepUM", "prefetch_lru"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper", action="store_true")
    ap.add_argument("--models", default="")
    ap.add_argument("--ratios", default="1.5,3")
    ap.add_argument("--preset", default="g10-artifact")
    ap.add_argument("--policies", default=",".join(DRIVER + PAGE))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "driver_figure.csv"))
    a = ap.parse_args(argv)
    from g10fast import api
    from g10fast.hardware import load_preset
    from g10fast.run import run
    from g10fast.spec import builtin_spec
    from g10fast.system import System

    models = PAPER if a.paper else MODELS
    if a.models:
        models = [(m.split(":")[0], int(m.split(":")[1])) for m in a.models.split(",")]
    ratios = [float(r) for r in a.ratios.split(",") if r]
    pols = a.policies.split(",")
    base = System.from_preset(load_preset(a.preset))
    rows = []
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    for model, batch in models:
        w = api.builtin_workload(model, batch, a.preset)
        settings = [("paper", base)] + [
            (f"{r:g}x", base.replace(gpu_memory_gb=w.footprint_bytes / r / 2**30))
            for r in ratios]
        for label, system in settings:
            for pol in pols:
                spec = builtin_spec(model, batch, system, pol)
                if pol == DRIVER[0] and label == "paper":     # compile outside the timing
                    run(spec, workload=w)
                t0 = time.perf_counter()
                try:
                    r = run(spec, workload=w)
                    status = r["status"]
                except Exception as e:                     # noqa: BLE001 (a benchmark row)
                    r, status = None, f"error: {e}"
                wall = time.perf_counter() - t0
                it = r["iterations"][r["reported"]] if r and r["iterations"] else None
                row = {"model": model, "batch": batch, "setting": label,
                       "gpu_gb": round(system.gpu_memory_gb, 3),
                       "footprint_gb": round(w.footprint_bytes / 2**30, 3),
                       "engine": r["engine"] if r else "?", "policy": pol, "status": status,
                       "perf": round(it["ideal_exe_time_cycles"] / it["exe_time_cycles"], 4)
                       if it else "", "wall_s": round(wall, 2),
                       "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
                rows.append(row)
                print(",".join(str(v) for v in row.values()), flush=True)
                with open(a.out, "w", newline="") as f:
                    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
                    wr.writeheader()
                    wr.writerows(rows)
    with open(a.out + ".meta", "w") as f:
        f.write(f"commit {git_commit()}\nmachine {platform.node()} {os.cpu_count()} cpus\n")
    try:
        plot(rows, a.out.replace(".csv", ".png"))
    except Exception:                                      # noqa: BLE001
        pass
    return 0


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = sorted({(r["model"], r["batch"], r["setting"]) for r in rows},
                    key=lambda g: (g[0], g[2]))
    pols = list(dict.fromkeys(r["policy"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(8, len(groups) * 1.6), 4))
    wdt = 0.8 / len(pols)
    for j, p in enumerate(pols):
        ys = []
        for g in groups:
            v = [r["perf"] for r in rows if (r["model"], r["batch"], r["setting"]) == g
                 and r["policy"] == p and r["perf"] != ""]
            ys.append(v[0] if v else 0)
        ax.bar([i + j * wdt for i in range(len(groups))], ys, wdt,
               label=f"{p} ({'driver' if p in DRIVER else 'page'})")
    ax.set_xticks([i + 0.4 for i in range(len(groups))])
    ax.set_xticklabels([f"{m} b{b}\n{s}" for m, b, s in groups], fontsize=7)
    ax.set_ylabel("Ideal time / time")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
