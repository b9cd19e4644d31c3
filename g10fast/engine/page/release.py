"""Freed page states given back to the operating system (Linux's madvise), or their memory
reused where the next states are written (Linux's mremap): `_release_free`,
`_release_dropped`, `_give_back` and `_populate`."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
from g10fast.engine.page.layout import (
    N_DROP,
    N_PM,
    N_POOL,
    P_MOVE_MIN,
    P_POOL_CAP,
    P_RELEASE,
    S_DROP,
    S_DROP_NEXT,
    S_MOVES_LEFT,
    S_PM,
    S_POOL,
    S_POOL_BYTES,
    S_POOL_N,
    S_POOL_T,
    S_RECYCLE,
    S_RELEASED,
    S_REUSED,
    _kernel,
)
from g10fast.engine.page.helpers import _same_bits
from g10fast.jit import NO_JIT, external, kernel_nonrt_internal


# ---- freed page states given back to the operating system ----
# The page states of a UVM run start as `np.zeros`, memory the operating system maps as the
# engine first writes it; most tensors live for a part of the iteration only (the live pages
# peak at 17-25 % of all pages on the paper's CNNs), so once a tensor is freed the memory
# pages of its states that hold only zeros (NOT_PRESENT, no other bit) go back to the system
# with Linux's madvise(MADV_DONTNEED): on private anonymous memory they read as zeros again
# and take memory only when written again. Nothing the engine reads changes.
#
# The memory of freed states reused: a memory page given back is mapped again, zeroed, by the
# first write into it (or `_populate`): a page fault and a cleared page each, about 1.5 us on
# the 2-core test machine, 0.34 of the 1.62 CPU s of a SENet154-1024 G10 run, where every
# tensor's states are mapped again each iteration (220 k faults). With S[S_RECYCLE] set (the
# wrapper's RECYCLE_DEFAULT), the memory pages a release would give back wait in a pool
# instead (`_give_back`), and `_populate` moves pool pages with Linux's
# mremap(MREMAP_DONTUNMAP) to where a tensor's states are about to be written, into the memory
# pages there that are not mapped (/proc/self/pagemap: neither present nor swapped). A moved
# page's states are zero at its source (checked when it is taken: the engine may have written
# there since), and zero at its destination (an unmapped page reads as zero); its source reads
# as zero after the move: nothing the engine reads changes. The pool holds at most
# S[P_POOL_CAP] bytes in N_POOL ranges; older ranges go back to the system as before.
MADV_DONTNEED = 4
MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23
MREMAP_MAYMOVE = 1
MREMAP_FIXED = 2
MREMAP_DONTUNMAP = 4  # (Linux 5.7)
_MOVE = MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP
if sys.platform.startswith("linux"):
    if NO_JIT:
        _libc = ctypes.CDLL(None, use_errno=True)
        _madvise = _libc.madvise
        _madvise.argtypes = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int)
        _madvise.restype = ctypes.c_int
        _mremap = _libc.mremap
        _mremap.argtypes = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t)
        _mremap.restype = ctypes.c_size_t
        _pread = _libc.pread
        _pread.argtypes = (ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int64)
        _pread.restype = ctypes.c_ssize_t
    else:
        # (external symbols, resolved when the compiled code is loaded: the cache keeps them)
        _madvise = external("madvise", lambda t: t.intc(t.uintp, t.uintp, t.intc))
        # (mremap's fifth argument, the new address, is read when MREMAP_FIXED is given)
        _mremap = external("mremap", lambda t: t.uintp(t.uintp, t.uintp, t.uintp, t.intc, t.uintp))
        _pread = external("pread", lambda t: t.intp(t.intc, t.uintp, t.uintp, t.int64))
else:

    @kernel_nonrt_internal
    def _madvise(addr, length, advice):
        return -1  # (never called: P_RELEASE is 0 off Linux)

    @kernel_nonrt_internal
    def _mremap(old, old_size, new_size, flags, new):
        return 0  # (never called: S_RECYCLE is 0 off Linux)

    @kernel_nonrt_internal
    def _pread(fd, buf, count, offset):
        return -1  # (never called: S_RECYCLE is 0 off Linux)


@_kernel
def _zero_back(pstate, a, b, S):
    """Give back to the operating system those memory pages a .. b - 1 (addresses) of the
    states whose states are all zero."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    z0 = -1  # the start of the zero pages found so far in a row
    while a <= b:
        if a < b and _same_bits(pstate, a - base, ps, 0, 255) == ps:
            if z0 < 0:
                z0 = a
        elif z0 >= 0:
            _madvise(np.uint64(z0), np.uint64(a - z0), MADV_DONTNEED)
            z0 = -1
        a += ps


