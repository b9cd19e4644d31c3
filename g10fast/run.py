"""Python API: one G10 configuration from its inputs to its statistics.

    cfg = g10fast.config.read_g10_config("…/src/configs/BERT/128-sim_lru.config")
    result = g10fast.run.run(cfg)            # a plain dict, the schema of `g10fast run --json`

Stages: model file -> Graph (front end) -> Workload (kernel times, workspaces) -> engine ->
statistics (simulator spec §14). The result schema is documented in docs/results.md.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from pathlib import Path

import numpy as np

from g10fast import __version__
from g10fast.config import G10Config, validate
from g10fast.engine.page import simulate_pages, kernel_pages
from g10fast.engine.stats import iteration_stats, reported_iteration
from g10fast.errors import InputError
from g10fast.workload.model import Workload
from g10fast.workload.times import load_workload, perturb_kernel_times

RESULT_SCHEMA_VERSION = 1

# policy name -> engine; "ideal" is lru with is_UVM 0 (simulator spec §11, §11.7)
PAGE_ENGINE_POLICIES = ("lru", "ideal", "prefetch_lru", "deepUM")
TENSOR_ENGINE_POLICIES = ("FlashNeuron", "G10GDSSSD", "G10GDSFULL")


def policy_of(cfg: G10Config) -> str:
    """The artifact's policy name of a config, with 'ideal' for is_UVM 0 without hints."""
    if not cfg.is_UVM and not cfg.use_prefetch and not cfg.uses_fn_simulator:
        return "ideal"
    p = cfg.policy
    if p is None:
        raise InputError("this combination of use_prefetch / eviction_policy / migration_policy "
                         "is not one of the artifact's policies", param="eviction_policy")
    return p


def model_name(cfg: G10Config) -> str:
    return Path(cfg.nn_model_input_file).stem if cfg.nn_model_input_file else "?"


def build_workload(cfg: G10Config) -> Workload:
    """Front end + kernel times for a G10 config (the artifact's steps 1–3, simulator spec §1)."""
    from g10fast.workload.cnn import parse_cnn
    from g10fast.workload.transformer import parse_transformer

    if not cfg.nn_model_input_file:
        raise InputError("no model file given", param="nn_model_input_file")
    name = model_name(cfg)
    if cfg.is_transformer == 1:
        graph = parse_transformer(cfg.nn_model_input_file, cfg.batch_size, cfg.trans_borden,
                                  name=name)
    else:
        family = ("resnet" if cfg.is_resnet else "inception" if cfg.is_inception
                  else "senet" if cfg.is_senet else None)
        graph = parse_cnn(cfg.nn_model_input_file, cfg.batch_size, cfg.input_H, cfg.input_W,
                          family, name=name)
    for key in ("orig_kernel_time_file", "input_pf_kernel_time_file", "pf_kernel_time_file",
                "workspace_size_file"):
        if not getattr(cfg, key):
            raise InputError("no file given", param=key)
    return load_workload(graph, cfg.orig_kernel_time_file, cfg.input_pf_kernel_time_file,
                         cfg.pf_kernel_time_file, cfg.workspace_size_file, cfg.GPU_frequency_GHz,
                         cfg.kernel_speedup)


def _perturbed(w: Workload, cfg: G10Config) -> Workload:
    """Kernel-time variation (Fig. 19): applied after planning, before the engine (§2.2)."""
    if not cfg.kernel_time_std_dev:
        return w
    e, i, p = perturb_kernel_times(w.exec_cycles, w.input_pf_cycles, w.pf_cycles,
                                   cfg.kernel_time_std_dev, cfg.ran_seed)
    return dataclasses.replace(w, exec_cycles=e, input_pf_cycles=i, pf_cycles=p)


def peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def run(cfg: G10Config, *, trace_path: str | os.PathLike | None = None, progress=None,
        workload: Workload | None = None, plan=None, plan_options: dict | None = None,
        required_order=None) -> dict:
    """Simulate one configuration; returns the result dict (docs/results.md).

    For prefetch_lru (G10) and deepUM the planner runs on the nominal kernel times (before
    any kernel-time variation); `plan` (a MigrationPlan, e.g. from `read_plan`) replaces it,
    and `plan_options` are passed to `plan_g10` (named quirk options, docs/planner.md).
    `required_order` (page engine only): per kernel (inputs, outputs) in the order the engine
    processes them, e.g. `g10fast.workload.kernel_order.read_kernel_order` of the C++'s
    statistics/kernels.config (O-18, docs/tensor-order.md); None: ascending tensor ids."""
    t0 = time.perf_counter()
    cfg = validate(cfg)
    policy = policy_of(cfg)
    if policy in TENSOR_ENGINE_POLICIES:
        from g10fast.run_tensor import run_tensor
        w = workload if workload is not None else build_workload(cfg)
        result = run_tensor(cfg, policy, w, trace_path=trace_path, progress=progress,
                            meta=_meta(cfg, w, policy), workload_summary=_workload_summary)
        result["wall_seconds"] = time.perf_counter() - t0
        result["peak_rss_bytes"] = peak_rss_bytes()
        return result
    if policy not in PAGE_ENGINE_POLICIES:
        raise InputError(f"policy '{policy}' "
                         "is not one of g10fast's policies (supported: "
                         f"{', '.join(PAGE_ENGINE_POLICIES + TENSOR_ENGINE_POLICIES)})",
                         param="policy")
    w = workload if workload is not None else build_workload(cfg)
    if plan is None and cfg.use_prefetch:
        from g10fast.planner import plan_for_config
        plan = plan_for_config(w, cfg, **(plan_options or {}))
    w_sim = _perturbed(w, cfg)
    writer = None
    if trace_path is not None:
        from g10fast.trace import EventTraceWriter
        writer = EventTraceWriter(trace_path, config=cfg.to_dict(), meta=_meta(cfg, w, policy))
    try:
        page_run = simulate_pages(w_sim, cfg, hints=None if plan is None else plan.hints,
                                  trace=writer, progress=progress,
                                  required_order=required_order)
        iterations = iteration_stats(page_run.kernels, page_run.pcie, page_run.boundaries,
                                     w_sim.exec_cycles, w_sim.pf_cycles,
                                     page_run.params.num_iteration)
        result = {
            "schema_version": RESULT_SCHEMA_VERSION,
            "g10fast_version": __version__,
            "engine": "page",
            "status": "ok",
            "model": model_name(cfg),
            "batch_size": int(cfg.batch_size),
            "policy": policy,
            "iterations": iterations,
            "reported": reported_iteration(iterations),
            "workload": _workload_summary(w, page_run.params.frames),
            "system": page_run.params.as_dict(),
            "warnings": {"pf_evicting_living_page": page_run.live_page_evictions},
            "host_peak_pages": page_run.host_peak,
            "tensor_order": "ascending" if required_order is None else "given",
            "kernels": page_run.kernels,
        }
        if plan is not None:
            result["plan"] = plan_summary(plan)
            result["planner"] = planner_arrays(plan, page_run.kernels, result["reported"])
            result["plan_object"] = plan
        if writer is not None:
            writer.close(summary={k: v for k, v in result.items()
                                  if k not in ("kernels", "planner", "plan_object")})
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    result["wall_seconds"] = time.perf_counter() - t0
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result


def _meta(cfg: G10Config, w: Workload, policy: str) -> dict:
    return {"g10fast_version": __version__, "model": model_name(cfg), "batch_size": cfg.batch_size,
            "policy": policy, "num_kernels": w.num_kernels, "num_tensors": w.num_tensors,
            "num_pages": w.num_pages, "kernel_names": list(w.kernel_name)}


def _workload_summary(w: Workload, frames: int) -> dict:
    kp = kernel_pages(w)
    return {"kernels": w.num_kernels, "tensors": w.num_tensors, "pages": w.num_pages,
            "footprint_bytes": w.footprint_bytes, "weights_bytes": int(w.weights_bytes),
            "max_kernel_pages": int(kp.max()) if len(kp) else 0,
            "overcommitment": w.num_pages / frames if frames else float("inf"),
            "ideal_cycles": w.ideal_cycles}


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


def planner_arrays(plan, kernels: np.ndarray, reported: int) -> dict:
    """Per-interval decisions and per-kernel estimated vs simulated GPU memory (numpy arrays;
    lists in JSON). Simulated = GPU pages in use at the end of each kernel of the reported
    iteration, in bytes."""
    from g10fast.engine import page_kernels as pk
    from g10fast.planner.g10_kernels import DECISION_NAMES

    K = plan.num_kernels
    sim = np.zeros(K, dtype=np.int64)
    m = kernels[:, pk.KS_ITER] == reported
    sim[kernels[m, pk.KS_KERNEL]] = kernels[m, pk.KS_GPU] * 4096
    out = {"simulated_gpu_bytes": sim}
    if plan.iv_decision.size:
        out.update({
            "estimated_gpu_bytes": plan.est_final, "estimated_gpu_bytes_prealloc": plan.est_prealloc,
            "estimated_host_bytes": plan.cpu_est,
            "iv_tensor": plan.iv_tensor, "iv_start": plan.iv_start, "iv_end": plan.iv_end,
            "iv_looped": plan.iv_looped, "iv_time_us": plan.iv_time_us,
            "iv_decision": plan.iv_decision, "iv_evict_finish": plan.iv_evict_finish,
            "iv_prefetch": plan.iv_prefetch, "decision_names": list(DECISION_NAMES)})
    return out


def to_json_ready(result: dict) -> dict:
    """Drop the per-kernel array (kept in Python results) for the JSON summary; planner
    arrays become lists."""
    out = {k: v for k, v in result.items() if k not in ("kernels", "plan_object")}
    if "planner" in out:
        out["planner"] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                          for k, v in out["planner"].items()}
    return out
