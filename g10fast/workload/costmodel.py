"""Kernel-time cost model: the four per-kernel quantities the engines use, without a profile.

For a kernel k of a built-in model's Graph:

  F_k   floating-point operations: matrix-multiply-like kernels (convolution, linear, batched
        matmul, forward and both backward passes) take the forward FLOPs of their layer
        (Graph.meta["parent_flops"]); every other kernel is memory-bound and counts 0
  D_in  bytes of the kernel's distinct input tensors; D_out of its outputs
  ideal time       t = max(F / (P * e_F), (D_in + D_out) / (BW * e_B)) + o     (roofline)
  input faulting   t_in  = t + D_in / (phi_in * link) + o_in
  all faulting     t_all = t + (D_in + D_out) / (phi_all * link) + o_all
  workspace        w = omega * (D_in + D_out)   (cuDNN's scratch space, convolutions only)

P is the GPU's peak for the model's element type (fp32 CUDA cores for the paper's fp32
models, bf16 tensor cores for the mixed-precision decoders), BW its HBM bandwidth, and
phi * link the rate at which UVM page faults bring data over the host link. The
per-kernel-name efficiencies e_F, e_B, the overhead o, the phi and o of faulting and omega
are fitted to the G10 artifact's A100 traces by benchmarks/calibrate_costmodel.py, which
writes data/costmodel/a100.toml and docs/costmodel-calibration.md (errors per operator type
and per model).

Families (the reference GPU only). The artifact's CNN traces are not roofline-shaped: a fixed
set of (operator, layer shape) pairs takes ~0.6 s (Conv2d_Forward/Backward_Input) or ~0.12 s
(Conv2d_Backward_Weight) at every batch size, the rest grows linearly with the batch. Such a
kernel is a *family*: the kernel name plus its shape with the batch divided out (FLOPs per
sample, weight sizes, activation sizes per sample; `family_keys`). Per family the calibration
fits each quantity q in (time, input faulting, all faulting, workspace) as q = a + b * batch
(data/costmodel/a100-families.tsv). `estimate` uses a kernel's family line when the target
GPU is the one the traces were measured on (the g10-artifact preset) and the family is known;
every other kernel, and every kernel on any other GPU, gets the roofline above, which is
fitted on the kernels of non-plateau families only (a plateau family: a > 20 ms and a above
half its time at the largest batch seen), so that the A100 profiler's fixed costs do not
leak into the throughput estimates for other GPUs.

Per-GPU parameters. data/costmodel/ holds one parameter file per GPU the model was fitted on:
a100.toml (the artifact's A100 traces, above; the default) and h100-sxm5.toml (measured
H100 SXM5 kernels, g10fast/workload/costfit.py, benchmarks/fit_costmodel_h100.py,
docs/costmodel-h100.md). `params_for(gpu)` picks the file whose [reference_gpu] model is the
GPU's (the h100-sxm5 preset's "NVIDIA H100 80GB HBM3 (SXM5)"), else a100.toml, so every
preset other than h100-sxm5 gets exactly what it got before. A parameter file's `form` is
"roofline" (max of the two terms, a100.toml) or "additive" (their sum, h100-sxm5.toml).
Its [kernel] classes are kernel names, coarse op classes (`op_class_of`: what a captured
workload's kernels use) and "*"; a kernel name without its own entry takes its op class's,
then "*". `kernel_times(flops, bytes_in, bytes_out, op_class, gpu=...)` is the model on
plain arrays, for workloads that are not built-in Graphs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from g10fast.atomic import atomic_path
from g10fast.errors import InputError, read_toml
from g10fast.workload.model import MATMUL_KERNELS, Graph, Workload, build_workload  # noqa: F401
from g10fast.workload.times import kernel_cycles

#: FLOPs of a kernel per forward FLOP of its layer, where not 1: fused attention's backward
#: does the work of four of its matrix multiplies against the forward's two
#: (torch.utils.flop_counter.sdpa_backward_flop_count, as g10fast.capture counts it)
FLOP_FACTOR = {"FlashAttention_Backward": 2.0}
#: built-in kernel names timed with another name's calibrated parameters (no trace of the
#: G10 artifact has them): fused attention as batched matmuls, as g10fast.capture times a
#: captured flash-attention kernel (capture.core.cost_class)
TIMED_AS = {
    "FlashAttention_Forward": "BatchMatMul_Forward",
    "FlashAttention_Backward": "BatchMatMul_Backward",
}
DEFAULT_CLASS = "*"  # parameters for kernel names the calibration did not see
FORMS = ("roofline", "additive")
#: what a faulting mode's extra time is proportional to: the kernel's input bytes, all its
#: bytes, its output bytes, or its output bytes plus its workspace (first-touch faults, as the
#: measured harness's input-faulting mode takes them: inputs resident, outputs fresh)
FAULT_BASES = ("in", "all", "out", "out_ws")

#: coarse op classes: what a kernel is, whatever its framework calls it. Built-in kernel names
#: map by prefix (`op_class_of`); a captured workload passes these names (or aten op names).
OP_CLASSES = ("conv", "matmul", "norm", "softmax", "pool", "reduction", "elementwise", "optimizer", "copy")
_CLASS_PREFIXES = (  # (op class, built-in kernel-name prefixes), first match wins
    ("optimizer", ("Apply_Grad", "Linear_Apply_Grad", "Conv2d_Apply_Grad", "BatchNorm2d_Apply_Grad")),
    ("conv", ("Conv2d_",)),
    (
        "matmul",
        (
            "Linear_Forward",
            "Linear_Backward_Input",
            "Linear_Backward_Weight",
            "BatchMatMul_",
            "FlashAttention_",
        ),
    ),
    ("norm", ("BatchNorm2d_", "LayerNorm", "GroupNorm", "RMSNorm")),
    ("softmax", ("SoftmaxBasic_", "Softmax", "makeLoss")),
    ("pool", ("MaxPool2d_", "AdaptiveAvgPool2d_", "AvgPool2d_")),
    ("reduction", ("Sum_", "Linear_Backward_Bias", "Scale_Backward")),
    ("copy", ("Concat_", "GatherV2_", "LoadData_")),
)
#: aten / torch op names (lower case, without "aten::" and overload) -> op class
_ATEN_CLASSES = {
    "convolution": "conv",
    "convolution_backward": "conv",
    "conv2d": "conv",
    "cudnn_convolution": "conv",
    "conv1d": "conv",
    "conv3d": "conv",
    "mm": "matmul",
    "addmm": "matmul",
    "bmm": "matmul",
    "baddbmm": "matmul",
    "matmul": "matmul",
    "linear": "matmul",
    "_scaled_dot_product_flash_attention": "matmul",
    "_scaled_dot_product_efficient_attention": "matmul",
    "_scaled_dot_product_cudnn_attention": "matmul",
    "_flash_attention_forward": "matmul",
    "_flash_attention_backward": "matmul",
    "_scaled_dot_product_flash_attention_backward": "matmul",
    "_scaled_dot_product_efficient_attention_backward": "matmul",
    "native_layer_norm": "norm",
    "native_layer_norm_backward": "norm",
    "native_batch_norm": "norm",
    "native_batch_norm_backward": "norm",
    "_native_batch_norm_legit": "norm",
    "cudnn_batch_norm": "norm",
    "cudnn_batch_norm_backward": "norm",
    "native_group_norm": "norm",
    "native_group_norm_backward": "norm",
    "_fused_rms_norm": "norm",
    "_softmax": "softmax",
    "_softmax_backward_data": "softmax",
    "_log_softmax": "softmax",
    "_log_softmax_backward_data": "softmax",
    "nll_loss_forward": "softmax",
    "nll_loss_backward": "softmax",
    "max_pool2d_with_indices": "pool",
    "max_pool2d_with_indices_backward": "pool",
    "_adaptive_avg_pool2d": "pool",
    "_adaptive_avg_pool2d_backward": "pool",
    "avg_pool2d": "pool",
    "avg_pool2d_backward": "pool",
    "sum": "reduction",
    "mean": "reduction",
    "amax": "reduction",
    "max": "reduction",
    "var_mean": "reduction",
    "norm": "reduction",
    "linalg_vector_norm": "reduction",
    "cat": "copy",
    "copy_": "copy",
    "clone": "copy",
    "embedding": "copy",
    "embedding_dense_backward": "copy",
    "index_select": "copy",
    "gather": "copy",
    "scatter_add": "copy",
    "index_add": "copy",
    "_to_copy": "copy",
    "fill_": "copy",
    "zero_": "copy",
    "constant_pad_nd": "copy",
    "slice_backward": "copy",
    "select_backward": "copy",
}


def op_class_of(name: str) -> str:
    """The coarse op class (OP_CLASSES) of a kernel name: a built-in model's kernel name
    ("Conv2d_Backward_Weight" -> "conv"), an aten op name ("aten::addmm" -> "matmul";
    foreach and fused optimizer ops -> "optimizer"), or an op class itself. Anything else is
    "elementwise" (memory-bound point-wise work)."""
    n = str(name)
    if n in OP_CLASSES:
        return n
    for cls, prefixes in _CLASS_PREFIXES:
        if n.startswith(prefixes):
            return cls
    a = n.lower().split("::")[-1].split(".")[0]
    if a.startswith(("_fused_adam", "_fused_sgd", "_foreach_")) or a in ("adamw", "sgd"):
        return "optimizer"
    return _ATEN_CLASSES.get(a, _ATEN_CLASSES.get(a.rstrip("_"), "elementwise"))


FAMILY_COLUMNS = (
    "a_time_s",
    "b_time_s",
    "a_input_pf_s",
    "b_input_pf_s",
    "a_pf_s",
    "b_pf_s",
    "a_workspace_bytes",
    "b_workspace_bytes",
)


def params_path() -> Path:
    from g10fast.datadir import data_dir

    return data_dir() / "costmodel" / "a100.toml"


def families_path(params_file) -> Path:
    p = Path(params_file)
    return p.with_name(p.stem + "-families.tsv")


@dataclass(frozen=True)
class Gpu:
    """What the cost model needs of a GPU (from a hardware preset)."""

    name: str
    peak_flops: float  # for the model's element type, FLOP/s
    hbm_bytes_per_s: float
    link_bytes_per_s: float  # host link, per direction
    #: a parameter file of data/costmodel/ to use (its stem), "" for the one fitted on this
    #: GPU's model (else the A100 fit): a preset's `gpu.cost_params`, for a GPU whose
    #: kernels no profile measured but whose efficiencies a measured fit stands for
    params: str = ""


@dataclass(frozen=True)
class CostParams:
    classes: dict  # kernel name -> (e_F, e_B, overhead_s)
    fault_in: tuple  # (phi, overhead s) for input faulting
    fault_all: tuple  # (phi, overhead s) for all faulting
    workspace_ratio: dict  # kernel name -> omega
    reference_gpu: dict  # the GPU the parameters were fitted on
    families: dict | None = None  # family key -> 8 floats (FAMILY_COLUMNS)
    form: str = "roofline"  # how the FLOP and byte terms combine: max or sum
    #: the bytes each faulting mode's time grows with (FAULT_BASES), input and all faulting
    fault_basis: tuple = ("in", "all")

    def cls(self, name: str):
        """(e_F, e_B, o) of a kernel name: its own, else its op class's, else "*"'s."""
        name = TIMED_AS.get(name, name)
        c = self.classes.get(name)
        if c is None:
            c = self.classes.get(op_class_of(name)) or self.classes[DEFAULT_CLASS]
        return c

    def workspace(self, name: str) -> float:
        """omega of a kernel name: its own, else its op class's, else 0."""
        name = TIMED_AS.get(name, name)
        w = self.workspace_ratio.get(name)
        return self.workspace_ratio.get(op_class_of(name), 0.0) if w is None else w


