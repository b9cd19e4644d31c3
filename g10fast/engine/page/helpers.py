"""Small helpers of the page engine's kernels: the page -> tensor lookup (`tensor_of`), the
page-run queues (`_q_push`, `_q_pop`), event rows (`_emit`, `_emit_run`, `_emit_merge`,
`_emit_ticked`), a stage's admission test (`_admit`) and the page and tensor liveness tests."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.layout import (
    E_BUFFER_OVERFLOW,
    E_QUEUE_OVERFLOW,
    F_TRANSFER,
    GEN_MASK,
    GEN_SHIFT,
    LOC_MASK,
    Q_PF_ALLOC,
    Q_PF_CPU,
    Q_PF_SSD,
    RES_MASK,
    S_ERROR,
    S_EV_PAUSE,
    S_IN_OPEN,
    S_IN_OPEN2,
    N_OPEN,
    S_NEV,
    S_OUT_OPEN2,
    S_QH,
    S_QT,
    TT_BIRTH,
    TT_DEATH,
    TT_GLOBAL,
    TT_LA,
    TT_LD,
    TT_LZ,
    TT_NP,
    TT_REQ,
    TT_START,
    _G_PF_ALLOC,
    _G_PREALLOC,
    _G_PRE_CPU,
    _G_PRE_SSD,
    _G_RS_ALLOC,
    _kernel,
    _kernel_page,
    _u,
)
from g10fast.locations import IN_GPU

# `_same_bits`'s word-wise scan: words compared a step, and a byte's 1 in every byte
_SAME_WORDS = 8
_BYTES_ONE = np.uint64(0x0101010101010101)
# (a byte's low value plus 0x7F sets its top bit when it is not 0, if at most 0x80: `_rp_evict`)
_BYTES_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_BYTES_TOP = np.uint64(0x8080808080808080)


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------


@_kernel
def tensor_of(srt, S, c, p):
    """Tensor owning page p: the last non-empty tensor whose first page is <= p.

    srt[0] holds the first pages (plus the page count as a sentinel), srt[1] the tensor
    ids; S[c] caches the position of the last lookup through cache slot c."""
    i = S[c]
    if srt[0, _u(i)] <= p and p < srt[0, _u(i + 1)]:
        return srt[1, _u(i)]
    lo = 0
    hi = srt.shape[1] - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if srt[0, _u(mid)] <= p:
            lo = mid
        else:
            hi = mid
    S[c] = lo
    return srt[1, _u(lo)]


@_kernel_page
def _q_push(qb, S, q, p, n):
    """Append pages p..p+n-1 to queue q, merging with the last run when contiguous."""
    cap = qb.shape[1]
    m = cap - 1
    h = S[S_QH + q]
    t = S[S_QT + q]
    if t > h:
        last = (t - 1) & m
        if qb[q, _u(last), 0] + qb[q, _u(last), 1] == p:
            qb[q, _u(last), 1] += n
            return
    if t - h >= cap:
        S[S_ERROR] = E_QUEUE_OVERFLOW
        return
    slot = t & m
    qb[q, _u(slot), 0] = p
    qb[q, _u(slot), 1] = n
    S[S_QT + q] = t + 1


@_kernel
def _q_pop(qb, S, q):
    slot = S[S_QH + q] & (qb.shape[1] - 1)
    if qb[q, _u(slot), 1] > 1:
        qb[q, _u(slot), 0] += 1
        qb[q, _u(slot), 1] -= 1
    else:
        S[S_QH + q] += 1


@_kernel
def _emit(ev, S, t, kind, it, k, tensor, page, count, src, dst, value):
    n = S[S_NEV]
    if n >= ev.shape[0]:
        S[S_ERROR] = E_BUFFER_OVERFLOW
        return -1
    ev[n, 0] = t
    ev[n, 1] = kind
    ev[n, 2] = it
    ev[n, 3] = k
    ev[n, 4] = tensor
    ev[n, 5] = page
    ev[n, 6] = count
    ev[n, 7] = src
    ev[n, 8] = dst
    ev[n, 9] = value
    ev[n, 10] = 1
    ev[n, 11] = 0
    S[S_NEV] = n + 1
    return n


@_kernel_page
def _extends(ev, o, t, kind, it, k, tensor, page, n, ticks, period, stride, src, dst, value):
    """How row ev[o] would take the row (t, ..., page, n pages over `ticks` ticks `period`
    apart, their first pages `stride` apart, 0: runs that follow one another) that continues
    its pages: 1 in the same tick (both ordinary rows, the pages next), 2 as its next ticks
    (the same pages a tick, its tick period, its stride: o of one tick takes the page
    distance, at least its pages, as its stride), 0 not at all."""
    if not (
        o >= 0
        and ev[o, 1] == kind
        and ev[o, 4] == tensor
        and ev[o, 7] == src
        and ev[o, 8] == dst
        and ev[o, 9] == value
        and ev[o, 2] == it
        and ev[o, 3] == k
    ):
        return 0
    m = ev[o, 10]
    if m == 1 and ticks == 1 and ev[o, 0] == t:
        return 1 if ev[o, 5] + ev[o, 6] == page else 0
    # (divisions only for range rows: most calls join ordinary rows)
    c = ev[o, 6] if m == 1 else ev[o, 6] // m
    per = ev[o, 11] if m > 1 else t - ev[o, 0]
    if per <= 0 or c != (n if ticks == 1 else n // ticks) or t != ev[o, 0] + m * per:
        return 0
    if ticks > 1 and period != per:
        return 0
    if m > 1:
        s = ev[o, 12] if ev[o, 12] > 0 else c
    else:
        s = page - ev[o, 5]
    if s < c or page != ev[o, 5] + m * s or (ticks > 1 and s != (stride if stride > 0 else c)):
        return 0
    return 2


@_kernel_page
def _emit_merge(ev, S, open_idx, t, kind, it, k, tensor, page, n, ticks, period, stride, src, dst, value):
    """Write the row (t, ..., page, n pages over `ticks` ticks `period` apart, their first
    pages `stride` apart as in `_extends`; 0 when ticks is 1), extending the open row of its
    direction (ev[S[open_idx]]) or one of the older ones (S_IN_OPEN2 or S_OUT_OPEN2: N_OPEN
    rows, most recent first) when it continues it (`_extends`: in its tick, or as its next
    ticks, strided where the pages skip); the row written or extended becomes the open one,
    the one before it the first of the older ones."""
    base = S_IN_OPEN2 if open_idx == S_IN_OPEN else S_OUT_OPEN2
    o = S[open_idx]
    how = _extends(ev, o, t, kind, it, k, tensor, page, n, ticks, period, stride, src, dst, value)
    if how == 0:
        for j in range(N_OPEN):
            o2 = S[base + j]
            if o2 < 0:
                break
            how = _extends(ev, o2, t, kind, it, k, tensor, page, n, ticks, period, stride, src, dst, value)
            if how != 0:
                # o2 leaves the older rows and becomes the open one (`_open_row`)
                for q in range(j, N_OPEN - 1):
                    S[base + q] = S[base + q + 1]
                S[base + N_OPEN - 1] = -1
                _open_row(S, open_idx, o2)
                o = o2
                break
    if how == 1:
        ev[o, 6] += n
        return
    if how == 2:
        m = ev[o, 10]
        if m == 1:
            ev[o, 11] = t - ev[o, 0]
            s = page - ev[o, 5]
            ev[o, 12] = s if s != ev[o, 6] else 0
        ev[o, 6] += n
        ev[o, 10] = m + ticks
        return
    o = _emit(ev, S, t, kind, it, k, tensor, page, n, src, dst, value)
    if o >= 0 and ticks > 1:
        ev[o, 10] = ticks
        ev[o, 11] = period
        ev[o, 12] = stride if stride != n // ticks else 0
    _open_row(S, open_idx, o)


@_kernel
def _open_row(S, open_idx, o):
    """Row o becomes the open row of its direction (S[open_idx]); the one open before it, if
    any, becomes the first of the older ones (the last of those is no longer open)."""
    base = S_IN_OPEN2 if open_idx == S_IN_OPEN else S_OUT_OPEN2
    p = S[open_idx]
    if p >= 0:
        for q in range(N_OPEN - 1, 0, -1):
            S[base + q] = S[base + q - 1]
        S[base] = p
    S[open_idx] = o


#: the pages a tick of a batch that is no streak (all of it in one tick): `_emit_ticked`'s per
_NO_TICKS = 1 << 40


@_kernel
def _emit_ticked(ev, S, open_idx, t, ii, per, off, kind, it, k, tensor, page, n, src, dst, value):
    """Pages page .. page + n - 1, the pages off .. off + n - 1 of a batch that moves `per`
    pages a tick, tick i at t + i * ii (per larger than the batch: all at t), as at most
    three rows (the rest of a tick begun, one range row of the whole ticks: ticks > 1,
    period ii, docs/trace-format.md, and the start of the last tick), each extending the
    open row ev[S[open_idx]] when it continues it (`_emit_merge`). The emitter of a traced
    run (`run_engine`'s `emit`). Returns whether the event buffer is below its pause line
    (else the caller ends its run of moves: the engine flushes the buffer soon)."""
    if per == _NO_TICKS:  # (no streak: one tick, the common case)
        _emit_merge(ev, S, open_idx, t, kind, it, k, tensor, page, n, 1, 0, 0, src, dst, value)
        return S[S_NEV] < S[S_EV_PAUSE]
    i0 = off // per
    r = off - i0 * per
    if r != 0:
        h = per - r
        if h > n:
            h = n
        _emit_merge(ev, S, open_idx, t + i0 * ii, kind, it, k, tensor, page, h, 1, 0, 0, src, dst, value)
        page += h
        n -= h
        i0 += 1
    full = n // per
    if full > 0:
        _emit_merge(
            ev, S, open_idx, t + i0 * ii, kind, it, k, tensor, page, full * per, full, ii, 0, src, dst, value
        )
        page += full * per
        n -= full * per
        i0 += full
    if n > 0:
        _emit_merge(ev, S, open_idx, t + i0 * ii, kind, it, k, tensor, page, n, 1, 0, 0, src, dst, value)
    return S[S_NEV] < S[S_EV_PAUSE]


@_kernel_page
def _tick_row(emit, ev, S, open_idx, t, kind, it, k, tensor, page, n, src, dst, value):
    """A row of pages page .. page + n - 1 at time t, all in that tick, through the run's
    emitter (`_emit_ticked`'s one-tick case: it may extend the open row ev[S[open_idx]]).
    Returns the emitter's answer (the event buffer below its pause line)."""
    return emit(ev, S, open_idx, t, 0, _NO_TICKS, 0, kind, it, k, tensor, page, n, src, dst, value)


@_kernel
def _emit_run(ev, S, open_idx, t, kind, it, k, tensor, page, src, dst, value):
    """Emit one page, extending the open run at ev[S[open_idx]] when it continues it."""
    o = S[open_idx]
    if o >= 0:
        if (
            ev[o, 0] == t
            and ev[o, 1] == kind
            and ev[o, 4] == tensor
            and ev[o, 5] + ev[o, 6] == page
            and ev[o, 7] == src
            and ev[o, 8] == dst
            and ev[o, 9] == value
            and ev[o, 10] == 1
        ):
            ev[o, 6] += 1
            return
    S[open_idx] = _emit(ev, S, t, kind, it, k, tensor, page, 1, src, dst, value)


@_kernel
def _admit(stage, evict_ok, c_in, c_in_ssd, c_in_cpu, c_alloc, GPU_CAP, CPU_CAP, SSD_CAP, ALLOC_CAP):
    """Whether an allocating stage (§9.2) may take one more page this tick: prefetches are
    bounded by their link and the GPU link, demand and rescue fetches by the GPU link and the
    allocation budget, allocations by the budget; all need a frame or room to evict to."""
    if stage == _G_PRE_SSD:
        return c_in_ssd < SSD_CAP and c_in < GPU_CAP and evict_ok
    if stage == _G_PRE_CPU:
        return c_in_cpu < CPU_CAP and c_in < GPU_CAP and evict_ok
    if stage == _G_PF_ALLOC or stage == _G_PREALLOC or stage == _G_RS_ALLOC:
        return evict_ok and c_alloc < ALLOC_CAP
    return c_in < GPU_CAP and c_alloc < ALLOC_CAP and evict_ok


@_kernel
def _no_faults_queued(S):
    """Whether the three demand queues (faults from CPU, from SSD, allocations) are empty."""
    return (
        S[S_QT + Q_PF_CPU] == S[S_QH + Q_PF_CPU]
        and S[S_QT + Q_PF_SSD] == S[S_QH + Q_PF_SSD]
        and S[S_QT + Q_PF_ALLOC] == S[S_QH + Q_PF_ALLOC]
    )


@_kernel
def _live(st, e):
    """Whether LRU entry e (>= 0) is live, st being its page's state (int64)."""
    return (st & LOC_MASK) == IN_GPU and (st >> GEN_SHIFT) == (e & GEN_MASK)


@_kernel
def _eligible(st, e):
    """Whether LRU entry e (>= 0) is live and its page not in transfer (a victim)."""
    return (st & RES_MASK) == IN_GPU and (st >> GEN_SHIFT) == (e & GEN_MASK)


@_kernel
def _is_alive(tt, T, k):
    if tt[_u(T), TT_GLOBAL]:
        return True
    d = tt[_u(T), TT_DEATH]
    if d == -1:
        return k == tt[_u(T), TT_BIRTH]
    return tt[_u(T), TT_BIRTH] <= k and k < d


@_kernel
def _tpos(srt, i, p):
    """Position in srt of the tensor owning page p (see `tensor_of`), i being the position
    of the last lookup."""
    if srt[0, _u(i)] <= p and p < srt[0, _u(i + 1)]:
        return i
    lo = 0
    hi = srt.shape[1] - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if srt[0, _u(mid)] <= p:
            lo = mid
        else:
            hi = mid
    return lo


@_kernel
def _tensor_at(tt, srt, i, p):
    """The tensor owning page p (`_tpos` from position i): its position in srt, id, first and
    end page, and whether the current kernel requires it."""
    i = _tpos(srt, i, p)
    T = srt[1, _u(i)]
    return i, T, srt[0, _u(i)], srt[0, _u(i + 1)], tt[_u(T), TT_REQ]


@_kernel
def _lz_state(pstate, tt, T, p):
    """The state of page p of tensor T as the engine reads it (int64): its byte, or, for a
    byte 0 of a tensor whose states are lazy (TT_LZ, P_LAZY): F_TRANSFER from TT_LA on
    (queued to be allocated), IN_GPU below it (arrived), NOT_PRESENT (0) below TT_LD
    (dropped, DeepUM)."""
    st = np.int64(pstate[_u(p)])
    if st == 0 and tt[_u(T), TT_LZ] != 0 and p >= tt[_u(T), TT_LD]:
        st = np.int64(IN_GPU) if p < tt[_u(T), TT_LA] else np.int64(F_TRANSFER)
    return st


def lz_written(pstate: np.ndarray, tt: np.ndarray, copy: bool) -> np.ndarray:
    """The page states with those of the lazy tensors (TT_LZ, `LAZY_DEFAULT`) written out as
    the engine reads them (`_lz_state`): a byte 0 of such a tensor is IN_GPU from TT_LD to
    TT_LA and F_TRANSFER from TT_LA on. Plain NumPy, between the engine's pauses: in place (the tensors'
    TT_LZ cleared: the run's end), or in a copy when `copy` (the invariant check); the
    states themselves when no tensor's are lazy."""
    lazy = np.nonzero(tt[:, TT_LZ] != 0)[0]
    if not len(lazy):
        return pstate
    out = pstate.copy() if copy else pstate
    for T in lazy:
        end, la, ld = int(tt[T, TT_START] + tt[T, TT_NP]), int(tt[T, TT_LA]), int(tt[T, TT_LD])
        for a, b, v in ((ld, la, IN_GPU), (la, end, F_TRANSFER)):
            seg = out[a:b]
            seg[seg == 0] = v
        if not copy:
            tt[T, TT_LZ] = 0
    return out


@_kernel
def _same_bits(pstate, p, n, v, m):
    """How many of pages p, p+1, ... (at most n) have the state bits m equal to v (v within m),
    from the first on. Eight states a word (the states' bytes read as uint64 words, each
    byte's bits compared at once): eight words a step without a branch, then a word a step,
    the first word that differs and the last pages page by page (a scan of 8 to 63 pages
    went page by page before: 222,546 of a BERT-128 G10 run's 240,793 calls scan 8 to 15)."""
    j = 0
    if n >= 8:
        mb = np.uint64(m) * _BYTES_ONE
        pat = np.uint64(v) * _BYTES_ONE
        nw = n // 8
        w = pstate[p : p + nw * 8].view(np.uint64)
        i = 0
        while i + _SAME_WORDS <= nw:
            acc = np.uint64(0)
            for q in range(i, i + _SAME_WORDS):
                acc |= w[_u(q)] ^ pat
            if acc & mb:
                break
            i += _SAME_WORDS
        while i < nw and ((w[_u(i)] ^ pat) & mb) == 0:
            i += 1
        j = i * 8
    while j < n and (np.int64(pstate[_u(p + j)]) & m) == v:
        j += 1
    return j


@_kernel
def _rp_canon(pstate, p, n, loc):
    """How many of pages p, p+1, ... (at most n) lie at loc, from the first on (`_same_bits`:
    the byte-wise loop it replaced was 15 % of a SENet154-1024 DeepUM+ run)."""
    return _same_bits(pstate, p, n, loc, LOC_MASK)


@_kernel
def _rp_canon_t(pstate, tt, T, p, n, loc):
    """`_rp_canon` of pages p, p+1, ... of tensor T: where T's states are lazy with no page
    come back (TT_LZ 1), its bytes from TT_LA on are 0 (queued, not arrived: nothing writes
    them), so those pages lie at NOT_PRESENT (0) without a read of their states."""
    if tt[_u(T), TT_LZ] == 1 and p >= tt[_u(T), TT_LA]:
        if loc != 0:
            return np.int64(0)
        j = min(n, tt[_u(T), TT_START] + tt[_u(T), TT_NP] - p)
        if j < n:
            j += _rp_canon(pstate, p + j, n - j, loc)
        return j
    return _rp_canon(pstate, p, n, loc)
