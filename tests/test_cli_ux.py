"""Command-line usability: --version, --workers checks, a closed stdout pipe, file-and-line
messages for impossible settings, trace inspect's page column, the comparison table, figure
and path, and the progress reporting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import g10fast
from g10fast.cli import EXIT_BAD_INPUT, main

ROOT = Path(__file__).resolve().parents[1]


def _bad(capsys, argv, *needles):
    assert main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("g10fast: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


def _cli(*args, env=None, **kw):
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "g10fast.cli", *args], env=e, **kw)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"g10fast {g10fast.__version__}\n"


@pytest.mark.parametrize("module", ["g10fast", "g10fast.cli"])
def test_python_dash_m(module):
    """`python -m g10fast` and `python -m g10fast.cli` are the console script."""
    out = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert (out.returncode, out.stdout) == (0, f"g10fast {g10fast.__version__}\n"), out.stderr


@pytest.mark.parametrize("value", ["-1", "1.5", "two", ""])
@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_bad_workers(capsys, tmp_path, command, value):
    argv = (
        [command, "smoke", "--store", str(tmp_path / "s.h5")]
        if command == "sweep"
        else [command, "--store", str(tmp_path / "s.h5")]
    )
    _bad(
        capsys,
        argv + ["--workers", value, "--no-progress"],
        "parameter '--workers'",
        "must be a positive number of worker processes, or 0",
        repr(value),
    )
    assert not (tmp_path / "s.h5").exists()


def test_closed_stdout_pipe_ends_quietly():
    """`g10fast models | head -1`: the reader is gone before the command writes."""
    r, w = os.pipe()
    os.close(r)
    try:
        out = _cli("models", stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)
    err = out.stderr.decode()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert err == ""
    assert out.returncode == 141


# ------------------------------------------------------------------ impossible settings in files
ARTIFACT = ROOT.parent / "shared" / "g10-artifact"
needs_artifact = pytest.mark.skipif(
    not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="../shared/g10-artifact not present"
)


def _g10_config(tmp_path, key, value) -> tuple[Path, int]:
    """The artifact's BERT-128 lru config with absolute paths and `key value`; -> (file, line)."""
    src = ARTIFACT / "src"
    lines, at = [], None
    for n, line in enumerate(
        (src / "configs" / "BERT" / "128-sim_lru.config").read_text().splitlines(), start=1
    ):
        parts = line.split()
        if parts and parts[0] == key:
            line, at = f"{key} {value}", n
        elif parts[1:] and parts[1].startswith("../"):
            line = f"{parts[0]} {(src / parts[1]).resolve()}"
        lines.append(line)
    p = tmp_path / "c.config"
    p.write_text("\n".join(lines) + "\n")
    assert at is not None
    return p, at


def test_cpu_bandwidth_zero_is_its_own_error():
    from g10fast.config import G10Config, validate
    from g10fast.errors import InputError
    from g10fast.hardware import config_fields, load_preset

    cfg = G10Config(
        **config_fields(load_preset("g10-artifact")),
        batch_size=8,
        nn_model_input_file="m",
        orig_kernel_time_file="m",
        input_pf_kernel_time_file="m",
        pf_kernel_time_file="m",
        workspace_size_file="m",
        is_transformer=1,
        num_iteration=1,
    )
    validate(cfg)
    with pytest.raises(InputError) as e:
        validate(cfg.replace(CPU_PCIe_bandwidth_GBps=0.0))
    assert e.value.param == "CPU_PCIe_bandwidth_GBps"
    assert str(e.value) == "parameter 'CPU_PCIe_bandwidth_GBps': must be > 0, got 0.0"


@needs_artifact
@pytest.mark.parametrize(
    "key,value,text",
    [
        ("GPU_memory_size_GB", "-5", "must be >= 0, got -5.0"),
        ("CPU_PCIe_bandwidth_GBps", "0", "must be > 0, got 0.0"),
        ("num_iteration", "0", "must be >= 1 for a simulation, got 0"),
    ],
)
def test_g10_config_setting_names_file_and_line(capsys, tmp_path, key, value, text):
    cfg, line = _g10_config(tmp_path, key, value)
    err = _bad(capsys, ["run", str(cfg), "--no-progress"])
    assert err == f"g10fast: error: {cfg}:{line}: '{key}' {text}\n"


