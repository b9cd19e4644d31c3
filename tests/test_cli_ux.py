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


@pytest.mark.parametrize("value", ["-1", "1.5", "two", ""])
@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_bad_workers(capsys, tmp_path, command, value):
    argv = ([command, "smoke", "--store", str(tmp_path / "s.h5")] if command == "sweep"
            else [command, "--store", str(tmp_path / "s.h5")])
    _bad(capsys, argv + ["--workers", value, "--no-progress"], "parameter '--workers'",
         "must be a positive number of worker processes, or 0", repr(value))
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
