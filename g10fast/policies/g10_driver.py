"""G10's plan on the driver engine (`g10@driver`): the same planner as `prefetch_lru`
(g10fast.planner.g10), its hints issued as cudaMemPrefetchAsync-style requests at the start
of their kernel: to the GPU -> prefetch, to host or SSD -> migrate to the host (the driver
cannot target an SSD; the host spills to it when full), pre-deallocation -> discard."""

from g10fast.engine.driver import tensor_hints
from g10fast.engine.driver.mode import DriverMode
from g10fast.policies.g10 import Options, quirks
from g10fast.policies.registry import PolicyRecord


def planner(ctx):
    from g10fast.planner.g10 import plan_g10

    plan = plan_g10(
        ctx.workload,
        ctx.vitality(),
        ctx.system,
        delta=ctx.options.delta,
        shape=ctx.shape,
        **quirks(ctx.options),
    )
    h = tensor_hints(ctx.workload, plan.hints, int(ctx.engine.num_iteration))
    h.info.update({"g10_hints": int(len(plan.hints))})
    return h


RECORD = PolicyRecord(
    name="g10_driver",
    display="G10@driver",
    engine="driver",
    plan_depends_on_host=True,
    planner=planner,
    options=Options,
    aliases=("g10@driver",),
    paper="G10 (MICRO'23)'s plan as prefetch hints to the real driver",
    description="G10's migrations as cudaMemPrefetchAsync hints; faults under the driver",
    order=160,
    colour="#aec7e8",
    sweep_cost=0.7,
    engine_mode=lambda options, engine: DriverMode(),
)
