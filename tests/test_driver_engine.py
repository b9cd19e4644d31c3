"""The driver engine (g10fast/engine/driver*.py): against its plain-Python twin on small
synthetic workloads, conservation after every run, the density and TBN trees against
hand-worked cases, PUMP's launch window against a hand-worked sequence, the runner."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from driver_twin import Twin, marked_region, twin_params, twin_simulate  # noqa: F401
from synth import make_workload

from g10fast import aot
from g10fast.engine.driver import kernels as dk
from g10fast.engine.driver import (
    DriverHints,
    DriverOptions,
    check_invariants,
    driver_options,
    iteration_stats,
    simulate_driver,
    system_params,
    transfer_gbps,
)
from g10fast.errors import InputError
from g10fast.system import System
from g10fast.workload.model import PAGE_SIZE


def tiny_system(chunks=2, host_pages=600, **kw):
    return System(
        gpu_memory_gb=chunks * 2**21 / 2**30,
        gpu_frequency_ghz=1.2,
        host_memory_gb=host_pages * PAGE_SIZE / 2**30,
        host_link_gbps=16.0,
        ssd_bandwidth_gbps=3.2,
        fault_latency_us=45.0,
        **kw,
    )


def small_workload(seed):
    return make_workload(
        seed, n_kernels=7, n_tensors=44, max_pages=150, max_kernel_pages=400, p_workspace=0.2
    )


def compare(w, system, opts, hints=None, n_iter=2):
    run = simulate_driver(w, system, opts, hints, num_iteration=n_iter)
    prm = twin_params(system, opts)
    kern, cnts, loc, fail = twin_simulate(w, prm, opts, hints, n_iter)
    assert (run.status != "ok") == fail
    if fail:
        return run
    assert run.kernels.tolist() == [list(r) for r in kern]
    keys = (
        "alloc",
        "in_cpu",
        "in_ssd",
        "out_cpu",
        "out_ssd",
        "clean",
        "discard",
        "prefetched",
        "faults",
        "batches",
        "pf_cycles",
        "grown",
    )
    assert run.counters.tolist() == [[c[k] for k in keys] for c in cnts]
    assert run.loc.tolist() == loc
    check_invariants(run, w)
    return run


COMBOS = list(
    itertools.product(("density", "tbn", "none"), ("alloc2m", "access2m", "lru4k"), (False, True))
) + [("tbn", "tbn64k", False), ("density", "tbn64k", True)]


@pytest.mark.parametrize("i,combo", list(enumerate(COMBOS)))
def test_engine_matches_twin(i, combo):
    pf, ev, clean = combo
    opts = DriverOptions(
        prefetcher=pf,
        evict=ev,
        skip_clean_writeback=clean,
        fault_batch=(256, 16, 64)[i % 3],
        transfer_curve=("uvmsmart", "flat")[i % 2],
        big_page_kib=(64, 16)[(i // 2) % 2],
        density_threshold=(51, 30)[(i // 5) % 2],
    )
    w = small_workload(100 + i)
    system = tiny_system(chunks=3, host_pages=(700, 150)[i % 2])
    run = compare(w, system, opts)
    assert run.status == "ok"
    assert run.counters[:, dk.C_FAULTS].sum() > 0
    c = run.counters.sum(axis=0)
    assert c[dk.C_OUT_CPU] + c[dk.C_OUT_SSD] + c[dk.C_CLEAN_DROP] > 0  # evictions
    if i % 2 and not clean:
        assert c[dk.C_OUT_SSD] > 0  # the host spilled to the SSD


@pytest.mark.parametrize(
    "i,fb,pf,ev,clean",
    [
        (0, 256, "density", "alloc2m", False),
        (1, 128, "density", "access2m", True),
        (2, 512, "none", "alloc2m", True),
        (3, 100, "density", "alloc2m", False),
    ],
)
def test_whole_blocks_match_twin(i, fb, pf, ev, clean):
    """Tensors of whole 2 MiB VA blocks (up to 1,600 pages; the small workloads above never
    fill one): the engine settles a whole block with no page on the GPU a block at a time
    (first touches, blocks whose chunk was evicted); against the twin's page loops, with and
    without hints, fault batches that divide a block and one that does not (100); under
    density with 128-page batches the block is not settled so (a batch's prefetch reaches
    beyond its faults)."""
    w = make_workload(
        300 + i, n_kernels=6, n_tensors=10, max_pages=1600, max_kernel_pages=3300, p_workspace=0.2
    )
    opts = DriverOptions(prefetcher=pf, evict=ev, skip_clean_writeback=clean, fault_batch=fb)
    system = tiny_system(chunks=10, host_pages=(6000, 1500)[i % 2])
    run = compare(w, system, opts)
    assert run.status == "ok"
    c = run.counters.sum(axis=0)
    assert c[dk.C_OUT_CPU] + c[dk.C_OUT_SSD] + c[dk.C_CLEAN_DROP] > 0  # evictions
    assert c[dk.C_IN_CPU] + c[dk.C_IN_SSD] > 0  # and returns
    hints = random_hints(w, 50 + i)
    assert compare(w, system, opts, hints).status == "ok"


def random_hints(w, seed, n_iter=2, with_wait=True):
    rng = np.random.default_rng(seed)
    G = n_iter * w.num_kernels
    n = 25
    iss = np.sort(rng.integers(0, G, n))
    t = rng.integers(0, w.num_tensors, n)
    sp = w.start_page[t].astype(np.int64)
    npg = np.maximum(1, (w.n_pages[t] * rng.uniform(0.2, 1.0, n)).astype(np.int64))
    kind = rng.choice([0, 0, 0, 1, 2, 3], n).astype(np.int64)
    wait = None
    if with_wait:
        wait = np.full(G, -1, np.int64)
        for g in range(G):
            rows = np.nonzero(iss <= g)[0]
            if len(rows) and rng.random() < 0.5:
                wait[g] = rows[-1]
    return DriverHints(iss, sp, npg, kind, wait, preevict_fraction=0.5)


@pytest.mark.parametrize(
    "seed,ev,clean",
    [
        (1, "alloc2m", False),
        (2, "access2m", True),
        (3, "lru4k", False),
        (4, "lru4k", True),
        (5, "alloc2m", True),
        (6, "access2m", False),
        (7, "tbn64k", False),
    ],
)
def test_hints_match_twin(seed, ev, clean):
    w = small_workload(200 + seed)
    opts = DriverOptions(evict=ev, skip_clean_writeback=clean, fault_batch=32, inflight_overlap=seed % 2 == 0)
    run = compare(w, tiny_system(chunks=3, host_pages=300), opts, random_hints(w, seed))
    assert run.status == "ok"
    assert run.counters[:, dk.C_PREFETCHED].sum() > 0


def test_failure_when_a_batch_needs_more_chunks_than_the_gpu():
    w = small_workload(7)
    opts = DriverOptions(fault_batch=4096)
    run = compare(w, tiny_system(chunks=1), opts)
    if run.status != "ok":
        assert run.failure["reason"].startswith("no evictable root chunk")


def test_fits_in_memory_no_writeback_second_iteration():
    w = small_workload(11)
    system = tiny_system(chunks=64)
    run = compare(w, system, DriverOptions())
    c = run.counters
    assert c[1, dk.C_OUT_CPU] == 0 and c[1, dk.C_IN_CPU] == 0 and c[1, dk.C_FAULTS] == 0
    unused = int((np.bincount(np.r_[w.in_idx, w.out_idx], minlength=w.num_tensors) == 0) @ w.n_pages)
    # every used page is zero-filled once; the density prefetcher may populate unused ones
    assert w.num_pages - unused <= c[0, dk.C_ALLOC] <= w.num_pages
    # second iteration is compute only
    K = w.num_kernels
    assert run.kernels[2 * K - 1, dk.K_END] - run.kernels[K - 1, dk.K_END] == int(w.exec_cycles.sum())


# --------------------------------------------------------------------------------------------
# hand-worked trees


def _pack(pages):
    bits = np.zeros(512, np.uint8)
    for p in pages:
        bits[p] = 1
    return np.packbits(bits, bitorder="little").view(np.uint64).copy()


def region(resident=(), faulted=(), prefetcher="density", thr=51, big=16, n_exist=512):
    exist = np.zeros(512, np.uint8)
    exist[:n_exist] = 1
    mark = _pack(resident)
    out = np.zeros(dk.W, np.uint64)
    dk.prefetch_bits(
        mark,
        n_exist,
        _pack(faulted),
        {"none": 0, "density": 1, "tbn": 2}[prefetcher],
        thr,
        big,
        out,
        np.zeros(dk.W, np.uint64),
    )
    out = np.unpackbits(out.view(np.uint8), bitorder="little")
    res = set(resident)
    got = {int(o) for o in np.nonzero(out)[0]} - res
    # the twin agrees
    tw = (
        marked_region(
            [1 if i in res else 0 for i in range(512)], exist.tolist(), list(faulted), prefetcher, thr, big
        )
        - res
    )
    assert got == tw
    return got


@pytest.mark.parametrize("big", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
def test_region_matches_twin_every_big_page(big):
    """The growth (word-parallel) and the trees against the twin's page loops, at every big
    page size the options allow (4 KiB .. 2 MiB), on random blocks: sparse and dense
    residency, a partial last block, faults clustered or spread."""
    rng = np.random.default_rng(big)
    for case in range(12):
        n_exist = int(rng.choice([512, 512, int(rng.integers(1, 512))]))
        dens = (0.0, 0.3, 0.7, 0.95)[case % 4]
        resident = {int(o) for o in np.nonzero(rng.random(n_exist) < dens)[0]}
        free = [o for o in range(n_exist) if o not in resident]
        if not free:
            continue
        if case % 3 == 0:  # one run of faults
            a = int(rng.integers(0, len(free)))
            faulted = free[a : a + int(rng.integers(1, 300))]
        else:
            faulted = sorted(
                rng.choice(free, min(len(free), int(rng.integers(1, 40))), replace=False).tolist()
            )
        for pf in ("density", "tbn", "none"):
            thr = int(rng.choice([51, 50, 25, 75, 30, 100]))  # 50, 25, 75: ties
            region(sorted(resident), faulted, pf, thr, big, n_exist)  # asserts the twin


def test_density_single_fault_is_its_big_page():
    # 16 of 16 marked (100 %); 16/32 = 50 % is not over 51 %: the 64 KiB big page only
    assert region(faulted=[3]) == set(range(0, 16))


def test_density_grows_to_largest_dense_subtree():
    # marks 0..47: [0,32) 100 %, [0,64) 75 %, [0,128) 37.5 %: the region is [0,64)
    assert region(resident=range(16, 48), faulted=[0]) == set(range(0, 16)) | set(range(48, 64))


def test_density_takes_the_largest_even_above_a_sparse_level():
    # fault 0 (0..15) + resident 32..255: [0,32) 50 % fails, [0,64) 75 %, [0,128) 87.5 %,
    # [0,256) 93.75 % pass, [0,512) 46.9 % fails: [0,256)
    assert region(resident=range(32, 256), faulted=[0]) == set(range(0, 32))


def test_density_threshold_edge():
    # 262 of 512 marked: 26200 > 26112: the whole block
    assert region(resident=range(16, 262), faulted=[0]) == set(range(0, 16)) | set(range(262, 512))
    # 261 of 512: 26100 < 26112: only [0,256)
    assert region(resident=range(16, 261), faulted=[0]) == set(range(0, 16))
    # a threshold of 50 takes it
    assert region(resident=range(16, 261), faulted=[0], thr=50) == set(range(0, 16)) | set(range(261, 512))


def test_density_partial_block():
    # a VA block with 40 pages: fault at 33 -> big page 32..39 (exists), [32,40) of [32,64)
    # is 8/8 existing = 100 %, [0,64): 8/40 = 20 %
    assert region(faulted=[33], n_exist=40) == set(range(32, 40))


def test_tbn_fills_leaf_over_half_and_cascades():
    # leaf [16,32) has 9 of 16 (> half): filled; [0,32) then full; [0,64) 32/64 is not > half
    assert region(resident=range(16, 25), faulted=[0], prefetcher="tbn") == set(range(0, 16)) | set(
        range(25, 32)
    )
    # [48,64) has 8/16 (not > half) at the leaf level, but [0,64) has 56/64: filled there
    assert region(resident=range(16, 56), faulted=[0], prefetcher="tbn") == set(range(0, 16)) | set(
        range(56, 64)
    )


def test_none_is_big_page_only():
    assert region(resident=range(16, 400), faulted=[5], prefetcher="none") == set(range(16))


# --------------------------------------------------------------------------------------------
# PUMP's window


def tree_preevict_case(resident, lru_head, npages=1024, need=1):
    """Block 0 holds `resident` pages (ascending in the 4 KiB LRU, lru_head first); make room
    for `need` pages of block 1 under evict = tbn64k. Returns (evicted pages, pages out)."""
    nb = (npages + 511) // 512
    BG = np.zeros((nb, dk.W), np.uint64)
    z = np.zeros((nb, dk.W), np.uint64)
    BG[0] = _pack(resident)
    gcount = np.zeros(nb, np.int32)
    gcount[0] = len(resident)
    pprev = np.full(npages, -1, np.int32)
    pnext = np.full(npages, -1, np.int32)
    order = [lru_head] + [p for p in sorted(resident) if p != lru_head]
    for a, b in zip(order, order[1:]):
        pnext[a], pprev[b] = b, a
    S = np.zeros(dk.S_LEN, np.int64)
    S[[dk.S_BHEAD, dk.S_BTAIL]] = -1
    S[dk.S_PHEAD], S[dk.S_PTAIL] = order[0], order[-1]
    S[dk.S_GPU] = len(resident)
    S[dk.S_NPAGES] = npages
    cnt = np.zeros((1, dk.C_COLS), np.int64)
    tab = np.arange(513, dtype=np.int64)  # a run of n pages costs n
    cyc = dk._make_room(
        1,
        need,
        BG,
        z.copy(),
        z.copy(),
        z[:1].copy(),
        z[:1].copy(),
        gcount,
        np.full(nb, -1, np.int32),
        np.full(nb, -1, np.int32),
        pprev,
        pnext,
        np.full(nb, -1, np.int64),
        S,
        dk.EV_TBN64K,
        False,
        len(resident),
        0,
        10**6,
        tab,
        tab,
        cnt,
        0,
        np.zeros((dk.N_TMP, dk.W), np.uint64),
        np.zeros((1, dk.EV_COLS), np.int64),
        None,
        0,
        0,
    )
    left = set(np.nonzero(np.unpackbits(BG[0].view(np.uint8), bitorder="little"))[0].tolist())
    # the LRU list holds exactly the pages left, in their order
    lst, v = [], S[dk.S_PHEAD]
    while v >= 0:
        lst.append(int(v))
        v = pnext[v]
    assert lst == [p for p in order if p in left]
    assert cnt[0, dk.C_OUT_CPU] == len(resident) - len(left) == cyc
    assert S[dk.S_GPU] == gcount[0] == len(left)
    return set(resident) - left


def test_tbn_pre_eviction_hand_worked():
    """UVMSmart's tree pre-eviction (64 KiB basic blocks = 16 pages; a run of n pages costs n
    cycles here). Block 0: pages 0-15, 16-19, 32-47, 48-511 resident; LRU head 33. The head's
    basic block 32-47 goes; leaves: 16-31 holds 4 < 8 -> 16-19 go; [0,32) 16 and [32,64) 16
    are not < half; [0,64) 32 of 64, [0,128) 96 of 128, ... not < half: 20 pages out."""
    res = list(range(0, 20)) + list(range(32, 512))
    assert tree_preevict_case(res, 33) == set(range(16, 20)) | set(range(32, 48))
    # sparse: 0-15, 16-19, 32-63, 128-255; head 33. 32-47 go, then 16-19 (leaf 4/16);
    # [32,64) 16/32 and [0,64) 32/64 stay; [0,128) 32/128 < 64 -> 0-15 and 48-63 go;
    # [0,256) 128/256 stays; [0,512) 128/512 < 256 -> 128-255 go: everything.
    res = list(range(0, 20)) + list(range(32, 64)) + list(range(128, 256))
    assert tree_preevict_case(res, 33) == set(res)
    # a full block: the head's basic block is enough, nothing falls under half
    assert tree_preevict_case(list(range(512)), 100) == set(range(96, 112))


def test_pump_window_hand_worked():
    from g10fast.policies.pump import window_gates

    blocks = [[("A", 4)], [("B", 5)], [("A", 4), ("C", 3)], [("D", 12)], [("E", 1)], [("F", 2)], [("G", 30)]]
    carry = [False, False, False, False, True, False, False]
    gates, pref = window_gates(blocks, carry, cap=10, gpu_bytes=20)
    # g2: 9 + 3 > 10 -> pop g0 (A still referenced by g2's set: 5 + 4 + 3 > 10) -> pop g1
    # g3: D alone exceeds the cap: the window empties (pop g2) and it goes on
    # g4: a cuBLAS call (macro bug): pops g3, never enters the window; E joins g5's set
    # g6: G is larger than the GPU: not prefetched
    assert gates == [-1, -1, 1, 2, 3, 3, 5]
    assert pref[5] == [("E", 1), ("F", 2)]
    assert pref[6] == []
    assert pref[3] == [("D", 12)]


def _window_gates_twin(blocks, carry, cap, gpu_bytes):
    """`window_gates` as prefetch.cpp reads: before each pop, the window's bytes with the
    set's blocks not in it summed again."""
    from collections import deque

    window, ref, win_bytes, last_pop, pending, gates, pref = deque(), {}, 0, -1, [], [], []
    for g, B in enumerate(blocks):
        cur = list(dict.fromkeys(pending + list(B)))
        while win_bytes + sum(s for b, s in cur if ref.get((b, s), 0) == 0) > cap and window:
            j, Bj = window.popleft()
            last_pop = j
            for key in Bj:
                ref[key] -= 1
                if ref[key] == 0:
                    win_bytes -= key[1]
        gates.append(last_pop)
        pref.append([(b, s) for b, s in cur if s <= gpu_bytes])
        if carry[g]:
            pending = cur
            continue
        pending = []
        window.append((g, cur))
        for key in cur:
            if ref.get(key, 0) == 0:
                win_bytes += key[1]
            ref[key] = ref.get(key, 0) + 1
    return gates, pref


