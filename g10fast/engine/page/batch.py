"""A busy batcher tick, stage by stage (§9.2, §9.3): the tick's parameters and counters, a
stage's admission, runs of page moves with their victims (`_batch_limit`, `_batch_move`,
`_batch_move_x`, `_batch_move_xd`, `_streak_ticks`) and the fast path's single victim
(`_fast_victim`)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from g10fast.engine.page.helpers import (
    _admit,
    _eligible,
    _is_alive,
    _live,
    _q_push,
    _rp_canon_t,
    _tensor_at,
    _tpos,
)
from g10fast.engine.page.layout import (
    EV_EVICT,
    F_TRANSFER,
    F_WAIT,
    GEN_SHIFT,
    LOC_MASK,
    P_ALLOC_CAP,
    P_CPU_CAP,
    P_DEEPUM,
    P_G,
    P_GPU_CAP,
    P_HOST,
    P_LCAP,
    P_RELEASE,
    P_SSD_CAP,
    P_XLRU,
    Q_PREEVICT_CPU,
    Q_PREEVICT_SSD,
    RES_MASK,
    S_KB_PENDING,
    S_KB_TIME,
    S_LRU_HEAD,
    S_LZ_DROP,
    S_LZ_FIX,
    S_OUT_OPEN,
    S_QH,
    S_QT,
    S_RESCHED,
    S_R_STARTED,
    S_X_HEAD,
    TT_LA,
    TT_LD,
    TT_LZ,
    TT_NP,
    TT_RES,
    TT_START,
    TT_WIN,
    TT_Z,
    _G_END,
    _G_PE_CPU,
    _G_PE_SSD,
    _G_PREALLOC,
    _G_PRE_SSD,
    _G_RS_SSD,
    _RUN_CHUNK,
    _STAGE_QUEUE,
    _kernel,
    _kernel_page,
    _kernel_stage,
    _u,
)
from g10fast.engine.page.lru import (
    XW,
    X_HI,
    X_LO,
    X_NEXT,
    X_T,
    _cur_norm,
    _x_arrive,
    _x_take,
    _xd_evict,
    _xd_victim,
)
from g10fast.engine.page.release import _drop_release, _populate, _unmap_zero
from g10fast.engine.page.stages import _count_in, _count_out, _later_stages_idle, _lru_append
from g10fast.locations import IN_CPU, IN_GPU, IN_SSD, NOT_KNOWN, NOT_PRESENT


# ----------------------------------------------------------------------------------------
# a busy batcher tick, stage by stage (§9.2, §9.3)
#
# `_busy_ticks` runs busy ticks one after another; each tick resets its counters
# (`_fresh_counters`) and runs the stages in order, each taking pages from its queue while
# it admits them (`_stage_admission`). A stage's pages go by one of three paths, which move
# them identically: the pre-eviction fast path (`_preevict_run`), the fetch fast path
# (`_fetch_fast`: runs of pages with `_batch_limit` and `_batch_move`, single pages with
# `_fast_victim`; a traced run takes both on the extent LRU only), and the general path
# (`_general_page`: one page with the eviction rule (`rules`), `_evict_page`,
# `_alloc_page`), which takes everything the fast paths leave to it. Then the tick ends
# (`_tick_end`), and `_next_tick_busy` says whether the next event is another busy tick that
# can run here. The hot scalar state (per-tick counters, memory use, wait-set size, LRU
# positions, lookup caches) travels through these functions as arguments and return values,
# so that it stays in registers instead of S (the arrays may alias for the compiler, so
# every S access would otherwise be a memory operation).
# ----------------------------------------------------------------------------------------

# A busy tick's arrays and its hot scalar state travel between its stages as two bundles
# (`_fetch_fast`, `_general_page`). Numba's calling convention flattens a tuple argument into
# its members, so a bundle costs nothing over the loose arguments: the same machine arguments,
# the state still in registers (benchmarks/results/paired_timing.jsonl).
# The arrays: the tensor table, the page -> tensor lookup, the page states, the LRU list (the
# ring or the extents), the page-run queues, the scalar state S, the per-iteration traffic,
# the transfer boundaries and the event rows.
TickArrays = namedtuple("TickArrays", ["tt", "srt", "pstate", "lru", "qb", "S", "pcie", "bnd", "ev"])
# The hot scalar state (S's slots, as locals for a run of busy ticks): GPU frames and host
# pages in use, the host peak, the wait-set size, "PF EVICTING LIVING PAGE" warnings, the LRU
# tail, cursor and scan positions, DeepUM's END flag and the three page -> tensor lookup
# caches.
TickState = namedtuple(
    "TickState",
    [
        "gpu_used",
        "host_used",
        "host_peak",
        "wait",
        "live_warn",
        "lru_tail",
        "lru_cur",
        "lru_scan",
        "dum_end",
        "tc_a",
        "tc_b",
        "tc_c",
    ],
)

# The parameters a busy tick reads, from S once per `_busy_ticks` call: GPU frames, host line
# (pages), per-tick caps (pages: GPU link, CPU link, SSD link, allocations), DeepUM policy
# (bool), LRU capacity and its mask, LRU head position (not moved during a tick), extent LRU
# (bool, P_XLRU; the ring's capacity is then unbounded for the room tests). A tuple of
# locals (registers), where reads of S, which may alias the arrays written in the tick, would
# be memory loads on every page.
TickParams = namedtuple(
    "TickParams",
    ["G", "HOST", "GPU_CAP", "CPU_CAP", "SSD_CAP", "ALLOC_CAP", "deepum", "lcap", "lm", "hd", "xl"],
)


@_kernel_stage
def _tick_params(S):
    """The busy tick's parameters (`TickParams`) from S."""
    return TickParams(
        S[P_G],
        S[P_HOST],
        S[P_GPU_CAP],
        S[P_CPU_CAP],
        S[P_SSD_CAP],
        S[P_ALLOC_CAP],
        S[P_DEEPUM] != 0,
        S[P_LCAP],
        S[P_LCAP] - 1,
        S[S_LRU_HEAD],
        S[P_XLRU] != 0,
    )


