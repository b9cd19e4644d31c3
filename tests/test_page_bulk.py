"""The page engine's bulk paths (`simulate_pages(..., bulk=True)`) against the per-page
reference engine (`bulk=False`): randomised synthetic workloads under every page-engine
policy, traced or not (a traced bulk run writes the pages it settles in bulk as rows of runs
and ticks, trace schema 2: its per-page events must be the per-page engine's, event for event),
and the bulk pre-deallocation kernel against the per-page one on crafted LRU states
(compactions and cursor resets in the middle of a tensor)."""

from __future__ import annotations

import numpy as np
import pytest
from synth import Collector, kernel_pages, make_workload, random_hints, tiny_cfg

from g10fast.engine.page import kernels as pk
from g10fast.engine.page import _extent_records, simulate_pages
from g10fast.trace_ranges import per_page


def _outcome(w, cfg, hints, bulk, traced):
    ev = Collector() if traced else None
    try:
        r = simulate_pages(w, cfg, hints=hints, trace=ev, keep_state=True, bulk=bulk)
    except Exception as e:  # an error is an outcome too
        return {"error": f"{type(e).__name__}: {e}"}
    return {
        "kernels": r.kernels,
        "pcie": r.pcie,
        "boundaries": r.boundaries,
        "gpu_used": r.gpu_used,
        "host_used": r.host_used,
        "host_peak": r.host_peak,
        "pstate": r.pstate & 15,
        "live": r.live_page_evictions,
        "amp": r.amplification,
        "extra": r.extra,
        "events": ev.events if traced else None,
    }


def _same_events(ref, new):
    """The per-page events of two event streams, event for event (each sorted by all its
    columns: the order of a tick's rows depends on how the engine grouped its pages)."""
    a, b = per_page(ref), per_page(new)
    a = a[np.lexsort(a.T[::-1])]
    b = b[np.lexsort(b.T[::-1])]
    return a.shape == b.shape and np.array_equal(a, b)


def _assert_same(a, b, what):
    assert a.keys() == b.keys(), what
    for key in a:
        x, y = a[key], b[key]
        if key == "events" and x is not None:
            assert _same_events(x, y), (what, key)
        elif isinstance(x, np.ndarray):
            assert x.shape == y.shape and np.array_equal(x, y), (what, key)
        else:
            assert x == y, (what, key)


def _cases():
    """(seed, policy, traced): random workloads, hints (prefetch, pre-evict, pre-deallocate
    whole tensors) and GPUs from just the largest kernel to twice that, host from none up."""
    out = []
    for seed in range(12):
        for policy in ("lru", "prefetch_lru", "deepUM"):
            out.append((seed, policy, seed % 2 == 0))
    # DeepUM without pre-evictions: the bulk engine keeps its list as extents then; "-s":
    # large tensors and few pages a tick, where its prefetch ticks are settled in streaks
    for seed in range(24):
        out.append((seed, "deepUM-x", seed % 4 == 0))
    for seed in range(16):
        out.append((seed, "deepUM-s", seed % 4 == 0))
    # "-r": large tensors on a GPU barely above the largest kernel, where the victims are
    # often pages the kernel requires, queued again (in runs, on the extent list too)
    for seed in range(8):
        out.append((seed, "lru-r", seed % 2 == 0))
        out.append((seed, "prefetch_lru-r", seed % 2 == 1))
    return out


