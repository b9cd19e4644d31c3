"""Iteration (period) detection on an allocation trace, in the malloc/free op space.

    detect_period(trace, method="singa" | "match", ...) -> Period

`singa` is SmartMemPool's test (seed-policies §2.2): each op is encoded as a number (a normal
block's malloc: its size; its free: d − r; a cross-iteration block's malloc: its size), and a
brute force over (start i, length L) keeps the longest L for which rep[i : i+L−1] equals
rep[i+L : i+2L−1] — L−1 elements, the C++'s off-by-one (`singa_off_by_one`) — then re-tests the
winner on itself to cut several iterations (accepted when the inner length is > 50), and
accepts L > 100. It runs, like SINGA, on the first 300 ops, then 600, 1200, ... until it
succeeds (`cadence`). Exact equality: one perturbed op breaks it.

`match` [ours, the robust alternative]: encode each op as (kind, size) and take the smallest
shift P ≥ `min_period` at which at least `threshold` of the ops equal the op P later (with
three or more whole periods of comparison, the first — warm-up — and the tail after the last
whole one — tear-down — are left out of the count); the
iteration starts after the lowest point of the live-bytes curve within the first period
(iterations end at the load trough). Insensitive to a few inserted, dropped or resized ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from g10fast.jit import kernel

from g10fast.alloc.trace import FREE, AllocTrace
from g10fast.errors import InputError

METHODS = ("singa", "match")


@dataclass(frozen=True)
class Period:
    method: str
    found: bool
    length: int  # ops (malloc/free) per iteration
    start: int  # malloc/free op index where a full iteration starts
    score: float = 1.0  # match: fraction of ops equal one period later
    checked_ops: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def singa_encoding(is_free: np.ndarray, blk: np.ndarray, bsize: np.ndarray) -> np.ndarray:
    """SINGA's `vec_rep` of a malloc/free window: per op, size (malloc) or d − r (free); a free
    whose malloc is outside the window is skipped (-1 there, dropped)."""
    E = len(blk)
    B = len(bsize)
    r = np.full(B, -1, np.int64)
    m = ~is_free
    r[blk[m]] = np.nonzero(m)[0]
    rep = np.where(m, bsize[blk], 0).astype(np.int64)
    fi = np.nonzero(is_free)[0]
    rr = r[blk[fi]]
    rep[fi] = np.where(rr >= 0, fi - rr, -1)
    keep = np.ones(E, bool)
    keep[fi[rr < 0]] = False
    return rep[keep]


@kernel
def _repeat_test(rep, n, off_by_one):
    """PoolRepeatableTest: the longest len with rep[i:i+len-c] == rep[i+len:i+2len-c]."""
    best_len = 0
    best_i = 0
    c = 1 if off_by_one else 0
    for i in range(n):
        for ln in range(best_len + 1, n - i):
            if i + 2 * ln - c > n:
                break
            ok = True
            for q in range(ln - c):
                if rep[i + q] != rep[i + ln + q]:
                    ok = False
                    break
            if ok:
                best_len = ln
                best_i = i
    return best_len, best_i


def _singa(is_free, blk, bsize, off_by_one=True, cadence=300, accept=100, verify=50, max_ops=None) -> Period:
    E = len(blk)
    limit = E if max_ops is None else min(E, max_ops)
    n = min(cadence, limit)
    while True:
        rep = singa_encoding(is_free[:n], blk[:n], bsize)
        L, loc = _repeat_test(rep, len(rep), off_by_one)
        if L > 0:
            sub = rep[loc : loc + L]
            L2, loc2 = _repeat_test(sub, len(sub), off_by_one)
            if L2 > verify:
                L, loc = L2, loc + loc2
        if L > accept:
            # back to op indices: rep drops the frees of blocks malloc'd before the window
            kept = np.ones(n, bool)
            m = np.zeros(len(bsize), bool)
            for j in range(n):
                b = blk[j]
                if not is_free[j]:
                    m[b] = True
                elif not m[b]:
                    kept[j] = False
            idx = np.nonzero(kept)[0]
            return Period("singa", True, int(L), int(idx[loc]), 1.0, n)
        if n >= limit:
            return Period("singa", False, 0, 0, 0.0, n)
        n = min(2 * n, limit)


@kernel
def _match(tok, min_p, max_p, threshold):
    n = tok.shape[0]
    best_p = -1
    best_s = 0.0
    for p in range(min_p, max_p + 1):
        # whole windows of p ops of the comparison; with three or more, the first (warm-up:
        # weights, workspaces) and the rest after the last whole one (tear-down) are left out
        nw = (n - p) // p
        j0 = p if nw >= 3 else 0
        m = (nw - 1) * p if nw >= 3 else n - p
        if m <= 0:
            break
        need = threshold * m
        miss_max = m - need
        miss = 0
        for j in range(j0, j0 + m):
            if tok[j] != tok[j + p]:
                miss += 1
                if miss > miss_max:
                    break
        s = (m - miss) / m
        if s >= threshold:
            return p, s
        if s > best_s:
            best_s = s
            best_p = p
    return -best_p - 2, best_s


def _match_period(trace, is_free, blk, bsize, op, min_period=50, threshold=0.9) -> Period:
    E = len(blk)
    tok = bsize[blk] * 2 + is_free.astype(np.int64)
    max_p = E // 2
    if max_p < min_period:
        return Period("match", False, 0, 0, 0.0, E)
    p, s = _match(tok, min_period, max_p, threshold)
    if p < 0:
        return Period("match", False, 0, 0, float(s), E)
    live = np.cumsum(np.where(is_free, -bsize[blk], bsize[blk]))
    # the first full iteration starts right after the load's lowest point in [0, P) of the
    # second period (the first may hold warm-up allocations)
    a = min(p, E - p)
    seg = live[a : a + p] if a + p <= E else live[:p]
    start = (a if a + p <= E else 0) + int(np.argmin(seg)) + 1
    start = start % p if start >= p else start
    return Period("match", True, int(p), int(start), float(s), E)


def detect_period(
    trace: AllocTrace,
    method: str = "match",
    *,
    min_period: int = 50,
    threshold: float = 0.9,
    singa_off_by_one: bool = True,
    cadence: int = 300,
    accept: int = 100,
    verify: int = 50,
    max_ops: int | None = None,
) -> Period:
    """The iteration length and start of a trace, in malloc/free op indices."""
    if method not in METHODS:
        raise InputError(
            f"unknown period method {method!r} (one of {', '.join(METHODS)})", param="period.method"
        )
    if not 0 < threshold <= 1:
        raise InputError(f"must be in (0, 1], got {threshold}", param="period.threshold")
    if min_period < 1 or cadence < 2:
        raise InputError("min_period must be >= 1 and cadence >= 2", param="period")
    op, is_free, blk = trace.alloc_ops()
    bsize = trace.block_sizes()
    blk = blk.astype(np.int64)
    if method == "singa":
        return _singa(is_free, blk, bsize, singa_off_by_one, cadence, accept, verify, max_ops)
    return _match_period(trace, is_free, blk, bsize, op, min_period, threshold)


__all__ = ["FREE", "METHODS", "Period", "detect_period", "singa_encoding"]
