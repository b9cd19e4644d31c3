"""The wheel carries every g10fast package and data/ (as g10fast._data)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_package_and_maps_data():
    d = tomllib.loads((ROOT / "pyproject.toml").read_text())
    st = d["tool"]["setuptools"]
    found = sorted(
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "g10fast").rglob("__init__.py")
    )
    assert sorted(x for x in st["packages"] if x != "g10fast._data") == found
    assert st["package-dir"]["g10fast._data"] == "data"
    globs = st["package-data"]["g10fast._data"]
    exts = {p.suffix for p in (ROOT / "data").rglob("*") if p.is_file()}
    assert all(any(g.endswith(e) for g in globs) for e in exts), exts
    # data/ holds only one level of folders (the globs are */*.ext)
    assert all(
        len(p.relative_to(ROOT / "data").parts) == 2 for p in (ROOT / "data").rglob("*") if p.is_file()
    )


def test_data_dir_in_checkout(monkeypatch):
    from g10fast.datadir import data_dir

    monkeypatch.delenv("G10FAST_DATA", raising=False)
    assert data_dir() == ROOT / "data"
    monkeypatch.setenv("G10FAST_DATA", "/somewhere")
    assert data_dir() == Path("/somewhere")