@pytest.mark.parametrize("seed,policy,traced", _cases())
def test_bulk_equals_per_page_engine(seed, policy, traced):
    rng = np.random.default_rng(1000 + seed)
    big = policy in ("deepUM-s", "lru-r", "prefetch_lru-r")
    w = make_workload(
        seed,
        n_kernels=int(rng.integers(6, 20)),
        n_tensors=int(rng.integers(10, 40)),
        max_pages=int(rng.integers(100, 300) if big else rng.integers(4, 60)),
    )
    need = int(kernel_pages(w).max())
    frames = int(need * (rng.uniform(1.0, 1.1) if policy.endswith("-r") else rng.uniform(1.0, 2.0))) + 1
    host = int(rng.choice([0, frames // 3, frames, 10 * frames]))
    kw = {"num_iteration": int(rng.integers(2, 5))}
    if policy == "deepUM-s":
        kw["PCIe_batch_size_page"] = int(rng.integers(2, 8))
    elif big:
        kw["PCIe_batch_size_page"] = int(rng.integers(8, 64))
    elif rng.random() < 0.4:
        kw["PCIe_batch_size_page"] = int(rng.integers(3, 40))
    if policy.startswith("deepUM"):
        kw["prefetch_degree"] = int(rng.integers(0, 5))
    cfg = tiny_cfg(frames, host, policy.split("-")[0], **kw)
    hints = None
    if policy != "lru":
        hints = random_hints(w, seed, n_hints=int(rng.integers(20, 80)))
    if policy in ("deepUM-x", "deepUM-s"):
        hints = [h for h in hints if h[3] not in (pk.IN_SSD, pk.IN_CPU)]
    ref = _outcome(w, cfg, hints, False, traced)
    new = _outcome(w, cfg, hints, True, traced)
    _assert_same(ref, new, (seed, policy, traced))
    if "error" not in ref:
        assert ref["kernels"].shape[0] == w.num_kernels * kw["num_iteration"]


@pytest.mark.parametrize("seed,policy", [(s, p) for s in range(8) for p in ("lru", "prefetch_lru", "deepUM")])
def test_bulk_streaks_and_victim_runs(seed, policy):
    """Large tensors, few pages a tick and a GPU 1.2-3x the largest kernel: the ticks the
    fast path settles in streaks with victims to the host (not full), G10's prefetch ticks
    from SSD into free frames or with victims, and runs of victims that go on across the
    victims' tensors (`_vt_switch`; DeepUM on its extent list: no pre-evictions). With
    counters added to the engine (untraced), these 8 seeds took, under prefetch_lru, 32
    streaks of prefetch ticks from SSD (11 into free frames), 48 streaks with victims to the
    host and 875 victims' tensor changes inside runs; under lru 65 and 1,247; under deepUM
    473 changes. The bulk engine must equal the per-page one, traced (seeds 0 and 4) or not."""
    rng = np.random.default_rng(7000 + seed)
    w = make_workload(
        seed + 700,
        n_kernels=int(rng.integers(6, 20)),
        n_tensors=int(rng.integers(10, 40)),
        max_pages=int(rng.integers(100, 300)),
    )
    frames = int(kernel_pages(w).max() * rng.uniform(1.2, 3.0)) + 1
    host = int(rng.choice([0, frames // 3, frames, 10 * frames]))
    kw = {"num_iteration": int(rng.integers(2, 4)), "PCIe_batch_size_page": int(rng.integers(16, 64))}
    if policy == "deepUM":
        kw["prefetch_degree"] = int(rng.integers(0, 5))
    cfg = tiny_cfg(frames, host, policy, **kw)
    hints = random_hints(w, seed, n_hints=int(rng.integers(20, 80))) if policy != "lru" else None
    if policy == "deepUM":
        hints = [h for h in hints if h[3] not in (pk.IN_SSD, pk.IN_CPU)]
    traced = seed % 4 == 0
    ref = _outcome(w, cfg, hints, False, traced)
    _assert_same(ref, _outcome(w, cfg, hints, True, traced), (seed, policy))


@pytest.mark.parametrize("seed", [10, 51, 58, 0, 1])
def test_bulk_deepum_requeued_victims(seed):
    """DeepUM on the extent list with victims of required tensors queued again in runs
    (`_batch_move_xd`'s b_rq): large tensors, a GPU barely above the largest kernel. Seeds
    10, 51 and 58 are the three of 60 where those runs change the outcome when their victims
    are not flagged (each fails then); 0 and 1 are plain ones."""
    rng = np.random.default_rng(5000 + seed)
    w = make_workload(
        seed + 300,
        n_kernels=int(rng.integers(6, 20)),
        n_tensors=int(rng.integers(10, 40)),
        max_pages=int(rng.integers(100, 300)),
    )
    frames = int(kernel_pages(w).max() * rng.uniform(1.0, 1.1)) + 1
    host = int(rng.choice([0, frames // 3, frames, 10 * frames]))
    cfg = tiny_cfg(
        frames,
        host,
        "deepUM",
        num_iteration=3,
        PCIe_batch_size_page=int(rng.integers(8, 64)),
        prefetch_degree=int(rng.integers(0, 5)),
    )
    hints = [
        h
        for h in random_hints(w, seed, n_hints=int(rng.integers(20, 80)))
        if h[3] not in (pk.IN_SSD, pk.IN_CPU)
    ]
    traced = seed < 10
    _assert_same(_outcome(w, cfg, hints, False, traced), _outcome(w, cfg, hints, True, traced), seed)


@pytest.mark.parametrize("seed", range(8))
def test_dealloc_bulk_equals_dealloc_pages(seed):
    """`_dealloc_bulk` (bulk pre-deallocation, untraced) leaves exactly the state that the
    per-page `_dealloc_pages` leaves: page states with their generations, the LRU ring, the
    cursor, the stale masks and counts, the memory counts, the tensor's resident count. The
    freed range is all-GPU (the run loop of `_preevict_gpu_run`), all-host, or mixed; small
    rings and pre-set generation masks force compactions in the middle of it, and the cursor
    often sits on one of its pages."""
    rng = np.random.default_rng(seed)
    n_pages, cap = 400, 512
    p0, n = 50, 250
    lru = np.zeros(cap + pk.STALE_BUCKETS, dtype=np.int32)
    pstate = np.zeros(n_pages, dtype=np.uint8)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_LCAP] = cap
    kind = seed % 3  # 0: the range all in the GPU, 1: all on the host, 2: mixed
    tail = 0
    for p in rng.permutation(n_pages):
        inside = p0 <= p < p0 + n
        if inside and kind == 0:
            loc = pk.IN_GPU
        elif inside and kind == 1:
            loc = pk.IN_CPU
        else:
            loc = rng.choice([pk.IN_GPU, pk.IN_GPU, pk.IN_GPU, pk.IN_CPU, pk.NOT_PRESENT])
        g = int(rng.integers(16))
        st = (g << pk.GEN_SHIFT) | loc
        if loc == pk.IN_GPU and rng.random() < 0.1 and not (inside and kind == 0):
            st |= pk.F_TRANSFER
        pstate[p] = st
        if loc == pk.IN_GPU:
            lru[tail] = (p << pk.GEN_SHIFT) | g
            tail += 1
            if rng.random() < 0.2:
                lru[tail] = -1
                tail += 1
    S[pk.S_LRU_TAIL] = tail
    # the cursor: on a page of the range half of the time
    if rng.random() < 0.5:
        slots = [s for s in range(tail) if lru[s] >= 0 and p0 <= (lru[s] >> pk.GEN_SHIFT) < p0 + n]
        S[pk.S_LRU_CUR] = int(rng.choice(slots)) if slots else int(rng.integers(tail))
    else:
        S[pk.S_LRU_CUR] = int(rng.integers(tail))
    S[pk.S_GPU_USED] = int(np.sum((pstate & pk.LOC_MASK) == pk.IN_GPU))
    S[pk.S_HOST_USED] = int(np.sum((pstate & pk.LOC_MASK) == pk.IN_CPU))
    for p in rng.choice(n_pages, 30, replace=False):
        lru[cap + p] = 0xFFFF & ~(1 << (int(pstate[p]) >> pk.GEN_SHIFT))
        S[pk.S_LRU_STALE] += 1
    for p in rng.choice(n_pages, 60, replace=False):  # a few generations taken
        lru[cap + p] |= int(rng.integers(0, 1 << 16)) & ~(1 << (int(pstate[p]) >> pk.GEN_SHIFT))
    tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
    tt[0, pk.TT_START], tt[0, pk.TT_NP] = p0, n
    tt[0, pk.TT_RES] = int(np.sum((pstate[p0 : p0 + n] & pk.RES_MASK) == pk.IN_GPU))
    ev = np.zeros((1, pk.EV_COLS), dtype=np.int64)

    a = (tt.copy(), pstate.copy(), lru.copy(), S.copy())
    freed_a = pk._dealloc_pages(0, 0, p0, n, a[0], a[1], a[2], a[3], ev)
    b = (tt.copy(), pstate.copy(), lru.copy(), S.copy())
    freed_b = pk._dealloc_bulk(0, 0, p0, n, b[0], b[1], b[2], b[3], ev)
    assert freed_a == freed_b
    for x, y, name in zip(a, b, ("tt", "pstate", "lru", "S")):
        assert np.array_equal(x, y), name
    if kind == 0:
        assert freed_b == n and a[3][pk.S_LRU_STALE] < S[pk.S_LRU_STALE] + n  # compacted
    if kind == 1:
        assert freed_b == n and b[3][pk.S_HOST_USED] == S[pk.S_HOST_USED] - n


def test_uniform_state():
    ps = np.full(10_000, pk.IN_SSD | (5 << pk.GEN_SHIFT), dtype=np.uint8)
    assert pk._uniform_state(ps, 0, 10_000) == pk.IN_SSD  # generations do not count
    ps[9_999] |= pk.F_TRANSFER
    assert pk._uniform_state(ps, 0, 10_000) == -1
    assert pk._uniform_state(ps, 0, 9_999) == pk.IN_SSD
    ps[5] = pk.IN_GPU
    assert pk._uniform_state(ps, 0, 6) == -1
    assert pk._uniform_state(ps, 5, 1) == pk.IN_GPU


def test_tensor_state_reads_the_resident_count():
    """`_tensor_state`: the tensor's count of pages in the GPU and not in transfer (TT_RES,
    kept exact by the engine) decides all (IN_GPU) and some-but-not-all (-1) without a state
    read: the states given here disagree with it on purpose; with none resident, the states
    are scanned (`_uniform_state`)."""
    n = 1_000
    tt = np.zeros((3, pk.TT_COLS), dtype=np.int64)
    ps = np.full(3 * n, pk.IN_SSD, dtype=np.uint8)
    tt[1, pk.TT_RES] = n
    assert pk._tensor_state(ps, tt, 1, n, n) == pk.IN_GPU
    tt[1, pk.TT_RES] = 1
    assert pk._tensor_state(ps, tt, 1, n, n) == -1
    tt[1, pk.TT_RES] = 0
    assert pk._tensor_state(ps, tt, 1, n, n) == pk.IN_SSD
    ps[n + 7] = pk.IN_CPU
    assert pk._tensor_state(ps, tt, 1, n, n) == -1


def _tick_end_state():
    """S of a DeepUM-like busy tick at its end: the GPU full, the host full (line 0), a demand
    run from SSD being fetched and a pre-allocation queued behind it."""
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_G] = 100
    S[pk.P_HOST] = 0
    S[pk.P_GPU_CAP] = 50
    S[pk.P_CPU_CAP] = 50
    S[pk.P_SSD_CAP] = 10
    S[pk.P_ALLOC_CAP] = 3899
    S[pk.S_XFER] = 1
    S[pk.S_X_NFREE] = 10
    S[pk.S_EV_PAUSE] = 10
    S[pk.S_STAT_PAUSE] = 10
    S[pk.S_QT + pk.Q_PF_SSD] = 1
    S[pk.S_QT + pk.Q_PREALLOC] = 1
    return S


def test_tick_goes_on_past_later_stages_that_admit_nothing():
    """`_tick_repeats`: a demand fetch from SSD that reached its caps (10 in, 10 victims out
    to SSD, the host full) goes on in place while the pre-allocation queued behind it admits
    no page with the tick's counters (`_later_stages_idle`: no room to evict), but not when
    it would (an SSD slot left), and not when an earlier stage's queue holds pages."""

    def repeats(S, c_out_ssd=10):
        return pk._tick_repeats(
            S, pk._G_PF_SSD, pk.Q_PF_SSD, 1, 8, 1000, True, 5, 10, 10, 0, 10, c_out_ssd, 10, 100, 0, 100, 0
        )

    S = _tick_end_state()
    assert pk._later_stages_idle(S, pk._G_PF_SSD, 100, 0, 10, 10, 0, 10, 10, 10, 0)
    assert repeats(S)
    assert not pk._later_stages_idle(S, pk._G_PF_SSD, 100, 0, 10, 10, 0, 10, 9, 10, 0)
    assert not repeats(S, c_out_ssd=9)
    # (an admitted stage over at once, its bit in `fails`, counts as idle; another's bit does not)
    assert pk._later_stages_idle(S, pk._G_PF_SSD, 100, 0, 10, 10, 0, 10, 9, 10, 1 << pk._G_PREALLOC)
    assert not pk._later_stages_idle(S, pk._G_PF_SSD, 100, 0, 10, 10, 0, 10, 9, 10, 1 << pk._G_PRE_CPU)
    S[pk.S_QT + pk.Q_PREEVICT_SSD] = 1
    assert not repeats(S)


def _tick_queues():
    """The queues and tensors of `_tick_end_state`: the pre-allocation's head run (pages 5-7)
    of tensor 1 (pages 4-9), which the current kernel does not require."""
    qb = np.zeros((pk.NQ, 8, 2), dtype=np.int64)
    qb[pk.Q_PF_SSD, 0] = (0, 4)
    qb[pk.Q_PREALLOC, 0] = (5, 3)
    tt = np.zeros((2, pk.TT_COLS), dtype=np.int64)
    srt = np.array([[0, 4, 10], [0, 1, 0]], dtype=np.int64)
    return qb, tt, srt


def test_tick_goes_on_past_prefetches_without_victims():
    """`_later_stages_idle` under DeepUM on the extent list: a pre-allocation or a prefetch
    that admits a page (an SSD slot left to evict to) but whose first page finds no victim
    (the GPU full, the scan from the cursor at the list's end, its tensor not required, a
    prefetch's page where its queue says: `_fails_at_once`) counts as idle; it does not when its
    tensor is required, before the scan reached the end, with a free frame, with a prefetch's
    page elsewhere, or under the LRU policies. A prefetch from SSD that is over so skips the
    prefetch from the host (as `_next_stage_after_failure` does)."""
    qb, tt, srt = _tick_queues()
    ps = np.zeros(10, dtype=np.uint8)
    S = _tick_end_state()
    S[pk.P_DEEPUM] = 1
    S[pk.P_XLRU] = 1

    def idle(gpu_used=100, dum_end=1, c_in_ssd=10):
        fails = pk._fails_at_once(S, qb, tt, srt, ps, pk._G_PF_SSD, gpu_used, dum_end)
        return pk._later_stages_idle(S, pk._G_PF_SSD, gpu_used, 0, 10, c_in_ssd, 0, 10, 9, 10, fails)

    assert pk._fails_at_once(S, qb, tt, srt, ps, pk._G_PF_SSD, 100, 1) == 1 << pk._G_PREALLOC
    assert pk._fails_at_once(S, qb, tt, srt, ps, pk._G_PREALLOC, 100, 1) == 0  # (only later stages)
    assert idle()
    assert not idle(dum_end=0)
    assert not idle(gpu_used=99)
    tt[1, pk.TT_REQ] = 1
    assert not idle()
    tt[1, pk.TT_REQ] = 0
    S[pk.P_DEEPUM] = 0
    assert not idle()
    S[pk.P_DEEPUM] = 1
    # a prefetch from the host queued too (pages 5-7 in the host): over at once as well
    qb[pk.Q_PREFETCH_CPU, 0] = (5, 3)
    S[pk.S_QT + pk.Q_PREFETCH_CPU] = 1
    assert not idle()  # (page 5 is not in the host)
    ps[5] = pk.IN_CPU
    assert pk._fails_at_once(S, qb, tt, srt, ps, pk._G_PF_SSD, 100, 1) == (1 << pk._G_PRE_CPU) | (
        1 << pk._G_PREALLOC
    )
    assert idle()
    # a prefetch from SSD before it (admitted: its link not full), over at once, skips it: even
    # a prefetch from the host that would not be over at once then does not count
    qb[pk.Q_PREFETCH_SSD, 0] = (6, 1)
    S[pk.S_QT + pk.Q_PREFETCH_SSD] = 1
    ps[6] = pk.IN_SSD
    assert idle(c_in_ssd=0)
    ps[5] = pk.IN_SSD  # (the prefetch from the host would move page 5 to the other queue)
    assert not idle()  # (the prefetch from SSD not admitted: the one from the host counts)
    assert idle(c_in_ssd=0)
    ps[6] = pk.IN_CPU  # (and not when the prefetch from SSD is not over at once)
    assert not idle(c_in_ssd=0)


def test_engine_option_page_bulk():
    """`EngineOptions.page_bulk`: absent from to_dict (and so from configuration hashes)
    while unset, kept when set, and checked."""
    from g10fast.errors import InputError
    from g10fast.system import EngineOptions

    assert "page_bulk" not in EngineOptions().to_dict()
    assert EngineOptions(page_bulk=False).to_dict()["page_bulk"] is False
    assert EngineOptions(page_bulk=True).check().page_bulk is True
    with pytest.raises(InputError, match="page_bulk"):
        EngineOptions(page_bulk="yes").check()


@pytest.mark.parametrize("seed", range(12))
def test_fault_scan_uniform_equals_page_loop(seed):
    """`_fault_scan` with the bulk paths (P_BULK: a tensor whose pages share location and
    in-transfer bit goes through `_fault_scan_uniform`) leaves exactly what the page loop
    leaves: page states (in-transfer and wait-set flags, generations untouched), queues
    (a run merging with a queued run that ends at the tensor's first page), counts, the
    wait-set size, trace events, and the SSD count returned. Some pages already carry the
    wait-set flag; one case in four is mixed (the page loop in both)."""
    rng = np.random.default_rng(100 + seed)
    n_pages, p0, n = 300, 40, 200
    kinds = [
        pk.NOT_PRESENT,
        pk.IN_SSD,
        pk.IN_CPU,
        pk.IN_GPU | pk.F_TRANSFER,
        pk.IN_SSD | pk.F_TRANSFER,
        pk.IN_CPU | pk.F_TRANSFER,
    ]
    u = kinds[seed % len(kinds)]
    pstate = ((rng.integers(0, 16, n_pages) << pk.GEN_SHIFT) | u).astype(np.uint8)
    if u & pk.F_TRANSFER:
        pstate[rng.random(n_pages) < 0.3] |= pk.F_WAIT
    if seed % 4 == 3:
        pstate[p0 + n // 2] = pk.IN_GPU  # mixed: the page loop
    tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
    tt[0, pk.TT_START], tt[0, pk.TT_NP] = p0, n
    qb = np.zeros((pk.NQ, 64, 2), dtype=np.int64)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_TRACE] = seed % 2
    S[pk.S_WAIT] = 7
    if seed % 3 == 0:  # a queued run ending at p0 on each queue
        for q in (pk.Q_PF_CPU, pk.Q_PF_SSD, pk.Q_PF_ALLOC):
            pk._q_push(qb, S, q, p0 - 10, 10)
    ev = np.zeros((8, pk.EV_COLS), dtype=np.int64)
    out = []
    for bulk in (0, 1):
        st = (pstate.copy(), qb.copy(), S.copy(), ev.copy())
        st[2][pk.P_BULK] = bulk
        r = pk._fault_scan(0, seed % 2 == 0, 123, tt, st[0], st[1], st[2], st[3], seed % 2 == 1, 5, 2)
        out.append((r,) + st)
    a, b = out
    assert a[0] == b[0]
    for x, y, name in zip(a[1:], b[1:], ("pstate", "qb", "S", "ev")):
        y = y.copy()
        if name == "S":
            y[pk.P_BULK] = 0
        assert np.array_equal(x, y), name
    if seed % 4 != 3 and not u & pk.F_TRANSFER:
        assert np.all(b[1][p0 : p0 + n] & pk.F_TRANSFER)
        assert b[3][pk.S_WAIT] == 7 + n


def _runs_states(rng, n):
    """Page states in runs (lengths 1-200) of a few locations and flags, generations
    random: the cases `_rp_canon` and `_res_run` scan word by word and page by page."""
    out = np.empty(n, dtype=np.uint8)
    i = 0
    while i < n:
        k = int(rng.integers(1, 200))
        st = int(rng.choice([pk.NOT_PRESENT, pk.IN_SSD, pk.IN_CPU, pk.IN_GPU]))
        st |= int(rng.choice([0, pk.F_TRANSFER, pk.F_WAIT, pk.F_TRANSFER | pk.F_WAIT]))
        out[i : i + k] = st
        i += k
    return out | (rng.integers(0, 16, n).astype(np.uint8) << pk.GEN_SHIFT)


def test_rp_canon_and_res_run_against_page_loops():
    """The word-wise and chunked scans stop where a page-by-page loop stops, from every
    alignment and length (their plain twins: the loops they replaced)."""
    rng = np.random.default_rng(7)
    ps = _runs_states(rng, 4_000)
    for _ in range(3_000):
        p = int(rng.integers(0, 3_900))
        n = int(rng.integers(0, 4_000 - p))
        loc = int(ps[p]) & pk.LOC_MASK if rng.random() < 0.8 else int(rng.integers(0, 4))
        j = 0
        while j < n and (int(ps[p + j]) & pk.LOC_MASK) == loc:
            j += 1
        assert pk._rp_canon(ps, p, n, loc) == j, (p, n, loc)
        if n >= 1:
            u = int(ps[p]) & pk.RES_MASK
            e = p + 1
            while e < p + n and (int(ps[e]) & pk.RES_MASK) == u:
                e += 1
            assert pk._res_run(ps, p, p + n, u) == e, (p, n)
    # one long run: the word-wise scan reaches the end
    ps = np.full(1_000, pk.IN_CPU | (3 << pk.GEN_SHIFT), dtype=np.uint8)
    assert pk._rp_canon(ps, 1, 999, pk.IN_CPU) == 999
    ps[998] = pk.IN_SSD
    assert pk._rp_canon(ps, 1, 999, pk.IN_CPU) == 997
    assert pk._res_run(ps, 3, 1_000, pk.IN_CPU) == 998


def test_flag_pages():
    ps = np.array([0, pk.F_WAIT, pk.IN_CPU, pk.IN_SSD | pk.F_WAIT, 7], dtype=np.uint8)
    assert pk._flag_pages(ps, 1, 4, pk.F_TRANSFER | pk.F_WAIT) == 2
    assert list(ps) == [0, 12, 14, 13, 7]


def test_gpu_states_against_page_loop():
    """`_gpu_states` (word-wise) leaves the states and counts the wait bits as the page loop
    it replaced, from every alignment and length."""
    rng = np.random.default_rng(11)
    base = _runs_states(rng, 600)
    for _ in range(400):
        p = int(rng.integers(0, 500))
        n = int(rng.integers(0, 600 - p))
        a = base.copy()
        nw = 0
        for q in range(p, p + n):
            st = int(a[q])
            nw += (st & pk.F_WAIT) // pk.F_WAIT
            a[q] = (st & ~(pk.LOC_MASK | pk.F_TRANSFER | pk.F_WAIT)) | pk.IN_GPU
        b = base.copy()
        assert pk._gpu_states(b, p, n) == nw, (p, n)
        assert np.array_equal(a, b), (p, n)


def test_rp_evict_against_page_loop():
    """`_rp_evict` (word-wise) leaves the states the page loop it replaced leaves and counts
    the same resident pages not in transfer, from every alignment and length and to every
    destination."""
    rng = np.random.default_rng(14)
    base = _runs_states(rng, 1_200)
    for _ in range(800):
        p = int(rng.integers(0, 1_100))
        n = int(rng.integers(0, 1_200 - p))
        dest = int(rng.integers(0, 4))
        a = base.copy()
        res = 0
        for v in range(p, p + n):
            st = int(a[v])
            res += (st & pk.RES_MASK) == pk.IN_GPU
            a[v] = (st & ~(pk.LOC_MASK | pk.F_TRANSFER)) | dest
        b = base.copy()
        assert pk._rp_evict(b, p, n, dest) == res, (p, n, dest)
        assert np.array_equal(a, b), (p, n, dest)
    ps = np.full(64, pk.IN_GPU | pk.F_WAIT | (15 << pk.GEN_SHIFT), dtype=np.uint8)
    ps[5] |= pk.F_TRANSFER
    assert pk._rp_evict(ps, 0, 64, pk.IN_SSD) == 63
    assert np.all(ps == (pk.IN_SSD | pk.F_WAIT | (15 << pk.GEN_SHIFT)))


def test_tensor_state_known_zero():
    """TT_Z (every state of the tensor known to be 0) decides NOT_PRESENT without a state
    read: the states given here disagree with it on purpose."""
    n = 1_000
    tt = np.zeros((2, pk.TT_COLS), dtype=np.int64)
    tt[1, pk.TT_START], tt[1, pk.TT_NP] = n, n
    ps = np.full(2 * n, pk.IN_CPU, dtype=np.uint8)
    assert pk._tensor_state(ps, tt, 1, n, n) == pk.IN_CPU
    tt[1, pk.TT_Z] = 1
    assert pk._tensor_state(ps, tt, 1, n, n) == pk.NOT_PRESENT


def test_clear_loc_against_page_loop():
    """`_clear_loc` (word-wise) leaves the states the page loop it replaced leaves, and
    returns their bits OR-ed together, from every alignment and length."""
    rng = np.random.default_rng(12)
    for _ in range(400):
        ps = _runs_states(rng, 300)
        if rng.random() < 0.5:
            ps &= pk.LOC_MASK  # (often all zero after)
        p = int(rng.integers(0, 290))
        n = int(rng.integers(0, 300 - p))
        ref = ps.copy()
        acc = 0
        for i in range(p, p + n):
            ref[i] = int(ref[i]) & ~pk.LOC_MASK
            acc |= int(ref[i])
        got = pk._clear_loc(ps, p, n)
        assert np.array_equal(ps, ref)
        assert (int(got) == 0) == (acc == 0)


@pytest.mark.parametrize("loc", [pk.IN_CPU, pk.IN_GPU])
def test_dealloc_bulk_marks_known_zero(loc):
    """A pre-deallocation that leaves every state of the tensor 0 sets TT_Z (all on the host;
    all in the GPU on the extent list), one that leaves a flag or a generation does not."""
    n_pages, p0, n = 64, 8, 40
    for extra in (0, 1 << pk.GEN_SHIFT):
        pstate = np.zeros(n_pages, dtype=np.uint8)
        pstate[p0 : p0 + n] = loc
        pstate[p0 + n - 1] |= extra
        S = np.zeros(pk.NS, dtype=np.int64)
        tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
        tt[0, pk.TT_START], tt[0, pk.TT_NP] = p0, n
        if loc == pk.IN_GPU:
            S[pk.P_XLRU] = 1
            S[pk.S_X_HEAD] = -1
            S[pk.S_X_TAIL] = -1
            S[pk.P_LCAP] = 1 << 62
            lru = _extent_records(16, S)
            tt[0, pk.TT_XH] = -1
            pstate[p0 : p0 + n] = pk.NOT_PRESENT
            assert pk._x_arrive(lru, S, tt, pstate, 0, p0, n, 0) == 0  # (the list: the tensor)
            tt[0, pk.TT_RES] = n
            pstate[p0 : p0 + n] = loc
            pstate[p0 + n - 1] |= extra
            S[pk.S_GPU_USED] = n
        else:
            lru = np.zeros(8, dtype=np.int64)
            S[pk.S_HOST_USED] = n
        ev = np.zeros((1, pk.EV_COLS), dtype=np.int64)
        assert pk._dealloc_bulk(0, 0, p0, n, tt, pstate, lru, S, ev) == n
        assert not np.any(pstate & pk.LOC_MASK)
        assert tt[0, pk.TT_Z] == (1 if extra == 0 else 0)


def test_fault_scan_known_zero():
    """`_fault_scan` of a tensor whose states are known to be 0 (TT_Z) leaves what it leaves
    when it reads them, and clears TT_Z."""
    n_pages, p0, n = 300, 40, 200
    out = []
    for z in (0, 1):
        pstate = np.zeros(n_pages, dtype=np.uint8)
        tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
        tt[0, pk.TT_START], tt[0, pk.TT_NP], tt[0, pk.TT_Z] = p0, n, z
        qb = np.zeros((pk.NQ, 64, 2), dtype=np.int64)
        S = np.zeros(pk.NS, dtype=np.int64)
        S[pk.P_BULK] = 1
        S[pk.S_WAIT] = 3
        ev = np.zeros((8, pk.EV_COLS), dtype=np.int64)
        r = pk._fault_scan(0, True, 123, tt, pstate, qb, S, ev, False, 5, 2)
        assert tt[0, pk.TT_Z] == 0
        out.append((r, pstate, qb, S))
    (ra, *a), (rb, *b) = out
    assert ra == rb
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    assert np.all(b[0][p0 : p0 + n] == pk.F_TRANSFER | pk.F_WAIT) and b[2][pk.S_WAIT] == 3 + n


def test_checker_finds_broken_known_zero():
    """The invariant checker's scan names a tensor whose states TT_Z says are 0 when one is
    not."""
    from g10fast.engine.page.check import _zero_known_broken

    tt = np.zeros((3, pk.TT_COLS), dtype=np.int64)
    tt[:, pk.TT_START] = [0, 10, 20]
    tt[:, pk.TT_NP] = 10
    tt[:, pk.TT_Z] = [1, 0, 1]
    pstate = np.zeros(30, dtype=np.uint8)
    pstate[15] = pk.IN_CPU  # (tensor 1: not known to be 0)
    assert _zero_known_broken(tt, pstate) == -1
    pstate[29] = pk.F_WAIT
    assert _zero_known_broken(tt, pstate) == 2
