"""Built-in models (data/models) against the artifact's front end, and the decoders."""

from pathlib import Path

import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.workload.builtin import (
    find_model,
    footprint_bytes,
    list_models,
    load_builtin_graph,
    parameter_count,
    read_model_file,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"
ART = SHARED / "g10-artifact"
PAPER = [
    ("resnet152", "ResNet152"),
    ("inceptionv3", "Inceptionv3"),
    ("senet154", "SENet154"),
    ("bert-base", "BERT_Base"),
    ("vit", "VIT"),
]


def same_graph(a, b):
    assert a.kernel_name == b.kernel_name
    # parents name the op type identically; transformer op ids are our own numbering
    assert [x.split(":")[1] for x in a.kernel_parent] == [x.split(":")[1] for x in b.kernel_parent]
    for f in ("raw_size", "is_global", "in_ptr", "in_idx", "out_ptr", "out_idx"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


@pytest.mark.parametrize("key,stem", PAPER)
@pytest.mark.parametrize("batch", [3, 256])
def test_builtin_equals_artifact_front_end(key, stem, batch):
    if not ART.is_dir():
        pytest.skip("no ../shared/g10-artifact")
    from g10fast.workload.zoo import load_artifact_graph

    same_graph(load_builtin_graph(key, batch), load_artifact_graph(ART / "frontend" / "Nets", stem, batch))


def test_builtin_same_simulation_with_a100_traces():
    if not ART.is_dir():
        pytest.skip("no ../shared/g10-artifact")
    from g10fast.config import genconfig
    from g10fast.run import run
    from g10fast.workload.times import load_workload

    cfg = genconfig(ART, "BERT", 128, "lru")
    a = run(cfg)
    w = load_workload(
        load_builtin_graph("bert-base", 128),
        cfg.orig_kernel_time_file,
        cfg.input_pf_kernel_time_file,
        cfg.pf_kernel_time_file,
        cfg.workspace_size_file,
        cfg.GPU_frequency_GHz,
    )
    b = run(cfg, workload=w)
    assert a["iterations"] == b["iterations"]
    assert a["iterations"][1]["exe_time_cycles"] == 13178010664  # reference/BERT-128-lru


def test_kernel_counts_without_artifact():
    # kernels per iteration as in g10-workloads.md §1.1
    want = {"resnet152": 1299, "inceptionv3": 929, "senet154": 2319, "bert-base": 1369, "vit": 1489}
    for k, n in want.items():
        assert load_builtin_graph(k, 2).num_kernels == n


def test_decoders_parameters_and_precision():
    g = load_builtin_graph("gpt2-xl", 1)
    assert abs(parameter_count(g) / 1e9 - 1.558) < 0.001
    ll = load_builtin_graph("llama-7b", 1, seq_len=128)
    assert abs(parameter_count(ll) / 1e9 - 6.738) < 0.001
    # bf16-mixed + AdamW: 2 (bf16 weight) + 4 (master) + 8 (moments) bytes per parameter
    glob = ll.raw_size[ll.is_global].sum()
    assert glob == parameter_count(ll) * 14
    f32 = load_builtin_graph("llama-7b", 1, seq_len=128, precision="fp32", optimizer="sgd")
    assert f32.raw_size[f32.is_global].sum() == parameter_count(ll) * 4
    # optimizer state is read and written by Apply_Grad kernels
    k = ll.kernel_name.index("Linear_Apply_Grad_Weight")
    assert len(ll.inputs(k)) == 5 and len(ll.outputs(k)) == 4
    # footprint grows with the micro-batch and the sequence
    assert footprint_bytes(load_builtin_graph("llama-7b", 2, seq_len=128)) > footprint_bytes(ll)


def test_list_and_find():
    keys = [s.key for s in list_models()]
    for k in ("resnet152", "inceptionv3", "senet154", "bert-base", "vit", "gpt2-xl", "llama-7b"):
        assert k in keys
    assert find_model("BERT").key == "bert-base"
    assert find_model("ViT").key == "vit"
    with pytest.raises(InputError, match="unknown built-in model"):
        find_model("alexnet9000")


def test_bad_model_files(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('format = "g10fast-model"\nversion = 1\nname = "x"\nkind = "cnn"\nfamily = "vgg"\n')
    with pytest.raises(InputError, match="family"):
        read_model_file(p)
    p.write_text("not toml [")
    with pytest.raises(InputError, match="TOML"):
        read_model_file(p)
    with pytest.raises(InputError, match="no parameter"):
        load_builtin_graph("llama-7b", 1, sequence=5)
    with pytest.raises(InputError, match="precision"):
        load_builtin_graph("llama-7b", 1, seq_len=64, precision="fp8")
    with pytest.raises(InputError, match="positive"):
        load_builtin_graph("vit", 0)


def test_kernel_layers_checks_its_batch_as_the_graph_does():
    from g10fast.workload.builtin import kernel_layers

    for bad in (0, -4, 2.5, True):
        with pytest.raises(InputError, match="positive") as e:
            kernel_layers("bert-base", bad)
        assert e.value.param == "batch_size"
    layers = kernel_layers("bert-base", 2)
    assert layers and all("type" in v and "in" in v for v in layers.values())


def _tiny_decoder(family, **kw):
    """One layer, hidden 64, 4 heads, sequence 32, vocabulary 100, fp32, SGD, batch 2."""
    key = "gpt2-xl" if family == "gpt2" else "llama-7b"
    return load_builtin_graph(
        key,
        2,
        layers=1,
        hidden=64,
        heads=4,
        ffn=256,
        seq_len=32,
        vocab=100,
        precision="fp32",
        optimizer="sgd",
        **kw,
    )


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_decoders_default_to_fused_attention(family):
    """Hand-worked: B 2, heads 4, S 32, hidden 64 (fp32). Fused attention: one forward and one
    backward kernel, no S x S tensor; the artifact's form keeps the scores, the scaled and
    masked scores, the softmax and their gradients (B NH S S 4 = 32 KiB each)."""
    from g10fast.workload.costmodel import kernel_features

    B, NH, S, H = 2, 4, 32, 64
    scores = B * NH * S * S * 4
    g = _tiny_decoder(family)
    assert g.kernel_name.count("FlashAttention_Forward") == 1
    assert g.kernel_name.count("FlashAttention_Backward") == 1
    assert "BatchMatMul_Forward" not in g.kernel_name and "SoftmaxBasic_Forward" in g.kernel_name
    assert not np.any(g.raw_size == scores)
    kf, kb = g.kernel_name.index("FlashAttention_Forward"), g.kernel_name.index("FlashAttention_Backward")
    ins = sorted(int(g.raw_size[t]) for t in g.inputs(kf))
    # GPT-2 reads its fused qkv (B S 3H), Llama rotated q, k and v (B S H each)
    assert ins == ([B * S * 3 * H * 4] if family == "gpt2" else [B * S * H * 4] * 3)
    assert [int(g.raw_size[t]) for t in g.outputs(kf)] == [B * S * H * 4]
    # backward: inputs, the output and its gradient in; one gradient per input out
    assert len(g.inputs(kb)) == len(ins) + 2 and len(g.outputs(kb)) == len(ins)
    f = kernel_features(g)["flops"]
    fwd = 2 * B * NH * S * S * (H // NH)  # causal: half of QK^T and PV's 4 B NH S^2 d
    assert f[kf] == fwd and f[kb] == 2 * fwd
    m = _tiny_decoder(family, attention="materialized")
    assert "FlashAttention_Forward" not in m.kernel_name
    assert m.kernel_name.count("BatchMatMul_Forward") == 2
    assert np.sum(m.raw_size == scores) == 8  # 4 forward, their 4 gradients
    assert footprint_bytes(m) - footprint_bytes(g) > 7 * scores


def test_decoders_fused_pointwise_and_the_artifact_form():
    """GPT-2's layer norm and GELU, Llama's SiLU: one kernel each way by default; with
    pointwise="decomposed" the element-wise chains of G10's model files (layer norm as 11
    ops, GELU via Erf) as before. Kernel counts per layer hand-counted."""
    g = _tiny_decoder("gpt2")
    assert g.kernel_name.count("LayerNorm_Forward") == 3  # ln1, ln2, ln_f
    assert g.kernel_name.count("LayerNorm_Backward") == 3
    assert g.kernel_name.count("Gelu_Forward") == 1 and "Erf_Forward" not in g.kernel_name
    k = g.kernel_name.index("LayerNorm_Backward")
    assert len(g.outputs(k)) == 3  # gradients of x, scale and shift
    ll = _tiny_decoder("llama")
    assert ll.kernel_name.count("Silu_Forward") == 1 and "Tanh_Forward" not in ll.kernel_name
    d = _tiny_decoder("gpt2", attention="materialized", pointwise="decomposed")
    assert "LayerNorm_Forward" not in d.kernel_name and d.kernel_name.count("Erf_Forward") == 1
    assert d.kernel_name.count("Sqrt_Forward") == 3
    # the old form's golden footprint: GPT-2 XL at micro-batch 8 (bf16-mixed, AdamW)
    full_old = load_builtin_graph("gpt2-xl", 8, attention="materialized", pointwise="decomposed")
    assert full_old.num_kernels == 5467
    assert footprint_bytes(full_old) == 338510786560  # 315.3 GiB
    full = load_builtin_graph("gpt2-xl", 8)
    assert footprint_bytes(full) == 99053621248  # 92.3 GiB
    with pytest.raises(InputError, match="attention"):
        load_builtin_graph("gpt2-xl", 1, attention="flash")
    with pytest.raises(InputError, match="pointwise"):
        load_builtin_graph("gpt2-xl", 1, pointwise="fused-ish")


def _bert_base_parameters(L=12, H=768, F=3072, S=128, V=30522, TV=2):
    """BERT-base by hand: embeddings (word, position rows the graph reads, token type, layer
    norm), per layer QKV, projection, two layer norms and the FFN with their biases, the
    pooler; less the one 768-element weight G10's file uses twice (`tie`)."""
    emb = V * H + S * H + TV * H + 2 * H
    layer = 3 * H * H + 3 * H + H * H + H + 2 * H + H * F + F + F * H + H + 2 * H
    return emb + L * layer + H * H + H - H


def test_parameter_counts_do_not_grow_with_the_batch():
    """Issue 37: BERT-base's count was 238 M at batch 8 and 4,456 M at 256 (G10's files give
    biases and constants the activation's shape). Now the network's parameters: BertModel
    with its pooler is 109,482,240 (Devlin et al.'s 110 M); the graph reads 128 of the 512
    position rows (-294,912) and has one tied weight (-768): 109,186,560, no MLM head."""
    assert _bert_base_parameters() == 109_482_240 - 384 * 768 - 768
    for b in (1, 8, 256):
        assert parameter_count(load_builtin_graph("bert-base", b)) == 109_186_560
    # ViT as G10's file has it (hidden 384, 6 heads, 12 layers, 32x32 patches, 50 tokens):
    # patch conv + bias, class token and positions, 12 layers, final norm, head; one tie
    H, F, C = 384, 1536, 1000
    vit = (
        H * 3 * 32 * 32
        + H
        + 50 * H
        + H
        + 12 * (2 * H + 3 * H * H + 3 * H + H * H + H + 2 * H + H * F + F + F * H + H)
        + 2 * H
        + C * H
        + C
        - H
    )
    for b in (2, 256):
        assert parameter_count(load_builtin_graph("vit", b)) == vit == 22_878_568
    # CNNs: torchvision's counts (weights, biases, batch-norm scale and shift; not the
    # running statistics): resnet152 60,192,808; inception_v3 without its aux classifier
    assert parameter_count(load_builtin_graph("resnet152", 3)) == 60_192_808
    assert parameter_count(load_builtin_graph("inceptionv3", 3)) == 23_834_568


def test_models_footprint_is_the_runs(capsys):
    """`g10fast models` shows what a run of the model reports: footprint_bytes (with the cost
    model's cuDNN workspaces) and its overcommitment as 'x GPU' (issue 37: ResNet152-256
    156.1 vs 225.9 GiB)."""
    import json
    from g10fast.api import simulate
    from g10fast.cli import main

    assert main(["models", "--json", "--batch", "4"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}
    res = simulate("resnet152", 4, "g10-artifact", "ideal")
    w = res["workload"]
    r = rows["resnet152"]
    assert r["footprint_gib"] * 2**30 == w["footprint_bytes"]
    assert r["gpu_multiple"] == pytest.approx(w["overcommitment"], rel=1e-12)
    assert r["workspace_gib"] > 0 and r["params_millions"] == pytest.approx(60.192808)
    assert rows["bert-base"]["params_millions"] == pytest.approx(109.18656)


def test_kernel_times_of_another_gpu_are_flagged(tmp_path, capsys):
    """A workload trace made for one GPU and replayed on another: the run warns on stderr
    and says so in its result; on its own GPU it does not. The two A100 presets' estimates
    are named apart (`g10fast presets`)."""
    import json
    from g10fast.cli import main

    p = tmp_path / "bert2.h5"
    assert (
        main(["workload", "export", "bert-base", "--batch", "2", "--system", "g10-artifact", "--out", str(p)])
        == 0
    )
    capsys.readouterr()
    base = ["run", "--workload", str(p), "--policy", "ideal", "--json", "--no-progress", "--no-figure"]
    assert main(base + ["--system", "h100-sxm5"]) == 0
    out = capsys.readouterr()
    res = json.loads(out.out)
    assert res["kernel_times_gpu"] == "NVIDIA A100 40GB (SXM4)"
    assert "H100" in res["kernel_times_warning"] and "replayed unchanged" in res["kernel_times_warning"]
    assert out.err.startswith("warning: the workload's kernel times are for NVIDIA A100 40GB")
    assert main(base + ["--system", "g10-artifact"]) == 0
    out = capsys.readouterr()
    assert "kernel_times_warning" not in json.loads(out.out) and "warning" not in out.err
    assert main(["presets", "--json"]) == 0
    basis = {r["name"]: r["kernel_times"] for r in json.loads(capsys.readouterr().out)}
    assert basis["g10-artifact"].startswith("the G10 artifact's measured A100 kernel traces")
    assert "fixed per-kernel costs" in basis["a100-80-pcie4"]
    assert basis["a100-80-pcie4"] != basis["g10-artifact"]


def test_decoder_profiles_name_their_graph_form():
    """A decoder profile without `model.attention` / `model.pointwise` lines was measured on
    the form before fused attention; the committed estimated profiles name the fused form
    and apply to the default graph; a mismatch says which options to build with."""
    from g10fast.workload.profile import Profile, graph_options, read_profile, workload_from_profile

    spec = find_model("gpt2-xl")
    old = load_builtin_graph(
        "gpt2-xl", 1, layers=1, seq_len=64, attention="materialized", pointwise="decomposed"
    )
    K = old.num_kernels
    ones = np.ones(K)
    prof = Profile(
        "measured", "x", "gpt2-xl", 1, list(old.kernel_name), ones, ones, ones, np.zeros(K, np.int64), {}
    )
    assert graph_options(prof, spec) == {"attention": "materialized", "pointwise": "decomposed"}
    assert graph_options(prof, find_model("bert-base")) == {}
    new = load_builtin_graph("gpt2-xl", 1, layers=1, seq_len=64)
    with pytest.raises(InputError, match="attention = 'materialized', pointwise = 'decomposed'"):
        workload_from_profile(new, prof)
    assert workload_from_profile(old, prof).num_kernels == K
    root = Path(__file__).resolve().parents[1] / "kernels" / "g10-artifact"
    est = read_profile(root / "gpt2-xl-b8.prof.gz")
    assert graph_options(est, spec) == {"attention": "fused", "pointwise": "fused"}
    assert est.names == list(load_builtin_graph("gpt2-xl", 8).kernel_name)
