"""One run path: a RunSpec (or a G10 config) from its workload to its result.

    result = g10fast.run.run(spec)        # a RunSpec (g10fast.spec), or a G10Config
    result = g10fast.run.run(read_g10_config("…/128-sim_lru.config"))

Stages: workload source -> Workload (front end, kernel times) -> the policy's planner ->
the policy's engine -> the result (g10fast.results, docs/results.md). The policy's record
(g10fast.policies) names its planner and engine; nothing here lists policies.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time

from g10fast.errors import InputError
from g10fast.results import (RESULT_SCHEMA_VERSION, add_bound, page_result, tensor_result,
                             to_json_ready)
from g10fast.spec import RunSpec, from_g10_config, g10_policy
from g10fast.workload.model import PAGE_SIZE, Workload
from g10fast.workload.times import load_workload, perturb_kernel_times

__all__ = ["RESULT_SCHEMA_VERSION", "build_workload", "model_name", "peak_rss_bytes",
           "plan_of", "policy_of", "run", "run_driver_engine", "run_page_engine",
           "run_tensor_engine", "to_json_ready", "workload_of"]


def policy_of(cfg) -> str:
    """The registry name of a G10 config's policy ('ideal' for is_UVM 0 without hints)."""
    return g10_policy(cfg)


def model_name(cfg) -> str:
    return os.path.splitext(os.path.basename(cfg.nn_model_input_file))[0] \
        if cfg.nn_model_input_file else "?"


def _artifact_workload(files: dict, batch: int, ghz: float, speedup: float, name: str):
    """Front end + kernel times of the artifact's files (its steps 1–3, simulator spec §1)."""
    from g10fast.workload.cnn import parse_cnn
    from g10fast.workload.transformer import parse_transformer

    if not files.get("nn_model_input_file"):
        raise InputError("no model file given", param="nn_model_input_file")
    if int(files.get("is_transformer", -1)) == 1:
        graph = parse_transformer(files["nn_model_input_file"], batch,
                                  int(files.get("trans_borden", 184)), name=name)
    else:
        family = ("resnet" if files.get("is_resnet") else "inception"
                  if files.get("is_inception") else "senet" if files.get("is_senet") else None)
        graph = parse_cnn(files["nn_model_input_file"], batch, int(files["input_H"]),
                          int(files["input_W"]), family, name=name)
    for key in ("orig_kernel_time_file", "input_pf_kernel_time_file", "pf_kernel_time_file",
                "workspace_size_file"):
        if not files.get(key):
            raise InputError("no file given", param=key)
    return load_workload(graph, files["orig_kernel_time_file"],
                         files["input_pf_kernel_time_file"], files["pf_kernel_time_file"],
                         files["workspace_size_file"], ghz, speedup)


def build_workload(cfg) -> Workload:
    """The Workload of a G10 config (compatibility name of `workload_of`)."""
    from g10fast.spec import ARTIFACT_WORKLOAD_KEYS
    files = {k: getattr(cfg, k) for k in ARTIFACT_WORKLOAD_KEYS}
    return _artifact_workload(files, int(cfg.batch_size), cfg.GPU_frequency_GHz,
                              cfg.kernel_speedup, model_name(cfg))


def workload_of(spec: RunSpec) -> Workload:
    """The Workload a spec's source describes."""
    src = spec.workload
    if src.kind == "artifact":
        return _artifact_workload(dict(src.files), src.batch, spec.system.gpu_frequency_ghz,
                                  spec.engine.kernel_speedup, src.model)
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
    raise InputError(f"unknown workload source {src.kind!r}", param="workload.kind")


def _preset_view(system) -> dict:
    return {"name": system.name,
            "gpu": {"model": system.gpu_model, "peak_tflops_fp32": system.gpu_peak_tflops_fp32,
                    "peak_tflops_bf16": system.gpu_peak_tflops_bf16,
                    "hbm_gbps": system.gpu_hbm_gbps},
            "host": {"link_gbps": system.host_link_gbps}}


def _model_label(spec: RunSpec) -> str:
    if spec.workload.kind == "builtin":
        from g10fast.workload.builtin import find_model
        return find_model(spec.workload.model).name
    return spec.workload.model


