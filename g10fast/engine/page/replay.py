"""A busy tick replayed (P_REPLAY: bulk engine, extent LRU; issue 23; traced runs write its
pages as rows of runs and ticks, issue 39)."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.batch import _fresh_counters
from g10fast.engine.page.general import _next_tick_busy, _tick_end
from g10fast.engine.page.helpers import (
    _BYTES_LOW7,
    _BYTES_ONE,
    _BYTES_TOP,
    _NO_TICKS,
    _emit_merge,
    _rp_canon,
    _rp_canon_t,
    _tensor_at,
    _tick_row,
)
from g10fast.engine.page.layout import (
    EV_ALLOC,
    EV_EVICT,
    EV_FETCH,
    E_NONE,
    E_REPLAY,
    F_TRANSFER,
    LOC_MASK,
    NQ,
    P_G,
    P_HOST,
    P_II,
    P_TRACE,
    P_XMARGIN,
    Q_PREEVICT_SSD,
    RES_MASK,
    S_ERROR,
    S_CUR_ITER,
    S_CUR_KERNEL,
    S_IN_OPEN,
    S_KB_PENDING,
    S_KB_TIME,
    S_EV_PAUSE,
    S_NEV,
    S_OUT_OPEN,
    S_QH,
    S_QT,
    S_RESCHED,
    S_RP_C,
    S_RP_CN,
    S_RP_COUNT,
    S_RP_GMODE,
    S_RP_GNET,
    S_RP_GPU,
    S_RP_HEXC,
    S_RP_HMODE,
    S_RP_HNET,
    S_RP_HOST,
    S_RP_LOC,
    S_RP_MASK,
    S_RP_N,
    S_RP_P0,
    S_RP_PD,
    S_RP_PROG,
    S_RP_QH,
    S_RP_QT,
    S_RP_SEQ,
    S_RP_T,
    S_RP_THI,
    S_RP_TLO,
    S_SEQ,
    S_TICK_SEQ,
    S_TICK_TIME,
    S_XFER,
    S_X_HEAD,
    S_X_NFREE,
    TT_LA,
    TT_LZ,
    TT_REQ,
    TT_RES,
    _G_PE_CPU,
    _G_PE_SSD,
    _G_PF_ALLOC,
    _G_PF_SSD,
    _G_PREALLOC,
    _G_PRE_SSD,
    _G_RS_SSD,
    _STAGE_QUEUE,
    _kernel,
    _kernel_page,
    _kernel_stage,
    _u,
)
from g10fast.engine.page.lru import XW, X_HI, X_LO, X_NEXT, X_T, _x_arrive, _x_remove, _x_take
from g10fast.engine.page.stages import _add_traffic, _count_in, _count_out
from g10fast.locations import IN_CPU, IN_GPU, IN_SSD, NOT_KNOWN


# ----------------------------------------------------------------------------------------
# A busy tick replayed (P_REPLAY: bulk engine, extent LRU; issue 23)
#
# Most busy ticks that the streaks do not settle repeat the tick before them: each queue that
# holds pages gives the same number of pages, because every stage stops at a per-tick cap.
# What a busy tick does is a function of its start: the fresh counters (from the host use),
# the GPU use (read only by the stages that give frames), which queues hold pages, the
# location of the pages they take and whether those pages' tensors are required (a
# pre-eviction's pages), and, for the pages that find no free frame, the list's first pages
# (whether their tensors are required). So a tick that ran stage by stage with no page left
# to the general path, no in-place continuation, no page queued again, each queue's pages
# taken from its head run, all of them at one place (S_RP_LOC: outside the GPU for the
# queues that give frames, in it for the pre-evictions), and the host use (and the GPU use,
# when it gave frames) back where they began or below their lines all through, is a
# template: the next tick that starts the same way (the same queues holding pages, each head
# run longer than the template took, those pages at the template's place and of one tensor,
# the host and GPU use in the template's mode, no required tensor among the pages
# pre-evicted or among the victims, and no victim of a tensor being pre-evicted) takes the
# same pages from each queue. Such a tick is then carried out directly (`_rp_tick`): its pages
# move as the stages would move them one by one, and its counters must come out equal to the
# template's (else E_REPLAY).
# ----------------------------------------------------------------------------------------
# the queues whose pages take GPU frames (bits 0-5)
_Q_ALLOC_MASK = 63
# the most pages a template takes from one queue (a tick that takes more pays its set-up
# over them anyway; `_rp_begin` reads at most this many pages of each queue)
_RP_MAX = 256


@_kernel_stage
def _rp_begin(S, qb, pstate, gpu_used, host_used):
    """A busy tick that runs stage by stage starts: record what a template needs of its start
    (each queue's head and tail slots, the head run's first page and how many of its pages,
    up to more than a tick can take, are at the place of its first; the host and GPU use;
    S_SEQ). Returns the mask of the queues that hold pages."""
    qm = qb.shape[1] - 1
    mask = 0
    for q in range(NQ):
        qh = S[S_QH + q]
        qt = S[S_QT + q]
        S[S_RP_QH + q] = qh
        S[S_RP_QT + q] = qt
        if qt > qh:
            mask |= 1 << q
            rp = qb[q, _u(qh & qm), 0]
            rn = qb[q, _u(qh & qm), 1]
            S[S_RP_P0 + q] = rp
            loc = np.int64(pstate[_u(rp)]) & LOC_MASK
            S[S_RP_LOC + q] = loc
            S[S_RP_CN + q] = _rp_canon(pstate, rp, min(rn, _RP_MAX), loc)
    S[S_RP_MASK] = -1
    S[S_RP_HOST] = host_used
    S[S_RP_GPU] = gpu_used
    S[S_RP_SEQ] = S[S_SEQ]
    return mask


@_kernel
def _rp_host_ok(S, host_used):
    """Whether the host use lets the template's tick run again: the template's start when it
    ended there too, or low enough that the pages the template evicted to the host leave it
    below the line (the tick then compares the host use with the line as the template did)."""
    hmode = S[S_RP_HMODE]
    return ((hmode & 1) != 0 and host_used == S[S_RP_HOST]) or (
        (hmode & 2) != 0 and host_used + S[S_RP_C + 5] < S[P_HOST]
    )


@_kernel
def _rp_shared(S, qb, qm, mask, mult):
    """Whether two of the template's queues at one place share a page among their next mult
    times the template's pages (a page queued twice: the later stage would find it moved;
    the engine never queues a page twice, so this guard does not fire)."""
    for a in range(NQ):
        na = mult * S[S_RP_N + a] if (mask >> a) & 1 else 0
        if na == 0:
            continue
        pa = qb[a, _u(S[S_QH + a] & qm), 0]
        for b in range(a + 1, NQ):
            nb = mult * S[S_RP_N + b] if (mask >> b) & 1 else 0
            if nb == 0 or S[S_RP_LOC + b] != S[S_RP_LOC + a]:
                continue
            pb = qb[b, _u(S[S_QH + b] & qm), 0]
            if pa < pb + nb and pb < pa + na:
                return True
    return False


@_kernel_stage
def _rp_end(
    S,
    qb,
    mask,
    n_gen,
    gpu_used,
    host_used,
    c_in,
    c_in_ssd,
    c_in_cpu,
    c_out,
    c_out_ssd,
    c_out_cpu,
    c_alloc,
    c_ffs,
    c_fed,
):
    """The busy tick begun at `_rp_begin` has run its stages (n_gen pages on the general path):
    it becomes the template when it qualifies (see above), else there is none."""
    if n_gen != 0 or S[S_SEQ] != S[S_RP_SEQ] or S[S_ERROR] != E_NONE:
        return
    # the host use: back where it began, or below the line all through (it rises only by
    # the pages evicted to the host)
    h0 = S[S_RP_HOST]
    hmode = (1 if host_used == h0 else 0) | (2 if h0 + c_out_cpu < S[P_HOST] else 0)
    if hmode == 0:
        return
    alloc = (mask & _Q_ALLOC_MASK) != 0
    g0 = S[S_RP_GPU]
    gmode = 4
    if alloc:
        # the GPU use: back where it began, or below the frames all through (it rises only
        # by the pages given frames)
        gmode = (1 if gpu_used == g0 else 0) | (2 if g0 + c_alloc < S[P_G] else 0)
        if gmode == 0:
            return
    if (mask & (mask - 1)) == 0 and alloc:
        return  # one queue giving frames: the fetch path's streaks
    qm = qb.shape[1] - 1
    total = 0
    for q in range(NQ):
        if S[S_QT + q] != S[S_RP_QT + q]:
            return  # a page was queued again
        n = 0
        if (mask >> q) & 1:
            qh = S[S_QH + q]
            if qh != S[S_RP_QH + q]:
                return  # its head run was used up
            n = qb[q, _u(qh & qm), 0] - S[S_RP_P0 + q]
            if n > S[S_RP_CN + q]:
                return  # pages at two places
            if (S[S_RP_LOC + q] == IN_GPU) != (q >= Q_PREEVICT_SSD):
                return  # (the general path's)
        S[S_RP_N + q] = n
        total += n
    if total == 0:
        return
    S[S_RP_C] = c_in
    S[S_RP_C + 1] = c_in_ssd
    S[S_RP_C + 2] = c_in_cpu
    S[S_RP_C + 3] = c_out
    S[S_RP_C + 4] = c_out_ssd
    S[S_RP_C + 5] = c_out_cpu
    S[S_RP_C + 6] = c_alloc
    S[S_RP_C + 7] = c_ffs
    S[S_RP_C + 8] = c_fed
    S[S_RP_GMODE] = gmode
    S[S_RP_GNET] = gpu_used - g0
    S[S_RP_PROG] = 0
    S[S_RP_HMODE] = hmode
    S[S_RP_HNET] = host_used - h0
    S[S_RP_MASK] = mask


@_kernel_page
def _rp_applies(S, qb, pstate, lru, tt, srt, gpu_used, tc_a, G):
    """Whether the busy tick starting now is the template's again (the host use is checked by
    the caller): the same queues hold pages, each head run is longer than the template took
    and those pages are at the template's place, of one tensor (kept in S_RP_T..),
    not required when pre-evicted; the pages that find no free frame have as many listed
    pages ahead of them, none of a required tensor or of a tensor being pre-evicted. Returns
    the answer and the lookup cache."""
    mask = S[S_RP_MASK]
    gmode = S[S_RP_GMODE]
    if not (
        gmode == 4
        or ((gmode & 1) != 0 and gpu_used == S[S_RP_GPU])
        or ((gmode & 2) != 0 and gpu_used + S[S_RP_C + 6] < G)
    ):
        return False, tc_a
    qm = qb.shape[1] - 1
    pe = 0
    na = 0
    pe_a = -1
    pe_b = -1
    for q in range(NQ):
        holds = S[S_QT + q] > S[S_QH + q]
        if holds != (((mask >> q) & 1) == 1):
            return False, tc_a
        n = S[S_RP_N + q]
        if not holds or n == 0:
            continue
        slot = _u(S[S_QH + q] & qm)
        rp = qb[q, slot, 0]
        if qb[q, slot, 1] <= n:
            return False, tc_a
        if rp < S[S_RP_TLO + q] or rp + n > S[S_RP_THI + q]:
            tc_a, T, lo, hi, req = _tensor_at(tt, srt, tc_a, rp)
            S[S_RP_T + q] = T
            S[S_RP_TLO + q] = lo
            S[S_RP_THI + q] = hi
            if rp + n > hi:
                return False, tc_a
        if _rp_canon_t(pstate, tt, S[S_RP_T + q], rp, n, S[S_RP_LOC + q]) < n:
            return False, tc_a
        if q >= Q_PREEVICT_SSD:
            T = S[S_RP_T + q]
            if tt[_u(T), TT_REQ] != 0:
                return False, tc_a
            pe += n
            if pe_a < 0:
                pe_a = T
            else:
                pe_b = T
        else:
            na += n
    if _rp_shared(S, qb, qm, mask, 1):
        return False, tc_a
    free = G - (gpu_used - pe)
    need = na - free if na > free else 0
    h = S[S_X_HEAD]
    while need > 0:
        if h < 0:
            return False, tc_a
        b = h * XW
        T = lru[_u(b + X_T)]
        if tt[_u(T), TT_REQ] != 0 or T == pe_a or T == pe_b:
            return False, tc_a
        need -= lru[_u(b + X_HI)] - lru[_u(b + X_LO)]
        h = lru[_u(b + X_NEXT)]
    return True, tc_a


@_kernel
def _rp_note(S, q, dest):
    """Record in queue q's program that its stage's next evicted page went to dest (see
    S_RP_PD). Returns False when that makes a third run."""
    b = S_RP_PD + 4 * q
    if S[b + 1] == 0:
        S[b] = dest
        S[b + 1] = 1
    elif S[b + 3] == 0 and S[b] == dest:
        S[b + 1] += 1
    elif S[b + 3] == 0:
        S[b + 2] = dest
        S[b + 3] = 1
    elif S[b + 2] == dest:
        S[b + 3] += 1
    else:
        return False
    return True


@_kernel
def _rp_evict(pstate, p, n, dest):
    """Pages p .. p + n - 1 go from the GPU to dest (transfer flag cleared). Returns how many
    of them were resident and not in transfer. Eight states a word (each byte's resident bits
    compared with IN_GPU at once, the bytes that differ counted by a multiplication), then
    page by page (the page loop, as LLVM vectorised it, widened each state to a 64-bit lane)."""
    res = 0
    q = p
    if n >= 8:
        k = n // 8
        w = pstate[p : p + k * 8].view(np.uint64)
        rm = np.uint64(RES_MASK) * _BYTES_ONE
        pat = np.uint64(IN_GPU) * _BYTES_ONE
        keep = ~(np.uint64(LOC_MASK | F_TRANSFER) * _BYTES_ONE)
        to = np.uint64(dest) * _BYTES_ONE
        differ = np.uint64(0)
        for i in range(k):
            x = w[_u(i)]
            # (a byte's resident bits xor IN_GPU are at most RES_MASK: + 0x7F sets its top bit
            # when they are not 0, with no carry into the next byte)
            d = (((x ^ pat) & rm) + _BYTES_LOW7) & _BYTES_TOP
            differ += ((d >> np.uint64(7)) * _BYTES_ONE) >> np.uint64(56)
            w[_u(i)] = (x & keep) | to
        res = k * 8 - np.int64(differ)
        q = p + k * 8
    for v in range(q, p + n):
        st = np.int64(pstate[_u(v)])
        if (st & RES_MASK) == IN_GPU:
            res += 1
        pstate[_u(v)] = (st & ~(LOC_MASK | F_TRANSFER)) | dest
    return res


@_kernel
def _rp_take(lru, S, tt, pstate, n, dest, ev, em, emit):
    """The list's first n pages are evicted to dest, a head extent at a time. em: whether
    the run is traced, then the first tick's time, the tick period and the victims a tick
    (`_emit_ticked`): each extent's victims are written as EVICT rows."""
    off = 0
    while n > 0:
        b = S[S_X_HEAD] * XW
        lo = lru[_u(b + X_LO)]
        j = lru[_u(b + X_HI)] - lo
        if j > n:
            j = n
        T = lru[_u(b + X_T)]
        res = _rp_evict(pstate, lo, j, dest)
        if tt[_u(T), TT_LZ] != 0:
            res = j  # (pages of the list, each resident: lazy states read 0, `_lz_state`)
        _x_take(lru, S, tt, j)
        tt[_u(T), TT_RES] -= res
        it = S[S_CUR_ITER]
        kk = S[S_CUR_KERNEL]
        if emit is not None:
            emit(
                ev,
                S,
                S_OUT_OPEN,
                em[0],
                em[1],
                em[2],
                off,
                EV_EVICT,
                it,
                kk,
                np.int64(T),
                lo,
                j,
                IN_GPU,
                dest,
                1,
            )
        off += j
        n -= j