def test_preset_file_value_names_file_and_line(tmp_path):
    from g10fast.errors import InputError
    from g10fast.hardware import hardware_dir, load_preset

    lines = (hardware_dir() / "g10-artifact.toml").read_text().splitlines()
    for key, value, text in [
        (
            "memory_gb = 128.0",
            "memory_gb = -5",
            "host.memory_gb: must be a finite, non-negative number, got -5",
        ),
        ("bandwidth_gbps = 3.2", "bandwidth_gbps = 0", "ssd.bandwidth_gbps: must be > 0, got 0.0"),
        ('model = "NVIDIA A100 40GB (SXM4)"', 'model = ""', "gpu.model: missing, empty or not a string"),
    ]:
        n = next(i for i, x in enumerate(lines) if x.startswith(key))
        p = tmp_path / "mine.toml"
        p.write_text("\n".join(lines[:n] + [value] + lines[n + 1 :]) + "\n")
        with pytest.raises(InputError) as e:
            load_preset(p)
        assert str(e.value) == f"{p}:{n + 1}: {text}"
    with pytest.raises(InputError) as e:  # an override is named as such, not the file
        load_preset("g10-artifact", {"host.link_gbps": -1})
    assert str(e.value) == ("parameter 'host.link_gbps': must be a finite, non-negative number, got -1")


@pytest.mark.parametrize(
    "text,line,message",
    [
        (
            '[workload]\nmodel = "bert-base"\nbatch = -1\n',
            3,
            "workload.batch: must be a positive integer, got -1",
        ),
        ('[workload]\nmodel = ""\n', 2, "workload.model: unknown built-in model ''"),
        (
            '[workload]\nmodel = "bert-base"\nbatch = 2\nseq_len = -1\n',
            4,
            "workload.seq_len: must be a positive integer, got -1",
        ),
        (
            '[workload]\nmodel = "bert-base"\nbatch = 2\n[engine]\nnum_iteration = 2\nkernel_speedup = -1\n',
            6,
            "engine.kernel_speedup: must be > 0, got -1.0",
        ),
        (
            '[workload]\nmodel = "bert-base"\nbatch = 2\n[system.overrides]\n"gpu.memory_gb" = -5\n',
            5,
            "system.overrides.gpu.memory_gb: must be a finite, non-negative number, got -5",
        ),
        (
            '[workload]\nmodel = "bert-base"\nbatch = 2\n[system]\noverrides = {"host.link_gbps" = 0}\n',
            5,
            "system.overrides.host.link_gbps: must be > 0, got 0",
        ),
        # a check of the page engine itself (an SSD faster than the host link is not one: the
        # artifact's start-up check SSD <= CPU applies to its config files only)
        (
            '[workload]\nmodel = "bert-base"\nbatch = 2\n[system.overrides]\n'
            '"gpu.malloc_us_per_byte" = 1.0\n',
            5,
            "system.overrides.gpu.malloc_us_per_byte: "
            "4915200 cycles per page exceed the 15599-cycle batcher tick",
        ),
    ],
)
def test_run_file_value_names_file_and_line(capsys, tmp_path, text, line, message):
    p = tmp_path / "run.toml"
    p.write_text(text)
    err = _bad(capsys, ["run", str(p), "--no-progress"])
    assert err.startswith(f"g10fast: error: {p}:{line}: {message}"), err


