"""Helpers shared by the benchmark scripts (not a benchmark)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit(tree: Path | str = ROOT) -> str:
    """The short hash of a tree's checked-out commit (this checkout by default), recorded with
    every benchmark result; "+dirty" after it when the tree's tracked files differ from that
    commit (a measurement of sources not committed then; the records in benchmarks/results,
    which the benchmarks append to, do not count)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (subprocess.CalledProcessError, OSError):
        return "?"
    try:
        clean = subprocess.run(
            ["git", "-C", str(tree), "diff", "--quiet", "HEAD", "--", ".", ":(exclude)benchmarks/results"],
            capture_output=True,
        )
    except OSError:
        return head
    return head if clean.returncode == 0 else head + "+dirty"


def append_record(path: Path, rec: dict) -> None:
    """Append one JSON line to a results file (benchmarks/results/...) and show it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec, indent=1))


def save_figure(fig, path) -> None:
    """Lay out a matplotlib figure, write it whole to `path` (a PNG, written atomically: a
    reader never sees half a file) and close it."""
    import matplotlib.pyplot as plt

    from g10fast.atomic import atomic_path

    fig.tight_layout()
    with atomic_path(path, ".png") as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def figure_args(doc: str, out: Path | str, quick_help: str, argv=None):
    """The command line of a benchmark that writes one figure: `--out` (the figure's path,
    `out` by default) and `--quick` (a smoke run); the description is the first paragraph of
    the script's docstring."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", default=str(out))
    ap.add_argument("--quick", action="store_true", help=quick_help)
    return ap.parse_args(argv)