@pytest.mark.parametrize("seed", range(20))
def test_pump_window_against_twin(seed):
    from g10fast.policies.pump import window_gates

    rng = np.random.default_rng(seed)
    ids = [f"T{i}" for i in range(int(rng.integers(3, 30)))]
    sizes = {t: int(rng.integers(1, 12)) for t in ids}
    blocks = [
        [(t, sizes[t]) for t in rng.choice(ids, size=int(rng.integers(0, 6)))]
        for _ in range(int(rng.integers(5, 80)))
    ]
    carry = [bool(rng.random() < 0.2) for _ in blocks]
    cap, gpu = int(rng.integers(5, 40)), int(rng.integers(5, 12))
    assert window_gates(blocks, carry, cap, gpu) == _window_gates_twin(blocks, carry, cap, gpu)


# --------------------------------------------------------------------------------------------
# transfers, options, the runner


def test_uvmsmart_curve_anchor_values():
    # anchors.md §4: a 16 GB/s link -> about 2.2 GB/s at 4 KiB, 10.4 at 64 KiB, 6 at 2 MiB
    assert transfer_gbps(4096, 16, "uvmsmart", True) == pytest.approx(2.17, abs=0.02)
    assert transfer_gbps(65536, 16, "uvmsmart", True) == pytest.approx(10.39, abs=0.02)
    assert transfer_gbps(2**21, 16, "uvmsmart", True) == pytest.approx(5.99, abs=0.02)
    assert transfer_gbps(2**21, 16, "flat", True) == 16