def _perturbed(w: Workload, engine) -> Workload:
    """Kernel-time variation (Fig. 19): applied after planning, before the engine (§2.2)."""
    if not engine.kernel_time_std_dev:
        return w
    e, i, p = perturb_kernel_times(w.exec_cycles, w.input_pf_cycles, w.pf_cycles,
                                   engine.kernel_time_std_dev, engine.ran_seed)
    return dataclasses.replace(w, exec_cycles=e, input_pf_cycles=i, pf_cycles=p)


def peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def run(spec, *, trace_path: str | os.PathLike | None = None, progress=None,
        workload: Workload | None = None, plan=None, plan_options: dict | None = None,
        required_order=None, vitality=None, check: bool = False) -> dict:
    """Simulate one run; returns the result dict (docs/results.md).

    `spec`: a RunSpec, or a G10Config (read into one). The policy's planner runs on the
    nominal kernel times (before any kernel-time variation); `plan` (e.g. from `read_plan`)
    replaces it; `plan_options` replace some of the policy's options (named quirks,
    docs/planner.md). `required_order` (page engine only): per kernel (inputs, outputs) in
    the order the engine processes them (O-18, docs/tensor-order.md); None: ascending ids.
    `vitality`: the workload's vitality analysis, if at hand. `check`: assert the engine's
    invariants at every kernel boundary (an InvariantError names the kernel and the
    invariant); the result is the same."""
    t0 = time.perf_counter()
    if not isinstance(spec, RunSpec):
        spec = from_g10_config(spec)
    rec = spec.record
    if plan_options:
        merged = dict(dataclasses.asdict(spec.policy.options))
        merged.update(plan_options)
        spec = spec.replace(policy=dataclasses.replace(spec.policy,
                                                       options=rec.make_options(merged)))
    w = workload if workload is not None else workload_of(spec)
    from g10fast import policies
    runner = policies.engine(rec.engine).load()
    ctx = policies.PlanContext(w, spec.system, spec.policy.options, spec.engine,
                               spec.workload.shape, vitality)
    writer = None
    if trace_path is not None:
        from g10fast.trace import EventTraceWriter
        writer = EventTraceWriter(trace_path, config=spec.to_dict(), meta=_meta(spec, w))
    try:
        result = runner(spec, rec, ctx, plan=plan, trace=writer, progress=progress,
                        required_order=required_order, check=check)
        if spec.workload.kind == "builtin":
            result["system_preset"] = spec.system.name or None
            result["kernel_times"] = spec.workload.kernel_times
        if writer is not None:
            writer.close(summary={k: v for k, v in to_json_ready(result).items()
                                  if k not in ("planner",)})
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if check:
        result["invariants_checked"] = True
    result["wall_seconds"] = time.perf_counter() - t0
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result


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
    return rec.planner(policies.PlanContext(workload, spec.system, opts, spec.engine,
                                            spec.workload.shape, vitality))


def _meta(spec: RunSpec, w: Workload) -> dict:
    from g10fast import __version__
    return {"g10fast_version": __version__, "model": _model_label(spec),
            "batch_size": spec.workload.batch, "policy": spec.policy.name,
            "engine": spec.record.engine, "num_kernels": w.num_kernels,
            "num_tensors": w.num_tensors, "num_pages": w.num_pages,
            "kernel_names": list(w.kernel_name)}


def compat_options(cls, engine):
    """An engine's options dataclass with the spec's compatibility switches applied."""
    known = {f.name for f in dataclasses.fields(cls)}
    compat = dict(engine.compat)
    for k in compat:
        if k not in known:
            raise InputError(f"unknown compatibility switch {k!r} of this engine (known: "
                             f"{', '.join(sorted(known))})", param=f"engine.compat.{k}")
    return cls(**compat)


# ---------------------------------------------------------------------------------------------
# Engine runners (registered in g10fast.policies by name)

