"""Invariants of the page engine, asserted while it runs (`g10fast run --check`).

At every point where the engine returns to its wrapper (every kernel boundary under
`check`, and every flush of the event buffer), `PageChecker.check` asserts:

* each page is in exactly one place and the engine's counters agree with the page table
  (GPU pages = the GPU count, host pages = the host count);
* capacity is never exceeded (GPU pages <= frames, host pages <= the host line);
* every page marked in transfer is in exactly one queue;
* bytes moved = bytes arrived: the pages that arrived in the GPU less those that left it
  equal the GPU count, likewise for the host and the SSD (from the event stream, summed as it
  is written, so memory stays bounded), and the fetches and evictions equal the per-tick
  traffic statistics.

A broken invariant raises `InvariantError` naming the kernel, the iteration and the
invariant. The page-table count is a Numba kernel (one pass over the page states)."""

from __future__ import annotations

import numpy as np

from g10fast.engine import page_kernels as pk
from g10fast.jit import kernel_nonrt


from g10fast.errors import InvariantError  # noqa: E402  (re-exported)


@kernel_nonrt
def _count_states(pstate, out):
    """out[0..3] = pages per location (low two bits), out[4] = pages in transfer."""
    n1 = 0
    n2 = 0
    n3 = 0
    nt = 0
    for i in range(pstate.shape[0]):
        s = pstate[i]
        c = s & 3
        n1 += c == 1
        n2 += c == 2
        n3 += c == 3
        nt += (s >> 2) & 1
    out[0] = pstate.shape[0] - n1 - n2 - n3
    out[1] = n1
    out[2] = n2
    out[3] = n3
    out[4] = nt


def count_states(pstate: np.ndarray) -> np.ndarray:
    """Pages per location (NOT_PRESENT, SSD, CPU, GPU) and in transfer, of a page table."""
    if pstate.dtype != np.uint8 or pstate.ndim != 1:
        raise ValueError("pstate must be a 1-d uint8 array")
    out = np.zeros(5, dtype=np.int64)
    _count_states(pstate, out)
    return out


