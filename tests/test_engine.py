"""The Numba page engine: invariants after every run, the plain-Python twin on small
synthetic workloads, and the regression numbers of the original C++ binary."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from types import SimpleNamespace

import numpy as np
import pytest

from g10fast.engine.page import kernels as pk
from g10fast.engine.page import simulate_pages
from g10fast.engine.stats import iteration_stats

from synth import Collector, kernel_pages, make_workload, tiny_cfg

SHARED = Path(__file__).resolve().parents[2] / "shared"
ARTIFACT = SHARED / "g10-artifact"
REFERENCE = SHARED / "reference"
needs_shared = pytest.mark.skipif(
    not (ARTIFACT / "frontend").is_dir() or not REFERENCE.is_dir(),
    reason="../shared (G10 artifact and reference runs) not present",
)


def check_invariants(w, cfg, run, events):
    """Conservation and capacity invariants of a finished run (pstate kept)."""
    loc = run.pstate & pk.LOC_MASK
    sp = run.params
    # each page is in exactly one place, and the counters agree with the page table
    assert int((loc == pk.IN_GPU).sum()) == run.gpu_used or not sp.is_uvm
    assert int((loc == pk.IN_CPU).sum()) == run.host_used
    assert 0 <= run.gpu_used <= sp.frames
    assert 0 <= run.host_used <= sp.host_line
    # every in-transfer page is in exactly one queue
    assert int(((run.pstate & pk.F_TRANSFER) != 0).sum()) == run.extra["queued_pages_left"]
    if events is None:
        return
    kind, cnt, src, dst = events[:, 1], events[:, 6], events[:, 7], events[:, 8]
    arrive = cnt[(kind == pk.EV_FETCH) | (kind == pk.EV_ALLOC)].sum()
    leave_gpu = cnt[(kind == pk.EV_EVICT)].sum() + cnt[(kind == pk.EV_DEALLOC) & (src == pk.IN_GPU)].sum()
    assert arrive - leave_gpu == run.gpu_used
    to_cpu = cnt[(kind == pk.EV_EVICT) & (dst == pk.IN_CPU)].sum()
    from_cpu = cnt[((kind == pk.EV_FETCH) | (kind == pk.EV_DEALLOC)) & (src == pk.IN_CPU)].sum()
    assert to_cpu - from_cpu == run.host_used
    init_ssd = int(w.n_pages[w.is_global].sum())
    to_ssd = cnt[(kind == pk.EV_EVICT) & (dst == pk.IN_SSD)].sum()
    from_ssd = cnt[((kind == pk.EV_FETCH) | (kind == pk.EV_DEALLOC)) & (src == pk.IN_SSD)].sum()
    assert init_ssd + to_ssd - from_ssd == int((loc == pk.IN_SSD).sum())
    # pages moved in equal pages that arrived; traffic equals the per-tick statistics
    assert cnt[kind == pk.EV_FETCH].sum() == run.pcie[:, pk.PC_IN].sum()
    assert cnt[(kind == pk.EV_EVICT) & (dst != pk.NOT_PRESENT)].sum() == run.pcie[:, pk.PC_OUT].sum()
    # one KERNEL event per kernel execution
    assert (kind == pk.EV_KERNEL).sum() == len(run.kernels)
    # columns a kind does not use hold -1 (docs/trace-format.md)
    unused = (kind == pk.EV_KERNEL) | (kind == pk.EV_TRANSFER)
    assert (src[unused] == -1).all() and (dst[unused] == -1).all()
    assert (events[unused, 4] == -1).all() and (events[unused, 5] == -1).all()
    assert (cnt[kind == pk.EV_TRANSFER] == -1).all()
    assert (dst[kind == pk.EV_FETCH] == pk.IN_GPU).all() and (src[kind == pk.EV_EVICT] == pk.IN_GPU).all()


# (seed, GPU frames, host frames, config overrides); the last two have SSD BW == PCIe BW
# (the artifact's `ssd32-pcie32` configs), whose stall model divides by zero (O-11)
SSD32 = {"SSD_PCIe_bandwidth_GBps": 32.0, "GPU_PCIe_bandwidth_GBps": 32.0, "CPU_PCIe_bandwidth_GBps": 32.0}
CASES = [
    (1, 60, 400, {}),
    (2, 45, 30, {}),
    (3, 80, 0, {}),
    (4, 50, 10, {}),
    (5, 120, 1000, {}),
    (6, 55, 55, {}),
    (7, 70, 5, {}),
    (8, 40, 200, {}),
    (9, 50, 8, SSD32),
    (10, 45, 20, SSD32),
]


def _small(seed, gpu):
    w = make_workload(seed, n_kernels=10, n_tensors=24, max_pages=gpu // 3)
    assert kernel_pages(w).max() <= gpu
    return w


@pytest.mark.parametrize("seed,gpu,host,kw", CASES)
def test_engine_matches_twin_and_invariants(seed, gpu, host, kw):
    from twin import run_twin

    w = _small(seed, gpu)
    cfg = tiny_cfg(gpu, host, "lru", **kw)
    col = Collector()
    run = simulate_pages(w, cfg, trace=col, keep_state=True)
    twin = run_twin(w, cfg)
    # per kernel execution: iteration, kernel, start, end, in_transfer, PF counts, occupancy
    assert run.kernels.tolist() == [list(map(int, k)) for k in twin["kernels"]]
    assert run.boundaries.tolist() == [list(map(int, b)) for b in twin["boundaries"]]
    tw_pcie = np.zeros_like(run.pcie)
    for it, _t, alloc, i, i_ssd, i_cpu, o, o_ssd, o_cpu in twin["pcie"]:
        tw_pcie[it] += [alloc, i, i_ssd, i_cpu, o, o_ssd, o_cpu]
    assert run.pcie.tolist() == tw_pcie.tolist()
    assert np.array_equal(run.pstate & pk.LOC_MASK, np.asarray(twin["state"]["loc"], dtype=np.uint8))
    assert run.host_peak == twin["state"]["host_peak"]
    assert run.host_peak >= run.host_used and run.host_peak <= host
    check_invariants(w, cfg, run, col.events)
    # untraced, the engine takes its fast paths (the batcher's page loop, runs of busy
    # ticks); the outcome is the same to the bit
    fast = simulate_pages(w, cfg, keep_state=True)
    assert fast.kernels.tolist() == run.kernels.tolist()
    assert fast.boundaries.tolist() == run.boundaries.tolist()
    assert fast.pcie.tolist() == run.pcie.tolist()
    assert np.array_equal(fast.pstate, run.pstate)
    assert (fast.gpu_used, fast.host_used, fast.host_peak) == (run.gpu_used, run.host_used, run.host_peak)
    # the engine's statistics equal the twin's analysis of the same records
    stats = iteration_stats(run.kernels, run.pcie, run.boundaries, w.exec_cycles, w.pf_cycles, 2)
    fin = twin["final"]
    for s in stats:
        i = s["iteration"]
        assert s["exe_time_cycles"] == fin[f"kernel_stat.iter{i}.exe_time"]
        assert s["stall_cycles"] == fin[f"total_time_breakdown_stall.iter{i}"]
        assert s["overlap_cycles"] == fin[f"total_time_breakdown_overlap.iter{i}"]
        assert s["compute_cycles"] == fin[f"total_time_breakdown_executiuonOnly.iter{i}"]


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_ideal_mode_runs_at_ideal_speed(seed):
    w = _small(seed, 60)
    run = simulate_pages(w, tiny_cfg(60, 100, "lru", is_UVM=0), keep_state=True)
    stats = iteration_stats(run.kernels, run.pcie, run.boundaries, w.exec_cycles, w.pf_cycles, 2)
    assert [s["exe_time_cycles"] for s in stats] == [int(w.exec_cycles.sum())] * 2
    assert all(s["cpu_pf"] + s["ssd_pf"] + s["unalloc_pf"] == 0 for s in stats)


def test_ideal_mode_on_extents_equals_the_ring(monkeypatch):
    # Ideal in the bulk engine takes the LRU policies' int64 extent records (one compile of
    # the engine with them) and gives what the per-page engine's int32 ring gives, to the bit
    from g10fast.engine.page import kernels as pk

    real, dtypes = pk.run_engine, []

    def spy(*args):
        dtypes.append(args[6].dtype)
        return real(*args)

    monkeypatch.setattr(pk, "run_engine", spy)
    w = _small(12, 60)
    cfg = tiny_cfg(60, 100, "lru", is_UVM=0)
    bulk = simulate_pages(w, cfg, keep_state=True)
    ring = simulate_pages(w, cfg, keep_state=True, bulk=False)
    assert dtypes[0] == np.int64 and dtypes[-1] == np.int32
    assert bulk.kernels.tolist() == ring.kernels.tolist()
    assert bulk.boundaries.tolist() == ring.boundaries.tolist()
    assert bulk.pcie.tolist() == ring.pcie.tolist()
    assert np.array_equal(bulk.pstate, ring.pstate)


def test_trace_does_not_change_results():
    w = _small(21, 50)
    cfg = tiny_cfg(50, 20, "lru")
    a = simulate_pages(w, cfg)
    b = simulate_pages(w, cfg, trace=Collector())
    assert a.kernels.tolist() == b.kernels.tolist()
    assert a.pcie.tolist() == b.pcie.tolist()


def test_queue_overflow_rerun_keeps_one_copy_of_the_events(tmp_path, monkeypatch):
    """A queue ring too small for one step makes the engine start over with a larger one;
    the events the first attempt wrote are dropped (rewind), not written twice."""
    from g10fast.trace import COLUMNS, EventTraceWriter, open_trace

    w = _small(6, 45)  # its first overflow (ring of 4 runs) comes after events were written
    cfg = tiny_cfg(45, 30, "lru")
    ref = Collector()
    a = simulate_pages(w, cfg, trace=ref)
    path = tmp_path / "t.h5"
    rewinds = []
    real_rewind = EventTraceWriter.rewind
    monkeypatch.setattr(
        EventTraceWriter, "rewind", lambda self, n: (rewinds.append((self.n_events, n)), real_rewind(self, n))
    )
    with EventTraceWriter(path, config={}, chunk_rows=64, threads=0) as wr:
        b = simulate_pages(w, cfg, trace=wr, queue_capacity=4, progress=lambda done, total: None)
    assert rewinds and all(have > 0 and n == 0 for have, n in rewinds)
    assert a.kernels.tolist() == b.kernels.tolist()
    with open_trace(path) as tr:
        cols = tr.read()
        got = np.stack([np.asarray(cols[c], dtype=np.int64) for c in COLUMNS], axis=1)
    want = ref.events

    # pause points (and so the splitting of runs into rows) depend on the ring size: compare
    # pages per (kind, iteration, kernel, tensor, src, dst, value)
    def pages(ev):
        out = {}
        for row in ev.tolist():
            key = (
                row[1],
                row[2],
                row[3],
                row[4],
                row[7],
                row[8],
                row[9] if row[1] not in (pk.EV_KERNEL, pk.EV_TRANSFER) else 0,
            )
            out[key] = out.get(key, 0) + (row[6] if row[1] != pk.EV_TRANSFER else 1)
        return out

    assert pages(got) == pages(want)


def test_stall_model_bert_kernel0():
    """Simulator spec §7: 2 SSD pages among 18 input pages, 12,304 unallocated output pages."""
    f = 1_200_000_000
    t = pk.page_fault_time(
        135168,
        135168 * 10,
        47334603,
        f,
        15.754e9 / f,
        3.2e9 / f,
        float(f),
        45,
        20,
        0,
        2,
        16,
        0,
        0,
        12288,
        18,
        12288,
    )
    assert t == 4952486


def test_stall_model_ssd_bw_equal_to_pcie_bw():
    """O-11: with SSD BW == PCIe BW the host-side cap is 0. Without output faults T_cpu is
    inf + 0/0 = NaN and the SSD time wins the max; with host faults on both sides it is +inf,
    which the artifact's double -> uint64 conversion turns into a ΔPF of 0."""
    f = 1_200_000_000
    bpc = 32e9 / f
    args = (135168, 135168 * 10, 47334603, f, bpc, bpc, float(f), 45, 20)
    # 2 SSD + 16 host pages in, nothing out: ΔPF = 2 pages over the SSD link only
    t = pk.page_fault_time(*args, 16, 2, 0, 0, 0, 0, 18, 0)
    assert t == 135168 + int(2 * 4096 / 32e6 / 1000 * f) == 135168 + 307
    # host pages in and out besides the SSD ones: T_cpu = +inf -> ΔPF 0
    assert pk.page_fault_time(*args, 16, 2, 0, 4, 0, 0, 18, 4) == 135168
    # the twin's independent evaluation agrees on both
    from twin import stall_model

    c = SimpleNamespace(f=f, GPU_Bpc=bpc, SSD_Bpc=bpc, l_sys=45, l_ssd=20)
    assert stall_model(135168, 1351680, 47334603, 18, 16, 2, 0, 0, 0, 0, 0, c) == 135168 + 307
    assert stall_model(135168, 1351680, 47334603, 18, 16, 2, 0, 4, 4, 0, 0, c) == 135168


