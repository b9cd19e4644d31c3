"""The driver-engine figure: naive UM, TBNp, PUMP, G10@driver, DeepUM+@driver (driver engine)
beside Base UVM, DeepUM+ and G10 (the G10-compatible page engine), normalised to Ideal, per
workload at its batch and at GPU memory = footprint / R for each oversubscription ratio R.

    python benchmarks/driver_figure.py                      # the reduced set (see MODELS)
    python benchmarks/driver_figure.py --paper              # the five paper workloads/batches
    python benchmarks/driver_figure.py --models bert-base:32 --ratios 1.5,3

Writes benchmarks/results/driver_figure.csv (one row per run: model, batch, setting,
engine, policy, ideal/time, wall and CPU seconds of the run, the run's peak RSS, the driver
options) and driver_figure.png. Wall time is the run's (workload built once per model, each
policy run once on a small workload first so that Numba's cache is loaded before timing).
Peak RSS is the process's high-water mark during the run alone (reset before it through
/proc/self/clear_refs; the whole process's peak where that is not possible).

    python benchmarks/driver_figure.py --plot-only a.csv b.csv --out fig.csv   # merge, plot
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

PAPER = [("bert-base", 256), ("vit", 1280), ("inceptionv3", 1536), ("resnet152", 1280), ("senet154", 1024)]
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
    ap.add_argument(
        "--plot-only", nargs="*", default=None, help="merge these CSVs into --out and plot, running nothing"
    )
    a = ap.parse_args(argv)
    if a.plot_only is not None:
        rows = []
        for f in a.plot_only:
            with open(f) as fh:
                rows += list(csv.DictReader(fh))
        write_rows(a.out, rows)
        plot(rows, a.out.replace(".csv", ".png"))
        print(markdown(rows))
        return 0
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
    warmed = set()
    for model, batch in models:
        w = api.builtin_workload(model, batch, a.preset)
        settings = [("paper", base)] + [
            (f"{r:g}x", base.replace(gpu_memory_gb=w.footprint_bytes / r / 2**30)) for r in ratios
        ]
        for label, system in settings:
            for pol in pols:
                spec = builtin_spec(model, batch, system, pol)
                if pol not in warmed:  # load Numba's cache outside timing
                    warm_up(pol, a.preset)
                    warmed.add(pol)
                reset = reset_peak_rss()
                t0 = time.perf_counter()
                c0 = time.process_time()
                try:
                    r = run(spec, workload=w)
                    status = r["status"]
                except Exception as e:  # noqa: BLE001 (a benchmark row)
                    r, status = None, f"error: {e}"
                wall = time.perf_counter() - t0
                cpu = time.process_time() - c0
                it = r["iterations"][r["reported"]] if r and r["iterations"] else None
                row = {
                    "model": model,
                    "batch": batch,
                    "setting": label,
                    "gpu_gb": round(system.gpu_memory_gb, 3),
                    "footprint_gb": round(w.footprint_bytes / 2**30, 3),
                    "engine": r["engine"] if r else "?",
                    "policy": pol,
                    "status": status,
                    "perf": round(it["ideal_exe_time_cycles"] / it["exe_time_cycles"], 4) if it else "",
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "peak_rss_mib": peak_rss_mib()
                    if reset
                    else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                    "options": options_label(r),
                }
                rows.append(row)
                print(",".join(str(v) for v in row.values()), flush=True)
                write_rows(a.out, rows)
    with open(a.out + ".meta", "w") as f:
        f.write(f"commit {git_commit()}\nmachine {platform.node()} {os.cpu_count()} cpus\n")
    try:
        plot(rows, a.out.replace(".csv", ".png"))
    except Exception:  # noqa: BLE001
        pass
    return 0


def markdown(rows) -> str:
    """The figure's numbers as a Markdown table (Ideal time / time)."""
    cols = [p for p in ORDER if p != "ideal" and any(r["policy"] == p for r in rows)]
    head = "| workload (footprint) | setting (GPU GB) | " + " | ".join(LABEL[p] for p in cols) + " |"
    out = [head, "|" + "---|" * (len(cols) + 2)]
    keys = list(dict.fromkeys((r["model"], r["batch"], r["setting"]) for r in rows))
    for m, b, st in keys:
        rs = [r for r in rows if (r["model"], r["batch"], r["setting"]) == (m, b, st)]
        v = {r["policy"]: r["perf"] for r in rs}
        fp = float(rs[0]["footprint_gb"])
        out.append(
            f"| {m} {b} ({fp:.0f} GB) | {st} ({float(rs[0]['gpu_gb']):.0f}) | "
            + " | ".join(f"{float(v[p]):.3f}" if v.get(p) not in (None, "") else "—" for p in cols)
            + " |"
        )
    return "\n".join(out)


