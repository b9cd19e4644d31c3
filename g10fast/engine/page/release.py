"""Freed page states given back to the operating system (Linux's madvise): `_release_free`,
`_release_dropped` and `_populate`."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
from numba import types as _nbtypes

from g10fast.engine.page.layout import N_DROP, P_RELEASE, S_DROP, S_DROP_NEXT, S_RELEASED, _kernel
from g10fast.jit import NO_JIT, kernel_nonrt_internal


# ---- freed page states given back to the operating system ----
# The page states of a UVM run start as `np.zeros`, memory the operating system maps as the
# engine first writes it; most tensors live for a part of the iteration only (the live pages
# peak at 17-25 % of all pages on the paper's CNNs), so once a tensor is freed the memory
# pages of its states that hold only zeros (NOT_PRESENT, no other bit) go back to the system
# with Linux's madvise(MADV_DONTNEED): on private anonymous memory they read as zeros again
# and take memory only when written again. Nothing the engine reads changes.
MADV_DONTNEED = 4
MADV_POPULATE_WRITE = 23
if sys.platform.startswith("linux"):
    if NO_JIT:
        _libc = ctypes.CDLL(None, use_errno=True)
        _madvise = _libc.madvise
        _madvise.argtypes = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int)
        _madvise.restype = ctypes.c_int
    else:
        # (an external symbol, resolved when the compiled code is loaded: the cache keeps it)
        _madvise = _nbtypes.ExternalFunction(
            "madvise", _nbtypes.intc(_nbtypes.uintp, _nbtypes.uintp, _nbtypes.intc)
        )
else:

    @kernel_nonrt_internal
    def _madvise(addr, length, advice):
        return -1  # (never called: P_RELEASE is 0 off Linux)


@_kernel
def _release_free(pstate, p0, n, S):
    """Give back to the operating system the memory pages (S[P_RELEASE] bytes) lying wholly
    within the states of pages p0 .. p0 + n - 1, when every one of their states is zero.
    `pstate` must be private anonymous memory (what `np.zeros` and `np.full` of this size
    map); S[S_RELEASED] counts the bytes given back."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + p0 + ps - 1) // ps * ps
    b = (base + p0 + n) // ps * ps
    if b <= a:
        return
    w = pstate[a - base : b - base].view(np.uint64)  # (a and b are multiples of 8)
    acc = np.uint64(0)
    for i in range(w.shape[0]):
        acc |= w[i]
    if acc == 0 and _madvise(np.uint64(a), np.uint64(b - a), MADV_DONTNEED) == 0:
        S[S_RELEASED] += b - a


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
            if _madvise(np.uint64(z0), np.uint64(a - z0), MADV_DONTNEED) == 0:
                S[S_RELEASED] += a - z0
            z0 = -1
        a += ps
    if z0 >= 0 and _madvise(np.uint64(z0), np.uint64(e - z0), MADV_DONTNEED) == 0:
        S[S_RELEASED] += e - z0


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
    """Map the memory pages lying wholly within the states of pages p0 .. p0 + n - 1 for
    writing at once (Linux's MADV_POPULATE_WRITE; no state changes): where `_release_free`
    gave them back, the writes that follow would otherwise take a page fault each (two
    where a read comes first)."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + p0 + ps - 1) // ps * ps
    b = (base + p0 + n) // ps * ps
    if b > a:
        _madvise(np.uint64(a), np.uint64(b - a), MADV_POPULATE_WRITE)
