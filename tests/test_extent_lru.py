"""The extent LRU of the page engine (page.lru, "The LRU list as extents"; the bulk engine
under the LRU policies): its kernels against a plain-Python list of pages, its invariant
check (`page.check.extent_lru_problem`) on engine runs and on broken states, and its growth."""

from __future__ import annotations

import numpy as np
import pytest
from synth import kernel_pages, make_workload, random_hints, tiny_cfg

from g10fast.engine.page import kernels as pk
from g10fast.engine.page import _extent_records, simulate_pages
from g10fast.engine.page.check import extent_lru_problem


def _state(sizes, n_records):
    """An empty extent list over tensors of the given page counts, laid out back to back."""
    T = len(sizes)
    tt = np.zeros((T, pk.TT_COLS), dtype=np.int64)
    tt[:, pk.TT_START] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    tt[:, pk.TT_NP] = sizes
    tt[:, pk.TT_XH] = -1
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.S_X_HEAD] = -1
    S[pk.S_X_TAIL] = -1
    lru = _extent_records(n_records, S)
    pstate = np.full(int(np.sum(sizes)), pk.NOT_PRESENT, dtype=np.uint8)
    return tt, S, lru, pstate


def _listed(lru, S):
    """The list's pages in order (walking the records)."""
    rec = lru.reshape(-1, pk.XW)
    out, i = [], int(S[pk.S_X_HEAD])
    while i >= 0:
        out.extend(range(int(rec[i, pk.X_LO]), int(rec[i, pk.X_HI])))
        i = int(rec[i, pk.X_NEXT])
    return out


def _owner(tt, p):
    return int(np.searchsorted(tt[:, pk.TT_START], p, side="right") - 1)


@pytest.mark.parametrize("seed", range(6))
def test_extent_kernels_equal_a_list_of_pages(seed):
    """Random arrivals (runs of one tensor's absent pages), victims taken at the head and
    ranges removed through the tensors' chains leave the list's pages in the order a plain
    list of pages has, and every invariant holds after each step."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 30, size=int(rng.integers(2, 9)))
    tt, S, lru, pstate = _state(sizes, 256)
    model: list[int] = []
    V = len(pstate)
    for _step in range(300):
        op = rng.random()
        if op < 0.5:
            p = int(rng.integers(0, V))
            T = _owner(tt, p)
            end = int(tt[T, pk.TT_START] + tt[T, pk.TT_NP])
            n = 0
            while p + n < end and p + n not in model and n < int(rng.integers(1, 8)):
                n += 1
            if n == 0:
                continue
            wait = pk._x_arrive(lru, S, tt, pstate, T, p, n, 0)
            assert wait == 0
            model.extend(range(p, p + n))
            tt[T, pk.TT_RES] += n
        elif op < 0.8 and model:
            h = int(S[pk.S_X_HEAD])
            head_len = int(lru[h * pk.XW + pk.X_HI] - lru[h * pk.XW + pk.X_LO])
            n = int(rng.integers(1, head_len + 1))
            for v in model[:n]:
                pstate[v] = pk.IN_SSD
                tt[_owner(tt, v), pk.TT_RES] -= 1
            pk._x_take(lru, S, tt, n)
            del model[:n]
        else:
            T = int(rng.integers(0, len(sizes)))
            t0, tn = int(tt[T, pk.TT_START]), int(tt[T, pk.TT_NP])
            a = int(rng.integers(t0, t0 + tn))
            b = int(rng.integers(a + 1, t0 + tn + 1))
            gone = [p for p in model if a <= p < b]
            for p in gone:
                pstate[p] = pk.NOT_PRESENT
            tt[T, pk.TT_RES] -= len(gone)
            pk._x_remove(lru, S, tt, T, a, b)
            model = [p for p in model if not a <= p < b]
        assert S[pk.S_ERROR] == pk.E_NONE
        assert _listed(lru, S) == model
        assert extent_lru_problem(lru, S, tt, pstate) is None


def test_extent_check_finds_broken_states():
    """`extent_lru_problem` names each kind of damage (so the checked runs below can fail)."""
    tt, S, lru, pstate = _state([10, 10], 16)
    pk._x_arrive(lru, S, tt, pstate, 0, 2, 5, 0)
    pk._x_arrive(lru, S, tt, pstate, 1, 10, 4, 0)
    pk._x_arrive(lru, S, tt, pstate, 0, 7, 2, 0)  # continues tensor 0's run? no: tail is 1
    tt[0, pk.TT_RES], tt[1, pk.TT_RES] = 7, 4
    assert extent_lru_problem(lru, S, tt, pstate) is None
    assert _listed(lru, S) == [2, 3, 4, 5, 6, 10, 11, 12, 13, 7, 8]

    def broken(change):
        state = [x.copy() for x in (lru, S, tt, pstate)]
        change(*state)
        return extent_lru_problem(state[0], state[1], state[2], state[3])

    def in_transfer(lru, S, tt, ps):
        ps[3] |= pk.F_TRANSFER

    def unlisted(lru, S, tt, ps):
        ps[0] = pk.IN_GPU

    def res(lru, S, tt, ps):
        tt[1, pk.TT_RES] += 1

    def link(lru, S, tt, ps):
        lru[int(S[pk.S_X_TAIL]) * pk.XW + pk.X_PREV] = -1

    def chain(lru, S, tt, ps):
        tt[0, pk.TT_XH] = -1

    def free(lru, S, tt, ps):
        S[pk.S_X_NFREE] += 1

    assert "in transfer" in broken(in_transfer)
    assert "resident and not in transfer" in broken(unlisted)
    assert "TT_RES" in broken(res)
    assert "previous link" in broken(link)
    assert "TT_RES" in broken(chain) or "chains hold" in broken(chain)
    assert "S_X_NFREE" in broken(free)


def test_out_of_records_is_an_error_not_a_corruption():
    tt, S, lru, pstate = _state([40], 2)
    pk._x_arrive(lru, S, tt, pstate, 0, 0, 2, 0)
    pk._x_arrive(lru, S, tt, pstate, 0, 5, 2, 0)
    assert S[pk.S_ERROR] == pk.E_NONE
    pk._x_arrive(lru, S, tt, pstate, 0, 9, 2, 0)
    assert S[pk.S_ERROR] == pk.E_EXTENTS


def test_extent_records_grow_keeping_the_list():
    tt, S, lru, pstate = _state([40], 4)
    for p in (0, 5, 9):
        pk._x_arrive(lru, S, tt, pstate, 0, p, 2, 0)
    tt[0, pk.TT_RES] = 6
    lru2 = _extent_records(64, S, lru)
    assert S[pk.S_X_NFREE] == 61
    for p in (20, 30, 35):
        pk._x_arrive(lru2, S, tt, pstate, 0, p, 1, 0)
    tt[0, pk.TT_RES] = 9
    assert _listed(lru2, S) == [0, 1, 5, 6, 9, 10, 20, 30, 35]
    assert extent_lru_problem(lru2, S, tt, pstate) is None


def _extents(lru, S):
    """The list's extents in order, as (tensor, first page, end page)."""
    rec = lru.reshape(-1, pk.XW)
    out, i = [], int(S[pk.S_X_HEAD])
    while i >= 0:
        out.append((int(rec[i, pk.X_T]), int(rec[i, pk.X_LO]), int(rec[i, pk.X_HI])))
        i = int(rec[i, pk.X_NEXT])
    return out


