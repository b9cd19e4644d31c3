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
Constraints: memory at each checkpoint (live bytes − off bytes ≤ C); a gap's off fraction at
S_k is fetched in the segments from k's to its next use's (rounded outward), and written out in
the segments from its version's kernel to k's; in the MILP also, a fraction off at one
checkpoint and counted resident at a later one of the same gap was fetched in between; per segment Σ s p ≤ B_in (d_j + slack) and
Σ s w ≤ B_out (d_j + slack). Objective min Σ d_j. Any subset of the memory constraints and any
merge of slots is a relaxation, so every checkpoint set gives a lower bound; with every kernel a
checkpoint and z binary the MILP is the exact optimum of the fluid model (host memory and the
SSD tier are not modelled here: one channel per direction).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from g10fast.analysis.bounds import BoundModel, live_bytes
from g10fast.errors import InputError


@dataclass
class LPResult:
    time: float                   # the objective (lower bound; the optimum for a MILP)
    status: int                   # HiGHS's status (0 optimal, 1 time or iteration limit)
    optimal: bool                 # proven optimal
    mip_gap: float | None         # a MILP's remaining gap (0 when proven)
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
        u = m.use_k[m.use_ptr[x]:m.use_ptr[x + 1]]
        wr = m.use_w[m.use_ptr[x]:m.use_ptr[x + 1]]
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


