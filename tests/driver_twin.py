"""A plain-Python twin of the driver engine (g10fast/engine/driver/kernels.py), written from
docs/driver-engine.md with dicts and ordered dicts, for small synthetic workloads."""

from __future__ import annotations

import math
from collections import OrderedDict

VA = 512
PAGE_MODES = ("lru4k", "tbn64k")
BB = 16  # UVMSmart's 64 KiB basic block
GPU, HOST, SSD, NONE = 3, 2, 1, 0


def marked_region(mark: list, exist: list, faulted: list, prefetcher: str, threshold: int, big: int) -> set:
    """Offsets a batch migrates in one VA block (before dropping resident ones)."""
    mark = list(mark)
    out = set()
    for f in faulted:
        g0 = f - f % big
        for o in range(g0, min(g0 + big, VA)):
            if exist[o]:
                mark[o] = 1
                out.add(o)
    if prefetcher == "density":
        for f in faulted:
            best = None
            size = 2
            while size <= VA:
                lo = f - f % size
                e = sum(exist[lo : lo + size])
                c = sum(mark[lo : lo + size])
                if e > 0 and c * 100 > e * threshold:
                    best = (lo, size)
                size *= 2
            if best:
                out.update(o for o in range(best[0], best[0] + best[1]) if exist[o])
    elif prefetcher == "tbn":
        size = big
        while size <= VA:
            for lo in range(0, VA, size):
                e = sum(exist[lo : lo + size])
                c = sum(mark[lo : lo + size])
                if e > 0 and c < e and 2 * c > e:
                    for o in range(lo, lo + size):
                        if exist[o]:
                            mark[o] = 1
                            out.add(o)
            size *= 2
    return out


def runs_cost(pages_with_tier: list, table: dict) -> int:
    """Cost of transfers: consecutive pages (offsets) of one tier form one transfer."""
    cost, prev, n, tier = 0, None, 0, None
    for o, t in pages_with_tier:
        if t is not None and t == tier and prev is not None and o == prev + 1:
            n += 1
        else:
            if n:
                cost += table[tier][n]
            tier, n = t, (1 if t is not None else 0)
        prev = o
    if n:
        cost += table[tier][n]
    return cost


