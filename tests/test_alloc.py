"""Allocation traces and the offset-level allocators (g10fast.alloc): each allocator against its
plain-Python twin on random request sequences, the colouring on hand-worked interval sets, the
trace readers' bad input, and the real SINGA traces (skipped when ../shared is absent)."""

from pathlib import Path

import numpy as np
import pytest

from alloc_twin import bump_twin, check_placement, cnmem_twin, colour_twin, pytorch_twin, random_trace
from g10fast.alloc.allocators import ALLOCATORS, colour_intervals, run_allocator
from g10fast.alloc.trace import FREE, LAYER, MALLOC, READ, WRITE, from_workload, read_trace, write_hdf5
from g10fast.errors import InputError

TRACES = Path(__file__).resolve().parents[2] / "shared" / "external" / "singa-traces"
MiB = 1 << 20


@pytest.mark.parametrize("seed", range(6))
def test_cnmem_matches_twin(seed):
    tr = random_trace(np.random.default_rng(seed), n_blocks=80)
    for init in (0, 8 * MiB):
        res = run_allocator(tr, "cnmem", init_bytes=init)
        off, resv = cnmem_twin(tr, init=init)
        assert [int(res.offset[b]) for b in sorted(off)] == [off[b] for b in sorted(off)]
        assert res.reserved.tolist() == resv
        check_placement(tr, res)


@pytest.mark.parametrize("seed", range(6))
def test_pytorch_matches_twin(seed):
    tr = random_trace(np.random.default_rng(100 + seed), n_blocks=80, max_size=30 * MiB)
    for ms, exp in ((0.0, False), (8.0, False), (0.0, True)):
        res = run_allocator(tr, "pytorch", max_split_size_mb=ms, expandable_segments=exp)
        off, resv = pytorch_twin(tr, ms, expandable=exp)
        assert [int(res.offset[b]) for b in sorted(off)] == [off[b] for b in sorted(off)]
        assert res.reserved.tolist() == resv
        check_placement(tr, res)


@pytest.mark.parametrize("seed", range(4))
def test_bump_matches_twin(seed):
    tr = random_trace(np.random.default_rng(200 + seed), n_blocks=50, max_size=64 * 1024)
    for right in (0, 16 * 1024):
        res = run_allocator(tr, "bump", right_min_bytes=right)
        off, st = bump_twin(tr, right_min=right)
        assert st == "ok" and res.status == "ok"
        assert [int(res.offset[b]) for b in sorted(off)] == [off[b] for b in sorted(off)]
        check_placement(tr, res)


@pytest.mark.parametrize("seed", range(4))
def test_colour_matches_twin(seed):
    rng = np.random.default_rng(300 + seed)
    V = 40
    r = rng.integers(0, 50, V)
    d = r + rng.integers(1, 30, V)
    ci = rng.random(V) < 0.15
    d[ci] = 100
    size = rng.integers(1, 1000, V)
    for method in ("BF", "FF"):
        off, pool = colour_intervals(r, d, size, ci, method=method)
        assert off.tolist() == colour_twin(r.tolist(), d.tolist(), size.tolist(), ci.tolist(), method)
        assert pool == max(int((off + size).max()), 2 * int((off + size)[ci].max(initial=0)))
        for u in range(V):  # conflicting intervals of one group get disjoint ranges
            for v in range(u):
                if ci[u] == ci[v] and max(r[u], r[v]) < min(d[u], d[v]):
                    assert off[u] + size[u] <= off[v] or off[v] + size[v] <= off[u]


