"""Plain-Python twins of the allocators of g10fast.alloc (written from the rules, not from the
Numba/Python implementations): lists of blocks, linear scans."""

from __future__ import annotations

import bisect

import numpy as np

from g10fast.alloc.trace import FREE, MALLOC, AllocTrace

MiB = 1 << 20


def random_trace(rng, n_blocks=60, max_size=3 * MiB, small_frac=0.5, keep_frac=0.1, streams=1) -> AllocTrace:
    """A random valid malloc/free sequence: each step mallocs or frees a random live block;
    `keep_frac` of the blocks are never freed."""
    sizes = np.where(
        rng.random(n_blocks) < small_frac,
        rng.integers(1, 4096, n_blocks),
        rng.integers(1, max_size, n_blocks),
    )
    kinds, blocks = [], []
    live = []
    nxt = 0
    keep = rng.random(n_blocks) < keep_frac
    while nxt < n_blocks or live:
        if nxt < n_blocks and (not live or rng.random() < 0.55):
            kinds.append(MALLOC)
            blocks.append(nxt)
            if not keep[nxt]:
                live.append(nxt)
            nxt += 1
        else:
            b = live.pop(int(rng.integers(len(live))))
            kinds.append(FREE)
            blocks.append(b)
    kinds = np.asarray(kinds, np.int8)
    blocks = np.asarray(blocks, np.int64)
    stream = rng.integers(0, streams, len(kinds)).astype(np.int16)
    return AllocTrace(
        "random",
        kinds,
        blocks * 4096 + 0x1000,
        sizes[blocks].astype(np.int64),
        np.arange(len(kinds), dtype=np.int64),
        blocks,
        stream,
        {},
    )


def events(tr: AllocTrace):
    sel = tr.kind <= FREE
    return (tr.kind[sel] == FREE).tolist(), tr.block[sel].tolist(), tr.block_sizes().tolist()


