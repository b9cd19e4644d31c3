"""The page engine's event loop (§5, §17.3): busy ticks one after another (`_busy_ticks`),
quiet ticks, and `run_engine`, the kernel Python calls.

`run_engine` is resumable: it returns `ST_PAUSE` when an output buffer needs draining or a
queue needs room, with all of its state in the arrays it was given, and continues where it
stopped when called again (the wrapper, `g10fast.engine.page.simulate_pages`, drains and
calls it again)."""

from __future__ import annotations

import importlib

from g10fast.engine.page.batch import (
    TickArrays,
    TickState,
    _fresh_counters,
    _stage_admission,
    _tick_params,
)
from g10fast.engine.page.fetch import _fetch_fast
from g10fast.engine.page.general import (
    _es_state,
    _es_ticks,
    _general_page,
    _next_tick_busy,
    _resume,
    _tick_end,
)
from g10fast.engine.page.helpers import _emit, _emit_ticked, _no_faults_queued
from g10fast.engine.page.kernel_begin import _kernel_begin
from g10fast.engine.page.layout import (
    C_ALLOC,
    C_FED,
    C_FFS,
    C_IN,
    C_IN_CPU,
    C_IN_SSD,
    C_OUT,
    C_OUT_CPU,
    C_OUT_SSD,
    EV_TRANSFER,
    E_NONE,
    NQ,
    P_BULK,
    P_II,
    P_NUM_ITER,
    P_REPLAY,
    P_XLRU,
    P_RULE,
    P_TRACE,
    P_XMARGIN,
    ST_DONE,
    ST_ERROR,
    ST_PAUSE,
    S_CUR_ITER,
    S_CUR_KERNEL,
    S_DEEPUM_END,
    S_DONE,
    S_ERROR,
    S_ES_COUNT,
    S_EV_PAUSE,
    S_GPU_USED,
    S_HOST_PEAK,
    S_HOST_USED,
    S_IN_OPEN,
    S_KB_KERNEL,
    S_KB_NEWITER,
    S_KB_PENDING,
    S_KB_SEQ,
    S_KB_TIME,
    S_LIVE_WARN,
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
    S_RP_MASK,
    S_SEQ,
    S_STAT_PAUSE,
    S_TC_A,
    S_TC_B,
    S_TC_C,
    S_TICK_SEQ,
    S_TICK_TIME,
    S_WAIT,
    S_XFER,
    S_X_NFREE,
    _G_END,
    _G_PE_CPU,
    _G_PE_SSD,
    _G_PF_SSD,
    _G_PREALLOC,
    _kernel,
    _kernel_py,
)
from g10fast.engine.page.replay import _rp_begin, _rp_end, _rp_host_ok, _rp_ticks
from g10fast.engine.page.stages import _preevict_run
from g10fast import aot
from g10fast.engine.page.rules import arrival, deepum
from g10fast.jit import cache_depends_on, cache_kernel_arguments
from g10fast.locations import NOT_KNOWN


