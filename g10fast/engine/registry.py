"""The engine registry: one record per engine, below the policies (DESIGN.md, "An engine lives
in one place too").

    from g10fast.engine.registry import engine, engines
    er = engine("page")            # its EngineRecord
    er.load()                      # its runner: runner(spec, rec, ctx, *, plan, trace, ...)
    er.mode_class()                # the typed mode its policies hand it (e.g. PageMode)

An engine's record declares what it supports, so that the pipeline (g10fast.run), the CLI and
the sweeps ask the record instead of naming engines: a required kernel order
(`kernel_order`), an offset-level allocator (`allocator`), the checkpoint LP bound
(`lp_bound`), a finished run's points at other host sizes and a shared plan (`host_reuse`),
a step timeline (`timeline`), extra summary lines (`summary`), its own part of a run's
memory estimate (`memory`) and the modules of its cached Numba kernels (`kernels`). Each
engine package has a `record.py` that imports only this module and defines its `RECORD`
(importing it still runs its package's `__init__`); the built-in ones are the packages in
`BUILTIN`. Runners, summaries, timeline writers and mode classes are named
"module:attribute" and imported when first used, so that nothing outside `g10fast.engine`
names an engine's modules: it asks the record.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from g10fast.errors import InputError


def _resolve(ref):
    """A "module:attribute" string's object (anything else as it is)."""
    if not isinstance(ref, str):
        return ref
    mod, _, attr = ref.partition(":")
    return getattr(importlib.import_module(mod), attr)


@dataclass(frozen=True)
class EngineRecord:
    """Everything the pipeline knows of one engine."""

    name: str
    #: "module:function": runner(spec, rec, ctx, *, plan, trace, progress, required_order,
    #: check, baseline) -> the result dict (imported when first run)
    runner: str
    description: str = ""
    #: the typed mode class its policies' `engine_mode` returns ("module:Class" or the class)
    mode: Any = None
    #: takes a required kernel order (`--kernel-order`, O-18)
    kernel_order: bool = False
    #: places blocks at offsets: an offset-level allocator applies (`--allocator`)
    allocator: bool = False
    #: the checkpoint LP models it (`--bound lp`); `lp_model` is then "module:function":
    #: lp_model(spec, policy_record, workload) -> (BoundModel or None, unit_ms)
    lp_bound: bool = False
    lp_model: str = ""
    #: a finished run gives the sweep points at other host sizes (its result carries
    #: `host_peak_pages` and `system.host_line`), and a plan made once may be handed to its
    #: runner (`plan=`) for every point that shares it, with the same result: the name of
    #: the module (g10fast.sweep.reuse asks it) with `system(cfg) -> dict` (the result's
    #: `system` of a G10Config, `host_line` in pages) and `plan_parts(plan, reported) ->
    #: (plan summary, planner arrays)` (a derived point's own plan), or "" (none)
    host_reuse: str = ""
    #: "module:function" writing its step timeline (`--timeline`): writer(result, path), or
    #: "" (none)
    timeline: str = ""
    #: "module:function" giving extra text lines for a result dict, or ""
    summary: str = ""
    #: "module:function": memory(spec, workload) -> {part: bytes} of a run on this engine
    #: beyond what every run needs (g10fast.resources), or ""
    memory: str = ""
    #: the modules holding the cache=True Numba kernels a run of this engine calls from
    #: Python (a sweep with a cold cache runs its first point alone, so that one process
    #: writes the cache: g10fast.sweep.runner.numba_cache_warm)
    kernels: tuple[str, ...] = ()
    #: a hardware preset for `g10fast warm` when the default comparison's system cannot run
    #: this engine (the ranks engine needs a preset with a [node] table), or "" (that system)
    warm_system: str = ""
    #: "module:function": keep(flag) makes the engine keep its large per-run buffers from one
    #: run to the next in this process (True: a process that runs many points, a sweep
    #: worker) or give them back after each run (False, the default), with the same results;
    #: or "" (nothing to keep). `keep_buffers` below calls it for every engine.
    keep_buffers: str = ""

    def load(self) -> Callable:
        """The runner."""
        return _resolve(self.runner)

    def mode_class(self):
        """The class of the mode its policies give it (None: none declared)."""
        return _resolve(self.mode) if self.mode is not None else None

    def summary_lines(self, res: dict) -> list[str]:
        """The engine's extra text lines for a result ([] when it has none)."""
        return list(_resolve(self.summary)(res)) if self.summary else []

    def write_timeline(self, res: dict, path) -> str:
        """Write the step timeline of a result of this engine to `path` (the path)."""
        if not self.timeline:
            raise InputError(f"the {self.name} engine writes no timeline", param="--timeline")
        return _resolve(self.timeline)(res, path)

    def host_reuse_module(self):
        """The module that derives a finished run's points at other host sizes (None: the
        engine gives none)."""
        return importlib.import_module(self.host_reuse) if self.host_reuse else None

    def lp_model_of(self, spec, rec, workload):
        """(the engine's BoundModel for the checkpoint LP or None, whether its unit is ms)."""
        if not (self.lp_bound and self.lp_model):
            modelled = " and ".join(e.name for e in engines() if e.lp_bound)
            raise InputError(
                f"the LP models the {modelled} engines (this policy runs on the {self.name} engine)",
                param="--bound",
            )
        return _resolve(self.lp_model)(spec, rec, workload)

    def memory_parts(self, spec, workload) -> dict:
        """The engine's own parts of a run's memory estimate ({} when none)."""
        return dict(_resolve(self.memory)(spec, workload)) if self.memory else {}


_ENGINES: dict[str, EngineRecord] = {}

#: the built-in engines: packages of g10fast.engine, each with a `record` module (`RECORD`)
BUILTIN = ("page", "tensor", "driver", "swap", "ranks")


_LOADED = False


def _load_builtin() -> None:
    """The built-in records, loaded at the first look-up (a record module imports this one,
    so none is imported while this one is): first in order; one registered before under the
    same name replaces it."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    loaded = {}
    for m in BUILTIN:
        rec = importlib.import_module(f"g10fast.engine.{m}.record").RECORD
        loaded[rec.name] = rec
    loaded.update(_ENGINES)
    _ENGINES.clear()
    _ENGINES.update(loaded)


def register_engine(rec: EngineRecord) -> EngineRecord:
    """Add (or replace) an engine's record."""
    _ENGINES[rec.name] = rec
    return rec


def engine(name: str) -> EngineRecord:
    """The record of an engine by name."""
    _load_builtin()
    try:
        return _ENGINES[name]
    except KeyError:
        raise InputError(f"unknown engine {name!r} (known: {', '.join(_ENGINES)})", param="engine") from None


def engines() -> list[EngineRecord]:
    """Every registered engine, built-in ones first."""
    _load_builtin()
    return list(_ENGINES.values())


def keep_buffers(keep: bool = True) -> None:
    """Every engine that has large per-run buffers keeps them from run to run in this process
    (True: a sweep worker, which runs point after point) or gives them back after each run
    (False: the default, a run's memory its own). Results are the same either way."""
    for rec in engines():
        if rec.keep_buffers:
            _resolve(rec.keep_buffers)(keep)
