"""PUMP's validate rows (g10fast/validate/claims_pump.py), quick settings: values measured
at the commit that added them (g10-artifact preset's driver values: 78.4 us per batch, 40 %
of the link); ranges a wrong launch model, coverage or allocator regime would leave."""

import pytest

import g10fast.validate as val
from g10fast.validate import claims_pump as cp


def _row(cid):
    return val.evaluate(next(c for c in cp.CLAIMS if c.id == cid), quick=True)


def _points(row):
    return {k: float(v) for k, v in (p.rsplit(" ", 1) for p in row.detail.split("; "))}


def test_defaults_row():
    row = _row("pump.speedup-vs-uvm")
    # measured 1.214 (bert-base 32: 1.04, 1.01; inceptionv3 128: 1.49, 1.39)
    assert row.verdict == val.MISSES
    assert 1.15 <= row.value <= 1.28
    per = _points(row)
    assert 1.40 <= per["inceptionv3 128 1.5x"] <= 1.58  # cuDNN blocks prefetched
    assert 0.98 <= per["bert-base 32 1.5x"] <= 1.10  # a quarter of GEMM operands


def test_launch_model_is_what_lets_pump_gain():
    """With the old unbounded run-ahead (no loss.item() sync, no launch queue) the prefetch
    stream runs a whole window ahead and thrashes: much less gain on the CNN point."""
    t_uvm = cp._time("inceptionv3", 128, 1.5, "uvm", (), cp.CACHING)
    t_new = cp._time("inceptionv3", 128, 1.5, "pump", (), cp.CACHING)
    t_old = cp._time(
        "inceptionv3", 128, 1.5, "pump", (("launch_queue_depth", 0), ("sync", "none")), cp.CACHING
    )
    assert t_uvm / t_new > 1.4
    assert t_uvm / t_old < t_uvm / t_new - 0.1


def test_full_coverage_bulk_rate_row():
    row = _row("pump.speedup-full-coverage-bulk-rate")
    # measured 1.157 (bert-base 32: 1.43, 1.05; inceptionv3 128: 1.18, 1.02)
    assert row.verdict == val.MISSES
    assert 1.10 <= row.value <= 1.22
    assert 1.35 <= _points(row)["bert-base 32 1.5x"] <= 1.50


def test_fresh_allocations_beyond_live_set_row():
    row = _row("pump.speedup-fresh-allocations-beyond-live-set")
    # measured 1.663 (bert-base 256 at its live set / 1.5 and / 3: 1.76, 1.57)
    assert row.verdict == val.AGREES
    assert 1.55 <= row.value <= 1.80
    per = _points(row)
    assert per["bert-base 256 1.5x"] > per["bert-base 256 3x"]


def test_peak_live_bytes_hand_worked():
    """Weights held throughout, others from first to last use: a plain walk over kernels."""
    import numpy as np

    w = cp._workload("bert-base", 32)
    K = w.num_kernels
    live = np.zeros(K, np.int64)
    for t in range(w.num_tensors):
        ks = [k for k in range(K) if t in w.inputs(k).tolist() or t in w.outputs(k).tolist()]
        if not ks:
            continue
        lo, hi = (0, K - 1) if w.is_global[t] else (min(ks), max(ks))
        live[lo : hi + 1] += int(w.n_pages[t]) * 4096
    assert cp.peak_live_bytes(w) == int(live.max())
    assert cp.peak_live_bytes(w) < 0.5 * w.footprint_bytes


def test_fresh_allocations_fit_at_these_ratios():
    """Why the fresh-allocation row is not 'beyond GPU memory': with every tensor freed after
    its last use naive UM migrates nothing at footprint / 1.5, while the caching allocator's
    arena (every tensor its own pages) moves about the whole footprint."""
    from g10fast.hardware import load_preset
    from g10fast.run import run
    from g10fast.spec import builtin_spec
    from g10fast.system import System

    w = cp._workload("bert-base", 32)
    system = System.from_preset(load_preset(cp.PRESET)).replace(gpu_memory_gb=w.footprint_bytes / 1.5 / 2**30)
    pages_in = {}
    for name, compat in (("fresh", cp.FRESH), ("caching", cp.CACHING)):
        r = run(builtin_spec("bert-base", 32, system, "uvm", engine={"compat": dict(compat)}), workload=w)
        pages_in[name] = r["iterations"][r["reported"]]["pages"]["incoming"]
    assert pages_in["fresh"] == 0
    assert pages_in["caching"] > 0.9 * w.num_pages


@pytest.mark.parametrize("cid", [c.id for c in cp.CLAIMS])
def test_rows_are_complete(cid):
    c = next(c for c in cp.CLAIMS if c.id == cid)
    assert c.band == (1.5, 3.0) and c.quick and c.why and c.quick_setting