@_kernel_stage
def _fresh_counters(host_used, HOST):
    """A tick's counters at its start (§9.3): c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd,
    c_out_cpu, c_alloc all 0, no forced fetch source, and the eviction destination forced to
    SSD when the host memory is full."""
    c_fed = IN_SSD if host_used == HOST else NOT_KNOWN
    return 0, 0, 0, 0, 0, 0, 0, NOT_KNOWN, c_fed


@_kernel_stage
def _next_stage_after_failure(stage):
    """The stage after a failed allocation (no victim, an error): the next one, except that
    prefetch-from-SSD also skips prefetch-from-CPU (the artifact groups them)."""
    return _G_PREALLOC if stage == _G_PRE_SSD else stage + 1


@_kernel_page
def _stage_admission(
    stage,
    rescue,
    S,
    prm,
    wait,
    gpu_used,
    host_used,
    c_in,
    c_in_ssd,
    c_in_cpu,
    c_out,
    c_out_ssd,
    c_out_cpu,
    c_alloc,
):
    """Stage `stage`'s queue and whether it admits a page now. The DeepUM "lock-up" rescue
    (§9.2) is decided once, when the regular stages are over: when it does not start, the
    tick's stages end (stage _G_END is returned). Returns stage, queue, admitted, rescue."""
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    HOST = prm.HOST
    if stage == _G_PE_SSD:
        return stage, Q_PREEVICT_SSD, c_out_ssd < SSD_CAP and c_out < GPU_CAP, rescue
    if stage == _G_PE_CPU:
        host_full = host_used == HOST
        ok = c_out < GPU_CAP and (
            (host_full and c_out_ssd < SSD_CAP) or (not host_full and c_out_cpu < CPU_CAP)
        )
        return stage, Q_PREEVICT_CPU, ok, rescue
    if stage == _G_RS_SSD and not rescue:
        if not (prm.deepum and S[S_RESCHED] != 0 and S[S_R_STARTED] == 0 and wait > 0 and c_in + c_out == 0):
            return _G_END, 0, False, rescue
        rescue = True
    evict_ok = gpu_used < prm.G or (c_out < GPU_CAP and (host_used < HOST or c_out_ssd < SSD_CAP))
    ok = _admit(stage, evict_ok, c_in, c_in_ssd, c_in_cpu, c_alloc, GPU_CAP, CPU_CAP, SSD_CAP, prm.ALLOC_CAP)
    return stage, _STAGE_QUEUE[stage], ok, rescue


@_kernel_stage
def _batch_limit(
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
):
    """How many of the next nb pages (of one queued run, one tensor, with LRU room) the
    fetch fast path may move at once: the run is cut where a counter would reach its cap
    (incoming, per-link, allocation, outgoing when each page needs a victim going to
    b_dest), or the GPU or the host would fill, so that the admission tests, the forced
    source and destination and the queue pop are settled once for the run, after it."""
    G = prm.G
    HOST = prm.HOST
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    ALLOC_CAP = prm.ALLOC_CAP
    if is_fetch_s:
        if GPU_CAP - c_in < nb:
            nb = GPU_CAP - c_in
        lim = SSD_CAP - c_in_ssd if fsrc == IN_SSD else CPU_CAP - c_in_cpu
        if lim < nb:
            nb = lim
    if not is_pre_s and ALLOC_CAP - c_alloc < nb:
        nb = ALLOC_CAP - c_alloc
    if b_ev and b_dest != NOT_PRESENT:
        if GPU_CAP - c_out < nb:
            nb = GPU_CAP - c_out
        if b_dest == IN_CPU:
            # (a page from host memory frees its host page right after its victim took one)
            h_room = HOST - host_used if a_src != IN_CPU else (nb if host_used < HOST else 0)
            if h_room < nb:
                nb = h_room
            if CPU_CAP - c_out_cpu < nb:
                nb = CPU_CAP - c_out_cpu
        else:
            if SSD_CAP - c_out_ssd < nb:
                nb = SSD_CAP - c_out_ssd
            if a_src == IN_CPU and nb > 1:
                nb = 1  # its fetch unforces the destination
    elif not b_ev and G - gpu_used < nb:
        nb = G - gpu_used
    return nb


