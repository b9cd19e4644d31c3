"""Struct-of-arrays data model of a training iteration (DESIGN.md, "Core data model").

`Graph` is what a front end builds from a model description: tensors and kernels, no times.
`Workload` is a Graph plus per-kernel times (cycles) and the workspace tensors that the
workspace file adds (G10 appends them after all model tensors and adds each to its kernel's
outputs, planner spec §2.7).

Conventions (fixed and documented, G10 uses hash-set order here, O-18 / planner O-20):
* a kernel's inputs and outputs are each sorted by ascending tensor id, without duplicates;
  a tensor may be both an input and an output (in-place update);
* tensor ids are creation order, which is also address order within each of the two spaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PAGE_SIZE = 4096


def csr_from_lists(lists) -> tuple[np.ndarray, np.ndarray]:
    """Lists of tensor ids per kernel -> (ptr int64[K+1], idx int32[nnz]), each row sorted, unique.
    (One sort of all the ids by row and id, not a `np.unique` a row: SENet154's 6,957 rows took
    0.046 s that way.)"""
    rows = [r if isinstance(r, np.ndarray) else list(r) for r in lists]
    n = len(rows)
    lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    if n == 0 or lens.sum() == 0:
        return ptr, np.zeros(0, np.int32)
    ids = np.concatenate([np.asarray(r, dtype=np.int64).ravel() for r in rows])
    row = np.repeat(np.arange(n, dtype=np.int64), lens)
    order = np.lexsort((ids, row))
    ids, row = ids[order], row[order]
    keep = np.ones(len(ids), dtype=bool)
    keep[1:] = (ids[1:] != ids[:-1]) | (row[1:] != row[:-1])
    ids, row = ids[keep], row[keep]
    ptr[1:] = np.cumsum(np.bincount(row, minlength=n))
    return ptr, ids.astype(np.int32)


class _Incidence:
    """The kernel → tensor incidence (CSR: in_ptr/in_idx, out_ptr/out_idx) that a Graph and a
    Workload both carry."""

    @property
    def num_kernels(self) -> int:
        return int(self.in_ptr.shape[0] - 1)

    def inputs(self, k: int) -> np.ndarray:
        return self.in_idx[self.in_ptr[k] : self.in_ptr[k + 1]]

    def outputs(self, k: int) -> np.ndarray:
        return self.out_idx[self.out_ptr[k] : self.out_ptr[k + 1]]

    def use_span(self) -> tuple[np.ndarray, np.ndarray]:
        """(first, last): int64[T], the first and the last kernel that reads or writes each
        tensor (K and -1 for a tensor no kernel touches)."""
        K, T = self.num_kernels, self.num_tensors
        first = np.full(T, K, np.int64)
        last = np.full(T, -1, np.int64)
        for ptr, idx in ((self.in_ptr, self.in_idx), (self.out_ptr, self.out_idx)):
            kk = np.repeat(np.arange(K, dtype=np.int64), np.diff(ptr))
            np.minimum.at(first, idx, kk)
            np.maximum.at(last, idx, kk)
        return first, last


@dataclass(frozen=True)
class Graph(_Incidence):
    """Tensors and kernels of one iteration, as built by a front end.

    Tensor arrays (length T, index = tensor id = creation order):
      raw_size  int64  requested bytes
      is_global bool   weight / persistent tensor
    Kernel arrays (length K, index = kernel id = execution order):
      kernel_name   list[str]  kernel type, e.g. "Conv2d_Forward"
      kernel_parent list[str]  parent layer / op, e.g. "215:GatherV2" (informational)
      in_ptr/in_idx, out_ptr/out_idx  CSR incidence, rows sorted ascending
    """

    name: str
    batch_size: int
    raw_size: np.ndarray
    is_global: np.ndarray
    kernel_name: list
    kernel_parent: list
    in_ptr: np.ndarray
    in_idx: np.ndarray
    out_ptr: np.ndarray
    out_idx: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def num_tensors(self) -> int:
        return int(self.raw_size.shape[0])


def page_round(raw: np.ndarray) -> np.ndarray:
    raw = np.asarray(raw, dtype=np.int64)
    return (raw + PAGE_SIZE - 1) // PAGE_SIZE * PAGE_SIZE


def address_layout(size: np.ndarray, is_global: np.ndarray) -> tuple[np.ndarray, int]:
    """G10's two bump allocators (simulator spec §2.1): weights at [0, W), the rest from W.

    Returns (global byte address per tensor, W)."""
    size = np.asarray(size, dtype=np.int64)
    g = np.asarray(is_global, dtype=bool)
    off = np.zeros_like(size)
    gs = np.where(g, size, 0)
    ls = np.where(g, 0, size)
    w_off = np.cumsum(gs) - gs
    l_off = np.cumsum(ls) - ls
    W = int(gs.sum())
    off[g] = w_off[g]
    off[~g] = l_off[~g] + W
    return off, W


@dataclass(frozen=True)
class Workload(_Incidence):
    """A Graph with kernel times (cycles) and workspace tensors: what the engines consume.

    Tensor arrays (length T, workspaces last):
      raw_size, size (page-rounded bytes), is_global, address (bytes, global address space),
      start_page = address // 4096, n_pages = size // 4096
    Kernel arrays (length K):
      exec_cycles, input_pf_cycles, pf_cycles  int64 (clamped: exec <= input_pf <= pf)
      workspace_bytes int64 (0 = none), workspace_tensor int32 (-1 = none)
      in_ptr/in_idx, out_ptr/out_idx (outputs include the workspace)
    """

    name: str
    batch_size: int
    raw_size: np.ndarray
    size: np.ndarray
    is_global: np.ndarray
    address: np.ndarray
    weights_bytes: int
    kernel_name: list
    kernel_parent: list
    in_ptr: np.ndarray
    in_idx: np.ndarray
    out_ptr: np.ndarray
    out_idx: np.ndarray
    exec_cycles: np.ndarray
    input_pf_cycles: np.ndarray
    pf_cycles: np.ndarray
    workspace_bytes: np.ndarray
    workspace_tensor: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def num_tensors(self) -> int:
        return int(self.size.shape[0])

    @property
    def start_page(self) -> np.ndarray:
        return self.address // PAGE_SIZE

    @property
    def n_pages(self) -> np.ndarray:
        return self.size // PAGE_SIZE

    @property
    def num_pages(self) -> int:
        return int(self.size.sum() // PAGE_SIZE)

    @property
    def footprint_bytes(self) -> int:
        return int(self.size.sum())

    @property
    def ideal_cycles(self) -> int:
        return int(self.exec_cycles.sum())


def build_workload(graph: Graph, exec_cycles, input_pf_cycles, pf_cycles, workspace_bytes) -> Workload:
    """Attach kernel times (already converted to cycles and clamped) and workspaces to a Graph.

    Each kernel with workspace > 0 gets a new non-global tensor, appended after all model
    tensors in kernel order, and added to that kernel's outputs (planner spec §2.7)."""
    K = graph.num_kernels
    ws = np.asarray(workspace_bytes, dtype=np.int64)
    arrays = [np.asarray(a, dtype=np.int64) for a in (exec_cycles, input_pf_cycles, pf_cycles)]
    for a in arrays + [ws]:
        if a.shape != (K,):
            raise ValueError(f"per-kernel array has shape {a.shape}, expected ({K},)")
    T0 = graph.num_tensors
    ws_kernels = np.nonzero(ws > 0)[0]
    ws_tensor = np.full(K, -1, dtype=np.int32)
    ws_tensor[ws_kernels] = T0 + np.arange(len(ws_kernels), dtype=np.int32)
    raw = np.concatenate([graph.raw_size.astype(np.int64), ws[ws_kernels]])
    is_global = np.concatenate([graph.is_global.astype(bool), np.zeros(len(ws_kernels), bool)])
    outs = []
    for k in range(K):
        o = graph.outputs(k)
        if ws_tensor[k] >= 0:
            o = np.append(o, ws_tensor[k])
        outs.append(o)
    out_ptr, out_idx = csr_from_lists(outs)
    size = page_round(raw)
    address, W = address_layout(size, is_global)
    return Workload(
        name=graph.name,
        batch_size=graph.batch_size,
        raw_size=raw,
        size=size,
        is_global=is_global,
        address=address,
        weights_bytes=W,
        kernel_name=list(graph.kernel_name),
        kernel_parent=list(graph.kernel_parent),
        in_ptr=graph.in_ptr.astype(np.int64),
        in_idx=graph.in_idx.astype(np.int32),
        out_ptr=out_ptr,
        out_idx=out_idx,
        exec_cycles=arrays[0],
        input_pf_cycles=arrays[1],
        pf_cycles=arrays[2],
        workspace_bytes=ws,
        workspace_tensor=ws_tensor,
        meta=dict(graph.meta),
    )


