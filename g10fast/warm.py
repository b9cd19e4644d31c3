"""Compile the kernels of the policies' engines into Numba's on-disk cache ahead of the first
real run: `g10fast warm [POLICY ...]` (default: every registered policy).

The install already compiles the kernels a plain run calls from Python ahead of time
(g10fast.aot; `g10fast warm` says whether that module is used here, and `--aot` builds it
again): where it is used, these runs compile what it does not hold (the swap and ranks
engines' kernels, a traced driver run's engine and the variants below); where it is not,
everything.

Each policy runs once on the default comparison's workload and system (api.DEFAULT_RUN:
bert-base at batch 64 on g10-artifact with 10 GB of GPU memory; an engine whose record names a
`warm_system`, such as the ranks engine, which needs a node, on that preset), so that every kernel its
engine, its planner and the bound call is compiled and written to the cache that later runs
read (the `__pycache__` folders next to the kernel modules, or NUMBA_CACHE_DIR). Meant for
the step after installation that pays the compile once per machine image: a Dockerfile `RUN
g10fast warm`, a CI step before the tests, a Dask worker's preload.

What it buys, and what it cannot (benchmarks/results/cold-start-journal.md, "What a cache
built elsewhere can and cannot carry"): Numba keys each cached kernel on the CPU (LLVM's host
CPU name and feature string), the Python and Numba versions and the source files' contents,
and NUMBA_CACHE_DIR's entries also on the install path. A cache warmed here serves runs on
this machine (and on copies of this image run on the same CPU model); on another CPU model
the kernels compile again on first use. A kernel is compiled per argument types, so a run
whose arrays take other types than these runs' compiles its own variant on first use: the
page engine's int32 LRU ring (runs that are not UVM or not on the bulk engine, DeepUM with
planned pre-evictions), its int64 ring above 2**27 pages, an eviction rule of the user's, a
traced run's or `--check` run's extra kernels.
"""

from __future__ import annotations

import time

__all__ = ["warm", "aot_modules", "build_aot"]

#: kernel modules outside the engines (whose modules their records' `kernels` name) that
#: declare entries compiled ahead of time: every run's bound, the G10 planner, the event-trace
#: writer's kernels
KERNEL_MODULES = ("g10fast.analysis.bounds", "g10fast.planner.g10_kernels", "g10fast.trace_kernels")


def aot_modules() -> list[str]:
    """The modules whose declared entries the install compiles ahead of time (g10fast.aot)."""
    from g10fast.engine.registry import engines

    mods = [m for e in engines() for m in e.kernels]
    return list(dict.fromkeys(mods + list(KERNEL_MODULES)))


def build_aot(dest=None, timeout=None):
    """Compile the entries of `aot_modules()` ahead of time into `dest` (default: the package's
    folder), as the install does (setup.py); -> the build process's CompletedProcess."""
    from g10fast import aot

    return aot.build(aot.PACKAGE_DIR if dest is None else dest, aot_modules(), timeout=timeout)


def warm(names=None, system=None, progress=None) -> list[dict]:
    """Run each policy of `names` (registered names, aliases or display names; None: every
    registered policy) once on api.DEFAULT_RUN's workload, on its system (`system`: another
    preset's name, without DEFAULT_RUN's GPU memory override; None: DEFAULT_RUN's, or the
    preset its engine's record names for warming, `warm_system`, when that system cannot run
    it: the ranks engine's needs a [node] table); -> one row per policy: {"policy", "engine",
    "system", "cpu_s", "wall_s"} (process CPU and wall seconds of its run, the compile
    included), with "error" (the InputError's message) instead of the times for a policy that
    cannot run on that system. `progress(row)` is called after each. An unknown name raises
    InputError before anything runs."""
    from g10fast import policies
    from g10fast.api import DEFAULT_RUN, run_spec
    from g10fast.engine.registry import engine as engine_record
    from g10fast.errors import InputError

    recs = policies.records() if names is None else [policies.get(n) for n in names]
    rows = []
    for rec in {r.name: r for r in recs}.values():
        preset = system or engine_record(rec.engine).warm_system or None
        base = dict(DEFAULT_RUN) if preset is None else dict(DEFAULT_RUN, system={"preset": preset})
        row = {"policy": rec.name, "engine": rec.engine, "system": preset or "default"}
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            run_spec(dict(base, policy={"names": [rec.name]}))
        except InputError as exc:
            row["error"] = str(exc)
        else:
            row.update(cpu_s=round(time.process_time() - c0, 2), wall_s=round(time.perf_counter() - w0, 2))
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows
