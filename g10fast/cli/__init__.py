"""The `g10fast` command line.

    g10fast run CONFIG [--g10-root DIR] [--json] [--trace FILE.h5 [--trace-compression none]]
    g10fast run --g10 ARTIFACT_DIR --model BERT --batch 128 --policy lru [--host-mem-gb N ...]
    g10fast run ... --policy prefetch_lru [--plan OUT.csv] [--plan-in IN.csv] [--figure OUT.png]
    g10fast run                      (the default comparison: a built-in model, all policies)
    g10fast run FILE.toml            (a TOML run file, docs/run-format.md)
    g10fast models [--batch N]       (built-in models and their footprint)
    g10fast capture EXAMPLE|module:function --out W.h5 [--batch N --seq-len L --dtype D]
    g10fast workload export MODEL|CONFIG --out W.h5 [--batch N --system S | --g10 DIR]
    g10fast workload inspect W.h5
    g10fast run --workload W.h5 [--policy P --system S]   (an HDF5 workload trace)
    g10fast trace inspect FILE.h5 [--allow-incomplete]
    g10fast trace verify FILE.h5
    g10fast trace export FILE.h5 --perfetto OUT.pftrace [--format json] [--pages] [--kernels A:B]
    g10fast trace diff A.h5 B.h5 | trace plot FILE.h5 --out FIG.png
    g10fast store verify STORE       (every point checked against its checksum)
    g10fast store convert OLD.h5 NEW (a version-1 HDF5 store into a version-2 store)
    g10fast results export STORE --out points.csv|points.parquet
    g10fast sweep MATRIX --store FILE.h5 [--g10 ARTIFACT_DIR] [--workers N] [--dask ADDRESS]
                  [--no-reuse]
    g10fast figures STORE.h5 --out DIR [--g10 ARTIFACT_DIR]
    g10fast reproduce --g10 ARTIFACT_DIR [--store FILE.h5] [--out DIR]

Bad input (missing file, malformed line, unknown key, impossible setting) prints one
message naming the file and line or the parameter, and exits with status 2.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path

from g10fast.errors import InputError, InvariantError

EXIT_BAD_INPUT = 2
EXIT_INVARIANT = 3


def _find_artifact() -> Path | None:
    """../shared/g10-artifact next to the checkout or the working directory, or $G10_ARTIFACT."""
    env = os.environ.get("G10_ARTIFACT")
    cands = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[1]
    cands += [here.parent / "shared" / "g10-artifact", Path.cwd().parent / "shared" / "g10-artifact",
              Path.cwd() / "shared" / "g10-artifact"]
    for c in cands:
        if (c / "frontend" / "Nets").is_dir():
            return c
    return None


def _run_progress(args, label: str):
    """The progress(done, total) callback of one run: a tqdm bar on a terminal (or with
    --progress), plain lines every few seconds otherwise, none with --no-progress
    (g10fast/progress.py)."""
    from g10fast.progress import RunProgress

    return RunProgress(label, enabled=not args.no_progress, bar=True if args.progress else None)


def _fmt_cycles(c: int, f_hz: float = 1.2e9) -> str:
    return f"{c:,} cycles ({c / f_hz:.3f} s at {f_hz / 1e9:g} GHz)"


def summary_text(res: dict, note: str | None = None) -> str:
    lines = []
    if note:
        lines.append(note)
    w = res["workload"]
    lines.append(f"{res['model']}  batch {res['batch_size']}  policy {res['policy']} "
                 f"on the {res['engine']} engine  "
                 f"({w['kernels']} kernels, {w['tensors']} tensors, "
                 f"{w['footprint_bytes'] / 2**30:.1f} GiB = {100 * w['overcommitment']:.0f}% of GPU)")
    if res.get("kernel_times_gpu"):
        lines.append(f"kernel times for {res['kernel_times_gpu']}"
                     + (f": {res['kernel_times_basis']}" if res.get("kernel_times_basis")
                        else ""))
    failed = res.get("status") == "failed"
    if res.get("engine") == "ranks":
        from g10fast.engine.ranks import summary_lines
        lines += summary_lines(res)
    if failed:
        lines.append(failure_text(res))
        if res["iterations"]:
            lines.append("  no time: the run does not fit (the engine's iteration, simulated "
                         "before the check that failed, is in --json)")
    for it in ([] if failed else res["iterations"]):
        mark = "  <- reported" if it["iteration"] == res["reported"] else ""
        pg = it["pages"]
        lines.append(f"iteration {it['iteration']}{mark}")
        f_hz = float(res.get("f_hz") or 1.2e9)
        lines.append(f"  execution time   {_fmt_cycles(it['exe_time_cycles'], f_hz)}")
        if "exe_time_ms" in it:
            lines.append(f"  (tensor engine, one iteration: {it['exe_time_ms']:.6g} ms, "
                         f"stall {it['stall_ms']:.6g} ms, overlap {it['overlap_ms']:.6g} ms)")
        lines.append(f"  ideal            {_fmt_cycles(it['ideal_exe_time_cycles'], f_hz)}   "
                     f"slowdown {it['slowdown']:.4f}")
        if "bound_time_cycles" in it:
            lines.append(f"  bound            {_fmt_cycles(it['bound_time_cycles'], f_hz)}   "
                         f"forced {it['bound_forced_cycles']:,}  policy {it['bound_gap_cycles']:,}"
                         f" cycles (docs/bounds.md)")
        lines.append(f"  stall / overlap / compute   {it['stall_cycles']:,} / "
                     f"{it['overlap_cycles']:,} / {it['compute_cycles']:,}")
        lines.append(f"  page faults  host {it['cpu_pf']:,}  SSD {it['ssd_pf']:,}  "
                     f"unallocated {it['unalloc_pf']:,}  in transfer {it['in_transfer']:,}")
        lines.append(f"  pages moved  host->GPU {pg['cpu_to_gpu']:,}  SSD->GPU {pg['ssd_to_gpu']:,}"
                     f"  GPU->host {pg['gpu_to_cpu']:,}  GPU->SSD {pg['gpu_to_ssd']:,}")
    lp = (res.get("bound") or {}).get("lp")
    if lp is not None and not failed:
        lines.append(lp_bound_text(res["bound"]))
    if "gpu_memory_needed_bytes" in res:      # an allocator over the run (--allocator)
        pl = res.get("plan") or {}
        line = (f"  GPU memory needed {res['gpu_memory_needed_bytes'] / 2**30:.3f} GiB "
                f"({res['allocator']['allocator']}")
        if "peak_before_bytes" in pl:
            line += (f"; load peak {pl.get('peak_bytes', 0) / 2**30:.3f} GiB of "
                     f"{pl.get('peak_before_bytes', 0) / 2**30:.3f} GiB unswapped, limit "
                     f"{pl.get('limit_bytes', 0) / 2**30:.3f} GiB, {pl.get('swaps', 0)} swaps")
        lines.append(line + ")")
    lines.append(f"wall {res['wall_seconds']:.2f} s, peak memory {res['peak_rss_bytes'] / 2**20:.0f} MiB")
    return "\n".join(lines)


def lp_bound_text(b: dict) -> str:
    """The checkpoint LP of `--bound lp` beside the window and traffic bounds (seconds)."""
    lp = b["lp"]
    scale = b["time_s"] / b["time"] if b["time"] else 0.0       # the model's unit -> s
    how = ("optimal" if lp["optimal"] else "stopped by its time limit: not used")
    return (f"  bound (--bound lp)  LP {lp['time'] * scale:.6g} s ({how}; "
            f"{lp['checkpoints']:,} checkpoints, {lp['variables']:,} variables, solved in "
            f"{lp['seconds']:.2f} s), window {b['window'] * scale:.6g} s, traffic "
            f"{b['traffic'] * scale:.6g} s: the bound is {b['time_s']:.6g} s")


def failure_text(res: dict) -> str:
    """The human summary of a failed run (the artifact writes no result; figures show inf)."""
    f = res.get("failure") or {}
    lines = [f"FAILED: {res['policy']} cannot run this configuration ({f.get('stage', '?')})",
             f"  {f.get('reason', '')}"]
    if f.get("tensor") is not None:
        k = f.get("kernel")
        where = "at start-up" if k is None or k < 0 else f"at kernel {k} ({f.get('kernel_name')})"
        lines.append(f"  tensor {f['tensor']} ({f['pages_needed']:,} pages) does not fit {where}: "
                     f"{f['free_pages']:,} pages free, largest free run {f['largest_free_pages']:,} "
                     f"pages, of {f.get('capacity_pages', 0):,}")
    return "\n".join(lines)


def _spec_from_args(args):
    """-> (RunSpec, note) from a G10 config file, from --g10 flags, or a built-in model."""
    from g10fast import policies
    from g10fast.config import genconfig, read_g10_config
    from g10fast.spec import builtin_spec, from_g10_config

    over = {"host_mem_gb": args.host_mem_gb, "ssd_gbps": args.ssd_gbps,
            "pcie_gbps": args.pcie_gbps}
    if getattr(args, "workload", None) is not None:
        return _trace_spec_from_args(args)
    if args.config is not None:
        if args.g10 is not None:
            raise InputError("give either a config file or --g10 with --model/--batch/--policy",
                             param="--g10")
        for flag in ("model", "batch", "system"):
            if getattr(args, flag) is not None:
                raise InputError(f"--{flag} cannot change a G10 config file (it fixes the model, "
                                 "batch and system); use --g10 DIR --model M --batch B, or edit "
                                 "the file", param=f"--{flag}")
        cfg = read_g10_config(args.config, g10_root=args.g10_root)
        keys = {"host_mem_gb": ("CPU_memory_line_GB",), "ssd_gbps": ("SSD_PCIe_bandwidth_GBps",),
                "pcie_gbps": ("CPU_PCIe_bandwidth_GBps", "GPU_PCIe_bandwidth_GBps")}
        changed = {k2: v for k, v in over.items() if v is not None for k2 in keys[k]}
        if changed:
            cfg = cfg.replace(**changed)
        note = None
        if args.policy is not None:
            note = (f"policy {policies.get(args.policy).name} (--policy) instead of the config "
                    f"file's {policies.get(_file_policy(cfg)).name}")
        spec = from_g10_config(cfg, policy=args.policy, source=str(args.config))
        if args.option:
            from g10fast.spec import make_spec
            opts = dict(spec.to_dict()["policy"]["options"], **_options(args.option))
            spec = make_spec(spec.workload, spec.system, spec.policy.name, opts, spec.engine,
                             spec.source)
        return spec, note
    policy = args.policy or "lru"
    rec = policies.get(policy, param="--policy")
    if args.g10 is None:
        if args.model is None:
            raise InputError("--batch/--policy need a model: --model NAME (a built-in model, see "
                             "`g10fast models`) or --g10 ARTIFACT_DIR --model M", param="--model")
        system = args.system or "g10-artifact"
        spec = builtin_spec(args.model, args.batch, system, rec.name,
                            overrides=_preset_overrides(args),
                            options=_options(args.option))
        return spec, f"built-in {spec.workload.model} at batch {spec.workload.batch} on {system}"
    if args.system is not None:
        raise InputError("--system is for built-in models; the artifact's points use its own "
                         "system (change it with --host-mem-gb, --ssd-gbps, --pcie-gbps)",
                         param="--system")
    model = args.model or "BERT"
    batch = args.batch if args.batch is not None else 128
    artifact = rec.artifact or "lru"
    cfg = genconfig(args.g10, model, batch, artifact, host_mem_gb=args.host_mem_gb,
                    ssd_gbps=args.ssd_gbps, pcie_gbps=args.pcie_gbps)
    spec = from_g10_config(cfg, policy=rec.name)
    if args.option:
        from g10fast.spec import make_spec
        opts = dict(spec.to_dict()["policy"]["options"], **_options(args.option))
        spec = make_spec(spec.workload, spec.system, rec.name, opts, spec.engine)
    return spec, None


def _preset_overrides(args) -> dict:
    """The preset overrides that --host-mem-gb, --ssd-gbps and --pcie-gbps ask for."""
    flags = (("host_mem_gb", "host.memory_gb"), ("ssd_gbps", "ssd.bandwidth_gbps"),
             ("pcie_gbps", "host.link_gbps"))
    return {key: getattr(args, a) for a, key in flags if getattr(args, a) is not None}


def _trace_spec_from_args(args):
    """-> (RunSpec, note) of `run --workload FILE.h5` (an HDF5 workload trace)."""
    from g10fast import policies
    from g10fast.spec import trace_spec
    for flag in ("config", "g10", "model", "batch"):
        if getattr(args, flag) is not None:
            raise InputError(f"--workload fixes the model and batch; drop --{flag}",
                             param=f"--{flag}")
    rec = policies.get(args.policy or "lru", param="--policy")
    system = args.system or "g10-artifact"
    spec = trace_spec(args.workload, system, rec.name, overrides=_preset_overrides(args),
                      options=_options(args.option))
    return spec, f"workload trace {args.workload} ({spec.workload.model}, batch " \
                 f"{spec.workload.batch}) on {system}"


def cmd_workload_export(args) -> int:
    from g10fast.workload.h5trace import write_workload_h5
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec, from_g10_config
    from g10fast.config import genconfig, read_g10_config
    from g10fast.workload.times import frequency_hz

    if args.g10 is not None:
        spec = from_g10_config(genconfig(args.g10, args.source, args.batch or 128, "lru"))
        source = "artifact"
    elif os.path.isfile(args.source) and not args.source.endswith(".toml"):
        spec = from_g10_config(read_g10_config(args.source), source=args.source)
        source = "artifact"
    else:
        spec = builtin_spec(args.source, args.batch, args.system or "g10-artifact")
        source = "builtin"
    w = workload_of(spec)
    sysm = spec.system
    write_workload_h5(args.out, w, {"source": source, "model": spec.workload.model,
                                    "batch": spec.workload.batch, "gpu": sysm.gpu_model,
                                    "system_preset": sysm.name or "",
                                    "kernel_times": w.meta.get("kernel_times", "artifact"
                                                               if source == "artifact"
                                                               else "estimated"),
                                    "command": "g10fast workload export " + args.source},
                      freq_hz=frequency_hz(sysm.gpu_frequency_ghz),
                      transformer=spec.workload.shape.transformer,
                      trans_borden=spec.workload.shape.borden)
    print(f"{w.name} batch {w.batch_size}: {w.num_kernels} kernels, {w.num_tensors} tensors, "
          f"{w.footprint_bytes / 2**30:.2f} GiB -> {args.out}")
    return 0


def cmd_workload_inspect(args) -> int:
    from g10fast.workload.h5trace import read_attrs, read_workload_h5
    a = read_attrs(args.file)
    w = read_workload_h5(args.file)
    print(f"{args.file}: {a['format']} version {a['version']}")
    print(f"  {w.name} batch {w.batch_size}: {w.num_kernels} kernels, {w.num_tensors} tensors "
          f"({int(w.is_global.sum())} global, {w.weights_bytes / 2**30:.3f} GiB), footprint "
          f"{w.footprint_bytes / 2**30:.3f} GiB, ideal {w.ideal_cycles:,} cycles at "
          f"{int(a['freq_hz']) / 1e9:g} GHz")
    for k, v in sorted(a["provenance"].items()):
        print(f"  {k}: {v}")
    return 0


def _file_policy(cfg) -> str:
    from g10fast.spec import g10_policy
    return g10_policy(cfg)


def _options(items) -> dict:
    """--option KEY=VALUE pairs: values read as TOML (true, 8, 0.5, "text")."""
    import tomllib
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise InputError(f"expected KEY=VALUE, got {it!r}", param="--option")
        try:
            out[k.strip()] = tomllib.loads(f"v = {v.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[k.strip()] = v.strip()
    return out


def _kernel_times_warning(res: dict) -> None:
    """A run whose kernel times are for another GPU than its system's says so on stderr
    (the result's "kernel_times_warning", g10fast.workload.times.kernel_times_fields)."""
    if res.get("kernel_times_warning"):
        print(f"warning: {res['kernel_times_warning']}", file=sys.stderr)


def _run_builtin(args, spec: dict, note: str) -> int:
    """A TOML run file or the default run: one result, or a comparison table and figure.
    Every flag of `run` applies here or is refused (exit 2): the system flags (--system for
    the default run, --host-mem-gb, --ssd-gbps, --pcie-gbps), --option, --allocator, --check
    and --bound apply to every policy that takes them; with one policy the run is a single
    run (--plan, --plan-in, --kernel-order, --trace, --figure as for a built-in model); a
    comparison refuses the flags that write or read one run's file."""
    from g10fast import policies
    from g10fast.api import comparison_figure, comparison_text, run_specs
    from g10fast.results import to_json_ready
    from g10fast.spec import run_file_specs

    run_file = args.config is not None
    fixed = ("model", "batch", "policy", "system", "g10", "g10_root", "workload") if run_file \
        else ("g10_root",)
    for flag in fixed:
        if getattr(args, flag, None) is not None:
            what = ("a run file: set it in the file" if run_file else
                    "the default run (it resolves a G10 config file's relative paths)")
            raise InputError(f"--{flag.replace('_', '-')} cannot change {what}",
                             param=f"--{flag.replace('_', '-')}")
    if getattr(args, "fuse", None) is not None:
        spec = dict(spec, workload=dict(spec.get("workload") or {}, fuse=args.fuse))
    if getattr(args, "recompute", None) is not None:
        spec = dict(spec, workload=dict(spec.get("workload") or {}, recompute=args.recompute))
    if not run_file and args.system is not None:
        # the default run on another preset: that preset as it is (the default run's 10 GB
        # of GPU memory is its setting of g10-artifact)
        spec = dict(spec, system={"preset": args.system})
    try:
        specs = _with_run_flags(args, run_file_specs(spec))
    except InputError as e:
        raise _in_run_file(e, spec) from None
    if len(specs) == 1:
        return _run_one(args, specs[0], note, run_file=spec)
    for flag, why in (("plan", "writes one policy's plan"), ("plan_in", "replays one plan"),
                      ("kernel_order", "orders one run's tensors"),
                      ("trace", "writes one run's events"),
                      ("timeline", "writes one ranks-engine run's timeline")):
        if getattr(args, flag, None) is not None:
            raise InputError(f"--{flag.replace('_', '-')} {why}: this is a comparison of "
                             f"{len(specs)} policies; give one policy (--model M --policy P, or "
                             "a run file with [policy] name = ...)",
                             param=f"--{flag.replace('_', '-')}")
    if args.trace_compression != "deflate":
        raise InputError("goes with --trace, which a comparison does not take",
                         param="--trace-compression")
    fig = _comparison_figure_path(args, spec)
    if fig is not None:
        from g10fast.figures import check_image_path
        check_image_path(fig, "--figure")
    bound = _comparison_bound(args, specs)
    try:
        res = run_specs(specs, progress_factory=lambda p: _run_progress(args,
                                                                        policies.display(p)),
                        check=_check_arg(args), bound=bound)
    except InputError as e:
        raise _in_run_file(e, spec) from None
    _kernel_times_warning(res[0] if res else {})
    title = note
    if args.json:
        json.dump([to_json_ready(r) for r in res], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(comparison_text(res, title))
        for line in _comparison_notes(args, specs, res, bound):
            print(line)
    if fig is None:
        return 0
    comparison_figure(res, fig, title)
    # with --json, stdout holds the JSON alone
    (sys.stderr if args.json else sys.stdout).write(f"figure written to {fig}\n")
    return 0


def _check_arg(args) -> bool | str:
    """run()'s `check` from --check and --check-full."""
    return "full" if getattr(args, "check_full", False) else bool(args.check)


def _system_flags(args) -> dict:
    """The System fields that --host-mem-gb, --ssd-gbps and --pcie-gbps set (--pcie-gbps: the
    host and the GPU link, as in a G10 config's CPU_ and GPU_PCIe_bandwidth_GBps)."""
    out = {}
    if args.host_mem_gb is not None:
        out["host_memory_gb"] = float(args.host_mem_gb)
    if args.ssd_gbps is not None:
        out["ssd_bandwidth_gbps"] = float(args.ssd_gbps)
    if args.pcie_gbps is not None:
        out["host_link_gbps"] = out["gpu_link_gbps"] = float(args.pcie_gbps)
    if getattr(args, "gpus", None) is not None:
        out["gpus"] = int(args.gpus)
    return out


_SYSTEM_FLAG = {"host_memory_gb": "--host-mem-gb", "ssd_bandwidth_gbps": "--ssd-gbps",
                "host_link_gbps": "--pcie-gbps", "gpu_link_gbps": "--pcie-gbps",
                "gpus": "--gpus"}


def _with_run_flags(args, specs: list) -> list:
    """The specs of a run file (or the default run) with the flags that change a spec applied:
    the system flags to every spec; --option KEY=VALUE to every policy that has KEY (refused
    when none has it); --allocator to every tensor-engine and swap policy (refused when none
    is one). The policy's own system overrides (G10-GDS: no host memory) stay on top."""
    import dataclasses

    from g10fast.spec import make_spec
    sysf = _system_flags(args)
    opts = _options(args.option)
    alloc = getattr(args, "allocator", None)
    for k in opts:
        if not any(k in _option_names(s) for s in specs):
            known = sorted(set().union(*(_option_names(s) for s in specs)))
            raise InputError(f"no policy of this run has an option {k!r} (theirs: "
                             f"{', '.join(known) or 'none'})", param="--option")
    if alloc and len(specs) > 1 and not any(s.record.engine in ("tensor", "swap")
                                             for s in specs):
        raise InputError("no policy of this comparison places blocks (the tensor-engine and "
                         "swap policies do)", param="--allocator")
    out = []
    for s in specs:
        mine = {k: v for k, v in opts.items() if k in _option_names(s) or len(specs) == 1}
        engine = s.engine
        if alloc and (len(specs) == 1 or s.record.engine in ("tensor", "swap")):
            engine = dataclasses.replace(engine, allocator=alloc)
        if not (sysf or mine or engine is not s.engine):
            out.append(s)
            continue
        try:
            system = s.system.replace(**sysf) if sysf else s.system
            merged = dict(s.to_dict()["policy"]["options"], **mine)
            out.append(make_spec(s.workload, system, s.policy.name, merged, engine.check()))
        except InputError as e:
            from g10fast.system import PARAM
            flag = next((f for k, f in _SYSTEM_FLAG.items() if k in sysf
                         and e.param == PARAM.get(k)), None)
            raise InputError(e.message, param=flag or e.param) from None
    return out


def _option_names(spec) -> set:
    import dataclasses
    return {f.name for f in dataclasses.fields(spec.policy.options)}


def _comparison_bound(args, specs) -> dict | str:
    """--bound for a comparison: "lp" for the policies whose engine the LP models (page and
    tensor), refused when none of them is one."""
    if args.bound != "lp":
        return args.bound
    lp = {s.policy.name: "lp" if s.record.engine in ("page", "tensor") else "window"
          for s in specs}
    if "lp" not in lp.values():
        raise InputError("the LP models the page and tensor engines; no policy of this "
                         "comparison runs on one", param="--bound")
    return lp


def _comparison_notes(args, specs, results, bound) -> list[str]:
    """What the flags changed in a comparison, under its table."""
    from g10fast import policies
    lines = []
    sysf = _system_flags(args)
    if sysf:
        lines.append("system: " + ", ".join(f"{_SYSTEM_FLAG[k]} {v:g}" for k, v in sysf.items()
                                            if k != "gpu_link_gbps"))
    opts = _options(args.option)
    for k, v in opts.items():
        who = [policies.display(s.policy.name) for s in specs if k in _option_names(s)]
        lines.append(f"--option {k}={v!r}: applied to {', '.join(who)}")
    if getattr(args, "allocator", None):
        for r in results:
            if "gpu_memory_needed_bytes" in r:
                lines.append(f"{policies.display(r['policy'])}: GPU memory needed "
                             f"{r['gpu_memory_needed_bytes'] / 2**30:.3f} GiB "
                             f"({r['allocator']['allocator']})")
    if isinstance(bound, dict):
        for r in results:
            lp = (r.get("bound") or {}).get("lp")
            if lp is not None and r.get("status") == "ok":
                lines.append(f"{policies.display(r['policy'])}: "
                             + lp_bound_text(r["bound"]).strip())
        skipped = [policies.display(p) for p, b in bound.items() if b != "lp"]
        if skipped:
            lines.append(f"--bound lp: no LP for {', '.join(skipped)} (the LP models the page "
                         "and tensor engines)")
    if _check_arg(args):
        n = sum(int(r.get("invariant_checks") or 0) for r in results)
        lines.append(f"--check: every policy's invariants held ({n:,} checks; docs/invariants.md)")
    return lines


DEFAULT_COMPARISON_FIGURE = "g10fast-comparison.png"


def _comparison_figure_path(args, spec: dict) -> str | None:
    """Where a comparison's figure goes: --figure PATH; none with --no-figure; else
    <run-file-stem>-comparison.png in the working folder for a run file, and
    g10fast-comparison.png for the default run."""
    if getattr(args, "no_figure", False):
        if args.figure is not None:
            raise InputError("give --figure PATH or --no-figure, not both", param="--no-figure")
        return None
    if args.figure is not None:
        return str(args.figure)
    run_file = spec.get("_path")
    if run_file:
        return f"{Path(run_file).stem}-comparison.png"
    return DEFAULT_COMPARISON_FIGURE


def _in_run_file(err: InputError, spec: dict) -> InputError:
    """`err` from running a TOML run file, naming the file, the key and its line: a bad
    value of the file (batch = -1, a model option, an engine option, an override) is
    reported as the parameter alone (or against the model file) by the checks below
    run_spec. Errors about another file's own values (a preset, a profile) are kept."""
    from g10fast.errors import toml_key_line
    from g10fast.hardware import preset_key_of

    path = spec.get("_path")
    param = err.param
    workload = spec.get("workload") or {}
    engine = spec.get("engine") or {}
    overrides = (spec.get("system") or {}).get("overrides") or {}
    if path is None or str(param or "").startswith("--"):      # (a flag's, not the file's)
        return err
    if err.path is not None and err.path != path and param not in workload:
        return err
    if err.path == path and (err.line is not None or param is None):
        return err
    if param is None:
        return InputError(err.message, path=path)
    if param in engine:
        key = f"engine.{param}"
    elif param in overrides:
        key = f"system.overrides.{param}"
    elif preset_key_of(param) in overrides:
        key = f"system.overrides.{preset_key_of(param)}"
    elif param in workload:
        key = f"workload.{param}"
    elif param == "batch_size":
        key = "workload.batch"
    else:
        key = param
    line = toml_key_line(path, key) if "." in key else None
    return InputError(f"{key}: {err.message}", path=path, line=line, param=key)


def _run_and_memory_snapshots(args) -> int:
    """`run`, then with --memory-snapshot the run's workload (its derived allocation trace, one
    iteration, as `g10fast memory MODEL`) through each allocator (--allocator: that one), each
    written as a PyTorch memory snapshot (docs/memory-snapshot.md)."""
    if not getattr(args, "memory_snapshot", None):
        return cmd_run(args)
    d = Path(args.memory_snapshot).resolve().parent
    if not d.is_dir():
        raise InputError("folder does not exist", path=str(d), param="--memory-snapshot")
    rc = cmd_run(args)
    from g10fast.alloc.snapshot import write_workload_snapshots
    from g10fast.run import workload_of
    if args.config is None and args.g10 is None and args.model is None and args.batch is None \
            and args.policy is None and getattr(args, "workload", None) is None \
            or str(args.config).endswith(".toml"):
        from g10fast.api import DEFAULT_RUN, read_run_file
        from g10fast.spec import run_file_specs
        rf = DEFAULT_RUN if args.config is None else read_run_file(args.config)
        if args.fuse is not None:
            rf = dict(rf, workload=dict(rf.get("workload") or {}, fuse=args.fuse))
        if args.config is None and args.system is not None:     # as _run_builtin
            rf = dict(rf, system={"preset": args.system})
        spec = _with_run_flags(args, run_file_specs(rf))[0]     # the system flags too
    else:
        spec, _ = _spec_from_args(args)
        if args.fuse is not None:
            from g10fast.spec import with_fuse
            spec = with_fuse(spec, args.fuse)
    names = [args.allocator] if getattr(args, "allocator", None) else None
    for p in write_workload_snapshots(workload_of(spec), args.memory_snapshot, names,
                                      spec.system.gpu_frequency_ghz):
        (sys.stderr if args.json else sys.stdout).write(f"memory snapshot written to {p}\n")
    return rc


def cmd_run(args) -> int:
    if args.config is None and args.g10 is None and args.model is None and args.batch is None \
            and args.policy is None and getattr(args, "workload", None) is None:
        # the default comparison: the flags that change a run apply to it (_run_builtin)
        from g10fast.api import DEFAULT_RUN
        w = DEFAULT_RUN["workload"]
        on = (f"the {args.system} system" if args.system is not None else
              f"the {DEFAULT_RUN['system']['preset']} system with "
              f"{DEFAULT_RUN['system']['overrides']['gpu.memory_gb']:g} GiB of GPU memory")
        note = (f"default run: built-in {w['model']} at batch {w['batch']} on {on}, "
                "estimated kernel times")
        return _run_builtin(args, DEFAULT_RUN, note)
    if args.config is not None and str(args.config).endswith(".toml"):
        from g10fast.api import read_run_file
        return _run_builtin(args, read_run_file(args.config), f"run file {args.config}")
    if args.g10_root is not None and args.config is None:
        raise InputError("resolves a G10 config file's relative paths: give the config file "
                         "(g10fast run CONFIG --g10-root DIR)", param="--g10-root")
    spec, note = _spec_from_args(args)
    if args.fuse is not None:
        from g10fast.spec import with_fuse
        spec = with_fuse(spec, args.fuse)
    if args.recompute is not None:
        from g10fast.spec import with_recompute
        spec = with_recompute(spec, args.recompute)
    if args.gpus is not None:
        spec = spec.replace(system=spec.system.replace(gpus=args.gpus))
    if getattr(args, "allocator", None):
        import dataclasses
        spec = spec.replace(engine=dataclasses.replace(spec.engine,
                                                       allocator=args.allocator).check())
    return _run_one(args, spec, note)


def _run_one(args, spec, note, run_file: dict | None = None) -> int:
    """One run of a RunSpec with the flags of `run` (a G10 config, --model, --g10, --workload,
    or a run file with one policy: `run_file` its parsed dict, whose errors name its lines)."""
    from g10fast.results import to_json_ready
    from g10fast.run import run

    progress = _run_progress(args, "simulating")
    if args.trace is not None:
        d = Path(args.trace).resolve().parent
        if not d.is_dir():
            raise InputError("folder does not exist", path=str(d))
    for opt in ("plan", "figure"):
        target = getattr(args, opt)
        if target is not None and not Path(target).resolve().parent.is_dir():
            raise InputError("folder does not exist", path=str(Path(target).resolve().parent),
                             param=f"--{opt}")
    if args.figure is not None:
        from g10fast.figures import check_image_path
        check_image_path(args.figure, "--figure")
    rec = spec.record
    if getattr(args, "timeline", None) is not None:
        if rec.engine != "ranks":
            raise InputError("a timeline is the ranks engine's (the ZeRO policies); the other "
                             "engines write an event trace (--trace) for "
                             "`g10fast trace export --perfetto`", param="--timeline")
        if not Path(args.timeline).resolve().parent.is_dir():
            raise InputError("folder does not exist", path=str(Path(args.timeline).resolve()
                                                                .parent), param="--timeline")
    kw = {}
    if args.kernel_order is not None:
        if rec.engine != "page":
            raise InputError("only the page-engine policies take a kernel order",
                             param="--kernel-order")
        from g10fast.workload.kernel_order import read_kernel_order
        kw["required_order"] = read_kernel_order(args.kernel_order)
    if args.plan_in is not None:
        mode = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
        if not getattr(mode, "use_prefetch", False):
            raise InputError("a plan needs a page-engine policy that applies hints "
                             "(prefetch_lru or deepUM)", param="--plan-in")
        from g10fast.planner.io import read_plan
        from g10fast.run import workload_of
        kw["workload"] = workload_of(spec)
        kw["plan"] = read_plan(args.plan_in, kw["workload"].num_kernels,
                               kw["workload"].num_tensors)
    if args.trace_compression != "deflate":
        if args.trace is None:
            raise InputError("goes with --trace FILE.h5", param="--trace-compression")
        kw["trace_compression"] = args.trace_compression
    try:
        res = run(spec, trace_path=args.trace, progress=progress, check=_check_arg(args),
                  bound=args.bound, **kw)
    except InputError as e:
        raise (e if run_file is None else _in_run_file(e, run_file)) from None
    _kernel_times_warning(res)
    if args.plan is not None:
        if "plan_object" not in res:
            raise InputError("this policy has no plan (use prefetch_lru or deepUM)",
                             param="--plan")
        from g10fast.planner.io import write_plan
        write_plan(res["plan_object"], args.plan)
    if args.figure is not None:
        from g10fast.figures.memory import plot_memory
        plot_memory(res, args.figure)
    if getattr(args, "timeline", None) is not None:
        from g10fast.engine.ranks import timeline_json
        timeline_json(res, args.timeline)
    if args.json:
        out = to_json_ready(res)
        if note:
            out["note"] = note
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(summary_text(res, note))
        if res.get("fusion"):
            fu = res["fusion"]
            print(f"fusion {fu['mode']}: {fu['kernels_before']:,} -> {fu['kernels_after']:,} "
                  f"kernels, {fu['deleted_tensors']:,} tensors "
                  f"({fu['deleted_bytes'] / 2**30:.1f} GiB) deleted (docs/fusion.md)")
        if "plan" in res and "hint_counts" in res["plan"]:
            pl = res["plan"]
            line = f"plan: {pl['hints']:,} hints {pl['hint_counts']}"
            if "decisions" in pl:
                line += (f"; estimated peak {pl['peak_estimate_bytes'] / 2**30:.1f} GiB vs "
                         f"capacity {pl['capacity_bytes'] / 2**30:.1f} GiB")
            print(line)
        if args.trace:
            print(f"event trace written to {args.trace}")
        if args.plan:
            print(f"plan written to {args.plan}")
        if args.figure:
            print(f"figure written to {args.figure}")
        if getattr(args, "timeline", None):
            print(f"timeline written to {args.timeline} (ui.perfetto.dev opens it)")
    return 0


def _registry_rows() -> list[dict]:
    from g10fast import policies
    return [{"name": r.name, "display": r.display, "engine": r.engine, "aliases": list(r.aliases),
             "artifact": r.artifact, "paper": r.paper, "description": r.description,
             "plan_depends_on_host": r.plan_depends_on_host,
             "in_default_comparison": r.in_default_comparison, "options": r.option_defaults()}
            for r in policies.records()]


def policies_table(rows: list[dict], width: int = 100) -> str:
    """`g10fast policies` as text: columns as wide as their longest entry, each policy's
    options wrapped under the paper column."""
    import textwrap
    heads = ("policy", "shown as", "engine")
    keys = ("name", "display", "engine")
    w = [max(len(h), *(len(str(r[k])) for r in rows)) for h, k in zip(heads, keys)]
    indent = " " * (sum(w) + len(w))
    lines = [" ".join(h.ljust(n) for h, n in zip(heads, w)) + " paper"]
    for r in rows:
        lines.append(" ".join(str(r[k]).ljust(n) for k, n in zip(keys, w)) + " " + r["paper"])
        if r["options"]:
            opts = ", ".join(f"{k}={v}" for k, v in r["options"].items())
            lines += textwrap.wrap(f"options: {opts}", width=max(len(indent) + 40, width),
                                   initial_indent=indent, subsequent_indent=indent + "  ",
                                   break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def cmd_policies(args) -> int:
    rows = _registry_rows()
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(policies_table(rows))
    print("(names, aliases and display names are accepted by --policy; options: --option "
          "KEY=VALUE, or [policy.options] in a run file)")
    return 0


def cmd_presets(args) -> int:
    from g10fast.hardware import list_presets, load_preset
    from g10fast.workload.costmodel import estimate_basis, gpu_from_preset
    rows = []
    for name in list_presets():
        p = load_preset(name)
        rows.append({"name": name, "description": p.get("description", ""),
                     "gpu": p["gpu"], "host": p["host"], "ssd": p["ssd"], "uvm": p["uvm"],
                     "kernel_times": estimate_basis(gpu_from_preset(p))})
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    # memories in GiB (the engines take memory_gb as 2^30 bytes), bandwidths in GB/s (1e9)
    print(f"{'preset':<16} {'GPU GiB':>7} {'host GiB':>8} {'host GB/s':>10} {'SSD GB/s':>9}  "
          "description")
    for r in rows:
        print(f"{r['name']:<16} {r['gpu']['memory_gb']:>7g} {r['host']['memory_gb']:>8g} "
              f"{r['host']['link_gbps']:>10g} {r['ssd']['bandwidth_gbps']:>9g}  "
              f"{r['description']}")
        print(f"{'':<16} estimated kernel times: {r['kernel_times']}")
    print("(a built-in model's kernel times are estimated for the preset's GPU as shown: the "
          "artifact's A100 traces keep their fixed per-kernel costs, so at small batches "
          "g10-artifact's times are far above another A100 preset's; a workload trace keeps "
          "the times of the GPU it was made for, and a run on another GPU warns. "
          "docs/model-format.md)")
    return 0


def cmd_models(args) -> int:
    from g10fast.hardware import load_preset
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec
    from g10fast.workload.builtin import list_models, parameter_count

    gpu_gb = load_preset(args.system)["gpu"]["memory_gb"]
    rows = []
    for s in list_models():
        b = args.batch if args.batch is not None else s.default_batch
        # the workload a run of this model builds (`g10fast run --model M --batch B
        # --system S`): its footprint includes the cost model's cuDNN workspaces
        w = workload_of(builtin_spec(s, b, args.system, "ideal"))
        fp = w.footprint_bytes
        ws = int(w.size[w.workspace_tensor[w.workspace_tensor >= 0]].sum())
        rows.append((s.key, s.name, s.kind + "/" + s.family, b,
                     parameter_count(w) / 1e6, w.num_kernels,
                     fp / 2**30, fp / (gpu_gb * 2**30), "paper" if s.params.get("paper") else "",
                     ws / 2**30))
    if args.json:
        keys = ("key", "name", "family", "batch", "params_millions", "kernels", "footprint_gib",
                "gpu_multiple", "paper", "workspace_gib")
        json.dump([dict(zip(keys, r)) for r in rows], sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"{'model':<12} {'name':<12} {'family':<16} {'batch':>6} {'params (M)':>10} "
          f"{'kernels':>8} {'footprint (GiB)':>15} {'x GPU':>6}")
    for r in rows:
        print(f"{r[0]:<12} {r[1]:<12} {r[2]:<16} {r[3]:>6} {r[4]:>10.1f} {r[5]:>8} "
              f"{r[6]:>15.1f} {r[7]:>6.2f} {r[8]}")
    print(f"(footprint: every tensor of one iteration and the estimated cuDNN workspaces, the "
          f"footprint_bytes of a run on {args.system}; x GPU: footprint / the {gpu_gb:g} GiB "
          f"GPU of preset {args.system}; params: the network's trainable parameters; batch: "
          f"{'--batch' if args.batch else 'each model default'})")
    return 0



def cmd_trace_inspect(args) -> int:
    from g10fast.trace import PAGELESS_KINDS, open_trace

    if getattr(args, "json", False):
        from g10fast.perfetto import inspect_json
        json.dump(inspect_json(args.file, allow_incomplete=args.allow_incomplete), sys.stdout,
                  indent=1)
        sys.stdout.write("\n")
        return 0
    tr = open_trace(args.file, allow_incomplete=args.allow_incomplete)
    try:
        tr.verify(raise_on_damage=True)
        print(f"{args.file}: schema {tr.schema_version}, {tr.n_events:,} events"
              + ("" if tr.complete else " (incomplete: up to the last complete chunk)"))
        meta = tr.meta or {}
        print(f"model {meta.get('model')} batch {meta.get('batch_size')} "
              f"policy {meta.get('policy')}")
        counts = tr.count_by_kind()
        pages = tr.pages_by_kind()
        for kind, n in counts.items():
            name = getattr(kind, "name", str(kind))
            if kind in PAGELESS_KINDS:       # a transfer's begin/end marks: no pages
                print(f"  {name:10s} {n:>12,} events {'(begin/end marks)':>20}")
            else:
                print(f"  {name:10s} {n:>12,} events {pages.get(kind, 0):>14,} pages")
    finally:
        tr.close()
    return 0


def cmd_trace_verify(args) -> int:
    from g10fast.trace import verify_trace

    rep = verify_trace(args.file)
    if args.json:
        json.dump({k: v for k, v in rep.items() if k != "lines"}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_BAD_INPUT if rep["damaged"] else 0
    for line in rep["lines"]:
        print(line)
    if rep["damaged"]:
        print(f"{args.file}: {len(rep['damaged'])} damaged chunk(s) or attribute(s)")
        return EXIT_BAD_INPUT
    print(f"{args.file}: ok, {rep['chunks']} chunks checked"
          f"{'' if rep['checksums'] else ' (a trace without checksums: chunks decoded)'}"
          f"{'' if rep['complete'] else ' (incomplete: the writer did not finish)'}")
    return 0


def cmd_store_verify(args) -> int:
    from g10fast.sweep.store import ResultStore

    s = ResultStore(args.store, create=False)
    rep = s.verify()
    s.close()
    n_bad = len(rep["damaged"]) + (1 if rep.get("structure") else 0)
    if args.json:
        json.dump({"store": args.store, "version": s.version, **rep,
                   "damaged": [{"hash": h, "label": lb, "why": w} for h, lb, w in rep["damaged"]]},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_BAD_INPUT if n_bad else 0
    for line in rep.get("structure") or []:
        print(f"{args.store}: SQLite structure: {line}")
    for h, label, why in rep["damaged"]:
        print(f"{args.store}: damaged point {h}{f' ({label})' if label else ''}: {why}")
    how = "checksums" if rep["checksums"] else "read back (a version-1 store has no checksums)"
    print(f"{args.store}: {rep['points']} points ok ({how}), {len(rep['damaged'])} damaged")
    if n_bad:
        print("a sweep of the same matrix runs the damaged points again, and puts back a "
              "point stored under a changed key and a damaged workload analysis")
        return EXIT_BAD_INPUT
    return 0


def cmd_store_convert(args) -> int:
    from g10fast.sweep.store import convert_store

    n, bad = convert_store(args.old, args.new)
    print(f"{n} points copied from {args.old} into {args.new}"
          + (f"; {bad} damaged points left out (a sweep runs them again)" if bad else ""))
    return 0


def cmd_results_export(args) -> int:
    from g10fast.sweep.export import export_points

    rep = export_points(args.store, args.out)
    print(f"{rep['rows']} points written to {rep['path']}"
          + (f" ({rep['damaged']} damaged points left out: g10fast store verify "
             f"{args.store})" if rep["damaged"] else ""))
    return 0


def cmd_trace_export(args) -> int:
    from g10fast.perfetto import export_trace, serve_once

    out = args.perfetto or args.out
    if out is None:
        raise InputError("give the output file: --perfetto OUT.pftrace (or --out OUT.json "
                         "with --format json)", param="--perfetto")
    fmt = args.format or ("json" if str(out).endswith(".json") else "perfetto")
    if args.samples is not None and args.samples < 1:
        raise InputError(f"must be at least 1 counter sample, got {args.samples}",
                         param="--samples")
    if not 1 <= args.port <= 65535:
        raise InputError(f"must be a TCP port, 1 to 65535, got {args.port}", param="--port")
    progress = _run_progress(args, "exporting")
    progress.unit = "event"      # events read from the trace
    try:
        rep = export_trace(args.file, out, fmt=fmt, pages=args.pages, kernels=args.kernels,
                           samples=args.samples, flows=args.flows, progress=progress)
    except OSError as e:          # a full disk: the message names the file being written
        if e.filename is None:
            e.filename = str(out)
        raise
    progress.close()
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        a, b = rep["kernel_range"]
        unit = "packets" if fmt == "perfetto" else "events"
        print(f"{out}: {rep['bytes']:,} bytes, {rep['packets']:,} {unit} "
              f"({rep['kernel_slices']:,} kernel slices {a}..{b - 1}, "
              f"{sum(rep['link_slices']):,} transfer slices, {rep['fault_slices']:,} fault slices, "
              f"{rep['hint_instants']:,} hint instants; counters every "
              f"{rep['counter_interval_cycles']:,} cycles)")
    if args.open:
        if fmt != "perfetto":
            raise InputError("--open serves a Perfetto file: drop --format json", param="--open")
        serve_once(out, port=args.port,
                   on_ready=lambda url: print(f"open {url}\n(serving {out} once on "
                                              f"127.0.0.1:{args.port}; Ctrl-C stops)",
                                              flush=True))
    return 0


def cmd_trace_diff(args) -> int:
    from g10fast.perfetto import diff_traces

    if args.top < 0:
        raise InputError(f"must be 0 or more kernels, got {args.top}", param="--top")
    rep = diff_traces(args.a, args.b, top=args.top)
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    f = rep["f_hz"]
    print(f"A {rep['a']}: {rep['executions_a']:,} kernel executions, ends at "
          f"{_fmt_cycles(rep['end_a_cycles'], f)}")
    print(f"B {rep['b']}: {rep['executions_b']:,} kernel executions, ends at "
          f"{_fmt_cycles(rep['end_b_cycles'], f)}")
    d = rep["first_start_difference"]
    if d is None:
        print("every matched kernel starts at the same cycle")
    else:
        print(f"first kernel whose start differs: execution {d['execution']} (iteration "
              f"{d['iteration']}, kernel {d['kernel']} {d['name']}): A {d['start_a_cycles']:,}, "
              f"B {d['start_b_cycles']:,} ({d['difference_cycles']:+,} cycles)")
    print(f"{rep['executions_with_different_stall']:,} executions with a different stall, "
          f"in all {rep['total_stall_difference_cycles']:+,} cycles (B - A)")
    if rep["top"]:
        print(f"{'exec':>6} {'iter':>4} {'kernel':>6} {'stall B - A (cycles)':>22}  name")
        for r in rep["top"]:
            print(f"{r['execution']:>6} {r['iteration']:>4} {r['kernel']:>6} "
                  f"{r['stall_difference_cycles']:>+22,}  {r['name']}")
    return 0


def cmd_trace_plot(args) -> int:
    from g10fast.figures import check_image_path
    from g10fast.perfetto import plot_trace

    check_image_path(args.out, "--out")      # before the pass over the trace
    rep = plot_trace(args.file, args.out, kernels=args.kernels)
    a, b = rep["kernel_range"]
    print(f"figure written to {args.out} (kernels {a}..{b - 1})")
    return 0


def _trace_timeline_parsers(tsub) -> None:
    """`trace export`, `trace diff`, `trace plot` (docs/perfetto.md)."""
    te = tsub.add_parser("export", help="timeline for ui.perfetto.dev (protobuf) or "
                                        "chrome://tracing (JSON)")
    te.add_argument("file")
    te.add_argument("--perfetto", metavar="OUT.pftrace", help="output file")
    te.add_argument("--out", help="output file (same as --perfetto)")
    te.add_argument("--format", choices=["perfetto", "json"],
                    help="perfetto (default) or json (Chrome trace events; small runs)")
    te.add_argument("--pages", action="store_true",
                    help="page-level detail: every move, fault and hint (use with --kernels)")
    te.add_argument("--kernels", metavar="A:B",
                    help="only kernel executions A..B-1 (time order, all iterations counted)")
    te.add_argument("--samples", type=int, help="counter samples per counter "
                    "(default 100,000; 200,000 with --pages)")
    te.add_argument("--flows", action="store_true", help="a flow arrow from the last page "
                    "arrival each faulting kernel waited for to the kernel")
    te.add_argument("--open", action="store_true", help="serve the file once on 127.0.0.1 "
                    "and print the ui.perfetto.dev URL that loads it")
    te.add_argument("--port", type=int, default=9001, help="port for --open (default 9001, "
                    "the one the UI allows)")
    te.add_argument("--json", action="store_true", help="print the export's report as JSON")
    te.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)
    te.add_argument("--no-progress", action="store_true", help="no progress lines")
    te.set_defaults(func=cmd_trace_export)
    td = tsub.add_parser("diff", help="where two runs of the same workload diverge")
    td.add_argument("a")
    td.add_argument("b")
    td.add_argument("--top", type=int, default=10, help="kernels listed (default 10)")
    td.add_argument("--json", action="store_true", help="print the report as JSON")
    td.set_defaults(func=cmd_trace_diff)
    tp = tsub.add_parser("plot", help="residency per tier and link throughput over time")
    tp.add_argument("file")
    tp.add_argument("--out", required=True, help="figure file (.png, .pdf, .svg)")
    tp.add_argument("--kernels", metavar="A:B", help="only kernel executions A..B-1")
    tp.set_defaults(func=cmd_trace_plot)


def _store_parsers(sub) -> None:
    """The `store` and `results` commands, and `trace verify` (added to `trace`)."""
    st = sub.add_parser("store", help="check or convert a results store")
    ssub = st.add_subparsers(dest="store_command", required=True)
    sv = ssub.add_parser("verify", help="check every stored point against its checksum; "
                                        "exit 2 naming each damaged point")
    sv.add_argument("store")
    sv.add_argument("--json", action="store_true", help="print the report as JSON")
    sv.set_defaults(func=cmd_store_verify)
    sc = ssub.add_parser("convert", help="copy a version-1 (HDF5) store, or what still reads "
                                         "of a damaged store, into a version-2 store")
    sc.add_argument("old")
    sc.add_argument("new")
    sc.set_defaults(func=cmd_store_convert)
    rs = sub.add_parser("results", help="export a results store")
    rsub = rs.add_subparsers(dest="results_command", required=True)
    re_ = rsub.add_parser("export", help="one row per point: parameters, status, times, traffic")
    re_.add_argument("store")
    re_.add_argument("--out", required=True, help="points.csv or points.parquet (pyarrow)")
    re_.set_defaults(func=cmd_results_export)


def _alloc_source(args):
    from g10fast.memory_source import load_source
    return load_source(args.source, batch=args.batch, system=args.system,
                       iterations=args.iterations, device=args.device)


def cmd_memory(args) -> int:
    """Replay a trace's mallocs and frees through one allocator (or all)."""
    from g10fast.alloc.allocators import ALLOCATORS, run_allocator
    from g10fast.alloc.report import memory_figure, memory_text

    names = list(ALLOCATORS) if args.allocator == "all" else [args.allocator]
    opts = _options(args.option)
    if args.allocator == "all" and opts:
        raise InputError("options need one allocator, not all", param="--option")
    for opt in ("figure", "memory_snapshot"):
        target = getattr(args, opt)
        if target is not None and not Path(target).resolve().parent.is_dir():
            raise InputError("folder does not exist", path=str(Path(target).resolve().parent),
                             param="--" + opt.replace("_", "-"))
    cap = None
    if args.capacity_mib is not None:
        if args.capacity_mib < 0:
            raise InputError(f"must be >= 0, got {args.capacity_mib}", param="--capacity-mib")
        cap = int(args.capacity_mib * 2**20)
    tr = _alloc_source(args)
    snap = tr.meta.get("snapshot")
    results = []
    for n in names:
        o, c = opts, cap
        if snap is not None and n == "pytorch":     # set as the recorded allocator was
            from g10fast.alloc.snapshot import pytorch_capacity, pytorch_options
            o = opts or pytorch_options(tr)
            c = cap if cap is not None else pytorch_capacity(tr)
        results.append(run_allocator(tr, n, capacity=c, **o))
    per = None
    if args.period:
        from g10fast.alloc.period import detect_period
        per = detect_period(tr, args.period).to_dict()
    if args.json:
        out = [dict(r.summary(), source=args.source, trace=tr.name) for r in results]
        if snap is not None:
            from g10fast.alloc.snapshot import snapshot_comparison
            for o in out:
                o["snapshot"] = snapshot_comparison(tr, results)
        if per is not None:
            for o in out:
                o["period"] = per
        json.dump(out[0] if len(out) == 1 else out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(memory_text(tr, results))
        if snap is not None:
            from g10fast.alloc.snapshot import snapshot_text
            print(snapshot_text(tr, results))
        if per is not None:
            print(f"iteration ({per['method']}): " + (
                f"{per['length']:,} malloc/free ops from op {per['start']:,} "
                f"(score {per['score']:.3f})" if per["found"] else "none found"))
    if args.figure:
        memory_figure(tr, results, args.figure)
        (sys.stderr if args.json else sys.stdout).write(f"figure written to {args.figure}\n")
    if args.memory_snapshot:
        from g10fast.alloc.snapshot import write_run_snapshots
        for p in write_run_snapshots(tr, results, args.memory_snapshot):
            (sys.stderr if args.json else sys.stdout).write(f"memory snapshot written to {p}\n")
    return 0


def _limits(text: str) -> list[int]:
    """A:B:STEP in MiB -> byte limits A, A+STEP, ..., up to B inclusive."""
    parts = text.split(":")
    try:
        a, b, st = (float(x) for x in parts)
    except ValueError:
        raise InputError(f"expected A:B:STEP in MiB, got {text!r}", param="--sweep-limits") \
            from None
    if st <= 0 or b < a or a < 0:
        raise InputError(f"need 0 <= A <= B and STEP > 0, got {text!r}", param="--sweep-limits")
    n = int((b - a) / st + 1e-9) + 1
    if n > 10000:
        raise InputError(f"{n} limits: at most 10000", param="--sweep-limits")
    return [int((a + i * st) * 2**20) for i in range(n)]


def cmd_swap(args) -> int:
    """Plan swaps (SINGA's planner or AppObMem) on a trace under a memory limit."""
    from g10fast.alloc.swap import LinkCost, check_plan, plan_swaps, replay, sweep_limits

    if (args.limit_mib is None) == (args.sweep_limits is None):
        raise InputError("give --limit-mib N or --sweep-limits A:B:STEP", param="--limit-mib")
    if args.limit_mib is not None and args.limit_mib < 0:
        raise InputError(f"must be >= 0, got {args.limit_mib}", param="--limit-mib")
    if args.figure is not None and not Path(args.figure).resolve().parent.is_dir():
        raise InputError("folder does not exist", path=str(Path(args.figure).resolve().parent),
                         param="--figure")
    iterations = args.iterations if args.iterations != 1 else 3
    from g10fast.memory_source import load_source
    tr = load_source(args.source, batch=args.batch, system=args.system, iterations=iterations,
                     device=args.device)
    if (tr.meta.get("snapshot") or {}).get("times") == "absent":
        raise InputError("the memory snapshot records no times (no time_us: older torch "
                         "versions and torch.profiler snapshots record none): a swap plan needs "
                         "the time between allocations", path=args.source)
    if args.link == "singa":
        link = LinkCost.singa_measured()
    else:
        from g10fast.hardware import load_preset
        pr = load_preset(args.system)
        link = LinkCost.from_gbps(float(pr["host"]["link_gbps"]),
                                  float(pr["host"].get("link_latency_us", 5.0)))
    if args.iteration_ms is not None and not args.iteration_ms > 0:
        raise InputError(f"must be > 0, got {args.iteration_ms}", param="--iteration-ms")
    kw = dict(link=link, mode=args.mode, faithful_quirks=args.faithful_quirks,
              period_method=args.period, accesses=args.accesses,
              iteration_ns=None if args.iteration_ms is None else args.iteration_ms * 1e6)
    if args.offline_analysis:
        kw["offline_analysis"] = True
    if args.base_mib is not None:
        if not args.base_mib >= 0:
            raise InputError(f"must be >= 0, got {args.base_mib}", param="--base-mib")
        kw["base_bytes"] = int(args.base_mib * 2**20)
    if args.sweep_limits is not None:
        limits = _limits(args.sweep_limits)
        from g10fast.alloc.swap import SCORES
        scores = [args.score] if args.score else [
            sc for sc in SCORES if not (args.offline_analysis and sc == "vote")]
        rows = sweep_limits(tr, limits, args.policy, scores, **kw)
        best = {}
        for r in rows:
            if r["status"] == "ok" and r["overhead_per_iteration_s"] == 0.0:
                red = 1 - r["peak_bytes"] / r["peak_before_bytes"]
                if red > best.get(r["score"], (-1, 0))[0]:
                    best[r["score"]] = (red, r["peak_bytes"])
        if args.json:
            json.dump({"source": args.source, "policy": args.policy, "rows": rows,
                       "zero_overhead_reduction": {k: v[0] for k, v in best.items()}},
                      sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            print(f"{tr.name}: {args.policy}, overhead per iteration against the limit")
            print(f"{'score':<6} {'limit (MiB)':>12} {'peak (MiB)':>11} {'swaps':>6} "
                  f"{'overhead (ms)':>14} {'iteration (ms)':>15}  status")
            for r in rows:
                print(f"{r['score']:<6} {r['limit_bytes'] / 2**20:>12,.1f} "
                      f"{r['peak_bytes'] / 2**20:>11,.1f} {r['swaps']:>6} "
                      f"{1e3 * r['overhead_per_iteration_s']:>14.3f} "
                      f"{1e3 * r['iteration_s']:>15.1f}  {r['status']}")
            for k, (red, pk) in best.items():
                print(f"largest reduction at zero overhead ({k}): {100 * red:.1f}% "
                      f"(peak {pk / 2**20:,.1f} MiB)")
        if args.figure:
            from g10fast.alloc.report import swap_figure
            swap_figure(rows, args.figure, f"{tr.name}: {args.policy}",
                        percent=args.iteration_ms is not None)
            (sys.stderr if args.json else sys.stdout).write(f"figure written to {args.figure}\n")
        return 0
    p = plan_swaps(tr, int(args.limit_mib * 2**20), args.policy, args.score, **kw)
    if args.accesses == "alloc_free_access" and not args.offline_analysis:
        check_plan(tr, p)       # alloc_free_only: its blind spots are counted (absent_accesses)
    rep = replay(tr, p, link)
    alloc = None
    if args.allocator:
        from g10fast.alloc.allocators import run_allocator
        from g10fast.policies.trace_swap import swapped_iteration
        alloc = run_allocator(swapped_iteration(tr, p), args.allocator)
    if args.json:
        out = dict(p.summary(), source=args.source, replay=rep)
        if alloc is not None:
            out["gpu_memory_needed_bytes"] = alloc.peak_reserved
            out["allocator"] = alloc.summary()
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    s = p.summary()
    print(f"{tr.name}: {args.policy} (score {p.score}), limit {args.limit_mib:,.1f} MiB")
    print(f"iteration: trace ops {p.start}..{p.start + p.length - 1}, "
          f"{1e3 * s['iteration_s']:.3f} ms; peak {p.peak_before / 2**20:,.1f} MiB without "
          f"swaps, {p.peak_after / 2**20:,.1f} MiB with {p.num_swaps} swaps "
          f"({s['candidates']} candidates)  {s['status']}")
    print(f"{'block':>7} {'MiB':>8} {'last use':>9} {'out done':>9} {'in from':>8} "
          f"{'next use':>9}")
    for q in range(p.num_swaps):
        print(f"{p.block[q]:>7} {p.size[q] / 2**20:>8.2f} {p.r_idx[q]:>9} {p.out_end_idx[q]:>9} "
              f"{p.in_start_idx[q]:>8} {p.d_idx[q]:>9}")
    print(f"overhead per iteration {1e3 * s['overhead_per_iteration_s']:.3f} ms")
    if alloc is not None:
        print(f"GPU memory needed: {alloc.peak_reserved / 2**20:,.1f} MiB ({args.allocator} on "
              f"the iteration with the swaps' frees and mallocs; live peak "
              f"{alloc.peak_live / 2**20:,.1f} MiB)")
    if rep["iterations"]:
        mm = sum(r["mismatches"] for r in rep["iterations"])
        print(f"replayed on {len(rep['iterations'])} later iterations: {mm} mispredicted swaps")
    return 0


def _artifact_arg(g10) -> Path:
    artifact = g10 if g10 is not None else _find_artifact()
    if artifact is None:
        raise InputError("no G10 artifact found (looked for ../shared/g10-artifact and "
                         "$G10_ARTIFACT); pass --g10 ARTIFACT_DIR", param="--g10")
    if not (Path(artifact) / "frontend" / "Nets").is_dir():
        raise InputError("not the G10 artifact root (no frontend/Nets)", path=str(artifact))
    return Path(artifact)


def _sweep_progress(args):
    """The sweep's reporter factory (total points -> reporter): one tqdm bar on a terminal (or
    with --progress), plain lines every few seconds otherwise, none with --no-progress."""
    from g10fast.progress import SweepProgress

    return lambda total: SweepProgress(total, enabled=not args.no_progress,
                                       tty=True if args.progress else None)


def _sweep(matrix, store, artifact, workers, dask, prog, retry_errors=True, max_points=None,
           reuse=True):
    from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points
    from g10fast.sweep.runner import run_sweep

    path = named_matrix(matrix)
    resolved = resolve_points(expand_matrix(path), artifact)
    summary = run_sweep(resolved, store, workers=workers, dask=dask, progress=prog,
                        retry_errors=retry_errors, max_points=max_points, reuse=reuse)
    return summary


def _workers(text) -> int | None:
    """--workers: None (default: CPU count), 0 (in this process) or a positive integer."""
    if text is None:
        return None
    try:
        n = int(str(text).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise InputError(f"must be a positive number of worker processes, or 0 to run in this "
                         f"process; got {text!r}", param="--workers")
    return n


def cmd_sweep(args) -> int:
    workers = _workers(args.workers)
    if args.max_points is not None and args.max_points < 1:
        raise InputError(f"must be at least 1 point, got {args.max_points} (leave it out to "
                         f"run every point)", param="--max-points")
    artifact = _artifact_arg(args.g10)
    summary = _sweep(args.matrix, args.store, artifact, workers, args.dask,
                     _sweep_progress(args),
                     retry_errors=not args.no_retry_errors, max_points=args.max_points,
                     reuse=not args.no_reuse)
    print(summary.text())
    if summary.error_labels:
        print("errors: " + ", ".join(summary.error_labels[:20])
              + (" ..." if len(summary.error_labels) > 20 else ""))
    print(f"results in {args.store}")
    return 0


def cmd_figures(args) -> int:
    from g10fast.figures import draw_all

    artifact = args.g10 if args.g10 is not None else _find_artifact()
    report = draw_all(args.store, args.out, artifact_dir=artifact, only=args.only)
    print(report.text())
    return 0


def cmd_reproduce(args) -> int:
    from g10fast.figures import draw_all

    workers = _workers(args.workers)
    artifact = _artifact_arg(args.g10)
    summary = _sweep(args.matrix, args.store, artifact, workers, args.dask,
                     _sweep_progress(args),
                     reuse=not args.no_reuse)
    print(summary.text())
    report = draw_all(args.store, args.out, artifact_dir=artifact)
    print(report.text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    from g10fast import __version__

    p = argparse.ArgumentParser(prog="g10fast", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"g10fast {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="simulate one configuration",
                       description="Simulate one G10 configuration: a G10 .config file, or the "
                                   "point genconfigs.py would generate (--g10 ... --model ...).")
    r.add_argument("config", nargs="?", help="a TOML run file (docs/run-format.md) or a G10 "
                                             "config file (key value lines); none: the default "
                                             "comparison of all policies on a built-in model")
    r.add_argument("--g10-root", help="folder that the config's relative paths are relative to "
                                      "(the artifact's src/); default: found from the config")
    r.add_argument("--g10", type=Path, help="the G10 artifact folder, to build a config like "
                                            "genconfigs.py")
    r.add_argument("--model", help="a built-in model (`g10fast models`), or with --g10 one of "
                                   "BERT, VIT, Inceptionv3, ResNet152, SENet154")
    r.add_argument("--batch", type=int, help="batch size")
    r.add_argument("--workload", help="an HDF5 workload trace (`g10fast capture`, `g10fast "
                                      "workload export`; docs/workload-trace-format.md)")
    r.add_argument("--system", help="hardware preset of a built-in model (`g10fast presets`; "
                                    "default g10-artifact)")
    r.add_argument("--policy", help="a policy of `g10fast policies` (name, alias or display "
                                    "name); with a config file it replaces the file's")
    r.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="a policy option (`g10fast policies` lists them); repeatable")
    r.add_argument("--plan", help="write the migration plan (hints) to this CSV file "
                                  "(docs/plan-format.md)")
    r.add_argument("--plan-in", help="run the engine on this plan file instead of planning "
                                     "(e.g. a hand-edited --plan output)")
    r.add_argument("--kernel-order", help="process each kernel's tensors in the order of this "
                   "G10 statistics/kernels.config (the C++'s hash-set order, O-18; page-engine "
                   "policies; docs/tensor-order.md) instead of ascending tensor ids")
    r.add_argument("--figure", help="write a figure to this image file: for one run, estimated "
                                    "vs simulated GPU memory per kernel; for a comparison (the "
                                    "default run, TOML runs), the comparison (default "
                                    "g10fast-comparison.png for the default run, "
                                    "RUNFILE-comparison.png for RUNFILE.toml, in the working "
                                    "folder)")
    r.add_argument("--no-figure", action="store_true", help="write no comparison figure")
    r.add_argument("--host-mem-gb", type=float, help="host memory for swapping, GiB")
    r.add_argument("--allocator", help="an offset-level allocator (cuda_malloc, cnmem, pytorch, "
                   "singa_colour, bump) that places the run's allocations: the result's GPU "
                   "memory needed (tensor-engine and swap policies; docs/allocators.md)")
    r.add_argument("--ssd-gbps", type=float, help="SSD bandwidth, GB/s")
    r.add_argument("--pcie-gbps", type=float, help="PCIe (host and GPU link) bandwidth, GB/s")
    r.add_argument("--gpus", type=int, metavar="N",
                   help="data-parallel GPUs of the preset's node (the ranks engine's ZeRO "
                        "policies; docs/zero.md)")
    r.add_argument("--recompute", choices=["none", "full", "selective"],
                   help="activation checkpointing, a workload pass any policy takes: every "
                        "layer (full) or the attention core (selective) recomputed in the "
                        "backward (docs/zero.md)")
    r.add_argument("--timeline", metavar="OUT.json",
                   help="the ranks engine's step as a Perfetto/Chrome trace: a track for the "
                        "host thread, the CPU's optimizer, the GPU, NVLink, each PCIe "
                        "direction and NVMe")
    r.add_argument("--fuse", choices=["none", "xla", "stitch"], help="fuse memory-intensive "
                   "kernels before planning as XLA or FusionStitching would (docs/fusion.md; "
                   "default none; a run file sets workload.fuse)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--check", action="store_true",
                   help="assert the engine's invariants at every kernel boundary (capacity "
                        "never exceeded, each page in one place, the LRU list whole; "
                        "docs/invariants.md); same result, measured 1.4-1.8x the time of a "
                        "plain run (BERT-128, ResNet152-256)")
    r.add_argument("--check-full", action="store_true",
                   help="--check with the page engine's event stream too (bytes moved = bytes "
                        "arrived) and the page table read at every kernel boundary up to 1 Mi "
                        "pages, every k-th above; same result, measured 27-49x the time of a "
                        "plain run (BERT-128, ResNet152-256)")
    r.add_argument("--bound", choices=("window", "lp"), default="window",
                   help="lp: also the checkpoint LP bound (page and tensor engines; SciPy, "
                        "seconds; shown under the summary or the comparison; docs/bounds.md)")
    r.add_argument("--trace", help="write the engine's events to this HDF5 file")
    r.add_argument("--memory-snapshot", metavar="OUT.pickle",
                   help="write the workload's allocations (its derived allocation trace, one "
                        "iteration) through each allocator (--allocator: that one) as PyTorch "
                        "memory snapshots for pytorch.org/memory_viz (several: "
                        "OUT.<allocator>.pickle; docs/memory-snapshot.md)")
    r.add_argument("--trace-compression", choices=("deflate", "none"), default="deflate",
                   help="the event trace's chunks: deflate (default, shuffle + deflate 1) or "
                        "none (stored unfiltered: ~1.6x faster to write, ~80x larger; "
                        "docs/trace-format.md)")
    r.add_argument("--progress", action="store_true", help="show the progress bar even when "
                   "stderr is not a terminal (default there: a plain line every 5 s, "
                   "$G10FAST_PROGRESS_INTERVAL)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar or lines")
    r.set_defaults(func=_run_and_memory_snapshots)
    po = sub.add_parser("policies", help="list the policies (name, display name, engine, paper, "
                                         "options with defaults)")
    po.add_argument("--json", action="store_true", help="print JSON")
    po.set_defaults(func=cmd_policies)
    pr = sub.add_parser("presets", help="list the hardware presets")
    pr.add_argument("--json", action="store_true", help="print JSON")
    pr.set_defaults(func=cmd_presets)
    m = sub.add_parser("models", help="list the built-in models and their footprint")
    m.add_argument("--batch", type=int, help="batch size (default: each model's default)")
    m.add_argument("--system", default="g10-artifact", help="hardware preset for the 'x GPU' "
                                                            "column (default g10-artifact)")
    m.add_argument("--json", action="store_true", help="print JSON")
    m.set_defaults(func=cmd_models)
    def source_opts(q):
        q.add_argument("source", metavar="SOURCE",
                       help="an allocation trace (HDF5, docs/alloc-trace-format.md, or a SINGA "
                            "text trace), a G10 config file, or a built-in model name")
        q.add_argument("--batch", type=int, help="batch size of a built-in model")
        q.add_argument("--system", default="g10-artifact",
                       help="hardware preset of a built-in model (default g10-artifact)")
        q.add_argument("--iterations", type=int, default=1,
                       help="iterations of a model's derived trace (default 1)")
        q.add_argument("--device", type=int, help="the device of a PyTorch memory snapshot "
                       "(default: its only one; docs/memory-snapshot.md)")
        q.add_argument("--json", action="store_true", help="print JSON")

    me = sub.add_parser("memory", help="peak live, peak reserved and fragmentation of an "
                        "allocator on an allocation trace",
                        description="Replay the mallocs and frees of SOURCE through an "
                                    "offset-level allocator (docs/allocators.md).")
    source_opts(me)
    me.add_argument("--allocator", default="all",
                    help="cuda_malloc, cnmem, pytorch, singa_colour, bump, or all (default)")
    me.add_argument("--option", action="append", metavar="KEY=VALUE",
                    help="an allocator option (docs/allocators.md); repeatable")
    me.add_argument("--capacity-mib", type=float, help="GPU memory in MiB (default unlimited): "
                    "a request that does not fit is an OOM result")
    me.add_argument("--figure", help="write memory over op index (one line per allocator) to "
                                     "this image file")
    me.add_argument("--period", choices=["singa", "match"],
                    help="also detect the iteration (SINGA's repeat test or the robust match)")
    me.add_argument("--memory-snapshot", metavar="OUT.pickle",
                    help="write each allocator's run as a PyTorch memory snapshot for "
                         "pytorch.org/memory_viz (several allocators: OUT.<allocator>.pickle; "
                         "docs/memory-snapshot.md)")
    me.set_defaults(func=cmd_memory)
    sp = sub.add_parser("swap", help="plan swaps on an allocation trace under a memory limit "
                        "(SINGA's planner or AppObMem)",
                        description="Plan swaps of one iteration of SOURCE so that its load "
                                    "stays under the limit, and report the overhead per "
                                    "iteration (docs/allocators.md).")
    source_opts(sp)
    sp.add_argument("--policy", default="singa_swap", choices=["singa_swap", "appobmem"])
    sp.add_argument("--limit-mib", type=float, help="the memory limit, MiB")
    sp.add_argument("--accesses", default="alloc_free_access",
                    choices=["alloc_free_access", "alloc_free_only"],
                    help="what the planner sees: mallocs, frees and accesses, or mallocs and "
                         "frees only (AppObMem's appob.trace; a block is taken as used at its "
                         "malloc and before its free)")
    sp.add_argument("--sweep-limits", metavar="A:B:STEP",
                    help="plan at every limit from A to B MiB (the overhead curve)")
    sp.add_argument("--score", choices=["vote", "doa_origin", "pri", "doa", "aoa", "wdoa",
                                        "subwdoa"],
                    help="candidate order, SINGA's paper and code (docs/allocators.md; "
                         "default: vote for singa_swap, aoa for appobmem; a sweep without it "
                         "draws every one)")
    sp.add_argument("--offline-analysis", action="store_true",
                    help="SINGA's authors' offline analysis that drew the paper's overhead "
                         "figure, its slips included (docs/allocators.md)")
    sp.add_argument("--base-mib", type=float, metavar="MIB",
                    help="memory live throughout that the trace does not show (blocks "
                         "allocated before a recording starts), added to its load")
    sp.add_argument("--iteration-ms", type=float, metavar="MS",
                    help="the clock: the planned iteration lasts MS on the GPU it ran on (the "
                         "trace's timestamps are rescaled; SINGA's VGG: 81.57, the authors' "
                         "measurement); default: the trace's own timestamps")
    sp.add_argument("--mode", default="stick_to_limit", choices=["stick_to_limit",
                                                                 "no_overhead"])
    sp.add_argument("--faithful-quirks", action="store_true",
                    help="SINGA's C++ quirks: WDOA = 0, DOA = gap - 2 T_out")
    sp.add_argument("--period", choices=["singa", "match", "known"],
                    help="iteration detection (default: known for a model, singa for "
                         "singa_swap, match for appobmem)")
    sp.add_argument("--link", default="singa", choices=["singa", "preset"],
                    help="transfer costs: SINGA's measured PCIe fit (default) or the preset's "
                         "host link")
    sp.add_argument("--allocator", help="also place the planned iteration, with the swaps' "
                    "frees and mallocs, with this allocator and report the GPU memory it needs")
    sp.add_argument("--figure", help="with --sweep-limits: draw the curve to this image file")
    sp.set_defaults(func=cmd_swap)
    t = sub.add_parser("trace", help="inspect an event trace")
    tsub = t.add_subparsers(dest="trace_command", required=True)
    ti = tsub.add_parser("inspect", help="summary of an event-trace file")
    ti.add_argument("file")
    ti.add_argument("--allow-incomplete", action="store_true",
                    help="read the trace of a killed run up to its last complete chunk")
    ti.set_defaults(func=cmd_trace_inspect)
    tv = tsub.add_parser("verify", help="check every chunk of an event trace against its "
                                        "checksum; exit 2 naming each damaged chunk")
    tv.add_argument("file")
    tv.add_argument("--json", action="store_true", help="print the report as JSON")
    tv.set_defaults(func=cmd_trace_verify)
    ti.add_argument("--json", action="store_true", help="event counts per kind and in all "
                    "(events), time span, the run's configuration, as JSON")
    _trace_timeline_parsers(tsub)
    _store_parsers(sub)
    _workload_parsers(sub)

    def sweep_opts(q):
        q.add_argument("--workers", default=None, metavar="N",
                       help="worker processes (default: CPU count; 0 = in this process)")
        q.add_argument("--dask", metavar="ADDRESS",
                       help="run on a Dask distributed scheduler (pip install 'g10fast[dask]')")
        q.add_argument("--progress", action="store_true", help="show the progress bar even "
                       "when stderr is not a terminal (default there: a plain line every 5 s, "
                       "$G10FAST_PROGRESS_INTERVAL)")
        q.add_argument("--no-progress", action="store_true", help="no progress bar or lines")
        q.add_argument("--no-reuse", action="store_true",
                       help="simulate every point; by default a page-engine point whose host "
                            "memory line is above the peak host use of a run of the same "
                            "configuration at another host size is derived from that run "
                            "(the same simulation; docs/sweep-performance.md)")

    sw = sub.add_parser("sweep", help="run an experiment matrix into a results store",
                        description="Run every point of a TOML experiment matrix "
                                    "(docs/matrix-format.md) into a results store "
                                    "(docs/store-format.md); points already stored are skipped.")
    sw.add_argument("matrix", help="a matrix file, or the name of a bundled one in data/matrices "
                                   "(artifact, fig11, ..., smoke)")
    sw.add_argument("--store", required=True, help="results store (SQLite, created if missing; "
                                                   "docs/store-format.md)")
    sw.add_argument("--g10", type=Path, help="the G10 artifact folder (default: found)")
    sw.add_argument("--max-points", type=int, help="run at most this many points now")
    sw.add_argument("--no-retry-errors", action="store_true",
                    help="skip points stored with status error instead of running them again")
    sweep_opts(sw)
    sw.set_defaults(func=cmd_sweep)

    fg = sub.add_parser("figures", help="draw the paper's figures from a results store",
                        description="Draw Figures 2, 3, 4 and 11-19 (PNG and PDF) from a results "
                                    "store, beside the artifact's example results, and write "
                                    "agreement.csv.")
    fg.add_argument("store", help="HDF5 results store")
    fg.add_argument("--out", required=True, type=Path, help="output folder")
    fg.add_argument("--g10", type=Path, help="the G10 artifact folder, for its example_results")
    fg.add_argument("--only", nargs="+", type=int, help="only these figure numbers")
    fg.set_defaults(func=cmd_figures)

    rp = sub.add_parser("reproduce", help="the whole evaluation: sweep + figures + agreement",
                        description="Run the artifact's matrix (or --matrix) into the store, "
                                    "then draw every figure and summarise the agreement.")
    rp.add_argument("--g10", type=Path, help="the G10 artifact folder (default: found)")
    rp.add_argument("--store", default="g10fast-results.g10db",
                    help="results store (default g10fast-results.g10db)")
    rp.add_argument("--out", type=Path, default=Path("figures"), help="figure folder "
                                                                      "(default figures/)")
    rp.add_argument("--matrix", default="artifact", help="matrix (default: artifact, 1,410 points)")
    sweep_opts(rp)
    rp.set_defaults(func=cmd_reproduce)
    from g10fast.validate.cli import add_parser as _validate_parser
    _validate_parser(sub)
    return p


def _workload_parsers(sub) -> None:
    wk = sub.add_parser("workload", help="export or inspect an HDF5 workload trace")
    wsub = wk.add_subparsers(dest="workload_command", required=True)
    we = wsub.add_parser("export", help="write a built-in or artifact workload as an HDF5 "
                         "workload trace (docs/workload-trace-format.md)")
    we.add_argument("source", help="a built-in model (`g10fast models`), a G10 config file, "
                                   "or with --g10 an artifact model (BERT, VIT, ResNet152, ...)")
    we.add_argument("--out", required=True, help="the HDF5 file to write")
    we.add_argument("--batch", type=int, help="batch size")
    we.add_argument("--system", help="hardware preset of a built-in model (default g10-artifact)")
    we.add_argument("--g10", type=Path, help="the G10 artifact folder")
    we.set_defaults(func=cmd_workload_export)
    wi = wsub.add_parser("inspect", help="summary and provenance of a workload trace")
    wi.add_argument("file")
    wi.set_defaults(func=cmd_workload_inspect)
    ca = sub.add_parser("capture", help="record one training iteration of a PyTorch model on "
                        "fake CPU tensors into an HDF5 workload trace (needs torch; "
                        "docs/capture.md)")
    ca.add_argument("model", help="a bundled example (gpt2-small, gpt2-xl, llama-7b, "
                                  "qwen2.5-1.5b, qwen2.5-3b, resnet50, mlp, tiny-transformer) "
                                  "or module:function returning a g10fast.capture.Model")
    ca.add_argument("--out", required=True, help="the HDF5 workload trace to write")
    ca.add_argument("--batch", type=int, help="batch size")
    ca.add_argument("--seq-len", type=int, help="sequence length (language models)")
    ca.add_argument("--dtype", help="float32, bfloat16 or float16 (default: the example's)")
    ca.add_argument("--system", default="g10-artifact",
                    help="hardware preset whose GPU the kernel times are estimated for")
    ca.add_argument("--optimizer", help="adamw (default), adamw-foreach, adamw-fused or sgd")
    ca.add_argument("--memory-snapshot", metavar="OUT.pickle",
                    help="also write the captured step's allocations through each allocator "
                         "as PyTorch memory snapshots (OUT.<allocator>.pickle; "
                         "docs/memory-snapshot.md)")
    ca.set_defaults(func=cmd_capture)


def cmd_capture(args) -> int:
    try:
        from g10fast.capture import capture_cli
    except ImportError as e:  # pragma: no cover - torch missing
        raise InputError(f"capture needs torch ({e}); pip install 'g10fast[torch]'",
                         param="capture") from None
    return capture_cli(args)


def one_line(text: str) -> str:
    """`text` on one line: HDF5's messages carry a newline (the C library's ctime() inside
    "file write failed: time = ..."); every line break and the spaces around it become one
    space."""
    import re
    return re.sub(r"\s*[\r\n]+\s*", " ", text).strip()


#: errors of the machine, not of the program: a full disk, a quota, a file too large for the
#: file system or the process's limit, a read-only file system, no permission, an I/O error
_ENVIRONMENT_ERRNOS = frozenset(getattr(errno, n) for n in (
    "ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EACCES", "EPERM", "EIO") if hasattr(errno, n))


def _os_error_text(e: OSError) -> str:
    """One line for an OSError of `_ENVIRONMENT_ERRNOS`, naming the file when known."""
    what = e.strerror or errno.errorcode.get(e.errno, "") or str(e)
    where = f"{e.filename}: " if e.filename else ""
    hint = {errno.ENOSPC: "the disk is full: free some space and run the command again",
            errno.EFBIG: "the file is larger than the file system or this process may write"}
    return one_line(f"{where}cannot write: {what}"
                    + (f" ({hint[e.errno]})" if e.errno in hint else ""))


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from g10fast.progress import close_all

    try:
        return args.func(args)
    except InputError as e:
        close_all()
        sys.stderr.write(f"g10fast: error: {one_line(str(e))}\n")
        return EXIT_BAD_INPUT
    except InvariantError as e:             # --check: a bug in g10fast (docs/invariants.md)
        close_all()
        sys.stderr.write(f"g10fast: {one_line(str(e))} (a bug in g10fast: please report it "
                         "with the command)\n")
        return EXIT_INVARIANT
    except OSError as e:
        if e.errno not in _ENVIRONMENT_ERRNOS:
            raise
        close_all()
        sys.stderr.write(f"g10fast: error: {_os_error_text(e)}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        close_all()
        sys.stderr.write("g10fast: interrupted\n")
        return 130


def console_main() -> None:
    """The `g10fast` console script: main(), then exit without the interpreter's teardown.

    Every output has been written, closed and renamed by then; what the teardown would do is
    free Numba's compiled code, LLVM and the engine's arrays one object at a time, which
    takes a noticeable share of a short run."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        code = _stdout_closed()
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


EXIT_BROKEN_PIPE = 141   # 128 + SIGPIPE, what a shell reports for a C program in `... | head`


def _stdout_closed() -> int:
    """The reader of stdout went away (`g10fast ... | head -1`): end quietly. What is left in
    stdout's buffer goes to /dev/null instead (the Python documentation's recipe, "Note on
    SIGPIPE"), so that no later flush raises again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    console_main()