def test_colour_hand_worked():
    # BF takes the smallest gap that fits, FF the first; pool 400 either way
    r, d = [0, 0, 0, 0, 0, 5], [10, 3, 10, 3, 10, 10]
    size = [100, 90, 80, 70, 60, 50]
    off, pool = colour_intervals(r, d, size, method="BF")
    assert off.tolist() == [0, 100, 190, 270, 340, 270] and pool == 400
    off, pool = colour_intervals(r, d, size, method="FF")
    assert off.tolist() == [0, 100, 190, 270, 340, 100] and pool == 400
    # one conflicting range above the block: placed before it (at the local offset)
    off, _ = colour_intervals([0, 0, 5], [2, 10, 10], [100, 50, 40])
    assert off.tolist() == [0, 100, 0]
    # two ranges: BF never looks before the first range, FF does
    r, d, size = [0, 0, 1, 0, 5], [2, 10, 2, 10, 10], [100, 60, 55, 50, 20]
    assert colour_intervals(r, d, size)[0].tolist() == [0, 100, 160, 215, 160]
    assert colour_intervals(r, d, size, method="FF")[0].tolist() == [0, 100, 160, 215, 0]
    # half-open intervals: [0,4) and [4,8) do not conflict
    assert colour_intervals([0, 4], [4, 8], [10, 10])[0].tolist() == [0, 0]
    # cross-iteration blocks first; normal blocks from 2x their extent (backup region)
    E = 100
    off, pool = colour_intervals([0, 5, 20], [E, E, 30], [100, 50, 30], ci=[1, 1, 0])
    assert off.tolist() == [0, 100, 300] and pool == 330
    off, pool = colour_intervals([0, 5, 20], [E, E, 30], [100, 50, 30], ci=[1, 1, 0], ci_backup=False)
    assert off.tolist() == [0, 100, 150] and pool == 180


def test_oom_is_a_result():
    tr = random_trace(np.random.default_rng(7), n_blocks=60, max_size=8 * MiB)
    full = run_allocator(tr, "cnmem")
    cap = full.peak_reserved // 2
    for name in ALLOCATORS:
        res = run_allocator(tr, name, capacity=cap)
        assert res.status == "oom", name
        o = res.oom
        assert o["bytes"] > 0 and o["free_pieces"] >= 1 and o["largest_free_bytes"] <= o["free_bytes"]
        check_placement(tr, res)
        assert run_allocator(tr, name, capacity=10 * full.peak_reserved).status == "ok"


def test_cuda_malloc_is_the_lower_bound():
    tr = random_trace(np.random.default_rng(11), n_blocks=100)
    lb = run_allocator(tr, "cuda_malloc")
    assert lb.peak_reserved == lb.peak_live == int(tr.live_bytes().max())
    for name in ALLOCATORS:
        res = run_allocator(tr, name)
        assert res.peak_live == lb.peak_live
        assert res.peak_reserved >= lb.peak_live, name


def test_pytorch_options():
    tr = random_trace(np.random.default_rng(5), n_blocks=80, max_size=40 * MiB, streams=2)
    base = run_allocator(tr, "pytorch")
    exp = run_allocator(tr, "pytorch", expandable_segments=True)
    ps = run_allocator(tr, "pytorch", per_stream=True)
    for r in (exp, ps):
        check_placement(tr, r)
    assert exp.peak_reserved <= base.peak_reserved
    # small requests come from 2 MiB segments, large ones rounded to 2 MiB
    assert base.reserved[0] % (2 * MiB) == 0


def test_bad_options():
    tr = random_trace(np.random.default_rng(1), n_blocks=5)
    with pytest.raises(InputError, match="unknown allocator"):
        run_allocator(tr, "tcmalloc")
    with pytest.raises(InputError, match="no option"):
        run_allocator(tr, "cnmem", colour=1)
    with pytest.raises(InputError, match="BF or FF"):
        run_allocator(tr, "singa_colour", method="XF")


# ---------------------------------------------------------------------------------------------
# readers


