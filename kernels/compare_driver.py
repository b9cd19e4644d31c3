"""The driver engine at the h100-sxm5 preset's defaults against kernels measured on that H100
under CUDA managed memory (kernels/h100-sxm5-measured/, docs/profile-format.md).

    python kernels/compare_driver.py [--out docs/driver-h100.md]

Each kernel runs alone on the driver engine from the harness's start state (the layout of
g10fast.engine.driver.fit: the operands of the harness's recipe, the outputs its
operation returns, its temporaries; each its own allocation from a 2 MiB boundary): input
faulting = operands resident, outputs and temporaries first-touched; all faulting =
operands on the host. Predicted = measured ideal time + the engine's stall at the preset's
defaults (DriverOptions(), the preset's [driver] values) + one managed free per temporary
(the harness frees each with a synchronising cudaFree). The held-out figures (each model
predicted by values fitted without it, nested) come from benchmarks/results/driver_fit_h100.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from g10fast.engine.driver import kernels as dk
from g10fast.engine.driver import DriverOptions, system_params
from g10fast.engine.driver.fit import MODES, kernel_layout, profile_model_options
from g10fast.hardware import load_preset
from g10fast.system import System
from g10fast.workload.builtin import find_model, load_builtin_graph
from g10fast.workload.profile import read_profile, workload_from_profile
from g10fast.workload.recipes import recipes_for

ROOT = Path(__file__).resolve().parents[1]

MEASURED = ROOT / "kernels" / "h100-sxm5-measured"
FIT = ROOT / "benchmarks" / "results" / "driver_fit_h100.json"


def kernel_time(w, k, recipe, el, prm, opts, inputs_on) -> float:
    """Seconds of kernel k alone on the engine: stall + managed frees (ideal excluded)."""
    (rs, rn, rw, isin, P), temps = kernel_layout(w, k, recipe, el)
    init = np.zeros(P, np.int8)
    for s, n, i in zip(rs, rn, isin):
        if i:
            init[s : s + n] = inputs_on
        elif n <= prm["small_alloc_pages"]:  # a small allocation: already populated
            init[s : s + n] = dk.LOC_GPU
    z = np.zeros(0, np.int64)
    kern, *_ = dk.simulate(
        1,
        1,
        np.asarray([0, len(rs)], np.int64),
        rs,
        rn,
        rw,
        np.zeros(1, np.int64),
        np.zeros(2, np.int64),
        z,
        z,
        z,
        np.full(1, -1, np.int64),
        P,
        prm["gpu_pages"],
        prm["gpu_chunks"],
        prm["host_pages"],
        opts.fault_batch,
        prm["fault_latency_cycles"],
        prm["big_pages"],
        dk.PF_DENSITY,
        opts.density_threshold,
        dk.EV_ALLOC2M,
        False,
        prm["h2d"],
        prm["d2h"],
        prm["ssd_r"],
        prm["ssd_w"],
        -1,
        0,
        init,
        False,
        1 << 62,
        np.zeros((1, dk.EV_COLS), np.int64),
        False,
    )
    frees = int(w.workspace_bytes[k] > 0) + len(temps)
    return kern[0, dk.K_STALL] / prm["f_hz"] + frees * prm["managed_free_us"] * 1e-6


def predictions(files, system):
    """Rows (model, kernel name, mode, ideal, measured, predicted), seconds."""
    opts = DriverOptions()
    prm = system_params(system, opts)
    rows = []
    for f in files:
        prof = read_profile(f)
        mo = profile_model_options(prof)
        w = workload_from_profile(load_builtin_graph(find_model(prof.model), prof.batch, **mo), prof)
        _, book, recipes = recipes_for(prof.model, prof.batch, **mo)
        for mode in MODES:
            meas = prof.input_faulting_us if mode == "input" else prof.all_faulting_us
            on = dk.LOC_GPU if mode == "input" else dk.LOC_HOST
            for k in range(w.num_kernels):
                ideal = prof.time_us[k] * 1e-6
                rows.append(
                    (
                        prof.model,
                        w.kernel_name[k],
                        mode,
                        ideal,
                        meas[k] * 1e-6,
                        ideal + kernel_time(w, k, recipes[k], book.el, prm, opts, on),
                    )
                )
        print(f"{prof.model}: {w.num_kernels} kernels", file=sys.stderr)
    return rows, prm


def figure(rows, held, path) -> None:
    """Per model and mode: the held-out error and the defaults' error, with the 15 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(held["per_model"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, mode, title in zip(axes, MODES, ("input faulting", "all faulting")):
        dflt = []
        for m in models:
            ix = [i for i, r in enumerate(rows) if r[0] == m and r[2] == mode]
            meas = sum(rows[i][4] for i in ix)
            dflt.append(100 * (sum(rows[i][5] for i in ix) - meas) / meas)
        x = np.arange(len(models))
        ax.bar(x - 0.2, [100 * held["per_model"][m][mode] for m in models], 0.4, label="held out (nested)")
        ax.bar(x + 0.2, dflt, 0.4, label="h100-sxm5 defaults")
        for y in (-15, 15):
            ax.axhline(y, color="grey", ls="--", lw=0.8)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xticks(x, models, rotation=30, ha="right")
        ax.set_title(f"{title}: predicted vs measured")
    axes[0].set_ylabel("error of the summed faulting time (%)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "driver-h100.md"))
    a = ap.parse_args(argv)
    system = System.from_preset(load_preset("h100-sxm5"))
    rows, prm = predictions(sorted(MEASURED.glob("*.prof.gz")), system)
    fit = json.loads(FIT.read_text())
    held = fit["held_out"]
    meas = np.array([r[4] for r in rows])
    pred = np.array([r[5] for r in rows])
    rel = np.abs(pred - meas) / meas
    lines = [
        "# The driver engine against kernels measured on an H100 under managed memory",
        "",
        "Written by `python kernels/compare_driver.py` (the fit: `python "
        "benchmarks/fit_driver_h100.py`). Measured: kernels/h100-sxm5-measured/ (docs/"
        "measured-h100.md, docs/profile-format.md: input faulting = operands resident, "
        "outputs first-touched; all faulting = operands written from the host first; each "
        "allocation a cudaMallocManaged, each free a synchronising cudaFree). Predicted: "
        "each kernel alone on the driver engine from that start state at the h100-sxm5 "
        "preset's defaults, + the measured ideal time. Sums over the kernels, seconds; err = "
        "(predicted - measured) / measured.",
        "",
        "## The defaults and how they were found",
        "",
        f"* h100-sxm5 `[driver]`: {prm['fault_latency_us']:g} us per 256-fault batch, "
        f"migrations on the {prm['transfer_curve']} curve at {prm['link_gbps']:g} GB/s "
        f"(link_fraction "
        f"{prm['link_gbps'] / 50:g} of the 50 GB/s PCIe Gen5 link), "
        f"{prm['managed_free_us']:g} us per managed cudaFree, fresh allocations of at most "
        f"{prm['small_alloc_pages'] * 4} KiB not faulted afresh.",
        "* Layout per kernel (g10fast.engine.driver.fit `kernel_layout`): the harness's "
        "recipe (g10fast.workload.recipes) gives the operands (AdamW's master weight, "
        "gradient, two moments and bf16 copy, not the model's two tensors); the outputs are "
        "what the operation returns (one big tensor for BatchNorm forward and backward, not "
        "G10's two; an element-wise forward's broadcast shape; max-pool's int64 indices; "
        "dropout's mask; none for in-place updates); the temporaries are the intermediates "
        "of the composite expressions in `run_op` (Divide_Backward_B: -g, -g*a, b*b and the "
        "unreduced quotient; Erf_Backward: four; ...), each first-touched and freed.",
        "* Fit: for each link curve form (uvmsmart, flat) and link (6.25-64 GB/s) and term "
        "set (per batch; + per managed free; + zero-fill per GB), non-negative least squares "
        "of the relative errors of the per-model, per-mode sums. Selection of form, link "
        "and terms by leave-one-model-out inside each outer fold (nested; criterion: the "
        "root mean square of the inner held-out per-model errors, the fit's own loss); the "
        "outer fold's model predicted with the inner choice refitted on the other five.",
        "* Also chosen inside the loop: the size up to which a fresh allocation starts "
        "populated (0, 64, 256, 1024 KiB; on the H100 a fresh output of at most 256 KiB "
        "costs a median 0.4-1.3 us over 1,710 input-faulting kernels, not a fault batch).",
        f"* Final selection on all six: {fit['final']['form']} curve, "
        f"{fit['final']['link_gbps']:g} GB/s, small allocations up to "
        f"{fit['final']['small_kib']} KiB, terms {', '.join(fit['final']['terms'])}.",
        "",
        "## Held out by model (nested)",
        "",
        "| model | input faulting err | all faulting err | the fold's choice |",
        "|---|---|---|---|",
    ]
    for m, e in held["per_model"].items():
        f = held["folds"][m]
        lines.append(
            f"| {m} | {e['input'] * 100:+.1f}% | {e['all'] * 100:+.1f}% | "
            f"{f['form']} {f['link_gbps']:g} GB/s, {f['fault_batch_us']:.1f} us/batch, "
            f"small {f['small_kib']} KiB, "
            f"{f['managed_free_us']:.0f} us/free"
            + (f", zero-fill {f['zero_fill_gbps']:.1f} GB/s" if f["zero_fill_gbps"] else "")
            + " |"
        )
    lines += [
        "",
        f"Held-out per-kernel median absolute error: "
        f"{held['per_kernel_median_abs'] * 100:.1f} %; largest per-model error "
        f"{held['max_abs_model_err'] * 100:.1f} %.",
        "",
        f"At the defaults (in sample): per-kernel median absolute error {np.median(rel) * 100:.1f} %.",
        "",
        "## What still misses",
        "",
        "* Closest to the 15 % bound, held out: ViT all faulting -14.1 % and GPT-2 XL "
        "all faulting -13.1 % (their small tensors, and AdamW's five per weight, cost "
        "more per byte than the per-batch and per-free terms carry: per operator type "
        "below, Linear_Backward_Weight, Linear_Forward).",
        "* The pass depends on the selection criterion: the root mean square of the "
        "per-model errors (the fit's own loss) gives 14.1 %; the largest error as the "
        "criterion gave 16.4 % (ViT), the mean absolute error 16.9 % (GPT-2 XL). Six "
        "models are few for a nested selection.",
        "* The fitted managed free (about 0.9 ms) is 13x the 70 us the harness measured "
        "for a small free alone (docs/profile-format.md): it also carries what the "
        "kernels with temporaries (composite gradients, convolutions with a cuDNN "
        "workspace) cost beyond the engine's faults; a zero-fill rate was offered to "
        "the selection and chosen by two folds only, a per-byte free cost (tried "
        "outside the fit) did not help.",
        "* Per kernel (median 22 %): a batch is one per 256 missing 4 KiB pages, so a "
        "kernel with sub-MiB tensors pays a whole batch; the real fault buffer "
        "coalesces several allocations' faults.",
        "* Not modelled: the driver's VA blocks belong to one allocation, the engine's "
        "arena lays tensors back to back, so with `fresh_allocations` the density "
        "prefetch of one tensor can populate a neighbour's freed pages in a shared "
        "2 MiB block; launch and allocation costs; link contention.",
        "",
    ]

    def table(key_of, title):
        lines.extend(
            [
                f"## {title} (the defaults)",
                "",
                "| group | kernels | measured input faulting | predicted | err | "
                "measured all faulting | predicted | err |",
                "|---|---|---|---|---|---|---|---|",
            ]
        )
        groups = defaultdict(lambda: defaultdict(list))
        for i, r in enumerate(rows):
            groups[key_of(r)][r[2]].append(i)
        order = sorted(groups, key=lambda g: -meas[groups[g]["all"]].sum())
        for gk in order:
            cells = [gk, str(len(groups[gk]["input"]))]
            for mode in MODES:
                ix = np.asarray(groups[gk][mode])
                mm, pp = meas[ix].sum(), pred[ix].sum()
                cells += [f"{mm:.4f}", f"{pp:.4f}", f"{(pp - mm) / mm * 100:+.1f}%"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")

    fig = Path(a.out).with_name("driver-h100.png")
    figure(rows, held, fig)
    lines += [f"![Per-model error of the faulting time, held out and at the defaults]({fig.name})", ""]
    table(lambda r: r[0], "Per model")
    table(lambda r: r[1], "Per operator type")
    Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
