"""Numba kernels of the tensor-granular engine ("FN simulator", simulator spec §12, planner §6.7).

Plain arrays and scalars only; `g10fast.engine.tensor.simulate_tensors` validates the inputs and
wraps them. One iteration, time in milliseconds (float64), bandwidths in bytes/ms (GB = 2^30).

State
-----
Allocator: GPU memory is `cap` pages of 4 KiB; the free space is kept as a sorted list of free
runs (`run_s`, `run_l`, count in cnt[C_NRUNS]) instead of G10's page bitmap. First fit from the
left takes the start of the lowest run that is long enough; first fit from the right takes the
top pages of the highest run that is long enough: the same placements as a bitmap scan, at
O(runs) instead of O(pages) per call (`g10fast.alloc.free_runs`, shared with the offset-level
allocators' `bump`).

Tensor state `t_state`: NONE (no pages), RES (resident), FETCH (pages allocated, data in flight to
the GPU), OFFL (resident, queued/in flight to SSD or host), GONE (offloaded: data on SSD/host,
no pages), WAIT (GDS: in the fetch-allocation queue, no pages yet).

Channels (serial FIFOs, only the head in flight, all four concurrent): 0 SSD->GPU, 1 GPU->SSD,
2 host->GPU, 3 GPU->host.  Events: the four channel heads and the running kernel's finish; the
earliest is served (ties: channel 0..3, then the kernel finish).

Every allocation and free is written to the event buffer `ev` (int64 [n, 10], trace columns,
time in col 0 left 0) with its time in `ev_t` (ms); the wrapper converts times to cycles.
"""

from __future__ import annotations

import numpy as np

from g10fast.alloc import free_runs as _free_runs
from g10fast import aot as _aot
from g10fast.jit import cache_depends_on as _cache_depends_on
from g10fast.jit import kernel as _kernel

# tensor states
NONE = 0
RES = 1
FETCH = 2
OFFL = 3
GONE = 4
WAIT = 5

# modes
MODE_FN = 0
MODE_GDS_SSD = 1
MODE_GDS_FULL = 2

# hint destinations (PageLocation, planner spec §5.1) and trace kinds: the page engine's
from g10fast.engine.page.kernels import (  # noqa: E402,F401
    EV_ALLOC,
    EV_DEALLOC,
    EV_EVICT,
    EV_FETCH,
    EV_HINT,
    EV_KERNEL,
    EV_TRANSFER,
)
from g10fast.locations import IN_CPU as LOC_CPU  # noqa: E402
from g10fast.locations import IN_GPU as LOC_GPU  # noqa: E402
from g10fast.locations import IN_SSD as LOC_SSD  # noqa: E402
from g10fast.locations import NOT_KNOWN as LOC_NOT_KNOWN  # noqa: E402

# the allocator over free runs (first fit from either end, merging frees): shared with the
# offset-level allocators (g10fast.alloc.kernels' bump, FlashNeuron's allocator); the run count
# lives in cnt[C_NRUNS]
from g10fast.alloc.free_runs import C_NRUNS, alloc_left, alloc_right, free_run  # noqa: E402,F401

# status codes
ST_OK = 0
# fmt: off
ST_NO_SPACE = 1          # "No enough space": an allocation that no pending event can make room for
ST_EV_OVERFLOW = 2       # event buffer too small (the wrapper retries with a larger one)
ST_BAD_HINT = 3          # a GDS hint whose destination is not SSD / host / GPU
ST_ALLOC_BROKEN = 4      # allocator invariant violated (overlapping free)
ST_QUEUE_OVERFLOW = 5
# fmt: on

# clk slots (float64)
K_NOW = 0
K_XFER = 1
K_KFIN = 2  # finish time of the running kernel
K_KPEND = 3  # 1.0 while a kernel finish is pending

