"""The ranks engine's registry record (g10fast.engine.registry)."""

from g10fast.engine.registry import EngineRecord

RECORD = EngineRecord(
    "ranks",
    "g10fast.engine.ranks.run:run_ranks_engine",
    "N data-parallel GPUs of a node as one rank: collectives on its links, the CPU's "
    "optimizer, PCIe and NVMe (DeepSpeed's ZeRO)",
    mode="g10fast.engine.ranks.zero:ZeroMode",
    timeline="g10fast.engine.ranks:timeline_json",
    summary="g10fast.engine.ranks:summary_lines",
    warm_system="dgx-a100-40",
)
