"""Numba kernels of the offset-level allocators (plain arrays; `g10fast.alloc.allocators` validates
and wraps them). Each kernel walks the malloc/free events in order:

    is_free bool[E], blk int64[E] (block id), bsize int64[B] (requested bytes)

and writes the offset of every block (`off`, -1 = never placed), the live and reserved bytes after
every event, and on failure `fail` = [event, block, bytes asked, free bytes, free pieces, largest
free piece] with return value 1.
"""

from __future__ import annotations

import numpy as np

from g10fast.alloc import free_runs as fr
from g10fast.jit import cache_depends_on, kernel

_kernel = kernel


@_kernel
def _remove(fs, fl, fh, nf, i):
    for q in range(i, nf - 1):
        fs[q] = fs[q + 1]
        fl[q] = fl[q + 1]
        fh[q] = fh[q + 1]
    return nf - 1


@_kernel
def cnmem(is_free, blk, bsize, gran, init, cap, release_on_oom, off, live, resv, fail):
    """NVIDIA CNMeM as SINGA's CnMemPool uses it (seed-policies §2.2): sizes rounded up to `gran`;
    free list sorted by address; best fit (smallest free block >= size, ties: lowest address);
    the allocated part at the front of the block; frees merge with address neighbours of the
    same head only; no fit: a new head of exactly the request (cudaMalloc). `init` > 0: one head
    of that size first. `cap` >= 0: growth past it releases wholly free heads first when
    `release_on_oom`, then fails."""
    E = is_free.shape[0]
    B = bsize.shape[0]
    M = B + 4
    fs = np.zeros(M, np.int64)
    fl = np.zeros(M, np.int64)
    fh = np.zeros(M, np.int64)
    hs = np.zeros(B + 2, np.int64)
    hl = np.zeros(B + 2, np.int64)
    head = np.full(B, -1, np.int64)
    nf = 0
    nh = 0
    top = 0
    reserved = 0
    cur = 0
    if init > 0:
        hs[0] = 0
        hl[0] = init
        nh = 1
        top = init
        reserved = init
        fs[0] = 0
        fl[0] = init
        fh[0] = 0
        nf = 1
    for e in range(E):
        b = blk[e]
        r = (bsize[b] + gran - 1) // gran * gran
        if r < gran:
            r = gran
        if not is_free[e]:
            best = -1
            for i in range(nf):
                if fl[i] >= r and (best < 0 or fl[i] < fl[best]):
                    best = i
            if best < 0:
                if cap >= 0 and reserved + r > cap and release_on_oom:
                    i = 0
                    while i < nf:
                        h = fh[i]
                        if fs[i] == hs[h] and fl[i] == hl[h]:
                            reserved -= hl[h]
                            hl[h] = 0
                            nf = _remove(fs, fl, fh, nf, i)
                        else:
                            i += 1
                if cap >= 0 and reserved + r > cap:
                    tot = 0
                    big = 0
                    for i in range(nf):
                        tot += fl[i]
                        if fl[i] > big:
                            big = fl[i]
                    pieces = nf
                    if cap - reserved > 0:
                        tot += cap - reserved
                        pieces += 1
                        if cap - reserved > big:
                            big = cap - reserved
                    fail[0] = e
                    fail[1] = b
                    fail[2] = r
                    fail[3] = tot
                    fail[4] = pieces
                    fail[5] = big
                    return 1
                hs[nh] = top
                hl[nh] = r
                off[b] = top
                head[b] = nh
                nh += 1
                top += r
                reserved += r
            else:
                off[b] = fs[best]
                head[b] = fh[best]
                fs[best] += r
                fl[best] -= r
                if fl[best] == 0:
                    nf = _remove(fs, fl, fh, nf, best)
            cur += bsize[b]
        else:
            s = off[b]
            h = head[b]
            pos = np.searchsorted(fs[:nf], s)  # insertion point: first free block after s
            merged = False
            if pos > 0 and fh[pos - 1] == h and fs[pos - 1] + fl[pos - 1] == s:
                fl[pos - 1] += r
                merged = True
                if pos < nf and fh[pos] == h and fs[pos] == s + r:
                    fl[pos - 1] += fl[pos]
                    nf = _remove(fs, fl, fh, nf, pos)
            elif pos < nf and fh[pos] == h and fs[pos] == s + r:
                fs[pos] = s
                fl[pos] += r
                merged = True
            if not merged:
                for q in range(nf, pos, -1):
                    fs[q] = fs[q - 1]
                    fl[q] = fl[q - 1]
                    fh[q] = fh[q - 1]
                fs[pos] = s
                fl[pos] = r
                fh[pos] = h
                nf += 1
            cur -= bsize[b]
        live[e] = cur
        resv[e] = reserved
    return 0


