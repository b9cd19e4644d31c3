"""Provable lower bounds on one iteration's time (issue 24; shared specs/optimal-bounds.md).

    model = bound_model(workload, capacity_bytes=..., in_rate=..., ...)
    # (an engine's model: g10fast.engine.bound_models)
    wb = window_bound(model)          # WindowBound: time, binding windows, D_k
    tb = traffic_bound(model)         # TrafficBound: min bytes in, over the link

The model (spec §1, A1–A7): kernels run in order, kernel k takes c_k; a kernel starts only when
all its tensors (inputs, outputs, workspace) are resident; memory is checked at kernel starts
and counted in bytes; transfers are fluid and overlap compute; per direction the GPU link moves
at most `in_rate` (`out_rate`) bytes per time unit, of which the SSD part at most `ssd_in_rate`
(`ssd_out_rate`); host memory holds at most `host_bytes`; weights may start anywhere (free
initial placement), so the bound holds for every iteration.

Live ranges: a non-global tensor is live from its first to its last use, a global from kernel 0
to its last use. M_k = live bytes at kernel k, D_k = (M_k − C)⁺ the bytes that must be off the
GPU at S_k (the start of kernel k). The window bound is the longest path over the difference
constraints (spec §4 B2):

* S_{k+1} − S_k ≥ c_k;
* read window, t < t′: S_{t′} − S_t ≥ (D_t − A(t,t′))⁺ / in_rate, A = bytes of live(t) \\ R_t
  whose next use is after t′ (or that need no fetch);
* write window, t₀ < t: S_t − S_{t₀} ≥ (D_t − bytes that are clean or whose version was written
  before t₀)⁺ / out_rate;
* the same two with (D_t − H)⁺ and the SSD rates (the bytes that cannot fit in host memory).

Time units are the caller's (the page engine's cycles, the tensor engine's ms); rates are bytes
per that unit. O(K·(K + T)) time, O(K + T + uses) memory. `window_bound_py` is the plain-Python
twin the tests compare with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from g10fast import aot
from g10fast.errors import InputError
from g10fast.jit import jit
from g10fast.jit import kernel_nonrt as _kernel

KIND_NAMES = ("compute", "read", "write", "ssd_read", "ssd_write")


@dataclass(frozen=True)
class BoundModel:
    """The arrays and scalars the bounds read (build with `bound_model`)."""

    c: np.ndarray  # float64[K] kernel times (time unit)
    size: np.ndarray  # float64[T] bytes counted (0: excluded, e.g. a bypassed tensor)
    lo: np.ndarray  # int64[T] first live kernel (-1: never used)
    hi: np.ndarray  # int64[T] last use
    use_ptr: np.ndarray  # int64[T+1] uses of tensor x: use_k[use_ptr[x]:use_ptr[x+1]]
    use_k: np.ndarray  # int64 kernels, ascending
    use_w: np.ndarray  # bool: the use writes the tensor (an output)
    free_read: np.ndarray  # bool[T]: fetching this tensor costs nothing (a mirrored quirk)
    free_write: np.ndarray  # bool[T]: writing it out costs nothing (a mirrored quirk)
    capacity: float  # GPU bytes
    host_bytes: float  # host memory (inf: unlimited)
    in_rate: float
    out_rate: float
    ssd_in_rate: float
    ssd_out_rate: float
    slack: float = 0.0  # subtracted from every transfer edge (an engine's granularity)
    unit: str = "cycles"
    #: a kernel's own tensors may leave the GPU once it has touched them (the driver engine:
    #: a later fault batch of the same kernel may evict them): they count as candidates to be
    #: off at S_t, needed again at their next use
    touched_evictable: bool = False
    #: two sequential transfer paths, each at most `in_rate` (the driver engine's prefetch
    #: stream and its fault path, which runs only between kernels' compute): a read window
    #: t -> t' becomes S_{t'+1} - S_t >= (F / in_rate + C) / 2, C = compute of kernels t..t'
    fault_path: bool = False
    notes: tuple = ()  # what the model mirrors or leaves out, for the result

    @property
    def num_kernels(self) -> int:
        return int(self.c.shape[0])


@dataclass
class WindowBound:
    time: float  # the bound, in the model's unit
    ideal: float  # Σ c_k
    deficit: np.ndarray  # D_k, bytes
    live_bytes: np.ndarray  # M_k
    windows: list = field(default_factory=list)  # binding windows on the longest path

    def describe(self, bytes_unit: float = 1e9) -> list:
        out = []
        for w in self.windows:
            verb = "come back" if w["kind"] in ("read", "ssd_read") else "be written out"
            via = (
                " from the SSD"
                if w["kind"] == "ssd_read"
                else (" to the SSD" if w["kind"] == "ssd_write" else "")
            )
            out.append(
                f"between kernels {w['from']} and {w['to']} at least "
                f"{w['bytes'] / bytes_unit:.4g} GB must {verb}{via}"
            )
        return out


# ---------------------------------------------------------------------------------------------
# the model


def _tensor_uses(w):
    """Unique (tensor, kernel) uses sorted by tensor then kernel, with a write flag."""
    K, T = w.num_kernels, w.num_tensors
    kin = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.out_ptr))
    key_out = np.unique(np.asarray(w.out_idx, np.int64) * K + kout)
    key = np.unique(np.concatenate([np.asarray(w.in_idx, np.int64) * K + kin, key_out]))
    wr = np.isin(key, key_out, assume_unique=True)
    ut, uk = key // K, key % K
    ptr = np.zeros(T + 1, np.int64)
    np.cumsum(np.bincount(ut, minlength=T), out=ptr[1:])
    return ptr, uk.astype(np.int64), wr


def bound_model(
    w,
    *,
    capacity_bytes: float,
    in_rate: float,
    out_rate: float | None = None,
    ssd_in_rate: float | None = None,
    ssd_out_rate: float | None = None,
    host_bytes: float = math.inf,
    kernel_times=None,
    free_read=None,
    free_write=None,
    excluded_tensors=None,
    slack: float = 0.0,
    evict_copies: bool = False,
    unit: str = "cycles",
    notes=(),
    touched_evictable: bool = False,
    fault_path: bool = False,
) -> BoundModel:
    """The bound's model of a Workload. `kernel_times` (default: `exec_cycles`) in the unit
    the rates use; `free_read` / `free_write` (bool[T]): moves of those tensors in that
    direction cost nothing; `excluded_tensors` (ids) take no memory; `slack` (time) is taken
    off every transfer window; `evict_copies`: every eviction copies (the page engine's UVM:
    a page lives in one place), so data off the GPU was written out after its previous use,
    written or not (a global before its first use excepted: free initial placement). Bad input
    raises InputError naming the parameter."""
    K, T = w.num_kernels, w.num_tensors
    if K == 0:
        raise InputError("the workload has no kernels", param="workload")
    out_rate = in_rate if out_rate is None else out_rate
    ssd_in_rate = in_rate if ssd_in_rate is None else ssd_in_rate
    ssd_out_rate = out_rate if ssd_out_rate is None else ssd_out_rate
    for name, v in (
        ("capacity_bytes", capacity_bytes),
        ("in_rate", in_rate),
        ("out_rate", out_rate),
        ("ssd_in_rate", ssd_in_rate),
        ("ssd_out_rate", ssd_out_rate),
    ):
        if not (isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(v) and v > 0):
            raise InputError(f"must be a finite number > 0, got {v!r}", param=f"bounds.{name}")
    if not (host_bytes >= 0):
        raise InputError(f"must be >= 0, got {host_bytes!r}", param="bounds.host_bytes")
    c = np.asarray(w.exec_cycles if kernel_times is None else kernel_times, np.float64)
    if c.shape != (K,) or not np.all(np.isfinite(c)) or (c < 0).any():
        raise InputError("must be K finite times >= 0", param="bounds.kernel_times")
    ptr, uk, uw = _tensor_uses(w)
    if evict_copies:
        uw = np.ones_like(uw)
    n = np.diff(ptr)
    used = n > 0
    first = np.full(T, -1, np.int64)
    last = np.full(T, -1, np.int64)
    first[used] = uk[ptr[:-1][used]]
    last[used] = uk[ptr[1:][used] - 1]
    lo = np.where(np.asarray(w.is_global, bool) & used, 0, first)
    size = np.asarray(w.size, np.float64).copy()
    if excluded_tensors is not None:
        ex = np.asarray(list(excluded_tensors), np.int64)
        size[ex[(ex >= 0) & (ex < T)]] = 0.0
    fr = np.zeros(T, bool) if free_read is None else np.asarray(free_read, bool).copy()
    fw = np.zeros(T, bool) if free_write is None else np.asarray(free_write, bool).copy()
    if fr.shape != (T,) or fw.shape != (T,):
        raise InputError("must be one flag per tensor", param="bounds.free_read")
    if not (math.isfinite(slack) and slack >= 0):
        raise InputError(f"must be >= 0, got {slack!r}", param="bounds.slack")
    return BoundModel(
        c=c,
        size=size,
        lo=lo,
        hi=last,
        use_ptr=ptr,
        use_k=uk,
        use_w=uw,
        free_read=fr,
        free_write=fw,
        slack=float(slack),
        capacity=float(capacity_bytes),
        host_bytes=float(host_bytes),
        in_rate=float(in_rate),
        out_rate=float(out_rate),
        ssd_in_rate=float(ssd_in_rate),
        ssd_out_rate=float(ssd_out_rate),
        unit=unit,
        notes=tuple(notes),
        touched_evictable=bool(touched_evictable),
        fault_path=bool(fault_path),
    )


def live_bytes(m: BoundModel) -> np.ndarray:
    """M_k: the bytes live at each kernel (difference array over the live ranges)."""
    K = m.num_kernels
    acc = np.zeros(K + 1, np.float64)
    ok = m.lo >= 0
    np.add.at(acc, m.lo[ok], m.size[ok])
    np.add.at(acc, m.hi[ok] + 1, -m.size[ok])
    return np.cumsum(acc)[:K]


# ---------------------------------------------------------------------------------------------
# the window bound (Numba)


@jit(_nrt=False, internal=True)
def _relax(L, pred, pkind, pbytes, j, v, t, kind, nbytes):
    """The longest path's relaxation of node j by an edge from t (kind, bytes) of value v."""
    if v > L[j]:
        L[j] = v
        pred[j] = t
        pkind[j] = kind
        pbytes[j] = nbytes


