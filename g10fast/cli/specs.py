"""The flags of `run` as RunSpecs: a G10 config file, --g10 --model, a built-in model,
an HDF5 workload trace; the flags that change a spec (system, --option, --allocator); a run
file's errors placed on its lines."""

from __future__ import annotations

from g10fast.cli.common import engines_with, parse_options
from g10fast.errors import InputError


def spec_from_args(args):
    """-> (RunSpec, note) from a G10 config file, from --g10 flags, or a built-in model."""
    from g10fast import policies
    from g10fast.config import genconfig, read_g10_config
    from g10fast.spec import builtin_spec, from_g10_config

    over = {"host_mem_gb": args.host_mem_gb, "ssd_gbps": args.ssd_gbps, "pcie_gbps": args.pcie_gbps}
    if getattr(args, "workload", None) is not None:
        return _trace_spec_from_args(args)
    if args.config is not None:
        if args.g10 is not None:
            raise InputError(
                "give either a config file or --g10 with --model/--batch/--policy", param="--g10"
            )
        for flag in ("model", "batch", "system"):
            if getattr(args, flag) is not None:
                raise InputError(
                    f"--{flag} cannot change a G10 config file (it fixes the model, "
                    "batch and system); use --g10 DIR --model M --batch B, or edit "
                    "the file",
                    param=f"--{flag}",
                )
        cfg = read_g10_config(args.config, g10_root=args.g10_root)
        keys = {
            "host_mem_gb": ("CPU_memory_line_GB",),
            "ssd_gbps": ("SSD_PCIe_bandwidth_GBps",),
            "pcie_gbps": ("CPU_PCIe_bandwidth_GBps", "GPU_PCIe_bandwidth_GBps"),
        }
        changed = {k2: v for k, v in over.items() if v is not None for k2 in keys[k]}
        if changed:
            cfg = cfg.replace(**changed)
        note = None
        if args.policy is not None:
            note = (
                f"policy {policies.get(args.policy).name} (--policy) instead of the config "
                f"file's {policies.get(_file_policy(cfg)).name}"
            )
        spec = from_g10_config(cfg, policy=args.policy, source=str(args.config))
        if args.option:
            from g10fast.spec import make_spec

            opts = dict(spec.to_dict()["policy"]["options"], **parse_options(args.option))
            spec = make_spec(spec.workload, spec.system, spec.policy.name, opts, spec.engine, spec.source)
        return spec, note
    policy = args.policy or "lru"
    rec = policies.get(policy, param="--policy")
    if args.g10 is None:
        if args.model is None:
            raise InputError(
                "--batch/--policy need a model: --model NAME (a built-in model, see "
                "`g10fast models`) or --g10 ARTIFACT_DIR --model M",
                param="--model",
            )
        system = args.system or "g10-artifact"
        spec = builtin_spec(
            args.model,
            args.batch,
            system,
            rec.name,
            overrides=_preset_overrides(args),
            options=parse_options(args.option),
        )
        return spec, f"built-in {spec.workload.model} at batch {spec.workload.batch} on {system}"
    if args.system is not None:
        raise InputError(
            "--system is for built-in models; the artifact's points use its own "
            "system (change it with --host-mem-gb, --ssd-gbps, --pcie-gbps)",
            param="--system",
        )
    model = args.model or "BERT"
    batch = args.batch if args.batch is not None else 128
    artifact = rec.artifact or "lru"
    cfg = genconfig(
        args.g10,
        model,
        batch,
        artifact,
        host_mem_gb=args.host_mem_gb,
        ssd_gbps=args.ssd_gbps,
        pcie_gbps=args.pcie_gbps,
    )
    spec = from_g10_config(cfg, policy=rec.name)
    if args.option:
        from g10fast.spec import make_spec

        opts = dict(spec.to_dict()["policy"]["options"], **parse_options(args.option))
        spec = make_spec(spec.workload, spec.system, rec.name, opts, spec.engine)
    return spec, None


def _preset_overrides(args) -> dict:
    """The preset overrides that --host-mem-gb, --ssd-gbps and --pcie-gbps ask for."""
    flags = (
        ("host_mem_gb", "host.memory_gb"),
        ("ssd_gbps", "ssd.bandwidth_gbps"),
        ("pcie_gbps", "host.link_gbps"),
    )
    return {key: getattr(args, a) for a, key in flags if getattr(args, a) is not None}


def _trace_spec_from_args(args):
    """-> (RunSpec, note) of `run --workload FILE.h5` (an HDF5 workload trace)."""
    from g10fast import policies
    from g10fast.spec import trace_spec

    for flag in ("config", "g10", "model", "batch"):
        if getattr(args, flag) is not None:
            raise InputError(f"--workload fixes the model and batch; drop --{flag}", param=f"--{flag}")
    rec = policies.get(args.policy or "lru", param="--policy")
    system = args.system or "g10-artifact"
    spec = trace_spec(
        args.workload, system, rec.name, overrides=_preset_overrides(args), options=parse_options(args.option)
    )
    return (
        spec,
        f"workload trace {args.workload} ({spec.workload.model}, batch {spec.workload.batch}) on {system}",
    )


def _file_policy(cfg) -> str:
    from g10fast.spec import g10_policy

    return g10_policy(cfg)


def system_flags(args) -> dict:
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


SYSTEM_FLAG = {
    "host_memory_gb": "--host-mem-gb",
    "ssd_bandwidth_gbps": "--ssd-gbps",
    "host_link_gbps": "--pcie-gbps",
    "gpu_link_gbps": "--pcie-gbps",
    "gpus": "--gpus",
}


def with_run_flags(args, specs: list) -> list:
    """The specs of a run file (or the default run) with the flags that change a spec applied:
    the system flags to every spec; --option KEY=VALUE to every policy that has KEY (refused
    when none has it); --allocator to every policy whose engine places blocks (refused when none
    is one). The policy's own system overrides (G10-GDS: no host memory) stay on top."""
    import dataclasses

    from g10fast.spec import make_spec

    sysf = system_flags(args)
    opts = parse_options(args.option)
    alloc = getattr(args, "allocator", None)
    for k in opts:
        if not any(k in option_names(s) for s in specs):
            known = sorted(set().union(*(option_names(s) for s in specs)))
            raise InputError(
                f"no policy of this run has an option {k!r} (theirs: {', '.join(known) or 'none'})",
                param="--option",
            )
    if alloc and len(specs) > 1 and not any(_places_blocks(s) for s in specs):
        raise InputError(
            f"no policy of this comparison places blocks (the policies of {engines_with('allocator')} do)",
            param="--allocator",
        )
    out = []
    for s in specs:
        mine = {k: v for k, v in opts.items() if k in option_names(s) or len(specs) == 1}
        engine = s.engine
        if alloc and (len(specs) == 1 or _places_blocks(s)):
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

            flag = next((f for k, f in SYSTEM_FLAG.items() if k in sysf and e.param == PARAM.get(k)), None)
            raise InputError(e.message, param=flag or e.param) from None
    return out


def _places_blocks(spec) -> bool:
    """Whether an offset-level allocator applies to the spec's engine (its record says)."""
    from g10fast import policies

    return policies.engine(spec.record.engine).allocator


def option_names(spec) -> set:
    import dataclasses

    return {f.name for f in dataclasses.fields(spec.policy.options)}


def in_run_file(err: InputError, spec: dict) -> InputError:
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
    if path is None or str(param or "").startswith("--"):  # (a flag's, not the file's)
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
