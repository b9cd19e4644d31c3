"""Python API over built-in models, hardware presets and TOML run files (docs/run-format.md).

    import g10fast.api as g
    res = g.simulate("bert-base", batch=256, system="g10-artifact", policy="lru")
    res = g.run_toml("examples/run.toml")          # one result, or a list for several policies
    table = g.compare("bert-base", 256, policies=g.DEFAULT_POLICIES)

Each result is the dict of g10fast.run.run (docs/results.md).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from g10fast.errors import InputError, read_toml

# the artifact's policy names, in the order of the paper's figures, and Ideal
DEFAULT_POLICIES = ("ideal", "lru", "deepUM", "FlashNeuron", "G10GDSFULL", "prefetch_lru")
DISPLAY = {"ideal": "Ideal", "lru": "Base UVM", "deepUM": "DeepUM+", "FlashNeuron": "FlashNeuron",
           "G10GDSSSD": "G10-GDS", "G10GDSFULL": "G10-Host", "prefetch_lru": "G10"}
ENGINE_KEYS = ("num_iteration", "kernel_time_std_dev", "ran_seed", "kernel_speedup",
               "num_candidate", "prefetch_degree", "delta_parameter")

# The default run: BERT-base at batch 64 (37.6 GiB) on the paper's system with its GPU memory
# set to 10 GB, i.e. 3.8x oversubscribed, with cost-model kernel times: no artifact files are
# needed and the page count (9.4 M) keeps all policies within the two-minute budget.
DEFAULT_RUN = {"workload": {"model": "bert-base", "batch": 64},
               "system": {"preset": "g10-artifact", "overrides": {"gpu.memory_gb": 10.0}},
               "policy": {"names": list(DEFAULT_POLICIES)}}


def builtin_config(spec, batch: int, preset: dict, policy: str, engine: dict | None = None):
    """G10Config of a built-in model on a preset under `policy` (the artifact's names, or
    'ideal'); file fields name the built-in model, as the engines never read them."""
    from g10fast.config import _FIXED, _POLICY_KEYS, G10Config, resolve_policy, validate
    from g10fast.hardware import config_fields

    ideal = str(policy).lower() == "ideal"
    pol = "lru" if ideal else resolve_policy(policy)
    use_prefetch, ev, mig, extra = _POLICY_KEYS[pol]
    v = dict(_FIXED)
    v.update(config_fields(preset))
    tag = f"builtin/{spec.name}"
    v.update(batch_size=int(batch), use_prefetch=use_prefetch, eviction_policy=ev,
             migration_policy=mig, nn_model_input_file=tag, orig_kernel_time_file=tag,
             input_pf_kernel_time_file=tag, pf_kernel_time_file=tag, workspace_size_file=tag,
             output_folder="")
    if spec.kind == "cnn":
        h, w = spec.params["input_hw"]
        v.update(is_transformer=0, input_H=int(h), input_W=int(w),
                 **{f"is_{spec.family}": 1})
    else:
        v.update(is_transformer=1)
    v.update(dict(extra))
    for k, val in (engine or {}).items():
        if k not in ENGINE_KEYS:
            raise InputError(f"unknown engine option {k!r} (known: {', '.join(ENGINE_KEYS)})",
                             param=f"engine.{k}")
        v[k] = val
    cfg = G10Config(**v)
    if ideal:
        cfg = cfg.replace(is_UVM=False)
    return validate(cfg)


def builtin_workload(spec, batch: int, preset: dict, kernel_times="estimated", **model_opts):
    """Workload of a built-in model: cost-model times on the preset's GPU, or a profile file."""
    from g10fast.workload.builtin import load_builtin_graph
    from g10fast.workload.costmodel import estimated_workload, gpu_from_preset

    g = load_builtin_graph(spec, batch, **model_opts)
    if kernel_times == "estimated":
        gpu = gpu_from_preset(preset, int(g.meta.get("dtype_bytes", 4)))
        return estimated_workload(g, gpu, preset["gpu"]["frequency_ghz"])
    from g10fast.workload.profile import read_profile, workload_from_profile
    return workload_from_profile(g, read_profile(kernel_times), preset["gpu"]["frequency_ghz"])


