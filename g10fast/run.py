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
from g10fast.spec import RunSpec, check_allocator, from_g10_config, g10_policy
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
    """The Workload a spec's source describes, after its fusion pass (`workload.fuse`)."""
    w = _source_workload(spec)
    if spec.workload.fuse != "none":
        from g10fast.workload.fusion import fuse
        s = spec.system
        w = fuse(w, spec.workload.fuse, freq_ghz=s.gpu_frequency_ghz,
                 hbm_gbps=s.gpu_hbm_gbps or None)
    if spec.workload.recompute != "none":
        from g10fast.workload.recompute import recompute
        w = recompute(w, spec.workload.recompute)
    return w


def _source_workload(spec: RunSpec) -> Workload:
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
    if src.kind == "trace":
        from g10fast.workload.h5trace import trace_workload
        return trace_workload(dict(src.files)["path"], spec.system.gpu_frequency_ghz,
                              spec.engine.kernel_speedup)
    raise InputError(f"unknown workload source {src.kind!r}", param="workload.kind")


def _preset_view(system) -> dict:
    return {"name": system.name,
            "gpu": {"model": system.gpu_model, "peak_tflops_fp32": system.gpu_peak_tflops_fp32,
                    "peak_tflops_bf16": system.gpu_peak_tflops_bf16,
                    "hbm_gbps": system.gpu_hbm_gbps, "cost_params": system.gpu_cost_params},
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
        required_order=None, vitality=None, check: bool = False,
        bound: str = "window", trace_compression: str = "deflate") -> dict:
    """Simulate one run; returns the result dict (docs/results.md).

    `spec`: a RunSpec, or a G10Config (read into one). The policy's planner runs on the
    nominal kernel times (before any kernel-time variation); `plan` (e.g. from `read_plan`)
    replaces it; `plan_options` replace some of the policy's options (named quirks,
    docs/planner.md). `required_order` (page engine only): per kernel (inputs, outputs) in
    the order the engine processes them (O-18, docs/tensor-order.md); None: ascending ids.
    `vitality`: the workload's vitality analysis, if at hand. `check`: assert the engine's
    invariants at every kernel boundary (an InvariantError names the kernel and the
    invariant; docs/invariants.md): True or "state", or "full" (the page engine's event-stream
    sums and a page-table scan at every check: tens of times slower); the result is the
    same. `bound`: "window" (the window and traffic bounds, always), or "lp": also the
    checkpoint LP (page and tensor engines; SciPy, seconds; docs/bounds.md), the bound the
    larger. `trace_compression`: the event trace's chunks,
    "deflate" (default) or "none" (faster to write, larger; docs/trace-format.md)."""
    t0 = time.perf_counter()
    if bound not in ("window", "lp"):
        raise InputError(f"must be window or lp, got {bound!r}", param="--bound")
    from g10fast.engine.page.check import check_level
    level = check_level(check)
    if not isinstance(spec, RunSpec):
        spec = from_g10_config(spec)
    check_allocator(spec.engine)
    rec = spec.record
    if plan_options:
        merged = dict(dataclasses.asdict(spec.policy.options))
        merged.update(plan_options)
        spec = spec.replace(policy=dataclasses.replace(spec.policy,
                                                       options=rec.make_options(merged)))
    if spec.engine.allocator and rec.engine not in ("tensor", "swap"):
        raise InputError(f"the {rec.engine} engine places 4 KiB pages, not blocks at offsets: "
                         "an allocator applies to the tensor-engine and swap policies",
                         param="--allocator")
    w = workload if workload is not None else workload_of(spec)
    from g10fast.resources import check_run_memory
    check_run_memory(spec, w)            # refused (exit 2) when it cannot fit this machine
    from g10fast import policies
    runner = policies.engine(rec.engine).load()
    ctx = policies.PlanContext(w, spec.system, spec.policy.options, spec.engine,
                               spec.workload.shape, vitality)
    writer = None
    if trace_path is not None:
        from g10fast.trace import EventTraceWriter
        writer = EventTraceWriter(trace_path, config=spec.to_dict(), meta=_meta(spec, w),
                                  compression=trace_compression)
        writer.set_kernel_times(_perturbed(w, spec.engine).exec_cycles)   # stalls (docs/perfetto.md)
    try:
        result = runner(spec, rec, ctx, plan=plan, trace=writer, progress=progress,
                        required_order=required_order, check=level)
        if spec.workload.kind == "builtin":
            result["system_preset"] = spec.system.name or None
            result["kernel_times"] = spec.workload.kernel_times
        from g10fast.workload.times import kernel_times_fields
        result.update(kernel_times_fields(w, spec.system.gpu_model, spec.system.name or ""))
        if spec.workload.fuse != "none":
            fm = w.meta.get("fusion", {})
            result["fusion"] = {k: fm.get(k) for k in ("mode", "kernels_before", "kernels_after",
                                                       "deleted_tensors", "deleted_bytes")}
        if writer is not None:
            writer.close(summary={k: v for k, v in to_json_ready(result).items()
                                  if k not in ("planner",)})
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
        res["page_table_scans"] = page_run.extra["page_table_scans"]
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
        from g10fast.engine.tensor.check import check_tensor_run
        res["invariant_checks"] = check_tensor_run(trun, w)
    if spec.engine.allocator and trun is not None:
        alloc = _allocator_need(trun, w, spec.engine.allocator)
        res["gpu_memory_needed_bytes"] = int(alloc.peak_reserved)
        res["allocator"] = alloc.summary()
        _allocator_fits(res, spec.engine.allocator, int(float(spec.system.gpu_memory_gb) * 2**30))
    from g10fast.analysis.bounds import bound_summary
    from g10fast.engine.bound_models import tensor_engine_model
    from g10fast.engine.tensor import exec_ms_of
    m = tensor_engine_model(w, spec.system, mode, compat_options(TensorOptions, spec.engine))
    summary = bound_summary(m, w, float(exec_ms_of(w, spec.system.gpu_frequency_ghz).sum()))
    return add_bound(res, summary, f_hz, unit_ms=True)