@pytest.mark.parametrize(
    "text, where, what",
    [
        ("Malloc 0x10 100 5\nFree 0x20 6\n", 2, "not live"),
        ("Malloc 0x10 100 5\nMalloc 0x10 100 6\n", 2, "is live"),
        ("Malloc 0x10 100 5\nRelease 0x10 6\n", 2, "unknown op"),
        ("Malloc 0x10 abc 5\n", 1, "not an integer"),
        ("Malloc 16 100 5\n", 1, "hexadecimal"),
        ("Malloc 0x10 100 5\nFree 0x10\n", 2, "expected 'Free ADDRESS TIME'"),
        ("0 Malloc 0x10 100 5\n1 Free 0x10 100\n", 2, "expected 'INDEX OP"),
        ("0 Malloc 0x10 100 5\n1 Read 0x10 99 6\n", 2, "gives 99 bytes"),
    ],
)
def test_reader_bad_input_names_file_and_line(tmp_path, text, where, what):
    p = tmp_path / "t.text"
    p.write_text(text)
    with pytest.raises(InputError, match=what) as e:
        read_trace(p)
    assert str(e.value).startswith(f"{p}:{where}: ")


def test_reader_missing_and_empty(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_trace(tmp_path / "none.text")
    (tmp_path / "e.text").write_text("\n")
    with pytest.raises(InputError, match="empty"):
        read_trace(tmp_path / "e.text")


def test_formats_and_hdf5_round_trip(tmp_path):
    (tmp_path / "memInfo_x.text").write_text(
        "Malloc 0x10 100 5\nMalloc 0x20 50 6\nFree 0x10 7\nMalloc 0x10 30 8\nFree 0x20 9\nFree 0x10 9\n"
    )
    tr = read_trace(tmp_path / "memInfo_x.text")
    assert tr.block.tolist() == [0, 1, 0, 2, 1, 2]
    assert tr.size.tolist() == [100, 50, 100, 30, 50, 30]
    assert tr.time_ns.tolist() == [0, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 4_000_000]
    assert tr.live_bytes().tolist() == [100, 150, 50, 80, 30, 0]
    (tmp_path / "b.text").write_text(
        "Malloc 0x10 100 5 (data_&size)\nMutable 0x10 6\nLayer 0x10 7\nRead 0x10 8\nFree 0x10 9\n"
    )
    tb = read_trace(tmp_path / "b.text")
    assert tb.kind.tolist() == [MALLOC, WRITE, LAYER, READ, FREE]
    assert tb.time_ns.tolist() == [0, 1, 2, 3, 4]
    write_hdf5(tr, tmp_path / "t.h5")
    back = read_trace(tmp_path / "t.h5")
    for c in ("kind", "address", "size", "time_ns", "block", "stream"):
        assert getattr(back, c).tolist() == getattr(tr, c).tolist()
    import h5py

    with h5py.File(tmp_path / "t.h5", "a") as f:
        f["ops/kind"][2] = 9
    with pytest.raises(InputError, match="kind 9"):
        read_trace(tmp_path / "t.h5")


def test_from_workload_e5():
    from synth import make_workload

    w = make_workload(3)
    tr = from_workload(w, iterations=2)
    kop = tr.meta["kernel_of_op"]
    tens = tr.meta["tensor_of_op"]
    glob = np.asarray(w.is_global, bool)
    # every kernel's inputs are read and outputs written at its ops
    for k in range(w.num_kernels):
        got = set(tens[(kop == k) & (tr.kind == READ)].tolist())
        assert got == set(w.inputs(k).tolist())
    # non-global tensors: malloc before the first use, free after the last, once per iteration
    for t in np.nonzero(~glob)[0].tolist():
        i = np.nonzero(tens == t)[0]
        if len(i) == 0:
            continue
        ks = tr.kind[i]
        assert (ks == MALLOC).sum() == 2 and (ks == FREE).sum() == 2
    assert (tr.kind[np.isin(tens, np.nonzero(glob)[0])] != FREE).all()
    res = run_allocator(tr, "cnmem")
    check_placement(tr, res)


# ---------------------------------------------------------------------------------------------
# the real traces


def _real(name):
    p = TRACES / name
    if not p.exists():
        pytest.skip("no ../shared/external/singa-traces")
    return read_trace(p)


@pytest.mark.parametrize(
    "name", ["memInfo_alex_20itr_100size.text", "vec_run_5_vgg.csv", "blockInfo_resnet_315.text"]
)
def test_real_traces_all_allocators(name):
    tr = _real(name)
    lb = int(tr.live_bytes().max())
    for a in ALLOCATORS:
        res = run_allocator(tr, a)
        assert res.status == "ok" and res.peak_live == lb
        assert res.peak_reserved >= lb
        if a != "cuda_malloc":
            check_placement(tr, res)
            check_placement(tr, res)


def test_colour_runtime_scope():
    """SmartMemPool's runtime: cudaMalloc until the switch, then the coloured pool, hits for
    every repeated malloc of a clean periodic trace."""
    from test_alloc_period import synthetic

    tr, L, _ = synthetic(np.random.default_rng(0), iterations=12, layers=40)
    r = run_allocator(tr, "singa_colour", scope="iteration")
    x = r.extra
    assert x["detected"] and x["iteration_ops"] == L
    assert x["pool_hits"] > 0 and x["fallbacks"] <= x["pool_hits"] // 10
    check_placement(tr, r)
    sw = x["switch_op"]
    assert (r.reserved[:sw] == r.live[:sw]).all()  # cudaMalloc before the switch
    assert (r.reserved[sw:] >= x["pool_bytes"]).all()
    assert r.peak_reserved >= r.peak_live
    # GetMemUsage from the placement: blocks above the pool are cudaMalloc'd; max(the largest
    # cudaMalloc load, the pool + the cudaMalloc load where the pool's own load first peaks)
    cuda = col = 0
    best_cuda, best_col, cuda_at = 0, 0, 0
    sel = tr.kind <= FREE
    for k, b in zip(tr.kind[sel].tolist(), tr.block[sel].tolist()):
        sz = int(tr.size[tr.block == b][0])
        in_pool = r.offset[b] < x["pool_bytes"]
        d = sz if k == MALLOC else -sz
        if in_pool:
            col += d
        else:
            cuda += d
        best_cuda = max(best_cuda, cuda)
        if col > best_col:
            best_col, cuda_at = col, cuda
    assert x["mem_usage_bytes"] == max(best_cuda, x["pool_bytes"] + cuda_at)
    assert x["mem_usage_bytes"] <= r.peak_reserved
    # no iteration found: cudaMalloc throughout
    rnd = random_trace(np.random.default_rng(2), n_blocks=30)
    r = run_allocator(rnd, "singa_colour", scope="iteration")
    assert not r.extra["detected"] and r.peak_reserved == r.peak_live


def test_hdf5_bad_input(tmp_path):
    import h5py

    p = tmp_path / "x.h5"
    with h5py.File(p, "w") as f:
        f.attrs["format"] = "something-else"
    with pytest.raises(InputError, match="not a g10fast allocation trace") as e:
        read_trace(p)
    assert str(e.value).startswith(f"{p}: ")
    with h5py.File(p, "w") as f:
        f.attrs["format"] = "g10fast-alloc-trace"
        f.attrs["schema_version"] = 1
        f["ops/kind"] = np.array([0, 1], np.int8)
        f["ops/address"] = np.array([16, 16])
        f["ops/size"] = np.array([100, 0])
    with pytest.raises(InputError, match="missing dataset /ops/time_ns"):
        read_trace(p)
    with h5py.File(p, "a") as f:
        f["ops/time_ns"] = np.array([0])
    with pytest.raises(InputError, match="differ in length"):
        read_trace(p)
    with h5py.File(p, "a") as f:
        del f["ops/time_ns"]
        f["ops/time_ns"] = np.array([0, 1])
        f["ops/address"][1] = 32
    with pytest.raises(InputError, match="free of address 0x20") as e:
        read_trace(p)
    assert ":/ops row:1:" in str(e.value)
    with h5py.File(p, "a") as f:
        f.attrs["schema_version"] = 7
    with pytest.raises(InputError, match="schema_version 7"):
        read_trace(p)


def test_pool_opt_wrap_around_hand_worked():
    """SwapPool::PoolOpt [ours]: one iteration of L ops coloured from 0, a block alive past
    the iteration's end conflicting with the next iteration's early blocks."""
    from g10fast.alloc.allocators import colour_periodic

    # A [1, 5) outlives the iteration (L = 4): op 0 of the next one; B [0, 1) only overlaps
    # A's previous instance [-3, 1): a linear colouring shares offset 0, PoolOpt cannot
    off, pool = colour_periodic([1, 0], [5, 1], [100, 50], 4)
    assert off.tolist() == [0, 100] and pool == 150
    lin, lpool = colour_intervals([1, 0], [5, 1], [100, 50], ci_backup=False)
    assert lin.tolist() == [0, 0] and lpool == 100
    # order A, B, C, E (r 0), D: C [2, 3) meets only A: after it, beside B (disjoint from B
    # in every iteration); E [0, 2) meets A (also wrapped) and B, whose merged range [0, 149]
    # it goes after; D [3, 4) meets only A: at 100 again (C [2, 3) ends as D starts)
    off, pool = colour_periodic([1, 0, 2, 3, 0], [5, 1, 3, 4, 2], [100, 50, 30, 20, 20], 4)
    assert off.tolist() == [0, 100, 100, 100, 150] and pool == 170
    # a block live for good (d beyond r + L) conflicts with all
    off, pool = colour_periodic([0, 2], [1 << 40, 3], [10, 10], 4)
    assert sorted(off.tolist()) == [0, 10] and pool == 20


def test_pool_opt_on_a_periodic_trace():
    """scope = pool_opt on a model's derived trace: the coloured iteration's blocks never
    overlap in any iteration (the layout repeating every L ops), weights included."""
    from g10fast.memory_source import load_source

    tr = load_source("vit", batch=8, iterations=3)
    res = run_allocator(tr, "singa_colour", scope="pool_opt")
    e = res.extra
    s, L = e["coloured_iteration_start"], e["period"][1]
    op, is_free, blk = tr.alloc_ops()
    B = tr.num_blocks
    r = np.full(B, len(op), np.int64)
    d = np.full(B, 1 << 40, np.int64)
    r[blk[~is_free]] = np.nonzero(~is_free)[0]
    d[blk[is_free]] = np.nonzero(is_free)[0]
    v = np.nonzero(((r >= s) & (r < s + L)) | ((r < s) & (d >= s + L)))[0]
    assert len(v) == e["coloured_blocks"] + e["persistent_blocks"]
    rr = np.where(r[v] < s, 0, r[v] - s)
    dd = np.minimum(np.where(r[v] < s, L, d[v] - s), rr + L)
    o, z = res.offset[v], tr.block_sizes()[v]
    assert (o >= 0).all() and res.peak_reserved == int((o + z).max())
    for k in (-L, 0, L):
        t_ov = np.maximum(rr[:, None], rr[None, :] + k) < np.minimum(dd[:, None], dd[None, :] + k)
        a_ov = np.maximum(o[:, None], o[None, :]) < np.minimum(
            o[:, None] + z[:, None], o[None, :] + z[None, :]
        )
        both = t_ov & a_ov
        np.fill_diagonal(both, False)
        assert not both.any()
    # at least the iteration's live peak (periodic load), at most the trace scope's backup
    assert res.peak_reserved >= int(tr.live_bytes().max()) * 0.98
    with pytest.raises(InputError, match="scope"):
        run_allocator(tr, "singa_colour", scope="wrap")


def test_smartmempool_reports_less_than_it_reserves_on_vgg():
    """VGG's 20 iterations: SmartMemPool reports 673.7 MiB (GetMemUsage) while holding 730.9
    MiB at its peak (blocks malloc'd before the switch on cudaMalloc beside the 450.3 MiB
    pool)."""
    tr = _real("memInfo_vgg_20itr_100size.text")
    r = run_allocator(tr, "singa_colour")
    assert r.options["scope"] == "iteration"  # the authors' pool by default
    assert r.extra["pool_bytes"] / MiB == pytest.approx(450.3, abs=0.05)
    assert r.extra["mem_usage_bytes"] / MiB == pytest.approx(673.7, abs=0.05)
    assert r.peak_reserved / MiB == pytest.approx(730.9, abs=0.05)