@_kernel_stage
def _streak_ticks(
    nb,
    rn,
    t_pages,
    ring_room,
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
    c_fed0,
    fails,
):
    """A streak of identical busy ticks (issue 23): the fetch fast path's first run of a tick
    that began with fresh counters (c_fed0 its forced eviction destination), nb pages (its
    cap-limited run length), each with a victim going to b_dest, SSD (the host is full) or,
    under DeepUM, dropped (NOT_PRESENT), from SSD or not present, so that neither the host
    use nor the GPU use changes. If the tick stops after those nb
    pages (a cap, or its link full) and the next ones would start the same way and do the
    same (their pages in the same queued run and tensor, LRU room, no kernel event due before
    them; the rest of `_tick_repeats` does not change while such ticks run: no page enters
    another queue, the demand queue stays non-empty, the host and GPU use stay put), then
    `_batch_move` may take up to ns * nb pages at once and the whole ticks among them be
    ended in closed form (`fails`: the later stages over at once, `_fails_at_once`). Returns
    ns (< 2: no streak) and the counters of a whole tick."""
    HOST = prm.HOST
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    f_out = 0
    f_out_ssd = 0
    f_out_cpu = 0
    if b_dest != NOT_PRESENT:
        f_out, f_out_ssd, f_out_cpu, _f_fed = _count_out(
            b_dest, 0, 0, 0, c_fed0, host_used, HOST, CPU_CAP, SSD_CAP, nb
        )
    f_in = 0
    f_in_ssd = 0
    f_in_cpu = 0
    f_alloc = nb
    forced = False
    if is_fetch_s:
        f_in, f_in_ssd, f_in_cpu, f_alloc, f_ffs = _count_in(
            fsrc, 0, 0, 0, 0, NOT_KNOWN, CPU_CAP, SSD_CAP, nb
        )
        forced = f_ffs != NOT_KNOWN and f_ffs != fsrc
    cnt = (f_in, f_in_ssd, f_in_cpu, f_out, f_out_ssd, f_out_cpu, f_alloc)
    evict_ok = gpu_used < prm.G or (f_out < GPU_CAP and (host_used < HOST or f_out_ssd < SSD_CAP))
    if not forced and _admit(
        stage, evict_ok, f_in, f_in_ssd, f_in_cpu, f_alloc, GPU_CAP, CPU_CAP, SSD_CAP, prm.ALLOC_CAP
    ):
        return 0, cnt  # the tick would go on after its nb pages
    if not _later_stages_idle(
        S, stage, gpu_used, host_used, f_in, f_in_ssd, f_in_cpu, f_out, f_out_ssd, f_alloc, fails
    ):
        return 0, cnt  # a later stage would take pages after them (`_tick_repeats`)
    ns = (rn - 1) // nb  # the run outlasts the streak: the queue stays as it is
    if t_pages // nb < ns:
        ns = t_pages // nb
    if (ring_room - 1) // nb < ns:
        ns = (ring_room - 1) // nb
    if S[S_KB_PENDING]:
        kb = (S[S_KB_TIME] - t - 1) // ii  # the tick ends before the kernel event
        if kb < ns:
            ns = kb
    return ns, cnt