def test_bad_options_are_input_errors():
    with pytest.raises(InputError):
        driver_options({"prefetcher": "bogus"})
    with pytest.raises(InputError) as e:
        driver_options({"no_such": 1})
    assert str(e.value).startswith(
        "parameter 'engine.compat.no_such': unknown driver-engine "
        "option 'no_such' (known: big_page_kib, curve_halve_2mib, "
    )
    with pytest.raises(InputError):
        driver_options({"fault_batch": 0})


DRIVER_POLICIES = ["uvm", "tbnp", "pump", "g10@driver", "deepum@driver", "deepum-learned"]


@pytest.mark.parametrize("policy", DRIVER_POLICIES)
def test_runner_policies(policy):
    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec

    w = make_workload(3, n_kernels=10, n_tensors=20, max_pages=200, max_kernel_pages=600)
    opts = {"coverage": "framework_hooks"} if policy == "pump" else None
    spec = make_spec(
        WorkloadSource("builtin", "bert-base", 1),
        tiny_system(chunks=3),
        policy,
        opts,
        engine={"num_iteration": 3},
    )
    r = run(spec, workload=w)
    assert r["status"] == "ok" and r["engine"] == "driver"
    assert r["driver_options"]["prefetcher"] in ("density", "tbn")
    assert r["reported"] == 2
    it = r["iterations"][2]
    assert it["exe_time_cycles"] >= it["ideal_exe_time_cycles"] == int(w.exec_cycles.sum())
    assert it["exe_time_s"] > 0
    if policy != "uvm" and policy != "tbnp":
        assert r["plan"]["hints"] > 0


