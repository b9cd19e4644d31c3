"""Offset-level allocators on an allocation trace (E4; docs/allocators.md). One interface:

    res = run_allocator(trace, "cnmem", capacity=None, **options) -> AllocResult

Allocators: `cuda_malloc` (live bytes only: the lower bound), `cnmem` (NVIDIA CNMeM, SINGA's
baseline), `pytorch` (the CUDA caching allocator's rules), `singa_colour` (SINGA's offline
interval colouring) and `bump` (FlashNeuron's left/right first fit of the tensor engine).
Each gives the offset of every block, live and reserved bytes after every malloc/free, peak
reserved, peak live, fragmentation (reserved − live) over time, and an OOM as a result: which
request, how many bytes, how much was free in how many pieces.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, fields

import numpy as np

from g10fast.alloc import kernels as K
from g10fast.alloc.trace import AllocTrace
from g10fast.errors import InputError

MiB = 1 << 20


@dataclass
class AllocResult:
    allocator: str
    options: dict
    status: str  # "ok" | "oom"
    offset: np.ndarray  # int64[B] block offsets (-1: not placed / not modelled)
    op_index: np.ndarray  # int64[E] trace op index of each malloc/free event
    live: np.ndarray  # int64[E] live bytes after each event
    reserved: np.ndarray  # int64[E] reserved bytes after each event
    capacity: int | None = None
    oom: dict | None = None  # event, op, block, bytes, free_bytes, free_pieces, largest
    extra: dict = field(default_factory=dict)

    @property
    def peak_live(self) -> int:
        return int(self.live.max()) if len(self.live) else 0

    @property
    def peak_reserved(self) -> int:
        return int(self.reserved.max()) if len(self.reserved) else 0

    @property
    def fragmentation(self) -> np.ndarray:
        """reserved − live after each event, bytes."""
        return self.reserved - self.live

    @property
    def frag_at_live_peak(self) -> int:
        """reserved − live at the event of peak live bytes (the first such event)."""
        if not len(self.live):
            return 0
        e = int(np.argmax(self.live))
        return int(self.reserved[e] - self.live[e])

    def summary(self) -> dict:
        pl, pr = self.peak_live, self.peak_reserved
        return {
            "allocator": self.allocator,
            "options": dict(self.options),
            "status": self.status,
            "peak_live_bytes": pl,
            "peak_reserved_bytes": pr,
            "overhead": (pr / pl - 1.0) if pl else 0.0,
            "fragmentation_at_live_peak_bytes": self.frag_at_live_peak,
            "capacity_bytes": self.capacity,
            "oom": self.oom,
            **self.extra,
        }


# ---------------------------------------------------------------------------------------------
# options


@dataclass(frozen=True)
class CudaMallocOptions:
    pass


@dataclass(frozen=True)
class CnmemOptions:
    granularity: int = 512  # CNMEM_GRANULARITY
    #: [ours] 0: no up-front reservation, growth by the request (the baseline on any trace).
    #: SINGA's CnMemPool reserves MemPoolConf.init_size = 256 MB (core.proto; cnmemInit ->
    #: cnmem.cpp Manager::reserve, one head block): init_bytes = 268435456, as the
    #: singa-pool.less-than-cnmem row runs it; NVIDIA's cnmemInit with size 0 reserves half
    #: the GPU's memory
    init_bytes: int = 0
    release_on_oom: bool = True  # free wholly free heads before failing to grow


@dataclass(frozen=True)
class PytorchOptions:
    per_stream: bool = False  # separate pools per stream (the trace's stream column)
    expandable_segments: bool = False
    max_split_size_mb: float = 0.0  # 0 = unlimited (PyTorch's default)


@dataclass(frozen=True)
class ColourOptions:
    method: str = "BF"  # "BF" (SINGA's default) | "FF"
    ci_backup: bool = True  # the 2x region for cross-iteration blocks (faithful)
    int32_merge_bug: bool = False  # pair<int,int> truncation of merged ranges (faithful: True)
    scope: str = "iteration"  # SmartMemPool as the authors' code runs it (apache/singa
    #                                  memory.cc Malloc/Detection/Plan: detect, colour one
    #                                  iteration, switch, fall back to cudaMalloc);
    #                                  "trace" [ours]: colour the whole trace's blocks at once;
    #                                  "pool_opt": SwapPool::PoolOpt, one iteration coloured
    #                                  with wrap-around conflicts (colour_periodic)


@dataclass(frozen=True)
class BumpOptions:
    granularity: int = 4096  # G10's page
    right_min_bytes: int = 0  # blocks of at least this size go right (0 = none)


OPTIONS = {
    "cuda_malloc": CudaMallocOptions,
    "cnmem": CnmemOptions,
    "pytorch": PytorchOptions,
    "singa_colour": ColourOptions,
    "bump": BumpOptions,
}
ALLOCATORS = tuple(OPTIONS)


def make_options(name: str, options: dict | None):
    if name not in OPTIONS:
        raise InputError(f"unknown allocator {name!r} (one of {', '.join(ALLOCATORS)})", param="--allocator")
    cls = OPTIONS[name]
    known = {f.name: f for f in fields(cls)}
    kw = {}
    for k, v in (options or {}).items():
        if k not in known:
            raise InputError(
                f"allocator {name} has no option {k!r} (options: {', '.join(known) or 'none'})",
                param=f"{name}.{k}",
            )
        want = type(known[k].default)
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise InputError(f"expected {want.__name__}, got {v!r}", param=f"{name}.{k}")
        kw[k] = v
    o = cls(**kw)
    if name == "cnmem" and (o.granularity < 1 or o.init_bytes < 0):
        raise InputError("granularity must be >= 1 and init_bytes >= 0", param="cnmem")
    if name == "bump" and (o.granularity < 1 or o.right_min_bytes < 0):
        raise InputError("granularity must be >= 1, right_min_bytes >= 0", param="bump")
    if name == "singa_colour":
        if o.method not in ("BF", "FF"):
            raise InputError(f"method must be BF or FF, got {o.method!r}", param="singa_colour.method")
        if o.scope not in ("trace", "iteration", "pool_opt"):
            raise InputError(
                f"scope must be 'trace', 'iteration' or 'pool_opt', got {o.scope!r}",
                param="singa_colour.scope",
            )
    if name == "pytorch" and o.max_split_size_mb < 0:
        raise InputError("must be >= 0", param="pytorch.max_split_size_mb")
    return o


# ---------------------------------------------------------------------------------------------


def _events(trace: AllocTrace):
    if not isinstance(trace, AllocTrace):
        raise InputError("expected an AllocTrace", param="trace")
    op, is_free, blk = trace.alloc_ops()
    bsize = trace.block_sizes()
    B = bsize.shape[0]
    if len(blk) and (blk.min() < 0 or blk.max() >= B):
        raise InputError("a malloc/free names a block outside 0..B-1", param="trace")
    # every free matches an earlier malloc of its block, once
    state = np.zeros(B, np.int8)
    mal = blk[~is_free]
    if len(np.unique(mal)) != len(mal):
        raise InputError("a block is malloc'd twice", param="trace")
    first = np.full(B, -1, np.int64)
    first[mal] = np.nonzero(~is_free)[0]
    fr = np.nonzero(is_free)[0]
    if len(fr):
        fb = blk[fr]
        if len(np.unique(fb)) != len(fb) or (first[fb] < 0).any() or (first[fb] > fr).any():
            raise InputError("a free does not follow its block's malloc (or is repeated)", param="trace")
    del state
    return op, is_free, blk.astype(np.int64), bsize


def run_allocator(
    trace: AllocTrace, name: str = "cnmem", capacity: int | None = None, **options
) -> AllocResult:
    """Replay the trace's mallocs and frees through one allocator (`capacity`: bytes of GPU
    memory, None = unlimited)."""
    o = make_options(name, options)
    if capacity is not None and (not isinstance(capacity, (int, np.integer)) or capacity < 0):
        raise InputError(f"capacity must be a byte count >= 0, got {capacity!r}", param="capacity")
    op, is_free, blk, bsize = _events(trace)
    E, B = len(blk), len(bsize)
    off = np.full(B, -1, np.int64)
    live = np.zeros(E, np.int64)
    resv = np.zeros(E, np.int64)
    fail = np.zeros(6, np.int64)
    cap = -1 if capacity is None else int(capacity)
    extra = {}
    if name == "cuda_malloc":
        d = np.where(is_free, -bsize[blk], bsize[blk])
        live[:] = np.cumsum(d)
        resv[:] = live
        st = 0
        if cap >= 0 and E and live.max() > cap:
            e = int(np.argmax(live > cap))
            b = int(blk[e])
            fail[:] = (e, b, bsize[b], cap - live[e] + bsize[b], 1, cap - live[e] + bsize[b])
            st = 1
    elif name == "cnmem":
        st = K.cnmem(
            is_free, blk, bsize, o.granularity, o.init_bytes, cap, o.release_on_oom, off, live, resv, fail
        )
    elif name == "bump":
        if cap < 0:  # no capacity: the whole footprint, rounded up, is the address space
            cap = int((((bsize + o.granularity - 1) // o.granularity).clip(1)).sum() * o.granularity)
            capacity_shown = None
        else:
            capacity_shown = cap
        right = (bsize >= o.right_min_bytes) if o.right_min_bytes > 0 else np.zeros(B, bool)
        st = K.bump(is_free, blk, bsize, right, o.granularity, cap, off, live, resv, fail)
        if st == 2:
            raise InputError(f"block {int(fail[1])} freed over free space", param="trace")
        cap = -1 if capacity_shown is None else capacity_shown
    elif name == "singa_colour":
        if o.scope == "iteration":
            st, extra = _colour_runtime(is_free, blk, bsize, o, cap, off, live, resv, fail)
        elif o.scope == "pool_opt":
            st, extra = _colour_pool_opt(trace, is_free, blk, bsize, o, cap, off, live, resv, fail)
        else:
            st, extra = _colour_trace(is_free, blk, bsize, o, cap, off, live, resv, fail)
    else:
        st = _pytorch(trace, op, is_free, blk, bsize, o, cap, off, live, resv, fail)
    oom = None
    if st == 1:
        e = int(fail[0])
        oom = {
            "event": e,
            "op": int(op[e]),
            "block": int(fail[1]),
            "bytes": int(fail[2]),
            "free_bytes": int(fail[3]),
            "free_pieces": int(fail[4]),
            "largest_free_bytes": int(fail[5]),
        }
        live, resv, op_out = live[:e], resv[:e], op[:e]
    else:
        op_out = op
    return AllocResult(
        name,
        {f.name: getattr(o, f.name) for f in fields(o)},
        "oom" if st == 1 else "ok",
        off,
        op_out,
        live,
        resv,
        None if cap < 0 else cap,
        oom,
        extra,
    )


def colour_intervals(r, d, size, ci=None, method="BF", ci_backup=True, int32_merge_bug=False):
    """SINGA's colouring of intervals [r, d) (half-open) with sizes: (offsets, pool size).
    Vertices go in order of size descending, then r ascending; `ci` marks cross-iteration ones."""
    r = np.asarray(r, np.int64)
    d = np.asarray(d, np.int64)
    size = np.asarray(size, np.int64)
    V = len(r)
    if len(d) != V or len(size) != V:
        raise InputError("r, d and size differ in length", param="intervals")
    if V and ((d < r).any() or (size < 0).any()):
        raise InputError("an interval has d < r or a negative size", param="intervals")
    ci = np.zeros(V, np.int8) if ci is None else np.asarray(ci, np.int8)
    order = np.lexsort((r, -size)).astype(np.int64)
    off = np.full(V, -1, np.int64)
    pool = K.colour(order, r, d, size, ci, method == "FF", int32_merge_bug, ci_backup, off)
    return off, int(pool)


def colour_periodic(r, d, size, L: int, method: str = "BF"):
    """SINGA's SwapPool::PoolOpt colouring (seed-policies §2.2) as we read it [ours]: one
    iteration's blocks as intervals [r, d) in malloc/free-op space with r in [0, L) (d ≥ L:
    the block is still live when the next iteration starts; d = None-like values ≥ r + L:
    live for good), coloured in one pass from offset 0 (no backup region), in SINGA's order
    (size descending, then r) with its BF (or FF) placement. The layout repeats every
    iteration, so two blocks conflict when they overlap in some iteration: [r_i, d_i) and
    [r_j + kL, d_j + kL) for k in −1, 0, 1 (the wrap-around rule of PoolOpt, whose source
    form `min(d)<0 && min(d)+2L < max(r)` we could not place). Returns (offsets, pool)."""
    r = np.asarray(r, np.int64)
    d = np.minimum(np.asarray(d, np.int64), r + L)  # live for good: the whole period
    size = np.asarray(size, np.int64)
    V = len(r)
    order = np.lexsort((r, -size))
    off = np.full(V, -1, np.int64)
    done = np.zeros(V, bool)
    pool = 0
    for v in order.tolist():
        c = np.zeros(V, bool)
        for k in (-L, 0, L):
            c |= np.maximum(r[v], r + k) < np.minimum(d[v], d + k)
        c &= done
        s = int(size[v])
        if not c.any():
            y = 0
        else:
            fs = off[c]
            se = off[c] + size[c] - 1
            o = np.argsort(fs, kind="stable")
            fs, se = fs[o].tolist(), se[o].tolist()
            mf, ms = [fs[0]], [se[0]]
            for a, b in zip(fs[1:], se[1:]):
                if ms[-1] + 2 > a:
                    ms[-1] = max(ms[-1], b)
                else:
                    mf.append(a)
                    ms.append(b)
            if len(mf) == 1 or method == "FF":
                y = 0 if s < mf[0] + 1 else None
                if y is None and method == "FF":
                    y = next(
                        (ms[q] + 1 for q in range(len(mf) - 1) if mf[q + 1] - ms[q] - 1 >= s), ms[-1] + 1
                    )
                elif y is None:
                    y = ms[0] + 1
            else:
                gaps = [(mf[q + 1] - ms[q] - 1, q) for q in range(len(mf) - 1) if mf[q + 1] - ms[q] - 1 >= s]
                y = ms[min(gaps)[1]] + 1 if gaps else ms[-1] + 1
        off[v] = y
        done[v] = True
        pool = max(pool, y + s)
    return off, int(pool)


def _colour_pool_opt(trace, is_free, blk, bsize, o, cap, off, live, resv, fail):
    """scope = pool_opt: the trace's iteration (its known period, else `match` detection;
    the middle one when three or more fit, as PoolOpt colours the middle of three) coloured
    by colour_periodic; the blocks of other iterations take the offset of the block at the
    same place in the planned iteration when their size matches (else they are left out:
    offset −1). Reserved = the pool."""
    E, B = len(blk), len(bsize)
    per = trace.meta.get("period")
    if not per:
        from g10fast.alloc.period import detect_period

        p = detect_period(trace, "match")
        if not p.found:
            raise InputError(
                "scope pool_opt needs an iteration: none found in the trace", param="singa_colour.scope"
            )
        per = (p.start, p.length)
    start, L = int(per[0]), int(per[1])
    n_it = (E - start) // L
    if n_it < 1:
        raise InputError("scope pool_opt: the trace holds no whole iteration", param="singa_colour.scope")
    s = start + (L if n_it >= 3 else 0)
    r = np.full(B, E, np.int64)
    d = np.full(B, 1 << 40, np.int64)
    r[blk[~is_free]] = np.nonzero(~is_free)[0]
    d[blk[is_free]] = np.nonzero(is_free)[0]
    # the iteration's blocks, and those malloc'd before it and live through it (weights:
    # live for the whole period); a block freed inside it but malloc'd before is the last
    # iteration's instance of one of its blocks (the wrap-around conflict covers it)
    mid = np.nonzero((r >= s) & (r < s + L))[0]
    pers = np.nonzero((r < s) & (d >= s + L))[0]
    vs = np.concatenate([mid, pers])
    rr = np.concatenate([r[mid] - s, np.zeros(len(pers), np.int64)])
    dd = np.concatenate([d[mid] - s, np.full(len(pers), L, np.int64)])
    o_, pool = colour_periodic(rr, dd, bsize[vs], L, o.method)
    off[vs] = o_
    # the other iterations' blocks: the planned block at the same place, same size
    place = np.full(L, -1, np.int64)
    place[r[mid] - s] = mid
    rest = np.nonzero((r < E) & ((r < s) | (r >= s + L)) & (off < 0))[0]
    if len(rest):
        pos = (r[rest] - start) % L
        ok = (r[rest] >= start) & (place[pos] >= 0)
        ok[ok] &= bsize[place[pos[ok]]] == bsize[rest[ok]]
        off[rest[ok]] = off[place[pos[ok]]]
    live[:] = np.cumsum(np.where(is_free, -bsize[blk], bsize[blk]))
    resv[:] = pool
    extra = {
        "pool_bytes": pool,
        "period": [start, L],
        "coloured_iteration_start": int(s),
        "coloured_blocks": int(len(mid)),
        "persistent_blocks": int(len(pers)),
    }
    if cap >= 0 and pool > cap:
        fail[:] = (0, blk[0] if E else -1, pool, cap, 1, cap)
        return 1, extra
    return 0, extra


def _colour_trace(is_free, blk, bsize, o, cap, off, live, resv, fail):
    E, B = len(blk), len(bsize)
    r = np.full(B, E, np.int64)
    d = np.full(B, E, np.int64)
    r[blk[~is_free]] = np.nonzero(~is_free)[0]
    d[blk[is_free]] = np.nonzero(is_free)[0]
    ci = (d == E) & (r < E)
    o_, pool = colour_intervals(r, d, bsize, ci.astype(np.int8), o.method, o.ci_backup, o.int32_merge_bug)
    off[:] = o_
    live[:] = np.cumsum(np.where(is_free, -bsize[blk], bsize[blk]))
    resv[:] = pool
    if cap >= 0 and pool > cap:
        big = cap
        fail[:] = (0, blk[0] if E else -1, pool, cap, 1, big)
        return 1, {"pool_bytes": pool}
    return 0, {"pool_bytes": pool, "cross_iteration_blocks": int(ci.sum())}


def _colour_runtime(is_free, blk, bsize, o, cap, off, live, resv, fail):
    """SmartMemPool's runtime (seed-policies §2.2): SINGA's detection on the first 300, 600,
    ... malloc/free ops; the switch at `n + L − (n − loc) % L` (the start of the next
    iteration); one iteration [loc, loc + L) coloured (cross-iteration blocks first, with the
    backup region); after the switch, a malloc at op g takes planned vertex i = (g − loc) % L
    when that vertex has the same size and its slot is free (a cross-iteration vertex whose
    primary slot is held: its backup copy), else cudaMalloc. Reserved = the pool (from the
    switch on) + the bytes held by cudaMalloc. Offsets: the pool at 0, cudaMalloc blocks at
    fresh addresses above it."""
    from g10fast.alloc.period import _singa

    E = len(blk)
    per = _singa(is_free, blk, bsize)
    cur_cuda = 0
    cur_live = 0
    extra = {"switch_op": None, "pool_bytes": 0}
    if not per.found:  # no iteration: every block on cudaMalloc
        live[:] = np.cumsum(np.where(is_free, -bsize[blk], bsize[blk]))
        resv[:] = live
        stop = int(np.argmax(live > cap)) if cap >= 0 and E and live.max() > cap else E
        top = 0
        for e in range(stop):
            if not is_free[e]:
                off[blk[e]] = top
                top += int(bsize[blk[e]])
        if stop < E:
            b, s = int(blk[stop]), int(bsize[blk[stop]])
            room = max(cap - int(live[stop] - s), 0)
            fail[:] = (stop, b, s, room, 1, room)
            return 1, dict(extra, detected=False)
        return 0, dict(extra, detected=False)
    L, loc, n = per.length, per.start, per.checked_ops
    switch = n + L - (n - loc) % L
    # colour the iteration [loc, loc + L)
    w_free, w_blk = is_free[loc : loc + L], blk[loc : loc + L]
    r, d, sz, ci, vb = [], [], [], [], {}
    for j in range(L):
        b = int(w_blk[j])
        if not w_free[j]:
            vb[b] = len(r)
            r.append(j)
            d.append(L)
            sz.append(int(bsize[b]))
            ci.append(1)
        elif b in vb:
            d[vb[b]] = j
            ci[vb[b]] = 0
    v_off, pool = colour_intervals(r, d, sz, ci, o.method, o.ci_backup, o.int32_merge_bug)
    off_ci = max([v_off[v] + sz[v] for v in range(len(r)) if ci[v]], default=0)
    vert_at = {r[v]: v for v in range(len(r))}
    held = np.zeros((len(r), 2), bool)  # primary / backup slot in use
    where = {}  # block -> (vertex, slot) or None (cudaMalloc)
    top = int(pool) + (1 << 20)
    hits = falls = 0
    cur_col = 0  # bytes held in pool slots (colour load)
    max_cuda = max_col = cuda_at_max_col = 0
    for e in range(E):
        b = int(blk[e])
        s = int(bsize[b])
        if not is_free[e]:
            got = None
            if e >= switch:
                v = vert_at.get((e - loc) % L)
                if v is not None and sz[v] == s:
                    if not held[v, 0]:
                        got = (v, 0)
                    elif ci[v] and o.ci_backup and not held[v, 1]:
                        got = (v, 1)
            if e >= switch:
                if got is None:
                    falls += 1
                else:
                    hits += 1
            if got is None:
                if cap >= 0 and (pool if e >= switch else 0) + cur_cuda + s > cap:
                    fail[:] = (
                        e,
                        b,
                        s,
                        max(cap - cur_cuda - (pool if e >= switch else 0), 0),
                        1,
                        max(cap - cur_cuda - (pool if e >= switch else 0), 0),
                    )
                    return 1, dict(extra, switch_op=int(switch), pool_bytes=int(pool))
                off[b] = top
                top += s
                cur_cuda += s
                where[b] = None
            else:
                v, slot = got
                held[v, slot] = True
                off[b] = v_off[v] + (off_ci if slot else 0)
                where[b] = got
                cur_col += s
            cur_live += s
        else:
            g = where.pop(b)
            if g is None:
                cur_cuda -= s
            else:
                held[g[0], g[1]] = False
                cur_col -= s
            cur_live -= s
        max_cuda = max(max_cuda, cur_cuda)
        if cur_col > max_col:  # max_element: the first peak
            max_col, cuda_at_max_col = cur_col, cur_cuda
        live[e] = cur_live
        resv[e] = cur_cuda + (pool if e >= switch else 0)
        if e + 1 == switch and cap >= 0 and cur_cuda + pool > cap:
            fail[:] = (e, -1, pool, max(cap - cur_cuda, 0), 1, max(cap - cur_cuda, 0))
            return 1, dict(extra, switch_op=int(switch), pool_bytes=int(pool))
    # SmartMemPool::GetMaxLoad / GetMemUsage (apache/singa memory.cc, PR #412): the memory it
    # reports, max(the largest cudaMalloc load, the pool + the cudaMalloc load where the
    # pool's own load peaks) — below the peak reserved bytes when the cudaMalloc'd blocks'
    # peak and the pool's fall at different ops
    return 0, {
        "detected": True,
        "switch_op": int(switch),
        "iteration_ops": int(L),
        "pool_bytes": int(pool),
        "pool_hits": hits,
        "fallbacks": falls,
        "mem_usage_bytes": int(max(max_cuda, int(pool) + cuda_at_max_col)),
    }


# ---------------------------------------------------------------------------------------------
# PyTorch CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp; specs/anchors.md)

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 * MiB
K_SMALL_BUFFER = 2 * MiB
K_LARGE_BUFFER = 20 * MiB
K_MIN_LARGE_ALLOC = 10 * MiB
K_ROUND_LARGE = 2 * MiB


def pt_round_size(size: int) -> int:
    return K_MIN_BLOCK if size < K_MIN_BLOCK else -(-size // K_MIN_BLOCK) * K_MIN_BLOCK


def pt_allocation_size(size: int) -> int:
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


def _pytorch(trace, op, is_free, blk, bsize, o, cap, off, live, resv, fail) -> int:
    """Blocks as parallel lists; free blocks of each pool in a sorted list of (size, addr, id)
    (PyTorch's BlockComparatorSize); segments at increasing virtual addresses."""
    max_split = int(o.max_split_size_mb * MiB) if o.max_split_size_mb > 0 else (1 << 62)
    streams = trace.stream[op] if o.per_stream else np.zeros(len(op), np.int16)
    b_addr, b_size, b_used, b_prev, b_next, b_pool, b_seg = [], [], [], [], [], [], []
    pools: dict = {}
    seg_size: list = []  # per segment (0 once released)
    seg_pool: list = []
    expand: dict = {}  # pool key -> segment id (expandable_segments)
    top = 0
    reserved = 0
    cur = 0
    where = {}  # trace block -> pt block id

    def new_block(addr, size, pool, seg, prev=-1, nxt=-1):
        b_addr.append(addr)
        b_size.append(size)
        b_used.append(False)
        b_prev.append(prev)
        b_next.append(nxt)
        b_pool.append(pool)
        b_seg.append(seg)
        return len(b_addr) - 1

    def insert(i):
        bisect.insort(pools.setdefault(b_pool[i], []), (b_size[i], b_addr[i], i))

    def remove(i):
        lst = pools[b_pool[i]]
        j = bisect.bisect_left(lst, (b_size[i], b_addr[i], i))
        del lst[j]

    def find(key, size):
        lst = pools.get(key, [])
        j = bisect.bisect_left(lst, (size, -1, -1))
        if j == len(lst):
            return -1
        bs = lst[j][0]
        if size < max_split and bs >= max_split:
            return -1
        if size >= max_split and bs >= size + K_LARGE_BUFFER:
            return -1
        return lst[j][2]

    def release_cached(only_oversize_min=None):
        """Free wholly free (unsplit) segments; expandable: unmap the free tail pages."""
        nonlocal reserved
        for key, lst in list(pools.items()):
            for s, a, i in list(lst):
                if b_prev[i] != -1 or b_next[i] != -1 or b_seg[i] < 0:
                    continue
                if only_oversize_min is not None and (s < max_split or s < only_oversize_min):
                    continue
                if b_seg[i] in expand.values():
                    continue
                remove(i)
                reserved -= seg_size[b_seg[i]]
                seg_size[b_seg[i]] = 0
                b_seg[i] = -1
        for key, sg in expand.items():
            # the last block of the segment, if free, gives back its whole pages
            last = seg_last[sg]
            if b_used[last]:
                continue
            page = K_SMALL_BUFFER if key[0] == 0 else K_LARGE_BUFFER
            give = b_size[last] // page * page
            if give:
                remove(last)
                b_size[last] -= give
                seg_size[sg] -= give
                reserved -= give
                if b_size[last]:
                    insert(last)
                else:
                    # an empty tail block: unlink it
                    p = b_prev[last]
                    if p != -1:
                        b_next[p] = -1
                        seg_last[sg] = p
                    # else: the segment's only block stays, empty, as its tail

    seg_last: dict = {}

    for e in range(len(blk)):
        b = int(blk[e])
        if not is_free[e]:
            size = pt_round_size(int(bsize[b]))
            small = size <= K_SMALL_SIZE
            key = (0 if small else 1, int(streams[e]))
            i = find(key, size)
            if i < 0:
                for attempt in range(3):
                    if o.expandable_segments:
                        page = K_SMALL_BUFFER if small else K_LARGE_BUFFER
                        sg = expand.get(key)
                        tail_free = 0
                        if sg is not None and not b_used[seg_last[sg]] and b_size[seg_last[sg]]:
                            tail_free = b_size[seg_last[sg]]
                        grow = -(-(size - tail_free) // page) * page
                    else:
                        grow = pt_allocation_size(size)
                    if cap < 0 or reserved + grow <= cap:
                        break
                    if attempt == 0 and max_split < (1 << 62):
                        release_cached(only_oversize_min=size)
                    else:
                        release_cached()
                    i = find(key, size)
                    if i >= 0:
                        break
                else:
                    tot, big, pieces = 0, 0, 0
                    for lst in pools.values():
                        for s, a, j in lst:
                            if b_seg[j] >= 0:
                                tot += s
                                big = max(big, s)
                                pieces += 1
                    if cap - reserved > 0:
                        tot += cap - reserved
                        big = max(big, cap - reserved)
                        pieces += 1
                    fail[:] = (e, b, size, tot, pieces, big)
                    return 1
                if i < 0:
                    if o.expandable_segments:
                        sg = expand.get(key)
                        if sg is None:
                            sg = len(seg_size)
                            seg_size.append(0)
                            seg_pool.append(key)
                            expand[key] = sg
                            # each expandable segment has its own (large) virtual range
                            base = top
                            top += 1 << 40
                            i = new_block(base, 0, key, sg)
                            seg_last[sg] = i
                        last = seg_last[sg]
                        if b_used[last]:
                            j = new_block(b_addr[last] + b_size[last], grow, key, sg, prev=last)
                            b_next[last] = j
                            seg_last[sg] = j
                        else:
                            j = last
                            if b_size[j]:
                                remove(j)
                            b_size[j] += grow
                        seg_size[sg] += grow
                        reserved += grow
                        insert(j)
                        i = find(key, size)
                    else:
                        sg = len(seg_size)
                        seg_size.append(grow)
                        seg_pool.append(key)
                        i = new_block(top, grow, key, sg)
                        top += grow
                        reserved += grow
                        insert(i)
                        i = find(key, size)
                        if i < 0:  # max_split rules refuse a fresh segment: take it anyway
                            i = len(b_addr) - 1
            remove(i)
            rem = b_size[i] - size
            if small or o.expandable_segments:  # should_split
                split = rem >= K_MIN_BLOCK
            else:
                split = size < max_split and rem > K_SMALL_SIZE
            if split:
                j = new_block(b_addr[i] + size, rem, b_pool[i], b_seg[i], prev=i, nxt=b_next[i])
                if b_next[i] != -1:
                    b_prev[b_next[i]] = j
                elif b_seg[i] in seg_last and seg_last[b_seg[i]] == i:
                    seg_last[b_seg[i]] = j
                b_next[i] = j
                b_size[i] = size
                insert(j)
            b_used[i] = True
            where[b] = i
            off[b] = b_addr[i]
            cur += int(bsize[b])
        else:
            i = where.pop(b)
            b_used[i] = False
            for nb in (b_prev[i], b_next[i]):
                if nb != -1 and not b_used[nb] and (b_size[nb] or True):
                    if b_size[nb]:
                        remove(nb)
                    if nb == b_prev[i]:
                        b_addr[i] = b_addr[nb]
                        b_size[i] += b_size[nb]
                        b_prev[i] = b_prev[nb]
                        if b_prev[nb] != -1:
                            b_next[b_prev[nb]] = i
                    else:
                        b_size[i] += b_size[nb]
                        b_next[i] = b_next[nb]
                        if b_next[nb] != -1:
                            b_prev[b_next[nb]] = i
                        sg = b_seg[i]
                        if seg_last.get(sg) == nb:
                            seg_last[sg] = i
            insert(i)
            cur -= int(bsize[b])
        live[e] = cur
        resv[e] = reserved
    return 0
