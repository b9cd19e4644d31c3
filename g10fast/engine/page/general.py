"""The general path, one page at a time (`_general_page`: victim selection, eviction,
allocation, events), and the end of a busy tick (`_tick_end`, `_next_tick_busy`)."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.batch import TickState, _lz_drop, _next_stage_after_failure
from g10fast.engine.page.helpers import (
    _emit,
    _emit_run,
    _is_alive,
    _lz_state,
    _no_faults_queued,
    _q_pop,
    _q_push,
    _tpos,
)
from g10fast.engine.page.layout import (
    EV_ALLOC,
    EV_EVICT,
    EV_FETCH,
    EV_TRANSFER,
    E_DEAD_LIVE_EVICT,
    E_HOST_OVERFLOW,
    E_NONE,
    E_NO_VICTIM,
    F_TRANSFER,
    F_WAIT,
    GEN_SHIFT,
    LOC_MASK,
    NQ,
    P_II,
    P_RELEASE,
    P_XMARGIN,
    Q_PF_ALLOC,
    Q_PF_CPU,
    Q_PF_SSD,
    Q_PREFETCH_CPU,
    Q_PREFETCH_SSD,
    RES_MASK,
    S_CUR_KERNEL,
    S_ERROR,
    S_ES,
    S_ERR_A,
    S_EV_PAUSE,
    S_IN_OPEN,
    S_KB_KERNEL,
    S_KB_NEWITER,
    S_KB_PENDING,
    S_KB_SEQ,
    S_KB_TIME,
    S_LRU_CUR,
    S_LRU_SCAN,
    S_LRU_TAIL,
    S_NBND,
    S_NEV,
    S_NSTAT,
    S_OUT_OPEN,
    S_QH,
    S_QT,
    S_RESCHED,
    S_R_STARTED,
    S_SEQ,
    S_STAT_PAUSE,
    S_TICK_SEQ,
    S_TICK_TIME,
    S_XFER,
    S_X_CUR,
    S_X_HEAD,
    S_X_NFREE,
    S_X_TAIL,
    TT_REQ,
    TT_RES,
    _G_PE_CPU,
    _G_PE_SSD,
    _G_PF_ALLOC,
    _G_PF_SSD,
    _G_PREALLOC,
    _G_PRE_CPU,
    _G_PRE_SSD,
    _G_RS_ALLOC,
    _G_RS_SSD,
    _kernel,
    _kernel_page,
    _kernel_stage,
    _u,
)
from g10fast.engine.page.lru import (
    XW,
    X_LO,
    _cur_norm,
    _lru_compact,
    _lru_remove_unknown,
    _x_arrive,
    _x_remove,
    _xd_after,
    _xd_take,
    _xd_victim,
)
from g10fast.engine.page.release import _drop_release
from g10fast.engine.page.stages import _add_traffic, _count_in, _count_out, _lru_append
from g10fast.locations import IN_CPU, IN_GPU, IN_SSD, NOT_KNOWN, NOT_PRESENT


@_kernel_page
def _evict_page(
    v,
    dest,
    ev_slot,
    ev_pf,
    t,
    it,
    k,
    trace,
    prm,
    tt,
    srt,
    pstate,
    lru,
    qb,
    S,
    ev,
    c_out,
    c_out_ssd,
    c_out_cpu,
    c_fed,
    gpu_used,
    host_used,
    host_peak,
    wait,
    live_warn,
    lru_tail,
    lru_cur,
    lru_scan,
    tc_b,
):
    """§9.3 evict: page v leaves the GPU for dest (NOT_PRESENT: dropped). ev_slot is its LRU
    slot when it is a victim (ev_pf), -1 for a pre-eviction (its entry is then left stale).
    A page of a required tensor is queued again as a fault. Errors (a live page dropped by
    a pre-eviction, host overflow) go to S[S_ERROR]. Returns the tick's state after it."""
    HOST = prm.HOST
    lm = prm.lm
    tc_b = _tpos(srt, tc_b, v)
    T = srt[1, _u(tc_b)]
    st0 = _lz_state(pstate, tt, T, v)
    if dest == NOT_PRESENT and _is_alive(tt, T, k):
        if ev_pf:
            live_warn += 1
        else:
            S[S_ERROR] = E_DEAD_LIVE_EVICT
    n = 0
    overflow = False
    if dest == IN_CPU:
        if host_used >= HOST:
            S[S_ERROR] = E_HOST_OVERFLOW
            S[S_ERR_A] = v
            overflow = True
        else:
            host_used += 1
            if host_used > host_peak:
                host_peak = host_used
            n = 1
    elif dest == IN_SSD:
        n = 1
    if not overflow:
        if prm.xl:
            # the extent list: a victim is its first page; a pre-evicted page leaves it when
            # it was in it (resident, not in transfer)
            if ev_slot >= 0:
                _xd_take(lru, S, tt, ev_slot, v, 1)
            elif (st0 & RES_MASK) == IN_GPU:
                _x_remove(lru, S, tt, T, v, v + 1)
        elif ev_slot >= 0:
            lru[_u(ev_slot & lm)] = -1
        else:
            S[S_LRU_TAIL] = lru_tail
            S[S_LRU_CUR] = lru_cur
            S[S_LRU_SCAN] = lru_scan
            _lru_remove_unknown(lru, pstate, S, v)
            lru_tail = S[S_LRU_TAIL]
            lru_cur = S[S_LRU_CUR]
            lru_scan = S[S_LRU_SCAN]
        st = (np.int64(pstate[_u(v)]) & ~LOC_MASK) | dest
        gpu_used -= 1
        if n != 0:
            c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, prm.CPU_CAP, prm.SSD_CAP, 1
            )
        if trace:
            _emit_run(ev, S, S_OUT_OPEN, t, EV_EVICT, it, k, T, v, IN_GPU, dest, 1 if ev_slot >= 0 else 0)
        if tt[_u(T), TT_REQ]:
            if dest == IN_CPU:
                _q_push(qb, S, Q_PF_CPU, v, 1)
            elif dest == IN_SSD:
                _q_push(qb, S, Q_PF_SSD, v, 1)
            else:
                _q_push(qb, S, Q_PF_ALLOC, v, 1)
            st |= F_TRANSFER
            if not (st & F_WAIT):
                st |= F_WAIT
                wait += 1
        else:
            st &= ~F_TRANSFER
        if not (st == 0 and prm.xl and _lz_drop(pstate, tt, S, T, v, 1)):
            # (a lazy tensor's page dropped in order is not written, `_lz_drop`)
            pstate[_u(v)] = st
            if st == 0 and prm.xl and prm.deepum and S[P_RELEASE] != 0:
                _drop_release(pstate, v, v + 1, S)
        if (st0 & RES_MASK) == IN_GPU:
            tt[_u(T), TT_RES] -= 1
    return (
        c_out,
        c_out_ssd,
        c_out_cpu,
        c_fed,
        gpu_used,
        host_used,
        host_peak,
        wait,
        live_warn,
        lru_tail,
        lru_cur,
        lru_scan,
        tc_b,
    )