def test_driver_policies_not_in_the_default_comparison(tmp_path):
    from g10fast import policies
    from g10fast.spec import WorkloadSource, make_spec

    assert not set(policies.DEFAULT_POLICIES) & {
        "uvm",
        "tbnp",
        "pump",
        "g10_driver",
        "deepum_driver",
        "deepum_learned",
    }
    assert policies.get("g10@driver").engine == "driver"
    with pytest.raises(InputError):
        make_spec(WorkloadSource("builtin", "bert-base", 1), tiny_system(), "pump", {"cap_factor": 0})


def trace_totals(path, n_iter):
    """Per iteration, from a trace: pages per (kind, src, dst) and KERNEL rows' fault counts."""
    from g10fast.trace import open_trace

    with open_trace(path) as tr:
        c = tr.read()
    out = []
    for it in range(n_iter):
        m = c["iteration"] == it
        tot = {}
        for kind, src, dst, n in zip(c["kind"][m], c["src"][m], c["dst"][m], c["count"][m]):
            key = (int(kind), int(src), int(dst))
            tot[key] = tot.get(key, 0) + int(n)
        out.append(tot)
    return out, c


@pytest.mark.parametrize(
    "policy,compat,whole",
    [
        ("uvm", {}, False),
        ("uvm", {"skip_clean_writeback": True}, False),
        ("g10_driver", {}, False),
        ("tbnp", {"evict": "lru4k"}, False),
        ("uvm", {}, True),
        ("g10_driver", {}, True),
    ],
)
def test_event_trace_agrees_with_the_statistics(tmp_path, policy, compat, whole):
    """The driver engine's event trace (docs/trace-format.md schema) against its result:
    kernel rows, faults, pages fetched / zero-filled / evicted / dropped per tier, per
    iteration; the engine's results are the same with and without the trace (`whole`:
    tensors of whole VA blocks, whose empty blocks a traced run settles batch by batch and
    an untraced one, where no page is populated, at once)."""
    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec
    from g10fast.trace import EventKind as E, Location as L

    assert (dk.EV_KERNEL, dk.EV_FAULT, dk.EV_FETCH, dk.EV_ALLOC, dk.EV_EVICT, dk.EV_HINT, dk.EV_DEALLOC) == (
        E.KERNEL,
        E.FAULT,
        E.FETCH,
        E.ALLOC,
        E.EVICT,
        E.HINT,
        E.DEALLOC,
    )
    assert (dk.LOC_NONE, dk.LOC_SSD, dk.LOC_HOST, dk.LOC_GPU) == (L.NOT_PRESENT, L.IN_SSD, L.IN_CPU, L.IN_GPU)
    w = small_workload(3)
    system = tiny_system(chunks=3, host_pages=150)
    if whole:
        w = make_workload(
            300, n_kernels=6, n_tensors=10, max_pages=1600, max_kernel_pages=3300, p_workspace=0.2
        )
        system = tiny_system(chunks=10, host_pages=1500)
    spec = make_spec(
        WorkloadSource("builtin", "bert-base", 1),
        system,
        policy,
        engine={"compat": compat} if compat else None,
    )
    r0 = run(spec, workload=w)
    r = run(spec, workload=w, trace_path=tmp_path / "t.h5")
    assert r["iterations"] == r0["iterations"]
    assert np.array_equal(r["kernels"], r0["kernels"])
    per_it, c = trace_totals(tmp_path / "t.h5", len(r["iterations"]))
    K = w.num_kernels
    assert int((c["kind"] == E.KERNEL).sum()) == len(r["iterations"]) * K
    km = c["kind"] == E.KERNEL
    assert c["time"][km].tolist() == r["kernels"][:, dk.K_START].tolist()
    assert c["value"][km].tolist() == r["kernels"][:, dk.K_END].tolist()
    assert (c["tensor"] == -1).all()
    for it, tot in zip(r["iterations"], per_it):
        p = it["pages"]
        g = tot.get
        assert g((E.KERNEL, -1, -1), 0) == it["faults"] > 0
        # FAULT rows: distinct pages per batch (a page two tensors share, touched twice
        # before its batch, is one page but two faults)
        nf = sum(v for (kk, _, _), v in tot.items() if kk == E.FAULT)
        assert it["fault_batches"] <= nf <= it["faults"]
        assert g((E.FETCH, L.IN_CPU, L.IN_GPU), 0) == p["cpu_to_gpu"]
        assert g((E.FETCH, L.IN_SSD, L.IN_GPU), 0) == p["ssd_to_gpu"]
        assert g((E.ALLOC, L.NOT_PRESENT, L.IN_GPU), 0) == p["alloc"]
        assert g((E.EVICT, L.IN_GPU, L.IN_CPU), 0) == p["gpu_to_cpu"]
        assert g((E.EVICT, L.IN_GPU, L.IN_SSD), 0) == p["gpu_to_ssd"]
        assert g((E.EVICT, L.IN_GPU, L.NOT_PRESENT), 0) == p["clean_dropped"]
        assert sum(v for (kk, _, _), v in tot.items() if kk == E.DEALLOC) == p["discarded"]
        if policy == "g10_driver":
            assert g((E.HINT, -1, L.IN_GPU), 0) > 0
    if compat.get("skip_clean_writeback"):
        assert sum(t.get((E.EVICT, L.IN_GPU, L.NOT_PRESENT), 0) for t in per_it) > 0
    # the trace's bytes moved = the result's
    moved = sum(int(n) for k_, n in zip(c["kind"], c["count"]) if k_ in (E.FETCH, E.EVICT)) - sum(
        t.get((E.EVICT, L.IN_GPU, L.NOT_PRESENT), 0) for t in per_it
    )
    assert moved * PAGE_SIZE == sum(
        (it["pages"]["incoming"] + it["pages"]["outgoing"]) * PAGE_SIZE for it in r["iterations"]
    )


