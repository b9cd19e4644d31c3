"""Python API over built-in models, hardware presets and TOML run files (docs/run-format.md).

    import g10fast.api as g
    res = g.simulate("bert-base", batch=256, system="g10-artifact", policy="lru")
    res = g.run_toml("data/runs/llama-7b-h100.toml")   # one result, or a list for several policies
    table = g.compare("bert-base", 256, policies=g.DEFAULT_POLICIES)

Each result is the dict of g10fast.run.run (docs/results.md); each call builds a RunSpec
(g10fast.spec) and runs it.
"""

from __future__ import annotations

import math
import os

from g10fast import policies as registry
from g10fast.atomic import atomic_path
from g10fast.policies import DEFAULT_POLICIES
from g10fast.spec import builtin_spec, read_run_file, run_file_specs

__all__ = [
    "DEFAULT_POLICIES",
    "DEFAULT_RUN",
    "builtin_workload",
    "compare",
    "comparison_figure",
    "comparison_rows",
    "comparison_text",
    "read_run_file",
    "run_spec",
    "run_toml",
    "simulate",
]

# The default run: BERT-base at batch 64 (37.6 GiB) on the paper's system with its GPU memory
# set to 10 GB, i.e. 3.8x oversubscribed, with cost-model kernel times: no artifact files are
# needed and the page count (9.4 M) keeps all policies within the two-minute budget.
DEFAULT_RUN = {
    "workload": {"model": "bert-base", "batch": 64},
    "system": {"preset": "g10-artifact", "overrides": {"gpu.memory_gb": 10.0}},
    "policy": {"names": list(DEFAULT_POLICIES)},
}


def builtin_workload(spec, batch: int, preset, kernel_times="estimated", **model_opts):
    """Workload of a built-in model (name or ModelSpec) on a preset (name or dict): cost-model
    times on the preset's GPU, or a profile file."""
    from g10fast.run import workload_of

    return workload_of(
        builtin_spec(spec, batch, preset, "lru", kernel_times=kernel_times, model_options=model_opts)
    )


def simulate(
    model,
    batch: int | None = None,
    system="g10-artifact",
    policy="lru",
    *,
    overrides: dict | None = None,
    engine: dict | None = None,
    options: dict | None = None,
    kernel_times="estimated",
    model_options: dict | None = None,
    progress=None,
    trace_path=None,
    workload=None,
) -> dict:
    """Simulate a built-in model (name or ModelSpec) on a hardware preset (name, path, dict or
    System) under one policy (any registered name, alias or display name) with its options."""
    from g10fast.run import run

    spec = builtin_spec(
        model,
        batch,
        system,
        policy,
        overrides=overrides,
        options=options,
        engine=engine,
        kernel_times=kernel_times,
        model_options=model_options,
    )
    return run(spec, workload=workload, progress=progress, trace_path=trace_path)


def run_specs(
    specs, progress_factory=None, *, check: bool | str = False, bound: str | dict = "window"
) -> list[dict]:
    """Run several specs; those of one workload source share the built workload. `check` and
    `bound` as in `g10fast.run.run`, for every spec (`bound` a dict: per policy name)."""
    from g10fast.run import run, workload_of

    out, cache = [], {}
    for spec in specs:
        key = (
            spec.workload,
            spec.system.gpu_frequency_ghz,
            spec.engine.kernel_speedup,
            spec.system.gpu_hbm_gbps,
            spec.system.gpu_peak_tflops_fp32,
            spec.system.gpu_peak_tflops_bf16,
            spec.system.host_link_gbps,
        )
        if key not in cache:
            cache[key] = workload_of(spec)
        prog = progress_factory(spec.policy.name) if progress_factory else None
        b = bound.get(spec.policy.name, "window") if isinstance(bound, dict) else bound
        out.append(run(spec, workload=cache[key], progress=prog, check=check, bound=b))
    return out


def compare(
    model,
    batch=None,
    system="g10-artifact",
    policies=DEFAULT_POLICIES,
    *,
    overrides=None,
    engine=None,
    kernel_times="estimated",
    model_options=None,
    progress_factory=None,
) -> list[dict]:
    """Run several policies on one built-in workload (built once)."""
    specs = [
        builtin_spec(
            model,
            batch,
            system,
            p,
            overrides=overrides,
            engine=engine,
            kernel_times=kernel_times,
            model_options=model_options,
        )
        for p in policies
    ]
    return run_specs(specs, progress_factory)


def run_spec(d: dict, progress_factory=None):
    """Run a parsed run file (or DEFAULT_RUN); -> one result, or a list for several policies."""
    res = run_specs(run_file_specs(d), progress_factory)
    return res[0] if len(res) == 1 else res


def run_toml(path, progress_factory=None):
    """Read and run a TOML run file; returns the result dict (a list for several policies)."""
    return run_spec(read_run_file(path), progress_factory)


# ---------------------------------------------------------------------------------------------
# Comparison table and figure


