"""One run path: a RunSpec (or a G10 config) from its workload to its result.

    result = g10fast.run.run(spec)        # a RunSpec (g10fast.spec), or a G10Config
    result = g10fast.run.run(read_g10_config("…/128-sim_lru.config"))

Stages: workload source -> Workload (front end, kernel times) -> the policy's planner ->
the policy's engine -> the result (g10fast.results, docs/results.md). The policy's record
(g10fast.policies) names its planner and engine; the engine's record (g10fast.engine.registry)
its runner (g10fast/engine/<name>/run.py) and what it supports. Nothing here lists policies
or names an engine.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time

from g10fast.engine.common import check_level
from g10fast.engine.common import model_label as _model_label
from g10fast.engine.common import perturbed as _perturbed
from g10fast.engine.registry import engine as engine_record
from g10fast.engine.registry import engines
from g10fast.errors import InputError
from g10fast.results import RESULT_SCHEMA_VERSION, add_bound, to_json_ready
from g10fast.spec import RunSpec, check_allocator, from_g10_config, g10_policy
from g10fast.workload.model import Workload
from g10fast.workload.times import load_workload

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "build_workload",
    "model_name",
    "peak_rss_bytes",
    "plan_of",
    "policy_of",
    "run",
    "to_json_ready",
    "workload_of",
]


def policy_of(cfg) -> str:
    """The registry name of a G10 config's policy ('ideal' for is_UVM 0 without hints)."""
    return g10_policy(cfg)


def model_name(cfg) -> str:
    return os.path.splitext(os.path.basename(cfg.nn_model_input_file))[0] if cfg.nn_model_input_file else "?"


def _artifact_workload(files: dict, batch: int, ghz: float, speedup: float, name: str):
    """Front end + kernel times of the artifact's files (its steps 1–3, simulator spec §1)."""
    from g10fast.workload.cnn import parse_cnn
    from g10fast.workload.transformer import parse_transformer

    if not files.get("nn_model_input_file"):
        raise InputError("no model file given", param="nn_model_input_file")
    if int(files.get("is_transformer", -1)) == 1:
        graph = parse_transformer(
            files["nn_model_input_file"], batch, int(files.get("trans_borden", 184)), name=name
        )
    else:
        family = (
            "resnet"
            if files.get("is_resnet")
            else "inception"
            if files.get("is_inception")
            else "senet"
            if files.get("is_senet")
            else None
        )
        graph = parse_cnn(
            files["nn_model_input_file"],
            batch,
            int(files["input_H"]),
            int(files["input_W"]),
            family,
            name=name,
        )
    for key in (
        "orig_kernel_time_file",
        "input_pf_kernel_time_file",
        "pf_kernel_time_file",
        "workspace_size_file",
    ):
        if not files.get(key):
            raise InputError("no file given", param=key)
    return load_workload(
        graph,
        files["orig_kernel_time_file"],
        files["input_pf_kernel_time_file"],
        files["pf_kernel_time_file"],
        files["workspace_size_file"],
        ghz,
        speedup,
    )


def build_workload(cfg) -> Workload:
    """The Workload of a G10 config (compatibility name of `workload_of`)."""
    from g10fast.spec import ARTIFACT_WORKLOAD_KEYS

    files = {k: getattr(cfg, k) for k in ARTIFACT_WORKLOAD_KEYS}
    return _artifact_workload(
        files, int(cfg.batch_size), cfg.GPU_frequency_GHz, cfg.kernel_speedup, model_name(cfg)
    )


def workload_of(spec: RunSpec) -> Workload:
    """The Workload a spec's source describes, after its fusion pass (`workload.fuse`)."""
    w = _source_workload(spec)
    if spec.workload.fuse != "none":
        from g10fast.workload.fusion import fuse

        s = spec.system
        w = fuse(w, spec.workload.fuse, freq_ghz=s.gpu_frequency_ghz, hbm_gbps=s.gpu_hbm_gbps or None)
    if spec.workload.recompute != "none":
        from g10fast.workload.recompute import recompute

        w = recompute(w, spec.workload.recompute)
    return w


