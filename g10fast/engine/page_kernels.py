"""Numba kernels of the G10-compatible page-level UVM engine (simulator spec §4–§9, §13).

Everything here takes plain arrays and scalars. The Python wrapper in `page.py` validates
inputs, sizes the arrays and drives `run_engine`, which is resumable: it returns
`ST_PAUSE` when an output buffer needs draining or a queue needs room, with all of its
state in the arrays it was given, and continues where it stopped when called again.

State layout (struct of arrays):

* `pstate[V] uint8`, one byte per virtual page: bits 0-1 location (NOT_PRESENT, IN_SSD,
  IN_CPU, IN_GPU), bit 2 in_transfer, bit 3 member of the wait set, bits 4-7 an LRU
  generation used to recognise stale LRU entries.
* The "LRU" list (O-6: FIFO by GPU arrival) is an append-only array of page ids with
  tombstones, compacted in place when full. An entry is live iff its page is IN_GPU and
  its recorded generation equals the page's. A page removed where its slot is unknown
  (pre-evict, pre-deallocation) bumps its generation; on wrap-around the list is compacted
  first so that no stale entry can be mistaken for a live one.
* Eight FIFO queues of page runs `(first page, count)` in ring buffers.
* Scalars in `S int64[NS]` (indices below); per-tick counters in `C int64[8]`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ---- page locations (G10's PageLocation enum) ----
NOT_PRESENT = 0
IN_SSD = 1
IN_CPU = 2
IN_GPU = 3
NOT_KNOWN = 4
IN_GPU_LEAST = 5

LOC_MASK = 3
F_TRANSFER = 4
F_WAIT = 8
GEN_SHIFT = 4

# ---- queues ----
Q_PF_CPU = 0
Q_PF_SSD = 1
Q_PF_ALLOC = 2
Q_PREFETCH_SSD = 3
Q_PREFETCH_CPU = 4
Q_PREALLOC = 5
Q_PREEVICT_SSD = 6
Q_PREEVICT_CPU = 7
NQ = 8

# ---- integer parameters P[...] ----
P_G = 0            # GPU frames
P_HOST = 1         # host memory line, pages
P_II = 2           # batcher tick, cycles
P_GPU_CAP = 3
P_CPU_CAP = 4
P_SSD_CAP = 5
P_ALLOC_CAP = 6
P_NUM_ITER = 7
P_USE_PREFETCH = 8
P_DEEPUM = 9       # migration + eviction policy DEEPUM
P_DEGREE = 10      # prefetch_degree
P_IS_UVM = 11
P_TRACE = 12       # write events
P_F_HZ = 13        # uint64 GPU frequency in Hz (integer, for O-1)
P_LSYS = 14        # int(system_latency_us)
P_LSSD = 15        # int(SSD_latency_us)
NP_INT = 16

# ---- float parameters F[...] ----
F_GPU_BPC = 0
F_SSD_BPC = 1
F_FREQ = 2         # f as double
NP_FLOAT = 3

# ---- scalar state S[...] ----
S_KB_PENDING = 0
S_KB_TIME = 1
S_KB_SEQ = 2
S_KB_KERNEL = 3
S_KB_NEWITER = 4   # the pending kernel event starts a new iteration
S_TICK_TIME = 5
S_TICK_SEQ = 6
S_SEQ = 7
S_CUR_KERNEL = 8
S_CUR_ITER = 9
S_RESCHED = 10
S_R_FIRST = 11
S_R_PFTIME = 12
S_R_STARTED = 13
S_R_INTR = 14
S_R_CPU = 15
S_R_SSD = 16
S_R_NP = 17
S_GPU_USED = 18
S_HOST_USED = 19
S_WAIT = 20
S_XFER = 21        # data_transferring
S_HINT = 22        # hint cursor
S_LRU_HEAD = 23
S_LRU_TAIL = 24
S_LRU_CUR = 25     # LRU cursor ("suggested LRU base"); == tail means END
S_NSTAT = 26
S_NBND = 27
S_NEV = 28
S_DONE = 29
S_ERROR = 30
S_ERR_A = 31
S_ERR_B = 32
S_IN_OPEN = 33     # index of the last incoming event (run merging), -1 none
S_OUT_OPEN = 34
S_LIVE_WARN = 35   # "PF EVICTING LIVING PAGE" warnings
S_DEEPUM_END = 36  # DeepUM sticky END (O-15)
S_AMP_RAW = 37
S_AMP_ALIGNED = 38
NS = 48

# per-tick counters C[...]
C_IN = 0
C_IN_SSD = 1
C_IN_CPU = 2
C_OUT = 3
C_OUT_SSD = 4
C_OUT_CPU = 5
C_ALLOC = 6
C_FFS = 7          # forced_fetch_src
C_FED = 8          # forced_evc_dest
NC = 9

# run statuses
ST_DONE = 0
ST_PAUSE = 1
ST_ERROR = 2

# error codes (S[S_ERROR])
E_NONE = 0
E_QUEUE_OVERFLOW = 1
E_NO_VICTIM = 2
E_HOST_OVERFLOW = 3
E_DEAD_LIVE_EVICT = 4
E_REFAULT_AFTER_RESUME = 5
E_BUFFER_OVERFLOW = 6

# event kinds (g10fast.trace)
EV_KERNEL = 0
EV_FAULT = 1
EV_FETCH = 2
EV_ALLOC = 3
EV_EVICT = 4
EV_HINT = 5
EV_DEALLOC = 6
EV_TRANSFER = 7
EV_COLS = 10

# kernel statistics columns
KS_ITER = 0
KS_KERNEL = 1
KS_START = 2
KS_END = 3
KS_INTR = 4
KS_CPU = 5
KS_SSD = 6
KS_NP = 7
KS_HOST = 8
KS_GPU = 9
KS_COLS = 10

# per-iteration pcie columns
PC_ALLOC = 0
PC_IN = 1
PC_IN_SSD = 2
PC_IN_CPU = 3
PC_OUT = 4
PC_OUT_SSD = 5
PC_OUT_CPU = 6
PC_COLS = 7


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _loc(pstate, p):
    return pstate[p] & LOC_MASK


@njit(cache=True, inline="always")
def _set_loc(pstate, p, loc):
    pstate[p] = (pstate[p] & ~LOC_MASK) | loc


@njit(cache=True, inline="always")
def tensor_of(sorted_start, sorted_tensor, p):
    """Tensor owning page p: the last (non-empty) tensor whose first page is <= p.

    sorted_start has one extra sentinel entry (the page count) at the end; the last
    lookup is cached in the sentinel slot of sorted_tensor's spare cells."""
    c = sorted_tensor.shape[0] - 1
    i = sorted_tensor[c]
    if sorted_start[i] <= p and p < sorted_start[i + 1]:
        return sorted_tensor[i]
    lo = 0
    hi = c
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if sorted_start[mid] <= p:
            lo = mid
        else:
            hi = mid
    sorted_tensor[c] = lo
    return sorted_tensor[lo]