# ------------------------------------------------------------------------------------------
# regression against the original binary
# ------------------------------------------------------------------------------------------


def _final(run_dir: Path) -> dict:
    out = {}
    for line in (run_dir / "sim_result.final").read_text().splitlines():
        m = re.match(r"(\S+) = (\S+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def _kernel_lines(run_dir: Path) -> np.ndarray:
    rows = []
    pat = re.compile(r"(\d+)\+(\d+):\[(\d+),(\d+)\]\((\d+),(\d+)\)<(\d+),(\d+),(\d+),(\d+)>\((\d+),(\d+)\)")
    with gzip.open(run_dir / "sim_result.kernel.gz", "rt") as f:
        for line in f:
            m = pat.match(line)
            if m:
                g = [int(x) for x in m.groups()]
                rows.append(g[:4] + g[6:12])
    return np.asarray(rows, dtype=np.int64)


def _run_reference(name: str):
    from g10fast.config import read_g10_config
    from g10fast.run import run

    model, batch, policy = name.split("-")
    folder = {"BERT": "BERT", "ResNet152": "ResNet152"}[model]
    cfg = read_g10_config(ARTIFACT / "src" / "configs" / folder / f"{batch}-sim_{policy}.config")
    return run(cfg)


def _compare_final(res, ref, exe_tol, count_tol):
    for it in res["iterations"]:
        i = it["iteration"]
        pairs = [
            ("exe_time_cycles", f"kernel_stat.iter{i}.exe_time", exe_tol),
            ("ideal_exe_time_cycles", f"kernel_stat.iter{i}.ideal_exe_time", 0),
            ("cpu_pf", f"kernel_stat.iter{i}.cpu_pf", count_tol),
            ("ssd_pf", f"kernel_stat.iter{i}.ssd_pf", count_tol),
            ("unalloc_pf", f"kernel_stat.iter{i}.unalloc_pf", count_tol),
        ]
        for mine, theirs, tol in pairs:
            assert it[mine] == pytest.approx(ref[theirs], rel=tol, abs=0.5), (i, mine)
        for mine, theirs in [
            ("cpu_to_gpu", "incoming_pg_cpu"),
            ("ssd_to_gpu", "incoming_pg_ssd"),
            ("gpu_to_cpu", "outgoing_pg_cpu"),
            ("gpu_to_ssd", "outgoing_pg_ssd"),
        ]:
            key = f"pcie_stat.iter{i}.{theirs}"
            assert it["pages"][mine] == pytest.approx(ref.get(key, 0.0), rel=count_tol, abs=0.5)


@needs_shared
def test_bert128_lru_reference():
    res = _run_reference("BERT-128-lru")
    ref = _final(REFERENCE / "BERT-128-lru")
    _compare_final(res, ref, exe_tol=0.005, count_tol=0.01)
    # per-kernel spot checks (simulator spec §16)
    k = res["kernels"]
    assert k[0, 2:8].tolist() == [0, 4952486, 0, 0, 2, 12304]
    assert k[1, 2:8].tolist() == [4952486, 40666593, 0, 0, 22892, 12304]
    # every kernel line of the reference (start, end, PF counts, occupancy)
    lines = _kernel_lines(REFERENCE / "BERT-128-lru")
    assert k.shape == lines.shape
    assert np.array_equal(k, lines)
    assert res["reported"] == 1


@needs_shared
def test_bert128_lru_first_tick_and_tick_grid(tmp_path):
    from g10fast.config import read_g10_config
    from g10fast.run import run
    from g10fast.trace import open_trace
    from g10fast.trace_ranges import expand_ticks

    cfg = read_g10_config(ARTIFACT / "src" / "configs" / "BERT" / "128-sim_lru.config")
    cfg = cfg.replace(num_iteration=1)
    path = tmp_path / "t.h5"
    res = run(cfg, trace_path=path)
    tr = open_trace(path)
    try:
        ev = expand_ticks(tr.to_buffer())  # (range rows: one row a tick)
    finally:
        tr.close()
    t0 = ev[(ev[:, 0] == 0) & np.isin(ev[:, 1], [pk.EV_FETCH, pk.EV_ALLOC])]
    # first pcie line `0[0]3899(2=2+0)(0=0+0)`: 3,899 pages allocated, 2 of them from the SSD
    assert t0[:, 6].sum() == 3899
    assert t0[t0[:, 1] == pk.EV_FETCH, 6].sum() == 2
    moves = ev[np.isin(ev[:, 1], [pk.EV_FETCH, pk.EV_ALLOC, pk.EV_EVICT])]
    assert (moves[:, 0] % 15599 == 0).all()  # ticks at multiples of ii
    assert res["iterations"][0]["exe_time_cycles"] == 16259680046


@needs_shared
def test_resnet152_256_lru_reference():
    res = _run_reference("ResNet152-256-lru")
    ref = _final(REFERENCE / "ResNet152-256-lru")
    _compare_final(res, ref, exe_tol=0.005, count_tol=0.01)


def test_lru_lockstep_generation_wrap_compacts_rarely_and_stays_exact():
    """Pages removed from the LRU list with their slot unknown (pre-eviction,
    pre-deallocation) get a new generation; a whole tensor's pages do so in lockstep. Their
    generations wrap together: the list must not be compacted once per page (Llama-7B under
    G10 spent hours so), and no stale entry may ever look live."""
    n, cap = 1000, 4096
    lru = np.zeros(cap + pk.STALE_BUCKETS, dtype=np.int32)
    pstate = np.full(n, pk.IN_GPU, dtype=np.uint8)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_LCAP] = cap
    for p in range(n):
        lru[p] = p << pk.GEN_SHIFT
    S[pk.S_LRU_TAIL] = n
    compactions = 0
    for _round in range(40):
        for p in range(n):
            before = S[pk.S_LRU_STALE]
            pk._lru_remove_unknown(lru, pstate, S, p)
            compactions += S[pk.S_LRU_STALE] != before + 1
            # the page comes back to the GPU: a new entry with its new generation
            if S[pk.S_LRU_TAIL] - S[pk.S_LRU_HEAD] >= cap:
                pk._lru_compact(lru, pstate, S)
                compactions += 1
            t = S[pk.S_LRU_TAIL]
            lru[t & (cap - 1)] = (p << pk.GEN_SHIFT) | (int(pstate[p]) >> pk.GEN_SHIFT)
            S[pk.S_LRU_TAIL] = t + 1
        live = [
            int(lru[s & (cap - 1)]) >> pk.GEN_SHIFT
            for s in range(S[pk.S_LRU_HEAD], S[pk.S_LRU_TAIL])
            if pk._lru_live(lru, pstate, S, s)
        ]
        assert sorted(live) == list(range(n))  # exactly one live entry per page
    # the ring fills every ~3 rounds; generation wraps add about one compaction per 16 rounds
    assert compactions <= 40 // 3 + 40 // 16 + 2


