"""HDF5 workload trace (g10fast/workload/h5trace.py): exact round trip of built-in and
artifact workloads (arrays and whole simulation results), bad and truncated files, the CLI."""

import dataclasses
from pathlib import Path

import h5py
import numpy as np
import pytest

from g10fast.errors import InputError
from g10fast.workload.h5trace import read_attrs, read_workload_h5, trace_workload, write_workload_h5

ART = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"
FIELDS = (
    "raw_size",
    "size",
    "is_global",
    "address",
    "in_ptr",
    "in_idx",
    "out_ptr",
    "out_idx",
    "exec_cycles",
    "input_pf_cycles",
    "pf_cycles",
    "workspace_bytes",
    "workspace_tensor",
)


def same_workload(a, b):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert a.kernel_name == b.kernel_name and a.kernel_parent == b.kernel_parent
    assert (a.name, a.batch_size, a.weights_bytes) == (b.name, b.batch_size, b.weights_bytes)


def comparable(res):
    """The result as JSON, without wall-clock and memory figures and source labels."""
    import json
    from g10fast.results import to_json_ready

    def strip(x):
        if isinstance(x, dict):
            return {
                k: strip(v)
                for k, v in x.items()
                if k not in ("system_preset", "kernel_times", "peak_rss_bytes", "model")
                and "seconds" not in k
                and "wall" not in k
            }
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(to_json_ready(res)), sort_keys=True, default=str)


def _builtin_spec(policy="lru"):
    from g10fast.spec import builtin_spec

    # bert-base at batch 16 on a 4 GB GPU: small, oversubscribed (faults, evictions)
    return builtin_spec("bert-base", 16, "g10-artifact", policy, overrides={"gpu.memory_gb": 0.5})


def test_builtin_round_trip_arrays_and_meta(tmp_path):
    from g10fast.run import workload_of

    w = workload_of(_builtin_spec())
    p = tmp_path / "bert.h5"
    write_workload_h5(p, w, {"source": "builtin", "model": "bert-base"})
    r = read_workload_h5(p)
    same_workload(w, r)
    assert r.meta["dtype_bytes"] == w.meta["dtype_bytes"]
    assert r.meta["parent_flops"] == w.meta["parent_flops"]
    a = read_attrs(p)
    assert a["version"] == 1 and a["format"] == "g10fast-workload"
    assert a["provenance"]["source"] == "builtin" and "version_g10fast" in a["provenance"]
    with h5py.File(p, "r") as f:  # FLOPs per kernel: Linear/BatchMatMul get their layer's
        fl = f["kernels/flops"][()]
        names = [s.decode() for s in f["kernels/name"][()]]
    mm = [k for k, n in enumerate(names) if n == "Linear_Forward"]
    add = [k for k, n in enumerate(names) if n == "Add_Forward"]
    assert fl[mm].min() > 0 and fl[add].max() == 0
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.parametrize("policy", ["lru", "g10"])
def test_builtin_replay_bit_identical(tmp_path, policy):
    from g10fast.run import run, workload_of
    from g10fast.spec import trace_spec

    spec = _builtin_spec(policy)
    p = tmp_path / "bert.h5"
    write_workload_h5(
        p, workload_of(spec), {"source": "builtin"}, transformer=spec.workload.shape.transformer
    )
    a = run(spec)
    b = run(trace_spec(p, spec.system, policy))
    assert comparable(a) == comparable(b)
    assert a["iterations"][1]["exe_time_cycles"] > a["iterations"][1]["ideal_exe_time_cycles"]


def test_artifact_replay_bit_identical(tmp_path):
    if not ART.is_dir():
        pytest.skip("no ../shared/g10-artifact")
    from g10fast.cli import main
    from g10fast.config import genconfig
    from g10fast.run import run
    from g10fast.spec import from_g10_config, trace_spec

    cfg = genconfig(ART, "BERT", 128, "lru")
    p = tmp_path / "bert128.h5"
    assert main(["workload", "export", "BERT", "--g10", str(ART), "--batch", "128", "--out", str(p)]) == 0
    spec = from_g10_config(cfg)
    a = run(spec)
    b = run(trace_spec(p, spec.system, "lru"))
    assert comparable(a) == comparable(b)
    assert b["iterations"][1]["exe_time_cycles"] == 13178010664  # reference/BERT-128-lru


def test_clock_rescale_and_speedup(tmp_path):
    from g10fast.run import workload_of

    w = workload_of(_builtin_spec())
    p = tmp_path / "w.h5"
    write_workload_h5(p, w, freq_hz=1_200_000_000)
    same_workload(trace_workload(p, 1.2, 1.0), w)
    h = trace_workload(p, 2.4, 1.0)
    assert np.array_equal(h.exec_cycles, w.exec_cycles * 2)
    s = trace_workload(p, 1.2, 2.0)
    c = w.exec_cycles.astype(np.float64)
    assert np.array_equal(s.exec_cycles, np.maximum(np.trunc(c - (c - c / 2)), 1).astype(np.int64))
    assert np.all(s.input_pf_cycles - s.exec_cycles >= 0)


