"""Helpers of the busy tick's stages (§9.2, §9.3): page runs popped from the queues, pages
appended to the LRU list, the tick's counters, the pre-eviction fast path (`_preevict_run`),
traffic sums and repeated ticks (`_tick_repeats`)."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.helpers import _admit, _tick_row, _no_faults_queued, _tensor_at, _tpos
from g10fast.engine.page.layout import (
    EV_EVICT,
    E_NONE,
    F_TRANSFER,
    F_WAIT,
    GEN_MASK,
    GEN_SHIFT,
    LOC_MASK,
    PC_ALLOC,
    PC_IN,
    PC_IN_CPU,
    PC_IN_SSD,
    PC_OUT,
    PC_OUT_CPU,
    PC_OUT_SSD,
    P_ALLOC_CAP,
    P_BULK,
    P_CPU_CAP,
    P_DEEPUM,
    P_G,
    P_GPU_CAP,
    P_HOST,
    P_LCAP,
    P_SSD_CAP,
    P_XLRU,
    P_XMARGIN,
    RES_MASK,
    STALE_BUCKETS,
    S_ERROR,
    S_EV_PAUSE,
    S_KB_PENDING,
    S_KB_SEQ,
    S_KB_TIME,
    S_LRU_CUR,
    S_LRU_HEAD,
    S_LRU_SCAN,
    S_LRU_STALE,
    S_LRU_TAIL,
    S_OUT_OPEN,
    S_NBND,
    S_NEV,
    S_NSTAT,
    S_QH,
    S_QT,
    S_RESCHED,
    S_R_STARTED,
    S_SEQ,
    S_STAT_PAUSE,
    S_XFER,
    S_X_NFREE,
    TT_REQ,
    TT_RES,
    _G_PE_SSD,
    _G_PREALLOC,
    _G_PRE_CPU,
    _G_PRE_SSD,
    _G_RS_SSD,
    _STAGE_QUEUE,
    _kernel,
    _kernel_page,
    _u,
)
from g10fast.engine.page.lru import _cursor_page, _new_generation, _x_remove
from g10fast.locations import IN_CPU, IN_GPU, IN_SSD, NOT_KNOWN


# ----------------------------------------------------------------------------------------
# batcher (§9.2, §9.3): helpers of the busy tick's stages (the stages themselves below).
# A failed allocation (no victim, or an error) ends its stage, and the prefetch-from-SSD
# one also skips the prefetch-from-CPU stage (the artifact's stages are grouped so).
# ----------------------------------------------------------------------------------------


@_kernel
def _run_pop(qb, q, qm, qh, qt, rp, rn, n):
    """Pop the first n (<= rn) pages of a queue whose head run (rp, rn at position qh) is held
    in locals: the new qh, rp, rn (rp, rn unchanged when the queue is left empty)."""
    if rn > n:
        return qh, rp + n, rn - n
    qh += 1
    if qh < qt:
        return qh, qb[q, _u(qh & qm), 0], qb[q, _u(qh & qm), 1]
    return qh, rp, rn


@_kernel
def _lru_append(lru, lm, pstate, p, st0, lru_tail, lru_cur, wait):
    """Give page p (state st0, not in the GPU) a GPU frame: IN_GPU, appended at the LRU tail,
    its transfer and wait-set flags cleared. Returns the new tail, cursor and wait-set size."""
    st = (st0 & ~LOC_MASK) | IN_GPU
    lt = lru_tail
    lru[_u(lt & lm)] = (p << GEN_SHIFT) | (st >> GEN_SHIFT)
    if lru_cur == lt:
        # A std::list cursor at END stays END when a page is appended; an index cursor
        # equal to the tail would otherwise point at the new element.
        lru_cur = lt + 1
    st &= ~F_TRANSFER
    if st & F_WAIT:
        st &= ~F_WAIT
        wait -= 1
    pstate[_u(p)] = st
    return lt + 1, lru_cur, wait


@_kernel
def _count_in(src, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, n):
    """A tick's incoming counters after n pages fetched from src (IN_SSD or IN_CPU), and the
    forced fetch source once a link is full (§9.3; n > 1 only where the link's counter cannot
    pass its cap before the last of them)."""
    c_in += n
    c_alloc += n
    if src == IN_SSD:
        c_in_ssd += n
        if c_in_ssd == SSD_CAP:
            c_ffs = IN_CPU
    else:
        c_in_cpu += n
        if c_in_cpu == CPU_CAP:
            c_ffs = IN_SSD
    return c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs


@_kernel
def _count_out(dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, n):
    """A tick's outgoing counters after n pages evicted to dest (IN_SSD or IN_CPU), host_used
    being the host use just after the last of them, and the forced eviction destination once a
    link or the host is full (§9.3; n > 1 only where neither can fill before the last page)."""
    c_out += n
    if dest == IN_SSD:
        c_out_ssd += n
        if c_out_ssd == SSD_CAP:
            c_fed = IN_CPU
    else:
        c_out_cpu += n
        if c_out_cpu == CPU_CAP or host_used == HOST:
            c_fed = IN_SSD
    return c_out, c_out_ssd, c_out_cpu, c_fed


@_kernel
def _preevict_gpu_run(lru, pstate, L, p0, p1, cur_page, dest):
    """Bulk pre-eviction (P_BULK) of pages p0 .. p1 - 1 to dest: each page in the GPU leaves
    the LRU list as `_new_generation` takes it out (the first generation after its own that
    no stale entry of its bucket carries, which then carries its old one), as in
    `_preevict_run`'s page loop; the run stops before a page not in the GPU, the cursor's
    page, or one whose bucket has no free generation (a compaction), which the page loop
    takes. Returns the pages moved and how many of them were resident and not in
    transfer."""
    res_d = 0
    for p in range(p0, p1):
        if p == cur_page:
            return p - p0, res_d
        st = np.int64(pstate[_u(p)])
        if (st & LOC_MASK) != IN_GPU:
            return p - p0, res_d
        g0 = st >> GEN_SHIFT
        w = L + (p & (STALE_BUCKETS - 1))
        mask = np.int64(lru[_u(w)])
        m2 = mask | (1 << g0)
        m2 = m2 | (m2 << 16)
        free = ~(m2 >> (g0 + 1)) & 0xFFFF
        if free == 0:
            return p - p0, res_d
        i = 0
        while not (free >> i) & 1:
            i += 1
        lru[_u(w)] = mask | (1 << g0)
        pstate[_u(p)] = (
            (st & (15 & ~LOC_MASK & ~F_TRANSFER)) | dest | (((g0 + 1 + i) & GEN_MASK) << GEN_SHIFT)
        )
        if (st & RES_MASK) == IN_GPU:
            res_d += 1
    return p1 - p0, res_d


@_kernel
def _preevict_x_run(pstate, p0, p1, dest):
    """`_preevict_gpu_run` on the extent LRU (no generations, no cursor): pages p0 .. p1 - 1 go
    to dest while they are in the GPU. Returns the pages moved and how many of them were
    resident and not in transfer (those the caller takes out of the list)."""
    res_d = 0
    for p in range(p0, p1):
        st = np.int64(pstate[_u(p)])
        if (st & LOC_MASK) != IN_GPU:
            return p - p0, res_d
        if not (st & F_TRANSFER):
            res_d += 1
        pstate[_u(p)] = (st & ~(LOC_MASK | F_TRANSFER)) | dest
    return p1 - p0, res_d


@_kernel_page
def _preevict_run(
    stage,
    q,
    t,
    it,
    k,
    ev,
    qb,
    S,
    pstate,
    lru,
    tt,
    srt,
    c_out,
    c_out_ssd,
    c_out_cpu,
    c_fed,
    host_used,
    host_peak,
    gpu_used,
    tc_b,
    lru_tail,
    lru_cur,
    lru_scan,
    emit,
):
    """Pre-eviction fast path of a batcher tick at time t: stage `stage`'s queued GPU pages
    in a tight loop (`emit`, the run's emitter, writes them in a traced run as the general
    path would, a run at a time).
    Each page goes exactly as the general path's pre-eviction
    (`_general_page`, `_evict_page`: its LRU entry left stale as `_lru_remove_unknown` does,
    the cursor's page looked up only when it changes, as in `_dealloc_pages`); the loop stops
    at a page not in the GPU, of a required tensor or overflowing the host, which the general
    path then takes.
    A function of its own (not inlined), so that the fetch loop keeps its registers.
    Returns the number of pages moved and the tick's state after them."""
    SSD_CAP = S[P_SSD_CAP]
    CPU_CAP = S[P_CPU_CAP]
    GPU_CAP = S[P_GPU_CAP]
    HOST = S[P_HOST]
    qm = qb.shape[1] - 1
    qh = S[S_QH + q]
    qt = S[S_QT + q]
    qslot = qh & qm
    rp = qb[q, _u(qslot), 0]
    rn = qb[q, _u(qslot), 1]
    moved = 0
    S[S_LRU_TAIL] = lru_tail
    S[S_LRU_CUR] = lru_cur
    S[S_LRU_SCAN] = lru_scan
    xl = S[P_XLRU] != 0
    cur_page = -1 if xl else _cursor_page(lru, pstate, S)
    et_lo = 0
    et_hi = 0
    et_T = 0
    et_req = 0
    et_d = 0
    bulk = S[P_BULK] != 0
    while True:
        if stage == _G_PE_SSD:
            if not (c_out_ssd < SSD_CAP and c_out < GPU_CAP):
                break
        else:
            host_full = host_used == HOST
            if not (
                c_out < GPU_CAP
                and ((host_full and c_out_ssd < SSD_CAP) or (not host_full and c_out_cpu < CPU_CAP))
            ):
                break
        p = rp
        st0 = np.int64(pstate[_u(p)])
        if (st0 & LOC_MASK) != IN_GPU:
            break
        if p < et_lo or p >= et_hi:
            if et_d != 0:
                tt[_u(et_T), TT_RES] += et_d
                et_d = 0
            tc_b, et_T, et_lo, et_hi, et_req = _tensor_at(tt, srt, tc_b, p)
        if et_req:
            break
        if c_fed != NOT_KNOWN:
            dest = c_fed
        else:
            dest = IN_SSD if stage == _G_PE_SSD else IN_CPU
        if dest == IN_CPU and host_used >= HOST:
            break
        if bulk:
            # bulk: the pages of the queue's head run that go the same way, with no counter
            # reaching its cap before the last of them (the page loop takes that one)
            m = rn
            if et_hi - p < m:
                m = et_hi - p
            if GPU_CAP - c_out - 1 < m:
                m = GPU_CAP - c_out - 1
            if dest == IN_SSD:
                if SSD_CAP - c_out_ssd - 1 < m:
                    m = SSD_CAP - c_out_ssd - 1
            else:
                if CPU_CAP - c_out_cpu - 1 < m:
                    m = CPU_CAP - c_out_cpu - 1
                if HOST - host_used - 1 < m:
                    m = HOST - host_used - 1
            if m >= 2:
                if xl:
                    d, res_d = _preevict_x_run(pstate, p, p + m, dest)
                    if res_d > 0:
                        _x_remove(lru, S, tt, et_T, p, p + d)
                else:
                    d, res_d = _preevict_gpu_run(lru, pstate, S[P_LCAP], p, p + m, cur_page, dest)
                    S[S_LRU_STALE] += d
                if d > 0:
                    if emit is not None:
                        _tick_row(
                            emit, ev, S, S_OUT_OPEN, t, EV_EVICT, it, k, np.int64(et_T), p, d, IN_GPU, dest, 0
                        )
                    moved += d
                    qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, d)
                    if dest == IN_CPU:
                        host_used += d
                        if host_used > host_peak:
                            host_peak = host_used
                    gpu_used -= d
                    c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                        dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, d
                    )
                    et_d -= res_d
                    if qh >= qt:
                        break
                    continue
        # -- committed: page p goes now --
        if emit is not None:
            _tick_row(emit, ev, S, S_OUT_OPEN, t, EV_EVICT, it, k, np.int64(et_T), p, 1, IN_GPU, dest, 0)
        moved += 1
        qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, 1)
        if dest == IN_CPU:
            host_used += 1
            if host_used > host_peak:
                host_peak = host_used
        if xl:
            if (st0 & RES_MASK) == IN_GPU:
                _x_remove(lru, S, tt, et_T, p, p + 1)
            pstate[_u(p)] = (st0 & ~(LOC_MASK | F_TRANSFER)) | dest
        else:
            if p == cur_page:
                S[S_LRU_CUR] = S[S_LRU_HEAD]  # (§8.1)
                cur_page = _cursor_page(lru, pstate, S)
            g, compacted = _new_generation(lru, pstate, S, p, st0 >> GEN_SHIFT)
            if compacted:
                cur_page = _cursor_page(lru, pstate, S)
            pstate[_u(p)] = ((st0 & (15 & ~LOC_MASK & ~F_TRANSFER)) | dest) | (g << GEN_SHIFT)
        gpu_used -= 1
        c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
            dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, 1
        )
        if (st0 & RES_MASK) == IN_GPU:
            et_d -= 1
        if qh >= qt:
            break
    if et_d != 0:
        tt[_u(et_T), TT_RES] += et_d
    S[S_QH + q] = qh
    if qh < qt:
        qb[q, _u(qh & qm), 0] = rp
        qb[q, _u(qh & qm), 1] = rn
    lru_tail = S[S_LRU_TAIL]
    lru_cur = S[S_LRU_CUR]
    lru_scan = S[S_LRU_SCAN]
    return (
        moved,
        c_out,
        c_out_ssd,
        c_out_cpu,
        c_fed,
        host_used,
        host_peak,
        gpu_used,
        tc_b,
        lru_tail,
        lru_cur,
        lru_scan,
    )


