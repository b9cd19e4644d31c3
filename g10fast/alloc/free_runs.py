"""The free-run allocator of the tensor engine and of the offset-level allocators' `bump`
(FlashNeuron's allocator): free space as a sorted list of free runs (`run_s` starts, `run_l`
lengths, in allocation units: pages for the tensor engine, `gran`-byte units for `bump`)
instead of G10's page bitmap. First fit from the left takes the start of the lowest run that
is long enough; first fit from the right takes the top units of the highest run that is long
enough: the same placements as a bitmap scan, at O(runs) per call. A free merges with its
neighbours. The run count is kept in cnt[C_NRUNS] of the caller's int64 counter array (the
tensor engine's counters, g10fast.engine.tensor.kernels, hold it in the same slot).

Below both the engines and the allocators: it imports only the kernel decorator.
"""

from __future__ import annotations

from g10fast.jit import kernel as _kernel

#: the slot of the run count in the caller's counter array
C_NRUNS = 5


@_kernel
def alloc_left(run_s, run_l, cnt, n):
    """First fit from page 0 upwards; returns the first page or -1."""
    nr = cnt[C_NRUNS]
    for r in range(nr):
        if run_l[r] >= n:
            s = run_s[r]
            run_s[r] += n
            run_l[r] -= n
            if run_l[r] == 0:
                for q in range(r, nr - 1):
                    run_s[q] = run_s[q + 1]
                    run_l[q] = run_l[q + 1]
                cnt[C_NRUNS] = nr - 1
            return s
    return -1


@_kernel
def alloc_right(run_s, run_l, cnt, n):
    """First fit from the top page downwards: the top n pages of the highest long-enough run."""
    nr = cnt[C_NRUNS]
    for r in range(nr - 1, -1, -1):
        if run_l[r] >= n:
            s = run_s[r] + run_l[r] - n
            run_l[r] -= n
            if run_l[r] == 0:
                for q in range(r, nr - 1):
                    run_s[q] = run_s[q + 1]
                    run_l[q] = run_l[q + 1]
                cnt[C_NRUNS] = nr - 1
            return s
    return -1


@_kernel
def free_run(run_s, run_l, cnt, s, n):
    """Return pages [s, s+n) to the free list, merging with neighbours. False if it overlaps."""
    if n <= 0:
        return True
    nr = cnt[C_NRUNS]
    # first run starting after s
    lo = 0
    hi = nr
    while lo < hi:
        mid = (lo + hi) // 2
        if run_s[mid] < s:
            lo = mid + 1
        else:
            hi = mid
    r = lo
    if r > 0 and run_s[r - 1] + run_l[r - 1] > s:
        return False
    if r < nr and s + n > run_s[r]:
        return False
    join_prev = r > 0 and run_s[r - 1] + run_l[r - 1] == s
    join_next = r < nr and s + n == run_s[r]
    if join_prev and join_next:
        run_l[r - 1] += n + run_l[r]
        for q in range(r, nr - 1):
            run_s[q] = run_s[q + 1]
            run_l[q] = run_l[q + 1]
        cnt[C_NRUNS] = nr - 1
    elif join_prev:
        run_l[r - 1] += n
    elif join_next:
        run_s[r] = s
        run_l[r] += n
    else:
        for q in range(nr, r, -1):
            run_s[q] = run_s[q - 1]
            run_l[q] = run_l[q - 1]
        run_s[r] = s
        run_l[r] = n
        cnt[C_NRUNS] = nr + 1
    return True
