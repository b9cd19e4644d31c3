"""The command line: exit statuses, one-line messages for bad input, the --json schema, the
trace subcommand. Runs `g10fast.cli.main` in-process on the artifact's BERT inputs (skipped
without ../shared), with configs written to a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from g10fast.cli import EXIT_BAD_INPUT, main

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"
needs_artifact = pytest.mark.skipif(
    not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="../shared/g10-artifact not present"
)
SRC = ARTIFACT / "src"
BERT_CFG = SRC / "configs" / "BERT" / "128-sim_lru.config"


def _config(tmp_path, replace: dict | None = None, extra: str = "", name="c.config") -> Path:
    """The artifact's BERT-128 lru config with absolute paths, some keys replaced."""
    lines = []
    for line in BERT_CFG.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in (replace or {}):
            line = f"{parts[0]} {replace[parts[0]]}"
        elif parts and parts[1:] and parts[1].startswith("../"):
            line = f"{parts[0]} {(SRC / parts[1]).resolve()}"
        lines.append(line)
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n" + extra)
    return p


def _bad(capsys, argv, *needles):
    assert main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("g10fast: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_missing_config_file(capsys, tmp_path):
    _bad(capsys, ["run", str(tmp_path / "nope.config")], "nope.config")


@needs_artifact
def test_unknown_key_names_file_and_line(capsys, tmp_path):
    cfg = _config(tmp_path, extra="GPU_memroy_size_GB 40\n")
    n = len(cfg.read_text().splitlines())
    _bad(capsys, ["run", str(cfg)], f"c.config:{n}:", "GPU_memroy_size_GB")


@needs_artifact
def test_malformed_model_line(capsys, tmp_path):
    model = tmp_path / "BERT_Base.txt"
    text = (ARTIFACT / "frontend" / "Nets" / "BERT_Base.txt").read_text().splitlines()
    text[5] = "this is not an operator record"
    model.write_text("\n".join(text) + "\n")
    cfg = _config(tmp_path, {"nn_model_input_file": model})
    _bad(capsys, ["run", str(cfg), "--no-progress"], "BERT_Base.txt:6")


@needs_artifact
def test_kernel_time_file_with_wrong_kernel_count(capsys, tmp_path):
    times = tmp_path / "cudnn128.txt"
    lines = (ARTIFACT / "results" / "BERT_Base" / "cudnn128.txt").read_text().splitlines()
    times.write_text("\n".join(lines[:-10]) + "\n")
    cfg = _config(tmp_path, {"orig_kernel_time_file": times})
    _bad(capsys, ["run", str(cfg), "--no-progress"], "cudnn128.txt")


@needs_artifact
@pytest.mark.parametrize(
    "key,value", [("GPU_memory_size_GB", "-1"), ("num_iteration", "0"), ("PCIe_batch_size_page", "0")]
)
def test_impossible_setting_names_the_parameter(capsys, tmp_path, key, value):
    _bad(capsys, ["run", str(_config(tmp_path, {key: value})), "--no-progress"], key)


@needs_artifact
def test_g10_point_errors(capsys):
    _bad(
        capsys, ["run", "--g10", str(ARTIFACT), "--model", "BERT", "--batch", "7", "--policy", "lru"], "batch"
    )
    _bad(
        capsys,
        ["run", "--g10", str(ARTIFACT), "--model", "GPT5", "--batch", "128", "--policy", "lru"],
        "GPT5",
    )


@needs_artifact
def test_json_schema_and_trace_inspect(capsys, tmp_path):
    """An Ideal run (is_UVM 0: no paging) of BERT-128: every key the issue lists, and the
    time equal to the sum of the truncated kernel cycles."""
    trace = tmp_path / "t.h5"
    cfg = _config(tmp_path, {"is_UVM": "0"})
    assert main(["run", str(cfg), "--json", "--no-progress", "--trace", str(trace)]) == 0
    res = json.loads(capsys.readouterr().out)
    for key in ("model", "batch_size", "policy", "iterations", "reported", "wall_seconds", "peak_rss_bytes"):
        assert key in res, key
    assert res["policy"] == "ideal" and res["batch_size"] == 128 and res["model"] == "BERT_Base"
    assert len(res["iterations"]) == 2 and res["reported"] in (0, 1)
    for it in res["iterations"]:
        for key in (
            "exe_time_cycles",
            "ideal_exe_time_cycles",
            "stall_cycles",
            "overlap_cycles",
            "compute_cycles",
            "cpu_pf",
            "ssd_pf",
            "unalloc_pf",
            "in_transfer",
        ):
            assert isinstance(it[key], int), key
        assert set(it["pages"]) >= {"cpu_to_gpu", "gpu_to_cpu", "ssd_to_gpu", "gpu_to_ssd"}
        assert it["exe_time_cycles"] == it["ideal_exe_time_cycles"] == 7087159999
        assert it["cpu_pf"] + it["ssd_pf"] + it["unalloc_pf"] == 0
    assert main(["trace", "inspect", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "KERNEL" in out and f"{2 * 1369:,} events" in out


def test_trace_inspect_missing_file(capsys, tmp_path):
    _bad(capsys, ["trace", "inspect", str(tmp_path / "none.h5")], "none.h5")


@needs_artifact
def test_plan_out_plan_in_and_figure(capsys, tmp_path):
    """G10 (prefetch_lru) on BERT-128: the reference's iteration-1 time; the written plan,
    read back with --plan-in, gives the same run; the figure is a PNG; a malformed plan line
    is one error naming the file and line."""
    cfg = SRC / "configs" / "BERT" / "128-sim_prefetch_lru.config"
    plan, fig = tmp_path / "plan.csv", tmp_path / "mem.png"
    assert main(["run", str(cfg), "--json", "--no-progress", "--plan", str(plan), "--figure", str(fig)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [it["exe_time_cycles"] for it in res["iterations"]] == [11968945526, 7087296457]
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert res["plan"]["hints"] == 1798
    assert main(["run", str(cfg), "--json", "--no-progress", "--plan-in", str(plan)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [it["exe_time_cycles"] for it in again["iterations"]] == [11968945526, 7087296457]
    lines = plan.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line and line[0].isdigit())
    lines[i] = "12,not-a-tensor,Not_Known,In_gpu"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    _bad(capsys, ["run", str(cfg), "--no-progress", "--plan-in", str(bad)], f"bad.csv:{i + 1}")
