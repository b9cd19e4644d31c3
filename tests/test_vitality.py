"""Tensor vitality analysis (planner spec §3.3, §4.1–4.3, §4.5) against G10's interval.config."""

from __future__ import annotations

import time

import numpy as np
import pytest

from g10fast.analysis import interval_config_text, is_alive, vitality, write_interval_config
from g10fast.errors import InputError
from g10fast.workload.model import Graph, build_workload, csr_from_lists
from g10fast.workload.times import kernel_cycles, read_trace_file
from refstats import ARTIFACT, REFERENCE, read_interval_text, read_intervals, reference_graph

RUNS = {  # run -> (results folder, batch, #kernels, #tensors, #intervals)
    "BERT-128-lru": ("BERT_Base", 128, 1369, 1463, 1269),
    "ResNet152-256-lru": ("ResNet152", 256, 1299, 3366, 2023),
}


def reference_workload(run):
    model, batch, K, _, _ = RUNS[run]
    if not (REFERENCE / run / "statistics").exists():
        pytest.skip(f"reference run {run} not available")
    base = ARTIFACT / "results" / model / f"cudnn{batch}"
    ms = [read_trace_file(f"{base}{s}.txt", K, "ms") for s in ("", "InputPF", "PF")]
    graph = reference_graph(run)  # already holds the workspace tensors
    return build_workload(graph, *kernel_cycles(*ms, 1.2), np.zeros(K, np.int64))


_CASES = {}


def case(run):
    if run not in _CASES:
        w = reference_workload(run)
        _CASES[run] = (run, w, vitality(w, 1.2))
    return _CASES[run]


@pytest.fixture(params=sorted(RUNS))
def ref_case(request):
    return case(request.param)


def test_counts(ref_case):
    run, w, v = ref_case
    _, _, K, T, I = RUNS[run]
    assert (w.num_kernels, w.num_tensors, v.num_intervals) == (K, T, I)
    assert v.time_us.shape == (K + 1,) and v.time_ext_us.shape == (2 * K + 1,)
    assert v.iv_ptr[-1] == I


def test_liveness_matches_reference(ref_case):
    run, w, v = ref_case
    ref = read_intervals(REFERENCE / run / "statistics" / "interval.config.gz")
    assert np.array_equal(ref.is_global, w.is_global)
    assert np.array_equal(v.birth, ref.birth)  # globals: -1 on both sides
    assert np.array_equal(v.death, ref.death)
    # workspaces (the last tensors) are born at their kernel and never read
    ws = w.num_tensors - np.arange(1, 1 + {"BERT-128-lru": 0, "ResNet152-256-lru": 463}[run])
    assert np.all(v.death[ws] == -1)


def test_intervals_match_reference(ref_case):
    run, w, v = ref_case
    ref = read_intervals(REFERENCE / run / "statistics" / "interval.config.gz")
    assert np.array_equal(v.iv_tensor, ref.tensor)
    assert np.array_equal(v.iv_start, ref.start)
    assert np.array_equal(v.iv_end, ref.end)
    assert np.array_equal(np.arange(v.num_intervals) - v.iv_ptr[v.iv_tensor], ref.index)
    assert ["%g" % t for t in v.iv_time_us] == ref.time_text
    assert np.array_equal(v.iv_looped, v.iv_end < v.iv_start)
    assert np.all(w.is_global[v.iv_tensor[v.iv_looped]])


def test_interval_config_text_identical(ref_case, tmp_path):
    run, w, v = ref_case
    out = tmp_path / "interval.config"
    write_interval_config(v, w, out)
    assert out.read_text() == read_interval_text(run)


