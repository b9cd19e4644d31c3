"""G10-GDS (`G10GDSSSD`) and G10-Host (`G10GDSFULL`): G10's plan moved by explicit
GPUDirect-Storage transfers on the tensor engine, to the SSD only or to the SSD and host
(G10 planner spec §5.8, §6.5). G10-GDS runs with no host memory, as genconfigs.py writes it."""

from dataclasses import dataclass

from g10fast.engine.tensor.mode import TensorMode
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    delta: float = 0.5  # G10's delta_parameter


def _planner(gds: str):
    def planner(ctx):
        from g10fast.planner.g10 import plan_g10

        return plan_g10(
            ctx.workload, ctx.vitality(), ctx.system, gds=gds, shape=ctx.shape, delta=ctx.options.delta
        )

    return planner


GDS = PolicyRecord(
    in_default_comparison=True,
    name="G10GDSSSD",
    display="G10-GDS",
    engine="tensor",
    plan_depends_on_host=True,
    planner=_planner("ssd"),
    options=Options,
    aliases=("g10-gds", "g10gds"),
    artifact="G10GDSSSD",
    engine_mode=lambda options, engine: TensorMode("gds_ssd"),
    system_overrides={"host_memory_gb": 0.0},
    paper="G10 (MICRO'23) with GPUDirect Storage to the SSD only",
    description="G10's plan as explicit SSD transfers, no host memory",
    order=40,
    colour="#9467bd",
    sweep_cost=0.02,
)

HOST = PolicyRecord(
    in_default_comparison=True,
    name="G10GDSFULL",
    display="G10-Host",
    engine="tensor",
    plan_depends_on_host=True,
    planner=_planner("full"),
    options=Options,
    aliases=("g10-host", "g10host"),
    artifact="G10GDSFULL",
    engine_mode=lambda options, engine: TensorMode("gds_ssd_host"),
    paper="G10 (MICRO'23) with GPUDirect Storage to the SSD and host memory",
    description="G10's plan as explicit SSD and host transfers",
    order=50,
    colour="#8c564b",
    sweep_cost=0.02,
)

RECORDS = (GDS, HOST)
