"""Where a cold start's compile time goes: per compiled kernel and per compiler step.

    NUMBA_CACHE_DIR=$(mktemp -d) PYTHONPATH=. python benchmarks/compile_profile.py [M B POLICY]
    NUMBA_CACHE_DIR=$(mktemp -d) PYTHONPATH=. python benchmarks/compile_profile.py default

M B POLICY: model, batch, policy of the artifact config (default BERT 128 lru); `default`: the
default comparison (`g10fast run` with no argument: api.DEFAULT_RUN, every policy). Run with an
empty Numba cache (an empty NUMBA_CACHE_DIR, or the tree's *.nbi/*.nbc removed), else nothing
compiles. It runs the config once and charges the CPU time (process_time) of every compile
event to the innermost kernel being compiled:
Numba's front-end passes (`numba:run_pass` events: bytecode, type inference, IR inlining,
SSA, ...) and, timed by wrapping Numba's code library for this measurement only, the lowering
to LLVM IR (`lower`, the CPython wrapper), LLVM's per-function and whole-module optimisation
(`_optimize_functions`, `_optimize_final_module`) and machine code (`_finalize_specific`).
A kernel compiled more than once (one compile per argument *types*) shows its count. Prints
per kernel (self time, nested compiles excluded), per kernel module, per step, the steps of the
biggest kernels, and the argument types of every kernel compiled more than once.
Measurement only: numbers on a shared machine vary by 10-30 % with its load.
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

from numba.core import codegen as cg
from numba.core import event as ev
from numba.core import lowering as lw

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"

# fmt: off
_stack = []                                  # [kind, step, t0, children, kernel]
_self = collections.defaultdict(float)       # kernel -> self seconds
_step = collections.defaultdict(float)       # (kind, step) -> seconds
_kstep = collections.defaultdict(float)      # (kernel, kind, step) -> seconds
_compiles = collections.Counter()            # kernel -> compiles
_sigs = collections.defaultdict(list)        # kernel -> argument types of each compile
# fmt: on


def _kernel_now():
    for e in reversed(_stack):
        if e[0] == "compile":
            return e[4]
    return "(outside a compile)"


def _push(kind, step, kernel=None):
    _stack.append([kind, step, time.process_time(), 0.0, kernel])


def _pop():
    kind, step, t0, children, kernel = _stack.pop()
    d = time.process_time() - t0
    own = d - children
    k = kernel if kind == "compile" else _kernel_now()
    _self[k] += own
    _step[(kind, step)] += own
    _kstep[(k, kind, step)] += own
    if _stack:
        _stack[-1][3] += d


class _Listener(ev.Listener):
    def __init__(self, kind):
        self.kind = kind

    def on_start(self, event):
        if self.kind == "compile":
            fn = event.data["dispatcher"].py_func
            name = f"{fn.__module__.replace('g10fast.', '')}.{fn.__qualname__}"
            _compiles[name] += 1
            _sigs[name].append(tuple(str(a) for a in event.data.get("args", ())))
            _push("compile", "(dispatcher, outside passes)", name)
        else:
            _push("numba pass", event.data["name"].split(" [")[0])

    def on_end(self, event):
        _pop()


def _wrap(cls, name, kind):
    f = getattr(cls, name)

    def timed(self, *a, **k):
        _push(kind, name)
        try:
            return f(self, *a, **k)
        finally:
            _pop()

    setattr(cls, name, timed)


def install():
    ev.register("numba:compile", _Listener("compile"))
    ev.register("numba:run_pass", _Listener("pass"))
    for cls, name in ((lw.BaseLower, "lower"), (lw.BaseLower, "create_cpython_wrapper")):
        _wrap(cls, name, "lowering")
    for cls, name in (
        (cg.CPUCodeLibrary, "add_ir_module"),
        (cg.CPUCodeLibrary, "_optimize_functions"),
        (cg.CPUCodeLibrary, "_optimize_final_module"),
        (cg.JITCodeLibrary, "_finalize_specific"),
        (cg.CPUCodeLibrary, "serialize_using_object_code"),
    ):
        _wrap(cls, name, "llvm")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    install()
    c0, w0 = time.process_time(), time.perf_counter()
    if argv[:1] == ["default"]:
        from g10fast.api import DEFAULT_RUN, run_spec

        what = "default comparison"
        run_spec(DEFAULT_RUN)
    else:
        model, batch, policy = (argv + ["BERT", "128", "lru"][len(argv) :])[:3]
        from g10fast.config import genconfig
        from g10fast.run import run

        what = f"{model}-{batch} {policy}"
        run(genconfig(str(ARTIFACT), model, int(batch), policy))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    total = sum(_self.values())
    print(
        f"{what}: run {cpu:.2f} s CPU ({wall:.2f} s wall), of which in "
        f"compile events {total:.2f} s; {sum(_compiles.values())} compiles of "
        f"{len(_compiles)} kernels"
    )
    print("\nper kernel (self CPU s, nested compiles excluded; xN: compiled N times):")
    for k, v in sorted(_self.items(), key=lambda kv: -kv[1]):
        if v >= 0.05:
            print(f"  {v:7.2f}  x{_compiles.get(k, 0):<3d} {k}")
    rest = [v for v in _self.values() if v < 0.05]
    print(f"  {sum(rest):7.2f}  ({len(rest)} others below 0.05 s)")
    by_mod = collections.defaultdict(float)
    n_mod = collections.Counter()
    for k, v in _self.items():
        by_mod[k.rsplit(".", 1)[0] if k in _compiles else k] += v
    for k, n in _compiles.items():
        n_mod[k.rsplit(".", 1)[0]] += n
    print("\nper kernel module (self CPU s; compiles):")
    for m, v in sorted(by_mod.items(), key=lambda kv: -kv[1]):
        print(f"  {v:7.2f}  {n_mod.get(m, 0):4d}  {m}")
    by_kind = collections.defaultdict(float)
    for (kind, _), v in _step.items():
        by_kind[kind] += v
    print(
        "\nby kind: " + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    )
    print("by step:")
    for (kind, step), v in sorted(_step.items(), key=lambda kv: -kv[1]):
        if v >= 0.1:
            print(f"  {v:7.2f}  {kind}: {step}")
    print("\nsteps of the biggest kernels:")
    for k, _ in sorted(_self.items(), key=lambda kv: -kv[1])[:8]:
        items = sorted(((v, s) for (kk, _, s), v in _kstep.items() if kk == k), reverse=True)
        print(f"  {k}: " + ", ".join(f"{s} {v:.2f}" for v, s in items[:6]))
    print("\nkernels compiled more than once (argument types of each compile):")
    for k, sigs in sorted(_sigs.items()):
        if len(sigs) > 1:
            print(f"  {k} x{len(sigs)}:")
            for sig in sigs:
                print(f"      ({', '.join(sig)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
