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
        pk._release_free(pstate, p0, n, S, False)

    def _call_populate(pstate, p0, n, S):
        pk._populate(pstate, p0, n, S)

    def _call_dropped(pstate, lo, hi, S):
        pk._release_dropped(pstate, lo, hi, S)

    def _call_drop(pstate, lo, hi, S):
        pk._drop_release(pstate, lo, hi, S)

    def _call_flush(pstate, S):
        pk._drop_flush(pstate, S)

    def _call_first_zero(pstate, tt, T, p0):
        return pk._first_state_zero(pstate, tt, T, p0)
else:

    @njit
    def _call(pstate, p0, n, S):  # (the kernels have no CPython wrapper)
        pk._release_free(pstate, p0, n, S, False)

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

    @njit
    def _call_first_zero(pstate, tt, T, p0):
        return pk._first_state_zero(pstate, tt, T, p0)


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


def _run(monkeypatch, w, cfg, hints, release, released=None, reused=None):
    monkeypatch.setattr(page_mod, "RELEASE_DEFAULT", release)
    engine = pk.run_engine

    def counting(*a):
        status = engine(*a)
        if released is not None:
            released[0] += int(a[8][pk.S_RELEASED])
            a[8][pk.S_RELEASED] = 0
        if reused is not None:
            reused[0] += int(a[8][pk.S_REUSED])
            a[8][pk.S_REUSED] = 0
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


@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "given-back"])
@pytest.mark.parametrize("make_case", [_big_case, _deepum_case], ids=["g10-predeallocations", "deepum-drops"])
def test_release_changes_nothing(monkeypatch, make_case, reuse):
    """Six random runs of each kind (G10 with pre-deallocations, `_release_free`; DeepUM
    dropping dead tensors' pages with no pre-deallocation, `_release_dropped`): with the
    release and without it the same kernels, traffic, memory use and final page states;
    memory is released in them, and, with the memory reused (moves of any size, as these
    tensors' states span a few memory pages), reused in them."""
    monkeypatch.setattr(page_mod, "RECYCLE_DEFAULT", reuse)
    monkeypatch.setattr(page_mod, "MOVE_MIN", 1)
    total = 0
    moved = [0]
    for seed in range(6):
        w, cfg, hints = make_case(seed)
        got = [0]
        a = _run(monkeypatch, w, cfg, hints, True, got, moved)
        b = _run(monkeypatch, w, cfg, hints, False)
        assert np.array_equal(a.kernels, b.kernels)
        assert np.array_equal(a.pcie, b.pcie)
        assert np.array_equal(a.boundaries, b.boundaries)
        assert (a.gpu_used, a.host_used, a.host_peak) == (b.gpu_used, b.host_used, b.host_peak)
        assert np.array_equal(a.pstate, b.pstate)
        total += got[0]
    assert total > 0
    assert (moved[0] > 0) == (reuse and _can_move())


# ---- the memory of freed states reused (page.release, `_give_back`, `_populate`) ----


def _can_move():
    """Whether this system moves memory as the reuse does (Linux 5.7's MREMAP_DONTUNMAP, a
    readable /proc/self/pagemap); without it the engine gives memory back as before."""
    import ctypes
    import mmap as _mmap

    if page_mod._pagemap() < 0:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mremap.argtypes = (ctypes.c_size_t,) * 3 + (ctypes.c_int, ctypes.c_size_t)
    libc.mremap.restype = ctypes.c_size_t
    m = _mmap.mmap(-1, 4 * PS, flags=_mmap.MAP_PRIVATE | _mmap.MAP_ANONYMOUS)
    a = ctypes.addressof(ctypes.c_char.from_buffer(m))
    m[0] = 1
    ok = libc.mremap(a, PS, PS, 7, a + 2 * PS) == a + 2 * PS and m[2 * PS] == 1 and m[0] == 0
    m.close()
    return ok


needs_moves = pytest.mark.skipif(not _can_move(), reason="no mremap(MREMAP_DONTUNMAP) or pagemap here")