# cnt slots (int64)
C_SSD_IN = 0
C_SSD_OUT = 1
C_HOST_IN = 2
C_HOST_OUT = 3
C_NEV = 4
# 5: C_NRUNS, the free-run count (g10fast.alloc.free_runs, imported above)
C_EVOVF = 6
C_KERNEL = 7  # current kernel (for events)
C_QOVF = 8
C_BROKEN = 9
C_OPTS = 10  # the options flags, for the helpers that do not take `opts`
C_N = 11

# options bit flags
# fmt: off
OPT_LARGEST_MISSES_LAST1 = 1     # O-27: largest_available_size misses a trailing free run of 1 page
OPT_TENSOR24 = 2                 # O-17: a failed allocation of tensor 24 counts as success
OPT_GDS_READY_ON_ALLOC = 4       # O-33: a tensor waiting for fetch allocation is ready once
                                 # allocated
OPT_GDS_GLOBAL_NO_FETCH = 8      # O-18 / O-33: evicted weights re-allocated on demand cost no fetch
OPT_FN_REST_RECOMPUTE = 16       # FN prefetch: recompute rest from the allocator after each
                                 # prefetch
OPT_GDS_FETCH_DURING_OFFLOAD = 32  # O-40: a prefetch of a tensor whose offload is pending is
                                   # allocated and fetched at once; the offload's end frees it
OPT_OFFLOAD_SKIP_DEAD = 64       # improvement, off (O-41 kept): skip the queued offload of a
                                 # tensor freed before the offload started
OPT_BYTES_AT_SCHEDULE = 128      # O-42: transfer bytes counted when scheduled, so transfers still
                                 # queued at the end of the iteration count
OPT_REOFFLOAD = 256              # O-43: an offload hint for a tensor already being offloaded
                                 # schedules another offload
OPT_DEMAND_FROM_SSD = 512        # O-44: an on-demand fetch reads the SSD even for a host tensor
# fmt: on


@_kernel
def _log(ev, ev_t, cnt, t, kind, kernel, tensor, page, count, src, dst, value):
    n = cnt[C_NEV]
    if n >= ev.shape[0]:
        cnt[C_EVOVF] = 1
        return
    ev[n, 0] = 0
    ev[n, 1] = kind
    ev[n, 2] = 0
    ev[n, 3] = kernel
    ev[n, 4] = tensor
    ev[n, 5] = page
    ev[n, 6] = count
    ev[n, 7] = src
    ev[n, 8] = dst
    ev[n, 9] = value
    ev_t[n] = t
    cnt[C_NEV] = n + 1


# ---------------------------------------------------------------------------------------------
# allocator over free runs
# ---------------------------------------------------------------------------------------------


@_kernel
def largest_free(run_s, run_l, cnt, cap, opts):
    """Longest free run in pages (O-27: optionally missing a trailing run of exactly 1 page)."""
    best = 0
    nr = cnt[C_NRUNS]
    for r in range(nr):
        L = run_l[r]
        if (opts & OPT_LARGEST_MISSES_LAST1) and L == 1 and run_s[r] + 1 == cap:
            continue
        if L > best:
            best = L
    return best


@_kernel
def total_free(run_l, cnt):
    s = 0
    for r in range(cnt[C_NRUNS]):
        s += run_l[r]
    return s


# ---------------------------------------------------------------------------------------------
# channels and events
# ---------------------------------------------------------------------------------------------


@_kernel
def _bw(c, bw_ssd, bw_host):
    if c == 0 or c == 1:
        return bw_ssd
    return bw_host


