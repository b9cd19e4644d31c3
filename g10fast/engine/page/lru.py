"""The page engine's "LRU" list (O-6: FIFO by GPU arrival): the ring of page entries with
generations and its cursor, the list kept as extents (P_XLRU), and DeepUM's cursor on
extents."""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.helpers import _BYTES_ONE, _live, _tpos
from g10fast.engine.page.layout import (
    E_EXTENTS,
    F_TRANSFER,
    F_WAIT,
    GEN_MASK,
    GEN_SHIFT,
    LOC_MASK,
    P_DEEPUM,
    P_LCAP,
    STALE_BUCKETS,
    S_ERROR,
    S_LRU_CUR,
    S_LRU_HEAD,
    S_LRU_SCAN,
    S_LRU_STALE,
    S_LRU_TAIL,
    S_LZ_BACK,
    S_X_BUMP,
    S_X_CUR,
    S_X_FREE,
    S_X_HEAD,
    S_X_NFREE,
    S_X_TAIL,
    TT_LA,
    TT_LZ,
    TT_WIN,
    TT_XH,
    _kernel,
    _kernel_page,
    _u,
)
from g10fast.locations import IN_GPU


# ----------------------------------------------------------------------------------------
# LRU list (FIFO by arrival, O-6)
# ----------------------------------------------------------------------------------------


@_kernel
def _lru_compact(lru, pstate, S):
    """Drop the entries that are not live, keeping the order; the cursor moves to the first
    live entry at or after it (or the tail). The list is a ring (positions are monotonic,
    taken modulo the power-of-two capacity), so this runs only when it is full of entries
    between head and tail, not each time the tail wraps."""
    lm = S[P_LCAP] - 1
    head = S[S_LRU_HEAD]
    tail = S[S_LRU_TAIL]
    cur = S[S_LRU_CUR]
    n = 0
    new_cur = -1
    check = S[S_LRU_STALE] != 0
    # (S_LRU_STALE == 0: no page left the list with its slot unknown since the last
    # compaction, so every entry that is not a tombstone is live)
    for s in range(head, tail):
        if s == cur:
            new_cur = n
        e = lru[_u(s & lm)]
        if e >= 0:
            if check and not _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e):
                continue
            lru[_u((head + n) & lm)] = e
            n += 1
    if new_cur < 0:
        new_cur = n
    S[S_LRU_TAIL] = head + n
    S[S_LRU_CUR] = head + new_cur
    S[S_LRU_STALE] = 0
    S[S_LRU_SCAN] = head
    if check:
        for i in range(S[P_LCAP], S[P_LCAP] + STALE_BUCKETS):
            lru[_u(i)] = 0


@_kernel
def _lru_live(lru, pstate, S, s):
    e = lru[_u(s & (S[P_LCAP] - 1))]
    if e < 0:
        return False
    return _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e)


@_kernel
def _lru_remove_unknown(lru, pstate, S, p):
    """Remove page p (IN_GPU) from the list where its slot is unknown: bump its generation,
    which leaves its entry stale (it no longer matches the page's generation)."""
    if _cursor_page(lru, pstate, S) == p:
        S[S_LRU_CUR] = S[S_LRU_HEAD]  # removing the cursor's page resets it (§8.1)
    st = np.int64(pstate[_u(p)])
    g, _compacted = _new_generation(lru, pstate, S, p, st >> GEN_SHIFT)
    pstate[_u(p)] = (st & 15) | (g << GEN_SHIFT)


@_kernel
def _cur_norm(lru, lm, pstate, c, tail):
    """The first position at or after c that holds a live entry, else the tail (END).

    DeepUM's cursor is, in the artifact, a `std::list` iterator: on a live page, or END
    (§8). A ring position that only dead entries follow up to the tail is END there, which
    a page appended later stays behind; and removing the first live page after a position
    removes the iterator's page (§8.1: the cursor resets). So under DeepUM the cursor is
    brought onto its live entry (this) before an append (the callers of `_lru_append`,
    `_batch_move`) and before the removal tests (`_cursor_page`). Under the LRU policies it is never observed.
    (Until this, a cursor left after dead entries took a later arrival as its page; no
    output of the equivalence runs, the artifact's models or Figure 11 changed.) Inside
    `_lru_append` this made the LRU policies' runs slower (Inceptionv3-1536 Base UVM by about
    a fifth: the same code, compiled otherwise), so its DeepUM callers call it first."""
    while c < tail:
        e = np.int64(lru[_u(c & lm)])
        if e < 0:
            c -= e
            continue
        if _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e):
            return c
        c += 1
    return tail