@_kernel
def _window_kernel(
    c,
    size,
    lo,
    hi,
    use_ptr,
    use_k,
    use_w,
    free_read,
    free_write,
    D,
    Dh,
    in_rate,
    out_rate,
    ssd_in_rate,
    ssd_out_rate,
    slack,
    touched_evictable,
    fault_path,
    L,
    pred,
    pkind,
    pbytes,
    cc,
    ptr,
    lastw,
    rb,
    wb,
    order,
    act,
    tmp,
):
    """Longest path 0 -> K into L[K+1], pred[K+1], pred_kind[K+1], pred_bytes[K+1]. The
    work arrays come from the caller (`window_bound`: no allocation here, so no reference
    counting and no NumPy allocation code to compile): cc[K+1], ptr (a copy of use_ptr[:-1]),
    lastw[T], rb[K+1] and wb[K+1] (zeros), order (the tensors with lo >= 0 by lo, then by
    id) and act[T], tmp[T]. Only the tensors live at t (lo <= t <= hi: `act`, kept in
    ascending id order, so every sum adds the same terms in the same order as a pass over all
    tensors) are visited at t (SENet154-1024: 678 of 4,341 on average); rb and wb are
    cleared as their sums read them. The write windows into t stop at the earliest version
    kernel holding dirty bytes (every kernel's c >= 0: the earlier edges cannot win); with no
    write windows at all (the driver engine's model) one edge from t - 1 remains: its two
    bounds 20-35 % less CPU on SENet154-1024, the same longest path."""
    K = c.shape[0]
    T = size.shape[0]
    L[0] = 0.0
    for b in range(1, K + 1):
        L[b] = -1.0
    for b in range(K + 1):
        pred[b] = -1
        pkind[b] = 0
        pbytes[b] = 0.0
    cc[0] = 0.0
    mono = True  # every c >= 0: L is nondecreasing (chain edges), see the write windows below
    for k in range(K):
        cc[k + 1] = cc[k] + c[k]
        if not c[k] >= 0.0:
            mono = False
    # ptr: per tensor, index of its first use >= t
    for x in range(T):
        lastw[x] = -1  # per tensor: the last kernel < t that wrote it
    # rb: bytes by next use; wb: dirty bytes by version kernel (zero before each t: the sums
    # below clear what they read, and every entry written at t is read at t)
    na = 0
    oi = 0
    no = order.shape[0]
    for t in range(K):
        # the live tensors at t: those of t - 1 still live, and those whose life begins at t
        nk = 0
        for i in range(na):
            x = act[i]
            if hi[x] >= t:
                tmp[nk] = x
                nk += 1
        oj = oi
        while oj < no and lo[order[oj]] == t:
            oj += 1
        i = 0
        j = oi
        na = 0
        while i < nk or j < oj:
            if j >= oj or (i < nk and tmp[i] < order[j]):
                act[na] = tmp[i]
                i += 1
                na += 1
            else:
                x = order[j]
                j += 1
                if hi[x] >= t:
                    act[na] = x
                    na += 1
        oi = oj
        if D[t] > 0.0:
            cand = 0.0
            wmin = t  # the earliest version kernel with dirty bytes at t (t: none)
            for ii in range(na):
                x = act[ii]
                if size[x] == 0.0:
                    continue
                p = ptr[x]
                while use_k[p] < t:
                    p += 1
                ptr[x] = p
                q = p
                if use_k[p] == t:
                    if not touched_evictable:
                        continue  # required by kernel t: resident
                    q = p + 1  # touched already: needed again at its next use
                cand += size[x]
                if not free_read[x] and q < use_ptr[x + 1]:
                    rb[use_k[q]] += size[x]
                if not free_write[x] and lastw[x] >= 0:
                    wb[lastw[x]] += size[x]
                    if lastw[x] < wmin:
                        wmin = lastw[x]
            # write windows into t: edges t0 -> t
            need = D[t]
            needs = Dh[t]
            acc = 0.0  # dirty bytes of versions >= t0
            for t0 in range(t - 1, -1, -1):
                acc += wb[t0]
                wb[t0] = 0.0
                avail = cand - acc  # clean or older versions
                f = need - avail
                if f > 0.0:
                    _relax(L, pred, pkind, pbytes, t, L[t0] + f / out_rate - slack, t0, 2, f)
                fs = needs - avail
                if fs > 0.0:
                    v = L[t0] + fs / ssd_out_rate - slack
                    _relax(L, pred, pkind, pbytes, t, v, t0, 4, fs)
                if mono and t0 <= wmin:
                    # acc is final from here down (wb holds nothing below wmin), so each
                    # earlier t0 offers L[t0] plus the same terms, and L[t0] <= L[t0 + 1]:
                    # no earlier edge can raise L[t] above what this one left, nor take
                    # its place (a relaxation must exceed)
                    break
        # L[t] is final: chain edge
        _relax(L, pred, pkind, pbytes, t + 1, L[t] + c[t], t, 0, 0.0)
        if D[t] > 0.0:
            acc = 0.0  # bytes with next use <= t2
            for t2 in range(t + 1, K):
                acc += rb[t2]
                rb[t2] = 0.0
                avail = cand - acc  # next use after t2, or free
                f = D[t] - avail
                fs = Dh[t] - avail
                if fault_path:  # half of the edge: the fault path runs beside the stream
                    j = t2 + 1
                    e = cc[t2 + 1] - cc[t]
                    if f > 0.0:
                        v = L[t] + 0.5 * (f / in_rate + e) - slack
                        _relax(L, pred, pkind, pbytes, j, v, t, 1, f)
                    if fs > 0.0:
                        v = L[t] + 0.5 * (fs / ssd_in_rate + e) - slack
                        _relax(L, pred, pkind, pbytes, j, v, t, 3, fs)
                else:
                    if f > 0.0:
                        _relax(L, pred, pkind, pbytes, t2, L[t] + f / in_rate - slack, t, 1, f)
                    if fs > 0.0:
                        v = L[t] + fs / ssd_in_rate - slack
                        _relax(L, pred, pkind, pbytes, t2, v, t, 3, fs)
        # versions written by kernel t
        for ii in range(na):
            x = act[ii]
            p = ptr[x]
            while use_k[p] < t:
                p += 1
            ptr[x] = p
            if use_k[p] == t and use_w[p]:
                lastw[x] = t
    return L, pred, pkind, pbytes