def _solve(m: BoundModel, checkpoints, integral: bool, time_limit: float, mip_rel_gap: float,
           consistent: bool = False):
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    if m.touched_evictable or m.fault_path:
        raise InputError("the LP and the MILP model one transfer path and kernels holding "
                         "their tensors (not the driver engine's model)", param="bounds.model")
    t0 = time.perf_counter()
    K = m.num_kernels
    Q = np.arange(K, dtype=np.int64) if checkpoints is None else \
        np.unique(np.asarray(checkpoints, np.int64))
    if len(Q) and (Q.min() < 0 or Q.max() >= K):
        raise InputError(f"checkpoints must be kernels 0..{K - 1}", param="bounds.checkpoints")
    # segments: boundaries at 0, every checkpoint, K
    bnd = np.unique(np.concatenate([[0, K], Q]))
    nseg = len(bnd) - 1
    seg_of = np.searchsorted(bnd, np.arange(K + 1), side="right") - 1   # kernel -> segment
    seg_of[K] = nseg                                                     # S_K: after the last
    cc = np.concatenate([[0.0], np.cumsum(m.c)])
    eps = 1e-7 * max(cc[-1], 1.0) / max(float(m.size.sum()), 1.0) / max(K, 1)
    seg_c = cc[bnd[1:]] - cc[bnd[:-1]]
    rows, cols, vals = [], [], []
    lo_b, hi_b = [], []
    nvar = nseg
    var_lb = list(np.zeros(nseg))
    var_ub = [np.inf] * nseg
    integ = [0] * nseg
    cost = [1.0] * nseg
    r = 0
    inQ = np.zeros(K, bool)
    inQ[Q] = True
    mem_rows = {int(k): None for k in Q}
    mem_terms = {int(k): [] for k in Q}
    fetch_terms = [[] for _ in range(nseg)]   # (var, bytes)
    write_terms = [[] for _ in range(nseg)]
    wvar = {}                                  # (tensor, version, segment) -> var
    sched = []
    for (x, a, b, ver) in model_gaps(m):
        ks = np.arange(a + 1, b)
        ks = ks[inQ[ks]]
        if len(ks) == 0:
            continue
        s = float(m.size[x])
        z = list(range(nvar, nvar + len(ks)))
        nvar += len(ks)
        var_lb += [0.0] * len(ks)
        var_ub += [1.0] * len(ks)
        integ += [1 if integral else 0] * len(ks)
        # a tie-break: of equal schedules, the one that moves the fewest bytes (reported
        # times are Σ d_j alone)
        cost += [eps * s] * len(ks)
        for k, zi in zip(ks.tolist(), z):
            mem_terms[k].append((zi, -s))
        pv = {}
        if not m.free_read[x]:
            # fetch in the segments from seg(k) to seg(b) (the segment holding S_b's start:
            # the fetch must end by S_b; rounded outward to whole segments)
            j0 = int(seg_of[ks[0]])
            j1 = int(seg_of[b - 1])
            for j in range(j0, j1 + 1):
                pv[j] = nvar
                var_lb.append(0.0)
                var_ub.append(1.0)
                integ.append(0)
                cost.append(0.0)
                fetch_terms[j].append((nvar, s))
                nvar += 1
            for k, zi in zip(ks.tolist(), z):
                for j in range(int(seg_of[k]), j1 + 1):
                    rows.append(r), cols.append(pv[j]), vals.append(1.0)
                rows.append(r), cols.append(zi), vals.append(-1.0)
                lo_b.append(0.0), hi_b.append(np.inf)
                r += 1
            if consistent:
                # a fraction counted resident at a later checkpoint was fetched in between:
                # z_l >= z_i - (fetched in [S_i, S_l)), for every pair i < l of the gap
                kl = ks.tolist()
                for i in range(len(kl)):
                    for li in range(i + 1, len(kl)):
                        for j in range(int(seg_of[kl[i]]), int(seg_of[kl[li]])):
                            rows.append(r), cols.append(pv[j]), vals.append(1.0)
                        rows.append(r), cols.append(z[li]), vals.append(1.0)
                        rows.append(r), cols.append(z[i]), vals.append(-1.0)
                        lo_b.append(0.0), hi_b.append(np.inf)
                        r += 1
        if ver >= 0 and not m.free_write[x]:
            for k, zi in zip(ks.tolist(), z):
                # written out in [S_ver, S_k]: segments seg(ver) .. seg(k − 1)
                for j in range(int(seg_of[ver]), int(seg_of[k - 1]) + 1):
                    key = (x, ver, j)
                    if key not in wvar:
                        wvar[key] = nvar
                        var_lb.append(0.0)
                        var_ub.append(1.0)
                        integ.append(0)
                        cost.append(0.0)
                        write_terms[j].append((nvar, s))
                        nvar += 1
                    rows.append(r), cols.append(wvar[key]), vals.append(1.0)
                rows.append(r), cols.append(zi), vals.append(-1.0)
                lo_b.append(0.0), hi_b.append(np.inf)
                r += 1
        sched.append((x, a, b, ks, z, pv))
    M = live_bytes(m)
    for k in Q.tolist():
        for zi, v in mem_terms[k]:
            rows.append(r), cols.append(zi), vals.append(v)
        lo_b.append(-np.inf), hi_b.append(m.capacity - M[k])
        r += 1
    for j in range(nseg):
        for terms, rate in ((fetch_terms[j], m.in_rate), (write_terms[j], m.out_rate)):
            if not terms:
                continue
            for vi, s in terms:
                rows.append(r), cols.append(vi), vals.append(s / rate)
            rows.append(r), cols.append(j), vals.append(-1.0)
            lo_b.append(-np.inf), hi_b.append(m.slack)
            r += 1
    for j in range(nseg):
        var_lb[j] = float(seg_c[j])
    A = coo_matrix((vals, (rows, cols)), shape=(r, nvar)).tocsr()
    opts = {"time_limit": float(time_limit), "presolve": True}
    if integral:
        opts["mip_rel_gap"] = float(mip_rel_gap)
    res = milp(np.asarray(cost), constraints=LinearConstraint(A, lo_b, hi_b) if r else None,
               bounds=Bounds(np.asarray(var_lb), np.asarray(var_ub)),
               integrality=np.asarray(integ) if integral else None, options=opts)
    secs = time.perf_counter() - t0
    if res.x is None:
        raise InputError(f"the {'MILP' if integral else 'LP'} found no solution ({res.message})",
                         param="bounds")
    out = LPResult(time=float(res.x[:nseg].sum()), status=int(res.status), optimal=res.status == 0,
                   mip_gap=getattr(res, "mip_gap", None) if integral else None, seconds=secs,
                   variables=nvar, checkpoints=Q,
                   dual_bound=getattr(res, "mip_dual_bound", None) if integral else None)
    if integral:
        x = res.x
        for (t, a, b, ks, z, pv) in sched:
            off = [int(k) for k, zi in zip(ks.tolist(), z) if x[zi] > 0.5]
            if not off:
                continue
            # the prefetch: at the first kernel it counts resident again (the engine takes
            # frames when a fetch starts, where the model counts them when it ends, so an
            # earlier prefetch evicts what the model keeps; measured, docs/bounds.md)
            fetch = max(off) + 1
            out.schedule.append({"tensor": int(t), "after": int(a), "next_use": int(b),
                                 "off": off, "fetch_kernel": fetch})
    return out


def lp_bound(m: BoundModel, checkpoints=None, *, time_limit: float = 60.0) -> LPResult:
    """The LP relaxation with the memory constraint kept at `checkpoints` (None: every kernel,
    the full LP of the fluid model). A lower bound on every schedule of the model."""
    return _solve(m, checkpoints, False, time_limit, 0.0)


def milp_optimum(m: BoundModel, *, time_limit: float = 60.0,
                 mip_rel_gap: float = 1e-6) -> LPResult:
    """The exact optimum of the fluid model (z binary, every kernel a checkpoint), for small
    workloads (K up to ~40). `optimal` False: the time limit stopped it, and `time` is the best
    schedule found (an upper value of the optimum), `dual_bound` a lower one."""
    return _solve(m, None, True, time_limit, mip_rel_gap, consistent=True)
