"""FlashNeuron: offload of forward activations to the SSD over GPUDirect Storage, planned
before the run (G10 planner spec §6.7), on the tensor engine."""

from dataclasses import dataclass

from g10fast.engine.tensor.mode import TensorMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord

ORDERS = ("descending", "ascending")


@dataclass(frozen=True)
class Options:
    discovery_order: str = "descending"  # the artifact's candidate order (O-18 measured)

    def check(self):
        if self.discovery_order not in ORDERS:
            raise InputError(
                f"must be one of {', '.join(ORDERS)}, got {self.discovery_order!r}",
                param="policy.discovery_order",
            )


def planner(ctx):
    from g10fast.planner.flashneuron import is_vit1024, plan_flashneuron

    return plan_flashneuron(
        ctx.workload,
        ctx.vitality(),
        float(ctx.system.gpu_memory_gb),
        vit1024_hack=is_vit1024(ctx.shape),
        order=ctx.options.discovery_order,
    )


RECORD = PolicyRecord(
    in_default_comparison=True,
    name="FlashNeuron",
    display="FlashNeuron",
    engine="tensor",
    plan_depends_on_host=False,
    planner=planner,
    options=Options,
    aliases=("fn",),
    artifact="FlashNeuron",
    engine_mode=lambda options, engine: TensorMode("offload_set"),
    paper="FlashNeuron (FAST'21): SSD offload of activations",
    description="forward activations offloaded to the SSD, prefetched for the backward pass",
    order=20,
    colour="#ff7f0e",
    sweep_cost=0.02,
)