def test_bert_known_values():
    run, w, v = case("BERT-128-lru")
    K = w.num_kernels
    assert v.time_us[-1] * 1200 == pytest.approx(7087159999, rel=1e-12)
    assert v.time_us[1] == 135168 / 1200  # kernel 0: 135168 cycles
    # tensor 5 (a weight): [2, 1366) then looped [1367, 1), 234.496 µs
    sel = v.iv_tensor == 5
    assert v.iv_start[sel].tolist() == [2, 1367] and v.iv_end[sel].tolist() == [1366, 1]
    assert v.iv_looped[sel].tolist() == [False, True]
    t = v.iv_time_us[sel][1]
    assert t == (v.time_us[K] + v.time_us[1]) - v.time_us[1367]
    assert "%g" % t == "234.496"
    assert (v.birth[0], v.death[0]) == (0, 4)


def test_resnet_wraps_front_interval_last():
    """A global last used by kernel K-1 gets non-looped [0, u_1), created after its gaps."""
    run, w, v = case("ResNet152-256-lru")
    sel = v.iv_tensor == 2
    assert v.iv_start[sel].tolist() == [2, 0] and v.iv_end[sel].tolist() == [1297, 1]
    assert not v.iv_looped[sel].any()


@pytest.mark.parametrize("policy", ["prefetch_lru", "deepUM", "FlashNeuron"])
@pytest.mark.parametrize("model", ["BERT-128", "ResNet152-256"])
def test_other_policies_have_same_interval_config(model, policy):
    """The analysis precedes planning: every policy's run prints the same interval.config."""
    run = f"{model}-{policy}"
    if not (REFERENCE / run / "statistics" / "interval.config.gz").exists():
        pytest.skip(f"reference run {run} not available")
    _, w, v = case(f"{model}-lru")
    assert interval_config_text(v, w) == read_interval_text(run)


def test_vitality_is_fast(ref_case):
    run, w, v = ref_case
    t0 = time.perf_counter()
    vitality(w, 1.2)
    assert time.perf_counter() - t0 < 0.5


# ---------------------------------------------------------------- synthetic cases


def small_workload(K, inputs, outputs, is_global, cycles=None):
    T = len(is_global)
    in_ptr, in_idx = csr_from_lists(inputs)
    out_ptr, out_idx = csr_from_lists(outputs)
    g = Graph(
        name="toy",
        batch_size=1,
        raw_size=np.full(T, 4096, np.int64),
        is_global=np.array(is_global, bool),
        kernel_name=["k"] * K,
        kernel_parent=["p"] * K,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
    )
    c = np.array(cycles if cycles is not None else [1200 * (k + 1) for k in range(K)], np.int64)
    return build_workload(g, c, c, c, np.zeros(K, np.int64))


def test_synthetic_rules():
    # K = 6; kernel k's duration is (k+1) µs, so T = [0, 1, 3, 6, 10, 15, 21]
    K = 6
    ins = [[0], [1, 2], [1, 4], [2, 5], [], [3, 6]]
    outs = [[1], [], [2], [3], [1], [7]]
    glob = [True, False, False, True, True, True, True, False]
    # t0 global used only at 0 -> looped [1, 0)
    # t1 local: written 0, read 1 and 2, written again 4 -> [0, 3), no gap, write at 4 ignored
    # t2 local: read 1, written 2, read 3 -> [1, 4), no gaps
    # t3 global used at 3 and 5 (= K-1), not at 0 -> [4, 5) then non-looped [0, 3)
    # t4 global used only at 2 -> looped [3, 2)
    # t5 global used only at 3 -> looped [4, 3)
    # t6 global used only at K-1 -> non-looped [0, 5)
    # t7 local written at 5, never read -> birth 5, death -1, no intervals
    w = small_workload(K, ins, outs, glob)
    v = vitality(w, 1.2)
    assert v.time_us.tolist() == [0, 1, 3, 6, 10, 15, 21]
    assert v.time_ext_us.tolist() == [0, 1, 3, 6, 10, 15, 21, 22, 24, 27, 31, 36, 42]
    assert v.birth.tolist() == [-1, 0, 1, -1, -1, -1, -1, 5]
    assert v.death.tolist() == [-1, 3, 4, -1, -1, -1, -1, -1]
    got = list(
        zip(
            v.iv_tensor.tolist(),
            v.iv_start.tolist(),
            v.iv_end.tolist(),
            v.iv_looped.tolist(),
            v.iv_time_us.tolist(),
        )
    )
    assert got == [
        (0, 1, 0, True, 20.0),  # T[6] - T[1] + T[0]
        (3, 4, 5, False, 5.0),
        (3, 0, 3, False, 6.0),
        (4, 3, 2, True, 21 - 6 + 3),
        (5, 4, 3, True, 21 - 10 + 6),
        (6, 0, 5, False, 15.0),
    ]
    assert v.iv_ptr.tolist() == [0, 1, 1, 1, 3, 4, 5, 6, 6]


