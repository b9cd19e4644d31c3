"""Freed page states given back to the operating system (page.release, `_release_free`;
`page.RELEASE_DEFAULT`, Linux): the kernel releases exactly the memory pages lying wholly
within the range whose states are all zero, leaves every value as it was, and the memory is
really given back (and `_populate` maps it again at once); runs with the release equal runs
without it."""

from __future__ import annotations

import mmap
import sys

import numpy as np
import pytest
from numba import njit
from synth import assert_same_runs
from synth import kernel_pages, make_workload, random_hints, tiny_cfg

from g10fast.engine import page as page_mod
from g10fast.engine.page import kernels as pk
from g10fast.engine.page import simulate_pages
from g10fast.jit import NO_JIT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="madvise(MADV_DONTNEED) semantics are Linux's"
)
PS = mmap.PAGESIZE

if NO_JIT:

    def _call(pstate, p0, n, S):
        pk._release_free(pstate, p0, n, S)

    def _call_populate(pstate, p0, n, S):
        pk._populate(pstate, p0, n, S)

    def _call_dropped(pstate, lo, hi, S):
        pk._release_dropped(pstate, lo, hi, S)

    def _call_drop(pstate, lo, hi, S):
        pk._drop_release(pstate, lo, hi, S)

    def _call_flush(pstate, S):
        pk._drop_flush(pstate, S)
else:

    @njit
    def _call(pstate, p0, n, S):  # (the kernels have no CPython wrapper)
        pk._release_free(pstate, p0, n, S)

    @njit
    def _call_populate(pstate, p0, n, S):
        pk._populate(pstate, p0, n, S)

    @njit
    def _call_dropped(pstate, lo, hi, S):
        pk._release_dropped(pstate, lo, hi, S)

    @njit
    def _call_drop(pstate, lo, hi, S):
        pk._drop_release(pstate, lo, hi, S)

    @njit
    def _call_flush(pstate, S):
        pk._drop_flush(pstate, S)


def _twin(pstate, base, p0, n):
    """The bytes `_release_free` must give back, for states `pstate` at address `base`: the
    memory pages wholly inside [p0, p0 + n) when every state in them is zero."""
    a = -(-(base + p0) // PS) * PS
    b = (base + p0 + n) // PS * PS
    if b <= a or pstate[a - base : b - base].any():
        return 0
    return b - a


def _twin_dropped(pstate, base, lo, hi):
    """The bytes `_release_dropped` must give back after pages lo .. hi - 1 were dropped: the
    memory pages overlapping [lo, hi) that lie wholly within the states and hold zeros only."""
    end = base + len(pstate)
    a = (base + lo) // PS * PS
    got = 0
    while a < base + hi:
        if a >= base and a + PS <= end and not pstate[a - base : a + PS - base].any():
            got += PS
        a += PS
    return got


def _released(call, twin, pstate, a, b, what):
    """Kernel `call` on states `pstate` and the range (a, b): the bytes it says it released
    equal the twin's, and no state changes. Returns them."""
    before = pstate.copy()
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_RELEASE] = PS
    call(pstate, a, b, S)
    assert S[pk.S_RELEASED] == twin(before, pstate.ctypes.data, a, b), what
    assert np.array_equal(pstate, before)
    return int(S[pk.S_RELEASED])


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PS


def test_release_twin_random_ranges():
    """400 random ranges over random states (zeros with a few set bytes, sometimes none):
    the bytes released equal the twin's, and no state changes."""
    rng = np.random.default_rng(11)
    pstate = np.zeros(64 * PS + 123, dtype=np.uint8)
    released = 0
    for i in range(400):
        pstate[:] = 0
        for _ in range(int(rng.integers(0, 4))):
            pstate[int(rng.integers(0, len(pstate)))] = int(rng.integers(1, 256))
        p0 = int(rng.integers(0, len(pstate)))
        n = int(rng.integers(0, len(pstate) - p0 + 1))
        released += _released(_call, _twin, pstate, p0, n, (i, p0, n))
    assert released > 0


