"""G10's Smart Tensor Migration planner as a stage (planner spec §5, §6.2, §9).

    plan = plan_g10(workload, vitality, cfg)           # G10-compatible defaults
    plan = plan_g10(workload, vitality, cfg, o13_cumulative_spill=False)   # one quirk fixed

Input: a Workload, its Vitality (`g10fast.analysis.vitality`) and an object with the G10
config attributes. Output: a `MigrationPlan` of plain arrays. Compatible mode (every option
at its default) reproduces the artifact's `prefetch_guide.config`, including the
per-workload target multipliers (O-15) and the numbered quirks, each behind a named option.
"""

from __future__ import annotations


import time
from dataclasses import dataclass, field

import numpy as np

from g10fast import aot
from g10fast.errors import InputError
from g10fast.planner import g10_kernels as gk
from g10fast.planner.plan import MigrationPlan, cxx_sort_order, sort_hints
from g10fast.workload.model import ArtifactShape

GIB = 2**30

# option name -> (kernel bit or None, G10-compatible default, what it reproduces)
OPTIONS = {
    "o3_early_exit": (
        None,
        True,
        "O-3: pre-alloc/dealloc stops at the first tensor after which the estimate fits",
    ),
    "o5_looped_area": (gk.O_O5, True, "O-5: looped-interval area with the mod K / mod K+1 index bug"),
    "o8_double_count_input": (None, True, "O-8: tensor 0 counted twice in the estimate"),
    "o10_cxx_sort_order": (
        gk.O_CXX_SORT,
        True,
        "O-10: select by replaying G10's in-place "
        "std::sort of the interval list on every "
        "iteration, so that zero-area intervals are "
        "taken in the order it leaves them",
    ),
    "o10_break_on_zero_area": (
        gk.O_ZERO_BREAK,
        True,
        "O-10 (only with o10_cxx_sort_order="
        "False): stop the main loop when the best "
        "area is 0; False: go on in creation "
        "order",
    ),
    "o21_cxx_prefetch_order": (
        None,
        True,
        "O-21: §5.7 visits the evictions in the order "
        "std::sort leaves equal planned-prefetch kernels; "
        "False: eviction order",
    ),
    "o11_short_stalls": (
        gk.O_O11,
        True,
        "O-11: a too-short top interval is not processed, which stalls the main loop",
    ),
    "o12_empty_window_crowded": (
        gk.O_O12,
        True,
        "O-12: an empty ideal write window counts as a crowded SSD lane",
    ),
    "o13_cumulative_spill": (
        gk.O_O13,
        True,
        "O-13: host traffic spills its cumulative excess into the SSD lane on every call",
    ),
    "o14_reserve_without_eviction": (
        gk.O_O14,
        True,
        "O-14: host memory is reserved even when nothing was evicted",
    ),
    "o16_hoist_overshoot": (gk.O_O16, True, "O-16: prefetch hoisting ignores the tensor's own size"),
}


def loosen_parameter(shape, ssd_gbps: float, gds: str | None = None) -> float:
    """O-15: the artifact's per-workload multipliers of the target line (§2.6, §5.2);
    `shape` is the workload's ArtifactShape (a G10 config is read as one)."""
    if not isinstance(shape, ArtifactShape):
        shape = ArtifactShape.of_config(shape)
    loosen = 1.0
    transformer, borden, batch = shape.transformer, shape.borden, shape.batch
    ssd = float(ssd_gbps)
    if transformer:
        if borden > 200 and batch == 512 and ssd < 6.3:
            loosen = 1.394
        if borden < 200 and batch == 1280 and 6.3 < ssd < 6.5:
            loosen = 1.1
    if gds is not None:
        loosen = 1.060606
        if borden < 200 and transformer and gds == "full":
            loosen = 1.269366
    return loosen


def planner_inputs(cfg, delta=None, shape=None):
    """(System, delta, ArtifactShape) of the planner's arguments: a System with the given
    delta and shape, or an object with the artifact's config attributes (read here)."""
    from g10fast.system import System

    if isinstance(cfg, System):
        return cfg, 0.5 if delta is None else float(delta), shape or ArtifactShape()
    return (
        System.from_g10(cfg),
        float(cfg.delta_parameter) if delta is None else float(delta),
        shape or ArtifactShape.of_config(cfg),
    )


@dataclass(frozen=True)
class PlannerParams:
    """The planner's constants (spec §1, §5.2), from a G10 config."""

    capacity: int  # GPU_mem_line = trunc(GPU GB * 2^30), the area metric's line
    target: int  # trunc(loosen * trunc(0.99 * capacity))
    loosen: float
    cpu_line: int  # host memory for evictions, bytes
    b_ssd: float  # bytes / µs (GB = 2^30, O-24)
    b_cpu: float
    ssd_lat: float  # µs
    sys_lat: float
    delta: float
    malloc_uspB: float
    options: dict = field(default_factory=dict)