def simulate(model, batch: int | None = None, system="g10-artifact", policy="lru", *,
             overrides: dict | None = None, engine: dict | None = None,
             kernel_times="estimated", model_options: dict | None = None, progress=None,
             trace_path=None, workload=None) -> dict:
    """Simulate a built-in model (name or ModelSpec) on a hardware preset under one policy."""
    from g10fast.hardware import load_preset
    from g10fast.run import run
    from g10fast.workload.builtin import find_model, ModelSpec

    spec = model if isinstance(model, ModelSpec) else find_model(model)
    batch = spec.default_batch if batch is None else batch
    preset = load_preset(system, overrides) if not isinstance(system, dict) else system
    cfg = builtin_config(spec, batch, preset, policy, engine)
    if workload is None:
        workload = builtin_workload(spec, batch, preset, kernel_times, **(model_options or {}))
    res = run(cfg, workload=workload, progress=progress, trace_path=trace_path)
    res["model"] = spec.name
    res["system_preset"] = preset.get("name")
    res["kernel_times"] = "estimated" if kernel_times == "estimated" else str(kernel_times)
    if policy == "ideal":
        res["policy"] = "ideal"
    return res


def not_available(policy: str, err: InputError) -> bool:
    """True when `err` says the policy's engine is not in this build (g10fast.run.NOT_YET)."""
    return "not implement" in str(err)


def compare(model, batch=None, system="g10-artifact", policies=DEFAULT_POLICIES, *,
            overrides=None, engine=None, kernel_times="estimated", model_options=None,
            progress_factory=None) -> list[dict]:
    """Run several policies on one workload (built once); a policy whose engine is not in
    this build gives {"policy": p, "status": "not available", "reason": ...}."""
    from g10fast.hardware import load_preset
    from g10fast.workload.builtin import find_model

    spec = find_model(model) if isinstance(model, str) else model
    batch = spec.default_batch if batch is None else batch
    preset = load_preset(system, overrides)
    w = builtin_workload(spec, batch, preset, kernel_times, **(model_options or {}))
    out = []
    for p in policies:
        prog = progress_factory(p) if progress_factory else None
        try:
            out.append(simulate(spec, batch, preset, p, engine=engine, kernel_times=kernel_times,
                                progress=prog, workload=w))
        except InputError as e:
            if not not_available(p, e):
                raise
            out.append({"policy": p, "status": "not available", "reason": str(e),
                        "model": spec.name, "batch_size": batch})
    return out


# ---------------------------------------------------------------------------------------------
# TOML run files

_TOP = {"workload", "system", "policy", "engine", "output"}


def read_run_file(path) -> dict:
    p = Path(path)
    d = read_toml(p, "run file")
    bad = [k for k in d if k not in _TOP]
    if bad:
        raise InputError(f"unknown section [{bad[0]}] (known: {', '.join(sorted(_TOP))})",
                         path=str(p), param=bad[0])
    d["_path"] = str(p)
    return d


def _policies(d: dict) -> list[str]:
    pol = d.get("policy", {})
    if not isinstance(pol, dict):
        raise InputError("[policy] must be a table", path=d.get("_path"), param="policy")
    if "names" in pol and "name" in pol:
        raise InputError("give policy.name or policy.names, not both", path=d.get("_path"),
                         param="policy.names")
    names = pol.get("names", [pol.get("name", "lru")])
    if not isinstance(names, list) or not names or not all(isinstance(x, str) for x in names):
        raise InputError("must be a non-empty list of policy names", path=d.get("_path"),
                         param="policy.names")
    from g10fast.config import resolve_policy
    return ["ideal" if n.lower() == "ideal" else resolve_policy(n) for n in names]


