"""Numba kernels of G10's Smart Tensor Migration planner (planner spec §5.3, §5.4, §5.7).

Everything here takes plain arrays and scalars; `g10fast.planner.g10.plan_g10` validates the
inputs, derives the parameters and wraps these kernels.

Main-loop design (spec §8): G10 re-sorts every interval on every iteration with a comparator
that walks bandwidth arrays, O(I² log I · K). Here every interval's score ("area") is kept in
a lazy max-heap. An area never grows while the loop runs: the GPU estimate only decreases
(so the indicator `est[k] > capacity` only turns off) and the bandwidth lanes only fill up
(so the half-transfer windows only shrink). A stale key is therefore an upper bound: pop the
top, recompute its area, and it is the true maximum if the area is unchanged, otherwise push
it back. The one exception is O-5's negative `-S·T_total` term of looped intervals, which
disappears when kernel 0's indicator turns off; the heap is rebuilt once then. Areas are
integer cycle sums read from prefix sums of `cycles[k]·[est[k] > capacity]` (rebuilt after
each eviction, O(K)), so equal areas are exactly equal and ties fall to time×size, then to
creation order.

Hint rows are int64 (issued kernel, tensor, from, to) in emission order. The kernels that
only other kernels call are link-only (`kernel_nonrt_internal`, g10fast.jit): LLVM optimises
and compiles them once, inside the three that Python calls (`pass_b`, `main_loop`,
`place_prefetches`). They allocate nothing (the sort's work stacks come from its caller), so
they are compiled without reference counting: with it, the increments and decrements wrapped
around each array argument of each call (`area_of`, `cxx_sort`, ...) took about a fifth of
SENet154-1024's plan.
"""

from __future__ import annotations

import numpy as np

from g10fast import aot
from g10fast.jit import kernel, kernel_nonrt_internal
from g10fast.locations import (  # noqa: F401  (re-exported)
    IN_CPU,
    IN_GPU,
    IN_SSD,
    NOT_KNOWN,
    NOT_PRESENT,
)

# per-interval decisions (MigrationPlan.iv_decision)
# fmt: off
D_NONE = 0          # never reached by the main loop
D_FITS = 1          # the estimate was under the target over the whole interval
D_SPAN1 = 2         # one kernel long: never migrated
D_SHORT = 3         # shorter than the host round trip (O-11: not processed in compat mode)
D_SSD = 4           # evicted to the SSD
D_HOST = 5          # evicted to host memory
D_NO_BW = 6         # a candidate, but no room for a round trip in the bandwidth lanes
D_HOST_FULL = 7     # would go to host memory, but host memory has no room
D_NO_SLOT = 8       # looped: the prefetch would be issued at the eviction kernel
D_GDS_SSD = 9       # §5.8: evicted to the SSD without a prefetch (G10GDS*)
# fmt: on
DECISION_NAMES = (
    "none",
    "fits",
    "span1",
    "short",
    "ssd",
    "host",
    "no_bandwidth",
    "host_full",
    "no_slot",
    "gds_ssd",
)

# lanes of the bandwidth arrays
# fmt: off
L_RSSD = 0          # SSD -> GPU (read)
L_WSSD = 1          # GPU -> SSD (write)
L_RPCIE = 2         # host -> GPU
L_WPCIE = 3         # GPU -> host

# option bits
O_O5 = 1            # O-5 looped-area index bug
O_O11 = 2           # O-11 a too-short top interval stalls the loop
O_O12 = 4           # O-12 an empty ideal write window counts as crowded
O_O13 = 8           # O-13 cumulative PCIe spill into the SSD lane
O_O14 = 16          # O-14 host memory reserved even when nothing was evicted
O_O16 = 32          # O-16 prefetch hoisting ignores the tensor's own size
O_ZERO_BREAK = 64   # O-10 (heap mode) stop when the best area is 0
O_CXX_SORT = 128    # O-10 replay G10's std::sort of the interval list on every iteration
# fmt: on


@kernel_nonrt_internal
def bisect_right(a, x):
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@kernel_nonrt_internal
def _max(a):
    m = a[0]
    for i in range(1, a.shape[0]):
        if a[i] > m:
            m = a[i]
    return m


# ---------------------------------------------------------------------------------------------
# §5.3 pre-allocation / pre-deallocation (Pass B; Pass A has no effect, O-9)


