"""g10fast/atomic.py: a file appears whole under its name or not at all."""

from __future__ import annotations

import os

import pytest

from g10fast.atomic import atomic_path, temporary_name


def test_written_file_is_renamed_over_the_target(tmp_path):
    out = tmp_path / "a.csv"
    out.write_text("old")
    with atomic_path(out) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path) and tmp.endswith(".tmp")
        assert os.path.basename(tmp).startswith(".a.csv.")
        assert not os.path.exists(tmp)
        with open(tmp, "w") as fh:
            fh.write("new")
        assert out.read_text() == "old"  # not before the block ends
    assert out.read_text() == "new" and os.listdir(tmp_path) == ["a.csv"]


def test_an_error_leaves_the_target_and_no_temporary(tmp_path):
    out = tmp_path / "a.png"
    out.write_text("old")
    with pytest.raises(RuntimeError, match="half-way"):
        with atomic_path(out, ".png") as tmp:
            assert tmp.endswith(".tmp.png")
            with open(tmp, "w") as fh:
                fh.write("half")
            raise RuntimeError("half-way")
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["a.png"]
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(tmp_path / "b.h5"):
            raise KeyboardInterrupt  # nothing written yet: nothing to remove
    assert os.listdir(tmp_path) == ["a.png"]


def test_temporary_names_differ():
    assert temporary_name("x/y.txt") != temporary_name("x/y.txt")
    assert os.path.basename(temporary_name("y.txt", ".pdf")).startswith(f".y.txt.{os.getpid()}.")
