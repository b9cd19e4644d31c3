"""PyTorch memory snapshots in and out (g10fast/alloc/snapshot.py, docs/memory-snapshot.md).

Snapshots read here: one written by hand to the documented schema (the docstring of
torch.cuda.memory._snapshot in torch 2.13: CUDA recording needs a GPU), hand-worked below;
one recorded from a real CPU run (data/snapshots/mlp-cpu-profiler.pickle, torch.profiler +
torch's _profile_to_snapshot; data/snapshots/record_cpu_profile.py) and one recorded live
when torch is installed. Snapshots written here are opened by torch's own reader
(pickle.load + torch.cuda._memory_viz) and by a plain-Python reading of memory_viz
(tests/memviz_twin.py)."""

from __future__ import annotations

import json
import pickle
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from memviz_twin import check_pickle_bytes, check_segment_view

from g10fast.alloc.allocators import ALLOCATORS, run_allocator
from g10fast.alloc.snapshot import (
    load_snapshot,
    pytorch_capacity,
    pytorch_options,
    read_snapshot,
    snapshot_of_run,
    snapshot_paths,
    trace_of_snapshot,
    workload_frames,
    write_snapshot,
)
from g10fast.alloc.trace import FREE, MALLOC, _make
from g10fast.cli import main
from g10fast.errors import InputError

MiB = 1 << 20
ROOT = Path(__file__).resolve().parents[1]
CPU_SNAPSHOT = ROOT / "data" / "snapshots" / "mlp-cpu-profiler.pickle"
A0, A1, A2 = 0x7F3A00000000, 0x7F3A02000000, 0x7F3A04000000


def _e(action, addr, size, t, stream=0):
    return {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": stream,
        "time_us": t,
        "frames": [{"filename": "train.py", "line": t, "name": "step"}],
    }


def _seg(addr, total, blocks, kind="large"):
    alloc = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {
        "device": 0,
        "address": addr,
        "total_size": total,
        "allocated_size": alloc,
        "active_size": alloc,
        "requested_size": alloc,
        "stream": 0,
        "segment_type": kind,
        "segment_pool_id": (0, 0),
        "is_expandable": False,
        "frames": [],
        "blocks": blocks,
    }


def hand_snapshot() -> dict:
    """The caching allocator on one device, written to the schema by hand.
    Before the trace: the 2 MiB small segment A0 holds w (4096 B) and p (512 B); the ring
    buffer starts at w's free. Then: a (1000 B) in A0; segment A1 (20 MiB) for b (3 MiB); a
    freed; segment A2 (18 MiB: more than the 17 MiB left in A1) for c (18 MiB); b, c freed;
    A2 released (empty_cache); e (2 MiB) in A1, whose free is requested but never completed.
    At the end: A0 with p, A1 with e pending. Reserved: 2 MiB at the start, 22 + 18 = 40 MiB
    at the peak, 22 at the end. Allocated (requested bytes): at most 512 + 3 MiB + 18 MiB (b
    and c live; w is freed first, a before c)."""
    tr = [
        _e("free_requested", A0 + 1536, 4096, 10),
        _e("free_completed", A0 + 1536, 4096, 10),
        _e("alloc", A0 + 512, 1000, 20),
        _e("segment_alloc", A1, 20 * MiB, 30),
        _e("alloc", A1, 3 * MiB, 30),
        _e("free_requested", A0 + 512, 1000, 40),
        _e("free_completed", A0 + 512, 1000, 40),
        _e("segment_alloc", A2, 18 * MiB, 50),
        _e("alloc", A2, 18 * MiB, 50),
        _e("free_requested", A1, 3 * MiB, 60),
        _e("free_completed", A1, 3 * MiB, 60),
        _e("free_requested", A2, 18 * MiB, 70),
        _e("free_completed", A2, 18 * MiB, 70),
        _e("segment_free", A2, 18 * MiB, 80),
        _e("alloc", A1, 2 * MiB, 90),
        _e("free_requested", A1, 2 * MiB, 95),
    ]
    segs = [
        _seg(
            A0,
            2 * MiB,
            [
                {
                    "address": A0,
                    "size": 512,
                    "requested_size": 512,
                    "state": "active_allocated",
                    "frames": [],
                },
                {
                    "address": A0 + 512,
                    "size": 2 * MiB - 512,
                    "requested_size": 0,
                    "state": "inactive",
                    "frames": [],
                },
            ],
            "small",
        ),
        _seg(
            A1,
            20 * MiB,
            [
                {
                    "address": A1,
                    "size": 2 * MiB,
                    "requested_size": 2 * MiB,
                    "state": "active_pending_free",
                    "frames": [],
                },
                {
                    "address": A1 + 2 * MiB,
                    "size": 18 * MiB,
                    "requested_size": 0,
                    "state": "inactive",
                    "frames": [],
                },
            ],
        ),
    ]
    return {
        "segments": segs,
        "device_traces": [tr],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": -1,
            "expandable_segments": False,
        },
    }