@kernel
def pass_b(
    time_us, size, is_global, birth, death, total_mem, target, malloc_uspB, early_exit, emit, est, hints, nh
):
    """est[:] = total_mem, then per tensor 1..T-1 (tensor 0 is skipped): a pre-alloc before
    its birth (malloc lead time) and a pre-dealloc at its death (birth + 1 if never read),
    with est lowered outside [pre-alloc, death). O-3: stops as soon as est fits the target.
    Returns (hints written, tensors visited)."""
    K = est.shape[0]
    T = size.shape[0]
    for k in range(K):
        est[k] = total_mem
    visited = 0
    for t in range(1, T):
        if early_exit and _max(est) <= target:
            break
        visited += 1
        if is_global[t] or birth[t] < 0:
            continue
        b = birth[t]
        S = size[t]
        start = time_us[b] - S * malloc_uspB
        if start < 0:
            j = 0  # allocated from kernel 0: nothing before it to lower (cf. O-2)
        else:
            j = bisect_right(time_us[: b + 1], start) - 1
            if j < 0:
                j = 0
            for k in range(j):
                est[k] -= S
        if emit:
            hints[nh, 0] = j
            hints[nh, 1] = t
            hints[nh, 2] = NOT_KNOWN
            hints[nh, 3] = IN_GPU
            nh += 1
        d = death[t] if death[t] != -1 else b + 1
        if emit:
            hints[nh, 0] = d
            hints[nh, 1] = t
            hints[nh, 2] = NOT_KNOWN
            hints[nh, 3] = NOT_PRESENT
            nh += 1
        for k in range(d, K):
            est[k] -= S
    return nh, visited


# ---------------------------------------------------------------------------------------------
# bandwidth lanes: cap[4, K] float64, bw[4, K] float64 (estimation), full[4, K] bool


@kernel_nonrt_internal
def walk_forward(cap, bw, full, lane, size, frm):
    """gpu2*_BWgiveIndx: first kernel from `frm` by which `size` bytes fit in the free room.
    `rest` is an integer in G10, so each step truncates toward zero."""
    K = cap.shape[1]
    rest = np.int64(size)
    k = frm
    while True:
        if not full[lane, k]:
            rest = np.int64(rest - (cap[lane, k] - bw[lane, k]))
        if rest <= 0 or k == K - 1:
            return k
        k += 1


@kernel_nonrt_internal
def walk_backward(cap, bw, full, lane, size, needed):
    """*2gpu_BWgiveIndx: the latest kernel before `needed` from which `size` bytes arrive."""
    rest = np.int64(size)
    k = needed - 1
    while True:
        if not full[lane, k]:
            rest = np.int64(rest - (cap[lane, k] - bw[lane, k]))
        if rest <= 0 or k <= 0:
            return k
        k -= 1


# The walks in closed form (main loop, O-10's sort keys): a walk's integer `rest` drops by
# ceil(room) at each kernel whose lane is not full (room = cap - bw; `rest - room` truncated
# toward zero is `rest - ceil(room)` while it stays positive, and it reaches <= 0 exactly
# when rest <= ceil(room)), so a walk stops at the first kernel where the lane's prefix sum
# of ceil(room) over the kernels walked reaches `size`: a binary search. The float
# subtraction rounds to the same integer unless room lies above an integer by less than half
# a unit in the last place of `rest` (at most 2**-14 for rest < 2**40); such kernels
# (fraction under 2**-12, and any room that is negative, huge or not a number) are counted
# in U, and a walk over one of them, or with |size| >= 2**40, steps as before. (With the sort's
# zero parts: main_loop 966 -> 322 M instructions in a SENet154-1024 G10 run, same plans.)
_WALK_FAST_MAX = 1 << 40
_WALK_UNSAFE_FRAC = 2.0**-12


@kernel_nonrt_internal
def lane_prefix(cap, bw, full, lane, C, U, frm):
    """C[k + 1] = C[k] + ceil(cap - bw) at kernel k of `lane` (0 where the lane is full or
    the room is unsafe: C stays nondecreasing), U[k + 1] = U[k] + [the room is unsafe], for
    k from `frm` on (C[0] = U[0] = 0 and the entries up to frm kept)."""
    K = cap.shape[1]
    for k in range(frm, K):
        c = np.int64(0)
        u = np.int64(0)
        if not full[lane, k]:
            room = cap[lane, k] - bw[lane, k]
            if room >= 0.0 and room < 2.0**52:
                fl = np.floor(room)
                f = room - fl
                c = np.int64(fl) + (1 if f != 0.0 else 0)
                if f != 0.0 and f < _WALK_UNSAFE_FRAC:
                    u = 1
            else:
                u = 1
        C[k + 1] = C[k] + c
        U[k + 1] = U[k] + u


@kernel_nonrt_internal
def walk_forward_p(cap, bw, full, lane, size, frm, C, U):
    """`walk_forward` from the lane's prefix sums C, U (`lane_prefix`): the same kernel."""
    K = cap.shape[1]
    if size >= _WALK_FAST_MAX or size <= -_WALK_FAST_MAX:
        return walk_forward(cap, bw, full, lane, size, frm)
    # (the first j > frm with C[j] >= C[frm] + size, C being nondecreasing integers: the walk
    # stops at kernel j - 1, or at the last kernel when there is none)
    j = max(bisect_right(C, C[frm] + size - 1), frm + 1)
    k = K - 1 if j > K else j - 1
    if U[k + 1] != U[frm]:
        return walk_forward(cap, bw, full, lane, size, frm)
    return k


