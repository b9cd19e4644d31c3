"""Lazy page states (`page.LAZY_DEFAULT`; the bulk engine under the LRU policies): a tensor
that a pre-allocation hint queues whole while its states are all 0 keeps its bytes 0, read as
F_TRANSFER until its pages arrive in order and as IN_GPU after (`_lz_state`); written out
(`_lz_fix`) before any other hint or fault scan reads them; freed without a pass when wholly
resident with none of its pages come back. Its kernels against plain twins, and whole runs
against the written states and the per-page engine, every output compared."""

from __future__ import annotations

import numpy as np
import pytest
from synth import Collector, count_statistic, kernel_pages, make_workload, random_hints, tiny_cfg
from test_extent_lru import _listed, _state
from test_page_bulk import _same_events

from g10fast.engine import page
from g10fast.engine.page import kernels as pk
from g10fast.engine.page import simulate_pages
from g10fast.engine.page.check import InvariantError, _lazy_broken


def _twin_state(byte, lazy, la, ld, p):
    """`_lz_state` in plain Python."""
    if byte == 0 and lazy and p >= ld:
        return pk.IN_GPU if p < la else pk.F_TRANSFER
    return byte


def _lazy_tensor(rng, p0=5, n=60):
    """One tensor (pages p0 .. p0 + n - 1 of 80) whose states are lazy with random boundaries
    (pages below TT_LD dropped, from it to TT_LA arrived, the rest queued); some arrived pages
    left the GPU or came back (their bytes written)."""
    tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
    tt[0, pk.TT_START], tt[0, pk.TT_NP] = p0, n
    la = p0 + int(rng.integers(0, n + 1))
    ld = p0 + int(rng.integers(0, la - p0 + 1)) if rng.random() < 0.5 else p0
    tt[0, pk.TT_LZ], tt[0, pk.TT_LA], tt[0, pk.TT_LD] = 1, la, ld
    pstate = np.zeros(80, dtype=np.uint8)
    pstate[:p0] = pk.IN_SSD  # (a neighbour's, left alone)
    written = rng.random(la - ld) < 0.3
    kinds = [pk.IN_SSD, pk.IN_CPU, pk.IN_GPU, pk.IN_SSD | pk.F_TRANSFER]
    pstate[ld:la][written] = rng.choice(kinds, written.sum())
    tt[0, pk.TT_RES] = int((pstate[ld:la] == 0).sum() + (pstate[ld:la] == pk.IN_GPU).sum())
    return tt, pstate, la, ld


def test_lz_state_reads_a_lazy_byte_by_the_boundary():
    rng = np.random.default_rng(1)
    for _ in range(50):
        tt, pstate, la, ld = _lazy_tensor(rng)
        for lazy in (0, 1, 2):
            tt[0, pk.TT_LZ] = lazy
            for p in range(5, 65):
                want = _twin_state(int(pstate[p]), lazy, la, ld, p)
                assert pk._lz_state(pstate, tt, 0, p) == want, (lazy, p)


@pytest.mark.parametrize("seed", range(20))
def test_lz_fix_writes_what_the_states_stand_for(seed):
    """`_lz_fix` leaves each byte as `_lz_state` reads it (the neighbours' untouched) and the
    tensor's states no longer lazy; with no page written (TT_LZ 1, all arrived resident) by
    two fills, else page by page: both give the same states."""
    rng = np.random.default_rng(seed)
    tt, pstate, la, ld = _lazy_tensor(rng)
    if seed % 2:
        pstate[5:65] = 0  # none written: the fills
        tt[0, pk.TT_RES] = la - ld
    else:
        tt[0, pk.TT_LZ] = 2
    want = np.array([_twin_state(int(pstate[p]), True, la, ld, p) for p in range(80)], dtype=np.uint8)
    want[:5] = pstate[:5]
    want[65:] = pstate[65:]
    S = np.zeros(pk.NS, dtype=np.int64)  # (P_RELEASE 0: no memory mapped)
    pk._lz_fix(pstate, tt, S, 0, seed % 4 < 2)  # (TT_RES exact or not: the same states)
    assert np.array_equal(pstate, want)
    assert tt[0, pk.TT_LZ] == 0 and S[pk.S_LZ_FIX] == 1
    pk._lz_fix(pstate, tt, S, 0, True)  # (not lazy any more: nothing)
    assert np.array_equal(pstate, want) and S[pk.S_LZ_FIX] == 1


