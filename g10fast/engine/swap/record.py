"""The swap engine's registry record (g10fast.engine.registry)."""

from g10fast.engine.registry import EngineRecord

RECORD = EngineRecord(
    "swap",
    "g10fast.engine.swap.run:run_swap_engine",
    "trace-driven swap plans (SINGA, AppObMem) run on the tensor engine as host-link hints, "
    "placed by an offset-level allocator",
    mode="g10fast.engine.swap.mode:SwapMode",
    allocator=True,
    kernels=("g10fast.engine.tensor.kernels", "g10fast.alloc.kernels"),
)