def _source_workload(spec: RunSpec) -> Workload:
    src = spec.workload
    if src.kind == "artifact":
        return _artifact_workload(
            dict(src.files), src.batch, spec.system.gpu_frequency_ghz, spec.engine.kernel_speedup, src.model
        )
    if src.kind == "builtin":
        from g10fast.workload.builtin import find_model, load_builtin_graph

        g = load_builtin_graph(find_model(src.model), src.batch, **dict(src.model_options))
        ghz = spec.system.gpu_frequency_ghz
        if src.kernel_times == "estimated":
            from g10fast.workload.costmodel import estimated_workload, gpu_from_preset

            gpu = gpu_from_preset(_preset_view(spec.system), int(g.meta.get("dtype_bytes", 4)))
            return estimated_workload(g, gpu, ghz)
        from g10fast.workload.profile import read_profile, workload_from_profile

        return workload_from_profile(g, read_profile(src.kernel_times), ghz)
    if src.kind == "trace":
        from g10fast.workload.h5trace import trace_workload

        return trace_workload(
            dict(src.files)["path"], spec.system.gpu_frequency_ghz, spec.engine.kernel_speedup
        )
    raise InputError(f"unknown workload source {src.kind!r}", param="workload.kind")


def _preset_view(system) -> dict:
    return {
        "name": system.name,
        "gpu": {
            "model": system.gpu_model,
            "peak_tflops_fp32": system.gpu_peak_tflops_fp32,
            "peak_tflops_bf16": system.gpu_peak_tflops_bf16,
            "hbm_gbps": system.gpu_hbm_gbps,
            "cost_params": system.gpu_cost_params,
        },
        "host": {"link_gbps": system.host_link_gbps},
    }


def peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def run(
    spec,
    *,
    trace_path: str | os.PathLike | None = None,
    progress=None,
    workload: Workload | None = None,
    plan=None,
    plan_options: dict | None = None,
    required_order=None,
    vitality=None,
    check: bool = False,
    bound: str = "window",
    trace_compression: str = "deflate",
) -> dict:
    """Simulate one run; returns the result dict (docs/results.md).

    `spec`: a RunSpec, or a G10Config (read into one). The policy's planner runs on the
    nominal kernel times (before any kernel-time variation); `plan` (e.g. from `read_plan`)
    replaces it; `plan_options` replace some of the policy's options (named quirks,
    docs/planner.md). `required_order` (engines whose record has `kernel_order`): per kernel
    (inputs, outputs) in the order the engine processes them (O-18, docs/tensor-order.md);
    None: ascending ids.
    `vitality`: the workload's vitality analysis, if at hand. `check`: assert the engine's
    invariants at every kernel boundary (an InvariantError names the kernel and the
    invariant; docs/invariants.md): True or "state", or "full" (the page engine's event-stream
    sums and a page-table scan at every check: tens of times slower); the result is the
    same. `bound`: "window" (the window and traffic bounds, always), or "lp": also the
    checkpoint LP (engines whose record has `lp_bound`; SciPy, seconds; docs/bounds.md), the bound the
    larger. `trace_compression`: the event trace's chunks,
    "deflate" (default) or "none" (faster to write, larger; docs/trace-format.md)."""
    t0 = time.perf_counter()
    if bound not in ("window", "lp"):
        raise InputError(f"must be window or lp, got {bound!r}", param="--bound")
    level = check_level(check)
    if not isinstance(spec, RunSpec):
        spec = from_g10_config(spec)
    check_allocator(spec.engine)
    rec = spec.record
    if plan_options:
        merged = dict(dataclasses.asdict(spec.policy.options))
        merged.update(plan_options)
        spec = spec.replace(policy=dataclasses.replace(spec.policy, options=rec.make_options(merged)))
    er = engine_record(rec.engine)
    if spec.engine.allocator and not er.allocator:
        placing = " and ".join(e.name for e in engines() if e.allocator)
        raise InputError(
            f"the {rec.engine} engine places 4 KiB pages, not blocks at offsets: "
            f"an allocator applies to the {placing} engines' policies",
            param="--allocator",
        )
    if required_order is not None and not er.kernel_order:
        taking = " and ".join(e.name for e in engines() if e.kernel_order)
        raise InputError(
            f"only the policies of the {taking} engine take a kernel order (this one runs on the "
            f"{rec.engine} engine)",
            param="--kernel-order",
        )
    w = workload if workload is not None else workload_of(spec)
    from g10fast.resources import check_run_memory

    check_run_memory(spec, w)  # refused (exit 2) when it cannot fit this machine
    from g10fast import policies

    runner = er.load()
    ctx = policies.PlanContext(
        w, spec.system, spec.policy.options, spec.engine, spec.workload.shape, vitality
    )
    writer = None
    if trace_path is not None:
        from g10fast.trace import EventTraceWriter

        writer = EventTraceWriter(
            trace_path, config=spec.to_dict(), meta=_meta(spec, w), compression=trace_compression
        )
        writer.set_kernel_times(_perturbed(w, spec.engine).exec_cycles)  # stalls (docs/perfetto.md)
    try:
        result = runner(
            spec,
            rec,
            ctx,
            plan=plan,
            trace=writer,
            progress=progress,
            required_order=required_order,
            check=level,
            baseline=_baseline(spec, w),
        )
        if spec.workload.kind == "builtin":
            result["system_preset"] = spec.system.name or None
            result["kernel_times"] = spec.workload.kernel_times
        from g10fast.workload.provenance import kernel_times_fields

        result.update(kernel_times_fields(w, spec.system.gpu_model, spec.system.name or ""))
        if spec.workload.fuse != "none":
            fm = w.meta.get("fusion", {})
            result["fusion"] = {
                k: fm.get(k)
                for k in ("mode", "kernels_before", "kernels_after", "deleted_tensors", "deleted_bytes")
            }
        if writer is not None:
            writer.close(summary={k: v for k, v in to_json_ready(result).items() if k not in ("planner",)})
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if level is not None:
        result["invariants_checked"] = True
        result["invariant_check_level"] = level
    if bound == "lp":
        _add_lp_bound(result, spec, rec, w)
    result["wall_seconds"] = time.perf_counter() - t0
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result