@dataclass(frozen=True)
class ArtifactShape:
    """What the artifact's per-workload quirks key on (O-15's target multipliers, the ViT-1024
    hack of FlashNeuron): whether the model is a transformer, its `trans_borden` and the batch
    size. Built-in models give (kind == transformer, 184, batch), as their configs always did."""

    transformer: bool = False
    borden: int = 184
    batch: int = 0

    @classmethod
    def of_config(cls, cfg) -> "ArtifactShape":
        return cls(
            int(getattr(cfg, "is_transformer", 0)) == 1,
            int(getattr(cfg, "trans_borden", 184)),
            int(getattr(cfg, "batch_size", 0)),
        )


def output_only_csr(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel, the outputs that are not also inputs (ascending): §2.2's ordered form."""
    K, T = w.num_kernels, max(w.num_tensors, 1)
    kin = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.out_ptr))
    # (kernel, tensor) keys; each CSR row is sorted and unique, so the kept keys are too
    keep = ~np.isin(kout * T + w.out_idx, kin * T + w.in_idx)
    ptr = np.zeros(K + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(kout[keep], minlength=K))
    return ptr, w.out_idx[keep].astype(np.int32)


#: the kernels whose FLOPs are their layer's forward FLOPs (matrix-multiply-like; the cost
#: model's classes, g10fast.workload.costmodel)
MATMUL_KERNELS = (
    "Conv2d_Forward",
    "Conv2d_Backward_Weight",
    "Conv2d_Backward_Input",
    "Linear_Forward",
    "Linear_Backward_Weight",
    "Linear_Backward_Input",
    "BatchMatMul_Forward",
    "BatchMatMul_Backward",
    "FlashAttention_Forward",
    "FlashAttention_Backward",
)