@kernel_nonrt_internal
def walk_backward_p(cap, bw, full, lane, size, needed, C, U):
    """`walk_backward` from the lane's prefix sums C, U (`lane_prefix`): the same kernel."""
    if needed <= 0 or size >= _WALK_FAST_MAX or size <= -_WALK_FAST_MAX:
        return walk_backward(cap, bw, full, lane, size, needed)
    # (the last k < needed with C[k] <= C[needed] - size: the walk stops there, or at 0)
    k = max(min(bisect_right(C, C[needed] - size) - 1, needed - 1), 0)
    if U[needed] != U[k]:
        return walk_backward(cap, bw, full, lane, size, needed)
    return k


@kernel_nonrt_internal
def sim_ssd(cap, bw, full, ssd, pcie, size, frm):
    """gpu2ssd_BWsim / ssd2gpu_BWsim: book `size` bytes on an SSD lane from `frm` on, and the
    same bytes on the PCIe lane of the same direction. Returns the last kernel it changed
    (or looked at): nothing outside frm .. that kernel changes."""
    K = cap.shape[1]
    rest = np.int64(size)
    k = frm
    while rest > 0 and k < K:
        if not full[ssd, k]:
            room = cap[ssd, k] - bw[ssd, k]
            if rest + bw[ssd, k] > cap[ssd, k]:
                rest = np.int64(rest - room)
                bw[pcie, k] += room
                bw[ssd, k] = cap[ssd, k]
                full[ssd, k] = True
            else:
                bw[ssd, k] += rest
                bw[pcie, k] += rest
                rest = -1
            if bw[pcie, k] >= cap[pcie, k]:
                full[pcie, k] = True
        if rest <= 0 or k == K - 1:
            break
        k += 1
    return k


@kernel_nonrt_internal
def sim_pcie(cap, bw, full, pcie, ssd, size, frm, o13):
    """gpu2pcie_BWsim / pcie2gpu_BWsim: book host traffic; load above cap_pcie - cap_ssd
    spills into the SSD lane. O-13 (o13): the whole cumulative excess is added each call.
    Returns the last kernel it changed (or looked at), as `sim_ssd`."""
    K = cap.shape[1]
    rest = np.int64(size)
    k = frm
    while rest > 0 and k < K:
        if not full[pcie, k]:
            if rest + bw[pcie, k] > cap[pcie, k]:
                rest = np.int64(rest - (cap[pcie, k] - bw[pcie, k]))
                bw[pcie, k] = cap[pcie, k]
                full[pcie, k] = True
                bw[ssd, k] = cap[ssd, k]
                full[ssd, k] = True
            else:
                before = bw[pcie, k]
                bw[pcie, k] += rest
                rest = -1
                over = bw[pcie, k] - (cap[pcie, k] - cap[ssd, k])
                if over >= 0:
                    if not o13:
                        over = min(over, bw[pcie, k] - before)
                    bw[ssd, k] += over
                    if bw[ssd, k] >= cap[ssd, k]:
                        bw[ssd, k] = cap[ssd, k]
                        full[ssd, k] = True
        if rest <= 0 or k == K - 1:
            break
        k += 1
    return k


@kernel_nonrt_internal
def book_round_trip(cap, bw, full, host, size, pf, s, o13, changed):
    """Book an eviction's round trip on the host lanes (host) or the SSD lanes: the prefetch
    from kernel pf on, the eviction from kernel s on. Widens `changed` to the kernels whose
    lanes the bookings changed, by direction: the write lanes (L_WSSD, L_WPCIE) changed[0] ..
    changed[1], the read lanes (L_RSSD, L_RPCIE) changed[2] .. changed[3] (a booking in one
    direction, a spill included, changes that direction's lanes only)."""
    if host:
        k1 = sim_pcie(cap, bw, full, L_RPCIE, L_RSSD, size, pf, o13)
        k2 = sim_pcie(cap, bw, full, L_WPCIE, L_WSSD, size, s, o13)
    else:
        k1 = sim_ssd(cap, bw, full, L_RSSD, L_RPCIE, size, pf)
        k2 = sim_ssd(cap, bw, full, L_WSSD, L_WPCIE, size, s)
    changed[0] = min(changed[0], s)
    changed[1] = max(changed[1], k2)
    changed[2] = min(changed[2], pf)
    changed[3] = max(changed[3], k1)


# ---------------------------------------------------------------------------------------------
# §5.4 main loop


@kernel_nonrt_internal
def _prefix(est, line, cyc, P1, P2):
    """P1[x] = Σ_{k<x} cyc[k]·[est[k] > line]; P2[x] = Σ_{1<=m<x} cyc[m-1]·[est[m] > line]."""
    K = est.shape[0]
    P1[0] = 0
    P2[0] = 0
    P2[1] = 0
    for k in range(K):
        on = est[k] > line
        P1[k + 1] = P1[k] + (cyc[k] if on else 0)
        if k >= 1:
            P2[k + 1] = P2[k] + (cyc[k - 1] if on else 0)


