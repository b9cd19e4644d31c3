"""Measure the kernel times of a built-in model on a CUDA GPU with PyTorch; write a profile.

    pip install -e .[profile]
    python kernels/profile_torch.py MODEL --batch N [--out FILE] [--repeats 3]
                                    [--fault-repeats 1] [--no-faulting] [--dry-run | --check]

For every kernel of the built-in model's Graph (g10fast.workload.builtin) the harness runs the
real operation that kernel stands for (its recipe, g10fast.workload.recipes), with the shapes
of its layer or operator record (`kernel_layers`): cuDNN convolutions forward, backward-data
and backward-filter through `aten.convolution_backward`, `native_batch_norm(_backward)`, max
and adaptive-average pooling forward and backward, dropout, matrix products and batched matrix
products, softmax and its backward, embeddings, the element-wise operators and their gradients,
the optimizer step (SGD as G10; AdamW with fp32 master weights for the decoders). Each is timed
with CUDA events the way the artifact's profiler timed its cuDNN / cuBLAS calls
(g10-workloads.md §2-3), in its three modes:

* ideal (`cudnn<B>.txt`): operands in plain device memory; a warm-up call first, then the
  median of `--repeats` calls;
* input faulting (`InputPF`, "1 0"): a child process whose every allocation is CUDA managed
  memory (a pluggable allocator built at run time with nvcc); inputs written and resident on
  the GPU, outputs and workspace freshly allocated, so they take first-touch faults;
* all faulting (`PF`, "0 0"): the same, with the inputs written on the host first.

The workspace column is what a convolution allocates during the call beyond its operands and
results (cuDNN's scratch), measured with the caching allocator's peak counter; 0 for other
kernels, as in the artifact's traces. A queued spin kernel hides the host-side launch and
allocation work from the events. The result is written in the profile format
(docs/profile-format.md) with `source = measured`.

`--check` runs every kernel's operation once on the CPU at the given batch (no GPU, no
timing) to check the shapes; `--dry-run` needs neither PyTorch nor a GPU: it builds every
kernel's operation and writes a profile with fake times (tests/test_profile_torch.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.workload.builtin import find_model  # noqa: E402
from g10fast.workload.profile import Profile, write_profile  # noqa: E402

# what each kernel computes, without PyTorch (so --dry-run and the tests need none)
from g10fast.workload.recipes import Operand, Recipe, broadcasts_to, recipes_for  # noqa: E402

LR = 1e-3
CONV_KERNELS = ("Conv2d_Forward", "Conv2d_Backward_Weight", "Conv2d_Backward_Input")


# ---------------------------------------------------------------------------------------------
# Running a recipe with PyTorch


def run_op(torch, r: Recipe, t: list, act, dev="cuda"):
    """Launch the operation of recipe r on operands t; returns what it produced."""
    F, aten, p, op = torch.nn.functional, torch.ops.aten, r.params, r.op
    if op == "fill":
        return torch.ones(p["shape"], dtype=act, device=dev)
    if op == "sgd":
        return t[0].add_(t[1], alpha=-LR)
    if op == "adamw":
        w, g, m, v, w16 = t
        step = torch.ones((), dtype=torch.float32, device=dev)
        torch._fused_adamw_(
            [w],
            [g],
            [m],
            [v],
            [],
            [step],
            lr=LR,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.01,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
        )
        return w16.copy_(w)
    if op == "conv_fwd":
        return F.conv2d(t[0], t[1], t[2] if len(t) > 2 else None, p["stride"], p["padding"])
    if op in ("conv_bwd_weight", "conv_bwd_input"):
        mask = [op == "conv_bwd_input", op == "conv_bwd_weight", False]
        res = aten.convolution_backward(
            t[0], t[1], t[2], None, p["stride"], p["padding"], [1, 1], False, [0, 0], 1, mask
        )
        return res[0] if mask[0] else res[1]
    if op == "bn_fwd":
        return aten.native_batch_norm(t[0], t[1], t[2], t[3], t[4], True, p["momentum"], p["eps"])
    if op == "bn_bwd":
        return aten.native_batch_norm_backward(
            t[0], t[1], t[2], t[3], t[4], t[5], t[6], True, p["eps"], [True, True, True]
        )
    if op == "relu":
        return torch.relu_(t[0]) if p.get("inplace") else torch.relu(t[0])
    if op == "relu_bwd":
        return aten.threshold_backward(t[0], t[1], 0)
    if op == "maxpool_fwd":
        return aten.max_pool2d_with_indices(
            t[0], p["kernel_size"], p["stride"], p["padding"], p["dilation"], p["ceil_mode"]
        )
    if op == "maxpool_bwd":
        return aten.max_pool2d_with_indices_backward(
            t[0], t[1], p["kernel_size"], p["stride"], p["padding"], p["dilation"], p["ceil_mode"], t[2]
        )
    if op == "avgpool_fwd":
        return aten._adaptive_avg_pool2d(t[0], p["size"])
    if op == "avgpool_bwd":
        return aten._adaptive_avg_pool2d_backward(t[0], t[1])
    if op == "dropout_fwd":
        return aten.native_dropout(t[0], p["p"], True)
    if op == "dropout_bwd":
        return aten.native_dropout_backward(t[0], t[1], 1.0 / (1.0 - p["p"]))
    if op == "linear":
        return F.linear(t[0], t[1], t[2] if len(t) > 2 else None)
    if op == "sum0":
        return t[0].sum(0)
    if op == "mm":
        return torch.mm(t[0], t[1])
    if op == "mm_tn":
        return torch.mm(t[0].t(), t[1])
    if op == "mm_nt":
        return torch.mm(t[0], t[1].t())
    if op == "bmm":
        return torch.bmm(t[0], t[1])
    if op == "bmm_nt":
        return torch.bmm(t[0], t[1].transpose(1, 2))
    if op == "bmm_tn":
        return torch.bmm(t[0].transpose(1, 2), t[1])
    if op == "sum_n":
        out = torch.add(t[0], t[1])
        for u in t[2:]:
            out.add_(u)
        return out
    if op == "accumulate":
        out = t[0]
        for u in t[1:]:
            out.add_(u)
        return out
    if op == "cat":
        return torch.cat(t, 1)
    if op == "split":
        return [u.contiguous() for u in torch.split(t[0], p["sizes"], 1)]
    if op == "mul":
        return torch.mul(t[0], t[1])
    if op == "scale_bwd":
        return torch.mul(t[0], t[1]).sum((2, 3), keepdim=True)
    if op == "loss":
        return torch.softmax(t[0], -1).sub_(t[1])
    if op == "softmax":
        return torch._softmax(t[0], -1, False)
    if op == "softmax_bwd":
        return torch._softmax_backward_data(t[0], t[1], -1, t[0].dtype)
    if op == "sdpa":
        return F.scaled_dot_product_attention(t[0], t[1], t[2], is_causal=True)
    if op in ("sdpa_bwd", "ln_bwd"):
        # through autograd: the forward runs again inside the timed region (an upper bound
        # of the backward kernel's time; FlashAttention-2's backward recomputes the scores
        # itself, layer norm's keeps its per-row statistics instead)
        with torch.enable_grad():
            xs = [u.detach().requires_grad_() for u in (t[:3] if op == "sdpa_bwd" else t[1:])]
            if op == "sdpa_bwd":
                y = F.scaled_dot_product_attention(*xs, is_causal=True)
                return torch.autograd.grad(y, xs, t[3])
            y = F.layer_norm(xs[0], xs[0].shape[-1:], xs[1], xs[2])
            return torch.autograd.grad(y, xs, t[0])
    if op == "ln_fwd":
        return F.layer_norm(t[0], t[0].shape[-1:], t[1], t[2])
    if op in ("gelu", "silu"):
        return getattr(F, op)(t[0])
    if op == "gelu_bwd":
        return aten.gelu_backward(t[0], t[1])
    if op == "silu_bwd":
        return aten.silu_backward(t[0], t[1])
    if op == "sum_last":
        return t[0].sum(-1)
    if op == "expand_last":
        return t[0].unsqueeze(-1).expand(*t[0].shape, p["n"]).contiguous()
    if op == "select1":
        return t[0].select(1, 0).contiguous()
    if op == "select1_bwd":
        z = torch.zeros(p["shape"], dtype=t[0].dtype, device=dev)
        z.select(1, 0).copy_(t[0])
        return z
    if op == "embedding":
        return F.embedding(t[1], t[0])
    if op == "embedding_bwd":
        return aten.embedding_dense_backward(t[0], t[1], p["rows"], -1, False)
    if op.startswith("ew_grad"):
        g = t[0]
        if op == "ew_grad_pass":
            outs = []
            for s in p["shapes"]:
                d = g.sum_to_size(s) if tuple(s) != tuple(g.shape) else g
                outs.append(d.neg() if p["neg"] else d.clone())
            return outs
        if op == "ew_grad_mul":
            d = g * t[1]
        elif op == "ew_grad_div_a":
            d = g / t[1]
        elif op == "ew_grad_div_b":
            d = -g * t[1] / (t[2] * t[2])
        else:  # ew_grad_pow, exponent 2
            d = g * t[1] * 2
        s = tuple(p["shape"])
        return d.sum_to_size(s) if s != tuple(d.shape) and broadcasts_to(s, d.shape) else d
    if op.startswith("ew_"):
        fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow}.get(
            op[3:]
        )
        if fn is not None:
            a, b = t[0], t[1] if len(t) > 1 else t[0]
            try:
                return fn(a, b)
            except RuntimeError:  # not broadcastable: element by element
                n = min(a.numel(), b.numel())
                return fn(a.reshape(-1)[:n], b.reshape(-1)[:n])
        return getattr(torch, op[3:])(t[0])
    if op == "sqrt_bwd":
        return t[0] / (2 * t[1])
    if op == "tanh_bwd":
        return aten.tanh_backward(t[0], t[1])
    if op == "erf_bwd":
        return t[0] * (2 / math.sqrt(math.pi)) * torch.exp(-t[1] * t[1])
    raise ValueError(f"unknown operation {op}")


def make_operands(torch, r: Recipe, act, dev, fill=True):
    out = []
    for o in r.inputs:
        dt = {"act": act, "f32": torch.float32, "i64": torch.int64, "bool": torch.bool}[o.dtype]
        t = torch.empty(o.shape, dtype=dt, device=dev)
        if fill:
            fill_operand(torch, t, o)
        out.append(t)
    return out


def fill_operand(torch, t, o: Operand):
    if o.init.startswith("index:") or o.init == "zeros" or t.dtype in (torch.int64, torch.bool):
        if o.init.startswith("index:"):
            t.random_(0, int(o.init.split(":")[1]))
        else:
            t.zero_()
    elif o.init == "positive":
        t.uniform_(0.5, 1.5)
    else:
        t.normal_()


# ---------------------------------------------------------------------------------------------
# Timing

UVM_SOURCE = r"""
#include <cuda_runtime_api.h>
#include <stddef.h>
extern "C" {
void* g10fast_uvm_alloc(size_t size, int device, cudaStream_t stream) {
    void* p = NULL;
    if (cudaMallocManaged(&p, size, cudaMemAttachGlobal) != cudaSuccess) return NULL;
    return p;
}
void g10fast_uvm_free(void* p, size_t size, int device, cudaStream_t stream) { cudaFree(p); }
}
"""


def build_uvm_allocator(folder: Path) -> Path:
    src, lib = folder / "uvm_alloc.cu", folder / "uvm_alloc.so"
    src.write_text(UVM_SOURCE)
    subprocess.run(
        ["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared", str(src), "-o", str(lib)],
        check=True,
    )
    return lib


class GPUTimer:
    """CUDA-event timing of recipes; spin kernel queued first to hide host work."""

    def __init__(self, act_bytes: int):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA GPU available (use --dry-run or --check without one)")
        self.torch = torch
        self.act = torch.bfloat16 if act_bytes == 2 else torch.float32
        self.name = torch.cuda.get_device_name(0)
        self.spin = int(2e5)  # cycles of the spin kernel (~0.1 ms)

    def _timed(self, r, ops):
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(self.spin)
        s.record()
        res = run_op(torch, r, ops, self.act)
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) * 1e-3, res

    def ideal(self, r: Recipe, repeats: int, workspace: bool):
        torch = self.torch
        ops = make_operands(torch, r, self.act, "cuda")
        res = run_op(torch, r, ops, self.act)  # warm-up: library set-up, caches
        torch.cuda.synchronize()
        del res
        ws = 0
        if workspace:
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            res = run_op(torch, r, ops, self.act)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            kept = torch.cuda.memory_allocated() - base
            ws = max(0, peak - base - kept)
            del res
        times = []
        for _ in range(repeats):
            t, res = self._timed(r, ops)  # in-place updates repeat on the same operands
            del res
            times.append(t)
        return float(np.median(times)), ws

    def faulting(self, r: Recipe, repeats: int, host_inputs: bool):
        """In a process whose allocator is managed memory: fresh operands each call."""
        torch = self.torch
        times = []
        for _ in range(repeats):
            ops = make_operands(torch, r, self.act, "cuda")  # written on the GPU
            torch.cuda.synchronize()
            if host_inputs:
                for t in ops:
                    host_write(t)
            t, res = self._timed(r, ops)
            del res, ops
            times.append(t)
        return float(np.median(times))


def host_write(t):
    """Write a managed tensor's bytes from the host (it then resides in host memory): its own
    first MiB (valid values: indices stay in range), repeated."""
    n = t.numel() * t.element_size()
    if n == 0:
        return
    import torch

    flat = t.reshape(-1).view(torch.uint8)
    pat = flat[: 1 << 20].cpu().numpy().tobytes()
    buf = ctypes.create_string_buffer(pat, len(pat))
    m, ptr, off = len(pat), t.data_ptr(), 0
    while off < n:
        c = min(m, n - off)
        ctypes.memmove(ptr + off, buf, c)
        off += c


# ---------------------------------------------------------------------------------------------
# Driver


def _progress(done, total, t0, what):
    if done == total or done % 50 == 0:
        el = time.time() - t0
        eta = el / max(done, 1) * (total - done)
        print(f"  {what}: {done}/{total} kernels, {el:.0f} s, ~{eta:.0f} s left", file=sys.stderr, flush=True)


def uvm_child(args) -> None:
    """Entry point of the child process: install the managed allocator, time both modes."""
    import torch

    lib = args.uvm_child
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "g10fast_uvm_alloc", "g10fast_uvm_free")
    torch.cuda.memory.change_current_allocator(alloc)
    spec, book, recs = recipes_for(args.model, args.batch, **json.loads(args.model_opts))
    timer = GPUTimer(book.el)
    K = len(recs)
    res = np.zeros((K, 2))
    t0 = time.time()
    for k, r in enumerate(recs):
        # warm-up with resident operands: library set-up is not a fault
        ops = make_operands(torch, r, timer.act, "cuda")
        run_op(torch, r, ops, timer.act)
        torch.cuda.synchronize()
        del ops
        res[k, 0] = timer.faulting(r, args.fault_repeats, host_inputs=False)
        res[k, 1] = timer.faulting(r, args.fault_repeats, host_inputs=True)
        _progress(k + 1, K, t0, "faulting")
    np.save(args.uvm_out, res)


def profile(args) -> Profile:
    opts = json.loads(args.model_opts)
    spec, book, recs = recipes_for(args.model, args.batch, **opts)
    g, K = book.g, len(recs)
    meta = {
        "tool": "kernels/profile_torch.py",
        "repeats": args.repeats,
        "fault_repeats": args.fault_repeats,
        "dtype_bytes": book.el,
    }
    meta.update({f"model.{k}": v for k, v in opts.items()})
    if spec.kind == "decoder":  # the graph's form, which the profile's kernels follow
        for k in ("attention", "pointwise"):
            meta[f"model.{k}"] = opts.get(k, spec.params.get(k, "fused"))
    if args.dry_run:
        t = np.zeros((K, 3))
        ws = np.zeros(K, np.int64)
        for k, r in enumerate(recs):
            nb = r.nbytes(book.el)
            t[k, 0] = nb / 1e12 + 5e-6
            t[k, 1] = t[k, 0] + nb / 20e9
            t[k, 2] = t[k, 1] + nb / 20e9
        meta["dry_run"] = True
        return Profile(
            "measured",
            "dry-run (no GPU)",
            spec.key,
            args.batch,
            list(g.kernel_name),
            t[:, 0] * 1e6,
            t[:, 1] * 1e6,
            t[:, 2] * 1e6,
            ws,
            meta,
        )
    import torch

    timer = GPUTimer(book.el)
    meta.update(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version(),
        tf32_conv=torch.backends.cudnn.allow_tf32,
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
        dry_run=False,
    )
    t = np.zeros((K, 3))
    ws = np.zeros(K, np.int64)
    t0 = time.time()
    for k, r in enumerate(recs):
        t[k, 0], w = timer.ideal(r, args.repeats, g.kernel_name[k] in CONV_KERNELS)
        ws[k] = w
        _progress(k + 1, K, t0, "ideal")
    if args.no_faulting:
        t[:, 1] = t[:, 2] = t[:, 0]
        meta["faulting"] = "not measured (--no-faulting): copies of the ideal time"
    else:
        with tempfile.TemporaryDirectory() as d:
            lib = build_uvm_allocator(Path(d))
            out = Path(d) / "uvm.npy"
            cmd = [
                sys.executable,
                __file__,
                args.model,
                "--batch",
                str(args.batch),
                "--fault-repeats",
                str(args.fault_repeats),
                "--model-opts",
                args.model_opts,
                "--uvm-child",
                str(lib),
                "--uvm-out",
                str(out),
            ]
            subprocess.run(cmd, check=True)
            t[:, 1:] = np.load(out)
        meta["faulting"] = "CUDA managed memory (cudaMallocManaged), first-touch outputs"
    raw = t.copy()
    t = np.maximum.accumulate(t, axis=1)  # ideal <= input faulting <= all faulting
    meta["clamped_kernels"] = int(np.sum(np.any(t != raw, axis=1)))
    meta["wall_s"] = round(time.time() - t0, 1)
    return Profile(
        "measured",
        timer.name,
        spec.key,
        args.batch,
        list(g.kernel_name),
        t[:, 0] * 1e6,
        t[:, 1] * 1e6,
        t[:, 2] * 1e6,
        ws,
        meta,
    )


def check(args) -> None:
    """Run every kernel's operation once on the CPU (shapes only, no timing)."""
    import torch

    spec, book, recs = recipes_for(args.model, args.batch, **json.loads(args.model_opts))
    act = torch.bfloat16 if book.el == 2 else torch.float32
    for k, r in enumerate(recs):
        ops = make_operands(torch, r, act, "cpu")
        try:
            run_op(torch, r, ops, act, "cpu")
        except Exception as e:  # noqa: BLE001 - report which kernel
            raise SystemExit(
                f"kernel {k} {book.g.kernel_name[k]} ({book.g.kernel_parent[k]}): "
                f"{r.op} {[o.shape for o in r.inputs]}: {e}"
            )
    print(f"{spec.key} b{args.batch}: {len(recs)} kernels ran on the CPU")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--out")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per kernel, ideal mode")
    ap.add_argument(
        "--fault-repeats",
        type=int,
        default=1,
        help="timed calls per kernel in each faulting mode (the artifact: 1)",
    )
    ap.add_argument("--no-faulting", action="store_true")
    ap.add_argument("--model-opts", default="{}", help="JSON of model parameters, e.g. '{\"seq_len\": 512}'")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--uvm-child", help=argparse.SUPPRESS)
    ap.add_argument("--uvm-out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.batch <= 0:
        ap.error("--batch must be positive")
    if a.uvm_child:
        return uvm_child(a)
    if a.check:
        return check(a)
    spec = find_model(a.model)
    prof = profile(a)
    gpu_dir = "dry-run" if a.dry_run else "measured"
    out = Path(a.out) if a.out else ROOT / "kernels" / gpu_dir / f"{spec.key}-b{a.batch}.prof.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    write_profile(tmp, prof)
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