@njit(cache=True)
def _q_len(qh, qt, q):
    return qt[q] - qh[q]


@njit(cache=True)
def _q_push(qs, qc, qh, qt, q, p, n, S):
    """Append pages p..p+n-1 to queue q, merging with the last run when contiguous."""
    cap = qs.shape[1]
    if qt[q] > qh[q]:
        last = (qt[q] - 1) % cap
        if qs[q, last] + qc[q, last] == p:
            qc[q, last] += n
            return
    if qt[q] - qh[q] >= cap:
        S[S_ERROR] = E_QUEUE_OVERFLOW
        return
    slot = qt[q] % cap
    qs[q, slot] = p
    qc[q, slot] = n
    qt[q] += 1


@njit(cache=True)
def _q_front(qs, qh, q):
    return qs[q, qh[q] % qs.shape[1]]


@njit(cache=True)
def _q_pop(qs, qc, qh, q):
    slot = qh[q] % qs.shape[1]
    if qc[q, slot] > 1:
        qs[q, slot] += 1
        qc[q, slot] -= 1
    else:
        qh[q] += 1


@njit(cache=True)
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
    S[S_NEV] = n + 1
    return n


@njit(cache=True)
def _emit_run(ev, S, open_idx, t, kind, it, k, tensor, page, src, dst, value):
    """Emit one page, extending the open run at ev[S[open_idx]] when it continues it."""
    o = S[open_idx]
    if o >= 0:
        if (ev[o, 0] == t and ev[o, 1] == kind and ev[o, 4] == tensor
                and ev[o, 5] + ev[o, 6] == page and ev[o, 7] == src and ev[o, 8] == dst
                and ev[o, 9] == value):
            ev[o, 6] += 1
            return
    S[open_idx] = _emit(ev, S, t, kind, it, k, tensor, page, 1, src, dst, value)


# ----------------------------------------------------------------------------------------
# LRU list (FIFO by arrival, O-6)
# ----------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _lru_live(lru_page, lru_gen, pstate, s):
    p = lru_page[s]
    if p < 0:
        return False
    st = pstate[p]
    return (st & LOC_MASK) == IN_GPU and (st >> GEN_SHIFT) == lru_gen[s]


@njit(cache=True)
def _lru_compact(lru_page, lru_gen, pstate, S):
    head = S[S_LRU_HEAD]
    tail = S[S_LRU_TAIL]
    cur = S[S_LRU_CUR]
    n = 0
    new_cur = -1
    for s in range(head, tail):
        if s == cur and new_cur < 0:
            new_cur = n
        if _lru_live(lru_page, lru_gen, pstate, s):
            lru_page[n] = lru_page[s]
            lru_gen[n] = lru_gen[s]
            n += 1
    if new_cur < 0:
        new_cur = n
    S[S_LRU_HEAD] = 0
    S[S_LRU_TAIL] = n
    S[S_LRU_CUR] = new_cur


@njit(cache=True)
def _lru_append(lru_page, lru_gen, pstate, S, p):
    if S[S_LRU_TAIL] >= lru_page.shape[0]:
        _lru_compact(lru_page, lru_gen, pstate, S)
    t = S[S_LRU_TAIL]
    cur_at_end = S[S_LRU_CUR] == t
    lru_page[t] = p
    lru_gen[t] = pstate[p] >> GEN_SHIFT
    S[S_LRU_TAIL] = t + 1
    if cur_at_end:
        # A std::list cursor at END stays END when a page is appended; an index cursor
        # equal to the tail would otherwise point at the new element.
        S[S_LRU_CUR] = t + 1


@njit(cache=True)
def _lru_remove_unknown(lru_page, lru_gen, pstate, S, p):
    """Remove page p (IN_GPU) from the list where its slot is unknown: bump its generation."""
    cur = S[S_LRU_CUR]
    if cur < S[S_LRU_TAIL] and lru_page[cur] == p and _lru_live(lru_page, lru_gen, pstate, cur):
        S[S_LRU_CUR] = S[S_LRU_HEAD]          # removing the cursor's page resets it (§8.1)
    g = ((pstate[p] >> GEN_SHIFT) + 1) & 15
    pstate[p] = (pstate[p] & 15) | (g << GEN_SHIFT)
    if g == 0:
        # generation wrapped: drop every stale entry before an old one could look live
        _lru_compact(lru_page, lru_gen, pstate, S)


@njit(cache=True)
def _lru_advance_head(lru_page, lru_gen, pstate, S):
    h = S[S_LRU_HEAD]
    t = S[S_LRU_TAIL]
    cur = S[S_LRU_CUR]
    while h < t and not _lru_live(lru_page, lru_gen, pstate, h):
        h += 1
    S[S_LRU_HEAD] = h
    if cur < h:
        S[S_LRU_CUR] = h


@njit(cache=True)
def _lru_first_from(lru_page, lru_gen, pstate, s, skip_transfer):
    t_end = lru_page.shape[0]
    while True:
        if s >= t_end:
            return s
        p = lru_page[s]
        if p >= 0 and _lru_live(lru_page, lru_gen, pstate, s):
            if not (skip_transfer and (pstate[p] & F_TRANSFER)):
                return s
        s += 1