@kernel_nonrt_internal
def area_of(i, iv_s, iv_e, iv_looped, size, cap, bw, full, P1, P2, est, line, total_cyc, o5):
    """area_can_reduce (spec §5.4) in bytes × cycles: S × the over-capacity kernel time that
    evicting the interval would cover; bandwidth half-windows for non-looped intervals."""
    K = est.shape[0]
    s = iv_s[i]
    e = iv_e[i]
    S = size[i]
    if iv_looped[i]:
        if o5:
            # O-5: time index mod K+1, memory index mod K: a -S·T_total term at j = K when
            # kernel 0 is over capacity, then every kernel weighted by its predecessor's time
            c = (P1[K] - P1[s]) + (P2[e] - P2[1] if e >= 1 else 0)
            if e >= 1 and est[0] > line:
                c -= total_cyc
        else:
            c = (P1[K] - P1[s]) + P1[e]
        return float(S) * float(c)
    half = S // 2
    lo = walk_forward(cap, bw, full, L_WSSD, half, s)
    hi = walk_backward(cap, bw, full, L_RSSD, half, e)
    if hi <= lo:
        return 0.0
    return float(S) * float(P1[hi] - P1[lo])


@kernel_nonrt_internal
def _better(a1, t1, i1, a2, t2, i2):
    if a1 != a2:
        return a1 > a2
    if t1 != t2:
        return t1 > t2
    return i1 < i2


@kernel_nonrt_internal
def _push(ha, ht, hi, n, a, t, i):
    j = n
    ha[j] = a
    ht[j] = t
    hi[j] = i
    while j > 0:
        p = (j - 1) // 2
        if _better(ha[j], ht[j], hi[j], ha[p], ht[p], hi[p]):
            ha[j], ha[p] = ha[p], ha[j]
            ht[j], ht[p] = ht[p], ht[j]
            hi[j], hi[p] = hi[p], hi[j]
            j = p
        else:
            break
    return n + 1


@kernel_nonrt_internal
def _pop(ha, ht, hi, n):
    n -= 1
    ha[0] = ha[n]
    ht[0] = ht[n]
    hi[0] = hi[n]
    j = 0
    while True:
        l = 2 * j + 1
        r = l + 1
        b = j
        if l < n and _better(ha[l], ht[l], hi[l], ha[b], ht[b], hi[b]):
            b = l
        if r < n and _better(ha[r], ht[r], hi[r], ha[b], ht[b], hi[b]):
            b = r
        if b == j:
            break
        ha[j], ha[b] = ha[b], ha[j]
        ht[j], ht[b] = ht[b], ht[j]
        hi[j], hi[b] = hi[b], hi[j]
        j = b
    return n


@kernel_nonrt_internal
def _rebuild(
    ha,
    ht,
    hi,
    processed,
    iv_s,
    iv_e,
    iv_looped,
    iv_size,
    iv_tsz,
    cap,
    bw,
    full,
    P1,
    P2,
    est,
    line,
    total_cyc,
    o5,
):
    n = 0
    for i in range(iv_s.shape[0]):
        if not processed[i]:
            a = area_of(i, iv_s, iv_e, iv_looped, iv_size, cap, bw, full, P1, P2, est, line, total_cyc, o5)
            n = _push(ha, ht, hi, n, a, iv_tsz[i], i)
    return n


# ---------------------------------------------------------------------------------------------
# O-10: G10's selection is `std::sort(interval_list)` with the area comparator on every
# iteration, in place, and the top element is taken. Which of several zero-area intervals comes
# first depends on the permutation the previous sorts left and on libstdc++'s introsort
# (median-of-three quicksort to runs of 16, heap sort past 2·log2(n) levels, final insertion
# sort). These kernels replay that sort on a persistent permutation (cf. plan.cxx_sort_order,
# the same algorithm for plain keys).


@kernel_nonrt_internal
def _cless(x, y, ka, kt):
    """The area comparator: larger area first; equal non-zero areas by larger time×size."""
    a = ka[x]
    b = ka[y]
    if a != 0.0 and b != 0.0 and a == b:
        return kt[x] > kt[y]
    return a > b


