"""g10fast's own run specification: what to simulate, on what, under which policy.

    RunSpec(workload=WorkloadSource, system=System, policy=PolicySpec, engine=EngineOptions)

Every front door produces one: a G10 config file (`from_g10_config`), a TOML run file
(`from_run_file`), the CLI's flags (`g10fast.cli`) and the Python API (`builtin_spec`).
Validation happens here, once, with one message shape: the file (and line) or the parameter.
`G10Config` stays the reader and writer of the artifact's format; `to_g10_config` writes a
spec of an artifact policy back in it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field

from g10fast.errors import InputError
from g10fast.system import ENGINE_OPTION_KEYS, EngineOptions, System
from g10fast.workload.model import ArtifactShape

#: the model and trace keys of an artifact workload (G10Config field names)
ARTIFACT_WORKLOAD_KEYS = (
    "nn_model_input_file",
    "orig_kernel_time_file",
    "input_pf_kernel_time_file",
    "pf_kernel_time_file",
    "workspace_size_file",
    "is_transformer",
    "trans_borden",
    "input_H",
    "input_W",
    "is_resnet",
    "is_inception",
    "is_senet",
    "batch_size",
)


@dataclass(frozen=True)
class WorkloadSource:
    """Where the workload comes from.

    kind "builtin": a model of data/models (`model`, `batch`), kernel times from the cost
    model on the system's GPU ("estimated") or a profile file, `model_options` overriding the
    model file's parameters. kind "artifact": the G10 artifact's model and kernel-trace files
    (`files`: the config keys of ARTIFACT_WORKLOAD_KEYS). kind "trace": an HDF5 workload
    trace (docs/workload-trace-format.md; `files`: (("path", FILE.h5),)), its stored times.
    `fuse`: the fusion pass applied to the workload before planning (none | xla | stitch;
    g10fast.workload.fusion)."""

    kind: str
    model: str
    batch: int
    kernel_times: str = "estimated"
    model_options: tuple = ()
    files: tuple = ()
    fuse: str = "none"
    #: activation checkpointing applied after the fusion pass (none | full | selective;
    #: g10fast.workload.recompute)
    recompute: str = "none"

    @property
    def shape(self) -> ArtifactShape:
        if self.kind == "trace":
            from g10fast.workload.h5trace import trace_shape

            return trace_shape(dict(self.files)["path"])
        if self.kind == "artifact":
            f = dict(self.files)
            return ArtifactShape(
                int(f.get("is_transformer", 0)) == 1, int(f.get("trans_borden", 184)), int(self.batch)
            )
        from g10fast.workload.builtin import find_model

        return ArtifactShape(find_model(self.model).kind != "cnn", 184, int(self.batch))

    def to_dict(self) -> dict:
        d = {
            "kind": self.kind,
            "model": self.model,
            "batch": self.batch,
            "kernel_times": self.kernel_times,
            "model_options": dict(self.model_options),
            "files": dict(self.files),
        }
        if self.fuse != "none":  # absent when off: the hashes of unfused specs stay as they were
            d["fuse"] = self.fuse
        if self.recompute != "none":
            d["recompute"] = self.recompute
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "WorkloadSource":
        return cls(
            d["kind"],
            d["model"],
            int(d["batch"]),
            d.get("kernel_times", "estimated"),
            tuple(sorted(d.get("model_options", {}).items())),
            tuple(sorted(d.get("files", {}).items())),
            d.get("fuse", "none"),
            d.get("recompute", "none"),
        )


@dataclass(frozen=True)
class PolicySpec:
    name: str  # the registry's canonical name
    options: object = None  # the record's options dataclass

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "options": dataclasses.asdict(self.options) if dataclasses.is_dataclass(self.options) else {},
        }


@dataclass(frozen=True)
class RunSpec:
    workload: WorkloadSource
    system: System
    policy: PolicySpec
    engine: EngineOptions = field(default_factory=EngineOptions)
    source: str = ""  # the file it was read from, for messages

    @property
    def record(self):
        from g10fast import policies

        return policies.get(self.policy.name)

    def to_dict(self) -> dict:
        return {
            "format": "g10fast-runspec",
            "version": 1,
            "workload": self.workload.to_dict(),
            "system": self.system.to_dict(),
            "policy": self.policy.to_dict(),
            "engine": self.engine.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        from g10fast import policies

        rec = policies.get(d["policy"]["name"])
        return cls(
            WorkloadSource.from_dict(d["workload"]),
            System.from_dict(d["system"]),
            PolicySpec(rec.name, rec.make_options(d["policy"].get("options"))),
            EngineOptions(**d.get("engine", {})),
        )

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the spec (stable across runs)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def replace(self, **kw) -> "RunSpec":
        return dataclasses.replace(self, **kw)


def _where(exc: InputError, path) -> InputError:
    """The same error, naming the file it came from (the line, when the error has one)."""
    if path is None or getattr(exc, "path", None):
        return exc
    return InputError(exc.message, path=str(path), line=exc.line, param=exc.param)


def make_spec(
    workload: WorkloadSource,
    system: System,
    policy: str,
    options: dict | None = None,
    engine: EngineOptions | dict | None = None,
    source: str = "",
) -> RunSpec:
    """A validated RunSpec: the policy resolved in the registry (aliases, display names), its
    options checked, its system overrides applied (G10-GDS runs without host memory), the
    system and engine options checked. Errors name `source` when given."""
    from g10fast import policies

    try:
        rec = policies.get(policy)
        opts = rec.make_options(options)
        if isinstance(engine, dict):
            bad = [k for k in engine if k not in ENGINE_OPTION_KEYS]
            if bad:
                raise InputError(
                    f"unknown engine option {bad[0]!r} (known: {', '.join(ENGINE_OPTION_KEYS)})",
                    param=f"engine.{bad[0]}",
                )
            engine = EngineOptions(**engine)
        engine = check_allocator((engine or EngineOptions()).check())
        over = rec.system_overrides
        if over:
            system = system.replace(**over)
        system.check()
        if isinstance(workload.batch, bool) or not isinstance(workload.batch, int) or workload.batch <= 0:
            raise InputError(f"must be a positive integer, got {workload.batch!r}", param="workload.batch")
        from g10fast.workload.fusion import FUSE_MODES

        if workload.fuse not in FUSE_MODES:
            raise InputError(
                f"unknown fusion mode {workload.fuse!r} (known: {', '.join(FUSE_MODES)})",
                param="workload.fuse",
            )
        from g10fast.workload.recompute import MODES as RECOMPUTE_MODES

        if workload.recompute not in RECOMPUTE_MODES:
            raise InputError(
                f"unknown recomputation {workload.recompute!r} (known: {', '.join(RECOMPUTE_MODES)})",
                param="workload.recompute",
            )
    except InputError as e:
        raise _where(e, source or None) from None
    return RunSpec(workload, system, PolicySpec(rec.name, opts), engine, source)


# ---------------------------------------------------------------------------------------------
# From the artifact's format


def from_g10_config(cfg, *, policy: str | None = None, source: str = "") -> RunSpec:
    """The RunSpec of a G10Config (checked by the artifact's own start-up checks first).
    `policy` replaces the config's policy (the CLI's --policy on a config file)."""
    from g10fast.config import validate

    try:
        cfg = validate(cfg)
    except InputError as e:
        raise _where(e, source or None) from None
    name = policy if policy is not None else g10_policy(cfg)
    from g10fast import policies

    rec = policies.get(name)
    options = {}
    names = {f.name for f in dataclasses.fields(rec.options)}
    if "prefetch_degree" in names and policy is None:
        options["prefetch_degree"] = int(cfg.prefetch_degree)
    if "delta" in names:
        options["delta"] = float(cfg.delta_parameter)
    files = tuple(sorted((k, getattr(cfg, k)) for k in ARTIFACT_WORKLOAD_KEYS if k != "batch_size"))
    model = os.path.splitext(os.path.basename(cfg.nn_model_input_file))[0] if cfg.nn_model_input_file else "?"
    workload = WorkloadSource("artifact", model, int(cfg.batch_size), files=files)
    engine = EngineOptions(
        num_iteration=int(cfg.num_iteration),
        kernel_time_std_dev=float(cfg.kernel_time_std_dev),
        ran_seed=int(cfg.ran_seed),
        kernel_speedup=float(cfg.kernel_speedup),
    )
    return make_spec(workload, System.from_g10(cfg), rec.name, options, engine, source)


def g10_policy(cfg) -> str:
    """The registry name of a G10Config's policy ('ideal' for is_UVM 0 without hints)."""
    if not cfg.is_UVM and not cfg.use_prefetch and not cfg.uses_fn_simulator:
        return "ideal"
    p = cfg.policy
    if p is None:
        raise InputError(
            "this combination of use_prefetch / eviction_policy / migration_policy "
            "is not one of the artifact's policies",
            param="eviction_policy",
        )
    return p