@_kernel
def _cursor_page(lru, pstate, S):
    """The page of the cursor's LRU entry if that entry is live, else -1."""
    if S[P_DEEPUM]:
        S[S_LRU_CUR] = _cur_norm(lru, S[P_LCAP] - 1, pstate, S[S_LRU_CUR], S[S_LRU_TAIL])
    cur = S[S_LRU_CUR]
    if cur < S[S_LRU_TAIL] and _lru_live(lru, pstate, S, cur):
        return lru[_u(cur & (S[P_LCAP] - 1))] >> GEN_SHIFT
    return -1


@_kernel
def _new_generation(lru, pstate, S, p, g0):
    """The generation that page p (live, generation g0) takes on leaving the list where its
    slot is unknown, recording its entry as stale; and whether the list was compacted.

    Stale entries are recorded per page bucket since the last compaction, as a 16-bit mask
    of the generations they carry (one word per bucket: a page's bucket is one load, and
    the consecutive pages of a tensor removed one after another touch consecutive words);
    an old entry of p could look live again only if p took a generation that one of its
    stale entries carries. p takes the first generation after its own that no stale entry
    of its bucket carries; only when all are taken is the list compacted first (p still
    live, so that every stale entry of p goes), after which any other generation is free."""
    w = S[P_LCAP] + (p & (STALE_BUCKETS - 1))
    g = _free_generation(np.int64(lru[_u(w)]), g0)
    compacted = g < 0
    if compacted:
        _lru_compact(lru, pstate, S)
        g = (g0 + 1) & GEN_MASK
    lru[_u(w)] = np.int64(lru[_u(w)]) | (1 << g0)
    S[S_LRU_STALE] += 1
    return g, compacted


@_kernel
def _free_generation(mask, g0):
    """The first generation after g0 (cyclically, g0 excluded) whose bit in mask is clear,
    or -1 if there is none."""
    g = (g0 + 1) & GEN_MASK
    while g != g0:
        if not (mask >> g) & 1:
            return g
        g = (g + 1) & GEN_MASK
    return -1


@_kernel
def _lru_advance_head(lru, pstate, S):
    """The head past the entries that are not live. A tombstone is -1, or -d at the first
    slot of a run of d tombstones that `_batch_move` took at once (within one turn of the
    ring): the run is jumped. A tombstone stays one until a compaction, which rewrites every
    position below the new tail, so a run never covers a live entry nor passes the tail.
    The kernel-start scan jumps them too; every other reader (the victim scans, the
    compaction, `_lru_live`) takes any negative entry as dead: the victim scans start at the
    last victim or just past it, where a recorded run is rarely ahead. (This walk, over a ring too large
    for the caches, was most of `_kernel_begin`'s time under DeepUM.)"""
    h = S[S_LRU_HEAD]
    t = S[S_LRU_TAIL]
    lm = S[P_LCAP] - 1
    while h < t:
        e = np.int64(lru[_u(h & lm)])
        if e < 0:
            h -= e
        elif _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e):
            break
        else:
            h += 1
    S[S_LRU_HEAD] = h
    if S[S_LRU_CUR] < h:
        S[S_LRU_CUR] = h


# ----------------------------------------------------------------------------------------
# The LRU list as extents (P_XLRU: `lru`, `prefetch_lru`, bulk engine; issue 23)
#
# For the LRU policies the victim is the first page in list order that is resident and not in
# transfer (§8.1; benchmarks/results/page-engine-bulk-journal.md, "When are LRU compactions
# observable?", proves the ring's cursor and compactions unobservable for them), and a GPU
# page in transfer leaves the GPU before its flag clears. So the list is kept as exactly the
# GPU pages not in transfer, in arrival order: a doubly linked list of extents (runs of
# consecutive pages of one tensor that arrived one after another), each also in a chain of its
# tensor's extents (head in tt[T, TT_XH]). A page joins at the tail when it takes a GPU frame,
# and leaves when it is a victim (at the head), when a pre-eviction flags it in transfer, and
# when it leaves the GPU otherwise (pre-evicted or pre-deallocated: its tensor's chain finds
# it). No stale entries, no generations, no compactions; the victim search is a read of the
# head. The records live in `lru` (int64, XW words each: first page, end page, tensor,
# previous, next, previous and next in the tensor's chain); freed ones are chained through
# X_NEXT from S[S_X_FREE], and the records from S[S_X_BUMP] on were never used (so that the
# wrapper's array, `np.empty`, takes memory only as records are first taken, and a larger
# array costs nothing). The engine pauses while fewer than P_XMARGIN records are free (as many
# as one busy tick can take), and the wrapper grows the array. tt[T, TT_RES] equals the pages
# of T's extents.
# ----------------------------------------------------------------------------------------