def test_event_trace_small_buffer_flushes_from_the_kernel():
    """A trace buffer of 7 rows: the kernel hands full buffers to the sink (object mode);
    the rows are those of one large buffer, in order."""

    class Sink:
        def __init__(self):
            self.rows = []

        def append(self, buf):
            self.rows.append(np.array(buf))

    w = small_workload(4)
    opts = DriverOptions()
    a, b = Sink(), Sink()
    simulate_driver(w, tiny_system(chunks=3), opts, trace=a, trace_rows=7)
    simulate_driver(w, tiny_system(chunks=3), opts, trace=b)
    assert len(a.rows) > 10 and all(len(x) == 7 for x in a.rows[:-1])
    assert np.array_equal(np.concatenate(a.rows), np.concatenate(b.rows))


def test_traced_engine_compiles_without_inlining(monkeypatch):
    """A traced run calls `simulate` with `tr` True while the block operations are not to be
    inlined (`blocks._INLINE` False: the traced engine's compile stays short), and the flag is
    back to True after it, also when the run raises; an untraced run leaves it True."""
    seen = []
    real = dk.simulate

    def spy(*args):
        seen.append((args[-1], dk.blocks._INLINE[0]))
        return real(*args)

    monkeypatch.setattr(dk, "simulate", spy)
    monkeypatch.setattr(aot, "_STATE", {"entries": {}, "why": "test"})
    w = small_workload(3)
    rows = []
    simulate_driver(w, tiny_system(chunks=3), DriverOptions(), trace=rows)
    simulate_driver(w, tiny_system(chunks=3), DriverOptions())
    assert seen == [(True, False), (None, True)]
    assert dk.blocks._INLINE == [True]

    def boom(*args):
        raise RuntimeError("x")

    monkeypatch.setattr(dk, "simulate", boom)
    with pytest.raises(RuntimeError):
        simulate_driver(w, tiny_system(chunks=3), DriverOptions(), trace=rows)
    assert dk.blocks._INLINE == [True]