def _deficits(m: BoundModel):
    M = live_bytes(m)
    D = np.maximum(M - m.capacity, 0.0)
    Dh = np.maximum(D - m.host_bytes, 0.0) if math.isfinite(m.host_bytes) else np.zeros_like(D)
    return M, D, Dh


def _path(pred, pkind, pbytes, K):
    out = []
    b = K
    while b > 0 and pred[b] >= 0:
        a = int(pred[b])
        if pkind[b] != 0:
            out.append({"from": a, "to": b, "kind": KIND_NAMES[int(pkind[b])], "bytes": float(pbytes[b])})
        b = a
    out.reverse()
    return out


def window_bound(m: BoundModel) -> WindowBound:
    """The window bound (longest path) and its binding windows (the path's transfer edges:
    'between kernel a's start and kernel b's start at least X bytes must come back')."""
    M, D, Dh = _deficits(m)
    K = m.num_kernels
    L, pred, pk, pb = (np.empty(K + 1), np.empty(K + 1, np.int64), np.empty(K + 1, np.int64), np.empty(K + 1))
    aot.entry(_window_kernel)(
        m.c,
        m.size,
        m.lo,
        m.hi,
        m.use_ptr,
        m.use_k,
        m.use_w,
        m.free_read,
        m.free_write,
        D,
        Dh,
        m.in_rate,
        m.out_rate,
        m.ssd_in_rate,
        m.ssd_out_rate,
        m.slack,
        m.touched_evictable,
        m.fault_path,
        L,
        pred,
        pk,
        pb,
        np.empty(K + 1),
        m.use_ptr[:-1].copy(),
        np.empty(len(m.size), np.int64),
        np.zeros(K + 1),
        np.zeros(K + 1),
        _live_order(m.lo),
        np.empty(len(m.size), np.int64),
        np.empty(len(m.size), np.int64),
    )
    wins = _path(pred, pk, pb, K)
    for wdw in wins:
        rate = {
            "read": m.in_rate,
            "write": m.out_rate,
            "ssd_read": m.ssd_in_rate,
            "ssd_write": m.ssd_out_rate,
        }[wdw["kind"]]
        wdw["time"] = wdw["bytes"] / rate
        wdw["compute"] = float(m.c[wdw["from"] : wdw["to"]].sum())
    return WindowBound(time=float(L[K]), ideal=float(m.c.sum()), deficit=D, live_bytes=M, windows=wins)


