"""Kernel-time traces: parsing, ms -> cycles (planner spec §3.2), perturbation (§3.4)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.workload.times import (
    kernel_cycles,
    libstdcxx_canonical,
    load_workload,
    mt19937_raw,
    perturb_kernel_times,
    read_trace_file,
)
from refstats import ARTIFACT, REFERENCE, read_kernels, read_tensors, reference_graph

RESULTS = ARTIFACT / "results"

# g10-workloads.md §2: every (model, batch) with cudnn traces, #kernels, ideal cycles @ 1.2 GHz
IDEAL_TABLE = [
    ("BERT_Base", 128, 1369, 7087159999),
    ("BERT_Base", 256, 1369, 8742558777),
    ("BERT_Base", 384, 1369, 10270977703),
    ("BERT_Base", 512, 1369, 11799396628),
    ("BERT_Base", 640, 1369, 14373809452),
    ("BERT_Base", 768, 1369, 16948222288),
    ("BERT_Base", 1024, 1369, 20928839947),
    ("BERT_Base", 1280, 1369, 24909457594),
    ("BERT_Base", 1536, 1369, 30058356996),
    ("VIT", 256, 1489, 2549893347),
    ("VIT", 512, 1489, 3046779498),
    ("VIT", 768, 1489, 3483077226),
    ("VIT", 1024, 1489, 3919374961),
    ("VIT", 1280, 1489, 4459141336),
    ("VIT", 1536, 1489, 4998907706),
    ("VIT", 1792, 1489, 5538674067),
    ("VIT", 2048, 1489, 6078440456),
    ("Inceptionv3", 512, 929, 64334907021),
    ("Inceptionv3", 768, 929, 67755018354),
    ("Inceptionv3", 1024, 929, 71175129706),
    ("Inceptionv3", 1152, 929, 71557227747),
    ("Inceptionv3", 1280, 929, 71939325757),
    ("Inceptionv3", 1408, 929, 71786283629),
    ("Inceptionv3", 1536, 929, 71633241480),
    ("Inceptionv3", 1664, 929, 71480199364),
    ("Inceptionv3", 1792, 929, 71327218061),
    ("ResNet152", 256, 1299, 127328819564),
    ("ResNet152", 512, 1299, 130102121477),
    ("ResNet152", 768, 1299, 131772813229),
    ("ResNet152", 1024, 1299, 133443504983),
    ("ResNet152", 1280, 1299, 135107260924),
    ("ResNet152", 1536, 1299, 136771016900),
    ("ResNet152", 1792, 1299, 138434772865),
    ("ResNet152", 2048, 1299, 136449844944),
    ("SENet154", 256, 2319, 155317502505),
    ("SENet154", 512, 2319, 157510221863),
    ("SENet154", 768, 2319, 159702941130),
    ("SENet154", 1024, 2319, 159444570406),
    ("SENet154", 1280, 2319, 161035270159),
    ("SENet154", 1536, 2319, 182702522056),
]


def need(path):
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def write(tmp_path, text, name="t.txt"):
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------- read_trace_file


def test_read_trace_ok_with_trailing_blank_lines(tmp_path):
    p = write(tmp_path, "0000 0.112640 ms\n0001 1.5 ms\n0002 2e-3 ms\n\n  \n")
    v = read_trace_file(p, 3, "ms")
    assert v.dtype == np.float64
    assert v.tolist() == [0.11264, 1.5, 0.002]


def test_read_workspace_ok(tmp_path):
    p = write(tmp_path, "000 0 B\n001 114048 B\n")
    assert read_trace_file(p, 2, "B").tolist() == [0.0, 114048.0]


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("0000 0.1 ms\n0001 0.2 B\n", 2, "expected unit 'ms', got 'B'"),
        ("0000 0.1 ms\n0001 fast ms\n", 2, "'fast' is not a number"),
        ("0000 0.1 ms extra\n0001 0.2 ms\n", 1, "expected '<kernel id>"),
        ("0000 0.1\n0001 0.2 ms\n", 1, "expected '<kernel id>"),
        ("0000 0.1 ms\n0002 0.2 ms\n", 2, "kernel id 2 found where 1 was expected"),
        ("0001 0.1 ms\n0002 0.2 ms\n", 1, "kernel id 1 found where 0 was expected"),
        ("0000 0.1 ms\n\n0001 0.2 ms\n", 2, "expected '<kernel id>"),
        ("0000 0.1 ms\n-001 0.2 ms\n", 2, "not a non-negative integer"),
        ("0000 0.1 ms\n0001 nan ms\n", 2, "must be finite and >= 0"),
        ("0000 0.1 ms\n0001 -0.2 ms\n", 2, "must be finite and >= 0"),
    ],
)
def test_read_trace_bad_line(tmp_path, text, line, fragment):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        read_trace_file(p, 2, "ms")
    assert e.value.path == str(p) and e.value.line == line
    assert str(e.value).startswith(f"{p}:{line}: ")
    assert fragment in str(e.value)


def test_read_workspace_fractional_bytes(tmp_path):
    p = write(tmp_path, "0 10 B\n1 10.5 B\n")
    with pytest.raises(InputError, match=r"t\.txt:2: workspace size '10\.5'"):
        read_trace_file(p, 2, "B")


def test_read_trace_missing_and_extra_lines(tmp_path):
    p = write(tmp_path, "".join(f"{i:04d} 0.5 ms\n" for i in range(1368)))
    with pytest.raises(InputError) as e:
        read_trace_file(p, 1369, "ms")
    assert str(e.value) == f"{p}: trace has 1368 lines but the model has 1369 kernels"
    with pytest.raises(InputError, match="trace has 1368 lines but the model has 1367 kernels"):
        read_trace_file(p, 1367, "ms")


def test_read_trace_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found") as e:
        read_trace_file(tmp_path / "nope.txt", 1, "ms")
    assert e.value.path == str(tmp_path / "nope.txt")


# ---------------------------------------------------------------- kernel_cycles


def test_kernel_cycles_truncation_and_clamps():
    # 0.11264 ms -> 135168 cycles (BERT-128 kernel 0 in the C++ kernels.config)
    ex, ip, pf = kernel_cycles([0.11264, 1.0, 2.0], [0.2, 0.5, 3.0], [0.1, 0.7, 2.5], 1.2)
    assert ex.dtype == np.int64
    assert ex.tolist() == [135168, 1200000, 2400000]
    assert ip.tolist() == [240000, 1200000, 3600000]  # 0.5 ms < exec -> clamped to exec
    assert pf.tolist() == [240000, 1200000, 3600000]  # clamped to input_pf


def test_kernel_cycles_order_of_operations():
    # trunc(ms * f / 1000) in double; ms * 1.2e6 or ms / 1000 * f would differ (values from
    # the artifact's traces): 2.3808 -> 2856960 (not 2856959), 2.16064 -> 2592768 (not ...67)
    ex, _, _ = kernel_cycles([2.3808, 2.16064, 2.54464], [9.0] * 3, [9.0] * 3, 1.2)
    assert ex.tolist() == [2856960, 2592768, 3053567]


def test_kernel_cycles_speedup_subtracts_same_delta():
    ex, ip, pf = kernel_cycles([1.0], [1.5], [3.0], 1.0, kernel_speedup=2.0)
    # c = 1e6, delta = 5e5: exec = 5e5, input_pf = 1.5e6 - 5e5, pf = 3e6 - 5e5
    assert (ex[0], ip[0], pf[0]) == (500000, 1000000, 2500000)


def test_kernel_cycles_bad_params():
    with pytest.raises(InputError) as e:
        kernel_cycles([1.0, 0.0], [1.0, 1.0], [1.0, 1.0], 1.2)
    assert e.value.param == "orig_kernel_time_file" and "kernel 1" in str(e.value)
    with pytest.raises(InputError, match="parameter 'GPU_frequency_GHz'"):
        kernel_cycles([1.0], [1.0], [1.0], 0.0)
    with pytest.raises(InputError, match="parameter 'kernel_speedup'"):
        kernel_cycles([1.0], [1.0], [1.0], 1.2, kernel_speedup=-1.0)


@pytest.mark.parametrize(
    "model, batch, n_kernels, ideal", IDEAL_TABLE, ids=[f"{m}-{b}" for m, b, _, _ in IDEAL_TABLE]
)
def test_ideal_cycles_match_artifact(model, batch, n_kernels, ideal):
    ms = read_trace_file(need(RESULTS / model / f"cudnn{batch}.txt"), n_kernels, "ms")
    ex, _, _ = kernel_cycles(ms, ms, ms, 1.2)
    assert int(ex.sum()) == ideal


def test_ideal_cycles_match_example_results():
    path = need(ARTIFACT / "example_results" / "overall_performance" / "all.base.txt")
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    header = [c.strip() for c in lines[0].split("|")]
    col = header.index("ideal")
    names = {
        "BERT": "BERT_Base",
        "ViT": "VIT",
        "Inceptionv3": "Inceptionv3",
        "ResNet152": "ResNet152",
        "SENet154": "SENet154",
    }
    kernels = {m: k for m, _, k, _ in IDEAL_TABLE}
    checked = 0
    for title, values in zip(lines[1::2], lines[2::2]):
        name, b = title.split("|")[:2]
        model, batch = names[name], int(b.split("=")[1])
        ms = read_trace_file(RESULTS / model / f"cudnn{batch}.txt", kernels[model], "ms")
        ex, _, _ = kernel_cycles(ms, ms, ms, 1.2)
        assert int(ex.sum()) == int(values.split()[col]), (model, batch)
        checked += 1
    assert checked == 5


@pytest.mark.parametrize(
    "run, model, batch", [("BERT-128-lru", "BERT_Base", 128), ("ResNet152-256-lru", "ResNet152", 256)]
)
def test_per_kernel_cycles_and_workspaces_match_reference(run, model, batch):
    """Every kernel's cycles equal kernels.config; load_workload re-creates the workspaces."""
    stats = need(REFERENCE / run / "statistics")
    base = RESULTS / model / f"cudnn{batch}"
    kern = read_kernels(stats / "kernels.config.gz")
    ref = read_tensors(stats / "tensors.config.gz")
    K = len(kern.name)
    n_ws = int((read_trace_file(f"{base}Workspace.txt", K, "B") > 0).sum())
    assert n_ws == {"BERT-128-lru": 0, "ResNet152-256-lru": 463}[run]
    full = reference_graph(run)
    graph = reference_graph(run, drop_workspaces=n_ws)
    w = load_workload(
        graph, f"{base}.txt", f"{base}InputPF.txt", f"{base}PF.txt", f"{base}Workspace.txt", 1.2
    )
    assert np.array_equal(w.exec_cycles, kern.exec_cycles)
    assert np.all(w.exec_cycles <= w.input_pf_cycles) and np.all(w.input_pf_cycles <= w.pf_cycles)
    assert w.num_tensors == ref.size.shape[0]
    assert np.array_equal(w.size, ref.size)
    assert np.array_equal(w.is_global, ref.is_global)
    offset = np.where(w.is_global, w.address, w.address - w.weights_bytes)
    assert np.array_equal(offset, ref.offset)
    assert np.array_equal(w.out_ptr, full.out_ptr) and np.array_equal(w.out_idx, full.out_idx)
    assert np.array_equal(w.in_idx, full.in_idx)