def test_removing_a_tensor_joins_the_pieces_of_one_that_took_turns_with_it():
    """Tensors 0 and 1 arrive taking turns (two pages each, then tensor 2 once): when tensor
    0 leaves (`_x_remove`), tensor 1's consecutive pieces, now neighbours, become one extent;
    the list's pages and their order are unchanged, tensor 2's piece stays where it was, and
    a removed tensor's own extents are never joined."""
    tt, S, lru, pstate = _state([40, 40, 40], 32)
    turns = [(0, 0), (1, 40), (0, 2), (1, 42), (0, 4), (1, 44), (2, 80), (0, 6), (1, 47)]
    for T, p in turns:
        pk._x_arrive(lru, S, tt, pstate, T, p, 2, 0)
        tt[T, pk.TT_RES] += 2
    assert len(_extents(lru, S)) == 9
    nfree = int(S[pk.S_X_NFREE])
    pk._x_remove(lru, S, tt, 0, 0, 40)
    tt[0, pk.TT_RES] = 0
    pstate[0:8] = pk.IN_SSD
    # 1's pieces 40-42, 42-44, 44-46 join into one; its piece 47-49 follows tensor 2's and
    # does not continue 46, so it stays apart
    assert _extents(lru, S) == [(1, 40, 46), (2, 80, 82), (1, 47, 49)]
    assert _listed(lru, S) == [40, 41, 42, 43, 44, 45, 80, 81, 47, 48]
    assert int(S[pk.S_X_NFREE]) == nfree + 4 + 2
    assert extent_lru_problem(lru, S, tt, pstate) is None
    # tensor 1 leaves in turn: its chain has two extents now, not four
    pk._x_remove(lru, S, tt, 1, 40, 80)
    tt[1, pk.TT_RES] = 0
    pstate[40:49] = pk.IN_SSD
    assert _extents(lru, S) == [(2, 80, 82)]
    assert extent_lru_problem(lru, S, tt, pstate) is None


