"""Capture a PyTorch training step on fake CPU tensors into a Workload (docs/capture.md).

Needs torch (the optional extra `g10fast[torch]`)."""

from g10fast.capture.core import (
    Capture,
    capture,
    capture_cli,
    graph_of,
    kernel_times,
    resolve_model,
    to_workload,
)
from g10fast.capture.model import Model, adamw

__all__ = [
    "Capture",
    "Model",
    "adamw",
    "capture",
    "capture_cli",
    "graph_of",
    "kernel_times",
    "resolve_model",
    "to_workload",
]