def test_gaps_and_uses_after_last_read():
    # local t0: written 0, read 3, read 5, written 7 (ignored: after the last read)
    K = 8
    ins = [[], [], [], [0], [], [0], [], []]
    outs = [[0], [], [], [], [], [], [], [0]]
    w = small_workload(K, ins, outs, [False], cycles=[1200] * K)
    v = vitality(w, 1.2)
    assert (v.birth[0], v.death[0]) == (0, 6)
    assert v.iv_start.tolist() == [1, 4] and v.iv_end.tolist() == [3, 5]
    assert v.iv_time_us.tolist() == [2.0, 1.0]
    assert not v.iv_looped.any()


def test_global_used_first_and_last_kernel_has_no_wrap():
    K = 5
    ins = [[0], [], [0], [], [0]]
    w = small_workload(K, ins, [[]] * K, [True], cycles=[1200] * K)
    v = vitality(w, 1.2)
    assert list(zip(v.iv_start.tolist(), v.iv_end.tolist())) == [(1, 2), (3, 4)]


def test_unused_tensor_and_is_alive():
    K = 4
    ins = [[], [0], [], [3]]
    outs = [[0], [1], [3], []]
    # t0 local [0, 2); t1 local never read (alive only at 1); t2 global, unused; t3 local [2, 4)
    # t4 local, never used
    w = small_workload(K, ins, outs, [False, False, True, False, False], cycles=[1200] * K)
    v = vitality(w, 1.2)
    assert v.birth.tolist() == [0, 1, -1, 2, -1]
    assert v.death.tolist() == [2, -1, -1, 4, -1]
    assert v.num_intervals == 0
    alive = np.array([is_alive(v, w, k) for k in range(K)])
    assert alive.T.tolist() == [
        [True, True, False, False],
        [False, True, False, False],
        [True, True, True, True],
        [False, False, True, True],
        [False, False, False, False],
    ]


def test_interval_config_text_format():
    K = 3
    w = small_workload(K, [[0], [], [0, 1]], [[1], [], []], [True, False], cycles=[1, 7087159999, 394445])
    v = vitality(w, 1.2)
    text = interval_config_text(v, w)
    assert text.splitlines() == [
        "tensor0 Is weight (global)?: 1, Size in byte: 4096, Range:0--4096",
        "Global!",
        "_" * 60,
        "tensor0 Is weight (global)?: 1, Size in byte: 4096, Range:0--4096",
        "Hidding Intervals:",
        "interval 0: 1--------2",
        "Estimated Time:5.90597e+06",
        "_" * 63,
        "tensor1 Is weight (global)?: 0, Size in byte: 4096, Range:0--4096",
        "Liveness: Birth: 0, Death: 3.",
        "_" * 60,
        "tensor1 Is weight (global)?: 0, Size in byte: 4096, Range:0--4096",
        "Hidding Intervals:",
        "interval 0: 1--------2",
        "Estimated Time:5.90597e+06",
        "_" * 63,
    ]
    assert text.endswith("_" * 63 + "\n")


def test_bad_frequency():
    w = small_workload(2, [[0], [0]], [[], []], [False])
    with pytest.raises(InputError, match="parameter 'GPU_frequency_GHz'"):
        vitality(w, 0.0)
