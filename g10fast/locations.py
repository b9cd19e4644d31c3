"""Page and tensor locations: G10's PageLocation enum, defined once for all of g10fast; and the
kinds of the event trace's rows (`trace.EventKind`), which the engines write and readers of
their event rows (alloc.trace, perfetto) take from here.

Plain int constants, so that Numba freezes them into the kernels as compile-time globals.
The page engine (`page.kernels`), the tensor engine (`tensor.kernels`, as `LOC_*`), the
planners (`planner.g10_kernels`, `planner.deepum`), hint files and the trace format
(`trace.Location`, the values of its ``src`` / ``dst`` columns) all use these values.

Numba's on-disk cache keys a kernel on its own source file only: a kernel module compiled
with these values keeps them after an edit here until its cache is cleared (delete the
`__pycache__` folders of g10fast/engine and g10fast/planner). The values are G10's and are
not meant to change.
"""

# fmt: off
NOT_PRESENT = 0     # nowhere (never allocated, or dropped)
IN_SSD = 1          # in SSD storage
IN_CPU = 2          # in host (CPU) memory
IN_GPU = 3          # in GPU memory
NOT_KNOWN = 4       # a hint's "from": wherever the pages are
IN_GPU_LEAST = 5    # G10's enum value for "in GPU, least recently used"; used only by traces

# the event trace's row kinds (`trace.EventKind`, docs/trace-format.md)
EV_KERNEL = 0       # a kernel execution
EV_FAULT = 1        # pages queued by a kernel's fault scan
EV_FETCH = 2        # pages moved to the GPU by the batcher
EV_ALLOC = 3        # first touch / pre-allocation on the GPU
EV_EVICT = 4        # pages leaving the GPU
EV_HINT = 5         # a planner hint applied at kernel start
EV_DEALLOC = 6      # pages freed by a pre-deallocation hint
EV_TRANSFER = 7     # a batcher transfer boundary
# fmt: on
