"""DeepUM+'s prefetch on the driver engine (`deepum@driver`): the artifact's oracle
look-ahead (g10fast.planner.deepum: at kernel i, the tensors of kernel i + degree) issued as
cudaMemPrefetchAsync-style requests; eviction is the driver's."""

from g10fast.engine.driver import tensor_hints
from g10fast.engine.driver.mode import DriverMode
from g10fast.policies.deepum import Options
from g10fast.policies.registry import PolicyRecord


def planner(ctx):
    from g10fast.planner.deepum import plan_deepum

    plan = plan_deepum(ctx.workload, int(ctx.options.prefetch_degree))
    h = tensor_hints(ctx.workload, plan.hints, int(ctx.engine.num_iteration))
    h.info.update({"prefetch_degree": int(ctx.options.prefetch_degree)})
    return h


RECORD = PolicyRecord(
    name="deepum_driver",
    display="DeepUM+@driver",
    engine="driver",
    plan_depends_on_host=False,
    planner=planner,
    options=Options,
    aliases=("deepum@driver",),
    paper="DeepUM as G10's artifact models it, as prefetch hints to the real driver",
    description="oracle look-ahead prefetch of kernel i + degree's tensors; driver eviction",
    order=130,
    colour="#98df8a",
    sweep_cost=1.2,
    engine_mode=lambda options, engine: DriverMode(),
)
