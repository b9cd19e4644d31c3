"""PUMP's validate rows (g10fast/validate/claims_pump.py), quick settings: values measured
at the commit that added them; ranges a wrong launch model or coverage would leave."""

import pytest

import g10fast.validate as val
from g10fast.validate import claims_pump as cp


def _row(cid):
    return val.evaluate(next(c for c in cp.CLAIMS if c.id == cid), quick=True)


def test_defaults_row_misses_with_the_measured_value():
    row = _row("pump.speedup-vs-uvm")
    # measured 1.09 (bert-base 32: 1.03, 1.01; inceptionv3 128: 1.32, 1.03)
    assert row.verdict == val.MISSES
    assert 1.05 <= row.value <= 1.14
    per = dict(p.rsplit(" ", 1) for p in row.detail.split("; "))
    assert 1.25 <= float(per["inceptionv3 128 1.5x"]) <= 1.40     # cuDNN blocks prefetched
    assert 0.98 <= float(per["bert-base 32 1.5x"]) <= 1.08        # a quarter of GEMM operands


def test_launch_model_is_what_lets_pump_gain():
    """With the old unbounded run-ahead (no loss.item() sync, no launch queue) the prefetch
    stream runs a whole window ahead and thrashes: no gain on the CNN point."""
    t_uvm = cp._time("inceptionv3", 128, 1.5, "uvm", (), ())
    t_new = cp._time("inceptionv3", 128, 1.5, "pump", (), ())
    t_old = cp._time("inceptionv3", 128, 1.5, "pump",
                     (("launch_queue_depth", 0), ("sync", "none")), ())
    assert t_uvm / t_new > 1.25
    assert t_uvm / t_old < t_uvm / t_new - 0.1


def test_full_coverage_bulk_rate_row():
    row = _row("pump.speedup-full-coverage-bulk-rate")
    # measured 1.15 (bert-base 32: 1.39, 1.05; inceptionv3 128: 1.16, 1.01)
    assert row.verdict == val.MISSES
    assert 1.08 <= row.value <= 1.22


@pytest.mark.parametrize("cid", [c.id for c in cp.CLAIMS])
def test_rows_are_complete(cid):
    c = next(c for c in cp.CLAIMS if c.id == cid)
    assert c.band == (1.5, 3.0) and c.quick and c.why and c.quick_setting
