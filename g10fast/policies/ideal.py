"""Ideal: every page in GPU memory from the start (the artifact's lru configuration with
is_UVM 0, simulator spec §11.7): the iteration time with unlimited GPU memory."""

from g10fast.engine.page import PageMode
from g10fast.policies.registry import PolicyRecord


def engine_mode(options, engine):
    return PageMode(is_uvm=False, use_prefetch=False, num_iteration=engine.num_iteration)


RECORD = PolicyRecord(
    in_default_comparison=True,
    name="ideal",
    display="Ideal",
    engine="page",
    plan_depends_on_host=False,
    engine_mode=engine_mode,
    artifact="lru",
    g10_overrides={"is_UVM": False},
    paper="unlimited GPU memory (the normalisation of every figure)",
    description="all pages resident from the start, no transfers",
    order=0,
    colour="#d62728",
    sweep_cost=0.3,
)