def test_freed_records_are_taken_again_last_freed_first_across_a_growth():
    """Freed records are chained from S[S_X_FREE]; growing the array keeps that chain, and new
    extents take its records, the last freed first, before any never used."""
    tt, S, lru, pstate = _state([40, 40], 8)
    for T, p in ((0, 0), (1, 40), (0, 5), (1, 45), (0, 9)):
        pk._x_arrive(lru, S, tt, pstate, T, p, 2, 0)
        tt[T, pk.TT_RES] += 2
    assert int(S[pk.S_X_BUMP]) == 5
    pk._x_remove(lru, S, tt, 0, 0, 40)  # tensor 0's records 4, 2, 0 (its chain, newest first)
    tt[0, pk.TT_RES] = 0
    pstate[[0, 1, 5, 6, 9, 10]] = pk.IN_SSD
    assert int(S[pk.S_X_FREE]) == 0 and int(S[pk.S_X_NFREE]) == 6
    lru2 = _extent_records(32, S, lru)
    assert len(lru2) == 32 * pk.XW and int(S[pk.S_X_NFREE]) == 30
    taken = []
    for p in (20, 25, 30, 35):
        pk._x_arrive(lru2, S, tt, pstate, 0, p, 1, 0)
        taken.append(int(S[pk.S_X_TAIL]))
    tt[0, pk.TT_RES] = 4
    assert taken == [0, 2, 4, 5]
    assert int(S[pk.S_X_FREE]) == -1 and int(S[pk.S_X_BUMP]) == 6
    assert _listed(lru2, S) == [40, 41, 45, 46, 20, 25, 30, 35]
    assert extent_lru_problem(lru2, S, tt, pstate) is None


