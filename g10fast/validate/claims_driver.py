"""The driver engine (the real nvidia-uvm's mechanisms, g10fast.engine.driver) against a real
H100 and against what naive UM costs a PyTorch training run.

The faulting rows are held out by model with the model selection inside (nested): for each
of the six measured models, the link curve form, its bandwidth and the cost terms are chosen
by leave-one-model-out over the other five, fitted on them, and the model is predicted with
that (g10fast.engine.driver.fit). Only held-out figures are reported here; the
h100-sxm5 preset's defaults are the same procedure's fit on all six.

The naive-UM rows run the `uvm` policy (a CUDAPluggableAllocator of cudaMallocManaged /
cudaFree: every non-weight tensor allocated, first-touched and freed each iteration) at the
preset's defaults on a model that fits the GPU, against its ideal (native) time.
"""

from __future__ import annotations

import functools
from pathlib import Path

from g10fast.validate import Claim, Measured, Unavailable

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "kernels" / "h100-sxm5-measured"
IDEAL = ROOT / "benchmarks" / "results" / "h100-ideal"
#: the quick setting's link grid and small-allocation candidates (the full ones:
#: g10fast.engine.driver.fit LINKS, SMALL_KIB)
#: (a doubling grid and the no-small-allocation case, each through the full setting's choice)
QUICK_LINKS = (8.0, 16.0, 32.0)
QUICK_SMALL_KIB = (0, 64)


@functools.lru_cache(maxsize=None)
def _fit(quick: bool) -> dict:
    if not MEASURED.is_dir() or not any(MEASURED.glob("*.prof.gz")):
        raise Unavailable(f"no measured H100 profiles at {MEASURED}")
    from g10fast.engine.driver import fit

    ds = {sk: fit.features(MEASURED, small_kib=sk) for sk in (QUICK_SMALL_KIB if quick else fit.SMALL_KIB)}
    return fit.nested_fit(ds, QUICK_LINKS if quick else fit.LINKS)


def _per_model(quick: bool) -> Measured:
    r = _fit(quick)["held_out"]
    detail = "; ".join(f"{m} input {e['input']:+.1%} all {e['all']:+.1%}" for m, e in r["per_model"].items())
    return Measured(100.0 * r["max_abs_model_err"], "largest |err| of 12 held-out sums: " + detail)


def _per_kernel(quick: bool) -> Measured:
    r = _fit(quick)
    h = r["held_out"]
    return Measured(
        100.0 * h["per_kernel_median_abs"],
        f"{2 * r['kernels']} kernel-modes, held out by model; in sample "
        f"{100 * r['in_sample']['per_kernel_median_abs']:.1f} %",
    )


@functools.lru_cache(maxsize=None)
def _naive(model: str, batch: int) -> dict:
    from g10fast.api import simulate

    prof = IDEAL / f"{model}-b{batch}.prof.gz"
    if not prof.is_file():
        raise Unavailable(f"no measured ideal profile {prof}")
    out = {}
    for key, compat in (("plain", {}), ("prefetch", {"prefetch_at_alloc": True})):
        r = simulate(model, batch, "h100-sxm5", "uvm", kernel_times=str(prof), engine={"compat": compat})
        it = r["iterations"][r["reported"]]
        out[key] = (float(it["slowdown"]), int(it["fault_batches"]))
    return out


NAIVE = ("bert-base", 256)
#: E2's memory ratios (uvm-hardware-facts.md §5): peak live memory / GPU memory
OVERSUB = (1.02, 1.43, 2.17)


@functools.lru_cache(maxsize=None)
def _oversub(model: str, batch: int) -> dict:
    """{ratio: slowdown} of `uvm` (fresh allocations, no prefetch) with the GPU memory cut to
    the run's peak live memory / ratio (the peak measured on the full 80 GB)."""
    from g10fast.api import builtin_workload
    from g10fast.engine.driver import kernels as dk
    from g10fast.engine.driver import driver_options, iteration_stats, simulate_driver
    from g10fast.hardware import load_preset
    from g10fast.system import System

    prof = IDEAL / f"{model}-b{batch}.prof.gz"
    if not prof.is_file():
        raise Unavailable(f"no measured ideal profile {prof}")
    w = builtin_workload(model, batch, "h100-sxm5", kernel_times=str(prof))
    base = System.from_preset(load_preset("h100-sxm5"))
    opts = driver_options({"fresh_allocations": True})
    peak = int(simulate_driver(w, base, opts).kernels[:, dk.K_GPU].max()) * 4096
    out = {}
    for ratio in OVERSUB:
        r = simulate_driver(w, base.replace(gpu_memory_gb=peak / ratio / 2**30), opts)
        if r.status != "ok":
            raise RuntimeError(f"uvm at {ratio}x: {r.failure}")
        out[ratio] = float(iteration_stats(r, w, 2)[1]["slowdown"])
    out["peak_gib"] = peak / 2**30
    return out


