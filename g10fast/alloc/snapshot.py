"""PyTorch memory snapshots, in and out (docs/memory-snapshot.md).

A snapshot is the pickle that `torch.cuda.memory._dump_snapshot` writes after
`torch.cuda.memory._record_memory_history()` and that pytorch.org/memory_viz draws: a dict
with `segments` (the caching allocator's cudaMalloc'd segments when the snapshot was taken,
each with its blocks) and `device_traces` (per device, the allocator's actions in order:
`alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`, `segment_map`,
`segment_unmap`, `snapshot`, `oom`, each with `addr`, `size`, `stream`, `frames`, `time_us`).
The schema is the docstring of `torch.cuda.memory._snapshot` (torch 2.13) and the writer
`torch/csrc/cuda/memory_snapshot.cpp`; `alloc` and the frees carry the requested bytes
(`orig_size` in CUDACachingAllocator.cpp), not the rounded block.

Reading (`read_snapshot`) needs no torch: the pickle holds only dicts, lists, tuples,
strings and numbers, and an unpickler that refuses every class reads it (a file that names
a class is refused with a message, never executed). One device's trace becomes an
`AllocTrace`: `alloc` a malloc, `free_completed` the free (the memory is reusable from
then on; a `free_requested` without its `free_completed` leaves the block live). Blocks
live before the trace starts (its ring buffer of `max_entries` dropped their alloc: their
free comes first, or they are still allocated in `segments` at the end) are malloc'd at the
start. The snapshot's own segments give the measured reserved bytes: those at the end,
walked back through the `segment_*` actions (`meta["snapshot"]["peak_reserved_bytes"]`),
the reference for the `pytorch` allocator.

Writing (`snapshot_of_run`, `write_snapshot`) turns one allocator's run over a trace into a
snapshot that memory_viz opens: its mallocs and frees as `alloc` / `free_requested` /
`free_completed`, its segments (how it reserves memory, per allocator: `segment_model`) as
`segment_alloc` / `segment_free` / `segment_map`, the blocks live at the end in `segments`,
an OOM as an `oom` action. The pickle is protocol 4 of builtins only (memory_viz's
JavaScript unpickler reads protocols 2-4 and a fixed set of opcodes).
"""

from __future__ import annotations

import bisect
import dataclasses
import pickle
from pathlib import Path

import numpy as np

from g10fast.alloc.trace import FREE, MALLOC, AllocTrace, _resolve
from g10fast.atomic import checked_target
from g10fast.errors import InputError

MiB = 1 << 20
ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "snapshot",
    "oom",
)
ACTIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")
PICKLE_PROTOCOL = 4  # MemoryViz.js's unpickler: "Unhandled version" above 4
ADDRESS_BASE = 0x7F0000000000  # written snapshots: offset 0 of an allocator at this address


class _Refused(pickle.UnpicklingError):
    pass


class _BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise _Refused(
            f"it names the Python object {module}.{name}; a memory snapshot holds only "
            "dicts, lists, strings and numbers, and g10fast does not load objects"
        )


