"""Where a workload's kernel times come from, as a run's result says it
(`kernel_times_fields`): the GPU they are for (the cost model's, a profile's, or the one an
HDF5 workload trace's provenance names) and how the cost model made them."""

from __future__ import annotations

from g10fast.errors import InputError
from g10fast.workload.model import Workload


def kernel_times_gpu(w: Workload) -> str | None:
    """The GPU a Workload's kernel times are for, where it says: the cost model's GPU
    (`cost_model_gpu`: built-in models, captures), a profile's `gpu`, else the `gpu` the
    provenance of its HDF5 workload trace names; None when unknown (the artifact's traces)."""
    m = w.meta
    gpu = m.get("cost_model_gpu") or m.get("gpu")
    if not gpu and m.get("trace_file"):
        from g10fast.workload.h5trace import read_attrs

        try:
            gpu = read_attrs(m["trace_file"]).get("provenance", {}).get("gpu")
        except InputError:
            gpu = None
    return str(gpu) if gpu and gpu != "?" else None


def kernel_times_fields(w: Workload, gpu_model: str, preset: str = "") -> dict:
    """Result fields on where a run's kernel times come from: "kernel_times_gpu" (the GPU
    they are for, when known), "kernel_times_basis" (how the cost model made them, for
    estimated times), and "kernel_times_warning" when that GPU is not the run's
    (`gpu_model`, of preset `preset`): such times are replayed as they are, not rescaled."""
    out = {}
    src = kernel_times_gpu(w)
    if src is not None:
        out["kernel_times_gpu"] = src
    if w.meta.get("cost_model_basis"):
        out["kernel_times_basis"] = str(w.meta["cost_model_basis"])
    if src is not None and gpu_model and src != gpu_model:
        on = f"preset {preset} ({gpu_model})" if preset else gpu_model
        redo = (
            ("capture or export it again with --system " + preset)
            if preset
            else "capture or export it again for this system"
        )
        out["kernel_times_warning"] = (
            f"the workload's kernel times are for {src}, the run's system is {on}: they are "
            f"replayed unchanged, not rescaled ({redo} to estimate them for its GPU)"
        )
    return out
