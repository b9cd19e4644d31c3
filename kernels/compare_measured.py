"""Compare measured kernel-time profiles with the cost model's estimates for the same GPU.

    python kernels/compare_measured.py [--out docs/measured-h100.md]

Reads the measured profiles in kernels/h100-sxm5-measured/ (all four quantities) and the
ideal-only measurements in benchmarks/results/h100-ideal/ (paper batches; their faulting
columns were not measured), estimates every kernel with the cost model
(g10fast.workload.costmodel, fitted on the artifact's A100 traces) for an H100 SXM5
(the h100-80-pcie5 preset with the SXM5's HBM3 bandwidth and peaks), and writes a markdown
table of the errors per model and per operator type. err = (estimated - measured) / measured.
Beside them, the error of the cost model fitted on these measurements (the h100-sxm5
preset's; g10fast/workload/costfit.py, docs/costmodel-h100.md) with each model held out.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.hardware import load_preset  # noqa: E402
from g10fast.workload.builtin import find_model, load_builtin_graph  # noqa: E402
from g10fast.workload.costmodel import estimate, gpu_from_preset, load_params  # noqa: E402
from g10fast.workload.profile import graph_options, read_profile  # noqa: E402

MEASURED = ROOT / "kernels" / "h100-sxm5-measured"
IDEAL_ONLY = ROOT / "benchmarks" / "results" / "h100-ideal"
# H100 SXM5 80 GB (datasheet): HBM3 3,350 GB/s, 67 TFLOPS FP32, 989 TFLOPS BF16 dense
SXM5 = {
    "gpu.model": "NVIDIA H100 80GB HBM3 (SXM5)",
    "gpu.hbm_gbps": 3350.0,
    "gpu.peak_tflops_fp32": 67.0,
    "gpu.peak_tflops_bf16": 989.0,
}


def _err(est, meas):
    return (est - meas) / meas if meas > 0 else float("nan")


def compare(path: Path, params, preset):
    p = read_profile(path)
    g = load_builtin_graph(p.model, p.batch, **graph_options(p, find_model(p.model)))
    if list(g.kernel_name) != p.names:
        raise SystemExit(f"{path}: kernel names differ from the built-in model")
    gpu = gpu_from_preset(preset, int(g.meta.get("dtype_bytes", 4)))
    e = estimate(g, gpu, params, families=False)
    m = np.stack([p.time_us, p.input_faulting_us, p.all_faulting_us]) * 1e-6
    s = np.stack([e["time_s"], e["input_pf_s"], e["pf_s"]])
    ops = defaultdict(lambda: np.zeros(3))
    for k, n in enumerate(p.names):
        ops[n] += [1, m[0, k], s[0, k]]
    return p, m, s, ops


def h100_fit_held_out() -> dict:
    """(model, batch) -> held-out errors (ideal, input faulting, all faulting) of the H100 fit."""
    from g10fast.workload import costfit as cf
    from g10fast.workload.costmodel import gpu_from_preset as gfp

    pre = load_preset("h100-sxm5")
    g4, g2 = gfp(pre, 4), gfp(pre, 2)
    gpu_of = lambda d: g4 if d >= 4 else g2  # noqa: E731
    ref = {"preset": "h100-sxm5", "model": g4.name}
    rows = cf.leave_one_model_out(
        cf.load_measured(cf.measured_paths(ROOT)),
        gpu_of,
        ref,
        g4.hbm_bytes_per_s,
        g4.link_bytes_per_s,
        lambda d: gpu_of(d).peak_flops,
    )
    return {
        (r["model"], r["batch"]): [cf.rel_err(e, m) for e, m in zip(r["estimated"], r["measured"])]
        for r in rows
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "measured-h100.md"))
    a = ap.parse_args(argv)
    params = load_params()
    preset = load_preset("h100-80-pcie5", SXM5)
    L = [
        "# Measured kernel times on an H100 against the cost model",
        "",
        "Written by `python kernels/compare_measured.py`. Measured with "
        "`kernels/profile_torch.py` (real PyTorch operations per kernel, CUDA events; "
        "docs/profile-format.md) on one NVIDIA H100 80GB HBM3 (SXM5), PyTorch 2.11 / CUDA 13.0 / "
        "cuDNN 9.19, fp32 models with PyTorch's defaults (TF32 allowed in cuDNN convolutions, "
        "not in matrix products). Estimated: the cost model fitted on the artifact's A100 "
        "traces, for the h100-80-pcie5 preset with the SXM5's 3,350 GB/s HBM3 and 67 / 989 "
        "TFLOPS fp32 / bf16 peaks (roofline part only; the A100 family lines do not apply). "
        "err = (estimated - measured) / measured; sums over one iteration's kernels, seconds.",
        "",
        "## Per model",
        "",
        "| model | batch | kernels | ideal: measured | estimated | err | input faulting: measured "
        "| estimated | err | all faulting: measured | estimated | err | median abs kernel err (ideal) "
        "| H100 fit, held out: ideal err | input faulting err | all faulting err |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    fit = h100_fit_held_out()
    all_ops = defaultdict(lambda: np.zeros(3))
    a100_err = []
    rows = sorted(MEASURED.glob("*.prof.gz")) + sorted(IDEAL_ONLY.glob("*.prof.gz"))
    for path in rows:
        p, m, s, ops = compare(path, params, preset)
        ideal_only = path.parent == IDEAL_ONLY
        tot_m, tot_s = m.sum(1), s.sum(1)
        kerr = np.median(np.abs((s[0] - m[0]) / np.maximum(m[0], 1e-9)))
        cells = [
            p.model,
            str(p.batch),
            str(len(p.names)),
            f"{tot_m[0]:.4f}",
            f"{tot_s[0]:.4f}",
            f"{_err(tot_s[0], tot_m[0]):+.1%}",
        ]
        for j in (1, 2):
            if ideal_only:
                cells += ["not measured", f"{tot_s[j]:.3f}", ""]
            else:
                cells += [f"{tot_m[j]:.3f}", f"{tot_s[j]:.3f}", f"{_err(tot_s[j], tot_m[j]):+.1%}"]
        cells.append(f"{kerr:.1%}")
        fe = fit[(p.model, p.batch)]
        cells += [f"{fe[0]:+.1%}"] + (["", ""] if ideal_only else [f"{x:+.1%}" for x in fe[1:]])
        L.append("| " + " | ".join(cells) + " |")
        if ideal_only:
            a100_err.append(_err(tot_s[0], tot_m[0]))
            for n, v in ops.items():
                all_ops[n] += v
    L += [
        "",
        "Rows at batch 32 (1 for GPT-2 XL) carry all three measured times "
        "(kernels/h100-sxm5-measured/); rows at the paper's batches were measured without "
        "faulting (benchmarks/results/h100-ideal/).",
        "",
        "## Per operator type (ideal time, the ideal-only rows at the paper's batches together)",
        "",
        "| kernel | count | share of measured | measured (s) | estimated (s) | err |",
        "|---|---|---|---|---|---|",
    ]
    total = sum(v[1] for v in all_ops.values())
    for n, v in sorted(all_ops.items(), key=lambda x: -x[1][1]):
        if v[1] / total < 0.002:
            continue
        L.append(
            f"| {n} | {int(v[0])} | {v[1] / total:.1%} | {v[1]:.4f} | {v[2]:.4f} | {_err(v[2], v[1]):+.1%} |"
        )
    L += [
        "",
        "## What it shows",
        "",
        "The cost model's roofline, fitted on the artifact's A100 traces, puts these H100 "
        "kernels 2.4 to 11 times slower than measured (ideal time) and the faulting modes 10 "
        "to 50 times slower. The A100 traces come from the artifact's own profiler, and its "
        "numbers are not today's PyTorch kernel speeds: it times custom CUDA kernels for "
        "Linear_Backward_Input (here +1,546 %) and the transformers' element-wise operators, "
        "times each kernel once (cuDNN set-up included, g10-workloads.md §2), and faults over "
        "an A100's PCIe Gen4 link. The calibration reproduces those traces "
        "(docs/costmodel-calibration.md), which is what the G10-compatible experiments need; "
        "for a GPU's real kernel speeds, measure a profile with kernels/profile_torch.py.",
        "",
        "The last three columns are the cost model fitted on these measurements (the "
        "h100-sxm5 preset's parameters, data/costmodel/h100-sxm5.toml), each model's "
        "profiles held out of the fit: the median absolute error of the ideal time over the "
        "seven paper-batch rows is "
        + f"{np.median([abs(fit[k][0]) for k in fit if k[1] not in (1, 32)]):.1%}"
        + " (A100 fit: "
        + f"{np.median([abs(v) for v in a100_err]):.1%}"
        + "). How it is "
        "fitted, the errors by op class and the figure: docs/costmodel-h100.md "
        "(benchmarks/fit_costmodel_h100.py).",
        "",
    ]
    out = Path(a.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(L))
    tmp.replace(out)
    print(out)


if __name__ == "__main__":
    main()
