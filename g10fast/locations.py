"""Page and tensor locations: G10's PageLocation enum, defined once for all of g10fast.

Plain int constants, so that Numba freezes them into the kernels as compile-time globals.
The page engine (`page.kernels`), the tensor engine (`tensor.kernels`, as `LOC_*`), the
planners (`planner.g10_kernels`, `planner.deepum`), hint files and the trace format
(`trace.Location`, the values of its ``src`` / ``dst`` columns) all use these values.

Numba's on-disk cache keys a kernel on its own source file only: a kernel module compiled
with these values keeps them after an edit here until its cache is cleared (delete the
`__pycache__` folders of g10fast/engine and g10fast/planner). The values are G10's and are
not meant to change.
"""

NOT_PRESENT = 0     # nowhere (never allocated, or dropped)
IN_SSD = 1          # in SSD storage
IN_CPU = 2          # in host (CPU) memory
IN_GPU = 3          # in GPU memory
NOT_KNOWN = 4       # a hint's "from": wherever the pages are
IN_GPU_LEAST = 5    # G10's enum value for "in GPU, least recently used"; used only by traces