def _allocator_fits(res: dict, allocator: str, gpu_bytes: int, detail: str = "") -> dict:
    """A run whose allocator needs more GPU memory than the GPU has cannot run there: status
    `failed` at stage `allocator`, the need in the reason (the engine's run stays in the
    result: it is what the allocator placed)."""
    need = int(res["gpu_memory_needed_bytes"])
    if res["status"] == "ok" and need > gpu_bytes:
        res["status"] = "failed"
        res["failure"] = {"stage": "allocator",
                          "reason": f"needs {need / 2**30:.3f} GiB of GPU memory ({allocator} on "
                                    f"the run's allocations{detail}), the GPU has "
                                    f"{gpu_bytes / 2**30:.3f} GiB",
                          "tensor": None, "kernel": None, "kernel_name": None,
                          "pages_needed": None, "free_pages": None, "largest_free_pages": None}
    return res


def _allocator_need(trun, w, name: str, absent_at_start=None):
    """An allocator (by name) over a tensor-engine run's allocations and frees: its AllocResult
    (peak reserved = the GPU memory that allocator needs for the run)."""
    from g10fast.alloc.allocators import run_allocator
    from g10fast.alloc.trace import from_tensor_events
    return run_allocator(from_tensor_events(trun.events, w.raw_size, w.name,
                                            absent_at_start=absent_at_start), name)


