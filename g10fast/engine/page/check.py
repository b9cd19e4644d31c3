"""Invariants of the page engine, asserted while it runs (`g10fast run --check`).

At every kernel boundary (the engine returns to its wrapper there under `check`, and at
every flush of the event buffer), `PageChecker.check` asserts:

* capacity is never exceeded (GPU pages <= frames, host pages <= the host line);
* the per-tick traffic statistics add up (pages fetched = from the SSD + from the host,
  pages evicted = to the SSD + to the host, in every iteration);
* at a page-table scan: each page is in exactly one place and the engine's counters agree
  with the page table (GPU pages = the GPU count, host pages = the host count); every page
  marked in transfer is in exactly one queue; the extent LRU's list and chains hold exactly
  the resident pages (`extent_lru_problem`, a Numba kernel); every tensor whose states the
  bulk engine knows to be 0 (TT_Z) has only zero states; a tensor whose states are lazy
  (TT_LZ) has its boundary within its pages and no byte written from it on (the scan then
  reads the lazy states as the engine reads them);
* with the event stream (`check="full"`, or whenever the run writes an event trace anyway):
  bytes moved = bytes arrived: the pages that arrived in the GPU less those that left it
  equal the GPU count, likewise for the host and the SSD (summed as the stream is written,
  so memory stays bounded), and the fetches and evictions equal the per-tick statistics.

The scans and the event stream are what cost: the event stream's rows are written as the
engine goes (on the ring, DeepUM with planned pre-evictions, it also takes the engine off its
fast paths), and a scan reads every page state. So `check=True` ("state") runs the engine
untraced, and scans the page table whenever
the scans so far and the next (as long as the last) take at most `SCAN_SHARE` of the time
the engine took so far (and always at the run's end; at every check in a run of at most
`SCAN_ALWAYS_PAGES`); `check="full"` writes the event stream for the conservation sums and scans at
every check up to `SCAN_PAGES` pages, at every k-th above (k = pages / SCAN_PAGES).

A broken invariant raises `InvariantError` naming the kernel, the iteration and the
invariant."""

from __future__ import annotations

import time

import numpy as np

from g10fast.engine.common import CHECK_LEVELS, check_level  # noqa: F401  (re-exported)
from g10fast.engine.page import kernels as pk
from g10fast.jit import kernel, kernel_nonrt


from g10fast.errors import InvariantError  # noqa: E402  (re-exported)


_M = np.uint64(0x0101010101010101)  # bit 0 of each byte of a word
_1 = np.uint64(1)
_2 = np.uint64(2)
_56 = np.uint64(56)


@kernel_nonrt
def _count_states(pstate, words, out):
    """out[0..3] = pages per location (low two bits), out[4] = pages in transfer, out[5] =
    pages on the GPU and not in transfer (`(s & RES_MASK) == IN_GPU`). `words`: the first
    8 * len(words) states as uint64, eight states a word (bit k of a byte: bit 8i+k of the
    word): each count is the sum of the bytes of a word of one bit per byte (a multiply by
    0x0101...01 sums them into the top byte); the rest one by one."""
    n1 = 0
    n2 = 0
    n3 = 0
    nt = 0
    nr = 0
    for i in range(words.shape[0]):
        w = words[i]
        b0 = w & _M
        b1 = (w >> _1) & _M
        b2 = (w >> _2) & _M
        g = b0 & b1
        n1 += ((b0 ^ g) * _M) >> _56
        n2 += ((b1 ^ g) * _M) >> _56
        n3 += (g * _M) >> _56
        nt += (b2 * _M) >> _56
        nr += ((g & ~b2) * _M) >> _56
    for i in range(8 * words.shape[0], pstate.shape[0]):
        s = pstate[i]
        c = s & 3
        n1 += c == 1
        n2 += c == 2
        n3 += c == 3
        nt += (s >> 2) & 1
        nr += (s & pk.RES_MASK) == pk.IN_GPU
    out[0] = pstate.shape[0] - n1 - n2 - n3
    out[1] = n1
    out[2] = n2
    out[3] = n3
    out[4] = nt
    out[5] = nr


