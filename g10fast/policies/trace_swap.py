"""SINGA's swap planner (`singa_swap`) and AppObMem (`appobmem`) on g10fast's models, on the
`swap` engine (docs/allocators.md, "Policies on the models").

The workload becomes its allocation trace (E5: kernel k's tensors read/written at its ops,
malloc at first use, free after last use; weights never freed), three iterations long; the
planner of g10fast.alloc.swap plans the middle one under the memory limit, with explicit
swaps over the host link (E7: two FIFO channels, the preset's link bandwidth and latency, or
SINGA's measured costs); the iteration takes the kernel time of the workload plus the waits
for transfers. The allocator (a run option) then places the planned iteration's blocks with
the swaps' frees and mallocs in them (`swapped_iteration`; the runner is
g10fast.run.run_swap_engine) (SINGA's SwapPool semantics): the GPU memory the policy
needs is that allocator's peak reserved bytes. A need above the GPU's memory is a failed run
whose failure says by how much."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    score: str = "vote"             # doa | aoa | wdoa | vote
    limit_fraction: float = 0.0     # limit = this × the peak load; 0: the GPU's memory
    allocator: str = "singa_colour"  # cuda_malloc | cnmem | pytorch | singa_colour | bump
    link: str = "preset"            # preset (host link of the system) | singa_measured
    mode: str = "stick_to_limit"    # stick_to_limit | no_overhead
    faithful_quirks: bool = False   # WDOA = 0, DOA = gap - 2 T_out

    def check(self):
        if self.score not in ("doa", "aoa", "wdoa", "vote"):
            raise InputError(f"must be doa, aoa, wdoa or vote, got {self.score!r}",
                             param="policy.score")
        if not 0.0 <= self.limit_fraction <= 1.0:
            raise InputError(f"must be in [0, 1], got {self.limit_fraction}",
                             param="policy.limit_fraction")
        from g10fast.alloc.allocators import ALLOCATORS
        if self.allocator not in ALLOCATORS:
            raise InputError(f"must be one of {', '.join(ALLOCATORS)}, got "
                             f"{self.allocator!r}", param="policy.allocator")
        if self.link not in ("preset", "singa_measured"):
            raise InputError(f"must be preset or singa_measured, got {self.link!r}",
                             param="policy.link")
        if self.mode not in ("stick_to_limit", "no_overhead"):
            raise InputError(f"must be stick_to_limit or no_overhead, got {self.mode!r}",
                             param="policy.mode")


@dataclass(frozen=True)
class AppObOptions(Options):
    score: str = "aoa"
    allocator: str = "cnmem"
    #: E6: plan on the times of a profile run under this policy ("lru": Base UVM on the
    #: page engine, its fault-distorted kernel times, seed-policies §3.3), then schedule the
    #: chosen swaps on the real (nominal) times; "none": plan on the nominal times
    profile_policy: str = "lru"

    def check(self):
        super().check()
        if self.profile_policy not in ("lru", "none"):
            raise InputError(f"must be lru or none, got {self.profile_policy!r}",
                             param="policy.profile_policy")


def swapped_iteration(trace, plan):
    """The planned iteration's malloc/free ops with each swap's free (when its swap-out ends)
    and malloc (when its swap-in starts): an AllocTrace for the allocator. Blocks live when
    the iteration starts are malloc'd first."""
    from g10fast.alloc.trace import FREE, MALLOC, AllocTrace
    s, e = plan.start, plan.start + plan.length
    B = int(trace.block.max()) + 1 if trace.num_ops else 0
    mal = np.full(B, trace.num_ops, np.int64)
    fre = np.full(B, trace.num_ops, np.int64)
    m = trace.kind == MALLOC
    mal[trace.block[m]] = np.nonzero(m)[0]
    f = trace.kind == FREE
    fre[trace.block[f]] = np.nonzero(f)[0]
    bsize = np.zeros(B, np.int64)
    bsize[trace.block[m]] = trace.size[m]
    ev = []                                  # (key, tie, kind, block, new copy)
    for b in np.nonzero((mal < s) & (fre >= s))[0].tolist():
        ev.append((-1.0, 1, MALLOC, b, False))
    for j in range(s, e):
        k = int(trace.kind[j])
        if k <= FREE:
            ev.append((float(j - s), 0 if k == FREE else 1, k, int(trace.block[j]), False))
    for q in range(plan.num_swaps):
        b = int(plan.block[q])
        lo, hi = int(plan.out_end_idx[q]), int(plan.in_start_idx[q])
        if lo >= e - s:
            continue
        ev.append((max(lo, -1) + 0.5, 0, FREE, b, False))
        if hi < e - s:
            ev.append((hi - 0.5, 1, MALLOC, b, True))
    ev.sort(key=lambda x: (x[0], x[1]))
    cur: dict = {}
    kinds, blocks, sizes = [], [], []
    nxt = 0
    for _, _, k, b, new in ev:
        if k == MALLOC:
            if b in cur and not new:
                continue
            cur[b] = nxt
            nxt += 1
            kinds.append(MALLOC)
        else:
            if cur.get(b) is None:
                continue
            kinds.append(FREE)
        blocks.append(cur[b])
        sizes.append(int(bsize[b]))
        if k == FREE:
            cur[b] = None
    n = len(kinds)
    blocks = np.asarray(blocks, np.int64)
    return AllocTrace(trace.name + "-swapped", np.asarray(kinds, np.int8), blocks,
                      np.asarray(sizes, np.int64), np.arange(n, dtype=np.int64), blocks,
                      np.zeros(n, np.int16), {})


RECORDS = (
    PolicyRecord(
        name="singa_swap", display="SINGA-Swap", engine="swap", plan_depends_on_host=False,
        options=Options, paper="SINGA's SwapGPU planner (Zhang et al., arXiv 1903.06631)",
        description="peak-straddling swap candidates, DOA/AOA/WDOA/vote, greedy to the "
                    "limit, stick-to-limit schedule on two DMA channels",
        order=80, colour="#8c564b"),
    PolicyRecord(
        name="appobmem", display="AppObMem", engine="swap", plan_depends_on_host=False,
        options=AppObOptions, paper="AppObMem (Li et al., ACM TACO 2022), as modelled [ours]",
        description="address-level trace-driven swapping: blocks only, AOA, swap-out as soon "
                    "as possible, swap-in as late as possible",
        order=81, colour="#e377c2"),
)
