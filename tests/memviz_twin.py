"""What pytorch.org/memory_viz does with a snapshot, in plain Python, to test that it opens
the snapshots g10fast writes (torch ships the viewer as torch/utils/viz/MemoryViz.js in its
source, not in the wheel; the rules below are read from it):

- its unpickler (`unpickle`) knows protocols 2-4 and a fixed set of opcodes;
- `annotate_snapshot` elides a free_requested directly followed by the free_completed of
  the same address into one `free`;
- the "Allocator State History" view starts from the segments and active blocks at the end
  and undoes the trace back to any selected entry (`simulate_memory`): `alloc` deletes the
  block, `free` restores it, a lone `free_requested` needs its block, `segment_alloc`
  removes the segment at that address, `segment_map` shrinks the segment that holds it,
  `segment_free` / `segment_unmap` put one back; drawing then finds, for every block, the
  segment that holds its address (`find_segment`; a block outside every segment throws).
"""

from __future__ import annotations

import bisect
import pickletools

JS_OPCODES = {
    "PROTO",
    "FRAME",
    "EMPTY_DICT",
    "EMPTY_LIST",
    "EMPTY_TUPLE",
    "MARK",
    "SETITEMS",
    "SETITEM",
    "APPENDS",
    "APPEND",
    "LIST",
    "TUPLE",
    "TUPLE1",
    "TUPLE2",
    "TUPLE3",
    "DICT",
    "MEMOIZE",
    "BINPUT",
    "LONG_BINPUT",
    "BINGET",
    "LONG_BINGET",
    "SHORT_BINUNICODE",
    "BINUNICODE",
    "BININT",
    "BININT1",
    "BININT2",
    "LONG1",
    "NEWTRUE",
    "NEWFALSE",
    "NONE",
    "BINFLOAT",
    "STOP",
}


def check_pickle_bytes(data: bytes) -> None:
    for op, arg, _ in pickletools.genops(data):
        assert op.name in JS_OPCODES, f"opcode {op.name} is not read by MemoryViz.js"
        if op.name == "PROTO":
            assert 2 <= arg <= 4, f"protocol {arg}: MemoryViz.js reads 2..4"
        if op.name == "LONG1":
            assert -(1 << 63) <= arg < (1 << 63), f"integer {arg}: MemoryViz.js reads 8 bytes"


def _annotate(trace):
    out = []
    for t in trace:
        t = dict(t)
        if (
            t["action"] == "free_completed"
            and out
            and out[-1]["action"] == "free_requested"
            and out[-1]["addr"] == t["addr"]
        ):
            out[-1]["action"] = "free"
            continue
        out.append(t)
    return out


def check_segment_view(snap: dict, device: int = 0, every: int = 1) -> int:
    """Undo the device's trace from the end, as the viewer does, checking after every
    `every`-th entry that every block lies inside a segment. Returns the entries checked."""
    segs = {}
    blocks = {}
    for s in snap["segments"]:
        if s.get("device") != device:
            continue
        segs[s["address"]] = s["total_size"]
        a = s["address"]
        for b in s["blocks"]:
            addr = b.get("address", a)
            if b["state"] in ("active_allocated", "active_pending_free"):
                blocks[addr] = b.get("requested_size", b["size"])
            a = addr + b["size"]
    events = _annotate(snap["device_traces"][device])

    def check(i):
        starts = sorted(segs)
        for addr, size in blocks.items():
            j = bisect.bisect_right(starts, addr) - 1
            assert j >= 0 and addr + size <= starts[j] + segs[starts[j]], (
                f"before entry {i + 1}: block {addr:#x} ({size} B) is in no segment"
            )

    check(len(events) - 1)
    n = 0
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        act, a, size = e["action"], e.get("addr"), e.get("size")
        if act == "free":
            blocks[a] = size
        elif act == "free_requested":
            assert a in blocks, f"entry {i}: free_requested of a block the view does not hold"
        elif act == "free_completed":
            blocks[a] = size
        elif act == "alloc":
            assert a in blocks, f"entry {i}: alloc of {a:#x}, which the view does not hold"
            del blocks[a]
        elif act in ("segment_free", "segment_unmap"):
            if act == "segment_free":
                assert a not in segs
                segs[a] = size
            else:
                _map(segs, a, size)
        elif act == "segment_alloc":
            assert segs.get(a) == size, f"entry {i}: segment_alloc of {a:#x} not held"
            del segs[a]
        elif act == "segment_map":
            _unmap(segs, a, size, i)
        if i % every == 0:
            check(i - 1)
            n += 1
    return n


def _map(segs, a, size):
    segs[a] = size
    # merge with neighbours (the viewer merges mapped pieces)
    nxt = a + size
    if nxt in segs:
        segs[a] += segs.pop(nxt)
    for s in list(segs):
        if s != a and s + segs[s] == a:
            segs[s] += segs.pop(a)
            break


def _unmap(segs, a, size, i):
    end = a + size
    holder = [s for s in segs if s <= a and end <= s + segs[s]]
    assert holder, f"entry {i}: segment_map of {a:#x} inside no segment"
    s = holder[0]
    e0 = s + segs[s]
    del segs[s]
    if s < a:
        segs[s] = a - s
    if end < e0:
        segs[end] = e0 - end