def read_families(path) -> dict:
    """family key -> tuple of the 8 FAMILY_COLUMNS floats; {} when the file is absent."""
    p = Path(path)
    if not p.exists():
        return {}
    out = {}
    with open(p, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 1 + len(FAMILY_COLUMNS):
                raise InputError(
                    f"expected {1 + len(FAMILY_COLUMNS)} tab-separated fields", path=str(p), line=ln
                )
            try:
                out[parts[0]] = tuple(float(x) for x in parts[1:])
            except ValueError:
                raise InputError("not a number", path=str(p), line=ln) from None
    return out


def write_families(path, fams: dict, header: str = "") -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for h in header.splitlines():
            f.write(f"# {h}\n")
        f.write("# key\t" + "\t".join(FAMILY_COLUMNS) + "\n")
        for k in sorted(fams):
            f.write(k + "\t" + "\t".join(f"{v:.6g}" for v in fams[k]) + "\n")


def load_params(path=None) -> CostParams:
    """A parameter file (default data/costmodel/a100.toml)."""
    p = Path(path) if path is not None else params_path()
    d = read_toml(
        p,
        "cost-model parameters",
        missing="cost-model parameters not found (run benchmarks/calibrate_costmodel.py)",
    )
    try:
        classes = {
            k: (float(v["eff_flops"]), float(v["eff_bytes"]), float(v["overhead_us"]) * 1e-6)
            for k, v in d["kernel"].items()
        }
        if DEFAULT_CLASS not in classes:
            raise KeyError(DEFAULT_CLASS)
        fl = d["fault"]
        form = str(d.get("form", "roofline"))
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        basis = (str(fl.get("input_basis", "in")), str(fl.get("all_basis", "all")))
        if not set(basis) <= set(FAULT_BASES):
            raise ValueError(f"fault bases must be among {FAULT_BASES}, got {basis!r}")
        return CostParams(
            classes,
            (float(fl["input_fraction_of_link"]), float(fl["input_overhead_us"]) * 1e-6),
            (float(fl["all_fraction_of_link"]), float(fl["all_overhead_us"]) * 1e-6),
            {k: float(v) for k, v in d.get("workspace", {}).items()},
            dict(d.get("reference_gpu", {})),
            read_families(families_path(p)),
            form=form,
            fault_basis=basis,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"malformed cost-model parameters ({e!r})", path=str(p)) from None


def params_for(gpu: "Gpu") -> CostParams:
    """The parameters fitted on `gpu`'s model (the [reference_gpu] model of a file in
    data/costmodel/ equal to gpu.name), else the default a100.toml."""
    import tomllib

    default = params_path()
    if gpu.params:
        p = default.parent / f"{gpu.params}.toml"
        if not p.is_file():
            raise InputError(
                f"no cost-model parameters {gpu.params!r} in {default.parent}", param="gpu.cost_params"
            )
        return load_params(p)
    for p in sorted(default.parent.glob("*.toml")):
        if p == default:
            continue
        try:
            with open(p, "rb") as f:
                ref = tomllib.load(f).get("reference_gpu", {})
        except (OSError, tomllib.TOMLDecodeError):
            continue  # a broken file is reported when it is the one asked for
        if gpu.name and ref.get("model") == gpu.name:
            return load_params(p)
    return load_params(default)


def kernel_features(g: Graph) -> dict:
    """Per kernel: flops, bytes_in, bytes_out (float64 arrays) and the kernel names."""
    K = g.num_kernels
    raw = g.raw_size.astype(np.float64)
    pf = g.meta.get("parent_flops")
    if pf is None:
        raise InputError(
            f"graph {g.name!r} has no FLOP counts (only built-in models carry "
            "them; load it with g10fast.workload.builtin)",
            param="model",
        )
    flops = np.zeros(K)
    b_in = np.zeros(K)
    b_out = np.zeros(K)
    for k in range(K):
        b_in[k] = raw[g.inputs(k)].sum()
        b_out[k] = raw[g.outputs(k)].sum()
        if g.kernel_name[k] in MATMUL_KERNELS:
            flops[k] = pf.get(g.kernel_parent[k], 0) * FLOP_FACTOR.get(g.kernel_name[k], 1)
    return {"name": list(g.kernel_name), "flops": flops, "bytes_in": b_in, "bytes_out": b_out}


def _unit_batch_sizes(g: Graph):
    """Tensor sizes of the same built-in model at batch 1 (None when not rebuildable)."""
    key = g.meta.get("builtin")
    if not key or g.meta.get("family") in ("gpt2", "llama"):
        return None
    from g10fast.workload.builtin import load_builtin_graph

    try:
        g1 = load_builtin_graph(key, 1)
    except InputError:
        return None
    if g1.num_tensors != g.num_tensors or list(g1.kernel_name) != list(g.kernel_name):
        return None
    return g1.raw_size


def family_keys(g: Graph, flops=None) -> list:
    """Per kernel, its family: name, FLOPs per sample and the sorted sizes of its tensors,
    per sample for the batch-proportional ones ("p<bytes>"), as they are for the others
    ("c<bytes>"), as one string that does not depend on the batch size. A tensor is
    batch-proportional when the same built-in model at batch 1 has it B times smaller (or,
    for graphs that cannot be rebuilt, when it is a multiple of B of >= 16 bytes per sample
    and not global)."""
    B = max(1, int(g.batch_size))
    raw = g.raw_size.astype(np.int64)
    r1 = _unit_batch_sizes(g)
    if r1 is not None:
        prop = raw == B * r1.astype(np.int64)
    else:
        prop = (raw % B == 0) & (raw >= 16 * B) & ~np.asarray(g.is_global, dtype=bool)
    if B == 1:
        prop = np.zeros(len(raw), dtype=bool) if r1 is None else prop
    if flops is None:
        flops = kernel_features(g)["flops"]
    keys = []
    for k in range(g.num_kernels):
        ts = np.concatenate([g.inputs(k), g.outputs(k)])
        sz = sorted(f"p{raw[t] // B}" if prop[t] else f"c{raw[t]}" for t in ts)
        keys.append(f"{g.kernel_name[k]}|{flops[k] / B:.8g}|{','.join(sz)}")
    return keys


def is_reference_gpu(gpu: "Gpu", params: CostParams) -> bool:
    r = params.reference_gpu
    try:
        return (
            math.isclose(gpu.peak_flops, float(r["peak_tflops"]) * 1e12, rel_tol=1e-6)
            and math.isclose(gpu.hbm_bytes_per_s, float(r["hbm_gbps"]) * 1e9, rel_tol=1e-6)
            and math.isclose(gpu.link_bytes_per_s, float(r["link_gbps"]) * 1e9, rel_tol=1e-6)
        )
    except (KeyError, TypeError, ValueError):
        return False


def roofline(flops, nbytes, peak, bw, e_f, e_b, over, form: str = "roofline"):
    """max(F / (P e_F), D / (BW e_B)) + o, elementwise over arrays (seconds); with
    form="additive" the sum of the two terms instead of their max."""
    if form == "additive":
        return flops / (peak * e_f) + nbytes / (bw * e_b) + over
    return np.maximum(flops / (peak * e_f), nbytes / (bw * e_b)) + over


def estimate(g: Graph, gpu: Gpu, params: CostParams | None = None, families="auto") -> dict:
    """-> dict of float64 arrays: time_s, input_pf_s, pf_s, workspace_bytes (and features).

    families: "auto" (use the fitted family lines when `gpu` is the reference GPU), True or
    False. The result's "from_family" marks the kernels whose times came from a family line."""
    params = params or params_for(gpu)
    f = kernel_features(g)
    K = len(f["name"])
    ef = np.empty(K)
    eb = np.empty(K)
    ov = np.empty(K)
    om = np.zeros(K)
    for k, n in enumerate(f["name"]):
        ef[k], eb[k], ov[k] = params.cls(n)
        om[k] = params.workspace(n)
    tot = f["bytes_in"] + f["bytes_out"]
    t = roofline(f["flops"], tot, gpu.peak_flops, gpu.hbm_bytes_per_s, ef, eb, ov, params.form)
    ws = np.floor(om * tot)
    t_in, t_all = faulting(t, f["bytes_in"], tot, gpu, params, ws)
    use = is_reference_gpu(gpu, params) if families == "auto" else bool(families)
    fam = np.zeros(K, dtype=bool)
    if use and params.families:
        B = float(g.batch_size)
        for k, key in enumerate(family_keys(g, f["flops"])):
            v = params.families.get(key)
            if v is None:
                continue
            fam[k] = True
            t[k] = max(v[0] + v[1] * B, 1e-7)
            t_in[k] = max(v[2] + v[3] * B, t[k])
            t_all[k] = max(v[4] + v[5] * B, t_in[k])
            ws[k] = max(0.0, math.floor(v[6] + v[7] * B))
    return dict(f, time_s=t, input_pf_s=t_in, pf_s=t_all, workspace_bytes=ws, from_family=fam)


def kernel_times(
    flops,
    bytes_in,
    bytes_out,
    op_class,
    gpu="h100-sxm5",
    dtype_bytes: int = 4,
    params: CostParams | None = None,
) -> dict:
    """The cost model on plain per-kernel arrays (a captured workload's kernels).

    flops, bytes_in, bytes_out: per kernel (FLOPs; bytes of its distinct input and output
    tensors). op_class: per kernel, an op class of OP_CLASSES, a built-in kernel name or an
    aten op name (`op_class_of`), or one string for all. gpu: a hardware preset name
    ("h100-sxm5", "g10-artifact", ...), a preset dict (g10fast.hardware.load_preset) or a Gpu.
    dtype_bytes: the element size, which picks the peak (fp32 for 4, bf16 tensor cores for 2).
    params: default `params_for(gpu)`.
    -> dict of float64 arrays: time_s, input_pf_s, pf_s (seconds), workspace_bytes."""
    if isinstance(gpu, str):
        from g10fast.hardware import load_preset

        gpu = load_preset(gpu)
    if isinstance(gpu, dict):
        gpu = gpu_from_preset(gpu, dtype_bytes)
    if not isinstance(gpu, Gpu):
        raise InputError(f"gpu must be a preset name, a preset or a Gpu, got {gpu!r}", param="gpu")
    F = np.asarray(flops, dtype=np.float64)
    b_in = np.asarray(bytes_in, dtype=np.float64)
    tot = b_in + np.asarray(bytes_out, dtype=np.float64)
    if not (F.shape == b_in.shape == tot.shape and F.ndim == 1):
        raise InputError(
            "flops, bytes_in and bytes_out must be 1-D arrays of one length", param="kernel_times"
        )
    if F.size and not (
        np.all(np.isfinite(F))
        and np.all(np.isfinite(tot))
        and F.min() >= 0
        and b_in.min() >= 0
        and np.all(tot >= b_in)
    ):
        raise InputError("flops and bytes must be finite and >= 0", param="kernel_times")
    K = F.shape[0]
    names = [op_class] * K if isinstance(op_class, str) else list(op_class)
    if len(names) != K:
        raise InputError(f"{len(names)} op classes for {K} kernels", param="op_class")
    params = params or params_for(gpu)
    ef, eb, ov, om = (np.empty(K) for _ in range(4))
    for k, n in enumerate(names):
        ef[k], eb[k], ov[k] = params.cls(n)
        om[k] = params.workspace(n)
    t = roofline(F, tot, gpu.peak_flops, gpu.hbm_bytes_per_s, ef, eb, ov, params.form)
    ws = np.floor(om * tot)
    t_in, t_all = faulting(t, b_in, tot, gpu, params, ws)
    return {"time_s": t, "input_pf_s": t_in, "pf_s": t_all, "workspace_bytes": ws}


def fault_bytes(basis: str, bytes_in, bytes_all, workspace=None):
    """The bytes a faulting mode's time grows with (FAULT_BASES)."""
    if basis == "in":
        return bytes_in
    if basis == "all":
        return bytes_all
    out = np.asarray(bytes_all) - np.asarray(bytes_in)
    if basis == "out":
        return out
    if basis == "out_ws":
        return out + (0.0 if workspace is None else np.asarray(workspace, dtype=np.float64))
    raise InputError(f"unknown fault basis {basis!r} (known: {', '.join(FAULT_BASES)})", param="fault")


def faulting(t, bytes_in, bytes_all, gpu: Gpu, params: CostParams, workspace=None):
    """-> (input-faulting time, all-faulting time) in seconds."""
    (p_in, o_in), (p_all, o_all) = params.fault_in, params.fault_all
    b_in, b_all = params.fault_basis
    x_in = fault_bytes(b_in, bytes_in, bytes_all, workspace)
    x_all = fault_bytes(b_all, bytes_in, bytes_all, workspace)
    t_in = t + x_in / (p_in * gpu.link_bytes_per_s) + o_in
    t_all = t + x_all / (p_all * gpu.link_bytes_per_s) + o_all
    # A kernel without input bytes (LoadData_A0) or without output bytes faults nothing:
    # all three times equal, as in the artifact's traces. (The G10 stall model divides
    # bytes by bytes / time differences, which is 0 / 0 for such a kernel otherwise.)
    none = (np.asarray(bytes_in) == 0) | (np.asarray(bytes_all) == np.asarray(bytes_in))
    return np.where(none, t, t_in), np.where(none, t, t_all)


def estimated_workload(
    g: Graph, gpu: Gpu, freq_ghz: float = 1.2, params: CostParams | None = None, families="auto"
) -> Workload:
    """A Workload with cost-model times, converted to cycles as the trace loader does."""
    e = estimate(g, gpu, params or params_for(gpu), families)
    ms = lambda s: s * 1e3  # noqa: E731
    c_exec, c_in, c_pf = kernel_cycles(ms(e["time_s"]), ms(e["input_pf_s"]), ms(e["pf_s"]), freq_ghz)
    w = build_workload(g, c_exec, c_in, c_pf, e["workspace_bytes"].astype(np.int64))
    meta = dict(
        w.meta,
        kernel_times="estimated",
        cost_model_gpu=gpu.name,
        cost_model_basis=estimate_basis(gpu, params, families),
    )
    import dataclasses

    return dataclasses.replace(w, meta=meta)


def estimate_basis(gpu: Gpu, params: CostParams | None = None, families="auto") -> str:
    """In words, what `estimate` times `gpu`'s kernels with (shown by `g10fast presets` and
    in a run's result): the G10 artifact's measured A100 traces (the reference GPU), a fit
    on kernels measured on this GPU, or the A100 roofline on this GPU's peak and bandwidth.
    The first two differ a lot at small batches: the artifact's traces carry fixed costs per
    kernel of its profiler (up to ~0.6 s per convolution at every batch), which the family
    lines a + b * batch keep and extrapolate below the paper's batch sizes; the roofline has
    none of them (BERT-base at batch 8: 3.73 s on g10-artifact, 0.19 s on a100-80-pcie4;
    docs/model-format.md)."""
    params = params or params_for(gpu)
    ref = params.reference_gpu
    fams = (is_reference_gpu(gpu, params) if families == "auto" else bool(families)) and bool(params.families)
    if fams:
        return (
            "the G10 artifact's measured A100 kernel traces: per (kernel, shape) family a "
            "line a + b * batch fitted over the paper's batch sizes (with the traces' fixed "
            "per-kernel costs, extrapolated outside those batches), other kernels by the "
            "roofline fitted on them"
        )
    if gpu.name and ref.get("model") == gpu.name:
        return (
            f"a fit on kernels measured on this GPU ({ref.get('model')}; "
            f"{params.form} form of FLOP and byte terms)"
        )
    return (
        f"the cost model ({params.form} form) on this GPU's peak FLOP/s and HBM "
        f"bandwidth, with the efficiencies fitted on {ref.get('model', '?')} kernels "
        "(none of the fixed per-kernel costs of the G10 artifact's traces)"
    )


def gpu_from_preset(preset: dict, dtype_bytes: int = 4) -> Gpu:
    """Gpu from a hardware preset dict (g10fast.hardware): fp32 peak for 4-byte models,
    the bf16 tensor-core peak for 2-byte ones."""
    gpu = preset["gpu"]
    peak = gpu["peak_tflops_fp32"] if dtype_bytes >= 4 else gpu["peak_tflops_bf16"]
    return Gpu(
        name=gpu.get("model", preset.get("name", "?")),
        peak_flops=float(peak) * 1e12,
        hbm_bytes_per_s=float(gpu["hbm_gbps"]) * 1e9,
        link_bytes_per_s=float(preset["host"]["link_gbps"]) * 1e9,
        params=str(gpu.get("cost_params", "")),
    )


def fit_line(x, y):
    """Least-squares y = a + b x with a, b >= 0; -> (a, b)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(np.unique(x)) < 2:
        return 0.0, float(y.sum() / max(x.sum(), 1e-300))
    A = np.stack([np.ones_like(x), x], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    if a < 0:
        return 0.0, float((x * y).sum() / (x * x).sum())
    if b < 0:
        return float(y.mean()), 0.0
    return float(a), float(b)


def fit_roofline(flops, nbytes, t, weights=None, peak=1.0, bw=1.0):
    """Grid fit of (e_F, e_B, o) minimising the weighted squared log error; -> (e_F, e_B, o)."""
    t = np.asarray(t, dtype=np.float64)
    w = np.ones_like(t) if weights is None else np.asarray(weights, dtype=np.float64)
    lt = np.log(np.maximum(t, 1e-9))
    effs = np.logspace(-3.5, 0.3, 48)
    overs = np.array([0.0, 1, 2, 3, 4, 6, 8, 12, 16, 25, 40]) * 1e-6
    best = (math.inf, 1.0, 1.0, 0.0)
    has_f = np.any(flops > 0)
    ef_grid = effs if has_f else np.array([1.0])
    for e_b in effs:
        mem = nbytes / (bw * e_b)
        for e_f in ef_grid:
            base = np.maximum(flops / (peak * e_f), mem) if has_f else mem
            pred = base[None, :] + overs[:, None]
            err = ((np.log(pred) - lt[None, :]) ** 2 * w[None, :]).sum(axis=1)
            i = int(np.argmin(err))
            if err[i] < best[0]:
                best = (float(err[i]), float(e_f), float(e_b), float(overs[i]))
    return best[1], best[2], best[3]
