"""Numba kernels of the driver engine (the real nvidia-uvm, docs/driver-engine.md).

Plain arrays and scalars in, plain arrays out; the validating wrapper is
`g10fast.engine.driver`. Simulated time is integer GPU cycles (the system's clock).

State (sized up front, no Python objects):
  per 4 KiB page   loc int8 (0 not populated, 1 SSD, 2 host, 3 GPU), copy int8 (tier of a
                   still-valid backing copy of a GPU page, 0 none; only with skip_clean)
  per 2 MiB block  gcount int32 (pages resident on the GPU; > 0 = the block holds a root
                   chunk), barr int64 (arrival time of its last prefetch), bprev/bnext int32
                   (the root-chunk list: head = next victim), prot int64 (batch stamp)
  per page (lru4k) pprev/pnext int32: the true-LRU page list
Scalars live in S (int64): see the S_* indices.
"""

from __future__ import annotations

import numpy as np
from g10fast.jit import jit, kernel

VA_PAGES = 512                     # 2 MiB VA block / 4 KiB
LEVELS = 10                        # tree levels: 1, 2, 4, ..., 512 pages

LOC_NONE, LOC_SSD, LOC_HOST, LOC_GPU = 0, 1, 2, 3

PF_NONE, PF_DENSITY, PF_TBN = 0, 1, 2
EV_ALLOC2M, EV_ACCESS2M, EV_LRU4K = 0, 1, 2

HINT_PREFETCH, HINT_EVICT, HINT_DISCARD, HINT_PREEVICT = 0, 1, 2, 3

# scalar state
S_BHEAD, S_BTAIL, S_PHEAD, S_PTAIL, S_CHUNKS, S_GPU, S_HOST, S_STAMP, S_FAIL = range(9)
S_LEN = 9

# per-iteration counters
C_ALLOC, C_IN_CPU, C_IN_SSD, C_OUT_CPU, C_OUT_SSD, C_CLEAN_DROP, C_DISCARD, C_PREFETCHED, \
    C_FAULTS, C_BATCHES, C_PF_CYCLES, C_DENSITY = range(12)
C_COLS = 12

# kernel table columns (0-3 and 9 as the page engine's)
K_ITER, K_KERNEL, K_START, K_END, K_FAULTS, K_BATCHES, K_STALL, K_IN, K_OUT, K_GPU = range(10)
K_COLS = 10

FAIL_NONE, FAIL_NO_VICTIM = 0, 1


@jit(inline="always")
def _l_remove(prev, nxt, S, H, T, x):
    p = prev[x]
    n = nxt[x]
    if p >= 0:
        nxt[p] = n
    else:
        S[H] = n
    if n >= 0:
        prev[n] = p
    else:
        S[T] = p
    prev[x] = -1
    nxt[x] = -1


@jit(inline="always")
def _l_append(prev, nxt, S, H, T, x):
    t = S[T]
    prev[x] = t
    nxt[x] = -1
    if t >= 0:
        nxt[t] = x
    else:
        S[H] = x
    S[T] = x


@kernel
def _evict_range(b, lo, hi, loc, copy, gcount, bprev, bnext, pprev, pnext, S, evict_mode,
                 host_pages, d2h, ssd_w, cnt, it):
    """Evict (write back or drop) the GPU pages of block b at offsets [lo, hi); returns the
    cycles of the write-back transfers (one per contiguous run to one tier)."""
    npages = loc.shape[0]
    base = b * VA_PAGES
    cycles = 0
    run_dest = 0
    run_len = 0
    for o in range(lo, hi + 1):
        dest = 0                      # 0: no transfer (not on GPU, or dropped clean)
        p = base + o
        if o < hi and p < npages and loc[p] == LOC_GPU:
            if copy[p] != LOC_NONE:   # clean, a valid copy remains (skip_clean only)
                loc[p] = copy[p]
                copy[p] = LOC_NONE
                cnt[it, C_CLEAN_DROP] += 1
            elif S[S_HOST] < host_pages:
                loc[p] = LOC_HOST
                S[S_HOST] += 1
                cnt[it, C_OUT_CPU] += 1
                dest = LOC_HOST
            else:
                loc[p] = LOC_SSD
                cnt[it, C_OUT_SSD] += 1
                dest = LOC_SSD
            gcount[b] -= 1
            S[S_GPU] -= 1
            if evict_mode == EV_LRU4K:
                _l_remove(pprev, pnext, S, S_PHEAD, S_PTAIL, p)
        if dest != 0 and dest == run_dest:
            run_len += 1
        else:
            if run_len > 0:
                cycles += d2h[run_len] if run_dest == LOC_HOST else ssd_w[run_len]
            run_dest = dest
            run_len = 1 if dest != 0 else 0
    if gcount[b] == 0 and evict_mode != EV_LRU4K and (bprev[b] >= 0 or S[S_BHEAD] == b):
        _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
        S[S_CHUNKS] -= 1
    return cycles


