"""Inference view of a training Workload: its forward kernels only.

    wi = forward_only(w)

FusionStitching's evaluation (Zheng et al., arXiv 2009.10924 §7) runs some of its models for
inference, where a step is the forward pass alone. A built-in model (or a G10 workload) is
a training step: forward, loss, backward, update. `forward_only` keeps the kernels whose
phase is forward (`g10fast.workload.fusion.kernel_phases`: the name, or
meta["kernel_phase"]), drops the loss (`makeLoss`, an inference graph has none) and every
tensor no kept kernel touches; kernel and tensor ids stay dense and in their old order,
addresses are G10's bump layout of what is left, every kept kernel keeps its three times and
its workspace.

What is not modelled [ours]: an inference graph has no dropout (identity at inference) and
keeps no activation for a backward pass; the kept `Dropout_Forward` kernels stay (each one
element-wise kernel that XLA and FusionStitching fuse alike) and the activations' lifetimes
are the vitality analysis' (last read), which in a forward-only graph already ends at the
last forward reader.
"""

from __future__ import annotations

import numpy as np

from g10fast.errors import InputError
from g10fast.workload.model import Workload, address_layout, csr_from_lists, page_round

#: kernel names that are the loss (dropped from an inference step)
LOSS_KERNELS = ("makeLoss",)


def forward_only(w: Workload) -> Workload:
    """The forward kernels of `w` and the tensors they touch (module doc)."""
    from g10fast.workload.fusion import kernel_phases

    phase = kernel_phases(w)
    keep_k = [
        k
        for k in range(w.num_kernels)
        if phase[k] == "forward" and not w.kernel_name[k].startswith(LOSS_KERNELS)
    ]
    if not keep_k:
        raise InputError(f"workload {w.name!r} has no forward kernels", param="inference")
    T = w.num_tensors
    used = np.zeros(T, dtype=bool)
    for k in keep_k:
        used[w.inputs(k)] = True
        used[w.outputs(k)] = True
    new_id = np.full(T, -1, dtype=np.int64)
    new_id[used] = np.arange(int(used.sum()))
    k_in = [new_id[w.inputs(k).astype(np.int64)] for k in keep_k]
    k_out = [new_id[w.outputs(k).astype(np.int64)] for k in keep_k]
    in_ptr, in_idx = csr_from_lists(k_in)
    out_ptr, out_idx = csr_from_lists(k_out)
    raw = w.raw_size.astype(np.int64)[used]
    size = page_round(raw)
    glob = np.asarray(w.is_global, dtype=bool)[used]
    address, W = address_layout(size, glob)
    kk = np.asarray(keep_k, dtype=np.int64)
    wst = np.asarray(w.workspace_tensor, dtype=np.int64)[kk]
    wst2 = np.where(wst >= 0, new_id[np.maximum(wst, 0)], -1).astype(np.int32)
    meta = dict(w.meta)
    for key in ("op_class", "kernel_phase", "kernel_flops"):
        v = w.meta.get(key)
        if v is not None and len(v) == w.num_kernels:
            meta[key] = [v[k] for k in keep_k] if isinstance(v, list) else np.asarray(v)[kk]
    meta["inference"] = {
        "kernels_before": w.num_kernels,
        "kernels_after": len(keep_k),
        "tensors_before": T,
        "tensors_after": int(used.sum()),
    }
    return Workload(
        name=w.name,
        batch_size=w.batch_size,
        raw_size=raw,
        size=size,
        is_global=glob,
        address=address,
        weights_bytes=W,
        kernel_name=[w.kernel_name[k] for k in keep_k],
        kernel_parent=[w.kernel_parent[k] for k in keep_k],
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        exec_cycles=w.exec_cycles[kk].copy(),
        input_pf_cycles=w.input_pf_cycles[kk].copy(),
        pf_cycles=w.pf_cycles[kk].copy(),
        workspace_bytes=w.workspace_bytes[kk].copy(),
        workspace_tensor=wst2,
        meta=meta,
    )


__all__ = ["LOSS_KERNELS", "forward_only"]
