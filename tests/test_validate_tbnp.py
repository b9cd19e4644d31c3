"""TBNp's validate rows (g10fast/validate/claims_tbnp.py), quick setting (bert-base 32 at
1.5x and 3x): values measured at the commit that added them."""

import g10fast.validate as val
from g10fast.validate import claims_tbnp as ct


def _row(cid):
    return val.evaluate(next(c for c in ct.CLAIMS if c.id == cid), quick=True)


def test_pre_eviction_vs_lru4k():
    row = _row("tbnp.pre-evict-vs-lru4k")
    # measured +91.7 % (+86 %, +97 %)
    assert row.verdict == val.AGREES
    assert 85.0 <= row.value <= 98.0


def test_pre_eviction_vs_lru2m():
    row = _row("tbnp.pre-evict-vs-lru2m")
    # measured +18.9 % (+17 %, +21 %)
    assert row.verdict == val.AGREES
    assert 15.0 <= row.value <= 23.0


def test_pre_eviction_is_the_gain():
    """The mechanism the rows rest on: the prefetcher alone (LRU-2M) gains nothing over
    itself, the pre-eviction is the gain; LRU-4K is the slowest of the three."""
    t = {v: ct._time("bert-base", 32, 1.5, v) for v in ct.VARIANTS}
    assert t["pre_evict"] < t["lru2m"] < t["lru4k"]
