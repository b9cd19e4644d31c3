"""How g10fast's Numba kernels are compiled: the one place that defines the decorators.

Every kernel module (`engine.page_kernels`, `engine.tensor_kernels`, `planner.g10_kernels`)
takes its decorator from here:

* `kernel`: `njit(cache=True)`, compiled once and kept in Numba's on-disk cache (the
  `__pycache__` folder next to the module, or NUMBA_CACHE_DIR).
* `kernel_nonrt`: the same without Numba's reference counting (`_nrt=False`), for kernels
  that never allocate (the page engine): the atomic increments and decrements that NRT wraps
  around each array argument of each call otherwise cost more than the page moves themselves.
* `kernel_nonrt_ieee`: `kernel_nonrt` with IEEE float semantics (`error_model="numpy"`: a
  division by 0 gives inf or nan instead of raising ZeroDivisionError).
* `jit(**options)`: any other combination (`inline="always"` and the like), same switch.

Switch: G10FAST_NO_JIT=1 (any value but "" and "0") leaves every g10fast kernel a plain
Python function, for a debugger, coverage or a print while chasing a bug (slow: hundreds of
times slower; the small tests are fine). It is read once, at import. NUMBA_DISABLE_JIT=1
does the same for every Numba function of the process (g10fast's and any other library's);
G10FAST_NO_JIT only touches g10fast's kernels, and needs no knowledge of Numba's settings.
"""

from __future__ import annotations

import os

from numba import njit

NO_JIT = os.environ.get("G10FAST_NO_JIT", "") not in ("", "0")


def jit(**options):
    """A decorator compiling a function with `njit(cache=True, **options)`, or leaving it as
    it is under G10FAST_NO_JIT."""
    if NO_JIT:
        return lambda fn: fn
    return njit(cache=True, **options)


kernel = jit()
kernel_nonrt = jit(_nrt=False)
kernel_nonrt_ieee = jit(_nrt=False, error_model="numpy")
