"""FusionStitching (E8): kernels, launches, peak memory and ideal time before and after the
fusion pass, `xla` against `stitch`, every default policy's time under oversubscription, and
what each step's time is made of (launches, work, the GPU waiting for the host).

    PYTHONPATH=. python benchmarks/fusion_bench.py [--g10 ../shared/g10-artifact] [--quick]
    PYTHONPATH=. python benchmarks/fusion_bench.py --breakdown-only      # seconds

The breakdown (benchmarks/results/fusion_breakdown.csv, docs/fusion-breakdown.png) covers
the paper's kinds of workload (g10fast.validate.claims_fusion.PAPER_WORKLOADS: BERT-base
training b32, BERT-base and Transformer-base inference b1, on the h100-sxm5 cost model) and
the artifact's BERT-256 and ViT-1280 training steps (A100 traces), each with the host issuing
launches at fusion.HOST_LAUNCH_US.

Workloads: BERT-256, ViT-1280 and ResNet152-256 from the G10 artifact (its A100 kernel traces
and its system: 40 GB GPU; the paper's oversubscription), GPT-2 XL built-in (estimated kernel times on the
g10-artifact preset; a captured GPT-2 is not merged yet). Writes
benchmarks/results/fusion.jsonl (one line per workload x mode x policy, with the commit),
benchmarks/results/fusion_table.csv and docs/fusion-policies.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import ROOT, git_commit  # noqa: E402

MODES = ("none", "xla", "stitch")


def workloads(g10, quick: bool):
    from g10fast.config import genconfig
    from g10fast.spec import builtin_spec, from_g10_config

    out = []
    if g10 is not None:
        pts = [("BERT", 256, "BERT-256"), ("VIT", 1280, "ViT-1280")]
        if not quick:
            pts.append(("ResNet152", 256, "ResNet152-256"))
        for model, batch, label in pts:
            cfg = genconfig(g10, model, batch, "lru")
            out.append((label, "artifact traces (A100)", from_g10_config(cfg, policy="lru")))
    else:
        out.append(("BERT-256", "estimated", builtin_spec("bert-base", 256, "g10-artifact", "lru")))
        out.append(("ViT-1280", "estimated", builtin_spec("vit", 1280, "g10-artifact", "lru")))
    if not quick:
        out.append(
            (
                "GPT-2 XL b4 s1024 (built-in)",
                "estimated (g10-artifact preset)",
                builtin_spec("gpt2-xl", 4, "g10-artifact", "lru"),
            )
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--g10", type=Path, default=ROOT.parent / "shared" / "g10-artifact")
    ap.add_argument("--quick", action="store_true", help="BERT and ViT only (no ResNet, no GPT-2)")
    ap.add_argument("--policies", nargs="*", help="default: every default policy")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--figure", type=Path, default=ROOT / "docs" / "fusion-policies.png")
    ap.add_argument(
        "--figures-only", action="store_true", help="redraw the figures from the results files, run nothing"
    )
    ap.add_argument(
        "--breakdown-only",
        action="store_true",
        help="only the time breakdown of the paper's and the artifact's workloads (no policy runs)",
    )
    args = ap.parse_args(argv)
    g10 = args.g10 if (args.g10 / "frontend" / "Nets").is_dir() else None
    if not args.figures_only:
        breakdown(g10, args.out, args.figure.with_name("fusion-breakdown.png"))
        if args.breakdown_only:
            return 0
    if args.figures_only:
        rows = [json.loads(x) for x in open(args.out / "fusion.jsonl")]
        with open(args.out / "fusion_table.csv") as f:
            table = list(csv.DictReader(f))
        figure(rows, list(dict.fromkeys(r["policy"] for r in rows)), args.figure)
        summary_figure(table, args.figure.with_name("fusion-summary.png"))
        with open(args.out / "fusion_breakdown.csv") as fh:
            bd = list(csv.DictReader(fh))
        breakdown_figure(bd, args.figure.with_name("fusion-breakdown.png"))
        return 0
    from g10fast.policies import DEFAULT_POLICIES
    from g10fast.run import run, workload_of
    from g10fast.spec import make_spec, with_fuse
    from g10fast.workload.fusion import summary

    pols = args.policies or list(DEFAULT_POLICIES)
    commit = git_commit()
    rows, table = [], []
    for label, times, base in workloads(g10, args.quick):
        ghz = base.system.gpu_frequency_ghz
        for mode in MODES:
            spec0 = with_fuse(base, mode)
            t0 = time.perf_counter()
            w = workload_of(spec0)
            build_s = time.perf_counter() - t0
            s = summary(w, ghz)
            fm = w.meta.get("fusion", {})
            table.append(
                {
                    "workload": label,
                    "kernel_times": times,
                    "mode": mode,
                    "kernels": s["kernels"],
                    "launches": s["launches"],
                    "tensors": s["tensors"],
                    "footprint_gib": s["footprint_bytes"] / 2**30,
                    "peak_live_gib": s["peak_live_bytes"] / 2**30,
                    "ideal_s": s["ideal_s"],
                    "gflop": s["flops"] / 1e9,
                    "deleted_tensors": fm.get("deleted_tensors", 0),
                    "deleted_gib": fm.get("deleted_bytes", 0) / 2**30,
                    "pass_s": build_s,
                }
            )
            print(
                f"{label} {mode}: {s['kernels']} kernels, ideal {s['ideal_s']:.3f} s, peak "
                f"{s['peak_live_bytes'] / 2**30:.1f} GiB",
                flush=True,
            )
            for pol in pols:
                spec = make_spec(spec0.workload, base.system, pol, None, base.engine)
                t0 = time.perf_counter()
                try:
                    res = run(spec, workload=w)
                    it = res["iterations"][res["reported"]] if res.get("iterations") else {}
                    f_hz = float(base.system.f_hz)
                    exe = it.get("exe_time_cycles")
                    rec = {
                        "status": res["status"],
                        "time_s": (exe / f_hz) if exe is not None and res["status"] == "ok" else None,
                        "reason": (res.get("failure") or {}).get("reason"),
                    }
                except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                    rec = {"status": "error", "time_s": None, "reason": repr(e)}
                rec.update(
                    workload=label,
                    kernel_times=times,
                    mode=mode,
                    policy=pol,
                    ideal_s=s["ideal_s"],
                    wall_s=time.perf_counter() - t0,
                    commit=commit,
                    gpu_memory_gb=base.system.gpu_memory_gb,
                )
                rows.append(rec)
                print(
                    f"  {pol:<14} {rec['status']:<7} "
                    f"{rec['time_s'] if rec['time_s'] is None else round(rec['time_s'], 3)}"
                    f"  ({rec['wall_s']:.1f} s wall)",
                    flush=True,
                )
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / "fusion.jsonl.tmp"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    os.replace(tmp, args.out / "fusion.jsonl")
    tmp = args.out / "fusion_table.csv.tmp"
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(table[0]) + ["commit"])
        wr.writeheader()
        for r in table:
            wr.writerow(dict(r, commit=commit))
    os.replace(tmp, args.out / "fusion_table.csv")
    figure(rows, pols, args.figure)
    summary_figure(table, args.figure.with_name("fusion-summary.png"))
    return 0


BREAKDOWN_FIELDS = (
    "kernels",
    "total_s",
    "gpu_s",
    "launch_s",
    "work_s",
    "idle_s",
    "memory_intensive_s",
    "memory_intensive_launch_s",
    "traffic_bytes",
    "memory_intensive_bytes",
)


def breakdown(g10, out: Path, fig_path: Path) -> list:
    """Time breakdown (fusion.time_breakdown) of every workload under none / xla / stitch;
    writes fusion_breakdown.csv and the figure; prints each xla -> stitch gain."""
    from g10fast.run import workload_of
    from g10fast.validate.claims_fusion import PAPER_WORKLOADS, paper_workload
    from g10fast.workload.fusion import HOST_LAUNCH_US, fuse, gain_breakdown, time_breakdown

    items = [(label, "cost model (h100-sxm5)", *paper_workload(label)) for label, *_ in PAPER_WORKLOADS]
    if g10 is not None:
        from g10fast.config import genconfig
        from g10fast.spec import from_g10_config

        for model, batch, label in (("BERT", 256, "BERT-256 training"), ("VIT", 1280, "ViT-1280 training")):
            spec = from_g10_config(genconfig(g10, model, batch, "lru"), policy="lru")
            items.append((label, "artifact traces (A100)", workload_of(spec), spec))
    commit = git_commit()
    rows = []
    for label, times, w, spec in items:
        s = spec.system
        br = {}
        for mode in MODES:
            f = fuse(w, mode, freq_ghz=s.gpu_frequency_ghz, hbm_gbps=s.gpu_hbm_gbps or None)
            br[mode] = time_breakdown(f, s.gpu_frequency_ghz)
            rows.append(
                {
                    "workload": label,
                    "kernel_times": times,
                    "mode": mode,
                    **{k: br[mode][k] for k in BREAKDOWN_FIELDS},
                    "host_launch_us": HOST_LAUNCH_US,
                    "commit": commit,
                }
            )
        g = gain_breakdown(br["xla"], br["stitch"])
        print(
            f"{label}: stitch vs xla {g['speedup']:.4f}x, saved {g['saved_s'] * 1e6:.0f} us "
            f"(launches {g['share']['launches_s']:.0%}, traffic {g['share']['traffic_s']:.0%},"
            f" switches {g['share']['switches_s']:.0%})",
            flush=True,
        )
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "fusion_breakdown.csv.tmp"
    with open(tmp, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    os.replace(tmp, out / "fusion_breakdown.csv")
    breakdown_figure(rows, fig_path)
    return rows


def breakdown_figure(rows, path):
    """Per workload three stacked bars (none, xla, stitch), each relative to xla's step:
    compute kernels, memory-intensive work, launches' fixed costs, the GPU idle waiting for
    the host."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = list(dict.fromkeys(r["workload"] for r in rows))
    fig, ax = plt.subplots(figsize=(11, 4))
    parts = (
        ("compute kernels", "#7f7f7f"),
        ("memory-intensive work", "#1f77b4"),
        ("launch fixed costs", "#ff7f0e"),
        ("GPU waiting for the host", "#d62728"),
    )
    x0, ticks, labels = 0.0, [], []
    for wl in wls:
        by = {r["mode"]: {k: float(r[k]) for k in BREAKDOWN_FIELDS} for r in rows if r["workload"] == wl}
        ref = by["xla"]["total_s"]
        for j, mode in enumerate(MODES):
            b = by[mode]
            mi_work = b["memory_intensive_s"] - b["memory_intensive_launch_s"]
            comp = b["gpu_s"] - b["memory_intensive_s"] - (b["launch_s"] - b["memory_intensive_launch_s"])
            vals = (comp, mi_work, b["launch_s"], b["idle_s"])
            bottom = 0.0
            for (name, col), v in zip(parts, vals):
                ax.bar(
                    x0 + j,
                    v / ref,
                    0.8,
                    bottom=bottom,
                    color=col,
                    label=name if wl == wls[0] and j == 0 else None,
                )
                bottom += v / ref
            ax.text(x0 + j, bottom + 0.02, f"{ref / b['total_s']:.2f}x", ha="center", fontsize=7)
            ticks.append(x0 + j)
            labels.append(mode)
        ax.text(x0 + 1, -0.13, wl, ha="center", va="top", fontsize=8, transform=ax.get_xaxis_transform())
        x0 += len(MODES) + 1
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("step time relative to xla (xla = 1)")
    ax.set_xlabel("workload and fusion mode (label on a bar: speed-up over xla)", labelpad=32)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    tmp = Path(str(path) + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, path)