def _small(tmp_path):
    from g10fast.run import workload_of

    w = workload_of(_builtin_spec())
    p = tmp_path / "w.h5"
    write_workload_h5(p, w)
    return w, p


def test_missing_and_not_hdf5(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_workload_h5(tmp_path / "nope.h5")
    q = tmp_path / "text.h5"
    q.write_text("hello\n")
    with pytest.raises(InputError, match="cannot be read as HDF5") as e:
        read_workload_h5(q)
    assert str(q) in str(e.value)


def test_truncated_file(tmp_path):
    w, p = _small(tmp_path)
    data = p.read_bytes()
    t = tmp_path / "trunc.h5"
    t.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="not a valid workload trace") as e:
        read_workload_h5(t)
    assert str(t) in str(e.value)


@pytest.mark.parametrize(
    "damage,msg",
    [
        (lambda f: f.attrs.__setitem__("version", 99), "version 99"),
        (lambda f: f.attrs.__setitem__("format", "other"), "format attribute"),
        (lambda f: f.attrs.__delitem__("complete"), "incomplete"),
        (lambda f: f["kernels"].__delitem__("exec_cycles"), "/kernels/exec_cycles is missing"),
        (lambda f: f["tensors/raw_size"].__setitem__(0, 10**6), "checksum"),
        (lambda f: f["incidence/in_idx"].__setitem__(0, 10**7), "checksum"),
    ],
)
def test_damaged_file(tmp_path, damage, msg):
    w, p = _small(tmp_path)
    with h5py.File(p, "a") as f:
        damage(f)
    with pytest.raises(InputError, match=msg):
        read_workload_h5(p)


def test_inconsistent_arrays_without_checksums(tmp_path):
    # a file written by another tool (no crc32 attributes) is still checked for consistency
    w, p = _small(tmp_path)
    with h5py.File(p, "a") as f:
        for g in ("kernels", "tensors", "incidence"):
            for ds in f[g].values():
                ds.attrs.pop("crc32", None)
        f["incidence/in_idx"][0] = w.num_tensors + 5
    with pytest.raises(InputError, match="outside"):
        read_workload_h5(p)
    w2 = dataclasses.replace(w, exec_cycles=w.exec_cycles.copy())
    w2.exec_cycles[3] = w2.pf_cycles[3] + 1
    q = tmp_path / "order.h5"
    write_workload_h5(q, w2)
    with pytest.raises(InputError, match="exec <= input_pf <= pf"):
        read_workload_h5(q)


def test_cli_bad_file_exit_2(tmp_path, capsys):
    from g10fast.cli import main

    q = tmp_path / "bad.h5"
    q.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    assert main(["run", "--workload", str(q), "--policy", "lru"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(q) in err and "Traceback" not in err
    assert main(["workload", "inspect", str(tmp_path / "none.h5")]) == 2


def test_cli_export_and_run(tmp_path, capsys):
    from g10fast.cli import main

    p = tmp_path / "b.h5"
    assert main(["workload", "export", "bert-base", "--batch", "16", "--out", str(p)]) == 0
    assert main(["workload", "inspect", str(p)]) == 0
    out = capsys.readouterr().out
    assert "1369 kernels" in out and "source: builtin" in out
    assert main(["run", "--workload", str(p), "--policy", "ideal", "--json"]) == 0
    assert main(["run", "--workload", str(p), "--model", "bert-base"]) == 2


def test_run_file_with_trace(tmp_path, capsys):
    import json
    from g10fast.cli import main

    p = tmp_path / "b.h5"
    assert main(["workload", "export", "bert-base", "--batch", "16", "--out", str(p)]) == 0
    capsys.readouterr()
    rf = tmp_path / "r.toml"
    rf.write_text(
        '[workload]\ntrace = "b.h5"\n[system]\npreset = "g10-artifact"\n'
        '[system.overrides]\n"gpu.memory_gb" = 0.5\n[policy]\n'
        'names = ["ideal", "lru"]\n'
    )
    assert main(["run", str(rf), "--no-figure", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in res] == ["ideal", "lru"]
    from g10fast.run import run

    direct = run(_builtin_spec("lru"))
    assert res[1]["iterations"][1]["exe_time_cycles"] == direct["iterations"][1]["exe_time_cycles"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[workload]\ntrace = "b.h5"\nbatch = 4\n')
    assert main(["run", str(bad)]) == 2
    assert "unknown key 'batch' in [workload]" in capsys.readouterr().err


def test_unwritable_target_is_one_message(tmp_path, monkeypatch):
    import errno
    import os

    from g10fast.run import workload_of
    from g10fast.workload import h5trace

    w = workload_of(_builtin_spec())
    with pytest.raises(InputError, match="folder does not exist"):
        write_workload_h5(tmp_path / "no" / "w.h5", w)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(h5trace.os, "replace", full)
    with pytest.raises(InputError, match="cannot write the workload trace .*nothing was written"):
        write_workload_h5(tmp_path / "w.h5", w)
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone
