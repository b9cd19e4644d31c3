"""One results stage: the result dict of every engine and policy (docs/results.md).

Each engine's runner (g10fast.run) hands its raw outcome here; this module fills the one
schema (`RESULT_SCHEMA_VERSION`): identity (model, batch, policy, engine, options), status
and failure, the iterations (time in cycles and, beside them, in seconds: `exe_time_s`,
`ideal_time_s`, so that no consumer needs a preset's clock), traffic, the workload summary,
the system, the plan summary and the per-kernel table.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from g10fast import __version__
from g10fast.engine.page import empty_kernel_table, gpu_bytes_at_kernel_end
from g10fast.workload.model import kernel_pages

RESULT_SCHEMA_VERSION = 2


def workload_summary(w, frames: int) -> dict:
    kp = kernel_pages(w)
    return {"kernels": w.num_kernels, "tensors": w.num_tensors, "pages": w.num_pages,
            "footprint_bytes": w.footprint_bytes, "weights_bytes": int(w.weights_bytes),
            "max_kernel_pages": int(kp.max()) if len(kp) else 0,
            "overcommitment": w.num_pages / frames if frames else float("inf"),
            "ideal_cycles": w.ideal_cycles}


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
        r = round(t)        # a float sum of integer cycles: its integer when within rounding
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


def page_result(spec, model: str, w, w_sim, page_run, iterations, reported, plan,
                required_order) -> dict:
    """The result of a page-engine run."""
    res = new_result(spec, "page", model)
    res.update({
        "iterations": iterations,
        "reported": reported,
        "workload": workload_summary(w, page_run.params.frames),
        "system": page_run.params.as_dict(),
        "warnings": {"pf_evicting_living_page": page_run.live_page_evictions},
        "host_peak_pages": page_run.host_peak,
        "tensor_order": "ascending" if required_order is None else "given",
        "kernels": page_run.kernels,
    })
    if plan is not None:
        res["plan"] = plan_summary(plan)
        res["planner"] = planner_arrays(plan, page_run.kernels, reported)
        res["plan_object"] = plan
    return add_seconds(res, page_run.params.f_hz)


def plan_summary(plan) -> dict:
    """Scalars of a plan for the results (docs/results.md, "plan")."""
    out = {"policy": plan.policy, "hints": int(len(plan.hints)), "hint_counts": plan.counts()}
    if plan.iv_decision.size:
        out.update({"capacity_bytes": int(plan.capacity), "target_bytes": int(plan.target),
                    "decisions": plan.decisions(),
                    "peak_estimate_bytes": int(plan.est_final.max()),
                    "kernels_over_capacity": int((plan.est_final > plan.capacity).sum())})
        out.update({k: v for k, v in plan.info.items() if k in (
            "loosen", "main_loop_iterations", "prealloc_tensors_visited", "plan_seconds")})
    else:
        out.update({k: v for k, v in plan.info.items() if k != "options"})
    return out


def planner_arrays(plan, kernels: np.ndarray | None, reported: int) -> dict:
    """Per-interval decisions and per-kernel estimated vs simulated GPU memory (numpy arrays;
    lists in JSON). Simulated = GPU bytes in use at the end of each kernel of the reported
    iteration (`kernels` None: no run, zeros)."""
    from g10fast.planner.g10_kernels import DECISION_NAMES

    K = plan.num_kernels
    kt = empty_kernel_table() if kernels is None else kernels
    out = {"simulated_gpu_bytes": gpu_bytes_at_kernel_end(kt, reported, K)}
    if plan.iv_decision.size:
        out.update({
            "estimated_gpu_bytes": plan.est_final, "estimated_gpu_bytes_prealloc": plan.est_prealloc,
            "estimated_host_bytes": plan.cpu_est,
            "iv_tensor": plan.iv_tensor, "iv_start": plan.iv_start, "iv_end": plan.iv_end,
            "iv_looped": plan.iv_looped, "iv_time_us": plan.iv_time_us,
            "iv_decision": plan.iv_decision, "iv_evict_finish": plan.iv_evict_finish,
            "iv_prefetch": plan.iv_prefetch, "decision_names": list(DECISION_NAMES)})
    return out


# ---------------------------------------------------------------------------------------------
# The tensor engine (units: O-34)

def printed(x: float) -> float:
    """A double as the C++ ostream prints it by default (6 significant digits)."""
    return float("%g" % x)


def artifact_cycles(ms: float, f_hz: float) -> int:
    """gatherKernelInfo.py's conversion of a printed ms value to cycles (O-34)."""
    return int(printed(ms) / 1000 * f_hz)


