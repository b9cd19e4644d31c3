"""The tensor engine's registry record (g10fast.engine.registry)."""

from g10fast.engine.registry import EngineRecord

RECORD = EngineRecord(
    "tensor",
    "g10fast.engine.tensor.run:run_tensor_engine",
    "the artifact's tensor-granular FN engine: explicit allocation, GDS and host transfers",
    mode="g10fast.engine.tensor.mode:TensorMode",
    allocator=True,
    lp_bound=True,
    lp_model="g10fast.engine.tensor.run:lp_model",
    kernels=("g10fast.engine.tensor.kernels",),
)