@kernel
def _make_room(b, need, loc, copy, gcount, bprev, bnext, pprev, pnext, prot, S, evict_mode,
               gpu_pages, gpu_chunks, host_pages, d2h, ssd_w, cnt, it):
    """Room on the GPU for `need` more pages of block b; returns write-back cycles.
    Blocks whose prot equals the current stamp are never chosen. Sets S[S_FAIL] on failure."""
    cycles = 0
    if evict_mode == EV_LRU4K:
        while S[S_GPU] + need > gpu_pages:
            v = S[S_PHEAD]
            if v < 0:
                S[S_FAIL] = FAIL_NO_VICTIM
                return cycles
            vb = v // VA_PAGES
            cycles += _evict_range(vb, v - vb * VA_PAGES, v - vb * VA_PAGES + 1, loc, copy,
                                   gcount, bprev, bnext, pprev, pnext, S, evict_mode,
                                   host_pages, d2h, ssd_w, cnt, it)
        return cycles
    if gcount[b] > 0 or need == 0:
        return cycles
    while S[S_CHUNKS] >= gpu_chunks:
        v = S[S_BHEAD]
        while v >= 0 and prot[v] == S[S_STAMP]:
            v = bnext[v]
        if v < 0:
            S[S_FAIL] = FAIL_NO_VICTIM
            return cycles
        cycles += _evict_range(v, 0, VA_PAGES, loc, copy, gcount, bprev, bnext, pprev, pnext,
                               S, evict_mode, host_pages, d2h, ssd_w, cnt, it)
    return cycles


@kernel
def _land(b, mig, loc, copy, gcount, bprev, bnext, pprev, pnext, S, evict_mode, skip_clean,
          h2d, ssd_r, cnt, it):
    """Migrate the pages of block b flagged in mig[0:512] to the GPU; returns the cycles of
    the transfers (one per contiguous run from one tier; unpopulated pages are zero-filled)."""
    npages = loc.shape[0]
    base = b * VA_PAGES
    cycles = 0
    run_src = 0
    run_len = 0
    landed = 0
    was_empty = gcount[b] == 0
    for o in range(VA_PAGES + 1):
        src = 0
        p = base + o
        if o < VA_PAGES and mig[o] and p < npages and loc[p] != LOC_GPU:
            src = loc[p]
            if src == LOC_HOST:
                cnt[it, C_IN_CPU] += 1
                if skip_clean:
                    copy[p] = LOC_HOST
                else:
                    S[S_HOST] -= 1
            elif src == LOC_SSD:
                cnt[it, C_IN_SSD] += 1
                if skip_clean:
                    copy[p] = LOC_SSD
            else:
                cnt[it, C_ALLOC] += 1
            loc[p] = LOC_GPU
            landed += 1
            if evict_mode == EV_LRU4K:
                _l_append(pprev, pnext, S, S_PHEAD, S_PTAIL, p)
        if src != 0 and src == run_src:
            run_len += 1
        else:
            if run_len > 0 and run_src != LOC_NONE:
                cycles += h2d[run_len] if run_src == LOC_HOST else ssd_r[run_len]
            run_src = src
            run_len = 1 if src != 0 else 0
    gcount[b] += landed
    S[S_GPU] += landed
    if was_empty and landed > 0 and evict_mode != EV_LRU4K:
        _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
        S[S_CHUNKS] += 1
    return cycles


