"""DeepSpeed's ZeRO family on the ranks engine against DeepSpeed's own measured runs
(../shared/specs/zero-family.md §6, each with its full configuration), and the CPU Adam
model against a measurement.

Every constant of the engine comes from a hardware figure or a microbenchmark (the presets'
`[sources]`, g10fast/engine/ranks/); none was fitted to the step times below."""

from __future__ import annotations

import dataclasses
import functools

from g10fast.validate import Claim, Measured

ZENFLOW = (
    "DS:blogs/zenflow-corebinding/README.md (2 x DGX-A100-SXM4-40GB, 2 x EPYC 7742, "
    "1 TB; DeepSpeedExamples training/DeepSpeed-ZenFlow/finetuning, train_batch_size "
    "8, bf16, seq 512, AdamW, clip 1.0)"
)


@functools.lru_cache(maxsize=None)
def _run(
    model: str, policy: str, gpus: int, system: str, batch: int, recompute: str = "none", options: tuple = ()
) -> dict:
    from g10fast.api import builtin_spec
    from g10fast.run import run

    s = builtin_spec(model, batch, system, policy, options=dict(options) or None)
    s = s.replace(
        system=s.system.replace(gpus=gpus), workload=dataclasses.replace(s.workload, recompute=recompute)
    )
    return run(s)


def _step_ms(model, policy, bind):
    def measure(quick: bool) -> Measured:
        r = _run(
            model, policy, 2, "dgx-a100-40", 4, options=(("bind_cores", bind),) if policy != "zero2" else ()
        )
        b = r["breakdown"]
        return Measured(b["step_s"] * 1e3, _detail(b))

    return measure


def _detail(b: dict) -> str:
    keys = (
        "compute_s",
        "collectives_s",
        "d2h_s",
        "h2d_s",
        "cpu_step_s",
        "nvme_read_s",
        "nvme_write_s",
        "host_sync_s",
        "gpu_idle_s",
    )
    return "breakdown (busy ms): " + ", ".join(f"{k[:-2]} {b[k] * 1e3:.0f}" for k in keys if b.get(k))


def _oom(quick: bool) -> Measured:
    r = _run("qwen2.5-3b", "zero2", 2, "dgx-a100-40", 4)
    m = r["memory"]
    return Measured(
        m["gpu_bytes_needed"] / m["gpu_bytes_available"],
        f"status {r['status']}: " + (r.get("failure") or {}).get("reason", ""),
    )


def _tflops(policy: str, options: tuple = ()):
    def measure(quick: bool) -> Measured:
        from g10fast.workload.costmodel import kernel_features

        r = _run("gpt-10b", policy, 1, "dgx2-v100", 10, "full", options)
        from g10fast.api import builtin_spec
        from g10fast.run import workload_of

        s = builtin_spec("gpt-10b", 10, "dgx2-v100", policy)
        s = s.replace(workload=dataclasses.replace(s.workload, recompute="full"))
        w = workload_of(s)
        from g10fast.workload.fusion import kernel_phases

        ph = kernel_phases(w)
        fl = kernel_features(w)["flops"]
        flops = float(sum(f for f, p in zip(fl, ph) if p != "update"))
        b = r["breakdown"]
        return Measured(
            flops / b["step_s"] / 1e12,
            f"{flops / 1e12:.0f} TFLOP a step (forward, recomputed forward, "
            f"backward) in {b['step_s']:.2f} s; " + _detail(b),
        )

    return measure


def _grace_adam(quick: bool) -> Measured:
    from g10fast.engine.ranks import cpu as cm

    # Grace (GH200): 72 Neoverse V2 cores at 3.1 GHz, 4 x 128-bit SVE2 pipes (4 fp32 lanes a
    # vector), LPDDR5X at about 410 GB/s STREAM (anchors.md section 4, NVIDIA Grace tuning guide)
    pool = cm.CpuPool(cores=72, ghz=3.1, simd_lanes=4, per_core_gbps=20.0, bandwidth_gbps=410.0)
    t = cm.adam_ns(1e9, pool) / 1e9
    return Measured(t, "the model of one CPU Adam pass over 1e9 fp32 elements on Grace")