def test_release_dropped_twin_random_ranges():
    """400 random dropped ranges over states that are zero but for a few set bytes (sometimes
    none, sometimes one in the range's first or last memory page): the bytes released equal
    the twin's, and no state changes."""
    rng = np.random.default_rng(12)
    pstate = np.zeros(32 * PS + 77, dtype=np.uint8)
    released = 0
    for i in range(400):
        pstate[:] = 0
        lo = int(rng.integers(0, len(pstate)))
        hi = int(rng.integers(lo, min(lo + 6 * PS, len(pstate)) + 1))
        for _ in range(int(rng.integers(0, 4))):
            near = int(rng.choice([lo - 1, hi, int(rng.integers(0, len(pstate)))]))
            if 0 <= near < len(pstate):
                pstate[near] = int(rng.integers(1, 256))
        released += _released(_call_dropped, _twin_dropped, pstate, lo, hi, (i, lo, hi))
    assert released > 0


class _DropTwin:
    """Plain-Python twin of `_drop_release` / `_drop_flush`: N_DROP pending runs of dropped
    pages; the runs it gives back (to `_release_dropped`) in order."""

    def __init__(self, span_pages):
        self.runs = [(0, 0)] * pk.N_DROP
        self.next = 0
        self.span = span_pages * PS
        self.given = []

    def drop(self, lo, hi):
        for j, (plo, phi) in enumerate(self.runs):
            if phi > plo and phi <= lo < phi + PS:
                if hi - plo <= self.span:
                    self.runs[j] = (plo, hi)
                else:
                    self.given.append((plo, phi))
                    self.runs[j] = (lo, hi)
                return
        j = self.next
        self.next = (j + 1) % pk.N_DROP
        if self.runs[j][1] > self.runs[j][0]:
            self.given.append(self.runs[j])
        self.runs[j] = (lo, hi)

    def flush(self):
        self.given += [r for r in self.runs if r[1] > r[0]]
        self.runs = [(0, 0)] * pk.N_DROP


