"""DeepUM as published (`deepum-learned`; anchors.md §1), on the driver engine.

Iteration 1 runs as naive UM while DeepUM's correlation tables learn, per kernel, the UM
blocks (2 MiB VA blocks) that faulted during it and which kernel followed it (in a training
loop, the next one). From iteration 2, at each kernel launch the prefetcher follows the
successor chain `prefetch_degree` kernels ahead and prefetches the blocks those kernels
faulted on (each block once per launch). Freed memory is invalidated: a non-weight tensor
written during the iteration is discarded after its last use, with no write-back.
Pre-eviction: at kernel k, the blocks kernel k - 1 faulted on that none of kernels
k .. k + degree did are migrated to the host on the prefetch stream, while the GPU is more
than `pre_evict_fraction` full when the request is processed (the fraction is ours)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from g10fast.engine.driver.mode import DriverMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    #: kernels of look-ahead along the learned successor chain
    prefetch_degree: int = 8
    #: discard a freed tensor's pages (no write-back) after its last use
    invalidate_freed: bool = True
    #: DeepUM's pre-eviction of blocks outside the look-ahead window (off by default: on the
    #: one FIFO prefetch stream it delays the prefetches and slows DeepUM down, e.g. BERT 32
    #: at 1.5x oversubscription 0.727 of Ideal with it, 0.790 without; docs/driver-engine.md)
    pre_evict: bool = False
    #: pre-evict only while the GPU holds more than this fraction of its pages [ours]
    pre_evict_fraction: float = 0.9

    def check(self):
        if self.prefetch_degree < 1:
            raise InputError(f"must be >= 1, got {self.prefetch_degree}", param="policy.prefetch_degree")
        if not 0.0 <= self.pre_evict_fraction <= 1.0:
            raise InputError(
                f"must be in [0, 1], got {self.pre_evict_fraction}", param="policy.pre_evict_fraction"
            )


def learned_hints(
    w,
    fault_k,
    fault_b,
    degree: int,
    n_iter: int,
    invalidate: bool,
    pre_evict: bool = False,
    pre_evict_fraction: float = 0.9,
):
    """DriverHints from iteration 1's fault log (kernel, block): from iteration 2, at kernel
    k, the blocks of kernel k + degree (and at the first kernel, of k + 1 .. k + degree)."""
    from g10fast.engine.driver import HINT_KINDS, DriverHints
    from g10fast.engine.driver.kernels import VA_PAGES

    K, P = w.num_kernels, w.num_pages
    table = [[] for _ in range(K)]
    for k, b in zip(fault_k.tolist(), fault_b.tolist()):
        table[k].append(b)
    rows = []  # (issue, start, n, kind)

    def block_rows(g, k2):
        for b in table[k2 % K]:
            s = b * VA_PAGES
            rows.append((g, s, min(VA_PAGES, P - s), HINT_KINDS["prefetch"]))

    death = {}
    if invalidate:
        written = set(w.out_idx.tolist())
        for k in range(K):
            for t in list(w.inputs(k)) + list(w.outputs(k)):
                t = int(t)
                if not w.is_global[t] and t in written and w.n_pages[t] > 0:
                    death[t] = k
    dies = [[] for _ in range(K)]
    for t, k in death.items():
        dies[k].append(t)
    for it in range(1, n_iter):
        for k in range(K):
            g = it * K + k
            if it == 1 and k == 0:
                for d in range(1, degree + 1):
                    block_rows(g, k + d)
            else:
                block_rows(g, k + degree)
    if pre_evict:
        for it in range(1, n_iter):
            for k in range(K):
                ahead = set()
                for d in range(0, degree + 1):
                    ahead.update(table[(k + d) % K])
                for b in table[(k - 1) % K]:
                    if b not in ahead:
                        s = b * VA_PAGES
                        rows.append((it * K + k, s, min(VA_PAGES, P - s), HINT_KINDS["preevict"]))
    for it in range(1, n_iter):
        for k in range(K):
            for t in dies[k - 1] if k > 0 else []:
                rows.append((it * K + k, int(w.start_page[t]), int(w.n_pages[t]), HINT_KINDS["discard"]))
    rows.sort(key=lambda r: r[0])
    a = np.asarray(rows, np.int64).reshape(-1, 4)
    return DriverHints(
        a[:, 0].copy(),
        a[:, 1].copy(),
        a[:, 2].copy(),
        a[:, 3].copy(),
        preevict_fraction=float(pre_evict_fraction),
    )


def planner(ctx):
    from g10fast.engine.driver import simulate_driver

    opts = RECORD.engine_mode(ctx.options, ctx.engine).options(ctx.engine.compat)
    n_iter = int(ctx.engine.num_iteration)
    prof = simulate_driver(ctx.workload, ctx.system, opts, None, num_iteration=1, log_iter=0)
    fk, fb = prof.fault_log
    h = learned_hints(
        ctx.workload,
        fk,
        fb,
        int(ctx.options.prefetch_degree),
        n_iter,
        bool(ctx.options.invalidate_freed),
        bool(ctx.options.pre_evict),
        float(ctx.options.pre_evict_fraction),
    )
    h.info.update({"learned_pairs": int(len(fk)), "prefetch_degree": int(ctx.options.prefetch_degree)})
    return h


RECORD = PolicyRecord(
    name="deepum_learned",
    display="DeepUM (learned)",
    engine="driver",
    plan_depends_on_host=True,
    planner=planner,
    options=Options,
    aliases=("deepum-learned",),
    paper="DeepUM (ASPLOS'23): correlation prefetching learned at run time",
    description="correlation tables learned in iteration 1, look-ahead block prefetch from "
    "iteration 2, pre-eviction outside the window, invalidation of freed tensors",
    order=135,
    colour="#17becf",
    sweep_cost=1.5,
    engine_mode=lambda options, engine: DriverMode(),
)
