"""The page engine's registry record (g10fast.engine.registry)."""

from g10fast.engine.registry import EngineRecord

RECORD = EngineRecord(
    "page",
    "g10fast.engine.page.run:run_page_engine",
    "the G10 artifact's page-level UVM engine, bit-exact (quirks O-n)",
    mode="g10fast.engine.page:PageMode",
    kernel_order=True,
    lp_bound=True,
    lp_model="g10fast.engine.page.run:lp_model",
    host_reuse="g10fast.engine.page.reuse",
    memory="g10fast.engine.page.run:memory_parts",
    kernels=("g10fast.engine.page.loop",),
    keep_buffers="g10fast.engine.page:keep_buffers",
)
