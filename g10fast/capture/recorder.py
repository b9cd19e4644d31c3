"""The dispatch recorder: every aten op below autograd, as the GPU would launch it.

A `Recorder` sits above `FakeTensorMode` on the dispatch-mode stack. For each op it records
the storages the op reads and writes (identity = the untyped storage, so views, `detach`,
`t` and `_unsafe_view` are the same tensor), the storages it creates, the storages freed
since the previous op (a `StorageWeakRef` that expired), FLOPs (torch's flop registry, plus
attention) and bytes. It then turns the op into the kernels a GPU runs for it (the split
rules, `split_op`): most ops are one kernel; views and allocations are none;
`convolution_backward` is one kernel per requested gradient (cuDNN's dgrad, wgrad and the
bias reduction); `_foreach_*` and `_fused_adam(w)_` are one kernel per parameter (G10's
per-weight Apply_Grad). Ops that touch only host scalars (the optimizer's step counters,
kept on the CPU by PyTorch's non-fused optimizers) launch nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

_EXPIRED = torch.UntypedStorage._expired

#: ops that allocate (or alias, or read a scalar back) without launching a kernel
NO_KERNEL = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "lift_fresh",
    "lift_fresh_copy",
    "_local_scalar_dense",
    "detach",
    "alias",
    "set_",
    "resize_",
    "_resize_output_",
    "record_stream",
}
#: ops whose output storage is a host (CPU) scalar on a GPU run
HOST_SCALAR_OPS = {"lift_fresh", "lift_fresh_copy", "scalar_tensor"}

GEMM_OPS = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "matmul",
    "linear",
    "_scaled_mm",
    "addbmm",
    "addmv",
    "mv",
    "dot",
    "_int_mm",
}
CONV_OPS = {
    "convolution",
    "_convolution",
    "convolution_backward",
    "cudnn_convolution",
    "_slow_conv2d_forward",
    "convolution_overrideable",
}
ATTENTION_FWD = {
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_flash_attention_forward",
    "_efficient_attention_forward",
}
ATTENTION_BWD = {n + "_backward" for n in ATTENTION_FWD} | {
    "_flash_attention_backward",
    "_efficient_attention_backward",
}
#: the CUDA name of a CPU-only op (what the kernel would be called on the GPU)
CUDA_NAME = {
    "_scaled_dot_product_flash_attention_for_cpu": "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu_backward": "_scaled_dot_product_flash_attention_backward",
}


@dataclass
class Kernel:
    name: str  # aten op (overload) as the GPU runs it, e.g. "addmm",
    #                           "convolution_backward.weight", "_foreach_mul_.Scalar"
    op: str  # the aten op packet, e.g. "convolution_backward"
    kind: str  # gemm | conv | attention | memory
    phase: str  # fwd | bwd | opt
    parent: str  # module path (or the parameter, in the optimizer step)
    ins: list  # storage ids read
    outs: list  # storage ids written (created or mutated)
    flops: float
    bytes: int  # bytes of the tensors it reads and writes (views as viewed)


@dataclass
class Storage:
    id: int
    nbytes: int
    label: str = ""  # "param:NAME", "buffer:NAME", "state:NAME.KEY", "input:i"
    host: bool = False
    alloc_kernel: int = -1  # kernels recorded before it was created (-1: before the step)
    free_kernel: int = -1  # kernels recorded before it was freed (-1: alive at the end)


def _kind(op: str) -> str:
    if op in GEMM_OPS:
        return "gemm"
    if op in CONV_OPS:
        return "conv"
    if op in ATTENTION_FWD or op in ATTENTION_BWD:
        return "attention"
    return "memory"


def _shape(t):
    return tuple(int(s) for s in t.shape)


def attention_flops(op: str, args, kwargs, causal: bool) -> float:
    """4·B·H·Tq·Tk·d forward (QKᵀ and PV), twice that backward; halved when causal (the
    blocks above the diagonal are skipped by flash kernels)."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    ts = [a for a in args if isinstance(a, torch.Tensor)]
    if op in ATTENTION_FWD:
        q, k, v = ts[:3]
        f = sdpa_flop_count(_shape(q), _shape(k), _shape(v))
    else:
        g, q, k, v = ts[:4]
        f = sdpa_backward_flop_count(_shape(g), _shape(q), _shape(k), _shape(v))
    return f / 2 if causal else f