@kernel_nonrt_internal
def _adjust_heap(perm, first, hole, length, value, ka, kt):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _cless(perm[first + child], perm[first + child - 1], ka, kt):
            child -= 1
        perm[first + hole] = perm[first + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        perm[first + hole] = perm[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and _cless(perm[first + parent], value, ka, kt):
        perm[first + hole] = perm[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    perm[first + hole] = value


@kernel_nonrt_internal
def _heap_sort(perm, first, last, ka, kt):
    length = last - first
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            _adjust_heap(perm, first, parent, length, perm[first + parent], ka, kt)
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        v = perm[last]
        perm[last] = perm[first]
        _adjust_heap(perm, first, 0, last - first, v, ka, kt)


@kernel_nonrt_internal
def cxx_sort(perm, ka, kt, st_f, st_l, st_d):
    """libstdc++'s std::sort of `perm` (interval ids) with `_cless`, in place; st_f, st_l and
    st_d are the caller's work stacks (at least len(perm) + 64 entries each: the sort
    allocates nothing, so it runs without reference counting).

    A part whose areas are all zero (equal to each other under `_cless`: the processed
    intervals and those without a window, most of the list in the loop's later iterations)
    is rearranged without comparisons, as the introsort rearranges any part whose elements
    are all equal: the median of three is the middle element (swapped to the front), the
    unguarded partition stops on every element, so it swaps the rest end for end (a
    reversal) and cuts it in the middle; both halves are all zero again (marked so on the
    stack: -(depth + 1)). The heap sort past the depth limit and the final insertion sort
    run as before. Same permutation; in a SENet154-1024 G10 run the sort went from 1,117 to
    822 M instructions (benchmarks/results/page-engine-bulk-journal.md, "session 63")."""
    n = perm.shape[0]
    if n < 2:
        return
    lg = 0
    m = n
    while m > 1:
        m >>= 1
        lg += 1
    sp = 0
    st_f[0] = 0
    st_l[0] = n
    st_d[0] = 2 * lg
    sp = 1
    while sp > 0:
        sp -= 1
        first = st_f[sp]
        last = st_l[sp]
        depth = st_d[sp]
        zero = depth < 0  # (a part known to be all zero)
        if zero:
            depth = -depth - 1
        while last - first > 16:
            if depth == 0:
                _heap_sort(perm, first, last, ka, kt)
                break
            depth -= 1
            mid = first + (last - first) // 2
            if not zero and ka[perm[first + 1]] == 0.0 and ka[perm[mid]] == 0.0 and ka[perm[last - 1]] == 0.0:
                zero = True
                for i in range(first, last):
                    if ka[perm[i]] != 0.0:
                        zero = False
                        break
            if zero:
                # (all equal: the median of three is `mid`; the partition swaps end for end)
                perm[first], perm[mid] = perm[mid], perm[first]
                i = first + 1
                j = last - 1
                while i < j:
                    perm[i], perm[j] = perm[j], perm[i]
                    i += 1
                    j -= 1
                lo = first + 1 + (last - first - 1) // 2
                st_f[sp] = lo
                st_l[sp] = last
                st_d[sp] = -depth - 1
                sp += 1
                last = lo
                continue
            a = first + 1
            b = mid
            c = last - 1
            # __move_median_to_first
            if _cless(perm[a], perm[b], ka, kt):
                if _cless(perm[b], perm[c], ka, kt):
                    sw = b
                elif _cless(perm[a], perm[c], ka, kt):
                    sw = c
                else:
                    sw = a
            elif _cless(perm[a], perm[c], ka, kt):
                sw = a
            elif _cless(perm[b], perm[c], ka, kt):
                sw = c
            else:
                sw = b
            perm[first], perm[sw] = perm[sw], perm[first]
            # __unguarded_partition(first + 1, last, pivot = first)
            lo = first + 1
            hi = last
            pv = perm[first]
            while True:
                while _cless(perm[lo], pv, ka, kt):
                    lo += 1
                hi -= 1
                while _cless(pv, perm[hi], ka, kt):
                    hi -= 1
                if not lo < hi:
                    break
                perm[lo], perm[hi] = perm[hi], perm[lo]
                lo += 1
            # the right part [lo, last) is sorted on its own; continue with [first, lo)
            st_f[sp] = lo
            st_l[sp] = last
            st_d[sp] = depth
            sp += 1
            last = lo
    # __final_insertion_sort
    lim = 16 if n > 16 else n
    for i in range(1, lim):
        v = perm[i]
        if _cless(v, perm[0], ka, kt):
            for j in range(i, 0, -1):
                perm[j] = perm[j - 1]
            perm[0] = v
        else:
            j = i
            while _cless(v, perm[j - 1], ka, kt):
                perm[j] = perm[j - 1]
                j -= 1
            perm[j] = v
    for i in range(lim, n):
        v = perm[i]
        j = i
        while _cless(v, perm[j - 1], ka, kt):
            perm[j] = perm[j - 1]
            j -= 1
        perm[j] = v


@kernel
def cxx_sort_keys(keys):
    """The permutation std::sort applies to integer `keys` with `a < b` (plan.cxx_sort_order):
    `cxx_sort` with the area comparator on the negated keys as areas and no ties broken (a
    larger area first is a smaller key first; equal areas are not less either way). Keys
    must be exact as float64 (|key| < 2**53)."""
    n = keys.shape[0]
    perm = np.arange(n)
    ka = np.empty(n, dtype=np.float64)
    for i in range(n):
        ka[i] = -float(keys[i])
    st = np.empty((3, n + 64), dtype=np.int64)
    cxx_sort(perm, ka, np.zeros(n, dtype=np.float64), st[0], st[1], st[2])
    return perm


@kernel_nonrt_internal
def _find(tx, x, lo, hi):
    """The j in [lo, hi) with tx[j] <= x < tx[j+1], clamped to [lo, hi-1]."""
    j = bisect_right(tx, x) - 1
    if j < lo:
        j = lo
    if j > hi - 1:
        j = hi - 1
    return j


@kernel
def main_loop(
    iv_tensor,
    iv_s,
    iv_e,
    iv_looped,
    iv_time,
    iv_size,
    time_us,
    time_ext,
    cyc,
    est,
    cpu_est,
    cap,
    bw,
    full,
    line,
    target,
    cpu_line,
    b_ssd,
    b_cpu,
    ssd_lat,
    sys_lat,
    delta,
    opts,
    hints,
    nh,
    decision,
    evict_finish,
    prefetch_orig,
    prefetch_final,
    order,
    selected,
    max_iter,
):
    """§5.4 with a lazy max-heap (module docstring). Fills the per-interval arrays, appends
    hints (pre-evicts, and prefetches of looped intervals) and returns
    (hints, number of iterations, number of non-looped evictions in `order`)."""
    K = est.shape[0]
    I = iv_s.shape[0]
    o5 = (opts & O_O5) != 0
    o11 = (opts & O_O11) != 0
    o12 = (opts & O_O12) != 0
    o13 = (opts & O_O13) != 0
    o14 = (opts & O_O14) != 0
    zero_break = (opts & O_ZERO_BREAK) != 0
    total_cyc = np.int64(0)
    for k in range(K):
        total_cyc += cyc[k]
    P1 = np.zeros(K + 1, dtype=np.int64)
    P2 = np.zeros(K + 1, dtype=np.int64)
    _prefix(est, line, cyc, P1, P2)
    processed = np.zeros(I, dtype=np.bool_)
    iv_tsz = np.empty(I, dtype=np.float64)
    for i in range(I):
        iv_tsz[i] = iv_time[i] * iv_size[i]
    ha = np.empty(I + 1, dtype=np.float64)
    ht = np.empty(I + 1, dtype=np.float64)
    hi = np.empty(I + 1, dtype=np.int64)
    n = _rebuild(
        ha,
        ht,
        hi,
        processed,
        iv_s,
        iv_e,
        iv_looped,
        iv_size,
        iv_tsz,
        cap,
        bw,
        full,
        P1,
        P2,
        est,
        line,
        total_cyc,
        o5,
    )
    zero_on = est[0] > line
    cpu_max = _max(cpu_est)
    n_off = 0
    n_proc = 0
    it = 0
    cxx = (opts & O_CXX_SORT) != 0
    perm = np.arange(I)
    ka = np.zeros(I, dtype=np.float64)
    w_lo = np.full(I, -1, dtype=np.int64)  # (cxx) the windows of the last sort, -1: none
    w_hi = np.full(I, -1, dtype=np.int64)
    # (cxx) lanes changed since the last sort: the write lanes in kernels lanes[0] ..
    # lanes[1], the read lanes in lanes[2] .. lanes[3] (`book_round_trip`)
    lanes = np.array([0, K, 0, K], dtype=np.int64)  # (all of them before the first sort)
    sst = np.empty((3, I + 64), dtype=np.int64)  # (cxx) the sort's work stacks
    # (cxx) the SSD lanes' prefix sums for the walks (`lane_prefix`)
    CW = np.zeros(K + 1, dtype=np.int64)
    UW = np.zeros(K + 1, dtype=np.int64)
    CR = np.zeros(K + 1, dtype=np.int64)
    UR = np.zeros(K + 1, dtype=np.int64)
    while it < max_iter:
        if _max(est) <= target:
            break
        c = -1
        ca = 0.0
        if cxx:
            # O-10: G10's in-place std::sort of the whole list, then its first element
            if I == 0:
                break
            # (the walks' prefix sums, from the first kernel the bookings changed)
            if lanes[0] <= lanes[1]:
                lane_prefix(cap, bw, full, L_WSSD, CW, UW, min(lanes[0], K))
            if lanes[2] <= lanes[3]:
                lane_prefix(cap, bw, full, L_RSSD, CR, UR, min(lanes[2], K))
            # (each non-looped interval's half-transfer window is kept from the last sort
            # while the lanes its walks read did not change where they read them: the
            # forward walk reads L_WSSD from s to w0, the backward walk L_RSSD from e - 1
            # down to w1; the same walks would give the same window; `area_of` otherwise)
            for i in range(I):
                if processed[i]:
                    ka[i] = 0.0
                elif iv_looped[i]:
                    ka[i] = area_of(
                        i, iv_s, iv_e, iv_looped, iv_size, cap, bw, full, P1, P2, est, line, total_cyc, o5
                    )
                else:
                    w0 = w_lo[i]
                    w1 = w_hi[i]
                    first = w0 < 0
                    if first or (lanes[0] <= w0 and lanes[1] >= iv_s[i]):
                        w0 = walk_forward_p(cap, bw, full, L_WSSD, iv_size[i] // 2, iv_s[i], CW, UW)
                        w_lo[i] = w0
                    if first or (lanes[2] <= iv_e[i] - 1 and lanes[3] >= w1):
                        w1 = walk_backward_p(cap, bw, full, L_RSSD, iv_size[i] // 2, iv_e[i], CR, UR)
                        w_hi[i] = w1
                    if w1 <= w0:
                        ka[i] = 0.0
                    else:
                        ka[i] = float(iv_size[i]) * float(P1[w1] - P1[w0])
            lanes[0] = K
            lanes[1] = -1
            lanes[2] = K
            lanes[3] = -1
            cxx_sort(perm, ka, iv_tsz, sst[0], sst[1], sst[2])
            c = perm[0]
            if processed[c]:
                break
            ca = ka[c]
            n = 1
        # the interval with the largest (area, time×size)
        while n > 0 and not cxx:
            a0 = ha[0]
            i = hi[0]
            n = _pop(ha, ht, hi, n)
            if processed[i]:
                continue
            a = area_of(i, iv_s, iv_e, iv_looped, iv_size, cap, bw, full, P1, P2, est, line, total_cyc, o5)
            if a == a0:
                c = i
                ca = a
                break
            n = _push(ha, ht, hi, n, a, iv_tsz[i], i)
        if c < 0:
            break
        if not cxx and ca <= 0.0 and zero_break and (ca == 0.0 or n_proc > 0):
            # O-10: every remaining area is 0 (G10 picks whatever std::sort put first)
            break
        selected[c] = it
        it += 1
        s = iv_s[c]
        e = iv_e[c]
        looped = iv_looped[c]
        S = iv_size[c]
        t = iv_tensor[c]
        # GPU_OK_interval
        fits = True
        ee = e + K if looped else e
        for j in range(s, ee):
            if est[j % K] > target:
                fits = False
                break
        if fits:
            processed[c] = True
            n_proc += 1
            decision[c] = D_FITS
            continue
        if ee - s == 1:
            processed[c] = True
            n_proc += 1
            decision[c] = D_SPAN1
            continue
        ssd_move = ssd_lat + sys_lat + S / b_ssd
        ssd_safe = 2.0 * ssd_move + delta * ssd_move
        ssd_pref = ssd_move + delta * ssd_move
        cpu_move = sys_lat + S / b_cpu
        cpu_safe = 2.0 * cpu_move + delta * cpu_move
        cpu_pref = cpu_move + delta * cpu_move
        tm = iv_time[c]
        changed = False
        if tm > ssd_safe:
            if not looped:
                ecl = bisect_right(time_us, time_us[s] + ssd_move) - 1
                crowded = True
                if ecl > s or not o12:
                    for k in range(s, max(ecl, s + 1)):
                        if not full[L_WSSD, k]:
                            crowded = False
                            break
                cpu_ok = cpu_max <= cpu_line - S
                if crowded and cpu_ok:
                    # SSD write lane crowded over the ideal window: host memory instead
                    pf = walk_backward(cap, bw, full, L_RPCIE, S, e)
                    pe = walk_forward(cap, bw, full, L_WPCIE, S, s)
                    if pf > pe:
                        hints[nh, 0] = s
                        hints[nh, 1] = t
                        hints[nh, 2] = NOT_KNOWN
                        hints[nh, 3] = IN_CPU
                        nh += 1
                        decision[c] = D_HOST
                        evict_finish[c] = pe
                        prefetch_orig[c] = pf
                        order[n_off] = c
                        n_off += 1
                        book_round_trip(cap, bw, full, True, S, pf, s, o13, lanes)
                        for j in range(s, e):
                            cpu_est[j % K] += S
                            if cpu_est[j % K] > cpu_max:
                                cpu_max = cpu_est[j % K]
                    else:
                        processed[c] = True
                        n_proc += 1
                        decision[c] = D_NO_BW
                        continue
                else:
                    pf = walk_backward(cap, bw, full, L_RSSD, S, e)
                    pe = walk_forward(cap, bw, full, L_WSSD, S, s)
                    if pf > pe:
                        hints[nh, 0] = s
                        hints[nh, 1] = t
                        hints[nh, 2] = NOT_KNOWN
                        hints[nh, 3] = IN_SSD
                        nh += 1
                        decision[c] = D_SSD
                        evict_finish[c] = pe
                        prefetch_orig[c] = pf
                        order[n_off] = c
                        n_off += 1
                        book_round_trip(cap, bw, full, False, S, pf, s, o13, lanes)
                    else:
                        processed[c] = True
                        n_proc += 1
                        decision[c] = D_NO_BW
                        continue
                for k in range(pe + 1, pf):
                    est[k] -= S
                changed = pf > pe + 1
            else:
                ecl = _find(time_ext, time_us[s] + ssd_move, s, e + K)
                psi = _find(time_ext, time_ext[e + K] - ssd_pref, s, e + K)
                if psi != s:
                    hints[nh, 0] = s
                    hints[nh, 1] = t
                    hints[nh, 2] = NOT_KNOWN
                    hints[nh, 3] = IN_SSD
                    nh += 1
                    hints[nh, 0] = psi % K
                    hints[nh, 1] = t
                    hints[nh, 2] = NOT_KNOWN
                    hints[nh, 3] = IN_GPU
                    nh += 1
                    decision[c] = D_SSD
                    evict_finish[c] = ecl % K
                    prefetch_orig[c] = psi % K
                    prefetch_final[c] = psi % K
                else:
                    decision[c] = D_NO_SLOT
                for j in range(ecl + 1, psi):
                    est[j % K] -= S
                changed = psi > ecl + 1
            processed[c] = True
            n_proc += 1
        elif tm > cpu_safe:
            if not (cpu_max <= cpu_line - S):
                processed[c] = True
                n_proc += 1
                decision[c] = D_HOST_FULL
                continue
            evicted = False
            if not looped:
                pe = walk_forward(cap, bw, full, L_WPCIE, S, s)
                pf = walk_backward(cap, bw, full, L_RPCIE, S, e)
                if pf > pe:
                    hints[nh, 0] = s
                    hints[nh, 1] = t
                    hints[nh, 2] = NOT_KNOWN
                    hints[nh, 3] = IN_CPU
                    nh += 1
                    decision[c] = D_HOST
                    evict_finish[c] = pe
                    prefetch_orig[c] = pf
                    order[n_off] = c
                    n_off += 1
                    evicted = True
                    book_round_trip(cap, bw, full, True, S, pf, s, o13, lanes)
                else:
                    decision[c] = D_NO_BW
                for k in range(pe + 1, pf):
                    est[k] -= S
                changed = pf > pe + 1
            else:
                ecl = _find(time_ext, time_us[s] + cpu_move, s, e + K)
                psi = _find(time_ext, time_ext[e + K] - cpu_pref, s, e + K)
                if psi != s:
                    hints[nh, 0] = s
                    hints[nh, 1] = t
                    hints[nh, 2] = NOT_KNOWN
                    hints[nh, 3] = IN_CPU
                    nh += 1
                    hints[nh, 0] = psi % K
                    hints[nh, 1] = t
                    hints[nh, 2] = NOT_KNOWN
                    hints[nh, 3] = IN_GPU
                    nh += 1
                    decision[c] = D_HOST
                    evict_finish[c] = ecl % K
                    prefetch_orig[c] = psi % K
                    prefetch_final[c] = psi % K
                    evicted = True
                else:
                    decision[c] = D_NO_SLOT
                for j in range(ecl + 1, psi):
                    est[j % K] -= S
                changed = psi > ecl + 1
            processed[c] = True
            n_proc += 1
            if evicted or o14:
                # O-14: reserved even when nothing was evicted
                for j in range(s, ee):
                    cpu_est[j % K] += S
                    if cpu_est[j % K] > cpu_max:
                        cpu_max = cpu_est[j % K]
        else:
            decision[c] = D_SHORT
            if o11 and cxx:
                # O-11: not processed. G10's next sort sees the same keys: a strict maximum
                # stays first for good (the loop stalls); among ties the sort may put another
                # interval first, and G10 goes on with it
                if ca != 0.0 and (I == 1 or _cless(c, perm[1], ka, iv_tsz)):
                    break
                continue
            if o11:
                # O-11: not processed; G10 re-selects it on every remaining iteration
                break
            processed[c] = True
            n_proc += 1
            continue
        if changed:
            _prefix(est, line, cyc, P1, P2)
            now = est[0] > line
            if o5 and zero_on and not now and not cxx:
                # O-5's negative term vanished: looped areas grew, rebuild the heap
                n = _rebuild(
                    ha,
                    ht,
                    hi,
                    processed,
                    iv_s,
                    iv_e,
                    iv_looped,
                    iv_size,
                    iv_tsz,
                    cap,
                    bw,
                    full,
                    P1,
                    P2,
                    est,
                    line,
                    total_cyc,
                    o5,
                )
            zero_on = now
    return nh, it, n_off


@kernel
def place_prefetches(
    order, n_off, evict_finish, prefetch_orig, prefetch_final, iv_tensor, iv_size, est, target, o16, hints, nh
):
    """§5.7: non-looped evictions in `order` (already sorted by planned prefetch kernel):
    hoist each prefetch earlier while the kernel before it is under the target (O-16: without
    counting the tensor itself), never before eviction-finish + 1."""
    for q in range(n_off):
        c = order[q]
        i = prefetch_orig[c]
        S = iv_size[c]
        extra = 0 if o16 else S
        while i > evict_finish[c] + 1 and est[i - 1] + extra < target:
            i -= 1
        hints[nh, 0] = i
        hints[nh, 1] = iv_tensor[c]
        hints[nh, 2] = NOT_KNOWN
        hints[nh, 3] = IN_GPU
        nh += 1
        prefetch_final[c] = i
        for k in range(i, prefetch_orig[c]):
            est[k] += S
    return nh


# compiled ahead of time at install (g10fast.aot): a first run without a compile
aot.export(
    main_loop,
    "UniTuple(i8, 3)(i8[::1], i8[::1], i8[::1], b1[::1], f8[::1], i8[::1], f8[::1], f8[::1], i8[::1],"
    " i8[::1], i8[::1], f8[:, ::1], f8[:, ::1], b1[:, ::1], i8, i8, i8, f8, f8, f8, f8, f8, i8, i8[:, ::1],"
    " i8, i1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8)",
)
aot.export(
    pass_b,
    "UniTuple(i8, 2)(f8[::1], i8[::1], b1[::1], i8[::1], i8[::1], i8, i8, f8, b1, b1, i8[::1], i8[:, ::1],"
    " i8)",
)
aot.export(cxx_sort_keys, "i8[::1](i8[::1])")
aot.export(
    place_prefetches,
    "i8(i8[::1], i8, i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8, b1, i8[:, ::1], i8)",
)