def _here_adam(quick: bool) -> Measured:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = root / "benchmarks" / "cpu_adam.py"
    if not script.is_file():
        from g10fast.validate import Unavailable

        raise Unavailable("benchmarks/cpu_adam.py is not in this installation")
    out = subprocess.run(
        [sys.executable, str(script), "--elements", "5e7", "--repeat", "3", "--no-record"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    import json

    rec = json.loads(out[out.index("{") :])
    return Measured(
        rec["fused_over_model"],
        f"torch fused AdamW over {rec['elements']:,} elements on {rec['threads']} "
        f"threads: {rec['adamw_fused_s'] * 1e3:.1f} ms; the model fed this "
        f"machine's triad ({rec['triad_gbps']} GB/s): {rec['model_s'] * 1e3:.1f} ms",
    )


DEEPNVME = (
    "DS:blogs/deepnvme/08-2024/README.md (Azure NC96ads_A100_v4: A100 80GB PCIe Gen4, "
    "4 x Gen4 NVMe RAID-0; ds_io, 1 GB between NVMe and a GPU buffer; zero-family.md 6.2 N2)"
)
_NVME_SETTING = (
    "one rank of dgx-a100-40 (its NVMe set is this machine's, from the same blog's ds_io runs "
    "into host memory: 10.1 / 5.3 GB/s, N1; its GPU link Gen4 x16, 25 GB/s), aio defaults, "
    "1 GiB"
)


def _ds_io(direction: str, gds: bool):
    def measure(quick: bool) -> Measured:
        from g10fast.engine.ranks.node import node_of
        from g10fast.engine.ranks.zero import ZeroMode, nvme_gpu_gbps
        from g10fast.hardware import load_preset

        node = node_of(load_preset("dgx-a100-40"))
        gbps = nvme_gpu_gbps(node, ZeroMode(aio_use_gds=gds), 2**30, direction)
        how = "straight to the GPU" if gds else "through a pinned host buffer, then PCIe"
        return Measured(gbps, f"the aio request ({direction}) {how}")

    return measure


def _ds_io_claim(direction: str, gds: bool, published: float) -> Claim:
    path = "GPUDirect Storage" if gds else "a CPU bounce buffer"
    return Claim(
        id=f"deepnvme.{'gds' if gds else 'bounce'}-{direction}",
        system="ZeRO-Infinity",
        claim=f"NVMe {'to' if direction == 'read' else 'from'} GPU memory through {path}: "
        f"{direction}s at about {published:g} GB/s",
        source=DEEPNVME,
        published=f"{published:g} GB/s",
        setting=_NVME_SETTING + (", aio use_gds" if gds else ""),
        unit="GB/s",
        band=(published * 0.85, published * 1.15),
        measure=_ds_io(direction, gds),
        why="The band is +-15 % (the figure is read by eye, +-0.2 GB/s). "
        + (
            "The set's rates are those measured into host memory; GPUDirect's own cost "
            "(the blog: 9.6 / 5.0 against 10.1 / 5.3) is not modelled."
            if gds
            else "A bounce transfer is the NVMe request and the PCIe copy one after the other "
            "(deepspeed_cpu_op.cpp); a write's extra host-side copy into pinned memory "
            "(`.to(kCPU).pin_memory()`) is not modelled, so writes come out faster."
        ),
    )


_WHY_OFFLOAD = (
    "The model's ZeRO-Offload step is its serial parts: compute, the fp32 gradients down "
    "PCIe (12.5 GB/s a rank: two GPUs share a switch's uplink in a DGX A100), the CPU's "
    "unscale, Adam and cast, the 16-bit partition up. The CPU passes read and write the "
    "pinned buffers on one NUMA node of four a socket (DeepSpeed binds memory only when a "
    "rank's cores lie in one node; host_memory_placement=spread gives 764 ms for 1.5B). "
    "The ZeRO-2 row, with DeepSpeed's gradient and step passes on the GPU modelled, comes out "
    "13 % short (the A100's kernel times are a transfer of the H100 fit); the rest grows with "
    "the partition's elements (about 0.2-0.35 ns an element), a per-element cost the model "
    "does not have: the achieved bandwidth of "
    "DeepSpeed's CPU Adam on a Zen 2 EPYC is not published. Unbound, the ranks' OpenMP "
    "pools oversubscribe the cores (the blog measures 15 %); the model has no figure for "
    "that penalty and gives both runs the same time."
)

CLAIMS = [
    Claim(
        id="zero.qwen1.5b-zero2",
        system="ZeRO-2",
        claim="Qwen2.5-1.5B fine-tuning, ZeRO-2 without offload: average step time",
        source=ZENFLOW + ", 'Practicality test'",
        published="240 ms",
        setting="qwen2.5-1.5b, batch 4 a GPU, 2 GPUs, dgx-a100-40, zero2",
        unit="ms",
        band=(204.0, 276.0),
        measure=_step_ms("qwen2.5-1.5b", "zero2", False),
        why="The band is 240 ms +-15 % (the blog's run-to-run spread on the 3B runs). The "
        "step is compute-bound here, and the A100's kernel times are the H100 fit's "
        "efficiencies at the A100's peaks (no profile of today's kernels on an A100 is "
        "at hand): a transfer, not a measurement. DeepSpeed's own passes over the gradients "
        "(the bucket copies and division, the step's inf/nan check, float64 norms, flatten, "
        "fp32 cast, clipping, FusedAdam, the 16-bit copy; stage_1_and_2.py) are element-wise "
        "kernels at the HBM bandwidth: 64 ms of the step, in place of the workload's own "
        "optimizer kernels (41 ms).",
    ),
    Claim(
        id="zero.qwen1.5b-offload",
        system="ZeRO-Offload",
        claim="Qwen2.5-1.5B, ZeRO-2 with the optimizer on the CPU, cores bound to ranks",
        source=ZENFLOW + ", 'Practicality test'",
        published="1,365 ms",
        setting="qwen2.5-1.5b, batch 4 a GPU, 2 GPUs, dgx-a100-40, zero-offload, bind_cores=true",
        unit="ms",
        band=(1160.0, 1570.0),
        measure=_step_ms("qwen2.5-1.5b", "zero-offload", True),
        why=_WHY_OFFLOAD,
    ),
    Claim(
        id="zero.qwen3b-offload",
        system="ZeRO-Offload",
        claim="Qwen2.5-3B, ZeRO-Offload without core binding (3 runs: 2,707, 3,127, 2,826 ms)",
        source=ZENFLOW + ", 'Improvement to ZeRO Offload performance'",
        published="2,887 ms",
        setting="qwen2.5-3b, batch 4 a GPU, 2 GPUs, dgx-a100-40, zero-offload",
        unit="ms",
        band=(2454.0, 3320.0),
        measure=_step_ms("qwen2.5-3b", "zero-offload", False),
        why=_WHY_OFFLOAD,
    ),
    Claim(
        id="zero.qwen3b-offload-bind",
        system="ZeRO-Offload",
        claim="Qwen2.5-3B, ZeRO-Offload with --bind_cores_to_rank (3 runs: 2,649, 2,642, 2,201 ms)",
        source=ZENFLOW + ", 'Improvement to ZeRO Offload performance'",
        published="2,497 ms",
        setting="qwen2.5-3b, batch 4 a GPU, 2 GPUs, dgx-a100-40, zero-offload, bind_cores=true",
        unit="ms",
        band=(2122.0, 2872.0),
        measure=_step_ms("qwen2.5-3b", "zero-offload", True),
        why=_WHY_OFFLOAD,
    ),
    Claim(
        id="zero.qwen3b-zero2-oom",
        system="ZeRO-2",
        claim="Qwen2.5-3B does not run with ZeRO-2 without offload on two 40 GB A100s",
        source=ZENFLOW + " ('we couldn't run Qwen2.5-3B with ZeRO2 using the same config on two GPUs')",
        published="does not fit",
        setting="qwen2.5-3b, batch 4 a GPU, 2 GPUs, dgx-a100-40, zero2: GPU memory needed / 40 GiB",
        unit="x",
        band=(1.0, float("inf")),
        measure=_oom,
    ),
    Claim(
        id="zero.gpt10b-offload-v100",
        system="ZeRO-Offload",
        claim="a 10B GPT-2 on one V100 with ZeRO-Offload: 40 TFLOPS",
        source="ZeRO-Offload (ATC'21) abstract, arXiv 2101.06840; the model and batch of "
        "DS:docs/_tutorials/zero-offload.md (50 layers, hidden 4096, batch 10, "
        "activation checkpointing)",
        published="40 TFLOPS",
        setting="gpt-10b, batch 10, seq 1024, 1 GPU of dgx2-v100, "
        "zero-offload, --recompute full; FLOPs of every "
        "kernel run (the recomputed forward included)",
        unit="TFLOPS",
        band=(34.0, 46.0),
        measure=_tflops("zero-offload"),
        why="The band is 40 +-15 %. The V100's kernel times are a transfer of the H100 "
        "fit's efficiencies (dgx2-v100's [sources]), its PCIe and NVLink figures "
        "partly unverified.",
    ),
    Claim(
        id="zero.nvme-blocking-copies",
        system="ZeRO-Infinity",
        claim="ZeRO-3 with NVMe offload of a 10B model (2021 code): 2.3 TFLOPS a GPU "
        "against 30-40 with ZeRO-2, from blocking host-to-device copies",
        source="issue deepspeedai/DeepSpeed#1130 (report and jfc4050's Nsight diagnosis)",
        published="2.3 TFLOPS",
        setting="gpt-10b, batch 10, 1 GPU of dgx2-v100, "
        "zero-infinity with sync_before_allgather=true "
        "(the 2021 code), --recompute full",
        unit="TFLOPS",
        band=(1.15, 4.6),
        measure=_tflops("zero-infinity", (("sync_before_allgather", True),)),
        why="The report gives neither GPU count, batch nor which states were on NVMe (its "
        "repro gist is not at hand); the band is 2.3 within a factor 2. In the model, the "
        "copy of every fetched partition already blocks the host (the current code, "
        "h2d_fetch_blocking), and the device synchronize before each fetch (every stream "
        "drained) lengthens the step by 12 % (54.8 -> 61.2 s); the step is bound by the "
        "NVMe traffic of the optimizer state (16 B read, 12 B written an element a step: "
        "21.8 s of reads, 34.6 s of writes on dgx2-v100's set), which a small batch makes "
        "dominant. The same reporter's issue #1069 found the 2021 code skipping stage 3's "
        "prefetches (a step-id off by one); the model prefetches as the current code does.",
    ),
    _ds_io_claim("read", False, 7.0),
    _ds_io_claim("write", False, 4.0),
    _ds_io_claim("read", True, 9.6),
    _ds_io_claim("write", True, 5.0),
    Claim(
        id="cpu-adam.grace",
        system="CPU Adam",
        claim="DeepSpeed CPU-Adam on a GH200's Grace: seconds per optimizer step of 1e9 parameters",
        source="DS:blogs/deepspeed-superoffload/README.md Figure 5 (zero-family.md 2.3)",
        published="0.098 s",
        setting="g10fast.engine.ranks.cpu.adam_ns(1e9) on Grace's 72 cores, 410 GB/s",
        unit="s",
        band=(0.0833, 0.1127),
        measure=_grace_adam,
        why="The band is 0.098 s +-15 %. The model takes Grace's STREAM bandwidth; "
        "CPU-Adam reached 286 GB/s of Adam traffic (70 % of it) in that figure.",
    ),
    Claim(
        id="cpu-adam.this-machine",
        system="CPU Adam",
        claim="an Adam step on this machine's CPU is as long as the model says, fed this "
        "machine's own triad bandwidth",
        source="benchmarks/cpu_adam.py (measured where validate runs; records in "
        "benchmarks/results/cpu_adam.jsonl)",
        published="measured here",
        setting="torch.optim.AdamW(fused=True) over 5e7 fp32 elements, every core",
        unit="x",
        band=(0.8, 1.25),
        measure=_here_adam,
        quick=False,
        why="Measured where validate runs, at that moment. On this project's 2-core VM, "
        "idle, torch's fused AdamW moved 54 GB/s of Adam traffic against a 29.6 GB/s "
        "triad (0.54 of the model's time): the triad writes a third array and pays a "
        "read for ownership that Adam's in-place updates do not, so a triad understates "
        "what Adam reaches and the model fed it is conservative; under load (seven other "
        "jobs) the two met (0.91-0.93, benchmarks/results/cpu_adam.jsonl).",
    ),
]
