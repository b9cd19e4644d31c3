"""Measure the kernel times of a built-in model on a CUDA GPU with PyTorch; write a profile.

    pip install -e .[profile]
    python kernels/profile_torch.py MODEL --batch N [--out FILE] [--repeats 5] [--dry-run]

For every kernel of the built-in model's Graph (g10fast.workload.builtin) the harness
allocates the kernel's input and output tensors with the Graph's sizes and times, with CUDA
events, a stand-in operation of the kernel's type and cost (FLOPs from
Graph.meta["parent_flops"] as a matrix multiply of that many FLOPs, everything else as a
memory copy over the kernel's bytes), three ways, as the artifact's profiler did
(g10-workloads.md section 2): with all tensors resident (ideal time), with the inputs in
CUDA managed memory advised to the host (input faulting), and with all tensors there (all
faulting). The workspace is 0 (cuDNN's scratch is not exposed by stand-in operations).
The result is written in the profile format (docs/profile-format.md) with
`source = measured`.

`--dry-run` needs neither PyTorch nor a GPU: it runs the same loop with a fake timer and
writes the file, to check the plumbing (tests/test_profile_torch.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.workload.builtin import find_model, load_builtin_graph  # noqa: E402
from g10fast.workload.costmodel import MATMUL_KERNELS  # noqa: E402
from g10fast.workload.profile import Profile, write_profile  # noqa: E402


class FakeTimer:
    """Stands in for the GPU in --dry-run: time = bytes / 1 TB/s + flops / 10 TFLOP/s."""
    name = "dry-run (no GPU)"

    def time_kernel(self, flops, nbytes_in, nbytes_out, mode, repeats):
        t = (nbytes_in + nbytes_out) / 1e12 + flops / 1e13 + 5e-6
        if mode >= 1:
            t += nbytes_in / 10e9
        if mode >= 2:
            t += nbytes_out / 10e9
        return t


class TorchTimer:
    """Times stand-in operations with CUDA events."""

    def __init__(self, dtype_bytes: int):
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA GPU available (use --dry-run to check the harness)")
        self.torch = torch
        self.dtype = torch.bfloat16 if dtype_bytes == 2 else torch.float32
        self.el = dtype_bytes
        self.name = torch.cuda.get_device_name(0)

    def _buf(self, nbytes):
        n = max(1, int(nbytes) // self.el)
        return self.torch.empty(n, dtype=self.dtype, device="cuda")

    def time_kernel(self, flops, nbytes_in, nbytes_out, mode, repeats):
        torch = self.torch
        times = []
        for _ in range(repeats):
            if flops > 0:
                # a square-ish matmul with the kernel's FLOPs
                m = max(16, int(round((flops / 2) ** (1 / 3))))
                a = torch.randn(m, m, device="cuda", dtype=self.dtype)
                b = torch.randn(m, m, device="cuda", dtype=self.dtype)
                op = lambda: a @ b  # noqa: E731
            else:
                src = self._buf(nbytes_in)
                dst = self._buf(nbytes_out)
                n = min(src.numel(), dst.numel())
                op = lambda: dst[:n].copy_(src[:n])  # noqa: E731
            if mode >= 1:
                # faulting: move the inputs (and outputs) host -> GPU inside the timed region
                host_in = torch.empty(max(1, int(nbytes_in) // self.el), dtype=self.dtype,
                                      pin_memory=True)
                host_out = torch.empty(max(1, int(nbytes_out) // self.el), dtype=self.dtype,
                                       pin_memory=True) if mode >= 2 else None
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            s.record()
            if mode >= 1:
                host_in.to("cuda", non_blocking=True)
                if host_out is not None:
                    host_out.to("cuda", non_blocking=True)
            op()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
        return float(np.median(times))


def profile(model: str, batch: int, timer, repeats: int = 5, **model_opts) -> Profile:
    spec = find_model(model)
    g = load_builtin_graph(spec, batch, **model_opts)
    pf = g.meta["parent_flops"]
    raw = g.raw_size.astype(np.float64)
    K = g.num_kernels
    t = np.zeros((K, 3))
    for k in range(K):
        fl = pf.get(g.kernel_parent[k], 0) if g.kernel_name[k] in MATMUL_KERNELS else 0
        bi, bo = raw[g.inputs(k)].sum(), raw[g.outputs(k)].sum()
        for mode in range(3):
            t[k, mode] = timer.time_kernel(fl, bi, bo, mode, repeats)
    t = np.maximum.accumulate(t, axis=1)      # ideal <= input faulting <= all faulting
    return Profile("measured", timer.name, spec.key, batch, list(g.kernel_name), t[:, 0] * 1e6,
                   t[:, 1] * 1e6, t[:, 2] * 1e6, np.zeros(K, np.int64),
                   {"tool": "kernels/profile_torch.py", "repeats": repeats,
                    "dry_run": isinstance(timer, FakeTimer)})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--out")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    spec = find_model(a.model)
    if a.dry_run:
        timer = FakeTimer()
    else:
        g = load_builtin_graph(spec, 1)
        timer = TorchTimer(int(g.meta.get("dtype_bytes", 4)))
    prof = profile(spec.key, a.batch, timer, a.repeats)
    out = a.out or str(ROOT / "kernels" / "measured" / f"{spec.key}-b{a.batch}.prof.gz")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_profile(out, prof)
    print(out)


if __name__ == "__main__":
    main()