@_kernel
def _start_next(
    c,
    ch_busy,
    ch_ready,
    ch_cur,
    ch_head,
    ch_tail,
    ch_q,
    t_state,
    t_demand,
    size_bytes,
    clk,
    bw_ssd,
    bw_host,
    ev,
    ev_t,
    cnt,
):
    while ch_busy[c] == 0 and ch_head[c] < ch_tail[c]:
        t = np.int64(ch_q[c, ch_head[c]])
        ch_head[c] += 1
        if (c == 1 or c == 3) and t_state[t] != OFFL and (cnt[C_OPTS] & OPT_OFFLOAD_SKIP_DEAD):
            # improvement (off): drop the offload of a tensor that died (was freed) before it
            # started; O-41: G10 transfers it anyway, as it does the offload of a tensor
            # re-allocated and fetched while its offload waited (O-40)
            if (t_demand[t] & 2) == 0:
                if cnt[C_OPTS] & OPT_BYTES_AT_SCHEDULE:
                    cnt[c] -= size_bytes[t]
                continue
        ch_busy[c] = 1
        ch_cur[c] = t
        ch_ready[c] = clk[K_NOW] + size_bytes[t] / _bw(c, bw_ssd, bw_host)
        src = -1
        dst = -1
        if c == 0:
            src = LOC_SSD
            dst = LOC_GPU
        elif c == 1:
            src = LOC_GPU
            dst = LOC_SSD
        elif c == 2:
            src = LOC_CPU
            dst = LOC_GPU
        else:
            src = LOC_GPU
            dst = LOC_CPU
        _log(ev, ev_t, cnt, clk[K_NOW], EV_TRANSFER, cnt[C_KERNEL], t, -1, -1, src, dst, 1)


@_kernel
def _enqueue(
    c,
    t,
    ch_busy,
    ch_ready,
    ch_cur,
    ch_head,
    ch_tail,
    ch_q,
    t_state,
    t_demand,
    size_bytes,
    clk,
    bw_ssd,
    bw_host,
    ev,
    ev_t,
    cnt,
):
    if ch_tail[c] >= ch_q.shape[1]:
        cnt[C_QOVF] = 1
        return
    ch_q[c, ch_tail[c]] = t
    ch_tail[c] += 1
    if cnt[C_OPTS] & OPT_BYTES_AT_SCHEDULE:
        cnt[c] += size_bytes[t]  # O-42: counted when scheduled (cnt slot c = channel c)
    _start_next(
        c,
        ch_busy,
        ch_ready,
        ch_cur,
        ch_head,
        ch_tail,
        ch_q,
        t_state,
        t_demand,
        size_bytes,
        clk,
        bw_ssd,
        bw_host,
        ev,
        ev_t,
        cnt,
    )


@_kernel
def _check_fetch_allocation(
    wq,
    wq_ht,
    t_state,
    t_start,
    t_host,
    t_demand,
    size_pages,
    size_bytes,
    run_s,
    run_l,
    cnt,
    ch_busy,
    ch_ready,
    ch_cur,
    ch_head,
    ch_tail,
    ch_q,
    clk,
    bw_ssd,
    bw_host,
    ev,
    ev_t,
):
    """GDS: serve the fetch-allocation queue in FIFO order while the head fits (from the right)."""
    while wq_ht[0] < wq_ht[1]:
        t = np.int64(wq[wq_ht[0]])
        st = t_state[t]
        if st == OFFL:
            if wq_ht[2] == 0:
                return  # still being offloaded: its pages are not free yet
            # O-40: G10 allocates and fetches it anyway while its offload is still pending;
            # the pages being offloaded stay held (the tensor keeps one address, the new one),
            # and the offload's completion later de-allocates the tensor (t_demand bit 2).
            # Its ALLOC event has value 2: a second allocation while earlier pages stay held.
            again = 2
        elif st == WAIT:
            again = 0
        else:
            wq_ht[0] += 1  # fetched on demand meanwhile, or freed: nothing to do
            continue
        s = alloc_right(run_s, run_l, cnt, size_pages[t])
        if s < 0:
            return
        wq_ht[0] += 1
        t_start[t] = s
        t_state[t] = FETCH
        t_demand[t] = again
        _log(ev, ev_t, cnt, clk[K_NOW], EV_ALLOC, cnt[C_KERNEL], t, s, size_pages[t], 0, -1, again)
        c = 2 if t_host[t] else 0
        _enqueue(
            c,
            t,
            ch_busy,
            ch_ready,
            ch_cur,
            ch_head,
            ch_tail,
            ch_q,
            t_state,
            t_demand,
            size_bytes,
            clk,
            bw_ssd,
            bw_host,
            ev,
            ev_t,
            cnt,
        )


