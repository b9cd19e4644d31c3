"""Naive UM on the driver engine (`uvm`): demand paging under the real nvidia-uvm driver
(density prefetch, 2 MiB root-chunk eviction by allocation order), no hints: PUMP's and
DeepUM's "naive UM" baseline (docs/driver-engine.md)."""

from g10fast.policies.registry import PolicyRecord

RECORD = PolicyRecord(
    name="uvm", display="UVM (driver)", engine="driver", plan_depends_on_host=False,
    aliases=("naive-um", "naive um"),
    paper="CUDA unified memory under the nvidia-uvm driver's defaults",
    description="demand paging: 256-fault batches, 64 KiB big pages, density prefetch, 2 MiB "
                "root chunks evicted in allocation order",
    order=110, colour="#8c564b", extra={"driver": {}})