def _dump(tmp_path, snap, name="s.pickle"):
    p = tmp_path / name
    p.write_bytes(pickle.dumps(snap, protocol=4))
    return str(p)


# ---------------------------------------------------------------------------------------------
# reading


def test_hand_snapshot_as_trace(tmp_path):
    tr = read_snapshot(_dump(tmp_path, hand_snapshot()))
    # w (its free opens the trace) and p (allocated at the end, never seen) come first
    assert tr.kind.tolist() == [MALLOC, MALLOC, FREE, MALLOC, MALLOC, FREE, MALLOC, FREE, FREE, MALLOC]
    assert tr.block_sizes().tolist() == [4096, 512, 1000, 3 * MiB, 18 * MiB, 2 * MiB]
    assert tr.address[:2].tolist() == [A0 + 1536, A0]
    assert tr.time_ns.tolist() == [0, 0, 0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 80_000]
    info = tr.meta["snapshot"]
    assert info["pre_trace_blocks"] == 2 and info["pending_frees"] == 1
    assert info["peak_reserved_bytes"] == 40 * MiB
    assert info["reserved_at_start_bytes"] == 2 * MiB
    assert info["reserved_at_end_bytes"] == 22 * MiB
    assert info["peak_allocated_bytes"] == 512 + 3 * MiB + 18 * MiB
    assert tr.meta["reserved_of_op"].tolist() == [
        2 * MiB,
        2 * MiB,
        2 * MiB,
        2 * MiB,
        22 * MiB,
        22 * MiB,
        40 * MiB,
        40 * MiB,
        40 * MiB,
        22 * MiB,
    ]
    assert tr.meta["frames_of_op"][3] == [{"filename": "train.py", "line": 20, "name": "step"}]
    # the caching allocator's rules on this trace give the snapshot's peak: 2 + 20 + 18 MiB
    # (it keeps A2 cached to the end: no empty_cache in the model)
    assert pytorch_options(tr) == {}
    assert run_allocator(tr, "pytorch").reserved.tolist() == [2 * MiB] * 4 + [22 * MiB] * 2 + [40 * MiB] * 4