class CountingSink:
    """A trace sink that keeps the sums the conservation checks need (and forwards the
    events to `inner`, a real trace, if given)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.n = 0
        self.sums = dict(arrive=0, leave_gpu=0, to_cpu=0, from_cpu=0, to_ssd=0, from_ssd=0,
                         fetch=0, evict_out=0, kernels=0)

    @property
    def n_events(self):
        return self.inner.n_events if self.inner is not None else self.n

    def append(self, ev):
        kind, cnt, src, dst = ev[:, 1], ev[:, 6], ev[:, 7], ev[:, 8]
        s = self.sums
        fetch = kind == pk.EV_FETCH
        evict = kind == pk.EV_EVICT
        dealloc = kind == pk.EV_DEALLOC
        s["arrive"] += int(cnt[fetch | (kind == pk.EV_ALLOC)].sum())
        s["leave_gpu"] += int(cnt[evict].sum() + cnt[dealloc & (src == pk.IN_GPU)].sum())
        s["to_cpu"] += int(cnt[evict & (dst == pk.IN_CPU)].sum())
        s["from_cpu"] += int(cnt[(fetch | dealloc) & (src == pk.IN_CPU)].sum())
        s["to_ssd"] += int(cnt[evict & (dst == pk.IN_SSD)].sum())
        s["from_ssd"] += int(cnt[(fetch | dealloc) & (src == pk.IN_SSD)].sum())
        s["fetch"] += int(cnt[fetch].sum())
        s["evict_out"] += int(cnt[evict & (dst != pk.NOT_PRESENT)].sum())
        s["kernels"] += int((kind == pk.EV_KERNEL).sum())
        self.n += len(ev)
        if self.inner is not None:
            self.inner.append(ev)

    def rewind(self, n):
        if self.inner is not None:
            self.inner.rewind(n)


#: the page table is scanned at every check up to this many pages; a larger run scans it at
#: every k-th check (k = pages / SCAN_PAGES, rounded up) and at the run's end, so that the
#: scans cost about what the engine does (`full=True`: at every check whatever the size)
SCAN_PAGES = 1 << 20


class PageChecker:
    """The invariants of one page-engine run (see the module docstring)."""

    def __init__(self, w, sp, sink: CountingSink, full: bool = False):
        self.w = w
        self.sp = sp
        self.sink = sink
        self.init_ssd = int(np.asarray(w.n_pages)[np.asarray(w.is_global, bool)].sum()) \
            if sp.is_uvm else 0
        self.checks = 0
        self.scans = 0
        self.scan_every = 1 if full else max(1, -(-int(w.num_pages) // SCAN_PAGES))

    def _fail(self, S, what: str):
        k = int(S[pk.S_CUR_KERNEL])
        name = self.w.kernel_name[k] if 0 <= k < self.w.num_kernels else "?"
        raise InvariantError(f"invariant broken at kernel {k} ({name}), iteration "
                             f"{int(S[pk.S_CUR_ITER])}: {what}")

    def check(self, S, pstate, pcie, queued_pages, last: bool = False,
              extents=None) -> None:
        """queued_pages: the pages the queues hold, or a function that counts them (called
        only when the page table is scanned). extents: (lru, tt) of an extent-LRU run, checked
        with the page table (`extent_lru_problem`)."""
        sp, s = self.sp, self.sink.sums
        gpu, host = int(S[pk.S_GPU_USED]), int(S[pk.S_HOST_USED])
        self.checks += 1
        if not 0 <= gpu <= sp.frames:
            self._fail(S, f"GPU capacity: {gpu} pages in use of {sp.frames}")
        if not 0 <= host <= sp.host_line:
            self._fail(S, f"host capacity: {host} pages in use of {sp.host_line}")
        if sp.is_uvm:
            self._conservation(S, s, gpu, host, pcie)
        if not (last or self.checks % self.scan_every == 0):
            return
        self.scans += 1
        n = count_states(pstate)
        if callable(queued_pages):
            queued_pages = queued_pages()
        if sp.is_uvm and n[pk.IN_GPU] != gpu:
            self._fail(S, f"each page in one place: {n[pk.IN_GPU]} pages are on the GPU in the "
                          f"page table, the engine counts {gpu}")
        if n[pk.IN_CPU] != host:
            self._fail(S, f"each page in one place: {n[pk.IN_CPU]} pages are in host memory in "
                          f"the page table, the engine counts {host}")
        if n[4] != queued_pages:
            self._fail(S, f"{n[4]} pages are marked in transfer, the queues hold {queued_pages}")
        if extents is not None:
            problem = extent_lru_problem(extents[0], S, extents[1], pstate)
            if problem:
                self._fail(S, f"extent LRU: {problem}")
        if sp.is_uvm and self.init_ssd + s["to_ssd"] - s["from_ssd"] != n[pk.IN_SSD]:
            self._fail(S, f"bytes moved = bytes arrived (SSD): {self.init_ssd} at start + "
                          f"{s['to_ssd']} arrived - {s['from_ssd']} left != {n[pk.IN_SSD]} "
                          "pages on the SSD")

    def _conservation(self, S, s, gpu, host, pcie):
        if s["arrive"] - s["leave_gpu"] != gpu:
            self._fail(S, f"bytes moved = bytes arrived (GPU): {s['arrive']} pages arrived, "
                          f"{s['leave_gpu']} left, the GPU holds {gpu}")
        if s["to_cpu"] - s["from_cpu"] != host:
            self._fail(S, f"bytes moved = bytes arrived (host): {s['to_cpu']} pages arrived, "
                          f"{s['from_cpu']} left, the host holds {host}")
        if s["fetch"] != int(pcie[:, pk.PC_IN].sum()):
            self._fail(S, f"traffic: {s['fetch']} pages fetched in the event stream, "
                          f"{int(pcie[:, pk.PC_IN].sum())} in the per-tick statistics")
        if s["evict_out"] != int(pcie[:, pk.PC_OUT].sum()):
            self._fail(S, f"traffic: {s['evict_out']} pages evicted in the event stream, "
                          f"{int(pcie[:, pk.PC_OUT].sum())} in the per-tick statistics")


def extent_lru_problem(lru, S, tt, pstate) -> str | None:
    """What is wrong with an extent LRU (page_kernels, "The LRU list as extents"), or None: the
    list's extents, walked in order, are linked both ways, each a non-empty run of one
    tensor's pages that are all in the GPU and not in transfer, no page twice; together they
    are every such page; each tensor's chain holds exactly its extents, whose pages add up to
    its TT_RES; the free records number S[S_X_NFREE]. Plain Python (slow; small runs)."""
    xw = pk.XW
    rec = np.asarray(lru).reshape(-1, xw)
    res = (np.asarray(pstate, dtype=np.int64) & pk.RES_MASK) == pk.IN_GPU
    seen = np.zeros(len(pstate), dtype=bool)
    order = []
    prev, i = -1, int(S[pk.S_X_HEAD])
    while i >= 0:
        if len(order) > len(rec):
            return "the list has a cycle"
        lo, hi, T, pv = (int(x) for x in rec[i, [pk.X_LO, pk.X_HI, pk.X_T, pk.X_PREV]])
        if pv != prev:
            return f"extent {i}: its previous link is {pv}, not {prev}"
        t0 = int(tt[T, pk.TT_START])
        if not (t0 <= lo < hi <= t0 + int(tt[T, pk.TT_NP])):
            return f"extent {i} [{lo}, {hi}) is not a non-empty run of tensor {T}'s pages"
        if not res[lo:hi].all():
            return f"extent {i} [{lo}, {hi}) holds a page not resident or in transfer"
        if seen[lo:hi].any():
            return f"extent {i} [{lo}, {hi}) holds a page already listed"
        seen[lo:hi] = True
        order.append(i)
        prev, i = i, int(rec[i, pk.X_NEXT])
    if prev != int(S[pk.S_X_TAIL]):
        return f"the list ends at extent {prev}, its tail is {int(S[pk.S_X_TAIL])}"
    if not np.array_equal(seen, res):
        return (f"{int(res.sum())} pages are resident and not in transfer, the list holds "
                f"{int(seen.sum())}")
    listed = set(order)
    chained = 0
    for T in range(tt.shape[0]):
        pages, j, tp = 0, int(tt[T, pk.TT_XH]), -1
        while j >= 0:
            if j not in listed or int(rec[j, pk.X_T]) != T or int(rec[j, pk.X_TPREV]) != tp:
                return f"tensor {T}'s chain holds extent {j}, not one of its listed extents"
            pages += int(rec[j, pk.X_HI] - rec[j, pk.X_LO])
            chained += 1
            tp, j = j, int(rec[j, pk.X_TNEXT])
        if pages != int(tt[T, pk.TT_RES]):
            return f"tensor {T}'s extents hold {pages} pages, its TT_RES is {int(tt[T, pk.TT_RES])}"
    if chained != len(order):
        return f"the tensors' chains hold {chained} extents, the list {len(order)}"
    if len(rec) - len(order) != int(S[pk.S_X_NFREE]):
        return (f"{len(rec) - len(order)} extent records are not listed, S[S_X_NFREE] says "
                f"{int(S[pk.S_X_NFREE])}")
    return None