def test_lru_generation_wrap_of_one_page_leaves_no_ghost():
    """One page removed where its slot is unknown and brought back again and again, with no
    compaction in between: after 15 removals every other generation is taken by one of its
    own stale entries. The list is then compacted while the page is still live, so that none
    of those entries survives; compacting after the bump instead kept the entry carrying the
    new generation, which came back to life with the page (two live entries)."""
    cap = 1 << 12
    lru = np.zeros(cap + pk.STALE_BUCKETS, dtype=np.int32)
    pstate = np.full(2, pk.IN_GPU, dtype=np.uint8)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_LCAP] = cap
    lru[0] = 1 << pk.GEN_SHIFT  # page 1 is live at the head (holds the head)
    lru[1] = 0 << pk.GEN_SHIFT  # page 0
    S[pk.S_LRU_TAIL] = 2
    gens = []
    for _round in range(40):
        pk._lru_remove_unknown(lru, pstate, S, 0)
        g = int(pstate[0]) >> pk.GEN_SHIFT
        gens.append(g)
        t = S[pk.S_LRU_TAIL]
        lru[t & (cap - 1)] = g  # page 0 comes back with its new generation
        S[pk.S_LRU_TAIL] = t + 1
        live = [
            int(lru[s & (cap - 1)]) >> pk.GEN_SHIFT
            for s in range(S[pk.S_LRU_HEAD], S[pk.S_LRU_TAIL])
            if pk._lru_live(lru, pstate, S, s)
        ]
        assert sorted(live) == [0, 1], (_round, live)
    # generations 1..15, then the compaction, then around again
    assert gens[:15] == list(range(1, 16)) and gens[15] == 0
    assert S[pk.S_LRU_TAIL] - S[pk.S_LRU_HEAD] < 40  # compacted on the way


