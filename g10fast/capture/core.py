"""Capture one training iteration of a PyTorch model on fake CPU tensors (docs/capture.md).

    from g10fast.capture import Model, capture, to_workload
    cap = capture(Model("mine", make_module, make_inputs, loss_fn, make_optimizer, batch=8))
    w = to_workload(cap, system="g10-artifact")      # a Workload like any other

The model is built on the meta device and materialised inside FakeTensorMode on the CPU
device, so no tensor memory is allocated. Iteration 1 (forward, backward, optimizer step,
zero_grad) runs unrecorded and creates the optimizer state; iteration 2 is recorded by the
`Recorder`. Kernel times come from the project's cost model (`kernel_times`), given each
kernel's FLOPs and the bytes of its tensors.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from g10fast.atomic import checked_target
from g10fast.capture.model import Model
from g10fast.capture.recorder import Recorder
from g10fast.errors import InputError


@dataclass
class Capture:
    model: Model
    kernels: list
    storages: list
    seconds: float
    ops_seen: int
    params: int
    info: dict = field(default_factory=dict)

    def events(self) -> list:
        """(kind, storage id, kernel index) alloc/free events in order (allocs of storages
        created before the step at index -1)."""
        ev = []
        for s in self.storages:
            if s.host:
                continue
            ev.append((s.alloc_kernel, 0, "alloc", s.id))
            if s.free_kernel >= 0:
                ev.append((s.free_kernel, -1, "free", s.id))
        ev.sort(key=lambda e: (e[0], e[1], e[3]))
        return [(k, i, at) for at, _, k, i in ev]

    def peak_live_bytes(self) -> int:
        """Peak of the bytes of live storages over the step (allocated before each kernel,
        freed at their free event)."""
        K = len(self.kernels)
        delta = np.zeros(K + 2, np.int64)
        for s in self.storages:
            if s.host:
                continue
            delta[s.alloc_kernel + 1] += s.nbytes
            if s.free_kernel >= 0:
                delta[s.free_kernel + 1] -= s.nbytes
        return int(np.cumsum(delta).max())


def _one_step(model: Model, m, opt, inputs, target, rec: Recorder | None):
    def phase(p):
        if rec is not None:
            rec.phase = p

    phase("forward")
    ac = model.autocast_dtype()
    if ac is not None:
        with torch.autocast("cpu", dtype=ac):
            out = m(*inputs)
            loss = model.loss(out, target)
    else:
        out = m(*inputs)
        loss = model.loss(out, target)
    phase("backward")
    loss.backward()
    if rec is not None:
        for n, p in m.named_parameters():
            if p.grad is not None:
                rec.label(p.grad, "grad:" + n)
    phase("update")
    opt.step()
    opt.zero_grad(set_to_none=True)
    del out, loss


def capture(model: Model, warmup: str = "full") -> Capture:
    """Record iteration 2 of `model`'s training step. warmup: "full" runs iteration 1 as
    the user's loop would; "step" only runs an optimizer step on zero gradients to create
    the optimizer state (faster; the same recorded iteration for optimizers whose state does
    not depend on the gradients' values)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.module_tracker import ModuleTracker

    if warmup not in ("full", "step"):
        raise InputError(f"warmup must be full or step, got {warmup!r}", param="warmup")
    t0 = time.perf_counter()
    dt = model.param_dtype()
    with torch.device("meta"):
        m = model.module()
    if dt != torch.float32:
        m = m.to(dt)
    with FakeTensorMode(allow_non_fake_inputs=True):
        m = m.to_empty(device="cpu")
        m.train()
        opt = model.optimizer(m.parameters())
        inputs, target = model.inputs()
        if warmup == "full":
            _one_step(model, m, opt, inputs, target, None)
        else:
            for p in m.parameters():
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
            opt.step()
            opt.zero_grad(set_to_none=True)
        mt = ModuleTracker()
        rec = Recorder(mt)
        rec.recording = False
        names = {}
        for n, p in m.named_parameters():
            i = rec.register(p, "param:" + n, persistent=True)
            rec.param_of[i] = n
            names[id(p)] = n
        for n, b in m.named_buffers():
            rec.register(b, "buffer:" + n, persistent=True)
        fused = any(g.get("fused") or g.get("capturable") for g in opt.param_groups)
        for p in [p for g in opt.param_groups for p in g["params"]]:
            for key, v in opt.state.get(p, {}).items():
                if isinstance(v, torch.Tensor):
                    host = key == "step" and v.dim() == 0 and not fused
                    i = rec.register(v, f"state:{names.get(id(p), '?')}.{key}", persistent=True, host=host)
                    if not host:
                        rec.param_of[i] = names.get(id(p), "?")
        for j, t in enumerate(list(inputs) + [target]):
            if isinstance(t, torch.Tensor):
                rec.register(t, f"input:{j}", persistent=False)
        rec.recording = True
        with mt, rec:
            _one_step(model, m, opt, inputs, target, rec)
            rec.finish()
        nparam = sum(p.numel() for p in m.parameters())
    return Capture(
        model,
        rec.kernels,
        rec.storages,
        time.perf_counter() - t0,
        rec.ops_seen,
        int(nparam),
        {"warmup": warmup, "torch": torch.__version__, "optimizer": getattr(model.optimizer, "kind", "user")},
    )


# ---------------------------------------------------------------------------------------------
# To a Workload

#: the cost model's kernel class of a captured op (its efficiencies, overhead and workspace)
_CLASS = {
    "relu": "ReLU",
    "relu_": "ReLU",
    "threshold_backward": "ReLU_Backward",
    "native_batch_norm": "BatchNorm2d",
    "_native_batch_norm_legit": "BatchNorm2d",
    "_native_batch_norm_legit_functional": "BatchNorm2d",
    "native_batch_norm_backward": "BatchNorm2d_Backward",
    "max_pool2d_with_indices": "MaxPool2d",
    "embedding": "GatherV2",
    "embedding_dense_backward": "GatherV2_Backward",
    "_softmax": "SoftmaxBasic",
    "_log_softmax": "SoftmaxBasic",
    "add": "Add",
    "add_": "Add",
    "sub": "Subtract",
    "mul": "Multiply",
    "div": "Divide",
    "sum": "Sum",
    "mean": "Sum",
    "pow": "Power",
    "sqrt": "Sqrt",
    "rsqrt": "Sqrt",
    "tanh": "Tanh",
    "erf": "Erf",
    "cat": "Concat",
    "_adaptive_avg_pool2d": "AdaptiveAvgPool2d",
    "_adaptive_avg_pool2d_backward": "AdaptiveAvgPool2d_Backward",
}


def cost_class(k) -> str:
    """The class a captured kernel is timed as: the built-in kernel name of the same work
    (GEMMs, convolutions, attention as batched matmuls, the optimizer's per-weight update,
    the element-wise ops G10 names), else its aten op (the cost model's `op_class_of`)."""
    if k.kind == "gemm":
        if k.op in ("bmm", "baddbmm"):
            return "BatchMatMul_Forward" if k.phase == "forward" else "BatchMatMul_Backward"
        return "Linear_Forward" if k.phase == "forward" else "Linear_Backward_Weight"
    if k.kind == "attention":
        return "BatchMatMul_Forward" if k.phase == "forward" else "BatchMatMul_Backward"
    if k.op == "convolution_backward":
        return {
            "convolution_backward.input": "Conv2d_Backward_Input",
            "convolution_backward.weight": "Conv2d_Backward_Weight",
        }.get(k.name, "Sum_Backward")
    if k.kind == "conv":
        return "Conv2d_Forward"
    if k.phase == "update":
        return "Apply_Grad"
    c = _CLASS.get(k.op)
    if c is None:
        return k.op  # the cost model's op class of the aten op (op_class_of)
    return c if c.endswith("_Backward") else c + ("_Forward" if k.phase == "forward" else "_Backward")


def graph_of(cap: Capture):
    """-> (Graph with the aten names, per-kernel cost classes). Tensors: storages used by a
    kernel plus the parameters, buffers and optimizer state (global), in creation order;
    host scalars and empty storages are left out."""
    from g10fast.workload.model import Graph, csr_from_lists

    used = set()
    for k in cap.kernels:
        used.update(k.ins)
        used.update(k.outs)
    glob = lambda s: s.label.split(":")[0] in ("param", "buffer", "state")  # noqa: E731
    keep = [s for s in cap.storages if not s.host and s.nbytes > 0 and (s.id in used or glob(s))]
    new = {s.id: j for j, s in enumerate(keep)}
    kern = [k for k in cap.kernels if any(i in new for i in k.ins + k.outs)]
    ins = [[new[i] for i in k.ins if i in new] for k in kern]
    outs = [[new[i] for i in k.outs if i in new] for k in kern]
    ip, ii = csr_from_lists(ins)
    op_, oi = csr_from_lists(outs)
    old_k = {id(k): j for j, k in enumerate(cap.kernels)}
    kmap = np.full(len(cap.kernels) + 1, 0, np.int64)  # recorded index -> kept index
    kept_flags = np.zeros(len(cap.kernels), bool)
    for k in kern:
        kept_flags[old_k[id(k)]] = True
    kmap[1:] = np.cumsum(kept_flags)
    el = cap.model.param_dtype().itemsize if cap.model.dtype else 4
    meta = {
        "format": "capture",
        "source": "capture",
        "family": cap.model.meta.get("family"),
        "dtype": cap.model.dtype,
        "dtype_bytes": int(2 if cap.model.autocast_dtype() else el),
        "kernel_op": [k.op for k in kern],
        "kernel_kind": [k.kind for k in kern],
        "kernel_phase": [k.phase for k in kern],
        "kernel_flops": np.array([k.flops for k in kern], np.float64),
        "kernel_bytes_accessed": np.array([k.bytes for k in kern], np.int64),
        "tensor_name": [s.label for s in keep],
        "tensor_alloc_kernel": np.array(
            [int(kmap[s.alloc_kernel]) if s.alloc_kernel >= 0 else -1 for s in keep], np.int64
        ),
        "tensor_free_kernel": np.array(
            [int(kmap[s.free_kernel]) if s.free_kernel >= 0 else -1 for s in keep], np.int64
        ),
        "parameters": cap.params,
        "capture_seconds": round(cap.seconds, 3),
    }
    g = Graph(
        cap.model.name,
        int(cap.model.batch),
        np.array([s.nbytes for s in keep], np.int64),
        np.array([glob(s) for s in keep], bool),
        [k.name for k in kern],
        [k.parent or k.phase for k in kern],
        ip,
        ii,
        op_,
        oi,
        meta,
    )
    return g, [cost_class(k) for k in kern]


def kernel_times(g, classes, preset: dict):
    """Cost-model times of a captured Graph through the one entry the cost model has for
    workloads that are not built-in Graphs, `g10fast.workload.costmodel.kernel_times`
    (per-GPU parameters: `params_for` picks the H100 SXM5 fit on the h100-sxm5 preset, the
    A100 fit elsewhere). Each kernel is timed as its calibrated class (`cost_class`: a
    built-in kernel name, else its aten op, which the cost model maps to an op class), from
    its FLOPs and the bytes of its distinct input and output tensors; at least one cycle
    each. -> Workload with the aten names, cycles at the preset's clock."""
    from g10fast.workload import costmodel
    from g10fast.workload.model import build_workload
    from g10fast.workload.times import frequency_hz, kernel_cycles

    K = g.num_kernels
    raw = g.raw_size.astype(np.float64)
    b_in = np.zeros(K)
    b_out = np.zeros(K)
    np.add.at(b_in, np.repeat(np.arange(K), np.diff(g.in_ptr)), raw[g.in_idx])
    np.add.at(b_out, np.repeat(np.arange(K), np.diff(g.out_ptr)), raw[g.out_idx])
    dtype_bytes = int(g.meta["dtype_bytes"])
    e = costmodel.kernel_times(g.meta["kernel_flops"], b_in, b_out, list(classes), preset, dtype_bytes)
    ghz = float(preset["gpu"].get("frequency_ghz", 1.2))
    one = 1.0 / frequency_hz(ghz)
    t = np.maximum(e["time_s"], one)
    ti = np.maximum(e["input_pf_s"], t)
    ta = np.maximum(e["pf_s"], ti)
    c = kernel_cycles(t * 1e3, ti * 1e3, ta * 1e3, ghz)
    w = build_workload(g, *c, e["workspace_bytes"].astype(np.int64))
    gpu = costmodel.gpu_from_preset(preset, dtype_bytes)
    meta = dict(w.meta, kernel_times="estimated", cost_model_gpu=gpu.name, kernel_class=list(classes))
    return dataclasses.replace(w, meta=meta)


def to_workload(cap: Capture, system="g10-artifact", overrides: dict | None = None):
    """The captured step as a Workload, kernel times estimated for `system`'s GPU (a preset
    name, path or dict)."""
    from g10fast.hardware import load_preset

    preset = system if isinstance(system, dict) else load_preset(system, overrides)
    g, classes = graph_of(cap)
    return kernel_times(g, classes, preset)


# ---------------------------------------------------------------------------------------------
# The CLI


def resolve_model(spec: str, **kw) -> Model:
    """A bundled example name or `module:function` (called with the keyword arguments it
    accepts of batch, seq_len, dtype, optimizer)."""
    import importlib
    import inspect

    from g10fast.capture.examples import EXAMPLES

    kw = {k: v for k, v in kw.items() if v is not None}
    if spec in EXAMPLES:
        fn = EXAMPLES[spec]
        sig = inspect.signature(
            {
                "gpt2-small": _gpt2_sig,
                "gpt2-medium": _gpt2_sig,
                "gpt2-xl": _gpt2_sig,
                "llama-7b": _gpt2_sig,
                "qwen2.5-1.5b": _gpt2_sig,
                "qwen2.5-3b": _gpt2_sig,
            }.get(spec, fn)
        )
    elif ":" in spec:
        mod, _, attr = spec.partition(":")
        try:
            fn = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise InputError(f"cannot load {spec!r} ({e})", param="model") from None
        sig = inspect.signature(fn)
    else:
        import difflib

        hint = difflib.get_close_matches(spec, list(EXAMPLES), n=1)
        raise InputError(
            f"unknown example {spec!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + f"; examples: {', '.join(EXAMPLES)}; or module:function",
            param="model",
        )
    has_var = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    bad = [k for k in kw if k not in sig.parameters and not has_var]
    if bad:
        raise InputError(f"{spec} takes no {bad[0]!r}", param="--" + bad[0].replace("_", "-"))
    m = fn(**kw)
    if not isinstance(m, Model):
        raise InputError(f"{spec} returned {type(m).__name__}, not a g10fast.capture.Model", param="model")
    return m


def _gpt2_sig(batch=None, seq_len=None, dtype=None, optimizer=None):  # pragma: no cover
    pass


def capture_cli(args) -> int:
    import resource

    from g10fast.hardware import load_preset
    from g10fast.workload.h5trace import write_workload_h5
    from g10fast.workload.times import frequency_hz

    checked_target(args.out, "--out")
    if getattr(args, "memory_snapshot", None):
        checked_target(args.memory_snapshot, "--memory-snapshot")
    model = resolve_model(
        args.model, batch=args.batch, seq_len=args.seq_len, dtype=args.dtype, optimizer=args.optimizer
    )
    if isinstance(model.batch, bool) or not isinstance(model.batch, int) or model.batch <= 0:
        raise InputError(f"must be a positive integer, got {model.batch!r}", param="--batch")
    model.param_dtype()
    cap = capture(model)
    preset = load_preset(args.system)
    w = to_workload(cap, preset)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    transformer = not any(k == "conv" for k in w.meta["kernel_kind"])
    write_workload_h5(
        args.out,
        w,
        {
            "source": "capture",
            "model": model.name,
            "batch": model.batch,
            "gpu": preset["gpu"].get("model", "?"),
            "system_preset": preset.get("name", ""),
            "kernel_times": "estimated",
            "dtype": model.dtype,
            "optimizer": cap.info.get("optimizer", "user"),
            "parameters": cap.params,
            "seq_len": model.meta.get("seq_len", 0),
            "capture_seconds": round(cap.seconds, 3),
            "capture_peak_rss_bytes": int(rss),
            "torch_ops": cap.ops_seen,
            "command": "g10fast capture " + args.model,
        },
        freq_hz=frequency_hz(float(preset["gpu"].get("frequency_ghz", 1.2))),
        transformer=transformer,
    )
    ph = w.meta["kernel_phase"]
    ghz = float(preset["gpu"].get("frequency_ghz", 1.2))
    print(
        f"{model.name} batch {model.batch} ({model.dtype}, {cap.params / 1e6:.1f} M "
        f"parameters): {w.num_kernels} kernels (forward {ph.count('forward')}, "
        f"backward {ph.count('backward')}, update {ph.count('update')}), {w.num_tensors} tensors "
        f"({int(w.is_global.sum())} global, {w.weights_bytes / 2**30:.2f} GiB), peak live "
        f"{cap.peak_live_bytes() / 2**30:.2f} GiB, ideal {w.ideal_cycles / ghz / 1e6:.1f} ms "
        f"on {preset['gpu'].get('model', '?')}"
    )
    print(f"captured in {cap.seconds:.1f} s, peak memory {rss / 2**20:.0f} MiB -> {args.out}")
    if getattr(args, "memory_snapshot", None):
        from g10fast.alloc.snapshot import write_workload_snapshots

        for p in write_workload_snapshots(w, args.memory_snapshot, freq_ghz=ghz):
            print(f"memory snapshot written to {p}")
    return 0