@_kernel_stage
def _batch_move(
    p,
    nb,
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
):
    """Move pages p, p+1, ... (at most nb, while they are at a_src) to the GPU, each with a
    victim (b_ev) of the last victim's tensor (pages b_lo..b_hi-1) going to b_dest, found as
    the page loop finds it (DeepUM non-PF, b_dnp: a live page outside the window, from the
    cursor; DeepUM PF: from the scan position; LRU: from the cursor). Stops at a page
    elsewhere, or whose victim (or live page, for DeepUM non-PF) is of another tensor, whose
    lookup the page loop does. b_rq: the victims' tensor is required by the current kernel,
    so each victim is flagged in transfer and joins the wait set (the caller queues them
    again, as one run: the run stops at a victim that does not follow the last one). Returns
    the pages moved, the LRU positions, the wait-set size, the victim tensor's pending TT_RES
    change and the first victim (-1: none)."""
    m = 0
    v0 = -1
    v_end = -1
    # (no victim can be one of the arriving pages: a run of victims is read first, then
    # written, below)
    disjoint = p + nb <= b_lo or p >= b_hi
    while m < nb:
        pp = p + m
        st0 = np.int64(pstate[_u(pp)])
        if (st0 & LOC_MASK) != a_src:
            break
        if not b_ev:
            if deepum and lru_cur < lru_tail:
                lru_cur = _cur_norm(lru, lm, pstate, lru_cur, lru_tail)
            lru_tail, lru_cur, wait = _lru_append(lru, lm, pstate, pp, st0, lru_tail, lru_cur, wait)
            m += 1
            continue
        s = lru_scan if (deepum and not b_dnp) else lru_cur
        if s < hd:
            s = hd
        vst0 = 0
        e = -1
        v = -1
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vst0 = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if b_dnp:
                    if _live(vst0, e):
                        v = e >> GEN_SHIFT
                        if v < b_lo or v >= b_hi or not b_win:
                            break
                elif _eligible(vst0, e):
                    v = e >> GEN_SHIFT
                    break
            s += 1
        if s >= lru_tail or v < b_lo or v >= b_hi:
            break
        if b_rq:
            if v0 < 0:
                v0 = v
            elif v != v_end:
                break
        # -- the run from here: while the next entries hold the next pages of the victim's
        # tensor, each the victim the scan would find next (DeepUM non-PF: live, its tensor
        # outside the window as the first one's is; else: not in transfer), and the next
        # pages arrive from a_src. Read first (no store between the loads; chunks of
        # _RUN_CHUNK without a branch, which LLVM vectorises), then written as plain loops,
        # within one turn of the ring for the victims' entries and for the new ones.
        lt = lru_tail
        sb = s & lm
        tb = lt & lm
        j = 1
        if disjoint:
            jmax = nb - m
            if jmax > lt - s:
                jmax = lt - s
            if jmax > b_hi - v:
                jmax = b_hi - v
            if jmax > lm + 1 - sb:
                jmax = lm + 1 - sb
            if jmax > lm + 1 - tb:
                jmax = lm + 1 - tb
            # live: in the GPU (with its entry's generation); else also not in transfer
            fmask = LOC_MASK if b_dnp else RES_MASK
            while j + _RUN_CHUNK <= jmax:
                bad = 0
                for i in range(j, j + _RUN_CHUNK):
                    vs2 = np.int64(pstate[_u(v + i)])
                    bad |= np.int64(lru[_u(sb + i)]) ^ (((v + i) << GEN_SHIFT) | (vs2 >> GEN_SHIFT))
                    bad |= (vs2 & fmask) ^ IN_GPU
                    bad |= (np.int64(pstate[_u(pp + i)]) & LOC_MASK) ^ a_src
                if bad != 0:
                    break
                j += _RUN_CHUNK
            while j < jmax:
                vs2 = np.int64(pstate[_u(v + j)])
                if (
                    np.int64(lru[_u(sb + j)]) != (((v + j) << GEN_SHIFT) | (vs2 >> GEN_SHIFT))
                    or (vs2 & fmask) != IN_GPU
                    or (np.int64(pstate[_u(pp + j)]) & LOC_MASK) != a_src
                ):
                    break
                j += 1
        cur0 = lru_cur
        # the positions, as the page loop moves them (victim i at s + i, then its page's
        # entry at lt + i): when s + 1 < lt the two never meet, so the cursor ends past the
        # victims (LRU, DeepUM non-PF), or past them when it was on one of them, or at END
        # when it was at END (DeepUM PF)
        if s + 1 == lt:
            for i in range(j):
                si = s + i
                if not deepum or b_dnp:
                    lru_cur = si + 1
                elif lru_cur == si:
                    lru_cur = si + 1
                if lru_cur == lt + i:
                    lru_cur = lt + i + 1
        elif not deepum or b_dnp:
            lru_cur = s + j
        elif s <= lru_cur and lru_cur < s + j:
            lru_cur = s + j
        elif lru_cur == lt:
            lru_cur = lt + j
        if deepum and not b_dnp:
            lru_scan = s + j - 1
        for i in range(sb, sb + j):
            lru[_u(i)] = -1
        if j > 1:
            lru[_u(sb)] = -j  # a recorded run of tombstones (see _lru_advance_head)
        if b_rq:
            for vi in range(v, v + j):
                vs = np.int64(pstate[_u(vi)])
                if (vs & RES_MASK) == IN_GPU:
                    vt_d -= 1
                if not (vs & F_WAIT):
                    wait += 1
                pstate[_u(vi)] = (vs & ~LOC_MASK) | b_dest | F_TRANSFER | F_WAIT
            v_end = v + j
        else:
            for vi in range(v, v + j):
                vs = np.int64(pstate[_u(vi)])
                pstate[_u(vi)] = ((vs & ~LOC_MASK) | b_dest) & ~F_TRANSFER
                if (vs & RES_MASK) == IN_GPU:
                    vt_d -= 1
        if deepum and lru_cur < lt:
            # (DeepUM: the artifact's cursor is a list iterator, on a live page or at END; a
            # cursor with no live entry before the arrivals was at END when the first one came
            # if the run was one page, or if the cursor lay past the victims)
            cn = _cur_norm(lru, lm, pstate, lru_cur, lt)
            if cn == lt and (j == 1 or cur0 >= s + j):
                cn = lt + j
            lru_cur = cn
        for i in range(j):
            st = (np.int64(pstate[_u(pp + i)]) & ~(LOC_MASK | F_TRANSFER)) | IN_GPU
            lru[_u(tb + i)] = ((pp + i) << GEN_SHIFT) | (st >> GEN_SHIFT)
            if st & F_WAIT:
                st &= ~F_WAIT
                wait -= 1
            pstate[_u(pp + i)] = st
        lru_tail = lt + j
        m += j
    return m, lru_tail, lru_cur, lru_scan, wait, vt_d, v0