@_kernel
def _add_traffic(pcie, it, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc):
    """Page counts added to iteration it's traffic: a busy tick's at its end, or k equal
    ticks' at once, each count multiplied by k (a streak of the fetch fast path, a replayed
    batch). A tick that moved nothing adds nothing, not even its allocations."""
    if c_in > 0 or c_out > 0:
        pcie[it, PC_ALLOC] += c_alloc
        pcie[it, PC_IN] += c_in
        pcie[it, PC_IN_SSD] += c_in_ssd
        pcie[it, PC_IN_CPU] += c_in_cpu
        pcie[it, PC_OUT] += c_out
        pcie[it, PC_OUT_SSD] += c_out_ssd
        pcie[it, PC_OUT_CPU] += c_out_cpu


@_kernel_page
def _later_stages_idle(
    S, stage, gpu_used, host_used, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_alloc, fails
):
    """Whether every stage after `stage` whose queue holds pages admits none with a tick's
    counters c_* at its end (GPU use gpu_used, host use host_used), or, admitted, is over at
    its first page without a change (its bit in `fails`, `_fails_at_once`): the stage loop
    then passes each by (`_stage_admission`; a prefetch from SSD that is over so skips the
    prefetch from the host, `_next_stage_after_failure`), and the tick ends as if they held
    none. (Each regular stage has a queue of its own, so none of these is `stage`'s.)"""
    evict_end = gpu_used < S[P_G] or (
        c_out < S[P_GPU_CAP] and (host_used < S[P_HOST] or c_out_ssd < S[P_SSD_CAP])
    )
    skip_cpu = False
    for s2 in range(stage + 1, _G_RS_SSD):
        qq = _STAGE_QUEUE[s2]
        if S[S_QT + qq] == S[S_QH + qq] or (skip_cpu and s2 == _G_PRE_CPU):
            continue
        if _admit(
            s2,
            evict_end,
            c_in,
            c_in_ssd,
            c_in_cpu,
            c_alloc,
            S[P_GPU_CAP],
            S[P_CPU_CAP],
            S[P_SSD_CAP],
            S[P_ALLOC_CAP],
        ):
            if (fails >> s2) & 1 == 0:
                return False
            skip_cpu = s2 == _G_PRE_SSD
    return True