@pytest.mark.parametrize("seed", range(6))
def test_dealloc_pages_equals_page_by_page_removal(seed):
    """`_dealloc_pages` frees a tensor's pages in one loop; it must leave exactly the state
    that freeing them one by one with `_lru_remove_unknown` leaves: page states and
    generations, the LRU list, its cursor (reset when the cursor's page goes, moved by a
    compaction), the stale masks and the memory counts. Small rings and pre-set generation
    masks force compactions in the middle of the loop."""
    rng = np.random.default_rng(seed)
    n_pages, cap = 300, 512
    lru = np.zeros(cap + pk.STALE_BUCKETS, dtype=np.int32)
    pstate = np.zeros(n_pages, dtype=np.uint8)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_LCAP] = cap
    # pages arrive in a random order; some leave again (tombstones), some are in transfer,
    # some live on the host
    tail = 0
    for p in rng.permutation(n_pages):
        loc = rng.choice([pk.IN_GPU, pk.IN_GPU, pk.IN_GPU, pk.IN_CPU, pk.NOT_PRESENT])
        g = int(rng.integers(16))
        st = (g << pk.GEN_SHIFT) | loc
        if loc == pk.IN_GPU and rng.random() < 0.1:
            st |= pk.F_TRANSFER
        pstate[p] = st
        if loc == pk.IN_GPU:
            lru[tail] = (p << pk.GEN_SHIFT) | g
            tail += 1
            if rng.random() < 0.2:
                lru[tail] = -1
                tail += 1
    S[pk.S_LRU_TAIL] = tail
    S[pk.S_LRU_CUR] = int(rng.integers(tail))
    S[pk.S_GPU_USED] = int(np.sum((pstate & pk.LOC_MASK) == pk.IN_GPU))
    S[pk.S_HOST_USED] = int(np.sum((pstate & pk.LOC_MASK) == pk.IN_CPU))
    # every generation but a page's own taken in some buckets: removal there compacts
    for p in rng.choice(n_pages, 20, replace=False):
        lru[cap + p] = 0xFFFF & ~(1 << (int(pstate[p]) >> pk.GEN_SHIFT))
        S[pk.S_LRU_STALE] += 1
    tt = np.zeros((1, pk.TT_COLS), dtype=np.int64)
    p0, n = 40, 200
    tt[0, pk.TT_START], tt[0, pk.TT_NP] = p0, n
    tt[0, pk.TT_RES] = int(np.sum((pstate[p0 : p0 + n] & pk.RES_MASK) == pk.IN_GPU))
    ev = np.zeros((1, pk.EV_COLS), dtype=np.int64)

    a = (tt.copy(), pstate.copy(), lru.copy(), S.copy())
    freed = pk._dealloc_pages(0, 0, p0, n, a[0], a[1], a[2], a[3], ev)

    tt_b, ps_b, lru_b, S_b = tt.copy(), pstate.copy(), lru.copy(), S.copy()
    freed_b = 0
    compactions_b = 0
    for p in range(p0, p0 + n):
        st = int(ps_b[p])
        if st & pk.F_TRANSFER:
            continue
        loc = st & pk.LOC_MASK
        if loc == pk.IN_GPU:
            S_b[pk.S_GPU_USED] -= 1
            tt_b[0, pk.TT_RES] -= 1
            before = S_b[pk.S_LRU_STALE]
            pk._lru_remove_unknown(lru_b, ps_b, S_b, p)
            compactions_b += S_b[pk.S_LRU_STALE] != before + 1
        elif loc == pk.IN_CPU:
            S_b[pk.S_HOST_USED] -= 1
        freed_b += loc != pk.NOT_PRESENT
        ps_b[p] = int(ps_b[p]) & ~pk.LOC_MASK
    assert compactions_b > 0  # the case is exercised
    assert freed == freed_b
    assert np.array_equal(a[0], tt_b)
    assert np.array_equal(a[1], ps_b)
    assert np.array_equal(a[2], lru_b)
    assert np.array_equal(a[3], S_b)
