"""The SINGA and AppObMem rows of `g10fast validate` (g10fast/validate/claims_singa.py,
claims_appobmem.py): their verdicts and values on the authors' traces (skipped without
../shared/external/singa-traces)."""

from pathlib import Path

import pytest

from g10fast.validate import AGREES, MISSES, UNAVAILABLE, evaluate
from g10fast.validate.claims_appobmem import CLAIMS as APPOB
from g10fast.validate.claims_singa import CLAIMS

TRACES = Path(__file__).resolve().parents[2] / "shared" / "external" / "singa-traces"
ROWS = {c.id: c for c in CLAIMS}


def _row(cid):
    if not TRACES.is_dir():
        pytest.skip("no ../shared/external/singa-traces")
    r = evaluate(ROWS[cid], quick=True)
    assert r.claim.quick
    return r


def test_pool_against_cnmem_as_singa_configures_it():
    r = _row("singa-pool.less-than-cnmem")
    # AlexNet: SmartMemPool reports 179.2 MiB against cnmem's 256 MiB reservation
    assert r.verdict == MISSES
    assert r.value == pytest.approx(30.0, abs=0.1)
    assert "largest: alex" in r.detail
    assert "vgg: pool 673.7 MiB (GetMemUsage; peak reserved 730.9)" in r.detail


def test_swap_zero_overhead_saving_on_the_authors_clock():
    r = _row("singa-swap.zero-overhead-saving")
    assert r.verdict == MISSES
    # AOA (and pri) reach zero overhead at 510 MiB of a 647.7 MiB peak
    assert r.value == pytest.approx(100 * (1 - 510 / 647.73), abs=0.3)
    for name in ("vote", "doa_origin", "pri", "doa", "aoa", "wdoa", "subwdoa"):
        assert f"{name} " in r.detail


def test_swap_overhead_curve_against_the_authors():
    r = _row("singa-swap.overhead-at-280mib")
    assert r.verdict == MISSES
    # on the evenly spread clock the SubWDOA plan at 280 MiB waits 1.7 iterations
    assert 150 < r.value < 190
    z = _row("singa-swap.zero-overhead-limit")
    assert z.verdict == MISSES and z.value == 550.0


def test_appobmem_row_says_what_it_needs():
    (c,) = APPOB
    r = evaluate(c, quick=True)
    assert r.verdict == UNAVAILABLE and "needs the paper" in r.detail


def test_real_clock_rows():
    """On the authors' real-clock recording when ../shared holds it; else 'unavailable',
    naming the file."""
    if not TRACES.is_dir():
        pytest.skip("no ../shared/external/singa-traces")
    rows = {cid: evaluate(ROWS[cid], quick=True) for cid in ROWS if ".real-clock." in cid}
    assert len(rows) == 4
    if not (TRACES / "vec_block_fresh_vgg.csv").exists():
        for r in rows.values():
            assert r.verdict == UNAVAILABLE and "vec_block_fresh_vgg.csv" in r.detail
        return
    # the authors' offline analysis, slips included, gives their published points
    off = rows.pop("singa-swap.real-clock.offline-analysis")
    assert off.verdict == AGREES and off.value < 0.001
    assert "aoa 280 MiB 13.935 ms" in off.detail
    assert all(r.verdict == MISSES for r in rows.values())
    assert rows["singa-swap.real-clock.zero-overhead-saving"].value == pytest.approx(23.2, abs=0.2)
    assert rows["singa-swap.real-clock.overhead-at-280mib"].value == pytest.approx(93.5, abs=1)
    assert rows["singa-swap.real-clock.zero-overhead-limit"].value == 550.0
