"""The swap engine's runner (its registry record: g10fast.engine.swap.record): SINGA's planner
and AppObMem (g10fast.policies.trace_swap) through the tensor engine. It plans on the trace
derived from the workload, hands the plan's rows to the tensor engine as host-link hints,
runs the offset-level allocator over that run, and lowers the limit until the allocator's
need fits the GPU. A policy that profiles under a baseline first (`profile_policy`) gets
that run through the `baseline` callback the pipeline hands in (g10fast.run), not by calling
back up."""

from __future__ import annotations

import dataclasses

import numpy as np

from g10fast.engine.bound_models import swap_engine_bound
from g10fast.engine.common import compat_options, model_label
from g10fast.engine.swap.hints import ENGINE_OPTIONS, absolute_kernels, swap_hints
from g10fast.engine.swap.mode import SwapMode
from g10fast.engine.tensor import TensorOptions, simulate_tensors
from g10fast.engine.tensor.result import tensor_result
from g10fast.engine.tensor.run import allocator_fits, allocator_need
from g10fast.errors import InputError
from g10fast.results import add_bound, workload_summary
from g10fast.workload.model import PAGE_SIZE


def run_swap_engine(
    spec, rec, ctx, *, plan=None, trace=None, progress=None, required_order=None, check=False, baseline=None
) -> dict:
    """SINGA's planner and AppObMem through the tensor engine (g10fast.policies.trace_swap):
    plan on the derived trace, hint rows to the tensor engine, the allocator over its run."""
    from g10fast.alloc.swap import LinkCost, check_plan, plan_swaps
    from g10fast.alloc.trace import from_workload

    if plan is not None:
        raise InputError("the swap policies plan for themselves: no plan file", param="--plan-in")
    o = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
    if not isinstance(o, SwapMode):
        raise InputError(
            f"policy {rec.name} must give the swap engine a SwapMode (its record's engine_mode)",
            param="policy",
        )
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
    top = plan_swaps(tr, 1 << 62, o.planner)
    limit = int(o.limit_fraction * top.peak_before) if o.limit_fraction > 0 else gpu_bytes
    # a gap must hold a whole kernel: the engine keeps a kernel's tensors for the kernel
    kw = dict(
        link=link,
        mode=o.mode,
        faithful_quirks=o.faithful_quirks,
        periodic=o.periodic,
        op_group=absolute_kernels(tr),
        accesses=o.trace,
    )
    profile = None
    if o.profile_policy != "none":
        # E6: profile under the baseline (its kernel times), plan there, schedule on ours
        if baseline is None:
            raise InputError(
                "a profiling swap policy needs the pipeline's baseline runner (g10fast.run.run hands it in)",
                param="profile_policy",
            )
        try:
            pres = baseline(o.profile_policy, dataclasses.replace(spec.engine, allocator=""))
        except InputError as e:  # the baseline cannot run here (e.g. a kernel > the GPU)
            pres = {"status": "failed", "reason": e.message}
        prof_cyc = None
        if pres["status"] == "ok" and len(pres.get("kernels", [])):
            kt = np.asarray(pres["kernels"])
            rows = kt[kt[:, 0] == pres["reported"]]
            prof_cyc = np.zeros(w.num_kernels, np.float64)
            prof_cyc[rows[:, 1]] = rows[:, 3] - rows[:, 2]
        profile = {
            "policy": o.profile_policy,
            "status": pres["status"],
            "reason": pres.get("reason") or (pres.get("failure") or {}).get("reason"),
            "planned_on": "profile" if prof_cyc is not None else "nominal times",
            "iteration_s": (float(prof_cyc.sum()) / f_hz) if prof_cyc is not None else None,
        }
        if prof_cyc is not None:
            kw["profile_trace"] = from_workload(
                w, freq_ghz=sysm.gpu_frequency_ghz, iterations=3, kernel_cycles=prof_cyc
            )
    # the engine: G10GDSFULL's explicit host transfers with its quirks off, the whole host
    # link as its host lane (its host lane is the link less the SSD's bandwidth, and nothing
    # goes to the SSD here), room for every tensor (the allocator decides what fits)
    ssd = float(sysm.ssd_bandwidth_gbps) if float(sysm.ssd_bandwidth_gbps) > 0 else 1.0
    room_gb = float(np.asarray(w.size, np.int64).sum()) / 2**30 + 1.0
    esys = dataclasses.replace(
        sysm, gpu_memory_gb=room_gb, ssd_bandwidth_gbps=ssd, host_link_gbps=link_gbps + ssd
    )
    eopts = dict(ENGINE_OPTIONS)
    eopts.update(dict(spec.engine.compat))
    topts = compat_options(TensorOptions, dataclasses.replace(spec.engine, compat=tuple(eopts.items())))
    prof_tr = kw.pop("profile_trace", None)
    rounds = []
    n_checked = 0
    while True:
        kw.pop("select", None)
        if prof_tr is not None:
            pp = plan_swaps(prof_tr, limit, o.planner, o.score, **kw)
            kw["select"] = (pp.start + pp.r_idx, pp.start + pp.d_idx)
        p = plan_swaps(tr, limit, o.planner, o.score, **kw)
        if check and kw["accesses"] == "alloc_free_access":
            n_checked += check_plan(tr, p)  # alloc_free_only: absent accesses are counted
        hints, hinfo, absent = swap_hints(tr, p)
        trun = simulate_tensors(
            w, esys, "gds_ssd_host", hints, vit=ctx.vitality(), options=topts, progress=progress
        )
        alloc = allocator_need(trun, w, allocator, absent)
        need = int(alloc.peak_reserved)
        rounds.append(
            {"limit_bytes": int(limit), "load_peak_bytes": int(p.peak_after), "gpu_memory_needed_bytes": need}
        )
        if (
            need <= gpu_bytes
            or o.limit_fraction > 0
            or not o.fit_allocator
            or len(rounds) > o.fit_rounds
            or trun.status != "ok"
            or p.peak_after > limit
        ):  # no plan meets this limit: a lower one neither
            break
        new_limit = limit - (need - gpu_bytes)
        if new_limit <= 0 or new_limit >= limit:
            break
        limit = new_limit
    res = tensor_result(
        spec,
        model_label(spec),
        w,
        trun,
        None,
        dict(p.summary(), limit_bytes=int(limit), **hinfo),
        f_hz,
        PAGE_SIZE,
    )
    res["engine"] = "swap"
    res["workload"] = workload_summary(w, gpu_bytes // PAGE_SIZE)
    res["system"] = dict(
        res["system"], gpu_memory_bytes=gpu_bytes, host_link_gbps=link_gbps, link=link.__dict__
    )
    res.update(
        {
            "gpu_memory_needed_bytes": need,
            "profile": profile,
            "allocator": alloc.summary(),
            "fit_rounds": rounds,
        }
    )
    if check:
        from g10fast.engine.tensor.check import check_tensor_run

        res["invariant_checks"] = n_checked + check_tensor_run(trun, w)
    allocator_fits(res, allocator, gpu_bytes, f", load peak {p.peak_after / 2**30:.3f} GiB")
    # the bound: Ideal (the plan is timed on the tensor engine with room for every tensor, so
    # no transfer window is provable), with the bound of the machine the swap planner
    # describes (the real GPU, two FIFO channels) beside it as `physical`
    return add_bound(res, swap_engine_bound(w, link, gpu_bytes, f_hz), f_hz)