def run_swap_engine(spec, rec, ctx, *, plan=None, trace=None, progress=None,
                    required_order=None, check=False) -> dict:
    """SINGA's planner and AppObMem through the tensor engine (g10fast.policies.trace_swap):
    plan on the derived trace, hint rows to the tensor engine, the allocator over its run."""
    import numpy as np
    from g10fast.alloc.swap import LinkCost, check_plan, plan_swaps
    from g10fast.alloc.trace import from_workload
    from g10fast.engine.tensor import TensorOptions, simulate_tensors
    from g10fast.policies.trace_swap import ENGINE_OPTIONS, absolute_kernels, swap_hints
    from g10fast.results import workload_summary

    if required_order is not None:
        raise InputError("only the page-engine policies take a kernel order",
                         param="--kernel-order")
    if plan is not None:
        raise InputError("the swap policies plan for themselves: no plan file",
                         param="--plan-in")
    o = spec.policy.options
    allocator = spec.engine.allocator or o.allocator
    w = ctx.workload
    sysm = spec.system
    f_hz = float(sysm.f_hz)
    tr = from_workload(w, freq_ghz=sysm.gpu_frequency_ghz, iterations=3)
    gpu_bytes = int(float(sysm.gpu_memory_gb) * 2**30)
    if o.link == "singa_measured":
        link = LinkCost.singa_measured()
        link_gbps = 2e9 / (link.out_ns_per_byte + link.in_ns_per_byte) / 2**30
    else:
        link_gbps = float(sysm.host_link_gbps)
        link = LinkCost.from_gbps(link_gbps, float(sysm.link_latency_us))
    top = plan_swaps(tr, 1 << 62, rec.name)
    limit = int(o.limit_fraction * top.peak_before) if o.limit_fraction > 0 else gpu_bytes
    # a gap must hold a whole kernel: the engine keeps a kernel's tensors for the kernel
    kw = dict(link=link, mode=o.mode, faithful_quirks=o.faithful_quirks, periodic=o.periodic,
              op_group=absolute_kernels(tr), accesses=getattr(o, "trace", "alloc_free_access"))
    profile = None
    if getattr(o, "profile_policy", "none") != "none":
        # E6: profile under the baseline (its kernel times), plan there, schedule on ours
        from g10fast.spec import make_spec
        pspec = make_spec(spec.workload, spec.system, o.profile_policy, {},
                          dataclasses.replace(spec.engine, allocator=""))
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
            kw["profile_trace"] = from_workload(w, freq_ghz=sysm.gpu_frequency_ghz,
                                                iterations=3, kernel_cycles=prof_cyc)
    # the engine: G10GDSFULL's explicit host transfers with its quirks off, the whole host
    # link as its host lane (its host lane is the link less the SSD's bandwidth, and nothing
    # goes to the SSD here), room for every tensor (the allocator decides what fits)
    ssd = float(sysm.ssd_bandwidth_gbps) if float(sysm.ssd_bandwidth_gbps) > 0 else 1.0
    room_gb = float(np.asarray(w.size, np.int64).sum()) / 2**30 + 1.0
    esys = dataclasses.replace(sysm, gpu_memory_gb=room_gb, ssd_bandwidth_gbps=ssd,
                               host_link_gbps=link_gbps + ssd)
    eopts = dict(ENGINE_OPTIONS)
    eopts.update(dict(spec.engine.compat))
    topts = compat_options(TensorOptions, dataclasses.replace(spec.engine,
                                                              compat=tuple(eopts.items())))
    prof_tr = kw.pop("profile_trace", None)
    rounds = []
    n_checked = 0
    while True:
        kw.pop("select", None)
        if prof_tr is not None:
            pp = plan_swaps(prof_tr, limit, rec.name, o.score, **kw)
            kw["select"] = (pp.start + pp.r_idx, pp.start + pp.d_idx)
        p = plan_swaps(tr, limit, rec.name, o.score, **kw)
        if check and kw["accesses"] == "alloc_free_access":
            n_checked += check_plan(tr, p)      # alloc_free_only: absent accesses are counted
        hints, hinfo, absent = swap_hints(tr, p)
        trun = simulate_tensors(w, esys, "G10GDSFULL", hints, vit=ctx.vitality(),
                                options=topts, progress=progress)
        alloc = _allocator_need(trun, w, allocator, absent)
        need = int(alloc.peak_reserved)
        rounds.append({"limit_bytes": int(limit), "load_peak_bytes": int(p.peak_after),
                       "gpu_memory_needed_bytes": need})
        if (need <= gpu_bytes or o.limit_fraction > 0 or not o.fit_allocator
                or len(rounds) > o.fit_rounds or trun.status != "ok"
                or p.peak_after > limit):       # no plan meets this limit: a lower one neither
            break
        new_limit = limit - (need - gpu_bytes)
        if new_limit <= 0 or new_limit >= limit:
            break
        limit = new_limit
    res = tensor_result(spec, _model_label(spec), w, trun, None,
                        dict(p.summary(), limit_bytes=int(limit), **hinfo), f_hz, PAGE_SIZE)
    res["engine"] = "swap"
    res["workload"] = workload_summary(w, gpu_bytes // PAGE_SIZE)
    res["system"] = dict(res["system"], gpu_memory_bytes=gpu_bytes, host_link_gbps=link_gbps,
                         link=link.__dict__)
    res.update({"gpu_memory_needed_bytes": need, "profile": profile,
                "allocator": alloc.summary(), "fit_rounds": rounds})
    if check:
        from g10fast.engine.tensor.check import check_tensor_run
        res["invariant_checks"] = n_checked + check_tensor_run(trun, w)
    _allocator_fits(res, allocator, gpu_bytes,
                    f", load peak {p.peak_after / 2**30:.3f} GiB")
    # the bound: Ideal (the plan is timed on the tensor engine with room for every tensor, so
    # no transfer window is provable), with the bound of the machine the swap planner
    # describes (the real GPU, two FIFO channels) beside it as `physical`
    from g10fast.engine.bound_models import swap_engine_bound
    return add_bound(res, swap_engine_bound(w, link, gpu_bytes, f_hz), f_hz)


def run_driver_engine(spec, rec, ctx, *, plan=None, trace=None, progress=None,
                      required_order=None, check=False) -> dict:
    """A policy on the driver engine: its planner gives DriverHints (None: demand paging);
    DriverOptions = defaults < the policy's `extra["driver"]` < the run's engine.compat."""
    from g10fast.engine.driver import (DriverHints, driver_options, iteration_stats,
                                       simulate_driver)
    from g10fast.results import add_seconds, new_result, workload_summary

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
                          required_order=required_order, trace=trace)
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
    _add_driver_bound(res, w_sim, run, opts, spec.system)
    return add_seconds(res, run.params["f_hz"])


