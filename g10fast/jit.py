"""How g10fast's Numba kernels are compiled: the one place that defines the decorators.

Every kernel module (`engine.page_kernels`, `engine.tensor_kernels`, `planner.g10_kernels`,
`analysis.bounds`, ...) takes its decorator from here:

* `kernel`: `njit(cache=True)`, compiled once and kept in Numba's on-disk cache (the
  `__pycache__` folder next to the module, or NUMBA_CACHE_DIR).
* `kernel_nonrt`: the same without Numba's reference counting (`_nrt=False`), for kernels
  that never allocate (the page engine): the atomic increments and decrements that NRT wraps
  around each array argument of each call otherwise cost more than the page moves themselves.
* `kernel_nonrt_ieee`: `kernel_nonrt` with IEEE float semantics (`error_model="numpy"`: a
  division by 0 gives inf or nan instead of raising ZeroDivisionError).
* `kernel_nonrt_internal`: `kernel_nonrt` for a kernel that only other kernels call. Numba
  builds no CPython wrapper for it (the code that unboxes Python arguments, which other kernels
  never go through): about 7 % of a cold page engine's compile. Called from Python, it raises
  TypeError (a kernel without a wrapper would crash the process).
* `jit(**options)`: any other combination (`inline="always"` and the like), same switch;
  `jit(internal=True, ...)` is the kernels-only variant.

Calls between kernels are typed without literal values (`_plain_calls`): by default Numba
compiles a called kernel once per distinct combination of constant arguments at its call sites
(`_q_push(qb, S, Q_PF_CPU, p, 1)` and `_q_push(qb, S, Q_PF_SSD, p, 1)` are two compiles, typed
`Literal[int](0)` and `Literal[int](1)`); here the arguments are typed as their plain types
(`int64`, `bool`, a tuple of them), so each kernel is compiled once per argument *types*. The
machine types are the same, so the results are too; LLVM still sees the constants where it
inlines the call. A cold BERT-128 lru run compiled 113 kernel versions before (`_q_push` 14
times, `_emit` 9), 68 with it, about 30 % less compile CPU (docs/page-engine-bulk.md, "Cold
compile"). A kernel whose typing needs a literal argument falls back to Numba's own typing.

Switch: G10FAST_NO_JIT=1 (any value but "" and "0") leaves every g10fast kernel a plain
Python function, for a debugger, coverage or a print while chasing a bug (slow: hundreds of
times slower; the small tests are fine). It is read once, at import. NUMBA_DISABLE_JIT=1
does the same for every Numba function of the process (g10fast's and any other library's);
G10FAST_NO_JIT only touches g10fast's kernels, and needs no knowledge of Numba's settings.
"""

from __future__ import annotations

import os

from numba import njit
from numba.core import errors, types

NO_JIT = os.environ.get("G10FAST_NO_JIT", "") not in ("", "0")


def _plain_calls(disp):
    """Let `disp`, a Numba dispatcher, be typed at its call sites in other kernels with the
    arguments' plain types instead of their literal values (one compile per argument types,
    not one per constant; see the module's docstring). Numba types such a call through the
    dispatcher's `get_call_template(args, kws)`, which compiles the signature it is given."""
    typed = type(disp).get_call_template

    def get_call_template(args, kws):
        plain = tuple(types.unliteral(a) for a in args)
        plain_kws = {k: types.unliteral(v) for k, v in kws.items()}
        if plain == tuple(args) and plain_kws == kws:
            return typed(disp, args, kws)
        try:
            return typed(disp, plain, plain_kws)
        except errors.TypingError:       # the kernel needs a literal: Numba's own way
            return typed(disp, args, kws)

    disp.get_call_template = get_call_template
    return disp


_INTERNAL = {}     # dispatcher class -> its kernels-only subclass


def _kernels_only(disp):
    """Make a call of `disp` (compiled without a CPython wrapper) from Python raise TypeError
    instead of jumping into the missing wrapper. Calls from other kernels do not go through
    `__call__`, and the subclass types and caches as its base does."""
    base = type(disp)
    cls = _INTERNAL.get(base)
    if cls is None:
        def __call__(self, *args, **kws):
            raise TypeError(f"{self.py_func.__module__}.{self.py_func.__qualname__} is "
                            "compiled for calls from other kernels only")
        cls = _INTERNAL[base] = type("KernelsOnly" + base.__name__, (base,),
                                     {"__call__": __call__})
    disp.__class__ = cls
    return disp


def jit(*, internal: bool = False, **options):
    """A decorator compiling a function with `njit(cache=True, **options)` (its calls from
    other kernels typed without literal values, `_plain_calls`), or leaving it as it is under
    G10FAST_NO_JIT. `internal`: only other kernels call it (no CPython wrapper, see the
    module's docstring)."""
    if NO_JIT:
        return lambda fn: fn
    if internal:
        compile_ = njit(cache=True, no_cpython_wrapper=True, **options)
        return lambda fn: _kernels_only(_plain_calls(compile_(fn)))
    compile_ = njit(cache=True, **options)
    return lambda fn: _plain_calls(compile_(fn))


kernel = jit()
kernel_nonrt = jit(_nrt=False)
kernel_nonrt_internal = jit(_nrt=False, internal=True)
kernel_nonrt_ieee = jit(_nrt=False, error_model="numpy")
