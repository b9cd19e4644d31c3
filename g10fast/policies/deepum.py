"""DeepUM+ (`deepUM`): the artifact's re-implementation of DeepUM's look-ahead prefetch with
its own eviction (G10 simulator spec §6.3, §8.2)."""

from dataclasses import dataclass

from g10fast.engine.page import PageMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options:
    prefetch_degree: int = 8  # kernels of look-ahead (genconfigs.py writes 8)

    def check(self):
        if self.prefetch_degree < 0:
            raise InputError(f"must be >= 0, got {self.prefetch_degree}", param="policy.prefetch_degree")


def planner(ctx):
    from g10fast.planner.deepum import plan_deepum

    return plan_deepum(ctx.workload, int(ctx.options.prefetch_degree))


def engine_mode(options, engine):
    return PageMode(
        is_uvm=True,
        use_prefetch=True,
        deepum=True,
        prefetch_degree=int(options.prefetch_degree),
        num_iteration=engine.num_iteration,
    )


RECORD = PolicyRecord(
    in_default_comparison=True,
    name="deepUM",
    display="DeepUM+",
    engine="page",
    plan_depends_on_host=False,
    planner=planner,
    engine_mode=engine_mode,
    options=Options,
    aliases=("deepum+",),
    artifact="deepUM",
    paper="DeepUM (ASPLOS'23) as G10's artifact re-implemented it",
    description="look-ahead prefetch of the next kernels' tensors, DeepUM's eviction",
    order=30,
    colour="#2ca02c",
    sweep_cost=1.2,
)