# ----------------------------------------------------------------------------------------
# victim selection (§8)
# ----------------------------------------------------------------------------------------

@njit(cache=True)
def _select_victim_lru(lru_page, lru_gen, pstate, S):
    """LRU (§8.1): first non-in-transfer page from the cursor, else from the head.

    Returns the slot, or -1. Entries before the cursor are never eligible (they were
    in transfer when passed, and such pages only leave the list), so one scan from the
    cursor is equivalent to the artifact's scan-then-rescan."""
    tail = S[S_LRU_TAIL]
    s = S[S_LRU_CUR]
    if s < S[S_LRU_HEAD]:
        s = S[S_LRU_HEAD]
    while s < tail:
        p = lru_page[s]
        if p >= 0 and _lru_live(lru_page, lru_gen, pstate, s) and not (pstate[p] & F_TRANSFER):
            S[S_LRU_CUR] = s + 1
            return s
        s += 1
    s = S[S_LRU_HEAD]
    while s < tail:
        p = lru_page[s]
        if p >= 0 and _lru_live(lru_page, lru_gen, pstate, s) and not (pstate[p] & F_TRANSFER):
            S[S_LRU_CUR] = s + 1
            return s
        s += 1
    return -1


@njit(cache=True)
def _select_victim_deepum(lru_page, lru_gen, pstate, S, in_window, sorted_start,
                          sorted_tensor, is_pf):
    """DeepUM (§8.2). Non-PF: from the cursor, skip window tensors; END is sticky (O-15).
    PF: the first non-in-transfer page from the head, ignoring the window."""
    tail = S[S_LRU_TAIL]
    if not is_pf:
        if S[S_DEEPUM_END] != 0:
            return -1
        s = S[S_LRU_CUR]
        if s < S[S_LRU_HEAD]:
            s = S[S_LRU_HEAD]
        while s < tail:
            p = lru_page[s]
            if p >= 0 and _lru_live(lru_page, lru_gen, pstate, s):
                if not in_window[tensor_of(sorted_start, sorted_tensor, p)]:
                    S[S_LRU_CUR] = s + 1
                    return s
            s += 1
        S[S_LRU_CUR] = tail
        S[S_DEEPUM_END] = 1
        return -1
    s = S[S_LRU_HEAD]
    while s < tail:
        p = lru_page[s]
        if p >= 0 and _lru_live(lru_page, lru_gen, pstate, s) and not (pstate[p] & F_TRANSFER):
            if S[S_LRU_CUR] == s:
                S[S_LRU_CUR] = s + 1
            return s
        s += 1
    return -1


# ----------------------------------------------------------------------------------------
# page operations (§9.3)
# ----------------------------------------------------------------------------------------

@njit(cache=True)
def _record_evict(P, C, S, dest, n):
    if n == 0:
        return
    if dest == IN_SSD:
        C[C_OUT_SSD] += n
        C[C_OUT] += n
        if C[C_OUT_SSD] == P[P_SSD_CAP]:
            C[C_FED] = IN_CPU
    else:
        C[C_OUT_CPU] += n
        C[C_OUT] += n
        if C[C_OUT_CPU] == P[P_CPU_CAP] or S[S_HOST_USED] == P[P_HOST]:
            C[C_FED] = IN_SSD


@njit(cache=True)
def _record_fetch(P, C, src):
    if src == IN_SSD:
        C[C_IN_SSD] += 1
        if C[C_IN_SSD] == P[P_SSD_CAP]:
            C[C_FFS] = IN_CPU
    else:
        C[C_IN_CPU] += 1
        if C[C_IN_CPU] == P[P_CPU_CAP]:
            C[C_FFS] = IN_SSD
    C[C_ALLOC] += 1
    C[C_IN] += 1


@njit(cache=True)
def _is_alive(tglobal, birth, death, T, k):
    if tglobal[T]:
        return True
    if death[T] == -1:
        return k == birth[T]
    return birth[T] <= k and k < death[T]


@njit(cache=True)
def _evict(v, slot, dest, is_pf, t, pstate, req, tglobal, birth, death, sorted_start,
           sorted_tensor, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev):
    """Move GPU page v to dest (§9.3 evict). slot >= 0: its LRU slot, else unknown."""
    T = tensor_of(sorted_start, sorted_tensor, v)
    k = S[S_CUR_KERNEL]
    if dest == NOT_PRESENT and _is_alive(tglobal, birth, death, T, k):
        if is_pf:
            S[S_LIVE_WARN] += 1
        else:
            S[S_ERROR] = E_DEAD_LIVE_EVICT
    n = 0
    if dest == IN_CPU:
        if S[S_HOST_USED] >= P[P_HOST]:
            S[S_ERROR] = E_HOST_OVERFLOW
            S[S_ERR_A] = v
            return
        S[S_HOST_USED] += 1
        n = 1
    elif dest == IN_SSD:
        n = 1
    if slot >= 0:
        lru_page[slot] = -1
    else:
        _lru_remove_unknown(lru_page, lru_gen, pstate, S, v)
    _set_loc(pstate, v, dest)
    S[S_GPU_USED] -= 1
    _record_evict(P, C, S, dest, n)
    if P[P_TRACE]:
        _emit_run(ev, S, S_OUT_OPEN, t, EV_EVICT, S[S_CUR_ITER], k, T, v, IN_GPU, dest,
                  1 if slot >= 0 else 0)
    if req[T]:
        if dest == IN_CPU:
            _q_push(qs, qc, qh, qt, Q_PF_CPU, v, 1, S)
        elif dest == IN_SSD:
            _q_push(qs, qc, qh, qt, Q_PF_SSD, v, 1, S)
        else:
            _q_push(qs, qc, qh, qt, Q_PF_ALLOC, v, 1, S)
        pstate[v] |= F_TRANSFER
        if not (pstate[v] & F_WAIT):
            pstate[v] |= F_WAIT
            S[S_WAIT] += 1
    else:
        pstate[v] &= ~F_TRANSFER