@_kernel
def _serve_one(
    mode,
    t_state,
    t_start,
    t_host,
    t_demand,
    size_pages,
    size_bytes,
    run_s,
    run_l,
    cnt,
    ch_busy,
    ch_ready,
    ch_cur,
    ch_head,
    ch_tail,
    ch_q,
    clk,
    bw_ssd,
    bw_host,
    ev,
    ev_t,
    wq,
    wq_ht,
):
    """Serve the earliest pending event. Returns -1 if none, 0..3 a channel, 4 the kernel finish."""
    best = -1
    bt = 0.0
    for c in range(4):
        if ch_busy[c] != 0 and (best < 0 or ch_ready[c] < bt):
            best = c
            bt = ch_ready[c]
    if clk[K_KPEND] != 0.0 and (best < 0 or clk[K_KFIN] < bt):
        best = 4
        bt = clk[K_KFIN]
    if best < 0:
        return -1
    dt = bt - clk[K_NOW]
    if best < 4:
        clk[K_XFER] += dt
    else:
        busy = False
        for c in range(4):
            if ch_busy[c] != 0:
                busy = True
        if busy:
            clk[K_XFER] += dt
    clk[K_NOW] = bt
    if best == 4:
        clk[K_KPEND] = 0.0
        return 4
    c = best
    t = np.int64(ch_cur[c])
    ch_busy[c] = 0
    ch_cur[c] = -1
    k = cnt[C_KERNEL]
    if (cnt[C_OPTS] & OPT_BYTES_AT_SCHEDULE) == 0:
        cnt[c] += size_bytes[t]  # counted when done (cnt slot c = channel c)
    if c == 0 or c == 2:
        if t_state[t] == FETCH:
            t_state[t] = RES
        _log(
            ev,
            ev_t,
            cnt,
            bt,
            EV_FETCH,
            k,
            t,
            t_start[t],
            size_pages[t],
            LOC_SSD if c == 0 else LOC_CPU,
            -1,
            t_demand[t] & 1,
        )
    else:
        if (t_demand[t] & 2) != 0:
            # O-40: re-allocated while this offload was pending: the completion de-allocates
            # the tensor's current pages (the offloaded ones stay held)
            t_demand[t] = 0
            if (t_state[t] == RES or t_state[t] == FETCH) and t_start[t] >= 0:
                if not free_run(run_s, run_l, cnt, t_start[t], size_pages[t]):
                    cnt[C_BROKEN] = 1
                _log(
                    ev,
                    ev_t,
                    cnt,
                    bt,
                    EV_EVICT,
                    k,
                    t,
                    t_start[t],
                    size_pages[t],
                    -1,
                    LOC_SSD if c == 1 else LOC_CPU,
                    0,
                )
                t_start[t] = -1
                t_state[t] = GONE
            else:
                _log(ev, ev_t, cnt, bt, EV_TRANSFER, k, t, -1, -1, LOC_GPU, LOC_SSD if c == 1 else LOC_CPU, 0)
        elif t_state[t] == OFFL:
            if not free_run(run_s, run_l, cnt, t_start[t], size_pages[t]):
                cnt[C_BROKEN] = 1
            _log(
                ev,
                ev_t,
                cnt,
                bt,
                EV_EVICT,
                k,
                t,
                t_start[t],
                size_pages[t],
                -1,
                LOC_SSD if c == 1 else LOC_CPU,
                0,
            )
            t_start[t] = -1
            t_state[t] = GONE
        else:
            _log(ev, ev_t, cnt, bt, EV_TRANSFER, k, t, -1, -1, LOC_GPU, LOC_SSD if c == 1 else LOC_CPU, 0)
    _start_next(
        c,
        ch_busy,
        ch_ready,
        ch_cur,
        ch_head,
        ch_tail,
        ch_q,
        t_state,
        t_demand,
        size_bytes,
        clk,
        bw_ssd,
        bw_host,
        ev,
        ev_t,
        cnt,
    )
    if mode != MODE_FN:
        _check_fetch_allocation(
            wq,
            wq_ht,
            t_state,
            t_start,
            t_host,
            t_demand,
            size_pages,
            size_bytes,
            run_s,
            run_l,
            cnt,
            ch_busy,
            ch_ready,
            ch_cur,
            ch_head,
            ch_tail,
            ch_q,
            clk,
            bw_ssd,
            bw_host,
            ev,
            ev_t,
        )
    return c