XW = 8
X_LO = 0
X_HI = 1
X_T = 2
X_PREV = 3
X_NEXT = 4
X_TPREV = 5
X_TNEXT = 6


@_kernel
def _x_new(lru, S, tt, T, lo, hi, after):
    """A new extent [lo, hi) of tensor T, linked after extent `after` (-1: at the head of the
    list), and at the head of T's chain. Returns its record (-1 when none is free: E_EXTENTS)."""
    i = S[S_X_FREE]
    if i >= 0:
        S[S_X_FREE] = lru[_u(i * XW + X_NEXT)]
    else:
        i = S[S_X_BUMP]
        if i >= lru.shape[0] // XW:
            S[S_ERROR] = E_EXTENTS
            return -1
        S[S_X_BUMP] = i + 1
    b = i * XW
    S[S_X_NFREE] -= 1
    lru[_u(b + X_LO)] = lo
    lru[_u(b + X_HI)] = hi
    lru[_u(b + X_T)] = T
    if after >= 0:
        nx = lru[_u(after * XW + X_NEXT)]
        lru[_u(after * XW + X_NEXT)] = i
    else:
        nx = S[S_X_HEAD]
        S[S_X_HEAD] = i
    lru[_u(b + X_PREV)] = after
    lru[_u(b + X_NEXT)] = nx
    if nx >= 0:
        lru[_u(nx * XW + X_PREV)] = i
    else:
        S[S_X_TAIL] = i
    h = tt[_u(T), TT_XH]
    lru[_u(b + X_TPREV)] = -1
    lru[_u(b + X_TNEXT)] = h
    if h >= 0:
        lru[_u(h * XW + X_TPREV)] = i
    tt[_u(T), TT_XH] = i
    return i


@_kernel
def _x_free(lru, S, tt, i):
    """Unlink extent i from the list and from its tensor's chain; its record becomes free."""
    b = i * XW
    pv = lru[_u(b + X_PREV)]
    nx = lru[_u(b + X_NEXT)]
    if pv >= 0:
        lru[_u(pv * XW + X_NEXT)] = nx
    else:
        S[S_X_HEAD] = nx
    if nx >= 0:
        lru[_u(nx * XW + X_PREV)] = pv
    else:
        S[S_X_TAIL] = pv
    tp = lru[_u(b + X_TPREV)]
    tn = lru[_u(b + X_TNEXT)]
    if tp >= 0:
        lru[_u(tp * XW + X_TNEXT)] = tn
    else:
        tt[_u(lru[_u(b + X_T)]), TT_XH] = tn
    if tn >= 0:
        lru[_u(tn * XW + X_TPREV)] = tp
    lru[_u(b + X_NEXT)] = S[S_X_FREE]
    S[S_X_FREE] = i
    S[S_X_NFREE] += 1


@_kernel
def _x_take(lru, S, tt, n):
    """The first n pages of the list (all of its head extent's, n >= 1) leave it."""
    h = S[S_X_HEAD]
    lo = lru[_u(h * XW + X_LO)] + n
    if lo >= lru[_u(h * XW + X_HI)]:
        _x_free(lru, S, tt, h)
    else:
        lru[_u(h * XW + X_LO)] = lo


@_kernel_page
def _x_free_join(lru, S, tt, T, i):
    """`_x_free` of extent i (tensor T's), then its two neighbours in the list joined into one
    when they are another tensor's consecutive pages: nothing lies between them any more, so
    the list holds the same pages in the same order, in one extent fewer (the arrivals of two
    tensors that took turns tick by tick leave one extent each, not one a turn, once one of
    them leaves). T's own extents are never joined here, so its chain, which `_x_remove` is
    walking, loses only i."""
    b = i * XW
    pv = lru[_u(b + X_PREV)]
    nx = lru[_u(b + X_NEXT)]
    _x_free(lru, S, tt, i)
    if pv >= 0 and nx >= 0:
        pb = pv * XW
        nb = nx * XW
        U = lru[_u(pb + X_T)]
        if U != T and lru[_u(nb + X_T)] == U and lru[_u(pb + X_HI)] == lru[_u(nb + X_LO)]:
            lru[_u(pb + X_HI)] = lru[_u(nb + X_HI)]
            if S[S_X_CUR] == nx:
                S[S_X_CUR] = pv
            _x_free(lru, S, tt, nx)


