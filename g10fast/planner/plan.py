"""`MigrationPlan`: what a planner hands to an engine, as plain arrays.

Hints are int64 rows (issued kernel, tensor, from, to) with G10's PageLocation codes
(NOT_PRESENT 0, IN_SSD 1, IN_CPU 2, IN_GPU 3, NOT_KNOWN 4), sorted by issued kernel
(0..K; a hint at K fires at kernel 0 of the next iteration). The engine applies them at the
start of their kernel, in row order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LOCATION_NAMES = ("Not_present", "In_ssd", "In_cpu", "In_gpu", "Not_Known", "In_gpu_least")


@dataclass(frozen=True)
class MigrationPlan:
    """A planner's output.

    policy: "prefetch_lru", "deepUM", "G10GDSSSD", "G10GDSFULL" or "file" (read from a file).
    hints int64 [H, 4]: (issued kernel, tensor, from, to), sorted by issued kernel.
    emitted int64 [H, 4]: the same rows in the planner's emission order (before the sort).
    Per inactive period (length I, vitality's creation order; empty for DeepUM):
      iv_tensor, iv_start (s), iv_end (e, next use), iv_looped, iv_time_us
      iv_decision int8 (g10_kernels.DECISION_NAMES), iv_evict_finish (kernel by which the
      eviction is done, -1), iv_prefetch_planned (latest prefetch kernel the read lane
      allows, -1), iv_prefetch (the prefetch hint's kernel, -1), iv_selected (main-loop
      iteration that selected it, -1)
    Per kernel (length K; empty for DeepUM): the planner's estimate of GPU-resident bytes
      est_prealloc (after pre-alloc/dealloc, §5.3), est_main (after the main loop, §5.4),
      est_final (after prefetch placement, §5.7), and cpu_est (host bytes reserved)
    lane_capacity / lane_planned float64 [4, K], lane_full bool [4, K]: the per-kernel transfer
      budgets (bytes) of the lanes SSD->GPU, GPU->SSD, host->GPU, GPU->host, the bytes the
      plan books on them, and the kernels the planner considers saturated (spec §5.4)
    capacity: GPU bytes; target: the line the planner aims for (0.99 × capacity × loosen).
    """

    policy: str
    num_kernels: int
    hints: np.ndarray
    emitted: np.ndarray | None = None
    iv_tensor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    iv_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    iv_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    iv_looped: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    iv_time_us: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    iv_decision: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    iv_evict_finish: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    iv_prefetch_planned: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    iv_prefetch: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    iv_selected: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    est_prealloc: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    est_main: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    est_final: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cpu_est: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lane_capacity: np.ndarray | None = None
    lane_planned: np.ndarray | None = None
    lane_full: np.ndarray | None = None
    capacity: int = 0
    target: int = 0
    info: dict = field(default_factory=dict)

    @property
    def kernel(self) -> np.ndarray:
        return self.hints[:, 0]

    @property
    def tensor(self) -> np.ndarray:
        return self.hints[:, 1]

    @property
    def src(self) -> np.ndarray:
        return self.hints[:, 2]

    @property
    def dst(self) -> np.ndarray:
        return self.hints[:, 3]

    def counts(self) -> dict:
        """Hints by kind: prealloc/prefetch (to IN_GPU), evict_ssd, evict_host, dealloc."""
        d = self.dst
        return {
            "to_gpu": int((d == 3).sum()),
            "to_ssd": int((d == 1).sum()),
            "to_host": int((d == 2).sum()),
            "dealloc": int((d == 0).sum()),
        }

    def decision_names(self) -> list:
        """The names of the `iv_decision` codes (g10_kernels.DECISION_NAMES)."""
        from g10fast.planner.g10_kernels import DECISION_NAMES

        return list(DECISION_NAMES)

    def decisions(self) -> dict:
        from g10fast.planner.g10_kernels import DECISION_NAMES

        if self.iv_decision.size == 0:
            return {}
        n = np.bincount(self.iv_decision.astype(np.int64), minlength=len(DECISION_NAMES))
        return {DECISION_NAMES[i]: int(n[i]) for i in range(len(DECISION_NAMES)) if n[i]}


def cxx_sort_order(keys) -> np.ndarray:
    """The permutation libstdc++'s std::sort (introsort: median-of-three quicksort down to
    runs of 16, then insertion sort; heap sort past 2·log2(n) levels) applies to `keys` with
    `a < b`. G10 sorts its hints with it (O-21), so this reproduces the order of same-kernel
    hints in prefetch_guide.config. Ties are what std::sort makes of them: not stable. (The
    planner's Numba sort, `g10_kernels.cxx_sort_keys`; `cxx_sort_ids` is its plain twin.)"""
    k = np.asarray(keys).astype(np.int64)
    if len(k) and np.abs(k).max() >= 2**53:  # (not exact as the kernel's float keys)
        a = k.tolist()
        return np.asarray(cxx_sort_ids(list(range(len(a))), lambda x, y: a[x] < a[y]), dtype=np.int64)
    from g10fast import aot
    from g10fast.planner.g10_kernels import cxx_sort_keys

    return aot.entry(cxx_sort_keys)(k).astype(np.int64)


def cxx_sort_ids(ids: list, less) -> list:
    """libstdc++'s std::sort of the list `ids` with the comparator `less(x, y)` on its
    elements, in place (also returned). The plain-Python version of the planner's Numba
    `g10_kernels.cxx_sort` (O-10)."""
    idx = ids
    lt = less
    n = len(idx)
    if n < 2:
        return idx

    def swap(i, j):
        idx[i], idx[j] = idx[j], idx[i]

    def median_to_first(result, x, y, z):
        if lt(idx[x], idx[y]):
            if lt(idx[y], idx[z]):
                swap(result, y)
            elif lt(idx[x], idx[z]):
                swap(result, z)
            else:
                swap(result, x)
        elif lt(idx[x], idx[z]):
            swap(result, x)
        elif lt(idx[y], idx[z]):
            swap(result, z)
        else:
            swap(result, y)

    def partition(first, last, pivot):
        pk = idx[pivot]
        while True:
            while lt(idx[first], pk):
                first += 1
            last -= 1
            while lt(pk, idx[last]):
                last -= 1
            if not first < last:
                return first
            swap(first, last)
            first += 1

    def sift_down(first, hole, length, value_i):
        # __adjust_heap then __push_heap, on idx[first:first+length]
        value = idx[value_i] if value_i is not None else None
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if lt(idx[first + child], idx[first + child - 1]):
                child -= 1
            idx[first + hole] = idx[first + child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            idx[first + hole] = idx[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and lt(idx[first + parent], value):
            idx[first + hole] = idx[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        idx[first + hole] = value

    def heap_sort(first, last):
        length = last - first
        # make_heap
        if length >= 2:
            parent = (length - 2) // 2
            while True:
                v = idx[first + parent]
                tmp = len(idx)
                idx.append(v)
                sift_down(first, parent, length, tmp)
                idx.pop()
                if parent == 0:
                    break
                parent -= 1
        # sort_heap
        while last - first > 1:
            last -= 1
            v = idx[last]
            idx[last] = idx[first]
            tmp = len(idx)
            idx.append(v)
            sift_down(first, 0, last - first, tmp)
            idx.pop()

    def introsort(first, last, depth):
        while last - first > 16:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            mid = first + (last - first) // 2
            median_to_first(first, first + 1, mid, last - 1)
            cut = partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    def insertion(first, last):
        for i in range(first + 1, last):
            v = idx[i]
            if lt(v, idx[first]):
                idx[first + 1 : i + 1] = idx[first:i]
                idx[first] = v
            else:
                j = i
                while lt(v, idx[j - 1]):
                    idx[j] = idx[j - 1]
                    j -= 1
                idx[j] = v

    introsort(0, n, 2 * (n.bit_length() - 1))
    if n > 16:
        insertion(0, 16)
        for i in range(16, n):
            v = idx[i]
            j = i
            while lt(v, idx[j - 1]):
                idx[j] = idx[j - 1]
                j -= 1
            idx[j] = v
    else:
        insertion(0, n)
    return idx


def sort_hints(hints: np.ndarray, order: str = "cxx") -> np.ndarray:
    """Hint rows sorted by issued kernel: 'cxx' = as G10's std::sort orders them (O-21),
    'stable' = emission order within a kernel."""
    h = np.asarray(hints, dtype=np.int64).reshape(-1, 4)
    if order == "stable" or len(h) < 2:
        return h[np.argsort(h[:, 0], kind="stable")]
    if order != "cxx":
        raise ValueError("order must be 'cxx' or 'stable'")
    return h[cxx_sort_order(h[:, 0])]