def run_ranks_engine(spec, rec, ctx, *, plan=None, trace=None, progress=None,
                     required_order=None, check=False) -> dict:
    """A ZeRO policy on the ranks engine (g10fast.engine.ranks): one data-parallel rank."""
    from g10fast.engine.ranks import simulate_ranks
    from g10fast.results import add_seconds, new_result

    from g10fast.results import workload_summary

    from g10fast.errors import InvariantError

    res = new_result(spec, "ranks", _model_label(spec))
    try:
        part = simulate_ranks(spec, rec, ctx, trace=trace, check=check)
    except AssertionError as e:
        raise InvariantError(f"invariant broken in the ranks engine's step: {e}") from None
    f_hz = part.pop("f_hz")
    bound = part.pop("bound_summary", None)
    res.update(part)
    if bound is not None:
        add_bound(res, bound, f_hz)
    res["workload"] = workload_summary(ctx.workload,
                                       int(spec.system.gpu_memory_gb * 2**30) // PAGE_SIZE)
    return add_seconds(res, f_hz)


def _add_driver_bound(res, w_sim, run, opts, system):
    """The driver engine's bound (g10fast.engine.bound_models.driver_engine_model) beside
    every iteration; the first iteration gets its own (its first touches zero-fill)."""
    from g10fast.analysis.bounds import bound_summary
    from g10fast.engine.bound_models import driver_engine_model
    from g10fast.engine.driver import system_params
    prm = system_params(system, opts)
    ideal = float(w_sim.exec_cycles.sum())
    f_hz = run.params["f_hz"]
    first = bound_summary(driver_engine_model(w_sim, prm, opts, first_iteration=True), w_sim,
                          ideal)
    add_bound(res, bound_summary(driver_engine_model(w_sim, prm, opts), w_sim, ideal), f_hz)
    its = res.get("iterations") or []
    if its:
        one = add_bound({"iterations": [its[0]]}, first, f_hz)
        res["bound"]["first_iteration"] = {k: one["bound"][k] for k in
                                           ("time", "window", "traffic", "time_cycles",
                                            "time_s")}
    return res


#: the checkpoint LP in results (`bound="lp"`): every kernel a checkpoint up to this many
#: kernels, else the LP_CHECKPOINTS of largest deficit
LP_FULL_K = 100
LP_CHECKPOINTS = 50


def _add_lp_bound(result, spec, rec, w):
    """The checkpoint LP of the run's engine model beside its window and traffic bounds
    (g10fast.analysis.bounds_lp); the result's bound becomes the largest. Only a proven LP
    optimum is a bound: an LP stopped by its time limit is recorded and not used."""
    from g10fast.analysis.bounds_lp import default_checkpoints, lp_bound
    if rec.engine not in ("page", "tensor"):
        raise InputError("the LP models the page and tensor engines (this policy runs on the "
                         f"{rec.engine} engine)", param="--bound")
    if rec.engine == "page":
        from g10fast.engine.bound_models import page_engine_model
        from g10fast.engine.page import page_params
        m = page_engine_model(_perturbed(w, spec.engine),
                              page_params(spec.system, rec.engine_mode(spec.policy.options,
                                                                       spec.engine)))
    else:
        from g10fast.engine.bound_models import tensor_engine_model
        from g10fast.engine.tensor import TensorOptions
        m = tensor_engine_model(w, spec.system, rec.extra["tensor_mode"],
                                compat_options(TensorOptions, spec.engine))
    b = result.get("bound")
    if m is None or b is None:
        return result
    q = None if m.num_kernels <= LP_FULL_K else default_checkpoints(m, LP_CHECKPOINTS)
    lp = lp_bound(m, q, time_limit=120.0)
    info = {"time": lp.time, "optimal": bool(lp.optimal), "checkpoints": int(len(lp.checkpoints)),
            "variables": int(lp.variables), "seconds": lp.seconds}
    summary = {k: v for k, v in b.items() if k not in ("time_cycles", "time_s")}
    summary["lp"] = info
    if lp.optimal:
        summary["time"] = max(float(b["time"]), lp.time)
    return add_bound(result, summary, float(spec.system.f_hz), unit_ms=rec.engine == "tensor")
