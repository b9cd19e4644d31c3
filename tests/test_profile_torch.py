"""The profiling harness's dry-run path (no PyTorch, no GPU needed)."""

import subprocess
import sys
from pathlib import Path

import numpy as np

from g10fast.workload.profile import graph_options, read_profile, workload_from_profile
from g10fast.workload.builtin import find_model, load_builtin_graph

ROOT = Path(__file__).resolve().parents[1]


def test_dry_run_writes_a_measured_profile(tmp_path):
    out = tmp_path / "vit.prof.gz"
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "kernels" / "profile_torch.py"),
            "vit",
            "--batch",
            "2",
            "--dry-run",
            "--repeats",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    p = read_profile(out)
    assert p.source == "measured" and p.meta["dry_run"] == "True"
    g = load_builtin_graph("vit", 2)
    assert p.names == list(g.kernel_name)
    assert np.all(p.time_us <= p.input_faulting_us) and np.all(p.input_faulting_us <= p.all_faulting_us)
    assert workload_from_profile(g, p).num_kernels == g.num_kernels


# --- the real-operation harness: recipes, committed measured profiles -----------------------

import importlib.util  # noqa: E402

import pytest  # noqa: E402


def _harness():
    spec = importlib.util.spec_from_file_location("profile_torch", ROOT / "kernels" / "profile_torch.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["profile_torch"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


CASES = [
    ("resnet152", 2, {}),
    ("inceptionv3", 2, {}),
    ("senet154", 2, {}),
    ("bert-base", 2, {}),
    ("vit", 2, {}),
    ("gpt2-xl", 1, {"layers": 1, "seq_len": 64}),
    ("llama-7b", 1, {"layers": 1, "seq_len": 64}),
    ("gpt2-xl", 1, {"layers": 1, "seq_len": 64, "attention": "materialized", "pointwise": "decomposed"}),
]


@pytest.mark.parametrize("model,batch,opts", CASES)
def test_recipes_match_the_graph(model, batch, opts):
    """Every kernel gets a real operation; where the operation reads exactly the kernel's
    tensors (forward convolution, linear, batch norm), its operands have their bytes."""
    P = _harness()
    spec, book, recs = P.recipes_for(model, batch, **opts)
    g = book.g
    assert len(recs) == g.num_kernels
    checked = 0
    for k, r in enumerate(recs):
        assert r.op and all(all(d > 0 for d in o.shape) for o in r.inputs), (k, r)
        if g.kernel_name[k] in ("Conv2d_Forward", "Linear_Forward", "BatchNorm2d_Forward"):
            assert r.nbytes(book.el) == int(g.raw_size[g.inputs(k)].sum()), (k, g.kernel_name[k])
            checked += 1
    assert checked > 0
    ops = {r.op for r in recs}
    if spec.kind == "cnn":
        assert {"conv_fwd", "conv_bwd_weight", "conv_bwd_input", "bn_fwd", "bn_bwd"} <= ops
    elif spec.kind == "encoder" or opts.get("attention") == "materialized":
        assert {"mm", "mm_nt", "mm_tn", "bmm", "softmax", "softmax_bwd"} <= ops
    else:  # decoders: fused attention, layer norm and activations by default
        assert {"mm", "mm_nt", "mm_tn", "sdpa", "sdpa_bwd", "softmax", "softmax_bwd"} <= ops
        assert "bmm" not in ops
        assert (
            {"ln_fwd", "ln_bwd", "gelu", "gelu_bwd"} if spec.family == "gpt2" else {"silu", "silu_bwd"}
        ) <= ops
    if book.optimizer == "adamw":
        assert "adamw" in ops


def test_batchmatmul_backward_takes_both_gradients():
    P = _harness()
    _, book, recs = P.recipes_for("bert-base", 2)
    g = book.g
    bwd = [
        (g.kernel_parent[k], recs[k].op)
        for k in range(g.num_kernels)
        if g.kernel_name[k] == "BatchMatMul_Backward"
    ]
    by_parent = {}
    for par, op in bwd:
        by_parent.setdefault(par, []).append(op)
    assert all(v == ["bmm_nt", "bmm_tn"] for v in by_parent.values()) and len(by_parent) == 24


@pytest.mark.parametrize(
    "model,batch,opts",
    [
        ("resnet152", 1, {}),
        ("bert-base", 1, {}),
        ("llama-7b", 1, {"layers": 1, "seq_len": 32}),
        ("gpt2-xl", 1, {"layers": 1, "seq_len": 32}),
    ],
)
def test_operations_run_on_the_cpu(model, batch, opts):
    """--check: every kernel's real PyTorch operation runs with its shapes (CPU, no timing)."""
    pytest.importorskip("torch")
    import json

    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "kernels" / "profile_torch.py"),
            model,
            "--batch",
            str(batch),
            "--check",
            "--model-opts",
            json.dumps(opts),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "kernels ran on the CPU" in r.stdout


MEASURED = sorted((ROOT / "kernels" / "h100-sxm5-measured").glob("*.prof.gz"))


def test_measured_profiles_are_committed():
    assert len(MEASURED) >= 2


@pytest.mark.parametrize("path", MEASURED, ids=[p.name for p in MEASURED])
def test_measured_profile_applies(path):
    p = read_profile(path)
    assert p.source == "measured" and "H100" in p.gpu and p.meta["dry_run"] == "False"
    g = load_builtin_graph(p.model, p.batch, **graph_options(p, find_model(p.model)))
    assert p.names == list(g.kernel_name)
    assert np.all(p.time_us > 0)
    assert np.all(p.time_us <= p.input_faulting_us) and np.all(p.input_faulting_us <= p.all_faulting_us)
    # faulting costs something over the whole iteration, and only convolutions have workspace
    assert p.all_faulting_us.sum() > 2 * p.time_us.sum()
    conv = np.isin(np.asarray(p.names), ["Conv2d_Forward", "Conv2d_Backward_Weight", "Conv2d_Backward_Input"])
    assert np.all(p.workspace_bytes[~conv] == 0)
    w = workload_from_profile(g, p)
    assert w.num_kernels == g.num_kernels