def test_drop_release_twin():
    """Drops as DeepUM makes them (ascending runs of a few pages, of one to three tensors in
    turn, sometimes a page skipped, sometimes a jump), with kernel starts between them: the
    pending runs after every call, and the bytes given back, equal the twin's; every state
    reads as written; and the runs given back are far fewer than the drops."""
    rng = np.random.default_rng(13)
    n_pages = 96 * PS
    total = 0
    for case in range(6):
        # (states starting at a memory page: which memory pages the drops empty must not
        # depend on where the allocator put the array)
        raw = np.full(n_pages + PS, pk.IN_GPU, dtype=np.uint8)
        off = -raw.ctypes.data % PS
        pstate = raw[off : off + n_pages]
        mirror = pstate.copy()
        base = pstate.ctypes.data
        S = np.zeros(pk.NS, dtype=np.int64)
        S[pk.P_RELEASE] = PS
        twin = _DropTwin(pk._DROP_SPAN_PAGES)
        want = 0
        n_given = 0
        n_drops = 0
        n_streams = int(rng.integers(1, 4))
        pos = [int(rng.integers(0, n_pages // 2)) for _ in range(n_streams)]
        for step in range(3000):
            s = int(rng.integers(0, n_streams))
            if rng.random() < 0.01:
                pos[s] = int(rng.integers(0, n_pages - 64))  # a jump (another tensor)
            lo = pos[s] + (1 if rng.random() < 0.003 else 0)  # sometimes a page skipped
            hi = min(lo + int(rng.integers(1, 60)), n_pages)
            if lo >= hi:
                continue
            pstate[lo:hi] = 0
            mirror[lo:hi] = 0
            _call_drop(pstate, lo, hi, S)
            twin.drop(lo, hi)
            n_drops += 1
            pos[s] = hi
            if rng.random() < 0.002:  # a kernel's start
                _call_flush(pstate, S)
                twin.flush()
            got = [(int(S[pk.S_DROP + 2 * j]), int(S[pk.S_DROP + 2 * j + 1])) for j in range(pk.N_DROP)]
            assert got == twin.runs, (case, step)
            for a, b in twin.given:
                want += _twin_dropped(pstate, base, a, b)
            n_given += len(twin.given)
            twin.given = []
            assert S[pk.S_RELEASED] == want, (case, step)
        _call_flush(pstate, S)
        twin.flush()
        for a, b in twin.given:
            want += _twin_dropped(pstate, base, a, b)
        n_given += len(twin.given)
        assert S[pk.S_RELEASED] == want
        assert np.array_equal(pstate, mirror)
        assert 10 * n_given < n_drops, (case, n_given, n_drops)
        total += want
    assert total > 0


def test_release_gives_memory_back():
    """64 MiB of states written and then zeroed: the release brings the resident set down
    by most of it, and the states still read zero."""
    pstate = np.zeros(64 << 20, dtype=np.uint8)
    pstate[::PS] = 1
    pstate[::PS] = 0
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_RELEASE] = PS
    before = _rss_bytes()
    _call(pstate, 0, len(pstate), S)
    assert S[pk.S_RELEASED] >= (64 << 20) - 2 * PS
    assert before - _rss_bytes() > (48 << 20)
    assert not pstate.any()
    # mapped again for writing at once, still zero
    low = _rss_bytes()
    _call_populate(pstate, 0, len(pstate), S)
    assert _rss_bytes() - low > (48 << 20)
    assert not pstate.any()


def _big_case(seed):
    """Tensors of up to 5 memory pages of states each, pre-deallocated by the hints."""
    rng = np.random.default_rng(900 + seed)
    w = make_workload(seed + 40, n_kernels=8, n_tensors=10, max_pages=5 * PS)
    frames = int(kernel_pages(w).max() * rng.uniform(1.0, 1.4)) + 1
    cfg = tiny_cfg(
        frames,
        int(rng.choice([0, frames, 8 * int(w.num_pages)])),
        "prefetch_lru",
        num_iteration=3,
        PCIe_batch_size_page=int(rng.integers(500, 4000)),
    )
    return w, cfg, random_hints(w, seed, n_hints=40)


def _run(monkeypatch, w, cfg, hints, release, released=None):
    monkeypatch.setattr(page_mod, "RELEASE_DEFAULT", release)
    engine = pk.run_engine

    def counting(*a):
        status = engine(*a)
        if released is not None:
            released[0] += int(a[8][pk.S_RELEASED])
            a[8][pk.S_RELEASED] = 0
        return status

    monkeypatch.setattr(pk, "run_engine", counting)
    try:
        return simulate_pages(w, cfg, hints=hints, keep_state=True)
    finally:
        monkeypatch.setattr(pk, "run_engine", engine)


def _deepum_case(seed):
    """DeepUM without pre-evictions (the extent list) over tensors of up to 4 memory pages of
    states each, on GPUs near the largest kernel: dead tensors' pages are dropped, and only their
    release gives memory back (no pre-deallocation)."""
    rng = np.random.default_rng(700 + seed)
    w = make_workload(seed + 60, n_kernels=10, n_tensors=12, max_pages=4 * PS)
    frames = int(kernel_pages(w).max() * rng.uniform(1.0, 1.3)) + 1
    cfg = tiny_cfg(
        frames,
        int(rng.choice([0, frames, 8 * int(w.num_pages)])),
        "deepUM",
        num_iteration=3,
        PCIe_batch_size_page=int(rng.integers(500, 4000)),
        prefetch_degree=int(rng.integers(0, 3)),
    )
    hints = [
        h for h in random_hints(w, seed, n_hints=30) if h[3] not in (pk.IN_SSD, pk.IN_CPU, pk.NOT_PRESENT)
    ]  # (DeepUM's own: prefetches)
    return w, cfg, hints


@pytest.mark.parametrize("make_case", [_big_case, _deepum_case], ids=["g10-predeallocations", "deepum-drops"])
def test_release_changes_nothing(monkeypatch, make_case):
    """Six random runs of each kind (G10 with pre-deallocations, `_release_free`; DeepUM
    dropping dead tensors' pages with no pre-deallocation, `_release_dropped`): with the
    release and without it the same kernels, traffic, memory use and final page states;
    memory is released in them."""
    total = 0
    for seed in range(6):
        w, cfg, hints = make_case(seed)
        got = [0]
        a = _run(monkeypatch, w, cfg, hints, True, got)
        b = _run(monkeypatch, w, cfg, hints, False)
        assert np.array_equal(a.kernels, b.kernels)
        assert np.array_equal(a.pcie, b.pcie)
        assert np.array_equal(a.boundaries, b.boundaries)
        assert (a.gpu_used, a.host_used, a.host_peak) == (b.gpu_used, b.host_used, b.host_peak)
        assert np.array_equal(a.pstate, b.pstate)
        total += got[0]
    assert total > 0


@pytest.fixture
def kept():
    """The page engine keeping its states from run to run in this process (a sweep worker's
    way: `keep_buffers`), given back after the test."""
    page_mod.keep_buffers(True)
    try:
        yield page_mod.STATES
    finally:
        page_mod.keep_buffers(False)


def _same(a, b):
    assert_same_runs(a, b, pstate=False, extra=True)


def test_kept_states_change_nothing(monkeypatch, kept):
    """Twelve runs in a row, G10 with pre-deallocations and DeepUM with drops, of workloads
    of different sizes, on one kept buffer: each run equals the same run on fresh states (its
    final page states too); the
    buffer holds the earlier runs' states when the next one takes it (so its zeroing is what
    makes them equal), and nothing is given back during a kept run."""
    cases = [make(seed) for seed in range(6) for make in (_big_case, _deepum_case)]
    fresh = []
    page_mod.keep_buffers(False)
    for w, cfg, hints in cases:
        fresh.append(simulate_pages(w, cfg, hints=hints, keep_state=True))
    page_mod.keep_buffers(True)
    stale = 0
    for (w, cfg, hints), ref in zip(cases, fresh):
        if kept.nbytes:
            stale += bool(kept._buf[: int(w.num_pages)].any())
        runs = kept.runs
        got = [0]
        assert_same_runs(_run(monkeypatch, w, cfg, hints, True, got), ref, extra=True)
        assert kept.runs == runs + 1  # (the run took the kept buffer)
        assert got[0] == 0
    assert stale >= 6
    assert kept.nbytes >= max(int(w.num_pages) for w, _, _ in cases)


def test_kept_states_held_or_kept_state(kept):
    """A run while another holds the buffer maps its own states, with the same result; a run
    that returns its states (keep_state) returns a copy, never the kept buffer; the buffer
    is free again once its holder is gone, and `keep_buffers(False)` gives it back."""
    w, cfg, hints = _big_case(1)
    ref = simulate_pages(w, cfg, hints=hints)
    held = kept.take(int(w.num_pages))
    assert held is not None and not held.any()
    runs = kept.runs
    _same(simulate_pages(w, cfg, hints=hints), ref)
    assert kept.runs == runs
    del held
    r = simulate_pages(w, cfg, hints=hints, keep_state=True)
    assert kept.runs == runs + 1 and not np.shares_memory(r.pstate, kept._buf)
    _same(r, ref)
    assert np.array_equal(r.pstate, simulate_pages(w, cfg, hints=hints, keep_state=True).pstate)
    assert kept.runs == runs + 2
    page_mod.keep_buffers(False)
    assert kept.nbytes == 0 and kept.take(16) is None


def test_sweep_worker_keeps_buffers():
    """A sweep worker keeps the engines' buffers from its first point on (the registry's
    `keep_buffers`), and gives them back when its caches are cleared."""
    from g10fast.sweep import worker

    worker.clear_cache()
    assert not page_mod.STATES.keep
    worker._keep_buffers()
    try:
        assert page_mod.STATES.keep
    finally:
        worker.clear_cache()
    assert not page_mod.STATES.keep and page_mod.STATES.nbytes == 0
