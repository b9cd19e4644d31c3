"""`run()` for the three policies of the tensor-granular engine (FlashNeuron, G10GDSSSD,
G10GDSFULL): plan, simulate one iteration, and express the result in the page engine's schema
(docs/results.md) plus the engine's native milliseconds and bytes (`fn_native`).

Units (O-34): the engine works in ms; the artifact's figure scripts (`gatherKernelInfo.py`)
convert its printed `total_exe_time` (6 significant digits) to cycles as ms / 1000 · 1.2e9 and
bytes to pages as / 4096. `exe_time_cycles` and the breakdown cycles are made the same way (at
the config's frequency), so every consumer treats all six policies alike; the unrounded values
are in `exe_time_ms` etc. and `fn_native`.
"""

from __future__ import annotations

import numpy as np

from g10fast import __version__
from g10fast.analysis.vitality import vitality
from g10fast.engine import tensor_kernels as tk
from g10fast.engine.tensor import TensorOptions, simulate_tensors
from g10fast.errors import InputError
from g10fast.workload.model import PAGE_SIZE

RESULT_SCHEMA_VERSION = 1


def printed(x: float) -> float:
    """A double as the C++ ostream prints it by default (6 significant digits)."""
    return float("%g" % x)


def artifact_cycles(ms: float, f_hz: float) -> int:
    """gatherKernelInfo.py's conversion of a printed ms value to cycles (O-34)."""
    return int(printed(ms) / 1000 * f_hz)


def _fn_plan(cfg, w, v, order):
    from g10fast.planner.flashneuron import is_vit1024, plan_flashneuron
    return plan_flashneuron(w, v, float(cfg.GPU_memory_size_GB), vit1024_hack=is_vit1024(cfg),
                            order=order)


def gds_hints(cfg, w, v, policy):
    """The G10 plan with the GDS modifications (planner spec §5.8, §6.5), as hint rows."""
    try:
        from g10fast.planner.g10 import plan_g10
    except ImportError as e:       # the G10 planner lives in g10fast.planner.g10
        raise InputError(f"policy {policy} needs G10's migration planner "
                         "(g10fast.planner.g10), which this build does not have",
                         param="migration_policy") from e
    plan = plan_g10(w, v, cfg, gds="ssd" if policy == "G10GDSSSD" else "full")
    return np.asarray(plan.hints, dtype=np.int64), plan


def run_tensor(cfg, policy: str, w, *, trace_path=None, progress=None, meta=None,
               workload_summary=None, options: TensorOptions | None = None,
               fn_order: str = "descending", hints=None) -> dict:
    """Plan and simulate one tensor-engine configuration; returns the result dict."""
    opts = options if options is not None else TensorOptions()
    f_hz = float(int(float(cfg.GPU_frequency_GHz) * 1e9))
    v = vitality(w, cfg.GPU_frequency_GHz)
    plan_info: dict = {}
    plan = None
    plan_failure = None
    if policy == "FlashNeuron":
        plan = _fn_plan(cfg, w, v, fn_order)
        plan_info = {"offloads": int(len(plan.offload_tensor)), "gpu_line_bytes": int(plan.gpu_line),
                     "max_kernel_pages": int(plan.max_kernel_pages), "make_loss": int(plan.make_loss),
                     "remaining_bytes": int(plan.remaining_bytes), "candidates": int(plan.candidates),
                     "discovery_order": fn_order}
        if not plan.ok:
            plan_failure = {"stage": "planner", "reason": plan.reason, "tensor": None,
                            "kernel": None, "kernel_name": None, "pages_needed": None,
                            "free_pages": None, "largest_free_pages": None}
    else:
        if hints is None:
            hints, g10plan = gds_hints(cfg, w, v, policy)
            plan_info = {"hints": int(len(hints)), "target_bytes": int(g10plan.target),
                         **{k: v_ for k, v_ in g10plan.info.items() if k != "options"}}
        else:
            plan_info = {"hints": int(len(hints)), "source": "given"}
        plan = hints

    writer = None
    if trace_path is not None:
        from g10fast.trace import EventTraceWriter
        writer = EventTraceWriter(trace_path, config=cfg.to_dict(), meta=meta or {})
    try:
        run = None
        if plan_failure is None:
            run = simulate_tensors(w, cfg, policy, plan, vit=v, options=opts, trace=writer,
                                   progress=progress)
        result = _result(cfg, policy, w, run, plan_failure, plan_info, f_hz, workload_summary)
        if writer is not None:
            writer.close(summary={k: val for k, val in result.items() if k != "kernels"})
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return result


def _result(cfg, policy, w, run, plan_failure, plan_info, f_hz, workload_summary) -> dict:
    from g10fast.run import model_name
    cap = run.capacity_pages if run is not None else int(float(cfg.GPU_memory_size_GB) * 2**18)
    res = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "g10fast_version": __version__,
        "engine": "tensor",
        "status": "ok",
        "model": model_name(cfg),
        "batch_size": int(cfg.batch_size),
        "policy": policy,
        "iterations": [],
        "reported": None,
        "failure": None,
        "plan": plan_info,
        "workload": workload_summary(w, cap) if workload_summary else {},
        "system": run.params if run is not None else {},
        "warnings": {},
    }
    if run is None:
        res["status"] = "failed"
        res["failure"] = plan_failure
        res["fn_native"] = None
        res["kernels"] = np.zeros((0, 10), np.int64)
        return res
    ssd_in, ssd_out = run.ssd_to_gpu_bytes, run.gpu_to_ssd_bytes
    host_in, host_out = run.cpu_to_gpu_bytes, run.gpu_to_cpu_bytes
    native = {
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
    res["fn_native"] = native
    n = run.kernels_done
    kern = np.zeros((n, 10), np.int64)
    kern[:, 1] = np.arange(n)
    kern[:, 2] = np.floor(run.kernel_start_ms[:n] / 1000.0 * f_hz).astype(np.int64)
    kern[:, 3] = np.floor(run.kernel_end_ms[:n] / 1000.0 * f_hz).astype(np.int64)
    res["kernels"] = kern
    res["kernel_stall"] = run.kernel_stall().tolist() if policy == "FlashNeuron" else []
    if run.status != "ok":
        res["status"] = "failed"
        res["failure"] = dict(run.failure, stage="engine")
        return res
    ideal = int(w.ideal_cycles)
    pf_total = int(np.asarray(w.pf_cycles).sum())
    exe = artifact_cycles(run.total_ms, f_hz)
    alloc_pages = int(run.events[run.events[:, 1] == tk.EV_ALLOC, 6].sum())
    it = {
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
            "cpu_to_gpu": host_in // PAGE_SIZE, "ssd_to_gpu": ssd_in // PAGE_SIZE,
            "gpu_to_cpu": host_out // PAGE_SIZE, "gpu_to_ssd": ssd_out // PAGE_SIZE,
            "incoming": (ssd_in + host_in) // PAGE_SIZE,
            "outgoing": (ssd_out + host_out) // PAGE_SIZE,
            "alloc": alloc_pages,
        },
        "exe_time_ms": run.total_ms,
        "ideal_exe_time_ms": run.ideal_ms,
        "stall_ms": run.stall_ms,
        "overlap_ms": run.overlap_ms,
        "compute_ms": run.execution_only_ms,
    }
    res["iterations"] = [it]
    res["reported"] = 0
    return res
