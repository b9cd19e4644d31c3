"""CNN front end (g10fast.workload.cnn) against G10's own outputs and the artifact's files."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from g10fast.errors import InputError
from g10fast.workload.cnn import graph_from_text, parse_cnn
from g10fast.workload.model import Graph, page_round
from g10fast.workload.zoo import ARTIFACT_MODELS, load_artifact_graph

SHARED = Path(__file__).resolve().parents[2] / "shared"
ARTIFACT = SHARED / "g10-artifact"
NETS = ARTIFACT / "frontend" / "Nets"
REF = SHARED / "reference" / "ResNet152-256-lru" / "statistics"

needs_nets = pytest.mark.skipif(not NETS.is_dir(), reason="G10 artifact not available")

CNN_COUNTS = {
    "AlexNet": 66,
    "ResNet18": 186,
    "ResNet34": 330,
    "ResNet50": 449,
    "WResNet50_2": 449,
    "ResNeXt101_32x8d": 874,
    "WResNet101_2": 874,
    "ResNet152": 1299,
    "Inceptionv3": 929,
    "SENet16": 249,
    "SENet154": 2319,
}

BN = "eps=1e-05, momentum=0.1, affine=True, track_running_stats=False"
MINI_RESNET = f"""ResNet(
  (conv1): Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)
  (bn1): BatchNorm2d(4, {BN})
  (relu): ReLU(inplace=True)
  (layer1): Sequential(
    (0): BasicBlock(
      (conv1): Conv2d(4, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)
      (bn1): BatchNorm2d(4, {BN})
      (relu): ReLU(inplace=True)
      (conv2): Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)
      (bn2): BatchNorm2d(8, {BN})
      (downsample): Sequential(
        (0): Conv2d(4, 8, kernel_size=(1, 1), stride=(2, 2), bias=False)
        (1): BatchNorm2d(8, {BN})
      )
    )
  )
  (avgpool): AdaptiveAvgPool2d(output_size=(1, 1))
  (fc): Linear(in_features=8, out_features=10, bias=False)
)
"""


def _mini(family="resnet", text=MINI_RESNET):
    return graph_from_text(text, 2, 8, 8, family, name="mini", path="mini.txt")


def _kernel(g: Graph, k: int):
    return (g.kernel_name[k], g.kernel_parent[k], set(g.inputs(k).tolist()), set(g.outputs(k).tolist()))


# ------------------------------------------------------------------------------------------
# Hand-derived mini ResNet (planner spec §2.2-§2.5): every tensor and kernel


def test_mini_resnet_tensors():
    g = _mini()
    bn4 = [2048, 2048, 32, 32, 16, 16, 2048, 16, 16, 16, 2048, 16]
    bn8 = [1024, 1024, 64, 64, 32, 32, 1024, 32, 32, 32, 1024, 32]
    expect = (
        [1536, 2048, 432, 432, 1536]
        + bn4
        + [2048]  # conv0 (+A0), bn, relu
        + [2048, 576, 576, 2048]
        + bn4
        + [2048]  # block conv1, bn1, relu
        + [1024, 1152, 1152, 2048]
        + bn8  # conv2, bn2
        + [1024, 128, 128, 2048]
        + bn8  # ds conv, ds bn
        + [1024, 64, 1024, 320, 80, 64, 320, 80]
    )  # Add, avgpool, fc, loss grad
    assert g.raw_size.tolist() == expect
    assert np.flatnonzero(g.is_global).tolist() == [2, 7, 19, 24, 36, 41, 52, 57, 70]
    assert g.meta == {"format": "cnn", "path": "mini.txt", "family": "resnet"}


def test_mini_resnet_kernels():
    g = _mini()
    C, B, R = "Conv2d", "BatchNorm2d", "ReLU"
    expect = [
        ("LoadData_A0", f"0:{C}", set(), {0}),
        ("Conv2d_Forward", f"0:{C}", {0, 2}, {1}),
        ("BatchNorm2d_Forward", f"1:{B}", {1, 7}, {5, 9, 10, 11, 12}),
        ("ReLU_Forward", f"2:{R}", {5}, {5}),
        ("Conv2d_Forward", f"3:{C}", {5, 19}, {18}),
        ("BatchNorm2d_Forward", f"4:{B}", {18, 24}, {22, 26, 27, 28, 29}),
        ("ReLU_Forward", f"5:{R}", {22}, {22}),
        ("Conv2d_Forward", f"6:{C}", {22, 36}, {35}),
        ("BatchNorm2d_Forward", f"7:{B}", {35, 41}, {39, 43, 44, 45, 46}),
        ("Conv2d_Forward", f"8:{C}", {5, 52}, {51}),  # downsample reads the block input
        ("BatchNorm2d_Forward", f"9:{B}", {51, 57}, {55, 59, 60, 61, 62}),
        ("Add_Forward", "10:Add", {39, 55}, {67}),
        ("AdaptiveAvgPool2d_Forward", "11:AdaptiveAvgPool2d", {67}, {68}),
        ("Linear_Forward", "12:Linear", {68, 70}, {71}),
        ("makeLoss", "12:Linear", {71}, {74}),
        ("Linear_Backward_Weight", "12:Linear", {74, 68}, {73}),
        ("Linear_Backward_Input", "12:Linear", {70, 74}, {72}),
        ("Linear_Apply_Grad_Weight", "12:Linear", {73, 70}, {70}),
        ("AdaptiveAvgPool2d_Backward", "11:AdaptiveAvgPool2d", {67, 72}, {69}),
        ("BatchNorm2d_Backward", f"9:{B}", {69, 61, 62, 57}, {56, 58, 63, 64, 65, 66}),
        ("BatchNorm2d_Apply_Grad", f"9:{B}", {58, 57}, {57}),
        ("Conv2d_Backward_Weight", f"8:{C}", {56, 5}, {53}),
        ("Conv2d_Backward_Input", f"8:{C}", {56, 52}, {54}),
        ("Conv2d_Apply_Grad", f"8:{C}", {53, 52}, {52}),
        ("BatchNorm2d_Backward", f"7:{B}", {69, 45, 46, 41}, {40, 42, 47, 48, 49, 50}),
        ("BatchNorm2d_Apply_Grad", f"7:{B}", {42, 41}, {41}),
        ("Conv2d_Backward_Weight", f"6:{C}", {40, 22}, {37}),
        ("Conv2d_Backward_Input", f"6:{C}", {40, 36}, {38}),
        ("Conv2d_Apply_Grad", f"6:{C}", {37, 36}, {36}),
        ("ReLU_Backward", f"5:{R}", {22, 38}, {34}),
        ("BatchNorm2d_Backward", f"4:{B}", {34, 28, 29, 24}, {23, 25, 30, 31, 32, 33}),
        ("BatchNorm2d_Apply_Grad", f"4:{B}", {25, 24}, {24}),
        ("Conv2d_Backward_Weight", f"3:{C}", {23, 5}, {20}),
        ("Conv2d_Backward_Input", f"3:{C}", {23, 19}, {21}),
        ("Conv2d_Apply_Grad", f"3:{C}", {20, 19}, {19}),
        ("Add_MultiGredient", f"2:{R}", {21, 54}, {21}),  # block input: main + downsample
        ("ReLU_Backward", f"2:{R}", {5, 21}, {17}),
        ("BatchNorm2d_Backward", f"1:{B}", {17, 11, 12, 7}, {6, 8, 13, 14, 15, 16}),
        ("BatchNorm2d_Apply_Grad", f"1:{B}", {8, 7}, {7}),
        ("Conv2d_Backward_Weight", f"0:{C}", {6, 0}, {3}),
        ("Conv2d_Backward_Input", f"0:{C}", {6, 2}, {4}),
        ("Conv2d_Apply_Grad", f"0:{C}", {3, 2}, {2}),
    ]
    assert [_kernel(g, k) for k in range(g.num_kernels)] == expect
    for ptr, idx in ((g.in_ptr, g.in_idx), (g.out_ptr, g.out_idx)):
        for k in range(g.num_kernels):
            row = idx[ptr[k] : ptr[k + 1]]
            assert np.all(np.diff(row) > 0)


def test_mini_without_family_is_a_plain_chain():
    # without is_resnet the downsample conv is chained after bn2 (8 channels, not 4)
    with pytest.raises(
        InputError,
        match=r"mini.txt:13:14: channel mismatch: Conv2d expects 4 "
        "input channels, its input layer gives 8",
    ):
        _mini(family=None)
    text = MINI_RESNET.replace("(0): Conv2d(4, 8", "(0): Conv2d(8, 8")
    g = _mini(family=None, text=text)
    assert "Add_Forward" not in g.kernel_name and "Add_MultiGredient" not in g.kernel_name
    assert g.num_kernels == 40


# ------------------------------------------------------------------------------------------
# ResNet152-256 against the C++ reference run


def _read_reference():
    tensors = []
    pat = re.compile(r"^tensor(\d+) Is weight \(global\)\?: ([01]), Size in byte: (\d+),")
    with gzip.open(REF / "tensors.config.gz", "rt") as f:
        for i, line in enumerate(f):
            m = pat.match(line)
            assert m and int(m.group(1)) == i
            tensors.append((int(m.group(3)), m.group(2) == "1"))
    kernels, cur, mode = [], None, None
    with gzip.open(REF / "kernels.config.gz", "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("Kernel ID:"):
                m = re.match(r"Kernel ID: (\d+), Name: (\S+)$", line)
                assert int(m.group(1)) == len(kernels)
                cur = {"name": m.group(2), "in": set(), "out": set()}
                kernels.append(cur)
            elif line.startswith("Parent Layer ID:"):
                m = re.match(r"Parent Layer ID:(\d+); Name:(\S+)$", line)
                cur["parent"] = f"{m.group(1)}:{m.group(2)}"
            elif line == "Input Tensors:":
                mode = "in"
            elif line == "Output Tensors:":
                mode = "out"
            elif line.startswith("tensor"):
                cur[mode].add(int(line.split()[0][len("tensor") :]))
    return tensors, kernels


@pytest.mark.skipif(not REF.is_dir() or not NETS.is_dir(), reason="reference run not available")
def test_resnet152_matches_cpp_reference():
    g = parse_cnn(NETS / "ResNet152.txt", 256, 224, 224, "resnet")
    tensors, kernels = _read_reference()
    T = g.num_tensors
    # 2903 model tensors (the spec's 3330 is 2903 + 427 workspaces at B >= 512); 622 global
    assert T == 2903 and int(g.is_global.sum()) == 622
    ref_size = np.array([s for s, _ in tensors], dtype=np.int64)
    ref_glob = np.array([gl for _, gl in tensors], dtype=bool)
    assert len(tensors) == 2903 + 463  # + ResNet152-256 workspaces
    assert np.array_equal(page_round(g.raw_size), ref_size[:T])
    assert np.array_equal(g.is_global, ref_glob[:T])
    assert not ref_glob[T:].any()
    assert len(kernels) == g.num_kernels == 1299
    mismatches = []
    for k, r in enumerate(kernels):
        mine = (g.kernel_name[k], g.kernel_parent[k], set(g.inputs(k).tolist()), set(g.outputs(k).tolist()))
        ref = (r["name"], r["parent"], {t for t in r["in"] if t < T}, {t for t in r["out"] if t < T})
        if mine != ref:
            mismatches.append((k, mine, ref))
    assert mismatches == []


# ------------------------------------------------------------------------------------------
# All artifact CNN files


@needs_nets
@pytest.mark.parametrize("stem", sorted(CNN_COUNTS))
def test_kernel_counts_batch2(stem):
    m = ARTIFACT_MODELS[stem]
    g = parse_cnn(NETS / f"{stem}.txt", 2, m.input_h, m.input_w, m.family)
    assert g.num_kernels == CNN_COUNTS[stem] == m.kernels
    assert g.name == stem
    assert g.kernel_name[0] == "LoadData_A0"
    assert g.kernel_name.count("makeLoss") == 1
    assert g.in_idx.max() < g.num_tensors and g.out_idx.max() < g.num_tensors


@needs_nets
@pytest.mark.parametrize("stem", ["Inceptionv3", "SENet154", "ResNet152"])
def test_counts_match_trace_lengths(stem):
    g = load_artifact_graph(NETS, stem, 512)
    with open(ARTIFACT / "results" / ARTIFACT_MODELS[stem].results / "cudnn512.txt") as f:
        assert g.num_kernels == sum(1 for _ in f)


# (model, batch): footprint with workspaces, global bytes, largest per-kernel working set, in
# GiB to 3 decimals, from G10's own console output (workloads spec §2 table).
FOOTPRINTS = [
    ("Inceptionv3", 512, 264.218, 0.090, 10.551),
    ("Inceptionv3", 1792, 918.677, 0.090, 36.929),
    ("SENet154", 256, 463.903, 1.298, 6.125),
    ("ResNet152", 256, 229.904, 0.226, 3.063),
]


@needs_nets
@pytest.mark.parametrize("stem,batch,total,glob,peak", FOOTPRINTS)
def test_memory_matches_g10(stem, batch, total, glob, peak):
    g = load_artifact_graph(NETS, stem, batch)
    ws_file = ARTIFACT / "results" / stem / f"cudnn{batch}Workspace.txt"
    ws = np.array([int(line.split()[1]) for line in ws_file.read_text().splitlines()])
    assert len(ws) == g.num_kernels
    size, wsr = page_round(g.raw_size), page_round(ws)
    gib = 2.0**30
    assert round((size.sum() + wsr.sum()) / gib, 3) == total
    assert round(size[g.is_global].sum() / gib, 3) == glob
    work = max(size[np.union1d(g.inputs(k), g.outputs(k))].sum() + wsr[k] for k in range(g.num_kernels))
    assert round(work / gib, 3) == peak
    # a workspace only ever belongs to a convolution or dropout kernel (kernel order check)
    allowed = {
        "Conv2d_Forward",
        "Conv2d_Backward_Weight",
        "Conv2d_Backward_Input",
        "Dropout_Forward",
        "Dropout_Backward",
    }
    assert {g.kernel_name[k] for k in np.flatnonzero(ws)} <= allowed


def _channels(g, k, which, hw):
    ids = g.inputs(k) if which == "in" else g.outputs(k)
    return sorted(int(g.raw_size[t]) // (4 * hw) for t in ids)


@needs_nets
def test_inception_concats():
    g = parse_cnn(NETS / "Inceptionv3.txt", 1, 299, 299, "inception")
    fwd = [k for k, n in enumerate(g.kernel_name) if n == "Concat_Forward"]
    bwd = [k for k, n in enumerate(g.kernel_name) if n == "Concat_Backward"]
    assert len(fwd) == len(bwd) == 15
    assert g.kernel_name.count("MaxPool2d_Forward") == 13
    assert _channels(g, fwd[0], "in", 35 * 35) == [32, 64, 64, 96]  # Mixed_5b
    assert _channels(g, fwd[0], "out", 35 * 35) == [256]
    assert _channels(g, fwd[3], "in", 17 * 17) == [96, 288, 384]  # Mixed_6a (pool 288)
    # Mixed_7b: inner concats c0, c1 of two 384-channel branches, then 320+768+768+192
    assert _channels(g, fwd[9], "in", 8 * 8) == [384, 384]
    assert _channels(g, fwd[10], "in", 8 * 8) == [384, 384]
    assert _channels(g, fwd[11], "in", 8 * 8) == [192, 320, 768, 768]
    # backward: the last Concat of the network is the first one differentiated
    assert _channels(g, bwd[0], "out", 8 * 8) == [192, 320, 768, 768]
    assert _channels(g, bwd[0], "in", 8 * 8) == [2048]


@needs_nets
def test_senet_scale_and_add():
    g = parse_cnn(NETS / "SENet16.txt", 2, 224, 224, "senet")
    scale = [k for k, n in enumerate(g.kernel_name) if n == "Scale_Forward"]
    assert len(scale) == 4
    k = scale[0]  # stage1: 256 channels at 56x56, the gate is 1x1
    assert [int(g.raw_size[t]) for t in g.inputs(k)] == [2 * 256 * 4]
    assert [int(g.raw_size[t]) for t in g.outputs(k)] == [2 * 256 * 56 * 56 * 4]
    add = g.kernel_name.index("Add_Forward")
    assert add > k and int(g.outputs(k)[0]) in g.inputs(add).tolist()
    assert [int(g.raw_size[t]) for t in g.inputs(add)] == [2 * 256 * 56 * 56 * 4] * 2


@needs_nets
def test_inceptionv3_o_is_rejected():
    with pytest.raises(InputError) as e:
        parse_cnn(NETS / "Inceptionv3-O.txt", 2, 299, 299, "inception")
    msg = str(e.value)
    assert "Inceptionv3-O.txt:" in msg and "InceptionA" in msg and "BasicConv2d" in msg


# ------------------------------------------------------------------------------------------
# Bad input


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read the model file"):
        parse_cnn(tmp_path / "nope.txt", 2, 224, 224, "resnet")


def test_syntax_error_names_line_col_and_expectation(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("ResNet(\n  (conv1): Conv2d(3, 64 kernel_size=(7, 7), stride=(2, 2), bias=False)\n)\n")
    with pytest.raises(InputError) as e:
        parse_cnn(p, 2, 224, 224, "resnet")
    assert str(e.value) == f"{p}:2:25: syntax error: expected ',', found 'kernel_size'"
    assert e.value.line == 2 and e.value.path == str(p)


def test_unknown_operator():
    text = MINI_RESNET.replace("(relu): ReLU(inplace=True)\n  (layer1)", "(relu): Sigmoid()\n  (layer1)")
    with pytest.raises(InputError, match=r"mini.txt:4:\d+: unknown operator 'Sigmoid'"):
        _mini(text=text)


def test_unexpected_character():
    with pytest.raises(InputError, match=r"mini.txt:2:22: unexpected character '-'"):
        _mini(text=MINI_RESNET.replace("Conv2d(3, 4", "Conv2d(3, -4", 1))


def test_first_layer_must_be_conv():
    text = "Net(\n  (relu): ReLU(inplace=True)\n  " + MINI_RESNET.split("\n", 2)[1] + "\n)\n"
    with pytest.raises(InputError, match=r"mini.txt:2:\d+: the first layer must be a Conv2d"):
        _mini(family=None, text=text)


def test_channel_mismatch():
    with pytest.raises(InputError, match="channel mismatch: Conv2d expects 5 input channels"):
        _mini(text=MINI_RESNET.replace("Conv2d(4, 4,", "Conv2d(5, 4,"))


def test_block_shape_rejected():
    text = MINI_RESNET.replace("      (relu): ReLU(inplace=True)\n", "")
    with pytest.raises(InputError, match="BasicBlock block has 5 children and 6 layers"):
        _mini(text=text)


@pytest.mark.parametrize("kw,val", [("batch_size", 0), ("input_h", -1), ("family", "vgg")])
def test_bad_parameters(kw, val):
    args = {"batch_size": 2, "input_h": 8, "input_w": 8, "family": "resnet"}
    args[kw] = val
    with pytest.raises(InputError, match=f"parameter '{kw}'"):
        graph_from_text(MINI_RESNET, **args)


def test_load_artifact_graph_unknown_model(tmp_path):
    with pytest.raises(InputError, match="unknown artifact model 'VGG'"):
        load_artifact_graph(tmp_path, "VGG", 2)


def test_load_artifact_graph_dispatches_transformers(monkeypatch, tmp_path):
    import g10fast.workload.transformer as tr

    calls = []
    monkeypatch.setattr(tr, "parse_transformer", lambda *a, **k: calls.append((a, k)) or "G")
    assert load_artifact_graph(tmp_path, "VIT", 16) == "G"
    assert calls == [((tmp_path / "VIT.txt", 16, 184), {"name": "VIT"})]


@needs_nets
@pytest.mark.parametrize("stem", ["BERT_Base", "VIT", "NeRF"])
def test_load_artifact_transformer_counts(stem):
    pytest.importorskip("g10fast.workload.transformer")
    g = load_artifact_graph(NETS, stem, 2)
    assert g.num_kernels == ARTIFACT_MODELS[stem].kernels and g.name == stem


def test_registry():
    assert len(ARTIFACT_MODELS) == 15
    assert {s for s, m in ARTIFACT_MODELS.items() if m.results} == {
        "BERT_Base",
        "VIT",
        "Inceptionv3",
        "ResNet152",
        "SENet154",
    }
    assert ARTIFACT_MODELS["Inceptionv3"].input_h == 299
    assert ARTIFACT_MODELS["ResNet50"].input_w == 224
    assert [ARTIFACT_MODELS[s].borden for s in ("BERT_Base", "VIT", "NeRF")] == [210, 184, 7]
    assert ARTIFACT_MODELS["SENet154"].family == "senet"
    assert ARTIFACT_MODELS["AlexNet"].family is None


# ------------------------------------------------------------------------------------------
# Fuzz: any mutation of a valid printout gives a Graph or an InputError, nothing else

_SNIPPETS = [
    "(",
    ")",
    ",",
    "=",
    ":",
    "0",
    "7",
    "99999999999999999999",
    "1.5",
    "1e-05",
    "True",
    "x",
    "-",
    "\n",
    " ",
    "Conv2d",
    "Sequential(",
    "BasicBlock(",
    "(a): ",
    "ReLU(inplace=False)",
    "MaxPool2d(kernel_size=3, stride=0, padding=9, dilation=1, ceil_mode=False)",
    "Linear(in_features=0, out_features=3, bias=True)",
    "Dropout(p=0.5, inplace=True)",
    "stride=(0, 0)",
    "\u00e9",
]


MINI_CHAIN = """Net(
  (features): Sequential(
    (0): Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    (1): ReLU(inplace=False)
    (2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  )
  (avgpool): AdaptiveAvgPool2d(output_size=(2, 2))
  (drop): Dropout(p=0.5, inplace=False)
  (fc): Linear(in_features=16, out_features=3, bias=True)
)
"""
_LAYER_LINES = [
    "(x): ReLU(inplace=False)",
    "(x): Dropout(p=0.5, inplace=True)",
    "(x): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)",
    "(x): AdaptiveAvgPool2d(output_size=(2, 2))",
    f"(x): BatchNorm2d(4, {BN.replace('False', 'True')})",
    "(x): Conv2d(4, 4, kernel_size=(1, 1), stride=(1, 1), bias=True)",
    "(x): Linear(in_features=8, out_features=4, bias=True)",
]
_NUMBERS = [0, 1, 2, 3, 4, 8, 16, 99999999999999999999]


@st.composite
def _mutated(draw):
    """Character-level damage, plus grammar-preserving edits that reach the graph builder."""
    text = draw(st.sampled_from([MINI_RESNET, MINI_CHAIN]))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        kind = draw(
            st.sampled_from(
                [
                    "delete",
                    "insert",
                    "truncate",
                    "dup_line",
                    "number",
                    "number",
                    "number",
                    "del_line",
                    "add_layer",
                    "add_layer",
                ]
            )
        )
        lines = text.split("\n")
        j = draw(st.integers(0, len(lines) - 1))
        if kind == "delete":
            text = text[:i] + text[min(n, i + draw(st.integers(1, 40))) :]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(_SNIPPETS)) + text[i:]
        elif kind == "truncate":
            text = text[:i]
        elif kind == "number":
            nums = list(re.finditer(r"(?<![.\w])\d+(?![.\w])", text))
            if nums:
                m = nums[draw(st.integers(0, len(nums) - 1))]
                text = text[: m.start()] + str(draw(st.sampled_from(_NUMBERS))) + text[m.end() :]
        elif kind == "del_line":
            del lines[j]
            text = "\n".join(lines)
        elif kind == "add_layer":
            lines.insert(j + 1, draw(st.sampled_from(_LAYER_LINES)))
            text = "\n".join(lines)
        else:
            lines.insert(draw(st.integers(0, len(lines))), lines[j])
            text = "\n".join(lines)
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_mutated(),
    family=st.sampled_from([None, None, "resnet", "resnet", "inception", "senet"]),
    batch=st.integers(1, 64),
)
def test_fuzz_graph_or_input_error(text, family, batch):
    try:
        g = graph_from_text(text, batch, 8, 8, family, path="fuzz.txt")
    except InputError as e:
        assert str(e).startswith("fuzz.txt:")
        return
    assert isinstance(g, Graph)
    assert g.num_kernels >= 3 and g.kernel_name[0] == "LoadData_A0"
    assert (g.raw_size > 0).all()
    assert g.in_idx.size == 0 or g.in_idx.max() < g.num_tensors
    assert g.out_idx.max() < g.num_tensors


def _csr_twin(lists):
    """Plain reference of `csr_from_lists`: each row through np.unique."""
    rows = [np.unique(np.asarray(list(r), dtype=np.int64)) for r in lists]
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    if rows:
        ptr[1:] = np.cumsum([len(r) for r in rows])
    idx = np.concatenate(rows).astype(np.int32) if rows and ptr[-1] > 0 else np.zeros(0, np.int32)
    return ptr, idx


def test_csr_from_lists_twin():
    """`csr_from_lists` (one sort of every id) equals a np.unique per row, on rows of lists,
    sets, int32 and int64 arrays, empty rows and repeated ids; and on no rows at all."""
    from g10fast.workload.model import csr_from_lists

    rng = np.random.default_rng(5)
    for case in range(200):
        lists = []
        for _ in range(int(rng.integers(0, 30))):
            r = rng.integers(0, 50, size=int(rng.integers(0, 9)))
            form = int(rng.integers(0, 4))
            lists.append(
                [int(x) for x in r]
                if form == 0
                else set(r.tolist())
                if form == 1
                else r.astype(np.int32)
                if form == 2
                else r
            )
        got, want = csr_from_lists(lists), _csr_twin(lists)
        assert got[0].dtype == np.int64 and got[1].dtype == np.int32
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), case
    ptr, idx = csr_from_lists([])
    assert ptr.tolist() == [0] and idx.shape == (0,)
    ptr, idx = csr_from_lists([[], [3, 1, 3], []])
    assert ptr.tolist() == [0, 0, 2, 2] and idx.tolist() == [1, 3]
