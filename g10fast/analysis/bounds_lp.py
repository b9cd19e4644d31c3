"""The checkpoint LP and the exact MILP of the fluid model (issue 24; specs/optimal-bounds.md
§4 B3, B4), solved with SciPy's HiGHS.

    lp = lp_bound(model, checkpoints=None)          # LP relaxation; None: every kernel
    opt = milp_optimum(model, time_limit=60)        # z binary: the fluid model's optimum
    plan = g10fast.planner.optimal.plan_from_schedule(opt, model)   # a plan (--plan-in)

Variables (time in the model's unit, bytes in bytes):
* per segment j (the kernels between consecutive checkpoints, merged): its length d_j ≥ Σ c_k;
* per inactive gap g of a tensor (between two uses, or a global's gap before its first use) and
  per checkpoint k inside it: z_{g,k} ∈ [0, 1], the fraction off the GPU at S_k;
* per gap and segment: p_{g,j}, the fraction fetched in segment j; per dirty version and
  segment: w_{v,j}, the fraction written out.
Constraints: memory at each checkpoint (live bytes − off bytes ≤ C); a gap's off fraction at S_k
is fetched in the segments from k's to its next use's (rounded outward), and written out in the
segments from its version's kernel to k's; in the MILP also, a fraction off at one checkpoint
and counted resident at a later one of the same gap was fetched in between; per segment
Σ s p ≤ B_in (d_j + slack) and Σ s w ≤ B_out (d_j + slack). Objective min Σ d_j. Any subset of the
memory constraints and any merge of slots is a relaxation, so every checkpoint set gives a lower
bound; with every kernel a checkpoint and z binary the MILP is the exact optimum of the fluid
model (host memory and the SSD tier are not modelled here: one channel per direction).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from g10fast.analysis.bounds import BoundModel, live_bytes
from g10fast.errors import InputError


@dataclass
class LPResult:
    time: float  # the objective (lower bound; the optimum for a MILP)
    status: int  # HiGHS's status (0 optimal, 1 time or iteration limit)
    optimal: bool  # proven optimal
    mip_gap: float | None  # a MILP's remaining gap (0 when proven)
    seconds: float
    variables: int
    checkpoints: np.ndarray
    # the schedule (MILP): per gap off the GPU, the tensor, its use before (`after`) and its
    # next use, the kernels it is off at, and `fetch_kernel` (the first kernel after them)
    schedule: list = field(default_factory=list)
    dual_bound: float | None = None


def model_gaps(m: BoundModel):
    """Gaps (tensor, a, b, version): tensor x not needed at kernels a+1..b−1, next used by b;
    a = −1 for a global's gap before its first use; version = the kernel that wrote the data
    it holds during the gap (−1: clean)."""
    out = []
    for x in range(len(m.size)):
        if m.lo[x] < 0 or m.size[x] == 0:
            continue
        u = m.use_k[m.use_ptr[x] : m.use_ptr[x + 1]]
        wr = m.use_w[m.use_ptr[x] : m.use_ptr[x + 1]]
        ver = -1
        prev = m.lo[x] - 1 if m.lo[x] < u[0] else None
        for i in range(len(u)):
            if prev is not None and u[i] - prev > 1:
                out.append((x, int(prev), int(u[i]), ver))
            if wr[i]:
                ver = int(u[i])
            prev = u[i]
    return out


def default_checkpoints(m: BoundModel, n: int = 200) -> np.ndarray:
    """The `n` kernels of the largest deficit D_k (all kernels with D_k > 0 if fewer)."""
    D = np.maximum(live_bytes(m) - m.capacity, 0.0)
    pos = np.nonzero(D > 0)[0]
    if len(pos) > n:
        pos = np.sort(pos[np.argsort(-D[pos], kind="stable")[:n]])
    return pos.astype(np.int64)


class _Program:
    """A (mixed-integer) linear program being built: the first variables are the slots'
    times (lower bounds `slot_lb`, unbounded above, continuous, cost 1 each), then `var`'s;
    `row` adds a sparse constraint."""

    def __init__(self, slot_lb):
        self.lb = list(slot_lb)
        self.ub = [np.inf] * len(self.lb)
        self.integ = [0] * len(self.lb)
        self.cost = [1.0] * len(self.lb)
        self.rows, self.cols, self.vals, self.lo, self.hi = [], [], [], [], []

    @property
    def n(self) -> int:
        return len(self.lb)

    @property
    def r(self) -> int:
        return len(self.lo)

    def var(self, lo, hi, integral, c=0.0) -> int:
        """A new variable in [lo, hi] of cost c; its index."""
        self.lb.append(lo), self.ub.append(hi), self.cost.append(c)
        self.integ.append(1 if integral else 0)
        return len(self.lb) - 1

    def row(self, terms, lo, hi):
        """lo <= Σ coefficient · variable <= hi over `terms` (variable, coefficient)."""
        r = self.r
        for v, a in terms:
            self.rows.append(r), self.cols.append(v), self.vals.append(a)
        self.lo.append(lo), self.hi.append(hi)

    def matrix(self):
        from scipy.sparse import coo_matrix

        return coo_matrix((self.vals, (self.rows, self.cols)), shape=(self.r, self.n)).tocsr()


def _solve(
    m: BoundModel,
    checkpoints,
    integral: bool,
    time_limit: float,
    mip_rel_gap: float,
    consistent: bool = False,
):
    from scipy.optimize import Bounds, LinearConstraint, milp

    if m.touched_evictable or m.fault_path:
        raise InputError(
            "the LP and the MILP model one transfer path and kernels holding "
            "their tensors (not the driver engine's model)",
            param="bounds.model",
        )
    t0 = time.perf_counter()
    K = m.num_kernels
    Q = np.arange(K, dtype=np.int64) if checkpoints is None else np.unique(np.asarray(checkpoints, np.int64))
    if len(Q) and (Q.min() < 0 or Q.max() >= K):
        raise InputError(f"checkpoints must be kernels 0..{K - 1}", param="bounds.checkpoints")
    # segments: boundaries at 0, every checkpoint, K
    bnd = np.unique(np.concatenate([[0, K], Q]))
    nseg = len(bnd) - 1
    seg_of = np.searchsorted(bnd, np.arange(K + 1), side="right") - 1  # kernel -> segment
    seg_of[K] = nseg  # S_K: after the last
    cc = np.concatenate([[0.0], np.cumsum(m.c)])
    eps = 1e-7 * max(cc[-1], 1.0) / max(float(m.size.sum()), 1.0) / max(K, 1)
    seg_c = cc[bnd[1:]] - cc[bnd[:-1]]
    P = _Program(np.zeros(nseg))
    inQ = np.zeros(K, bool)
    inQ[Q] = True
    mem_terms = {int(k): [] for k in Q}
    fetch_terms = [[] for _ in range(nseg)]  # (var, bytes)
    write_terms = [[] for _ in range(nseg)]
    wvar = {}  # (tensor, version, segment) -> var
    sched = []

    def transfer_var(terms, s):
        """A new variable: the fraction in [0, 1] of a tensor's `s` bytes moved in a segment
        (its term in that segment's transfer row)."""
        v = P.var(0.0, 1.0, False)
        terms.append((v, s))
        return v

    for x, a, b, ver in model_gaps(m):
        ks = np.arange(a + 1, b)
        ks = ks[inQ[ks]]
        if len(ks) == 0:
            continue
        s = float(m.size[x])
        # a tie-break: of equal schedules, the one that moves the fewest bytes (reported
        # times are Σ d_j alone)
        z = [P.var(0.0, 1.0, integral, eps * s) for _ in range(len(ks))]
        for k, zi in zip(ks.tolist(), z):
            mem_terms[k].append((zi, -s))
        pv = {}
        if not m.free_read[x]:
            # fetch in the segments from seg(k) to seg(b) (the segment holding S_b's start:
            # the fetch must end by S_b; rounded outward to whole segments)
            j0 = int(seg_of[ks[0]])
            j1 = int(seg_of[b - 1])
            for j in range(j0, j1 + 1):
                pv[j] = transfer_var(fetch_terms[j], s)
            for k, zi in zip(ks.tolist(), z):
                P.row([(pv[j], 1.0) for j in range(int(seg_of[k]), j1 + 1)] + [(zi, -1.0)], 0.0, np.inf)
            if consistent:
                # a fraction counted resident at a later checkpoint was fetched in between:
                # z_l >= z_i - (fetched in [S_i, S_l)), for every pair i < l of the gap
                kl = ks.tolist()
                for i in range(len(kl)):
                    for li in range(i + 1, len(kl)):
                        P.row(
                            [(pv[j], 1.0) for j in range(int(seg_of[kl[i]]), int(seg_of[kl[li]]))]
                            + [(z[li], 1.0), (z[i], -1.0)],
                            0.0,
                            np.inf,
                        )
        if ver >= 0 and not m.free_write[x]:
            for k, zi in zip(ks.tolist(), z):
                # written out in [S_ver, S_k]: segments seg(ver) .. seg(k − 1)
                coefs = []
                for j in range(int(seg_of[ver]), int(seg_of[k - 1]) + 1):
                    key = (x, ver, j)
                    if key not in wvar:
                        wvar[key] = transfer_var(write_terms[j], s)
                    coefs.append((wvar[key], 1.0))
                P.row(coefs + [(zi, -1.0)], 0.0, np.inf)
        sched.append((x, a, b, ks, z, pv))
    M = live_bytes(m)
    for k in Q.tolist():
        P.row(mem_terms[k], -np.inf, m.capacity - M[k])
    for j in range(nseg):
        for terms, rate in ((fetch_terms[j], m.in_rate), (write_terms[j], m.out_rate)):
            if terms:
                P.row([(vi, s / rate) for vi, s in terms] + [(j, -1.0)], -np.inf, m.slack)
    for j in range(nseg):
        P.lb[j] = float(seg_c[j])
    opts = {"time_limit": float(time_limit), "presolve": True}
    if integral:
        opts["mip_rel_gap"] = float(mip_rel_gap)
    res = milp(
        np.asarray(P.cost),
        constraints=LinearConstraint(P.matrix(), P.lo, P.hi) if P.r else None,
        bounds=Bounds(np.asarray(P.lb), np.asarray(P.ub)),
        integrality=np.asarray(P.integ) if integral else None,
        options=opts,
    )
    secs = time.perf_counter() - t0
    if res.x is None:
        raise InputError(
            f"the {'MILP' if integral else 'LP'} found no solution ({res.message})", param="bounds"
        )
    out = LPResult(
        time=float(res.x[:nseg].sum()),
        status=int(res.status),
        optimal=res.status == 0,
        mip_gap=getattr(res, "mip_gap", None) if integral else None,
        seconds=secs,
        variables=P.n,
        checkpoints=Q,
        dual_bound=getattr(res, "mip_dual_bound", None) if integral else None,
    )
    if integral:
        x = res.x
        for t, a, b, ks, z, pv in sched:
            off = [int(k) for k, zi in zip(ks.tolist(), z) if x[zi] > 0.5]
            if not off:
                continue
            # the prefetch: at the first kernel it counts resident again (the engine takes
            # frames when a fetch starts, where the model counts them when it ends, so an
            # earlier prefetch evicts what the model keeps; measured, docs/bounds.md)
            fetch = max(off) + 1
            out.schedule.append(
                {"tensor": int(t), "after": int(a), "next_use": int(b), "off": off, "fetch_kernel": fetch}
            )
    return out


def lp_bound(m: BoundModel, checkpoints=None, *, time_limit: float = 60.0) -> LPResult:
    """The LP relaxation with the memory constraint kept at `checkpoints` (None: every kernel,
    the full LP of the fluid model). A lower bound on every schedule of the model."""
    return _solve(m, checkpoints, False, time_limit, 0.0)


def milp_optimum(m: BoundModel, *, time_limit: float = 60.0, mip_rel_gap: float = 1e-6) -> LPResult:
    """The exact optimum of the fluid model (z binary, every kernel a checkpoint), for small
    workloads (K up to ~40). `optimal` False: the time limit stopped it, and `time` is the best
    schedule found (an upper value of the optimum), `dual_bound` a lower one."""
    return _solve(m, None, True, time_limit, mip_rel_gap, consistent=True)


# ---------------------------------------------------------------------------------------------
# the engine-shaped MILP: a schedule the page engine can replay as it is (docs/bounds.md)


@dataclass
class EngineSchedule:
    time: float  # the model's iteration time (Σ d_k)
    optimal: bool
    seconds: float
    variables: int
    slot: np.ndarray  # d_k
    # per gap the schedule moves: tensor, the kernel whose start issues the eviction and the
    # kernel whose start issues the fetch (-1: none)
    moves: list = field(default_factory=list)


def milp_engine_schedule(
    m: BoundModel, is_global, *, time_limit: float = 60.0, mip_rel_gap: float = 1e-6
) -> EngineSchedule:
    """The fluid model's optimum restricted to what the page engine does with a plan of
    pre-evictions and prefetches issued at kernel starts (every kernel a slot):

    * a tensor occupies its frames while it is written out (eviction ends before the memory
      counts free) and from the start of the slot whose start issues its fetch (the engine
      takes frames when a fetch starts);
    * one eviction and one fetch per gap (evicted from a kernel on, fetched from a later one),
      the write-out after the gap's last use (in the slots after it), every eviction copies;
    * weights persist across iterations (cyclic): after their last use they occupy memory
      until evicted, and that eviction and the fetch before the next iteration's first use
      are paid in this iteration.

    No slack. Not a bound (the engine's FIFO ticks may do better or worse): the schedule the
    replay follows; `time` is the replay's target."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    t0 = time.perf_counter()
    K = m.num_kernels
    glob = np.asarray(is_global, bool)
    # live bytes: non-globals first..last use, globals every kernel (cyclic)
    M = _live_cyclic(m, glob)
    gaps_ = []
    for x in range(len(m.size)):
        if m.lo[x] < 0 or m.size[x] == 0:
            continue
        u = m.use_k[m.use_ptr[x] : m.use_ptr[x + 1]].tolist()
        for i in range(len(u) - 1):
            if u[i + 1] - u[i] > 1:
                gaps_.append((x, list(range(u[i] + 1, u[i + 1]))))
        if glob[x]:
            ks = list(range(u[-1] + 1, K)) + list(range(0, u[0]))
            if ks:
                gaps_.append((x, ks))
    P = _Program(np.asarray(m.c, float))
    var, row = P.var, P.row
    mem = [[] for _ in range(K)]
    fin = [[] for _ in range(K)]
    fout = [[] for _ in range(K)]
    eps = 1e-9 * max(float(np.sum(m.c)), 1.0) / max(float(m.size.sum()), 1.0) / max(K, 1)
    info = []
    tin = [[] for _ in range(K)]  # transfers in the stall part of a slot (after c_k)
    tout = [[] for _ in range(K)]
    for x, ks in gaps_:
        s = float(m.size[x])
        n = len(ks)
        # the write-out may end the slot of the last use (the next kernel waits for it, its
        # frames taken only after) and the fetch may fill the stall of the slot before the
        # next use (the kernel's own faults: frames taken then, not at the slot's start)
        wt = var(0, 1, False)
        pt = var(0, 1, False)
        tout[(ks[0] - 1) % K].append((wt, s))
        tin[ks[-1]].append((pt, s))
        e = [var(0, 1, True, eps * s) for _ in range(n)]  # evicted by S_ks[i]
        f = [var(0, 1, True) for _ in range(n)]  # fetch started by S_ks[i]
        p = [var(0, 1, False) for _ in range(n)]  # fetched in slot ks[i]
        wv = [var(0, 1, False) for _ in range(n)]  # written out in slot ks[i]
        for i in range(n):
            if i:
                row([(e[i], 1.0), (e[i - 1], -1.0)], 0.0, np.inf)
                row([(f[i], 1.0), (f[i - 1], -1.0)], 0.0, np.inf)
            row([(e[i], 1.0), (f[i], -1.0)], 0.0, np.inf)  # f <= e
            row([(p[i], 1.0), (f[i], -1.0)], -np.inf, 0.0)  # fetch once started
            row([(wv[i], 1.0), (e[i], 1.0)], -np.inf, 1.0)  # write while resident
            # written out before it counts evicted: Σ_{j<i} w_j >= e_i
            row([(wv[j], 1.0) for j in range(i)] + [(wt, 1.0), (e[i], -1.0)], 0.0, np.inf)
            mem[ks[i]].append((e[i], -s))
            mem[ks[i]].append((f[i], s))
            fin[ks[i]].append((p[i], s))
            fout[ks[i]].append((wv[i], s))
        # fetched in full before the next use when evicted
        row([(pi, 1.0) for pi in p] + [(pt, 1.0), (e[n - 1], -1.0)], 0.0, np.inf)
        info.append((x, ks, e, f, wv, wt, pt))
    for k in range(K):
        row(mem[k], -np.inf, m.capacity - M[k])
        for main, tail, rate in ((fin[k], tin[k], m.in_rate), (fout[k], tout[k], m.out_rate)):
            if main or tail:
                row([(v, a / rate) for v, a in main + tail] + [(k, -1.0)], -np.inf, 0.0)
            if tail:  # the stall part: d_k - c_k
                row([(v, a / rate) for v, a in tail] + [(k, -1.0)], -np.inf, -float(m.c[k]))
    res = milp(
        np.asarray(P.cost),
        constraints=LinearConstraint(P.matrix(), P.lo, P.hi),
        bounds=Bounds(np.asarray(P.lb), np.asarray(P.ub)),
        integrality=np.asarray(P.integ),
        options={"time_limit": float(time_limit), "mip_rel_gap": float(mip_rel_gap), "presolve": True},
    )
    if res.x is None:
        raise InputError(f"the engine-shaped MILP found no solution ({res.message})", param="bounds")
    x_ = res.x
    moves = []
    for x, ks, e, f, wv, wt, pt in info:
        ev = [i for i in range(len(ks)) if x_[e[i]] > 0.5]
        if not ev:
            continue
        fs = [i for i in range(len(ks)) if x_[f[i]] > 0.5]
        ws = [i for i in range(len(ks)) if x_[wv[i]] > 1e-7]
        # the eviction is issued at the first slot it is written out in (the gap's first
        # kernel when it ends the last use's slot); the fetch at the kernel whose start
        # begins it, or at the next use (its own faults) when it fills the stall before it
        ek = ks[ws[0]] if (ws and x_[wt] <= 1e-7) else ks[0]
        fk = ks[fs[0]] if fs else (ks[-1] + 1) % K
        moves.append(
            {"tensor": int(x), "evict_kernel": int(ek), "off_from": int(ks[ev[0]]), "fetch_kernel": int(fk)}
        )
    return EngineSchedule(
        time=float(x_[:K].sum()),
        optimal=res.status == 0,
        seconds=time.perf_counter() - t0,
        variables=P.n,
        slot=x_[:K].copy(),
        moves=moves,
    )


def _live_cyclic(m: BoundModel, glob) -> np.ndarray:
    K = m.num_kernels
    acc = np.zeros(K + 1)
    for x in range(len(m.size)):
        if m.lo[x] < 0 or m.size[x] == 0:
            continue
        if glob[x]:
            acc[0] += m.size[x]
            acc[K] -= m.size[x]
        else:
            acc[m.lo[x]] += m.size[x]
            acc[m.hi[x] + 1] -= m.size[x]
    return np.cumsum(acc)[:K]