def planner_params(
    cfg,
    gds: str | None = None,
    loosen: float | None = None,
    *,
    delta: float | None = None,
    shape=None,
    **options,
) -> PlannerParams:
    """The planner's constants of a System (with G10's `delta` and the workload's
    ArtifactShape), or of an object with the artifact's config attributes."""
    from g10fast.system import PARAM

    system, delta, shape = planner_inputs(cfg, delta, shape)
    for f in ("gpu_memory_gb", "ssd_bandwidth_gbps", "host_link_gbps"):
        if not float(getattr(system, f)) > 0:
            raise InputError("must be > 0", param=PARAM[f])
    for f in ("ssd_latency_us", "fault_latency_us", "host_memory_gb", "gpu_malloc_us_per_byte"):
        if float(getattr(system, f)) < 0:
            raise InputError("must be >= 0", param=PARAM[f])
    if delta < 0:
        raise InputError("must be >= 0", param="policy.delta")
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ValueError(f"unknown planner option(s) {sorted(unknown)}; known: {sorted(OPTIONS)}")
    opts = {k: bool(options.get(k, d)) for k, (_, d, _) in OPTIONS.items()}
    if gds not in (None, "ssd", "full"):
        raise ValueError("gds must be None, 'ssd' or 'full'")
    lo = loosen_parameter(shape, system.ssd_bandwidth_gbps, gds) if loosen is None else float(loosen)
    cap = int(float(system.gpu_memory_gb) * GIB)
    target = int(lo * int(cap * 0.99))
    return PlannerParams(
        capacity=cap,
        target=target,
        loosen=lo,
        cpu_line=int(float(system.host_memory_gb) * GIB),
        b_ssd=float(system.ssd_bandwidth_gbps) * GIB / 1e6,
        b_cpu=float(system.host_link_gbps) * GIB / 1e6,
        ssd_lat=float(system.ssd_latency_us),
        sys_lat=float(system.fault_latency_us),
        delta=float(delta),
        malloc_uspB=float(system.gpu_malloc_us_per_byte),
        options=dict(opts, gds=gds),
    )