def write_rows(path, rows):
    keys = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=keys)
        wr.writeheader()
        wr.writerows(rows)
    os.replace(tmp, path)


def warm_up(policy, preset):
    """One run of the policy on bert-base 8 at 2x oversubscription (Numba's cache loaded)."""
    from g10fast import api
    from g10fast.hardware import load_preset
    from g10fast.run import run
    from g10fast.spec import builtin_spec
    from g10fast.system import System

    w = api.builtin_workload("bert-base", 8, preset)
    s = System.from_preset(load_preset(preset))
    run(
        builtin_spec("bert-base", 8, s.replace(gpu_memory_gb=w.footprint_bytes / 2 / 2**30), policy),
        workload=w,
    )


def reset_peak_rss() -> bool:
    """Reset the process's RSS high-water mark (Linux >= 4.0); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def options_label(r) -> str:
    """The engine options a run used, as `k=v;...` (driver: DriverOptions; page: compat)."""
    if not r:
        return ""
    o = r.get("driver_options")
    if o is None:
        return "g10-compatible page engine"
    return ";".join(f"{k}={v}" for k, v in o.items())


LABEL = {
    "uvm": "naive UM (driver)",
    "lru": "Base UVM (page)",
    "deepum_driver": "DeepUM+ (driver)",
    "deepUM": "DeepUM+ (page)",
    "g10_driver": "G10 (driver)",
    "prefetch_lru": "G10 (page)",
    "tbnp": "TBNp (driver)",
    "pump": "PUMP (driver)",
    "ideal": "Ideal",
}
ORDER = ["uvm", "lru", "deepum_driver", "deepUM", "g10_driver", "prefetch_lru", "tbnp", "pump", "ideal"]
COLOR = {
    "uvm": "#1f77b4",
    "lru": "#1f77b4",
    "deepum_driver": "#ff7f0e",
    "deepUM": "#ff7f0e",
    "g10_driver": "#2ca02c",
    "prefetch_lru": "#2ca02c",
    "tbnp": "#9467bd",
    "pump": "#8c564b",
    "ideal": "#7f7f7f",
}


def plot(rows, path):
    """One panel per setting; per workload the driver policies each beside its page-engine
    counterpart (hatched), and Ideal, all as Ideal time / time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(r["setting"] for r in rows))
    models = list(dict.fromkeys((r["model"], int(r["batch"])) for r in rows))
    pols = [p for p in ORDER if p == "ideal" or any(r["policy"] == p for r in rows)]
    fig, axes = plt.subplots(
        len(settings), 1, figsize=(max(8, len(models) * 2.2), 2.6 * len(settings) + 0.8), squeeze=False
    )
    wdt = 0.85 / len(pols)
    for ax, st in zip(axes[:, 0], settings):
        for j, p in enumerate(pols):
            ys = []
            for m in models:
                if p == "ideal":
                    ys.append(1.0)
                    continue
                v = [
                    float(r["perf"])
                    for r in rows
                    if (r["model"], int(r["batch"])) == m
                    and r["setting"] == st
                    and r["policy"] == p
                    and r["perf"] not in ("", None)
                ]
                ys.append(v[0] if v else 0.0)
            page = p in PAGE
            ax.bar(
                [i + j * wdt for i in range(len(models))],
                ys,
                wdt,
                color=COLOR.get(p),
                hatch="//" if page else None,
                edgecolor="white" if page else None,
                alpha=0.55 if page else 1.0,
                label=LABEL.get(p, p),
            )
        gb = {
            m: [r["gpu_gb"] for r in rows if (r["model"], int(r["batch"])) == m and r["setting"] == st]
            for m in models
        }
        ax.set_xticks([i + 0.425 - wdt / 2 for i in range(len(models))])
        ax.set_xticklabels(
            [
                f"{m} {b}\n(GPU {float(gb[(m, b)][0]):.0f} GB)" if gb[(m, b)] else f"{m} {b}"
                for m, b in models
            ],
            fontsize=7,
        )
        ax.set_ylabel("Ideal time / time")
        ax.set_ylim(0, 1.05)
        ax.set_title(
            "40 GB GPU (paper setting)"
            if st == "paper"
            else f"{st} oversubscription (GPU memory = footprint / {st[:-1]})",
            fontsize=9,
        )
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, fontsize=7, ncol=len(lab), loc="lower center")
    fig.suptitle(
        "Driver engine (solid; nvidia-uvm model, DriverOptions defaults: 256-fault "
        "batches, 64 KiB big pages,\ndensity prefetch 51 %, 2 MiB chunks evicted in "
        "allocation order, UVMSmart transfer curve) beside the G10-compatible page "
        "engine\n(hatched); g10-artifact preset; driver: last iteration, page: the "
        "artifact's reported iteration",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
