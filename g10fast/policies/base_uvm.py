"""Base UVM (`lru`): demand paging under the artifact's UVM driver model, no hints
(G10 simulator spec §11; the paper's "Base UVM")."""

from g10fast.engine.page import PageMode
from g10fast.policies.registry import PolicyRecord


def engine_mode(options, engine):
    return PageMode(is_uvm=True, use_prefetch=False, num_iteration=engine.num_iteration)


RECORD = PolicyRecord(
    in_default_comparison=True,
    name="lru",
    display="Base UVM",
    engine="page",
    plan_depends_on_host=False,
    engine_mode=engine_mode,
    aliases=("base uvm", "baseuvm", "uvm-lru"),
    artifact="lru",
    paper="G10 (MICRO'23) baseline: CUDA unified memory, FIFO eviction",
    description="demand paging, no prefetch, the artifact's LRU (a FIFO, O-28)",
    order=10,
    colour="#7f7f7f",
    sweep_cost=1.0,
)
