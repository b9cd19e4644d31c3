"""The optimal schedule of the fluid model (g10fast.analysis.bounds_lp.milp_optimum) as a
page-engine plan: the oracle that `g10fast run --policy prefetch_lru --plan-in FILE` replays
(docs/bounds.md)."""

from __future__ import annotations

import numpy as np

from g10fast.planner.plan import MigrationPlan

TO_GPU, TO_HOST, TO_SSD, NOT_PRESENT, NOT_KNOWN = 3, 2, 1, 0, 4


def plan_from_schedule(res, model, *, to: int = TO_HOST) -> MigrationPlan:
    """The MILP's schedule (`res`, an LPResult of `milp_optimum(model)`) as a page-engine plan,
    in G10's hint vocabulary: every non-global tensor pre-allocated the kernel before its first
    use and freed after its last (so that no kernel faults on a new or a dead tensor); per gap
    the schedule keeps off the GPU, a pre-eviction (`to`: 2 host, 1 SSD) at the first kernel it
    is off and a prefetch at the kernel whose start begins its fetch."""
    K = int(model.num_kernels)
    rows = []
    glob_lo0 = set()
    for x in range(len(model.size)):
        if model.lo[x] < 0:
            continue
        first = int(model.use_k[model.use_ptr[x]])
        if model.lo[x] == 0 and first > 0:
            glob_lo0.add(x)  # a global: live from kernel 0, never freed
            continue
        rows.append((max(first - 1, 0), x, NOT_KNOWN, TO_GPU))
        if model.hi[x] + 1 <= K:
            rows.append((int(model.hi[x]) + 1, x, NOT_KNOWN, NOT_PRESENT))
    for s in res.schedule:
        rows.append((s["off"][0], s["tensor"], NOT_KNOWN, to))
        rows.append((s["fetch_kernel"], s["tensor"], NOT_KNOWN, TO_GPU))
    rows.sort(key=lambda r: (r[0], r[3] == TO_GPU))
    h = np.asarray(rows, np.int64).reshape(-1, 4)
    return MigrationPlan(
        policy="optimal",
        num_kernels=K,
        hints=h,
        emitted=h,
        info={"milp_time": res.time, "optimal": bool(res.optimal)},
    )


def plan_from_engine_schedule(
    sched, model, is_global, *, to: int = TO_HOST, prealloc_before: bool = False
) -> MigrationPlan:
    """The engine-shaped MILP's schedule (`milp_engine_schedule`) as a page-engine plan: every
    non-global tensor allocated at the start of its first use's kernel (`prealloc_before`:
    the kernel before) and freed after its last use; per move a pre-eviction at the kernel
    whose slot starts its write-out and a prefetch at the kernel whose start begins its fetch
    (kernels of a weight's wrap gap are those of the next iteration, the plan being replayed
    every iteration)."""
    K = int(model.num_kernels)
    glob = np.asarray(is_global, bool)
    rows = []
    for x in range(len(model.size)):
        if model.lo[x] < 0 or glob[x]:
            continue
        first = int(model.use_k[model.use_ptr[x]])
        rows.append((max(first - 1, 0) if prealloc_before else first, x, NOT_KNOWN, TO_GPU))
        if model.hi[x] + 1 <= K:
            rows.append((int(model.hi[x]) + 1, x, NOT_KNOWN, NOT_PRESENT))
    for mv in sched.moves:
        rows.append((mv["evict_kernel"], mv["tensor"], NOT_KNOWN, to))
        if mv["fetch_kernel"] >= 0:
            rows.append((mv["fetch_kernel"], mv["tensor"], NOT_KNOWN, TO_GPU))
    rows.sort(key=lambda r: (r[0], r[3] == TO_GPU))
    h = np.asarray(rows, np.int64).reshape(-1, 4)
    return MigrationPlan(
        policy="optimal",
        num_kernels=K,
        hints=h,
        emitted=h,
        info={"milp_time": sched.time, "optimal": bool(sched.optimal), "engine_shaped": True},
    )