@_kernel
def _busy_ticks(t, tt, srt, pstate, lru, qb, S, pcie, bnd, ev, rule, emit):
    """Busy batcher ticks from time t (§9.2, §9.3): ticks that find a queued page. Runs the
    stages of the tick, its end (transfer boundary, per-iteration traffic, the resume
    check of §9.6) and advances the tick clock as the event loop would; then (on the fast
    paths, traced or not) goes on with the next tick as long as the event loop would choose that tick next and
    it is busy too (no kernel event due before it, nothing to drain or grow), so that a run
    of busy ticks pays the set-up below once. The per-tick counters of the last tick are
    left in S[C_*].

    The hot scalar state (per-tick counters, memory use, wait-set size, LRU positions,
    lookup caches) is kept in local variables for the whole run of ticks, passed to and
    returned by the stage functions, and written back to S at the end."""
    prm = _tick_params(S)
    arrays = TickArrays(tt, srt, pstate, lru, qb, S, pcie, bnd, ev)
    HOST = prm.HOST
    trace = S[P_TRACE] != 0
    it = S[S_CUR_ITER]
    k = S[S_CUR_KERNEL]
    gpu_used = S[S_GPU_USED]
    host_used = S[S_HOST_USED]
    host_peak = S[S_HOST_PEAK]
    wait = S[S_WAIT]
    live_warn = S[S_LIVE_WARN]
    lru_tail = S[S_LRU_TAIL]
    lru_cur = S[S_LRU_CUR]
    lru_scan = S[S_LRU_SCAN]
    dum_end = S[S_DEEPUM_END]
    tc_a = S[S_TC_A]
    tc_b = S[S_TC_B]
    tc_c = S[S_TC_C]
    half = qb.shape[1] // 2
    # (the fast paths know the built-in eviction rules only: P_RULE, another rule, takes
    # every page by the general path; a traced run takes them on the extent LRU, which
    # writes their pages as runs and ticks, and the general path on the ring)
    fast = S[P_RULE] == 0 and (not trace or S[P_XLRU] != 0)
    replay = fast and S[P_REPLAY] != 0
    # ("Empty busy ticks", page.general): the tick before moved nothing, its start is kept
    es_armed = False
    while True:
        # ---- a busy tick at time t (§9.2) ----
        # (the rows of its events may extend the open ones of the ticks before: a range row)
        if replay and S[S_RP_MASK] >= 0 and _rp_host_ok(S, host_used):
            # ---- the template's tick again, and the ones after it ----
            (
                n_rp,
                go_on,
                t,
                (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
                gpu_used,
                host_used,
                host_peak,
                wait,
                tc_a,
            ) = _rp_ticks(
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
            )
            if n_rp > 0 and not go_on:
                break
            # (else the next tick, if any replayed, is not the template's: it runs below)
        (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed) = _fresh_counters(
            host_used, HOST
        )
        rp_mask = 0
        n_gen = 0
        if replay:
            rp_mask = _rp_begin(S, qb, pstate, gpu_used, host_used)
        es_kept = es_armed
        nev0 = S[S_NEV]  # (traced: the rows before the tick)
        if es_kept:
            _es_state(S, qb, lru_tail, lru_cur, lru_scan, dum_end, wait, gpu_used, host_used, True)
        fast_block = False  # the general path takes the stage's next page
        rescue = False
        stage = _G_PE_SSD
        while stage < _G_END:
            stage, q, ok, rescue = _stage_admission(
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
            )
            if stage >= _G_END:
                break
            qh = S[S_QH + q]
            if not ok or S[S_QT + q] <= qh:
                stage += 1
                fast_block = False
                continue
            if fast and not fast_block and stage <= _G_PE_CPU:
                # ---- pre-eviction fast path ----
                (
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
                ) = _preevict_run(
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
                )
                fast_block = moved == 0
                continue
            if fast and not fast_block and _G_PF_SSD <= stage and stage <= _G_PREALLOC:
                # ---- fetch fast path ----
                (
                    stage,
                    t,
                    fast_block,
                    (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
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
                    ),
                ) = _fetch_fast(
                    stage,
                    q,
                    qh,
                    t,
                    it,
                    k,
                    prm,
                    arrays,
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
                    emit,
                )
                continue
            # ---- general path: one page ----
            fast_block = False
            n_gen += 1
            (
                stage,
                (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
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
                ),
            ) = _general_page(
                stage,
                q,
                t,
                it,
                k,
                trace,
                prm,
                rule,
                arrays,
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
        if replay:
            _rp_end(
                S,
                qb,
                rp_mask,
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
            )
        # ---- end of the tick: transfer boundary, traffic, resume check (§9.6) ----
        t, resumed = _tick_end(
            t,
            it,
            k,
            trace,
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
        # ---- is the next event another busy tick? (run_engine's choice, same tests) ----
        if resumed or (trace and not fast) or S[S_ERROR] != E_NONE:
            break
        if not _next_tick_busy(t, S, bnd.shape[0], half):
            break
        if emit is None:
            # (untraced: `not trace` always holds; it stays so that the untraced engine's
            # machine code stays as it was, `engine_asm_diff.py`)
            es_armed = not trace and S[P_BULK] != 0 and c_in + c_out + c_alloc == 0
        else:
            # (traced: a tick that wrote no row; the ticks it stands for write none either)
            es_armed = S[S_NEV] == nev0 and S[P_BULK] != 0 and c_in + c_out + c_alloc == 0
        if (
            es_kept
            and es_armed
            and (not replay or S[S_RP_MASK] < 0)
            and _es_state(S, qb, lru_tail, lru_cur, lru_scan, dum_end, wait, gpu_used, host_used, False)
        ):
            # the ticks before the kernel event are this one again: all but the last end here
            n = _es_ticks(t, S)
            if n > 0:
                t += n * S[P_II]
                S[S_TICK_TIME] = t
                S[S_TICK_SEQ] += n
                S[S_SEQ] += n
                S[S_ES_COUNT] += n
    S[C_IN] = c_in
    S[C_IN_SSD] = c_in_ssd
    S[C_IN_CPU] = c_in_cpu
    S[C_OUT] = c_out
    S[C_OUT_SSD] = c_out_ssd
    S[C_OUT_CPU] = c_out_cpu
    S[C_ALLOC] = c_alloc
    S[C_FFS] = c_ffs
    S[C_FED] = c_fed
    S[S_GPU_USED] = gpu_used
    S[S_HOST_USED] = host_used
    S[S_HOST_PEAK] = host_peak
    S[S_WAIT] = wait
    S[S_LIVE_WARN] = live_warn
    S[S_LRU_TAIL] = lru_tail
    S[S_LRU_CUR] = lru_cur
    S[S_LRU_SCAN] = lru_scan
    S[S_DEEPUM_END] = dum_end
    S[S_TC_A] = tc_a
    S[S_TC_B] = tc_b
    S[S_TC_C] = tc_c


@_kernel
def _quiet_tick(t, S, bnd, ev):
    """A batcher tick at time t that finds no queued page (§9.2): it closes an open
    transfer period and may resume the waiting kernel; it moves nothing. The tick clock is
    advanced by the caller."""
    for i in range(C_IN, C_FED + 1):
        S[i] = 0
    S[C_FFS] = NOT_KNOWN
    S[C_FED] = NOT_KNOWN
    S[S_IN_OPEN] = -1
    S[S_OUT_OPEN] = -1
    if S[S_XFER]:
        it = S[S_CUR_ITER]
        n = S[S_NBND]
        bnd[n, 0] = it
        bnd[n, 1] = t
        bnd[n, 2] = 0
        S[S_NBND] = n + 1
        S[S_XFER] = 0
        if S[P_TRACE]:
            _emit(ev, S, t, EV_TRANSFER, it, S[S_CUR_KERNEL], -1, -1, -1, -1, -1, 0)
    if S[S_RESCHED] and _no_faults_queued(S) and S[S_WAIT] == 0:
        _resume(t, S)


# ----------------------------------------------------------------------------------------
# the event loop (§5, §17.3)
# ----------------------------------------------------------------------------------------


@_kernel_py
def run_engine(kt, kidx, ht, tt, srt, pstate, lru, qb, S, F, kstat, pcie, bnd, ev, rule, emit):
    """Run until the simulation ends (ST_DONE), an error (ST_ERROR), or a pause (ST_PAUSE:
    the boundary or event buffer needs draining, a queue is half full, or S[S_STAT_PAUSE]
    kernels have completed, for progress reports). Resumable. `rule`: the eviction rule
    (g10fast.engine.page.rules), a kernel the engine is compiled for (one compile per rule)."""
    num_iter = S[P_NUM_ITER]
    half = qb.shape[1] // 2
    ii = S[P_II]
    while True:
        if S[S_ERROR] != E_NONE:
            return ST_ERROR
        # pause points: only between events, so that no step can overflow a buffer
        if (
            S[S_NBND] + 4 > bnd.shape[0]
            or S[S_NEV] >= S[S_EV_PAUSE]
            or S[S_NSTAT] >= S[S_STAT_PAUSE]
            or S[S_X_NFREE] < S[P_XMARGIN]
        ):
            return ST_PAUSE
        idle = True
        for q in range(NQ):
            qlen = S[S_QT + q] - S[S_QH + q]
            if qlen > half:
                return ST_PAUSE
            if qlen > 0:
                idle = False
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
            _kernel_begin(k, S[S_KB_TIME], kt, kidx, ht, tt, srt, pstate, lru, qb, S, F, kstat, ev)
        else:
            t = S[S_TICK_TIME]
            m = 1
            if idle and not S[S_XFER] and not S[S_RESCHED] and S[S_KB_PENDING]:
                # Idle ticks (§17.3): no queued page, no open transfer, no waiting kernel.
                # Every tick before the pending kernel event does nothing but take a
                # sequence number; those after the current one carry a sequence number
                # above the kernel event's, so they run iff their time is before it.
                for i in range(C_IN, C_FED + 1):
                    S[i] = 0
                S[C_FFS] = NOT_KNOWN
                S[C_FED] = NOT_KNOWN
                S[S_IN_OPEN] = -1
                S[S_OUT_OPEN] = -1
                kb_t = S[S_KB_TIME]
                if kb_t > t:
                    m = 1 + (kb_t - t - 1) // ii
            elif idle:
                _quiet_tick(t, S, bnd, ev)
            else:
                # busy ticks advance the clock themselves (possibly several ticks)
                _busy_ticks(t, tt, srt, pstate, lru, qb, S, pcie, bnd, ev, rule, emit)
                continue
            S[S_TICK_TIME] = t + m * ii
            S[S_TICK_SEQ] = S[S_SEQ] + m - 1
            S[S_SEQ] += m


# run_engine's on-disk cache holds the code of every kernel it calls: it goes stale when any
# stage module changes, not only this one; and it is keyed on the eviction rule kernel by the
# rule's name and file, not by the rule object of one process (g10fast.jit)
cache_depends_on(
    run_engine,
    [
        importlib.import_module(m)
        for m in (
            "g10fast.locations",
            "g10fast.engine.page.layout",
            "g10fast.engine.page.helpers",
            "g10fast.engine.page.lru",
            "g10fast.engine.page.rules",
            "g10fast.engine.page.stages",
            "g10fast.engine.page.release",
            "g10fast.engine.page.batch",
            "g10fast.engine.page.fetch",
            "g10fast.engine.page.general",
            "g10fast.engine.page.replay",
            "g10fast.engine.page.kernel_begin",
            __name__,
        )
    ],
)
cache_kernel_arguments(run_engine)

# compiled ahead of time at install (g10fast.aot) for the built-in rules, untraced, and traced
# (the emitter of the rows, `_emit_ticked`) on extent records: a first run without a compile
# (a traced run on DeepUM's ring, with planned pre-evictions, or a rule of a policy's own
# compiles on first use; each traced variant adds about 44 s to the install's build)
_RUN_ENGINE_TYPES = (
    "i8(i8[:, ::1], i4[::1], i8[:, ::1], i8[:, ::1], i8[:, ::1], u1[::1], {lru}[::1], i8[:, :, ::1],"
    " i8[::1], f8[::1], i8[:, ::1], i8[:, ::1], i8[:, ::1], i8[:, ::1])"
)
# (the LRU list: extent records, int64, for the LRU policies; DeepUM's ring of int32 or int64
# entries by the page count when it pre-evicts)
for _rule, _lru in ((arrival, "i8"), (deepum, "i4"), (deepum, "i8")):
    aot.export(run_engine, _RUN_ENGINE_TYPES.format(lru=_lru), bind=(_rule, None))
    if _lru == "i8":
        aot.export(run_engine, _RUN_ENGINE_TYPES.format(lru=_lru), bind=(_rule, _emit_ticked))
