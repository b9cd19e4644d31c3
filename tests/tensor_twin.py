"""Plain-Python twin of the tensor engine (simulator spec §12, planner §6.7), written from the
spec with a page bitmap (G10's representation) instead of the engine's free-run list.

    twin_tensors(workload, vit, mode, cap, exec_ms, bw_ssd, bw_host, ...) -> dict

For small workloads only (the bitmap scans are O(pages))."""

from __future__ import annotations

NONE, RES, FETCH, OFFL, GONE, WAIT = range(6)
SSD, CPU, GPU = 1, 2, 3


class Bitmap:
    def __init__(self, cap):
        self.used = [False] * cap
        self.cap = cap

    def alloc_left(self, n):
        run = 0
        for p in range(self.cap):
            run = 0 if self.used[p] else run + 1
            if run == n:
                s = p - n + 1
                for q in range(s, s + n):
                    self.used[q] = True
                return s
        return -1

    def alloc_right(self, n):
        run = 0
        for p in range(self.cap - 1, -1, -1):
            run = 0 if self.used[p] else run + 1
            if run == n:
                for q in range(p, p + n):
                    self.used[q] = True
                return p
        return -1

    def free(self, s, n):
        for q in range(s, s + n):
            assert self.used[q], "free of a free page"
            self.used[q] = False

    def largest(self, miss_last1=True):
        best = run = 0
        for p in range(self.cap):
            if self.used[p]:
                run = 0
            else:
                run += 1
                if not (miss_last1 and run == 1 and p == self.cap - 1 and (p == 0 or self.used[p - 1])):
                    best = max(best, run)
        return best

    def free_pages(self):
        return self.used.count(False)