@_kernel_page
def _alloc_page(
    p,
    a_src,
    a_tensor,
    is_fetch,
    is_pf,
    t,
    it,
    k,
    trace,
    prm,
    tt,
    pstate,
    lru,
    S,
    ev,
    c_fed,
    gpu_used,
    host_used,
    wait,
    lru_tail,
    lru_cur,
    lru_scan,
):
    """§9.3 alloc_page: page p (at a_src, of tensor a_tensor) takes a free GPU frame, at the
    LRU tail (the list compacted first when it is full). Returns the tick's state after it."""
    lm = prm.lm
    if a_src == IN_CPU:
        host_used -= 1
        if c_fed == IN_SSD:
            c_fed = NOT_KNOWN
    gpu_used += 1
    st0 = np.int64(pstate[_u(p)])
    if prm.xl:
        # (`_x_arrive` writes IN_GPU, or leaves a lazy tensor's arriving state 0)
        wait = _x_arrive(lru, S, tt, pstate, a_tensor, p, 1, wait)
    else:
        # (IN_GPU is written before a compaction, which reads the page states)
        pstate[_u(p)] = (st0 & ~LOC_MASK) | IN_GPU
        if lru_tail - prm.hd >= prm.lcap:
            S[S_LRU_TAIL] = lru_tail
            S[S_LRU_CUR] = lru_cur
            S[S_LRU_SCAN] = lru_scan
            _lru_compact(lru, pstate, S)
            lru_tail = S[S_LRU_TAIL]
            lru_cur = S[S_LRU_CUR]
            lru_scan = S[S_LRU_SCAN]
        if prm.deepum and lru_cur < lru_tail:
            lru_cur = _cur_norm(lru, lm, pstate, lru_cur, lru_tail)
        lru_tail, lru_cur, wait = _lru_append(lru, lm, pstate, p, st0, lru_tail, lru_cur, wait)
    if (st0 & RES_MASK) != IN_GPU:
        tt[a_tensor, TT_RES] += 1
    if trace:
        _emit_run(
            ev,
            S,
            S_IN_OPEN,
            t,
            EV_FETCH if is_fetch else EV_ALLOC,
            it,
            k,
            a_tensor,
            p,
            a_src,
            IN_GPU,
            1 if is_pf else 0,
        )
    return c_fed, gpu_used, host_used, wait, lru_tail, lru_cur, lru_scan


