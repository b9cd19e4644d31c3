"""Workloads: the tensors and kernels of one training iteration, as plain arrays."""

from g10fast.workload.model import Graph, Workload, PAGE_SIZE, csr_from_lists

__all__ = ["Graph", "Workload", "PAGE_SIZE", "csr_from_lists"]
