"""Python API over built-in models, hardware presets and TOML run files (docs/run-format.md).

    import g10fast.api as g
    res = g.simulate("bert-base", batch=256, system="g10-artifact", policy="lru")
    res = g.run_toml("examples/run.toml")          # one result, or a list for several policies
    table = g.compare("bert-base", 256, policies=g.DEFAULT_POLICIES)

Each result is the dict of g10fast.run.run (docs/results.md); each call builds a RunSpec
(g10fast.spec) and runs it.
"""

from __future__ import annotations

import math
import os

from g10fast import policies as registry
from g10fast.errors import InputError
from g10fast.policies import DEFAULT_POLICIES
from g10fast.spec import builtin_spec, read_run_file, run_file_specs

__all__ = ["DEFAULT_POLICIES", "DEFAULT_RUN", "builtin_workload", "compare", "comparison_figure",
           "comparison_rows", "comparison_text", "read_run_file", "run_spec", "run_toml",
           "simulate"]

# The default run: BERT-base at batch 64 (37.6 GiB) on the paper's system with its GPU memory
# set to 10 GB, i.e. 3.8x oversubscribed, with cost-model kernel times: no artifact files are
# needed and the page count (9.4 M) keeps all policies within the two-minute budget.
DEFAULT_RUN = {"workload": {"model": "bert-base", "batch": 64},
               "system": {"preset": "g10-artifact", "overrides": {"gpu.memory_gb": 10.0}},
               "policy": {"names": list(DEFAULT_POLICIES)}}


def builtin_workload(spec, batch: int, preset, kernel_times="estimated", **model_opts):
    """Workload of a built-in model (name or ModelSpec) on a preset (name or dict): cost-model
    times on the preset's GPU, or a profile file."""
    from g10fast.run import workload_of
    return workload_of(builtin_spec(spec, batch, preset, "lru", kernel_times=kernel_times,
                                    model_options=model_opts))


def simulate(model, batch: int | None = None, system="g10-artifact", policy="lru", *,
             overrides: dict | None = None, engine: dict | None = None, options: dict | None = None,
             kernel_times="estimated", model_options: dict | None = None, progress=None,
             trace_path=None, workload=None) -> dict:
    """Simulate a built-in model (name or ModelSpec) on a hardware preset (name, path, dict or
    System) under one policy (any registered name, alias or display name) with its options."""
    from g10fast.run import run
    spec = builtin_spec(model, batch, system, policy, overrides=overrides, options=options,
                        engine=engine, kernel_times=kernel_times, model_options=model_options)
    return run(spec, workload=workload, progress=progress, trace_path=trace_path)


def run_specs(specs, progress_factory=None) -> list[dict]:
    """Run several specs; those of one workload source share the built workload."""
    from g10fast.run import run, workload_of
    out, cache = [], {}
    for spec in specs:
        key = (spec.workload, spec.system.gpu_frequency_ghz, spec.engine.kernel_speedup,
               spec.system.gpu_hbm_gbps, spec.system.gpu_peak_tflops_fp32,
               spec.system.gpu_peak_tflops_bf16, spec.system.host_link_gbps)
        if key not in cache:
            cache[key] = workload_of(spec)
        prog = progress_factory(spec.policy.name) if progress_factory else None
        out.append(run(spec, workload=cache[key], progress=prog))
    return out


def compare(model, batch=None, system="g10-artifact", policies=DEFAULT_POLICIES, *,
            overrides=None, engine=None, kernel_times="estimated", model_options=None,
            progress_factory=None) -> list[dict]:
    """Run several policies on one built-in workload (built once)."""
    specs = [builtin_spec(model, batch, system, p, overrides=overrides, engine=engine,
                          kernel_times=kernel_times, model_options=model_options)
             for p in policies]
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
            rows.append({"policy": r["policy"], "available": False})
            continue
        it = r["iterations"][r["reported"]]
        f = r["system"]["f_hz"]
        t = it["exe_time_cycles"] / f
        pg = it["pages"]
        gib = 4096 / 2**30
        rows.append({"policy": r["policy"], "available": True, "time_s": t,
                     "normalised": (ideal / t) if t else math.nan,
                     "stall_share": it["stall_cycles"] / it["exe_time_cycles"]
                     if it["exe_time_cycles"] else 0.0,
                     "host_to_gpu_gib": pg["cpu_to_gpu"] * gib, "gpu_to_host_gib": pg["gpu_to_cpu"] * gib,
                     "ssd_to_gpu_gib": pg["ssd_to_gpu"] * gib, "gpu_to_ssd_gib": pg["gpu_to_ssd"] * gib,
                     "wall_s": r.get("wall_seconds", math.nan)})
    return rows


def comparison_text(results: list[dict], title: str = "") -> str:
    rows = comparison_rows(results)
    head = (f"{'policy':<12} {'time (s)':>10} {'perf/Ideal':>10} {'stall':>7} "
            f"{'host->GPU':>10} {'GPU->host':>10} {'SSD->GPU':>9} {'GPU->SSD':>9}  (GiB)")
    lines = [title] if title else []
    lines += [head, "-" * len(head)]
    for r in rows:
        name = registry.display(r["policy"])
        if not r["available"]:
            lines.append(f"{name:<12} {'not yet available in this build':>40}")
            continue
        lines.append(f"{name:<12} {r['time_s']:>10.3f} {r['normalised']:>10.3f} "
                     f"{100 * r['stall_share']:>6.1f}% {r['host_to_gpu_gib']:>10.1f} "
                     f"{r['gpu_to_host_gib']:>10.1f} {r['ssd_to_gpu_gib']:>9.1f} "
                     f"{r['gpu_to_ssd_gib']:>9.1f}")
    return "\n".join(lines)


def comparison_figure(results: list[dict], path, title: str = "") -> str:
    """Bar chart of normalised performance and stall share per policy; written atomically."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = comparison_rows(results)
    names = [registry.display(r["policy"]) for r in rows]
    perf = [r["normalised"] if r["available"] else 0.0 for r in rows]
    stall = [r["stall_share"] if r["available"] else 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=120)
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], perf, 0.4, label="performance / Ideal", color="#3b6ea8")
    ax.bar([i + 0.2 for i in x], stall, 0.4, label="stall share", color="#d08c3a")
    for i, r in enumerate(rows):
        if not r["available"]:
            ax.text(i, 0.03, "n/a", ha="center", fontsize=8, color="gray")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, fontsize=9)
    ax.set_ylim(0, 1.1)
    ax.axhline(1.0, color="gray", lw=0.6, ls="--")
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.set_title(title, fontsize=9)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    fig.tight_layout()
    path = str(path)
    ext = os.path.splitext(path)[1] or ".png"
    tmp = path + ".tmp" + ext
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)
    return path
