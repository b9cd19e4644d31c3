"""Period detection (g10fast.alloc.period) on synthetic traces, clean and with noise, and on
the real SINGA traces (skipped when ../shared is absent)."""

from pathlib import Path

import numpy as np
import pytest

from g10fast.alloc.period import detect_period, singa_encoding
from g10fast.alloc.trace import FREE, MALLOC, AllocTrace
from g10fast.errors import InputError

TRACES = Path(__file__).resolve().parents[2] / "shared" / "external" / "singa-traces"


def synthetic(rng, iterations=8, layers=40, resize=0.0, weights=10, one_per_iteration=False):
    """Weights malloc'd once; per iteration a forward pass that mallocs one activation per layer
    (and a short-lived workspace every third layer), a backward pass that frees them in
    reverse. `resize`: the fraction of activation mallocs whose size is redrawn (noise);
    `one_per_iteration`: exactly two per iteration, half an iteration apart, at layers that
    move from one iteration to the next.
    Returns (trace, ops per iteration, op index where iteration 1 starts)."""
    act = rng.integers(1, 1 << 20, layers) * 512
    kinds, blocks, sizes = [], [], []
    nb = 0

    def malloc(s):
        nonlocal nb
        kinds.append(MALLOC)
        blocks.append(nb)
        sizes.append(int(s))
        nb += 1
        return nb - 1

    def free(b):
        kinds.append(FREE)
        blocks.append(b)
        sizes.append(sizes[blocks.index(b)])

    for _ in range(weights):
        malloc(rng.integers(1, 1 << 16) * 512)
    starts = []
    for it in range(iterations):
        starts.append(len(kinds))
        live = []
        for i in range(layers):
            noisy = (
                i in ((7 * it) % layers, (7 * it + layers // 2) % layers)
                if one_per_iteration
                else rng.random() < resize
            )
            s = rng.integers(1, 1 << 20) * 512 if noisy else act[i]
            live.append(malloc(s))
            if i % 3 == 0:
                free(malloc(4096 * (i + 1)))
        for b in reversed(live):
            free(b)
    kinds = np.asarray(kinds, np.int8)
    blocks = np.asarray(blocks, np.int64)
    tr = AllocTrace(
        "synthetic",
        kinds,
        blocks,
        np.asarray(sizes, np.int64),
        np.arange(len(kinds), dtype=np.int64),
        blocks,
        np.zeros(len(kinds), np.int16),
        {},
    )
    return tr, starts[1] - starts[0], starts[1]


@pytest.mark.parametrize("seed", range(3))
def test_both_methods_find_the_period_of_a_clean_trace(seed):
    tr, L, s1 = synthetic(np.random.default_rng(seed))
    for m in ("singa", "match"):
        p = detect_period(tr, m, min_period=20)
        assert p.found and p.length == L, m
    # match: the iteration starts at the load's lowest point (the trace's iteration boundary)
    p = detect_period(tr, "match", min_period=20)
    assert (p.start - s1) % L in (0,)


@pytest.mark.parametrize("seed", range(3))
def test_match_is_robust_to_noise_singa_is_not(seed):
    tr, L, _ = synthetic(np.random.default_rng(10 + seed), iterations=10, resize=0.05)
    p = detect_period(tr, "match", min_period=20, threshold=0.85)
    assert p.found and p.length == L and p.score < 1.0
    # two resized ops in every iteration: no two adjacent iterations are equal, SINGA's exact
    # test finds no iteration-long repeat, the match still does
    tr, L, _ = synthetic(np.random.default_rng(20 + seed), iterations=10, one_per_iteration=True)
    p = detect_period(tr, "match", min_period=20)
    assert p.found and p.length == L and 0.9 < p.score < 1.0
    s = detect_period(tr, "singa")
    assert not (s.found and s.length == L)


def test_no_period_in_random_ops():
    rng = np.random.default_rng(3)
    n = 400
    kinds = np.zeros(n, np.int8)
    blocks = np.arange(n, dtype=np.int64)
    sizes = rng.integers(1, 1 << 30, n)
    tr = AllocTrace("random", kinds, blocks, sizes, np.arange(n), blocks, np.zeros(n, np.int16), {})
    assert not detect_period(tr, "match").found
    assert not detect_period(tr, "singa").found


def test_singa_encoding_and_bad_options():
    # malloc a(100) malloc b(50) free a free b: rep = 100, 50, d-r = 2, 2
    is_free = np.array([False, False, True, True])
    blk = np.array([0, 1, 0, 1])
    assert singa_encoding(is_free, blk, np.array([100, 50])).tolist() == [100, 50, 2, 2]
    # a free whose malloc is outside the window is dropped
    assert singa_encoding(is_free[2:], blk[2:], np.array([100, 50])).tolist() == []
    tr, _, _ = synthetic(np.random.default_rng(0), iterations=2, layers=5)
    with pytest.raises(InputError, match="unknown period method"):
        detect_period(tr, "fft")
    with pytest.raises(InputError, match="threshold"):
        detect_period(tr, threshold=1.5)


@pytest.mark.parametrize(
    "name, L",
    [
        ("memInfo_alex_20itr_100size.text", 188),
        ("vec_run_5_vgg.csv", 1020),
        ("blockInfo_resnet_315.text", 1268),
    ],
)
def test_real_traces(name, L):
    if not (TRACES / name).exists():
        pytest.skip("no ../shared/external/singa-traces")
    from g10fast.alloc.trace import read_trace

    tr = read_trace(TRACES / name)
    for m in ("singa", "match"):
        p = detect_period(tr, m)
        assert p.found and p.length == L