# ------------------------------------------------------------------ trace inspect
def test_trace_inspect_pages_of_a_real_trace(capsys, tmp_path):
    """A page-engine run of a small synthetic workload under memory pressure: TRANSFER rows
    (count -1, "not used") add no pages and show none; every other kind shows the sum of its
    counts."""
    import numpy as np

    sys.path.insert(0, str(Path(__file__).parent))
    from synth import make_workload, tiny_cfg

    from g10fast.engine.page import simulate_pages
    from g10fast.trace import EventKind, EventTraceWriter, open_trace

    w = make_workload(21, n_kernels=10, n_tensors=24, max_pages=50 // 3)
    path = tmp_path / "run.h5"
    with EventTraceWriter(path, config={}, threads=0) as wr:
        simulate_pages(w, tiny_cfg(50, 20, "lru"), trace=wr)
    with open_trace(path) as tr:
        cols = tr.read()
        pages = tr.pages_by_kind()
    kind, count = np.asarray(cols["kind"]), np.asarray(cols["count"], dtype=np.int64)
    n_transfer = int((kind == EventKind.TRANSFER).sum())
    assert n_transfer > 0 and (count[kind == EventKind.TRANSFER] == -1).all()
    assert pages[EventKind.TRANSFER] == 0
    for k in EventKind:
        if k != EventKind.TRANSFER:
            assert pages[k] == int(count[kind == k].sum()) >= 0
    assert main(["trace", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("TRANSFER"))
    assert line.split() == ["TRANSFER", f"{n_transfer:,}", "events", "(begin/end", "marks)"]
    fetch = next(x for x in out.splitlines() if x.strip().startswith("FETCH"))
    # (a trace with range rows adds "(as N rows of ticks)" after the pages)
    assert fetch.split()[3:5] == [f"{pages[EventKind.FETCH]:,}", "pages"]
    assert "-" not in out.replace("--", "").split("\n", 2)[2]


# ------------------------------------------------------------------ comparison table / figure
def _ok(policy, exe_s, ideal_s, stall_s, f=1.2e9):
    it = {
        "exe_time_cycles": int(exe_s * f),
        "ideal_exe_time_cycles": int(ideal_s * f),
        "stall_cycles": int(stall_s * f),
        "pages": {"cpu_to_gpu": 2**18, "gpu_to_cpu": 2**17, "ssd_to_gpu": 0, "gpu_to_ssd": 2**16},
    }
    return {
        "policy": policy,
        "status": "ok",
        "iterations": [it],
        "reported": 0,
        "system": {"f_hz": f},
        "wall_seconds": 1.0,
    }


FLASHNEURON_FAILED = {
    "policy": "FlashNeuron",
    "status": "failed",
    "iterations": [],
    "reported": None,
    "failure": {
        "stage": "planner",
        "reason": "weights and the largest kernel's working set do not fit (GPU line -53485297664 B)",
        "tensor": None,
    },
}
NOT_AVAILABLE = {
    "policy": "G10GDSFULL",
    "status": "not available",
    "reason": "parameter 'policy': G10GDSFULL is not implemented yet",
}


def _results():
    return [
        _ok("ideal", 2.0, 2.0, 0.0),
        _ok("lru", 8.0, 2.0, 6.0),
        FLASHNEURON_FAILED,
        NOT_AVAILABLE,
        _ok("prefetch_lru", 2.5, 2.0, 0.5),
    ]


def test_comparison_table_shows_failures_and_their_reason():
    from g10fast.api import comparison_rows, comparison_text

    rows = comparison_rows(_results())
    assert [r["status"] for r in rows] == ["ok", "ok", "failed", "not available", "ok"]
    assert rows[2]["reason"] == (
        "weights and the largest kernel's working set do not fit (GPU line -53485297664 B) (planner)"
    )
    lines = comparison_text(_results(), "t").splitlines()
    assert lines[0] == "t"
    fn = next(x for x in lines if x.startswith("FlashNeuron"))
    assert fn == (
        "FlashNeuron  FAILED: weights and the largest kernel's working set do not fit "
        "(GPU line -53485297664 B) (planner)"
    )
    assert "not yet available" not in fn
    host = next(x for x in lines if x.startswith("G10-Host"))
    assert host.split(None, 1)[1].strip() == "not yet available in this build"
    lru = next(x for x in lines if x.startswith("Base UVM")).split()
    assert lru[2:5] == ["8.000", "0.250", "75.0%"]


def test_comparison_figure_layout(tmp_path):
    """Two labelled panels, policy names on x, failed and unavailable policies marked with
    their status, the legend beside the bars (not over them), a title inside the figure."""
    import matplotlib.pyplot as plt

    from g10fast.api import comparison_figure, comparison_figure_object

    title = (
        "default run: built-in bert-base at batch 64 on the g10-artifact system with "
        "10 GB of GPU memory, estimated kernel times"
    )
    fig = comparison_figure_object(_results(), title)
    try:
        ax1, ax2 = fig.axes
        assert ax1.get_ylabel() == "performance / Ideal"
        assert ax2.get_ylabel() == "iteration time (s)"
        names = ["Ideal", "Base UVM", "FlashNeuron", "G10-Host", "G10"]
        for ax in (ax1, ax2):
            assert [t.get_text() for t in ax.get_xticklabels()] == names
            marks = sorted(t.get_text() for t in ax.texts if t.get_text() in ("failed", "not available"))
            assert marks == ["failed", "not available"]
        # performance bars: Ideal 1, Base UVM 0.25, G10 0.8; time bars stack compute + stall
        assert [round(b.get_height(), 3) for b in ax1.patches] == [1.0, 0.25, 0.0, 0.0, 0.8]
        comp, stall = ax2.patches[:5], ax2.patches[5:]
        assert [round(c.get_height() + s.get_height(), 3) for c, s in zip(comp, stall)] == [
            2.0,
            8.0,
            0.0,
            0.0,
            2.5,
        ]
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        figbox = fig.bbox
        sup = fig._suptitle.get_window_extent(r)
        assert sup.x0 >= figbox.x0 and sup.x1 <= figbox.x1 and sup.y1 <= figbox.y1
        leg = ax2.get_legend()
        assert [t.get_text() for t in leg.get_texts()] == ["compute", "stall"]
        assert leg.get_window_extent(r).x0 >= ax2.get_window_extent(r).x1 - 1
        assert leg.get_window_extent(r).x1 <= figbox.x1
    finally:
        plt.close(fig)
    out = comparison_figure(_results(), tmp_path / "c.png", title)
    assert Path(out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.png"]


# ------------------------------------------------------------------ where the figure goes
def test_comparison_figure_path(capsys, tmp_path, monkeypatch):
    import json

    import g10fast.api

    monkeypatch.setattr(g10fast.api, "run_specs", lambda specs, progress_factory=None, **kw: _results())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    rf = tmp_path / "runs" / "exp1.toml"
    rf.write_text('[workload]\nmodel = "bert-base"\n[policy]\nnames = ["ideal", "lru"]\n')
    png = b"\x89PNG\r\n\x1a\n"

    assert main(["run", str(rf), "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "figure written to exp1-comparison.png"
    assert (tmp_path / "exp1-comparison.png").read_bytes()[:8] == png

    assert main(["run", str(rf), "--no-progress", "--figure", "runs/mine.png"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "figure written to runs/mine.png"
    assert (tmp_path / "runs" / "mine.png").read_bytes()[:8] == png

    assert main(["run", "--no-progress"]) == 0  # the default run
    assert capsys.readouterr().out.splitlines()[-1] == "figure written to g10fast-comparison.png"
    assert (tmp_path / "g10fast-comparison.png").read_bytes()[:8] == png

    for f in tmp_path.glob("*.png"):
        f.unlink()
    assert main(["run", str(rf), "--no-progress", "--no-figure"]) == 0
    assert "figure written" not in capsys.readouterr().out
    assert not list(tmp_path.rglob("*comparison*"))

    assert main(["run", str(rf), "--no-progress", "--json"]) == 0
    cap = capsys.readouterr()
    assert [r["policy"] for r in json.loads(cap.out)][:2] == ["ideal", "lru"]
    assert cap.err == "figure written to exp1-comparison.png\n"

    _bad(capsys, ["run", str(rf), "--no-figure", "--figure", "x.png"], "'--no-figure'", "not both")
    _bad(capsys, ["run", str(rf), "--figure", "nope/x.png"], "nope", "folder does not exist")


# ------------------------------------------------------------------ progress reporting
LINE = (
    r"^(?P<label>[\w ]+): (?P<done>[\d,]+)/(?P<total>[\d,]+) (?P<unit>\w+)s "
    r"\((?P<pct>[\d.]+)%\), [\d,.?]+ \w+s/s, \S+ elapsed, ETA \S+(; .*)?$"
)


def test_progress_lines_when_not_a_terminal():
    import io
    import re

    from g10fast.progress import RunProgress, SweepProgress

    buf = io.StringIO()
    p = RunProgress("Base UVM", stream=buf, interval=0)  # StringIO: not a terminal
    for done in (10, 20, 100):
        p(done, 100)
    p(100, 100)  # after the end: nothing
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3
    m = [re.match(LINE, x) for x in lines]
    assert all(m), lines
    assert [(x["label"], x["done"], x["total"], x["unit"]) for x in m] == [
        ("Base UVM", "10", "100", "kernel"),
        ("Base UVM", "20", "100", "kernel"),
        ("Base UVM", "100", "100", "kernel"),
    ]
    assert m[-1]["pct"] == "100.0"

    buf = io.StringIO()
    p = RunProgress("G10", stream=buf, interval=3600)  # only the first and the last
    for done in range(1, 51):
        p(done, 50)
    assert [re.match(LINE, x)["done"] for x in buf.getvalue().splitlines()] == ["1", "50"]

    buf = io.StringIO()
    p = RunProgress("G10", stream=buf, interval=0, enabled=False)
    p(1, 2)
    p(2, 2)
    assert buf.getvalue() == ""

    buf = io.StringIO()
    s = SweepProgress(2, stream=buf, interval=0)
    s.update("BERT/128-lru", "ok", 1.5)
    s.update("VIT/256-deepUM", "error", 0.2)
    lines = buf.getvalue().splitlines()
    assert [re.match(LINE, x)["done"] for x in lines] == ["1", "2"]
    assert lines[0].endswith("; last: BERT/128-lru ok 1.5s")
    assert lines[1].endswith("; 1 not ok, last: VIT/256-deepUM error 0.2s")


def test_progress_bar_on_a_terminal():
    import io

    from g10fast.progress import RunProgress, SweepProgress

    buf = io.StringIO()
    p = RunProgress("Ideal", stream=buf, bar=True)
    p(5, 10)
    p(10, 10)
    out = buf.getvalue()
    assert "\r" in out and out.endswith("\n")
    assert "Ideal: 100%" in out and "10/10" in out and "kernel/s" in out
    buf = io.StringIO()
    s = SweepProgress(1, stream=buf, tty=True)
    s.update("BERT/128-lru", "ok", 1.5)
    out = buf.getvalue()
    assert "sweep: 100%" in out and "1/1" in out and "last: BERT/128-lru ok 1.5s" in out


SMALL_RUN = (
    '[workload]\nmodel = "vit"\nbatch = 2\n[system.overrides]\n"gpu.memory_gb" = 0.3\n'
    '[policy]\nnames = ["ideal", "lru"]\n'
)


def test_run_progress_lines_from_the_cli(tmp_path):
    """`g10fast run` with stderr captured (not a terminal): no bar, plain lines, one bar's
    worth per policy, at the interval of $G10FAST_PROGRESS_INTERVAL; --no-progress: none."""
    import re

    rf = tmp_path / "small.toml"
    rf.write_text(SMALL_RUN)
    out = _cli(
        "run",
        str(rf),
        "--no-figure",
        env={"G10FAST_PROGRESS_INTERVAL": "0"},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "\r" not in out.stderr and lines, out.stderr
    m = [re.match(LINE, x) for x in lines]
    assert all(m), lines
    labels = [x["label"] for x in m]
    assert labels == sorted(labels, key=["Ideal", "Base UVM"].index)
    for label in ("Ideal", "Base UVM"):
        mine = [x for x in m if x["label"] == label]
        assert mine[-1]["done"] == mine[-1]["total"] and mine[-1]["pct"] == "100.0"
        assert mine[-1]["unit"] == "kernel"
    assert "Ideal" in out.stdout and "Base UVM" in out.stdout and "kernels" not in out.stdout

    slow = _cli(
        "run",
        str(rf),
        "--no-figure",
        env={"G10FAST_PROGRESS_INTERVAL": "3600"},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert slow.returncode == 0, slow.stderr
    # the first report of each run and its end: at most two lines per policy
    got = [re.match(LINE, x) for x in slow.stderr.splitlines()]
    assert all(got) and len(got) <= 4
    assert [x["pct"] for x in got if x["pct"] == "100.0"] == ["100.0", "100.0"]

    quiet = _cli(
        "run",
        str(rf),
        "--no-figure",
        "--no-progress",
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""


@needs_artifact
def test_sweep_progress_lines_from_the_cli(tmp_path):
    import re

    m = tmp_path / "m.toml"
    m.write_text(
        'name = "t"\n[[group]]\nmodels = ["VIT"]\npolicies = ["ideal", "FlashNeuron"]\nbatch = [256]\n'
    )
    out = _cli(
        "sweep",
        str(m),
        "--store",
        str(tmp_path / "s.h5"),
        "--g10",
        str(ARTIFACT),
        "--workers",
        "0",
        env={"G10FAST_PROGRESS_INTERVAL": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    got = [re.match(LINE, x) for x in out.stderr.splitlines()]
    assert all(got), out.stderr
    assert [(x["label"], x["done"], x["total"], x["unit"]) for x in got] == [
        ("sweep", "1", "2", "point"),
        ("sweep", "2", "2", "point"),
    ]
    assert "2 run (2 ok" in out.stdout


# ------------------------------------------------------------------ issue 37: every flag applies
def _small_run_file(tmp_path, policies, gpu_gb=1.0, name="r.toml"):
    """ViT at batch 8 (1.1 GiB) on g10-artifact with `gpu_gb` of GPU memory."""
    f = tmp_path / name
    pol = f"names = {policies!r}" if isinstance(policies, list) else f"name = {policies!r}"
    f.write_text(
        f'[workload]\nmodel = "vit"\nbatch = 8\n[system]\npreset = "g10-artifact"\n'
        f'[system.overrides]\n"gpu.memory_gb" = {gpu_gb}\n[policy]\n' + pol.replace("'", '"') + "\n"
    )
    return f


def _captured_comparison(monkeypatch):
    """run_specs replaced: records the specs and the keywords it was called with."""
    import g10fast.api

    seen = {}

    def fake(specs, progress_factory=None, **kw):
        seen["specs"], seen["kw"] = list(specs), kw
        return _results()

    monkeypatch.setattr(g10fast.api, "run_specs", fake)
    return seen


def test_default_run_takes_the_system_flags_options_check_and_bound(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = _captured_comparison(monkeypatch)
    assert (
        main(
            [
                "run",
                "--no-progress",
                "--no-figure",
                "--host-mem-gb",
                "64",
                "--ssd-gbps",
                "6.4",
                "--pcie-gbps",
                "32",
                "--option",
                "prefetch_degree=4",
                "--check",
                "--bound",
                "lp",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    specs = seen["specs"]
    assert [s.policy.name for s in specs][:2] == ["ideal", "lru"]
    for s in specs:
        assert s.system.ssd_bandwidth_gbps == 6.4
        assert s.system.host_link_gbps == s.system.gpu_link_gbps == 32.0
        assert s.system.gpu_memory_gb == 10.0  # the default run's GPU
        # G10-GDS runs without host memory (its record's override stays on top)
        assert s.system.host_memory_gb == (0.0 if s.policy.name == "G10GDSSSD" else 64.0)
        assert s.policy.options.__dict__.get("prefetch_degree", 4) == 4
    assert next(s for s in specs if s.policy.name == "deepUM").policy.options.prefetch_degree == 4
    assert seen["kw"]["check"] is True
    assert set(seen["kw"]["bound"].values()) == {"lp"}  # all page or tensor engine
    assert "--option prefetch_degree=4: applied to DeepUM+" in out
    assert "system: --host-mem-gb 64, --ssd-gbps 6.4, --pcie-gbps 32" in out

    assert main(["run", "--no-progress", "--no-figure", "--check-full"]) == 0
    assert seen["kw"]["check"] == "full"
    capsys.readouterr()

    assert main(["run", "--no-progress", "--no-figure", "--system", "h100-80-pcie5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "default run: built-in bert-base at batch 64 on the h100-80-pcie5 system, estimated kernel times"
    )
    assert {s.system.name for s in seen["specs"]} == {"h100-80-pcie5"}
    assert seen["specs"][0].system.gpu_memory_gb == 80.0


@pytest.mark.parametrize(
    "argv,needles",
    [
        (["--trace", "t.h5"], ["--trace writes one run's events", "comparison of 7 policies"]),
        (["--plan", "p.csv"], ["--plan writes one policy's plan"]),
        (["--plan-in", "p.csv"], ["--plan-in replays one plan"]),
        (["--kernel-order", "k.config"], ["--kernel-order"]),
        (["--trace-compression", "none"], ["--trace-compression", "goes with --trace"]),
        (["--g10-root", "."], ["--g10-root cannot change the default run"]),
        (
            ["--option", "nope=1"],
            ["--option", "no policy of this run has an option 'nope'", "prefetch_degree"],
        ),
        (["--host-mem-gb", "-3"], ["--host-mem-gb", "must be"]),
    ],
)
def test_default_run_refuses_what_does_not_apply(capsys, monkeypatch, tmp_path, argv, needles):
    monkeypatch.chdir(tmp_path)
    seen = _captured_comparison(monkeypatch)
    _bad(capsys, ["run", "--no-progress", "--no-figure", *argv], *needles)
    assert "specs" not in seen  # refused before running


def test_run_file_takes_the_flags(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = _captured_comparison(monkeypatch)
    rf = _small_run_file(tmp_path, ["ideal", "lru", "uvm"])
    assert main(["run", str(rf), "--no-progress", "--no-figure", "--pcie-gbps", "8", "--bound", "lp"]) == 0
    assert {s.system.host_link_gbps for s in seen["specs"]} == {8.0}
    assert seen["kw"]["bound"] == {"ideal": "lp", "lru": "lp", "uvm": "window"}
    assert (
        "--bound lp: no LP for UVM (driver) (the LP models the page and tensor engines)"
        in capsys.readouterr().out
    )
    for argv, needles in (
        (["--workload", "w.h5"], ["--workload cannot change a run file"]),
        (["--trace", "t.h5"], ["--trace writes one run's events"]),
        (["--allocator", "cnmem"], ["--allocator", "no policy of this comparison places blocks"]),
    ):
        _bad(capsys, ["run", str(rf), "--no-progress", *argv], *needles)
    only_driver = _small_run_file(tmp_path, ["uvm", "tbnp"], name="d.toml")
    _bad(
        capsys,
        ["run", str(only_driver), "--no-progress", "--bound", "lp"],
        "--bound",
        "page and tensor engines",
    )


def test_one_policy_run_file_is_a_single_run_with_its_flags(capsys, tmp_path):
    """--trace, --pcie-gbps, --bound lp (its LP shown) and --check on a run file of one
    policy: the trace is written, the link is the flag's, the text names the LP."""
    import json

    rf = _small_run_file(tmp_path, "lru")
    trace = tmp_path / "t.h5"
    assert (
        main(
            [
                "run",
                str(rf),
                "--no-progress",
                "--trace",
                str(trace),
                "--pcie-gbps",
                "8",
                "--bound",
                "lp",
                "--check",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert trace.is_file() and f"event trace written to {trace}" in out
    assert "bound (--bound lp)  LP " in out and "(optimal;" in out
    assert main(["run", str(rf), "--no-progress", "--pcie-gbps", "8", "--check", "--json"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["invariants_checked"] is True and slow["invariant_checks"] > 0
    assert main(["run", str(rf), "--no-progress", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    # g10-artifact's link is 15.754 GB/s: at 8 GB/s the link moves about half the bytes
    # per cycle
    assert slow["system"]["cpu_bpc"] == pytest.approx(plain["system"]["cpu_bpc"] * 8 / 15.754, rel=1e-3)


# ------------------------------------------------------------------ issue 37: results that say
def test_a_failed_run_shows_no_time():
    """The swap engine fails a run whose allocator needs more than the GPU, after its engine
    ran: the text says FAILED and why, and prints no time or slowdown for it."""
    from g10fast.cli import summary_text

    it = {
        "iteration": 0,
        "exe_time_cycles": 1200,
        "ideal_exe_time_cycles": 1200,
        "slowdown": 1.0,
        "stall_cycles": 0,
        "overlap_cycles": 0,
        "compute_cycles": 1200,
        "cpu_pf": 0,
        "ssd_pf": 0,
        "unalloc_pf": 0,
        "in_transfer": 0,
        "pages": {"cpu_to_gpu": 0, "ssd_to_gpu": 0, "gpu_to_cpu": 0, "gpu_to_ssd": 0},
    }
    res = {
        "model": "VIT",
        "batch_size": 8,
        "policy": "singa_swap",
        "engine": "swap",
        "status": "failed",
        "reported": 0,
        "iterations": [it],
        "f_hz": 1.2e9,
        "workload": {"kernels": 10, "tensors": 20, "footprint_bytes": 2**30, "overcommitment": 2.0},
        "failure": {"stage": "allocator", "reason": "needs 1.500 GiB of GPU memory"},
        "wall_seconds": 1.0,
        "peak_rss_bytes": 2**20,
    }
    text = summary_text(res)
    assert "FAILED: singa_swap cannot run this configuration (allocator)" in text
    assert "needs 1.500 GiB of GPU memory" in text
    for absent in ("slowdown", "execution time", "iteration 0"):
        assert absent not in text, text
    assert "no time: the run does not fit" in text


def test_the_cli_asks_the_engine_records(capsys, monkeypatch, tmp_path):
    """--kernel-order, --timeline and a result's extra summary lines follow the engine's record
    (g10fast.engine.registry), not its name: the refusals name the engines whose record says
    so, and a record changed here changes what the CLI does."""
    import dataclasses

    from g10fast.cli import summary_text
    from g10fast.engine import registry

    base = ["run", "--model", "bert-base", "--batch", "8", "--no-progress"]
    order = str(tmp_path / "kernels.config")
    _bad(
        capsys,
        base + ["--policy", "uvm", "--kernel-order", order],
        "--kernel-order",
        "only the policies of the page engine take a kernel order",
    )
    _bad(
        capsys,
        base + ["--policy", "lru", "--timeline", str(tmp_path / "t.json")],
        "--timeline",
        "only the policies of the ranks engine write a timeline; the page engine "
        "writes an event trace (--trace)",
    )
    # the records say it: the driver's taking a kernel order and the page engine's not
    for name, flag in (("page", False), ("driver", True)):
        monkeypatch.setitem(
            registry._ENGINES, name, dataclasses.replace(registry.engine(name), kernel_order=flag)
        )
    _bad(
        capsys,
        base + ["--policy", "lru", "--kernel-order", order],
        "only the policies of the driver engine take a kernel order",
    )
    monkeypatch.setitem(
        registry._ENGINES, "tensor", dataclasses.replace(registry.engine("tensor"), timeline="a:writer")
    )
    _bad(
        capsys,
        base + ["--policy", "lru", "--timeline", str(tmp_path / "t.json")],
        "only the policies of the tensor and ranks engines write a timeline",
    )
    # a result's extra lines are its engine record's summary
    res = {
        "model": "VIT",
        "batch_size": 8,
        "policy": "singa_swap",
        "engine": "swap",
        "status": "ok",
        "reported": None,
        "iterations": [],
        "f_hz": 1.2e9,
        "workload": {"kernels": 10, "tensors": 20, "footprint_bytes": 2**30, "overcommitment": 2.0},
        "wall_seconds": 1.0,
        "peak_rss_bytes": 2**20,
    }
    assert "a line of the swap record" not in summary_text(res)
    monkeypatch.setitem(
        registry._ENGINES,
        "swap",
        dataclasses.replace(
            registry.engine("swap"), summary=lambda r: [f"a line of the swap record ({r['policy']})"]
        ),
    )
    assert summary_text(res).split("\n")[1] == "a line of the swap record (singa_swap)"


def test_gds_header_and_an_allocator_that_does_not_fit():
    """G10-GDS's engine holds 4x the GPU's pages (O-32): its header still measures the
    workload against the GPU, as every other policy's; an allocator that needs more GPU
    memory than the GPU has fails the run (stage allocator), saying how much."""
    from g10fast.api import simulate

    over = {"gpu.memory_gb": 0.3}
    lru = simulate("vit", 8, "g10-artifact", "lru", overrides=over)
    gds = simulate("vit", 8, "g10-artifact", "G10GDSSSD", overrides=over)
    assert gds["system"]["capacity_pages"] == 4 * int(0.3 * 2**18)  # O-32: the engine's 4x
    assert gds["workload"]["overcommitment"] == lru["workload"]["overcommitment"] > 3
    fit = simulate("vit", 8, "g10-artifact", "G10GDSSSD", overrides=over, engine={"allocator": "bump"})
    need = fit["gpu_memory_needed_bytes"]
    assert 0.33 * 2**30 < need < 0.4 * 2**30  # measured 0.358 GiB
    assert fit["status"] == "failed" and fit["failure"]["stage"] == "allocator"
    assert fit["failure"]["reason"] == (
        f"needs {need / 2**30:.3f} GiB of GPU memory (bump on the run's allocations), the GPU has 0.300 GiB"
    )


@needs_artifact
def test_g10_config_file_takes_option(capsys):
    import json

    cfg = ARTIFACT / "src" / "configs" / "BERT" / "128-sim_deepUM.config"
    assert main(["run", str(cfg), "--no-progress", "--json", "--option", "prefetch_degree=2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["policy"] == "deepUM" and res["policy_options"]["prefetch_degree"] == 2


@pytest.mark.parametrize(
    "argv,needles",
    [
        (["--g10-root", "."], ["--g10-root", "give the config file"]),
        (["--trace-compression", "none"], ["--trace-compression", "goes with --trace"]),
    ],
)
def test_single_run_refuses_flags_that_do_not_apply(capsys, argv, needles):
    _bad(capsys, ["run", "--model", "vit", "--batch", "8", "--no-progress", *argv], *needles)


def test_a_flag_error_in_a_run_file_run_names_the_flag(capsys, tmp_path):
    rf = _small_run_file(tmp_path, "lru")
    err = _bad(
        capsys,
        ["run", str(rf), "--no-progress", "--allocator", "cnmem"],
        "--allocator",
        "allocator applies to the tensor and swap engines' policies",
    )
    assert str(rf) not in err  # the flag's error, not the file's


def test_memory_snapshot_of_the_default_run_takes_its_system_flags(capsys, monkeypatch, tmp_path):
    import g10fast.alloc.snapshot
    import g10fast.run

    monkeypatch.chdir(tmp_path)
    _captured_comparison(monkeypatch)
    seen = []
    monkeypatch.setattr(g10fast.run, "workload_of", lambda spec: seen.append(spec) or None)
    monkeypatch.setattr(g10fast.alloc.snapshot, "write_workload_snapshots", lambda *a, **k: [])
    assert (
        main(
            [
                "run",
                "--no-progress",
                "--no-figure",
                "--system",
                "h100-80-pcie5",
                "--pcie-gbps",
                "8",
                "--memory-snapshot",
                "m.pickle",
            ]
        )
        == 0
    )
    assert seen[0].system.name == "h100-80-pcie5" and seen[0].system.host_link_gbps == 8.0