def _live_order(lo) -> np.ndarray:
    """The tensors that have a life (lo >= 0) by its first kernel, then by id
    (`_window_kernel`'s order)."""
    lo = np.asarray(lo, dtype=np.int64)
    ids = np.flatnonzero(lo >= 0)
    return np.ascontiguousarray(ids[np.argsort(lo[ids], kind="stable")], dtype=np.int64)


def window_bound_py(m: BoundModel) -> float:
    """The plain-Python twin of `window_bound` (slow: O(K²·T)); for tests."""
    K, T = m.num_kernels, len(m.size)
    M, D, Dh = _deficits(m)
    uses = [m.use_k[m.use_ptr[x] : m.use_ptr[x + 1]].tolist() for x in range(T)]
    writes = [[k for k, wr in zip(uses[x], m.use_w[m.use_ptr[x] : m.use_ptr[x + 1]]) if wr] for x in range(T)]
    cc = np.concatenate([[0.0], np.cumsum(m.c)])
    best = {}  # (a, b) -> weight

    def edge(a, b, v):
        best[(a, b)] = max(best.get((a, b), 0.0), v)

    for t in range(K):
        edge(t, t + 1, m.c[t])
        if D[t] <= 0:
            continue
        cand = [
            x
            for x in range(T)
            if m.lo[x] >= 0
            and m.lo[x] <= t <= m.hi[x]
            and (m.touched_evictable or t not in uses[x])
            and m.size[x] > 0
        ]
        for t2 in range(t + 1, K):
            avail = sum(
                m.size[x] for x in cand if m.free_read[x] or min([u for u in uses[x] if u > t] + [K]) > t2
            )
            if m.fault_path:  # two paths, the fault path idle during compute
                ce = cc[t2 + 1] - cc[t]
                edge(
                    t,
                    t2 + 1,
                    max(
                        0.5 * ((D[t] - avail) / m.in_rate + ce) - m.slack if D[t] > avail else 0,
                        0.5 * ((Dh[t] - avail) / m.ssd_in_rate + ce) - m.slack if Dh[t] > avail else 0,
                    ),
                )
                continue
            edge(
                t,
                t2,
                max(
                    (D[t] - avail) / m.in_rate - m.slack if D[t] > avail else 0,
                    (Dh[t] - avail) / m.ssd_in_rate - m.slack if Dh[t] > avail else 0,
                ),
            )
        for t0 in range(t):

            def dirty_since(x):
                vs = [k for k in writes[x] if k < t]
                return (not m.free_write[x]) and vs and vs[-1] >= t0

            avail = sum(m.size[x] for x in cand if not dirty_since(x))
            edge(
                t0,
                t,
                max(
                    (D[t] - avail) / m.out_rate - m.slack if D[t] > avail else 0,
                    (Dh[t] - avail) / m.ssd_out_rate - m.slack if Dh[t] > avail else 0,
                ),
            )
    L = [0.0] + [-math.inf] * K
    for b in range(1, K + 1):
        for a in range(b):
            if (a, b) in best:
                L[b] = max(L[b], L[a] + best[(a, b)])
    return L[K]