class Recorder(TorchDispatchMode):
    """Records kernels (`self.kernels`) and storages (`self.storages`) while active and
    `self.recording` is true; `phase` and the module tracker label each kernel."""

    def __init__(self, module_tracker=None):
        super().__init__()
        self.mt = module_tracker
        self.phase = "forward"
        self.recording = True
        self.kernels: list[Kernel] = []
        self.storages: list[Storage] = []
        self._live: dict = {}  # storage cdata -> (id, StorageWeakRef)
        self._sweepable: dict = {}  # the subset that may be freed (not params / state)
        self.param_of: dict = {}  # storage id -> parameter name
        self.last_param = ""
        self.ops_seen = 0

    # -- identity ------------------------------------------------------------------------
    def sid(self, t: torch.Tensor, create=True, label="", host=False, sweep=True):
        s = t.untyped_storage()
        ref = StorageWeakRef(s)
        e = self._live.get(ref.cdata)
        if e is not None and not e[1].expired():
            return e[0]
        if e is not None:  # expired but not swept yet: the address was reused
            self._free(ref.cdata)
        if not create:
            return None
        i = len(self.storages)
        self.storages.append(
            Storage(i, int(s.nbytes()), label, host, len(self.kernels) if self.recording else -1)
        )
        self._live[ref.cdata] = (i, ref)
        if sweep:
            self._sweepable[ref.cdata] = ref
        return i

    def register(self, t: torch.Tensor, label: str, persistent: bool, host=False) -> int:
        """A tensor that exists before the recorded step (parameter, buffer, optimizer
        state, input): persistent ones are never swept (they outlive the step)."""
        return self.sid(t, label=label, host=host, sweep=not persistent)

    def label(self, t: torch.Tensor, label: str) -> None:
        i = self.sid(t, create=False)
        if i is not None and not self.storages[i].label:
            self.storages[i].label = label

    def _free(self, cdata):
        i, _ = self._live.pop(cdata)
        self._sweepable.pop(cdata, None)
        self.storages[i].free_kernel = len(self.kernels)

    def sweep(self):
        """Free events for the storages whose last reference went since the previous sweep.
        Run before each kernel is appended: a weak reference keeps its storage's control
        block, so a cdata is never reused while it is tracked, and frees between two
        kernels need no finer order."""
        exp = _EXPIRED
        dead = [c for c in self._sweepable if exp(c)]
        for c in dead:
            self._free(c)

    # -- dispatch --------------------------------------------------------------------------
    def _parent(self) -> str:
        if self.mt is None:
            return ""
        ps = [p for p in self.mt.parents if p != "Global"]
        leaves = sorted(p for p in ps if not any(q != p and q.startswith(p + ".") for q in ps))
        return ",".join(leaves)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "prim" or not self.recording:
            return func(*args, **kwargs)
        self.ops_seen += 1
        op = func._overloadpacket.__name__
        written = _written_args(func, args, kwargs)
        flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        ins = [self.sid(a) for a in flat_in]
        out = func(*args, **kwargs)
        flat_out = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        n0 = len(self.storages)
        outs = [self.sid(o, host=op in HOST_SCALAR_OPS) for o in flat_out]
        new = [i for i in outs if i >= n0]
        wr = [self.sid(a) for a in written]
        if op in NO_KERNEL or (not new and not wr):
            return out  # a view, an alias, an allocation, a metadata query
        host = {i for i in ins + outs if self.storages[i].host}
        if all(i in host for i in ins + outs):
            return out  # host scalar arithmetic (step counters)
        self.sweep()
        for k in split_op(self, func, op, args, kwargs, out, flat_in, ins, flat_out, outs, wr):
            k.ins = sorted({i for i in k.ins if i not in host})
            k.outs = sorted({i for i in k.outs if i not in host})
            if k.outs or k.ins:
                self.kernels.append(k)
        return out

    def finish(self):
        """Frees that happened after the last op (the end of the step)."""
        self.sweep()