@_kernel
def _lz_fix(pstate, tt, S, T, exact):
    """Write out the states of tensor T when they are lazy (TT_LZ): each page whose byte is 0
    takes the state it stands for (`_lz_state`: NOT_PRESENT below TT_LD, IN_GPU from it to
    TT_LA, F_TRANSFER from there), and the tensor's states are read and written as any from
    then on. Their memory is mapped for writing first: the memory pages that hold zeros only
    (mapped for reading, `_map_read`: the system's zero page) are unmapped (`_unmap_zero`) and
    then filled from the pool or mapped (`_populate`); written where they were, each would
    take a page fault and a cleared page (45 k faults in a SENet154-1024 G10 run, 17 % of its
    engine's samples). With no page that came back (TT_LZ 1) and every page from TT_LD to
    TT_LA resident, none of those left either: their bytes are 0, two fills; that takes
    TT_RES exact (`exact`: at a kernel's start, not inside a busy tick, whose loops keep the
    victims' change of it in a local)."""
    lz = tt[_u(T), TT_LZ]
    if lz == 0:
        return
    p0 = tt[_u(T), TT_START]
    end = p0 + tt[_u(T), TT_NP]
    la = tt[_u(T), TT_LA]
    ld = tt[_u(T), TT_LD]
    if S[P_RELEASE] != 0:
        _unmap_zero(pstate, p0, end - p0, S)
        _populate(pstate, p0, end - p0, S)
    if exact and lz == 1 and tt[_u(T), TT_RES] == la - ld:
        pstate[ld:la] = IN_GPU
        pstate[la:end] = F_TRANSFER
    else:
        for p in range(ld, end):
            if pstate[_u(p)] == 0:
                pstate[_u(p)] = IN_GPU if p < la else F_TRANSFER
    tt[_u(T), TT_LZ] = 0
    S[S_LZ_FIX] += 1


@_kernel
def _lz_drop(pstate, tt, S, T, lo, j):
    """Pages lo .. lo + j - 1 of tensor T, resident, are dropped (DeepUM's victims of a dead
    tensor: NOT_PRESENT, state 0). When T's states are lazy with no page come back (TT_LZ 1)
    and the pages are the next ones from TT_LD, TT_LD moves past them and nothing is written
    (their bytes are 0 already): returns True. Otherwise a lazy tensor's states are written out
    first (`_lz_fix`), and the caller writes and gives back as for any drop: False."""
    lz = tt[_u(T), TT_LZ]
    if lz == 0:
        return False
    if lz == 1 and lo == tt[_u(T), TT_LD] and lo + j <= tt[_u(T), TT_LA]:
        tt[_u(T), TT_LD] = lo + j
        S[S_LZ_DROP] += 1
        if lo + j == tt[_u(T), TT_START] + tt[_u(T), TT_NP]:
            # (every page dropped in order: every byte 0, NOT_PRESENT; known so, TT_Z)
            tt[_u(T), TT_LZ] = 0
            tt[_u(T), TT_Z] = 1
        return True
    _lz_fix(pstate, tt, S, T, False)
    return False


@_kernel_page
def _victims_leave(pstate, lo, j, dest):
    """Victims lo .. lo + j - 1 leave the GPU for dest (not in transfer)."""
    for v in range(lo, lo + j):
        pstate[_u(v)] = (np.int64(pstate[_u(v)]) & ~(LOC_MASK | F_TRANSFER)) | dest


@_kernel_page
def _victim_rows(emit, ev, S, em, off, T, lo, j, dest):
    """Victims lo .. lo + j - 1 of tensor T, the batch's pages off .., gone to dest: EVICT
    rows through the run's emitter (em: the first tick's time, the tick period, the pages a
    tick, the iteration, the kernel). Returns the emitter's answer (the event buffer below its
    pause line)."""
    return emit(
        ev, S, S_OUT_OPEN, em[0], em[1], em[2], off, EV_EVICT, em[3], em[4], T, lo, j, IN_GPU, dest, 1
    )