@_kernel_page
def _general_page(stage, q, t, it, k, trace, prm, rule, arrays, counters, state):
    """General path of a batcher tick: the head page p of stage `stage`'s queue q, which the
    stage admits. A pre-eviction evicts p; an allocating stage gives p a GPU frame, after
    evicting a victim when the GPU is full (a prefetch page not where its queue says moves
    to the other prefetch queue instead; a stage without a victim is over). Returns the
    stage the tick goes on with, its counters and its state. `rule` is the eviction rule of
    the ring (g10fast.engine.page.rules). The tick's arrays (`TickArrays`), counters and
    scalar state (`TickState`) travel as three tuples; the counters: c_in, c_in_ssd,
    c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed. (One by one, the call
    would have more than 30 arguments, which CPython passes as *args, and Numba cannot
    inline such a call.)"""
    tt, srt, pstate, lru, qb, S, pcie, bnd, ev = arrays
    (
        gpu_used,
        host_used,
        host_peak,
        wait,
        live_warn,
        lru_tail,
        lru_cur,
        lru_scan,
        dum_end,
        tc_a,
        tc_b,
        tc_c,
    ) = state
    c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed = counters
    G = prm.G
    deepum = prm.deepum
    lm = prm.lm
    hd = prm.hd
    qm = qb.shape[1] - 1
    p = qb[q, _u(S[S_QH + q] & qm), 0]

    # ---- what happens to page p ----
    ev_v = -1
    ev_slot = -1
    ev_dest = 0
    ev_pf = False
    a_src = 0
    a_tensor = -1
    is_pf = True
    is_fetch = True
    fetch_src = IN_SSD
    if stage <= _G_PE_CPU:
        # pre-eviction
        ev_v = p
        if c_fed != NOT_KNOWN:
            ev_dest = c_fed
        else:
            ev_dest = IN_SSD if stage == _G_PE_SSD else IN_CPU
    else:
        if stage == _G_PRE_SSD or stage == _G_PRE_CPU:
            loc = np.int64(pstate[_u(p)]) & LOC_MASK
            want = IN_SSD if stage == _G_PRE_SSD else IN_CPU
            if loc != want:
                if loc == IN_CPU and stage == _G_PRE_SSD:
                    _q_push(qb, S, Q_PREFETCH_CPU, p, 1)
                elif loc == IN_SSD and stage == _G_PRE_CPU:
                    _q_push(qb, S, Q_PREFETCH_SSD, p, 1)
                _q_pop(qb, S, q)
                return (
                    stage,
                    (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
                    TickState(
                        gpu_used,
                        host_used,
                        host_peak,
                        wait,
                        live_warn,
                        lru_tail,
                        lru_cur,
                        lru_scan,
                        dum_end,
                        tc_a,
                        tc_b,
                        tc_c,
                    ),
                )
            is_pf = False
            fetch_src = want
        elif stage == _G_PF_ALLOC or stage == _G_RS_ALLOC:
            is_fetch = False
        elif stage == _G_PREALLOC:
            is_fetch = False
            is_pf = False
        else:
            # demand fetches pop before allocating
            fetch_src = IN_SSD if (stage == _G_PF_SSD or stage == _G_RS_SSD) else IN_CPU
            _q_pop(qb, S, q)
        a_src = np.int64(pstate[_u(p)]) & LOC_MASK
        tc_a = _tpos(srt, tc_a, p)
        a_tensor = srt[1, _u(tc_a)]
        if gpu_used >= G:
            # ---- victim selection (§8) ----
            pf = is_pf or tt[a_tensor, TT_REQ] != 0
            if prm.xl:
                # (the extent list holds just the victims: its first page; DeepUM: from the
                # cursor, non-PF, where END is sticky (O-15), or the first page, PF; the
                # slot is the victim's record)
                if deepum:
                    slot, ev_v = _xd_victim(not pf, lru, S, tt, srt, lru_cur, dum_end)
                    if slot >= 0:
                        if not pf or lru_cur == ev_v:
                            lru_cur = _xd_after(lru, S, slot, ev_v + 1)
                    elif not pf and dum_end == 0:
                        lru_cur = -1
                        dum_end = 1
                else:
                    slot = S[S_X_HEAD]
                    if slot >= 0:
                        ev_v = lru[_u(slot * XW + X_LO)]
            else:
                # (the ring: the policy's eviction rule, g10fast.engine.page.rules)
                slot, lru_cur, lru_scan, dum_end, tc_c = rule(
                    pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan, dum_end, tc_c
                )
            if slot < 0:
                if not (deepum and not pf):
                    S[S_ERROR] = E_NO_VICTIM
                return (
                    _next_stage_after_failure(stage),
                    (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
                    TickState(
                        gpu_used,
                        host_used,
                        host_peak,
                        wait,
                        live_warn,
                        lru_tail,
                        lru_cur,
                        lru_scan,
                        dum_end,
                        tc_a,
                        tc_b,
                        tc_c,
                    ),
                )
            if not prm.xl:
                ev_v = lru[_u(slot & lm)] >> GEN_SHIFT
            ev_slot = slot
            ev_pf = True
            if deepum:
                tc_b = _tpos(srt, tc_b, ev_v)
                ev_dest = IN_CPU if _is_alive(tt, srt[1, _u(tc_b)], k) else NOT_PRESENT
            else:
                ev_dest = IN_CPU
            if ev_dest != NOT_PRESENT and c_fed != NOT_KNOWN:
                ev_dest = c_fed

    # ---- evict page ev_v to ev_dest (§9.3 evict) ----
    if ev_v >= 0:
        (
            c_out,
            c_out_ssd,
            c_out_cpu,
            c_fed,
            gpu_used,
            host_used,
            host_peak,
            wait,
            live_warn,
            lru_tail,
            lru_cur,
            lru_scan,
            tc_b,
        ) = _evict_page(
            ev_v,
            ev_dest,
            ev_slot,
            ev_pf,
            t,
            it,
            k,
            trace,
            prm,
            tt,
            srt,
            pstate,
            lru,
            qb,
            S,
            ev,
            c_out,
            c_out_ssd,
            c_out_cpu,
            c_fed,
            gpu_used,
            host_used,
            host_peak,
            wait,
            live_warn,
            lru_tail,
            lru_cur,
            lru_scan,
            tc_b,
        )
        if stage <= _G_PE_CPU:
            _q_pop(qb, S, q)
            if S[S_ERROR] != E_NONE:
                stage = _G_PF_SSD
        elif S[S_ERROR] != E_NONE:
            stage = _next_stage_after_failure(stage)
        if stage <= _G_PE_CPU or S[S_ERROR] != E_NONE:
            return (
                stage,
                (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
                TickState(
                    gpu_used,
                    host_used,
                    host_peak,
                    wait,
                    live_warn,
                    lru_tail,
                    lru_cur,
                    lru_scan,
                    dum_end,
                    tc_a,
                    tc_b,
                    tc_c,
                ),
            )

    # ---- give page p a GPU frame (§9.3 alloc_page) ----
    c_fed, gpu_used, host_used, wait, lru_tail, lru_cur, lru_scan = _alloc_page(
        p,
        a_src,
        a_tensor,
        is_fetch,
        is_pf,
        t,
        it,
        k,
        trace,
        prm,
        tt,
        pstate,
        lru,
        S,
        ev,
        c_fed,
        gpu_used,
        host_used,
        wait,
        lru_tail,
        lru_cur,
        lru_scan,
    )

    # ---- stage bookkeeping ----
    if is_fetch:
        c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
            fetch_src, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, prm.CPU_CAP, prm.SSD_CAP, 1
        )
        if stage == _G_PRE_SSD or stage == _G_PRE_CPU:
            _q_pop(qb, S, q)
        elif c_ffs != NOT_KNOWN and c_ffs != fetch_src:
            stage += 1
    else:
        c_alloc += 1
        _q_pop(qb, S, q)
    return (
        stage,
        (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
        TickState(
            gpu_used,
            host_used,
            host_peak,
            wait,
            live_warn,
            lru_tail,
            lru_cur,
            lru_scan,
            dum_end,
            tc_a,
            tc_b,
            tc_c,
        ),
    )


@_kernel_stage
def _tick_end(
    t, it, k, trace, S, pcie, bnd, ev, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, wait
):
    """The end of a busy tick at time t (§9.6): it opens a transfer period if none is open,
    adds its traffic to iteration it's, resumes the waiting kernel when no fault is left, and
    advances the tick clock. Returns the next tick's time and whether the kernel resumed."""
    if not S[S_XFER]:
        n = S[S_NBND]
        bnd[n, 0] = it
        bnd[n, 1] = t
        bnd[n, 2] = 1
        S[S_NBND] = n + 1
        S[S_XFER] = 1
        if trace:
            _emit(ev, S, t, EV_TRANSFER, it, k, -1, -1, -1, -1, -1, 1)
    _add_traffic(pcie, it, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc)
    resumed = S[S_RESCHED] != 0 and _no_faults_queued(S) and wait == 0
    if resumed:
        _resume(t, S)
    t += S[P_II]
    S[S_TICK_TIME] = t
    S[S_TICK_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    return t, resumed


@_kernel_stage
def _next_tick_busy(t, S, bnd_cap, half):
    """Whether run_engine's next event (same tests) would be another busy tick at time t,
    with nothing to drain or grow first: no pause due, some queue holding a page, none past
    half full, and no kernel event due before it."""
    if (
        S[S_NBND] + 4 > bnd_cap
        or S[S_NEV] >= S[S_EV_PAUSE]
        or S[S_NSTAT] >= S[S_STAT_PAUSE]
        or S[S_X_NFREE] < S[P_XMARGIN]
    ):
        return False
    busy = False
    for q in range(NQ):
        qlen = S[S_QT + q] - S[S_QH + q]
        if qlen > half:
            return False
        if qlen > 0:
            busy = True
    if not busy:
        return False
    if S[S_KB_PENDING] and (S[S_KB_TIME] < t or (S[S_KB_TIME] == t and S[S_KB_SEQ] < S[S_TICK_SEQ])):
        return False
    return True


# ---- Empty busy ticks ----
# A busy tick that moves no page (no fetch, eviction or allocation: under DeepUM, say, every
# stage it admits finds no victim, the scan from the cursor having reached the list's end)
# and leaves the queues, the LRU positions and the flags it reads as they were at its start
# is followed by the same tick again and again until the kernel event due: what a tick does
# is a function of that state, not of its time. `_busy_ticks` keeps a tick's start
# (`_es_state`) when the tick before it moved nothing; when that tick moved nothing too and
# left its start as it was (`_es_state` again), the ticks the event loop would run after it before
# the kernel event (`_es_ticks`), but the last, end in closed form: each takes its sequence
# number and advances the clock (the transfer period is open, no traffic, no resume).


@_kernel
def _es_slot(S, i, v, keep):
    """Keep v in S[i] (keep), or whether S[i] holds v."""
    if keep:
        S[i] = v
        return True
    return S[i] == v


@_kernel
def _es_state(S, qb, lru_tail, lru_cur, lru_scan, dum_end, wait, gpu_used, host_used, keep):
    """Keep a busy tick's start in S[S_ES ...] (keep), or whether the state kept is the state
    now (see "Empty busy ticks"): each queue's head and tail slots and head run, the LRU
    positions, DeepUM's scan flag, the wait set, the GPU and host use, the rescue flags, the
    extent list's ends and free records, and the error."""
    qm = qb.shape[1] - 1
    same = True
    for q in range(NQ):
        h = S[S_QH + q]
        t = S[S_QT + q]
        b = S_ES + 4 * q
        same &= _es_slot(S, b, h, keep) & _es_slot(S, b + 1, t, keep)
        same &= _es_slot(S, b + 2, qb[q, _u(h & qm), 0] if t > h else 0, keep)
        same &= _es_slot(S, b + 3, qb[q, _u(h & qm), 1] if t > h else 0, keep)
    b = S_ES + 4 * NQ
    same &= _es_slot(S, b, lru_tail, keep) & _es_slot(S, b + 1, lru_cur, keep)
    same &= _es_slot(S, b + 2, lru_scan, keep) & _es_slot(S, b + 3, dum_end, keep)
    same &= _es_slot(S, b + 4, wait, keep) & _es_slot(S, b + 5, gpu_used, keep)
    same &= _es_slot(S, b + 6, host_used, keep) & _es_slot(S, b + 7, S[S_R_STARTED], keep)
    same &= _es_slot(S, b + 8, S[S_RESCHED], keep) & _es_slot(S, b + 9, S[S_X_HEAD], keep)
    same &= _es_slot(S, b + 10, S[S_X_TAIL], keep) & _es_slot(S, b + 11, S[S_X_NFREE], keep)
    same &= _es_slot(S, b + 12, S[S_X_CUR], keep) & _es_slot(S, b + 13, S[S_ERROR], keep)
    return same


@_kernel
def _es_ticks(t, S):
    """How many busy ticks, from the one at time t (which the event loop runs next,
    `_next_tick_busy`), the event loop would run before its pending kernel event, less the
    last of them (0 without a pending kernel event): the ticks before the event's time, and
    the one at its time when the event's sequence number is above that tick's."""
    if S[S_KB_PENDING] == 0:
        return 0
    ii = S[P_II]
    kb = S[S_KB_TIME]
    if kb <= t:
        return 0
    m = (kb - t + ii - 1) // ii
    if t + m * ii == kb and S[S_KB_SEQ] > S[S_TICK_SEQ] + m:
        m += 1
    return m - 1


@_kernel
def _resume(t, S):
    """§9.6: the waiting kernel resumes at the tick at time t (its event is queued now)."""
    S[S_KB_PENDING] = 1
    S[S_KB_TIME] = t
    S[S_KB_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    S[S_KB_KERNEL] = S[S_CUR_KERNEL]
    S[S_KB_NEWITER] = 0
    S[S_R_STARTED] = 1
