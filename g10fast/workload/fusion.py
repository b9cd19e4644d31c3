"""FusionStitching as a graph pass on a Workload (seed-policies spec §4.3, engine feature E8).

    w2 = fuse(w, "xla" | "stitch", freq_ghz=1.2, hbm_gbps=1555)     # "none" returns w itself

Runs in the workload stage, before vitality analysis and planning (g10fast.run.workload_of,
`--fuse`). Memory-intensive kernels that lie between GEMM / convolution kernels are grouped
as XLA's fusion would group them (`xla`) or as FusionStitching's stitching would (`stitch`);
each group becomes one kernel, the intermediates used only inside a group leave the tensor
set, and the fused kernel's three times are derived from its members' times and bytes with
one fixed cost (`kernel_overheads`: the cost model's fitted overhead of each kernel's class).
Both compilers see a softmax as TensorFlow lowers it to XLA (`lower_softmax`: row max, exp,
row sum, divide; its gradient as TensorFlow's _SoftmaxGrad). docs/fusion.md gives the rules,
the time formula and the measured effect.

What a step's time is made of (`time_breakdown`, `gain_breakdown`): the kernels' fixed costs
(launches), the rest of their work (bytes, FLOPs: the traffic of intermediates) and the GPU
waiting for the host to issue launches (`host_timeline`, HOST_LAUNCH_US per launch: the
CPU-GPU switches FusionStitching's paper names).

Op classes (one function, `op_class`): every kernel is
  C  compute-intensive or opaque: GEMM, convolution, batched matmul, gather, data loading,
     the loss; never fused, never a member of a group;
  E  element-wise (also broadcast, windowed pooling, concat/split): every output is
     element-wise in its inputs;
  B  element-wise with broadcasting inputs (the backward of Add/Subtract/Multiply/Divide/
     Power): an output smaller than the kernel's largest input is the reduced gradient of a
     broadcast operand;
  R  reduction (Sum, softmax, batch norm, global pooling, bias gradient): an output smaller
     than the kernel's largest input is a reduction result; outputs as large as the largest
     input (softmax's y, batch norm's y, dx) come from its element-wise stage.
A Workload may carry its own classes in meta["op_class"] (one of "C", "E", "B", "R" per
kernel; a captured workload knows what each op is); otherwise the kernel name decides.

Grouping (a linear scan in kernel order, so every group is a run of consecutive kernels and
therefore convex): a kernel joins the open group when it is not C, lies in the same phase
(forward / backward / update, unless cross_phase), reads a tensor a member wrote (data
dependence), the group is below max_group, and every such edge is allowed:
  xla     no edge out of a reduction result (a reduction is only ever the sink of a fusion:
          XLA's loop fusion and input fusion; multi-output fusion keeps siblings together)
  stitch  reduction edges too, when the reduction is row-local: at most `stitch_max_reduce`
          input elements per result (the row fits one thread block: warp / block
          composition); a grid-wide reduction (batch norm statistics, a bias gradient over
          all rows) still ends a group.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from itertools import chain

import numpy as np

from g10fast.errors import InputError, one_of
from g10fast.workload.model import Workload, address_layout, csr_from_lists, page_round

FUSE_MODES = ("none", "xla", "stitch")
TIME_MODELS = ("traffic_attributed", "traffic_scaled", "sum_minus_launch", "roofline")
OP_CLASSES = ("C", "E", "B", "R")
SOFTMAX_FORMS = ("ops", "kernel")
_CLASS_WORDS = {
    "compute": "C",
    "gemm": "C",
    "conv": "C",
    "opaque": "C",
    "elementwise": "E",
    "element-wise": "E",
    "memory": "E",
    "broadcast": "B",
    "reduction": "R",
    "reduce": "R",
}


@dataclass(frozen=True)
class FusionOptions:
    """The pass's options (spec §4.3 names them `fuse.*`)."""

    mode: str = "none"  # none | xla | stitch
    cross_phase: bool = False  # allow groups across forward / backward / update
    max_group: int = 0  # most kernels per group (0: no limit)
    pooling: str = "M"  # pooling kernels: M (memory-intensive) or C
    stitch_max_reduce: int = 16384  # stitch: most input elements per reduction result
    #: the fused kernel's time (docs/fusion.md): traffic_attributed (each byte still moved
    #: at the rate of the member that moves it) | traffic_scaled (the members' summed work
    #: scaled by the share of their bytes still moved: one rate for all; the spec's §4.3,
    #: the default before softmax lowering) | sum_minus_launch | roofline [ours, all four]
    time_model: str = "traffic_attributed"
    #: a kernel's fixed GPU-side cost (launch, ramp-up, tail), µs, the part of each member's
    #: time a fused kernel pays once. None (default): each kernel's own, from the cost-model
    #: parameters of the GPU the times come from (`kernel_overheads`: overhead_us of its
    #: class in data/costmodel/*.toml, fitted to measured kernels: the artifact's A100 traces
    #: for a100.toml, 29,324 measured H100 kernels for h100-sxm5.toml, 2.5 µs for its "*"
    #: class); the fused kernel pays its members' largest. A number: that cost for every
    #: kernel (the spec's 5 µs, §4.3, was ours).
    launch_us: float | None = None
    defer_update: bool = True  # update kernels wait until an open group closes
    #: how the fusion compilers see a softmax kernel: "ops" (default) as TensorFlow lowers it
    #: to XLA, a row max, subtract, exp, row sum and divide (tf2xla/kernels/softmax_op.cc),
    #: and its gradient as five ops of TensorFlow's _SoftmaxGrad (python/ops/nn_grad.py:
    #: (dy - sum(dy * y)) * y), `lower_softmax`; "kernel": G10's one SoftmaxBasic kernel
    #: each way, as before
    softmax: str = "ops"

    def check(self) -> "FusionOptions":
        one_of(self.mode, FUSE_MODES, "fusion mode", param="fuse")
        one_of(self.time_model, TIME_MODELS, "time model", param="fuse.time_model")
        one_of(self.softmax, SOFTMAX_FORMS, "softmax form", param="fuse.softmax")
        if self.pooling not in ("M", "C"):
            raise InputError(f"must be M or C, got {self.pooling!r}", param="fuse.pooling")
        if not (isinstance(self.max_group, int) and self.max_group >= 0):
            raise InputError(f"must be an integer >= 0, got {self.max_group!r}", param="fuse.max_group")
        if not (self.stitch_max_reduce >= 1):
            raise InputError(f"must be >= 1, got {self.stitch_max_reduce!r}", param="fuse.stitch_max_reduce")
        if self.launch_us is not None and not (
            isinstance(self.launch_us, (int, float)) and math.isfinite(self.launch_us) and self.launch_us >= 0
        ):
            raise InputError(
                f"must be a finite number >= 0 (or unset: the cost model's), got {self.launch_us!r}",
                param="fuse.launch_us",
            )
        return self


