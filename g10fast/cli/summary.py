"""A run's result as text: the summary of `g10fast run`, its failure, the LP bound."""

from __future__ import annotations

from g10fast.cli.common import fmt_cycles


def summary_text(res: dict, note: str | None = None) -> str:
    from g10fast import policies

    lines = []
    if note:
        lines.append(note)
    w = res["workload"]
    lines.append(
        f"{res['model']}  batch {res['batch_size']}  policy {res['policy']} "
        f"on the {res['engine']} engine  "
        f"({w['kernels']} kernels, {w['tensors']} tensors, "
        f"{w['footprint_bytes'] / 2**30:.1f} GiB = {100 * w['overcommitment']:.0f}% of GPU)"
    )
    if res.get("kernel_times_gpu"):
        lines.append(
            f"kernel times for {res['kernel_times_gpu']}"
            + (f": {res['kernel_times_basis']}" if res.get("kernel_times_basis") else "")
        )
    failed = res.get("status") == "failed"
    lines += policies.engine(res["engine"]).summary_lines(res)  # the engine's own lines
    if failed:
        lines.append(failure_text(res))
        if res["iterations"]:
            lines.append(
                "  no time: the run does not fit (the engine's iteration, simulated "
                "before the check that failed, is in --json)"
            )
    for it in [] if failed else res["iterations"]:
        mark = "  <- reported" if it["iteration"] == res["reported"] else ""
        pg = it["pages"]
        lines.append(f"iteration {it['iteration']}{mark}")
        f_hz = float(res.get("f_hz") or 1.2e9)
        lines.append(f"  execution time   {fmt_cycles(it['exe_time_cycles'], f_hz)}")
        if "exe_time_ms" in it:
            lines.append(
                f"  (tensor engine, one iteration: {it['exe_time_ms']:.6g} ms, "
                f"stall {it['stall_ms']:.6g} ms, overlap {it['overlap_ms']:.6g} ms)"
            )
        lines.append(
            f"  ideal            {fmt_cycles(it['ideal_exe_time_cycles'], f_hz)}   "
            f"slowdown {it['slowdown']:.4f}"
        )
        if "bound_time_cycles" in it:
            lines.append(
                f"  bound            {fmt_cycles(it['bound_time_cycles'], f_hz)}   "
                f"forced {it['bound_forced_cycles']:,}  policy {it['bound_gap_cycles']:,}"
                f" cycles (docs/bounds.md)"
            )
        lines.append(
            f"  stall / overlap / compute   {it['stall_cycles']:,} / "
            f"{it['overlap_cycles']:,} / {it['compute_cycles']:,}"
        )
        lines.append(
            f"  page faults  host {it['cpu_pf']:,}  SSD {it['ssd_pf']:,}  "
            f"unallocated {it['unalloc_pf']:,}  in transfer {it['in_transfer']:,}"
        )
        lines.append(
            f"  pages moved  host->GPU {pg['cpu_to_gpu']:,}  SSD->GPU {pg['ssd_to_gpu']:,}"
            f"  GPU->host {pg['gpu_to_cpu']:,}  GPU->SSD {pg['gpu_to_ssd']:,}"
        )
    lp = (res.get("bound") or {}).get("lp")
    if lp is not None and not failed:
        lines.append(lp_bound_text(res["bound"]))
    if "gpu_memory_needed_bytes" in res:  # an allocator over the run (--allocator)
        pl = res.get("plan") or {}
        line = (
            f"  GPU memory needed {res['gpu_memory_needed_bytes'] / 2**30:.3f} GiB "
            f"({res['allocator']['allocator']}"
        )
        if "peak_before_bytes" in pl:
            line += (
                f"; load peak {pl.get('peak_bytes', 0) / 2**30:.3f} GiB of "
                f"{pl.get('peak_before_bytes', 0) / 2**30:.3f} GiB unswapped, limit "
                f"{pl.get('limit_bytes', 0) / 2**30:.3f} GiB, {pl.get('swaps', 0)} swaps"
            )
        lines.append(line + ")")
    lines.append(f"wall {res['wall_seconds']:.2f} s, peak memory {res['peak_rss_bytes'] / 2**20:.0f} MiB")
    return "\n".join(lines)


def lp_bound_text(b: dict) -> str:
    """The checkpoint LP of `--bound lp` beside the window and traffic bounds (seconds)."""
    lp = b["lp"]
    scale = b["time_s"] / b["time"] if b["time"] else 0.0  # the model's unit -> s
    how = "optimal" if lp["optimal"] else "stopped by its time limit: not used"
    return (
        f"  bound (--bound lp)  LP {lp['time'] * scale:.6g} s ({how}; "
        f"{lp['checkpoints']:,} checkpoints, {lp['variables']:,} variables, solved in "
        f"{lp['seconds']:.2f} s), window {b['window'] * scale:.6g} s, traffic "
        f"{b['traffic'] * scale:.6g} s: the bound is {b['time_s']:.6g} s"
    )


def failure_text(res: dict) -> str:
    """The human summary of a failed run (the artifact writes no result; figures show inf)."""
    f = res.get("failure") or {}
    lines = [
        f"FAILED: {res['policy']} cannot run this configuration ({f.get('stage', '?')})",
        f"  {f.get('reason', '')}",
    ]
    if f.get("tensor") is not None:
        k = f.get("kernel")
        where = "at start-up" if k is None or k < 0 else f"at kernel {k} ({f.get('kernel_name')})"
        lines.append(
            f"  tensor {f['tensor']} ({f['pages_needed']:,} pages) does not fit {where}: "
            f"{f['free_pages']:,} pages free, largest free run {f['largest_free_pages']:,} "
            f"pages, of {f.get('capacity_pages', 0):,}"
        )
    return "\n".join(lines)
