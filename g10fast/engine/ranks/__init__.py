"""The ranks engine: N data-parallel GPUs of one node as one simulated rank, its collectives
on the node's links and the CPU as a compute resource (DeepSpeed's ZeRO-2, ZeRO-Offload,
ZeRO-3 Offload and ZeRO-Infinity; docs/zero.md).

    simulate_ranks(spec, rec, ctx)       # g10fast.engine.ranks.run.run_ranks_engine, the registry's runner

A policy of this engine hands it a `ZeroMode` (its record's `engine_mode`); the node comes
from the preset's `[node]` table (`node.node_of`), the rank count from the system's `gpus`.
The result has one iteration (the steady step), a `breakdown` (time per resource: compute,
collectives, each PCIe direction, NVMe, the CPU's optimizer, host synchronisations), the
memory the step needs on the GPU and in host memory, and the step's `timeline` (every
operation: resource, start, end, label, bytes; `timeline_json` writes it for Perfetto).
"""

from __future__ import annotations

import dataclasses
import json

from g10fast.engine.ranks.node import Node, node_of
from g10fast.engine.ranks.zero import ZeroMode, simulate_step, zero_view
from g10fast.errors import InputError

#: timeline resources in the order a timeline shows them, with their track names
TRACKS = {
    "host": "CPU: host thread (launches, syncs)",
    "cpu": "CPU: optimizer cores",
    "gpu": "GPU: compute stream",
    "nccl": "NVLink: collectives stream",
    "reduce": "NVLink: gradient reduce stream",
    "h2d": "PCIe: host -> GPU",
    "d2h": "PCIe: GPU -> host",
    "nvme_read": "NVMe: read",
    "nvme_write": "NVMe: write",
}


def node_for(system) -> Node:
    """The node of a system's preset, its host link, NVMe read bandwidth and SSD latencies
    taken from the system (so that --pcie-gbps, --ssd-gbps and the [ssd] overrides apply)."""
    from g10fast.hardware import load_preset

    if not system.name:
        raise InputError(
            "the ranks engine needs a hardware preset with a [node] table (e.g. --system dgx-a100-40)",
            param="--system",
        )
    node = node_of(load_preset(system.name))
    scale = system.ssd_bandwidth_gbps / node.nvme_read_gbps
    return dataclasses.replace(
        node,
        pcie_gbps=min(node.pcie_gbps, system.host_link_gbps),
        pcie_uplink_gbps=min(node.pcie_uplink_gbps, system.host_link_gbps),
        nvme_read_gbps=system.ssd_bandwidth_gbps,
        nvme_write_gbps=node.nvme_write_gbps * scale,
        nvme_read_latency_us=system.ssd_read_latency_us,
        nvme_write_latency_us=system.ssd_write_latency_us,
    )


def small_kernel_overhead_us(system) -> float:
    """The fixed cost of a small element-wise kernel on this GPU: the cost model's fitted
    overhead of the element-wise class (docs/costmodel-h100.md)."""
    from g10fast.hardware import load_preset
    from g10fast.workload import costmodel as cm

    gpu = cm.gpu_from_preset(load_preset(system.name), 2)
    return float(cm.params_for(gpu).cls("elementwise")[2]) * 1e6