def run_page_engine(spec: RunSpec, rec, ctx, *, plan=None, trace=None, progress=None,
                    required_order=None, check=False) -> dict:
    """The G10-compatible page engine under a policy's PageMode and plan."""
    from g10fast.engine.page import page_params, simulate_pages
    from g10fast.engine.stats import iteration_stats, reported_iteration

    if spec.engine.compat:
        raise InputError("the page engine has no compatibility switches (its quirks are "
                         "always on: it is the artifact's)", param="engine.compat")
    mode = rec.engine_mode(spec.policy.options, spec.engine)
    params = page_params(spec.system, mode)
    w = ctx.workload
    if plan is None and mode.use_prefetch and rec.planner is not None:
        plan = rec.planner(ctx)
    w_sim = _perturbed(w, spec.engine)
    page_run = simulate_pages(w_sim, params, hints=None if plan is None else plan.hints,
                              trace=trace, progress=progress, required_order=required_order,
                              check=check, bulk=spec.engine.page_bulk)
    iterations = iteration_stats(page_run.kernels, page_run.pcie, page_run.boundaries,
                                 w_sim.exec_cycles, w_sim.pf_cycles,
                                 page_run.params.num_iteration)
    res = page_result(spec, _model_label(spec), w, w_sim, page_run, iterations,
                      reported_iteration(iterations), plan, required_order)
    if check:
        res["invariant_checks"] = page_run.extra["invariant_checks"]
    from g10fast.analysis.bounds import bound_summary
    from g10fast.engine.bound_models import page_engine_model
    summary = bound_summary(page_engine_model(w_sim, page_run.params), w_sim,
                            float(w_sim.exec_cycles.sum()))
    return add_bound(res, summary, page_run.params.f_hz)


def run_tensor_engine(spec: RunSpec, rec, ctx, *, plan=None, trace=None, progress=None,
                      required_order=None, check=False) -> dict:
    """The tensor-granular engine (FlashNeuron, G10-GDS, G10-Host; spec §12, units O-34)."""
    import numpy as np
    from g10fast.engine.tensor import TensorOptions, simulate_tensors

    if required_order is not None:
        raise InputError("only the page-engine policies take a kernel order",
                         param="--kernel-order")
    w = ctx.workload
    mode = rec.extra["tensor_mode"]
    f_hz = float(spec.system.f_hz)
    plan_failure = None
    if mode == "FlashNeuron":
        if plan is None:
            plan = rec.planner(ctx)
        plan_info = {"offloads": int(len(plan.offload_tensor)), "gpu_line_bytes": int(plan.gpu_line),
                     "max_kernel_pages": int(plan.max_kernel_pages), "make_loss": int(plan.make_loss),
                     "remaining_bytes": int(plan.remaining_bytes), "candidates": int(plan.candidates),
                     "discovery_order": spec.policy.options.discovery_order}
        engine_plan = plan
        if not plan.ok:
            plan_failure = {"stage": "planner", "reason": plan.reason, "tensor": None,
                            "kernel": None, "kernel_name": None, "pages_needed": None,
                            "free_pages": None, "largest_free_pages": None}
    elif plan is None:
        g10plan = rec.planner(ctx)
        engine_plan = np.asarray(g10plan.hints, dtype=np.int64)
        plan_info = {"hints": int(len(engine_plan)), "target_bytes": int(g10plan.target),
                     **{k: v for k, v in g10plan.info.items() if k != "options"}}
    else:
        hints = getattr(plan, "hints", plan)
        engine_plan = np.asarray(hints, dtype=np.int64)
        plan_info = {"hints": int(len(engine_plan)), "source": "given"}
    trun = None
    if plan_failure is None:
        trun = simulate_tensors(w, spec.system, mode, engine_plan, vit=ctx.vitality(),
                                options=compat_options(TensorOptions, spec.engine),
                                trace=trace, progress=progress)
    res = tensor_result(spec, _model_label(spec), w, trun, plan_failure, plan_info, f_hz,
                        PAGE_SIZE)
    if check and trun is not None:
        from g10fast.engine.tensor_check import check_tensor_run
        res["invariant_checks"] = check_tensor_run(trun, w)
    from g10fast.analysis.bounds import bound_summary
    from g10fast.engine.bound_models import tensor_engine_model
    from g10fast.engine.tensor import exec_ms_of
    m = tensor_engine_model(w, spec.system, mode, compat_options(TensorOptions, spec.engine))
    summary = bound_summary(m, w, float(exec_ms_of(w, spec.system.gpu_frequency_ghz).sum()))
    return add_bound(res, summary, f_hz, unit_ms=True)


