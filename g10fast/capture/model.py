"""What a capture needs of a user's training step: `Model`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from g10fast.errors import InputError

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
#: "bf16-autocast": fp32 parameters, gradients and optimizer state; forward under
#: torch.autocast(bfloat16) (PyTorch AMP)
AUTOCAST = {"bf16-autocast": torch.bfloat16, "fp16-autocast": torch.float16}


@dataclass
class Model:
    """A training step to capture.

    module:    () -> nn.Module; called under torch.device("meta") (no memory, no init)
    inputs:    () -> (tuple of forward arguments, target); called on fake CPU tensors
    loss:      (output, target) -> scalar loss
    optimizer: (parameters) -> torch.optim.Optimizer
    dtype:     parameter dtype name (DTYPES), or an autocast mode (AUTOCAST)"""

    name: str
    module: Callable
    inputs: Callable
    loss: Callable
    optimizer: Callable
    batch: int
    dtype: str = "float32"
    meta: dict = field(default_factory=dict)

    def param_dtype(self) -> torch.dtype:
        if self.dtype in AUTOCAST:
            return torch.float32
        if self.dtype not in DTYPES:
            raise InputError(
                f"unknown dtype {self.dtype!r} (known: {', '.join(list(DTYPES) + list(AUTOCAST))})",
                param="--dtype",
            )
        return DTYPES[self.dtype]

    def autocast_dtype(self):
        return AUTOCAST.get(self.dtype)


OPTIMIZERS = ("adamw", "adamw-foreach", "adamw-fused", "sgd", "sgd-momentum")


def adamw(kind="adamw"):
    """An optimizer factory by name: adamw (per-parameter for-loop, PyTorch's CPU default),
    adamw-foreach (multi-tensor, PyTorch's CUDA default), adamw-fused, sgd, sgd-momentum."""
    if kind not in OPTIMIZERS:
        raise InputError(f"unknown optimizer {kind!r} (known: {', '.join(OPTIMIZERS)})", param="--optimizer")

    def make(params):
        if kind.startswith("adamw"):
            return torch.optim.AdamW(
                params,
                lr=1e-4,
                foreach=kind == "adamw-foreach",
                fused=True if kind == "adamw-fused" else None,
            )
        return torch.optim.SGD(params, lr=0.1, momentum=0.9 if kind == "sgd-momentum" else 0.0, foreach=False)

    make.kind = kind
    return make