def plan_g10(
    workload,
    vitality,
    cfg,
    *,
    gds: str | None = None,
    loosen: float | None = None,
    max_iterations: int | None = None,
    delta: float | None = None,
    shape=None,
    **options,
) -> MigrationPlan:
    """G10's plan (spec §5.2–§5.7; with gds='ssd'/'full' the G10GDS* variant of §6.5:
    loosened target, no pre-alloc/dealloc hints, §5.8's extra evictions at the peak).

    Options (see OPTIONS; all True = the artifact's behaviour): o3_early_exit,
    o5_looped_area, o8_double_count_input, o10_break_on_zero_area, o11_short_stalls,
    o12_empty_window_crowded, o13_cumulative_spill, o14_reserve_without_eviction,
    o16_hoist_overshoot. `loosen` overrides O-15's target multiplier; `max_iterations`
    bounds the main loop (default: the number of intervals, as in G10)."""
    t0 = time.perf_counter()
    p = planner_params(cfg, gds=gds, loosen=loosen, delta=delta, shape=shape, **options)
    o = p.options
    w, v = workload, vitality
    K, T = w.num_kernels, w.num_tensors
    if v.birth.shape[0] != T or v.time_us.shape[0] != K + 1:
        raise ValueError("vitality does not belong to this workload")
    size = np.asarray(w.size, dtype=np.int64)
    is_global = np.asarray(w.is_global, dtype=np.bool_)
    total_mem = int(size.sum()) + (int(size[0]) if o["o8_double_count_input"] and T else 0)
    I = v.num_intervals
    hints = np.zeros((2 * T + 2 * I + 8, 4), dtype=np.int64)
    est = np.zeros(K, dtype=np.int64)
    nh, visited = aot.entry(gk.pass_b)(
        v.time_us,
        size,
        is_global,
        v.birth.astype(np.int64),
        v.death.astype(np.int64),
        total_mem,
        p.target,
        p.malloc_uspB,
        o["o3_early_exit"],
        gds is None,
        est,
        hints,
        0,
    )
    n_prealloc_hints = nh
    est_prealloc = est.copy()
    hill_index = int(np.argmax(est)) if K else 0

    # bandwidth lanes (R_ssd, W_ssd, R_pcie, W_pcie): capacity per kernel in bytes
    dur = np.diff(v.time_us)
    cap = np.zeros((4, K), dtype=np.float64)
    cap[gk.L_RSSD] = cap[gk.L_WSSD] = p.b_ssd * dur
    cap[gk.L_RPCIE] = cap[gk.L_WPCIE] = p.b_cpu * dur
    bw = np.zeros((4, K), dtype=np.float64)
    full = np.zeros((4, K), dtype=np.bool_)
    cpu_est = np.zeros(K, dtype=np.int64)
    bits = sum(b for name, (b, _, _) in OPTIONS.items() if b is not None and o[name])
    iv_size = size[v.iv_tensor].astype(np.int64)
    decision = np.zeros(I, dtype=np.int8)
    evict_finish = np.full(I, -1, dtype=np.int64)
    prefetch_orig = np.full(I, -1, dtype=np.int64)
    prefetch_final = np.full(I, -1, dtype=np.int64)
    order = np.zeros(I, dtype=np.int64)
    selected = np.full(I, -1, dtype=np.int64)
    cyc = np.asarray(w.exec_cycles, dtype=np.int64)
    max_iter = I if max_iterations is None else int(max_iterations)
    nh, iterations, n_off = aot.entry(gk.main_loop)(
        v.iv_tensor.astype(np.int64),
        v.iv_start.astype(np.int64),
        v.iv_end.astype(np.int64),
        v.iv_looped.astype(np.bool_),
        v.iv_time_us.astype(np.float64),
        iv_size,
        v.time_us,
        v.time_ext_us,
        cyc,
        est,
        cpu_est,
        cap,
        bw,
        full,
        p.capacity,
        p.target,
        p.cpu_line,
        p.b_ssd,
        p.b_cpu,
        p.ssd_lat,
        p.sys_lat,
        p.delta,
        bits,
        hints,
        nh,
        decision,
        evict_finish,
        prefetch_orig,
        prefetch_final,
        order,
        selected,
        max_iter,
    )
    est_main = est.copy()
    # §5.7: by planned prefetch kernel; ties as std::sort leaves them (O-21 option)
    off = order[:n_off]
    if o["o21_cxx_prefetch_order"]:
        off = off[cxx_sort_order(prefetch_orig[off])]
    else:
        off = off[np.argsort(prefetch_orig[off], kind="stable")]
    nh = aot.entry(gk.place_prefetches)(
        off,
        n_off,
        evict_finish,
        prefetch_orig,
        prefetch_final,
        v.iv_tensor.astype(np.int64),
        iv_size,
        est,
        p.target,
        o["o16_hoist_overshoot"],
        hints,
        nh,
    )
    if gds is not None:
        nh = _gds_final_pass(v, iv_size, est, hill_index, p.target, decision, hints, nh)
    emitted = hints[:nh].copy()
    return MigrationPlan(
        policy="prefetch_lru" if gds is None else ("G10GDSSSD" if gds == "ssd" else "G10GDSFULL"),
        num_kernels=K,
        hints=sort_hints(emitted),
        emitted=emitted,
        iv_tensor=v.iv_tensor.astype(np.int32),
        iv_start=v.iv_start.astype(np.int32),
        iv_end=v.iv_end.astype(np.int32),
        iv_looped=v.iv_looped.astype(bool),
        iv_time_us=v.iv_time_us.astype(np.float64),
        iv_decision=decision,
        iv_evict_finish=evict_finish,
        iv_prefetch_planned=prefetch_orig,
        iv_prefetch=prefetch_final,
        iv_selected=selected,
        est_prealloc=est_prealloc,
        est_main=est_main,
        est_final=est.copy(),
        cpu_est=cpu_est,
        lane_capacity=cap,
        lane_planned=bw,
        lane_full=full,
        capacity=p.capacity,
        target=p.target,
        info={
            "loosen": p.loosen,
            "main_loop_iterations": int(iterations),
            "prealloc_tensors_visited": int(visited),
            "prealloc_hints": int(n_prealloc_hints),
            "hill_index": hill_index,
            "options": o,
            "plan_seconds": time.perf_counter() - t0,
        },
    )


def _gds_final_pass(v, iv_size, est, hill_index, target, decision, hints, nh):
    """§5.8: extra SSD evictions (no prefetch) of intervals around the peak kernel."""
    hill_mem = int(est[hill_index])
    tsz = v.iv_time_us * iv_size
    extra = []
    for c in np.argsort(-tsz, kind="stable"):
        if hill_mem < 0.9 * target:
            break
        if decision[c] in (gk.D_SSD, gk.D_HOST, gk.D_GDS_SSD):
            continue
        s, e = int(v.iv_start[c]), int(v.iv_end[c])
        if not v.iv_looped[c] and s <= hill_index < e:
            extra.append((s, int(v.iv_tensor[c]), gk.NOT_KNOWN, gk.IN_SSD))
            decision[c] = gk.D_GDS_SSD
            est[s + 1 : e] -= iv_size[c]
            hill_mem -= int(iv_size[c])
    if extra:
        if nh + len(extra) > hints.shape[0]:
            raise AssertionError("hint buffer too small")
        hints[nh : nh + len(extra)] = np.asarray(extra, dtype=np.int64)
        nh += len(extra)
    return nh


def gpu_memory_needed(workload) -> int:
    """Bytes the planner would have to fit (spec §5.2's total_mem without O-8)."""
    return int(np.asarray(workload.size, dtype=np.int64).sum())