class Twin:
    def __init__(self, P, prm, opts):
        self.P = P
        self.loc = [NONE] * P
        self.copy = [NONE] * P
        self.prm = prm
        self.o = opts
        self.chunks = OrderedDict()  # block -> None, head = victim
        self.pages = OrderedDict()  # page -> None (lru4k)
        self.host = 0
        self.gpu = 0
        self.barr = {}
        self.fail = False

    def gcount(self, b):
        return sum(1 for p in range(b * VA, min(b * VA + VA, self.P)) if self.loc[p] == GPU)

    def evict(self, b, lo, hi, cnt):
        moved = []
        for o in range(lo, hi):
            p = b * VA + o
            if p >= self.P or self.loc[p] != GPU:
                moved.append((o, None))
                continue
            self.gpu -= 1
            self.pages.pop(p, None)
            if self.copy[p] != NONE:
                self.loc[p], self.copy[p] = self.copy[p], NONE
                cnt["clean"] += 1
                moved.append((o, None))
            elif self.host < self.prm["host_pages"]:
                self.loc[p] = HOST
                self.host += 1
                cnt["out_cpu"] += 1
                moved.append((o, "d2h"))
            else:
                self.loc[p] = SSD
                cnt["out_ssd"] += 1
                moved.append((o, "ssd_w"))
        if self.o.evict not in PAGE_MODES and b in self.chunks and self.gcount(b) == 0:
            del self.chunks[b]
        return runs_cost(moved, self.prm)

    def make_room(self, b, need, protect, cnt):
        cost = 0
        if self.o.evict in PAGE_MODES:
            while self.gpu + need > self.prm["gpu_pages"]:
                if not self.pages:
                    self.fail = True
                    return cost
                v = next(iter(self.pages))
                if self.o.evict == "lru4k":
                    cost += self.evict(v // VA, v % VA, v % VA + 1, cnt)
                    continue
                vb, o = v // VA, v % VA
                cost += self.evict(vb, o - o % BB, o - o % BB + BB, cnt)
                # tree pre-eviction: bottom-up, subtrees with 0 < resident < existing / 2
                size = BB
                while size <= VA:
                    for lo in range(0, VA, size):
                        e = sum(1 for q in range(lo, lo + size) if vb * VA + q < self.P)
                        c = sum(
                            1
                            for q in range(lo, lo + size)
                            if vb * VA + q < self.P and self.loc[vb * VA + q] == GPU
                        )
                        if e and 0 < c and 2 * c < e:
                            cost += self.evict(vb, lo, lo + size, cnt)
                    size *= 2
            return cost
        if need == 0 or b in self.chunks:
            return cost
        while len(self.chunks) >= self.prm["gpu_chunks"]:
            victims = [v for v in self.chunks if v not in protect]
            if not victims:
                self.fail = True
                return cost
            cost += self.evict(victims[0], 0, VA, cnt)
        return cost

    def land(self, b, offs, cnt):
        moved = []
        for o in range(VA):
            p = b * VA + o
            if o not in offs or p >= self.P or self.loc[p] == GPU:
                moved.append((o, None))
                continue
            src = self.loc[p]
            if src == HOST:
                cnt["in_cpu"] += 1
                if self.o.skip_clean_writeback:
                    self.copy[p] = HOST
                else:
                    self.host -= 1
                moved.append((o, "h2d"))
            elif src == SSD:
                cnt["in_ssd"] += 1
                if self.o.skip_clean_writeback:
                    self.copy[p] = SSD
                moved.append((o, "ssd_r"))
            else:
                cnt["alloc"] += 1
                moved.append((o, None))
            self.loc[p] = GPU
            self.gpu += 1
            if self.o.evict in PAGE_MODES:
                self.pages[p] = None
            elif b not in self.chunks:
                self.chunks[b] = None
        return runs_cost(moved, self.prm)


def twin_table(gbps, f_hz, curve, halve, overhead_us, latency_us=0.0):
    """Cycles of one transfer of n = 0..512 pages, written from the formulas of
    docs/driver-engine.md, not from the product: UVMSmart's BW = (2a/pi) atan(0.07292 KB),
    a = 0.75 link, halved at 2 MiB and above; "flat": the link; + overhead + latency."""
    out = [0]
    for n in range(1, 513):
        nbytes = n * 4096
        if curve == "flat":
            bw = gbps
        else:
            bw = 2.0 * (0.75 * gbps) / math.pi * math.atan(0.07292 * nbytes / 1024.0)
            if halve and nbytes >= 2 * 1024 * 1024:
                bw = bw / 2.0
        out.append(int(math.ceil(((overhead_us + latency_us) * 1e-6 + nbytes / (bw * 1e9)) * f_hz)))
    return out


def twin_params(system, opts):
    """The engine's parameters from a System built in code (no preset: no [driver] values),
    independent of g10fast.engine.driver.system_params: the host links' minimum times
    link_fraction (1 when < 0), the SSD's read and write latencies on its tables."""
    f_hz = int(system.gpu_frequency_ghz * 1e9)
    gpu_pages = int(system.gpu_memory_gb * 2**30) // 4096
    frac = opts.link_fraction if opts.link_fraction > 0 else 1.0
    link = min(system.host_link_gbps, system.gpu_link_gbps) * frac
    lat = opts.fault_latency_us if opts.fault_latency_us >= 0 else system.fault_latency_us
    ov = opts.transfer_overhead_us
    curve, halve = (opts.transfer_curve or "uvmsmart"), opts.curve_halve_2mib
    return {
        "f_hz": f_hz,
        "gpu_pages": gpu_pages,
        "gpu_chunks": gpu_pages // 512,
        "host_pages": int(system.host_memory_gb * 2**30) // 4096,
        "fault_latency_cycles": int(round(lat * 1e-6 * f_hz)),
        "h2d": twin_table(link, f_hz, curve, halve, ov),
        "d2h": twin_table(link, f_hz, curve, halve, ov),
        "ssd_r": twin_table(system.ssd_bandwidth_gbps, f_hz, "flat", False, ov, system.ssd_read_latency_us),
        "ssd_w": twin_table(system.ssd_bandwidth_gbps, f_hz, "flat", False, ov, system.ssd_write_latency_us),
    }


def twin_runs(w):
    """Per kernel, its page runs: its inputs in their stored order, then its outputs that are
    not inputs; empty tensors left out (written here, not by the product's required_runs)."""
    ptr, rs, rn, rw = [0], [], [], []
    for k in range(w.num_kernels):
        ins = [int(t) for t in w.in_idx[w.in_ptr[k] : w.in_ptr[k + 1]]]
        outs = [int(t) for t in w.out_idx[w.out_ptr[k] : w.out_ptr[k + 1]]]
        for t in ins + [t for t in outs if t not in ins]:
            if int(w.n_pages[t]) > 0:
                rs.append(int(w.start_page[t]))
                rn.append(int(w.n_pages[t]))
                rw.append(t in outs)
        ptr.append(len(rs))
    return ptr, rs, rn, rw


def twin_simulate(w, prm, opts, hints=None, n_iter=2, runs=None):
    """(kernels [(it, k, start, end, faults, batches, stall, in, out, gpu)], counters per
    iteration (dicts), loc, fail)."""
    ptr, rs, rn, rw = runs if runs is not None else twin_runs(w)
    K, P = w.num_kernels, w.num_pages
    T = Twin(P, prm, opts)
    big = opts.big_page_kib // 4
    lat = prm["fault_latency_cycles"]
    hrows = (
        []
        if hints is None
        else list(
            zip(hints.issue.tolist(), hints.start_page.tolist(), hints.n_pages.tolist(), hints.kind.tolist())
        )
    )
    wait = None if hints is None or hints.wait is None else hints.wait.tolist()
    done = [0] * len(hrows)
    issued_at = [0] * len(hrows)
    hq = 0
    keys = (
        "alloc",
        "in_cpu",
        "in_ssd",
        "out_cpu",
        "out_ssd",
        "clean",
        "discard",
        "prefetched",
        "faults",
        "batches",
        "pf_cycles",
        "grown",
    )
    counters = []
    kernels = []
    t = 0
    pf_free = 0
    hi_ = 0
    for g in range(n_iter * K):
        it, k = divmod(g, K)
        if k == 0:
            counters.append(dict.fromkeys(keys, 0))
        cnt = counters[it]
        while hi_ < len(hrows) and hrows[hi_][0] == g:
            issued_at[hi_] = t
            hi_ += 1
        while hq < hi_ and (pf_free <= t or (wait is not None and hq <= wait[g])):
            _, s0, n, kind = hrows[hq]
            cur = max(issued_at[hq], pf_free)
            p = s0
            while p < s0 + n:
                b = p // VA
                lo, hi = p - b * VA, min(s0 + n - b * VA, VA)
                if kind == 0:
                    offs = {o for o in range(lo, hi) if T.loc[b * VA + o] != GPU}
                    if offs:
                        cur += T.make_room(b, len(offs), {b}, cnt)
                        if T.fail:
                            return kernels, counters, T.loc, True
                        x = T.land(b, offs, cnt)
                        cur += x
                        cnt["prefetched"] += len(offs)
                        cnt["pf_cycles"] += x
                        T.barr[b] = max(T.barr.get(b, 0), cur)
                elif kind == 1 or (
                    kind == 3 and T.gpu > int(prm["gpu_pages"] * float(hints.preevict_fraction))
                ):
                    cur += T.evict(b, lo, hi, cnt)
                elif kind == 2:
                    for o in range(lo, hi):
                        q = b * VA + o
                        if T.loc[q] == GPU:
                            if T.copy[q] == HOST:
                                T.host -= 1
                            T.copy[q] = NONE
                            T.gpu -= 1
                            T.pages.pop(q, None)
                            cnt["discard"] += 1
                        elif T.loc[q] != NONE:
                            if T.loc[q] == HOST:
                                T.host -= 1
                            cnt["discard"] += 1
                        T.loc[q] = NONE
                    if b in T.chunks and T.gcount(b) == 0:
                        del T.chunks[b]
                p = b * VA + hi
            pf_free = cur
            done[hq] = cur
            hq += 1
        start = t
        if wait is not None and wait[g] >= 0:
            start = max(start, done[wait[g]])
        clock = start
        arr = 0
        in0 = cnt["in_cpu"] + cnt["in_ssd"]
        out0 = cnt["out_cpu"] + cnt["out_ssd"]
        touches = [
            (int(rs[r]) + j, bool(rw[r])) for r in range(ptr[k], ptr[k + 1]) for j in range(int(rn[r]))
        ]
        faults = batches = 0
        i = 0
        last_b = -1
        while True:
            pend = []
            while i < len(touches) and len(pend) < opts.fault_batch:
                p, wr = touches[i]
                b = p // VA
                if T.loc[p] == GPU:
                    if opts.inflight_overlap:
                        arr = max(arr, T.barr.get(b, 0))
                    else:
                        clock = max(clock, T.barr.get(b, 0))
                    if opts.evict in PAGE_MODES:
                        T.pages.move_to_end(p)
                    elif opts.evict == "access2m" and b != last_b:
                        T.chunks.move_to_end(b)
                    last_b = b
                    if wr and T.copy[p] != NONE:
                        if T.copy[p] == HOST:
                            T.host -= 1
                        T.copy[p] = NONE
                else:
                    pend.append(p)
                i += 1
            if not pend:
                break
            faults += len(pend)
            batches += 1
            blocks = list(dict.fromkeys(p // VA for p in pend))
            cyc = lat
            for b in blocks:
                fl = [p - b * VA for p in pend if p // VA == b]
                exist = [1 if b * VA + o < P else 0 for o in range(VA)]
                mark = [1 if exist[o] and T.loc[b * VA + o] == GPU else 0 for o in range(VA)]
                offs = marked_region(mark, exist, fl, opts.prefetcher, opts.density_threshold, big)
                offs = {o for o in offs if T.loc[b * VA + o] != GPU}
                cnt["grown"] += len(offs) - len(fl)
                cyc += T.make_room(b, len(offs), {b}, cnt)
                if T.fail:
                    return kernels, counters, T.loc, True
                cyc += T.land(b, offs, cnt)
            clock += cyc
        for r in range(ptr[k], ptr[k + 1]):
            if rw[r]:
                for p in range(int(rs[r]), int(rs[r] + rn[r])):
                    if T.loc[p] == GPU and T.copy[p] != NONE:
                        if T.copy[p] == HOST:
                            T.host -= 1
                        T.copy[p] = NONE
        ex = int(w.exec_cycles[k])
        end = max(clock + ex, arr)
        kernels.append(
            (
                it,
                k,
                start,
                end,
                faults,
                batches,
                end - t - ex,
                cnt["in_cpu"] + cnt["in_ssd"] - in0,
                cnt["out_cpu"] + cnt["out_ssd"] - out0,
                T.gpu,
            )
        )
        cnt["faults"] += faults
        cnt["batches"] += batches
        t = end
    return kernels, counters, T.loc, False
