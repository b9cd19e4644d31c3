"""`page.batch._batch_move` (the ring's run of page moves with victims, DeepUM and the ring
LRU) against a plain-Python twin that moves the pages one by one, as the page loop does: on
random small rings (wrapping around), tombstones, stale and in-transfer entries, cursor and
scan positions anywhere between head and tail, arrivals that overlap the victims' tensor or
stop at a page elsewhere, victims that go back to a queue (a required tensor's). Every output
and both arrays must be the same, but for the runs of tombstones that the kernel records (-d
at a run's first slot)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from g10fast.engine.page import kernels as pk
from g10fast.jit import NO_JIT

G, LOC, TR, WAIT = pk.GEN_SHIFT, pk.LOC_MASK, pk.F_TRANSFER, pk.F_WAIT
RES = pk.RES_MASK


def _live(st, e):
    return (st & LOC) == pk.IN_GPU and (st >> G) == (e & pk.GEN_MASK)


def _eligible(st, e):
    return (st & RES) == pk.IN_GPU and (st >> G) == (e & pk.GEN_MASK)


def twin(
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
    tail,
    cur,
    scan,
    wait,
    vt_d,
):
    """The page loop's moves, one page at a time (the engine before runs were read in bulk);
    b_rq: the victims (of a required tensor) go in transfer and join the wait set, and the
    moves stop at a victim that does not follow the last one."""
    m = 0
    v0 = v_end = -1
    while m < nb:
        pp = p + m
        st0 = int(pstate[pp])
        if (st0 & LOC) != a_src:
            break
        if b_ev:
            s = scan if (deepum and not b_dnp) else cur
            s = max(s, hd)
            vst0, v = 0, -1
            while s < tail:
                e = int(lru[s & lm])
                if e >= 0:
                    vst0 = int(pstate[e >> G])
                    if b_dnp:
                        if _live(vst0, e):
                            v = e >> G
                            if v < b_lo or v >= b_hi or not b_win:
                                break
                    elif _eligible(vst0, e):
                        v = e >> G
                        break
                s += 1
            if s >= tail or v < b_lo or v >= b_hi:
                break
            if b_rq and v0 >= 0 and v != v_end:
                break
            lru[s & lm] = -1
            if not deepum or b_dnp:
                cur = s + 1
            else:
                scan = s
                if cur == s:
                    cur = s + 1
            if b_rq:
                if not vst0 & WAIT:
                    wait += 1
                pstate[v] = (vst0 & ~LOC) | b_dest | TR | WAIT
                v0 = v if v0 < 0 else v0
                v_end = v + 1
            else:
                pstate[v] = ((vst0 & ~LOC) | b_dest) & ~TR
            if (vst0 & RES) == pk.IN_GPU:
                vt_d -= 1
        if deepum:
            # the artifact's cursor is a list iterator: on a live page, or at END (where an
            # appended page stays behind it)
            while cur < tail and not (
                lru[cur & lm] >= 0 and _live(int(pstate[lru[cur & lm] >> G]), int(lru[cur & lm]))
            ):
                cur += 1
        st = (st0 & ~LOC) | pk.IN_GPU
        lru[tail & lm] = (pp << G) | (st >> G)
        if cur == tail:
            cur = tail + 1
        st &= ~TR
        if st & WAIT:
            st &= ~WAIT
            wait -= 1
        pstate[pp] = st
        tail += 1
        m += 1
    return m, tail, cur, scan, wait, vt_d, v0


@njit
def _call(
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
    tail,
    cur,
    scan,
    wait,
    vt_d,
):
    return pk._batch_move(
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
        tail,
        cur,
        scan,
        wait,
        vt_d,
    )


def _case(rng):
    lcap = int(rng.choice([16, 32, 64]))
    lm = lcap - 1
    V = 256
    pstate = np.zeros(V, np.uint8)
    a_src = int(rng.choice([pk.IN_SSD, pk.IN_CPU]))
    # the victims' tensor: pages 0..127, resident with a random generation
    b_lo, b_hi = 0, 128
    for q in range(V):
        pstate[q] = a_src | (int(rng.integers(16)) << G)
    hd = int(rng.integers(0, 4 * lcap))
    clean = rng.random() < 0.5  # long runs: no damage, room for many arrivals
    d = 0.0 if clean else 1.0
    fill = int(rng.integers(1, lcap // 2 if clean else lcap - 4))
    tail = hd + fill
    lru = np.full(lcap, -1, np.int64)
    page = int(rng.integers(b_lo, b_hi - fill)) if rng.random() < 0.8 else b_hi - fill
    for pos in range(hd, tail):
        r = rng.random()
        if r < 0.08 * d:
            continue  # a tombstone
        q = page if rng.random() >= 0.1 * d else int(rng.integers(b_lo, V))
        page += 1
        st = int(pstate[q]) if q >= b_hi else int(rng.integers(16)) << G
        st = (st & ~LOC) | pk.IN_GPU
        if rng.random() < 0.05 * d:
            st |= TR  # in transfer
        if rng.random() < 0.3:
            st |= WAIT
        pstate[q] = st
        gen = (st >> G) if rng.random() >= 0.05 * d else ((st >> G) + 1) & 15  # stale
        lru[pos & lm] = (q << G) | gen
    room = lcap - (tail - hd)
    nb = int(rng.integers(room // 2 if clean else 1, room + 1))
    # the arriving pages: after the victims' tensor, or overlapping it
    p = int(rng.integers(b_hi, V - nb + 1)) if rng.random() < 0.8 else int(rng.integers(0, V - nb + 1))
    for q in range(p, p + nb):
        if (int(pstate[q]) & LOC) == pk.IN_GPU:
            continue
        st = a_src if rng.random() >= 0.03 * d else pk.NOT_PRESENT
        pstate[q] = st | (int(pstate[q]) & ~LOC & ~TR) | (WAIT if rng.random() < 0.3 else 0)
    deepum = bool(rng.random() < 0.7)
    b_dnp = deepum and bool(rng.random() < 0.5)
    cur = int(rng.integers(hd, tail + 1))
    scan = int(rng.integers(hd - 2, tail + 1))
    return (
        p,
        nb,
        a_src,
        bool(rng.random() < 0.9),
        b_dnp,
        int(rng.choice([pk.IN_CPU, pk.IN_SSD, pk.NOT_PRESENT])),
        b_lo,
        b_hi,
        bool(rng.random() < 0.2),
        bool(rng.random() < 0.3),
        deepum,
        pstate,
        lru,
        lm,
        hd,
        tail,
        cur,
        scan,
        int(rng.integers(0, 50)),
        0,
    )


@pytest.mark.skipif(NO_JIT, reason="G10FAST_NO_JIT: nothing is compiled")
@pytest.mark.parametrize("seed", range(6))
def test_batch_move_matches_page_by_page(seed):
    rng = np.random.default_rng(seed)
    runs = rq_runs = 0
    for _ in range(400):
        args = _case(rng)
        a = list(args)
        b = list(args)
        a[11], a[12] = args[11].copy(), args[12].copy()
        b[11], b[12] = args[11].copy(), args[12].copy()
        got = _call(*a)
        want = twin(*b)
        assert tuple(int(x) for x in got) == want, (seed, args[:11], args[13:])
        assert np.array_equal(a[11], b[11])
        # the ring: the same entries, tombstones aside; a recorded run of d tombstones (-d)
        # covers d tombstones of the twin's ring, within one turn
        ring, ring_twin = a[12], b[12]
        assert np.array_equal(np.maximum(ring, -1), ring_twin)
        for x in np.flatnonzero(ring < -1):
            d = -int(ring[x])
            assert x + d <= len(ring) and (ring_twin[x : x + d] == -1).all()
        runs += got[0] >= 16
        rq_runs += args[9] and got[0] >= 16
    assert runs > 20  # long runs (the chunked read) were exercised
    assert rq_runs >= 2  # and with victims queued again