@_kernel
def _x_remove(lru, S, tt, T, a, b):
    """Tensor T's pages a .. b - 1 that are in the list leave it (its chain finds them).
    Under DeepUM, removing the cursor's page resets the cursor to the list's head (§8.1)."""
    c = S[S_LRU_CUR]
    reset = S[P_DEEPUM] != 0 and a <= c and c < b
    i = tt[_u(T), TT_XH]
    while i >= 0:
        nx = lru[_u(i * XW + X_TNEXT)]
        lo = lru[_u(i * XW + X_LO)]
        hi = lru[_u(i * XW + X_HI)]
        if hi > a and lo < b:
            if a <= lo and hi <= b:
                _x_free_join(lru, S, tt, T, i)
            elif lo < a and hi > b:
                lru[_u(i * XW + X_HI)] = a
                _x_new(lru, S, tt, T, b, hi, i)  # the rest keeps its place
            elif lo < a:
                lru[_u(i * XW + X_HI)] = a
            else:
                lru[_u(i * XW + X_LO)] = b
        i = nx
    if reset:
        h = S[S_X_HEAD]
        S[S_LRU_CUR] = lru[_u(h * XW + X_LO)] if h >= 0 else -1
        S[S_X_CUR] = h


@_kernel
def _gpu_states(pstate, p, n):
    """Pages p .. p + n - 1 become IN_GPU, their transfer and wait-set flags cleared; returns
    how many were in the wait set. Eight states a word (the states' bytes read as uint64
    words; the wait bits of a word summed by a multiplication), then page by page. (The loop
    of `_flag_pages` with a mask: one setter for both, 4ac53b5, made ResNet152-1280 Base UVM
    6 % slower in 5 pairs, so each keeps its own.)"""
    nw = 0
    q = p
    if n >= 8:
        k = n // 8
        w = pstate[p : p + k * 8].view(np.uint64)
        keep = ~(np.uint64(LOC_MASK | F_TRANSFER | F_WAIT) * _BYTES_ONE)
        gpu = np.uint64(IN_GPU) * _BYTES_ONE
        acc = np.uint64(0)
        for i in range(k):
            x = w[_u(i)]
            acc += (((x >> np.uint64(3)) & _BYTES_ONE) * _BYTES_ONE) >> np.uint64(56)  # (F_WAIT)
            w[_u(i)] = (x & keep) | gpu
        nw = np.int64(acc)
        q = p + k * 8
    for pp in range(q, p + n):
        st = np.int64(pstate[_u(pp)])
        nw += (st & F_WAIT) // F_WAIT
        pstate[_u(pp)] = (st & ~(LOC_MASK | F_TRANSFER | F_WAIT)) | IN_GPU
    return nw


@_kernel
def _x_arrive(lru, S, tt, pstate, T, p, n, wait):
    """Pages p .. p + n - 1 of tensor T (none in the GPU) take GPU frames, in this order: IN_GPU,
    transfer and wait-set flags cleared, at the list's tail (`_lru_append` for extents; the
    tail extent grows when they continue it). Returns the wait-set size after them.

    Lazy states (TT_LZ, P_LAZY): pages that arrive in order from TT_LA on are counted there,
    their bytes left 0 (they read as IN_GPU below it: `_lz_state`), none of them in the wait
    set (a fault scan writes a lazy tensor's states out first); any other arrival of such a
    tensor (a page that left and comes back) is written, and TT_LZ set to 2."""
    lz = tt[_u(T), TT_LZ]
    if lz != 0 and p == tt[_u(T), TT_LA]:
        tt[_u(T), TT_LA] = p + n
        nw = 0
    else:
        if lz != 0:
            tt[_u(T), TT_LZ] = 2
            S[S_LZ_BACK] += 1
        nw = _gpu_states(pstate, p, n)
    tl = S[S_X_TAIL]
    if tl >= 0 and lru[_u(tl * XW + X_HI)] == p and lru[_u(tl * XW + X_T)] == T:
        lru[_u(tl * XW + X_HI)] = p + n
    else:
        _x_new(lru, S, tt, T, p, p + n, tl)
    return wait - nw


