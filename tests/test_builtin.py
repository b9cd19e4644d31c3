"""Built-in models (data/models) against the artifact's front end, and the decoders."""

from pathlib import Path

import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.workload.builtin import (find_model, footprint_bytes, list_models,
                                      load_builtin_graph, parameter_count, read_model_file)

SHARED = Path(__file__).resolve().parents[2] / "shared"
ART = SHARED / "g10-artifact"
PAPER = [("resnet152", "ResNet152"), ("inceptionv3", "Inceptionv3"), ("senet154", "SENet154"),
         ("bert-base", "BERT_Base"), ("vit", "VIT")]


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
    same_graph(load_builtin_graph(key, batch),
               load_artifact_graph(ART / "frontend" / "Nets", stem, batch))


def test_builtin_same_simulation_with_a100_traces():
    if not ART.is_dir():
        pytest.skip("no ../shared/g10-artifact")
    from g10fast.config import genconfig
    from g10fast.run import build_workload, run
    from g10fast.workload.times import load_workload
    cfg = genconfig(ART, "BERT", 128, "lru")
    a = run(cfg)
    w = load_workload(load_builtin_graph("bert-base", 128), cfg.orig_kernel_time_file,
                      cfg.input_pf_kernel_time_file, cfg.pf_kernel_time_file,
                      cfg.workspace_size_file, cfg.GPU_frequency_GHz)
    b = run(cfg, workload=w)
    assert a["iterations"] == b["iterations"]
    assert a["iterations"][1]["exe_time_cycles"] == 13178010664   # reference/BERT-128-lru


def test_kernel_counts_without_artifact():
    # kernels per iteration as in g10-workloads.md §1.1
    want = {"resnet152": 1299, "inceptionv3": 929, "senet154": 2319, "bert-base": 1369,
            "vit": 1489}
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
    p.write_text('format = "g10fast-model"\nversion = 1\nname = "x"\nkind = "cnn"\n'
                 'family = "vgg"\n')
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