def tensor_result(spec, model: str, w, run, plan_failure, plan_info, f_hz: float,
                  page_size: int) -> dict:
    """The result of a tensor-engine run (or of a plan that failed before it)."""
    from g10fast.engine.tensor import kernels as tk
    # the workload against the GPU's own memory (the engine's capacity, `system.capacity_pages`,
    # is 4x that for the GDS variants, O-32: not what "x% of the GPU" means)
    gpu_pages = int(float(spec.system.gpu_memory_gb) * 2**18)
    res = new_result(spec, "tensor", model)
    res.update({"failure": None, "plan": plan_info, "workload": workload_summary(w, gpu_pages),
                "system": run.params if run is not None else {}, "warnings": {}})
    if run is None:
        res["status"] = "failed"
        res["failure"] = plan_failure
        res["fn_native"] = None
        res["kernels"] = np.zeros((0, 10), np.int64)
        return add_seconds(res, f_hz)
    ssd_in, ssd_out = run.ssd_to_gpu_bytes, run.gpu_to_ssd_bytes
    host_in, host_out = run.cpu_to_gpu_bytes, run.gpu_to_cpu_bytes
    res["fn_native"] = {
        "total_exe_time": run.total_ms,
        "total_time_breakdown_stall": run.stall_ms,
        "total_time_breakdown_overlap": run.overlap_ms,
        "total_time_breakdown_executionOnly": run.execution_only_ms,
        # GDSFULL: the artifact's two totals include the host traffic
        "total_ssd2gpu_byte": ssd_in + host_in,
        "total_gpu2ssd_byte": ssd_out + host_out,
        "ideal_ms": run.ideal_ms,
        "transfer_ms": run.transfer_ms,
    }
    n = run.kernels_done
    kern = np.zeros((n, 10), np.int64)
    kern[:, 1] = np.arange(n)
    kern[:, 2] = np.floor(run.kernel_start_ms[:n] / 1000.0 * f_hz).astype(np.int64)
    kern[:, 3] = np.floor(run.kernel_end_ms[:n] / 1000.0 * f_hz).astype(np.int64)
    res["kernels"] = kern
    res["kernel_stall"] = run.kernel_stall().tolist() if run.policy == "FlashNeuron" else []
    if run.status != "ok":
        res["status"] = "failed"
        res["failure"] = dict(run.failure, stage="engine")
        return add_seconds(res, f_hz)
    ideal = int(w.ideal_cycles)
    pf_total = int(np.asarray(w.pf_cycles).sum())
    exe = artifact_cycles(run.total_ms, f_hz)
    alloc_pages = int(run.events[run.events[:, 1] == tk.EV_ALLOC, 6].sum())
    res["iterations"] = [{
        "iteration": 0,
        "exe_time_cycles": exe,
        "ideal_exe_time_cycles": ideal,
        "pf_exe_time_cycles": pf_total,
        "slowdown": exe / ideal if ideal else float("nan"),
        "speedup": pf_total / exe if exe else float("nan"),
        "in_transfer": 0, "cpu_pf": 0, "ssd_pf": 0, "unalloc_pf": 0,
        "stall_cycles": artifact_cycles(run.stall_ms, f_hz),
        "overlap_cycles": artifact_cycles(run.overlap_ms, f_hz),
        "compute_cycles": artifact_cycles(run.execution_only_ms, f_hz),
        "pages": {
            "cpu_to_gpu": host_in // page_size, "ssd_to_gpu": ssd_in // page_size,
            "gpu_to_cpu": host_out // page_size, "gpu_to_ssd": ssd_out // page_size,
            "incoming": (ssd_in + host_in) // page_size,
            "outgoing": (ssd_out + host_out) // page_size,
            "alloc": alloc_pages,
        },
        "exe_time_ms": run.total_ms,
        "ideal_exe_time_ms": run.ideal_ms,
        "stall_ms": run.stall_ms,
        "overlap_ms": run.overlap_ms,
        "compute_ms": run.execution_only_ms,
    }]
    res["reported"] = 0
    return add_seconds(res, f_hz)


def to_json_ready(result: dict) -> dict:
    """Drop the per-kernel array and the ranks engine's timeline (kept in Python results;
    `--timeline` writes the latter) for the JSON summary; planner arrays become lists;
    dataclasses become dicts."""
    out = {k: v for k, v in result.items() if k not in ("kernels", "plan_object", "timeline")}
    if "planner" in out:
        out["planner"] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                          for k, v in out["planner"].items()}
    for k, v in list(out.items()):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            out[k] = dataclasses.asdict(v)
    return out
