"""G10 (`prefetch_lru`): Smart Tensor Migration's plan of prefetches, pre-evictions,
pre-allocations and pre-deallocations, applied by the page engine (G10 planner spec §5).

Its options are G10's `delta` (the planner's delta_parameter) and every planner quirk named
after its O-n (`g10fast.planner.g10.OPTIONS`), True = the artifact's behaviour."""

import dataclasses

from g10fast.engine.page import PageMode
from g10fast.planner.g10 import OPTIONS
from g10fast.policies.registry import PolicyRecord

Options = dataclasses.make_dataclass(
    "Options",
    [("delta", float, dataclasses.field(default=0.5))]
    + [(k, bool, dataclasses.field(default=d)) for k, (_, d, _) in OPTIONS.items()],
    frozen=True,
)
Options.__module__ = __name__
Options.__doc__ = "G10's delta_parameter and its planner quirks: " + "; ".join(
    f"{k}: {doc}" for k, (_, _, doc) in OPTIONS.items()
)


def quirks(options) -> dict:
    return {k: getattr(options, k) for k in OPTIONS}


def planner(ctx):
    from g10fast.planner.g10 import plan_g10

    return plan_g10(
        ctx.workload,
        ctx.vitality(),
        ctx.system,
        delta=ctx.options.delta,
        shape=ctx.shape,
        **quirks(ctx.options),
    )


def engine_mode(options, engine):
    return PageMode(is_uvm=True, use_prefetch=True, num_iteration=engine.num_iteration)


RECORD = PolicyRecord(
    in_default_comparison=True,
    name="prefetch_lru",
    display="G10",
    engine="page",
    plan_depends_on_host=True,
    planner=planner,
    engine_mode=engine_mode,
    options=Options,
    aliases=("g10",),
    artifact="prefetch_lru",
    paper="G10 (MICRO'23): GPU + host + SSD unified memory",
    description="compile-time tensor vitality, planned evictions and prefetches over SSD and host",
    order=60,
    colour="#1f77b4",
    sweep_cost=0.7,
)