@_kernel_page
def _batch_move_x(
    p, nb, a_src, b_ev, b_dest, b_lo, b_hi, pstate, lru, S, tt, a_T, wait, vt_d, srt, tc, vt_T, sw
):
    """`_batch_move` on the extent LRU (P_XLRU, LRU policies): pages p, p+1, ... (at most nb,
    while they are at a_src) of tensor a_T move to the GPU, each with a victim (b_ev) going
    to b_dest. The victims are the list's first pages, a head extent at a time: the pages
    that arrive join the tail, behind the victims of their chunk, as they would one by one.
    The victims are of the last victim's tensor vt_T (pages b_lo..b_hi-1), or, with sw, of
    any tensor the current kernel does not require: the page loop would look each new
    victim's tensor up (`_tensor_at`, tc the lookup's position) and send its victim to
    b_dest, as it does under the LRU policies whatever the victim's tensor (`_vt_switch`).
    Returns the pages moved, the wait-set size, the victims' tensor's pending TT_RES change
    (the change of the tensors left before it written), and, when the victims' tensor
    changed, the new one, its pages and the lookup's position (-1, else)."""
    m = 0
    nT = np.int64(-1)
    while m < nb:
        k = nb - m
        lo = 0
        if b_ev:
            h = S[S_X_HEAD]
            if h < 0:
                break
            lo = lru[_u(h * XW + X_LO)]
            if lo < b_lo or lo >= b_hi:
                if not sw:
                    break
                ok, tc, vt_T, vt_d, b_lo, b_hi = _vt_switch(
                    tt, srt, tc, lo, b_dest, -1, vt_T, vt_d, b_lo, b_hi
                )
                if not ok:
                    break
                nT = vt_T
            hi = lru[_u(h * XW + X_HI)]
            if hi - lo < k:
                k = hi - lo
        j = _rp_canon_t(pstate, tt, a_T, p + m, k, a_src)
        if j == 0:
            break
        if b_ev:
            _victims_leave(pstate, lo, j, b_dest)
            _x_take(lru, S, tt, j)
            vt_d -= j
        wait = _x_arrive(lru, S, tt, pstate, a_T, p + m, j, wait)
        m += j
        if j < k:
            break
    return m, wait, vt_d, nT, b_lo, b_hi, tc


@_kernel
def _vt_switch(tt, srt, tc, v, b_dest, kk, vt_T, vt_d, b_lo, b_hi):
    """Whether a run of victims (`_batch_move_x`, `_batch_move_xd`) may go on with victim v,
    of another tensor than the last victim's (vt_T, pages b_lo..b_hi-1, its pending TT_RES
    change vt_d), as the page loop would take it: the current kernel does not require v's
    tensor (else the page loop queues it again), and under DeepUM (kk >= 0, the current
    kernel) its victims go where the run's go (a dead tensor's are dropped, NOT_PRESENT; a
    live one's go to b_dest). If so, the last victim's tensor's change is written, as the
    page loop writes it when it looks the next victim's tensor up. Returns whether, and the
    lookup's position tc, the victims' tensor, its pending change and its pages (v's when it
    may go on, else those given)."""
    tc2, T2, lo2, hi2, req2 = _tensor_at(tt, srt, tc, v)
    ok = req2 == 0
    if ok and kk >= 0:
        ok = _is_alive(tt, T2, kk) == (b_dest != NOT_PRESENT)
    if not ok:
        return False, tc, vt_T, vt_d, b_lo, b_hi
    if vt_d != 0:
        tt[_u(vt_T), TT_RES] += vt_d
    return True, tc2, T2, np.int64(0), lo2, hi2


@_kernel
def _victims_requeued(pstate, lo, j, wait):
    """Victims lo .. lo + j - 1, just gone (of a tensor the current kernel requires), go back
    to the queue of where they went, as the page loop queues them: each is flagged in
    transfer and joins the wait set (the caller pushes them). Returns the wait-set size."""
    for v in range(lo, lo + j):
        vs = np.int64(pstate[_u(v)])
        if not (vs & F_WAIT):
            wait += 1
        pstate[_u(v)] = vs | F_TRANSFER | F_WAIT
    return wait


