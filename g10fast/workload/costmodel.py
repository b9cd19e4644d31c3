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
per-kernel-name efficiencies e_F, e_B, the overhead o, the phi and o of faulting and omega are fitted to the G10 artifact's A100 traces by
benchmarks/calibrate_costmodel.py, which writes data/costmodel/a100.toml and
docs/costmodel-calibration.md (errors per operator type and per model).

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
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from g10fast.errors import InputError, read_toml
from g10fast.workload.model import Graph, Workload, build_workload
from g10fast.workload.times import kernel_cycles

MATMUL_KERNELS = ("Conv2d_Forward", "Conv2d_Backward_Weight", "Conv2d_Backward_Input",
                  "Linear_Forward", "Linear_Backward_Weight", "Linear_Backward_Input",
                  "BatchMatMul_Forward", "BatchMatMul_Backward")
DEFAULT_CLASS = "*"          # parameters for kernel names the calibration did not see
FAMILY_COLUMNS = ("a_time_s", "b_time_s", "a_input_pf_s", "b_input_pf_s", "a_pf_s", "b_pf_s",
                  "a_workspace_bytes", "b_workspace_bytes")


def params_path() -> Path:
    from g10fast.workload.builtin import data_dir
    return data_dir() / "costmodel" / "a100.toml"


def families_path(params_file) -> Path:
    p = Path(params_file)
    return p.with_name(p.stem + "-families.tsv")


@dataclass(frozen=True)
class Gpu:
    """What the cost model needs of a GPU (from a hardware preset)."""
    name: str
    peak_flops: float        # for the model's element type, FLOP/s
    hbm_bytes_per_s: float
    link_bytes_per_s: float  # host link, per direction


@dataclass(frozen=True)
class CostParams:
    classes: dict            # kernel name -> (e_F, e_B, overhead_s)
    fault_in: tuple          # (phi, overhead s) for input faulting
    fault_all: tuple         # (phi, overhead s) for all faulting
    workspace_ratio: dict    # kernel name -> omega
    reference_gpu: dict      # the GPU the parameters were fitted on
    families: dict | None = None   # family key -> 8 floats (FAMILY_COLUMNS)

    def cls(self, name: str):
        return self.classes.get(name) or self.classes[DEFAULT_CLASS]


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
                raise InputError(f"expected {1 + len(FAMILY_COLUMNS)} tab-separated fields",
                                 path=str(p), line=ln)
            try:
                out[parts[0]] = tuple(float(x) for x in parts[1:])
            except ValueError:
                raise InputError("not a number", path=str(p), line=ln) from None
    return out


def write_families(path, fams: dict, header: str = "") -> None:
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for h in header.splitlines():
            f.write(f"# {h}\n")
        f.write("# key\t" + "\t".join(FAMILY_COLUMNS) + "\n")
        for k in sorted(fams):
            f.write(k + "\t" + "\t".join(f"{v:.6g}" for v in fams[k]) + "\n")
    os.replace(tmp, p)


def load_params(path=None) -> CostParams:
    p = Path(path) if path is not None else params_path()
    d = read_toml(p, "cost-model parameters", missing="cost-model parameters not found (run "
                  "benchmarks/calibrate_costmodel.py)")
    try:
        classes = {k: (float(v["eff_flops"]), float(v["eff_bytes"]), float(v["overhead_us"]) * 1e-6)
                   for k, v in d["kernel"].items()}
        if DEFAULT_CLASS not in classes:
            raise KeyError(DEFAULT_CLASS)
        fl = d["fault"]
        return CostParams(classes,
                          (float(fl["input_fraction_of_link"]), float(fl["input_overhead_us"]) * 1e-6),
                          (float(fl["all_fraction_of_link"]), float(fl["all_overhead_us"]) * 1e-6),
                          {k: float(v) for k, v in d.get("workspace", {}).items()},
                          dict(d.get("reference_gpu", {})), read_families(families_path(p)))
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"malformed cost-model parameters ({e!r})", path=str(p)) from None


