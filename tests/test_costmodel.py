"""Cost model, profiles, hardware presets, TOML runs and the CLI."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.hardware import PRESETS, config_fields, load_preset
from g10fast.workload import costmodel as cm
from g10fast.workload.builtin import load_builtin_graph
from g10fast.workload.profile import profile_from_estimate, read_profile, workload_from_profile, write_profile


def test_roofline_sanity():
    gpu = cm.Gpu("t", 10e12, 1e12, 10e9)
    params = cm.CostParams({"*": (1.0, 1.0, 0.0)}, (1.0, 0.0), (0.5, 0.0), {}, {})
    g = load_builtin_graph("resnet152", 8)
    e = cm.estimate(g, gpu, params)
    k = g.kernel_name.index("Conv2d_Forward")
    # first convolution: 2 * N*K*P*Q * C*R*S = 2 * 8*64*112*112 * 3*7*7 flops
    assert e["flops"][k] == 2 * 8 * 64 * 112 * 112 * 3 * 7 * 7
    D = e["bytes_in"][k] + e["bytes_out"][k]
    # unknown kernel names use "*": memory-bound at full bandwidth
    assert e["time_s"][k] == pytest.approx(max(e["flops"][k] / 10e12, D / 1e12))
    assert np.all(e["input_pf_s"] >= e["time_s"]) and np.all(e["pf_s"] >= e["input_pf_s"])
    assert e["pf_s"][k] - e["time_s"][k] == pytest.approx(D / (0.5 * 10e9))


def test_calibrated_params_load_and_scale():
    p = cm.load_params()
    assert 0 < p.fault_in[0] and 0 < p.fault_all[0]
    pre = load_preset("g10-artifact")
    gpu = cm.gpu_from_preset(pre, 4)
    assert gpu.peak_flops == 19.5e12 and gpu.hbm_bytes_per_s == 1555e9
    g = load_builtin_graph("bert-base", 64)
    t1 = cm.estimate(g, gpu, p, families=False)["time_s"].sum()
    t2 = cm.estimate(load_builtin_graph("bert-base", 128), gpu, p, families=False)["time_s"].sum()
    assert 1.5 < t2 / t1 < 2.1  # the roofline is roughly linear in the batch
    fast = cm.gpu_from_preset(load_preset("h100-80-pcie5"), 4)
    assert cm.estimate(g, fast, p)["time_s"].sum() < t1
    # families apply on the reference GPU only
    assert cm.is_reference_gpu(gpu, p) and not cm.is_reference_gpu(fast, p)
    assert cm.estimate(g, gpu, p)["from_family"].mean() > 0.9
    assert not cm.estimate(g, fast, p)["from_family"].any()


def test_family_keys_batch_independent():
    a = cm.family_keys(load_builtin_graph("resnet152", 256))
    b = cm.family_keys(load_builtin_graph("resnet152", 2048))
    assert a == b
    # the 1x1 256->1024 and 1024->256 convolutions at 14x14 are different families
    assert len(set(a)) > 100


SHARED = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"


@pytest.mark.parametrize(
    "model,key,batch", [("ResNet152", "resnet152", 1280), ("SENet154", "senet154", 1536)]
)
def test_families_match_cnn_traces(model, key, batch):
    """The CNN traces' fixed ~0.6 s kernels are reproduced (the roofline alone is far off)."""
    if not SHARED.is_dir():
        pytest.skip("no G10 artifact")
    from g10fast.config import trace_paths
    from g10fast.workload.times import read_trace_file

    g = load_builtin_graph(key, batch)
    t = (
        read_trace_file(trace_paths(SHARED, model, batch)["orig_kernel_time_file"], g.num_kernels, "ms")
        * 1e-3
    )
    gpu = cm.gpu_from_preset(load_preset("g10-artifact"), 4)
    e = cm.estimate(g, gpu)
    assert e["from_family"].all()
    assert e["time_s"].sum() == pytest.approx(t.sum(), rel=0.03)
    slow = t > 0.4
    # shapes shared by slow and fast kernels average
    assert slow.sum() > 100 and np.mean(e["time_s"][slow] > 0.3) > 0.6