@_kernel_page
def _batch_move_xd(
    p,
    nb,
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
    a_T,
    wait,
    vt_d,
    dnp,
    srt,
    cur,
    dum_end,
    tc,
    vt_T,
    kk,
    sw,
):
    """`_batch_move_x` under DeepUM (dnp: non-PF): the victims are `_xd_victim`'s, a record
    at a time, and the cursor `cur` moves as one by one; a run does not take the last page
    of the tail record with others (one by one, the page after it would be the first
    arrival, not END). (A function of its own: with these branches in `_batch_move_x`, the
    LRU policies' runs were slower, Inceptionv3-1536 Base UVM by about a fifth.) b_rq as in
    `_batch_move_x`; with sw (and not b_rq), victims of other tensors as `_batch_move_x` takes
    them, those of a tensor that is not alive at kernel kk only where the run's are dropped
    and those of a live one only where they are not (`_vt_switch`). Returns the pages moved,
    the wait-set size, the victim tensor's pending TT_RES change, the cursor, the first
    victim (-1: none), and what `_batch_move_x` returns of a change of the victims' tensor."""
    m = 0
    h = -1
    v0 = -1
    nT = np.int64(-1)
    while m < nb:
        k = nb - m
        lo = 0
        if b_ev:
            h, lo = _xd_victim(dnp, lru, S, tt, srt, cur, dum_end)
            if h < 0:
                break
            if lo < b_lo or lo >= b_hi:
                if not sw or b_rq:
                    break
                ok, tc, vt_T, vt_d, b_lo, b_hi = _vt_switch(
                    tt, srt, tc, lo, b_dest, kk, vt_T, vt_d, b_lo, b_hi
                )
                if not ok:
                    break
                nT = vt_T
            if b_rq:
                if v0 < 0:
                    v0 = lo
                elif lo != v0 + m:
                    break
            hi = lru[_u(h * XW + X_HI)]
            if hi - lo <= k:
                k = hi - lo
                if k >= 2 and lru[_u(h * XW + X_NEXT)] < 0:
                    k -= 1
        j = _rp_canon_t(pstate, tt, a_T, p + m, k, a_src)
        if j == 0:
            break
        if b_ev:
            # (a lazy tensor's pages dropped in order: nothing written, `_lz_drop`)
            vT = lru[_u(h * XW + X_T)]
            if b_rq or b_dest != NOT_PRESENT or not _lz_drop(pstate, tt, S, vT, lo, j):
                _victims_leave(pstate, lo, j, b_dest)
                if b_rq:
                    wait = _victims_requeued(pstate, lo, j, wait)
                elif b_dest == NOT_PRESENT and S[P_RELEASE] != 0:
                    _drop_release(pstate, lo, lo + j, S)
            cur = _xd_evict(dnp, lru, S, tt, h, lo, j, cur)
            vt_d -= j
        wait = _x_arrive(lru, S, tt, pstate, a_T, p + m, j, wait)
        m += j
        if j < k:
            break
    return m, wait, vt_d, cur, v0, nT, b_lo, b_hi, tc


@_kernel_stage
def _batch_move_x_traced(
    p,
    nb,
    a_src,
    b_ev,
    b_dest,
    b_lo,
    b_hi,
    pstate,
    lru,
    S,
    tt,
    a_T,
    wait,
    vt_d,
    srt,
    tc,
    vt_T,
    sw,
    ev,
    em,
    emit,
):
    """`_batch_move_x` in a traced run: its loop, a head extent at a time (with sw, on past
    a change of the victims' tensor as it goes, `_vt_switch`), each extent's victims written
    as EVICT rows of their tensor through the run's emitter (`_victim_rows`; em: the first
    tick's time, the tick period, the pages a tick, the iteration and the kernel). It stops
    once the event buffer is past its pause line (the tick goes on by the page loop, and ends
    the streak). The untraced moves keep their compiled shape (a branch inside
    `_batch_move_x` once cost the LRU policies a fifth). Returns what `_batch_move_x`
    returns."""
    m = 0
    nT = np.int64(-1)
    while m < nb:
        k = nb - m
        lo = 0
        if b_ev:
            h = S[S_X_HEAD]
            if h < 0:
                break
            lo = lru[_u(h * XW + X_LO)]
            if lo < b_lo or lo >= b_hi:
                if not sw:
                    break
                ok, tc, vt_T, vt_d, b_lo, b_hi = _vt_switch(
                    tt, srt, tc, lo, b_dest, -1, vt_T, vt_d, b_lo, b_hi
                )
                if not ok:
                    break
                nT = vt_T
            hi = lru[_u(h * XW + X_HI)]
            if hi - lo < k:
                k = hi - lo
        j = _rp_canon_t(pstate, tt, a_T, p + m, k, a_src)
        if j == 0:
            break
        more = True
        if b_ev:
            _victims_leave(pstate, lo, j, b_dest)
            _x_take(lru, S, tt, j)
            vt_d -= j
            # (the emitter answers whether the event buffer is below its pause line; past
            # it, the tick goes on by the page loop, and the engine flushes the buffer soon)
            more = _victim_rows(emit, ev, S, em, m, vt_T, lo, j, b_dest)
        wait = _x_arrive(lru, S, tt, pstate, a_T, p + m, j, wait)
        m += j
        if j < k or not more:
            break
    return m, wait, vt_d, nT, b_lo, b_hi, tc