@kernel_nonrt
def _lazy_broken(tt, pstate):
    """The first tensor whose states are lazy (TT_LZ) and either its boundaries are out of
    order (its first page <= TT_LD <= TT_LA <= its end), or one of its pages below TT_LD
    (dropped) or from TT_LA on (queued, not arrived) has a state byte that is not 0 (neither
    is written while the states are lazy); or -1."""
    for T in range(tt.shape[0]):
        if tt[T, pk.TT_LZ] != 0:
            p0 = tt[T, pk.TT_START]
            end = p0 + tt[T, pk.TT_NP]
            la = tt[T, pk.TT_LA]
            ld = tt[T, pk.TT_LD]
            if not p0 <= ld <= la <= end:
                return T
            for p in range(p0, end):
                if (p < ld or p >= la) and pstate[p] != 0:
                    return T
    return -1


@kernel_nonrt
def _zero_known_broken(tt, pstate):
    """The first tensor whose states TT_Z says are all 0 and one of which is not, or -1."""
    for T in range(tt.shape[0]):
        if tt[T, pk.TT_Z] != 0:
            p0 = tt[T, pk.TT_START]
            for p in range(p0, p0 + tt[T, pk.TT_NP]):
                if pstate[p] != 0:
                    return T
    return -1


def count_states(pstate: np.ndarray) -> np.ndarray:
    """Pages per location (NOT_PRESENT, SSD, CPU, GPU), in transfer, and on the GPU and not
    in transfer, of a page table."""
    if pstate.dtype != np.uint8 or pstate.ndim != 1:
        raise ValueError("pstate must be a 1-d uint8 array")
    out = np.zeros(6, dtype=np.int64)
    n8 = len(pstate) // 8
    words = (
        pstate[: 8 * n8].view(np.uint64) if pstate.flags.c_contiguous and n8 else np.zeros(0, dtype=np.uint64)
    )
    _count_states(pstate, words, out)
    return out


