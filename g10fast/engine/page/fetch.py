"""The fetch fast path (`_fetch_fast`): a fetching stage's pages moved in runs (traced runs
write them as rows of runs and ticks, docs/trace-format.md)."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.batch import (
    TickState,
    _batch_limit,
    _batch_move,
    _batch_move_x,
    _batch_move_x_traced,
    _batch_move_xd,
    _batch_move_xd_traced,
    _fast_victim,
    _fresh_counters,
    _lz_drop,
    _q_push_served,
    _streak_ticks,
    _victims_requeued,
)
from g10fast.engine.page.helpers import _NO_TICKS, _tick_row, _admit, _is_alive, _tensor_at
from g10fast.engine.page.layout import (
    EV_ALLOC,
    EV_EVICT,
    EV_FETCH,
    F_TRANSFER,
    F_WAIT,
    LOC_MASK,
    P_BULK,
    P_II,
    P_RELEASE,
    P_XMARGIN,
    Q_PF_ALLOC,
    Q_PF_CPU,
    Q_PF_SSD,
    RES_MASK,
    S_IN_OPEN,
    S_OUT_OPEN,
    S_QH,
    S_QT,
    S_RESCHED,
    S_R_STARTED,
    S_SEQ,
    S_TICK_SEQ,
    S_TICK_TIME,
    S_X_HEAD,
    S_X_NFREE,
    TT_RES,
    TT_WIN,
    _G_PF_ALLOC,
    _G_PF_SSD,
    _G_PREALLOC,
    _G_PRE_CPU,
    _G_PRE_SSD,
    _kernel_page,
    _u,
)
from g10fast.engine.page.lru import (
    XW,
    X_HI,
    X_LO,
    _cur_norm,
    _x_arrive,
    _x_take,
    _xd_evict,
    _xd_victim,
)
from g10fast.engine.page.release import _drop_release
from g10fast.engine.page.stages import (
    _add_traffic,
    _count_in,
    _count_out,
    _fails_at_once,
    _lru_append,
    _run_pop,
    _tick_repeats,
)
from g10fast.locations import IN_CPU, IN_GPU, IN_SSD, NOT_KNOWN, NOT_PRESENT


@_kernel_page
def _fetch_fast(stage, q, qh, t, it, k, prm, arrays, counters, state, emit):
    """Fetch fast path of a batcher tick: the allocating stage `stage`'s pages
    (queue q, head qh) in a tight loop, by runs (`_batch_limit`, `_batch_move`) or one by one.
    Each page goes exactly as in `_general_page` (admission test, victim from the cursor,
    eviction, allocation, counters); a page that needs anything else (no victim from the
    cursor (DeepUM: from the scan position), a DeepUM non-PF victim, host overflow, a
    required victim whose queue might overflow, LRU compaction, a prefetch page not where
    its queue says) leaves the loop untouched and takes the general path once. When the
    stage reaches a cap and the next tick would start the same way (`_tick_repeats`), the
    tick ends and the next one goes on here. Returns the stage, the tick time, whether the
    general path must take the next page (fast_block) and the tick's state. The tick's
    arrays (`TickArrays`), counters and scalar state (`TickState`) travel as three tuples, as
    in `_general_page`. `emit` (a traced run's emitter, `run_engine`; None untraced, and the
    code of the trace is compiled away) writes the pages it moves (extent LRU only) as the
    general path would, a run (and a streak's whole ticks) at a time."""
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
    HOST = prm.HOST
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    ALLOC_CAP = prm.ALLOC_CAP
    deepum = prm.deepum
    xl = prm.xl
    lcap = prm.lcap
    lm = prm.lm
    hd = prm.hd
    qm = qb.shape[1] - 1
    half = qb.shape[1] // 2
    ii = S[P_II]
    is_fetch_s = stage != _G_PF_ALLOC and stage != _G_PREALLOC
    is_pf_s = stage <= _G_PF_ALLOC
    is_pre_s = stage == _G_PRE_SSD or stage == _G_PRE_CPU
    fsrc = IN_SSD if (stage == _G_PF_SSD or stage == _G_PRE_SSD) else IN_CPU
    qt = S[S_QT + q]
    qslot = qh & qm
    rp = qb[q, _u(qslot), 0]
    rn = qb[q, _u(qslot), 1]
    fast_block = True
    # the tensors of the last victim and of the last allocated page: page range, id,
    # required flag, and the change of TT_RES not yet written (TT_RES is read by nothing in
    # the loop; TT_REQ does not change during a tick)
    vt_lo = 0
    vt_hi = 0
    vt_T = 0
    vt_req = 0
    vt_d = 0
    vt_alive = False
    wt_lo = 0
    wt_hi = 0
    wt_win = 0
    dnp = False
    at_req = 0
    at_lo = 0
    at_hi = 0
    at_T = 0
    at_d = 0
    forced = False
    tk_fresh = False  # the current tick began at a continuation below and nothing moved yet
    streaks = S[P_BULK] != 0  # (a bulk path: the per-page reference ends each tick itself)
    a_kind = EV_FETCH if is_fetch_s else EV_ALLOC
    a_val = 1 if is_pf_s else 0
    while True:
        evict_ok = gpu_used < G or (c_out < GPU_CAP and (host_used < HOST or c_out_ssd < SSD_CAP))
        if forced or not _admit(
            stage, evict_ok, c_in, c_in_ssd, c_in_cpu, c_alloc, GPU_CAP, CPU_CAP, SSD_CAP, ALLOC_CAP
        ):
            # -- the stage is over for this tick (a cap reached, or its link full:
            # `forced`): go on with the next tick here when it would be the same (see
            # `_tick_repeats`), settling the tick's end and the next tick's start as the
            # loops around would
            S[S_QH + q] = qh
            fails = 0  # (`_fails_at_once`: DeepUM only)
            if deepum and dum_end:
                fails = _fails_at_once(S, qb, tt, srt, pstate, stage, gpu_used, dum_end)
            if not _tick_repeats(
                S,
                stage,
                q,
                qt - qh,
                half,
                t + ii,
                deepum,
                wait,
                c_in,
                c_in_ssd,
                c_in_cpu,
                c_out,
                c_out_ssd,
                c_alloc,
                gpu_used,
                host_used,
                bnd.shape[0],
                fails,
            ):
                if forced:
                    stage += 1
                break
            forced = False
            _add_traffic(pcie, it, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc)
            t += ii
            S[S_TICK_TIME] = t
            S[S_TICK_SEQ] = S[S_SEQ]
            S[S_SEQ] += 1
            (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed) = _fresh_counters(
                host_used, HOST
            )
            fast_block = True
            tk_fresh = True
            continue
        if lru_tail - hd >= lcap:
            break
        p = rp
        st0 = np.int64(pstate[_u(p)])
        a_src = st0 & LOC_MASK
        if is_pre_s and a_src != fsrc:
            break
        if p < at_lo or p >= at_hi:
            if at_d != 0:
                tt[_u(at_T), TT_RES] += at_d
                at_d = 0
            tc_a, at_T, at_lo, at_hi, at_req = _tensor_at(tt, srt, tc_a, p)
        # -- a run of pages at once (pages of one queued run, one tensor and one location,
        # each with a victim of the last victim's tensor, or none needed), going exactly as
        # the page loop below would take them one by one. A page that ends the run (a
        # victim of another tensor, no victim, another location) is left to the page loop.
        b_dnp = deepum and not is_pf_s and at_req == 0
        if a_src != IN_GPU and not (b_dnp and dum_end != 0):
            nb = rn
            if at_hi - p < nb:
                nb = at_hi - p
            if lcap - (lru_tail - hd) < nb:
                nb = lcap - (lru_tail - hd)
            b_ev = gpu_used >= G
            b_dest = IN_CPU if c_fed == NOT_KNOWN else c_fed
            if deepum and not vt_alive:
                b_dest = NOT_PRESENT
            nb = _batch_limit(
                nb,
                is_fetch_s,
                is_pre_s,
                fsrc,
                a_src,
                b_ev,
                b_dest,
                gpu_used,
                host_used,
                c_in,
                c_in_ssd,
                c_in_cpu,
                c_out,
                c_out_ssd,
                c_out_cpu,
                c_alloc,
                prm,
            )
            b_lo = vt_lo if vt_req == 0 else 0
            b_hi = vt_hi if vt_req == 0 else 0
            # victims of a required tensor go back to the queue of where they go (the page
            # loop's rule below): in bulk, on the ring, as one run, when that queue has room
            # for it with the page loop's test still passing after the push
            b_rq = False
            rq = -1
            if vt_req != 0 and streaks and b_ev:
                rq = Q_PF_CPU if b_dest == IN_CPU else (Q_PF_SSD if b_dest == IN_SSD else Q_PF_ALLOC)
                used = qt - qh if rq == q else S[S_QT + rq] - S[S_QH + rq]
                if used + 1 < qm:
                    b_rq = True
                    b_lo = vt_lo
                    b_hi = vt_hi
            b_win = tt[_u(vt_T), TT_WIN] != 0
            ns = 0
            f_cnt = (0, 0, 0, 0, 0, 0, 0)
            if (
                streaks
                and tk_fresh
                and not b_rq
                and not deepum
                and nb > 0
                and (
                    (
                        b_ev
                        and stage >= _G_PF_SSD
                        and is_pf_s
                        and (
                            (b_dest == IN_SSD and c_fed == IN_SSD and a_src != IN_CPU)
                            or (
                                b_dest == IN_CPU
                                and c_fed == NOT_KNOWN
                                and host_used < HOST
                                and S[S_X_NFREE] >= S[P_XMARGIN] + 4
                            )
                        )
                    )
                    or (
                        stage == _G_PRE_SSD
                        and xl
                        and S[S_X_NFREE] >= S[P_XMARGIN] + 4
                        and (
                            not b_ev
                            or (b_dest == IN_SSD and c_fed == IN_SSD)
                            or (b_dest == IN_CPU and c_fed == NOT_KNOWN and host_used < HOST)
                        )
                    )
                )
            ):
                fails = 0
                if deepum and dum_end:
                    fails = _fails_at_once(S, qb, tt, srt, pstate, stage, gpu_used, dum_end)
                ns, f_cnt = _streak_ticks(
                    nb,
                    rn,
                    at_hi - p,
                    lcap - (lru_tail - hd),
                    t,
                    ii,
                    S,
                    stage,
                    is_fetch_s,
                    fsrc,
                    gpu_used,
                    host_used,
                    prm,
                    b_dest if b_ev else NOT_PRESENT,
                    c_fed,
                    fails,
                )
                if b_ev and b_dest == IN_CPU and a_src != IN_CPU and (HOST - 1 - host_used) // nb < ns:
                    # (ticks with victims to the host, not full: its use rises by nb a
                    # tick, for pages from SSD or allocated; a page from the host frees a
                    # host page after its victim took one, the use staying put)
                    ns = (HOST - 1 - host_used) // nb
                if stage == _G_PRE_SSD:
                    # G10's prefetch ticks from SSD (the LRU policies' prefetch stage, the
                    # demand queues empty): into free frames, the GPU use rising by nb a
                    # tick, or with victims to SSD (the host full) or to the host (above).
                    # Each streak stops short of the line it climbs to (no tick's end nor
                    # start then sees the GPU or the host full), and, while a kernel waits,
                    # before the wait set can empty (each arriving page takes at most one
                    # from it), so that no tick's end in it resumes the kernel
                    if not b_ev and (G - 1 - gpu_used) // nb < ns:
                        ns = (G - 1 - gpu_used) // nb
                    if S[S_RESCHED] != 0 and (wait - 1) // nb < ns:
                        ns = (wait - 1) // nb
            elif (
                streaks
                and tk_fresh
                and b_ev
                and not b_rq
                and deepum
                and xl
                and not is_pf_s
                and (b_dest == IN_SSD or b_dest == NOT_PRESENT or (b_dest == IN_CPU and a_src != IN_CPU))
                and (a_src != IN_CPU or (b_dest == NOT_PRESENT and host_used < HOST))
                and nb > 0
                and S[S_X_NFREE] >= S[P_XMARGIN] + 4
            ):
                # DeepUM's prefetch and pre-allocation ticks (victims to SSD, the host being
                # full, or dropped): the GPU use stays put, and so does the host use but for
                # pages from the host with their victims dropped, which lower it by nb a
                # tick from below the line (every tick starts with no forced destination
                # and the same admission); the demand queues are empty, so a tick's end
                # resumes a waiting kernel when the wait set empties (each arriving page
                # takes at most one from it), and starts the rescue when the tick moved
                # nothing. Victims to the host raise its use by nb a tick: the streak stops
                # short of the line (no tick's end nor start then sees it full)
                fails = 0
                if deepum and dum_end:
                    fails = _fails_at_once(S, qb, tt, srt, pstate, stage, gpu_used, dum_end)
                ns, f_cnt = _streak_ticks(
                    nb,
                    rn,
                    at_hi - p,
                    lcap - (lru_tail - hd),
                    t,
                    ii,
                    S,
                    stage,
                    is_fetch_s,
                    fsrc,
                    gpu_used,
                    host_used,
                    prm,
                    b_dest,
                    c_fed,
                    fails,
                )
                if b_dest == IN_CPU and (HOST - 1 - host_used) // nb < ns:
                    ns = (HOST - 1 - host_used) // nb
                if S[S_RESCHED] != 0:
                    if (wait - 1) // nb < ns:
                        ns = (wait - 1) // nb
                    if S[S_R_STARTED] == 0 and f_cnt[0] + f_cnt[3] == 0:
                        ns = 0
            # (the rows of a traced run: the tick time, period and pages a tick, who)
            em = (t, ii, nb if ns >= 2 else _NO_TICKS, it, k)
            if xl and deepum:
                if emit is None:
                    m, wait, vt_d, lru_cur, v0, nT, n_lo, n_hi, n_tc = _batch_move_xd(
                        p,
                        nb * ns if ns >= 2 else nb,
                        a_src,
                        b_ev,
                        b_dest,
                        b_lo,
                        b_hi,
                        b_rq,
                        pstate,
                        lru,
                        S,
                        tt,
                        at_T,
                        wait,
                        vt_d,
                        b_dnp,
                        srt,
                        lru_cur,
                        dum_end,
                        tc_b,
                        np.int64(vt_T),
                        k,
                        True,
                    )
                    if nT >= 0:
                        # (the victims' tensor changed in the run, `_vt_switch`)
                        vt_T, vt_lo, vt_hi, tc_b = nT, n_lo, n_hi, n_tc
                        vt_req = 0
                        vt_alive = _is_alive(tt, vt_T, k)
                else:
                    m, wait, vt_d, lru_cur, v0, nT, n_lo, n_hi, n_tc = _batch_move_xd_traced(
                        p,
                        nb * ns if ns >= 2 else nb,
                        a_src,
                        b_ev,
                        b_dest,
                        b_lo,
                        b_hi,
                        b_rq,
                        pstate,
                        lru,
                        S,
                        tt,
                        at_T,
                        wait,
                        vt_d,
                        b_dnp,
                        srt,
                        lru_cur,
                        dum_end,
                        tc_b,
                        np.int64(vt_T),
                        k,
                        True,
                        ev,
                        em,
                        emit,
                    )
                    if nT >= 0:
                        vt_T, vt_lo, vt_hi, tc_b = nT, n_lo, n_hi, n_tc
                        vt_req = 0
                        vt_alive = _is_alive(tt, vt_T, k)
            elif xl and b_rq:
                # victims of a required tensor, queued again as one run: the head record's
                # first pages (consecutive), flagged after the move
                hx = S[S_X_HEAD]
                v0 = lru[_u(hx * XW + X_LO)] if hx >= 0 else -1
                nbx = nb
                if hx >= 0 and lru[_u(hx * XW + X_HI)] - v0 < nbx:
                    nbx = lru[_u(hx * XW + X_HI)] - v0
                if emit is None:
                    m, wait, vt_d, _nT, _lo, _hi, _tc = _batch_move_x(
                        p,
                        nbx,
                        a_src,
                        b_ev,
                        b_dest,
                        b_lo,
                        b_hi,
                        pstate,
                        lru,
                        S,
                        tt,
                        at_T,
                        wait,
                        vt_d,
                        srt,
                        tc_b,
                        np.int64(vt_T),
                        False,
                    )
                else:
                    m, wait, vt_d, _nT, _lo, _hi, _tc = _batch_move_x_traced(
                        p,
                        nbx,
                        a_src,
                        b_ev,
                        b_dest,
                        b_lo,
                        b_hi,
                        pstate,
                        lru,
                        S,
                        tt,
                        at_T,
                        wait,
                        vt_d,
                        srt,
                        tc_b,
                        np.int64(vt_T),
                        False,
                        ev,
                        em,
                        emit,
                    )
                wait = _victims_requeued(pstate, v0, m, wait)
            elif xl:
                if emit is None:
                    m, wait, vt_d, nT, n_lo, n_hi, n_tc = _batch_move_x(
                        p,
                        nb * ns if ns >= 2 else nb,
                        a_src,
                        b_ev,
                        b_dest,
                        b_lo,
                        b_hi,
                        pstate,
                        lru,
                        S,
                        tt,
                        at_T,
                        wait,
                        vt_d,
                        srt,
                        tc_b,
                        np.int64(vt_T),
                        True,
                    )
                    if nT >= 0:
                        # (the victims' tensor changed in the run, `_vt_switch`; vt_alive
                        # is read under DeepUM only)
                        vt_T, vt_lo, vt_hi, tc_b = nT, n_lo, n_hi, n_tc
                        vt_req = 0
                else:
                    m, wait, vt_d, nT, n_lo, n_hi, n_tc = _batch_move_x_traced(
                        p,
                        nb * ns if ns >= 2 else nb,
                        a_src,
                        b_ev,
                        b_dest,
                        b_lo,
                        b_hi,
                        pstate,
                        lru,
                        S,
                        tt,
                        at_T,
                        wait,
                        vt_d,
                        srt,
                        tc_b,
                        np.int64(vt_T),
                        True,
                        ev,
                        em,
                        emit,
                    )
                    if nT >= 0:
                        vt_T, vt_lo, vt_hi, tc_b = nT, n_lo, n_hi, n_tc
                        vt_req = 0
            else:
                m, lru_tail, lru_cur, lru_scan, wait, vt_d, v0 = _batch_move(
                    p,
                    nb * ns if ns >= 2 else nb,
                    a_src,
                    b_ev,
                    b_dnp,
                    b_dest,
                    b_lo,
                    b_hi,
                    b_win,
                    b_rq,
                    deepum,
                    pstate,
                    lru,
                    lm,
                    hd,
                    lru_tail,
                    lru_cur,
                    lru_scan,
                    wait,
                    vt_d,
                )
            if m > 0:
                # the arrivals (traced): pages p .. p + m - 1, nb a tick in a streak
                if emit is not None:
                    emit(
                        ev,
                        S,
                        S_IN_OPEN,
                        t,
                        ii,
                        em[2],
                        0,
                        a_kind,
                        it,
                        k,
                        np.int64(at_T),
                        p,
                        m,
                        a_src,
                        IN_GPU,
                        a_val,
                    )
            if ns >= 2 and m > nb:
                # the whole ticks of a streak, settled as their ends would be one by one
                full = (m - 1) // nb
                f_in, f_in_ssd, f_in_cpu, f_out, f_out_ssd, f_out_cpu, f_alloc = f_cnt
                _add_traffic(
                    pcie,
                    it,
                    full * f_in,
                    full * f_in_ssd,
                    full * f_in_cpu,
                    full * f_out,
                    full * f_out_ssd,
                    full * f_out_cpu,
                    full * f_alloc,
                )
                t += full * ii
                S[S_TICK_TIME] = t
                S[S_TICK_SEQ] = S[S_SEQ] + full - 1
                S[S_SEQ] += full
                qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, full * nb)
                at_d += full * nb
                m -= full * nb
                # (the GPU use rises without victims; the host use falls by the pages from
                # it and rises by the victims sent to it; the peak inside a tick, its last
                # page's, is settled with the remainder below)
                if not b_ev:
                    gpu_used += full * nb
                if a_src == IN_CPU:
                    host_used -= full * nb
                if b_ev and b_dest == IN_CPU:
                    host_used += full * nb
                    if host_used > host_peak:
                        host_peak = host_used
            tk_fresh = False
            if m > 0:
                fast_block = False
                at_d += m
                if b_ev and b_dest != NOT_PRESENT:
                    # host use just after the last victim went
                    h_last = host_used
                    if b_dest == IN_CPU:
                        h_last += 1 if a_src == IN_CPU else m
                        if h_last > host_peak:
                            host_peak = h_last
                        host_used += m
                    c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                        b_dest, c_out, c_out_ssd, c_out_cpu, c_fed, h_last, HOST, CPU_CAP, SSD_CAP, m
                    )
                if not b_ev:
                    gpu_used += m
                if a_src == IN_CPU:
                    host_used -= m
                    if c_fed == IN_SSD:
                        c_fed = NOT_KNOWN
                qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, m)
                if b_rq:
                    # the victims v0 .. v0 + m - 1 queued again (one push: the page loop's
                    # pushes of them one by one merge into it)
                    qt, rp, rn = _q_push_served(qb, S, q, qm, qh, qt, rp, rn, rq, v0, m)
                if is_fetch_s:
                    c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
                        fsrc, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, m
                    )
                    if not is_pre_s and c_ffs != NOT_KNOWN and c_ffs != fsrc:
                        forced = True
                        continue
                else:
                    c_alloc += m
                if qh >= qt:
                    break
                continue
        # -- one page, p --
        vslot = -1
        v = -1
        dest = IN_CPU
        if gpu_used >= G:
            dnp = deepum and not is_pf_s and at_req == 0
            if xl:
                # (the extent list holds just the victims: its first page; DeepUM: `_xd_victim`)
                if deepum:
                    vslot, v = _xd_victim(dnp, lru, S, tt, srt, lru_cur, dum_end)
                    if vslot < 0:
                        break
                else:
                    xh = S[S_X_HEAD]
                    if xh < 0:
                        break
                    vslot = xh
                    v = lru[_u(xh * XW + X_LO)]
                vst0 = np.int64(pstate[_u(v)])
                if vst0 == 0:
                    vst0 = np.int64(IN_GPU)  # (a page of the list: a lazy state, `_lz_state`)
            else:
                vslot, v, vst0, tc_c, wt_lo, wt_hi, wt_win = _fast_victim(
                    dnp,
                    deepum,
                    srt,
                    tt,
                    pstate,
                    lru,
                    lm,
                    hd,
                    lru_tail,
                    lru_cur,
                    lru_scan,
                    dum_end,
                    tc_c,
                    wt_lo,
                    wt_hi,
                    wt_win,
                )
            if vslot < 0:
                break
            if v < vt_lo or v >= vt_hi:
                if vt_d != 0:
                    tt[_u(vt_T), TT_RES] += vt_d
                    vt_d = 0
                tc_b, vt_T, vt_lo, vt_hi, vt_req = _tensor_at(tt, srt, tc_b, v)
                vt_alive = _is_alive(tt, vt_T, k)
            if deepum and not vt_alive:
                dest = NOT_PRESENT
            elif c_fed != NOT_KNOWN:
                dest = c_fed
            if dest == IN_CPU and host_used >= HOST:
                break
            if vt_req:
                # a required victim is queued again (to the queue of where it goes); the
                # general path takes it when that queue might be full
                rq = Q_PF_CPU if dest == IN_CPU else (Q_PF_SSD if dest == IN_SSD else Q_PF_ALLOC)
                if rq == q:
                    if qt - qh >= qm:
                        break
                elif S[S_QT + rq] - S[S_QH + rq] >= qm:
                    break
        # -- committed: page p goes now --
        fast_block = False
        tk_fresh = False
        qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, 1)
        # (traced: the victim and the page, rows of one page that may extend the open ones)
        if vslot >= 0:
            if emit is not None:
                _tick_row(emit, ev, S, S_OUT_OPEN, t, EV_EVICT, it, k, np.int64(vt_T), v, 1, IN_GPU, dest, 1)
        if emit is not None:
            _tick_row(emit, ev, S, S_IN_OPEN, t, a_kind, it, k, np.int64(at_T), p, 1, a_src, IN_GPU, a_val)
        if vslot >= 0:
            if xl:
                if deepum:
                    lru_cur = _xd_evict(dnp, lru, S, tt, vslot, v, 1, lru_cur)
                else:
                    _x_take(lru, S, tt, 1)
            else:
                if dnp or not deepum:
                    lru_cur = vslot + 1
                else:
                    lru_scan = vslot
                    if lru_cur == vslot:
                        lru_cur = vslot + 1
                lru[_u(vslot & lm)] = -1
            if dest == IN_CPU:
                host_used += 1
                if host_used > host_peak:
                    host_peak = host_used
            gpu_used -= 1
            if dest != NOT_PRESENT:
                c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                    dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, 1
                )
            if vt_req:
                qt, rp, rn = _q_push_served(qb, S, q, qm, qh, qt, rp, rn, rq, v, 1)
                vst = (vst0 & ~LOC_MASK) | dest | F_TRANSFER
                if not (vst & F_WAIT):
                    vst |= F_WAIT
                    wait += 1
                pstate[_u(v)] = vst
            elif not (dest == NOT_PRESENT and xl and _lz_drop(pstate, tt, S, vt_T, v, 1)):
                # (a lazy tensor's page dropped in order: nothing written, `_lz_drop`)
                pstate[_u(v)] = ((vst0 & ~LOC_MASK) | dest) & ~F_TRANSFER
                if dest == NOT_PRESENT and xl and S[P_RELEASE] != 0:
                    _drop_release(pstate, v, v + 1, S)
            if (vst0 & RES_MASK) == IN_GPU:
                vt_d -= 1
        if a_src == IN_CPU:
            host_used -= 1
            if c_fed == IN_SSD:
                c_fed = NOT_KNOWN
        gpu_used += 1
        st0 = np.int64(pstate[_u(p)])
        if xl:
            wait = _x_arrive(lru, S, tt, pstate, at_T, p, 1, wait)
        else:
            if deepum and lru_cur < lru_tail:
                lru_cur = _cur_norm(lru, lm, pstate, lru_cur, lru_tail)
            lru_tail, lru_cur, wait = _lru_append(lru, lm, pstate, p, st0, lru_tail, lru_cur, wait)
        if (st0 & RES_MASK) != IN_GPU:
            at_d += 1
        if is_fetch_s:
            c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
                fsrc, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, 1
            )
            if not is_pre_s and c_ffs != NOT_KNOWN and c_ffs != fsrc:
                forced = True
                continue
        else:
            c_alloc += 1
        if qh >= qt:
            break
    if vt_d != 0:
        tt[_u(vt_T), TT_RES] += vt_d
    if at_d != 0:
        tt[_u(at_T), TT_RES] += at_d
    S[S_QH + q] = qh
    if qh < qt:
        qb[q, _u(qh & qm), 0] = rp
        qb[q, _u(qh & qm), 1] = rn
    return (
        stage,
        t,
        fast_block,
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
