"""The policy registry: one record per policy, one per engine (DESIGN.md, "A policy lives in
one place").

A policy's record names its engine, its planner, its options (a frozen dataclass whose
fields are the named quirks and parameters, with their defaults), whether its plan depends on
host memory (sweep reuse reads this), and how figures show it. Every table that used to list
policies (display names, colours, engine dispatch, sweep cost, reuse) is a look-up here.

    from g10fast.policies import get, records
    get("G10").name            # 'prefetch_lru' (aliases and display names resolve)
    register(PolicyRecord(...))   # a policy of one's own (docs/adding-a-policy.md)

Engines have their own registry below this one (g10fast.engine.registry, re-exported here):
a policy's record names its engine, whose record names its runner and its mode class.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any, Callable

from g10fast.engine.registry import EngineRecord, engine, engines, register_engine  # noqa: F401
from g10fast.errors import InputError


@dataclass(frozen=True)
class NoOptions:
    """A policy without options."""


@dataclass(frozen=True)
class PolicyRecord:
    """Everything g10fast knows of one policy."""

    name: str  # canonical name (the artifact's, where it has one)
    display: str  # in tables and figures
    engine: str  # a registered engine: "page", "tensor", ...
    #: whether the plan reads the host memory size (a sweep derives a point at another host
    #: size from a finished run only when the plans are equal). Required: a policy that
    #: forgets it cannot be silently reused.
    plan_depends_on_host: bool
    #: planner(ctx: PlanContext) -> the plan the engine takes (None: no plan)
    planner: Callable[[Any], Any] | None = None
    #: engine_mode(options, engine_options) -> what the engine is told: an instance of its
    #: engine's mode class (its EngineRecord's `mode`: PageMode, TensorMode, DriverMode,
    #: SwapMode, ZeroMode)
    engine_mode: Callable[[Any, Any], Any] | None = None
    options: type = NoOptions
    aliases: tuple = ()
    artifact: str | None = None  # the artifact's policy name (G10 config keys), if any
    paper: str = ""
    description: str = ""
    order: int = 100  # place in tables and figures (ascending)
    #: part of the default comparison (`g10fast run` with no argument, api.DEFAULT_POLICIES):
    #: off unless the record says so, so that a policy one adds never joins it silently
    in_default_comparison: bool = False
    colour: str = ""  # matplotlib colour; "" picks one
    sweep_cost: float = 1.0  # relative CPU per page, for sweep scheduling
    #: system parameters the policy fixes (G10-GDS: no host memory), applied to every spec
    system_overrides: dict = field(default_factory=dict)
    #: G10 config keys its G10 config form sets beyond the artifact's policy keys (Ideal:
    #: is_UVM 0; g10fast.spec.to_g10_config)
    g10_overrides: dict = field(default_factory=dict)

    def make_options(self, values: dict | None = None, *, where: str = "policy"):
        """The options dataclass from a dict, each key checked (unknown keys named)."""
        values = dict(values or {})
        known = {f.name: f for f in dataclasses.fields(self.options)}
        for k in values:
            if k not in known:
                hint = difflib.get_close_matches(k, known, n=1)
                raise InputError(
                    f"unknown option {k!r} of policy {self.name}"
                    + (f" (did you mean {hint[0]!r}?)" if hint else "")
                    + f"; known: {', '.join(known) or 'none'}",
                    param=f"{where}.{k}",
                )
        defaults = self.options()
        for k, v in values.items():
            d = getattr(defaults, k)
            if isinstance(d, bool):
                if not isinstance(v, bool):
                    raise InputError(f"must be true or false, got {v!r}", param=f"{where}.{k}")
            elif isinstance(d, int) and not isinstance(d, bool):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise InputError(f"must be an integer, got {v!r}", param=f"{where}.{k}")
                if not -(2**62) <= v < 2**62:  # the engines' int64, with room for sums
                    raise InputError(
                        f"must be between -2^62 and 2^62 (the engines' 64-bit integers), got {v}",
                        param=f"{where}.{k}",
                    )
            elif isinstance(d, float):
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InputError(f"must be a number, got {v!r}", param=f"{where}.{k}")
                values[k] = float(v)
            elif isinstance(d, str) and not isinstance(v, str):
                raise InputError(f"must be a string, got {v!r}", param=f"{where}.{k}")
        opts = self.options(**values)
        check = getattr(opts, "check", None)
        if check is not None:
            check()
        return opts

    def option_defaults(self) -> dict:
        return dataclasses.asdict(self.options())


_POLICIES: dict[str, PolicyRecord] = {}


def register(rec: PolicyRecord, *, replace: bool = False) -> PolicyRecord:
    """Add a policy (its name and aliases must be new unless `replace`)."""
    if rec.engine not in {e.name for e in engines()}:
        raise ValueError(f"policy {rec.name}: unknown engine {rec.engine!r}")
    if not replace:
        for n in (rec.name,) + tuple(rec.aliases):
            if _lookup(n) is not None:
                raise ValueError(f"policy name {n!r} is taken by {_lookup(n).name}")
    _POLICIES[rec.name] = rec
    return rec


def unregister(name: str) -> None:
    _POLICIES.pop(name, None)


def _lookup(name: str) -> PolicyRecord | None:
    q = str(name).strip().lower()
    for rec in _POLICIES.values():
        if q == rec.name.lower() or q == rec.display.lower() or q in (a.lower() for a in rec.aliases):
            return rec
    return None


def get(name: str, *, param: str = "policy") -> PolicyRecord:
    """The record of a policy by name, alias or display name (any case)."""
    rec = _lookup(name)
    if rec is None:
        names = [r.name for r in records()]
        hint = difflib.get_close_matches(str(name), names, n=1)
        raise InputError(
            f"unknown policy {name!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + f" (known: {', '.join(names)})",
            param=param,
        )
    return rec


def records() -> list[PolicyRecord]:
    """Every registered policy in figure order."""
    return sorted(_POLICIES.values(), key=lambda r: (r.order, r.name))


def names() -> list[str]:
    return [r.name for r in records()]


def display(name: str) -> str:
    rec = _lookup(name)
    return rec.display if rec is not None else str(name)


_FALLBACK = ("#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#9edae5", "#aec7e8")


def colour(name: str) -> str:
    rec = _lookup(name)
    if rec is not None and rec.colour:
        return rec.colour
    return _FALLBACK[sum(map(ord, str(name))) % len(_FALLBACK)]


@dataclass
class PlanContext:
    """What a planner is given: the workload, the system, the policy's options, the engine
    options and the workload's ArtifactShape; `vitality()` is computed once and shared (a
    sweep worker hands in its cached analysis, or a function that gives it)."""

    workload: Any
    system: Any
    options: Any
    engine: Any
    shape: Any
    vitality_value: Any = None

    def vitality(self):
        if callable(self.vitality_value):
            self.vitality_value = self.vitality_value()
        if self.vitality_value is None:
            from g10fast.analysis.vitality import vitality

            self.vitality_value = vitality(self.workload, self.system.gpu_frequency_ghz)
        return self.vitality_value
