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
    assert sorted(x for x in st["packages"] if not x.startswith("g10fast._data")) == found
    assert st["package-dir"]["g10fast._data"] == "data"
    # every folder of data/ is a package of g10fast._data whose globs cover each of its files
    folders = sorted(p.name for p in (ROOT / "data").iterdir() if p.is_dir())
    assert sorted(x for x in st["packages"] if x.startswith("g10fast._data.")) == [
        f"g10fast._data.{f}" for f in folders
    ]
    for f in folders:
        globs = st["package-data"][f"g10fast._data.{f}"]
        for p in (ROOT / "data" / f).iterdir():
            assert p.is_dir() or any(p.match(g) for g in globs), p
    # data/ holds only one level of folders
    assert all(
        len(p.relative_to(ROOT / "data").parts) == 2 for p in (ROOT / "data").rglob("*") if p.is_file()
    )


def test_data_dir_in_checkout(monkeypatch):
    from g10fast.datadir import data_dir

    monkeypatch.delenv("G10FAST_DATA", raising=False)
    assert data_dir() == ROOT / "data"
    monkeypatch.setenv("G10FAST_DATA", "/somewhere")
    assert data_dir() == Path("/somewhere")
