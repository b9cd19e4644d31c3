"""The page engine's result (docs/results.md): the schema's fields (g10fast.results) filled
from a page-engine run, its plan's summary and the planner's per-kernel arrays."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page import empty_kernel_table
from g10fast.results import add_seconds, gpu_bytes_at_kernel_end, new_result, workload_summary

ENGINE = "page"


def page_result(spec, model: str, w, w_sim, page_run, iterations, reported, plan, required_order) -> dict:
    """The result of a page-engine run."""
    res = new_result(spec, ENGINE, model)
    res.update(
        {
            "iterations": iterations,
            "reported": reported,
            "workload": workload_summary(w, page_run.params.frames),
            "system": page_run.params.as_dict(),
            "warnings": {"pf_evicting_living_page": page_run.live_page_evictions},
            "host_peak_pages": page_run.host_peak,
            "tensor_order": "ascending" if required_order is None else "given",
            "kernels": page_run.kernels,
        }
    )
    if plan is not None:
        res["plan"] = plan_summary(plan)
        res["planner"] = planner_arrays(plan, page_run.kernels, reported)
        res["plan_object"] = plan
    return add_seconds(res, page_run.params.f_hz)


def plan_summary(plan) -> dict:
    """Scalars of a plan for the results (docs/results.md, "plan")."""
    out = {"policy": plan.policy, "hints": int(len(plan.hints)), "hint_counts": plan.counts()}
    if plan.iv_decision.size:
        out.update(
            {
                "capacity_bytes": int(plan.capacity),
                "target_bytes": int(plan.target),
                "decisions": plan.decisions(),
                "peak_estimate_bytes": int(plan.est_final.max()),
                "kernels_over_capacity": int((plan.est_final > plan.capacity).sum()),
            }
        )
        out.update(
            {
                k: v
                for k, v in plan.info.items()
                if k in ("loosen", "main_loop_iterations", "prealloc_tensors_visited", "plan_seconds")
            }
        )
    else:
        out.update({k: v for k, v in plan.info.items() if k != "options"})
    return out


def planner_arrays(plan, kernels: np.ndarray | None, reported: int) -> dict:
    """Per-interval decisions and per-kernel estimated vs simulated GPU memory (numpy arrays;
    lists in JSON). Simulated = GPU bytes in use at the end of each kernel of the reported
    iteration (`kernels` None: no run, zeros)."""
    K = plan.num_kernels
    kt = empty_kernel_table() if kernels is None else kernels
    out = {"simulated_gpu_bytes": gpu_bytes_at_kernel_end(kt, reported, K)}
    if plan.iv_decision.size:
        out.update(
            {
                "estimated_gpu_bytes": plan.est_final,
                "estimated_gpu_bytes_prealloc": plan.est_prealloc,
                "estimated_host_bytes": plan.cpu_est,
                "iv_tensor": plan.iv_tensor,
                "iv_start": plan.iv_start,
                "iv_end": plan.iv_end,
                "iv_looped": plan.iv_looped,
                "iv_time_us": plan.iv_time_us,
                "iv_decision": plan.iv_decision,
                "iv_evict_finish": plan.iv_evict_finish,
                "iv_prefetch": plan.iv_prefetch,
                "decision_names": plan.decision_names(),
            }
        )
    return out
