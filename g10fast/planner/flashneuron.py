"""FlashNeuron's offload plan (planner spec §6.4, `scheduling_offload_flashneuron`).

Forward-only, SSD-only: forward activations still alive after `makeLoss` are offloaded, in the
order they are first seen over kernels 0..L-1, at the start of their last inactive period that
begins at or before makeLoss, until the rest fits under

    GPU_line = GPU bytes - weights - max_kernel_pages * 4096        (x 0.993 for ViT-1024, O-15)

If no plan fits, the artifact prints "@@@ Flashneuron cannot support this large model!" and
writes no result: here the plan comes back with ok = False and a reason.

Discovery order (O-20). G10 walks each kernel's `unordered_set<Tensor*>` inputs and outputs, so
the order among tensors first seen by the same kernel follows pointer hashes, and it decides
which tensors are offloaded when the threshold is crossed inside such a group. We use a fixed
order, selected by `order`:
  "inputs_outputs" (default): per kernel its inputs by ascending id, then its outputs by
      ascending id (the workload's ordered required list);
  "ascending": per kernel the union of inputs and outputs by ascending id;
  "descending": per kernel the union by descending id.
docs/tensor-engine.md reports how much the choice moves each Figure-11 result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from g10fast.analysis.vitality import Vitality
from g10fast.workload.model import (
    PAGE_SIZE,
    Workload,
    max_kernel_pages,  # noqa: F401
    required_sets,  # noqa: F401  (re-exported)
)

FN_ORDERS = ("inputs_outputs", "ascending", "descending")
VIT1024_FACTOR = 0.993  # O-15: "otherwise FlashNeuron crashes"


@dataclass(frozen=True)
class FlashNeuronPlan:
    ok: bool
    reason: str
    gpu_line: int  # bytes
    max_kernel_pages: int
    make_loss: int  # kernel index of makeLoss
    offload_tensor: np.ndarray  # int32, sorted (stably) by issue kernel
    offload_kernel: np.ndarray  # int32
    remaining_bytes: int  # forward bytes alive at makeLoss after the plan
    candidates: int  # number of offloadable tensors

    @property
    def chosen(self) -> np.ndarray:
        return self.offload_tensor


def make_loss_index(workload: Workload) -> int:
    """The makeLoss kernel; for a captured workload (no makeLoss, kernel phases in its meta,
    docs/capture.md) the last forward kernel, the one that computes the loss."""
    names = workload.kernel_name
    for k, n in enumerate(names):
        if n == "makeLoss":
            return k
    phases = workload.meta.get("kernel_phase")
    if phases is not None and "forward" in phases:
        return len(phases) - 1 - list(reversed(phases)).index("forward")
    raise ValueError("the workload has no makeLoss kernel")


def _discovery(workload: Workload, L: int, order: str) -> list:
    seen = set()
    lst = []
    for k in range(L):
        ins, outs = workload.inputs(k), workload.outputs(k)
        if order == "inputs_outputs":
            seq = list(ins) + [t for t in outs if t not in set(ins)]
        elif order == "ascending":
            seq = list(np.union1d(ins, outs))
        elif order == "descending":
            seq = list(np.union1d(ins, outs)[::-1])
        else:
            raise ValueError(f"unknown FlashNeuron discovery order {order!r} (one of {FN_ORDERS})")
        for t in seq:
            t = int(t)
            if t not in seen:
                seen.add(t)
                lst.append(t)
    return lst


def plan_flashneuron(
    workload: Workload,
    vit: Vitality,
    gpu_memory_gb: float,
    *,
    vit1024_hack: bool = False,
    order: str = "inputs_outputs",
) -> FlashNeuronPlan:
    """The offload plan. `vit1024_hack`: apply O-15's 0.993 factor (the caller decides whether
    the workload is ViT at batch 1024, see `is_vit1024`)."""
    L = make_loss_index(workload)
    gpu_line = int(gpu_memory_gb * 2**30)
    if vit1024_hack:
        gpu_line = int(gpu_line * VIT1024_FACTOR)
    mkp = max_kernel_pages(workload)
    gpu_line -= int(workload.weights_bytes) + mkp * PAGE_SIZE
    empty = np.zeros(0, np.int32)
    if gpu_line <= 0:
        return FlashNeuronPlan(
            False,
            f"weights and the largest kernel's working set do not fit (GPU line {gpu_line} B)",
            gpu_line,
            mkp,
            L,
            empty,
            empty,
            0,
            0,
        )
    g = np.asarray(workload.is_global, dtype=bool)
    death = vit.death
    size = workload.size
    cands = [t for t in _discovery(workload, L, order) if not g[t] and death[t] != -1 and death[t] > L]
    total = int(sum(int(size[t]) for t in cands))
    off_t, off_k = [], []
    for t in cands:
        if total < gpu_line:
            break
        a, b = int(vit.iv_ptr[t]), int(vit.iv_ptr[t + 1])
        starts = [int(s) for s in vit.iv_start[a:b] if s <= L]
        if not starts:
            continue
        off_t.append(t)
        off_k.append(starts[-1])
        total -= int(size[t])
    ot = np.asarray(off_t, dtype=np.int32)
    ok_ = np.asarray(off_k, dtype=np.int32)
    perm = np.argsort(ok_, kind="stable")
    ot, ok_ = ot[perm], ok_[perm]
    if total > gpu_line:
        return FlashNeuronPlan(
            False,
            "Flashneuron cannot support this large model: "
            f"{total} B of forward activations stay on the GPU at makeLoss "
            f"after offloading every candidate, over the {gpu_line} B line",
            gpu_line,
            mkp,
            L,
            ot,
            ok_,
            total,
            len(cands),
        )
    return FlashNeuronPlan(True, "", gpu_line, mkp, L, ot, ok_, total, len(cands))


def is_vit1024(shape) -> bool:
    """O-15's condition: borden == 184, a transformer, and batch (kernel 0's N) == 1024;
    `shape` is the workload's ArtifactShape (a G10 config is read as one)."""
    from g10fast.workload.model import ArtifactShape

    if not isinstance(shape, ArtifactShape):
        shape = ArtifactShape.of_config(shape)
    return shape.borden == 184 and shape.transformer and shape.batch == 1024
