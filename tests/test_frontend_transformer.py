"""Transformer (operator-record) front end: G10's reference lists, artifact kernel counts, a
hand-derived mini model, bad input and a fuzz test."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from g10fast.errors import InputError
from g10fast.workload.model import address_layout, page_round
from g10fast.workload.transformer import SEPARATOR, parse_transformer

SHARED = Path(__file__).resolve().parents[2] / "shared"
NETS = SHARED / "g10-artifact" / "frontend" / "Nets"
RESULTS = SHARED / "g10-artifact" / "results"
REF = SHARED / "reference" / "BERT-128-lru" / "statistics"

_TENSOR = re.compile(
    r"tensor(\d+) Is weight \(global\)\?: ([01]), Size in byte: (\d+), "
    r"Range:(\d+)--(\d+)$"
)


def _need(*paths):
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p} not available")


# ------------------------------------------------------------------ G10 reference (BERT-128)


def _read_ref_tensors():
    with gzip.open(REF / "tensors.config.gz", "rt") as f:
        rows = [tuple(int(x) for x in _TENSOR.match(t).groups()) for t in f.read().splitlines() if t.strip()]
    return np.array(rows, dtype=np.int64)


def _read_ref_kernels():
    kernels = []
    mode = None
    with gzip.open(REF / "kernels.config.gz", "rt") as f:
        for line in f.read().splitlines():
            if line.startswith("Kernel ID:"):
                m = re.match(r"Kernel ID: (\d+), Name: (\S+)$", line)
                assert int(m[1]) == len(kernels)
                kernels.append({"name": m[2], "in": set(), "out": set()})
            elif line.startswith("Parent OP ID:"):
                m = re.match(r"Parent OP ID:(\d+); Name: (\S+)$", line)
                kernels[-1]["parent"] = f"{m[1]}:{m[2]}"
            elif line.startswith("Input Tensors:"):
                mode = "in"
            elif line.startswith("Output Tensors:"):
                mode = "out"
            elif line.startswith("tensor"):
                kernels[-1][mode].add(int(_TENSOR.match(line)[1]))
    return kernels


@pytest.fixture(scope="module")
def bert128():
    _need(NETS / "BERT_Base.txt", REF / "kernels.config.gz", REF / "tensors.config.gz")
    return parse_transformer(NETS / "BERT_Base.txt", 128, 210)


def test_bert_tensors_match_g10(bert128):
    ref = _read_ref_tensors()
    assert len(ref) == 1463 == bert128.num_tensors
    assert np.array_equal(ref[:, 0], np.arange(1463))
    size = page_round(bert128.raw_size)
    assert np.array_equal(size, ref[:, 2])
    assert np.array_equal(bert128.is_global, ref[:, 1] == 1)
    assert int(bert128.is_global.sum()) == int(ref[:, 1].sum())
    # Range = per-space offset (weights and intermediates each from 0), bumped in id order
    addr, weights = address_layout(size, bert128.is_global)
    offset = addr - np.where(bert128.is_global, 0, weights)
    assert np.array_equal(offset, ref[:, 3])
    assert np.array_equal(offset + size, ref[:, 4])
    assert weights == int(size[bert128.is_global].sum())


def test_bert_kernels_match_g10(bert128):
    ref = _read_ref_kernels()
    assert len(ref) == 1369 == bert128.num_kernels
    assert [k["name"] for k in ref] == bert128.kernel_name
    assert [k["parent"] for k in ref] == bert128.kernel_parent
    for k, r in enumerate(ref):
        assert set(bert128.inputs(k).tolist()) == r["in"], (k, r["name"])
        assert set(bert128.outputs(k).tolist()) == r["out"], (k, r["name"])
    # rows are sorted ascending without duplicates
    for ptr, idx in ((bert128.in_ptr, bert128.in_idx), (bert128.out_ptr, bert128.out_idx)):
        for k in range(bert128.num_kernels):
            row = idx[ptr[k] : ptr[k + 1]]
            assert np.all(np.diff(row) > 0)
    assert bert128.kernel_name.index("makeLoss") == 477
    assert bert128.meta == {"format": "transformer", "path": str(NETS / "BERT_Base.txt"), "borden": 210}
    assert bert128.name == "BERT_Base" and bert128.batch_size == 128


def test_bert_batch_placeholder():
    _need(NETS / "BERT_Base.txt")
    g = parse_transformer(NETS / "BERT_Base.txt", 256, 210, name="bert")
    # tensor 0 is op 215's output, recorded as (99, 128, 768) fp32
    assert g.raw_size[0] == 256 * 128 * 768 * 4
    # the word embedding table (id 0, 30522 x 768) is tensor 5 and has no batch dimension
    assert g.raw_size[5] == 30522 * 768 * 4 and g.is_global[5]
    assert g.name == "bert" and g.num_kernels == 1369 and g.num_tensors == 1463


# ------------------------------------------------------------------ artifact kernel counts


@pytest.mark.parametrize(
    "model,borden,kernels,results_dir",
    [
        ("VIT", 184, 1489, "VIT"),
        ("BERT_Base", 210, 1369, "BERT_Base"),
        ("NeRF", 7, 40, None),
    ],
)
def test_kernel_counts_equal_trace_lines(model, borden, kernels, results_dir):
    _need(NETS / f"{model}.txt")
    g1 = parse_transformer(NETS / f"{model}.txt", 256, borden)
    g2 = parse_transformer(NETS / f"{model}.txt", 1024, borden)
    assert g1.num_kernels == kernels
    # the kernel list does not depend on the batch size
    assert g1.kernel_name == g2.kernel_name
    assert np.array_equal(g1.in_idx, g2.in_idx) and np.array_equal(g1.out_idx, g2.out_idx)
    if results_dir is not None:
        traces = sorted((RESULTS / results_dir).glob("cudnn*.txt"))
        if not traces:
            pytest.skip("no trace files")
        for t in traces:
            with open(t) as f:
                assert sum(1 for _ in f) == kernels, t.name


def test_vit_details():
    _need(NETS / "VIT.txt")
    g = parse_transformer(NETS / "VIT.txt", 256, 184)
    names = g.kernel_name
    assert names.index("makeLoss") == 509
    assert names.count("Apply_Grad") == 176 and names.count("Add_MultiGredient") == 74
    # the patch convolution has a data input: weight gradient only
    assert names.count("Conv2d_Backward_Weight") == 1 and "Conv2d_Backward_Input" not in names
    assert names.count("Erf_Forward") == 12 and names.count("Erf_Backward") == 12
    assert names.count("Divide_Backward_B") == 37


# ------------------------------------------------------------------ hand-derived mini model

MINI = (
    "\n".join(
        line + " " + SEPARATOR
        for line in [
            "20 GatherV2 2 0 11  2 5 3  1 99",
            "21 Dot 2 20 1  2 99 3  2 3 3",
            "22 SoftmaxBasic 1 21  2 99 3",
            "23 SoftmaxBasic 2 21 22  2 99 3  1 99",
            "24 SoftmaxBasic 1 23  2 99 3",
            "25 SoftmaxBasic 2 23 24  2 99 3  1 99",
            "26 Add 2 25 20  2 99 3  2 99 3",
            "27 Divide 2 26 2  2 99 3  1 1",
            "28 Power 2 27 3  2 99 3  1 1",
            "29 Relu 1 28  2 99 3",
        ]
    )
    + "\n"
)


def _write(tmp_path, text, name="model.txt"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_mini_model_by_hand(tmp_path):
    g = parse_transformer(_write(tmp_path, MINI), 2, 10)
    assert g.raw_size.tolist() == [
        24,
        60,
        8,
        60,
        24,
        36,
        24,
        36,
        24,
        24,
        24,
        24,
        24,
        24,
        4,
        24,
        4,
        24,
        4,
        24,
        24,
        24,
        24,
    ]
    assert np.nonzero(g.is_global)[0].tolist() == [1, 5, 14, 18]
    expected = [
        ("GatherV2_Forward", "20:GatherV2", [1, 2], [0]),
        ("Linear_Forward", "21:Dot", [0, 5], [4]),
        ("SoftmaxBasic_Forward", "25:SoftmaxBasic", [4], [8]),
        ("Add_Forward", "26:Add", [0, 8], [10]),
        ("Divide_Forward", "27:Divide", [10, 14], [13]),
        ("Power_Forward", "28:Power", [13, 18], [17]),
        ("ReLU_Forward", "29:Relu", [17], [20]),
        ("makeLoss", "29:Relu", [20], [22]),
        ("ReLU_Backward", "29:Relu", [17, 22], [21]),
        ("Power_Backward", "28:Power", [13, 18, 21], [19]),
        ("Divide_Backward_A", "27:Divide", [14, 19], [15]),
        ("Divide_Backward_B", "27:Divide", [13, 14, 19], [16]),
        ("Apply_Grad", "27:Divide", [14, 16], [14]),
        ("Add_Backward", "26:Add", [15], [11, 12]),
        ("SoftmaxBasic_Backward", "25:SoftmaxBasic", [4, 11], [9]),
        ("Linear_Backward_Weight", "21:Dot", [0, 9], [7]),
        ("Linear_Backward_Input", "21:Dot", [5, 9], [6]),
        ("Linear_Apply_Grad_Weight", "21:Dot", [5, 7], [5]),
        ("Add_MultiGredient", "20:GatherV2", [6, 12], [6]),
        ("GatherV2_Backward", "20:GatherV2", [2, 6], [3]),
        ("Apply_Grad", "20:GatherV2", [1, 3], [1]),
    ]
    got = [
        (g.kernel_name[k], g.kernel_parent[k], g.inputs(k).tolist(), g.outputs(k).tolist())
        for k in range(g.num_kernels)
    ]
    assert got == expected
    # borden decides globality: with borden 0 nothing is global, so the Dot has no weight
    with pytest.raises(InputError, match="no global"):
        parse_transformer(_write(tmp_path, MINI), 2, 0)


# ------------------------------------------------------------------ bad input


def _edit(line_no, old, new):
    lines = MINI.split("\n")
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text,line,pattern",
    [
        (_edit(3, "99", "9x"), 3, "non-negative integer"),
        (_edit(2, "2 20 1", "-2 20 1"), 2, "non-negative integer"),
        (_edit(2, "Dot", "Dott"), 2, "unknown op type 'Dott'"),
        (_edit(5, SEPARATOR, "---"), 5, "separator"),
        (_edit(4, " 3 ", " 0 "), 4, "dimension .* is 0"),
        (MINI.rstrip("\n").rsplit(" ", 3)[0], 10, "truncated"),  # last record cut short
        ("\n".join(MINI.split("\n")[:3]) + "\n", 3, "followed by 3"),  # softmax missing pieces
        (_edit(2, "21 Dot 2 20 1", "21 Dot 2 20 12"), 2, "no global"),  # Dot without a weight
        (_edit(9, "28 Power 2 27 3", "28 Power 2 4 3"), 9, "no gradient"),  # base is a constant
        (_edit(8, "27 Divide", "20 Divide"), 8, "duplicate op id 20"),
        # op 30's output is never consumed, and it is not the last op: no output gradient (O-22)
        (MINI.replace("\n", "\n30 Relu 1 20 2 99 3 " + SEPARATOR + "\n", 1), 2, "never consumed"),
        ("", 1, "no operator records"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, text, line, pattern):
    p = _write(tmp_path, text)
    with pytest.raises(InputError, match=pattern) as e:
        parse_transformer(p, 2, 10)
    assert e.value.path == str(p) and e.value.line == line
    assert str(e.value).startswith(f"{p}:{line}: ")


def test_missing_file_and_bad_parameters(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(InputError, match="cannot read") as e:
        parse_transformer(missing, 2, 10)
    assert e.value.path == str(missing)
    p = _write(tmp_path, MINI)
    with pytest.raises(InputError) as e:
        parse_transformer(p, 0, 10)
    assert e.value.param == "batch_size"
    with pytest.raises(InputError) as e:
        parse_transformer(p, 2, "10")
    assert e.value.param == "borden"
    p.write_bytes(MINI.encode() + b"\n\xff\xfe")
    with pytest.raises(InputError, match="UTF-8") as e:
        parse_transformer(p, 2, 10)
    assert e.value.line == 12


# ------------------------------------------------------------------ fuzz

_POOL = [
    "0",
    "1",
    "2",
    "3",
    "7",
    "8",
    "20",
    "21",
    "25",
    "29",
    "99",
    "-1",
    "x",
    "1e3",
    "",
    "99999999999",
    "4294967296",
    SEPARATOR,
    "Dot",
    "Relu",
    "SoftmaxBasic",
    "Power",
    "Divide",
    "Multiply",
    "Add",
    "GatherV2",
    "Convolution",
    "MaxPool5",
    "٣",
]


def _seeds():
    seeds = [MINI.split()]
    if (NETS / "NeRF.txt").exists():
        seeds.append((NETS / "NeRF.txt").read_text().split())
    return seeds


_SEEDS = _seeds()


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


_mutation = st.tuples(
    st.sampled_from(["replace", "delete", "insert", "truncate", "swap"]),
    st.integers(0, 10_000),
    st.sampled_from(_POOL),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, len(_SEEDS) - 1),
    mutations=st.lists(_mutation, max_size=4),
    batch=st.sampled_from([1, 2, 99, 256]),
    borden=st.integers(0, 30),
    per_line=st.integers(1, 12),
)
def test_fuzz_graph_or_input_error(fuzz_dir, seed, mutations, batch, borden, per_line):
    toks = list(_SEEDS[seed])
    for kind, pos, tok in mutations:
        i = pos % (len(toks) + 1)
        if kind == "replace" and i < len(toks):
            toks[i] = tok
        elif kind == "delete" and i < len(toks):
            del toks[i]
        elif kind == "insert":
            toks.insert(i, tok)
        elif kind == "truncate":
            toks = toks[:i]
        elif kind == "swap" and i + 1 < len(toks):
            toks[i], toks[i + 1] = toks[i + 1], toks[i]
    text = "\n".join(" ".join(toks[j : j + per_line]) for j in range(0, len(toks), per_line))
    p = fuzz_dir / "fuzz.txt"
    p.write_text(text)
    try:
        g = parse_transformer(p, batch, borden)
    except InputError as e:
        assert e.path == str(p) and e.line is not None
        assert 1 <= e.line <= text.count("\n") + 1
        return
    assert g.num_kernels >= 2 and g.kernel_name.count("makeLoss") == 1
    assert np.all(g.raw_size > 0)
    assert g.in_idx.size == 0 or (0 <= g.in_idx.min() and g.in_idx.max() < g.num_tensors)
    assert g.out_idx.size == 0 or (0 <= g.out_idx.min() and g.out_idx.max() < g.num_tensors)


def test_use_span_hand_worked():
    """Graph.use_span: kernel 0 reads t0 and writes t1, kernel 1 reads t1 and t0 and writes t2,
    kernel 2 reads t2; t3 is never touched."""
    from g10fast.workload.model import Graph, csr_from_lists

    in_ptr, in_idx = csr_from_lists([[0], [0, 1], [2]])
    out_ptr, out_idx = csr_from_lists([[1], [2], []])
    g = Graph(
        "toy",
        1,
        np.full(4, 4096, np.int64),
        np.zeros(4, bool),
        ["a", "b", "c"],
        ["0:a", "1:b", "2:c"],
        in_ptr,
        in_idx,
        out_ptr,
        out_idx,
    )
    first, last = g.use_span()
    assert first.tolist() == [0, 0, 1, 3] and last.tolist() == [1, 1, 2, -1]