def summary_lines(res: dict) -> list:
    """The text summary of a ranks-engine result (g10fast run): the step, its breakdown and
    the memory it needs."""
    out = [
        f"{res.get('ranks')} data-parallel ranks of {res.get('system_preset') or 'the node'}"
        f", {res.get('parameters', 0) / 1e9:.3f} B parameters"
    ]
    mem = res.get("memory") or {}
    if mem:
        out.append(
            f"  GPU memory needed {mem['gpu_bytes_needed'] / 2**30:.2f} GiB of "
            f"{mem['gpu_bytes_available'] / 2**30:.1f}: "
            + ", ".join(f"{k} {v / 2**30:.2f}" for k, v in mem["gpu_bytes"].items())
        )
        if mem.get("host_bytes_per_rank"):
            out.append(
                "  host memory a rank "
                + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in mem["host_bytes_per_rank"].items())
            )
    b = res.get("breakdown")
    if b:
        out.append(
            f"  step {b['step_s'] * 1e3:.1f} ms; busy: compute {b['compute_s'] * 1e3:.1f}"
            f", collectives {b['collectives_s'] * 1e3:.1f}, PCIe host->GPU "
            f"{b['h2d_s'] * 1e3:.1f} ({b['h2d_bytes'] / 2**30:.2f} GiB), GPU->host "
            f"{b['d2h_s'] * 1e3:.1f} ({b['d2h_bytes'] / 2**30:.2f} GiB), CPU optimizer "
            f"{b['cpu_step_s'] * 1e3:.1f}, NVMe read {b['nvme_read_s'] * 1e3:.1f} / write "
            f"{b['nvme_write_s'] * 1e3:.1f}, host syncs {b['host_syncs']:,} "
            f"({b['host_sync_s'] * 1e3:.1f}) ms; GPU idle {b['gpu_idle_s'] * 1e3:.1f} ms"
        )
    return out


def simulate_ranks(spec, rec, ctx, *, trace=None, check=False) -> dict:
    """The ranks engine's part of a result (g10fast.engine.ranks.run.run_ranks_engine adds the schema's
    identity fields, the bound and the seconds). `check`: the timeline's invariants
    (`Timeline.check`) after the step; an AssertionError names the operation."""
    if trace is not None:
        raise InputError(
            "the ranks engine writes no page-event trace; its timeline is in the "
            "result (g10fast run ... --timeline OUT.json, for ui.perfetto.dev)",
            param="--trace",
        )
    if rec.engine_mode is None:
        raise InputError(f"policy {rec.name} gives the ranks engine no mode", param="policy")
    mode = rec.engine_mode(spec.policy.options, spec.engine)
    if not isinstance(mode, ZeroMode):
        raise InputError(f"policy {rec.name} must give the ranks engine a ZeroMode", param="policy")
    system = spec.system
    node = node_for(system)
    ranks = int(getattr(system, "gpus", 1) or 1)
    f_hz = float(system.f_hz)
    w = ctx.workload
    v = zero_view(w, f_hz)
    step = simulate_step(
        v,
        node,
        ranks,
        mode,
        gpu_memory_bytes=int(system.gpu_memory_gb * 2**30),
        hbm_gbps=system.gpu_hbm_gbps,
        small_kernel_us=small_kernel_overhead_us(system),
    )
    res = {"f_hz": f_hz}
    tl = step.timeline
    ideal_ns = int(v.time_ns[v.phase != 2].sum())
    res["ranks"] = ranks
    res["node"] = dataclasses.asdict(node)
    res["zero_mode"] = dataclasses.asdict(mode)
    res["memory"] = {
        "gpu_bytes": step.gpu_bytes,
        "host_bytes_per_rank": step.host_bytes,
        "gpu_bytes_needed": int(sum(step.gpu_bytes.values())),
        "gpu_bytes_available": int(system.gpu_memory_gb * 2**30),
    }
    res["parameters"] = int(v.numel.sum())
    if step.failure is not None:
        res["status"] = "failed"
        res["failure"] = step.failure
        return res
    busy = {
        k: tl.busy(kind=k) / 1e9
        for k in ("compute", "collective", "h2d", "d2h", "cpu", "nvme_read", "nvme_write", "sync", "launch")
    }
    res["breakdown"] = {
        "step_s": step.step_ns / 1e9,
        "compute_s": busy["compute"],
        "collectives_s": busy["collective"],
        "h2d_s": busy["h2d"],
        "d2h_s": busy["d2h"],
        "cpu_step_s": busy["cpu"],
        "nvme_read_s": busy["nvme_read"],
        "nvme_write_s": busy["nvme_write"],
        "host_sync_s": busy["sync"],
        "host_launch_s": busy["launch"],
        "gpu_idle_s": max(0.0, step.step_ns / 1e9 - tl.busy("gpu") / 1e9),
        "h2d_bytes": tl.bytes_of("h2d"),
        "d2h_bytes": tl.bytes_of("d2h"),
        "nvme_read_bytes": tl.bytes_of("nvme_read"),
        "nvme_write_bytes": tl.bytes_of("nvme_write"),
        "collective_bytes": tl.bytes_of("collective"),
        **step.counts,
    }
    cyc = int(round(step.step_ns * f_hz / 1e9))
    ideal_cyc = int(round(ideal_ns * f_hz / 1e9))
    res["iterations"] = [
        {
            "iteration": 0,
            "exe_time_cycles": cyc,
            "ideal_exe_time_cycles": ideal_cyc,
            "slowdown": cyc / ideal_cyc if ideal_cyc else 0.0,
            "cpu_pf": 0,
            "ssd_pf": 0,
            "unalloc_pf": 0,
            "in_transfer": 0,
            "compute_cycles": int(round(busy["compute"] * f_hz)),
            "stall_cycles": max(0, cyc - int(round(busy["compute"] * f_hz))),
            "overlap_cycles": 0,
            "pages": {
                "cpu_to_gpu": tl.bytes_of("h2d") // 4096,
                "gpu_to_cpu": tl.bytes_of("d2h") // 4096,
                "ssd_to_gpu": tl.bytes_of("nvme_read") // 4096,
                "gpu_to_ssd": tl.bytes_of("nvme_write") // 4096,
            },
        }
    ]
    res["reported"] = 0
    res["timeline"] = tl.arrays()
    b_ns, b_res = tl.bound()
    b_ns = max(b_ns, ideal_ns)
    res["bound_summary"] = {
        "time": b_ns * f_hz / 1e9,
        "window": b_ns * f_hz / 1e9,
        "traffic": b_ns * f_hz / 1e9,
        "feasible": True,
        "unit": "cycles",
        "windows": [],
        "binding_windows": 0,
        "binding_resource": b_res,
        "model": {
            "notes": [
                "ranks: the step lasts at least the busiest resource's work (the "
                "compute stream, a PCIe direction, NVLink, the CPU's optimizer, "
                "NVMe) and at least the kernels' ideal time"
            ]
        },
    }
    if check:
        res["invariant_checks"] = tl.check()
    return res