# ---------------------------------------------------------------------------------------------
# Op classes and phases

_COMPUTE_HEADS = (
    "Conv2d_Forward",
    "Conv2d_Backward_Weight",
    "Conv2d_Backward_Input",
    "Linear_Forward",
    "Linear_Backward_Weight",
    "Linear_Backward_Input",
    "BatchMatMul_",
    "GatherV2_",
    "LoadData",
    "makeLoss",
)
_REDUCTION_HEADS = (
    "Sum_Forward",
    "SoftmaxBasic_",
    "BatchNorm2d_Forward",
    "BatchNorm2d_Backward",
    "AdaptiveAvgPool2d_Forward",
    "Linear_Backward_Bias",
)
_BROADCAST_HEADS = (
    "Add_Backward",
    "Subtract_Backward",
    "Multiply_Backward",
    "Divide_Backward",
    "Power_Backward",
)
_POOL_HEADS = ("MaxPool2d_", "AdaptiveAvgPool2d_", "AvgPool")
# captured / foreign kernel names (lower case substrings), checked after the G10 names
_COMPUTE_WORDS = (
    "conv",
    "gemm",
    "matmul",
    "addmm",
    "bmm",
    "mm_",
    "linear",
    "attention",
    "embedding",
    "gather",
    "index_select",
    "cublas",
    "cudnn",
    "loss",
    "lstm",
)
_REDUCTION_WORDS = (
    "sum",
    "mean",
    "norm",
    "softmax",
    "reduce",
    "amax",
    "max_pool_backward",
    "var",
    "std",
    "argmax",
    "avg_pool2d_backward",
)


def op_class(name: str, pooling: str = "M") -> str:
    """The op class (C, E, B or R; module doc) of a kernel from its name: G10's kernel names
    first, then words of captured or foreign names; unknown names are B (element-wise, with a
    shape check for broadcast reductions)."""
    if name in ("mm", "bmm"):
        return "C"
    if pooling == "C" and name.startswith(_POOL_HEADS):
        return "C"
    if name.startswith(_COMPUTE_HEADS):
        return "C"
    if name.startswith(_REDUCTION_HEADS):
        return "R"
    if name.startswith(_BROADCAST_HEADS):
        return "B"
    if (
        name.startswith(_POOL_HEADS)
        or name.startswith(
            (
                "ReLU_",
                "Dropout_",
                "Scale_",
                "Concat_",
                "Add_MultiGredient",
                "Tanh_",
                "Erf_",
                "Sqrt_",
                "Add_Forward",
                "Subtract_",
                "Multiply_Forward",
                "Divide_Forward",
                "Power_Forward",
                "Sum_Backward",
            )
        )
        or "Apply_Grad" in name
    ):
        return "E"
    low = name.lower()
    if "pool" in low and pooling == "C":
        return "C"
    if any(w in low for w in _COMPUTE_WORDS):
        return "C"
    if any(w in low for w in _REDUCTION_WORDS):
        return "R"
    return "B"


def kernel_classes(w: Workload, pooling: str = "M") -> list:
    """Per kernel its op class: meta["op_class"] where the workload has one, else op_class."""
    given = w.meta.get("op_class")
    if given is not None:
        if len(given) != w.num_kernels:
            raise InputError(
                f"meta op_class has {len(given)} entries, the workload {w.num_kernels} kernels",
                param="op_class",
            )
        out = []
        for k, c in enumerate(given):
            c = _CLASS_WORDS.get(str(c).lower(), str(c))
            if c not in OP_CLASSES:
                raise InputError(
                    f"kernel {k}: op class {given[k]!r} is not one of {', '.join(OP_CLASSES)}",
                    param="op_class",
                )
            out.append(c)
        return out
    return [op_class(n, pooling) for n in w.kernel_name]


def kernel_phase(name: str) -> str:
    """forward, backward or update, from a kernel name (the loss counts as forward)."""
    if "Apply_Grad" in name or name.lower().startswith(("optimizer", "adam", "sgd")):
        return "update"
    if "Backward" in name or "MultiGredient" in name or "backward" in name.lower():
        return "backward"
    return "forward"


def kernel_phases(w: Workload) -> list:
    given = w.meta.get("kernel_phase")
    if given is not None and len(given) == w.num_kernels:
        return [str(p) for p in given]
    return [kernel_phase(n) for n in w.kernel_name]


def kernel_flops(w: Workload) -> np.ndarray:
    """FLOPs per kernel: meta["kernel_flops"] when present (a captured or fused workload),
    else the forward FLOPs of the layer for the matrix-multiply-like kernels of a built-in
    model (as the cost model counts them), else 0."""
    kf = w.meta.get("kernel_flops")
    if kf is not None and len(kf) == w.num_kernels:
        return np.asarray(kf, dtype=np.float64)
    from g10fast.workload.model import MATMUL_KERNELS

    pf = w.meta.get("parent_flops") or {}
    return np.array(
        [float(pf.get(p, 0)) if n in MATMUL_KERNELS else 0.0 for n, p in zip(w.kernel_name, w.kernel_parent)],
        dtype=np.float64,
    )


# ---------------------------------------------------------------------------------------------
# Fixed costs: a kernel's launch on the GPU, and its issue on the host