def comparison_rows(results: list[dict]) -> list[dict]:
    """Per policy: time (s), performance normalised to Ideal, stall share, traffic per link."""
    ideal = None
    for r in results:
        if r.get("status") == "ok":
            it = r["iterations"][r["reported"]]
            f = r["system"]["f_hz"]
            ideal = it["ideal_exe_time_cycles"] / f
            break
    rows = []
    for r in results:
        if r.get("status") != "ok":
            rows.append(
                {
                    "policy": r["policy"],
                    "available": False,
                    "status": r.get("status") or "?",
                    "reason": _not_ok_reason(r),
                }
            )
            continue
        it = r["iterations"][r["reported"]]
        f = r["system"]["f_hz"]
        t = it["exe_time_cycles"] / f
        pg = it["pages"]
        gib = 4096 / 2**30
        rows.append(
            {
                "policy": r["policy"],
                "available": True,
                "status": "ok",
                "time_s": t,
                "normalised": (ideal / t) if t else math.nan,
                "stall_share": it["stall_cycles"] / it["exe_time_cycles"] if it["exe_time_cycles"] else 0.0,
                "host_to_gpu_gib": pg["cpu_to_gpu"] * gib,
                "gpu_to_host_gib": pg["gpu_to_cpu"] * gib,
                "ssd_to_gpu_gib": pg["ssd_to_gpu"] * gib,
                "gpu_to_ssd_gib": pg["gpu_to_ssd"] * gib,
                "bound_s": it["bound_time_cycles"] / f if "bound_time_cycles" in it else math.nan,
                "wall_s": r.get("wall_seconds", math.nan),
            }
        )
    return rows


def _not_ok_reason(r: dict) -> str:
    """Why a result has no numbers: a failed run's failure reason (where it failed), or the
    reason of a policy that is not available."""
    if r.get("status") == "failed":
        f = r.get("failure") or {}
        reason = str(f.get("reason") or "no reason given")
        return f"{reason} ({f['stage']})" if f.get("stage") else reason
    return str(r.get("reason") or "")


def comparison_text(results: list[dict], title: str = "") -> str:
    rows = comparison_rows(results)
    head = (
        f"{'policy':<12} {'time (s)':>10} {'perf/Ideal':>10} {'stall':>7} "
        f"{'host->GPU':>10} {'GPU->host':>10} {'SSD->GPU':>9} {'GPU->SSD':>9}  (GiB)  "
        f"{'bound (s)':>9}"
    )
    lines = [title] if title else []
    lines += [head, "-" * len(head)]
    for r in rows:
        name = registry.display(r["policy"])
        if r["status"] == "not available":
            lines.append(f"{name:<12} {'not yet available in this build':>40}")
            continue
        if not r["available"]:
            lines.append(f"{name:<12} {r['status'].upper()}: {r['reason']}")
            continue
        lines.append(
            f"{name:<12} {r['time_s']:>10.3f} {r['normalised']:>10.3f} "
            f"{100 * r['stall_share']:>6.1f}% {r['host_to_gpu_gib']:>10.1f} "
            f"{r['gpu_to_host_gib']:>10.1f} {r['ssd_to_gpu_gib']:>9.1f} "
            f"{r['gpu_to_ssd_gib']:>9.1f}         "
            + (f"{r['bound_s']:>9.3f}" if r["bound_s"] == r["bound_s"] else f"{'-':>9}")
        )
    return "\n".join(lines)


def comparison_figure(results: list[dict], path, title: str = "") -> str:
    """Two panels per policy: performance normalised to Ideal, and the iteration time split
    into compute and stall; a policy without numbers (failed, not available) is marked with
    its status. Written atomically (a temporary file, then renamed)."""
    import matplotlib.pyplot as plt

    fig = comparison_figure_object(results, title)
    path = str(path)
    try:
        with atomic_path(path, os.path.splitext(path)[1] or ".png") as tmp:
            fig.savefig(tmp, bbox_inches="tight", pad_inches=0.15)
    finally:
        plt.close(fig)
    return path


def comparison_figure_object(results: list[dict], title: str = ""):
    """The matplotlib Figure of `comparison_figure` (Agg backend), not yet saved."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = comparison_rows(results)
    names = [registry.display(r["policy"]) for r in rows]
    x = list(range(len(rows)))
    ok = [r["available"] for r in rows]
    perf = [r["normalised"] if a else 0.0 for r, a in zip(rows, ok)]
    time_s = [r["time_s"] if a else 0.0 for r, a in zip(rows, ok)]
    stall = [r["time_s"] * r["stall_share"] if a else 0.0 for r, a in zip(rows, ok)]
    compute = [t - st for t, st in zip(time_s, stall)]

    width = max(7.5, 1.1 * len(rows) + 2.5)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(width, 3.8), dpi=120)
    ax1.bar(x, perf, 0.6, color="#3b6ea8")
    ax1.axhline(1.0, color="gray", lw=0.7, ls="--")
    top1 = max([1.0] + [v for v in perf if v == v]) * 1.15
    ax1.set_ylim(0, top1)
    ax1.set_ylabel("performance / Ideal")
    ax1.set_title("performance, normalised to Ideal", fontsize=9)
    for i, (v, a) in enumerate(zip(perf, ok)):
        if a and v == v:
            ax1.text(i, v + 0.01 * top1, f"{v:.2f}", ha="center", va="bottom", fontsize=7)

    ax2.bar(x, compute, 0.6, color="#3b6ea8", label="compute")
    ax2.bar(x, stall, 0.6, bottom=compute, color="#d08c3a", label="stall")
    top2 = max([0.0] + time_s) * 1.15 or 1.0
    ax2.set_ylim(0, top2)
    ax2.set_ylabel("iteration time (s)")
    ax2.set_title("iteration time: compute and stall", fontsize=9)
    ax2.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    for ax, top in ((ax1, top1), (ax2, top2)):
        for i, r in enumerate(rows):
            if not r["available"]:
                ax.text(
                    i,
                    0.03 * top,
                    r["status"],
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="#b03030",
                    rotation=90,
                )
        ax.set_xticks(x)
        ax.set_xticklabels(names, fontsize=8, rotation=30, ha="right")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if title:
        limit = int(width * 13)  # characters of a 9-point line that fit
        lines = -(-len(title) // limit)
        fig.suptitle(textwrap.fill(title, width=min(limit, -(-len(title) // lines) + 10)), fontsize=9)
    fig.tight_layout()
    return fig