def _written_args(func, args, kwargs) -> list:
    """The tensors an op writes in place (schema `Tensor(a!)`), except the gradients a fused
    optimizer's schema marks writable (it reads them)."""
    if not func._schema.is_mutable:
        return []
    out = []
    for j, a in enumerate(func._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        if a.name == "grads" and "_fused_" in func._schema.name:
            continue
        v = kwargs.get(a.name) if (a.kwarg_only or j >= len(args)) else args[j]
        out += [t for t in tree_flatten(v)[0] if isinstance(t, torch.Tensor)]
    return out


def _nbytes(ts) -> int:
    return int(sum(t.numel() * t.element_size() for t in ts))


def split_op(rec: Recorder, func, op, args, kwargs, out, flat_in, ins, flat_out, outs, wr):
    """The kernels of one op (module docstring)."""
    name = CUDA_NAME.get(op) or str(func).removeprefix("aten.").removesuffix(".default")
    parent = rec._parent()
    phase = rec.phase
    pkt = func._overloadpacket
    if op == "convolution_backward":
        return _split_conv_backward(rec, func, args, kwargs, out, ins, outs, phase, parent)
    if op.startswith("_foreach_") or op.startswith("_fused_"):
        return _split_per_tensor(rec, func, name, op, args, kwargs, out, phase, parent)
    if op in ATTENTION_FWD or op in ATTENTION_BWD:
        causal = bool(kwargs.get("is_causal", False))
        if not causal:
            sch = func._schema.arguments
            for j, a in enumerate(sch):
                if a.name == "is_causal" and j < len(args):
                    causal = bool(args[j])
        flops = attention_flops(op, args, kwargs, causal)
    elif pkt in flop_registry:
        flops = float(flop_registry[pkt](*args, **kwargs, out_val=out))
    else:
        flops = 0.0
    if phase == "update" and not parent:
        parent = _param_parent(rec, ins + outs)
    return [
        Kernel(
            name,
            op,
            _kind(op),
            phase,
            parent,
            list(ins),
            list(outs) + list(wr),
            flops,
            _nbytes(flat_in) + _nbytes(flat_out),
        )
    ]


def _param_parent(rec: Recorder, ids) -> str:
    """The parameter an optimizer kernel updates; a temporary of the per-parameter loop
    (sqrt, div of the denominator) belongs to the parameter last seen."""
    for i in ids:
        if i in rec.param_of:
            rec.last_param = rec.param_of[i]
            return rec.last_param
    return rec.last_param or "optimizer"


def _split_conv_backward(rec, func, args, kwargs, out, ins, outs, phase, parent):
    """cuDNN runs dgrad (grad_input from grad_output and weight), then wgrad (grad_weight from
    grad_output and input); the bias gradient is a reduction of grad_output after them."""
    sch = [a.name for a in func._schema.arguments]
    vals = dict(zip(sch, args))
    vals.update(kwargs)
    mask = list(vals["output_mask"])
    g_out, x, w = vals["grad_output"], vals["input"], vals["weight"]
    gi, gx, gw = (rec.sid(t) for t in (g_out, x, w))
    pieces = []
    part = {0: ("input", [gi, gw]), 1: ("weight", [gi, gx]), 2: ("bias", [gi])}
    for j in range(3):
        if not mask[j] or out[j] is None:
            continue
        m = [False, False, False]
        m[j] = True
        a2 = dict(vals, output_mask=m)
        if j < 2:
            flops = float(
                flop_registry[func._overloadpacket](
                    *[a2[n] for n in sch], out_val=tuple(o if k == j else None for k, o in enumerate(out))
                )
            )
        else:
            flops = 0.0
        src, ids = part[j]
        o = out[j]
        kind = "conv" if j < 2 else "memory"
        pieces.append(
            Kernel(
                f"convolution_backward.{src}",
                "convolution_backward",
                kind,
                phase,
                parent,
                ids,
                [rec.sid(o)],
                flops,
                _nbytes([g_out] + ([w] if j == 0 else [x] if j == 1 else []) + [o]),
            )
        )
    return pieces


def _split_per_tensor(rec, func, name, op, args, kwargs, out, phase, parent):
    """One kernel per index of the op's tensor lists (multi-tensor apply, per weight)."""
    sch = func._schema.arguments
    lists, scalars = [], []
    for j, a in enumerate(sch):
        v = kwargs.get(a.name) if (a.kwarg_only or j >= len(args)) else args[j]
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
            write = a.alias_info is not None and a.alias_info.is_write and a.name != "grads"
            lists.append((v, write))
        elif isinstance(v, torch.Tensor):
            scalars.append(v)
    outl = out if isinstance(out, (list, tuple)) and out and isinstance(out[0], torch.Tensor) else None
    n = max(len(v) for v, _ in lists) if lists else 0
    pieces = []
    for i in range(n):
        ts_in = [v[i] for v, _ in lists if len(v) > i] + scalars
        ts_w = [v[i] for v, w in lists if w and len(v) > i]
        ts_o = [outl[i]] if outl is not None and len(outl) > i else []
        ids_in = [rec.sid(t) for t in ts_in]
        ids_out = [rec.sid(t) for t in ts_w + ts_o]
        par = _param_parent(rec, ids_in + ids_out) if phase == "update" else parent
        pieces.append(
            Kernel(name, op, "memory", phase, par, ids_in, ids_out, 0.0, _nbytes(ts_in + ts_o + ts_w))
        )
    return pieces
