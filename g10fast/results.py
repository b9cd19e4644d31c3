"""One results stage: the result dict of every engine and policy (docs/results.md).

Below the engines: each engine's runner (g10fast.engine.*.run) and result builder
(g10fast.engine.page.result, g10fast.engine.tensor.result) fills the one schema from here
(`RESULT_SCHEMA_VERSION`): identity (model, batch, policy, engine, options), status and
failure, the iterations (time in cycles and, beside them, in seconds: `exe_time_s`,
`ideal_time_s`, so that no consumer needs a preset's clock), traffic, the workload summary,
the system, the plan summary and the per-kernel table.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from g10fast import __version__
from g10fast.workload.model import PAGE_SIZE, kernel_pages

RESULT_SCHEMA_VERSION = 2

#: the columns of a result's `kernels` table (int64, one row per kernel execution in
#: completion order, every engine's; docs/results.md): the fields of the artifact's
#: `sim_result.kernel` (simulator spec §14.1). An engine's kernels write its rows with these
#: indices (the page engine's `layout.KS_*`, checked equal by tests/test_engine_registry.py).
KERNEL_COLUMNS = (
    "iteration",
    "kernel",
    "start",
    "end",
    "in_transfer",
    "cpu_pf",
    "ssd_pf",
    "unalloc_pf",
    "host_pages",
    "gpu_pages",
)
(KS_ITER, KS_KERNEL, KS_START, KS_END, KS_INTR, KS_CPU, KS_SSD, KS_NP, KS_HOST, KS_GPU) = range(
    len(KERNEL_COLUMNS)
)


def gpu_bytes_at_kernel_end(kernels: np.ndarray, iteration: int, num_kernels: int) -> np.ndarray:
    """GPU bytes in use at the end of each kernel of one iteration of a result's `kernels`
    table (0 where absent)."""
    sim = np.zeros(num_kernels, dtype=np.int64)
    m = kernels[:, KS_ITER] == iteration
    sim[kernels[m, KS_KERNEL]] = kernels[m, KS_GPU] * PAGE_SIZE
    return sim


def workload_summary(w, frames: int) -> dict:
    kp = kernel_pages(w)
    return {
        "kernels": w.num_kernels,
        "tensors": w.num_tensors,
        "pages": w.num_pages,
        "footprint_bytes": w.footprint_bytes,
        "weights_bytes": int(w.weights_bytes),
        "max_kernel_pages": int(kp.max()) if len(kp) else 0,
        "overcommitment": w.num_pages / frames if frames else float("inf"),
        "ideal_cycles": w.ideal_cycles,
    }


def new_result(spec, engine: str, model: str) -> dict:
    """The fields every result has, in the schema's order."""
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "g10fast_version": __version__,
        "engine": engine,
        "status": "ok",
        "model": model,
        "batch_size": int(spec.workload.batch),
        "policy": spec.policy.name,
        "policy_options": spec.policy.to_dict()["options"],
        "engine_options": spec.engine.to_dict(),
        "iterations": [],
        "reported": None,
    }


def add_seconds(result: dict, f_hz: float) -> dict:
    """`exe_time_s` and `ideal_time_s` beside the cycles of every iteration."""
    for it in result.get("iterations") or []:
        if f_hz:
            it["exe_time_s"] = it["exe_time_cycles"] / f_hz
            it["ideal_time_s"] = it["ideal_exe_time_cycles"] / f_hz
    result["f_hz"] = f_hz
    return result


def add_bound(result: dict, summary: dict, f_hz: float, *, unit_ms: bool = False) -> dict:
    """The provable lower bound (g10fast.analysis.bounds, docs/bounds.md) beside every
    iteration: `bound_time_cycles` / `bound_time_s`, and the gap to Ideal split into what the
    hardware forces (`bound_forced_cycles` = bound − ideal) and what the policy adds
    (`bound_gap_cycles` = time − bound). `result["bound"]`: the window and traffic bounds, the
    binding windows and the model. A page-engine bound (cycles) is rounded down; a tensor-
    engine bound (ms) gets the engine's own printed conversion (O-34), which is monotone."""
    b = dict(summary)
    t = float(b["time"])
    if unit_ms:
        cyc = artifact_cycles(t, f_hz) if f_hz else 0
        sec = t / 1000.0
    else:
        r = round(t)  # a float sum of integer cycles: its integer when within rounding
        cyc = int(r) if abs(t - r) <= 1e-9 * max(1.0, t) else int(math.floor(t))
        sec = t / f_hz if f_hz else float("nan")
    b["time_cycles"] = cyc
    b["time_s"] = sec
    result["bound"] = b
    for it in result.get("iterations") or []:
        it["bound_time_cycles"] = cyc
        it["bound_time_s"] = sec
        it["bound_forced_cycles"] = cyc - int(it["ideal_exe_time_cycles"])
        it["bound_gap_cycles"] = int(it["exe_time_cycles"]) - cyc
    return result


# ---------------------------------------------------------------------------------------------
# The tensor engine's units (O-34), used by its result and its bound


def printed(x: float) -> float:
    """A double as the C++ ostream prints it by default (6 significant digits)."""
    return float("%g" % x)


def artifact_cycles(ms: float, f_hz: float) -> int:
    """gatherKernelInfo.py's conversion of a printed ms value to cycles (O-34)."""
    return int(printed(ms) / 1000 * f_hz)


def to_json_ready(result: dict) -> dict:
    """Drop the per-kernel array and the ranks engine's timeline (kept in Python results;
    `--timeline` writes the latter) for the JSON summary; planner arrays become lists;
    dataclasses become dicts."""
    out = {k: v for k, v in result.items() if k not in ("kernels", "plan_object", "timeline")}
    if "planner" in out:
        out["planner"] = {
            k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out["planner"].items()
        }
    for k, v in list(out.items()):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            out[k] = dataclasses.asdict(v)
    return out