@_kernel
def _fails_at_once(S, qb, tt, srt, pstate, stage, gpu_used, dum_end):
    """The stages after `stage` (bit s2 for stage s2) that, admitted, move nothing and are
    over at their first page: under DeepUM on the extent list, with the GPU full (gpu_used)
    and the scan from the cursor at the list's end (dum_end, sticky: O-15), a prefetch or the
    pre-allocation whose first page (a prefetch's where its queue says) is of a tensor the
    current kernel does not require finds no victim (`_xd_victim`, non-PF; the fast path
    leaves it to the general path, `_general_page`, which ends the stage without an error or
    any change). 0 for every other policy or state. Computed by the caller, outside the
    checks of a tick's end (`_later_stages_idle`), which take the mask as a scalar."""
    if S[P_DEEPUM] == 0 or S[P_XLRU] == 0 or dum_end == 0 or gpu_used < S[P_G]:
        return 0
    qm = qb.shape[1] - 1
    m = 0
    for s2 in range(max(stage + 1, _G_PRE_SSD), _G_PREALLOC + 1):
        q = _STAGE_QUEUE[s2]
        if S[S_QT + q] == S[S_QH + q]:
            continue
        p = qb[q, _u(S[S_QH + q] & qm), 0]
        if s2 != _G_PREALLOC and (np.int64(pstate[_u(p)]) & LOC_MASK) != (
            IN_SSD if s2 == _G_PRE_SSD else IN_CPU
        ):
            continue  # (the general path moves it to the other prefetch queue)
        if tt[_u(srt[1, _u(_tpos(srt, 0, p))]), TT_REQ] == 0:
            m |= 1 << s2
    return m


