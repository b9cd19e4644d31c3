"""SINGA's swap planner (`singa_swap`) and AppObMem (`appobmem`) on g10fast's models, run
through the tensor engine (docs/allocators.md, "Policies on the models").

The workload becomes its allocation trace (E5: kernel k's tensors read/written at its ops,
malloc at first use, free after last use; weights never freed), three iterations long; the
planner of g10fast.alloc.swap plans the middle one under the memory limit. `swap_hints` turns
the plan into the tensor engine's hint rows (kernel, tensor, NOT_KNOWN, IN_CPU | IN_GPU): a
swap-out issued at the kernel after the block's last use, a swap-in at the kernel where the
planner starts it. The tensor engine (g10fast.engine.tensor, unchanged; mode G10GDSFULL with
its artifact quirks off, the whole host link as its host lane, and room for every tensor)
runs the iteration with the workload's kernel times and explicit host-link transfers: its
time is the result. The allocator (a run option, `--allocator`, or the policy's `allocator`)
then places the engine's allocations and frees (`from_tensor_events`): its peak reserved
bytes are the GPU memory the policy needs (`gpu_memory_needed_bytes`). A need above the
GPU's memory lowers the planner's limit by the excess and plans again (`fit_allocator`, up to
`fit_rounds` times); still above it, the run fails saying by how much. The runner is
g10fast.engine.swap.run.run_swap_engine; the plan's conversion g10fast.engine.swap.hints."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from g10fast.engine.swap.hints import (
    ENGINE_OPTIONS,  # noqa: F401  (re-exported)
    absolute_kernels,  # noqa: F401
    swap_hints,  # noqa: F401  (re-exported)
    swapped_iteration,  # noqa: F401  (re-exported)
)
from g10fast.engine.swap.mode import SwapMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    #: SwapGPU::Plan's majority voting (seed-policies §2.3); any of g10fast.alloc.swap.SCORES
    score: str = "vote"
    limit_fraction: float = 0.0  # limit = this × the peak load; 0: the GPU's memory
    allocator: str = "singa_colour"  # cuda_malloc | cnmem | pytorch | singa_colour | bump
    link: str = "preset"  # preset (host link of the system) | singa_measured
    mode: str = "stick_to_limit"  # stick_to_limit | no_overhead
    faithful_quirks: bool = False  # WDOA = 0, DOA = gap - 2 T_out
    #: [ours] the limit derived from the GPU's memory is lowered by the allocator's excess
    #: (need - GPU memory) and the iteration planned again, at most `fit_rounds` times
    fit_allocator: bool = True
    fit_rounds: int = 4
    #: [ours] plan the steady state: a chosen swap's bytes leave the load in the iterations
    #: before and after too (plan_swaps' `periodic`), as the engine's run shows them
    periodic: bool = True

    def check(self):
        from g10fast.alloc.swap import SCORES

        if self.score not in SCORES:
            raise InputError(f"must be one of {', '.join(SCORES)}, got {self.score!r}", param="policy.score")
        if not 0.0 <= self.limit_fraction <= 1.0:
            raise InputError(f"must be in [0, 1], got {self.limit_fraction}", param="policy.limit_fraction")
        from g10fast.alloc.allocators import ALLOCATORS

        if self.allocator not in ALLOCATORS:
            raise InputError(
                f"must be one of {', '.join(ALLOCATORS)}, got {self.allocator!r}", param="policy.allocator"
            )
        if self.link not in ("preset", "singa_measured"):
            raise InputError(f"must be preset or singa_measured, got {self.link!r}", param="policy.link")
        if (
            isinstance(self.fit_rounds, bool)
            or not isinstance(self.fit_rounds, int)
            or not 0 <= self.fit_rounds <= 20
        ):
            raise InputError(
                f"must be an integer in 0..20, got {self.fit_rounds!r}", param="policy.fit_rounds"
            )
        if self.mode not in ("stick_to_limit", "no_overhead"):
            raise InputError(f"must be stick_to_limit or no_overhead, got {self.mode!r}", param="policy.mode")


@dataclass(frozen=True)
class AppObOptions(Options):
    score: str = "aoa"
    allocator: str = "cnmem"
    #: E6: plan on the times of a profile run under this policy ("lru": Base UVM on the
    #: page engine, its fault-distorted kernel times, seed-policies §3.3), then schedule the
    #: chosen swaps on the real (nominal) times; "none": plan on the nominal times
    profile_policy: str = "lru"
    #: appob.trace: "alloc_free_access" (reads and writes seen) | "alloc_free_only" [ours]:
    #: addresses from malloc/free only (g10fast.alloc.swap.plan_swaps `accesses`)
    trace: str = "alloc_free_access"

    def check(self):
        super().check()
        if self.trace not in ("alloc_free_access", "alloc_free_only"):
            raise InputError(
                f"must be alloc_free_access or alloc_free_only, got {self.trace!r}", param="policy.trace"
            )
        if self.profile_policy not in ("lru", "none"):
            raise InputError(
                f"must be lru or none, got {self.profile_policy!r}", param="policy.profile_policy"
            )


def _mode(planner: str):
    """engine_mode of a swap policy: its options, by name, as the swap engine's SwapMode."""

    def engine_mode(options, engine) -> SwapMode:
        return SwapMode(planner=planner, **dataclasses.asdict(options))

    return engine_mode


RECORDS = (
    PolicyRecord(
        name="singa_swap",
        display="SINGA-Swap",
        engine="swap",
        plan_depends_on_host=False,
        options=Options,
        engine_mode=_mode("singa_swap"),
        paper="SINGA's SwapGPU planner (Zhang et al., arXiv 1903.06631)",
        description="peak-straddling swap candidates, DOA/AOA/WDOA/vote, greedy to the "
        "limit, stick-to-limit schedule on two DMA channels",
        order=80,
        colour="#8c564b",
    ),
    PolicyRecord(
        name="appobmem",
        display="AppObMem",
        engine="swap",
        plan_depends_on_host=False,
        options=AppObOptions,
        engine_mode=_mode("appobmem"),
        paper="AppObMem (Li et al., ACM TACO 2022), as modelled [ours]",
        description="address-level trace-driven swapping: blocks only, AOA, swap-out as soon "
        "as possible, swap-in as late as possible",
        order=81,
        colour="#e377c2",
    ),
)