def test_x_arrive_counts_lazy_arrivals_in_order():
    """Pages of a lazy tensor arriving from its boundary on move the boundary and leave their
    bytes 0, in the wait set none; a page that left and comes back is written (IN_GPU, its
    wait bit counted) and marks the tensor (TT_LZ 2); either way the list holds them in
    arrival order. A tensor not lazy is written as before."""
    tt, S, lru, pstate = _state([20, 10], 64)
    tt[0, pk.TT_LZ], tt[0, pk.TT_LA], tt[0, pk.TT_LD] = 1, 0, 0
    wait = pk._x_arrive(lru, S, tt, pstate, 0, 0, 6, 5)
    assert wait == 5 and tt[0, pk.TT_LA] == 6 and not pstate.any()
    wait = pk._x_arrive(lru, S, tt, pstate, 0, 6, 4, wait)
    assert tt[0, pk.TT_LA] == 10 and not pstate.any() and tt[0, pk.TT_LZ] == 1
    # page 3 left (evicted, queued again: in transfer, in the wait set) and comes back
    pk._x_remove(lru, S, tt, 0, 3, 4)
    pstate[3] = pk.IN_SSD | pk.F_TRANSFER | pk.F_WAIT
    wait = pk._x_arrive(lru, S, tt, pstate, 0, 3, 1, wait)
    assert wait == 4 and pstate[3] == pk.IN_GPU and tt[0, pk.TT_LZ] == 2 and tt[0, pk.TT_LA] == 10
    assert S[pk.S_LZ_BACK] == 1
    wait = pk._x_arrive(lru, S, tt, pstate, 1, 20, 3, wait)  # (not lazy)
    assert list(pstate[20:23]) == [pk.IN_GPU] * 3 and tt[1, pk.TT_LZ] == 0
    assert _listed(lru, S) == [0, 1, 2, 4, 5, 6, 7, 8, 9, 3, 20, 21, 22]


def _twin_canon(pstate, p, n, loc):
    """`_rp_canon` in plain Python: how many of pages p, p+1, ... (at most n) lie at loc."""
    j = 0
    while j < n and int(pstate[p + j]) & pk.LOC_MASK == loc:
        j += 1
    return j


def test_rp_canon_t_reads_no_queued_lazy_state():
    """`_rp_canon_t` counts the pages at a place as a read of their states does (`_rp_canon`,
    its plain twin), past the tensor's end into the next one's states too; of a lazy tensor
    with no page come back (TT_LZ 1) it reads none of the queued pages' states (from TT_LA
    on): a byte written there, which the engine never leaves, is not seen."""
    rng = np.random.default_rng(3)
    kinds = [0, pk.IN_SSD, pk.IN_CPU, pk.IN_GPU, pk.F_TRANSFER | pk.IN_CPU]
    for _ in range(60):
        tt, pstate, la, ld = _lazy_tensor(rng)
        pstate[65:] = rng.choice(kinds, 15) if rng.random() < 0.5 else 0  # (the next tensor's)
        for lazy in (0, 1, 2):
            tt[0, pk.TT_LZ] = lazy
            for _ in range(20):
                p = int(rng.integers(5, 65))
                n = int(rng.integers(1, 81 - p))
                loc = int(rng.integers(0, 4))
                want = _twin_canon(pstate, p, n, loc)
                assert pk._rp_canon_t(pstate, tt, 0, p, n, loc) == want, (lazy, p, n, loc)
    tt, pstate, la, ld = _lazy_tensor(np.random.default_rng(4), n=60)
    pstate[5:65] = 0
    tt[0, pk.TT_LA], tt[0, pk.TT_LD] = la, _ = 30, 5
    pstate[40] = pk.IN_CPU  # (never so in a run: a queued page's byte of a lazy tensor)
    assert _twin_canon(pstate, la, 30, 0) == 10
    assert pk._rp_canon_t(pstate, tt, 0, la, 30, 0) == 30
    assert pk._rp_canon_t(pstate, tt, 0, la, 30, pk.IN_CPU) == 0
    tt[0, pk.TT_LZ] = 2  # (a page came back: read)
    assert pk._rp_canon_t(pstate, tt, 0, la, 30, 0) == 10


