"""PUMP against naive UM on the five paper workloads (driver engine), at 1.5x and 3x
oversubscription (GPU memory = footprint / R), under PUMP's defaults and the settings its
"about 2x" needs (docs/pump.md).

Each variant is (label, policy, PUMP options, driver options); a PUMP row's speed-up is the
time of `uvm` under the same driver options over its own time (last of two iterations).

    python benchmarks/pump_paper.py                       # every variant, paper workloads
    python benchmarks/pump_paper.py --variants defaults,before --models bert-base:256
    python benchmarks/pump_paper.py --summary benchmarks/results/pump_paper.csv
    python benchmarks/pump_paper.py --plot benchmarks/results/pump_paper.csv   # docs/pump.png
    python benchmarks/pump_paper.py --basis live --variants fresh,fresh+hooks \
        --out benchmarks/results/pump_paper_live.csv      # GPU memory = peak live bytes / R

Writes benchmarks/results/pump_paper.csv (one row per run, rewritten after each) and prints
the geometric mean of the speed-up over the points per variant.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import ROOT, git_commit  # noqa: E402

PAPER = [("bert-base", 256), ("vit", 1280), ("inceptionv3", 1536), ("resnet152", 1280), ("senet154", 1024)]
CACHING = {"fresh_allocations": False}  # the framework's caching allocator (PUMP's setup)
FRESH = {"fresh_allocations": True}  # cudaMallocManaged / cudaFree per tensor
#: every transfer on the whole link at the curve's full rate (2 MiB not halved): the
#: measured bulk rate (MSched: batched migration at 65-69 % of the link)
BULK = {"link_fraction": 1.0, "curve_halve_2mib": False, "transfer_curve": "uvmsmart"}
HOOKS = {"coverage": "framework_hooks"}
#: label -> (PUMP options, driver options); naive UM runs under the same driver options
VARIANTS = {
    "before": ({"sync": "none", "launch_queue_depth": 0}, CACHING),  # the old defaults
    "defaults": ({}, CACHING),
    "hooks": (HOOKS, CACHING),
    "defaults+bulk": ({}, {**CACHING, **BULK}),
    "hooks+bulk": (HOOKS, {**CACHING, **BULK}),
    "fresh": ({}, FRESH),
    "fresh+hooks": (HOOKS, FRESH),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="")
    ap.add_argument("--ratios", default="1.5,3")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--preset", default="g10-artifact")
    ap.add_argument(
        "--basis",
        choices=("footprint", "live"),
        default="footprint",
        help="GPU memory = footprint / R (every tensor its own pages, G10's) or "
        "peak live bytes / R (weights + the tensors between first and last "
        "use: what an allocator that frees needs)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pump_paper.csv"))
    ap.add_argument("--summary", default="", help="print the summary of this CSV, run nothing")
    ap.add_argument("--plot", default="", help="draw docs/pump.png from this CSV, run nothing")
    a = ap.parse_args(argv)
    if a.plot:
        with open(a.plot) as f:
            plot(list(csv.DictReader(f)), ROOT / "docs" / "pump.png")
        return 0
    if a.summary:
        with open(a.summary) as f:
            print(summary(list(csv.DictReader(f))))
        return 0
    from g10fast import api
    from g10fast.hardware import load_preset
    from g10fast.run import run
    from g10fast.spec import builtin_spec
    from g10fast.system import System

    models = PAPER
    if a.models:
        models = [(m.split(":")[0], int(m.split(":")[1])) for m in a.models.split(",")]
    ratios = [float(r) for r in a.ratios.split(",") if r]
    variants = a.variants.split(",")
    base = System.from_preset(load_preset(a.preset))
    commit = git_commit()
    rows = []
    for model, batch in models:
        w = api.builtin_workload(model, batch, a.preset)
        need = w.footprint_bytes if a.basis == "footprint" else peak_live_bytes(w)
        for ratio in ratios:
            system = base.replace(gpu_memory_gb=need / ratio / 2**30)
            uvm = {}
            for label in variants:
                opts, compat = VARIANTS[label]
                key = tuple(sorted(compat.items()))
                todo = ([] if key in uvm else [("uvm", None)]) + [("pump", opts)]
                for pol, o in todo:
                    t0 = time.perf_counter()
                    spec = builtin_spec(
                        model,
                        batch,
                        system,
                        pol,
                        options=o or None,
                        engine={"compat": dict(compat)} if compat else None,
                    )
                    r = run(spec, workload=w)
                    it = r["iterations"][r["reported"]]
                    t = int(it["exe_time_cycles"])
                    if pol == "uvm":
                        uvm[key] = t
                    pg = it["pages"]
                    from g10fast.engine.driver import driver_options, system_params

                    prm = system_params(system, driver_options(dict(compat)))
                    row = {
                        "model": model,
                        "batch": batch,
                        "ratio": ratio,
                        "basis": a.basis,
                        "gpu_gb": round(system.gpu_memory_gb, 3),
                        "variant": label if pol == "pump" else "uvm",
                        "driver_options": ";".join(f"{k}={v}" for k, v in key),
                        "pump_options": ";".join(f"{k}={v}" for k, v in sorted((o or {}).items())),
                        "time_s": round(t / system.f_hz, 4),
                        "perf": round(it["ideal_exe_time_cycles"] / t, 4),
                        "speedup_vs_uvm": round(uvm[key] / t, 4),
                        "fault_batch_us": round(prm["fault_latency_us"], 2),
                        "link_gbps": round(prm["link_gbps"], 3),
                        "faults": it["faults"],
                        "batches": it["fault_batches"],
                        "pages_in": pg["incoming"],
                        "pages_out": pg["outgoing"],
                        "prefetched": pg["prefetched"],
                        "wall_s": round(time.perf_counter() - t0, 2),
                        "commit": commit,
                    }
                    rows.append(row)
                    print(",".join(str(v) for v in row.values()), flush=True)
                    write(a.out, rows)
    print(summary(rows))
    return 0


PLOT = [
    ("before", "caching allocator: before (unbounded run-ahead)", "#c7c7c7"),
    ("defaults", "caching allocator: defaults (launch queue 1000, loss.item() sync)", "#e377c2"),
    ("hooks", "+ every tensor covered (framework hooks)", "#9467bd"),
    ("hooks+bulk", "+ every transfer at the measured bulk rate", "#1f77b4"),
    ("fresh", "cudaMallocManaged / cudaFree per tensor (live set fits): defaults", "#ff7f0e"),
    ("fresh+hooks", "cudaMallocManaged / cudaFree per tensor (live set fits): hooks", "#d62728"),
]


def plot(rows, path):
    """Per workload and ratio, PUMP's speed-up over naive UM under each variant, with the
    abstract's 1.5-3x band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = list(dict.fromkeys((r["model"], r["batch"], r["ratio"]) for r in rows))
    fig, ax = plt.subplots(figsize=(11, 5.4))
    wdt = 0.85 / len(PLOT)
    ax.axhspan(1.5, 3.0, color="#2ca02c", alpha=0.12, label="PUMP abstract: about 2x (band 1.5-3x)")
    ax.axhline(1.0, color="black", lw=0.8)
    for j, (v, lab, col) in enumerate(PLOT):
        ys = []
        for p in pts:
            x = [
                float(r["speedup_vs_uvm"])
                for r in rows
                if (r["model"], r["batch"], r["ratio"]) == p and r["variant"] == v
            ]
            ys.append(x[0] if x else 0.0)
        g = geomean([y for y in ys if y > 0]) if any(ys) else float("nan")
        ax.bar([i + j * wdt for i in range(len(pts))], ys, wdt, color=col, label=f"{lab}: geomean {g:.2f}x")
    ax.set_xticks([i + 0.425 - wdt / 2 for i in range(len(pts))])
    ax.set_xticklabels([f"{m} {b}\n{float(r):g}x oversub." for m, b, r in pts], fontsize=7)
    ax.set_ylabel("time(naive UM) / time(PUMP)")
    ax.set_ylim(0, 4.0)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=7, ncol=2, loc="lower center")
    us = rows[0].get("fault_batch_us", "?")
    ax.set_title(
        f"PUMP against naive UM (the same allocator), driver engine, g10-artifact "
        f"preset ({us} us per fault batch), GPU memory = footprint / ratio",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def peak_live_bytes(w) -> int:
    from g10fast.validate.claims_pump import peak_live_bytes as plb

    return plb(w)


def write(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    Path(tmp).replace(path)


def geomean(xs):
    xs = [float(x) for x in xs]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(rows) -> str:
    """Per variant: the geometric mean of PUMP's speed-up over naive UM and its range."""
    out = ["| variant | points | geomean x naive UM | min | max |", "|---|---|---|---|---|"]
    for v in dict.fromkeys(r["variant"] for r in rows if r["variant"] != "uvm"):
        xs = [float(r["speedup_vs_uvm"]) for r in rows if r["variant"] == v]
        out.append(f"| {v} | {len(xs)} | {geomean(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} |")
    out += ["", lambda_star(rows)]
    return "\n".join(out)


def lambda_star(rows, variant="hooks+bulk", target=2.0) -> str:
    """The fault-batch cost at which `variant` would reach `target` x naive UM at every
    point: naive UM's batches do not depend on time (the same pages fault in the same order),
    so its time grows by (lambda - lat) per batch, while the variant (almost no faults)
    keeps its time: lambda* = lat + (target * t_variant - t_uvm) / batches_uvm, lat the
    runs' cost per batch (the variant's own few batches ignored)."""
    out = [
        (f"| point | t uvm s | t {variant} s | uvm batches | fault-batch cost for {target:g}x, us |"),
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if r["variant"] != variant:
            continue
        u = [
            x
            for x in rows
            if x["variant"] == "uvm"
            and x["model"] == r["model"]
            and x["ratio"] == r["ratio"]
            and x["driver_options"] == r["driver_options"]
        ]
        if not u or "batches" not in u[0]:
            continue
        tu, tv, b = float(u[0]["time_s"]), float(r["time_s"]), int(u[0]["batches"])
        lam = float(u[0]["fault_batch_us"]) + (target * tv - tu) / b * 1e6
        out.append(
            f"| {r['model']} {r['batch']} {float(r['ratio']):g}x | {tu:.1f} | {tv:.1f} | {b} | {lam:.0f} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