def _mapped(a, n):
    """Per memory page from address a (n of them): whether it is mapped (present or swapped,
    /proc/self/pagemap)."""
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(a // PS * 8)
        raw = np.frombuffer(f.read(8 * n), dtype=np.uint64)
    return (raw >> np.uint64(62)) != 0


def _reusing_S(cap=64 << 20, move_min=1, moves=1000):
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_RELEASE] = PS
    S[pk.S_RECYCLE] = page_mod._pagemap() + 1
    S[pk.P_POOL_CAP] = cap
    S[pk.P_MOVE_MIN] = move_min
    S[pk.S_MOVES_LEFT] = moves
    return S


def _states(mib=8):
    """Fresh states in small memory pages, and the offset of the first whole memory page."""
    pstate = page_mod._fresh_states(mib << 20)
    page_mod._small_pages(pstate)
    return pstate, -pstate.ctypes.data % PS


def test_unmap_zero_gives_back_the_zero_pages_mapped_for_reading():
    """`_unmap_zero` (lazy states about to be written out): of the memory pages wholly within
    the states given, those mapped for reading (the system's zero page) or holding zeros are
    unmapped, a page holding a state that is not zero stays, and so do the pages the range
    shares with its neighbours; every state reads as before."""
    if page_mod._pagemap() < 0:
        pytest.skip("no /proc/self/pagemap")
    pstate, o = _states()
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.P_RELEASE] = PS
    A = o + 4 * PS
    base = pstate.ctypes.data
    assert sum(int(pstate[A + i * PS]) for i in range(8)) == 0  # (reads: the zero page mapped)
    pstate[A + 3 * PS + 17] = pk.IN_CPU
    assert _mapped(base + A, 8).all()
    pk._unmap_zero(pstate, A + 100, 8 * PS - 200, S)  # (the first and last pages in part)
    assert list(_mapped(base + A, 8)) == [True, False, False, True, False, False, False, True]
    assert pstate[A + 3 * PS + 17] == pk.IN_CPU and int(pstate[A : A + 8 * PS].sum()) == pk.IN_CPU
    assert S[pk.S_RELEASED] == 0  # (nothing of the states' memory is counted as given up)


@needs_moves
def test_reuse_moves_freed_memory_where_states_are_written_next():
    """A freed tensor's zeroed memory pages wait in the pool (still mapped, counted as given
    up), and the populate of another tensor's unmapped states takes them: those pages are
    mapped now, the freed ones are not, every state still reads zero, and one move was made."""
    pstate, o = _states()
    S = _reusing_S()
    assert S[pk.S_RECYCLE] > 0, "no /proc/self/pagemap"
    A, B, n = o + 4 * PS, o + 40 * PS, 8 * PS
    pstate[A : A + n] = 3
    pstate[A : A + n] = 0
    _call(pstate, A, n, S)
    base = pstate.ctypes.data
    assert S[pk.S_RELEASED] == n and S[pk.S_POOL_N] == 1 and S[pk.S_POOL_BYTES] == n
    assert _mapped(base + A, 8).all() and not _mapped(base + B, 8).any()
    _call_populate(pstate, B, n, S)
    assert S[pk.S_REUSED] == n and S[pk.S_POOL_N] == 0 and S[pk.S_POOL_BYTES] == 0
    assert S[pk.S_MOVES_LEFT] == 999
    assert _mapped(base + B, 8).all() and not _mapped(base + A, 8).any()
    # the pool empty: populate maps fresh memory, as without it
    C = o + 80 * PS
    assert not _mapped(base + C, 8).any()
    _call_populate(pstate, C, n, S)
    assert _mapped(base + C, 8).all() and S[pk.S_REUSED] == n
    assert not pstate.any()  # (read last: reading unmapped pages maps them)