def _oversub_ratio(ratio: float):
    def measure(quick: bool) -> Measured:
        v = _oversub(*NAIVE)
        return Measured(
            v[ratio] / v[1.02],
            f"{NAIVE[0]}-{NAIVE[1]} on h100-sxm5, peak live "
            f"{v['peak_gib']:.1f} GiB; slowdown against ideal at "
            + ", ".join(f"{r:g}x {v[r]:.1f}" for r in OVERSUB),
        )

    return measure


def _naive_plain(quick: bool) -> Measured:
    v = _naive(*NAIVE)
    return Measured(
        v["plain"][0],
        f"{NAIVE[0]}-{NAIVE[1]} on h100-sxm5 (80 GB: fits), {v['plain'][1]} fault batches per iteration",
    )


def _naive_prefetch(quick: bool) -> Measured:
    v = _naive(*NAIVE)
    return Measured(v["prefetch"][0], f"{NAIVE[0]}-{NAIVE[1]} on h100-sxm5, {v['prefetch'][1]} fault batches")


def _naive_ratio(quick: bool) -> Measured:
    v = _naive(*NAIVE)
    return Measured(v["plain"][0] / v["prefetch"][0], f"{v['plain'][0]:.1f}x / {v['prefetch'][0]:.2f}x")


_SRC_H100 = (
    "kernels/h100-sxm5-measured/ (kernels/profile_torch.py on an H100 80GB HBM3 "
    "SXM5, PyTorch 2.11, CUDA 13.0; docs/measured-h100.md); issue 36's target"
)
_SRC_E1 = (
    "noob512/uvm workloads/pytorch/docs/UVM_EVALUATION.md §4.1 (E1), via "
    "specs/uvm-hardware-facts.md §5: RTX 5090, PCIe 5, PyTorch 2.9, 2-layer GCN at "
    "0.73x of GPU memory; run-to-run and configuration variance: ±2x (§5, E2-note)"
)
_SETTING_FIT = (
    "each measured kernel alone on the driver engine from the harness's start "
    "state (input faulting and all faulting), nested leave-one-model-out over "
    "bert-base-32, gpt2-xl-1, inceptionv3-32, resnet152-32, senet154-32, vit-32"
)

