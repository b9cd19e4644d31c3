"""Invariants of the tensor engine (`g10fast run --check`): its allocator never places two
live tensors on one page, never goes beyond its capacity, and every free matches a live
allocation. The engine runs one iteration in one Numba call, so the check replays its event
stream in time order and asserts the invariants at every event, naming the kernel that was
running; the O-40 quirk (a tensor allocated again while its offload is pending keeps its old
pages until the offload ends) is mirrored."""

from __future__ import annotations

import bisect

import numpy as np

from g10fast.engine.tensor import kernels as tk
from g10fast.engine.page.check import InvariantError


def check_tensor_run(run, workload) -> int:
    """Assert the allocator's invariants over a TensorRun's events; returns the events read."""
    cap = int(run.capacity_pages)
    starts: list[int] = []  # sorted starts of the live regions
    ends: dict[int, int] = {}  # start -> end (exclusive)
    live: dict = {}  # tensor (or a held old copy) -> (start, n)
    kernel = -1
    ev = run.events
    order = np.argsort(run.event_ms, kind="stable")

    def fail(what):
        name = workload.kernel_name[kernel] if 0 <= kernel < workload.num_kernels else "start-up"
        raise InvariantError(f"invariant broken at kernel {kernel} ({name}): {what}")

    for r in ev[order]:
        kind, t, page, n = int(r[1]), int(r[4]), int(r[5]), int(r[6])
        if kind == tk.EV_KERNEL:
            kernel = int(r[3])
        elif kind == tk.EV_ALLOC:
            if int(r[9]) == 2 and t in live:
                live[(t, "held", len(live))] = live.pop(t)  # O-40
            if t in live:
                fail(f"tensor {t} allocated twice")
            if not (0 <= page and page + n <= cap):
                fail(f"tensor {t} placed at pages [{page}, {page + n}) beyond the capacity of {cap} pages")
            i = bisect.bisect_right(starts, page)
            if (i > 0 and ends[starts[i - 1]] > page) or (i < len(starts) and starts[i] < page + n and n > 0):
                fail(f"tensor {t} placed at pages [{page}, {page + n}) overlaps a live tensor")
            if n > 0:
                starts.insert(i, page)
                ends[page] = page + n
            live[t] = (page, n)
        elif kind in (tk.EV_DEALLOC, tk.EV_EVICT):
            key = (
                t
                if live.get(t) == (page, n)
                else next(
                    (k for k, v in live.items() if isinstance(k, tuple) and k[0] == t and v == (page, n)),
                    None,
                )
            )
            if key is None:
                fail(f"free of tensor {t} at pages [{page}, {page + n}) does not match a live allocation")
            del live[key]
            if n > 0:
                starts.pop(bisect.bisect_left(starts, page))
                del ends[page]
    return len(ev)