def _baseline(spec: RunSpec, w: Workload):
    """The callback an engine runs another policy through on the same workload and system
    (the swap engine's profile run): baseline(policy, engine_options) -> its result."""

    def baseline(policy: str, engine_options) -> dict:
        from g10fast.spec import make_spec

        return run(make_spec(spec.workload, spec.system, policy, {}, engine_options), workload=w)

    return baseline


def plan_of(spec, workload: Workload, vitality=None, **options):
    """The plan a spec's (or a G10 config's) policy makes for a workload; None for a policy
    without a planner. `options` replace some of the policy's options."""
    if not isinstance(spec, RunSpec):
        spec = from_g10_config(spec)
    rec = spec.record
    if rec.planner is None:
        return None
    opts = spec.policy.options
    if options:
        merged = dict(dataclasses.asdict(opts))
        merged.update(options)
        opts = rec.make_options(merged)
    from g10fast import policies

    return rec.planner(
        policies.PlanContext(workload, spec.system, opts, spec.engine, spec.workload.shape, vitality)
    )


def _meta(spec: RunSpec, w: Workload) -> dict:
    from g10fast import __version__

    return {
        "g10fast_version": __version__,
        "model": _model_label(spec),
        "batch_size": spec.workload.batch,
        "policy": spec.policy.name,
        "engine": spec.record.engine,
        "num_kernels": w.num_kernels,
        "num_tensors": w.num_tensors,
        "num_pages": w.num_pages,
        "kernel_names": list(w.kernel_name),
    }


#: the checkpoint LP in results (`bound="lp"`): every kernel a checkpoint up to this many
#: kernels, else the LP_CHECKPOINTS of largest deficit
LP_FULL_K = 100
LP_CHECKPOINTS = 50


def _add_lp_bound(result, spec, rec, w):
    """The checkpoint LP of the run's engine model beside its window and traffic bounds
    (g10fast.analysis.bounds_lp); the result's bound becomes the largest. Only a proven LP
    optimum is a bound: an LP stopped by its time limit is recorded and not used."""
    from g10fast.analysis.bounds_lp import default_checkpoints, lp_bound
    from g10fast.engine.registry import engine

    m, unit_ms = engine(rec.engine).lp_model_of(spec, rec, w)
    b = result.get("bound")
    if m is None or b is None:
        return result
    q = None if m.num_kernels <= LP_FULL_K else default_checkpoints(m, LP_CHECKPOINTS)
    lp = lp_bound(m, q, time_limit=120.0)
    info = {
        "time": lp.time,
        "optimal": bool(lp.optimal),
        "checkpoints": int(len(lp.checkpoints)),
        "variables": int(lp.variables),
        "seconds": lp.seconds,
    }
    summary = {k: v for k, v in b.items() if k not in ("time_cycles", "time_s")}
    summary["lp"] = info
    if lp.optimal:
        summary["time"] = max(float(b["time"]), lp.time)
    return add_bound(result, summary, float(spec.system.f_hz), unit_ms=unit_ms)
