"""Where g10fast's package data lives: `data_dir()`, the data/ folder (models, hardware
presets, cost-model fits, sweep matrices). A leaf module, so that every stage that reads a
data file (hardware presets, the workload's model files and cost model, the sweep matrices)
may import it."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """The data/ folder: $G10FAST_DATA, else the repository's data/ (a checkout or an editable
    install), else the copy a wheel carries as the package g10fast._data (pyproject.toml
    maps data/ onto it)."""
    env = os.environ.get("G10FAST_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    repo = here.parent / "data"
    if (repo / "models").is_dir():
        return repo
    return here / "_data"
