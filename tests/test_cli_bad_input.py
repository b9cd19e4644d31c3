"""Issue 37, item 7: extreme and malformed input found on a fresh clone. Each case is one
message (`g10fast: error: ...`, one line, naming the parameter or the file), exit status 2,
no traceback, and is refused before any long work starts."""

from __future__ import annotations

import errno

import pytest

from g10fast.cli import EXIT_BAD_INPUT, main, one_line


def _bad(capsys, argv, *needles):
    assert main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("g10fast: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


RUN = ["run", "--model", "bert-base", "--batch", "8", "--no-progress"]


@pytest.mark.parametrize(
    "flag,value,param,text",
    [
        ("--host-mem-gb", "1e300", "host.memory_gb", "must be at most 1048576, got 1e+300"),
        ("--pcie-gbps", "1e-300", "host.link_gbps", "must be at least 0.001, got 1e-300"),
        ("--ssd-gbps", "1e300", "ssd.bandwidth_gbps", "must be at most 1000000, got 1e+300"),
    ],
)
def test_extreme_system_values(capsys, flag, value, param, text):
    _bad(capsys, RUN + ["--policy", "lru", flag, value], f"parameter '{param}'", text)


def test_system_limits_hold_every_preset():
    """The limits are far outside every bundled preset (they guard the int64 counts only)."""
    from g10fast.hardware import list_presets, load_preset
    from g10fast.system import System

    for name in list_presets():
        System.from_preset(load_preset(name)).check()


def test_option_beyond_64_bits(capsys):
    _bad(
        capsys,
        RUN + ["--policy", "deepUM", "--option", "prefetch_degree=99999999999999999999"],
        "parameter 'policy.prefetch_degree'",
        "64-bit",
        "99999999999999999999",
    )


@pytest.mark.parametrize(
    "name,data", [("plan.csv", bytes(range(256)) * 4), ("plan.csv.gz", b"not gzip at all\n")]
)
def test_plan_in_a_binary_file(capsys, tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    _bad(capsys, RUN + ["--policy", "prefetch_lru", "--plan-in", str(p)], f"{p}: not a plan file (a text CSV")


def test_figure_format_refused_before_the_run(capsys, tmp_path, monkeypatch):
    import g10fast.run

    def never(*a, **k):
        raise AssertionError("the simulation ran before the figure's name was checked")

    monkeypatch.setattr(g10fast.run, "run", never)
    out = tmp_path / "out.xyz"
    _bad(
        capsys,
        RUN + ["--policy", "lru", "--figure", str(out)],
        "cannot write a figure as .xyz; use one of",
        ".png",
        ".pdf",
    )
    _bad(
        capsys, RUN + ["--policy", "lru", "--figure", str(tmp_path / "noext")], "a file without an extension"
    )


def test_trace_plot_format_refused_before_reading(capsys, tmp_path, monkeypatch):
    import g10fast.perfetto

    def never(*a, **k):
        raise AssertionError("the trace was read before the figure's name was checked")

    monkeypatch.setattr(g10fast.perfetto, "plot_trace", never)
    _bad(
        capsys,
        ["trace", "plot", str(tmp_path / "t.h5"), "--out", str(tmp_path / "x.xyz")],
        "cannot write a figure as .xyz",
    )


@pytest.mark.parametrize(
    "extra,text",
    [
        (
            ["--open", "--port", "99999999"],
            "parameter '--port': must be a TCP port, 1 to 65535, got 99999999",
        ),
        (["--port", "0", "--open"], "parameter '--port'"),
        (["--samples", "0"], "parameter '--samples': must be at least 1 counter sample, got 0"),
        (["--samples", "-5"], "got -5"),
    ],
)
def test_trace_export_numbers(capsys, tmp_path, extra, text):
    _bad(
        capsys,
        [
            "trace",
            "export",
            str(tmp_path / "t.h5"),
            "--perfetto",
            str(tmp_path / "o.pftrace"),
            "--no-progress",
        ]
        + extra,
        text,
    )


def test_trace_diff_top(capsys, tmp_path):
    _bad(
        capsys,
        ["trace", "diff", str(tmp_path / "a.h5"), str(tmp_path / "b.h5"), "--top", "-1"],
        "parameter '--top': must be 0 or more kernels, got -1",
    )


@pytest.mark.parametrize("value", ["-1", "0"])
def test_sweep_max_points(capsys, tmp_path, value):
    _bad(
        capsys,
        ["sweep", "smoke", "--store", str(tmp_path / "s.g10db"), "--max-points", value, "--no-progress"],
        "parameter '--max-points': must be at least 1 point",
    )
    assert not (tmp_path / "s.g10db").exists()


@pytest.mark.parametrize(
    "argv,text",
    [
        (["run", "--model", "bert-bas", "--no-progress"], "(did you mean 'bert-base'?)"),
        (
            ["run", "--model", "bert-base", "--system", "h100-sxm", "--no-progress"],
            "(did you mean 'h100-sxm5'?)",
        ),
        (["models", "--system", "g10-artifac"], "(did you mean 'g10-artifact'?)"),
    ],
)
def test_did_you_mean(capsys, argv, text):
    _bad(capsys, argv, text)


def test_artifact_model_did_you_mean():
    from g10fast.config import resolve_model
    from g10fast.errors import InputError

    with pytest.raises(InputError, match=r"unknown model 'Bertt' \(did you mean 'BERT'\?\)"):
        resolve_model("Bertt")
    with pytest.raises(InputError) as e:
        resolve_model("AlexNet")
    assert "did you mean" not in str(e.value)


def test_hdf5_message_is_one_line(capsys, monkeypatch):
    """HDF5's write errors carry ctime()'s newline ("time = Sat Nov 28 16:06:05 2026\\n, ...")."""
    import g10fast.cli.catalog as cli
    from g10fast.errors import InputError

    text = (
        "cannot write the event trace (Can't write data (file write failed: time = Sat Nov "
        "28 16:06:05 2026\n, filename = 'x.h5', errno = 28))"
    )

    def fail(args):
        raise InputError(text, path="x.h5")

    monkeypatch.setattr(cli, "cmd_policies", fail)
    err = _bad(capsys, ["policies"], "2026 , filename = 'x.h5'")
    assert one_line("a\r\n  b\n\nc ") == "a b c"
    assert err.endswith("errno = 28))\n")


def test_trace_writer_message_is_one_line(tmp_path, monkeypatch):
    from g10fast.errors import InputError
    from g10fast.trace import EventTraceWriter

    w = EventTraceWriter(tmp_path / "t.h5", config={})

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "Can't write data (time = Sat Nov 28 16:06:05 2026\n, errno = 28)")

    monkeypatch.setattr(w, "_flush", full)
    with pytest.raises(InputError) as e:
        w.close()
    assert "\n" not in str(e.value) and "2026 , errno = 28" in str(e.value)
    assert not (tmp_path / "t.h5").exists()


def test_figures_onto_a_full_disk(capsys, tmp_path, monkeypatch):
    """`figures` whose first figure cannot be written: one line naming the file, exit 2."""
    import matplotlib.figure

    from g10fast.sweep.store import ResultStore

    ResultStore(tmp_path / "s.g10db").close()

    def full(self, fname, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(fname))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    err = _bad(
        capsys,
        ["figures", str(tmp_path / "s.g10db"), "--out", str(tmp_path / "f"), "--only", "11"],
        "cannot write: No space left on device",
        "the disk is full",
    )
    assert str(tmp_path / "f") in err
    assert not [p for p in (tmp_path / "f").iterdir() if p.name.startswith("fig11")]


def test_other_os_errors_still_raise(monkeypatch):
    import g10fast.cli.catalog as cli

    def bug(args):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(cli, "cmd_policies", bug)
    with pytest.raises(OSError):
        main(["policies"])


# ------------------------------------------------------------- what a run needs in memory
def _bert(batch, policy="lru"):
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec

    spec = builtin_spec("bert-base", batch, "g10-artifact", policy)
    return spec, workload_of(spec)


def test_memory_estimate_of_batch_100000():
    """The issue's `--batch 100000` took 14.2 GiB: 1.5e10 pages of one byte each, plus the
    process; the driver engine keeps 5 bits a page, the tensor engine nothing per page."""
    from g10fast.resources import ENGINE_LOAD_BYTES, estimate_run_bytes

    spec, w = _bert(100000)
    est = estimate_run_bytes(spec, w)
    assert est["parts"]["page states (1 byte a page)"] == w.num_pages
    assert 1.50e10 < w.num_pages < 1.51e10
    # what the run adds to this process (which is as large as the tests before it made it)
    adds = est["total"] - est["parts"]["this process now"]
    assert 14.0 * 2**30 < adds < 14.3 * 2**30
    assert est["total"] == sum(est["parts"].values())
    assert est["parts"]["engine code"] == ENGINE_LOAD_BYTES
    from g10fast.spec import make_spec

    drv = estimate_run_bytes(make_spec(spec.workload, spec.system, "uvm"), w)
    assert drv["parts"]["residency bitmaps"] == (w.num_pages * 5 + 7) // 8 + (w.num_pages + 511) // 512 * 64
    ten = estimate_run_bytes(make_spec(spec.workload, spec.system, "FlashNeuron"), w)
    assert not any("page" in k or "bitmap" in k for k in ten["parts"])
    dum = estimate_run_bytes(make_spec(spec.workload, spec.system, "deepUM"), w)
    assert dum["parts"]["LRU ring"] == (1 << 24) * 8  # 10.5 M frames -> 2^24 entries, int64


def test_a_run_that_cannot_fit_is_refused_before_it_starts(capsys, monkeypatch):
    import g10fast.resources as res
    from g10fast import policies

    monkeypatch.setattr(res, "available_bytes", lambda: 8 * 2**30)

    def never(*a, **k):
        raise AssertionError("the engine started")

    monkeypatch.setattr(policies, "engine", never)
    spec, w = _bert(100000)
    err = _bad(
        capsys,
        RUN[:3] + ["--batch", "100000", "--policy", "lru", "--no-progress"],
        "parameter 'workload.batch': this run needs about ",
        "this machine has 8.0 GiB available",
        f"{w.num_pages:,} pages of BERT_Base at batch 100000",
        "G10FAST_MEMORY_CHECK=0",
    )
    # the pages' part is the run's own; the total adds this (test) process, as large as the
    # tests before it made it
    assert "page states (1 byte a page) 14.0 GiB" in err
    monkeypatch.setenv("G10FAST_MEMORY_CHECK", "0")
    assert res.check_run_memory(spec, w)["total"] > 8 * 2**30  # not refused


def test_available_bytes_is_this_machine():
    from g10fast.resources import available_bytes

    a = available_bytes()
    assert a is not None and 0 < a <= 1 << 50


def test_trace_export_onto_a_full_disk_names_the_output(capsys, tmp_path, monkeypatch):
    import g10fast.perfetto

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")  # a write(): no filename

    monkeypatch.setattr(g10fast.perfetto, "export_trace", full)
    out = tmp_path / "o.pftrace"
    _bad(
        capsys,
        ["trace", "export", str(tmp_path / "t.h5"), "--perfetto", str(out), "--no-progress"],
        f"{out}: cannot write: No space left on device",
        "the disk is full",
    )