@_kernel
def _pool_drop(pstate, S, newest, give_back):
    """Take the pool's newest (else oldest) range out of it; with `give_back`, give back to
    the operating system those of its memory pages whose states are still all zero (the
    engine may have written some since they were pooled), else its memory stays where it
    is."""
    if newest:
        j = (S[S_POOL_T] + S[S_POOL_N] - 1) % N_POOL
    else:
        j = S[S_POOL_T]
        S[S_POOL_T] = (j + 1) % N_POOL
    a = S[S_POOL + 2 * j]
    b = S[S_POOL + 2 * j + 1]
    S[S_POOL_N] -= 1
    S[S_POOL_BYTES] -= b - a
    if give_back:
        _zero_back(pstate, a, b, S)


@_kernel
def _pool_cut(pstate, S, lo, hi, join):
    """Take addresses lo .. hi - 1 out of the pool's ranges, keeping the rest of each in
    order (a range around them in two pieces); with `join`, the ranges that overlapped or
    touched them are taken out whole and the span of them all with lo .. hi is returned, for
    the caller to pool as one range (else (lo, hi)). Past N_POOL ranges, the oldest go back
    (`_zero_back`). (S_PM is the scratch: no pagemap entries are held across this.)"""
    t = S[S_POOL_T]
    w = 0
    for i in range(S[S_POOL_N]):
        j = (t + i) % N_POOL
        x = S[S_POOL + 2 * j]
        y = S[S_POOL + 2 * j + 1]
        if join and x <= hi and y >= lo:
            lo = min(lo, x)
            hi = max(hi, y)
            continue
        if x < lo:
            S[S_PM + 2 * w] = x
            S[S_PM + 2 * w + 1] = min(y, lo)
            w += 1
        if y > hi:
            S[S_PM + 2 * w] = max(x, hi)
            S[S_PM + 2 * w + 1] = y
            w += 1
    S[S_POOL_T] = 0
    S[S_POOL_N] = 0
    S[S_POOL_BYTES] = 0
    for i in range(w):
        x = S[S_PM + 2 * i]
        y = S[S_PM + 2 * i + 1]
        if i < w - N_POOL:
            _zero_back(pstate, x, y, S)
            continue
        k = S[S_POOL_N]
        S[S_POOL + 2 * k] = x
        S[S_POOL + 2 * k + 1] = y
        S[S_POOL_N] = k + 1
        S[S_POOL_BYTES] += y - x
    return lo, hi


@_kernel
def _give_back(pstate, a, b, S):
    """Memory pages a .. b - 1 (addresses) of the states hold zeros only: into the pool
    (S[S_RECYCLE] set: the newest range, joined with every pooled range it overlaps or
    touches), the oldest ranges going back to the system past N_POOL ranges or S[P_POOL_CAP]
    bytes; else back to the system at once. S[S_RELEASED] counts the bytes given up either
    way."""
    if S[S_RECYCLE] == 0:
        if _madvise(np.uint64(a), np.uint64(b - a), MADV_DONTNEED) == 0:
            S[S_RELEASED] += b - a
        return
    S[S_RELEASED] += b - a
    # (one range with those it overlaps or touches: a range pooled twice is pooled once)
    a, b = _pool_cut(pstate, S, a, b, True)
    if S[S_POOL_N] == N_POOL:
        _pool_drop(pstate, S, False, True)
    j = (S[S_POOL_T] + S[S_POOL_N]) % N_POOL
    S[S_POOL + 2 * j] = a
    S[S_POOL + 2 * j + 1] = b
    S[S_POOL_N] += 1
    S[S_POOL_BYTES] += b - a
    while S[S_POOL_BYTES] > S[P_POOL_CAP] and S[S_POOL_N] > 0:
        _pool_drop(pstate, S, False, True)


@_kernel
def _pool_fill(pstate, lo, hi, S):
    """Move pool memory into memory pages lo .. hi - 1 of the states (addresses; none of
    them mapped), newest range first, as far as the pool reaches; returns the address up to
    which they are mapped now (no pooled range overlaps them: `_reuse` cut them out). A
    range whose states are no longer all zero (written since it was pooled) leaves the pool,
    its memory where it is; one too small to move (under S[P_MOVE_MIN] memory pages) goes
    back to the system. A move the system refuses, or none left, sets S[S_RECYCLE] to 0."""
    ps = S[P_RELEASE]
    if hi - lo < S[P_MOVE_MIN] * ps or S[S_RECYCLE] == 0:
        return lo
    base = np.int64(pstate.ctypes.data)
    while lo < hi and S[S_POOL_N] > 0:
        j = (S[S_POOL_T] + S[S_POOL_N] - 1) % N_POOL
        a = S[S_POOL + 2 * j]
        b = S[S_POOL + 2 * j + 1]
        if b - a < S[P_MOVE_MIN] * ps:
            _pool_drop(pstate, S, True, True)  # (a move this small costs more than it saves)
            continue
        k = min(hi - lo, b - a)
        src = b - k
        if _same_bits(pstate, src - base, k, 0, 255) != k:
            _pool_drop(pstate, S, True, False)
            continue
        if S[S_MOVES_LEFT] <= 0 or _mremap(
            np.uint64(src), np.uint64(k), np.uint64(k), _MOVE, np.uint64(lo)
        ) != np.uint64(lo):
            S[S_RECYCLE] = 0
            return lo
        S[S_MOVES_LEFT] -= 1
        S[S_POOL + 2 * j + 1] = src
        S[S_POOL_BYTES] -= k
        if src == a:
            _pool_drop(pstate, S, True, False)
        S[S_REUSED] += k
        lo += k
    return lo