@_kernel_stage
def _rp_tick_prog(S, qb, pstate, lru, tt, gpu_used, host_used, host_peak, wait, ev, t, emit):
    """`_rp_tick` once the template's program is recorded (by its first replay, which went
    page by page and matched the template): the tick's pages move by the program's runs
    (`_rp_move`); the counters are the template's, the host and GPU use change by the
    template's amounts, the host peak by its rise."""
    wait = _rp_move(S, qb, pstate, lru, tt, 1, 0, -2, wait, ev, t, emit)
    S[S_RP_COUNT] += 1
    if host_used + S[S_RP_HEXC] > host_peak:
        host_peak = host_used + S[S_RP_HEXC]
    return (
        (
            S[S_RP_C],
            S[S_RP_C + 1],
            S[S_RP_C + 2],
            S[S_RP_C + 3],
            S[S_RP_C + 4],
            S[S_RP_C + 5],
            S[S_RP_C + 6],
            S[S_RP_C + 7],
            S[S_RP_C + 8],
        ),
        gpu_used + S[S_RP_GNET],
        host_used + S[S_RP_HNET],
        host_peak,
        wait,
    )


@_kernel_page
def _rp_tick(S, qb, pstate, lru, tt, prm, gpu_used, host_used, host_peak, wait, ev, t, emit):
    """Carry out the template's tick again (`_rp_applies` said it applies): the stages in
    order, each taking the template's number of pages from its queue's head run, each page
    as the stages move it (pre-evicted to the forced destination or the stage's own; or
    given a frame, with the list's first page as its victim when the GPU is full, evicted to
    the forced destination or the host), the counters kept as the stages keep them. The
    counters, host and GPU use must end as the template's (else E_REPLAY). Returns the
    counters and the state after the tick. A traced run writes its pages (tick time t) as
    the general path would."""
    G = prm.G
    HOST = prm.HOST
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    if S[S_RP_PROG] == 1:
        return _rp_tick_prog(S, qb, pstate, lru, tt, gpu_used, host_used, host_peak, wait, ev, t, emit)
    mask = S[S_RP_MASK]
    qm = qb.shape[1] - 1
    h0 = host_used
    g0 = gpu_used
    it = S[S_CUR_ITER]
    kk = S[S_CUR_KERNEL]
    hexc = 0
    prog = 1
    for i in range(S_RP_PD, S_RP_PD + 4 * NQ):
        S[i] = 0
    (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed) = _fresh_counters(
        host_used, HOST
    )
    for stage in range(_G_PE_SSD, _G_RS_SSD):
        q = _STAGE_QUEUE[stage]
        if not (mask >> q) & 1:
            continue
        n = S[S_RP_N + q]
        if n == 0:
            continue
        slot = _u(S[S_QH + q] & qm)
        rp = qb[q, slot, 0]
        T = S[S_RP_T + q]
        if stage <= _G_PE_CPU:
            res = 0
            for p in range(rp, rp + n):
                st = np.int64(pstate[_u(p)])
                if c_fed != NOT_KNOWN:
                    dest = c_fed
                else:
                    dest = IN_SSD if stage == _G_PE_SSD else IN_CPU
                if dest == IN_CPU:
                    host_used += 1
                    if host_used > host_peak:
                        host_peak = host_used
                    if host_used - h0 > hexc:
                        hexc = host_used - h0
                if not _rp_note(S, q, dest):
                    prog = -1
                if (st & RES_MASK) == IN_GPU:
                    res += 1
                if emit is not None:
                    _tick_row(
                        emit, ev, S, S_OUT_OPEN, t, EV_EVICT, it, kk, np.int64(T), p, 1, IN_GPU, dest, 0
                    )
                pstate[_u(p)] = (st & ~(LOC_MASK | F_TRANSFER)) | dest
                gpu_used -= 1
                c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                    dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, 1
                )
            if res > 0:
                _x_remove(lru, S, tt, T, rp, rp + n)
                tt[_u(T), TT_RES] -= res
        else:
            is_fetch = stage != _G_PF_ALLOC and stage != _G_PREALLOC
            fsrc = IN_SSD if (stage == _G_PF_SSD or stage == _G_PRE_SSD) else IN_CPU
            src = S[S_RP_LOC + q]
            # the victims, in list order (none of them arrives in this tick)
            h = -1
            v = 0
            v_hi = 0
            v_T = 0
            v_k = 0
            v_res = 0
            for _j in range(n):
                if gpu_used >= G:
                    if v == v_hi:
                        if v_k > 0:
                            _x_take(lru, S, tt, v_k)
                            tt[_u(v_T), TT_RES] -= v_res
                        h = S[S_X_HEAD]
                        v = lru[_u(h * XW + X_LO)]
                        v_hi = lru[_u(h * XW + X_HI)]
                        v_T = lru[_u(h * XW + X_T)]
                        v_k = 0
                        v_res = 0
                    dest = c_fed if c_fed != NOT_KNOWN else IN_CPU
                    vst = np.int64(pstate[_u(v)])
                    if vst == 0:
                        vst = np.int64(IN_GPU)  # (a page of the list: a lazy state, `_lz_state`)
                    pstate[_u(v)] = (vst & ~(LOC_MASK | F_TRANSFER)) | dest
                    if emit is not None:
                        _tick_row(
                            emit, ev, S, S_OUT_OPEN, t, EV_EVICT, it, kk, np.int64(v_T), v, 1, IN_GPU, dest, 1
                        )
                    if (vst & RES_MASK) == IN_GPU:
                        v_res += 1
                    v += 1
                    v_k += 1
                    if not _rp_note(S, q, dest):
                        prog = -1
                    if dest == IN_CPU:
                        host_used += 1
                        if host_used > host_peak:
                            host_peak = host_used
                        if host_used - h0 > hexc:
                            hexc = host_used - h0
                    gpu_used -= 1
                    c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                        dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, 1
                    )
                if src == IN_CPU:
                    host_used -= 1
                    if c_fed == IN_SSD:
                        c_fed = NOT_KNOWN
                gpu_used += 1
                if is_fetch:
                    c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
                        fsrc, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, 1
                    )
                else:
                    c_alloc += 1
            if v_k > 0:
                _x_take(lru, S, tt, v_k)
                tt[_u(v_T), TT_RES] -= v_res
            wait = _x_arrive(lru, S, tt, pstate, T, rp, n, wait)
            tt[_u(T), TT_RES] += n
            kind = EV_FETCH if is_fetch else EV_ALLOC
            val = 1 if stage <= _G_PF_ALLOC else 0
            if emit is not None:
                _tick_row(emit, ev, S, S_IN_OPEN, t, kind, it, kk, np.int64(T), rp, n, src, IN_GPU, val)
        qb[q, slot, 0] = rp + n
        qb[q, slot, 1] -= n
    S[S_RP_COUNT] += 1
    if (
        c_in != S[S_RP_C]
        or c_in_ssd != S[S_RP_C + 1]
        or c_in_cpu != S[S_RP_C + 2]
        or c_out != S[S_RP_C + 3]
        or c_out_ssd != S[S_RP_C + 4]
        or c_out_cpu != S[S_RP_C + 5]
        or c_alloc != S[S_RP_C + 6]
        or c_ffs != S[S_RP_C + 7]
        or c_fed != S[S_RP_C + 8]
        or host_used != h0 + S[S_RP_HNET]
        or gpu_used != g0 + S[S_RP_GNET]
    ):
        S[S_ERROR] = E_REPLAY
    S[S_RP_PROG] = prog
    S[S_RP_HEXC] = hexc
    return (
        (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
        gpu_used,
        host_used,
        host_peak,
        wait,
    )


@_kernel
def _range_row(ev, S, t, it, kk, T, page, c, m, period, stride, dest):
    """One EVICT row of victims: m ticks `period` apart of c pages each, their first pages
    `stride` apart (a row of one tick when m is 1; stride written 0 when it is c: runs that
    follow one another), extending an open outgoing row when it continues it (`_emit_merge`)."""
    _emit_merge(
        ev,
        S,
        S_OUT_OPEN,
        t,
        EV_EVICT,
        it,
        kk,
        T,
        page,
        m * c,
        m,
        period,
        stride if m > 1 else 0,
        IN_GPU,
        dest,
        1,
    )


@_kernel
def _rp_victim_rows(S, lru, ev, t, k):
    """The EVICT rows of the victims of k replayed ticks that take their victims stage by
    stage, two destinations each (`_rp_move` with vd = -2, k >= 2: the victims are the list's
    first pages, none of them arriving in those ticks, `_rp_batch`), written before they are
    taken: per extent of the list and piece of the tick (a stage's pages to one destination),
    one strided row of the ticks whose piece lies wholly in the extent and a row of one tick
    for each piece the extent's ends cut. The same pages, ticks and destinations as the rows
    `_rp_take` writes tick by tick, in far fewer rows."""
    mask = S[S_RP_MASK]
    ii = S[P_II]
    it = S[S_CUR_ITER]
    kk = S[S_CUR_KERNEL]
    C = 0  # victims a tick
    for stage in range(_G_PF_SSD, _G_RS_SSD):
        q = _STAGE_QUEUE[stage]
        if (mask >> q) & 1 and S[S_RP_N + q] != 0:
            b = S_RP_PD + 4 * q
            C += S[b + 1] + S[b + 3]
    if C == 0:
        return
    total = k * C
    A = 0  # the victims before this extent
    h = S[S_X_HEAD]
    while A < total and h >= 0:
        bb = h * XW
        lo = lru[_u(bb + X_LO)]
        T = np.int64(lru[_u(bb + X_T)])
        B = A + lru[_u(bb + X_HI)] - lo
        if B > total:
            B = total
        off = 0  # the piece's first victim in a tick
        for stage in range(_G_PF_SSD, _G_RS_SSD):
            q = _STAGE_QUEUE[stage]
            if not ((mask >> q) & 1) or S[S_RP_N + q] == 0:
                continue
            b = S_RP_PD + 4 * q
            for r in range(2):
                c = S[b + 2 * r + 1]
                if c <= 0:
                    continue
                d = S[b + 2 * r]
                # ticks j whose piece [j*C + off, j*C + off + c) meets [A, B)
                j = (A - off - c) // C + 1
                if j < 0:
                    j = 0
                j_last = (B - 1 - off) // C
                if j_last > k - 1:
                    j_last = k - 1
                while j <= j_last:
                    s0 = j * C + off
                    if s0 >= A and s0 + c <= B:
                        j_end = (B - off - c) // C
                        if j_end > j_last:
                            j_end = j_last
                        _range_row(ev, S, t + j * ii, it, kk, T, lo + s0 - A, c, j_end - j + 1, ii, C, d)
                        j = j_end + 1
                    else:
                        p0 = s0 if s0 > A else A
                        p1 = s0 + c if s0 + c < B else B
                        _range_row(ev, S, t + j * ii, it, kk, T, lo + p0 - A, p1 - p0, 1, 0, 0, d)
                        j += 1
                off += c
        A = B
        h = lru[_u(bb + X_NEXT)]


@_kernel
def _rp_takes_unwritten(S, qb, pstate, lru, tt, k, wait, ev):
    """`_rp_move`'s k ticks of victims two ways a tick (vd = -2) and arrivals, stage by stage,
    the victims taken without rows (a traced run wrote them by extent: `_rp_victim_rows`).
    Returns the wait-set size. (A copy of `_rp_move`'s tick loop, on purpose: the loop moved
    into a function both call would change the untraced engine's compiled code.)"""
    mask = S[S_RP_MASK]
    qm = qb.shape[1] - 1
    em = (np.int64(0), np.int64(0), np.int64(_NO_TICKS))  # (unread: no emitter; the untraced types)
    for j in range(k):
        for stage in range(_G_PF_SSD, _G_RS_SSD):
            q = _STAGE_QUEUE[stage]
            n = S[S_RP_N + q] if (mask >> q) & 1 else 0
            if n == 0:
                continue
            b = S_RP_PD + 4 * q
            _rp_take(lru, S, tt, pstate, S[b + 1], S[b], ev, em, None)
            _rp_take(lru, S, tt, pstate, S[b + 3], S[b + 2], ev, em, None)
            rp = qb[q, _u(S[S_QH + q] & qm), 0]
            wait = _x_arrive(lru, S, tt, pstate, S[S_RP_T + q], rp + j * n, n, wait)
    return wait


@_kernel
def _rp_extent_room(S, lru, ev, k, nv, nseg):
    """The most of k replayed ticks whose victims' rows by extent (`_rp_victim_rows`: at most
    three for each of a tick's 2 nseg pieces in each extent the victims take, nv a tick)
    and their arrivals' rows fit in the event buffer."""
    room = ev.shape[0] - S[S_NEV] - 16
    fixed = 3 * nseg + 3
    have = 0
    h = S[S_X_HEAD]
    while h >= 0 and have < k * nv and fixed + 6 * nseg <= room:
        fixed += 6 * nseg
        bb = h * XW
        have += lru[_u(bb + X_HI)] - lru[_u(bb + X_LO)]
        h = lru[_u(bb + X_NEXT)]
    return k if have >= k * nv else have // nv


@_kernel
def _rp_arrivals(S, tt, qb, qm, mask):
    """How many of the template's stages have arrivals, and the queue of the one that has,
    when only one has and its k ticks' pages would join the list as one run does
    (`_x_arrive`: the tail extent grows by each tick's pages; a lazy tensor's pages only when
    they arrive in order, from TT_LA on, else each tick's arrival is written on its own), else
    -1. Most replayed batches of a SENet154-1024 G10 run only pre-evict (9.18 M of its 10.8 M
    replayed ticks; 5.64 M of ResNet152-1280's 7.13 M), and their ticks went through the
    arrival loop (a branch on the template's mask per stage and tick) for nothing: 42 % of
    `_rp_ticks`'s samples."""
    na = 0
    one = -1
    for stage in range(_G_PF_SSD, _G_RS_SSD):
        q = _STAGE_QUEUE[stage]
        if (mask >> q) & 1 and S[S_RP_N + q] != 0:
            na += 1
            one = q
    if na == 1:
        T = S[S_RP_T + one]
        if tt[_u(T), TT_LZ] != 0 and qb[one, _u(S[S_QH + one] & qm), 0] != tt[_u(T), TT_LA]:
            one = -1
    else:
        one = -1
    return na, one


@_kernel
def _rp_move(S, qb, pstate, lru, tt, k, nv, vd, wait, ev, t, emit):
    """The pages of k ticks of the template (its program recorded) move, as k replays one
    after another would move them: the pre-evicted pages by their runs of one destination;
    the victims, the list's first pages, by the runs of the program (all at once when they
    have one destination vd, nv a tick; vd = -2: tick by tick, stage by stage); the arriving
    pages joining the list tick by tick, stage by stage; the queues' head runs and the
    tensors' resident counts after them. A traced run writes them as rows of runs and ticks,
    the first tick at time t. Returns the wait-set size."""
    mask = S[S_RP_MASK]
    qm = qb.shape[1] - 1
    trace = S[P_TRACE] != 0
    ii = S[P_II]
    it = S[S_CUR_ITER]
    kk = S[S_CUR_KERNEL]
    for stage in range(_G_PE_SSD, _G_PE_CPU + 1):
        q = _STAGE_QUEUE[stage]
        n = S[S_RP_N + q] if (mask >> q) & 1 else 0
        if n == 0:
            continue
        b = S_RP_PD + 4 * q
        rp = qb[q, _u(S[S_QH + q] & qm), 0]
        T = S[S_RP_T + q]
        if S[b + 3] == 0:
            res = _rp_evict(pstate, rp, k * n, S[b])
            if emit is not None:
                emit(
                    ev, S, S_OUT_OPEN, t, ii, n, 0, EV_EVICT, it, kk, np.int64(T), rp, k * n, IN_GPU, S[b], 0
                )
        else:
            res = 0
            for j in range(k):
                p = rp + j * n
                res += _rp_evict(pstate, p, S[b + 1], S[b])
                res += _rp_evict(pstate, p + S[b + 1], S[b + 3], S[b + 2])
                tj = t + j * ii
                if emit is not None:
                    _tick_row(
                        emit,
                        ev,
                        S,
                        S_OUT_OPEN,
                        tj,
                        EV_EVICT,
                        it,
                        kk,
                        np.int64(T),
                        p,
                        S[b + 1],
                        IN_GPU,
                        S[b],
                        0,
                    )
                p2 = p + S[b + 1]
                if emit is not None:
                    _tick_row(
                        emit,
                        ev,
                        S,
                        S_OUT_OPEN,
                        tj,
                        EV_EVICT,
                        it,
                        kk,
                        np.int64(T),
                        p2,
                        S[b + 3],
                        IN_GPU,
                        S[b + 2],
                        0,
                    )
        if res > 0:
            _x_remove(lru, S, tt, T, rp, rp + k * n)
            tt[_u(T), TT_RES] -= res
    if nv > 0 and vd >= 0:
        _rp_take(lru, S, tt, pstate, k * nv, vd, ev, (t, ii, np.int64(nv)), emit)
    arrived = False
    if emit is not None:
        if vd == -2 and k >= 2:
            # (traced: the victims' rows by extent, before the ticks take them unwritten)
            _rp_victim_rows(S, lru, ev, t, k)
            wait = _rp_takes_unwritten(S, qb, pstate, lru, tt, k, wait, ev)
            arrived = True
    if not arrived:
        # (no stage with arrivals: nothing to do tick by tick; one, with its victims taken
        # above: its k ticks' pages join the list in one call, `_rp_arrivals`)
        na, one = _rp_arrivals(S, tt, qb, qm, mask)
        if na == 0:
            arrived = True
        elif one >= 0 and vd != -2:
            rp = qb[one, _u(S[S_QH + one] & qm), 0]
            wait = _x_arrive(lru, S, tt, pstate, S[S_RP_T + one], rp, k * S[S_RP_N + one], wait)
            arrived = True
    if not arrived:
        for j in range(k):
            for stage in range(_G_PF_SSD, _G_RS_SSD):
                q = _STAGE_QUEUE[stage]
                n = S[S_RP_N + q] if (mask >> q) & 1 else 0
                if n == 0:
                    continue
                if vd == -2:
                    b = S_RP_PD + 4 * q
                    em = (t + j * ii, ii, np.int64(_NO_TICKS))
                    _rp_take(lru, S, tt, pstate, S[b + 1], S[b], ev, em, emit)
                    _rp_take(lru, S, tt, pstate, S[b + 3], S[b + 2], ev, em, emit)
                rp = qb[q, _u(S[S_QH + q] & qm), 0]
                wait = _x_arrive(lru, S, tt, pstate, S[S_RP_T + q], rp + j * n, n, wait)
    if trace:
        # the arrivals: each stage's pages, n a tick
        for stage in range(_G_PF_SSD, _G_RS_SSD):
            q = _STAGE_QUEUE[stage]
            n = S[S_RP_N + q] if (mask >> q) & 1 else 0
            if n == 0:
                continue
            rp = qb[q, _u(S[S_QH + q] & qm), 0]
            kind = EV_ALLOC if (stage == _G_PF_ALLOC or stage == _G_PREALLOC) else EV_FETCH
            val = 1 if stage <= _G_PF_ALLOC else 0
            T = np.int64(S[S_RP_T + q])
            if emit is not None:
                emit(ev, S, S_IN_OPEN, t, ii, n, 0, kind, it, kk, T, rp, k * n, S[S_RP_LOC + q], IN_GPU, val)
    for q in range(NQ):
        n = S[S_RP_N + q] if (mask >> q) & 1 else 0
        if n == 0:
            continue
        slot = _u(S[S_QH + q] & qm)
        qb[q, slot, 0] += k * n
        qb[q, slot, 1] -= k * n
        if q < Q_PREEVICT_SSD:
            tt[_u(S[S_RP_T + q]), TT_RES] += k * n
    return wait


@_kernel
def _rp_no_room(S, none):
    """`_rp_batch`'s answer when the rows of its ticks would not fit in the event buffer: none
    (the ticks go one at a time), and, when the buffer holds rows, a pause at the next tick's
    end (S_EV_PAUSE lowered to the rows held: the wrapper writes them out and restores the
    pause line), so that the next batch finds the buffer empty instead of failing again, tick
    after tick, after its walk over the list's extents."""
    if S[S_NEV] > 0:
        S[S_EV_PAUSE] = S[S_NEV]
    return none


@_kernel_page
def _rp_batch(
    t, it, S, qb, pstate, lru, tt, srt, pcie, prm, gpu_used, host_used, host_peak, wait, tc_a, ev, emit
):
    """The ticks after a replayed one at once, when the template's program is recorded: as
    many (k >= 2) as the event loop would take one after another, busy, each the template's
    again (`_rp_applies`' tests for all of them: each queue's head run and tensor hold k times
    the template's pages, all at the template's place; the host and GPU use stay within
    their modes; the list has k times the victims ahead of the new pages, none of a required
    or pre-evicted tensor; no kernel event before the last; the free extent records last; no
    resume: a demand queue holds pages, or the kernel is not waiting). Their pages move as k
    replays would move them (the pages that arrive join the list tick by tick, stage by
    stage, as they would), their ends are settled in closed form. The first tick, at t, is
    known to be busy. Returns k (0: none) and the state after them."""
    mask = S[S_RP_MASK]
    G = prm.G
    HOST = prm.HOST
    ii = S[P_II]
    qm = qb.shape[1] - 1
    none = (0, t, gpu_used, host_used, host_peak, wait, tc_a)
    if S[S_XFER] == 0 or ((mask & 7) == 0 and S[S_RESCHED] != 0):
        return none
    k = np.int64(1) << 40
    if S[S_KB_PENDING]:
        kk = (S[S_KB_TIME] - t - 1) // ii + 1
        if kk < k:
            k = kk
    # the host and GPU use at each tick's start
    hnet = S[S_RP_HNET]
    hmode = S[S_RP_HMODE]
    if not ((hmode & 1) != 0 and host_used == S[S_RP_HOST] and hnet == 0):
        if (hmode & 2) == 0:
            return none
        room = HOST - 1 - S[S_RP_C + 5] - host_used
        if room < 0:
            return none
        if hnet > 0 and room // hnet + 1 < k:
            k = room // hnet + 1
    gmode = S[S_RP_GMODE]
    gnet = S[S_RP_GNET]
    if gmode != 4 and not ((gmode & 1) != 0 and gpu_used == S[S_RP_GPU] and gnet == 0):
        if (gmode & 2) == 0:
            return none
        room = G - 1 - S[S_RP_C + 6] - gpu_used
        if room < 0:
            return none
        if gnet > 0 and room // gnet + 1 < k:
            k = room // gnet + 1
    # the queues
    nseg = 0
    ne = 0  # extents of the victims ahead (traced: rows)
    two = False  # a pre-eviction of two destinations a tick (traced: rows tick by tick)
    nv = 0  # victims of a tick
    vd = -1  # their one destination (-2: more than one)
    pe_a = -1
    pe_b = -1
    for q in range(NQ):
        holds = S[S_QT + q] > S[S_QH + q]
        if holds != (((mask >> q) & 1) == 1):
            return none
        n = S[S_RP_N + q]
        if not holds or n == 0:
            continue
        nseg += 1
        slot = _u(S[S_QH + q] & qm)
        rp = qb[q, slot, 0]
        kk = (qb[q, slot, 1] - 1) // n
        if kk < k:
            k = kk
        if rp < S[S_RP_TLO + q] or rp >= S[S_RP_THI + q]:
            tc_a, T, lo, hi, req = _tensor_at(tt, srt, tc_a, rp)
            S[S_RP_T + q] = T
            S[S_RP_TLO + q] = lo
            S[S_RP_THI + q] = hi
        kk = (S[S_RP_THI + q] - rp) // n
        if kk < k:
            k = kk
        if k < 2:
            return none
        kk = _rp_canon_t(pstate, tt, S[S_RP_T + q], rp, k * n, S[S_RP_LOC + q]) // n
        if kk < k:
            k = kk
        b = S_RP_PD + 4 * q
        if q >= Q_PREEVICT_SSD:
            T = S[S_RP_T + q]
            if tt[_u(T), TT_REQ] != 0:
                return none
            if pe_a < 0:
                pe_a = T
            else:
                pe_b = T
            if S[b + 3] != 0:
                two = True
        else:
            for r in range(2):
                if S[b + 2 * r + 1] > 0:
                    d = S[b + 2 * r]
                    vd = d if (vd == -1 or vd == d) else -2
                    nv += S[b + 2 * r + 1]
    if k < 2:
        return none
    kk = 1 + (S[S_X_NFREE] - S[P_XMARGIN]) // nseg
    if kk < k:
        k = kk
    if k < 2:
        return none
    if _rp_shared(S, qb, qm, mask, k):
        return none
    if nv > 0:
        # listed pages ahead of the new ones, none of a required or pre-evicted tensor
        have = 0
        h = S[S_X_HEAD]
        while have < k * nv and h >= 0:
            bb = h * XW
            T = lru[_u(bb + X_T)]
            if tt[_u(T), TT_REQ] != 0 or T == pe_a or T == pe_b:
                break
            have += lru[_u(bb + X_HI)] - lru[_u(bb + X_LO)]
            h = lru[_u(bb + X_NEXT)]
            ne += 1
        if have // nv < k:
            k = have // nv
        if k < 2:
            return none
    if emit is not None:
        if vd == -2:
            # (traced: the victims' rows go by extent, `_rp_victim_rows`): as many ticks as
            # the rows of the extents their victims take fit in the event buffer
            k = _rp_extent_room(S, lru, ev, k, nv, nseg)
            if k < 2:
                return _rp_no_room(S, none)
    if S[P_TRACE] != 0:
        # the rows they write fit in the event buffer: at most three an extent of victims
        # (ne of them ahead) and a stage's pages; where a tick's victims or pre-evicted pages
        # go two ways, also a row a tick for each way of each stage
        room = ev.shape[0] - S[S_NEV] - 16
        fixed = 3 * ne + 3 * nseg + 3
        per_tick = (2 * nseg if vd == -2 else 0) + (2 * nseg if two else 0)
        if fixed > room:
            return _rp_no_room(S, none)
        if per_tick > 0 and fixed + per_tick * k > room:
            k = (room - fixed) // per_tick
        if k < 2:
            return _rp_no_room(S, none)
    # ---- k ticks ----
    wait = _rp_move(S, qb, pstate, lru, tt, k, nv, vd, wait, ev, t, emit)
    # ---- their ends (`_tick_end`: the transfer period is open, no resume; k ticks' equal
    # counts added at once) ----
    _add_traffic(
        pcie,
        it,
        k * S[S_RP_C],
        k * S[S_RP_C + 1],
        k * S[S_RP_C + 2],
        k * S[S_RP_C + 3],
        k * S[S_RP_C + 4],
        k * S[S_RP_C + 5],
        k * S[S_RP_C + 6],
    )
    h_top = host_used + (k - 1) * hnet if hnet > 0 else host_used
    if h_top + S[S_RP_HEXC] > host_peak:
        host_peak = h_top + S[S_RP_HEXC]
    t += k * ii
    S[S_TICK_TIME] = t
    S[S_TICK_SEQ] = S[S_SEQ] + k - 1
    S[S_SEQ] += k
    S[S_RP_COUNT] += k
    return k, t, gpu_used + k * gnet, host_used + k * hnet, host_peak, wait, tc_a


@_kernel_stage
def _rp_ticks(
    t,
    it,
    k,
    S,
    qb,
    pstate,
    lru,
    tt,
    srt,
    pcie,
    bnd,
    ev,
    prm,
    gpu_used,
    host_used,
    host_peak,
    wait,
    tc_a,
    half,
    emit,
):
    """Busy ticks from time t carried out as the template's (`_rp_applies`, `_rp_tick`), each
    ended as `_busy_ticks` ends a tick, while they apply and the event loop would take the
    next tick next. Returns how many, whether the next tick is busy too (and may run in
    `_busy_ticks`), the tick time, the last tick's counters and the state."""
    n = 0
    go_on = True
    counters = (0, 0, 0, 0, 0, 0, 0, NOT_KNOWN, NOT_KNOWN)
    while _rp_host_ok(S, host_used):
        ok, tc_a = _rp_applies(S, qb, pstate, lru, tt, srt, gpu_used, tc_a, prm.G)
        if not ok:
            break
        counters, gpu_used, host_used, host_peak, wait = _rp_tick(
            S, qb, pstate, lru, tt, prm, gpu_used, host_used, host_peak, wait, ev, t, emit
        )
        c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed = counters
        n += 1
        t, resumed = _tick_end(
            t,
            it,
            k,
            S[P_TRACE] != 0,
            S,
            pcie,
            bnd,
            ev,
            c_in,
            c_in_ssd,
            c_in_cpu,
            c_out,
            c_out_ssd,
            c_out_cpu,
            c_alloc,
            wait,
        )
        if resumed or S[S_ERROR] != E_NONE or not _next_tick_busy(t, S, bnd.shape[0], half):
            go_on = False
            break
        if S[S_RP_PROG] == 1:
            kb, t, gpu_used, host_used, host_peak, wait, tc_a = _rp_batch(
                t,
                it,
                S,
                qb,
                pstate,
                lru,
                tt,
                srt,
                pcie,
                prm,
                gpu_used,
                host_used,
                host_peak,
                wait,
                tc_a,
                ev,
                emit,
            )
            if kb > 0:
                n += kb
                if not _next_tick_busy(t, S, bnd.shape[0], half):
                    go_on = False
                    break
    return n, go_on, t, counters, gpu_used, host_used, host_peak, wait, tc_a