def is_snapshot_file(path) -> bool:
    """A pickle (protocol 2 or later): the first byte is PROTO (0x80)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def load_snapshot(path) -> dict:
    """The snapshot dict of a pickle file, checked for its top-level shape (InputError naming
    the file otherwise). A bare list is the old segments-only form."""
    p = str(path)
    try:
        with open(p, "rb") as f:
            head = f.read(2)
            if not (len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5):
                raise InputError(
                    f"not a memory snapshot: not a pickle of protocol 2 or later "
                    f"(it starts {head!r}; torch.cuda.memory._dump_snapshot "
                    "writes one)",
                    path=p,
                )
            f.seek(0)
            data = _BuiltinsOnly(f).load()
    except FileNotFoundError:
        raise InputError("memory snapshot not found", path=p) from None
    except OSError as e:
        raise InputError(f"cannot read memory snapshot: {e.strerror or e}", path=p) from None
    except _Refused as e:
        raise InputError(f"not a memory snapshot: {e}", path=p) from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        UnicodeDecodeError,
        MemoryError,
    ) as e:
        raise InputError(
            f"damaged memory snapshot (the pickle does not load: {type(e).__name__}: {e})", path=p
        ) from None
    if isinstance(data, list):
        data = {"segments": data, "device_traces": []}
    if not isinstance(data, dict):
        raise InputError(
            f"not a memory snapshot: the pickle holds a {type(data).__name__}, "
            "expected a dict with 'segments' and 'device_traces'",
            path=p,
        )
    for key in ("segments", "device_traces"):
        if key not in data:
            raise InputError(
                f"not a memory snapshot: no '{key}' (keys: {', '.join(map(str, data)) or 'none'})", path=p
            )
        if not isinstance(data[key], list):
            raise InputError(f"'{key}' is a {type(data[key]).__name__}, expected a list", path=p)
    for d, tr in enumerate(data["device_traces"]):
        if not isinstance(tr, list):
            raise InputError(f"device_traces[{d}] is a {type(tr).__name__}, expected a list", path=p)
    return data


def _int(d, key, where, path, default=None):
    v = d.get(key, default) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, int):
        if not isinstance(d, dict):
            raise InputError(f"{where} is a {type(d).__name__}, expected a dict", path=path)
        raise InputError(f"{where} has no integer '{key}' (got {v!r})", path=path)
    return v


def _seg_device(seg, where, path) -> int:
    if not isinstance(seg, dict):
        raise InputError(f"{where} is a {type(seg).__name__}, expected a dict", path=path)
    return _int(seg, "device", where, path, default=0)


def _blocks(seg, where, path):
    """(address, size, state, requested, frames) of each block of a segment (a block's address
    is the segment's plus the sizes before it where the block does not give it)."""
    blocks = seg.get("blocks", [])
    if not isinstance(blocks, list):
        raise InputError(f"{where}: 'blocks' is not a list", path=path)
    a = _int(seg, "address", where, path)
    total = _int(seg, "total_size", where, path)
    out = []
    for j, b in enumerate(blocks):
        w = f"{where}.blocks[{j}]"
        size = _int(b, "size", w, path)
        addr = b.get("address", a)
        if isinstance(addr, bool) or not isinstance(addr, int):
            raise InputError(f"{w}: 'address' is not an integer", path=path)
        state = b.get("state")
        if not isinstance(state, str):
            raise InputError(f"{w} has no 'state'", path=path)
        req = b.get("requested_size", size)
        if isinstance(req, bool) or not isinstance(req, int):
            req = size
        out.append((addr, size, state, req, b.get("frames", [])))
        a = addr + size
    if blocks and a > _int(seg, "address", where, path) + total:
        raise InputError(f"{where}: its blocks add up to more than total_size {total}", path=path)
    return out


def snapshot_devices(snap: dict, path: str = "snapshot") -> list[int]:
    """The devices with trace entries or segments."""
    devs = {d for d, tr in enumerate(snap["device_traces"]) if tr}
    for i, s in enumerate(snap["segments"]):
        devs.add(_seg_device(s, f"segments[{i}]", path))
    return sorted(devs)


def read_snapshot(path, device: int | None = None) -> AllocTrace:
    """One device's allocations of a memory snapshot file as an AllocTrace (module doc)."""
    return trace_of_snapshot(load_snapshot(path), device, str(path))


def trace_of_snapshot(snap: dict, device: int | None = None, path: str = "snapshot") -> AllocTrace:
    devs = snapshot_devices(snap, path)
    if device is None:
        if not devs:
            raise InputError(
                "the snapshot is empty: no segments and no trace entries "
                "(was it dumped from the process that allocated?)",
                path=path,
            )
        if len(devs) > 1:
            raise InputError(
                f"the snapshot holds devices {', '.join(map(str, devs))}: choose one with --device", path=path
            )
        device = devs[0]
    elif device not in devs:
        raise InputError(
            f"device {device} has no segments and no trace entries (devices: "
            f"{', '.join(map(str, devs)) or 'none'})",
            param="--device",
        )
    traces = snap["device_traces"]
    entries = traces[device] if device < len(traces) else []
    segs = [
        (i, s) for i, s in enumerate(snap["segments"]) if _seg_device(s, f"segments[{i}]", path) == device
    ]

    streams = {0: 0}

    def sid(e, w):
        s = e.get("stream", 0)
        if isinstance(s, bool) or not isinstance(s, int):
            raise InputError(f"{w}: 'stream' is not an integer", path=path)
        if s not in streams:
            streams[s] = len(streams)
        return streams[s]

    ops = []  # (kind, addr, size, time_us, stream, entry, frames)
    pre = []  # blocks live when the trace starts: (addr, size, stream, frames)
    live: dict[int, int] = {}  # addr -> entry of its alloc (-1: before the trace)
    seg_delta = np.zeros(len(entries) + 1, np.int64)  # reserved change at each entry
    have_times = bool(entries)
    requested = set()
    ooms = []
    seg_actions = 0
    seen: set = set()  # addresses allocated (or live before the trace) so far
    for i, e in enumerate(entries):
        w = f"device_traces[{device}][{i}]"
        if not isinstance(e, dict):
            raise InputError(f"{w} is a {type(e).__name__}, expected a dict", path=path)
        act = e.get("action")
        if act not in ACTIONS:
            raise InputError(f"{w}: unknown action {act!r} (expected one of {', '.join(ACTIONS)})", path=path)
        t = e.get("time_us")
        if isinstance(t, bool) or not isinstance(t, int):
            have_times = False
            t = 0
        if act == "snapshot":
            continue
        if act == "oom":
            ooms.append({"entry": i, "bytes": e.get("size"), "device_free": e.get("device_free")})
            continue
        addr = _int(e, "addr", w, path)
        size = _int(e, "size", w, path)
        if size < 0:
            raise InputError(f"{w}: negative size {size}", path=path)
        if act.startswith("segment_"):
            seg_actions += 1
            seg_delta[i] = size if act in ("segment_alloc", "segment_map") else -size
            continue
        st = sid(e, w)
        frames = e.get("frames", [])
        if act == "alloc":
            if addr in live:
                j = live[addr]
                raise InputError(
                    f"{w}: alloc of address {addr:#x}, which is live (allocated "
                    + ("before the trace" if j < 0 else f"at device_traces[{device}][{j}]")
                    + " and not freed)",
                    path=path,
                )
            live[addr] = i
            seen.add(addr)
            requested.discard(addr)
            ops.append((MALLOC, addr, size, t, st, i, frames))
        elif act == "free_requested":
            requested.add(addr)
        else:  # free_completed
            if addr not in live:
                if addr in seen:
                    raise InputError(
                        f"{w}: free_completed of address {addr:#x}, which is not live (freed twice)",
                        path=path,
                    )
                pre.append((addr, size, st, frames))  # allocated before the trace began
                seen.add(addr)
            else:
                del live[addr]
            requested.discard(addr)
            ops.append((FREE, addr, size, t, st, i, frames))
    # blocks allocated at the end that the trace never saw allocated
    end_blocks = 0
    for i, s in segs:
        for a, size, state, req, frames in _blocks(s, f"segments[{i}]", path):
            if state in ACTIVE_STATES:
                end_blocks += 1
                if a not in live:
                    pre.append((a, req, sid(s, f"segments[{i}]"), frames))
                    live[a] = -1
    n_pre = len(pre)
    kinds = [MALLOC] * n_pre + [o[0] for o in ops]
    addrs = [p[0] for p in pre] + [o[1] for o in ops]
    sizes = [p[1] for p in pre] + [o[2] if o[0] == MALLOC else -1 for o in ops]
    t0 = ops[0][3] if (ops and have_times) else 0
    times = [t0 * 1000] * n_pre + [(o[3] * 1000 if have_times else 0) for o in ops]
    lines = [0] * n_pre + [o[5] for o in ops]
    stream = np.asarray([p[2] for p in pre] + [o[4] for o in ops], np.int16)
    frames = [p[3] for p in pre] + [o[6] for o in ops]

    # the measured reserved bytes: the segments at the end, walked back through the trace
    allocator_fields = seg_actions > 0 or any(("segment_type" in s or "allocated_size" in s) for _, s in segs)
    reserved_end = int(sum(_int(s, "total_size", f"segments[{i}]", path) for i, s in segs))
    after = (
        reserved_end - (np.cumsum(seg_delta[::-1])[::-1] - seg_delta)
        if len(entries)
        else np.zeros(0, np.int64)
    )
    start = reserved_end - int(seg_delta.sum())
    if allocator_fields and (start < 0 or (len(after) and after[: len(entries)].min() < 0)):
        raise InputError(
            f"device {device}: the trace's segment actions do not fit the "
            "segments at the end (walked back from them, reserved bytes go below "
            "zero)",
            path=path,
        )
    info = {
        "device": int(device),
        "entries": len(entries),
        "segments_at_end": len(segs),
        "blocks_at_end": end_blocks,
        "pre_trace_blocks": n_pre,
        "pending_frees": len(requested & set(live)),
        "streams": len(streams),
        "ooms": ooms,
        "times": "time_us" if have_times else "absent",
        "allocator_settings": snap.get("allocator_settings")
        if isinstance(snap.get("allocator_settings"), dict)
        else None,
    }
    if allocator_fields and not entries:
        info.update(
            reference=None,
            peak_reserved_bytes=None,
            reserved_at_end_bytes=reserved_end,
            why_no_reference="it has no trace entries (recorded without "
            "_record_memory_history, or an empty ring buffer): its segments hold memory "
            "cached for allocations it does not show",
        )
    elif allocator_fields:
        peak = max([start] + [int(x) for x in after[: len(entries)]])
        info.update(
            reference="the snapshot's cudaMalloc'd segments",
            peak_reserved_bytes=int(peak),
            reserved_at_end_bytes=reserved_end,
            reserved_at_start_bytes=int(start),
        )
        # cudaMalloc failing: the caching allocator frees its cached segments (a run of
        # segment_free) and retries (the segment_alloc right after); the GPU then held less
        # than the reserved bytes before the run plus that segment
        flushes, below = 0, None
        i = 0
        while i < len(entries):
            if entries[i].get("action") != "segment_free":
                i += 1
                continue
            j = i
            while j < len(entries) and entries[j].get("action") == "segment_free":
                j += 1
            if j < len(entries) and entries[j].get("action") == "segment_alloc":
                flushes += 1
                b = int(after[i - 1] if i else start) + int(entries[j]["size"])
                below = b if below is None else min(below, b)
            i = j
        info.update(cache_flushes=flushes, capacity_below_bytes=below)
    else:
        info.update(
            reference=None,
            peak_reserved_bytes=None,
            why_no_reference="its segments carry no allocator fields and it has no "
            "segment actions (a snapshot made from a torch.profiler run by "
            "torch.cuda._memory_viz._profile_to_snapshot: segments are address "
            "spans, not reserved memory)",
        )
    name = Path(path).name + (f"-device{device}" if len(devs) > 1 else "")
    tr = _resolve(
        path,
        name,
        kinds,
        addrs,
        sizes,
        times,
        lines,
        {"source": path, "format": "pytorch-memory-snapshot", "snapshot": info},
    )
    meta = dict(tr.meta, frames_of_op=frames)
    if info["peak_reserved_bytes"] is not None:
        ent = np.asarray(lines, np.int64)
        r = np.where(np.arange(len(kinds)) < n_pre, start, after[ent] if len(entries) else start)
        meta["reserved_of_op"] = np.asarray(r, np.int64)
    tr = AllocTrace(tr.name, tr.kind, tr.address, tr.size, tr.time_ns, tr.block, stream, meta)
    info["peak_allocated_bytes"] = int(tr.live_bytes().max()) if tr.num_ops else 0
    return tr


def pytorch_capacity(trace: AllocTrace) -> int | None:
    """The GPU memory the recorded caching allocator had, where the snapshot shows it: after a
    cache flush (cudaMalloc failed, every cached segment freed, the request retried) the GPU
    held less than the reserved bytes before the flush plus the segment retried; the largest
    capacity consistent with every flush (one byte under the least such sum). None: no flush
    recorded (nothing bounds it)."""
    b = (trace.meta.get("snapshot") or {}).get("capacity_below_bytes")
    return None if b is None else int(b) - 1


def pytorch_options(trace: AllocTrace) -> dict:
    """The `pytorch` allocator's options that a snapshot's own settings call for: pools per
    stream where the trace uses several streams (the caching allocator keys its pools by
    stream), `expandable_segments` and `max_split_size` from its `allocator_settings`
    (`max_split_size` is SIZE_MAX, -1 as int64, when unset)."""
    info = trace.meta.get("snapshot") or {}
    out = {}
    if info.get("streams", 1) > 1:
        out["per_stream"] = True
    st = info.get("allocator_settings") or {}
    if st.get("expandable_segments") is True:
        out["expandable_segments"] = True
    ms = st.get("max_split_size")
    if isinstance(ms, int) and not isinstance(ms, bool) and 0 < ms < (1 << 62):
        out["max_split_size_mb"] = ms / MiB
    return out


# ---------------------------------------------------------------------------------------------
# writing


def _round(name: str, options: dict, size: int) -> int:
    """The block an allocator gives a request (the snapshot's block `size`)."""
    if name == "pytorch":
        from g10fast.alloc.allocators import pt_round_size

        return pt_round_size(size)
    g = int(options.get("granularity", 1) or 1)
    return max(g, -(-size // g) * g) if name in ("cnmem", "bump") else size


class _Segs:
    """Segment actions at allocator events: before[e] / after[e] lists of (action, offset,
    size), and the segments alive at the end {offset: (size, expandable)}."""

    def __init__(self, E):
        self.before = [[] for _ in range(E)]
        self.after = [[] for _ in range(E)]
        self.initial = {}
        self.model = ""


def segment_model(trace: AllocTrace, res) -> _Segs:
    """How the allocator reserved memory, as segments in its offset space:
    `cuda_malloc`: every block its own cudaMalloc'd segment; `pytorch` and `cnmem`: a new
    segment at the top of the space when a request does not fit (its size the allocator's
    growth: PyTorch's allocation size, cnmem's rounded request), the wholly free ones released
    when reserved bytes drop (an OOM retry under a capacity); `pytorch` with expandable
    segments: one segment per pool that grows by `segment_map`; `singa_colour` with scope
    iteration: the pool from the switch op, the blocks outside it cudaMalloc'd; `bump` and the
    other colourings: one arena as large as their peak. Checked against the allocator's own
    reserved bytes after every event; where they differ (or a block falls outside), one
    arena holding every block instead (`model` says which)."""
    _, is_free, blk = trace.alloc_ops()
    E = len(res.live)
    bsize = trace.block_sizes()
    off = res.offset
    name, o = res.allocator, res.options
    S = _Segs(E)
    ok = True
    if name == "cuda_malloc":
        S.model = "per-block cudaMalloc"
    elif name in ("cnmem", "pytorch") and not o.get("expandable_segments"):
        S.model = "grown segments"
        ok = _grown(S, name, o, is_free[:E], blk[:E], bsize, off, res.reserved)
    elif name == "pytorch":
        S.model = "expandable segments"
        ok = _expandable(S, is_free[:E], blk[:E], bsize, off, res.reserved)
    elif name == "singa_colour" and o.get("scope") == "iteration":
        S.model = "pool + cudaMalloc"
        pool = int(res.extra.get("pool_bytes", 0))
        sw = res.extra.get("switch_op")
        if sw is not None and pool and sw < E:
            S.before[sw].append(("segment_alloc", 0, pool))
        for e in range(E):
            b = int(blk[e])
            if off[b] >= pool:
                _per_block(S, e, is_free[e], off[b], int(bsize[b]))
    else:
        S.model = "arena"
    if S.model == "per-block cudaMalloc":
        for e in range(E):
            b = int(blk[e])
            _per_block(S, e, is_free[e], off[b], int(bsize[b]))
    if S.model == "arena" or not ok or not _reserved_match(S, res.reserved):
        exact = S.model == "arena"
        S = _Segs(E)
        S.model = "arena" if exact else "arena (segments not reconstructed)"
        placed = off >= 0
        top = int((off[placed] + bsize[placed]).max()) if placed.any() else 0
        S.initial[0] = (max(top, int(res.extra.get("pool_bytes", 0) or 0)), False)
    return S


def _per_block(S, e, free, offset, size):
    if size == 0:
        return
    if free:
        S.after[e].append(("segment_free", int(offset), size))
    else:
        S.before[e].append(("segment_alloc", int(offset), size))


def _grown(S, name, o, is_free, blk, bsize, off, resv) -> bool:
    from g10fast.alloc.allocators import pt_allocation_size, pt_round_size

    alive = {}  # segment offset -> [size, live blocks]
    starts = []
    top = 0
    prev = 0
    if name == "cnmem" and o.get("init_bytes", 0) > 0:
        alive[0] = [int(o["init_bytes"]), 0]
        starts.append(0)
        S.initial[0] = (int(o["init_bytes"]), False)
        top = prev = int(o["init_bytes"])
    seg_of = {}
    for e in range(len(blk)):
        b = int(blk[e])
        net = int(resv[e]) - prev
        prev = int(resv[e])
        if is_free[e]:
            s = seg_of.pop(b)
            alive[s][1] -= 1
            if net != 0:
                return False
            continue
        size = int(bsize[b])
        grow = 0
        if off[b] >= top:
            if off[b] != top:
                return False
            if name == "pytorch":
                grow = pt_allocation_size(pt_round_size(size))
            else:
                g = int(o.get("granularity", 512))
                grow = max(g, -(-size // g) * g)
        released = grow - net
        if released:
            free_segs = [s for s in starts if alive[s][1] == 0]
            if sum(alive[s][0] for s in free_segs) != released:
                return False
            for s in free_segs:
                S.before[e].append(("segment_free", s, alive[s][0]))
                del alive[s]
                starts.remove(s)
        if grow:
            S.before[e].append(("segment_alloc", top, grow))
            alive[top] = [grow, 0]
            bisect.insort(starts, top)
            top += grow
        j = bisect.bisect_right(starts, int(off[b])) - 1
        if j < 0 or off[b] + size > starts[j] + alive[starts[j]][0]:
            return False
        seg_of[b] = starts[j]
        alive[starts[j]][1] += 1
    return True


def _expandable(S, is_free, blk, bsize, off, resv) -> bool:
    mapped = {}
    prev = 0
    for e in range(len(blk)):
        b = int(blk[e])
        net = int(resv[e]) - prev
        prev = int(resv[e])
        if net < 0 or (net and is_free[e]):
            return False
        base = (int(off[b]) >> 40) << 40
        if net:
            S.before[e].append(("segment_map", base + mapped.get(base, 0), net))
            mapped[base] = mapped.get(base, 0) + net
        if not is_free[e] and off[b] + bsize[b] > base + mapped.get(base, 0):
            return False
    return True


def _reserved_match(S, resv) -> bool:
    cur = sum(s for s, _ in S.initial.values())
    for e in range(len(resv)):
        for act, _, size in S.before[e] + S.after[e]:
            cur += size if act in ("segment_alloc", "segment_map") else -size
        if cur != int(resv[e]):
            return False
    return True


def snapshot_of_run(trace: AllocTrace, res, frames=None, device: int = 0) -> dict:
    """One allocator's run over a trace (run_allocator's AllocResult) as a memory snapshot
    dict (module doc). `frames`: per trace op, the frames to show (default the trace's own
    `meta["frames_of_op"]`, a read snapshot's, else none). Left out (the viewer keys blocks by
    address): blocks the allocator did not place (offset −1: a colouring's left-out blocks;
    counted in `g10fast.unplaced_blocks`), blocks placed at the address of a live block
    (SmartMemPool's runtime reuses a planned slot whose block is still live when the trace
    does not repeat its iteration; `g10fast.stacked_blocks`) and zero-byte blocks."""
    op, is_free, blk = trace.alloc_ops()
    E = len(res.live)
    bsize = trace.block_sizes()
    off = np.asarray(res.offset, np.int64).copy()
    name, o = res.allocator, dict(res.options)
    if name == "cuda_malloc":  # no offsets: each block at the next free address, never reused
        sizes = np.where(off < 0, bsize, 0)
        off = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else off
    res_view = _with_offsets(res, off)
    segs = segment_model(trace, res_view)
    if frames is None:
        frames = trace.meta.get("frames_of_op")
    empty: list = []
    tns = trace.time_ns
    base = ADDRESS_BASE
    out = []
    live = {}  # block -> (offset, requested, frames)
    at: set = set()  # offsets of the live blocks
    unplaced = stacked = 0
    for e in range(E):
        i = int(op[e])
        b = int(blk[e])
        t = int(tns[i]) // 1000
        fr = frames[i] if frames is not None else empty
        st = int(trace.stream[i])
        for act, a, size in segs.before[e]:
            out.append(
                {"action": act, "addr": base + a, "size": size, "stream": 0, "frames": empty, "time_us": t}
            )
        if off[b] < 0 or bsize[b] == 0:
            unplaced += 1 if (not is_free[e] and off[b] < 0) else 0
        elif not is_free[e]:
            if int(off[b]) in at:  # a live block holds this address already
                stacked += 1
                continue
            out.append(
                {
                    "action": "alloc",
                    "addr": base + int(off[b]),
                    "size": int(bsize[b]),
                    "stream": st,
                    "frames": fr,
                    "time_us": t,
                }
            )
            live[b] = (int(off[b]), int(bsize[b]), fr)
            at.add(int(off[b]))
        elif b in live:
            at.discard(live[b][0])
            for act in ("free_requested", "free_completed"):
                out.append(
                    {
                        "action": act,
                        "addr": base + int(off[b]),
                        "size": int(bsize[b]),
                        "stream": st,
                        "frames": fr,
                        "time_us": t,
                    }
                )
            del live[b]
        for act, a, size in segs.after[e]:
            out.append(
                {"action": act, "addr": base + a, "size": size, "stream": 0, "frames": empty, "time_us": t}
            )
    if res.oom:
        i = int(res.oom["op"])
        out.append(
            {
                "action": "oom",
                "device_free": int(res.oom["free_bytes"]),
                "size": int(res.oom["bytes"]),
                "stream": 0,
                "frames": frames[i] if frames is not None else empty,
                "time_us": int(tns[i]) // 1000,
            }
        )
    # the segments alive at the end, with their blocks
    alive = dict(segs.initial)
    for e in range(E):
        for act, a, size in segs.before[e] + segs.after[e]:
            if act == "segment_alloc":
                alive[a] = (size, False)
            elif act == "segment_free":
                del alive[a]
            elif act == "segment_map":
                b0 = (a >> 40) << 40
                alive[b0] = (alive.get(b0, (0, True))[0] + size, True)
    blocks = sorted(live.values())
    seg_list = []
    bi = 0
    for s in sorted(alive):
        size, expandable = alive[s]
        bl = []
        cur = s
        alloc_b = req_b = 0
        while bi < len(blocks) and blocks[bi][0] < s + size:
            a, req, fr = blocks[bi]
            nxt = blocks[bi + 1][0] if bi + 1 < len(blocks) else s + size
            bsz = max(min(_round(name, o, req), min(nxt, s + size) - a), req)
            if a > cur:
                bl.append(
                    {
                        "address": base + cur,
                        "size": a - cur,
                        "requested_size": 0,
                        "state": "inactive",
                        "frames": empty,
                    }
                )
            bl.append(
                {
                    "address": base + a,
                    "size": bsz,
                    "requested_size": req,
                    "state": "active_allocated",
                    "frames": fr,
                }
            )
            alloc_b += bsz
            req_b += req
            cur = a + bsz
            bi += 1
        if cur < s + size:
            bl.append(
                {
                    "address": base + cur,
                    "size": s + size - cur,
                    "requested_size": 0,
                    "state": "inactive",
                    "frames": empty,
                }
            )
        seg_list.append(
            {
                "device": device,
                "address": base + s,
                "total_size": size,
                "allocated_size": alloc_b,
                "active_size": alloc_b,
                "requested_size": req_b,
                "stream": 0,
                "segment_type": "small" if (name == "pytorch" and size <= 2 * MiB) else "large",
                "segment_pool_id": (0, 0),
                "is_expandable": bool(expandable),
                "frames": empty,
                "blocks": bl,
            }
        )
    snap = {
        "segments": seg_list,
        "device_traces": [[] for _ in range(device)] + [out],
        "g10fast": {
            "allocator": name,
            "options": {k: v for k, v in o.items() if isinstance(v, (int, float, str, bool))},
            "trace": trace.name,
            "segment_model": segs.model,
            "peak_reserved_bytes": int(res.peak_reserved),
            "peak_live_bytes": int(res.peak_live),
            "status": res.status,
            "unplaced_blocks": unplaced,
            "stacked_blocks": stacked,
        },
    }
    if name == "pytorch":
        ms = o.get("max_split_size_mb", 0.0)
        snap["allocator_settings"] = {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "expandable_segments": bool(o.get("expandable_segments", False)),
            "max_split_size": int(ms * MiB) if ms else -1,
        }
    return snap


def _with_offsets(res, off):
    return dataclasses.replace(res, offset=off)


def write_snapshot(snap: dict, path) -> str:
    p = checked_target(path, "--memory-snapshot")
    tmp = p + ".tmp"
    try:
        with open(tmp, "wb") as f:
            pickle.dump(snap, f, protocol=PICKLE_PROTOCOL)
        Path(tmp).replace(p)
    except OSError as e:
        raise InputError(f"cannot write memory snapshot: {e.strerror or e}", path=p) from None
    return p


def snapshot_paths(path, allocators) -> list[str]:
    """One allocator: PATH itself; several: PATH's stem + '.<allocator>' + its suffix."""
    p = Path(path)
    if len(allocators) == 1:
        return [str(p)]
    suffix = p.suffix or ".pickle"
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return [str(p.with_name(f"{stem}.{a}{suffix}")) for a in allocators]


def write_run_snapshots(trace: AllocTrace, results, path, frames=None) -> list[str]:
    """Each allocator's run (run_allocator results over `trace`) as its own snapshot file
    (snapshot_paths); the paths written."""
    paths = snapshot_paths(path, [r.allocator for r in results])
    for r, p in zip(results, paths):
        write_snapshot(snapshot_of_run(trace, r, frames), p)
    return paths


def workload_frames(w, trace: AllocTrace) -> list:
    """Per op of a workload's derived trace (from_workload): the frames memory_viz shows for
    it, one frame naming the kernel (`filename` the workload, `line` the kernel index, `name`
    the kernel's name); the start-up mallocs of the weights name no kernel. One list per
    kernel, shared (the pickle stores it once)."""
    kops = trace.meta.get("kernel_of_op")
    if kops is None:
        return None
    wname = f"{w.name} (batch {w.batch_size})"
    per_k = [[{"filename": wname, "line": k, "name": str(w.kernel_name[k])}] for k in range(w.num_kernels)]
    weights = [{"filename": wname, "line": 0, "name": "weights and state, before the iteration"}]
    return [per_k[int(k)] if k >= 0 else weights for k in np.asarray(kops).tolist()]


def write_workload_snapshots(w, path, allocators=None, freq_ghz: float = 1.2) -> list[str]:
    """A workload's derived allocation trace (one iteration, as `g10fast memory MODEL`) through
    each allocator (default all), each run written as a snapshot (snapshot_paths)."""
    from g10fast.alloc.allocators import ALLOCATORS, run_allocator
    from g10fast.alloc.trace import from_workload

    tr = from_workload(w, freq_ghz=freq_ghz)
    names = list(allocators or ALLOCATORS)
    results = [run_allocator(tr, n) for n in names]
    return write_run_snapshots(tr, results, path, workload_frames(w, tr))


# ---------------------------------------------------------------------------------------------
# the snapshot as the measured reference


def snapshot_comparison(trace: AllocTrace, results) -> dict:
    """What the snapshot measured beside what the allocators here give on its trace: its peak
    reserved (the caching allocator's segments) against the `pytorch` allocator's, its peak
    allocated against the trace's live peak."""
    info = dict(trace.meta.get("snapshot") or {})
    out = {
        k: info.get(k)
        for k in (
            "device",
            "entries",
            "segments_at_end",
            "pre_trace_blocks",
            "pending_frees",
            "streams",
            "times",
            "reference",
        )
    }
    out["ooms"] = len(info.get("ooms") or [])
    out["measured_peak_reserved_bytes"] = info.get("peak_reserved_bytes")
    out["measured_peak_allocated_bytes"] = info.get("peak_allocated_bytes")
    if info.get("why_no_reference"):
        out["why_no_reference"] = info["why_no_reference"]
    out["cache_flushes"] = info.get("cache_flushes", 0)
    out["capacity_below_bytes"] = info.get("capacity_below_bytes")
    pt = next((r for r in results if r.allocator == "pytorch"), None)
    if pt is not None:
        out["pytorch_options"] = dict(pt.options)
        out["pytorch_capacity_bytes"] = pt.capacity
        out["pytorch_peak_reserved_bytes"] = pt.peak_reserved
        m = info.get("peak_reserved_bytes")
        out["pytorch_vs_measured"] = (pt.peak_reserved / m - 1.0) if m else None
    return out


def snapshot_text(trace: AllocTrace, results) -> str:
    c = snapshot_comparison(trace, results)
    lines = [
        f"memory snapshot, device {c['device']}: {c['entries']:,} trace entries, "
        f"{c['pre_trace_blocks']:,} blocks allocated before the trace, "
        f"{c['segments_at_end']:,} segments at the end" + (f", {c['ooms']} OOM" if c["ooms"] else "")
    ]
    m = c["measured_peak_reserved_bytes"]
    if m is None:
        lines.append(f"no measured reserved memory: {c['why_no_reference']}")
        return "\n".join(lines)
    lines.append(
        f"measured (the snapshot's segments): peak reserved {m / MiB:,.1f} MiB, peak "
        f"allocated {c['measured_peak_allocated_bytes'] / MiB:,.1f} MiB"
    )
    if c["cache_flushes"]:
        lines.append(
            f"the recorded allocator emptied its cache {c['cache_flushes']} times to "
            "retry a segment (cudaMalloc failed): its GPU held less than "
            f"{c['capacity_below_bytes'] / MiB:,.1f} MiB"
        )
    if "pytorch_peak_reserved_bytes" in c:
        opts = {
            k: v
            for k, v in c["pytorch_options"].items()
            if v != {"per_stream": False, "expandable_segments": False, "max_split_size_mb": 0.0}.get(k)
        }
        if c["pytorch_capacity_bytes"] is not None:
            opts["capacity"] = (
                f"{c['pytorch_capacity_bytes'] / MiB:,.1f} MiB"
                if c["pytorch_capacity_bytes"] + 1 != c["capacity_below_bytes"]
                else f"just under {c['capacity_below_bytes'] / MiB:,.1f} MiB"
            )
        lines.append(
            "pytorch allocator here"
            + (f" ({', '.join(f'{k}={v}' for k, v in opts.items())})" if opts else "")
            + f": peak reserved {c['pytorch_peak_reserved_bytes'] / MiB:,.1f} MiB, "
            f"{100 * c['pytorch_vs_measured']:+.2f}% against the snapshot's"
        )
    return "\n".join(lines)