@_kernel_stage
def _batch_move_xd_traced(
    p,
    nb,
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
    a_T,
    wait,
    vt_d,
    dnp,
    srt,
    cur,
    dum_end,
    tc,
    vt_T,
    kk,
    sw,
    ev,
    em,
    emit,
):
    """`_batch_move_xd` in a traced run, as `_batch_move_x_traced`: one record's victims at a
    time (bounded as `_batch_move_xd` bounds them, so that each call takes one run of
    consecutive victims; with sw and not b_rq, on past a change of the victims' tensor as
    `_batch_move_xd` goes, `_vt_switch`). Returns what `_batch_move_xd` returns."""
    m = 0
    v0 = -1
    nT = np.int64(-1)
    while m < nb:
        k = nb - m
        lo = 0
        if b_ev:
            h, lo = _xd_victim(dnp, lru, S, tt, srt, cur, dum_end)
            if h < 0:
                break
            if b_rq and v0 >= 0 and lo != v0 + m:
                break
            if lo < b_lo or lo >= b_hi:
                if not sw or b_rq:
                    break
                ok, tc, vt_T, vt_d, b_lo, b_hi = _vt_switch(
                    tt, srt, tc, lo, b_dest, kk, vt_T, vt_d, b_lo, b_hi
                )
                if not ok:
                    break
                nT = vt_T
            hi = lru[_u(h * XW + X_HI)]
            if hi - lo <= k:
                k = hi - lo
                if k >= 2 and lru[_u(h * XW + X_NEXT)] < 0:
                    k -= 1
        j, wait, vt_d, cur, v, _nT, _lo, _hi, _tc = _batch_move_xd(
            p + m,
            k,
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
            a_T,
            wait,
            vt_d,
            dnp,
            srt,
            cur,
            dum_end,
            0,
            0,
            -1,
            False,
        )
        if j == 0:
            break
        if v0 < 0:
            v0 = v
        # (the emitter answers whether the event buffer is below its pause line; past it, the
        # tick goes on by the page loop, and the engine flushes the buffer soon)
        more = _victim_rows(emit, ev, S, em, m, vt_T, lo, j, b_dest) if b_ev else False
        m += j
        if j < k or not more:
            break
    return m, wait, vt_d, cur, v0, nT, b_lo, b_hi, tc


@_kernel_stage
def _fast_victim(
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
):
    """The fetch fast path's victim for one page (§8): DeepUM non-PF (dnp, §8.2): the first
    live page outside the window from the cursor (none once END is sticky); DeepUM PF: the
    first non-in-transfer page from the scan position; LRU (§8.1): the first
    non-in-transfer page from the cursor. Returns its LRU slot (-1: none), page and state,
    and the window lookup cache (tc_c, and the last looked-up tensor's pages and flag)."""
    vslot = -1
    v = -1
    if deepum and not dnp:
        s = lru_scan
    else:
        s = lru_cur
    if s < hd:
        s = hd
    vst0 = 0
    if dnp:
        if dum_end != 0:
            return vslot, v, vst0, tc_c, wt_lo, wt_hi, wt_win
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vst0 = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if _live(vst0, e):
                    vp = e >> GEN_SHIFT
                    if vp < wt_lo or vp >= wt_hi:
                        tc_c = _tpos(srt, tc_c, vp)
                        wt_lo = srt[0, _u(tc_c)]
                        wt_hi = srt[0, _u(tc_c + 1)]
                        wt_win = tt[srt[1, _u(tc_c)], TT_WIN]
                    if not wt_win:
                        vslot = s
                        v = vp
                        break
            s += 1
    else:
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vst0 = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if _eligible(vst0, e):
                    vslot = s
                    v = e >> GEN_SHIFT
                    break
            s += 1
    return vslot, v, vst0, tc_c, wt_lo, wt_hi, wt_win


@_kernel_page
def _q_push_served(qb, S, q, qm, qh, qt, rp, rn, rq, v, n):
    """Queue pages v .. v + n - 1 to queue rq while `_fetch_fast` serves queue q, whose head
    run (rp, rn at slot qh; qt its tail) it keeps in locals: for rq == q the head run is put
    back around the push and read again. Returns q's tail and head run."""
    if rq != q:
        _q_push(qb, S, rq, v, n)
        return qt, rp, rn
    S[S_QH + q] = qh
    if qh < qt:
        qb[q, _u(qh & qm), 0] = rp
        qb[q, _u(qh & qm), 1] = rn
    _q_push(qb, S, q, v, n)
    qslot = qh & qm
    return S[S_QT + q], qb[q, _u(qslot), 0], qb[q, _u(qslot), 1]
