"""Naive UM on the driver engine (`uvm`): demand paging under the real nvidia-uvm driver
(density prefetch, 2 MiB root-chunk eviction by allocation order), no hints: PUMP's and
DeepUM's "naive UM" baseline (docs/driver-engine.md).

As a framework really runs on managed memory: PyTorch has no managed-memory mode of its own;
the supported route is a CUDAPluggableAllocator whose alloc and free are cudaMallocManaged
and cudaFree (specs/uvm-hardware-facts.md §4.3), so every tensor that is not a weight is
allocated at its first use, first-touched (zero-fill faults) afresh every iteration and
freed with a device-synchronising cudaFree after its last use (§4.1; the driver engine's
`fresh_allocations`, the free's cost the preset's measured `managed_free_us`). The engine
option `prefetch_at_alloc = true` is the same allocator with a cudaMemPrefetchAsync at
each allocation (§5 E1's "with prefetch"); `fresh_allocations = false` a caching allocator
over one managed arena."""

from g10fast.engine.driver.mode import DriverMode
from g10fast.policies.registry import PolicyRecord

RECORD = PolicyRecord(
    name="uvm",
    display="UVM (driver)",
    engine="driver",
    plan_depends_on_host=False,
    aliases=("naive-um", "naive um"),
    paper="CUDA unified memory under the nvidia-uvm driver's defaults",
    description="demand paging: 256-fault batches, 64 KiB big pages, density prefetch, 2 MiB "
    "root chunks evicted in allocation order; tensors allocated and freed "
    "(cudaMallocManaged / cudaFree) every iteration",
    order=110,
    colour="#8c564b",
    engine_mode=lambda options, engine: DriverMode.of(fresh_allocations=True),
)