# ---------------------------------------------------------------------------------------------
# the traffic bound (fractional Belady over the inactive gaps)


@_kernel
def _cover_kernel(g_start, g_end, g_size, need, y):
    """Min Σ y_g with Σ_{g ∋ k} y_g >= need_k, 0 <= y_g <= size_g: interval covering, solved
    exactly by the left-to-right greedy that takes the gap ending last. Gaps sorted by end,
    descending. y: zeros, one per gap (the caller's: no allocation here). Returns (total,
    feasible)."""
    G = g_start.shape[0]
    K = need.shape[0]
    total = 0.0
    for k in range(K):
        if need[k] <= 0.0:
            continue
        cov = 0.0
        for g in range(G):
            if g_start[g] <= k and g_end[g] >= k:
                cov += y[g]
        rest = need[k] - cov
        if rest <= 1e-9 * need[k]:
            continue
        for g in range(G):  # farthest end first
            if g_end[g] < k:
                break
            if g_start[g] <= k and y[g] < g_size[g]:
                a = min(rest, g_size[g] - y[g])
                y[g] += a
                total += a
                rest -= a
                if rest <= 0.0:
                    break
        if rest > 1e-6 * need[k]:
            return total, False
    return total, True


def gaps(m: BoundModel):
    """Inactive gaps (tensor, first kernel, last kernel) that cost a fetch when off the GPU:
    between two uses, and a global's gap before its first use. In the order of the longest
    last kernel first; ties by tensor, a tensor's gap before its first use before those
    between its uses, in kernel order."""
    T = len(m.size)
    ptr = np.asarray(m.use_ptr, np.int64)
    uk = np.asarray(m.use_k, np.int64)
    size = np.asarray(m.size)
    lo = np.asarray(m.lo, np.int64)
    cnt = np.diff(ptr)
    ok = (lo >= 0) & (size != 0) & ~np.asarray(m.free_read, bool) & (cnt > 0)
    # before the first use
    xs = np.nonzero(ok)[0]
    u0 = uk[ptr[xs]]
    f = lo[xs] < u0
    fx = xs[f]
    # between two uses of a tensor (use j and j + 1)
    owner = np.repeat(np.arange(T), cnt)
    j = np.nonzero((owner[:-1] == owner[1:]) & ok[owner[:-1]])[0]
    if m.touched_evictable:  # off from the use before (after its touch)
        js = uk[j]
    else:
        j = j[uk[j + 1] - uk[j] > 1]
        js = uk[j] + 1
    gs = np.concatenate([lo[fx], js])
    ge = np.concatenate([u0[f] - 1, uk[j + 1] - 1])
    gz = np.concatenate([size[fx], size[owner[j]]]).astype(np.float64)
    # (tensor, then the first-use gap (-1) before the gaps between uses (their index))
    made = np.lexsort((np.concatenate([np.full(len(fx), -1), j]), np.concatenate([fx, owner[j]])))
    order = made[np.argsort(-ge[made], kind="stable")]
    return gs[order], ge[order], gz[order]


