"""What a policy tells the swap engine (its record's `engine_mode` returns a SwapMode): the
swap planner's settings (g10fast.alloc.swap.plan_swaps), the link, the allocator and how the
limit is fitted to it. The policies' options carry the same names (g10fast.policies.trace_swap)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SwapMode:
    """The swap engine's settings: `planner` (plan_swaps' policy name), `score`,
    `limit_fraction` (limit = this x the peak load; 0: the GPU's memory), `allocator` (the
    offset-level allocator, unless the run names one), `link` ("preset" or
    "singa_measured"), `mode` ("stick_to_limit" | "no_overhead"), `faithful_quirks`,
    `fit_allocator` and `fit_rounds` (lower the limit by the allocator's excess and plan
    again), `periodic` (plan the steady state), `profile_policy` (plan on the kernel times
    of a run under this policy first, through the pipeline's baseline callback; "none":
    nominal times) and `trace` (plan_swaps' `accesses`)."""

    planner: str
    score: str = "vote"
    limit_fraction: float = 0.0
    allocator: str = "singa_colour"
    link: str = "preset"
    mode: str = "stick_to_limit"
    faithful_quirks: bool = False
    fit_allocator: bool = True
    fit_rounds: int = 4
    periodic: bool = True
    profile_policy: str = "none"
    trace: str = "alloc_free_access"