def test_checker_finds_a_broken_lazy_state():
    tt = np.zeros((2, pk.TT_COLS), dtype=np.int64)
    tt[:, pk.TT_START] = [0, 10]
    tt[:, pk.TT_NP] = [10, 10]
    tt[1, pk.TT_LZ], tt[1, pk.TT_LA], tt[1, pk.TT_LD] = 1, 14, 11
    pstate = np.zeros(20, dtype=np.uint8)
    pstate[11:14] = pk.IN_SSD  # (arrived pages that left)
    assert _lazy_broken(tt, pstate) == -1
    pstate[17] = pk.F_TRANSFER  # a page not arrived, written
    assert _lazy_broken(tt, pstate) == 1
    pstate[17] = 0
    pstate[10] = pk.IN_CPU  # a page dropped, written
    assert _lazy_broken(tt, pstate) == 1
    pstate[10] = 0
    for la, ld in ((21, 11), (14, 15), (14, 9)):  # boundaries out of order
        tt[1, pk.TT_LA], tt[1, pk.TT_LD] = la, ld
        assert _lazy_broken(tt, pstate) == 1, (la, ld)


def test_lz_drop_moves_the_drop_boundary_in_order():
    """`_lz_drop`: pages dropped from TT_LD on (arrived ones) move it and write nothing; the
    last ones make the states known 0 (TT_Z); a drop elsewhere, or of a tensor with a page
    that came back (TT_LZ 2), writes the states out first and leaves the write to the caller."""
    tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
    tt[0, pk.TT_START], tt[0, pk.TT_NP] = 4, 12
    tt[0, pk.TT_LZ], tt[0, pk.TT_LA], tt[0, pk.TT_LD] = 1, 16, 4
    pstate = np.zeros(20, dtype=np.uint8)
    S = np.zeros(pk.NS, dtype=np.int64)
    assert pk._lz_drop(pstate, tt, S, 0, 4, 5) and tt[0, pk.TT_LD] == 9 and not pstate.any()
    assert pk._lz_drop(pstate, tt, S, 0, 9, 7) and tt[0, pk.TT_LZ] == 0 and tt[0, pk.TT_Z] == 1
    assert not pstate.any() and S[pk.S_LZ_DROP] == 2 and S[pk.S_LZ_FIX] == 0
    assert not pk._lz_drop(pstate, tt, S, 0, 4, 1)  # (not lazy: the caller writes)
    for lz, lo in ((1, 6), (2, 4)):
        tt[0, pk.TT_LZ], tt[0, pk.TT_LA], tt[0, pk.TT_LD], tt[0, pk.TT_Z] = lz, 12, 4, 0
        pstate[:] = 0
        assert not pk._lz_drop(pstate, tt, S, 0, lo, 2)
        assert tt[0, pk.TT_LZ] == 0 and tt[0, pk.TT_LD] == 4
        assert list(pstate[4:16]) == [pk.IN_GPU] * 8 + [pk.F_TRANSFER] * 4