@dataclass
class TrafficBound:
    time: float  # max(Σc, V_in / in_rate, V_ssd / ssd_in_rate)
    bytes_in: float  # min bytes any schedule fetches
    bytes_ssd_in: float  # min bytes it reads from the SSD
    feasible: bool


def traffic_bound(m: BoundModel) -> TrafficBound:
    """The simple traffic-over-bandwidth bound: the fewest bytes any schedule must fetch (the
    free ones aside) over the link's rate, beside Σ c_k."""
    M, D, Dh = _deficits(m)
    # bytes free to leave (a mirrored quirk) cover the deficit at no cost
    freeb = np.zeros(m.num_kernels + 1)
    f = m.free_read & (m.lo >= 0) & (m.size > 0)
    np.add.at(freeb, m.lo[f], m.size[f])
    np.add.at(freeb, m.hi[f] + 1, -m.size[f])
    freeb = np.cumsum(freeb)[: m.num_kernels]
    if m.touched_evictable:  # a tensor at its last use may leave after its touch
        ok_ = (m.lo >= 0) & (m.size > 0) & ~m.free_read
        np.add.at(freeb, m.hi[ok_], m.size[ok_])
    gs, ge, gz = gaps(m)
    cover = aot.entry(_cover_kernel)
    v, ok = cover(gs, ge, gz, np.maximum(D - freeb, 0.0), np.zeros(len(gs)))
    vs, ok2 = cover(gs, ge, gz, np.maximum(Dh - freeb, 0.0), np.zeros(len(gs)))
    ideal = float(m.c.sum())
    if m.fault_path:  # two paths, the fault path idle during compute
        t = max(ideal, 0.5 * (v / m.in_rate + ideal) - m.slack, 0.5 * (vs / m.ssd_in_rate + ideal) - m.slack)
    else:
        t = max(ideal, v / m.in_rate - m.slack, vs / m.ssd_in_rate - m.slack)
    return TrafficBound(time=t, bytes_in=float(v), bytes_ssd_in=float(vs), feasible=ok and ok2)


