"""Busy ticks replayed (page.replay, "A busy tick replayed"; the bulk engine under the LRU
policies, traced or not): runs with the replay equal runs without it (every busy tick stage by
stage) and, on some, the per-page reference engine, on random workloads made to repeat
ticks (large tensors, small per-tick caps, a host line at zero, low, or above the footprint,
prefetch, pre-eviction and pre-allocation hints). The replay must actually happen in these
runs: the number of replayed ticks is counted and asserted."""

from __future__ import annotations

import numpy as np
import pytest
from synth import Collector, count_statistic, kernel_pages, make_workload, random_hints, tiny_cfg
from synth import assert_same_runs as _same

from g10fast.engine import page as page_mod
from g10fast.engine.page import kernels as pk
from g10fast.engine.page import simulate_pages
from g10fast.trace_ranges import normal_form


def _case(seed):
    rng = np.random.default_rng(7000 + seed)
    w = make_workload(
        seed + 300,
        n_kernels=int(rng.integers(6, 14)),
        n_tensors=int(rng.integers(8, 20)),
        max_pages=int(rng.integers(60, 240)),
    )
    frames = int(kernel_pages(w).max() * rng.uniform(1.0, 1.5)) + 1
    footprint = int(w.num_pages)
    host = int(rng.choice([0, frames // 4, frames, 4 * footprint]))
    policy = "prefetch_lru" if seed % 2 else "lru"
    cfg = tiny_cfg(
        frames,
        host,
        policy,
        num_iteration=3,
        PCIe_batch_size_page=int(rng.integers(8, 20)),
        SSD_PCIe_bandwidth_GBps=float(rng.choice([3.2, 6.4, 15.754])),
        GPU_malloc_uspB=8.14e-7 * float(rng.choice([1, 20, 200])),
    )
    hints = random_hints(w, seed, n_hints=int(rng.integers(20, 60))) if seed % 2 else None
    return w, cfg, hints


def _run(monkeypatch, w, cfg, hints, replay, counter=None, **kw):
    monkeypatch.setattr(page_mod, "REPLAY_DEFAULT", replay)
    engine = count_statistic(monkeypatch, pk.S_RP_COUNT, counter) if counter is not None else pk.run_engine
    try:
        return simulate_pages(w, cfg, hints=hints, bulk=True, **kw)
    finally:
        monkeypatch.setattr(pk, "run_engine", engine)


def test_replayed_ticks_change_nothing(monkeypatch):
    """40 random runs: with the replay, without it, and (every fourth) the per-page reference
    under check=True give the same kernels, traffic, transfer periods, memory use and final
    page states; together they replay thousands of ticks, in both policies (Base UVM's fewer
    since its ticks at their caps go on in place past later stages that admit nothing:
    about 700 of them, against about 5,000 under G10)."""
    replayed = {"lru": 0, "prefetch_lru": 0}
    for seed in range(40):
        w, cfg, hints = _case(seed)
        policy = "prefetch_lru" if cfg.use_prefetch else "lru"
        count = [0]
        try:
            fast = _run(monkeypatch, w, cfg, hints, True, count, keep_state=True)
        except Exception as e:  # an engine error must be the reference's too
            with pytest.raises(type(e)):
                _run(monkeypatch, w, cfg, hints, False, keep_state=True)
            continue
        replayed[policy] += count[0]
        _same(fast, _run(monkeypatch, w, cfg, hints, False, keep_state=True))
        if seed % 4 == 0:
            _same(fast, simulate_pages(w, cfg, hints=hints, bulk=False, keep_state=True))
            checked = _run(monkeypatch, w, cfg, hints, True, check=True, keep_state=True)
            _same(fast, checked)
    assert replayed["lru"] > 500 and replayed["prefetch_lru"] > 2000, replayed


def test_traced_runs_replay_with_the_same_events(monkeypatch):
    """A traced run replays ticks too (its pages written as rows of runs and ticks, trace
    schema 2): its events are, page for page, those of the same run without the replay and of
    the per-page engine, which replays nothing (it is the reference)."""
    replayed = 0
    for seed in (1, 2, 5, 6):
        w, cfg, hints = _case(seed)
        count = [0]
        sinks = [Collector(), Collector(), Collector()]
        a = _run(monkeypatch, w, cfg, hints, True, count, trace=sinks[0], keep_state=True)
        replayed += count[0]
        b = _run(monkeypatch, w, cfg, hints, False, trace=sinks[1], keep_state=True)
        per = [0]
        engine = count_statistic(monkeypatch, pk.S_RP_COUNT, per)
        c = simulate_pages(w, cfg, hints=hints, bulk=False, trace=sinks[2], keep_state=True)
        monkeypatch.setattr(pk, "run_engine", engine)
        assert per[0] == 0
        _same(a, b)
        assert np.array_equal(a.kernels, c.kernels) and np.array_equal(a.pcie, c.pcie)
        assert np.array_equal(a.pstate & 15, c.pstate & 15)  # (the LRU generation bits are the engine's)
        ref = normal_form(sinks[2].events)
        for s in sinks[:2]:
            assert np.array_equal(normal_form(s.events), ref), seed
    assert replayed > 500, replayed
