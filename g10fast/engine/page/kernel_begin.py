"""A kernel's begin (§6) and the stall model (§7): freed page states given back to the
operating system, deallocations (page by page and in bulk), hints, the fault scan and
`_kernel_begin`."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.helpers import (
    _emit,
    _emit_run,
    _live,
    _no_faults_queued,
    _q_push,
    _BYTES_ONE,
    _same_bits,
    _tpos,
)
from g10fast.engine.page.layout import (
    EV_DEALLOC,
    EV_FAULT,
    EV_STRIDE,
    EV_TICKS,
    EV_HINT,
    EV_KERNEL,
    E_REFAULT_AFTER_RESUME,
    F_FREQ,
    F_GPU_BPC,
    F_SSD_BPC,
    F_TRANSFER,
    F_WAIT,
    GEN_MASK,
    GEN_SHIFT,
    KS_CPU,
    KS_END,
    KS_GPU,
    KS_HOST,
    KS_INTR,
    KS_ITER,
    KS_KERNEL,
    KS_NP,
    KS_SSD,
    KS_START,
    KT_EXEC,
    KT_IN,
    KT_INPF,
    KT_OO,
    KT_PF,
    LOC_MASK,
    P_BULK,
    P_DEEPUM,
    P_DEGREE,
    P_F_HZ,
    P_LAZY,
    P_LCAP,
    P_LSSD,
    P_LSYS,
    P_RELEASE,
    P_TRACE,
    P_USE_PREFETCH,
    P_XLRU,
    Q_PF_ALLOC,
    Q_PF_CPU,
    Q_PF_SSD,
    Q_PREALLOC,
    Q_PREEVICT_CPU,
    Q_PREEVICT_SSD,
    Q_PREFETCH_CPU,
    Q_PREFETCH_SSD,
    RES_MASK,
    STALE_BUCKETS,
    S_AMP_ALIGNED,
    S_AMP_RAW,
    S_CNT,
    S_CUR_ITER,
    S_CUR_KERNEL,
    S_DEEPUM_END,
    S_ERROR,
    S_ERR_A,
    S_GPU_USED,
    S_HINT,
    S_LZ_FREE,
    S_HOST_USED,
    S_IN_OPEN,
    S_KB_KERNEL,
    S_KB_NEWITER,
    S_KB_PENDING,
    S_KB_SEQ,
    S_KB_TIME,
    S_LRU_CUR,
    S_LRU_HEAD,
    S_LRU_STALE,
    S_LRU_TAIL,
    S_NSTAT,
    S_OUT_OPEN,
    S_REQ_K,
    S_RESCHED,
    S_R_CPU,
    S_R_FIRST,
    S_R_INTR,
    S_R_NP,
    S_R_PFTIME,
    S_R_SSD,
    S_R_STARTED,
    S_SEQ,
    S_TC_C,
    S_WAIT,
    S_WIN_K,
    S_X_CUR,
    S_X_HEAD,
    TT_LA,
    TT_LD,
    TT_LZ,
    TT_NP,
    TT_RAW,
    TT_REQ,
    TT_RES,
    TT_START,
    TT_WIN,
    TT_Z,
    _kernel,
    _kernel_ieee,
    _u,
)
from g10fast.engine.page.lru import (
    XW,
    X_LO,
    X_NEXT,
    X_T,
    _cursor_page,
    _free_generation,
    _lru_advance_head,
    _lru_compact,
    _new_generation,
    _x_remove,
)
from g10fast.engine.page.batch import _lz_fix
from g10fast.engine.page.release import _drop_flush, _map_read, _populate, _release_free
from g10fast.engine.page.stages import _preevict_gpu_run
from g10fast.locations import IN_CPU, IN_GPU, IN_GPU_LEAST, IN_SSD, NOT_PRESENT


# ----------------------------------------------------------------------------------------
# kernel begin (§6) and the stall model (§7)
# ----------------------------------------------------------------------------------------


@_kernel_ieee
def page_fault_time(
    exec_c,
    inpf_c,
    pf_c,
    f_int,
    gpu_bpc,
    ssd_bpc,
    freq,
    l_sys,
    l_ssd,
    cpu_in,
    ssd_in,
    np_in,
    cpu_out,
    ssd_out,
    np_out,
    total_in,
    total_out,
):
    """exec + ΔPF in cycles, §7, evaluated in IEEE double in the artifact's order (O-1..O-4)."""
    F_in = cpu_in + ssd_in + np_in
    F_out = cpu_out + ssd_out + np_out
    r_in = F_in / total_in if total_in != 0 else 0.0
    r_out = F_out / total_out if total_out != 0 else 0.0
    r_in_ssd = ssd_in / F_in if F_in != 0 else 0.0
    r_out_ssd = ssd_out / F_out if F_out != 0 else 0.0
    s_in = float(total_in * 4096)
    s_out = float(total_out * 4096)
    t00 = (pf_c // f_int) * 1000  # O-1: integer division by the clock in Hz
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
    bw_cpu_in = 1063004400.0 if t00 == t10 else s_in / float(t00 - t10)  # O-2
    bw_cpu_out = 1063004400.0 if t10 == t11 else s_out / float(t10 - t11)  # O-4 pairing
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
    # O-11: with SSD BW == PCIe BW the host-side cap is 0 and T_cpu is x/0. 0/0 (a side
    # without faults) is NaN and loses the max to the SSD time; x/0 is +inf and wins. The
    # artifact's double -> uint64 conversion (g++ x86-64: values >= 2^63 are converted as
    # d - 2^63 with the top bit flipped back) turns +inf, and anything >= 2^64, into 0.
    if not (d < 18446744073709551616.0):
        return exec_c
    return exec_c + np.int64(np.uint64(d))


@_kernel
def _dealloc_pages(t, T, p0, n, tt, pstate, lru, S, ev):
    """Pre-deallocation of tensor T's pages p0 .. p0 + n - 1 (§6.2): every page not in
    transfer is freed (O-23: in-transfer pages never are); its GPU pages leave the LRU list
    where their slots are unknown, as `_lru_remove_unknown` does page by page, here in one
    loop that looks up the cursor's page only when it changes. Returns the number of pages
    freed."""
    trace = S[P_TRACE] != 0
    xl = S[P_XLRU] != 0
    # the page of the cursor's entry if that entry is live (removing it resets the cursor)
    cur_page = -1 if xl else _cursor_page(lru, pstate, S)
    freed = 0
    gpu_freed = 0
    host_freed = 0
    for p in range(p0, p0 + n):
        st = np.int64(pstate[_u(p)])
        if st & F_TRANSFER:
            continue
        loc = st & LOC_MASK
        if loc == IN_GPU:
            gpu_freed += 1
            if not xl:  # (the extent list drops them after the loop)
                if p == cur_page:
                    S[S_LRU_CUR] = S[S_LRU_HEAD]
                    cur_page = _cursor_page(lru, pstate, S)
                g, compacted = _new_generation(lru, pstate, S, p, st >> GEN_SHIFT)
                if compacted:  # the cursor may have moved
                    cur_page = _cursor_page(lru, pstate, S)
                st = (st & 15) | (g << GEN_SHIFT)
        elif loc == IN_CPU:
            host_freed += 1
        if loc != NOT_PRESENT:
            freed += 1
            if trace:
                _emit_run(
                    ev,
                    S,
                    S_OUT_OPEN,
                    t,
                    EV_DEALLOC,
                    S[S_CUR_ITER],
                    S[S_CUR_KERNEL],
                    T,
                    p,
                    loc,
                    NOT_PRESENT,
                    0,
                )
        pstate[_u(p)] = st & ~LOC_MASK
    if xl and gpu_freed > 0:
        _x_remove(lru, S, tt, T, p0, p0 + n)
    S[S_GPU_USED] -= gpu_freed
    S[S_HOST_USED] -= host_freed
    tt[_u(T), TT_RES] -= gpu_freed
    return freed


# ----------------------------------------------------------------------------------------
# bulk paths (P_BULK): a tensor's pages that all share their location and in-transfer flag
# are settled as one range, with the same outcome as the page loops they replace
# ----------------------------------------------------------------------------------------


@_kernel
def _uniform_state(pstate, p0, n):
    """The location and in-transfer bits (st & RES_MASK) that pages p0 .. p0 + n - 1 (n >= 1)
    all share, or -1 when they differ (`_same_bits`, word-wise)."""
    v0 = np.int64(pstate[_u(p0)]) & RES_MASK
    if _same_bits(pstate, p0, n, v0, RES_MASK) == n:
        return v0
    return -1


@_kernel
def _first_state_zero(pstate, tt, T, p0):
    """Whether tensor T's first page's state is 0 (its states' memory may have been given
    back: `_populate` maps it before the hint or fault scan writes them): known without a read
    when TT_Z is set. The read is of a memory page that is often not mapped: it took a page
    fault that mapped the system's zero page, which `_reuse` then saw as mapped, so that the
    write after it took a second fault and a cleared page instead of pool memory. The read was
    46 % of `_apply_hint`'s page faults in a SENet154-1024 DeepUM+ run (`perf record -e
    page-faults`); known from TT_Z instead, such a run takes about 1 k fewer (DeepUM's tensors
    mostly lose TT_Z after their first use: it never pre-deallocates)."""
    return tt[_u(T), TT_Z] != 0 or pstate[_u(p0)] == 0


@_kernel
def _tensor_state(pstate, tt, T, p0, n):
    """`_uniform_state` of tensor T's pages p0 .. p0 + n - 1 (n >= 1), read from its count
    TT_RES (its pages IN_GPU and not in transfer, kept exact) where that decides it: all of
    them (IN_GPU) or some but not all (-1) without reading a state; and from TT_Z (every
    state known to be 0: NOT_PRESENT); only when neither decides, the states are scanned."""
    if tt[_u(T), TT_Z] != 0:
        return np.int64(NOT_PRESENT)
    r = tt[_u(T), TT_RES]
    if r == n:
        return np.int64(IN_GPU)
    if r != 0:
        return np.int64(-1)
    return _uniform_state(pstate, p0, n)


@_kernel
def _res_run(pstate, i, end, u):
    """The end of the run of pages i, i + 1, ... (before `end`) whose location and
    in-transfer bits (st & RES_MASK) are u, page i's (`_same_bits`, word-wise)."""
    return i + 1 + _same_bits(pstate, i + 1, end - i - 1, u, RES_MASK)


@_kernel
def _flag_pages(pstate, i, j, flags):
    """Set `flags` on the states of pages i .. j - 1; returns how many were in the wait set
    (F_WAIT) before. Eight states a word (the states' bytes read as uint64 words; the wait
    bits of a word summed by a multiplication), then page by page."""
    had = 0
    p = i
    if j - i >= 8:
        nw = (j - i) // 8
        w = pstate[i : i + nw * 8].view(np.uint64)
        fb = np.uint64(flags) * _BYTES_ONE
        acc = np.uint64(0)
        for q in range(nw):
            x = w[_u(q)]
            # (each byte's wait bit, 0 or 1, summed into the top byte: at most 8)
            acc += (((x >> np.uint64(3)) & _BYTES_ONE) * _BYTES_ONE) >> np.uint64(56)
            w[_u(q)] = x | fb
        had = np.int64(acc)
        p = i + nw * 8
    for pp in range(p, j):
        st = pstate[_u(pp)]
        had += (st >> 3) & 1  # (F_WAIT, bit 3)
        pstate[_u(pp)] = st | flags
    return had


@_kernel
def _clear_loc(pstate, p0, n):
    """Clear the location bits of the states of pages p0 .. p0 + n - 1 (NOT_PRESENT, their
    other bits kept); returns the states' bits OR-ed together after (0: every state is 0).
    Eight states a word, then page by page."""
    acc = np.uint64(0)
    nw = n // 8
    if nw > 0:
        w = pstate[p0 : p0 + nw * 8].view(np.uint64)
        keep = ~(np.uint64(LOC_MASK) * _BYTES_ONE)
        for q in range(nw):
            x = w[_u(q)] & keep
            w[_u(q)] = x
            acc |= x
    for p in range(p0 + nw * 8, p0 + n):
        x = np.int64(pstate[_u(p)]) & ~LOC_MASK
        pstate[_u(p)] = x
        acc |= np.uint64(x)
    return acc


@_kernel
def _dealloc_generation(lru, pstate, S, L, p, st, stale, cur_page):
    """Page p (state st, IN_GPU, not in transfer) is deallocated inside a run that keeps the
    stale count in ``stale`` and the cursor's page in ``cur_page``: the cursor resets when it
    is p's (§8.1), p takes the first free generation of its bucket (the list compacted first
    when there is none, as `_new_generation` does) and its entry is recorded as stale.
    Returns the generation, the stale count and the cursor's page."""
    if p == cur_page:
        S[S_LRU_CUR] = S[S_LRU_HEAD]
        cur_page = _cursor_page(lru, pstate, S)
    g0 = st >> GEN_SHIFT
    w = L + (p & (STALE_BUCKETS - 1))
    g = _free_generation(np.int64(lru[_u(w)]), g0)
    if g < 0:
        S[S_LRU_STALE] = stale
        _lru_compact(lru, pstate, S)
        stale = 0
        g = (g0 + 1) & GEN_MASK
        cur_page = _cursor_page(lru, pstate, S)
    lru[_u(w)] = np.int64(lru[_u(w)]) | (1 << g0)
    return g, stale + 1, cur_page


@_kernel
def _dealloc_bulk(t, T, p0, n, tt, pstate, lru, S, ev):
    """`_dealloc_pages` in bulk (P_BULK; traced on the extent LRU only): the same
    page-by-page outcome, with the generation bookkeeping of `_new_generation` in locals (the
    stale count and the ring's size are not reloaded from S for each page), and a range whose
    pages are all in one place off the GPU, or on the extent LRU all in the GPU, settled at
    once (and written as one DEALLOC row). Returns the number of pages freed."""
    u = _tensor_state(pstate, tt, T, p0, n)
    if u >= 0 and u != IN_GPU:
        if u & F_TRANSFER or u == NOT_PRESENT:
            return 0  # in transfer: never freed (O-23); absent: nothing
        if S[P_TRACE] != 0:
            _emit(
                ev, S, t, EV_DEALLOC, S[S_CUR_ITER], S[S_CUR_KERNEL], T, p0, n, u & LOC_MASK, NOT_PRESENT, 0
            )
        if _clear_loc(pstate, p0, n) == 0:
            tt[_u(T), TT_Z] = 1
        if u == IN_CPU:
            S[S_HOST_USED] -= n
        return n
    if S[P_XLRU] != 0:
        # the extent list: the freed GPU pages (every one not in transfer) leave it at once
        if u == IN_GPU:
            if S[P_TRACE] != 0:
                _emit(ev, S, t, EV_DEALLOC, S[S_CUR_ITER], S[S_CUR_KERNEL], T, p0, n, IN_GPU, NOT_PRESENT, 0)
            if _clear_loc(pstate, p0, n) == 0:
                tt[_u(T), TT_Z] = 1
            _x_remove(lru, S, tt, T, p0, p0 + n)
            S[S_GPU_USED] -= n
            tt[_u(T), TT_RES] -= n
            return n
        # (a mixed range: `_dealloc_pages`, whose GPU pages cost no generation here)
        return _dealloc_pages(t, T, p0, n, tt, pstate, lru, S, ev)
    cur_page = _cursor_page(lru, pstate, S)
    L = S[P_LCAP]
    stale = S[S_LRU_STALE]
    if u == IN_GPU:
        # every page resident and not in transfer: runs of pages that take the first free
        # generation of their bucket, each broken by a page that is the cursor's or finds no
        # free generation (a compaction), which goes as in `_dealloc_pages`
        p = p0
        end = p0 + n
        while True:
            # (the pre-eviction run with NOT_PRESENT as destination: these pages are not in
            # transfer, so it leaves their other bits as `_dealloc_pages` does)
            d, _res = _preevict_gpu_run(lru, pstate, L, p, end, cur_page, NOT_PRESENT)
            q = p + d
            stale += q - p
            p = q
            if p >= end:
                break
            st = np.int64(pstate[_u(p)])
            g, stale, cur_page = _dealloc_generation(lru, pstate, S, L, p, st, stale, cur_page)
            pstate[_u(p)] = (st & (15 & ~LOC_MASK)) | (g << GEN_SHIFT)
            p += 1
        S[S_LRU_STALE] = stale
        S[S_GPU_USED] -= n
        tt[_u(T), TT_RES] -= n
        return n
    freed = 0
    gpu_freed = 0
    host_freed = 0
    for p in range(p0, p0 + n):
        st = np.int64(pstate[_u(p)])
        if st & F_TRANSFER:
            continue
        loc = st & LOC_MASK
        if loc == IN_GPU:
            gpu_freed += 1
            g, stale, cur_page = _dealloc_generation(lru, pstate, S, L, p, st, stale, cur_page)
            st = (st & 15) | (g << GEN_SHIFT)
        elif loc == IN_CPU:
            host_freed += 1
        if loc != NOT_PRESENT:
            freed += 1
        pstate[_u(p)] = st & ~LOC_MASK
    S[S_LRU_STALE] = stale
    S[S_GPU_USED] -= gpu_freed
    S[S_HOST_USED] -= host_freed
    tt[_u(T), TT_RES] -= gpu_freed
    return freed


@_kernel
def _apply_hint(h, t, ht, tt, pstate, lru, qb, S, ev):
    T = ht[h, 1]
    fr = ht[h, 2]
    to = ht[h, 3]
    p0 = tt[_u(T), TT_START]
    n = tt[_u(T), TT_NP]
    queued = 0
    done = False
    if tt[_u(T), TT_LZ] != 0:
        # lazy states (P_LAZY): a pre-deallocation of the tensor wholly arrived, none of its
        # pages written since (every one IN_GPU, every byte 0) leaves them 0 without a pass,
        # and nothing to give back (their memory was mapped for reading only, `_map_read`);
        # any other hint but one that has nothing to do reads them: written out first (a
        # prefetch of the tensor none of whose pages left: those not arrived are in transfer)
        whole = tt[_u(T), TT_LZ] == 1 and tt[_u(T), TT_LA] == p0 + n and tt[_u(T), TT_RES] == n
        kept = tt[_u(T), TT_LD] == p0 and tt[_u(T), TT_RES] == tt[_u(T), TT_LA] - p0
        if to == NOT_PRESENT and whole:
            done = True
            if S[P_TRACE] != 0:
                _emit(ev, S, t, EV_DEALLOC, S[S_CUR_ITER], S[S_CUR_KERNEL], T, p0, n, IN_GPU, NOT_PRESENT, 0)
            tt[_u(T), TT_LZ] = 0
            tt[_u(T), TT_Z] = 1
            _x_remove(lru, S, tt, T, p0, p0 + n)
            S[S_GPU_USED] -= n
            tt[_u(T), TT_RES] = 0
            queued = n
            S[S_LZ_FREE] += 1
        elif to == IN_GPU and fr != IN_GPU_LEAST and kept:
            done = True  # (the page loop would queue none: each page resident or in transfer)
        else:
            _lz_fix(pstate, tt, S, T, True)
    if not done and S[P_BULK] != 0 and n > 0:
        # bulk: a tensor whose pages are all in one place pushes one run (or none), as the
        # page loops below would
        if to == IN_GPU and fr != IN_GPU_LEAST and tt[_u(T), TT_RES] != n:
            if S[P_RELEASE] != 0 and _first_state_zero(pstate, tt, T, p0):
                if S[P_LAZY] != 0 and tt[_u(T), TT_Z] != 0:
                    _map_read(pstate, p0, n, S)  # (lazy states below: read, not written)
                else:
                    _populate(pstate, p0, n, S)
            u = _tensor_state(pstate, tt, T, p0, n)
            if u >= 0:
                done = True
                q = -1
                if u == NOT_PRESENT:
                    q = Q_PREALLOC
                elif u == IN_SSD:
                    q = Q_PREFETCH_SSD
                elif u == IN_CPU:
                    q = Q_PREFETCH_CPU
                if q >= 0:
                    if tt[_u(T), TT_Z] != 0:
                        if S[P_LAZY] != 0 and q == Q_PREALLOC:
                            # (lazy states: every byte 0 stands for F_TRANSFER until the
                            # pages arrive, and then for IN_GPU: `_lz_state`)
                            tt[_u(T), TT_LZ] = 1
                            tt[_u(T), TT_LA] = p0
                            tt[_u(T), TT_LD] = p0
                        else:
                            # (every state 0: written, not read)
                            pstate[p0 : p0 + n] = F_TRANSFER
                        tt[_u(T), TT_Z] = 0
                    else:
                        for p in range(p0, p0 + n):
                            pstate[_u(p)] = np.int64(pstate[_u(p)]) | F_TRANSFER
                    queued = n
                    _q_push(qb, S, q, p0, n)
        elif (to == IN_SSD or to == IN_CPU) and tt[_u(T), TT_RES] != 0:
            u = _tensor_state(pstate, tt, T, p0, n)
            if u >= 0:
                # (some page resident and not in transfer, so all are)
                done = True
                _q_push(qb, S, Q_PREEVICT_SSD if to == IN_SSD else Q_PREEVICT_CPU, p0, n)
                for p in range(p0, p0 + n):
                    pstate[_u(p)] = np.int64(pstate[_u(p)]) | F_TRANSFER
                queued = n
                tt[_u(T), TT_RES] -= n
                if S[P_XLRU] != 0:
                    _x_remove(lru, S, tt, T, p0, p0 + n)  # in transfer: no victims
        elif to == NOT_PRESENT and (not S[P_TRACE] or S[P_XLRU] != 0):
            done = True
            queued = _dealloc_bulk(t, T, p0, n, tt, pstate, lru, S, ev)
            if queued == n and S[P_RELEASE] != 0:
                _release_free(pstate, p0, n, S, tt[_u(T), TT_Z] != 0)
    if done:
        pass
    elif to == IN_GPU and fr != IN_GPU_LEAST:
        # (a tensor whose pages are all resident and not in transfer queues nothing: DeepUM
        # re-hints the resident tensors of the look-ahead kernel at every kernel start)
        if tt[_u(T), TT_RES] != n:
            tt[_u(T), TT_Z] = 0
            # runs of pages that share their location and in-transfer bits (`_res_run`):
            # those off the GPU and not in transfer are flagged in transfer and pushed as one
            # run (the queues merge contiguous pushes anyway)
            i = p0
            end = p0 + n
            while i < end:
                u = np.int64(pstate[_u(i)]) & RES_MASK
                j = _res_run(pstate, i, end, u)
                if not (u & F_TRANSFER) and u != IN_GPU:
                    if u == NOT_PRESENT:
                        q = Q_PREALLOC
                    elif u == IN_SSD:
                        q = Q_PREFETCH_SSD
                    else:
                        q = Q_PREFETCH_CPU
                    _flag_pages(pstate, i, j, F_TRANSFER)
                    queued += j - i
                    _q_push(qb, S, q, i, j - i)
                i = j
    elif (to == IN_SSD or to == IN_CPU) and tt[_u(T), TT_RES] == 0:
        pass  # no page resident and not in transfer: none queued
    elif to == IN_SSD or to == IN_CPU:
        q = Q_PREEVICT_SSD if to == IN_SSD else Q_PREEVICT_CPU
        for p in range(p0, p0 + n):
            st = np.int64(pstate[_u(p)])
            if (st & F_TRANSFER) or (st & LOC_MASK) != IN_GPU:
                continue
            _q_push(qb, S, q, p, 1)
            pstate[_u(p)] = st | F_TRANSFER
            queued += 1
        tt[_u(T), TT_RES] -= queued
        if queued > 0 and S[P_XLRU] != 0:
            _x_remove(lru, S, tt, T, p0, p0 + n)  # in transfer: no victims
    elif to == NOT_PRESENT:
        queued = _dealloc_pages(t, T, p0, n, tt, pstate, lru, S, ev)
    # Pin / Unpin (TOLERANT only) are rejected by the Python wrapper.
    if S[P_TRACE]:
        _emit(ev, S, t, EV_HINT, S[S_CUR_ITER], S[S_CUR_KERNEL], T, p0, queued, fr, to, -1)


@_kernel
def _fault_row(ev, S, o, t, it, k, T, i, c, u):
    """The FAULT row of a run of c pages from i found at u by one fault scan (time t):
    it joins row o, the scan's last FAULT row from u (-1 none), when it is that row's next run
    (c pages a run, the same distance above c between their first pages: a FAULT row of several
    runs, docs/trace-format.md), else it is a new row. -> the row it is in (-1: the event buffer
    is full, S_ERROR set)."""
    if o >= 0:
        m = ev[o, EV_TICKS]
        po = ev[o, 5]
        if m == 1:
            if ev[o, 6] == c and i - po > c:
                ev[o, 6] = 2 * c
                ev[o, EV_TICKS] = 2
                ev[o, EV_STRIDE] = i - po
                return o
        elif ev[o, 6] == m * c and i == po + m * ev[o, EV_STRIDE]:
            ev[o, 6] += c
            ev[o, EV_TICKS] = m + 1
            return o
    return _emit(ev, S, t, EV_FAULT, it, k, T, i, c, u, IN_GPU, 0)


@_kernel
def _fault_scan(T, is_input, t, tt, pstate, qb, S, ev, trace, k, it):
    """§6.3 fault_scan of one tensor, adding to the counts at S[S_CNT:]: intr, cpu/ssd/np
    in, cpu/ssd/np out, total in/out. Every page left in transfer also joins the wait set
    (the artifact's separate pass over the same pages, merged: the scan never reads the
    wait bit). Returns the number of SSD pages found."""
    p0 = tt[_u(T), TT_START]
    n = tt[_u(T), TT_NP]
    S[S_CNT + (7 if is_input else 8)] += n
    if tt[_u(T), TT_RES] == n:
        return 0  # all resident and not in transfer: nothing to do
    if tt[_u(T), TT_LZ] != 0:
        _lz_fix(pstate, tt, S, T, True)  # (lazy states written out: the scan reads and flags them)
    o = 0 if is_input else 3
    z = tt[_u(T), TT_Z] != 0
    u = np.int64(-1)
    if S[P_BULK] != 0 and n > 0:
        if S[P_RELEASE] != 0 and _first_state_zero(pstate, tt, T, p0):
            _populate(pstate, p0, n, S)
        u = _tensor_state(pstate, tt, T, p0, n)
    tt[_u(T), TT_Z] = 0
    if u >= 0:
        return _fault_scan_uniform(T, u, o, p0, n, t, pstate, qb, S, ev, trace, k, it, z)
    # Runs of consecutive pages that share their location and in-transfer bits (st &
    # RES_MASK; `_res_run`) take one step each: the pages of such a run found off the GPU,
    # not in transfer, are queued (and traced) as one run, as the page loop queued them
    # (two such neighbouring runs never share a location: their bits would be equal).
    intr = 0
    n_cpu = 0
    n_ssd = 0
    n_np = 0
    n_wait = 0
    # traced in bulk: the open FAULT row of each location (`_fault_row`), -1 none
    join = S[P_BULK] != 0
    o_cpu = -1
    o_ssd = -1
    o_np = -1
    i = p0
    end = p0 + n
    while i < end:
        u = np.int64(pstate[_u(i)]) & RES_MASK
        j = _res_run(pstate, i, end, u)
        c = j - i
        if u == IN_GPU:
            i = j
            continue  # resident, not in transfer: nothing
        n_wait += c - _flag_pages(pstate, i, j, F_WAIT if u & F_TRANSFER else F_TRANSFER | F_WAIT)
        if u & F_TRANSFER:
            intr += c
        else:
            if u == NOT_PRESENT:
                n_np += c
                _q_push(qb, S, Q_PF_ALLOC, i, c)
            elif u == IN_SSD:
                n_ssd += c
                _q_push(qb, S, Q_PF_SSD, i, c)
            else:
                n_cpu += c
                _q_push(qb, S, Q_PF_CPU, i, c)
            if trace:
                if not join:
                    _emit(ev, S, t, EV_FAULT, it, k, T, i, c, u, IN_GPU, 0)
                elif u == NOT_PRESENT:
                    o_np = _fault_row(ev, S, o_np, t, it, k, T, i, c, u)
                elif u == IN_SSD:
                    o_ssd = _fault_row(ev, S, o_ssd, t, it, k, T, i, c, u)
                else:
                    o_cpu = _fault_row(ev, S, o_cpu, t, it, k, T, i, c, u)
        i = j
    S[S_CNT] += intr
    S[S_CNT + 1 + o] += n_cpu
    S[S_CNT + 2 + o] += n_ssd
    S[S_CNT + 3 + o] += n_np
    S[S_WAIT] += n_wait
    return n_ssd


@_kernel
def _fault_scan_uniform(T, u, o, p0, n, t, pstate, qb, S, ev, trace, k, it, z):
    """`_fault_scan` of tensor T's pages p0 .. p0 + n - 1 (n >= 1) when they all share their
    location and in-transfer bits u (`_uniform_state`, P_BULK): the page loop's outcome in
    one step. In transfer: all count as in transfer and join the wait set; elsewhere off
    the GPU: all are flagged in transfer and join the wait set, and go to the location's
    demand queue as the one run (p0, n) the page loop pushes (and traces); in the GPU and
    not in transfer: nothing. z: every state was 0 (TT_Z; u is NOT_PRESENT), so the flags
    are written without reading the states. Returns the number of SSD pages found."""
    if u == IN_GPU:
        return 0
    if z:
        pstate[p0 : p0 + n] = F_TRANSFER | F_WAIT
        had = 0
    else:
        had = _flag_pages(pstate, p0, p0 + n, F_WAIT if u & F_TRANSFER else F_TRANSFER | F_WAIT)
    S[S_WAIT] += n - had
    if u & F_TRANSFER:
        S[S_CNT] += n
        return 0
    loc = u & LOC_MASK
    if loc == NOT_PRESENT:
        S[S_CNT + 3 + o] += n
        _q_push(qb, S, Q_PF_ALLOC, p0, n)
    elif loc == IN_SSD:
        S[S_CNT + 2 + o] += n
        _q_push(qb, S, Q_PF_SSD, p0, n)
    else:
        S[S_CNT + 1 + o] += n
        _q_push(qb, S, Q_PF_CPU, p0, n)
    if trace:
        _emit(ev, S, t, EV_FAULT, it, k, T, p0, n, loc, IN_GPU, 0)
    return n if loc == IN_SSD else 0


@_kernel
def _mark(kt, kidx, tt, k, col, flag):
    """tt[_u(T), col] = flag for the inputs and output-only tensors of kernel k."""
    for j in range(kt[k, KT_IN], kt[k + 1, KT_IN]):
        tt[kidx[j], col] = flag


@_kernel
def _kernel_begin(k, now, kt, kidx, ht, tt, srt, pstate, lru, qb, S, F, kstat, ev):
    K = kt.shape[0] - 1
    it = S[S_CUR_ITER]
    trace = S[P_TRACE] != 0
    if S[P_RELEASE] != 0:
        _drop_flush(pstate, S)  # (before the hints below map states again)
    # required set of this kernel (clear the previous kernel's)
    if S[S_REQ_K] >= 0:
        _mark(kt, kidx, tt, S[S_REQ_K], TT_REQ, 0)
    _mark(kt, kidx, tt, k, TT_REQ, 1)
    S[S_REQ_K] = k
    S[S_IN_OPEN] = -1
    S[S_OUT_OPEN] = -1
    # 6.1 eviction cursor
    S[S_DEEPUM_END] = 0
    if S[P_DEEPUM]:
        deg = S[P_DEGREE]
        if S[S_WIN_K] >= 0:
            for j in range(deg):
                _mark(kt, kidx, tt, (S[S_WIN_K] + j) % K, TT_WIN, 0)
        for j in range(deg):
            _mark(kt, kidx, tt, (k + j) % K, TT_WIN, 1)
        S[S_WIN_K] = k
    if S[P_DEEPUM] and S[P_XLRU]:
        # (on extents: the first page of the first extent of a tensor outside the window)
        r = S[S_X_HEAD]
        while r >= 0 and tt[_u(lru[_u(r * XW + X_T)]), TT_WIN] != 0:
            r = lru[_u(r * XW + X_NEXT)]
        S[S_X_CUR] = r
        if r >= 0:
            S[S_LRU_CUR] = lru[_u(r * XW + X_LO)]
        else:
            S[S_LRU_CUR] = -1
            S[S_DEEPUM_END] = 1
    elif S[P_DEEPUM]:
        _lru_advance_head(lru, pstate, S)
        s = S[S_LRU_HEAD]
        tail = S[S_LRU_TAIL]
        lm = S[P_LCAP] - 1
        # (an entry of the window tensor looked up last is passed without reading its
        # page's state: live or not, it is not the cursor's)
        c = S[S_TC_C]
        wlo = 0
        whi = 0
        while s < tail:
            e = np.int64(lru[_u(s & lm)])
            if e < 0:
                s -= e  # a tombstone, or a run of them (_lru_advance_head)
                continue
            p = e >> GEN_SHIFT
            if p < wlo or p >= whi:
                st = np.int64(pstate[_u(p)])
                if _live(st, e):
                    c = _tpos(srt, c, p)
                    if not tt[srt[1, _u(c)], TT_WIN]:
                        break
                    wlo = srt[0, _u(c)]
                    whi = srt[0, _u(c + 1)]
            s += 1
        S[S_TC_C] = c
        S[S_LRU_CUR] = s
        if s >= tail:
            S[S_DEEPUM_END] = 1
    elif not S[P_XLRU]:
        _lru_advance_head(lru, pstate, S)
        S[S_LRU_CUR] = S[S_LRU_HEAD]
    # 6.2 hints, consumed cyclically
    H = ht.shape[0]
    if S[P_USE_PREFETCH] and H > 0:
        n_applied = 0
        h = S[S_HINT]
        while n_applied < H and ht[h, 0] % K == k:
            _apply_hint(h, now, ht, tt, pstate, lru, qb, S, ev)
            h = (h + 1) % H
            n_applied += 1
        S[S_HINT] = h
    # 6.3 residency check: per-tensor counts of pages IN_GPU and not in transfer
    resident = _no_faults_queued(S)
    if resident:
        for j in range(kt[k, KT_IN], kt[k + 1, KT_IN]):
            T = kidx[j]
            if tt[_u(T), TT_RES] != tt[_u(T), TT_NP]:
                resident = False
                break
    if not resident:
        if S[S_RESCHED] and S[S_R_STARTED]:
            S[S_ERROR] = E_REFAULT_AFTER_RESUME  # O-14: unreachable in the artifact
            S[S_ERR_A] = k
            return
        for i in range(9):
            S[S_CNT + i] = 0
        for j in range(kt[k, KT_IN], kt[k, KT_OO]):
            T = np.int64(kidx[j])  # (int64: one compile of _fault_scan and _emit)
            if _fault_scan(T, True, now, tt, pstate, qb, S, ev, trace, k, it) > 0:
                S[S_AMP_RAW] += tt[_u(T), TT_RAW]
                S[S_AMP_ALIGNED] += tt[_u(T), TT_NP] * 4096
        for j in range(kt[k, KT_OO], kt[k + 1, KT_IN]):
            T = np.int64(kidx[j])
            if _fault_scan(T, False, now, tt, pstate, qb, S, ev, trace, k, it) > 0:
                S[S_AMP_RAW] += tt[_u(T), TT_RAW]
                S[S_AMP_ALIGNED] += tt[_u(T), TT_NP] * 4096
        pf_time = page_fault_time(
            kt[k, KT_EXEC],
            kt[k, KT_INPF],
            kt[k, KT_PF],
            S[P_F_HZ],
            F[F_GPU_BPC],
            F[F_SSD_BPC],
            F[F_FREQ],
            S[P_LSYS],
            S[P_LSSD],
            S[S_CNT + 1],
            S[S_CNT + 2],
            S[S_CNT + 3],
            S[S_CNT + 4],
            S[S_CNT + 5],
            S[S_CNT + 6],
            S[S_CNT + 7],
            S[S_CNT + 8],
        )
        if not S[S_RESCHED]:
            S[S_RESCHED] = 1
            S[S_R_FIRST] = now
            S[S_R_PFTIME] = pf_time
            S[S_R_STARTED] = 0
            S[S_R_INTR] = 0
            S[S_R_CPU] = 0
            S[S_R_SSD] = 0
            S[S_R_NP] = 0
        S[S_R_INTR] += S[S_CNT]
        S[S_R_CPU] += S[S_CNT + 1] + S[S_CNT + 4]
        S[S_R_SSD] += S[S_CNT + 2] + S[S_CNT + 5]
        S[S_R_NP] += S[S_CNT + 3] + S[S_CNT + 6]
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
        end = now + kt[k, KT_EXEC]
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
        _emit(
            ev,
            S,
            start,
            EV_KERNEL,
            it,
            k,
            -1,
            -1,
            kstat[n, KS_CPU] + kstat[n, KS_SSD] + kstat[n, KS_NP],
            -1,
            -1,
            end,
        )
    S[S_KB_PENDING] = 1
    S[S_KB_TIME] = end
    S[S_KB_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    S[S_KB_KERNEL] = (k + 1) % K
    S[S_KB_NEWITER] = 1 if k == K - 1 else 0
    if S[S_WAIT] != 0:
        # wait_set.clear(): not reachable with the artifact's rules, kept exact anyway
        for p in range(pstate.shape[0]):
            pstate[_u(p)] &= ~F_WAIT
        S[S_WAIT] = 0