def _case(seed, policy="prefetch_lru"):
    """A random workload, G10's policy (or DeepUM's, without pre-evictions: on extents) with
    random hints (pre-allocations of unused tensors among them), a GPU from just its largest
    kernel to twice it, the host from none up."""
    rng = np.random.default_rng(7000 + seed)
    big = seed % 3 == 2
    w = make_workload(
        seed,
        n_kernels=int(rng.integers(6, 20)),
        n_tensors=int(rng.integers(10, 40)),
        max_pages=int(rng.integers(100, 300) if big else rng.integers(4, 60)),
    )
    need = int(kernel_pages(w).max())
    frames = int(need * (rng.uniform(1.0, 1.1) if big else rng.uniform(1.0, 2.0))) + 1
    host = int(rng.choice([0, frames // 3, frames, 10 * frames]))
    kw = {"num_iteration": int(rng.integers(2, 5))}
    if big or rng.random() < 0.4:
        kw["PCIe_batch_size_page"] = int(rng.integers(3, 64))
    if policy == "deepUM":
        kw["prefetch_degree"] = int(rng.integers(0, 5))
    cfg = tiny_cfg(frames, host, policy, **kw)
    hints = random_hints(w, seed, n_hints=int(rng.integers(20, 80)))
    if seed % 2:
        hints = sorted(hints + _lifetime_hints(w, rng), key=lambda h: h[0])
    if policy == "deepUM":
        hints = [h for h in hints if h[3] not in (pk.IN_SSD, pk.IN_CPU)]
    return w, cfg, hints


def _lifetime_hints(w, rng):
    """G10's usual pair for most tensors that are not global: allocated a kernel or two
    before their first use (NOT_KNOWN -> IN_GPU), freed after their last (-> NOT_PRESENT)."""
    K = w.num_kernels
    first, last = {}, {}
    for k in range(K):
        for T in list(w.inputs(k)) + list(w.outputs(k)):
            first.setdefault(int(T), k)
            last[int(T)] = k
    out = []
    for T, f in first.items():
        if not w.is_global[T] and rng.random() < 0.8:
            out.append((max(f - int(rng.integers(1, 3)), 0), T, pk.NOT_KNOWN, pk.IN_GPU))
            if last[T] + 1 < K:
                out.append((last[T] + 1, T, pk.NOT_KNOWN, pk.NOT_PRESENT))
    return out


def _run(w, cfg, hints, traced, **kw):
    ev = Collector() if traced else None
    try:
        r = simulate_pages(w, cfg, hints=hints, trace=ev, keep_state=True, **kw)
    except Exception as e:  # an error is an outcome too
        return {"error": f"{type(e).__name__}: {e}"}
    out = {k: getattr(r, k) for k in ("kernels", "pcie", "boundaries", "pstate", "extra")}
    out.update(used=(r.gpu_used, r.host_used, r.host_peak), live=r.live_page_evictions, amp=r.amplification)
    if traced:
        out["events"] = ev.events
    return out


def _same(a, b, what):
    assert a.keys() == b.keys(), what
    for key in a:
        if key == "events":  # (per page: the engines group a tick's pages in rows their own way)
            assert _same_events(a[key], b[key]), (what, key)
        elif isinstance(a[key], np.ndarray):
            assert a[key].shape == b[key].shape and np.array_equal(a[key], b[key]), (what, key)
        else:
            assert a[key] == b[key], (what, key)


@pytest.mark.parametrize("policy", ["prefetch_lru", "deepUM"])
def test_lazy_states_equal_written_states(monkeypatch, policy):
    """40 random runs under G10's policy and under DeepUM's (half with allocate-and-free hints
    around each tensor's lifetime): with lazy states every output (kernels, traffic, transfer periods,
    memory use, the final page states, the event trace of the traced ones) is the same as
    with every state written, and the same as the per-page engine's; across them the lazy
    paths all run: tensors freed lazily, written out, pages of lazy tensors that left and came
    back, and (DeepUM) dropped in order."""
    fixed, freed, back, dropped = [0], [0], [0], [0]
    count_statistic(monkeypatch, pk.S_LZ_FIX, fixed)
    count_statistic(monkeypatch, pk.S_LZ_FREE, freed)
    count_statistic(monkeypatch, pk.S_LZ_BACK, back)
    count_statistic(monkeypatch, pk.S_LZ_DROP, dropped)
    for seed in range(40):
        w, cfg, hints = _case(seed, policy)
        traced = seed % 4 == 0
        monkeypatch.setattr(page, "LAZY_DEFAULT", True)
        lazy = _run(w, cfg, hints, traced)
        monkeypatch.setattr(page, "LAZY_DEFAULT", False)
        written = _run(w, cfg, hints, traced)
        _same(lazy, written, seed)
        if seed % 5 == 0:
            ref = _run(w, cfg, hints, traced, bulk=False)
            for r in (ref, lazy):  # (the per-page engine's ring keeps generations in bits 4-7)
                if "pstate" in r:
                    r["pstate"] = r["pstate"] & 15
            _same(lazy, ref, (seed, "per-page"))
    # (measured, G10: 846 written out, 137 freed lazily, 1,772 arrivals of pages that came back;
    # DeepUM: 595, 220, 1,645, and 2,133 runs of pages dropped without a write)
    want = (400, 60, 500, -1) if policy == "prefetch_lru" else (300, 100, 800, 1000)
    assert all(x[0] > y for x, y in zip((fixed, freed, back, dropped), want)), (fixed, freed, back, dropped)


_CHECKED = [(2, "prefetch_lru"), (5, "prefetch_lru"), (8, "prefetch_lru"), (3, "deepUM")]


@pytest.mark.parametrize("seed,policy", _CHECKED)
def test_lazy_states_pass_the_invariant_check(monkeypatch, seed, policy):
    """`check=True` on runs with lazy states: every scan passes (the lazy states checked, then
    read as the engine reads them), and a lazy state broken by hand fails the run."""
    w, cfg, hints = _case(seed, policy)
    monkeypatch.setattr(page, "LAZY_DEFAULT", True)
    simulate_pages(w, cfg, hints=hints, check=True)
    engine = pk.run_engine

    def breaking(*a):
        status = engine(*a)
        tt, pstate = a[3], a[5]
        for T in np.nonzero(tt[:, pk.TT_LZ])[0]:
            end = tt[T, pk.TT_START] + tt[T, pk.TT_NP]
            if tt[T, pk.TT_LA] < end:
                pstate[end - 1] = pk.IN_CPU
                break
        return status

    monkeypatch.setattr(pk, "run_engine", breaking)
    with pytest.raises(InvariantError, match="lazy states"):
        simulate_pages(w, cfg, hints=hints, check=True)