@njit(cache=True)
def _alloc_page(p, is_pf, is_fetch, t, pstate, req, tglobal, birth, death, sorted_start,
                sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev):
    """Give page p a GPU frame (§9.3 alloc_page). Returns 1, or -1 if DeepUM found no victim."""
    src = pstate[p] & LOC_MASK
    if S[S_GPU_USED] >= P[P_G]:
        T = tensor_of(sorted_start, sorted_tensor, p)
        pf = is_pf or req[T] != 0
        if P[P_DEEPUM]:
            slot = _select_victim_deepum(lru_page, lru_gen, pstate, S, in_window, sorted_start,
                                         sorted_tensor, pf)
            if slot < 0:
                if pf:
                    S[S_ERROR] = E_NO_VICTIM
                return -1
            v = lru_page[slot]
            vt = tensor_of(sorted_start, sorted_tensor, v)
            dest = IN_CPU if _is_alive(tglobal, birth, death, vt, S[S_CUR_KERNEL]) else NOT_PRESENT
        else:
            slot = _select_victim_lru(lru_page, lru_gen, pstate, S)
            if slot < 0:
                S[S_ERROR] = E_NO_VICTIM
                return -1
            v = lru_page[slot]
            dest = IN_CPU
        if dest != NOT_PRESENT and C[C_FED] != NOT_KNOWN:
            dest = C[C_FED]
        _evict(v, slot, dest, True, t, pstate, req, tglobal, birth, death, sorted_start,
               sorted_tensor, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        if S[S_ERROR] != E_NONE:
            return -1
    if src == IN_CPU:
        S[S_HOST_USED] -= 1
        if C[C_FED] == IN_SSD:
            C[C_FED] = NOT_KNOWN
    S[S_GPU_USED] += 1
    _set_loc(pstate, p, IN_GPU)
    _lru_append(lru_page, lru_gen, pstate, S, p)
    pstate[p] &= ~F_TRANSFER
    if pstate[p] & F_WAIT:
        pstate[p] &= ~F_WAIT
        S[S_WAIT] -= 1
    if P[P_TRACE]:
        T = tensor_of(sorted_start, sorted_tensor, p)
        _emit_run(ev, S, S_IN_OPEN, t, EV_FETCH if is_fetch else EV_ALLOC, S[S_CUR_ITER],
                  S[S_CUR_KERNEL], T, p, src, IN_GPU, 1 if is_pf else 0)
    return 1


# ----------------------------------------------------------------------------------------
# batcher (§9.2)
# ----------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _evict_ok(P, C, S):
    if S[S_GPU_USED] < P[P_G]:
        return True
    return C[C_OUT] < P[P_GPU_CAP] and (S[S_HOST_USED] < P[P_HOST] or C[C_OUT_SSD] < P[P_SSD_CAP])


@njit(cache=True)
def _stage_preevict(t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor,
                    lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev):
    q = Q_PREEVICT_SSD
    while C[C_OUT_SSD] < P[P_SSD_CAP] and C[C_OUT] < P[P_GPU_CAP] and qt[q] > qh[q]:
        v = _q_front(qs, qh, q)
        dest = C[C_FED] if C[C_FED] != NOT_KNOWN else IN_SSD
        _evict(v, -1, dest, False, t, pstate, req, tglobal, birth, death, sorted_start,
               sorted_tensor, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _q_pop(qs, qc, qh, q)
        if S[S_ERROR] != E_NONE:
            return
    q = Q_PREEVICT_CPU
    while qt[q] > qh[q] and C[C_OUT] < P[P_GPU_CAP]:
        host_full = S[S_HOST_USED] == P[P_HOST]
        if not ((host_full and C[C_OUT_SSD] < P[P_SSD_CAP])
                or (not host_full and C[C_OUT_CPU] < P[P_CPU_CAP])):
            break
        v = _q_front(qs, qh, q)
        dest = C[C_FED] if C[C_FED] != NOT_KNOWN else IN_CPU
        _evict(v, -1, dest, False, t, pstate, req, tglobal, birth, death, sorted_start,
               sorted_tensor, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _q_pop(qs, qc, qh, q)
        if S[S_ERROR] != E_NONE:
            return


@njit(cache=True)
def _stage_pf_fetch(q, src, t, pstate, req, tglobal, birth, death, sorted_start,
                    sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev):
    while (C[C_IN] < P[P_GPU_CAP] and C[C_ALLOC] < P[P_ALLOC_CAP] and _evict_ok(P, C, S)
           and qt[q] > qh[q]):
        p = _q_front(qs, qh, q)
        _q_pop(qs, qc, qh, q)
        r = _alloc_page(p, True, True, t, pstate, req, tglobal, birth, death, sorted_start,
                        sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        if r < 0:
            return
        _record_fetch(P, C, src)
        if C[C_FFS] != NOT_KNOWN and C[C_FFS] != src:
            return


@njit(cache=True)
def _stage_alloc(q, is_pf, t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor,
                 in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev):
    while _evict_ok(P, C, S) and C[C_ALLOC] < P[P_ALLOC_CAP] and qt[q] > qh[q]:
        p = _q_front(qs, qh, q)
        r = _alloc_page(p, is_pf, False, t, pstate, req, tglobal, birth, death, sorted_start,
                        sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        if r < 0:
            return
        C[C_ALLOC] += 1
        _q_pop(qs, qc, qh, q)


@njit(cache=True)
def _stage_prefetch(t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor,
                    in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev):
    q = Q_PREFETCH_SSD
    while (C[C_IN_SSD] < P[P_SSD_CAP] and C[C_IN] < P[P_GPU_CAP] and _evict_ok(P, C, S)
           and qt[q] > qh[q]):
        p = _q_front(qs, qh, q)
        loc = pstate[p] & LOC_MASK
        if loc == IN_SSD:
            r = _alloc_page(p, False, True, t, pstate, req, tglobal, birth, death, sorted_start,
                            sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S,
                            ev)
            if r < 0:
                return
            _record_fetch(P, C, IN_SSD)
        elif loc == IN_CPU:
            _q_push(qs, qc, qh, qt, Q_PREFETCH_CPU, p, 1, S)
        _q_pop(qs, qc, qh, q)
    q = Q_PREFETCH_CPU
    while (C[C_IN_CPU] < P[P_CPU_CAP] and C[C_IN] < P[P_GPU_CAP] and _evict_ok(P, C, S)
           and qt[q] > qh[q]):
        p = _q_front(qs, qh, q)
        loc = pstate[p] & LOC_MASK
        if loc == IN_CPU:
            r = _alloc_page(p, False, True, t, pstate, req, tglobal, birth, death, sorted_start,
                            sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S,
                            ev)
            if r < 0:
                return
            _record_fetch(P, C, IN_CPU)
        elif loc == IN_SSD:
            _q_push(qs, qc, qh, qt, Q_PREFETCH_SSD, p, 1, S)
        _q_pop(qs, qc, qh, q)


@njit(cache=True)
def _batcher(t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor, in_window,
             lru_page, lru_gen, qs, qc, qh, qt, P, C, S, pcie, bnd, ev):
    for i in range(NC):
        C[i] = 0
    C[C_FFS] = NOT_KNOWN
    C[C_FED] = NOT_KNOWN
    S[S_IN_OPEN] = -1
    S[S_OUT_OPEN] = -1
    busy = False
    for q in range(NQ):
        if qt[q] > qh[q]:
            busy = True
            break
    it = S[S_CUR_ITER]
    if busy:
        if S[S_HOST_USED] == P[P_HOST]:
            C[C_FED] = IN_SSD
        _stage_preevict(t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor,
                        lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _stage_pf_fetch(Q_PF_SSD, IN_SSD, t, pstate, req, tglobal, birth, death, sorted_start,
                        sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _stage_pf_fetch(Q_PF_CPU, IN_CPU, t, pstate, req, tglobal, birth, death, sorted_start,
                        sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _stage_alloc(Q_PF_ALLOC, True, t, pstate, req, tglobal, birth, death, sorted_start,
                     sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _stage_prefetch(t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor,
                        in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        _stage_alloc(Q_PREALLOC, False, t, pstate, req, tglobal, birth, death, sorted_start,
                     sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, ev)
        if (P[P_DEEPUM] and S[S_RESCHED] and not S[S_R_STARTED] and S[S_WAIT] > 0
                and C[C_IN] + C[C_OUT] == 0):
            # DeepUM "lock-up" rescue: drain prefetch/prealloc queues as faults (§9.2)
            _stage_pf_fetch(Q_PREFETCH_SSD, IN_SSD, t, pstate, req, tglobal, birth, death,
                            sorted_start, sorted_tensor, in_window, lru_page, lru_gen, qs, qc,
                            qh, qt, P, C, S, ev)
            _stage_pf_fetch(Q_PREFETCH_CPU, IN_CPU, t, pstate, req, tglobal, birth, death,
                            sorted_start, sorted_tensor, in_window, lru_page, lru_gen, qs, qc,
                            qh, qt, P, C, S, ev)
            _stage_alloc(Q_PREALLOC, True, t, pstate, req, tglobal, birth, death, sorted_start,
                         sorted_tensor, in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S,
                         ev)
        if not S[S_XFER]:
            n = S[S_NBND]
            bnd[n, 0] = it
            bnd[n, 1] = t
            bnd[n, 2] = 1
            S[S_NBND] = n + 1
            S[S_XFER] = 1
            if P[P_TRACE]:
                _emit(ev, S, t, EV_TRANSFER, it, S[S_CUR_KERNEL], -1, -1, 0, 0, 0, 1)
    elif S[S_XFER]:
        n = S[S_NBND]
        bnd[n, 0] = it
        bnd[n, 1] = t
        bnd[n, 2] = 0
        S[S_NBND] = n + 1
        S[S_XFER] = 0
        if P[P_TRACE]:
            _emit(ev, S, t, EV_TRANSFER, it, S[S_CUR_KERNEL], -1, -1, 0, 0, 0, 0)
    if C[C_IN] > 0 or C[C_OUT] > 0:
        pcie[it, PC_ALLOC] += C[C_ALLOC]
        pcie[it, PC_IN] += C[C_IN]
        pcie[it, PC_IN_SSD] += C[C_IN_SSD]
        pcie[it, PC_IN_CPU] += C[C_IN_CPU]
        pcie[it, PC_OUT] += C[C_OUT]
        pcie[it, PC_OUT_SSD] += C[C_OUT_SSD]
        pcie[it, PC_OUT_CPU] += C[C_OUT_CPU]
    if (S[S_RESCHED] and qt[Q_PF_ALLOC] == qh[Q_PF_ALLOC] and qt[Q_PF_CPU] == qh[Q_PF_CPU]
            and qt[Q_PF_SSD] == qh[Q_PF_SSD] and S[S_WAIT] == 0):
        # §9.6: resume the waiting kernel at this tick
        S[S_KB_PENDING] = 1
        S[S_KB_TIME] = t
        S[S_KB_SEQ] = S[S_SEQ]
        S[S_SEQ] += 1
        S[S_KB_KERNEL] = S[S_CUR_KERNEL]
        S[S_KB_NEWITER] = 0
        S[S_R_STARTED] = 1


# ----------------------------------------------------------------------------------------
# kernel begin (§6) and the stall model (§7)
# ----------------------------------------------------------------------------------------

@njit(cache=True)
def page_fault_time(exec_c, inpf_c, pf_c, f_int, gpu_bpc, ssd_bpc, freq, l_sys, l_ssd,
                    cpu_in, ssd_in, np_in, cpu_out, ssd_out, np_out, total_in, total_out):
    """exec + ΔPF in cycles, §7, evaluated in IEEE double in the artifact's order (O-1..O-4)."""
    F_in = cpu_in + ssd_in + np_in
    F_out = cpu_out + ssd_out + np_out
    r_in = F_in / total_in if total_in != 0 else 0.0
    r_out = F_out / total_out if total_out != 0 else 0.0
    r_in_ssd = ssd_in / F_in if F_in != 0 else 0.0
    r_out_ssd = ssd_out / F_out if F_out != 0 else 0.0
    s_in = float(total_in * 4096)
    s_out = float(total_out * 4096)
    t00 = (pf_c // f_int) * 1000            # O-1: integer division by the clock in Hz
    t10 = (inpf_c // f_int) * 1000
    t11 = (exec_c // f_int) * 1000
    bw_pcie = gpu_bpc * freq / 1000.0
    bw_ssd = ssd_bpc * freq / 1000.0
    if t00 <= t11:
        t00 = t11
    if t10 < t11:
        t10 = t11
    if t10 > t00:
        t10 = t00
    bw_cpu_in = 1063004400.0 if t00 == t10 else s_in / float(t00 - t10)      # O-2
    bw_cpu_out = 1063004400.0 if t10 == t11 else s_out / float(t10 - t11)    # O-4 pairing
    bw_ssd_in = bw_cpu_in * l_sys / (l_sys + l_ssd)
    if bw_ssd_in > bw_ssd:
        bw_ssd_in = bw_ssd
    bw_ssd_out = bw_cpu_out * l_sys / (l_sys + l_ssd)
    if bw_ssd_out > bw_ssd:
        bw_ssd_out = bw_ssd
    if r_in_ssd == 0:
        bw_ssd_in = 0.0
    if r_out_ssd == 0:
        bw_ssd_out = 0.0
    cap = bw_pcie - max(bw_ssd_in, bw_ssd_out)
    if bw_cpu_in > cap:
        bw_cpu_in = cap
    if bw_cpu_out > cap:
        bw_cpu_out = cap
    t_ssd_in = 0.0 if r_in_ssd == 0 else r_in * r_in_ssd * s_in / bw_ssd_in
    t_ssd_out = 0.0 if r_out_ssd == 0 else r_out * r_out_ssd * s_out / bw_ssd_out
    t_cpu = r_in * (1 - r_in_ssd) * s_in / bw_cpu_in + r_out * (1 - r_out_ssd) * s_out / bw_cpu_out
    a = t_ssd_in + t_ssd_out
    dt_ms = t_cpu if a < t_cpu else a
    d = dt_ms / 1000.0 * freq
    if not (d < 1.8e19):          # O-11: inf/NaN → undefined in C++; saturate
        d = 1.8e19
    return exec_c + np.int64(np.uint64(d))


@njit(cache=True)
def _apply_hint(h, t, h_tensor, h_from, h_to, tstart, tnp, pstate, lru_page, lru_gen,
                qs, qc, qh, qt, P, S, ev):
    T = h_tensor[h]
    to = h_to[h]
    fr = h_from[h]
    p0 = tstart[T]
    n = tnp[T]
    queued = 0
    if to == IN_GPU and fr != IN_GPU_LEAST:
        for p in range(p0, p0 + n):
            st = pstate[p]
            if st & F_TRANSFER:
                continue
            loc = st & LOC_MASK
            if loc == NOT_PRESENT:
                _q_push(qs, qc, qh, qt, Q_PREALLOC, p, 1, S)
            elif loc == IN_SSD:
                _q_push(qs, qc, qh, qt, Q_PREFETCH_SSD, p, 1, S)
            elif loc == IN_CPU:
                _q_push(qs, qc, qh, qt, Q_PREFETCH_CPU, p, 1, S)
            else:
                continue
            pstate[p] = st | F_TRANSFER
            queued += 1
    elif to == IN_SSD or to == IN_CPU:
        q = Q_PREEVICT_SSD if to == IN_SSD else Q_PREEVICT_CPU
        for p in range(p0, p0 + n):
            st = pstate[p]
            if (st & F_TRANSFER) or (st & LOC_MASK) != IN_GPU:
                continue
            _q_push(qs, qc, qh, qt, q, p, 1, S)
            pstate[p] = st | F_TRANSFER
            queued += 1
    elif to == NOT_PRESENT:
        for p in range(p0, p0 + n):
            st = pstate[p]
            if st & F_TRANSFER:          # O-23: in-transfer pages are never freed
                continue
            loc = st & LOC_MASK
            if loc == IN_GPU:
                S[S_GPU_USED] -= 1
                _lru_remove_unknown(lru_page, lru_gen, pstate, S, p)
            elif loc == IN_CPU:
                S[S_HOST_USED] -= 1
            if loc != NOT_PRESENT:
                queued += 1
                if P[P_TRACE]:
                    _emit_run(ev, S, S_OUT_OPEN, t, EV_DEALLOC, S[S_CUR_ITER], S[S_CUR_KERNEL],
                              T, p, loc, NOT_PRESENT, 0)
            _set_loc(pstate, p, NOT_PRESENT)
    # Pin / Unpin (TOLERANT only) are rejected by the Python wrapper.
    if P[P_TRACE]:
        _emit(ev, S, t, EV_HINT, S[S_CUR_ITER], S[S_CUR_KERNEL], T, p0, queued, fr, to, 0)


@njit(cache=True)
def _fault_scan(T, is_input, t, tstart, tnp, pstate, qs, qc, qh, qt, S, cnt, ev, trace, k, it):
    """§6.3 fault_scan of one tensor; cnt = [intr, cpu_in, ssd_in, np_in, cpu_out, ssd_out,
    np_out, total_in, total_out]."""
    p0 = tstart[T]
    n = tnp[T]
    if is_input:
        cnt[7] += n
    else:
        cnt[8] += n
    o = 0 if is_input else 3
    run_start = -1
    run_len = 0
    run_loc = -1
    ssd = 0
    for p in range(p0, p0 + n):
        st = pstate[p]
        if st & F_TRANSFER:
            cnt[0] += 1
            loc = -1
        else:
            loc = st & LOC_MASK
            if loc == NOT_PRESENT:
                cnt[3 + o] += 1
                _q_push(qs, qc, qh, qt, Q_PF_ALLOC, p, 1, S)
            elif loc == IN_SSD:
                cnt[2 + o] += 1
                ssd += 1
                _q_push(qs, qc, qh, qt, Q_PF_SSD, p, 1, S)
            elif loc == IN_CPU:
                cnt[1 + o] += 1
                _q_push(qs, qc, qh, qt, Q_PF_CPU, p, 1, S)
            else:
                loc = -1
            if loc >= 0:
                pstate[p] = st | F_TRANSFER
        if trace:
            if loc >= 0 and loc == run_loc and run_start + run_len == p:
                run_len += 1
            else:
                if run_len > 0:
                    _emit(ev, S, t, EV_FAULT, it, k, T, run_start, run_len, run_loc, IN_GPU, 0)
                run_len = 0
                run_loc = loc
                if loc >= 0:
                    run_start = p
                    run_len = 1
    if trace and run_len > 0:
        _emit(ev, S, t, EV_FAULT, it, k, T, run_start, run_len, run_loc, IN_GPU, 0)
    return ssd


@njit(cache=True)
def _all_required_resident(k, in_ptr, in_idx, oo_ptr, oo_idx, tstart, tnp, pstate, qh, qt):
    if (qt[Q_PF_CPU] > qh[Q_PF_CPU] or qt[Q_PF_SSD] > qh[Q_PF_SSD]
            or qt[Q_PF_ALLOC] > qh[Q_PF_ALLOC]):
        return False
    for j in range(in_ptr[k], in_ptr[k + 1]):
        T = in_idx[j]
        for p in range(tstart[T], tstart[T] + tnp[T]):
            if pstate[p] & (F_TRANSFER | LOC_MASK) != IN_GPU:
                return False
    for j in range(oo_ptr[k], oo_ptr[k + 1]):
        T = oo_idx[j]
        for p in range(tstart[T], tstart[T] + tnp[T]):
            if pstate[p] & (F_TRANSFER | LOC_MASK) != IN_GPU:
                return False
    return True


@njit(cache=True)
def _set_required(k, flag, in_ptr, in_idx, oo_ptr, oo_idx, arr):
    for j in range(in_ptr[k], in_ptr[k + 1]):
        arr[in_idx[j]] = flag
    for j in range(oo_ptr[k], oo_ptr[k + 1]):
        arr[oo_idx[j]] = flag


@njit(cache=True)
def _kernel_begin(k, now, in_ptr, in_idx, oo_ptr, oo_idx, exec_c, inpf_c, pf_c,
                  h_time, h_tensor, h_from, h_to, tstart, tnp, raw_size, pstate, req, in_window,
                  sorted_start, sorted_tensor, lru_page, lru_gen, qs, qc, qh, qt, P, F, S,
                  kstat, ev):
    K = exec_c.shape[0]
    it = S[S_CUR_ITER]
    trace = P[P_TRACE] != 0
    # required set of this kernel (clear the previous kernel's)
    req[:] = 0
    _set_required(k, 1, in_ptr, in_idx, oo_ptr, oo_idx, req)
    S[S_IN_OPEN] = -1
    S[S_OUT_OPEN] = -1
    # 6.1 eviction cursor
    S[S_DEEPUM_END] = 0
    if P[P_DEEPUM]:
        in_window[:] = 0
        for j in range(P[P_DEGREE]):
            _set_required((k + j) % K, 1, in_ptr, in_idx, oo_ptr, oo_idx, in_window)
        _lru_advance_head(lru_page, lru_gen, pstate, S)
        s = S[S_LRU_HEAD]
        tail = S[S_LRU_TAIL]
        while s < tail:
            p = lru_page[s]
            if p >= 0 and _lru_live(lru_page, lru_gen, pstate, s):
                if not in_window[tensor_of(sorted_start, sorted_tensor, p)]:
                    break
            s += 1
        S[S_LRU_CUR] = s
        if s >= tail:
            S[S_DEEPUM_END] = 1
    else:
        _lru_advance_head(lru_page, lru_gen, pstate, S)
        S[S_LRU_CUR] = S[S_LRU_HEAD]
    # 6.2 hints, consumed cyclically
    H = h_time.shape[0]
    if P[P_USE_PREFETCH] and H > 0:
        n_applied = 0
        h = S[S_HINT]
        while n_applied < H and h_time[h] % K == k:
            _apply_hint(h, now, h_tensor, h_from, h_to, tstart, tnp, pstate, lru_page, lru_gen,
                        qs, qc, qh, qt, P, S, ev)
            h = (h + 1) % H
            n_applied += 1
        S[S_HINT] = h
    # 6.3 residency check
    if not _all_required_resident(k, in_ptr, in_idx, oo_ptr, oo_idx, tstart, tnp, pstate, qh, qt):
        if S[S_RESCHED] and S[S_R_STARTED]:
            S[S_ERROR] = E_REFAULT_AFTER_RESUME        # O-14: unreachable in the artifact
            S[S_ERR_A] = k
            return
        cnt = np.zeros(9, dtype=np.int64)
        for j in range(in_ptr[k], in_ptr[k + 1]):
            T = in_idx[j]
            ssd = _fault_scan(T, True, now, tstart, tnp, pstate, qs, qc, qh, qt, S, cnt, ev,
                              trace, k, it)
            if ssd > 0:
                S[S_AMP_RAW] += raw_size[T]
                S[S_AMP_ALIGNED] += tnp[T] * 4096
        for j in range(oo_ptr[k], oo_ptr[k + 1]):
            T = oo_idx[j]
            ssd = _fault_scan(T, False, now, tstart, tnp, pstate, qs, qc, qh, qt, S, cnt, ev,
                              trace, k, it)
            if ssd > 0:
                S[S_AMP_RAW] += raw_size[T]
                S[S_AMP_ALIGNED] += tnp[T] * 4096
        # every in-transfer page of the required tensors joins the wait set
        for j in range(in_ptr[k], in_ptr[k + 1]):
            T = in_idx[j]
            for p in range(tstart[T], tstart[T] + tnp[T]):
                st = pstate[p]
                if (st & F_TRANSFER) and not (st & F_WAIT):
                    pstate[p] = st | F_WAIT
                    S[S_WAIT] += 1
        for j in range(oo_ptr[k], oo_ptr[k + 1]):
            T = oo_idx[j]
            for p in range(tstart[T], tstart[T] + tnp[T]):
                st = pstate[p]
                if (st & F_TRANSFER) and not (st & F_WAIT):
                    pstate[p] = st | F_WAIT
                    S[S_WAIT] += 1
        pf_time = page_fault_time(exec_c[k], inpf_c[k], pf_c[k], P[P_F_HZ], F[F_GPU_BPC],
                                  F[F_SSD_BPC], F[F_FREQ], P[P_LSYS], P[P_LSSD],
                                  cnt[1], cnt[2], cnt[3], cnt[4], cnt[5], cnt[6], cnt[7], cnt[8])
        if not S[S_RESCHED]:
            S[S_RESCHED] = 1
            S[S_R_FIRST] = now
            S[S_R_PFTIME] = pf_time
            S[S_R_STARTED] = 0
            S[S_R_INTR] = 0
            S[S_R_CPU] = 0
            S[S_R_SSD] = 0
            S[S_R_NP] = 0
        S[S_R_INTR] += cnt[0]
        S[S_R_CPU] += cnt[1] + cnt[4]
        S[S_R_SSD] += cnt[2] + cnt[5]
        S[S_R_NP] += cnt[3] + cnt[6]
        return
    # 6.4 completion
    n = S[S_NSTAT]
    if S[S_RESCHED]:
        start = S[S_R_FIRST]
        end = start + S[S_R_PFTIME]
        if end < now:
            end = now
        kstat[n, KS_INTR] = S[S_R_INTR]
        kstat[n, KS_CPU] = S[S_R_CPU]
        kstat[n, KS_SSD] = S[S_R_SSD]
        kstat[n, KS_NP] = S[S_R_NP]
        S[S_RESCHED] = 0
    else:
        start = now
        end = now + exec_c[k]
        kstat[n, KS_INTR] = 0
        kstat[n, KS_CPU] = 0
        kstat[n, KS_SSD] = 0
        kstat[n, KS_NP] = 0
    kstat[n, KS_ITER] = it
    kstat[n, KS_KERNEL] = k
    kstat[n, KS_START] = start
    kstat[n, KS_END] = end
    kstat[n, KS_HOST] = S[S_HOST_USED]
    kstat[n, KS_GPU] = S[S_GPU_USED]
    S[S_NSTAT] = n + 1
    if trace:
        _emit(ev, S, start, EV_KERNEL, it, k, -1, -1,
              kstat[n, KS_CPU] + kstat[n, KS_SSD] + kstat[n, KS_NP], 0, 0, end)
    S[S_KB_PENDING] = 1
    S[S_KB_TIME] = end
    S[S_KB_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    S[S_KB_KERNEL] = (k + 1) % K
    S[S_KB_NEWITER] = 1 if k == K - 1 else 0
    if S[S_WAIT] != 0:
        # wait_set.clear(): not reachable with the artifact's rules, kept exact anyway
        for p in range(pstate.shape[0]):
            pstate[p] &= ~F_WAIT
        S[S_WAIT] = 0


# ----------------------------------------------------------------------------------------
# the event loop (§5, §17.3)
# ----------------------------------------------------------------------------------------

@njit(cache=True)
def run_engine(in_ptr, in_idx, oo_ptr, oo_idx, exec_c, inpf_c, pf_c,
               h_time, h_tensor, h_from, h_to,
               tstart, tnp, raw_size, tglobal, birth, death, sorted_start, sorted_tensor,
               pstate, req, in_window, lru_page, lru_gen, qs, qc, qh, qt,
               P, F, S, C, kstat, pcie, bnd, ev, ev_pause_at, stat_pause_at):
    """Run until the simulation ends (ST_DONE), an error (ST_ERROR), or a pause (ST_PAUSE:
    the boundary or event buffer needs draining, a queue is half full, or `stat_pause_at`
    kernels have completed, for progress reports). Resumable."""
    num_iter = P[P_NUM_ITER]
    qcap = qs.shape[1]
    while True:
        if S[S_ERROR] != E_NONE:
            return ST_ERROR
        # pause points: only between events, so that no step can overflow a buffer
        if (S[S_NBND] + 4 > bnd.shape[0] or S[S_NEV] >= ev_pause_at
                or S[S_NSTAT] >= stat_pause_at):
            return ST_PAUSE
        for q in range(NQ):
            if qt[q] - qh[q] > qcap // 2:
                return ST_PAUSE
        kb_first = False
        if S[S_KB_PENDING]:
            if S[S_KB_TIME] < S[S_TICK_TIME]:
                kb_first = True
            elif S[S_KB_TIME] == S[S_TICK_TIME] and S[S_KB_SEQ] < S[S_TICK_SEQ]:
                kb_first = True
        if kb_first:
            k = S[S_KB_KERNEL]
            if S[S_KB_NEWITER]:
                S[S_CUR_ITER] += 1
                S[S_KB_NEWITER] = 0
            S[S_CUR_KERNEL] = k
            if S[S_CUR_ITER] >= num_iter:
                S[S_DONE] = 1
                return ST_DONE
            S[S_KB_PENDING] = 0
            _kernel_begin(k, S[S_KB_TIME], in_ptr, in_idx, oo_ptr, oo_idx, exec_c, inpf_c, pf_c,
                          h_time, h_tensor, h_from, h_to, tstart, tnp, raw_size, pstate, req,
                          in_window, sorted_start, sorted_tensor, lru_page, lru_gen, qs, qc, qh,
                          qt, P, F, S, kstat, ev)
        else:
            t = S[S_TICK_TIME]
            _batcher(t, pstate, req, tglobal, birth, death, sorted_start, sorted_tensor,
                     in_window, lru_page, lru_gen, qs, qc, qh, qt, P, C, S, pcie, bnd, ev)
            S[S_TICK_TIME] = t + P[P_II]
            S[S_TICK_SEQ] = S[S_SEQ]
            S[S_SEQ] += 1
