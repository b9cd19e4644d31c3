"""The tensor engine's result (docs/results.md; units O-34): the schema's fields
(g10fast.results) filled from a tensor-engine run, or from a plan that failed before it."""

from __future__ import annotations

import numpy as np

from g10fast.engine.tensor import kernels as tk
from g10fast.results import add_seconds, artifact_cycles, new_result, workload_summary

ENGINE = "tensor"


def tensor_result(spec, model: str, w, run, plan_failure, plan_info, f_hz: float, page_size: int) -> dict:
    """The result of a tensor-engine run (or of a plan that failed before it)."""
    # the workload against the GPU's own memory (the engine's capacity, `system.capacity_pages`,
    # is 4x that for the GDS variants, O-32: not what "x% of the GPU" means)
    gpu_pages = int(float(spec.system.gpu_memory_gb) * 2**18)
    res = new_result(spec, ENGINE, model)
    res.update(
        {
            "failure": None,
            "plan": plan_info,
            "workload": workload_summary(w, gpu_pages),
            "system": run.params if run is not None else {},
            "warnings": {},
        }
    )
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
    res["kernel_stall"] = run.kernel_stall().tolist() if run.mechanism == "offload_set" else []
    if run.status != "ok":
        res["status"] = "failed"
        res["failure"] = dict(run.failure, stage="engine")
        return add_seconds(res, f_hz)
    ideal = int(w.ideal_cycles)
    pf_total = int(np.asarray(w.pf_cycles).sum())
    exe = artifact_cycles(run.total_ms, f_hz)
    alloc_pages = int(run.events[run.events[:, 1] == tk.EV_ALLOC, 6].sum())
    res["iterations"] = [
        {
            "iteration": 0,
            "exe_time_cycles": exe,
            "ideal_exe_time_cycles": ideal,
            "pf_exe_time_cycles": pf_total,
            "slowdown": exe / ideal if ideal else float("nan"),
            "speedup": pf_total / exe if exe else float("nan"),
            "in_transfer": 0,
            "cpu_pf": 0,
            "ssd_pf": 0,
            "unalloc_pf": 0,
            "stall_cycles": artifact_cycles(run.stall_ms, f_hz),
            "overlap_cycles": artifact_cycles(run.overlap_ms, f_hz),
            "compute_cycles": artifact_cycles(run.execution_only_ms, f_hz),
            "pages": {
                "cpu_to_gpu": host_in // page_size,
                "ssd_to_gpu": ssd_in // page_size,
                "gpu_to_cpu": host_out // page_size,
                "gpu_to_ssd": ssd_out // page_size,
                "incoming": (ssd_in + host_in) // page_size,
                "outgoing": (ssd_out + host_out) // page_size,
                "alloc": alloc_pages,
            },
            "exe_time_ms": run.total_ms,
            "ideal_exe_time_ms": run.ideal_ms,
            "stall_ms": run.stall_ms,
            "overlap_ms": run.overlap_ms,
            "compute_ms": run.execution_only_ms,
        }
    ]
    res["reported"] = 0
    return add_seconds(res, f_hz)