# ---------------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------------


@_kernel
def simulate(
    mode,
    cap,
    size_pages,
    size_bytes,
    is_global,
    birth,
    death,
    req_ptr,
    req_idx,
    pf_ptr,
    pf_idx,
    exec_ms,
    make_loss,
    chosen,
    off_ptr,
    off_idx,
    fn_reserve,
    fn_max_pages,
    hint_ptr,
    hint_tensor,
    hint_to,
    bw_ssd,
    bw_host,
    opts,
    k_start,
    k_launch,
    k_end,
    ev,
    ev_t,
    clk,
    cnt,
    fail,
):
    """One iteration of the FN simulator. Returns a status code (ST_*).

    FN (mode 0): `chosen` = the offload plan's tensors, `off_ptr/off_idx` = tensors to offload
    at each forward kernel, `fn_reserve` = the death -1 tensor reserved at start (-1 none).
    GDS (modes 1, 2): `chosen` = tensors the planner evicts, `hint_*` = the hints of each kernel
    in list order (destination LOC_*).
    fail (int64[6]) on ST_NO_SPACE: tensor, kernel, pages needed, free pages, largest free run,
    pending events (always 0)."""
    K = exec_ms.shape[0]
    T = size_pages.shape[0]
    t_state = np.zeros(T, np.int8)
    t_start = np.full(T, -1, np.int64)
    t_host = np.zeros(T, np.bool_)
    t_demand = np.zeros(T, np.int64)
    t_qalloc = np.zeros(T, np.bool_)  # GDS: allocated through the fetch-allocation queue
    run_s = np.zeros(T + 4, np.int64)
    run_l = np.zeros(T + 4, np.int64)
    run_s[0] = 0
    run_l[0] = cap
    cnt[C_NRUNS] = 1
    Q = req_idx.shape[0] + off_idx.shape[0] + hint_tensor.shape[0] + T + 8
    ch_q = np.zeros((4, Q), np.int32)
    ch_busy = np.zeros(4, np.int8)
    ch_ready = np.zeros(4, np.float64)
    ch_cur = np.full(4, -1, np.int32)
    ch_head = np.zeros(4, np.int64)
    ch_tail = np.zeros(4, np.int64)
    wq = np.zeros(hint_tensor.shape[0] + 1, np.int32)
    wq_ht = np.zeros(3, np.int64)
    wq_ht[2] = 1 if (opts & OPT_GDS_FETCH_DURING_OFFLOAD) else 0
    cnt[C_OPTS] = opts
    clk[K_NOW] = 0.0
    clk[K_XFER] = 0.0
    clk[K_KPEND] = 0.0
    cnt[C_KERNEL] = -1

    # initial placement
    for t in range(T):
        if is_global[t]:
            n = size_pages[t]
            if mode != MODE_FN and chosen[t]:
                s = alloc_right(run_s, run_l, cnt, n)
            else:
                s = alloc_left(run_s, run_l, cnt, n)
            if s < 0:
                fail[0] = t
                fail[1] = -1
                fail[2] = n
                fail[3] = total_free(run_l, cnt)
                fail[4] = largest_free(run_s, run_l, cnt, cap, opts)
                return ST_NO_SPACE
            t_start[t] = s
            t_state[t] = RES
            _log(ev, ev_t, cnt, 0.0, EV_ALLOC, -1, t, s, n, 0, -1, 0)
    if mode == MODE_FN and fn_reserve >= 0:
        t = fn_reserve
        n = size_pages[t]
        s = alloc_left(run_s, run_l, cnt, n)
        if s < 0:
            fail[0] = t
            fail[1] = -1
            fail[2] = n
            fail[3] = total_free(run_l, cnt)
            fail[4] = largest_free(run_s, run_l, cnt, cap, opts)
            return ST_NO_SPACE
        t_start[t] = s
        _log(ev, ev_t, cnt, 0.0, EV_ALLOC, -1, t, s, n, 0, -1, 0)

    for i in range(K):
        cnt[C_KERNEL] = i
        k_start[i] = clk[K_NOW]
        # 1. offloads / hints of this kernel
        if mode == MODE_FN:
            if i < make_loss:
                for q in range(off_ptr[i], off_ptr[i + 1]):
                    t = np.int64(off_idx[q])
                    if t_state[t] == RES:
                        t_state[t] = OFFL
                        _enqueue(
                            1,
                            t,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            t_state,
                            t_demand,
                            size_bytes,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            cnt,
                        )
            else:
                while ch_busy[1] != 0 or ch_head[1] < ch_tail[1]:
                    if (
                        _serve_one(
                            mode,
                            t_state,
                            t_start,
                            t_host,
                            t_demand,
                            size_pages,
                            size_bytes,
                            run_s,
                            run_l,
                            cnt,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            wq,
                            wq_ht,
                        )
                        < 0
                    ):
                        break
        else:
            for q in range(hint_ptr[i], hint_ptr[i + 1]):
                t = np.int64(hint_tensor[q])
                to = np.int64(hint_to[q])
                _log(ev, ev_t, cnt, clk[K_NOW], EV_HINT, i, t, -1, size_pages[t], LOC_NOT_KNOWN, to, 0)
                if to == LOC_SSD or to == LOC_CPU:
                    # O-43: an offload hint for a tensor whose offload is still pending
                    # schedules a second one (its bytes count; it occupies the channel)
                    if t_state[t] == RES or (t_state[t] == OFFL and (opts & OPT_REOFFLOAD)):
                        t_state[t] = OFFL
                        if to == LOC_CPU:
                            t_host[t] = True
                            c = 3
                        else:
                            t_host[t] = False
                            c = 1
                        _enqueue(
                            c,
                            t,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            t_state,
                            t_demand,
                            size_bytes,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            cnt,
                        )
                elif to == LOC_GPU:
                    st = t_state[t]
                    if st == GONE or (st == OFFL and not is_global[t]):
                        if st == GONE:
                            t_state[t] = WAIT
                        wq[wq_ht[1]] = t
                        wq_ht[1] += 1
                        _check_fetch_allocation(
                            wq,
                            wq_ht,
                            t_state,
                            t_start,
                            t_host,
                            t_demand,
                            size_pages,
                            size_bytes,
                            run_s,
                            run_l,
                            cnt,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                        )
                else:
                    fail[0] = t
                    fail[1] = i
                    return ST_BAD_HINT
        if cnt[C_QOVF] != 0:
            return ST_QUEUE_OVERFLOW

        # 2. make the required tensors resident
        for q in range(req_ptr[i], req_ptr[i + 1]):
            t = np.int64(req_idx[q])
            if mode == MODE_FN and (is_global[t] or death[t] == -1):
                continue
            while True:
                st = t_state[t]
                if st == RES or st == OFFL:
                    break
                if st == FETCH:
                    if mode != MODE_FN and t_qalloc[t] and (opts & OPT_GDS_READY_ON_ALLOC):
                        break
                    if (
                        _serve_one(
                            mode,
                            t_state,
                            t_start,
                            t_host,
                            t_demand,
                            size_pages,
                            size_bytes,
                            run_s,
                            run_l,
                            cnt,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            wq,
                            wq_ht,
                        )
                        < 0
                    ):
                        break
                    continue
                if st == WAIT:
                    # GDS: wait for the fetch-allocation queue to place it
                    if (
                        _serve_one(
                            mode,
                            t_state,
                            t_start,
                            t_host,
                            t_demand,
                            size_pages,
                            size_bytes,
                            run_s,
                            run_l,
                            cnt,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            wq,
                            wq_ht,
                        )
                        < 0
                    ):
                        st2 = t_state[t]
                        if st2 == WAIT:
                            # nothing pending can free room: place it on demand instead
                            t_state[t] = GONE
                        continue
                    if t_state[t] == FETCH:
                        t_qalloc[t] = True
                    continue
                # NONE or GONE: allocate
                n = size_pages[t]
                right = chosen[t]
                s = alloc_right(run_s, run_l, cnt, n) if right else alloc_left(run_s, run_l, cnt, n)
                if s < 0:
                    if (
                        _serve_one(
                            mode,
                            t_state,
                            t_start,
                            t_host,
                            t_demand,
                            size_pages,
                            size_bytes,
                            run_s,
                            run_l,
                            cnt,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            wq,
                            wq_ht,
                        )
                        >= 0
                    ):
                        continue
                    if (opts & OPT_TENSOR24) and t == 24:
                        t_state[t] = RES  # O-17: counted as success, no pages held
                        t_start[t] = -1
                        break
                    fail[0] = t
                    fail[1] = i
                    fail[2] = n
                    fail[3] = total_free(run_l, cnt)
                    fail[4] = largest_free(run_s, run_l, cnt, cap, opts)
                    fail[5] = 0
                    k_end[i] = clk[K_NOW]
                    return ST_NO_SPACE
                t_start[t] = s
                fetch = st == GONE and (birth[t] != i or is_global[t])
                if fetch and is_global[t] and (opts & OPT_GDS_GLOBAL_NO_FETCH):
                    fetch = False
                _log(ev, ev_t, cnt, clk[K_NOW], EV_ALLOC, i, t, s, n, 0, -1, 1)
                if fetch:
                    t_state[t] = FETCH
                    t_demand[t] = 1
                    t_qalloc[t] = False
                    # O-44: G10's on-demand fetch always reads the SSD, host tensors included
                    c = 2 if (t_host[t] and not (opts & OPT_DEMAND_FROM_SSD)) else 0
                    _enqueue(
                        c,
                        t,
                        ch_busy,
                        ch_ready,
                        ch_cur,
                        ch_head,
                        ch_tail,
                        ch_q,
                        t_state,
                        t_demand,
                        size_bytes,
                        clk,
                        bw_ssd,
                        bw_host,
                        ev,
                        ev_t,
                        cnt,
                    )
                    continue  # wait for the data
                t_state[t] = RES
                break
            if cnt[C_QOVF] != 0:
                return ST_QUEUE_OVERFLOW
        for q in range(req_ptr[i], req_ptr[i + 1]):
            t_qalloc[req_idx[q]] = False

        # 3. run the kernel
        k_launch[i] = clk[K_NOW]
        clk[K_KFIN] = clk[K_NOW] + exec_ms[i]
        clk[K_KPEND] = 1.0
        while clk[K_KPEND] != 0.0:
            _serve_one(
                mode,
                t_state,
                t_start,
                t_host,
                t_demand,
                size_pages,
                size_bytes,
                run_s,
                run_l,
                cnt,
                ch_busy,
                ch_ready,
                ch_cur,
                ch_head,
                ch_tail,
                ch_q,
                clk,
                bw_ssd,
                bw_host,
                ev,
                ev_t,
                wq,
                wq_ht,
            )
        k_end[i] = clk[K_NOW]
        _log(ev, ev_t, cnt, k_start[i], EV_KERNEL, i, -1, -1, 0, -1, -1, 0)

        # 4. free dead tensors
        for q in range(req_ptr[i], req_ptr[i + 1]):
            t = np.int64(req_idx[q])
            if is_global[t]:
                continue
            if mode == MODE_FN:
                dead = death[t] == i + 1
            else:
                dead = death[t] == i + 1 or death[t] == -1
            if dead and t_start[t] >= 0 and t != fn_reserve:
                st = t_state[t]
                if st == RES or st == OFFL or st == FETCH:
                    if not free_run(run_s, run_l, cnt, t_start[t], size_pages[t]):
                        return ST_ALLOC_BROKEN
                    _log(
                        ev, ev_t, cnt, clk[K_NOW], EV_DEALLOC, i, t, t_start[t], size_pages[t], LOC_GPU, -1, 0
                    )
                    t_start[t] = -1
                    t_state[t] = NONE
        if mode != MODE_FN:
            _check_fetch_allocation(
                wq,
                wq_ht,
                t_state,
                t_start,
                t_host,
                t_demand,
                size_pages,
                size_bytes,
                run_s,
                run_l,
                cnt,
                ch_busy,
                ch_ready,
                ch_cur,
                ch_head,
                ch_tail,
                ch_q,
                clk,
                bw_ssd,
                bw_host,
                ev,
                ev_t,
            )

        # 5. FlashNeuron backward prefetch
        if mode == MODE_FN and i >= make_loss:
            rest = largest_free(run_s, run_l, cnt, cap, opts) - fn_max_pages
            stop = False
            for j in range(i + 1, K):
                for q in range(pf_ptr[j], pf_ptr[j + 1]):
                    t = np.int64(pf_idx[q])
                    if not chosen[t] or t_state[t] != GONE:
                        continue
                    n = size_pages[t]
                    if rest > n:
                        s = alloc_right(run_s, run_l, cnt, n)
                        if s < 0:
                            stop = True
                            break
                        t_start[t] = s
                        t_state[t] = FETCH
                        t_demand[t] = 0
                        _log(ev, ev_t, cnt, clk[K_NOW], EV_ALLOC, i, t, s, n, 0, -1, 0)
                        _enqueue(
                            0,
                            t,
                            ch_busy,
                            ch_ready,
                            ch_cur,
                            ch_head,
                            ch_tail,
                            ch_q,
                            t_state,
                            t_demand,
                            size_bytes,
                            clk,
                            bw_ssd,
                            bw_host,
                            ev,
                            ev_t,
                            cnt,
                        )
                        if opts & OPT_FN_REST_RECOMPUTE:
                            rest = largest_free(run_s, run_l, cnt, cap, opts) - fn_max_pages
                        else:
                            rest -= n
                    else:
                        stop = True
                        break
                if stop:
                    break
        if cnt[C_BROKEN] != 0:
            return ST_ALLOC_BROKEN
        if cnt[C_QOVF] != 0:
            return ST_QUEUE_OVERFLOW
        if cnt[C_EVOVF] != 0:
            return ST_EV_OVERFLOW
    return ST_OK


# simulate's on-disk cache holds the free-run kernels' code: stale when their file changes too
# (g10fast.jit)
_cache_depends_on(simulate, [_free_runs])


# compiled ahead of time at install (g10fast.aot): a first run without a compile
_aot.export(
    simulate,
    "i8(i8, i8, i8[::1], i8[::1], b1[::1], i4[::1], i4[::1], i8[::1], i4[::1], i8[::1], i4[::1], f8[::1], i8,"
    " b1[::1], i8[::1], i4[::1], i8, i8, i8[::1], i4[::1], i1[::1], f8, f8, i8, f8[::1], f8[::1], f8[::1],"
    " i8[:, ::1], f8[::1], f8[::1], i8[::1], i8[::1])",
)