def timeline_json(result: dict, path) -> str:
    """The ranks engine's timeline as a Chrome trace-event JSON file (ui.perfetto.dev and
    chrome://tracing open it): one track per resource (the host thread, the CPU's optimizer
    cores, the GPU's compute stream, the collectives' stream, each PCIe direction, NVMe read
    and write), a slice per operation with its bytes."""
    from pathlib import Path

    from g10fast.atomic import atomic_path

    tl = result.get("timeline")
    if not tl:
        raise InputError("this result has no timeline (a ranks-engine run has one)", param="--timeline")
    tids = {r: i + 1 for i, r in enumerate(TRACKS)}
    ev = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": 1,
            "args": {"name": f"{result.get('model')} {result.get('policy')} rank 0 of {result.get('ranks')}"},
        }
    ]
    for r, name in TRACKS.items():
        ev.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": tids[r], "args": {"name": name}})
        ev.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": 1,
                "tid": tids[r],
                "args": {"sort_index": tids[r]},
            }
        )
    for r, k, lab, s, e, b in zip(
        tl["resource"], tl["kind"], tl["label"], tl["start_ns"], tl["end_ns"], tl["bytes"]
    ):
        if e <= s:
            continue
        ev.append(
            {
                "ph": "X",
                "pid": 1,
                "tid": tids.get(r, len(tids) + 1),
                "name": lab or k,
                "cat": k,
                "ts": int(s) / 1000.0,
                "dur": (int(e) - int(s)) / 1000.0,
                "args": {"bytes": int(b)} if b else {},
            }
        )
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps({"traceEvents": ev, "displayTimeUnit": "ms"}))
    return str(path)
