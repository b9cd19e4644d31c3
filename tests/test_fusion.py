"""The fusion pass (g10fast.workload.fusion, seed-policies spec §4.3, E8): hand-worked graphs
for xla against stitch, the time formula, the invariants on built-in and artifact workloads,
LayerNorm forward on BERT, and fuse = none changing nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.workload.fusion import (
    FusionOptions,
    fuse,
    kernel_classes,
    kernel_flops,
    lower_softmax,
    op_class,
    plan_groups,
    summary,
)
from g10fast.workload.model import Graph, address_layout, build_workload, csr_from_lists

ART = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"


def _workload(tensors, kernels, times, name="hand"):
    """tensors: [(raw bytes, global)], kernels: [(name, ins, outs)], times: [(exec, inpf, pf)]."""
    raw = np.array([t[0] for t in tensors], np.int64)
    glob = np.array([t[1] for t in tensors], bool)
    in_ptr, in_idx = csr_from_lists([k[1] for k in kernels])
    out_ptr, out_idx = csr_from_lists([k[2] for k in kernels])
    g = Graph(
        name,
        1,
        raw,
        glob,
        [k[0] for k in kernels],
        [f"{i}:{k[0]}" for i, k in enumerate(kernels)],
        in_ptr,
        in_idx,
        out_ptr,
        out_idx,
        {},
    )
    e, i, p = (np.array([t[j] for t in times], np.int64) for j in range(3))
    return build_workload(g, e, i, p, np.zeros(len(kernels), np.int64))


# A forward chain: Linear, bias Add, a row Sum (64 rows of 1024), its mean, the centring
# Subtract, the next Linear, the loss.
A, B, C, S, N, M, D = 262144, 4096, 262144, 256, 256, 256, 262144
FWD_TENSORS = [
    (A, False),
    (4096, True),
    (A, False),
    (B, True),
    (C, False),
    (S, False),
    (N, False),
    (M, False),
    (D, False),
    (4096, True),
    (D, False),
    (D, False),
]
#               0 x        1 W           2 a         3 b        4 c         5 s
#               6 n        7 m           8 d         9 W2        10 y        11 dy
FWD_KERNELS = [
    ("Linear_Forward", [0, 1], [2]),
    ("Add_Forward", [2, 3], [4]),
    ("Sum_Forward", [4], [5]),
    ("Divide_Forward", [5, 6], [7]),
    ("Subtract_Forward", [4, 7], [8]),
    ("Linear_Forward", [8, 9], [10]),
    ("makeLoss", [10], [11]),
]
FWD_TIMES = [
    (50000, 51000, 53000),
    (10000, 11000, 13000),
    (20000, 21000, 23000),
    (8000, 9000, 11000),
    (12000, 13000, 15000),
    (50000, 51000, 53000),
    (7000, 7000, 7000),
]


def fwd():
    return _workload(FWD_TENSORS, FWD_KERNELS, FWD_TIMES)


def test_hand_graph_xla_splits_after_the_reduction():
    w = fwd()
    groups = plan_groups(w, FusionOptions(mode="xla"))
    assert groups == [[0], [1, 2], [3, 4], [5], [6]]
    f = fuse(w, "xla")
    assert f.num_kernels == 5
    assert f.kernel_name == [
        "Linear_Forward",
        "FusedXla_Forward",
        "FusedXla_Forward",
        "Linear_Forward",
        "makeLoss",
    ]
    # only m (7: written by Divide, read by Subtract, both in one group) goes
    assert list(f.meta["fusion"]["tensor_map"]) == [0, 1, 2, 3, 4, 5, 6, -1, 7, 8, 9, 10]
    assert f.num_tensors == 11
    # group [Add, Sum]: reads a, b; writes c (read later by Subtract) and s
    assert list(f.inputs(1)) == [2, 3] and list(f.outputs(1)) == [4, 5]
    assert list(f.inputs(2)) == [4, 5, 6] and list(f.outputs(2)) == [7]


def test_hand_graph_stitch_fuses_through_the_row_reduction():
    w = fwd()
    assert plan_groups(w, FusionOptions(mode="stitch")) == [[0], [1, 2, 3, 4], [5], [6]]
    f = fuse(w, "stitch", launch_us=5.0, time_model="traffic_scaled")
    assert f.num_kernels == 4
    # c, s and m are used only inside the group: deleted
    assert list(f.meta["fusion"]["tensor_map"]) == [0, 1, 2, 3, -1, -1, 4, -1, 5, 6, 7, 8]
    assert list(f.inputs(1)) == [2, 3, 4] and list(f.outputs(1)) == [5]  # a, b, n -> d
    # the time formula by hand (docs/fusion.md): L = 5 µs at 1.2 GHz = 6000 cycles,
    # bodies 4000 + 14000 + 2000 + 6000, io 1316096 B, external 266496 + 262144 B
    io = (A + B + C) + (C + S) + (S + N + M) + (C + M + D)
    ext_in = A + B + N
    ext = ext_in + D
    assert io == 1316096 and ext == 528640
    tf = 6000 + 26000 * ext / io
    assert f.exec_cycles[1] == round(tf) == 16443
    in_b = (A + B) + C + (S + N) + (C + M)
    assert f.input_pf_cycles[1] == round(tf + 4000 * ext_in / in_b) == 17791
    assert f.pf_cycles[1] == round(tf + 12000 * ext / io) == 21264
    # the unfused kernels keep their times
    assert list(f.exec_cycles[[0, 2, 3]]) == [50000, 50000, 7000]
    # traffic_attributed (the default): each byte still moved at the rate of the member that
    # moves it first: a and b at Add's (4000 cycles per A+B+C bytes), n at Divide's (2000 per
    # S+N+M), d at Subtract's (6000 per C+M+D); Sum's bytes all stay on chip
    f = fuse(w, "stitch", launch_us=5.0)
    work = 4000 * (A + B) / (A + B + C) + 2000 * N / (S + N + M) + 6000 * D / (C + M + D)
    assert f.exec_cycles[1] == round(6000 + work) == 11681
    # faulting overheads the same way: 1000 per input byte of Add, 1000 per S+N of Divide
    # (input faulting); 3000 per member's bytes (all faulting)
    assert f.input_pf_cycles[1] == round(6000 + work + 1000 + 1000 * N / (S + N)) == 13181
    f_all = 3000 * ((A + B) / (A + B + C) + N / (S + N + M) + D / (C + M + D))
    assert f.pf_cycles[1] == round(6000 + work + f_all) == 15692
    # addresses are G10's bump layout of what is left
    addr, W = address_layout(f.size, f.is_global)
    assert np.array_equal(addr, f.address) and W == f.weights_bytes == w.weights_bytes


def test_stitch_stops_at_a_grid_wide_reduction():
    w = fwd()
    # the Sum reduces 1024 elements per result; a block holding only 512 cannot stitch it
    assert plan_groups(w, FusionOptions(mode="stitch", stitch_max_reduce=512)) == plan_groups(
        w, FusionOptions(mode="xla")
    )
    assert plan_groups(w, FusionOptions(mode="stitch", max_group=2)) == [[0], [1, 2], [3, 4], [5], [6]]


def test_time_models():
    w = fwd()
    f = fuse(w, "stitch", time_model="sum_minus_launch", launch_us=5.0)
    assert f.exec_cycles[1] == 50000 - 3 * 6000
    f = fuse(w, "stitch", time_model="roofline", hbm_gbps=1.2, launch_us=5.0)  # 1 B per cycle
    # 6000 + 528640 cycles at 1 byte per cycle, capped: never slower than the members in a row
    assert f.exec_cycles[1] == 50000
    f = fuse(w, "stitch", time_model="roofline", hbm_gbps=1.2e3, launch_us=5.0)
    assert f.exec_cycles[1] == round(6000 + 528640 / 1000)
    with pytest.raises(InputError):
        fuse(w, "stitch", time_model="roofline")
    with pytest.raises(InputError):
        fuse(w, "bogus")


# Backward: Multiply's two gradients (siblings reading g), the weight update between them
# and the next element-wise kernel.
BWD_TENSORS = [
    (A, False),
    (4096, True),
    (A, False),
    (A, False),
    (4096, False),
    (S, False),
    (A, False),
    (4096, True),
    (A, False),
]
#               0 g        1 gamma       2 n         3 dn        4 dgamma      5 r
#               6 dx       7 W           8 dW
BWD_KERNELS = [
    ("Linear_Backward_Input", [7, 0], [0]),
    ("Multiply_Backward", [0, 1], [3]),
    ("Multiply_Backward", [0, 2], [4]),
    ("Apply_Grad", [1, 4], [1]),
    ("Divide_Backward_A", [3, 5], [6]),
    ("Linear_Backward_Weight", [6, 2], [8]),
]
BWD_TIMES = [(40000, 41000, 42000)] + [(9000, 9500, 10000)] * 4 + [(40000, 41000, 42000)]


def test_update_kernels_wait_for_the_open_group():
    w = _workload(BWD_TENSORS, BWD_KERNELS, BWD_TIMES)
    assert kernel_classes(w) == ["C", "B", "B", "E", "B", "C"]
    for mode in ("xla", "stitch"):
        assert plan_groups(w, FusionOptions(mode=mode)) == [[0], [1, 2, 4], [3], [5]]
        f = fuse(w, mode)
        assert f.kernel_name[1].endswith("_Backward") and f.kernel_name[2] == "Apply_Grad"
        # dn goes (inside the group only); dgamma stays (the update reads it)
        assert list(f.meta["fusion"]["tensor_map"]) == [0, 1, 2, -1, 3, 4, 5, 6, 7]
    assert plan_groups(w, FusionOptions(mode="stitch", defer_update=False)) == [[0], [1, 2], [3], [4], [5]]


def test_op_classes():
    assert [
        op_class(n)
        for n in (
            "Conv2d_Forward",
            "Linear_Backward_Weight",
            "BatchMatMul_Backward",
            "GatherV2_Forward",
            "makeLoss",
            "LoadData_A0",
        )
    ] == ["C"] * 6
    assert [
        op_class(n)
        for n in (
            "ReLU_Forward",
            "Add_MultiGredient",
            "Conv2d_Apply_Grad",
            "MaxPool2d_Forward",
            "Erf_Backward",
            "Sum_Backward",
        )
    ] == ["E"] * 6
    assert [
        op_class(n)
        for n in (
            "Sum_Forward",
            "SoftmaxBasic_Backward",
            "BatchNorm2d_Forward",
            "Linear_Backward_Bias",
            "AdaptiveAvgPool2d_Forward",
        )
    ] == ["R"] * 5
    assert op_class("MaxPool2d_Forward", pooling="C") == "C"
    assert [
        op_class(n)
        for n in ("aten::addmm", "aten::convolution_backward", "aten::native_layer_norm", "aten::gelu")
    ] == ["C", "C", "R", "B"]
    w = fwd()
    import dataclasses

    w2 = dataclasses.replace(w, meta={"op_class": ["compute", "E", "E", "E", "E", "C", "C"]})
    assert kernel_classes(w2) == ["C", "E", "E", "E", "E", "C", "C"]
    # as element-wise kernels, the Sum's result is no reduction edge: xla fuses all four
    assert plan_groups(w2, FusionOptions(mode="xla")) == [[0], [1, 2, 3, 4], [5], [6]]
    with pytest.raises(InputError):
        kernel_classes(dataclasses.replace(w, meta={"op_class": ["X"] * 7}))


# ---------------------------------------------------------------------------------------------
# invariants on real workloads


def check_invariants(w, f):
    K = w.num_kernels
    fm = f.meta["fusion"]
    members = fm["members"]
    tmap = np.asarray(fm["tensor_map"])
    # kernel ids dense: the groups partition 0..K-1, one new kernel each
    assert f.num_kernels == len(members)
    assert sorted(k for m in members for k in m) == list(range(K))
    cls = kernel_classes(w)
    for m in members:
        if len(m) > 1:  # never a GEMM / convolution inside a fused kernel
            assert all(cls[k] != "C" for k in m)
    # bytes: weights untouched, deleted tensors non-global and used inside one group only
    keep = tmap >= 0
    assert np.array_equal(f.raw_size, w.raw_size[keep])
    assert int(w.raw_size[~keep].sum()) + int(f.raw_size.sum()) == int(w.raw_size.sum())
    assert not np.any(w.is_global[~keep]) and f.weights_bytes == w.weights_bytes
    grp = np.empty(K, np.int64)
    for g, m in enumerate(members):
        grp[list(m)] = g
    groups_of = {}
    for k in range(K):
        for t in np.union1d(w.inputs(k), w.outputs(k)):
            groups_of.setdefault(int(t), set()).add(int(grp[k]))
    for t in np.nonzero(~keep)[0]:
        assert len(groups_of[int(t)]) == 1

    # every tensor still produced before use: the non-global tensors read before any
    # kernel writes them are the same ones
    def read_first(x):
        first_w = np.full(x.num_tensors, 1 << 60)
        first_r = np.full(x.num_tensors, 1 << 60)
        for k in range(x.num_kernels):
            for t in x.outputs(k):
                first_w[t] = min(first_w[t], k)
            for t in x.inputs(k):
                first_r[t] = min(first_r[t], k)
        # read at or before the first write (a kernel that reads and writes it reads first)
        return set(np.nonzero((first_r <= first_w) & (first_r < 1 << 60) & ~x.is_global)[0].tolist())

    before = {int(tmap[t]) for t in read_first(w) if tmap[t] >= 0}
    assert read_first(f) == before
    # FLOPs conserved; traffic never grows; times ordered, no fused kernel slower than its
    # members in a row
    assert kernel_flops(f).sum() == pytest.approx(kernel_flops(w).sum())

    def traffic(x):
        return sum(
            int(x.raw_size[x.inputs(k)].sum() + x.raw_size[x.outputs(k)].sum()) for k in range(x.num_kernels)
        )

    assert traffic(f) <= traffic(w)
    assert np.all(f.exec_cycles >= 1)
    assert np.all(f.exec_cycles <= f.input_pf_cycles) and np.all(f.input_pf_cycles <= f.pf_cycles)
    for g, m in enumerate(members):
        assert f.exec_cycles[g] <= w.exec_cycles[list(m)].sum()
    assert f.ideal_cycles <= w.ideal_cycles
    addr, W = address_layout(f.size, f.is_global)
    assert np.array_equal(addr, f.address)


@pytest.fixture(scope="module")
def bert():
    from g10fast.api import builtin_workload

    return builtin_workload("bert-base", 2, "g10-artifact")


@pytest.mark.parametrize("mode", ["xla", "stitch"])
@pytest.mark.parametrize("model,batch", [("vit", 2), ("resnet152", 2), ("gpt2-xl", 1)])
def test_invariants_builtin(model, batch, mode):
    from g10fast.api import builtin_workload

    w = (
        builtin_workload(model, batch, "g10-artifact", seq_len=64)
        if model == "gpt2-xl"
        else builtin_workload(model, batch, "g10-artifact")
    )
    f = fuse(w, mode, hbm_gbps=1555)
    assert f.num_kernels < w.num_kernels
    check_invariants(lower_softmax(w), f)


@pytest.mark.parametrize("mode", ["xla", "stitch"])
def test_invariants_bert(bert, mode):
    f = fuse(bert, mode, hbm_gbps=1555)
    lw = lower_softmax(bert)
    # 12 softmaxes each way: forward 1 -> 5 kernels, backward 1 -> 4
    assert lw.meta["lowering"]["softmax_kernels"] == 24 and lw.num_kernels == 1369 + 12 * 4 + 12 * 3
    assert lw.meta["lowering"]["softmax_rows"] == [128] and lw.meta["lowering"]["new_tensors"] == 84
    check_invariants(lw, f)
    # the pass's ids are the lowered workload's; with softmax = "kernel", the workload's own
    g = fuse(bert, mode, hbm_gbps=1555, softmax="kernel")
    check_invariants(bert, g)
    assert g.meta["fusion"]["lowering"] is None


@pytest.mark.skipif(not (ART / "frontend" / "Nets").is_dir(), reason="no G10 artifact")
@pytest.mark.parametrize("model,batch", [("BERT", 128), ("ResNet152", 256)])
def test_invariants_artifact(model, batch):
    from g10fast.config import genconfig
    from g10fast.run import workload_of
    from g10fast.spec import from_g10_config, with_fuse

    spec = from_g10_config(genconfig(ART, model, batch, "lru"))
    w = workload_of(spec)
    lw = lower_softmax(w, spec.system.gpu_frequency_ghz)
    assert (lw.meta.get("lowering") or {}).get("softmax_kernels", 0) == (24 if model == "BERT" else 0)
    for mode in ("xla", "stitch"):
        f = workload_of(with_fuse(spec, mode))
        check_invariants(lw, f)
        assert f.num_kernels < w.num_kernels


LN = [
    "Sum_Forward",
    "Divide_Forward",
    "Subtract_Forward",
    "Power_Forward",
    "Sum_Forward",
    "Divide_Forward",
    "Add_Forward",
    "Sqrt_Forward",
    "Divide_Forward",
    "Multiply_Forward",
    "Add_Forward",
]


def _layer_norms(w):
    """Start kernels of every forward LayerNorm (G10's 11-op expansion)."""
    n = w.kernel_name
    return [k for k in range(len(n) - 10) if n[k : k + 11] == LN]


def test_layer_norm_forward_is_one_kernel_under_stitch(bert):
    starts = _layer_norms(bert)
    assert len(starts) == 25  # embeddings + 2 per layer x 12
    for mode, per_ln in (("stitch", 1), ("xla", 3)):
        groups = plan_groups(bert, FusionOptions(mode=mode))
        where = {k: g for g, m in enumerate(groups) for k in m}
        for s in starts:
            assert len({where[k] for k in range(s, s + 11)}) == per_ln, (mode, s)


def test_summary_counts(bert):
    s0 = summary(bert)
    sx = summary(fuse(bert, "xla"))
    ss = summary(fuse(bert, "stitch"))
    assert s0["kernels"] == 1369
    assert ss["kernels"] < sx["kernels"] < s0["kernels"]
    assert ss["footprint_bytes"] < sx["footprint_bytes"] < s0["footprint_bytes"]
    assert ss["flops"] == sx["flops"] == s0["flops"] > 0


# ---------------------------------------------------------------------------------------------
# fuse = none changes nothing; the option travels through the spec


def test_none_is_identity_and_spec_hash_unchanged(bert):
    from g10fast.spec import RunSpec, builtin_spec, with_fuse

    assert fuse(bert, "none") is bert
    spec = builtin_spec("bert-base", 2, "g10-artifact", "lru")
    assert "fuse" not in spec.to_dict()["workload"]
    assert with_fuse(spec, "none").hash() == spec.hash()
    s2 = with_fuse(spec, "stitch")
    assert s2.hash() != spec.hash()
    assert RunSpec.from_dict(s2.to_dict()) == s2
    with pytest.raises(InputError):
        with_fuse(spec, "loop")


def test_run_file_key():
    from g10fast.spec import run_file_specs

    d = {"workload": {"model": "bert-base", "batch": 2, "fuse": "xla"}, "policy": {"names": ["lru", "ideal"]}}
    specs = run_file_specs(d)
    assert [s.workload.fuse for s in specs] == ["xla", "xla"]
    with pytest.raises(InputError, match="fusion mode"):
        run_file_specs({"workload": {"model": "bert-base", "batch": 2, "fuse": "all"}})


def test_run_results_none_identical_and_fused_runs():
    from g10fast.run import run, workload_of
    from g10fast.spec import builtin_spec, with_fuse

    spec = builtin_spec("vit", 1, "g10-artifact", "lru", overrides={"gpu.memory_gb": 0.05})
    a = run(spec)
    b = run(with_fuse(spec, "none"))
    for k in ("status", "reported"):
        assert a[k] == b[k]
    assert a["iterations"] == b["iterations"]
    fs = with_fuse(spec, "stitch")
    c = run(fs)
    wf = workload_of(fs)
    assert c["status"] == "ok" and "fusion" not in a
    assert c["fusion"]["mode"] == "stitch" and c["fusion"]["kernels_after"] == wf.num_kernels
    it = c["iterations"][c["reported"]]
    assert it["ideal_exe_time_cycles"] == wf.ideal_cycles < workload_of(spec).ideal_cycles


def test_cli_fuse(capsys):
    import json
    from g10fast.cli import main

    assert (
        main(
            [
                "run",
                "--model",
                "vit",
                "--batch",
                "1",
                "--policy",
                "ideal",
                "--fuse",
                "xla",
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "ok" and out["fusion"]["mode"] == "xla"
    assert out["fusion"]["kernels_after"] < out["fusion"]["kernels_before"]
    with pytest.raises(SystemExit) as e:
        main(["run", "--model", "vit", "--batch", "1", "--fuse", "loop"])
    assert e.value.code == 2


def test_live_bytes_matches_the_vitality_analysis(bert):
    from g10fast.analysis.vitality import is_alive, vitality
    from g10fast.workload.fusion import live_bytes

    for w in (bert, fuse(bert, "stitch")):
        v = vitality(w, 1.2)
        ref = [int(w.size[is_alive(v, w, k)].sum()) for k in range(w.num_kernels)]
        assert list(live_bytes(w)) == ref


@pytest.mark.parametrize("seed", range(40))
def test_invariants_random_graphs(seed):
    """Random graphs (in-place updates, workspaces, input-only tensors) with random op classes
    and phases: the invariants hold in both modes, and fusion never fuses across a C kernel."""
    import dataclasses
    from synth import make_workload

    w = make_workload(seed, n_kernels=30, n_tensors=70)
    rng = np.random.default_rng(seed)
    cls = rng.choice(list("CEBR"), size=w.num_kernels, p=[0.25, 0.35, 0.2, 0.2]).tolist()
    ph = np.repeat(["forward", "backward"], [12, 18]).tolist()
    for k in rng.choice(np.arange(12, 30), size=4, replace=False):
        ph[k] = "update"
    w = dataclasses.replace(w, meta=dict(w.meta, op_class=cls, kernel_phase=ph))
    for mode in ("xla", "stitch"):
        f = fuse(w, mode, hbm_gbps=1000, stitch_max_reduce=int(rng.integers(1, 8)))
        check_invariants(w, f)


# ---------------------------------------------------------------------------------------------
# Fixed costs, the host in the loop, and what a gain is made of


def test_default_launch_is_each_kernels_cost_model_overhead():
    """launch_us unset: each member's fixed cost is its class's overhead_us in a100.toml
    (Add_Forward 12, Sum_Forward 40, Divide_Forward 16, Subtract_Forward 8 µs), the fused
    kernel pays the largest (40 µs = 48,000 cycles) and the members' bodies beyond their own
    costs (only Subtract's 12,000 - 9,600 = 2,400 cycles) scale with the traffic left."""
    from g10fast.workload.fusion import kernel_overheads

    w = fwd()
    ov = kernel_overheads(w, 1.2)
    assert list(ov[1:5]) == [14400.0, 48000.0, 19200.0, 9600.0]
    f = fuse(w, "stitch", time_model="traffic_scaled")
    ext, io = 528640, 1316096
    assert f.exec_cycles[1] == round(48000 + 2400 * ext / io) == 48964
    # traffic_attributed: only d is moved at a member's rate beyond its fixed cost
    f = fuse(w, "stitch")
    assert f.exec_cycles[1] == round(48000 + 2400 * D / (C + M + D)) == 49199
    # the fused kernel's one cost, and the unfused kernels' own (capped at their times)
    assert list(f.meta["kernel_launch_cycles"]) == [48000.0, 48000.0, 48000.0, 7000.0]
    assert list(kernel_overheads(f, 1.2)) == [48000.0, 48000.0, 48000.0, 7000.0]
    assert list(kernel_overheads(f, 1.2, launch_us=1.0)) == [1200.0] * 4
    with pytest.raises(InputError):
        fuse(w, "stitch", launch_us=-1.0)


def _host_twin(t, h):
    end, out = 0.0, []
    for k, tk in enumerate(t):
        end = max((k + 1) * h, end) + tk
        out.append(end)
    return out


def test_host_timeline():
    from g10fast.workload.fusion import host_timeline

    # issue at 5, 10, 15, 20: the GPU waits 5 for the first launch and 1 for the last
    assert list(host_timeline([10, 2, 2, 10], 5)) == [15.0, 17.0, 19.0, 30.0]
    assert list(host_timeline([10, 2, 2, 10], 0)) == [10.0, 12.0, 14.0, 24.0]
    rng = np.random.default_rng(3)
    for _ in range(20):
        t = rng.integers(0, 50, size=int(rng.integers(1, 60))).astype(float)
        h = float(rng.integers(0, 40))
        assert np.allclose(host_timeline(t, h), _host_twin(t, h))
    with pytest.raises(InputError):
        host_timeline([1.0], -1.0)


def test_gain_breakdown_parts_sum_to_the_time_saved():
    from g10fast.workload.fusion import gain_breakdown, time_breakdown

    w = fwd()
    kw = {"launch_us": 5.0, "time_model": "traffic_scaled"}
    a = time_breakdown(fuse(w, "xla", **kw), 1.2, host_launch_us=40.0)
    b = time_breakdown(fuse(w, "stitch", **kw), 1.2, host_launch_us=40.0)
    # xla: 5 kernels, stitch: 4; at 40 µs (48,000 cycles) per launch the host is behind
    assert (a["kernels"], b["kernels"]) == (5, 4)
    assert a["total_s"] == pytest.approx(a["launch_s"] + a["work_s"] + a["idle_s"])
    g = gain_breakdown(a, b)
    assert g["saved_s"] == pytest.approx(g["launches_s"] + g["traffic_s"] + g["switches_s"])
    # one launch fewer: 5 µs on the GPU; under xla c and s are written by [Add, Sum] and read
    # back by [Divide, Subtract] (m stays inside that group): 2 (C + S) bytes that stitch saves
    assert g["launches_s"] == pytest.approx(5e-6)
    assert a["traffic_bytes"] - b["traffic_bytes"] == 2 * (C + S) == 524800
    # by hand: xla ends at 98,000, 116,033, 157,992, 242,000, 249,000 cycles (kernels
    # 50,000 + 18,033 + 13,992 + 50,000 + 7,000 = 139,025), stitch at 98,000, 114,443,
    # 194,000, 201,000 (123,443): the GPU waits 109,975 against 77,557 cycles
    assert a["total_s"] * 1.2e9 == pytest.approx(249000)
    assert b["total_s"] * 1.2e9 == pytest.approx(201000)
    assert g["switches_s"] * 1.2e9 == pytest.approx(109975 - 77557)
    assert g["speedup"] == pytest.approx(249000 / 201000)


def test_forward_only():
    from g10fast.workload.inference import forward_only

    w = _workload(
        BWD_TENSORS[:1] + FWD_TENSORS[1:],
        FWD_KERNELS + [("Linear_Backward_Input", [11, 9], [8]), ("Apply_Grad", [9, 10], [9])],
        FWD_TIMES + [(1, 1, 1), (2, 2, 2)],
    )
    f = forward_only(w)
    # the loss, the backward and the update go; so does dy (11), touched by them only
    assert f.kernel_name == [k[0] for k in FWD_KERNELS[:-1]]
    assert f.num_tensors == 11 and list(f.exec_cycles) == [t[0] for t in FWD_TIMES[:-1]]
    assert f.meta["inference"]["kernels_before"] == 9


# ---------------------------------------------------------------------------------------------
# Softmax as TensorFlow lowers it to XLA

V = A // 64  # a row vector: one element per row of 64
SM_TENSORS = [
    (4096, True),
    (A, False),
    (A, False),
    (A, False),
    (4096, True),
    (A, False),
    (A, False),
    (A, False),
    (A, False),
]
#              0 W           1 in        2 x         3 y         4 W2          5 z
#              6 dy        7 dx        8 din
SM_KERNELS = [
    ("Linear_Forward", [0, 1], [2]),
    ("SoftmaxBasic_Forward", [2], [3]),
    ("Linear_Forward", [3, 4], [5]),
    ("Linear_Backward_Input", [5, 4], [6]),
    ("SoftmaxBasic_Backward", [3, 6], [7]),
    ("Linear_Backward_Input", [7, 0], [8]),
]
SM_TIMES = [
    (50000, 51000, 52000),
    (20000, 22000, 26000),
    (50000, 51000, 52000),
    (50000, 51000, 52000),
    (30000, 33000, 39000),
    (50000, 51000, 52000),
]


def softmax_graph():
    import dataclasses

    w = _workload(SM_TENSORS, SM_KERNELS, SM_TIMES)
    return dataclasses.replace(w, meta=dict(w.meta, softmax_row=64))


def test_lower_softmax_by_hand():
    w = softmax_graph()
    lw = lower_softmax(w, 1.2, launch_us=5.0)
    assert lw.kernel_name == [
        "Linear_Forward",
        "SoftmaxMax_Forward",
        "SoftmaxSub_Forward",
        "SoftmaxExp_Forward",
        "SoftmaxSum_Forward",
        "SoftmaxDiv_Forward",
        "Linear_Forward",
        "Linear_Backward_Input",
        "SoftmaxMul_Backward",
        "SoftmaxSum_Backward",
        "SoftmaxSub_Backward",
        "SoftmaxScale_Backward",
        "Linear_Backward_Input",
    ]
    # new tensors after the old ones: forward m, d, e, s; backward p, s, d
    assert list(lw.raw_size[9:]) == [V, A, A, V, A, V, A]
    tmap = lw.meta["lowering"]["tensor_map"]
    assert np.array_equal(lw.raw_size[tmap], w.raw_size)
    assert list(lw.meta["lowering"]["kernel_of"]) == [0, 1, 1, 1, 1, 1, 2, 3, 4, 4, 4, 4, 5]
    # each op: the fixed cost (6,000) + the softmax's rate (14,000 cycles per 2A bytes
    # forward, 24,000 per 3A backward) times its own bytes
    assert list(lw.exec_cycles[1:6]) == [
        round(6000 + 14000 * b / (2 * A)) for b in (A + V, 2 * A + V, 2 * A, A + V, 2 * A + V)
    ]
    assert list(lw.exec_cycles[1:6]) == [13109, 20109, 20000, 13109, 20109]
    assert list(lw.exec_cycles[8:12]) == [30000, 14125, 22125, 30000]
    assert list(lw.inputs(2)) == [2, 9] and list(lw.outputs(5)) == [3]
    assert lw.meta["op_class"][1:6] == ["R", "E", "E", "R", "E"]
    assert lw.meta["kernel_phase"][8:12] == ["backward"] * 4
    # no row length known: nothing changes
    assert lower_softmax(_workload(SM_TENSORS, SM_KERNELS, SM_TIMES)).num_kernels == 6


def test_softmax_under_xla_and_stitch():
    w = softmax_graph()
    kw = {"launch_us": 5.0}
    x = fuse(w, "xla", **kw)
    s = fuse(w, "stitch", **kw)
    k = fuse(w, "stitch", softmax="kernel", **kw)
    # XLA stops after each row reduction: max | sub exp sum | div, and mul sum | sub scale
    assert x.kernel_name == [
        "Linear_Forward",
        "SoftmaxMax_Forward",
        "FusedXla_Forward",
        "SoftmaxDiv_Forward",
        "Linear_Forward",
        "Linear_Backward_Input",
        "FusedXla_Backward",
        "FusedXla_Backward",
        "Linear_Backward_Input",
    ]
    # stitching fuses each softmax back into one kernel, in the softmax kernel's time
    assert s.num_kernels == k.num_kernels == w.num_kernels == 6
    fwd_work = 7109 * A / (A + V) + 14109 * A / (2 * A + V)
    # (the ops' times are whole cycles: one short of the softmax kernel's 20,000)
    assert s.exec_cycles[1] == round(6000 + fwd_work) == 19999
    assert s.exec_cycles[4] == 30000 and s.num_tensors == w.num_tensors
    # under XLA: the [sub, exp, sum] kernel moves x and m (sub's rate), e (exp's), s (sum's)
    mid = 6000 + 14109 * (A + V) / (2 * A + V) + 14000 * A / (2 * A) + 7109 * V / (A + V)
    assert x.exec_cycles[2] == round(mid)
    assert x.exec_cycles[1] == 13109 and x.exec_cycles[3] == 20109
    # m, e and s (forward) and s (backward) cross XLA's kernels; d and p stay inside one
    assert x.num_tensors == w.num_tensors + 4
    assert x.ideal_cycles > s.ideal_cycles


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("mode", "zz", "parameter 'fuse': unknown fusion mode 'zz' (known: none, xla, stitch)"),
        (
            "time_model",
            "q",
            "parameter 'fuse.time_model': unknown time model 'q' (known: "
            "traffic_attributed, traffic_scaled, sum_minus_launch, roofline)",
        ),
        ("softmax", "x", "parameter 'fuse.softmax': unknown softmax form 'x' (known: ops, kernel)"),
    ],
)
def test_unknown_fusion_choices_are_named(field, value, needle):
    with pytest.raises(InputError) as e:
        FusionOptions(**{field: value}).check()
    assert str(e.value) == needle