CLAIMS = [
    Claim(
        id="driver.h100-faulting-per-model",
        system="driver engine",
        claim="the driver engine's defaults predict each model's measured faulting time "
        "within 15 % (input faulting and all faulting, held out by model)",
        source=_SRC_H100,
        published="<= 15 % per model",
        setting=_SETTING_FIT + "; links 6.25-64 GB/s, small allocations 0-1024 KiB",
        quick_setting=_SETTING_FIT + "; links 8, 16, 32 GB/s, small allocations 0, 64 KiB",
        unit="%",
        band=(0.0, 15.0),
        measure=_per_model,
        why="Agrees at 14.1 % (full setting), ViT and GPT-2 XL all faulting the largest "
        "(-14.1 %, -13.1 %: small tensors, and AdamW's five per weight, cost more per "
        "byte than the per-batch and per-free terms carry). Borderline: the selection "
        "criterion is the RMS of the per-model errors (the fit's loss); the largest "
        "error as criterion gives 16.4 %, the mean absolute error 16.9 %. The fitted "
        "managed free (about 0.9 ms) is 13x the 70 us measured for a small free alone "
        "(docs/profile-format.md): it also carries what the kernels with temporaries "
        "cost beyond the engine's faults, a mechanism not yet separated.",
    ),
    Claim(
        id="driver.h100-faulting-per-kernel",
        system="driver engine",
        claim="per-kernel median absolute error of the faulting time <= 20 % (held out by model)",
        source=_SRC_H100,
        published="<= 20 % median per kernel",
        setting=_SETTING_FIT,
        quick_setting=_SETTING_FIT + "; links 8, 16, 32 GB/s, small allocations 0, 64 KiB",
        unit="%",
        band=(0.0, 20.0),
        measure=_per_kernel,
        why="The fit is held to the per-model sums; kernel by kernel the engine's batches "
        "are one per 256 missing 4 KiB pages (1 MiB of fresh memory), so a kernel "
        "whose tensors are just above the small-allocation size pays a whole batch "
        "while the GPU's real fault buffer coalesces faults of several allocations; "
        "short element-wise kernels scatter by +-50 % around it (docs/driver-h100.md, "
        "per operator type). 22 % held out and in sample: a floor of the model's "
        "form, not over-fitting (the small-allocation mechanism took it from 24 %).",
    ),
    Claim(
        id="driver.naive-um-no-prefetch",
        system="driver engine",
        claim="PyTorch training on managed memory that fits the GPU, no prefetch: about "
        "30x native (34.23 s against 1.14 s)",
        source=_SRC_E1,
        published="30.0x (band: x/2 .. x2)",
        setting="uvm (cudaMallocManaged / cudaFree every iteration) on bert-base-256, "
        "h100-sxm5 defaults, ideal kernel times measured on that H100 "
        "(benchmarks/results/h100-ideal/); slowdown against the ideal time",
        unit="x",
        band=(15.0, 60.0),
        measure=_naive_plain,
    ),
    Claim(
        id="driver.naive-um-prefetch",
        system="driver engine",
        claim="the same with a prefetch at allocation: about 4.9x native (5.57 s)",
        source=_SRC_E1,
        published="4.9x (band: x/2 .. x2)",
        setting="uvm with prefetch_at_alloc on bert-base-256, h100-sxm5 defaults",
        unit="x",
        band=(2.45, 9.8),
        measure=_naive_prefetch,
    ),
    Claim(
        id="driver.naive-um-mode-ratio",
        system="driver engine",
        claim="below 1.2x oversubscription UVM without prefetch is 5-7x UVM with prefetch",
        source="specs/uvm-hardware-facts.md §5, 'How to use these for checking' (E1: 34.23 / 5.57 = 6.1x)",
        published="5-7x",
        setting="the two rows above",
        unit="x",
        band=(5.0, 7.0),
        measure=_naive_ratio,
        why="7.5x: a prefetch at allocation removes every fault batch here, leaving the "
        "frees (about 0.9 ms each, the fitted value) as most of the cost; E1's GCN has "
        "few, large tensors, where the frees weigh less. ResNet-152-256: 61.4x and "
        "8.6x (7.2x). The ratio moves with the fit's free cost (6.8x at 1.0 ms with "
        "1 MiB small allocations): how close it lands depends on the model's tensors.",
    ),
    Claim(
        id="driver.naive-um-oversub-1.43",
        system="driver engine",
        claim="UVM without prefetch, 1.43x oversubscribed against 1.02x: 70.06 s / 48.28 s "
        "(about linear up to about 1.4x)",
        source=_SRC_E1.replace("§4.1 (E1)", "§4.2 (E2)").replace(" at 0.73x of GPU memory", ""),
        published="1.45x (band: x/2 .. x2)",
        setting="uvm on bert-base-256, h100-sxm5 defaults, GPU memory = the run's peak live "
        "memory / 1.43 and / 1.02; ratio of the two iteration times",
        unit="x",
        band=(0.73, 2.9),
        measure=_oversub_ratio(1.43),
    ),
    Claim(
        id="driver.naive-um-oversub-2.17",
        system="driver engine",
        claim="UVM without prefetch, 2.17x oversubscribed against 1.02x: 292.77 s / 48.28 s "
        "(a cliff near 2.2x)",
        source=_SRC_E1.replace("§4.1 (E1)", "§4.2 (E2)").replace(" at 0.73x of GPU memory", ""),
        published="6.06x (band: x/2 .. x2)",
        setting="as above, GPU memory = peak live memory / 2.17",
        unit="x",
        band=(3.03, 12.1),
        measure=_oversub_ratio(2.17),
        why="No cliff: 1.6x. The engine's DNN iteration touches each tensor in a few "
        "kernels and evicts whole 2 MiB chunks in allocation order, so memory beyond "
        "the live set adds write-back and refetch traffic in proportion (1.02x: 26.0x "
        "ideal, 1.43x: 33.9x, 2.17x: 41.3x); E2's GCN sweeps its whole feature matrix "
        "in every propagation chunk, so past 2x each sweep refaults everything, which a "
        "layer-by-layer DNN does not do. Whether a DNN has E2's cliff is not measured.",
    ),
]