def test_deepum_learned_hints_follow_the_fault_log():
    from g10fast.policies.deepum_learned import learned_hints

    w = small_workload(5)
    K = w.num_kernels
    fk = np.array([0, 0, 1, 3, 5], np.int64)
    fb = np.array([0, 2, 1, 4, 3], np.int64)
    h = learned_hints(w, fk, fb, degree=2, n_iter=3, invalidate=False)
    rows = list(zip(h.issue.tolist(), h.start_page.tolist(), h.kind.tolist()))
    # iteration 0 learns: no hint; iteration 1, kernel 0: the blocks of kernels 1 and 2;
    # then kernel k: the blocks of kernel k + 2 (mod K)
    assert all(g >= K for g, _, _ in rows)
    assert [(g, s) for g, s, _ in rows if g == K] == [(K, 512)]
    assert [(g, s) for g, s, _ in rows if g == K + 1] == [(K + 1, 4 * 512)]
    assert [(g, s) for g, s, _ in rows if g == K + 3] == [(K + 3, 3 * 512)]
    assert [(g, s) for g, s, _ in rows if g == 2 * K] == []  # kernel 2 never faulted
    assert set(k for _, _, k in rows) == {0}
    hd = learned_hints(w, fk, fb, degree=2, n_iter=2, invalidate=True)
    assert (hd.kind == 2).any() and (hd.issue >= K).all()


def test_pump_planner_rows_issue_after_the_gate_and_wait():
    from g10fast.planner.deepum import required_csr
    from g10fast.policies import get
    from g10fast.policies.registry import PlanContext
    from g10fast.system import EngineOptions

    w = small_workload(6)
    rec = get("pump")
    system = tiny_system(chunks=3)
    o = rec.make_options({"coverage": "framework_hooks", "cap_factor": 10})
    h = rec.planner(PlanContext(w, system, o, EngineOptions(num_iteration=2), None))
    K = w.num_kernels
    ptr, idx = required_csr(w)
    n_per = [sum(1 for t in idx[ptr[k] : ptr[k + 1]] if w.n_pages[t] > 0) for k in range(K)]
    assert len(h.issue) == 2 * sum(n_per)
    assert (np.diff(h.issue) >= 0).all()
    # every kernel waits for its own last row, issued no later than the kernel itself
    row = 0
    for g in range(2 * K):
        row += n_per[g % K]
        assert h.wait[g] == row - 1
        assert h.issue[row - 1] <= g
    assert h.info["cap_bytes"] == int(system.gpu_memory_gb * 2**30) // 10


def test_deepum_learned_pre_eviction_rows():
    from g10fast.policies.deepum_learned import learned_hints

    w = small_workload(5)
    K = w.num_kernels
    fk = np.array([0, 1, 2], np.int64)
    fb = np.array([0, 1, 2], np.int64)
    h = learned_hints(w, fk, fb, degree=1, n_iter=2, invalidate=False, pre_evict=True, pre_evict_fraction=0.5)
    pre = sorted((int(g), int(s)) for g, s, k in zip(h.issue, h.start_page, h.kind) if k == 3)
    # kernel k pre-evicts kernel k-1's blocks outside kernels k, k+1: k = 1, 2, 3 (mod K)
    assert pre == [(K + 1, 0), (K + 2, 512), (K + 3, 1024)]
    assert h.preevict_fraction == 0.5
    run = compare(w, tiny_system(chunks=3, host_pages=300), DriverOptions(), h)
    assert run.status == "ok"