def to_g10_config(spec: RunSpec):
    """The G10Config of a spec whose policy and workload are the artifact's."""
    from g10fast.config import _FIXED, _POLICY_KEYS, G10Config

    rec = spec.record
    if rec.artifact is None:
        raise InputError(f"policy {rec.name} has no G10 config form (not an artifact policy)", param="policy")
    use_prefetch, ev, mig, extra = _POLICY_KEYS[rec.artifact]
    v = dict(_FIXED)
    v.update(spec.system.g10_fields())
    v.update(
        batch_size=spec.workload.batch,
        use_prefetch=use_prefetch,
        eviction_policy=ev,
        migration_policy=mig,
        output_folder="",
    )
    v.update({k: val for k, val in extra if k != "CPU_memory_line_GB"})
    if spec.workload.kind == "artifact":
        v.update(dict(spec.workload.files))
    o = spec.policy.options
    if hasattr(o, "prefetch_degree"):
        v["prefetch_degree"] = int(o.prefetch_degree)
    if hasattr(o, "delta"):
        v["delta_parameter"] = float(o.delta)
    v.update(
        {k: val for k, val in spec.engine.to_dict().items() if k not in ("compat", "page_bulk", "allocator")}
    )
    v.update(rec.g10_overrides)
    return G10Config(**v)