def twin_tensors(
    w,
    birth,
    death,
    mode,
    cap,
    exec_ms,
    bw_ssd,
    bw_host,
    req,
    make_loss=None,
    offloads=None,
    chosen=(),
    fn_reserve=-1,
    fn_max=0,
    hints=None,
    gds_ready_on_alloc=True,
    gds_global_no_fetch=True,
    fetch_during_offload=True,
    offload_skip_dead=False,
    bytes_at_schedule=True,
    reoffload=True,
    demand_from_ssd=True,
):
    """mode 0 FN (offloads: {kernel: [tensors]}), 1/2 GDS (hints: {kernel: [(tensor, to)]}).
    req: per kernel the ordered required tensors. Returns totals and per-kernel times."""
    K, T = len(exec_ms), len(w.size)
    pages = [int(x) // 4096 for x in w.size]
    nbytes = [int(x) for x in w.size]
    glob = [bool(x) for x in w.is_global]
    chosen = set(int(t) for t in chosen)
    bm = Bitmap(cap)
    state = [NONE] * T
    start = [-1] * T
    host = [False] * T
    qalloc = [False] * T
    refetched = [False] * T  # O-40: re-allocated and fetched while its offload was pending
    chans = [dict(q=[], cur=None, ready=0.0) for _ in range(4)]
    waitq = []
    st = dict(now=0.0, xfer=0.0, kfin=None, bytes=[0, 0, 0, 0])
    bw = [bw_ssd, bw_ssd, bw_host, bw_host]

    def start_next(c):
        ch = chans[c]
        while ch["cur"] is None and ch["q"]:
            t = ch["q"].pop(0)
            if c in (1, 3) and state[t] != OFFL and offload_skip_dead and not refetched[t]:
                if bytes_at_schedule:
                    st["bytes"][c] -= nbytes[t]
                continue  # O-41 off: the offload of a dead tensor is dropped
            ch["cur"] = t
            ch["ready"] = st["now"] + nbytes[t] / bw[c]

    def enqueue(c, t):
        chans[c]["q"].append(t)
        if bytes_at_schedule:
            st["bytes"][c] += nbytes[t]  # O-42
        start_next(c)

    def check_fetch():
        while waitq:
            t = waitq[0]
            if state[t] == OFFL:
                if not fetch_during_offload:
                    return
                s = bm.alloc_right(pages[t])  # O-40
                if s < 0:
                    return
                waitq.pop(0)
                start[t] = s
                state[t] = FETCH
                refetched[t] = True
                enqueue(2 if host[t] else 0, t)
                continue
            if state[t] != WAIT:
                waitq.pop(0)
                continue
            s = bm.alloc_right(pages[t])
            if s < 0:
                return
            waitq.pop(0)
            start[t] = s
            state[t] = FETCH
            enqueue(2 if host[t] else 0, t)

    def serve():
        cand = [(chans[c]["ready"], c) for c in range(4) if chans[c]["cur"] is not None]
        best = min(cand) if cand else None
        if st["kfin"] is not None and (best is None or st["kfin"] < best[0]):
            best = (st["kfin"], 4)
        if best is None:
            return -1
        tm, c = best
        if c < 4 or any(chans[x]["cur"] is not None for x in range(4)):
            st["xfer"] += tm - st["now"]
        st["now"] = tm
        if c == 4:
            st["kfin"] = None
            return 4
        t = chans[c]["cur"]
        chans[c]["cur"] = None
        if not bytes_at_schedule:
            st["bytes"][c] += nbytes[t]
        if c in (0, 2):
            if state[t] == FETCH:
                state[t] = RES
        elif refetched[t]:
            refetched[t] = False  # O-40: the offload's end frees the new pages
            if state[t] in (RES, FETCH) and start[t] >= 0:
                bm.free(start[t], pages[t])
                start[t] = -1
                state[t] = GONE
        elif state[t] == OFFL:
            bm.free(start[t], pages[t])
            start[t] = -1
            state[t] = GONE
        start_next(c)
        if mode != 0:
            check_fetch()
        return c

    for t in range(T):
        if glob[t]:
            s = bm.alloc_right(pages[t]) if (mode != 0 and t in chosen) else bm.alloc_left(pages[t])
            if s < 0:
                return dict(status="failed", tensor=t, kernel=-1)
            start[t] = s
            state[t] = RES
    if mode == 0 and fn_reserve >= 0:
        s = bm.alloc_left(pages[fn_reserve])
        if s < 0:
            return dict(status="failed", tensor=fn_reserve, kernel=-1)
        start[fn_reserve] = s

    k_start, k_end = [], []
    for i in range(K):
        k_start.append(st["now"])
        if mode == 0:
            if i < make_loss:
                for t in offloads.get(i, []):
                    if state[t] == RES:
                        state[t] = OFFL
                        enqueue(1, t)
            else:
                while chans[1]["cur"] is not None or chans[1]["q"]:
                    if serve() < 0:
                        break
        else:
            for t, to in hints.get(i, []):
                if to in (SSD, CPU):
                    if state[t] == RES or (state[t] == OFFL and reoffload):  # O-43
                        state[t] = OFFL
                        host[t] = to == CPU
                        enqueue(3 if to == CPU else 1, t)
                elif to == GPU:
                    if state[t] == GONE or (state[t] == OFFL and not glob[t]):
                        if state[t] == GONE:
                            state[t] = WAIT
                        waitq.append(t)
                        check_fetch()
        for t in req[i]:
            if mode == 0 and (glob[t] or death[t] == -1):
                continue
            while True:
                s_ = state[t]
                if s_ in (RES, OFFL):
                    break
                if s_ == FETCH:
                    if mode != 0 and qalloc[t] and gds_ready_on_alloc:
                        break
                    if serve() < 0:
                        break
                    continue
                if s_ == WAIT:
                    if serve() < 0:
                        if state[t] == WAIT:
                            state[t] = GONE
                        continue
                    if state[t] == FETCH:
                        qalloc[t] = True
                    continue
                n = pages[t]
                s = bm.alloc_right(n) if t in chosen else bm.alloc_left(n)
                if s < 0:
                    if serve() >= 0:
                        continue
                    if t == 24:
                        state[t] = RES
                        start[t] = -1
                        break
                    return dict(
                        status="failed",
                        tensor=t,
                        kernel=i,
                        free=bm.free_pages(),
                        largest=bm.largest(),
                        now=st["now"],
                    )
                start[t] = s
                fetch = s_ == GONE and (birth[t] != i or glob[t])
                if fetch and glob[t] and gds_global_no_fetch:
                    fetch = False
                if fetch:
                    state[t] = FETCH
                    qalloc[t] = False
                    refetched[t] = False
                    enqueue(2 if (host[t] and not demand_from_ssd) else 0, t)  # O-44
                    continue
                state[t] = RES
                break
        for t in req[i]:
            qalloc[t] = False
        st["kfin"] = st["now"] + exec_ms[i]
        while st["kfin"] is not None:
            serve()
        k_end.append(st["now"])
        for t in req[i]:
            if glob[t]:
                continue
            dead = death[t] == i + 1 if mode == 0 else death[t] in (i + 1, -1)
            if dead and start[t] >= 0 and t != fn_reserve and state[t] in (RES, OFFL, FETCH):
                bm.free(start[t], pages[t])
                start[t] = -1
                state[t] = NONE
        if mode != 0:
            check_fetch()
        if mode == 0 and i >= make_loss:
            rest = bm.largest() - fn_max
            stop = False
            for j in range(i + 1, K):
                for t in req[j]:
                    if t not in chosen or state[t] != GONE:
                        continue
                    if rest > pages[t]:
                        s = bm.alloc_right(pages[t])
                        if s < 0:
                            stop = True
                            break
                        start[t] = s
                        state[t] = FETCH
                        enqueue(0, t)
                        rest -= pages[t]
                    else:
                        stop = True
                        break
                if stop:
                    break
    return dict(
        status="ok", total=st["now"], xfer=st["xfer"], bytes=st["bytes"], k_start=k_start, k_end=k_end
    )
