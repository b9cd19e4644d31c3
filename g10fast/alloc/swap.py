"""Trace-driven swap planning: SINGA's SwapGPU planner (`singa_swap`, seed-policies §2.3) and
AppObMem (`appobmem`, §3.3 [ours]) on an allocation trace with accesses (E5-E7).

    plan = plan_swaps(trace, limit_bytes, policy="singa_swap", score="vote", ...) -> SwapPlan
    rep  = replay(trace, plan)                                           (E6)

Both work on anonymous blocks: a block is one malloc of an address until its free; its accesses
are the READ / WRITE / LAYER ops on it. The iteration comes from period detection
(g10fast.alloc.period); the plan is made on one iteration (the "middle" one: the trace's ops from
one iteration before to one after are its context) and replayed on the later ones by op index
within the iteration.

Link (E7): two independent FIFO DMA channels, device→host and host→device, each transfer costing
latency + bytes / bandwidth; `LinkCost.singa_measured()` is SINGA's "16 PCIe, pinned memory" fit,
T_out(s) = 0.0756·s + 47 200 ns, T_in(s) = 0.0823·s + 9 700 ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from g10fast.alloc.period import detect_period
from g10fast.alloc.trace import FREE, LAYER, MALLOC, READ, WRITE, AllocTrace
from g10fast.errors import InputError

MiB = 1 << 20
#: every candidate order of SINGA's paper and of its authors' code, by our name:
#: (the paper's figure label, the name in SwapGPU's C++ / the offline Python, the rule)
SCORE_NAMES = {
    "vote": (
        "majority voting",
        "C++ SwapGPU::Plan (majority voting)",
        "sum of a candidate's ranks under DOA_origin, AOA and WDOA, smallest first",
    ),
    "doa_origin": ("DOA origin", "C++ DOA_origin; Python dto", "the access gap's time, d_time - r_time"),
    "pri": ("priority", "Python pri; C++ (junzhezhang fork) pri", "DOA origin x size"),
    "doa": (
        "Duration of Absence (DOA)",
        "C++ DOA; Python dt",
        "gap - T_out - T_in (faithful_quirks: gap - 2 T_out, as the C++)",
    ),
    "aoa": ("Area of Absence (AOA)", "C++ AOA; Python pri_net", "DOA x size when DOA >= 0, else DOA / size"),
    "wdoa": (
        "Weighted DOA",
        "C++ WDOA; Python wdto",
        (
            "sum of the unswapped load over [ready, next use), computed once "
            "(faithful_quirks: 0 for every candidate, as the C++ adds to a copy)"
        ),
    ),
    "subwdoa": (
        "Submodular Weighted DOA",
        "Python sub-wdto",
        ("WDOA over the load left by the candidates already taken, recomputed after every pick"),
    ),
}
SCORES = tuple(SCORE_NAMES)
POLICIES = ("singa_swap", "appobmem")
#: SINGA VGG's measured iteration time on the authors' GPU: the mean of the three iterations
#: their offline analysis prints (83.972352, 81.452288, 79.288576 ms), which its overhead
#: figure divides by ("% Overhead as of One Iteration"): junzhezhang/memInfoSwap,
#: plot_overhead.py (`itr_duration_ms`). The only iteration time of the paper's runs we have;
#: the `vec_run_5_*` recordings last 2.5-20 s per iteration (instrumented: ~4 ms per op).
SINGA_VGG_ITERATION_NS = (83.972352 + 81.452288 + 79.288576) / 3 * 1e6


@dataclass(frozen=True)
class LinkCost:
    out_ns_per_byte: float
    out_latency_ns: float
    in_ns_per_byte: float
    in_latency_ns: float

    @classmethod
    def singa_measured(cls) -> LinkCost:
        return cls(0.0756, 47_200.0, 0.0823, 9_700.0)

    @classmethod
    def from_gbps(cls, gbps: float, latency_us: float = 5.0) -> LinkCost:
        """A symmetric link of `gbps` GB/s (GB = 2^30 B) with a per-transfer latency."""
        if not gbps > 0:
            raise InputError(f"must be > 0, got {gbps}", param="link.gbps")
        ns = 1e9 / (gbps * 2**30)
        return cls(ns, latency_us * 1e3, ns, latency_us * 1e3)

    def t_out(self, s):
        return self.out_ns_per_byte * s + self.out_latency_ns

    def t_in(self, s):
        return self.in_ns_per_byte * s + self.in_latency_ns


@dataclass
class SwapPlan:
    policy: str
    score: str
    limit_bytes: int
    start: int  # trace op index of the planned iteration
    length: int  # trace ops per iteration
    iteration_ns: float
    peak_before: int  # peak live bytes of the planned iteration, no swapping
    peak_after: int  # with the plan's swaps, as scheduled
    overhead_ns: float  # per iteration: waits for transfers (on `clock`)
    # one row per swap (arrays of the same length); op indices relative to `start`
    block: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    size: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    r_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # last access before
    d_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # next access after
    out_start_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    out_end_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    in_start_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    in_end_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    load: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # after swaps
    info: dict = field(default_factory=dict)

    @property
    def num_swaps(self) -> int:
        return int(self.block.shape[0])

    def summary(self) -> dict:
        return {
            "policy": self.policy,
            "score": self.score,
            "limit_bytes": int(self.limit_bytes),
            "swaps": self.num_swaps,
            "swapped_bytes": int(self.size.sum()),
            "peak_bytes": int(self.peak_after),
            "peak_before_bytes": int(self.peak_before),
            "overhead_per_iteration_s": self.overhead_ns * 1e-9,
            "iteration_s": self.iteration_ns * 1e-9,
            "overhead_fraction": (self.overhead_ns / self.iteration_ns if self.iteration_ns > 0 else 0.0),
            "status": "ok" if self.peak_after <= self.limit_bytes else "over_limit",
            **self.info,
        }


# ---------------------------------------------------------------------------------------------


def _iteration_window(trace: AllocTrace, period_method: str, period=None):
    """(a, s, e, b): trace op indices of the context start, the planned iteration [s, e) and
    the context end."""
    op, _, _ = trace.alloc_ops()
    if period is None and trace.meta.get("period") and period_method == "known":
        period = trace.meta["period"]
    if period is None:
        if period_method == "known":
            raise InputError("the trace does not know its period", param="period")
        p = detect_period(trace, period_method)
        if not p.found:
            raise InputError(
                f"no iteration found in the trace by period method {period_method!r}", param="period"
            )
        start_a, La = p.start, p.length
    else:
        start_a, La = period
    E = len(op)
    n_it = (E - start_a) // La
    if n_it < 1:
        raise InputError("the trace holds less than one whole iteration", param="period")
    # the middle iteration: one whole iteration before and after it when the trace has them
    k = 1 if n_it >= 3 else 0
    sa = start_a + k * La
    s = int(op[sa])
    e = int(op[sa + La]) if sa + La < E else trace.num_ops
    a = int(op[sa - La]) if k >= 1 and sa - La >= 0 else (int(op[start_a]) if k else s)
    b = int(op[sa + 2 * La]) if sa + 2 * La < E else trace.num_ops
    if k == 0:
        a = 0
    return a, s, e, b


def _candidates(
    trace,
    a,
    s,
    e,
    b,
    max_idx,
    min_block,
    policy,
    access_only_prev,
    ready_read,
    ready_write,
    min_gap_ns,
    op_group=None,
    free_is_use=False,
):
    """Consecutive op pairs (prev, cur) of one block whose gap straddles the peak."""
    kind = trace.kind[a:b]
    blk = trace.block[a:b]
    idx = np.arange(a, b)
    order = np.lexsort((idx, blk))
    kb, bb, ib = kind[order], blk[order], idx[order]
    same = (bb[1:] == bb[:-1]) & (bb[1:] >= 0)
    prev_i, cur_i = ib[:-1], ib[1:]
    prev_k, cur_k = kb[:-1], kb[1:]
    ok = same & (prev_i < max_idx) & (max_idx < cur_i)
    size = trace.size[prev_i]
    ok &= size >= min_block
    if access_only_prev:
        ok &= (prev_k == LAYER) | (prev_k == READ) | (prev_k == WRITE)
    else:  # appobmem: a malloc counts as the first access
        ok &= prev_k != FREE
    if not free_is_use:  # [ours] a block whose next op is its free is dead: not swapped in
        ok &= cur_k != FREE
    t = trace.time_ns
    ok &= (t[cur_i] - t[prev_i]) >= min_gap_ns
    if op_group is not None:  # the gap must hold a whole group (kernel) of ops
        ok &= (op_group[cur_i] - op_group[prev_i]) >= 2
    sel = np.nonzero(ok)[0]
    r, d, pk = prev_i[sel], cur_i[sel], prev_k[sel]
    ready = r + np.where(pk == READ, ready_read, np.where(pk == WRITE, ready_write, 0))
    ready = np.minimum(ready, d - 1)
    return bb[:-1][sel], size[sel].astype(np.int64), r, d, ready


def _ranks(x):
    """Rank 1 = largest score."""
    o = np.argsort(-x, kind="mergesort")
    rk = np.empty(len(x), np.int64)
    rk[o] = np.arange(1, len(x) + 1)
    return rk


def plan_swaps(
    trace: AllocTrace,
    limit_bytes: int,
    policy: str = "singa_swap",
    score: str | None = None,
    *,
    link: LinkCost | None = None,
    period=None,
    period_method: str | None = None,
    mode: str = "stick_to_limit",
    faithful_quirks: bool = False,
    min_block: int | None = None,
    data_buffer: int = 4,
    mutable_data_buffer: int = 6,
    min_gap_ns: float = 0.0,
    select=None,
    periodic: bool = False,
    op_group=None,
    accesses: str = "alloc_free_access",
    iteration_ns: float | None = None,
    base_bytes: int = 0,
    offline_analysis: bool = False,
) -> SwapPlan:
    """A swap plan for one iteration of the trace that keeps the load under `limit_bytes`.

    policy singa_swap: SINGA's candidates (previous op a Layer/Read/Mutable, blocks ≥ 1 MiB,
    ready 4 ops after a Read and 6 after a Mutable), score `vote` by default, the
    stick-to-limit schedule. policy appobmem [ours]: blocks from addresses only, a malloc counts
    as an access, no size floor (`min_block` 0) and no ready delay, score `aoa` by default,
    swap-out as soon as possible and swap-in as late as possible, stalls allowed (`mode`
    "asap").  `faithful_quirks`: WDOA = 0 (the C++ adds to a copy) and DOA = gap − 2·T_out.
    `select`: (r, d) trace op indices of the swaps to make, instead of the greedy selection
    (a plan made on a profile run's times, scheduled on this trace's: E6).
    `periodic` [ours; off: SINGA plans one iteration]: a chosen swap also takes its block's
    bytes off the load one iteration before and after (the plan repeats every iteration),
    so a block swapped across the iteration's end (optimizer state) is absent at both ends
    of the planned iteration, as in the steady state. `op_group` (int per op, e.g. the
    absolute kernel of a workload-derived trace's ops): a candidate's gap must hold a whole
    group (a block read by one kernel and next by the following one is never absent).
    `accesses` (AppObMem's `appob.trace`): "alloc_free_access" (the trace's reads and
    writes are seen), or "alloc_free_only" [ours]: only mallocs and frees are seen — a block
    is taken as used at its malloc and just before its free, so a candidate is a block live
    across the peak, swapped out after its malloc and back before its free; the accesses
    in between are not seen, and those that fall while it is absent are counted in
    `info["absent_accesses"]` (each a demand fetch in a replay).
    `score`: one of SCORES (SCORE_NAMES gives each one's name in the paper and the code).
    `iteration_ns` (the clock): None plans on the trace's own timestamps ("trace"); a time
    rescales them so that the planned iteration lasts it ("iteration": every gap between
    two ops stretched by the same factor, so the ops keep the recording's shares of the
    iteration) — for a trace recorded under instrumentation (SINGA's `vec_run_5_*`: about
    4 ms an op, 12.7 s an iteration of VGG), give the iteration time of the GPU it ran on
    (`SINGA_VGG_ITERATION_NS`, the authors' measured 81.6 ms for VGG). Transfer times
    (`link`) are not scaled. Overheads and `iteration_s` are on this clock.
    `base_bytes` [ours; 0]: bytes live throughout that the trace does not show (blocks
    malloc'd before a recording starts and untouched in it), added to the load: the limit
    applies to the whole GPU load, these bytes can never be swapped.
    `offline_analysis` [faithful quirk; off]: the authors' offline analysis that drew the
    paper's overhead figure (junzhezhang/memInfoSwap `unit_functions.py`, commit 5ca3ea1),
    slips included: candidates are any two consecutive ops of a block across the peak (its
    malloc and free too), no ready delay; its scores (`doa` drops T_in, `wdoa` is the gap's
    length times the load at the candidate's place in its address-ordered list); its
    stick-to-limit schedule: swap-outs held to the first op after T_out, or dropped before
    the iteration's first over-limit op when that comes earlier (the wait counted); a
    swap-in's lead time looked up in the previous iteration's op times, so it starts at its
    use (at the latest, the next swap-in's start) and its wait is counted only against the
    last over-limit op. `vote` is not one of its scores.
    """
    if policy not in POLICIES:
        raise InputError(f"unknown swap policy {policy!r} (one of {', '.join(POLICIES)})", param="--policy")
    score = score or ("vote" if policy == "singa_swap" else "aoa")
    if score not in SCORES:
        raise InputError(f"unknown score {score!r} (one of {', '.join(SCORES)})", param="--score")
    if mode not in ("stick_to_limit", "no_overhead"):
        raise InputError(f"mode must be stick_to_limit or no_overhead, got {mode!r}", param="mode")
    if limit_bytes is None or limit_bytes < 0:
        raise InputError(f"must be >= 0, got {limit_bytes}", param="--limit-mib")
    link = link or LinkCost.singa_measured()
    if period_method is None:
        period_method = (
            "known" if trace.meta.get("period") else "singa" if policy == "singa_swap" else "match"
        )
    if policy == "appobmem":
        min_block = 0 if min_block is None else min_block
        data_buffer = mutable_data_buffer = 0
    elif min_block is None:
        min_block = MiB
    if accesses not in ("alloc_free_access", "alloc_free_only"):
        raise InputError(f"must be alloc_free_access or alloc_free_only, got {accesses!r}", param="accesses")
    full = trace
    if accesses == "alloc_free_only":
        blind = trace.block.copy()
        blind[trace.kind > FREE] = -1  # reads, writes, layer markers: not seen
        trace = AllocTrace(
            trace.name, trace.kind, trace.address, trace.size, trace.time_ns, blind, trace.stream, trace.meta
        )
    a, s, e, b = _iteration_window(trace, period_method, period)
    t = trace.time_ns.astype(np.float64)
    rec_iter = float(t[e - 1] - t[s]) if e > s else 0.0
    clock = "trace"
    if iteration_ns is not None:
        if not (isinstance(iteration_ns, (int, float)) and iteration_ns > 0 and np.isfinite(iteration_ns)):
            raise InputError(f"must be > 0, got {iteration_ns!r}", param="iteration_s")
        if not rec_iter > 0:
            raise InputError("the trace's planned iteration has no duration to rescale", param="iteration_s")
        t = t[s] + (t - t[s]) * (float(iteration_ns) / rec_iter)
        clock = "iteration"
    if isinstance(base_bytes, bool) or not isinstance(base_bytes, (int, np.integer)) or base_bytes < 0:
        raise InputError(f"must be an integer >= 0, got {base_bytes!r}", param="base_bytes")
    load0 = trace.live_bytes() + int(base_bytes)
    mid = load0[s:e]
    max_idx = s + int(np.argmax(mid))
    peak0 = int(mid.max())
    if offline_analysis:
        if policy != "singa_swap" or score == "vote":
            raise InputError(
                "the offline analysis is SINGA's (singa_swap) and has no majority vote",
                param="offline_analysis",
            )
        return _plan_offline(
            trace,
            limit_bytes,
            score,
            link,
            a,
            s,
            e,
            b,
            t,
            load0,
            max_idx,
            peak0,
            min_block,
            clock,
            rec_iter,
            base_bytes,
        )
    blk, size, r, d, ready = _candidates(
        trace,
        a,
        s,
        e,
        b,
        max_idx,
        min_block,
        policy,
        policy == "singa_swap",
        data_buffer,
        mutable_data_buffer,
        min_gap_ns,
        None if op_group is None else np.asarray(op_group),
        free_is_use=accesses == "alloc_free_only",
    )
    n = len(blk)
    doa_origin = t[d] - t[r]
    if faithful_quirks:
        doa = doa_origin - 2 * link.t_out(size)
    else:
        doa = doa_origin - link.t_out(size) - link.t_in(size)
    aoa = np.where(doa >= 0, doa * size, doa / np.maximum(size, 1))
    pri = doa_origin * size
    # the load over the context, with selected blocks removed over [ready, d)
    L = load0[a:b].astype(np.int64).copy()
    off = a

    def wdoa_scores(avail):
        if faithful_quirks:  # the C++'s WDOA: 0 for every candidate
            return np.where(avail, 0.0, -np.inf)
        cs = np.concatenate([[0], np.cumsum(L)])
        return np.where(avail, cs[d - off] - cs[ready - off], -np.inf).astype(np.float64)

    P = e - s
    nL = b - a

    def take(L, i):
        lo, hi = ready[i] - off, d[i] - off
        L[lo:hi] -= size[i]
        if periodic:
            for sh in (-P, P):
                lo2, hi2 = max(lo + sh, 0), min(hi + sh, nL)
                if lo2 < hi2:
                    L[lo2:hi2] -= size[i]

    chosen = []
    avail = np.ones(n, bool)
    if score != "subwdoa":  # a fixed order; subwdoa recomputes after every pick
        key = {"doa": doa, "aoa": aoa, "doa_origin": doa_origin, "pri": pri}.get(score)
        if score == "wdoa":
            key = wdoa_scores(avail)
        elif score == "vote":
            key = -(_ranks(doa_origin) + _ranks(aoa) + _ranks(wdoa_scores(avail)))
        order = list(np.argsort(-key, kind="mergesort"))
    else:
        order = None
    s_rel, e_rel = s - off, e - off
    if select is not None:
        want = set(zip(np.asarray(select[0]).tolist(), np.asarray(select[1]).tolist()))
        chosen = [i for i in range(n) if (int(r[i]), int(d[i])) in want]
        avail[chosen] = False
    while select is None and L[s_rel:e_rel].max() > limit_bytes:
        if order is not None:
            i = next((i for i in order if avail[i]), None)
        else:
            sc = wdoa_scores(avail)
            i = int(np.argmax(sc)) if avail.any() else None
            if i is not None and not avail[i]:
                i = None
        if i is None:
            break
        avail[i] = False
        chosen.append(i)
        take(L, i)
    ch = np.asarray(sorted(chosen, key=lambda i: (ready[i], i)), np.int64)
    # ----- schedule (E7): swap-outs in ready order on the out channel, swap-ins backwards
    L = load0[a:b].astype(np.int64).copy()
    for i in ch:
        take(L, i)
    overhead = 0.0
    limit = limit_bytes if mode == "stick_to_limit" else np.iinfo(np.int64).max
    out_s = np.zeros(len(ch), np.int64)
    out_e = np.zeros(len(ch), np.int64)
    chan = -np.inf
    tt = t[a:b]
    for q, i in enumerate(ch):
        st = max(t[ready[i]], chan)
        end_t = st + link.t_out(size[i])
        chan = end_t
        j = int(np.searchsorted(tt, end_t, side="left")) + off  # first op at/after the end
        j = min(j, max_idx, d[i] - 1) if policy == "singa_swap" else min(j, d[i] - 1)
        j = max(j, ready[i])
        # the GPU copy is held over [ready, j]: where that breaks the limit, the op waits
        seg = L[ready[i] - off : j + 1 - off] + size[i]
        over = np.nonzero(seg > limit)[0]
        if len(over):
            jj = ready[i] + int(over[0])
            overhead += max(0.0, end_t - t[max(jj - 1, ready[i])])
            j = max(jj - 1, ready[i])
        L[ready[i] - off : j + 1 - off] += size[i]
        out_s[q] = int(np.searchsorted(tt, st, side="left")) + off
        out_e[q] = j
    in_s = np.zeros(len(ch), np.int64)
    in_end = np.zeros(len(ch), np.float64)
    nxt = np.inf
    for q in sorted(range(len(ch)), key=lambda q: -d[ch[q]]):
        i = ch[q]
        need = min(t[d[i]], nxt)
        st_t = need - link.t_in(size[i])
        j = int(np.searchsorted(tt, st_t, side="right")) - 1 + off  # latest op with t <= st_t
        lo = out_e[q] + 1 if policy == "appobmem" else max(max_idx + 1, out_e[q] + 1)
        j = min(max(j, lo), d[i])
        # the GPU copy exists again from j: delay past the last over-limit op
        seg = L[j - off : d[i] - off] + size[i]
        over = np.nonzero(seg > limit)[0]
        if len(over):
            j = min(j + int(over[-1]) + 1, d[i])
        end_t = max(t[j], st_t) + link.t_in(size[i])
        if end_t > t[d[i]]:
            overhead += end_t - t[d[i]]
        L[j - off : d[i] - off] += size[i]
        in_s[q] = j
        in_end[q] = end_t
        nxt = max(t[j], st_t)
    L_mid = L[s_rel:e_rel]
    info_extra = {"accesses": accesses}
    if accesses == "alloc_free_only":
        # the accesses it did not see that fall while a block is away (mispredictions)
        ob = np.argsort(full.block, kind="stable")
        sb = full.block[ob]
        miss = 0
        for q, i in enumerate(ch):
            lo_, hi_ = np.searchsorted(sb, blk[i]), np.searchsorted(sb, blk[i], side="right")
            ops_ = ob[lo_:hi_]
            miss += int(((ops_ > out_e[q]) & (ops_ < in_s[q])).sum())
        info_extra["absent_accesses"] = miss
    info_extra["clock"] = clock
    info_extra["base_bytes"] = int(base_bytes)
    info_extra["recorded_iteration_s"] = rec_iter * 1e-9
    return SwapPlan(
        policy,
        score,
        int(limit_bytes),
        s,
        e - s,
        float(t[e - 1] - t[s]) if e > s else 0.0,
        peak0,
        int(L_mid.max()),
        float(overhead),
        blk[ch],
        size[ch],
        r[ch] - s,
        d[ch] - s,
        out_s - s,
        out_e - s,
        in_s - s,
        in_end - t[s],
        L_mid.copy(),
        {
            "candidates": int(n),
            "peak_idx": int(max_idx - s),
            "mode": mode,
            "faithful_quirks": bool(faithful_quirks),
            "context": [int(a - s), int(b - s)],
            **info_extra,
        },
    )


def _plan_offline(
    trace, limit, score, link, a, s, e, b, t, load0, max_idx, peak0, min_block, clock, rec_iter, base_bytes
) -> SwapPlan:
    """plan_swaps(offline_analysis=True): memInfoSwap's get_swappable_blocks, its orders,
    swap_select and swap_sched (stick-to-limit), op by op. Indices below are trace ops."""
    L_it = e - s
    if s - L_it < 0 or e >= b:
        raise InputError(
            "the offline analysis plans the middle of three iterations: the trace "
            "needs a whole iteration before the planned one and an op after it",
            param="offline_analysis",
        )
    blk, size, r, d, _ = _candidates(
        trace, a, s, e, b, max_idx, min_block, "singa_swap", False, 0, 0, 0.0, None, free_is_use=True
    )
    # the script's candidate list: blocks in the order of their address as text, then by op
    addr = [hex(int(trace.address[i])) for i in r]
    o = sorted(range(len(r)), key=lambda i: (addr[i], int(r[i])))
    blk, size, r, d = blk[o], size[o], r[o], d[o]
    n = len(r)
    tf = t.astype(np.float64)
    dto = tf[d] - tf[r]
    dt = dto - link.t_out(size)  # the script's `- swap_in_dt(size)` is a no-op
    if score == "subwdoa":
        vec_load = load0.astype(np.float64).copy()
        left, order, val = list(range(n)), [], np.zeros(n)
        while left:
            cs = np.concatenate([[0.0], np.cumsum(vec_load)])
            for i in left:
                val[i] = cs[d[i]] - cs[r[i]]
            left.sort(key=lambda i: -val[i])
            i = left.pop(0)
            vec_load[r[i] : d[i]] -= size[i]
            order.append(i)
        order.sort(key=lambda i: -val[i])
    else:
        key = {
            "doa_origin": dto,
            "pri": dto * size,
            "doa": dt,
            "aoa": np.where(dt >= 0, dt * size, dt / np.maximum(size, 1)),
            "wdoa": (d - r) * load0[np.minimum(s - L_it + np.arange(n), len(load0) - 1)].astype(np.float64),
        }[score]
        order = sorted(range(n), key=lambda i: -key[i])
    # swap_select: take in order, stop once the iteration's peak is at most the limit (the
    # first candidate is taken even when it already is)
    Ls = load0.astype(np.float64).copy()
    chosen = []
    for i in order:
        Ls[r[i] : d[i]] -= size[i]
        chosen.append(i)
        if Ls[s:e].max() <= limit:
            break

    def over(Lu):
        """load_over_limit over the iteration: (first op over the limit, the op before the
        last over it, scanning down from the next iteration's first op); -1 when at the
        iteration's first op / none."""
        idx = np.nonzero(Lu[s:e] > limit)[0]
        first = s + int(idx[0]) if len(idx) else s
        hi = np.nonzero(Lu[first + 1 : e + 1] > limit)[0]
        last = first + int(hi[-1]) if len(hi) else e  # (i - 1) for i the last over it
        return (-1 if first == s else first), (-1 if last == e else last)

    Lu = load0.astype(np.float64).copy()
    overhead = 0.0
    outs = sorted(chosen, key=lambda i: r[i])
    i1p = {}
    prev = None
    for i in outs:
        ready = int(r[i]) if prev is None else max(int(r[i]), i1p[prev])
        t1p = tf[ready] + link.t_out(size[i])
        while t1p > tf[ready]:
            ready += 1
        ready = min(ready, int(d[i]) - 1)
        Lu[ready : d[i]] -= size[i]
        fo, _ = over(Lu)
        if fo != -1 and fo <= ready:
            Lu[fo - 1 : ready + 1] -= size[i]
            ready = fo - 1
        i1p[i] = ready
        overhead += max(0.0, t1p - tf[ready])
        prev = i
    i2p, in_end = {}, {}
    prev = None
    for i in sorted(chosen, key=lambda i: -d[i]):
        need = int(d[i]) if prev is None else min(int(d[i]), i2p[prev])
        prep = tf[need] - link.t_in(size[i])
        while prep < tf[need - L_it]:  # the slip: the previous iteration's times
            need -= 1
        need = max(need, int(r[i]))
        Lu[need : d[i]] += size[i]
        _, fb = over(Lu)
        if fb != -1 and fb >= need:
            Lu[need : fb + 1] -= size[i]
            overhead += tf[fb] - prep
        i2p[i] = need
        in_end[i] = tf[need] + link.t_in(size[i]) - tf[s]
        prev = i
    ch = np.asarray(sorted(chosen, key=lambda i: (r[i], i)), np.int64)
    L_mid = Lu[s:e].astype(np.int64)

    def pick(m):
        return np.asarray([m[int(i)] for i in ch], np.int64)

    return SwapPlan(
        "singa_swap",
        score,
        int(limit),
        s,
        e - s,
        float(tf[e - 1] - tf[s]) if e > s else 0.0,
        peak0,
        int(L_mid.max()),
        float(overhead),
        blk[ch],
        size[ch].astype(np.int64),
        r[ch] - s,
        d[ch] - s,
        r[ch] - s,
        pick(i1p) - s,
        pick(i2p) - s,
        np.asarray([in_end[int(i)] for i in ch], np.float64),
        L_mid.copy(),
        {
            "candidates": int(n),
            "peak_idx": int(max_idx - s),
            "mode": "offline",
            "faithful_quirks": True,
            "offline_analysis": True,
            "context": [int(a - s), int(b - s)],
            "accesses": "alloc_free_access",
            "clock": clock,
            "base_bytes": int(base_bytes),
            "recorded_iteration_s": rec_iter * 1e-9,
        },
    )


def check_plan(trace: AllocTrace, plan: SwapPlan) -> None:
    """The plan's invariants (raises g10fast.errors.InvariantError): a swapped block is never
    absent at an op that touches it; out ends after its last access, the swap-in starts after
    the swap-out. Returns the number of swaps checked."""
    from g10fast.errors import InvariantError

    s = plan.start
    for q in range(plan.num_swaps):
        b = plan.block[q]
        absent_from = s + plan.out_end_idx[q] + 1
        back_at = s + plan.in_start_idx[q]
        if not plan.r_idx[q] <= plan.out_end_idx[q] < plan.in_start_idx[q] <= plan.d_idx[q]:
            raise InvariantError(
                f"swap {q} of block {b}: its last use, swap-out end, swap-in "
                "start and next use are out of order"
            )
        touch = np.nonzero(trace.block == b)[0]
        inside = touch[(touch >= absent_from) & (touch < back_at)]
        if len(inside):
            raise InvariantError(f"block {b} touched at op {inside[:3].tolist()} while absent")
    return int(plan.num_swaps)


def replay(
    trace: AllocTrace, plan: SwapPlan, link: LinkCost | None = None, on_mismatch: str = "demand"
) -> dict:
    """Apply the plan by op index to every later whole iteration (E6). A swap whose ops differ
    there (kind or size at its r/d index, or another block at d than at r) is a misprediction:
    `demand` keeps the swap-out and fetches the block synchronously at its next use (T_in
    stall), `disable` turns all swapping off from that iteration on (SINGA: async off)."""
    if on_mismatch not in ("demand", "disable"):
        raise InputError(f"must be demand or disable, got {on_mismatch!r}", param="on_mismatch")
    link = link or LinkCost.singa_measured()
    L = plan.length
    rows = []
    disabled = False
    k = 1
    while plan.start + (k + 1) * L <= trace.num_ops:
        base = plan.start + k * L
        mism = 0
        extra = 0.0
        for q in range(plan.num_swaps):
            ri, di = base + plan.r_idx[q], base + plan.d_idx[q]
            r0, d0 = plan.start + plan.r_idx[q], plan.start + plan.d_idx[q]
            if di >= trace.num_ops:
                continue  # the trace ends before the swap's next use: nothing to do
            ok = (
                trace.kind[ri] == trace.kind[r0]
                and trace.kind[di] == trace.kind[d0]
                and trace.size[ri] == plan.size[q]
                and trace.block[ri] == trace.block[di]
            )
            if not ok:
                mism += 1
                if on_mismatch == "demand":
                    extra += link.t_in(int(plan.size[q]))
        if mism and on_mismatch == "disable":
            disabled = True
        rows.append(
            {
                "iteration": k,
                "mismatches": mism,
                "overhead_s": 0.0 if disabled else (plan.overhead_ns + extra) * 1e-9,
                "swapping": not disabled,
                "peak_bytes": int(trace.live_bytes()[base : base + L].max() + plan.info.get("base_bytes", 0))
                if disabled
                else int(plan.peak_after),
            }
        )
        k += 1
    return {"iterations": rows, "on_mismatch": on_mismatch}


def sweep_limits(trace, limits, policy="singa_swap", scores=None, **kw) -> list[dict]:
    """Overhead per iteration against the memory limit, one row per (score, limit)."""
    out = []
    if kw.get("period") is None and not trace.meta.get("period"):
        # detect the iteration once for the whole sweep
        method = kw.get("period_method") or ("singa" if policy == "singa_swap" else "match")
        if method != "known":
            p = detect_period(trace, method)
            if not p.found:
                raise InputError(
                    f"no iteration found in the trace by period method {method!r}", param="period"
                )
            kw = dict(kw, period=(p.start, p.length))
    for sc in scores or SCORES:
        for lim in limits:
            p = plan_swaps(trace, int(lim), policy, sc, **kw)
            out.append(dict(p.summary(), limit_bytes=int(lim)))
    return out


__all__ = [
    "MALLOC",
    "POLICIES",
    "SCORES",
    "SCORE_NAMES",
    "SINGA_VGG_ITERATION_NS",
    "LinkCost",
    "SwapPlan",
    "check_plan",
    "plan_swaps",
    "replay",
    "sweep_limits",
]