# DeepUM on extents (P_XLRU with P_DEEPUM; bulk engine, runs without pre-evictions). The
# artifact's cursor is a list iterator (§8.2): a page of the list, or END. It is kept as that
# page (-1: END) in S_LRU_CUR (the busy tick's `lru_cur`), with the record holding it in
# S_X_CUR as a hint. Non-PF victims are taken from the cursor, skipping the extents of window
# tensors; PF victims are the list's first pages (no GPU page is in transfer without
# pre-evictions); a victim that is the cursor's page moves it to the next page of the list,
# and removing the cursor's page otherwise resets it to the head (`_x_remove`).


@_kernel
def _xd_rec(lru, S, tt, srt, c):
    """The record holding page c (in the list): S_X_CUR when it does, else found in the chain
    of c's tensor (and kept in S_X_CUR)."""
    r = S[S_X_CUR]
    if r >= 0 and lru[_u(r * XW + X_LO)] <= c and c < lru[_u(r * XW + X_HI)]:
        return r
    i = _tpos(srt, 0, c)
    r = tt[srt[1, _u(i)], TT_XH]
    while r >= 0:
        if lru[_u(r * XW + X_LO)] <= c and c < lru[_u(r * XW + X_HI)]:
            break
        r = lru[_u(r * XW + X_TNEXT)]
    if r < 0:
        S[S_ERROR] = E_EXTENTS
    S[S_X_CUR] = r
    return r


@_kernel
def _xd_after(lru, S, r, e):
    """The page of the list after record r's pages before e (lo(r) < e <= hi(r)), -1 (END) if
    none; read before those pages leave. Keeps its record in S_X_CUR when it is the next one."""
    if e < lru[_u(r * XW + X_HI)]:
        S[S_X_CUR] = r
        return e
    n = lru[_u(r * XW + X_NEXT)]
    S[S_X_CUR] = n
    if n < 0:
        return -1
    return lru[_u(n * XW + X_LO)]


@_kernel
def _xd_take(lru, S, tt, r, v, n):
    """Pages v .. v + n - 1 of record r (within it) leave the list."""
    b = r * XW
    lo = lru[_u(b + X_LO)]
    hi = lru[_u(b + X_HI)]
    if v == lo:
        if v + n >= hi:
            _x_free(lru, S, tt, r)
        else:
            lru[_u(b + X_LO)] = v + n
    elif v + n >= hi:
        lru[_u(b + X_HI)] = v
    else:
        lru[_u(b + X_HI)] = v
        _x_new(lru, S, tt, lru[_u(b + X_T)], v + n, hi, r)


@_kernel
def _xd_victim_np(lru, S, tt, srt, c):
    """DeepUM's non-PF victim on extents: the first page from the cursor page c (-1: END)
    whose tensor is outside the window. Returns its record and page (-1, -1: none)."""
    if c < 0:
        return -1, -1
    r = _xd_rec(lru, S, tt, srt, c)
    v = c
    while r >= 0:
        if tt[_u(lru[_u(r * XW + X_T)]), TT_WIN] == 0:
            return r, v
        r = lru[_u(r * XW + X_NEXT)]
        if r >= 0:
            v = lru[_u(r * XW + X_LO)]
    return -1, -1


@_kernel
def _xd_victim(dnp, lru, S, tt, srt, cur, dum_end):
    """A DeepUM victim on extents (dnp: non-PF, from the cursor; else the list's first page):
    its record and page (-1, -1: none)."""
    if dnp:
        if dum_end != 0:
            return -1, -1
        return _xd_victim_np(lru, S, tt, srt, cur)
    h = S[S_X_HEAD]
    if h < 0:
        return -1, -1
    return h, lru[_u(h * XW + X_LO)]


@_kernel
def _xd_evict(dnp, lru, S, tt, r, v, n, cur):
    """Victims v .. v + n - 1 of record r leave the list: the cursor moves past them when it
    was their search's start (non-PF) or on one of them (PF). Returns the cursor."""
    if dnp or (cur >= v and cur < v + n):
        cur = _xd_after(lru, S, r, v + n)
    _xd_take(lru, S, tt, r, v, n)
    return cur