def test_hand_snapshot_memory_command(tmp_path, capsys):
    src = _dump(tmp_path, hand_snapshot())
    fig = tmp_path / "mem.png"
    assert main(["memory", src, "--figure", str(fig)]) == 0  # + the measured line
    assert fig.stat().st_size > 0
    out = capsys.readouterr().out
    assert "measured (the snapshot's segments): peak reserved 40.0 MiB" in out
    assert "pytorch allocator here: peak reserved 40.0 MiB, +0.00% against the snapshot's" in out
    assert main(["memory", src, "--allocator", "pytorch", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    s = js["snapshot"]
    assert s["measured_peak_reserved_bytes"] == 40 * MiB == js["peak_reserved_bytes"]
    assert s["pytorch_vs_measured"] == 0.0 and s["pre_trace_blocks"] == 2


def test_cache_flush_bounds_the_capacity(tmp_path, capsys):
    """Hand-worked: a 5 MiB block takes a 20 MiB segment and is freed; then the whole cache
    is freed (segment_free) and a 30 MiB segment allocated: the caching allocator's retry
    after cudaMalloc failed, so the GPU held less than 20 + 30 = 50 MiB. Reserved: 20, 0, 30
    MiB (peak 30). The pytorch allocator without a capacity keeps the 20 MiB cached (peak
    50 MiB); with the bound it frees it as the recorded one did (peak 30 MiB)."""
    tr = [
        {"action": "segment_alloc", "addr": A0, "size": 20 * MiB},
        {"action": "alloc", "addr": A0, "size": 5 * MiB},
        {"action": "free_requested", "addr": A0, "size": 5 * MiB},
        {"action": "free_completed", "addr": A0, "size": 5 * MiB},
        {"action": "segment_free", "addr": A0, "size": 20 * MiB},
        {"action": "segment_alloc", "addr": A1, "size": 30 * MiB},
        {"action": "alloc", "addr": A1, "size": 30 * MiB},
    ]
    seg = _seg(
        A1,
        30 * MiB,
        [
            {
                "address": A1,
                "size": 30 * MiB,
                "requested_size": 30 * MiB,
                "state": "active_allocated",
                "frames": [],
            }
        ],
    )
    src = _dump(tmp_path, {"segments": [seg], "device_traces": [tr]})
    t = read_snapshot(src)
    info = t.meta["snapshot"]
    assert (info["cache_flushes"], info["capacity_below_bytes"]) == (1, 50 * MiB)
    assert info["peak_reserved_bytes"] == 30 * MiB
    assert pytorch_capacity(t) == 50 * MiB - 1
    assert run_allocator(t, "pytorch").peak_reserved == 50 * MiB
    assert run_allocator(t, "pytorch", capacity=pytorch_capacity(t)).peak_reserved == 30 * MiB
    assert main(["memory", src, "--allocator", "pytorch"]) == 0
    out = capsys.readouterr().out
    assert "emptied its cache 1 times to retry a segment" in out
    assert "(capacity=just under 50.0 MiB): peak reserved 30.0 MiB, +0.00%" in out
    assert main(["memory", src, "--allocator", "pytorch", "--capacity-mib", "1000"]) == 0
    assert "peak reserved 50.0 MiB, +66.67%" in capsys.readouterr().out


def test_no_trace_entries_no_reference(tmp_path):
    snap = hand_snapshot()
    snap["device_traces"] = [[]]
    info = read_snapshot(_dump(tmp_path, snap)).meta["snapshot"]
    assert info["peak_reserved_bytes"] is None and "no trace entries" in info["why_no_reference"]


def test_streams_and_settings_set_the_pytorch_allocator(tmp_path):
    snap = {
        "segments": [],
        "allocator_settings": {"expandable_segments": True, "max_split_size": 64 * MiB},
        "device_traces": [[_e("alloc", A0, 4096, 1, stream=0), _e("alloc", A1, 4096, 2, stream=0x5A5A0000)]],
    }
    tr = read_snapshot(_dump(tmp_path, snap))
    assert tr.stream.tolist() == [0, 1]
    assert pytorch_options(tr) == {"per_stream": True, "expandable_segments": True, "max_split_size_mb": 64.0}


def test_devices(tmp_path):
    e0 = [_e("alloc", A0, 100, 1)]
    e1 = [_e("alloc", A1, 200, 1), _e("alloc", A2, 300, 2)]
    src = _dump(tmp_path, {"segments": [], "device_traces": [e0, e1]})
    with pytest.raises(InputError, match="devices 0, 1: choose one with --device"):
        read_snapshot(src)
    assert read_snapshot(src, 1).block_sizes().tolist() == [200, 300]
    with pytest.raises(InputError, match="device 3 has no segments"):
        read_snapshot(src, 3)


def test_cpu_profiler_snapshot():
    """Recorded on a CPU (two SGD steps of a 64-128-10 MLP at batch 32, float32): the six
    tensors made before the profiler (weights 32,768 + 512 + 5,120 + 40 B, the input 8,192 B,
    the int64 labels 256 B) are blocks of its segment, the 38 allocs and 37 frees its trace;
    its segments are address spans, so it gives no measured reserved bytes."""
    tr = read_snapshot(CPU_SNAPSHOT)
    info = tr.meta["snapshot"]
    assert (tr.num_ops, tr.num_blocks, info["pre_trace_blocks"]) == (81, 44, 6)
    assert sorted(tr.block_sizes()[:6].tolist()) == [40, 256, 512, 5120, 8192, 32768]
    assert info["peak_reserved_bytes"] is None and "profile" in info["why_no_reference"]
    # the peak: weights, data, the four gradients, one 32 x 128 activation, two scalars
    assert info["peak_allocated_bytes"] == 46_888 + 38_440 + 16_384 + 8 == 101_720
    assert info["times"] == "absent" and not tr.time_ns.any()


def test_swap_needs_times(capsys):
    assert main(["swap", str(CPU_SNAPSHOT), "--policy", "appobmem", "--limit-mib", "0.05"]) == 2
    assert "records no times" in capsys.readouterr().err


def test_cpu_profiler_snapshot_recorded_live(tmp_path):
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "record_cpu_profile", ROOT / "data" / "snapshots" / "record_cpu_profile.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(tmp_path / "live.pickle")
    raw = pickle.loads(out.read_bytes())
    tr = read_snapshot(out)
    allocs = sum(e["action"] == "alloc" for e in raw["device_traces"][0])
    frees = sum(e["action"] == "free_completed" for e in raw["device_traces"][0])
    pre = tr.meta["snapshot"]["pre_trace_blocks"]
    assert tr.num_blocks == allocs + pre and int((tr.kind == FREE).sum()) == frees
    assert tr.meta["snapshot"]["peak_allocated_bytes"] == 101_720


@pytest.mark.parametrize(
    "content, message",
    [
        (b"Malloc 0x10 4 1\n", "not a memory snapshot"),
        (pickle.dumps({"segments": []}, protocol=4)[:-5], "damaged memory snapshot"),
        (pickle.dumps(np.zeros(2), protocol=4), "names the Python object numpy"),
        (pickle.dumps([1, 2], protocol=4), "segments\\[0\\] is a int, expected a dict"),
        (pickle.dumps({"segments": []}, protocol=4), "no 'device_traces'"),
        (
            pickle.dumps({"segments": [], "device_traces": [[{"action": "malloc", "addr": 1}]]}, protocol=4),
            "device_traces\\[0\\]\\[0\\]: unknown action 'malloc'",
        ),
        (
            pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1}]]}, protocol=4),
            "device_traces\\[0\\]\\[0\\] has no integer 'size'",
        ),
        (
            pickle.dumps(
                {
                    "segments": [],
                    "device_traces": [
                        [
                            {"action": "alloc", "addr": 16, "size": 4},
                            {"action": "alloc", "addr": 16, "size": 4},
                        ]
                    ],
                },
                protocol=4,
            ),
            r"alloc of address 0x10, which is live \(allocated at device_traces\[0\]",
        ),
        (
            pickle.dumps(
                {
                    "segments": [],
                    "device_traces": [
                        [
                            {"action": "alloc", "addr": 16, "size": 4},
                            {"action": "free_completed", "addr": 16, "size": 4},
                            {"action": "free_completed", "addr": 16, "size": 4},
                        ]
                    ],
                },
                protocol=4,
            ),
            "freed twice",
        ),
        (
            pickle.dumps(
                {"segments": [], "device_traces": [[{"action": "segment_alloc", "addr": 16, "size": 4}]]},
                protocol=4,
            ),
            "segment actions do not fit the segments at the end",
        ),
    ],
)
def test_bad_snapshots_exit_2(tmp_path, capsys, content, message):
    p = tmp_path / "bad.pickle"
    p.write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_snapshot(p)
    assert main(["memory", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"g10fast: error: {p}: ") and err.count("\n") == 1


def test_snapshot_cli_errors(tmp_path, capsys):
    src = _dump(tmp_path, hand_snapshot())
    assert main(["memory", src, "--batch", "8"]) == 2
    assert "--batch cannot change a memory snapshot" in capsys.readouterr().err
    assert main(["memory", str(tmp_path / "missing.pickle")]) == 2
    assert "memory snapshot or config file not found" in capsys.readouterr().err
    assert main(["memory", "bert-base", "--batch", "2", "--device", "0"]) == 2
    assert "--device chooses a device of a PyTorch memory snapshot" in capsys.readouterr().err
    assert main(["memory", src, "--memory-snapshot", str(tmp_path / "no" / "x.pickle")]) == 2
    assert "folder does not exist" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# writing


@cache
def _bert():
    from g10fast.alloc.trace import from_workload
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec

    w = workload_of(builtin_spec("bert-base", 2, "g10-artifact", "lru"))
    tr = from_workload(w, freq_ghz=1.2)
    return w, tr


def _written(tr, res, frames=None):
    b = pickle.dumps(snapshot_of_run(tr, res, frames), protocol=4)
    return b, pickle.loads(b)


@pytest.mark.parametrize("name", ALLOCATORS)
def test_written_snapshot_opens_in_torch_and_memory_viz(name, tmp_path):
    from torch.cuda import _memory_viz as mv  # torch's own reader (the test extra)

    w, tr = _bert()
    res = run_allocator(tr, name)
    frames = workload_frames(w, tr)
    p = write_snapshot(snapshot_of_run(tr, res, frames), tmp_path / f"{name}.pickle")
    raw = Path(p).read_bytes()
    check_pickle_bytes(raw)
    with open(p, "rb") as f:
        d = pickle.load(f)
    stats = mv.segsum(d)  # asserts its own accounting: allocated + free = reserved
    assert "total_reserved" in stats
    assert mv.trace(d).count("\n") > tr.num_blocks
    assert len(mv.memory(d, format_flamegraph=lambda s: s)) > 0
    for html in (mv.trace_plot(d), mv.segment_plot(d), mv.trace_plot(d, plot_segments=True)):
        assert "snapshot.pickle" in html
    assert check_segment_view(d, every=25) > 0
    colour = "pool + cudaMalloc" if res.options.get("scope") == "iteration" else "arena"
    assert (
        d["g10fast"]["segment_model"]
        == {
            "cuda_malloc": "per-block cudaMalloc",
            "cnmem": "grown segments",
            "pytorch": "grown segments",
            "singa_colour": colour,
            "bump": "arena",
        }[name]
    )
    if d["g10fast"]["stacked_blocks"]:
        # SmartMemPool's runtime on one iteration: planned slots reused while still held
        assert name == "singa_colour" and colour != "arena"
        return
    # read back: the same mallocs and frees; the segments give the allocator's reserved bytes
    back = read_snapshot(p)
    _, is_free, blk = tr.alloc_ops()
    nonzero = tr.block_sizes()[blk] > 0
    assert back.kind.tolist() == np.where(is_free[nonzero], FREE, MALLOC).tolist()
    assert back.meta["snapshot"]["peak_reserved_bytes"] == res.peak_reserved
    assert back.meta["snapshot"]["peak_allocated_bytes"] == res.peak_live
    # reserved after each op's entry (a cudaMalloc'd block's segment_free follows its free)
    same = back.meta["reserved_of_op"] == res.reserved[nonzero]
    if name != "bump":  # bump: one arena as large as its peak
        assert same[~is_free[nonzero]].all()
        assert same.all() == (name != "cuda_malloc")
    # the frames name the kernels
    first = next(e for e in d["device_traces"][0] if e["action"] == "alloc" and e["frames"][0]["line"] > 0)
    assert first["frames"][0]["name"] == w.kernel_name[first["frames"][0]["line"]]


def _ops(seq):
    """[(kind, block, size)] -> an AllocTrace (addresses = block ids)."""
    return _make(
        "t",
        [k for k, _, _ in seq],
        [b for _, b, _ in seq],
        [s for _, _, s in seq],
        list(range(len(seq))),
        [b for _, b, _ in seq],
        [0] * len(seq),
        {},
    )


def test_pytorch_release_under_capacity_is_written():
    """Hand-worked: capacity 40 MiB; a 15 MiB block takes a 16 MiB segment (>= 10 MiB:
    rounded to 2 MiB), is freed; a 30 MiB block needs a 30 MiB segment: 16 + 30 > 40, so the
    free 16 MiB segment is released first (segment_free, then segment_alloc)."""
    tr = _ops([(MALLOC, 0, 15 * MiB), (FREE, 0, 15 * MiB), (MALLOC, 1, 30 * MiB)])
    res = run_allocator(tr, "pytorch", capacity=40 * MiB)
    assert res.reserved.tolist() == [16 * MiB, 16 * MiB, 30 * MiB]
    _, d = _written(tr, res)
    acts = [(e["action"], e["size"]) for e in d["device_traces"][0]]
    assert acts == [
        ("segment_alloc", 16 * MiB),
        ("alloc", 15 * MiB),
        ("free_requested", 15 * MiB),
        ("free_completed", 15 * MiB),
        ("segment_free", 16 * MiB),
        ("segment_alloc", 30 * MiB),
        ("alloc", 30 * MiB),
    ]
    assert d["g10fast"]["segment_model"] == "grown segments"
    assert [s["total_size"] for s in d["segments"]] == [30 * MiB]
    check_segment_view(d)


def test_oom_and_expandable_and_cnmem_init():
    tr = _ops([(MALLOC, 0, 3 * MiB), (MALLOC, 1, 5 * MiB), (MALLOC, 2, 30 * MiB)])
    res = run_allocator(tr, "pytorch", capacity=40 * MiB)  # 20 MiB segment + 30 > 40
    _, d = _written(tr, res)
    assert d["device_traces"][0][-1]["action"] == "oom"
    assert d["device_traces"][0][-1]["size"] == 30 * MiB
    check_segment_view(d)
    # expandable segments: one segment per pool, grown by segment_map in 20 MiB pages
    res = run_allocator(tr, "pytorch", expandable_segments=True)
    _, d = _written(tr, res)
    maps = [e["size"] for e in d["device_traces"][0] if e["action"] == "segment_map"]
    assert maps == [20 * MiB, 20 * MiB] and res.peak_reserved == 40 * MiB
    assert [(s["total_size"], s["is_expandable"]) for s in d["segments"]] == [(40 * MiB, True)]
    check_segment_view(d)
    # cnmem's initial reservation: a segment from the start
    res = run_allocator(tr, "cnmem", init_bytes=64 * MiB)
    _, d = _written(tr, res)
    assert not any(e["action"].startswith("segment") for e in d["device_traces"][0])
    assert [s["total_size"] for s in d["segments"]] == [64 * MiB]
    check_segment_view(d)


def test_snapshot_paths():
    assert snapshot_paths("out/x.pickle", ["pytorch"]) == ["out/x.pickle"]
    assert snapshot_paths("out/x.pickle", ["cnmem", "bump"]) == ["out/x.cnmem.pickle", "out/x.bump.pickle"]


def test_memory_of_a_snapshot_writes_snapshots_and_round_trips(tmp_path, capsys):
    src = _dump(tmp_path, hand_snapshot())
    out = tmp_path / "sim.pickle"
    assert main(["memory", src, "--memory-snapshot", str(out)]) == 0
    written = sorted(p.name for p in tmp_path.glob("sim.*.pickle"))
    assert written == sorted(f"sim.{a}.pickle" for a in ALLOCATORS)
    d = load_snapshot(tmp_path / "sim.pytorch.pickle")
    # the hand snapshot's own frames travel with its allocations
    assert any(
        e.get("frames") == [{"filename": "train.py", "line": 20, "name": "step"}]
        for e in d["device_traces"][0]
    )
    back = trace_of_snapshot(d, path="sim.pytorch")
    assert back.meta["snapshot"]["peak_reserved_bytes"] == 40 * MiB


def test_run_and_swap_on_snapshots(tmp_path, capsys):
    out = tmp_path / "run.pickle"
    assert (
        main(
            [
                "run",
                "--model",
                "bert-base",
                "--batch",
                "2",
                "--policy",
                "ideal",
                "--allocator",
                "pytorch",
                "--memory-snapshot",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    capsys.readouterr()  # --allocator is for tensor-engine policies: refused before writing
    assert not out.exists()
    assert (
        main(
            [
                "run",
                "--model",
                "bert-base",
                "--batch",
                "2",
                "--policy",
                "ideal",
                "--memory-snapshot",
                str(out),
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    cap = capsys.readouterr()
    json.loads(cap.out)
    assert cap.err.count("memory snapshot written to") == len(ALLOCATORS)
    _, tr = _bert()
    d = load_snapshot(tmp_path / "run.pytorch.pickle")
    assert d["g10fast"]["peak_reserved_bytes"] == run_allocator(tr, "pytorch").peak_reserved
    # a three-iteration snapshot planned by AppObMem from its allocs and frees alone
    s3 = tmp_path / "three.pickle"
    assert (
        main(
            [
                "memory",
                "bert-base",
                "--batch",
                "2",
                "--iterations",
                "3",
                "--allocator",
                "pytorch",
                "--memory-snapshot",
                str(s3),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "swap",
                str(s3),
                "--policy",
                "appobmem",
                "--accesses",
                "alloc_free_only",
                "--limit-mib",
                "700",
                "--json",
            ]
        )
        == 0
    )
    js = json.loads(capsys.readouterr().out)
    assert js["status"] == "ok" and js["swaps"] > 0
    assert js["peak_bytes"] <= 700 * MiB < js["peak_before_bytes"]


def test_capture_writes_snapshots(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "cap.pickle"
    assert main(["capture", "mlp", "--out", str(tmp_path / "mlp.h5"), "--memory-snapshot", str(out)]) == 0
    assert capsys.readouterr().out.count("memory snapshot written to") == len(ALLOCATORS)
    d = load_snapshot(tmp_path / "cap.pytorch.pickle")
    check_segment_view(d)
    assert (
        read_snapshot(tmp_path / "cap.pytorch.pickle").meta["snapshot"]["peak_reserved_bytes"]
        == d["g10fast"]["peak_reserved_bytes"]
    )


def test_segments_only_list(tmp_path):
    """The old form: a bare list of segments, no trace: their active blocks, allocated at the
    start; the segments' bytes, but no measured peak (no trace shows what they cached)."""
    tr = read_snapshot(_dump(tmp_path, hand_snapshot()["segments"]))
    assert tr.block_sizes().tolist() == [512, 2 * MiB]
    info = tr.meta["snapshot"]
    assert info["reserved_at_end_bytes"] == 22 * MiB and info["peak_reserved_bytes"] is None


def test_the_viewer_twin_refuses_a_block_outside_its_segment():
    tr = _ops([(MALLOC, 0, 15 * MiB), (MALLOC, 1, 30 * MiB)])
    _, d = _written(tr, run_allocator(tr, "pytorch"))
    check_segment_view(d)
    d["segments"][-1]["total_size"] -= 2 * MiB  # the last block now ends past its segment
    with pytest.raises(AssertionError, match="is in no segment"):
        check_segment_view(d)
    with pytest.raises(AssertionError, match="PROTO|protocol 5"):
        check_pickle_bytes(pickle.dumps(d, protocol=5))


def test_reading_needs_no_torch(tmp_path):
    """torch made unimportable: a snapshot is still read and compared (memory command)."""
    import subprocess
    import sys

    src = _dump(tmp_path, hand_snapshot())
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from g10fast.cli import main\n"
        f"raise SystemExit(main(['memory', {src!r}, '--allocator', 'pytorch']))"
    )
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "+0.00% against the snapshot's" in p.stdout