def cnmem_twin(tr, gran=512, init=0):
    is_free, blk, bsize = events(tr)
    heads = []  # [start, size]
    free = []  # [start, size, head], kept sorted by start
    top = 0
    if init:
        heads.append([0, init])
        free.append([0, init, 0])
        top = init
    off, where, resv = {}, {}, []
    for f, b in zip(is_free, blk):
        r = max(gran, -(-bsize[b] // gran) * gran)
        if not f:
            fits = [x for x in free if x[1] >= r]
            if fits:
                best = min(fits, key=lambda x: (x[1], x[0]))
                off[b], where[b] = best[0], best[2]
                best[0] += r
                best[1] -= r
                if best[1] == 0:
                    free.remove(best)
            else:
                heads.append([top, r])
                off[b], where[b] = top, len(heads) - 1
                top += r
        else:
            free.append([off[b], r, where[b]])
            free.sort()
            i = 0
            while i < len(free) - 1:
                a, c = free[i], free[i + 1]
                if a[2] == c[2] and a[0] + a[1] == c[0]:
                    a[1] += c[1]
                    del free[i + 1]
                else:
                    i += 1
        resv.append(sum(h[1] for h in heads))
    return off, resv


def pytorch_twin(tr, max_split_mb=0.0, expandable=False):
    is_free, blk, bsize = events(tr)
    ms = max_split_mb * MiB if max_split_mb > 0 else float("inf")
    segs = []  # {"pool": 0|1, "blocks": [[addr, size, used]]}
    top = 0
    exp_seg = {}  # pool -> its one expandable segment
    off, resv = {}, []
    for f, b in zip(is_free, blk):
        if not f:
            s = bsize[b]
            r = 512 if s < 512 else -(-s // 512) * 512
            small = r <= MiB
            pool = 0 if small else 1
            cands = []
            for si, sg in enumerate(segs):
                if sg["pool"] != pool:
                    continue
                for bi, x in enumerate(sg["blocks"]):
                    if x[2] or x[1] < r:
                        continue
                    if r < ms and x[1] >= ms:
                        continue
                    if r >= ms and x[1] >= r + 20 * MiB:
                        continue
                    cands.append((x[1], x[0], si, bi))
            if not cands and expandable:
                page = 2 * MiB if small else 20 * MiB
                if pool not in exp_seg:
                    segs.append({"pool": pool, "blocks": []})
                    exp_seg[pool] = len(segs) - 1
                    base = top
                    top += 1 << 40
                else:
                    base = None
                si = exp_seg[pool]
                bl = segs[si]["blocks"]
                tail = bl[-1] if bl and not bl[-1][2] else None
                grow = -(-(r - (tail[1] if tail else 0)) // page) * page
                if tail:
                    tail[1] += grow
                else:
                    end = bl[-1][0] + bl[-1][1] if bl else base
                    bl.append([end, grow, False])
                bi = len(bl) - 1
            elif not cands:
                a = 2 * MiB if small else (20 * MiB if r < 10 * MiB else -(-r // (2 * MiB)) * 2 * MiB)
                segs.append({"pool": pool, "blocks": [[top, a, False]]})
                top += a
                si, bi = len(segs) - 1, 0
            else:
                _, _, si, bi = min(cands)
            x = segs[si]["blocks"][bi]
            rem = x[1] - r
            if ((small or expandable) and rem >= 512) or (
                not small and not expandable and r < ms and rem > MiB
            ):
                segs[si]["blocks"].insert(bi + 1, [x[0] + r, rem, False])
                x[1] = r
            x[2] = True
            off[b] = x[0]
        else:
            for sg in segs:
                bl = sg["blocks"]
                for bi, x in enumerate(bl):
                    if x[0] == off[b] and x[2]:
                        x[2] = False
                        if bi + 1 < len(bl) and not bl[bi + 1][2]:
                            x[1] += bl[bi + 1][1]
                            del bl[bi + 1]
                        if bi > 0 and not bl[bi - 1][2]:
                            bl[bi - 1][1] += x[1]
                            del bl[bi]
                        break
                else:
                    continue
                break
        resv.append(sum(sum(x[1] for x in sg["blocks"]) for sg in segs))
    return off, resv


def bump_twin(tr, gran=4096, cap=None, right_min=0):
    """Occupancy list of units; first fit from the left / from the right."""
    is_free, blk, bsize = events(tr)
    n_units = [max(1, -(-s // gran)) for s in bsize]
    capu = cap // gran if cap else sum(n_units)
    used = [False] * capu
    off = {}
    for f, b in zip(is_free, blk):
        n = n_units[b]
        if not f:
            right = right_min > 0 and bsize[b] >= right_min
            starts = range(capu - n, -1, -1) if right else range(capu - n + 1)
            for s in starts:
                if not any(used[s : s + n]):
                    break
            else:
                return off, "oom"
            used[s : s + n] = [True] * n
            off[b] = s * gran
        else:
            s = off[b] // gran
            used[s : s + n] = [False] * n
    return off, "ok"


def colour_twin(r, d, size, ci, method="BF", ci_backup=True):
    V = len(r)
    order = sorted(range(V), key=lambda v: (-size[v], r[v]))
    off = [None] * V
    off_ci = 0
    for phase in (0, 1):
        local = 0 if phase == 0 else (2 * off_ci if ci_backup else off_ci)
        for v in order:
            if bool(ci[v]) != (phase == 0):
                continue
            rng = sorted(
                (off[u], off[u] + size[u] - 1)
                for u in range(V)
                if off[u] is not None and bool(ci[u]) == bool(ci[v]) and max(r[u], r[v]) < min(d[u], d[v])
            )
            merged = []
            for a, c in rng:
                if merged and merged[-1][1] + 2 > a:
                    merged[-1][1] = max(merged[-1][1], c)
                else:
                    merged.append([a, c])
            s = size[v]
            if not merged:
                y = local
            elif len(merged) == 1:
                y = local if s + local < merged[0][0] + 1 else merged[0][1] + 1
            else:
                gaps = [(merged[q + 1][0] - merged[q][1] - 1, q) for q in range(len(merged) - 1)]
                fit = [(g, q) for g, q in gaps if g >= s]
                if method == "FF":
                    if s + local < merged[0][0] + 1:
                        y = local
                    else:
                        y = merged[fit[0][1]][1] + 1 if fit else merged[-1][1] + 1
                else:
                    y = merged[min(fit)[1]][1] + 1 if fit else merged[-1][1] + 1
            off[v] = y
            if phase == 0:
                off_ci = max(off_ci, y + s)
    return off


def check_placement(tr, res):
    """No two live blocks overlap; every free matches a malloc; reserved within capacity."""
    sizes = tr.block_sizes()
    live = {}
    starts = []  # sorted (start, end) of the live blocks
    sel = tr.kind <= FREE
    for e, (k, b) in enumerate(zip(tr.kind[sel].tolist(), tr.block[sel].tolist())):
        if res.oom is not None and e >= res.oom["event"]:
            break
        if k == MALLOC:
            assert b not in live
            if res.allocator == "cuda_malloc":  # no offsets: live bytes only
                live[b] = None
                continue
            o = int(res.offset[b])
            assert o >= 0
            iv = (o, o + int(sizes[b]))
            j = bisect.bisect_left(starts, iv)
            assert j == 0 or starts[j - 1][1] <= o, "live blocks overlap"
            assert j == len(starts) or iv[1] <= starts[j][0], "live blocks overlap"
            starts.insert(j, iv)
            live[b] = iv
        else:
            assert b in live
            iv = live.pop(b)
            if iv is not None:
                starts.remove(iv)
    if res.capacity is not None:
        assert res.peak_reserved <= res.capacity
    assert (res.reserved >= res.live).all() or res.allocator == "bump"


# ---------------------------------------------------------------------------------------------
# SINGA's stick-to-limit swap schedule (seed-policies §2.3, docs/allocators.md), plain Python


def swap_schedule_twin(
    tr: AllocTrace,
    a,
    s,
    e,
    b,
    peak_op,
    swaps,
    t_out,
    t_in,
    limit,
    policy="singa_swap",
    data_buffer=4,
    mutable_data_buffer=6,
    iteration_ns=None,
):
    """The overhead (ns), each swap's swap-in end time (ns, relative to op s) and the load
    after scheduling, for the chosen swaps [(r, d, size)] (trace op indices) of the iteration
    [s, e) with context [a, b). Written from the rules, one op at a time:

    - the clock: the trace's times, or stretched about op s so that [s, e-1] lasts
      `iteration_ns`;
    - a swap is ready after its last use r (+4 ops after a Read, +6 after a Mutable, never past
      d-1; AppObMem: no delay), its bytes are gone from the load over [ready, d);
    - swap-outs in ready order on one channel: start at max(t(ready), channel free), end at
      start + T_out; the GPU copy is held up to the first op at/after that end (singa_swap:
      at most the peak op; at most d-1; at least ready); if holding it puts the load above
      the limit, the copy is dropped at the op before the first such op and the wait from
      that op's time to the transfer's end is overhead;
    - swap-ins in descending need order, serialised backwards: each must end by
      min(t(d), the next swap-in's start); it starts at the latest op whose time is at most
      that minus T_in, not before the op after the swap-out's end (singa_swap: nor before the
      op after the peak), not after d; if the copy's bytes put the load above the limit at
      some op in [start, d), the start moves to the op after the last such one; the
      transfer ends at max(t(start), planned start time) + T_in, and any part past t(d) is
      the consumer's wait: overhead.
    """
    t = [float(x) for x in tr.time_ns]
    if iteration_ns is not None:
        f = iteration_ns / (t[e - 1] - t[s])
        t = [t[s] + (x - t[s]) * f for x in t]
    load = {}
    live = 0
    for i in range(tr.num_ops):
        if tr.kind[i] == MALLOC:
            live += int(tr.size[i])
        elif tr.kind[i] == FREE:
            live -= int(tr.size[i])
        if a <= i < b:
            load[i] = live
    rows = []
    for r, d, size in swaps:
        k = int(tr.kind[r])
        delay = 0
        if policy == "singa_swap":
            delay = data_buffer if k == 2 else mutable_data_buffer if k == 3 else 0
        ready = min(r + delay, d - 1)
        rows.append([ready, r, d, size])
        for i in range(ready, d):
            load[i] -= size
    rows.sort(key=lambda x: (x[0], int(tr.block[x[1]]), x[1]))
    overhead = 0.0
    chan = float("-inf")
    out_end = []
    for ready, r, d, size in rows:
        start = max(t[ready], chan)
        end = start + t_out(size)
        chan = end
        j = next((i for i in range(a, b) if t[i] >= end), b)
        if policy == "singa_swap":
            j = min(j, peak_op)
        j = max(min(j, d - 1), ready)
        for i in range(ready, j + 1):
            if load[i] + size > limit:
                stop = max(i - 1, ready)
                overhead += max(0.0, end - t[stop])
                j = stop
                break
        for i in range(ready, j + 1):
            load[i] += size
        out_end.append(j)
    in_end = [0.0] * len(rows)
    nxt = float("inf")
    for q in sorted(range(len(rows)), key=lambda q: -rows[q][2]):
        ready, r, d, size = rows[q]
        need = min(t[d], nxt)
        st = need - t_in(size)
        j = a
        for i in range(a, b):
            if t[i] <= st:
                j = i
        lo = out_end[q] + 1
        if policy == "singa_swap":
            lo = max(lo, peak_op + 1)
        j = min(max(j, lo), d)
        last_over = None
        for i in range(j, d):
            if load[i] + size > limit:
                last_over = i
        if last_over is not None:
            j = min(last_over + 1, d)
        end = max(t[j], st) + t_in(size)
        if end > t[d]:
            overhead += end - t[d]
        for i in range(j, d):
            load[i] += size
        in_end[q] = end - t[s]
        nxt = max(t[j], st)
    return overhead, in_end, [load[i] for i in range(s, e)]