# ---------------------------------------------------------------------------------------------
# Built-in models


def _system_of(system, overrides: dict | None, source: str = "") -> System:
    """A System from a preset (name, path or dict, with overrides) or a System as it is."""
    from g10fast.hardware import load_preset

    if isinstance(system, System):
        return system
    try:
        preset = system if isinstance(system, dict) else load_preset(system, overrides)
        return System.from_preset(preset)
    except InputError as e:
        raise _where(e, source or None) from None


def builtin_spec(
    model,
    batch: int | None = None,
    system="g10-artifact",
    policy="lru",
    *,
    overrides: dict | None = None,
    options: dict | None = None,
    engine: dict | EngineOptions | None = None,
    kernel_times="estimated",
    model_options: dict | None = None,
    source: str = "",
) -> RunSpec:
    """A built-in model (name or ModelSpec) on a hardware preset (name, path, preset dict or
    System) under one policy."""
    from g10fast.workload.builtin import ModelSpec, find_model

    try:
        spec = model if isinstance(model, ModelSpec) else find_model(model)
        batch = spec.default_batch if batch is None else batch
    except InputError as e:
        raise _where(e, source or None) from None
    sysobj = _system_of(system, overrides, source)
    wl = WorkloadSource(
        "builtin", spec.key, batch, str(kernel_times), tuple(sorted((model_options or {}).items()))
    )
    return make_spec(wl, sysobj, policy, options, engine, source)


def trace_spec(
    path,
    system="g10-artifact",
    policy="lru",
    *,
    overrides: dict | None = None,
    options: dict | None = None,
    engine: dict | EngineOptions | None = None,
    source: str = "",
) -> RunSpec:
    """An HDF5 workload trace (`g10fast capture`, `g10fast workload export`) on a hardware
    preset (name, path, preset dict or System) under one policy."""
    from g10fast.workload.h5trace import read_attrs

    path = os.path.abspath(os.fspath(path))
    a = read_attrs(path)
    sysobj = _system_of(system, overrides, source)
    wl = WorkloadSource(
        "trace", str(a.get("name", "?")), int(a.get("batch_size", 1)), "file", files=(("path", path),)
    )
    return make_spec(wl, sysobj, policy, options, engine, source)


# ---------------------------------------------------------------------------------------------
# TOML run files (docs/run-format.md)

