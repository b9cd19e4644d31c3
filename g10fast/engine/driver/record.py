"""The driver engine's registry record (g10fast.engine.registry)."""

from g10fast.engine.registry import EngineRecord

RECORD = EngineRecord(
    "driver",
    "g10fast.engine.driver.run:run_driver_engine",
    "the real nvidia-uvm driver: 2 MiB VA blocks, fault batches, density prefetch, 2 MiB root-chunk eviction",
    mode="g10fast.engine.driver.mode:DriverMode",
    memory="g10fast.engine.driver.run:memory_parts",
    kernels=("g10fast.engine.driver.kernels",),
)