@pytest.mark.parametrize("seed,policy", [(s, p) for s in range(6) for p in ("lru", "prefetch_lru")])
def test_checked_runs_keep_the_extent_invariants(seed, policy):
    """Engine runs under check=True (the extent list is checked at every kernel boundary) on
    random workloads with hints; their results equal the per-page reference's."""
    rng = np.random.default_rng(2000 + seed)
    w = make_workload(
        seed,
        n_kernels=int(rng.integers(6, 16)),
        n_tensors=int(rng.integers(10, 30)),
        max_pages=int(rng.integers(4, 40)),
    )
    frames = int(kernel_pages(w).max() * rng.uniform(1.0, 1.6)) + 1
    # a batch of at least 10 pages: below that, some of these systems' SSD moves 0 pages a
    # tick and the run is refused (InputError), which would check nothing here
    cfg = tiny_cfg(
        frames,
        int(rng.choice([0, frames // 2, 4 * frames])),
        policy,
        num_iteration=3,
        PCIe_batch_size_page=int(rng.integers(10, 20)),
    )
    hints = random_hints(w, seed, n_hints=40) if policy != "lru" else None
    checked = simulate_pages(w, cfg, hints=hints, check=True, bulk=True)
    assert checked.extra["invariant_checks"] > 0
    ref = simulate_pages(w, cfg, hints=hints, bulk=False)
    assert np.array_equal(checked.kernels, ref.kernels)
    assert np.array_equal(checked.pcie, ref.pcie)


@pytest.mark.parametrize("seed,policy", [(s, p) for s in range(4) for p in ("lru", "prefetch_lru", "deepUM")])
def test_runs_growing_the_records_equal_the_reference(seed, policy, monkeypatch):
    """The record array starting just above what makes the wrapper grow it (2 * P_XMARGIN
    records) and grown 16 records at a time, so that the engine pauses and the wrapper grows
    it (copying the records taken, up to `S_X_BUMP`) many times in a run: the extent list
    stays whole (check=True: a pause at every kernel) and the results equal the per-page
    reference's."""
    import g10fast.engine.page as page

    grown = []
    real = page._extent_records

    def small(n, S, old=None):
        grown.append(old is not None)
        m = int(S[pk.P_XMARGIN])
        return real(2 * m + 8 if old is None else len(old) // pk.XW + 16, S, old)

    monkeypatch.setattr(page, "_extent_records", small)
    rng = np.random.default_rng(3000 + seed)
    w = make_workload(
        seed + 7,
        n_kernels=int(rng.integers(10, 16)),
        n_tensors=int(rng.integers(30, 40)),
        max_pages=int(rng.integers(100, 200)),
    )
    frames = int(kernel_pages(w).max() * rng.uniform(1.0, 1.3)) + 1
    cfg = tiny_cfg(frames, 4 * frames, policy, num_iteration=4, PCIe_batch_size_page=8)
    hints = None
    if policy != "lru":
        hints = [
            h
            for h in random_hints(w, seed, n_hints=60)
            if policy != "deepUM" or h[3] not in (pk.IN_SSD, pk.IN_CPU)
        ]
    checked = simulate_pages(w, cfg, hints=hints, check=True, bulk=True)
    assert sum(grown) >= 2
    ref = simulate_pages(w, cfg, hints=hints, bulk=False)
    assert np.array_equal(checked.kernels, ref.kernels)
    assert np.array_equal(checked.pcie, ref.pcie)
    assert (checked.gpu_used, checked.host_used) == (ref.gpu_used, ref.host_used)


@pytest.mark.parametrize("seed", range(12))
def test_one_arrival_of_k_ticks_equals_k_arrivals(seed):
    """A replayed batch with one arrival stage moves its k ticks' pages in one `_x_arrive`
    (`_rp_arrivals`, `_rp_move`): from the same list, the same states, lazy or not, every
    array ends as k arrivals of n pages one after another leave it, where `_rp_arrivals`
    takes the call (not for a lazy tensor whose pages come back out of order)."""
    rng = np.random.default_rng(100 + seed)
    sizes = rng.integers(50, 90, size=4)  # (room for the batch: p + k * n <= start + 42)
    tt, S, lru, pstate = _state(sizes, 256)
    for _ in range(int(rng.integers(0, 4))):  # some extents already listed (first 3 pages)
        T = int(rng.integers(0, 4))
        lo = int(tt[T, pk.TT_START])
        pk._x_arrive(lru, S, tt, pstate, T, lo, 3, 0)
        pstate[lo : lo + 3] = pk.IN_GPU
    T = int(rng.integers(0, 4))
    start = int(tt[T, pk.TT_START])
    n, k = int(rng.integers(1, 6)), int(rng.integers(2, 7))
    p = start + 5 + int(rng.integers(0, 8))
    lazy = seed % 3  # 0 not lazy; 1, 2 lazy, its boundary at p (seeds 0-5) or further on
    if lazy:
        tt[T, pk.TT_LZ] = lazy
        tt[T, pk.TT_LA] = p if seed < 6 else p + n * int(rng.integers(1, k))
    pstate[p : p + k * n] = pk.F_WAIT * int(rng.integers(0, 2))
    S[pk.S_RP_MASK] = 1 << pk.Q_PREFETCH_SSD
    S[pk.S_RP_N + pk.Q_PREFETCH_SSD] = n
    S[pk.S_RP_T + pk.Q_PREFETCH_SSD] = T
    qb = np.zeros((pk.NQ, 4, 2), dtype=np.int64)
    qb[pk.Q_PREFETCH_SSD, 0] = (p, k * n + 1)
    na, one = pk._rp_arrivals(S, tt, qb, 3, S[pk.S_RP_MASK])
    in_order = not lazy or tt[T, pk.TT_LA] == p
    assert na == 1 and one == (pk.Q_PREFETCH_SSD if in_order else -1)
    if one < 0:
        return
    a = [x.copy() for x in (lru, S, tt, pstate)]
    b = [x.copy() for x in (lru, S, tt, pstate)]
    wa = pk._x_arrive(a[0], a[1], a[2], a[3], T, p, k * n, 7)
    wb = 7
    for j in range(k):
        wb = pk._x_arrive(b[0], b[1], b[2], b[3], T, p + j * n, n, wb)
    assert wa == wb
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_rp_arrivals_counts_the_stages_with_arrivals():
    """`_rp_arrivals` against a plain twin: the template's stages whose queue is in the mask
    with pages a tick, and the queue of the one when only one has (-1 otherwise)."""
    rng = np.random.default_rng(5)
    tt, S, lru, pstate = _state([50, 50], 8)
    qb = np.zeros((pk.NQ, 4, 2), dtype=np.int64)
    arrival_queues = [pk._STAGE_QUEUE[s] for s in range(pk._G_PF_SSD, pk._G_RS_SSD)]
    for _ in range(200):
        mask = int(rng.integers(0, 256))
        for q in range(pk.NQ):
            S[pk.S_RP_N + q] = int(rng.integers(0, 3))
            S[pk.S_RP_T + q] = 0
        have = [q for q in arrival_queues if (mask >> q) & 1 and S[pk.S_RP_N + q] != 0]
        na, one = pk._rp_arrivals(S, tt, qb, 3, mask)
        assert na == len(have)
        assert one == (have[0] if len(have) == 1 else -1)