def run_swap_engine(spec, rec, ctx, *, plan=None, trace=None, progress=None,
                    required_order=None, check=False) -> dict:
    """The swap engine (SINGA's planner, AppObMem): g10fast.policies.trace_swap."""
    import numpy as np
    from g10fast.alloc.allocators import run_allocator
    from g10fast.alloc.swap import LinkCost, check_plan, plan_swaps
    from g10fast.alloc.trace import from_workload
    from g10fast.policies.trace_swap import swapped_iteration
    from g10fast.results import add_seconds, new_result, workload_summary

    if required_order is not None:
        raise InputError("only the page-engine policies take a kernel order",
                         param="--kernel-order")
    if trace is not None:
        raise InputError("the swap engine writes no event trace", param="--trace")
    if plan is not None:
        raise InputError("the swap engine plans for itself: no plan file", param="--plan-in")
    o = spec.policy.options
    w = ctx.workload
    sysm = spec.system
    f_hz = float(sysm.f_hz)
    tr = from_workload(w, freq_ghz=sysm.gpu_frequency_ghz, iterations=3)
    gpu_bytes = int(float(sysm.gpu_memory_gb) * 2**30)
    link = (LinkCost.singa_measured() if o.link == "singa_measured" else
            LinkCost.from_gbps(float(sysm.host_link_gbps), float(sysm.link_latency_us)))
    top = plan_swaps(tr, 1 << 62, rec.name)
    limit = int(o.limit_fraction * top.peak_before) if o.limit_fraction > 0 else gpu_bytes
    kw = dict(link=link, mode=o.mode, faithful_quirks=o.faithful_quirks)
    profile = None
    if getattr(o, "profile_policy", "none") != "none":
        # E6: profile under the baseline (its kernel times), plan there, schedule on ours
        from g10fast.spec import make_spec
        pspec = make_spec(spec.workload, spec.system, o.profile_policy, {}, spec.engine)
        try:
            pres = run(pspec, workload=w)
        except InputError as e:     # the baseline cannot run here (e.g. a kernel > the GPU)
            pres = {"status": "failed", "reason": e.message}
        prof_cyc = None
        if pres["status"] == "ok" and len(pres.get("kernels", [])):
            kt = np.asarray(pres["kernels"])
            rows = kt[kt[:, 0] == pres["reported"]]
            prof_cyc = np.zeros(w.num_kernels, np.float64)
            prof_cyc[rows[:, 1]] = rows[:, 3] - rows[:, 2]
        profile = {"policy": o.profile_policy, "status": pres["status"],
                   "reason": pres.get("reason") or (pres.get("failure") or {}).get("reason"),
                   "planned_on": "profile" if prof_cyc is not None else "nominal times",
                   "iteration_s": (float(prof_cyc.sum()) / f_hz) if prof_cyc is not None
                   else None}
        if prof_cyc is not None:
            ptr = from_workload(w, freq_ghz=sysm.gpu_frequency_ghz, iterations=3,
                                kernel_cycles=prof_cyc)
            pp = plan_swaps(ptr, limit, rec.name, o.score, **kw)
            kw["select"] = (pp.start + pp.r_idx, pp.start + pp.d_idx)
    p = plan_swaps(tr, limit, rec.name, o.score, **kw)
    n_checked = check_plan(tr, p)
    alloc = run_allocator(swapped_iteration(tr, p), o.allocator)
    need = alloc.peak_reserved
    ideal = int(w.ideal_cycles)
    stall = int(round(p.overhead_ns * 1e-9 * f_hz))
    exe = ideal + stall
    moved = int(p.size.sum())
    res = new_result(spec, "swap", _model_label(spec))
    res.update({"failure": None, "workload": workload_summary(w, gpu_bytes // 4096),
                "system": {"gpu_memory_bytes": gpu_bytes, "link": link.__dict__},
                "warnings": {}, "kernels": np.zeros((0, 10), np.int64),
                "plan": dict(p.summary(), limit_bytes=int(limit)),
                "gpu_memory_needed_bytes": int(need), "profile": profile,
                "allocator": alloc.summary()})
    res["iterations"] = [{
        "iteration": 0, "exe_time_cycles": exe, "ideal_exe_time_cycles": ideal,
        "pf_exe_time_cycles": int(np.asarray(w.pf_cycles).sum()),
        "slowdown": exe / ideal if ideal else float("nan"), "speedup": float("nan"),
        "in_transfer": 0, "cpu_pf": 0, "ssd_pf": 0, "unalloc_pf": 0,
        "stall_cycles": stall, "overlap_cycles": 0, "compute_cycles": ideal,
        "pages": {"cpu_to_gpu": moved // 4096, "ssd_to_gpu": 0, "gpu_to_cpu": moved // 4096,
                  "gpu_to_ssd": 0, "incoming": moved // 4096, "outgoing": moved // 4096,
                  "alloc": 0},
    }]
    res["reported"] = 0
    if check:
        res["invariant_checks"] = n_checked
    if need > gpu_bytes:
        res["status"] = "failed"
        res["failure"] = {"stage": "planner",
                          "reason": f"needs {need / 2**30:.2f} GiB of GPU memory "
                                    f"({o.allocator} on the swapped iteration, load peak "
                                    f"{p.peak_after / 2**30:.2f} GiB), the GPU has "
                                    f"{gpu_bytes / 2**30:.2f} GiB",
                          "tensor": None, "kernel": None, "kernel_name": None,
                          "pages_needed": None, "free_pages": None, "largest_free_pages": None}
    return add_seconds(res, f_hz)


def run_driver_engine(spec, rec, ctx, *, plan=None, trace=None, progress=None,
                      required_order=None, check=False) -> dict:
    """A policy on the driver engine: its planner gives DriverHints (None: demand paging);
    DriverOptions = defaults < the policy's `extra["driver"]` < the run's engine.compat."""
    from g10fast.engine.driver import (DriverHints, driver_options, iteration_stats,
                                       simulate_driver)
    from g10fast.results import add_seconds, new_result, workload_summary

    if trace is not None:
        raise InputError("the driver engine writes no event trace yet", param="--trace")
    base = dict(rec.extra.get("driver") or {})
    if rec.extra.get("driver_from_options") is not None:
        base.update(rec.extra["driver_from_options"](spec.policy.options))
    opts = driver_options(spec.engine.compat, base)
    w = ctx.workload
    if plan is None and rec.planner is not None:
        plan = rec.planner(ctx)
    if plan is not None and not isinstance(plan, DriverHints):
        raise InputError("the driver engine takes DriverHints (a policy of the driver engine)",
                         param="plan")
    n_iter = int(spec.engine.num_iteration)
    w_sim = _perturbed(w, spec.engine)
    run = simulate_driver(w_sim, spec.system, opts, plan, num_iteration=n_iter,
                          required_order=required_order)
    iterations = iteration_stats(run, w_sim, n_iter)
    if check:
        from g10fast.engine.driver import check_invariants
        from g10fast.errors import InvariantError
        try:
            check_invariants(run, w_sim)
        except AssertionError as e:
            raise InvariantError(f"invariant broken in the driver engine's run: {e}") from None
    res = new_result(spec, "driver", _model_label(spec))
    res.update({
        "iterations": iterations,
        # the steady state: the last iteration (the first populates memory by zero-fill)
        "reported": len(iterations) - 1 if iterations else None,
        "workload": workload_summary(w, run.params["gpu_pages"]),
        "system": run.params,
        "driver_options": dataclasses.asdict(opts),
        "warnings": {},
        "tensor_order": "ascending" if required_order is None else "given",
        "kernels": run.kernels,
        "failure": run.failure,
    })
    res["status"] = run.status
    if plan is not None:
        res["plan"] = {"policy": rec.name, "hints": int(len(plan.issue)),
                       **{k: v for k, v in plan.info.items()
                          if isinstance(v, (int, float, str, bool))}}
    if check:
        res["invariant_checks"] = len(run.kernels)
    return add_seconds(res, run.params["f_hz"])
