"""The page engine's kernel namespace: every name of its kernel modules, in one place.

The G10-compatible page engine's Numba kernels (simulator spec §4–§9, §13) are split by stage
into modules (`layout`, the state layout and the decorators, lists them all, and describes
the state). Their callers (the wrapper `g10fast.engine.page`, the invariant check, the
statistics, the tests) read the engine's constants and call its kernels as
`pk.<name>` after `from g10fast.engine.page import kernels as pk`: this module re-exports
every top-level name of the stage modules (private kernels included, for the tests), and
defines nothing of its own. A name defined in two modules as two different objects is an
error at import.
"""

from __future__ import annotations

import types as _types

from g10fast.engine.page import (
    batch,
    fetch,
    general,
    helpers,
    kernel_begin,
    layout,
    loop,
    lru,
    release,
    replay,
    rules,
    stages,
)

#: the stage modules, in their order in the engine (each imports only from those before it)
MODULES = (layout, helpers, lru, rules, stages, release, batch, fetch, general, replay, kernel_begin, loop)


def _names(modules) -> dict:
    """Every top-level name of `modules` but modules, dunders and `annotations`."""
    out: dict = {}
    for m in modules:
        for name, value in vars(m).items():
            if name.startswith("__") or name == "annotations" or isinstance(value, _types.ModuleType):
                continue
            if out.setdefault(name, value) is not value:
                raise ImportError(f"page kernels: {name} defined twice ({m.__name__})")
    return out


globals().update(_names(MODULES))
