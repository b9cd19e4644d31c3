"""Empty busy ticks (page.general, "Empty busy ticks"; the bulk engine): a busy tick that
moves no page and changes nothing is followed by the same tick until the kernel event due, so
the ticks before it end in closed form. Runs with them equal the per-page reference engine,
which steps every tick, page state for page state; the closed form must actually happen
(the ticks ended so are counted and asserted)."""

from __future__ import annotations

import numpy as np
import pytest
from synth import assert_same_runs, count_statistic, tiny_cfg

from g10fast.engine.page import kernels as pk
from g10fast.engine.page import simulate_pages
from g10fast.planner import deepum_hints
from g10fast.workload.model import PAGE_SIZE, Graph, build_workload, csr_from_lists


def _chain(seed, K=40):
    """K kernels in a chain, kernel k reading activation k and weight k and writing activation
    k + 1 (40-120 pages each, 2-20 M cycles a kernel): under DeepUM's look-ahead the GPU fills
    with the window's tensors, the scan from the cursor reaches the list's end, and the
    prefetches queued behind find no victim until the kernel ends. Returns the workload and
    the largest working set (pages)."""
    rng = np.random.default_rng(seed)
    T = 2 * K + 1  # activations 0..K, weights K+1..2K
    n = rng.integers(40, 121, size=T)
    ins = [[k, K + 1 + k] for k in range(K)]
    outs = [[k + 1] for k in range(K)]
    in_ptr, in_idx = csr_from_lists(ins)
    out_ptr, out_idx = csr_from_lists(outs)
    graph = Graph(
        name=f"chain{seed}",
        batch_size=1,
        raw_size=(n * PAGE_SIZE).astype(np.int64),
        is_global=np.arange(T) > K,
        kernel_name=[f"K{k}" for k in range(K)],
        kernel_parent=[f"{k}:chain" for k in range(K)],
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        meta={"seed": seed},
    )
    exe = rng.integers(2_000_000, 20_000_000, size=K)
    w = build_workload(graph, exe, 2 * exe, 3 * exe, np.zeros(K, dtype=np.int64))
    return w, int(max(n[k] + n[k + 1] + n[K + 1 + k] for k in range(K)))


@pytest.mark.parametrize("seed", range(4))
def test_empty_busy_ticks_end_in_closed_form(monkeypatch, seed):
    """DeepUM+ on a chain of kernels, the host line at 0, a quarter of the GPU or above the
    footprint: the bulk engine, which ends runs of empty busy ticks in closed form, equals the
    per-page engine (kernels, traffic, transfer periods, memory use, final page states), and
    ends hundreds of thousands of ticks so."""
    w, ker = _chain(seed)
    rng = np.random.default_rng(seed)
    frames = int(ker * rng.uniform(1.05, 2.5)) + 1
    host = (0, frames // 4, 40 * frames)[seed % 3]
    cfg = tiny_cfg(frames, host, "deepUM", num_iteration=3, PCIe_batch_size_page=int(rng.integers(8, 20)))
    hints = deepum_hints(w, 4)
    ref = simulate_pages(w, cfg, hints=hints, bulk=False, keep_state=True)
    ended = [0]
    count_statistic(monkeypatch, pk.S_ES_COUNT, ended)
    assert_same_runs(simulate_pages(w, cfg, hints=hints, bulk=True, keep_state=True), ref)
    assert ended[0] > 100_000, ended


def test_empty_tick_count_before_the_kernel_event():
    """`_es_ticks`: from a tick at t (period ii), the ticks the event loop runs before its
    pending kernel event at kb, less the last: those before kb, and the one at kb when the
    event's sequence number is above that tick's; none without a pending event."""
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_II] = 10
    S[pk.S_TICK_SEQ] = 100
    assert pk._es_ticks(1000, S) == 0  # no kernel event pending
    S[pk.S_KB_PENDING] = 1
    S[pk.S_KB_TIME] = 1095  # ticks at 1000 .. 1090 run (10), the last of them steps
    assert pk._es_ticks(1000, S) == 9
    S[pk.S_KB_TIME] = 1100  # 1000 .. 1090 (10); the one at 1100 comes after the event
    S[pk.S_KB_SEQ] = 50
    assert pk._es_ticks(1000, S) == 9
    S[pk.S_KB_SEQ] = 200  # ... unless the event's sequence number is above it (seq 110)
    assert pk._es_ticks(1000, S) == 10
    S[pk.S_KB_TIME] = 1000
    assert pk._es_ticks(1000, S) == 0