@_kernel
def _reuse(pstate, a, b, S):
    """Fill the memory pages a .. b - 1 of the states (addresses) that are not mapped (their
    pagemap entries neither present nor swapped) from the pool (`_pool_fill`). Returns
    whether some page may be left unmapped (then `_populate` maps the rest)."""
    ps = S[P_RELEASE]
    _pool_cut(pstate, S, a, b, False)  # (the tensor's own pooled memory is its own again)
    sbuf = np.uint64(S.ctypes.data + 8 * S_PM)
    x = a
    left = False
    while x < b:
        if S[S_RECYCLE] == 0:
            # (the system refused a read or a move: the pool goes back, and stays off)
            while S[S_POOL_N] > 0:
                _pool_drop(pstate, S, False, True)
            return True
        if S[S_POOL_N] == 0:
            return True
        m = min((b - x) // ps, N_PM)
        if _pread(int(S[S_RECYCLE] - 1), sbuf, np.uint64(8 * m), int(x // ps * 8)) != 8 * m:
            S[S_RECYCLE] = 0
            continue
        i = 0
        while i < m:
            if (S[S_PM + i] >> 62) & 3 != 0:  # (bit 63 present, bit 62 swapped)
                i += 1
                continue
            j = i + 1
            while j < m and (S[S_PM + j] >> 62) & 3 == 0:
                j += 1
            lo = x + i * ps
            hi = x + j * ps
            if _pool_fill(pstate, lo, hi, S) < hi:
                left = True
            i = j
        if S[S_RECYCLE] != 0:
            x += m * ps
    return left


@_kernel
def _release_free(pstate, p0, n, S, zero):
    """Give back to the operating system the memory pages (S[P_RELEASE] bytes) lying wholly
    within the states of pages p0 .. p0 + n - 1, when every one of their states is zero
    (known when `zero` is set: not read again). `pstate` must be private anonymous memory
    (what `page._fresh_states` maps); S[S_RELEASED] counts the bytes given back
    (`_give_back`: or pooled)."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + p0 + ps - 1) // ps * ps
    b = (base + p0 + n) // ps * ps
    if b <= a:
        return
    acc = np.uint64(0)
    if not zero:
        w = pstate[a - base : b - base].view(np.uint64)  # (a and b are multiples of 8)
        for i in range(w.shape[0]):
            acc |= w[i]
    if acc == 0:
        _give_back(pstate, a, b, S)


@_kernel
def _release_dropped(pstate, lo, hi, S):
    """After pages lo .. hi - 1 were dropped (DeepUM's victims of dead tensors, left
    NOT_PRESENT): give back to the operating system each memory page (S[P_RELEASE] bytes) of
    the states that overlaps them, lies wholly within `pstate` and now holds zero states
    only. DeepUM never pre-deallocates: without this, the states of the tensors it drops
    would keep their memory to the end of the run. Each memory page is scanned from its
    end, where the pages not yet dropped lie when victims go in ascending order."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + lo) // ps * ps
    if a < base:
        a += ps
    e = (base + hi + ps - 1) // ps * ps
    if e > base + pstate.shape[0]:
        e -= ps
    w = ps // 8
    z0 = -1  # the start of the zero pages found so far in a row
    while a < e:
        blk = pstate[a - base : a - base + ps].view(np.uint64)
        i = w - 1
        while i >= 7:  # (eight words a step without a branch, then word by word)
            acc = np.uint64(0)
            for q in range(i - 7, i + 1):
                acc |= blk[q]
            if acc != 0:
                break
            i -= 8
        while i >= 0 and blk[i] == 0:
            i -= 1
        if i < 0:
            if z0 < 0:
                z0 = a
        elif z0 >= 0:
            _give_back(pstate, z0, a, S)
            z0 = -1
        a += ps
    if z0 >= 0:
        _give_back(pstate, z0, e, S)


#: the most memory pages of states one pending run of dropped pages spans before
#: `_drop_release` gives it back (256 KiB with 4 KiB pages: the memory held back is small)
_DROP_SPAN_PAGES = 64


@_kernel
def _drop_release(pstate, lo, hi, S):
    """Pages lo .. hi - 1 were just dropped (left NOT_PRESENT): give back the memory of their
    states (`_release_dropped`) later, in one pass over the run of dropped pages they continue.
    DeepUM drops its victims a tick at a time, in ascending runs of a few pages, often of two
    tensors in turn; given back at once, nearly every memory page of their states took its own
    madvise call (183 k calls in a SENet154-1024 DeepUM+ run). Up to N_DROP runs wait, each
    extended by the drops that continue it (starting in the memory page where it ends, or the
    next); a run is given back when it would span more than `_DROP_SPAN_PAGES` memory pages,
    when a drop that continues none needs its slot (in turn), and at each kernel's start
    (`_drop_flush`). Only states that are zero when they are given back are released, so
    nothing the engine reads changes."""
    ps = S[P_RELEASE]
    for j in range(N_DROP):
        plo = S[S_DROP + 2 * j]
        phi = S[S_DROP + 2 * j + 1]
        if phi > plo and phi <= lo and lo - phi < ps:
            if hi - plo <= _DROP_SPAN_PAGES * ps:
                S[S_DROP + 2 * j + 1] = hi
                return
            _release_dropped(pstate, plo, phi, S)
            S[S_DROP + 2 * j] = lo
            S[S_DROP + 2 * j + 1] = hi
            return
    j = S[S_DROP_NEXT]
    S[S_DROP_NEXT] = (j + 1) % N_DROP
    plo = S[S_DROP + 2 * j]
    phi = S[S_DROP + 2 * j + 1]
    if phi > plo:
        _release_dropped(pstate, plo, phi, S)
    S[S_DROP + 2 * j] = lo
    S[S_DROP + 2 * j + 1] = hi


@_kernel
def _drop_flush(pstate, S):
    """Give back the pending runs of dropped pages' states (`_drop_release`)."""
    for j in range(N_DROP):
        plo = S[S_DROP + 2 * j]
        phi = S[S_DROP + 2 * j + 1]
        if phi > plo:
            _release_dropped(pstate, plo, phi, S)
        S[S_DROP + 2 * j] = 0
        S[S_DROP + 2 * j + 1] = 0


@_kernel
def _populate(pstate, p0, n, S):
    """Map the memory pages that hold the states of pages p0 .. p0 + n - 1 for writing at
    once (Linux's MADV_POPULATE_WRITE; no state changes): where they were given back, the
    writes that follow would otherwise take a page fault each (two where a read comes
    first). The first and last of them, which may also hold a neighbour's states, are
    included: one that is not mapped holds zeros only (`_reuse` fills only those), and one
    that is mapped is left as it is. (Without them, the writes and reads at the tensors' ends
    took about 3.7 k more page faults in a SENet154-1024 DeepUM+ run, 0.5-0.9 k in G10.)"""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    # (within the whole memory pages of `pstate`: all of it, where `page._fresh_states`
    # mapped it, but for a last page it fills in part)
    a = max((base + p0) // ps, (base + ps - 1) // ps) * ps
    b = min((base + p0 + n + ps - 1) // ps, (base + pstate.shape[0]) // ps) * ps
    if b > a and (S[S_RECYCLE] == 0 or _reuse(pstate, a, b, S)):
        _madvise(np.uint64(a), np.uint64(b - a), MADV_POPULATE_WRITE)


@_kernel
def _map_read(pstate, p0, n, S):
    """Map the memory pages that hold the states of pages p0 .. p0 + n - 1 for reading
    (Linux's MADV_POPULATE_READ, 5.14+): those not mapped take the system's zero page, no
    memory, in one call instead of a page fault at each first read. (Lazy states: read, not
    written, until the tensor leaves the GPU or is written out.)"""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = max((base + p0) // ps, (base + ps - 1) // ps) * ps
    b = min((base + p0 + n + ps - 1) // ps, (base + pstate.shape[0]) // ps) * ps
    if b > a:
        _madvise(np.uint64(a), np.uint64(b - a), MADV_POPULATE_READ)


@_kernel
def _unmap_zero(pstate, p0, n, S):
    """Unmap the memory pages wholly within the states of pages p0 .. p0 + n - 1 that hold
    zeros only (`_zero_back`), before lazy states are written out (`_lz_fix`): mapped for
    reading (`_map_read`), they hold the system's zero page, and each write would take a
    page fault and a cleared page; unmapped, `_populate` fills them from the pool."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + p0 + ps - 1) // ps * ps
    b = (base + p0 + n) // ps * ps
    if b > a:
        _zero_back(pstate, a, b, S)