# ---------------------------------------------------------------------------------------------
# a run's summary (the engines' models: g10fast.engine.bound_models)


def max_working_set(m: BoundModel, w) -> float:
    """The largest bytes one kernel needs resident (its inputs and outputs, as counted)."""
    K = w.num_kernels
    kin = np.repeat(np.arange(K), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K), np.diff(w.out_ptr))
    key = np.unique(
        np.concatenate([np.asarray(w.in_idx, np.int64) * K + kin, np.asarray(w.out_idx, np.int64) * K + kout])
    )
    acc = np.zeros(K)
    np.add.at(acc, key % K, m.size[key // K])
    return float(acc.max()) if K else 0.0


def bound_summary(m: BoundModel | None, w, ideal: float, *, windows: int = 5) -> dict:
    """The bound of one run in the model's unit: the window and traffic bounds, the binding
    windows (the `windows` with the most bytes) and what the model assumes."""
    if m is None:
        return {
            "time": float(ideal),
            "window": float(ideal),
            "traffic": float(ideal),
            "feasible": True,
            "unit": None,
            "windows": [],
            "model": {
                "capacity_bytes": None,
                "notes": ["no memory limit (Ideal): the bound is the ideal time"],
            },
        }
    wb = window_bound(m)
    tb = traffic_bound(m)
    feasible = max_working_set(m, w) <= m.capacity and tb.feasible
    top = sorted(wb.windows, key=lambda d: -d["bytes"])[:windows]
    return {
        "time": max(wb.time, tb.time),
        "window": wb.time,
        "traffic": tb.time,
        "traffic_bytes_in": tb.bytes_in,
        "traffic_bytes_ssd_in": tb.bytes_ssd_in,
        "feasible": bool(feasible),
        "unit": m.unit,
        "windows": sorted(top, key=lambda d: d["from"]),
        "binding_windows": len(wb.windows),
        "max_deficit_bytes": float(wb.deficit.max()),
        "model": {
            "capacity_bytes": m.capacity,
            "host_bytes": (m.host_bytes if math.isfinite(m.host_bytes) else None),
            "in_rate": m.in_rate,
            "out_rate": m.out_rate,
            "ssd_in_rate": m.ssd_in_rate,
            "ssd_out_rate": m.ssd_out_rate,
            "slack": m.slack,
            "notes": list(m.notes),
        },
    }


# compiled ahead of time at install (g10fast.aot): every run's result carries its bound
# (`_window_kernel`'s result, its own output arrays, dropped: see `aot.export`)
aot.export(
    _window_kernel,
    "none(f8[::1], f8[::1], i8[::1], i8[::1], i8[::1], i8[::1],"
    " b1[::1], b1[::1], b1[::1], f8[::1], f8[::1], f8, f8, f8, f8, f8, b1, b1, f8[::1], i8[::1], i8[::1],"
    " f8[::1], f8[::1], i8[::1], i8[::1], f8[::1], f8[::1], i8[::1], i8[::1], i8[::1])",
)
aot.export(_cover_kernel, "Tuple((f8, b1))(i8[::1], i8[::1], f8[::1], f8[::1], f8[::1])")