_TOP = {"workload", "system", "policy", "engine", "output"}
_WORKLOAD_KEYS = {"model", "batch", "kernel_times", "artifact_config", "fuse", "trace"}
_SYSTEM_KEYS = {"preset", "overrides"}
_POLICY_KEYS = {"name", "names", "options"}


def _unknown(d: dict, known, section: str, path):
    import difflib

    for k in d:
        if k not in known:
            hint = difflib.get_close_matches(k, sorted(known), n=1)
            what = f"section [{k}]" if section == "run file" else f"key {k!r} in [{section}]"
            raise InputError(
                f"unknown {what}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + f" (known: {', '.join(sorted(known))})",
                path=path,
                param=f"{section}.{k}",
            )


def read_run_file(path) -> dict:
    """A TOML run file as a dict (sections checked); `_path` holds where it came from."""
    from g10fast.errors import read_toml
    from pathlib import Path

    p = Path(path)
    d = read_toml(p, "run file")
    _unknown(d, _TOP, "run file", str(p))
    d["_path"] = str(p)
    return d


def run_file_specs(d: dict) -> list[RunSpec]:
    """The RunSpecs of a parsed run file (or of `g10fast.api.DEFAULT_RUN`): one per policy."""
    path = d.get("_path")
    for sec in ("workload", "system", "policy", "engine", "output"):
        if sec in d and not isinstance(d[sec], dict):
            raise InputError(f"[{sec}] must be a table", path=path, param=sec)
    wl = dict(d.get("workload", {}))
    if "fuse" in wl:  # the fusion pass (none | xla | stitch), applied to every spec
        fuse = wl.pop("fuse")
        return [with_fuse(s, fuse, path) for s in run_file_specs(dict(d, workload=wl))]
    if "recompute" in wl:  # activation checkpointing (none | full | selective), every spec
        mode = wl.pop("recompute")
        return [with_recompute(s, mode, path) for s in run_file_specs(dict(d, workload=wl))]
    sysd = dict(d.get("system", {}))
    if "gpus" in sysd:  # data-parallel ranks (the ranks engine)
        gpus = sysd.pop("gpus")
        specs = run_file_specs(dict(d, system=sysd))
        try:
            return [s.replace(system=s.system.replace(gpus=gpus)) for s in specs]
        except InputError as e:
            raise _where(e, path) from None
    engine = dict(d.get("engine", {}))
    pol = dict(d.get("policy", {}))
    _unknown(pol, _POLICY_KEYS, "policy", path)
    if "names" in pol and "name" in pol:
        raise InputError("give policy.name or policy.names, not both", path=path, param="policy.names")
    names = pol.get("names", [pol.get("name", "lru")])
    if not isinstance(names, list) or not names or not all(isinstance(x, str) for x in names):
        raise InputError("must be a non-empty list of policy names", path=path, param="policy.names")
    options = pol.get("options", {})
    if not isinstance(options, dict):
        raise InputError("must be a table: [policy.options]", path=path, param="policy.options")
    if "artifact_config" in wl:
        from g10fast.config import read_g10_config

        _unknown(wl, {"artifact_config"}, "workload", path)
        cfg_path = wl["artifact_config"]
        if path and not os.path.isabs(cfg_path):
            cfg_path = os.path.join(os.path.dirname(path), cfg_path)
        cfg = read_g10_config(cfg_path)
        if engine:
            bad = [k for k in engine if k not in ENGINE_OPTION_KEYS]
            if bad:
                raise InputError(
                    f"unknown engine option {bad[0]!r} (known: {', '.join(ENGINE_OPTION_KEYS)})",
                    path=path,
                    param=f"engine.{bad[0]}",
                )
            cfg = cfg.replace(**engine)
        given = "names" in pol or "name" in pol
        return [
            from_g10_config(cfg, policy=n if given else None, source=cfg_path)
            for n in (names if given else [None])
        ]
    if "trace" in wl:
        return _trace_run_specs(wl, sysd, names, options, engine, path)
    _unknown(wl, _WORKLOAD_KEYS - {"artifact_config"} | {"model_options"} | _model_keys(wl), "workload", path)
    model = wl.pop("model", None)
    if not isinstance(model, str):
        raise InputError(
            "workload.model missing: a built-in model name (see `g10fast models`) or artifact_config",
            path=path,
            param="workload.model",
        )
    batch = wl.pop("batch", None)
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0):
        raise InputError(f"must be a positive integer, got {batch!r}", path=path, param="workload.batch")
    times = wl.pop("kernel_times", "estimated")
    if not isinstance(times, str) or not times:
        raise InputError(
            f'must be "estimated" or a profile file, got {times!r}', path=path, param="workload.kernel_times"
        )
    if times != "estimated" and path and not os.path.isabs(times):
        times = os.path.join(os.path.dirname(path), times)
    preset_d = _system_preset(sysd, path)
    return [
        builtin_spec(
            model,
            batch,
            preset_d,
            n,
            options=_policy_options(options, n),
            engine=engine,
            kernel_times=times,
            model_options=wl,
            source=path or "",
        )
        for n in names
    ]