#: Host (CPU) time to issue one kernel launch, µs: a stream's first ~1000 launches "each took
#: 4-5 µs" (NVIDIA developer forum, "CUDA stream are blocked when launch lots of kernels",
#: forums.developer.nvidia.com/t/68937, and stackoverflow.com/questions/53970187; collected in
#: shared/specs/anchors.md §4.1); the midpoint. XLA and FusionStitching both launch their
#: kernels from compiled code (FusionStitching is built on XLA's service, 2009.10924), so one
#: value serves both; what differs is how many launches there are.
HOST_LAUNCH_US = 4.5


@functools.lru_cache(maxsize=8)
def _cost_params(gpu_model: str):
    from g10fast.workload.costmodel import Gpu, params_for

    return params_for(Gpu(name=gpu_model, peak_flops=1.0, hbm_bytes_per_s=1.0, link_bytes_per_s=1.0))


def kernel_overheads(w: Workload, freq_ghz: float = 1.2, launch_us: float | None = None) -> np.ndarray:
    """Per kernel its fixed GPU-side cost in cycles (float64; not capped at its time).

    launch_us a number: that for every kernel. None: meta["kernel_launch_cycles"] when the
    workload carries it (a fused workload: each fused kernel's one cost), else the
    overhead_us of the kernel's class in the cost-model parameters (`costmodel.params_for`)
    of the GPU its times were estimated for (meta["cost_model_gpu"]), else of the default
    a100.toml (the parameters fitted to the G10 artifact's A100 traces)."""
    K = w.num_kernels
    f = float(freq_ghz) * 1e3  # cycles per µs
    if launch_us is not None:
        return np.full(K, float(launch_us) * f)
    given = w.meta.get("kernel_launch_cycles")
    if given is not None and len(given) == K:
        return np.asarray(given, dtype=np.float64).copy()
    params = _cost_params(str(w.meta.get("cost_model_gpu") or ""))
    return np.array([params.cls(n)[2] * 1e6 * f for n in w.kernel_name], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Softmax as the fusion compilers see it


def _shape_row_len(shape, raw: int, batch: int):
    """The last dimension of a record's shape when the shape (batch placeholder 99 = the
    batch) accounts for `raw` bytes at 2 or 4 bytes per element, else None."""
    if not shape:
        return None
    n = 1
    for d in shape:
        n *= batch if d == 99 else int(d)
    if n <= 0 or raw % n or raw // n not in (2, 4):
        return None
    return int(shape[-1])


@functools.lru_cache(maxsize=16)
def _file_softmax_shapes(path: str) -> tuple:
    """Input shapes of every SoftmaxBasic record of a G10 operator-record file (format (b):
    `op_id type n id.. (rank d..)*n ---`), in file order."""
    try:
        with open(path, encoding="utf-8") as fh:
            toks = fh.read().split()
    except (OSError, UnicodeDecodeError):
        return ()
    out = []
    for i, t in enumerate(toks):
        if t != "SoftmaxBasic" or i + 1 >= len(toks) or not toks[i + 1].isdigit():
            continue
        n = int(toks[i + 1])
        p = i + 2 + n
        if p < len(toks) and toks[p].isdigit():
            r = int(toks[p])
            dims = toks[p + 1 : p + 1 + r]
            if len(dims) == r and all(d.isdigit() for d in dims):
                out.append(tuple(int(d) for d in dims))
    return tuple(out)


def softmax_rows(w: Workload) -> dict:
    """{kernel: elements per softmax row} for the SoftmaxBasic kernels of `w` whose row
    length is known: meta["softmax_row"] (an int for all, or {kernel parent: int}); else
    a built-in model's operator records (`builtin.kernel_layers`: the softmax's input shape,
    whose last dimension is the row); else the G10 operator-record file the workload was
    read from (meta["path"]; every softmax there must have the same row length). A row is
    accepted only when the record's shape accounts for the kernel's bytes."""
    ks = [k for k, n in enumerate(w.kernel_name) if n.startswith("SoftmaxBasic_")]
    if not ks:
        return {}
    raw = w.raw_size.astype(np.int64)
    given = w.meta.get("softmax_row")
    if given is not None:
        if isinstance(given, dict):
            return {k: int(given[w.kernel_parent[k]]) for k in ks if w.kernel_parent[k] in given}
        return {k: int(given) for k in ks}
    out: dict = {}
    key = w.meta.get("builtin")
    if key:
        try:
            from g10fast.workload.builtin import kernel_layers

            layers = kernel_layers(str(key), int(w.batch_size))
        except (InputError, KeyError, TypeError, ValueError):
            layers = {}
        for k in ks:
            rec = layers.get(w.kernel_parent[k])
            if rec and rec.get("in"):
                S = _shape_row_len(tuple(rec["in"][0]), int(raw[w.inputs(k)].max()), int(w.batch_size))
                if S:
                    out[k] = S
        return out
    path = w.meta.get("path")
    if w.meta.get("format") == "transformer" and path:
        shapes = _file_softmax_shapes(str(path))
        rows = {s[-1] for s in shapes}
        if len(rows) == 1:
            for k in ks:
                S = _shape_row_len(shapes[0], int(raw[w.inputs(k)].max()), int(w.batch_size))
                if S:
                    out[k] = S
    return out


#: the ops a softmax kernel becomes: (name, op class, inputs, output) with the tensors named
#: x (input), y (output), a / b (the backward's two inputs), full-size intermediates d, e, p,
#: row vectors m, s
_SOFTMAX_FWD = (
    ("SoftmaxMax_Forward", "R", ("x",), "m"),
    ("SoftmaxSub_Forward", "E", ("x", "m"), "d"),
    ("SoftmaxExp_Forward", "E", ("d",), "e"),
    ("SoftmaxSum_Forward", "R", ("e",), "s"),
    ("SoftmaxDiv_Forward", "E", ("e", "s"), "y"),
)
_SOFTMAX_BWD = (
    ("SoftmaxMul_Backward", "E", ("a", "b"), "p"),
    ("SoftmaxSum_Backward", "R", ("p",), "s"),
    ("SoftmaxSub_Backward", "E", ("b", "s"), "d"),
    ("SoftmaxScale_Backward", "E", ("d", "a"), "y"),
)


def lower_softmax(w: Workload, freq_ghz: float = 1.2, launch_us: float | None = None) -> Workload:
    """`w` with every SoftmaxBasic kernel whose row length is known (`softmax_rows`) as
    the ops TensorFlow hands XLA: forward a row max, x - max, exp, a row sum and the divide
    (tf2xla/kernels/softmax_op.cc); backward dy * y, its row sum, dy - sum and the product
    with y (TensorFlow's _SoftmaxGrad, python/ops/nn_grad.py). A fusion compiler sees these
    ops: XLA's fusion cannot continue past either row reduction (3 kernels forward, 2
    backward), stitching fuses each softmax into one kernel again.

    Times: each op pays the softmax kernel's fixed cost (`kernel_overheads`) and moves its
    bytes at the rate the softmax kernel moved its own (its time beyond the fixed cost per
    byte of its inputs and outputs); its faulting overheads scale the same way. So the ops
    fused back into one kernel take the softmax kernel's time, and any split pays a fixed
    cost and the intermediates' traffic. The new tensors (row vectors of input bytes / row
    length, full-size intermediates) are non-global and come before the workspaces.
    Kernels whose row length is unknown, or whose tensors are not one input and one output
    (two inputs backward) of one size, stay as they are. meta["lowering"] holds the maps
    (kernel_of: new kernel -> the kernel it came from; tensor_map: old tensor -> new id),
    and meta["kernel_launch_cycles"], ["op_class"], ["kernel_phase"] and ["kernel_flops"]
    describe every kernel."""
    rows = softmax_rows(w)
    raw = w.raw_size.astype(np.int64)
    ws_ids = np.asarray(w.workspace_tensor, dtype=np.int64)
    ws_ids = ws_ids[ws_ids >= 0]
    todo = {}
    for k, S in rows.items():
        ins = [int(t) for t in w.inputs(k)]
        outs = [int(t) for t in w.outputs(k) if t not in set(ws_ids.tolist())]
        fwd = w.kernel_name[k].startswith("SoftmaxBasic_Forward")
        if len(outs) != 1 or len(ins) != (1 if fwd else 2) or S < 1:
            continue
        sizes = {int(raw[t]) for t in ins + outs}
        if len(sizes) != 1 or next(iter(sizes)) % S:
            continue
        todo[k] = (fwd, ins, outs[0], int(raw[outs[0]]), int(raw[outs[0]]) // S)
    if not todo:
        return w
    K, T = w.num_kernels, w.num_tensors
    first_ws = int(ws_ids.min()) if ws_ids.size else T
    if ws_ids.size and not np.array_equal(np.sort(ws_ids), np.arange(first_ws, T)):
        first_ws = T  # workspaces not last: new tensors go at the end
    cls = kernel_classes(w)
    phase = kernel_phases(w)
    flops = kernel_flops(w)
    ov = kernel_overheads(w, freq_ghz, launch_us)
    new_raw: list = []
    names, parents, k_in, k_out, kernel_of = [], [], [], [], []
    ex, inpf, pf, wsb, wst, lc, ncls, nph, nfl = [], [], [], [], [], [], [], [], []

    def tid(t):  # an old tensor's id in the lowered workload
        return t if t < first_ws else t + n_new

    n_made = {
        True: len({op[3] for op in _SOFTMAX_FWD} - {"y"}),  # m, d, e, s
        False: len({op[3] for op in _SOFTMAX_BWD} - {"y"}),
    }  # p, s, d
    n_new = sum(n_made[v[0]] for v in todo.values())
    for k in range(K):
        if k not in todo:
            names.append(w.kernel_name[k])
            parents.append(w.kernel_parent[k])
            k_in.append([tid(int(t)) for t in w.inputs(k)])
            k_out.append([tid(int(t)) for t in w.outputs(k)])
            ex.append(int(w.exec_cycles[k]))
            inpf.append(int(w.input_pf_cycles[k]))
            pf.append(int(w.pf_cycles[k]))
            wsb.append(int(w.workspace_bytes[k]))
            wst.append(tid(int(w.workspace_tensor[k])) if w.workspace_tensor[k] >= 0 else -1)
            lc.append(float(ov[k]))
            ncls.append(cls[k])
            nph.append(phase[k])
            nfl.append(float(flops[k]))
            kernel_of.append(k)
            continue
        fwd, ins, out, full, vec = todo[k]
        t0 = float(w.exec_cycles[k])
        o = min(float(ov[k]), t0)
        body = t0 - o
        io0 = float(full * (len(ins) + 1))
        in0 = float(full * len(ins))
        d_in = float(w.input_pf_cycles[k]) - t0
        d_all = float(w.pf_cycles[k]) - t0
        named = {"y": tid(out)}
        if fwd:
            named["x"] = tid(ins[0])
        else:
            named["a"], named["b"] = tid(ins[0]), tid(ins[1])
        for nm, c, i_names, o_name in _SOFTMAX_FWD if fwd else _SOFTMAX_BWD:
            if o_name not in named:
                named[o_name] = first_ws + len(new_raw)
                new_raw.append(vec if o_name in ("m", "s") else full)
            ii = [named[x] for x in i_names]
            size = {x: (vec if x in ("m", "s") else full) for x in i_names + (o_name,)}
            b_in = float(sum(size[x] for x in i_names))
            b_io = b_in + size[o_name]
            e = max(1, int(round(o + body * b_io / io0)))
            i_ = max(e, int(round(e + (d_in * b_in / in0 if in0 else 0.0))))
            p_ = max(i_, int(round(e + (d_all * b_io / io0 if io0 else 0.0))))
            names.append(nm)
            parents.append(w.kernel_parent[k])
            k_in.append(sorted(ii))
            k_out.append([named[o_name]])
            ex.append(e)
            inpf.append(i_)
            pf.append(p_)
            wsb.append(0)
            wst.append(-1)
            lc.append(o)
            ncls.append(c)
            nph.append(phase[k])
            nfl.append(0.0)
            kernel_of.append(k)
    if len(new_raw) != n_new:  # pragma: no cover - the tables above fix both
        raise AssertionError("softmax lowering made an unexpected number of tensors")
    raw2 = np.concatenate([raw[:first_ws], np.asarray(new_raw, np.int64), raw[first_ws:]])
    glob = np.asarray(w.is_global, dtype=bool)
    glob2 = np.concatenate([glob[:first_ws], np.zeros(len(new_raw), bool), glob[first_ws:]])
    size2 = page_round(raw2)
    address, W = address_layout(size2, glob2)
    in_ptr, in_idx = csr_from_lists([np.asarray(x, np.int64) for x in k_in])
    out_ptr, out_idx = csr_from_lists([np.asarray(x, np.int64) for x in k_out])
    tmap = np.array([tid(t) for t in range(T)], dtype=np.int64)
    meta = dict(w.meta)
    meta.update(
        op_class=ncls,
        kernel_phase=nph,
        kernel_flops=np.asarray(nfl),
        kernel_launch_cycles=np.asarray(lc, dtype=np.float64),
    )
    meta["lowering"] = {
        "softmax": "ops",
        "softmax_kernels": len(todo),
        "softmax_rows": sorted({v[3] // v[4] for v in todo.values()}),
        "kernel_of": np.asarray(kernel_of, dtype=np.int64),
        "tensor_map": tmap,
        "new_tensors": len(new_raw),
    }
    return Workload(
        name=w.name,
        batch_size=w.batch_size,
        raw_size=raw2,
        size=size2,
        is_global=glob2,
        address=address,
        weights_bytes=W,
        kernel_name=names,
        kernel_parent=parents,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        exec_cycles=np.asarray(ex, np.int64),
        input_pf_cycles=np.asarray(inpf, np.int64),
        pf_cycles=np.asarray(pf, np.int64),
        workspace_bytes=np.asarray(wsb, np.int64),
        workspace_tensor=np.asarray(wst, np.int32),
        meta=meta,
    )


# ---------------------------------------------------------------------------------------------
# Grouping


def _max_input_bytes(w: Workload) -> np.ndarray:
    raw = w.raw_size.astype(np.int64)
    out = np.zeros(w.num_kernels, dtype=np.int64)
    for k in range(w.num_kernels):
        ins = w.inputs(k)
        if len(ins):
            out[k] = raw[ins].max()
    return out


def plan_groups(w: Workload, options: FusionOptions) -> list:
    """The groups in their new execution order: a list of lists of kernel ids (a group of one
    is a kernel left as it is). With defer_update, an update-phase kernel (Apply_Grad) met
    while a backward group is open waits until that group closes, and then runs, unless a
    kernel joining the group would touch a tensor it writes or write one it reads (then
    the group closes first); so update kernels no longer cut backward chains in two."""
    o = options.check()
    K = w.num_kernels
    if o.mode == "none" or K == 0:
        return [[k] for k in range(K)]
    cls = kernel_classes(w, o.pooling)
    phase = kernel_phases(w)
    raw = w.raw_size.astype(np.int64)
    glob = np.asarray(w.is_global, dtype=bool)
    maxin = _max_input_bytes(w)
    ws = set(int(t) for t in w.workspace_tensor if t >= 0)
    groups: list = []
    cur: list = []  # the open group
    writer: dict = {}  # tensor -> member that last wrote it, within the open group
    readers: set = set()  # non-global tensors the members read
    pending: list = []  # deferred update kernels
    p_reads: set = set()
    p_writes: set = set()

    def close():
        nonlocal cur, writer, readers, pending, p_reads, p_writes
        if cur:
            groups.append(cur)
        groups.extend([p] for p in pending)
        cur, writer, readers, pending, p_reads, p_writes = [], {}, set(), [], set(), set()

    def joins(k) -> bool:
        if not cur or cls[k] == "C":
            return False
        if o.max_group and len(cur) >= o.max_group:
            return False
        if not o.cross_phase and phase[k] != phase[cur[0]]:
            return False
        ins = [int(t) for t in w.inputs(k)]
        outs = [int(t) for t in w.outputs(k)]
        if pending and (any(t in p_writes for t in ins + outs) or any(t in p_reads for t in outs)):
            return False
        deps = [t for t in ins if t in writer]
        sibling = any(t in readers for t in ins)
        if not deps and not sibling:
            return False
        for t in deps:
            p = writer[t]
            if cls[p] in ("R", "B") and raw[t] < maxin[p]:  # a reduction result
                if o.mode == "xla" or maxin[p] > o.stitch_max_reduce * raw[t]:
                    return False
        return True

    for k in range(K):
        if joins(k):
            cur.append(k)
        elif (
            o.defer_update
            and cur
            and phase[k] == "update"
            and phase[cur[0]] != "update"
            and not any(int(t) in p_writes for t in w.inputs(k))
        ):
            pending.append(k)
            p_reads.update(int(t) for t in w.inputs(k))
            p_writes.update(int(t) for t in w.outputs(k))
            continue
        else:
            close()
            if cls[k] == "C":
                groups.append([k])
                continue
            cur = [k]
        for t in w.outputs(k):
            if int(t) not in ws:
                writer[int(t)] = k
        readers.update(int(t) for t in w.inputs(k) if not glob[t])
    close()
    return groups


# ---------------------------------------------------------------------------------------------
# The pass


def _attributed(w: Workload, mem, touch, ext_in: set, outs: list, raw, o_i) -> tuple:
    """(work, input-faulting extra, all-faulting extra), cycles, of a fused group under
    `traffic_attributed`: every tensor the fused kernel still reads or writes in GPU memory
    (its external inputs, its surviving outputs) is moved once, at the rate of the first
    member that touches it: that member's time beyond its fixed cost per byte of its own
    inputs and outputs (and its faulting overheads per byte of its inputs, of all its
    tensors)."""
    ext_out = set(outs)
    seen: set = set()
    work = f_in = f_all = 0.0
    for j, k in enumerate(mem):
        ins, ous = touch[j]
        b_in = float(raw[ins].sum())
        b_io = b_in + float(raw[ous].sum())
        t = float(w.exec_cycles[k])
        body = max(t - float(o_i[j]), 0.0)
        d_in = float(w.input_pf_cycles[k]) - t
        d_all = float(w.pf_cycles[k]) - t
        # the group's external inputs, then its external outputs, each tensor once
        for t_id, ext, is_in in chain(((t, ext_in, True) for t in ins), ((t, ext_out, False) for t in ous)):
            if t_id in ext and t_id not in seen:
                seen.add(t_id)
                x = float(raw[t_id])
                work += body * x / b_io if b_io else 0.0
                if is_in:
                    f_in += d_in * x / b_in if b_in else 0.0
                f_all += d_all * x / b_io if b_io else 0.0
    return work, f_in, f_all


def fuse(
    w: Workload,
    mode="none",
    *,
    freq_ghz: float = 1.2,
    hbm_gbps: float | None = None,
    peak_tflops: float | None = None,
    **options,
) -> Workload:
    """The fused Workload (module doc). `mode` is a FUSE_MODES name or a FusionOptions;
    `options` replace FusionOptions fields. "none" returns `w` itself.

    freq_ghz: the clock the workload's cycles count (the system's); hbm_gbps, peak_tflops:
    the GPU's, for the bandwidth and compute floors of the fused time (None: no floor;
    `roofline` needs hbm_gbps)."""
    o = mode if isinstance(mode, FusionOptions) else FusionOptions(mode=str(mode))
    if options:
        o = dataclasses.replace(o, **options)
    o.check()
    if o.mode == "none":
        return w
    if not (isinstance(freq_ghz, (int, float)) and freq_ghz > 0):
        raise InputError(f"must be a positive number of GHz, got {freq_ghz!r}", param="GPU_frequency_GHz")
    if o.time_model == "roofline" and not hbm_gbps:
        raise InputError("the roofline time model needs the GPU's HBM bandwidth", param="gpu.hbm_gbps")
    K0, T0 = w.num_kernels, w.num_tensors
    if o.softmax == "ops":
        w = lower_softmax(w, freq_ghz, o.launch_us)
    groups = plan_groups(w, o)
    K, T = w.num_kernels, w.num_tensors
    G = len(groups)
    raw = w.raw_size.astype(np.int64)
    glob = np.asarray(w.is_global, dtype=bool)
    flops = kernel_flops(w)
    cls = kernel_classes(w, o.pooling)
    phase = kernel_phases(w)
    ws_of = np.asarray(w.workspace_tensor, dtype=np.int64)
    is_ws = np.zeros(T, dtype=bool)
    is_ws[ws_of[ws_of >= 0]] = True

    # kernels referencing each tensor, and how many of them lie in each group
    refs = [np.union1d(w.inputs(k), w.outputs(k)).astype(np.int64) for k in range(K)]
    n_ref = np.zeros(T, dtype=np.int64)
    for r in refs:
        n_ref[r] += 1

    ov = kernel_overheads(w, freq_ghz, o.launch_us)  # cycles per old kernel
    launch = np.zeros(G, np.float64)  # cycles per new kernel
    bw = float(hbm_gbps) * 1e9 / (float(freq_ghz) * 1e9) if hbm_gbps else 0.0  # bytes/cycle
    peak = float(peak_tflops) * 1e12 / (float(freq_ghz) * 1e9) if peak_tflops else 0.0

    keep = np.ones(T, dtype=bool)
    names, parents, k_in, k_out = [], [], [], []
    ex = np.zeros(G, np.int64)
    inpf = np.zeros(G, np.int64)
    pf = np.zeros(G, np.int64)
    wsb = np.zeros(G, np.int64)
    wst = np.full(G, -1, np.int64)
    new_flops = np.zeros(G, np.float64)
    new_cls, new_phase, members = [], [], []
    fused_groups = 0
    for g, mem in enumerate(groups):
        members.append(tuple(int(k) for k in mem))
        a = mem[0]
        new_flops[g] = flops[mem].sum()
        new_phase.append(phase[a])
        if len(mem) == 1:
            k = mem[0]
            names.append(w.kernel_name[k])
            parents.append(w.kernel_parent[k])
            k_in.append(w.inputs(k).astype(np.int64))
            k_out.append(w.outputs(k).astype(np.int64))
            ex[g], inpf[g], pf[g] = w.exec_cycles[k], w.input_pf_cycles[k], w.pf_cycles[k]
            wsb[g], wst[g] = w.workspace_bytes[k], ws_of[k]
            new_cls.append(cls[k])
            launch[g] = min(ov[k], float(w.exec_cycles[k]))
            continue
        fused_groups += 1
        written: set = set()
        ext_in: list = []
        outs: list = []
        io = in_b = 0
        touch = []  # per member: (its inputs, its outputs), workspaces left out
        for k in mem:
            ins = [int(t) for t in w.inputs(k)]
            ous = [int(t) for t in w.outputs(k) if not is_ws[t]]
            touch.append((ins, ous))
            io += int(raw[ins].sum()) + int(raw[ous].sum())
            in_b += int(raw[ins].sum())
            for t in ins:
                if t not in written and t not in ext_in:
                    ext_in.append(t)
            written.update(ous)
            outs.extend(t for t in ous if t not in outs)
        ts, inside = np.unique(np.concatenate([refs[k] for k in mem]), return_counts=True)
        used_outside = set(ts[inside < n_ref[ts]].tolist())
        ext_set = set(ext_in)
        gone = [t for t in outs if not glob[t] and t not in used_outside and t not in ext_set]
        keep[gone] = False
        gone_set = set(gone)
        outs = [t for t in outs if t not in gone_set]
        # workspaces: the fused kernel keeps its largest member's, the others go
        wk = [int(ws_of[k]) for k in mem if ws_of[k] >= 0]
        if wk:
            big = max(wk, key=lambda t: (raw[t], -t))
            keep[[t for t in wk if t != big]] = False
            wst[g], wsb[g] = big, int(raw[big])
            outs.append(big)
        ext_in_b = int(raw[ext_in].sum())
        ext = ext_in_b + int(raw[[t for t in outs if not is_ws[t]]].sum())
        t_i = w.exec_cycles[mem].astype(np.float64)
        o_i = ov[mem]
        L = float(o_i.max())  # the fused kernel's one fixed cost
        sum_t = float(t_i.sum())
        if o.time_model == "sum_minus_launch":
            tf = max(sum_t - (float(o_i.sum()) - L), float(t_i.max()))
        else:
            floor = max(ext / bw if bw else 0.0, new_flops[g] / peak if peak else 0.0)
            if o.time_model == "roofline":
                tf = L + floor
            elif o.time_model == "traffic_attributed":
                tf = L + max(_attributed(w, mem, touch, ext_set, outs, raw, o_i)[0], floor)
            else:
                body = float(np.maximum(t_i - o_i, 0.0).sum())
                tf = L + max(body * (ext / io if io else 0.0), floor)
            tf = min(tf, sum_t)
        tf = max(1.0, tf)
        if o.time_model == "traffic_attributed":
            _, f_in, f_all = _attributed(w, mem, touch, ext_set, outs, raw, o_i)
        else:
            d_in = float((w.input_pf_cycles[mem] - w.exec_cycles[mem]).sum())
            d_all = float((w.pf_cycles[mem] - w.exec_cycles[mem]).sum())
            f_in = d_in * ext_in_b / in_b if in_b else 0.0
            f_all = d_all * ext / io if io else 0.0
        e = int(round(tf))
        i_ = max(e, int(round(tf + f_in)))
        p_ = max(i_, int(round(tf + f_all)))
        ex[g], inpf[g], pf[g] = e, i_, p_
        launch[g] = min(L, float(e))
        ph = phase[a]
        word = {"forward": "Forward", "backward": "Backward", "update": "Apply_Grad"}.get(ph, ph)
        names.append(f"Fused{o.mode.capitalize()}_{word}")
        seen = []
        for k in mem:
            if w.kernel_parent[k] not in seen:
                seen.append(w.kernel_parent[k])
        parents.append("+".join(seen))
        k_in.append(np.asarray(ext_in, dtype=np.int64))
        k_out.append(np.asarray(outs, dtype=np.int64))
        mc = [cls[k] for k in mem]
        new_cls.append("R" if "R" in mc else "B" if "B" in mc else "E")

    new_id = np.full(T, -1, dtype=np.int64)
    new_id[keep] = np.arange(int(keep.sum()))
    k_in = [new_id[r] for r in k_in]
    k_out = [new_id[r] for r in k_out]
    for r in k_in + k_out:
        if len(r) and r.min() < 0:  # pragma: no cover - the deletion rule forbids it
            raise AssertionError("a deleted tensor is still referenced")
    in_ptr, in_idx = csr_from_lists(k_in)
    out_ptr, out_idx = csr_from_lists(k_out)
    raw2 = raw[keep]
    size2 = page_round(raw2)
    glob2 = glob[keep]
    address, W = address_layout(size2, glob2)
    wst2 = np.where(wst >= 0, new_id[np.maximum(wst, 0)], -1).astype(np.int32)
    meta = dict(w.meta)
    meta.update(kernel_flops=new_flops, op_class=new_cls, kernel_phase=new_phase, kernel_launch_cycles=launch)
    meta["fusion"] = {
        "mode": o.mode,
        "options": dataclasses.asdict(o),
        "kernels_before": K0,
        "kernels_after": G,
        "fused_groups": fused_groups,
        "tensors_before": T0,
        "tensors_after": int(keep.sum()),
        # of the lowered workload (K, T: softmax's ops and intermediates included)
        "kernels_lowered": K,
        "tensors_lowered": T,
        "deleted_tensors": int(T - keep.sum()),
        "deleted_bytes": int(page_round(raw[~keep]).sum()),
        # ids of the pass's input after `lower_softmax` (the workload's own when it has no
        # softmax kernel, or softmax = "kernel"); meta["lowering"] maps the workload's to them
        "members": members,  # per new kernel: the old kernel ids it runs, in order
        "tensor_map": new_id,  # old tensor id -> new id (-1: deleted)
        "lowering": w.meta.get("lowering"),
        "previous": {k: v for k, v in w.meta.get("fusion", {}).items() if k == "mode"},
    }
    return Workload(
        name=w.name,
        batch_size=w.batch_size,
        raw_size=raw2,
        size=size2,
        is_global=glob2,
        address=address,
        weights_bytes=W,
        kernel_name=names,
        kernel_parent=parents,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        exec_cycles=ex,
        input_pf_cycles=inpf,
        pf_cycles=pf,
        workspace_bytes=wsb,
        workspace_tensor=wst2,
        meta=meta,
    )


# ---------------------------------------------------------------------------------------------
# Measures (for the benchmark, docs and tests)


def live_bytes(w: Workload) -> np.ndarray:
    """Bytes alive at each kernel (page-rounded): the globals plus every non-global tensor from
    its first use to its last read (a never-read tensor at its first use only), the live
    ranges of the vitality analysis (g10fast.analysis.vitality, §4.1)."""
    K, T = w.num_kernels, w.num_tensors
    kin = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.out_ptr))
    first = np.full(T, K, dtype=np.int64)
    np.minimum.at(first, w.in_idx.astype(np.int64), kin)
    np.minimum.at(first, w.out_idx.astype(np.int64), kout)
    last_read = np.full(T, -1, dtype=np.int64)
    np.maximum.at(last_read, w.in_idx.astype(np.int64), kin)
    size = w.size.astype(np.int64)
    glob = np.asarray(w.is_global, dtype=bool)
    loc = ~glob & (first < K)
    lo = first[loc]
    hi = np.where(last_read[loc] >= 0, last_read[loc] + 1, lo + 1)
    acc = np.zeros(K + 1, dtype=np.int64)
    np.add.at(acc, lo, size[loc])
    np.add.at(acc, hi, -size[loc])
    return np.cumsum(acc)[:K] + int(size[glob].sum())


def summary(w: Workload, freq_ghz: float = 1.2) -> dict:
    """Kernels (= launches), tensors, footprint, peak live bytes, ideal time and FLOPs."""
    lb = live_bytes(w) if w.num_kernels else np.zeros(1, np.int64)
    return {
        "kernels": w.num_kernels,
        "launches": w.num_kernels,
        "tensors": w.num_tensors,
        "footprint_bytes": w.footprint_bytes,
        "peak_live_bytes": int(lb.max()),
        "ideal_s": float(w.exec_cycles.sum()) / (float(freq_ghz) * 1e9),
        "flops": float(kernel_flops(w).sum()),
    }


def host_timeline(exec_cycles, host_cycles: float) -> np.ndarray:
    """End time (cycles, float64) of each kernel when the host issues the launches one after
    another, `host_cycles` each, and the GPU runs them in order as soon as each is issued
    and the previous one is done:

        issue_k = (k + 1) h,  end_k = max(issue_k, end_(k-1)) + t_k
                = G_k + max_(j<=k) (issue_j - G_(j-1))      (G: running sum of t)

    The host runs ahead without bound (a stream queues about 1000 launches, anchors.md
    §4.1; a full queue only delays the host, never a kernel). The GPU idles while the host
    is behind: the CPU-GPU switches the FusionStitching paper counts."""
    t = np.asarray(exec_cycles, dtype=np.float64)
    if not (np.isfinite(host_cycles) and host_cycles >= 0):
        raise InputError(f"must be a finite number >= 0, got {host_cycles!r}", param="host_launch_us")
    if t.size == 0:
        return t
    G = np.cumsum(t)
    issue = float(host_cycles) * np.arange(1, t.size + 1, dtype=np.float64)
    return G + np.maximum.accumulate(issue - (G - t))


def kernel_traffic(w: Workload) -> np.ndarray:
    """Per kernel the bytes it reads and writes in GPU memory (its inputs and outputs, each
    tensor once, workspaces left out): what a memory-bound kernel's time follows."""
    raw = w.raw_size.astype(np.int64)
    ws = np.zeros(w.num_tensors, dtype=bool)
    wt = np.asarray(w.workspace_tensor, dtype=np.int64)
    ws[wt[wt >= 0]] = True
    out = np.zeros(w.num_kernels, dtype=np.int64)
    for k in range(w.num_kernels):
        ts = np.union1d(w.inputs(k), w.outputs(k)).astype(np.int64)
        out[k] = int(raw[ts[~ws[ts]]].sum())
    return out


def time_breakdown(
    w: Workload, freq_ghz: float = 1.2, host_launch_us: float = HOST_LAUNCH_US, launch_us: float | None = None
) -> dict:
    """What a step's time is made of (seconds; bytes):

    launch_s   the kernels' fixed GPU-side costs (`kernel_overheads`, each capped at
               its kernel's time)
    work_s     the rest of the kernels' times: moving their bytes, their FLOPs
    idle_s     the GPU waiting for the host to issue launches (`host_timeline`)
    total_s    launch_s + work_s + idle_s: the step with the host in the loop
    gpu_s      launch_s + work_s: the kernels back to back (the engines' ideal time)
    memory_intensive_s, memory_intensive_launch_s, memory_intensive_bytes: gpu_s,
               launch_s and traffic_bytes of the kernels that are not class C (what
               fusion works on); traffic_bytes: every kernel's."""
    f = float(freq_ghz) * 1e9
    t = w.exec_cycles.astype(np.float64)
    lc = np.minimum(kernel_overheads(w, freq_ghz, launch_us), t)
    end = host_timeline(t, host_launch_us * 1e-6 * f)
    total = float(end[-1]) if t.size else 0.0
    cls = np.array(kernel_classes(w)) if w.num_kernels else np.array([], dtype=str)
    mi = cls != "C"
    tr = kernel_traffic(w)
    return {
        "kernels": w.num_kernels,
        "launch_s": float(lc.sum()) / f,
        "work_s": float((t - lc).sum()) / f,
        "idle_s": (total - float(t.sum())) / f,
        "total_s": total / f,
        "gpu_s": float(t.sum()) / f,
        "memory_intensive_s": float(t[mi].sum()) / f,
        "memory_intensive_launch_s": float(lc[mi].sum()) / f,
        "memory_intensive_kernels": int(mi.sum()),
        "memory_intensive_bytes": int(tr[mi].sum()),
        "traffic_bytes": int(tr.sum()),
    }


def gain_breakdown(before: dict, after: dict) -> dict:
    """Speed-up of `after` over `before` (two `time_breakdown`s, e.g. xla then stitch) and
    the seconds it is made of: fewer launches' fixed costs, less work (the intermediates
    that no longer travel through GPU memory), less idle time waiting for the host (fewer
    CPU-GPU switches). The three parts sum to the time saved."""
    saved = before["total_s"] - after["total_s"]
    parts = {
        "launches_s": before["launch_s"] - after["launch_s"],
        "traffic_s": before["work_s"] - after["work_s"],
        "switches_s": before["idle_s"] - after["idle_s"],
    }
    return {
        "speedup": before["total_s"] / after["total_s"] if after["total_s"] else math.inf,
        "gpu_speedup": before["gpu_s"] / after["gpu_s"] if after["gpu_s"] else math.inf,
        "saved_s": saved,
        **parts,
        "share": {k: (v / saved if saved else 0.0) for k, v in parts.items()},
        "kernels": (before["kernels"], after["kernels"]),
        "traffic_bytes": (before["traffic_bytes"], after["traffic_bytes"]),
    }


__all__ = [
    "FUSE_MODES",
    "FusionOptions",
    "HOST_LAUNCH_US",
    "SOFTMAX_FORMS",
    "fuse",
    "gain_breakdown",
    "host_timeline",
    "kernel_classes",
    "kernel_flops",
    "kernel_overheads",
    "kernel_phase",
    "kernel_traffic",
    "live_bytes",
    "lower_softmax",
    "op_class",
    "plan_groups",
    "softmax_rows",
    "summary",
    "time_breakdown",
]