def kernel_features(g: Graph) -> dict:
    """Per kernel: flops, bytes_in, bytes_out (float64 arrays) and the kernel names."""
    K = g.num_kernels
    raw = g.raw_size.astype(np.float64)
    pf = g.meta.get("parent_flops")
    if pf is None:
        raise InputError(f"graph {g.name!r} has no FLOP counts (only built-in models carry "
                         "them; load it with g10fast.workload.builtin)", param="model")
    flops = np.zeros(K)
    b_in = np.zeros(K)
    b_out = np.zeros(K)
    for k in range(K):
        b_in[k] = raw[g.inputs(k)].sum()
        b_out[k] = raw[g.outputs(k)].sum()
        if g.kernel_name[k] in MATMUL_KERNELS:
            flops[k] = pf.get(g.kernel_parent[k], 0)
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
        return (math.isclose(gpu.peak_flops, float(r["peak_tflops"]) * 1e12, rel_tol=1e-6)
                and math.isclose(gpu.hbm_bytes_per_s, float(r["hbm_gbps"]) * 1e9, rel_tol=1e-6)
                and math.isclose(gpu.link_bytes_per_s, float(r["link_gbps"]) * 1e9, rel_tol=1e-6))
    except (KeyError, TypeError, ValueError):
        return False


def roofline(flops, nbytes, peak, bw, e_f, e_b, over):
    """max(F / (P e_F), D / (BW e_B)) + o, elementwise over arrays (seconds)."""
    return np.maximum(flops / (peak * e_f), nbytes / (bw * e_b)) + over


def estimate(g: Graph, gpu: Gpu, params: CostParams | None = None, families="auto") -> dict:
    """-> dict of float64 arrays: time_s, input_pf_s, pf_s, workspace_bytes (and features).

    families: "auto" (use the fitted family lines when `gpu` is the reference GPU), True or
    False. The result's "from_family" marks the kernels whose times came from a family line."""
    params = params or load_params()
    f = kernel_features(g)
    K = len(f["name"])
    ef = np.empty(K)
    eb = np.empty(K)
    ov = np.empty(K)
    om = np.zeros(K)
    for k, n in enumerate(f["name"]):
        ef[k], eb[k], ov[k] = params.cls(n)
        om[k] = params.workspace_ratio.get(n, 0.0)
    tot = f["bytes_in"] + f["bytes_out"]
    t = roofline(f["flops"], tot, gpu.peak_flops, gpu.hbm_bytes_per_s, ef, eb, ov)
    t_in, t_all = faulting(t, f["bytes_in"], tot, gpu, params)
    ws = np.floor(om * tot)
    use = (is_reference_gpu(gpu, params) if families == "auto" else bool(families))
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


def faulting(t, bytes_in, bytes_all, gpu: Gpu, params: CostParams):
    """-> (input-faulting time, all-faulting time) in seconds."""
    (p_in, o_in), (p_all, o_all) = params.fault_in, params.fault_all
    t_in = t + bytes_in / (p_in * gpu.link_bytes_per_s) + o_in
    t_all = t + bytes_all / (p_all * gpu.link_bytes_per_s) + o_all
    # A kernel without input bytes (LoadData_A0) or without output bytes faults nothing:
    # all three times equal, as in the artifact's traces. (The G10 stall model divides
    # bytes by bytes / time differences, which is 0 / 0 for such a kernel otherwise.)
    none = (np.asarray(bytes_in) == 0) | (np.asarray(bytes_all) == np.asarray(bytes_in))
    return np.where(none, t, t_in), np.where(none, t, t_all)


def estimated_workload(g: Graph, gpu: Gpu, freq_ghz: float = 1.2,
                       params: CostParams | None = None, families="auto") -> Workload:
    """A Workload with cost-model times, converted to cycles as the trace loader does."""
    e = estimate(g, gpu, params, families)
    ms = lambda s: s * 1e3  # noqa: E731
    c_exec, c_in, c_pf = kernel_cycles(ms(e["time_s"]), ms(e["input_pf_s"]), ms(e["pf_s"]),
                                       freq_ghz)
    w = build_workload(g, c_exec, c_in, c_pf, e["workspace_bytes"].astype(np.int64))
    meta = dict(w.meta, kernel_times="estimated", cost_model_gpu=gpu.name)
    import dataclasses
    return dataclasses.replace(w, meta=meta)


def gpu_from_preset(preset: dict, dtype_bytes: int = 4) -> Gpu:
    """Gpu from a hardware preset dict (g10fast.hardware): fp32 peak for 4-byte models,
    the bf16 tensor-core peak for 2-byte ones."""
    gpu = preset["gpu"]
    peak = gpu["peak_tflops_fp32"] if dtype_bytes >= 4 else gpu["peak_tflops_bf16"]
    return Gpu(name=gpu.get("model", preset.get("name", "?")), peak_flops=float(peak) * 1e12,
               hbm_bytes_per_s=float(gpu["hbm_gbps"]) * 1e9,
               link_bytes_per_s=float(preset["host"]["link_gbps"]) * 1e9)


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