# ---------------------------------------------------------------- mt19937 and perturbation


def test_mt19937_standard_check_value():
    # C++ standard [rand.predef]: the 10000th output of a default-constructed std::mt19937
    raw = mt19937_raw(5489, 10000)
    assert int(raw[-1]) == 4123659995
    assert raw[:3].tolist() == [3499211612, 581869302, 3890346734]
    assert int(mt19937_raw(5489 + (1 << 32), 10000)[-1]) == 4123659995  # seed mod 2^32


# std::uniform_real_distribution<double>(1-σ, 1+σ) from libstdc++ (g++ 12), printed with %a
CXX_SEED15_SIGMA01 = [
    "0x1.100e29645ea8ep+0",
    "0x1.04ad68810928ep+0",
    "0x1.d82a3d666bf78p-1",
    "0x1.10501bb8ac1c6p+0",
    "0x1.15d817c2414cfp+0",
]
CXX_DEFAULT_SIGMA025 = ["0x1.a2ae9ef6d091cp-1", "0x1.2ae18fbcf3f1p+0", "0x1.3c03dbef90412p+0"]


def test_perturbation_matches_libstdcxx_values():
    big = np.full(5, 10**12, dtype=np.int64)
    ex, ip, pf = perturb_kernel_times(big, big * 2, big * 3, 0.1, 15)
    ratio = np.array([float.fromhex(h) for h in CXX_SEED15_SIGMA01])
    assert ex.tolist() == np.trunc(1e12 * ratio).astype(np.int64).tolist()
    assert pf.tolist() == np.trunc(3e12 * ratio).astype(np.int64).tolist()
    assert ex[0] == 1062716090206  # 1e12 * 1.0627160902064...
    small = np.array([1000, 1000, 1000])
    ex, _, _ = perturb_kernel_times(small, small, small, 0.25, 1)  # ran_seed 1 = default 5489
    ratio = np.array([float.fromhex(h) for h in CXX_DEFAULT_SIGMA025])
    assert ex.tolist() == np.trunc(1000 * ratio).astype(np.int64).tolist() == [817, 1167, 1234]