@needs_moves
def test_reuse_never_moves_or_gives_back_written_states():
    """States the engine wrote into pooled memory after it was pooled are neither moved (the
    range leaves the pool, its memory where it is) nor given back when the pool drops it for
    room; a range too small to move goes back to the system instead; no move below
    P_MOVE_MIN pages; moves stop when none are left."""
    pstate, o = _states()
    base = pstate.ctypes.data
    S = _reusing_S()
    A, B, n = o + 4 * PS, o + 40 * PS, 8 * PS
    pstate[A : A + n] = 1
    pstate[A : A + n] = 0
    _call(pstate, A, n, S)
    pstate[A + 5 * PS + 7] = 3  # (written since)
    _call_populate(pstate, B, n, S)
    assert S[pk.S_REUSED] == 0 and S[pk.S_POOL_N] == 0
    assert pstate[A + 5 * PS + 7] == 3 and _mapped(base + A, 8).all() and _mapped(base + B, 8).all()
    # the pool over its cap: the oldest range goes back, but for its written page
    S = _reusing_S(cap=n)
    C, D = o + 80 * PS, o + 120 * PS
    for r in (C, D):
        pstate[r : r + n] = 1
        pstate[r : r + n] = 0
    _call(pstate, C, n, S)
    pstate[C + 2 * PS] = 2
    _call(pstate, D, n, S)
    assert S[pk.S_POOL_N] == 1 and S[pk.S_POOL_BYTES] == n  # (D only)
    assert list(_mapped(base + C, 8)) == [False, False, True] + [False] * 5
    assert pstate[C + 2 * PS] == 2 and _mapped(base + D, 8).all()
    # below P_MOVE_MIN: no move; a pooled range smaller than it goes back to the system
    S[pk.P_MOVE_MIN] = 9
    E = o + 160 * PS
    _call_populate(pstate, E, n, S)
    assert S[pk.S_REUSED] == 0 and S[pk.S_POOL_N] == 1 and _mapped(base + E, 8).all()
    S[pk.P_MOVE_MIN] = 4
    F = o + 200 * PS
    _call_populate(pstate, F, 16 * PS, S)  # (room for 9+ pages, the pooled range has 8)
    assert S[pk.S_REUSED] == n and _mapped(base + F, 16).all()
    # no moves left: the pool is turned off and given back
    S = _reusing_S(moves=0)
    G, H = o + 240 * PS, o + 280 * PS
    pstate[G : G + n] = 1
    pstate[G : G + n] = 0
    _call(pstate, G, n, S)
    _call_populate(pstate, H, n, S)
    assert S[pk.S_RECYCLE] == 0 and S[pk.S_POOL_N] == 0 and S[pk.S_REUSED] == 0
    assert not _mapped(base + G, 8).any() and _mapped(base + H, 8).all()
    assert not pstate[o + 240 * PS :].any()