@_kernel
def bump(is_free, blk, bsize, right, gran, cap, off, live, resv, fail):
    """FlashNeuron's allocator of the tensor engine (`free_runs.alloc_left/alloc_right`):
    free runs of `gran`-byte units; first fit from the left, or from the right for blocks with
    `right[b]`; frees merge with neighbours. Reserved: the capacity less the free run that
    reaches the top (all-left), or less the largest free run (with right blocks)."""
    E = is_free.shape[0]
    B = bsize.shape[0]
    capu = cap // gran
    run_s = np.zeros(B + 4, np.int64)
    run_l = np.zeros(B + 4, np.int64)
    cnt = np.zeros(fr.C_NRUNS + 1, np.int64)
    run_s[0] = 0
    run_l[0] = capu
    cnt[fr.C_NRUNS] = 1
    any_right = False
    for b in range(B):
        if right[b]:
            any_right = True
    cur = 0
    for e in range(E):
        b = blk[e]
        n = (bsize[b] + gran - 1) // gran
        if n < 1:
            n = 1
        if not is_free[e]:
            s = fr.alloc_right(run_s, run_l, cnt, n) if right[b] else fr.alloc_left(run_s, run_l, cnt, n)
            if s < 0:
                tot = 0
                big = 0
                for q in range(cnt[fr.C_NRUNS]):
                    tot += run_l[q]
                    if run_l[q] > big:
                        big = run_l[q]
                fail[0] = e
                fail[1] = b
                fail[2] = n * gran
                fail[3] = tot * gran
                fail[4] = cnt[fr.C_NRUNS]
                fail[5] = big * gran
                return 1
            off[b] = s * gran
            cur += bsize[b]
        else:
            if not fr.free_run(run_s, run_l, cnt, off[b] // gran, n):
                fail[0] = e
                fail[1] = b
                return 2
            cur -= bsize[b]
        live[e] = cur
        nr = cnt[fr.C_NRUNS]
        if any_right:
            big = 0
            for q in range(nr):
                if run_l[q] > big:
                    big = run_l[q]
            resv[e] = (capu - big) * gran
        elif nr > 0 and run_s[nr - 1] + run_l[nr - 1] == capu:
            resv[e] = run_s[nr - 1] * gran
        else:
            resv[e] = capu * gran
    return 0


@_kernel
def colour(order, r, d, size, ci, method_ff, int32_bug, ci_backup, off):
    """SINGA's offline interval colouring (SmartMemPool::AssignColorToVertices, seed-policies
    §2.2). Vertices are coloured in `order` (size descending, then r ascending); the
    cross-iteration ones (ci) first from offset 0, then the others from `local_offset` =
    2·(extent of the cross-iteration ones) with `ci_backup`, else 1·; as in SINGA's Plan, the two
    groups are coloured by separate calls and see only their own group's ranges. Intervals
    [r, d) are half-open; two conflict iff max(r) < min(d). Returns the pool size (SINGA's final
    `offset`: the max end, at least the local offset of the normal blocks)."""
    V = order.shape[0]
    fs = np.zeros(V + 1, np.int64)
    se = np.zeros(V + 1, np.int64)
    idx = np.zeros(V + 1, np.int64)
    # all vertices in r order (static), with their d, a coloured flag, offset and size
    byr = np.argsort(r, kind="mergesort")
    sr = np.empty(V, np.int64)
    sd = np.empty(V, np.int64)
    pos_of = np.empty(V, np.int64)
    for q in range(V):
        sr[q] = r[byr[q]]
        sd[q] = d[byr[q]]
        pos_of[byr[q]] = q
    sdone = np.zeros(V, np.bool_)
    so = np.zeros(V, np.int64)
    ss = np.zeros(V, np.int64)
    pool = 0
    off_ci = 0
    local = 0
    for phase in range(2):
        if phase == 1:  # each group sees only its own ranges
            for q in range(V):
                sdone[q] = False
            local = 2 * off_ci if ci_backup else off_ci
            if local > pool:
                pool = local
        for oi in range(V):
            v = order[oi]
            if (ci[v] != 0) != (phase == 0):
                continue
            # coloured conflicting ranges, inclusive [y, y + size - 1]: r[u] < d[v], r[v] < d[u]
            lo = np.searchsorted(sr[:V], d[v])
            n = 0
            rv = r[v]
            for q in range(lo):
                if sdone[q] and rv < sd[q]:
                    fs[n] = so[q]
                    se[n] = so[q] + ss[q] - 1
                    n += 1
            s = size[v]
            if n == 0:
                y = local
            else:
                o = np.argsort(fs[:n])
                for q in range(n):
                    idx[q] = o[q]
                mf = np.zeros(n, np.int64)
                ms = np.zeros(n, np.int64)
                m = 0
                mf[0] = fs[idx[0]]
                ms[0] = se[idx[0]]
                for q in range(1, n):
                    a = fs[idx[q]]
                    bq = se[idx[q]]
                    if ms[m] + 2 > a:
                        if bq > ms[m]:
                            ms[m] = bq
                    else:
                        m += 1
                        mf[m] = a
                        ms[m] = bq
                m += 1
                if int32_bug:
                    for q in range(m):
                        mf[q] = ((mf[q] + 2147483648) % 4294967296) - 2147483648
                        ms[q] = ((ms[q] + 2147483648) % 4294967296) - 2147483648
                if m == 1:
                    if s + local < mf[0] + 1:
                        y = local
                    else:
                        y = ms[0] + 1
                elif method_ff:
                    if s + local < mf[0] + 1:
                        y = local
                    else:
                        y = ms[m - 1] + 1
                        for q in range(m - 1):
                            if mf[q + 1] - ms[q] - 1 >= s:
                                y = ms[q] + 1
                                break
                else:
                    best = -1
                    bgap = 0
                    for q in range(m - 1):
                        gap = mf[q + 1] - ms[q] - 1
                        if gap >= s and (best < 0 or gap < bgap):
                            best = q
                            bgap = gap
                    y = ms[best] + 1 if best >= 0 else ms[m - 1] + 1
            off[v] = y
            q = pos_of[v]
            sdone[q] = True
            so[q] = y
            ss[q] = s
            if y + s > pool:
                pool = y + s
            if phase == 0 and y + s > off_ci:
                off_ci = y + s
    return pool


# bump's on-disk cache holds the free-run kernels' code: stale when their file changes too
# (g10fast.jit)
cache_depends_on(bump, [fr])