def test_perturbation_clamps_and_identity():
    n = 4000
    x = np.full(n, 10**9, dtype=np.int64)
    ex, ip, pf = perturb_kernel_times(x, x, x, 1.5, 10)
    u = libstdcxx_canonical(mt19937_raw(10, 2 * n))
    raw_ratio = u * 3.0 - 0.5
    assert ex.min() == 100000000 and ex.max() == 1900000000  # clamped to [0.1, 1.9]
    assert np.sum(raw_ratio < 0.1) > 100 and np.sum(raw_ratio > 1.9) > 100
    inside = (raw_ratio > 0.1) & (raw_ratio < 1.9)
    assert np.array_equal(ex[inside], np.trunc(1e9 * raw_ratio[inside]).astype(np.int64))
    assert np.array_equal(ex, ip) and np.array_equal(ex, pf)
    same = perturb_kernel_times(x, x + 1, x + 2, 0.0, 15)
    assert [a.tolist() for a in same] == [x.tolist(), (x + 1).tolist(), (x + 2).tolist()]
    with pytest.raises(InputError, match="kernel_time_std_dev"):
        perturb_kernel_times(x, x, x, -0.1, 1)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_perturbation_bit_exact_against_compiled_libstdcxx(tmp_path):
    src = tmp_path / "u.cc"
    src.write_text(
        "#include <random>\n#include <cstdio>\n#include <cstdlib>\n"
        "int main(int c, char** v) { unsigned long s = strtoul(v[1], 0, 10);"
        " double sg = atof(v[2]); int n = atoi(v[3]); std::mt19937 g; if (s != 1) g.seed(s);"
        " std::uniform_real_distribution<double> d(1.0 - sg, 1.0 + sg);"
        ' for (int i = 0; i < n; i++) printf("%a\\n", d(g)); }\n'
    )
    exe = tmp_path / "u"
    if subprocess.run(["g++", "-O1", "-o", str(exe), str(src)], capture_output=True).returncode:
        pytest.skip("g++ cannot build a test program here")
    for seed, sigma in [(15, 0.1), (1, 0.25), (25, 0.9)]:
        out = subprocess.run(
            [str(exe), str(seed), repr(sigma), "5000"], capture_output=True, text=True, check=True
        ).stdout.split()
        expected = np.array([float.fromhex(h) for h in out])
        u = libstdcxx_canonical(mt19937_raw(5489 if seed == 1 else seed, 10000))
        assert np.array_equal(u * ((1 + sigma) - (1 - sigma)) + (1 - sigma), expected)