@needs_moves
def test_reuse_random_operations_change_no_state():
    """300 random steps over 64 tensors of 1-12 memory pages of states (written, zeroed,
    released, populated, in any order, some written while pooled), the pool small and moves
    of any size: the states always equal a plain copy kept beside them, the pool's ranges are
    disjoint, lie in the states and add up to S_POOL_BYTES, and memory was reused."""
    rng = np.random.default_rng(5)
    pstate, o = _states(16)
    base = pstate.ctypes.data
    assert o == 0  # (whole memory pages)
    S = _reusing_S(cap=24 * PS)
    starts = o + PS * np.cumsum(rng.integers(1, 13, size=65))
    shadow = pstate.copy()
    for step in range(300):
        t = int(rng.integers(64))
        p0, n = int(starts[t]), int(starts[t + 1] - starts[t])
        op = rng.integers(4)
        if op == 0:  # the engine writes some states
            k = rng.integers(p0, p0 + n, size=int(rng.integers(1, 20)))
            pstate[k] = shadow[k] = rng.integers(1, 16, size=len(k), dtype=np.uint8)
        elif op == 1:  # a tensor's states zeroed (it left; memory not written stays unmapped)
            nz = p0 + np.flatnonzero(shadow[p0 : p0 + n])
            pstate[nz] = shadow[nz] = 0
        elif op == 2:
            _call(pstate, p0, n, S)
        else:
            _call_populate(pstate, p0, n, S)
        # (compared without reading the states' unmapped memory pages, which would map them)
        mapped = np.repeat(_mapped(base, len(pstate) // PS), PS)
        assert np.array_equal(pstate[mapped], shadow[mapped]), step
        assert not shadow[~mapped].any(), step
        ranges = sorted(
            (int(S[pk.S_POOL + 2 * (j % pk.N_POOL)]), int(S[pk.S_POOL + 2 * (j % pk.N_POOL) + 1]))
            for j in range(S[pk.S_POOL_T], S[pk.S_POOL_T] + S[pk.S_POOL_N])
        )
        assert sum(b - a for a, b in ranges) == S[pk.S_POOL_BYTES], step
        assert all(a < b and a % PS == 0 and b % PS == 0 for a, b in ranges), step
        assert all(b <= c for (_, b), (c, _) in zip(ranges, ranges[1:])), step
        assert all(base <= a and b <= base + len(pstate) for a, b in ranges), step
    assert S[pk.S_RECYCLE] > 0 and S[pk.S_REUSED] > 0
    assert np.array_equal(pstate, shadow)


@needs_moves
def test_populate_maps_the_end_pages_it_shares_with_neighbours():
    """A tensor whose states start and end inside memory pages: `_populate` maps those end
    pages too where they are not mapped (zeros, from the pool or fresh), and leaves a mapped
    one as it is (a neighbour's states in it kept)."""
    pstate, o = _states()
    base = pstate.ctypes.data
    assert o == 0
    S = _reusing_S()
    # a freed neighbour's 9 memory pages wait in the pool
    A, n = 4 * PS, 9 * PS
    pstate[A : A + n] = 2
    pstate[A : A + n] = 0
    _call(pstate, A, n, S)
    assert S[pk.S_POOL_N] == 1
    # the tensor: from the middle of page 40 to the middle of page 48; page 40 holds a
    # neighbour's written state, page 48 is not mapped
    p0 = 40 * PS + 100
    pstate[40 * PS + 7] = 3
    assert list(_mapped(base + 39 * PS, 11)) == [False, True] + [False] * 9
    _call_populate(pstate, p0, 8 * PS, S)
    assert list(_mapped(base + 39 * PS, 11)) == [False] + [True] * 9 + [False]
    assert S[pk.S_REUSED] == 8 * PS  # (pages 41-48 moved, page 40 left as it was)
    assert pstate[40 * PS + 7] == 3
    assert not pstate[40 * PS + 8 : 49 * PS].any()
    # the states' last memory pages, the tensor starting inside the one before
    m = len(pstate)
    _call_populate(pstate, m - PS - 10, PS + 10, S)
    assert _mapped(base + m - 2 * PS, 2).all()


def test_first_state_check_reads_no_state_of_a_tensor_known_zero():
    """Before a hint or fault scan maps a tensor's states (`_populate`), the check of its first
    state: with TT_Z set it is true without a read (the memory page stays unmapped, so the pool
    can fill it); without it the state is read (which maps the page) and decides."""
    pstate, o = _states()
    base = pstate.ctypes.data
    assert o == 0
    tt = np.zeros((2, pk.TT_COLS), dtype=np.int64)
    p0 = 40 * PS + 100
    tt[1, pk.TT_START] = p0
    tt[1, pk.TT_NP] = 8 * PS
    tt[1, pk.TT_Z] = 1
    assert not _mapped(base + 40 * PS, 1)[0]
    assert _call_first_zero(pstate, tt, 1, p0)
    assert not _mapped(base + 40 * PS, 1)[0]
    tt[1, pk.TT_Z] = 0
    assert _call_first_zero(pstate, tt, 1, p0)
    assert _mapped(base + 40 * PS, 1)[0]
    pstate[p0] = pk.IN_CPU
    assert not _call_first_zero(pstate, tt, 1, p0)


def test_reuse_turned_off_when_pagemap_cannot_be_read():
    """A pagemap descriptor that cannot be read turns the pool off at the first populate and
    gives the pool back: the states as they were, the memory back to the system."""
    pstate, o = _states()
    base = pstate.ctypes.data
    S = _reusing_S()
    S[pk.S_RECYCLE] = 1_000_000  # (no such descriptor)
    A, B, n = o + 4 * PS, o + 40 * PS, 8 * PS
    pstate[A : A + n] = 1
    pstate[A : A + n] = 0
    _call(pstate, A, n, S)
    assert S[pk.S_POOL_N] == 1
    _call_populate(pstate, B, n, S)
    assert S[pk.S_RECYCLE] == 0 and S[pk.S_POOL_N] == 0 and S[pk.S_REUSED] == 0
    assert not _mapped(base + A, 8).any() and _mapped(base + B, 8).all() and not pstate.any()


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
