"""Policies: the registry and one module per policy (docs/adding-a-policy.md).

    from g10fast import policies
    policies.get("G10")            # the record of prefetch_lru
    policies.records()             # every policy, in figure order

The built-in policies are the modules listed in `BUILTIN` (each defines `RECORD` or
`RECORDS`); a policy of one's own is one module and one `register(...)` call.
"""

from __future__ import annotations

import importlib

from g10fast.policies.registry import (
    EngineRecord,
    NoOptions,
    PlanContext,
    PolicyRecord,
    colour,
    display,
    engine,
    engines,
    get,
    names,
    records,
    register,
    register_engine,
    unregister,
)

#: the built-in policies, one module each
BUILTIN = (
    "ideal",
    "base_uvm",
    "flashneuron",
    "deepum",
    "g10_gds",
    "g10",
    "uvm_driver",
    "tbnp",
    "pump",
    "g10_driver",
    "deepum_driver",
    "deepum_learned",
)

for _m in BUILTIN:
    _mod = importlib.import_module(f"g10fast.policies.{_m}")
    for _rec in getattr(_mod, "RECORDS", None) or (_mod.RECORD,):
        register(_rec)

#: the default comparison: the policies whose record says so (`in_default_comparison`): the
#: G10 artifact's six and Ideal, Ideal first (the driver engine's policies answer another
#: question: docs/driver-engine.md)
DEFAULT_POLICIES = tuple(r.name for r in records() if r.in_default_comparison)

#: the seed systems' policies: trace-driven swapping and ZeRO
SEED = ("trace_swap", "zero")
for _m in SEED:
    _mod = importlib.import_module(f"g10fast.policies.{_m}")
    for _rec in getattr(_mod, "RECORDS", None) or (_mod.RECORD,):
        register(_rec)

__all__ = [
    "BUILTIN",
    "DEFAULT_POLICIES",
    "EngineRecord",
    "NoOptions",
    "PlanContext",
    "PolicyRecord",
    "colour",
    "display",
    "engine",
    "engines",
    "get",
    "names",
    "records",
    "register",
    "register_engine",
    "unregister",
]