@_kernel_page
def _tick_repeats(
    S,
    stage,
    q,
    qlen,
    half,
    t_next,
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
    nbnd_cap,
    fails,
):
    """Whether a busy tick whose allocating stage `stage` (queue q, `qlen` pages still
    queued, S[S_QH + q] up to date) has just reached a cap, with the tick's counters c_*, is
    followed by one that starts with the same stage: no queue of an earlier stage holds a
    page (the next tick, with fresh counters, would run that stage first), the queues of the
    later stages that hold pages admit none with the counters the tick ends with, or are over
    at their first page (`fails`, `_fails_at_once`; the stage loop passes such a stage by,
    untouched, and the tick ends), the tick would not start the
    DeepUM rescue, its end would neither open a transfer period nor resume the waiting
    kernel, the event loop would take the tick at t_next next (no kernel event due before
    it, no pause, no queue past half full), and the stage admits a page with the next tick's
    fresh counters."""
    for s2 in range(_G_PE_SSD, _G_RS_SSD):
        qq = _STAGE_QUEUE[s2]
        if qq == q or S[S_QT + qq] == S[S_QH + qq]:
            continue
        if s2 < stage or S[S_QT + qq] - S[S_QH + qq] > half:
            return False
    if not _later_stages_idle(
        S, stage, gpu_used, host_used, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_alloc, fails
    ):
        return False
    if deepum and S[S_RESCHED] != 0 and S[S_R_STARTED] == 0 and wait > 0 and c_in + c_out == 0:
        return False
    if S[S_XFER] == 0 or S[S_ERROR] != E_NONE:
        return False
    if S[S_RESCHED] != 0 and _no_faults_queued(S) and wait == 0:
        return False
    if S[S_NBND] + 4 > nbnd_cap or S[S_NEV] >= S[S_EV_PAUSE] or S[S_NSTAT] >= S[S_STAT_PAUSE]:
        return False
    if qlen <= 0 or qlen > half:
        return False
    if S[S_X_NFREE] < S[P_XMARGIN]:
        return False
    if S[S_KB_PENDING] and (S[S_KB_TIME] < t_next or (S[S_KB_TIME] == t_next and S[S_KB_SEQ] < S[S_SEQ])):
        return False
    evict_ok = gpu_used < S[P_G] or (S[P_GPU_CAP] > 0 and (host_used < S[P_HOST] or S[P_SSD_CAP] > 0))
    return _admit(stage, evict_ok, 0, 0, 0, 0, S[P_GPU_CAP], S[P_CPU_CAP], S[P_SSD_CAP], S[P_ALLOC_CAP])
