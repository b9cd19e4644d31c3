"""Helpers shared by the benchmark scripts (not a benchmark)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str:
    """The short hash of the checked-out commit, recorded with every benchmark result."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True).stdout.strip()
    except OSError:
        return "?"