def summary_figure(table, path):
    """Kernels (= launches), peak live GiB, footprint GiB and ideal time per workload and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    wls = list(dict.fromkeys(r["workload"] for r in table))
    short = [w.split(" (")[0].split(" s1024")[0] for w in wls]
    panels = (
        ("kernels", "kernels (= launches)"),
        ("footprint_gib", "footprint (GiB)"),
        ("peak_live_gib", "peak live memory (GiB)"),
        ("ideal_s", "ideal time relative to fuse none"),
    )
    colours = {"none": "#999999", "xla": "#1f77b4", "stitch": "#d62728"}
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.4))
    for ax, (key, label) in zip(axes, panels):
        x = np.arange(len(wls))
        for j, mode in enumerate(MODES):
            ys = [float([r for r in table if r["workload"] == w and r["mode"] == mode][0][key]) for w in wls]
            if key == "ideal_s":
                ys = [
                    y / float([r for r in table if r["workload"] == w and r["mode"] == "none"][0][key])
                    for w, y in zip(wls, ys)
                ]
            ax.bar(x + (j - 1) * 0.27, ys, 0.27, label=f"fuse {mode}", color=colours[mode])
        ax.set_xticks(x)
        ax.set_xticklabels(short, fontsize=7, rotation=20)
        ax.set_ylabel(label)
        ax.set_xlabel("workload")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    tmp = Path(str(path) + ".tmp.png")
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, path)


def figure(rows, pols, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    wls = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(len(wls), 1, figsize=(9, 3.2 * len(wls)), squeeze=False)
    colours = {"none": "#999999", "xla": "#1f77b4", "stitch": "#d62728"}
    for ax, wl in zip(axes[:, 0], wls):
        x = np.arange(len(pols))
        for j, mode in enumerate(MODES):
            ys = []
            for p in pols:
                r = [q for q in rows if q["workload"] == wl and q["mode"] == mode and q["policy"] == p]
                ys.append(r[0]["time_s"] if r and r[0]["time_s"] is not None else np.nan)
            ax.bar(x + (j - 1) * 0.27, ys, 0.27, label=f"fuse {mode}", color=colours[mode])
            for xi, y in zip(x, ys):
                if np.isnan(y):
                    ax.text(xi + (j - 1) * 0.27, 0, "fail", rotation=90, ha="center", va="bottom", fontsize=7)
        mem = [q["gpu_memory_gb"] for q in rows if q["workload"] == wl][0]
        ax.set_title(f"{wl} on a {mem:g} GB GPU")
        ax.set_xticks(x)
        ax.set_xticklabels(pols, fontsize=8)
        ax.set_ylabel("iteration time (s)")
        ax.legend(fontsize=8, ncol=3)
    axes[-1, 0].set_xlabel("policy")
    fig.tight_layout()
    tmp = Path(str(path) + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, path)


if __name__ == "__main__":
    raise SystemExit(main())