class CountingSink:
    """A trace sink that keeps the sums the conservation checks need (and forwards the
    events to `inner`, a real trace, if given)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.n = 0
        self.sums = dict(
            arrive=0, leave_gpu=0, to_cpu=0, from_cpu=0, to_ssd=0, from_ssd=0, fetch=0, evict_out=0, kernels=0
        )

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


#: "state": the page table is scanned at a check when the scans so far took at most this
#: share of the time the engine took (and at the run's end) ...
SCAN_SHARE = 0.5
#: ... and at every check in a run of at most this many pages (a scan of 256 MiB of pages
#: takes microseconds: small runs, the tests' among them, are read at every kernel boundary)
SCAN_ALWAYS_PAGES = 1 << 16

#: "full": the page table is scanned at every check up to this many pages; a larger run at
#: every k-th check (k = pages / SCAN_PAGES, rounded up) and at the run's end
SCAN_PAGES = 1 << 20

#: when PageChecker scans: within the time budget ("state"), at the stride ("full"), or at
#: every check
SCAN_MODES = ("budget", "stride", "every")


class PageChecker:
    """The invariants of one page-engine run (see the module docstring). `sink`: the counting
    sink of the event stream, or None (an untraced run: no conservation sums). `scans`: one
    of SCAN_MODES."""

    def __init__(self, w, sp, sink: CountingSink | None, scans: str = "budget"):
        self.w = w
        self.sp = sp
        self.sink = sink
        self.init_ssd = int(np.asarray(w.n_pages)[np.asarray(w.is_global, bool)].sum()) if sp.is_uvm else 0
        self.checks = 0
        self.scans = 0
        if scans not in SCAN_MODES:
            raise ValueError(f"scans must be one of {SCAN_MODES}, got {scans!r}")
        self.scan_mode = scans
        # scan at every scan_every-th check (0: within the time budget)
        if scans == "every" or (scans == "budget" and w.num_pages <= SCAN_ALWAYS_PAGES):
            self.scan_every = 1
        elif scans == "budget":
            self.scan_every = 0
        else:
            self.scan_every = max(1, -(-int(w.num_pages) // SCAN_PAGES))
        self.engine_s = 0.0  # time in the engine, between checks
        self.scan_s = 0.0  # time in the scans
        self.next_scan_s = 1e-9 * int(w.num_pages)  # what the next scan will take, about
        self._since = time.perf_counter()
        self._seen = None  # extent_lru_problem's scratch arrays
        self._listed = None

    def _fail(self, S, what: str):
        k = int(S[pk.S_CUR_KERNEL])
        name = self.w.kernel_name[k] if 0 <= k < self.w.num_kernels else "?"
        raise InvariantError(
            f"invariant broken at kernel {k} ({name}), iteration {int(S[pk.S_CUR_ITER])}: {what}"
        )

    def check(self, S, pstate, pcie, queued_pages, last: bool = False, extents=None, tt=None) -> None:
        """queued_pages: the pages the queues hold, or a function that counts them (called
        only when the page table is scanned). extents: (lru, tt) of an extent-LRU run, checked
        with the page table (`extent_lru_problem`). tt: the tensor table of a bulk run, whose
        TT_Z column and lazy states (TT_LZ) are checked with the page table."""
        t0 = time.perf_counter()
        self.engine_s += t0 - self._since
        sp = self.sp
        gpu, host = int(S[pk.S_GPU_USED]), int(S[pk.S_HOST_USED])
        self.checks += 1
        if not 0 <= gpu <= sp.frames:
            self._fail(S, f"GPU capacity: {gpu} pages in use of {sp.frames}")
        if not 0 <= host <= sp.host_line:
            self._fail(S, f"host capacity: {host} pages in use of {sp.host_line}")
        pin, pout = pcie[:, pk.PC_IN], pcie[:, pk.PC_OUT]
        if not (
            np.array_equal(pin, pcie[:, pk.PC_IN_SSD] + pcie[:, pk.PC_IN_CPU])
            and np.array_equal(pout, pcie[:, pk.PC_OUT_SSD] + pcie[:, pk.PC_OUT_CPU])
        ):
            self._fail(
                S,
                "traffic: pages fetched (evicted) per iteration != those from (to) the "
                f"SSD + the host: {pcie.tolist()}",
            )
        s = self.sink.sums if self.sink is not None else None
        if sp.is_uvm and s is not None:
            self._conservation(S, s, gpu, host, pcie)
        if last or (
            self.scan_s + self.next_scan_s <= SCAN_SHARE * self.engine_s
            if self.scan_every == 0
            else self.checks % self.scan_every == 0
        ):
            t1 = time.perf_counter()
            self._scan(S, pstate, gpu, host, s, queued_pages, extents, tt)
            self.next_scan_s = time.perf_counter() - t1  # the next one: as long
            self.scan_s += time.perf_counter() - t0
        self._since = time.perf_counter()

    def _scan(self, S, pstate, gpu, host, s, queued_pages, extents, tt=None):
        sp = self.sp
        self.scans += 1
        if tt is not None:
            # lazy states (`LAZY_DEFAULT`): checked, then read as the engine reads them
            T = _lazy_broken(tt, pstate)
            if T >= 0:
                self._fail(S, f"tensor {T}'s lazy states: a page not arrived was written")
            pstate = pk.lz_written(pstate, tt, copy=True)
        n = count_states(pstate)
        if callable(queued_pages):
            queued_pages = queued_pages()
        if sp.is_uvm and n[pk.IN_GPU] != gpu:
            self._fail(
                S,
                f"each page in one place: {n[pk.IN_GPU]} pages are on the GPU in the "
                f"page table, the engine counts {gpu}",
            )
        if n[pk.IN_CPU] != host:
            self._fail(
                S,
                f"each page in one place: {n[pk.IN_CPU]} pages are in host memory in "
                f"the page table, the engine counts {host}",
            )
        if n[4] != queued_pages:
            self._fail(S, f"{n[4]} pages are marked in transfer, the queues hold {queued_pages}")
        if extents is not None:
            if self._seen is None or len(self._seen) != len(pstate):
                self._seen = np.zeros(len(pstate), dtype=np.uint8)
            if self._listed is None or len(self._listed) * pk.XW != len(extents[0]):
                self._listed = np.zeros(len(extents[0]) // pk.XW, dtype=np.uint8)
            problem = extent_lru_problem(
                extents[0], S, extents[1], pstate, self._seen, int(n[5]), self._listed
            )
            if problem:
                self._fail(S, f"extent LRU: {problem}")
        if tt is not None:
            T = _zero_known_broken(tt, pstate)
            if T >= 0:
                self._fail(S, f"tensor {T}'s states are known to be 0 (TT_Z), but one is not")
        if sp.is_uvm and s is not None and self.init_ssd + s["to_ssd"] - s["from_ssd"] != n[pk.IN_SSD]:
            self._fail(
                S,
                f"bytes moved = bytes arrived (SSD): {self.init_ssd} at start + "
                f"{s['to_ssd']} arrived - {s['from_ssd']} left != {n[pk.IN_SSD]} "
                "pages on the SSD",
            )

    def _conservation(self, S, s, gpu, host, pcie):
        if s["arrive"] - s["leave_gpu"] != gpu:
            self._fail(
                S,
                f"bytes moved = bytes arrived (GPU): {s['arrive']} pages arrived, "
                f"{s['leave_gpu']} left, the GPU holds {gpu}",
            )
        if s["to_cpu"] - s["from_cpu"] != host:
            self._fail(
                S,
                f"bytes moved = bytes arrived (host): {s['to_cpu']} pages arrived, "
                f"{s['from_cpu']} left, the host holds {host}",
            )
        if s["fetch"] != int(pcie[:, pk.PC_IN].sum()):
            self._fail(
                S,
                f"traffic: {s['fetch']} pages fetched in the event stream, "
                f"{int(pcie[:, pk.PC_IN].sum())} in the per-tick statistics",
            )
        if s["evict_out"] != int(pcie[:, pk.PC_OUT].sum()):
            self._fail(
                S,
                f"traffic: {s['evict_out']} pages evicted in the event stream, "
                f"{int(pcie[:, pk.PC_OUT].sum())} in the per-tick statistics",
            )


#: extent_lru_problem's findings: code -> the message of its three values
_X_PROBLEMS = {
    1: "the list has a cycle",
    2: "extent {0}: its previous link is {1}, not {2}",
    3: "extent {0} [{1}, {2}) is not a non-empty run of its tensor's pages",
    4: "extent {0} [{1}, {2}) holds a page not resident or in transfer",
    5: "extent {0} [{1}, {2}) holds a page already listed",
    6: "the list ends at extent {0}, its tail is {1}",
    7: "{0} pages are resident and not in transfer, the list holds {1}",
    8: "tensor {0}'s chain holds extent {1}, not one of its listed extents",
    9: "tensor {0}'s extents hold {1} pages, its TT_RES is {2}",
    10: "the tensors' chains hold {0} extents, the list {1}",
    11: "{0} extent records are not listed, S[S_X_NFREE] says {1}",
    12: "the list links to record {0}, beyond its {1} records",
}


@kernel
def _extent_lru_scan(rec, S, tt, pstate, n_res, seen, listed, out):
    """The checks of `extent_lru_problem` in one pass over the list and the tensors' chains
    (`n_res`: the resident pages, count_states()[5]); out = (code, a, b, c), code 0: none
    broken. `seen` (one byte per page) and `listed` (one byte per record) come in zeroed and
    are left zeroed."""
    nrec = rec.shape[0]
    n_listed = 0
    n_pages = 0
    prev = -1
    i = S[pk.S_X_HEAD]
    code = 0
    while i >= 0 and code == 0:
        if n_listed > nrec:
            code = 1
            break
        if i >= nrec:
            out[1], out[2] = i, nrec
            code = 12
            break
        lo = rec[i, pk.X_LO]
        hi = rec[i, pk.X_HI]
        T = rec[i, pk.X_T]
        pv = rec[i, pk.X_PREV]
        if pv != prev:
            out[1], out[2], out[3] = i, pv, prev
            code = 2
            break
        if T < 0 or T >= tt.shape[0]:
            out[1], out[2], out[3] = i, lo, hi
            code = 3
            break
        t0 = tt[T, pk.TT_START]
        if not (t0 <= lo and lo < hi and hi <= t0 + tt[T, pk.TT_NP]):
            out[1], out[2], out[3] = i, lo, hi
            code = 3
            break
        for p in range(lo, hi):
            if (np.int64(pstate[p]) & pk.RES_MASK) != pk.IN_GPU:
                out[1], out[2], out[3] = i, lo, hi
                code = 4
                break
            if seen[p] != 0:
                out[1], out[2], out[3] = i, lo, hi
                code = 5
                break
            seen[p] = 1
        if code != 0:
            break
        n_pages += hi - lo
        listed[i] = 1
        n_listed += 1
        prev = i
        i = rec[i, pk.X_NEXT]
    if code == 0 and prev != S[pk.S_X_TAIL]:
        out[1], out[2] = prev, S[pk.S_X_TAIL]
        code = 6
    # every listed page is resident and listed once: the list holds every resident page
    # when it holds as many as there are
    if code == 0 and n_pages != n_res:
        out[1], out[2] = n_res, n_pages
        code = 7
    chained = 0
    if code == 0:
        for T in range(tt.shape[0]):
            pages = 0
            j = tt[T, pk.TT_XH]
            tp = -1
            while j >= 0:
                if j >= nrec or listed[j] == 0 or rec[j, pk.X_T] != T or rec[j, pk.X_TPREV] != tp:
                    out[1], out[2] = T, j
                    code = 8
                    break
                pages += rec[j, pk.X_HI] - rec[j, pk.X_LO]
                chained += 1
                tp = j
                j = rec[j, pk.X_TNEXT]
            if code != 0:
                break
            if pages != tt[T, pk.TT_RES]:
                out[1], out[2], out[3] = T, pages, tt[T, pk.TT_RES]
                code = 9
                break
    if code == 0 and chained != n_listed:
        out[1], out[2] = chained, n_listed
        code = 10
    if code == 0 and nrec - n_listed != S[pk.S_X_NFREE]:
        out[1], out[2] = nrec - n_listed, S[pk.S_X_NFREE]
        code = 11
    out[0] = code
    # zero what the walk marked (the listed extents' pages; all of them after a break)
    i = S[pk.S_X_HEAD]
    k = 0
    while 0 <= i < nrec and k <= nrec:
        lo = max(rec[i, pk.X_LO], 0)
        hi = min(rec[i, pk.X_HI], seen.shape[0])
        for p in range(lo, hi):
            seen[p] = 0
        listed[i] = 0
        k += 1
        i = rec[i, pk.X_NEXT]


def extent_lru_problem(lru, S, tt, pstate, seen=None, n_res=None, listed=None) -> str | None:
    """What is wrong with an extent LRU (page.lru, "The LRU list as extents"), or None: the
    list's extents, walked in order, are linked both ways, each a non-empty run of one
    tensor's pages that are all in the GPU and not in transfer, no page twice; together they
    are every such page; each tensor's chain holds exactly its extents, whose pages add up to
    its TT_RES; the free records number S[S_X_NFREE]. One Numba pass over the list (`seen`: a
    zeroed uint8 scratch array of one byte per page, kept zeroed, to reuse between calls;
    `listed` likewise, one byte per record; `n_res`: the pages on the GPU and not in
    transfer, count_states()[5], if at hand)."""
    rec = np.ascontiguousarray(lru).reshape(-1, pk.XW)
    if seen is None:
        seen = np.zeros(len(pstate), dtype=np.uint8)
    if n_res is None:
        n_res = int(count_states(pstate)[5])
    if listed is None:
        listed = np.zeros(len(rec), dtype=np.uint8)
    out = np.zeros(4, dtype=np.int64)
    _extent_lru_scan(rec, S, tt, pstate, int(n_res), seen, listed, out)
    code = int(out[0])
    return None if code == 0 else _X_PROBLEMS[code].format(*(int(x) for x in out[1:]))