def test_pump_launch_clock_options():
    from g10fast.policies import get
    from g10fast.policies.registry import PlanContext
    from g10fast.system import EngineOptions

    w = small_workload(6)
    K = w.num_kernels
    rec = get("pump")
    ctx = lambda **o: PlanContext(
        w,
        tiny_system(chunks=3),  # noqa: E731
        rec.make_options({"coverage": "framework_hooks", **o}),
        EngineOptions(num_iteration=2),
        None,
    )
    free = rec.planner(ctx(cap_factor=100, sync="none", launch_queue_depth=0))
    sync = rec.planner(ctx(cap_factor=100, sync="iteration", launch_queue_depth=0))
    depth = rec.planner(ctx(cap_factor=100, sync="none", launch_queue_depth=2))
    assert len(free.issue) == len(sync.issue) == len(depth.issue)
    # rows are issued no earlier than with an unbounded CPU, and in order
    assert (sync.issue >= free.issue).all() and (depth.issue >= free.issue).all()
    assert (np.diff(sync.issue) >= 0).all() and (np.diff(depth.issue) >= 0).all()
    # kernel g's rows: no earlier than its iteration's start (sync) and than g - 2 (depth)
    row_g = np.searchsorted(free.wait, np.arange(len(free.issue)))  # wait rows ascend
    assert (sync.issue >= (row_g // K) * K).all()
    assert (depth.issue >= row_g - 1).all()  # kernels g - 1 and g queued: g - 2 ended


def test_pump_free_sync_under_fresh_allocations():
    """Under fresh_allocations every kernel after which a tensor is freed is a sync point of
    the host (cudaFree synchronises): kernel g's rows are issued no earlier than the start of
    the kernel after the last such kernel before g; free_sync = false or a caching allocator
    leave the rows where the loss sync and the queue put them."""
    from g10fast.engine.driver import allocation_rows
    from g10fast.policies import get
    from g10fast.policies.registry import PlanContext
    from g10fast.system import EngineOptions

    w = small_workload(7)
    K = w.num_kernels
    rec = get("pump")

    def plan(compat, **o):
        return rec.planner(
            PlanContext(
                w,
                tiny_system(chunks=3),
                rec.make_options(
                    {
                        "coverage": "framework_hooks",
                        "cap_factor": 100,
                        "sync": "none",
                        "launch_queue_depth": 0,
                        **o,
                    }
                ),
                EngineOptions(num_iteration=2, compat=compat),
                None,
            )
        )

    caching = plan({})
    fresh = plan({"fresh_allocations": True})
    off = plan({"fresh_allocations": True}, free_sync=False)
    assert caching.issue.tolist() == off.issue.tolist()
    frees = np.nonzero(allocation_rows(w, 1, False)[5])[0]
    assert len(frees) > 0
    syncs = sorted(it * K + int(f) for it in range(2) for f in frees)
    row_g = np.searchsorted(fresh.wait, np.arange(len(fresh.issue)))
    for i, g in enumerate(row_g):
        before = [s for s in syncs if s < g]
        assert fresh.issue[i] >= (before[-1] + 1 if before else 0)
    assert (fresh.issue >= caching.issue).all() and (fresh.issue > caching.issue).any()


def test_driver_result_and_figure_name_engine_and_options(tmp_path):
    """A driver run's result names its engine and options; `run --figure` draws it (it used
    to fail on the driver's system parameters) with them in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.axes
    from g10fast.figures import memory
    from g10fast.run import run
    from g10fast.spec import WorkloadSource, make_spec

    spec = make_spec(
        WorkloadSource("builtin", "bert-base", 1), tiny_system(chunks=3), "tbnp", {"pre_evict": True}
    )
    r = run(spec, workload=small_workload(2))
    assert r["engine"] == "driver"
    assert r["driver_options"]["evict"] == "tbn64k" and r["driver_options"]["prefetcher"] == "tbn"
    titles = []
    orig = matplotlib.axes.Axes.set_title
    matplotlib.axes.Axes.set_title = lambda self, t, *a, **k: (titles.append(t), orig(self, t, *a, **k))[1]
    try:
        memory.plot_memory(r, tmp_path / "m.png")
    finally:
        matplotlib.axes.Axes.set_title = orig
    assert (tmp_path / "m.png").stat().st_size > 0
    assert "driver engine" in titles[0] and "evict=tbn64k" in titles[0].replace("\n", " ")


# ---------------------------------------------------------------------------------------------
# parameters: hand-worked values, the twin's own tables, the presets' [driver] values


def test_ssd_tables_carry_the_latencies_hand_worked():
    """One 4 KiB page from a 3.2 GB/s SSD with 12 us read / 16 us write latency at 1.2 GHz:
    ceil((12e-6 + 4096 / 3.2e9) * 1.2e9) = ceil(14400 + 1536) = 15936 cycles to read,
    ceil((16e-6 + 4096 / 3.2e9) * 1.2e9) = 20736 to write; 512 pages: + 786432."""
    prm = system_params(tiny_system(), DriverOptions())
    assert prm["ssd_r"][1] == 15936 and prm["ssd_w"][1] == 20736
    assert prm["ssd_r"][512] == 14400 + 786432 and prm["ssd_w"][512] == 19200 + 786432
    # the host link has no latency term: 4 KiB on UVMSmart's curve at 16 GB/s
    bw = 2 * 12.0 / np.pi * np.arctan(0.07292 * 4)
    assert prm["h2d"][1] == int(np.ceil(4096 / (bw * 1e9) * 1.2e9))


@pytest.mark.parametrize(
    "opts",
    [
        DriverOptions(),
        DriverOptions(
            transfer_curve="flat", transfer_overhead_us=2.5, link_fraction=0.5, fault_latency_us=10.0
        ),
    ],
)
def test_twin_params_are_the_products(opts):
    system = tiny_system(ssd_read_latency_us=80.0, ssd_write_latency_us=20.0)
    prm, twin = system_params(system, opts), twin_params(system, opts)
    for k in twin:
        assert np.asarray(prm[k]).tolist() == np.asarray(twin[k]).tolist(), k


def test_an_ssd_read_costs_its_latency_in_a_run():
    """A page evicted to the SSD and faulted back costs the SSD read table's entry: two
    systems that differ only in the SSD read latency differ by exactly that latency per
    SSD transfer in the stall."""
    w = make_workload(3, n_kernels=7, n_tensors=44, max_pages=150, max_kernel_pages=400, p_workspace=0.2)
    runs = []
    for lat in (12.0, 512.0):
        run = simulate_driver(
            w, tiny_system(chunks=3, host_pages=150, ssd_read_latency_us=lat), DriverOptions()
        )
        runs.append(run)
    c0, c1 = runs[0].counters.sum(axis=0), runs[1].counters.sum(axis=0)
    assert c0[dk.C_IN_SSD] > 0 and c0.tolist() == c1.tolist()
    extra = int(runs[1].kernels[:, dk.K_STALL].sum() - runs[0].kernels[:, dk.K_STALL].sum())
    per = int(round(500e-6 * 1.2e9))
    n = round(extra / per)  # SSD reads; each table entry is ceil()ed
    assert n >= 1 and abs(extra - n * per) <= n


def test_presets_driver_values():
    """h100-sxm5: the fit (benchmarks/results/driver_fit_h100.json); a100-80-pcie4: the same
    fault and free costs, link_fraction 0.32 of its 25 GB/s; a System built in code keeps
    its uvm.fault_latency_us, its whole link on UVMSmart's curve and no free cost."""
    from g10fast.hardware import load_preset

    prm = system_params(System.from_preset(load_preset("h100-sxm5")), DriverOptions())
    assert (
        prm["link_gbps"],
        prm["fault_latency_us"],
        prm["managed_free_us"],
        prm["small_alloc_pages"],
        prm["transfer_curve"],
    ) == (16.0, 80.5, 892.0, 16, "flat")
    assert prm["managed_free_cycles"] == 1070400
    # flat 16 GB/s: one 2 MiB transfer = 2097152 / 16e9 s = 157286.4 -> 157287 cycles
    assert prm["h2d"][512] == 157287
    a100 = system_params(System.from_preset(load_preset("a100-80-pcie4")), DriverOptions())
    assert (a100["link_gbps"], a100["fault_latency_us"]) == (8.0, 80.5)
    plain = system_params(tiny_system(), DriverOptions())
    assert (
        plain["link_gbps"],
        plain["fault_latency_us"],
        plain["managed_free_us"],
        plain["small_alloc_pages"],
        plain["transfer_curve"],
    ) == (16.0, 45.0, 0.0, 0, "uvmsmart")


def _chain_workload():
    """Three kernels: k0 writes A, k1 reads A and writes B, k2 reads B and the weight W;
    each 512 pages (one VA block each, so the density prefetch of one never reaches another:
    separate cudaMallocManaged ranges never share a VA block)."""
    from g10fast.workload.model import Graph, build_workload, csr_from_lists

    in_ptr, in_idx = csr_from_lists([[], [0], [1, 2]])
    out_ptr, out_idx = csr_from_lists([[0], [1], []])
    g = Graph(
        name="chain",
        batch_size=1,
        raw_size=np.array([512, 512, 512], np.int64) * PAGE_SIZE,
        is_global=np.array([False, False, True]),
        kernel_name=["k0", "k1", "k2"],
        kernel_parent=["0:a", "1:b", "2:c"],
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
    )
    c = np.full(3, 1000, np.int64)
    return build_workload(g, c, c, c, np.zeros(3, np.int64))


def test_fresh_allocations_hand_worked():
    """A is freed after k1 (discarded at k2), B after k2 (discarded at the next iteration's
    k0); so iteration 0 discards A's 512 pages, iteration 1 B's of iteration 0 and A's (1024),
    and both are first-touched afresh each iteration (1024 zero-filled pages each) while W
    stays. One managed free after k1 and one after k2: 100 us = 120000 cycles each."""
    w = _chain_workload()
    system = tiny_system(chunks=8)
    base = dict(fresh_allocations=True, transfer_curve="flat")
    runs = {f: simulate_driver(w, system, DriverOptions(managed_free_us=f, **base)) for f in (0.0, 100.0)}
    c = runs[0.0].counters
    assert c[:, dk.C_DISCARD].tolist() == [512, 1024]
    assert c[:, dk.C_ALLOC].tolist() == [1536, 1024]
    assert runs[100.0].free_cycles.tolist() == [0, 120000, 120000]
    assert (runs[100.0].kernels[:, dk.K_END] - runs[0.0].kernels[:, dk.K_END]).tolist() == [
        0,
        120000,
        240000,
        240000,
        360000,
        480000,
    ]
    st = iteration_stats(runs[100.0], w, 2)
    assert st[1]["stall_cycles"] - iteration_stats(runs[0.0], w, 2)[1]["stall_cycles"] == 240000
    # a caching allocator (the default): populated once, nothing discarded
    plain = simulate_driver(w, system, DriverOptions(transfer_curve="flat"))
    assert plain.counters[:, dk.C_ALLOC].tolist() == [1536, 0]
    assert plain.counters[:, dk.C_DISCARD].tolist() == [0, 0]
    # prefetched at allocation: no fault for A and B, W faults once (iteration 0)
    pf = simulate_driver(w, system, DriverOptions(prefetch_at_alloc=True, **base))
    assert pf.counters[:, dk.C_PREFETCHED].tolist() == [1024, 1024]
    assert pf.counters[:, dk.C_FAULTS].tolist() == [512, 0]
    with pytest.raises(InputError, match="fresh_allocations"):
        DriverOptions(prefetch_at_alloc=True).check()
    # small allocations (<= 2 MiB here: all three) are freed but stay populated
    small = simulate_driver(w, system, DriverOptions(small_alloc_kib=2048, managed_free_us=100.0, **base))
    assert small.counters[:, dk.C_DISCARD].tolist() == [0, 0]
    assert small.counters[:, dk.C_ALLOC].tolist() == [1536, 0]
    assert small.free_cycles.tolist() == [0, 120000, 120000]