def test_profile_round_trip(tmp_path):
    g = load_builtin_graph("vit", 4)
    gpu = cm.gpu_from_preset(load_preset("a100-80-pcie4"), 4)
    prof = profile_from_estimate(g, gpu, "vit", meta={"preset": "a100-80-pcie4"})
    path = tmp_path / "vit-b4.prof.gz"
    write_profile(path, prof)
    back = read_profile(path)
    assert back.source == "estimated" and back.names == list(g.kernel_name)
    assert back.meta["preset"] == "a100-80-pcie4"
    np.testing.assert_allclose(back.time_us, prof.time_us, rtol=1e-5)
    assert np.array_equal(back.workspace_bytes, prof.workspace_bytes)
    w = workload_from_profile(g, back)
    assert w.num_kernels == g.num_kernels and w.meta["kernel_times"] == "estimated"
    with pytest.raises(InputError, match="batch"):
        workload_from_profile(load_builtin_graph("vit", 8), back)
    bad = tmp_path / "bad.prof.gz"
    with gzip.open(bad, "wt") as f:
        f.write("# g10fast-profile 1\nsource = guessed\ngpu = x\nmodel = m\nbatch = 1\nkernels = 0\n")
    with pytest.raises(InputError, match="source"):
        read_profile(bad)


def test_committed_profiles_read():
    root = Path(__file__).resolve().parents[1] / "kernels"
    files = sorted(root.glob("*/*.prof.gz"))
    assert files
    for f in files[:3]:
        p = read_profile(f)
        assert p.source in ("estimated", "measured") and len(p.names) > 0


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load(name):
    p = load_preset(name)
    assert p["gpu"]["memory_gb"] > 0 and p["sources"]
    f = config_fields(p)
    assert f["CPU_PCIe_bandwidth_GBps"] == p["host"]["link_gbps"]


def test_preset_errors():
    with pytest.raises(InputError, match="unknown hardware preset"):
        load_preset("tpu-v9")
    with pytest.raises(InputError, match="unknown hardware parameter"):
        load_preset("g10-artifact", {"gpu.colour": 3})
    assert load_preset("g10-artifact", {"gpu.memory_gb": 8})["gpu"]["memory_gb"] == 8.0
    with pytest.raises(InputError, match="number"):
        load_preset("g10-artifact", {"gpu.memory_gb": "lots"})


def _toml(tmp_path, text):
    p = tmp_path / "run.toml"
    p.write_text(text)
    return p


def test_toml_run_end_to_end(tmp_path):
    import g10fast.api as api

    p = _toml(
        tmp_path,
        '[workload]\nmodel = "vit"\nbatch = 8\n[system]\npreset = "g10-artifact"\n'
        '[system.overrides]\n"gpu.memory_gb" = 0.1\n[policy]\nnames = ["ideal", '
        '"lru", "prefetch_lru"]\n[engine]\nnum_iteration = 2\n',
    )
    res = api.run_toml(p)
    assert [r["policy"] for r in res] == ["ideal", "lru", "prefetch_lru"]
    ideal, lru = res[0], res[1]
    it_i = ideal["iterations"][ideal["reported"]]
    it_l = lru["iterations"][lru["reported"]]
    assert it_i["exe_time_cycles"] == it_i["ideal_exe_time_cycles"]
    assert it_l["exe_time_cycles"] > it_i["exe_time_cycles"]
    assert lru["workload"]["overcommitment"] > 1
    rows = api.comparison_rows(res)
    assert rows[0]["normalised"] == 1.0 and 0 < rows[1]["normalised"] < 1
    fig = api.comparison_figure(res, tmp_path / "c.png")
    assert Path(fig).stat().st_size > 1000
    # the same through simulate()
    r = api.simulate("vit", 8, "g10-artifact", "lru", overrides={"gpu.memory_gb": 0.1})
    assert r["iterations"] == lru["iterations"]


def test_cli(tmp_path, capsys):
    from g10fast.cli import main

    p = _toml(
        tmp_path,
        '[workload]\nmodel = "vit"\nbatch = 4\n[system]\npreset = "gh200-c2c"\n[policy]\nname = "lru"\n',
    )
    assert main(["run", str(p), "--json", "--no-progress"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["policy"] == "lru" and d["system_preset"] == "gh200-c2c"
    assert main(["models", "--batch", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) >= 7
    for text, msg in [
        ("[workload]\nbatch = 4\n", "workload.model"),
        ('[workload]\nmodel = "vit"\n[policy]\nname = "fifo"\n', "unknown policy"),
        ("[wrkload]\n", "unknown section"),
        ('[workload]\nmodel = "vit"\n[system]\npreset = "nope"\n', "preset"),
    ]:
        q = _toml(tmp_path, text)
        assert main(["run", str(q), "--no-progress"]) == 2
        assert msg in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert main(["models", "--batch", "0"]) == 2
