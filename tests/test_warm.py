"""`g10fast warm` (g10fast/warm.py): the policies' kernels compiled into Numba's cache."""

from __future__ import annotations

import json
from pathlib import Path

from g10fast.warm import warm


def test_warm_writes_the_page_engine_to_the_cache(capsys):
    """A display name resolves to its policy, a name given twice runs once, and the page
    engine's kernel is in the on-disk cache afterwards (its index file exists: compiled and
    saved, or loaded from it); the CLI prints the same rows as JSON."""
    from g10fast.cli import main
    from g10fast.engine.page import loop

    rows = warm(["Base UVM", "lru"])
    assert [(r["policy"], r["engine"]) for r in rows] == [("lru", "page")]
    assert rows[0]["cpu_s"] >= 0 and "error" not in rows[0]
    index = Path(loop.run_engine._cache._cache_file._index_path)
    assert index.is_file() and index.stat().st_size > 0

    assert main(["warm", "lru", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["policy"], r["engine"]) for r in out] == [("lru", "page")]


def test_warm_reports_a_policy_the_system_cannot_run(capsys):
    """The ranks engine needs a preset with a [node] table: without --system it warms on the
    preset its engine's record names (`warm_system`); on a system given that cannot run it
    the row says why (and nothing is raised); an unknown policy or preset exits 2 before any
    run."""
    from g10fast.cli import main
    from g10fast.engine.registry import engine

    (row,) = warm(["zero2"])
    assert row["policy"] == "zero2" and "error" not in row and row["cpu_s"] >= 0
    assert row["system"] == engine("ranks").warm_system == "dgx-a100-40"
    (row,) = warm(["zero2"], system="g10-artifact")
    assert row["policy"] == "zero2" and "[node]" in row["error"] and "cpu_s" not in row
    assert main(["warm", "no-such-policy"]) == 2
    err = capsys.readouterr()
    assert "unknown policy 'no-such-policy'" in err.err and "policy" not in err.out
    assert main(["warm", "--system", "no-such-preset", "lru"]) == 2
    assert "unknown hardware preset 'no-such-preset'" in capsys.readouterr().err