def _system_preset(sysd: dict, path) -> dict:
    """The run file's [system] table -> the hardware preset it names, with its overrides."""
    _unknown(sysd, _SYSTEM_KEYS, "system", path)
    overrides = sysd.get("overrides", {})
    if not isinstance(overrides, dict):
        raise InputError("must be a table of dotted keys", path=path, param="system.overrides")
    try:
        from g10fast.hardware import load_preset

        return load_preset(sysd.get("preset", "g10-artifact"), overrides)
    except InputError as e:
        raise _where(e, path) from None


def _policy_options(options: dict, name: str) -> dict | None:
    """The [policy.options] for policy `name`: its own sub-table, or the table's plain keys
    when it has none (None when empty)."""
    opts = (
        options.get(name, {})
        if isinstance(options.get(name), dict)
        else {k: v for k, v in options.items() if not isinstance(v, dict)}
    )
    return opts or None


def _trace_run_specs(wl: dict, sysd: dict, names, options, engine, path) -> list[RunSpec]:
    """[workload] trace = "W.h5": an HDF5 workload trace (docs/workload-trace-format.md)."""
    _unknown(wl, {"trace"}, "workload", path)
    tpath = wl["trace"]
    if not isinstance(tpath, str) or not tpath:
        raise InputError("must be the path of an HDF5 workload trace", path=path, param="workload.trace")
    if path and not os.path.isabs(tpath):
        tpath = os.path.join(os.path.dirname(path), tpath)
    preset_d = _system_preset(sysd, path)
    return [
        trace_spec(
            tpath, preset_d, n, options=_policy_options(options, n), engine=engine or None, source=path or ""
        )
        for n in names
    ]


def _model_keys(wl: dict) -> set:
    """The model-file parameters a [workload] table may override (e.g. seq_len)."""
    m = wl.get("model")
    if not isinstance(m, str):
        return set()
    try:
        from g10fast.workload.builtin import find_model

        return set(find_model(m).params)
    except InputError:
        return set()


def check_allocator(engine: EngineOptions) -> EngineOptions:
    """The engine options' allocator is a registered one (g10fast.alloc.allocators)."""
    if engine.allocator:
        from g10fast.alloc.allocators import ALLOCATORS

        if engine.allocator not in ALLOCATORS:
            raise InputError(
                f"must be one of {', '.join(ALLOCATORS)}, got {engine.allocator!r}", param="engine.allocator"
            )
    return engine


def with_recompute(spec: RunSpec, mode: str, source=None) -> RunSpec:
    """The spec with its workload's activation checkpointing set (`--recompute`,
    `workload.recompute`; g10fast.workload.recompute)."""
    from g10fast.workload.recompute import MODES

    if mode not in MODES:
        raise InputError(
            f"unknown recomputation {mode!r} (known: {', '.join(MODES)})",
            path=str(source) if source else None,
            param="workload.recompute",
        )
    return spec.replace(workload=dataclasses.replace(spec.workload, recompute=mode))


def with_fuse(spec: RunSpec, fuse: str, source=None) -> RunSpec:
    """The spec with its workload's fusion pass set (`--fuse`, `workload.fuse`)."""
    from g10fast.workload.fusion import FUSE_MODES

    if fuse not in FUSE_MODES:
        raise InputError(
            f"unknown fusion mode {fuse!r} (known: {', '.join(FUSE_MODES)})",
            path=str(source) if source else None,
            param="workload.fuse",
        )
    return spec.replace(workload=dataclasses.replace(spec.workload, fuse=fuse))
