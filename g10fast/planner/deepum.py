"""DeepUM+ as the artifact models it (planner spec §6.3): an oracle look-ahead prefetcher.

At kernel i, a NOT_KNOWN -> IN_GPU hint for every required tensor of kernel
(i + prefetch_degree) mod K. No pre-alloc/dealloc, no evictions; the engine's DEEPUM
eviction policy protects the pages of the running window (simulator spec §8.2).

Order within a kernel (O-20): G10 iterates a hash set; g10fast uses the engine's fixed order,
the kernel's inputs in ascending tensor id, then its outputs that are not inputs, ascending.
"""

from __future__ import annotations

import numpy as np

from g10fast.locations import IN_GPU, NOT_KNOWN
from g10fast.planner.plan import MigrationPlan
from g10fast.workload.model import required_csr  # noqa: F401  (moved there: the engines use it)


def deepum_hints(workload, degree: int) -> np.ndarray:
    """int64 [H, 4] rows (i, tensor, NOT_KNOWN, IN_GPU) for the tensors of kernel
    (i + degree) mod K, i = 0..K-1, in kernel order."""
    if int(degree) < 0:
        raise ValueError("prefetch degree must be >= 0")
    K = workload.num_kernels
    ptr, idx = required_csr(workload)
    target = (np.arange(K, dtype=np.int64) + int(degree)) % K
    counts = ptr[target + 1] - ptr[target]
    issued = np.repeat(np.arange(K, dtype=np.int64), counts)
    start = np.repeat(ptr[target], counts)
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    tensors = idx[start + within]
    return np.stack([issued, tensors, np.full_like(issued, NOT_KNOWN), np.full_like(issued, IN_GPU)], axis=1)


def plan_deepum(workload, degree: int) -> MigrationPlan:
    h = deepum_hints(workload, degree)
    return MigrationPlan(
        policy="deepUM",
        num_kernels=workload.num_kernels,
        hints=h,
        emitted=h,
        info={"prefetch_degree": int(degree)},
    )