def required_csr(workload) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: inputs (ascending), then the outputs that are not inputs (ascending)."""
    w = workload
    K = w.num_kernels
    oo_ptr, oo_idx = output_only_csr(w)
    n_in = np.diff(w.in_ptr)
    n_oo = np.diff(oo_ptr)
    ptr = np.zeros(K + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(n_in + n_oo)
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    kin = np.repeat(np.arange(K), n_in)
    koo = np.repeat(np.arange(K), n_oo)
    idx[ptr[kin] + np.arange(len(kin)) - w.in_ptr[kin]] = w.in_idx
    idx[ptr[koo] + n_in[koo] + np.arange(len(koo)) - oo_ptr[koo]] = oo_idx
    return ptr, idx


def required_sets(workload: Workload):
    """Per kernel the unique required tensors (inputs ∪ outputs)."""
    K = workload.num_kernels
    out = []
    for k in range(K):
        out.append(np.union1d(workload.inputs(k), workload.outputs(k)))
    return out


def max_kernel_pages(workload: Workload, non_global_only: bool = False) -> int:
    """max over kernels of Σ pages of the required tensors (set form: a tensor a kernel both
    reads and writes, or lists twice, counts once), over whole arrays: the (kernel, tensor)
    pairs of the incidence made unique, their pages summed per kernel."""
    K, T = workload.num_kernels, workload.num_tensors
    if K == 0:
        return 0
    pages = np.asarray(workload.n_pages, dtype=np.int64)
    kin = np.repeat(np.arange(K, dtype=np.int64), np.diff(workload.in_ptr))
    kout = np.repeat(np.arange(K, dtype=np.int64), np.diff(workload.out_ptr))
    pairs = np.unique(
        np.concatenate(
            [
                kin * T + np.asarray(workload.in_idx, dtype=np.int64),
                kout * T + np.asarray(workload.out_idx, dtype=np.int64),
            ]
        )
    )
    pk, pt = pairs // T, pairs % T
    if non_global_only:
        keep = ~np.asarray(workload.is_global, dtype=bool)[pt]
        pk, pt = pk[keep], pt[keep]
    per = np.zeros(K, dtype=np.int64)
    np.add.at(per, pk, pages[pt])
    return max(0, int(per.max()))


def kernel_pages(w: Workload, oo=None) -> np.ndarray:
    """Pages of inputs ∪ outputs per kernel (oo: output_only_csr(w), if at hand)."""
    oo_ptr, oo_idx = output_only_csr(w) if oo is None else oo
    npg = w.n_pages.astype(np.int64)
    K = w.num_kernels
    out = np.zeros(K, dtype=np.int64)
    np.add.at(out, np.repeat(np.arange(K), np.diff(w.in_ptr)), npg[w.in_idx])
    np.add.at(out, np.repeat(np.arange(K), np.diff(oo_ptr)), npg[oo_idx])
    return out