@kernel
def prefetch_region(mark, exist, faulted, nf, prefetcher, threshold, big, out, cnt, ex, done,
                    done_idx):
    """The pages of one VA block a fault batch migrates (before removing resident ones).

    mark[512] uint8: resident pages (changed in place: grown and filled marks), exist[512]:
    pages that exist; faulted[0:nf]: faulted page offsets. out[512] (set to 1): faulted pages
    grown to their big page (`big` pages), plus the prefetcher's regions: density (the
    driver): per faulted page, the largest ancestor subtree with marked*100 > pages*threshold;
    tbn (UVMSmart): bottom-up from 64 KiB leaves, every subtree with marked*2 > pages is
    filled (cascading). cnt, ex int32[LEVELS, 512], done uint8[LEVELS, 512] (all 0 on entry
    and on return), done_idx int64[>= nf]: scratch."""
    for i in range(nf):
        f = faulted[i]
        g0 = (f // big) * big
        if i > 0 and (faulted[i - 1] // big) * big == g0:
            continue                       # this big page is grown already
        for o in range(g0, min(g0 + big, VA_PAGES)):
            if exist[o]:
                mark[o] = 1
                out[o] = 1
    if prefetcher == PF_DENSITY:
        for o in range(VA_PAGES):
            cnt[0, o] = mark[o]
            ex[0, o] = exist[o]
        for l in range(1, LEVELS):
            for n in range(VA_PAGES >> l):
                cnt[l, n] = cnt[l - 1, 2 * n] + cnt[l - 1, 2 * n + 1]
                ex[l, n] = ex[l - 1, 2 * n] + ex[l - 1, 2 * n + 1]
        nd = 0
        for i in range(nf):
            f = faulted[i]
            if i > 0 and (faulted[i - 1] // big) == (f // big):
                continue                   # same big page: same walk (big >= 1 page)
            best = -1
            for l in range(1, LEVELS):
                n = f >> l
                if ex[l, n] > 0 and cnt[l, n] * 100 > ex[l, n] * threshold:
                    best = l
            if best > 0:
                n = f >> best
                if done[best, n] == 0:
                    done[best, n] = 1
                    done_idx[nd] = best * VA_PAGES + n
                    nd += 1
                    for o in range(n << best, (n + 1) << best):
                        if exist[o]:
                            out[o] = 1
        for i in range(nd):
            done[done_idx[i] // VA_PAGES, done_idx[i] % VA_PAGES] = 0
    elif prefetcher == PF_TBN:
        size = big
        while size <= VA_PAGES:
            for n in range(VA_PAGES // size):
                c = 0
                e = 0
                for o in range(n * size, (n + 1) * size):
                    c += mark[o]
                    e += exist[o]
                if e > 0 and c < e and c * 2 > e:
                    for o in range(n * size, (n + 1) * size):
                        if exist[o]:
                            mark[o] = 1
                            out[o] = 1
            size *= 2


@kernel
def simulate(K, n_iter, req_ptr, req_start, req_n, req_write, exec_cycles,
             hint_ptr, hint_start, hint_n, hint_kind, wait_hint,
             npages, gpu_pages, gpu_chunks, host_pages, fault_batch, fault_lat, big,
             prefetcher, threshold, evict_mode, skip_clean, h2d, d2h, ssd_r, ssd_w,
             log_iter, log_cap, init_loc, inflight_overlap, preevict_pages):
    """Run n_iter iterations of K kernels. Kernel k touches the page runs
    req_*[req_ptr[k]:req_ptr[k+1]] in order (req_write: the run is written).
    Hints of global kernel g = it*K + k: rows hint_ptr[g]:hint_ptr[g+1], issued at the
    kernel's start (before its barrier) on the one prefetch stream, FIFO; wait_hint[g] >= 0:
    the kernel starts only once that hint (and so every earlier one) is done (E2).

    Returns (kernels int64[n_iter*K, K_COLS], cnt int64[n_iter, C_COLS], loc, copy,
    hint_done int64[H], S, log_k, log_b, n_log): the faulted (kernel, block) pairs of
    iteration log_iter (first fault of each block per kernel), at most log_cap.
    init_loc int8[npages]: the start tier of every page (empty: none populated).
    inflight_overlap: a kernel touching a page whose prefetch is in flight does not stall;
    its end is max(its end, the arrival) (compute overlaps the wait), else it stalls.
    A HINT_PREEVICT row evicts its range only while more than preevict_pages are on the GPU
    (checked when the row is processed)."""
    nb = (npages + VA_PAGES - 1) // VA_PAGES
    loc = np.zeros(npages, np.int8)
    copy = np.zeros(npages, np.int8)
    gcount = np.zeros(nb, np.int32)
    barr = np.zeros(nb, np.int64)
    prot = np.full(nb, -1, np.int64)
    lastlog = np.full(nb, -1, np.int64)
    bprev = np.full(nb, -1, np.int32)
    bnext = np.full(nb, -1, np.int32)
    npl = npages if evict_mode == EV_LRU4K else 1
    pprev = np.full(npl, -1, np.int32)
    pnext = np.full(npl, -1, np.int32)
    S = np.zeros(S_LEN, np.int64)
    S[S_BHEAD] = -1
    S[S_BTAIL] = -1
    S[S_PHEAD] = -1
    S[S_PTAIL] = -1
    H = hint_start.shape[0]
    hint_done = np.zeros(H, np.int64)
    row_t = np.zeros(H, np.int64)
    hq = 0                          # next queued hint row
    kern = np.zeros((n_iter * K, K_COLS), np.int64)
    cnt = np.zeros((n_iter, C_COLS), np.int64)
    log_k = np.zeros(max(log_cap, 1), np.int64)
    log_b = np.zeros(max(log_cap, 1), np.int64)
    n_log = 0
    pend = np.zeros(fault_batch, np.int64)
    blist = np.zeros(fault_batch, np.int64)
    mark = np.zeros(VA_PAGES, np.uint8)
    exist = np.zeros(VA_PAGES, np.uint8)
    mig = np.zeros(VA_PAGES, np.uint8)
    fl = np.zeros(VA_PAGES, np.int64)
    scnt = np.zeros((LEVELS, VA_PAGES), np.int32)
    sex = np.zeros((LEVELS, VA_PAGES), np.int32)
    sdone = np.zeros((LEVELS, VA_PAGES), np.uint8)
    sidx = np.zeros(VA_PAGES, np.int64)
    chunk_mode = evict_mode != EV_LRU4K
    if init_loc.shape[0] == npages:            # a given start state (per-kernel checks)
        for p in range(npages):
            v = init_loc[p]
            loc[p] = v
            if v == LOC_GPU:
                b = p // VA_PAGES
                if gcount[b] == 0 and chunk_mode:
                    _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                    S[S_CHUNKS] += 1
                gcount[b] += 1
                S[S_GPU] += 1
                if not chunk_mode:
                    _l_append(pprev, pnext, S, S_PHEAD, S_PTAIL, p)
            elif v == LOC_HOST:
                S[S_HOST] += 1
    t = 0                          # end of the previous kernel
    pf_free = 0                    # the prefetch stream is busy until
    for g in range(n_iter * K):
        it = g // K
        k = g - it * K
        # --- hints issued at this kernel (cudaMemPrefetchAsync-style) join the FIFO stream;
        # a queued row takes effect at the first kernel boundary at which the stream is free
        # (it started by then), or when this kernel waits for it (E2)
        for h in range(hint_ptr[g], hint_ptr[g + 1]):
            row_t[h] = t
        while hq < hint_ptr[g + 1] and (pf_free <= t or hq <= wait_hint[g]):
            h = hq
            hq += 1
            cur = max(row_t[h], pf_free)
            s0 = hint_start[h]
            s1 = min(s0 + hint_n[h], npages)
            p = s0
            while p < s1:
                b = p // VA_PAGES
                lo = p - b * VA_PAGES
                hi = min(s1 - b * VA_PAGES, VA_PAGES)
                kind = hint_kind[h]
                if kind == HINT_PREFETCH:
                    need = 0
                    for o in range(VA_PAGES):
                        mig[o] = 0
                    for o in range(lo, hi):
                        if loc[b * VA_PAGES + o] != LOC_GPU:
                            mig[o] = 1
                            need += 1
                    if need > 0:
                        S[S_STAMP] += 1
                        prot[b] = S[S_STAMP]
                        cur += _make_room(b, need, loc, copy, gcount, bprev, bnext, pprev,
                                          pnext, prot, S, evict_mode, gpu_pages, gpu_chunks,
                                          host_pages, d2h, ssd_w, cnt, it)
                        if S[S_FAIL] != FAIL_NONE:
                            return kern, cnt, loc, copy, hint_done, S, log_k, log_b, n_log
                        x = _land(b, mig, loc, copy, gcount, bprev, bnext, pprev, pnext, S,
                                  evict_mode, skip_clean, h2d, ssd_r, cnt, it)
                        cur += x
                        cnt[it, C_PREFETCHED] += need
                        cnt[it, C_PF_CYCLES] += x
                        if cur > barr[b]:
                            barr[b] = cur
                elif kind == HINT_EVICT or (kind == HINT_PREEVICT
                                            and S[S_GPU] > preevict_pages):
                    cur += _evict_range(b, lo, hi, loc, copy, gcount, bprev, bnext, pprev,
                                        pnext, S, evict_mode, host_pages, d2h, ssd_w, cnt, it)
                elif kind == HINT_DISCARD:   # freed memory, dropped without write-back
                    for o in range(lo, hi):
                        q = b * VA_PAGES + o
                        if loc[q] == LOC_GPU:
                            if copy[q] == LOC_HOST:
                                S[S_HOST] -= 1
                            copy[q] = LOC_NONE
                            gcount[b] -= 1
                            S[S_GPU] -= 1
                            if evict_mode == EV_LRU4K:
                                _l_remove(pprev, pnext, S, S_PHEAD, S_PTAIL, q)
                            cnt[it, C_DISCARD] += 1
                        elif loc[q] != LOC_NONE:
                            if loc[q] == LOC_HOST:
                                S[S_HOST] -= 1
                            cnt[it, C_DISCARD] += 1
                        loc[q] = LOC_NONE
                    if gcount[b] == 0 and chunk_mode and (bprev[b] >= 0 or S[S_BHEAD] == b):
                        _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                        S[S_CHUNKS] -= 1
                p = b * VA_PAGES + hi
            pf_free = cur
            hint_done[h] = cur
        # --- stream barrier (E2)
        start = t
        if wait_hint[g] >= 0 and hint_done[wait_hint[g]] > start:
            start = hint_done[wait_hint[g]]
        clock = start
        arr = 0
        faults = 0
        batches = 0
        in0 = cnt[it, C_IN_CPU] + cnt[it, C_IN_SSD]
        out0 = cnt[it, C_OUT_CPU] + cnt[it, C_OUT_SSD]
        # --- the kernel touches its pages in order; faults are serviced in batches
        r = req_ptr[k]
        r_end = req_ptr[k + 1]
        j = 0                          # page within run r
        last_b = -1
        while True:
            np_ = 0
            while r < r_end and np_ < fault_batch:
                p = req_start[r] + j
                b = p // VA_PAGES
                if gcount[b] == VA_PAGES and evict_mode != EV_LRU4K and not skip_clean:
                    # a full block: every page of it resident, skip to its end at once
                    if inflight_overlap:
                        if barr[b] > arr:
                            arr = barr[b]
                    elif barr[b] > clock:
                        clock = barr[b]
                    if evict_mode == EV_ACCESS2M and b != last_b:
                        _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                        _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                    last_b = b
                    j += min(req_n[r] - j, (b + 1) * VA_PAGES - p)
                    if j >= req_n[r]:
                        r += 1
                        j = 0
                    continue
                if loc[p] == LOC_GPU:
                    if inflight_overlap:
                        if barr[b] > arr:
                            arr = barr[b]
                    elif barr[b] > clock:
                        clock = barr[b]           # wait for an in-flight prefetch
                    if evict_mode == EV_LRU4K:
                        _l_remove(pprev, pnext, S, S_PHEAD, S_PTAIL, p)
                        _l_append(pprev, pnext, S, S_PHEAD, S_PTAIL, p)
                    elif evict_mode == EV_ACCESS2M and b != last_b:
                        _l_remove(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                        _l_append(bprev, bnext, S, S_BHEAD, S_BTAIL, b)
                    last_b = b
                    if req_write[r] and copy[p] != LOC_NONE:
                        if copy[p] == LOC_HOST:
                            S[S_HOST] -= 1
                        copy[p] = LOC_NONE
                else:
                    pend[np_] = p
                    np_ += 1
                j += 1
                if j >= req_n[r]:
                    r += 1
                    j = 0
            if np_ == 0:
                break
            # --- service one batch
            faults += np_
            batches += 1
            nbl = 0
            for i in range(np_):
                b = pend[i] // VA_PAGES
                seen = False
                for q in range(nbl):
                    if blist[q] == b:
                        seen = True
                        break
                if not seen:
                    blist[nbl] = b
                    nbl += 1
            cyc = fault_lat
            for q in range(nbl):
                b = blist[q]
                S[S_STAMP] += 1            # the block being serviced is never the victim
                prot[b] = S[S_STAMP]
                base = b * VA_PAGES
                nf = 0
                for i in range(np_):
                    if pend[i] // VA_PAGES == b:
                        fl[nf] = pend[i] - base
                        nf += 1
                for o in range(VA_PAGES):
                    exist[o] = 1 if base + o < npages else 0
                    mark[o] = 1 if exist[o] and loc[base + o] == LOC_GPU else 0
                    mig[o] = 0
                prefetch_region(mark, exist, fl, nf, prefetcher, threshold, big, mig, scnt, sex, sdone,
                                sidx)
                need = 0
                for o in range(VA_PAGES):
                    if mig[o] and loc[base + o] == LOC_GPU:
                        mig[o] = 0
                    need += mig[o]
                cnt[it, C_DENSITY] += need - nf
                cyc += _make_room(b, need, loc, copy, gcount, bprev, bnext, pprev, pnext, prot,
                                  S, evict_mode, gpu_pages, gpu_chunks, host_pages, d2h, ssd_w,
                                  cnt, it)
                if S[S_FAIL] != FAIL_NONE:
                    return kern, cnt, loc, copy, hint_done, S, log_k, log_b, n_log
                cyc += _land(b, mig, loc, copy, gcount, bprev, bnext, pprev, pnext, S,
                             evict_mode, skip_clean, h2d, ssd_r, cnt, it)
                if it == log_iter and lastlog[b] != g and n_log < log_cap:
                    lastlog[b] = g
                    log_k[n_log] = k
                    log_b[n_log] = b
                    n_log += 1
            clock += cyc
            # the faulted pages are now touched: written ones lose their clean copy
        # written runs: their pages lose any clean copy (after the faults landed them)
        for rr in range(req_ptr[k], r_end):
            if req_write[rr]:
                for p in range(req_start[rr], req_start[rr] + req_n[rr]):
                    if loc[p] == LOC_GPU and copy[p] != LOC_NONE:
                        if copy[p] == LOC_HOST:
                            S[S_HOST] -= 1
                        copy[p] = LOC_NONE
        end = clock + exec_cycles[k]
        if arr > end:
            end = arr
        kern[g, K_ITER] = it
        kern[g, K_KERNEL] = k
        kern[g, K_START] = start
        kern[g, K_END] = end
        kern[g, K_FAULTS] = faults
        kern[g, K_BATCHES] = batches
        kern[g, K_STALL] = end - t - exec_cycles[k]
        kern[g, K_IN] = cnt[it, C_IN_CPU] + cnt[it, C_IN_SSD] - in0
        kern[g, K_OUT] = cnt[it, C_OUT_CPU] + cnt[it, C_OUT_SSD] - out0
        kern[g, K_GPU] = S[S_GPU]
        cnt[it, C_FAULTS] += faults
        cnt[it, C_BATCHES] += batches
        t = end
    return kern, cnt, loc, copy, hint_done, S, log_k, log_b, n_log