def run_spec(d: dict, progress_factory=None):
    """Run a parsed run file (or DEFAULT_RUN); -> one result, or a list for several policies."""
    path = d.get("_path")
    wl = dict(d.get("workload", {}))
    sysd = dict(d.get("system", {}))
    engine = dict(d.get("engine", {}))
    policies = _policies(d)
    if "artifact_config" in wl:
        from g10fast.config import read_g10_config
        from g10fast.run import run
        cfg_path = wl.pop("artifact_config")
        if path and not os.path.isabs(cfg_path):
            cfg_path = os.path.join(os.path.dirname(path), cfg_path)
        cfg = read_g10_config(cfg_path)
        if engine:
            cfg = cfg.replace(**engine)
        return run(cfg, progress=progress_factory("config") if progress_factory else None)
    model = wl.pop("model", None)
    if not isinstance(model, str):
        raise InputError("workload.model missing: a built-in model name (see `g10fast models`) or "
                         "artifact_config", path=path, param="workload.model")
    batch = wl.pop("batch", None)
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0):
        raise InputError(f"must be a positive integer, got {batch!r}", path=path,
                         param="workload.batch")
    times = wl.pop("kernel_times", "estimated")
    if times != "estimated" and path and not os.path.isabs(times):
        times = os.path.join(os.path.dirname(path), times)
    preset = sysd.pop("preset", "g10-artifact")
    overrides = sysd.pop("overrides", {})
    if sysd:
        raise InputError(f"unknown key {next(iter(sysd))!r} in [system] (known: preset, "
                         "overrides)", path=path, param=f"system.{next(iter(sysd))}")
    res = compare(model, batch, preset, policies, overrides=overrides, engine=engine,
                  kernel_times=times, model_options=wl, progress_factory=progress_factory)
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
            rows.append({"policy": r["policy"], "available": False,
                         "status": r.get("status") or "?", "reason": _not_ok_reason(r)})
            continue
        it = r["iterations"][r["reported"]]
        f = r["system"]["f_hz"]
        t = it["exe_time_cycles"] / f
        pg = it["pages"]
        gib = 4096 / 2**30
        rows.append({"policy": r["policy"], "available": True, "status": "ok", "time_s": t,
                     "normalised": (ideal / t) if t else math.nan,
                     "stall_share": it["stall_cycles"] / it["exe_time_cycles"]
                     if it["exe_time_cycles"] else 0.0,
                     "host_to_gpu_gib": pg["cpu_to_gpu"] * gib, "gpu_to_host_gib": pg["gpu_to_cpu"] * gib,
                     "ssd_to_gpu_gib": pg["ssd_to_gpu"] * gib, "gpu_to_ssd_gib": pg["gpu_to_ssd"] * gib,
                     "wall_s": r.get("wall_seconds", math.nan)})
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
    head = (f"{'policy':<12} {'time (s)':>10} {'perf/Ideal':>10} {'stall':>7} "
            f"{'host->GPU':>10} {'GPU->host':>10} {'SSD->GPU':>9} {'GPU->SSD':>9}  (GiB)")
    lines = [title] if title else []
    lines += [head, "-" * len(head)]
    for r in rows:
        name = DISPLAY.get(r["policy"], r["policy"])
        if r["status"] == "not available":
            lines.append(f"{name:<12} {'not yet available in this build':>40}")
            continue
        if not r["available"]:
            lines.append(f"{name:<12} {r['status'].upper()}: {r['reason']}")
            continue
        lines.append(f"{name:<12} {r['time_s']:>10.3f} {r['normalised']:>10.3f} "
                     f"{100 * r['stall_share']:>6.1f}% {r['host_to_gpu_gib']:>10.1f} "
                     f"{r['gpu_to_host_gib']:>10.1f} {r['ssd_to_gpu_gib']:>9.1f} "
                     f"{r['gpu_to_ssd_gib']:>9.1f}")
    return "\n".join(lines)


def comparison_figure(results: list[dict], path, title: str = "") -> str:
    """Two panels per policy: performance normalised to Ideal, and the iteration time split
    into compute and stall; a policy without numbers (failed, not available) is marked with
    its status. Written atomically (a temporary file, then renamed)."""
    import matplotlib.pyplot as plt

    fig = comparison_figure_object(results, title)
    path = str(path)
    ext = os.path.splitext(path)[1] or ".png"
    tmp = path + ".tmp" + ext
    try:
        fig.savefig(tmp, bbox_inches="tight", pad_inches=0.15)
    finally:
        plt.close(fig)
    os.replace(tmp, path)
    return path


def comparison_figure_object(results: list[dict], title: str = ""):
    """The matplotlib Figure of `comparison_figure` (Agg backend), not yet saved."""
    import textwrap

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = comparison_rows(results)
    names = [DISPLAY.get(r["policy"], r["policy"]) for r in rows]
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
                ax.text(i, 0.03 * top, r["status"], ha="center",
                        va="bottom", fontsize=7, color="#b03030", rotation=90)
        ax.set_xticks(x)
        ax.set_xticklabels(names, fontsize=8, rotation=30, ha="right")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if title:
        limit = int(width * 13)                  # characters of a 9-point line that fit
        lines = -(-len(title) // limit)
        fig.suptitle(textwrap.fill(title, width=min(limit, -(-len(title) // lines) + 10)),
                     fontsize=9)
    fig.tight_layout()
    return fig
