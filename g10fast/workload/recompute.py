"""Activation checkpointing as a workload pass (`--recompute none|full|selective`): any policy
on any engine can take it.

What `torch.utils.checkpoint` does (../shared/specs/zero-family.md §5.1): a checkpointed
segment keeps only its inputs (and its output, the next segment's input) through the
forward; in the backward, before the first kernel that needs one of its activations, the
segment's forward runs again and materialises them for that segment only, and they are
freed as its backward uses them. So:

* `full`: every repeating unit of the network is a segment (a transformer layer, as Hugging
  Face's and Megatron's layer-wise checkpointing do; a residual block of a CNN), its
  activations dropped after the forward and recomputed in the backward: about one more
  forward of FLOPs (PR deepspeedai/DeepSpeed#1453's 4/3). What does not repeat (the
  embeddings, the head and the loss) is not checkpointed.
* `selective`: Megatron-LM's default `recompute_modules = ["core_attn"]`
  (megatron/core/transformer/transformer_config.py): only the attention core (QK^T,
  scale and mask, softmax, the product with V) is recomputed, the linear layers' inputs
  kept. With fused attention there is little to drop: its backward recomputes the scores
  itself.

Segments are found on the graph, not named by the model: the forward's cuts are the points
where one activation alone is live (the residual stream between layers, between blocks), a
segment runs from one cut to the next, and the repeating period of the segments' kernel
signatures groups them into units (a transformer layer is two segments: attention and MLP
each end in a residual add). The recomputed kernels take the original kernels' times (the
cost model's or a profile's): recomputation is timed like the forward it repeats.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from g10fast.errors import InputError
from g10fast.workload.model import Graph, Workload, build_workload, csr_from_lists

MODES = ("none", "full", "selective")
#: kernel-name prefixes of the attention core (selective recomputation)
ATTENTION_CORE = ("BatchMatMul", "SoftmaxBasic", "Softmax", "FlashAttention")


def _phases(w: Workload) -> list:
    from g10fast.workload.fusion import kernel_phases

    return kernel_phases(w)


def forward_cuts(w: Workload, fwd: list) -> list:
    """Positions i (index into `fwd`) after which exactly one non-global tensor produced by
    the forward so far is still read by a later forward kernel."""
    T = w.num_tensors
    glob = np.asarray(w.is_global, bool)
    pos = {k: i for i, k in enumerate(fwd)}
    prod = np.full(T, -1, np.int64)
    last = np.full(T, -1, np.int64)
    for k in fwd:
        i = pos[k]
        for t in w.outputs(k):
            if prod[t] < 0:
                prod[t] = i
        for t in w.inputs(k):
            last[t] = max(last[t], i)
    # live count after position i: produced at <= i, last forward read > i
    delta = np.zeros(len(fwd) + 1, np.int64)
    ok = (~glob) & (prod >= 0) & (last > prod)
    np.add.at(delta, prod[ok], 1)
    np.add.at(delta, last[ok], -1)
    live = np.cumsum(delta)[: len(fwd)]
    return [i for i in range(len(fwd) - 1) if live[i] == 1]


def _period(sigs: list) -> int:
    """The p (1..4) for which the most segments equal the one p later (the smallest on a
    tie): the number of segments a repeating unit spans (2 for a transformer layer)."""
    best, best_n = 1, -1
    for p in range(1, 5):
        n = sum(sigs[i] == sigs[i + p] for i in range(1, len(sigs) - p))
        if n > best_n:
            best, best_n = p, n
    return best


def checkpoint_segments(w: Workload, mode: str) -> list:
    """Lists of forward kernel ids whose activations `mode` drops and recomputes."""
    ph = _phases(w)
    fwd = [k for k in range(w.num_kernels) if ph[k] == "forward"]
    if mode == "selective":
        core = [k for k in fwd if w.kernel_name[k].startswith(ATTENTION_CORE)]
        segs, cur = [], []
        for k in fwd:
            name = w.kernel_name[k]
            if k in set(core) or (cur and not name.startswith(("Linear", "Dot")) and _reads_any(w, k, cur)):
                cur.append(k)
            elif cur:
                segs.append(cur)
                cur = []
        if cur:
            segs.append(cur)
        return [s for s in segs if any(w.kernel_name[k].startswith(ATTENTION_CORE) for k in s)]
    cuts = forward_cuts(w, fwd)
    bounds = [0] + [c + 1 for c in cuts] + [len(fwd)]
    raw = [fwd[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    if len(raw) < 3:
        return []
    sigs = [tuple(w.kernel_name[k] for k in s) for s in raw]
    p = _period(sigs)
    # units of p segments from the second on; a unit is checkpointed when its kernels repeat
    # elsewhere (a layer, a block), so the embeddings, the head and the loss stay as they are
    units = [(sum(raw[i : i + p], []), sum(sigs[i : i + p], ())) for i in range(1, len(raw), p)]
    count: dict = {}
    for _, sig in units:
        count[sig] = count.get(sig, 0) + 1
    return [ks for ks, sig in units if count[sig] >= 2]


def _reads_any(w, k, ks) -> bool:
    outs = set()
    for j in ks:
        outs.update(int(t) for t in w.outputs(j))
    return any(int(t) in outs for t in w.inputs(k))


def recompute(w: Workload, mode: str = "none") -> Workload:
    """The workload with activation checkpointing (module doc); "none" returns `w`."""
    if mode not in MODES:
        raise InputError(f"unknown recomputation {mode!r} (known: {', '.join(MODES)})", param="--recompute")
    if mode == "none":
        return w
    ph = _phases(w)
    if "backward" not in ph:
        raise InputError(
            "recomputation needs a training step (the workload has no backward)", param="--recompute"
        )
    segs = checkpoint_segments(w, mode)
    K = w.num_kernels
    ws_t = np.asarray(w.workspace_tensor, np.int64)
    is_ws = np.zeros(w.num_tensors, bool)
    is_ws[ws_t[ws_t >= 0]] = True
    T0 = int((~is_ws).sum())
    if is_ws[:T0].any():
        raise InputError("workspace tensors are not the workload's last tensors", param="workload")
    glob = np.asarray(w.is_global, bool)
    raw = [int(x) for x in w.raw_size[:T0]]
    is_global = [bool(x) for x in glob[:T0]]
    seg_of = np.full(K, -1, np.int64)
    for s, ks in enumerate(segs):
        seg_of[ks] = s
    # per segment: its activations (outputs of its kernels that the backward reads)
    bwd_reads = set()
    for k in range(K):
        if ph[k] == "backward":
            bwd_reads.update(int(t) for t in w.inputs(k))
    internal = []
    for ks in segs:
        outs = {int(t) for k in ks for t in w.outputs(k) if not is_ws[t] and not glob[t]}
        # the segment's output stays (the next segment's input); a selective segment keeps
        # what a kernel outside it reads in the forward (the attention output)
        mine = set(ks)
        read_outside = {int(t) for k in range(K) if ph[k] == "forward" and k not in mine for t in w.inputs(k)}
        internal.append({t for t in outs if t in bwd_reads and t not in read_outside})
    names, parents, ins, outs_l, ex, ipf, pf, wsb, phase = [], [], [], [], [], [], [], [], []
    done = [False] * len(segs)
    owner = {t: s for s, ts in enumerate(internal) for t in ts}
    clone_of: dict = {}
    added = 0
    added_flops_cycles = 0

    def emit(k, i_list, o_list, ph_k):
        names.append(w.kernel_name[k])
        parents.append(w.kernel_parent[k])
        ins.append(np.asarray(i_list, np.int64))
        outs_l.append(np.asarray(o_list, np.int64))
        ex.append(int(w.exec_cycles[k]))
        ipf.append(int(w.input_pf_cycles[k]))
        pf.append(int(w.pf_cycles[k]))
        wsb.append(int(w.workspace_bytes[k]))
        phase.append(ph_k)

    def model_outs(k):
        return [int(t) for t in w.outputs(k) if not is_ws[t]]

    for k in range(K):
        if ph[k] == "backward":
            need = sorted({owner[int(t)] for t in w.inputs(k) if int(t) in owner and not done[owner[int(t)]]})
            for s in need:
                local: dict = {}
                for j in segs[s]:
                    i_j = [local.get(int(t), int(t)) for t in w.inputs(j)]
                    o_j = []
                    for t in model_outs(j):
                        local[t] = len(raw)
                        raw.append(int(w.raw_size[t]))
                        is_global.append(False)
                        o_j.append(local[t])
                    emit(j, i_j, o_j, "backward")
                    added += 1
                    added_flops_cycles += int(w.exec_cycles[j])
                for t in internal[s]:
                    clone_of[t] = local[t]
                done[s] = True
            emit(k, [clone_of.get(int(t), int(t)) for t in w.inputs(k)], model_outs(k), "backward")
        else:
            emit(k, [int(t) for t in w.inputs(k)], model_outs(k), ph[k])
    in_ptr, in_idx = csr_from_lists(ins)
    out_ptr, out_idx = csr_from_lists(outs_l)
    meta = dict(w.meta)
    for key in ("kernel_flops", "op_class", "kernel_launch_cycles", "fusion"):
        meta.pop(key, None)  # per-kernel lists of a fused workload: rebuilt from names
    meta["kernel_phase"] = phase
    meta["recompute"] = {
        "mode": mode,
        "segments": len(segs),
        "kernels_added": added,
        "recomputed_cycles": added_flops_cycles,
        "dropped_activation_bytes": int(sum(int(w.size[t]) for ts in internal for t in ts)),
    }
    g = Graph(
        w.name,
        w.batch_size,
        np.asarray(raw, np.int64),
        np.asarray(is_global, bool),
        names,
        parents,
        in_ptr,
        in_idx,
        out_ptr,
        out_idx,
        meta,
    )
    out = build_workload(g, np.asarray(ex), np.asarray(ipf), np.asarray(pf), np.asarray(wsb))
    return dataclasses.replace(out, meta=meta)
