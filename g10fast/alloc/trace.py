"""Allocation traces: address-level malloc / free / read / write / layer ops (docs/alloc-trace-format.md).

An `AllocTrace` is the view of a system that sees no graph: one row per op, in order.

    kind    int8   MALLOC 0, FREE 1, READ 2, WRITE 3, LAYER 4
    address int64  the address the framework saw (reused after a free)
    size    int64  bytes of the block the op touches (a free's and an access's: its malloc's)
    time_ns int64  nanoseconds since the first op
    block   int64  the block the op touches: the index of its malloc among the trace's mallocs
                   (an address is a new block after each malloc)
    stream  int16  the stream (0 where the source does not say)

Sources: the SINGA traces (`memInfo_*`: `Malloc ADDR BYTES MS` / `Free ADDR MS`; `blockInfo_*`:
`Malloc ADDR BYTES NS (data_&size)`, `Mutable|Read|Free|Layer ADDR NS`; `vec_run_*`:
`INDEX OP ADDR BYTES NS`), the HDF5 form below, and any g10fast Workload (`from_workload`, E5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from g10fast.errors import InputError

MALLOC, FREE, READ, WRITE, LAYER = 0, 1, 2, 3, 4
KIND_NAMES = ("malloc", "free", "read", "write", "layer")

FORMAT_NAME = "g10fast-alloc-trace"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AllocTrace:
    name: str
    kind: np.ndarray
    address: np.ndarray
    size: np.ndarray
    time_ns: np.ndarray
    block: np.ndarray
    stream: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def num_ops(self) -> int:
        return int(self.kind.shape[0])

    @property
    def num_blocks(self) -> int:
        return int((self.kind == MALLOC).sum())

    def block_sizes(self) -> np.ndarray:
        """int64[B]: the bytes of each block (its malloc's request)."""
        return self.size[self.kind == MALLOC].astype(np.int64)

    def alloc_ops(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The malloc/free subsequence: (op index into the trace, is_free bool, block)."""
        sel = np.nonzero(self.kind <= FREE)[0]
        return sel, self.kind[sel] == FREE, self.block[sel]

    def live_bytes(self) -> np.ndarray:
        """Live bytes after each op (the load curve), int64[num_ops]."""
        d = np.where(self.kind == MALLOC, self.size, 0) - np.where(self.kind == FREE, self.size, 0)
        return np.cumsum(d.astype(np.int64))

    def slice(self, start: int, stop: int) -> AllocTrace:
        """Ops [start, stop) as a trace of their own (blocks renumbered from its mallocs; ops on
        blocks malloc'd before `start` keep block -1 ... they are dropped)."""
        k = self.kind[start:stop]
        b = self.block[start:stop]
        m = k == MALLOC
        first = b[m].min() if m.any() else 0
        keep = b >= first if m.any() else np.zeros(len(k), bool)
        idx = np.nonzero(keep)[0] + start
        return _make(
            self.name,
            self.kind[idx],
            self.address[idx],
            self.size[idx],
            self.time_ns[idx] - (self.time_ns[idx[0]] if len(idx) else 0),
            self.block[idx] - first,
            self.stream[idx],
            dict(self.meta),
        )


def _make(name, kind, address, size, time_ns, block, stream, meta) -> AllocTrace:
    return AllocTrace(
        name,
        np.asarray(kind, np.int8),
        np.asarray(address, np.int64),
        np.asarray(size, np.int64),
        np.asarray(time_ns, np.int64),
        np.asarray(block, np.int64),
        np.asarray(stream, np.int16),
        meta,
    )


# ---------------------------------------------------------------------------------------------
# building a trace from ops, with block resolution and checks


def _resolve(path, name, kinds, addrs, sizes, times, lines, meta, strict_free=True) -> AllocTrace:
    """Turn (kind, address, size or -1, time) rows into a trace: blocks from addresses, sizes of
    frees and accesses from their malloc. Errors name path:line."""
    n = len(kinds)
    block = np.empty(n, np.int64)
    size = np.empty(n, np.int64)
    live: dict[int, tuple[int, int]] = {}
    nb = 0
    keep = np.ones(n, bool)
    for i in range(n):
        k, a = kinds[i], addrs[i]
        if k == MALLOC:
            if sizes[i] < 0:
                raise InputError("malloc with a negative size", path=path, line=lines[i])
            if a in live:
                raise InputError(
                    f"malloc of address {a:#x}, which is live (malloc'd at line "
                    f"{lines[live[a][2]]} and not freed)",
                    path=path,
                    line=lines[i],
                )
            live[a] = (nb, int(sizes[i]), i)
            block[i] = nb
            size[i] = sizes[i]
            nb += 1
            continue
        b = live.get(a)
        if b is None:
            if k == FREE and strict_free:
                raise InputError(
                    f"free of address {a:#x}, which is not live (no malloc before it, or freed twice)",
                    path=path,
                    line=lines[i],
                )
            keep[i] = False  # an access to a block the trace did not see allocated
            continue
        if sizes[i] >= 0 and sizes[i] != b[1] and k != LAYER:
            raise InputError(
                f"{KIND_NAMES[k]} of address {a:#x} gives {sizes[i]} bytes, its malloc {b[1]}",
                path=path,
                line=lines[i],
            )
        block[i] = b[0]
        size[i] = b[1]
        if k == FREE:
            del live[a]
    t = np.asarray(times, np.int64)
    if n:
        t = t - t[0]
    meta = dict(meta, dropped_ops=int((~keep).sum()))
    return _make(
        name,
        np.asarray(kinds, np.int8)[keep],
        np.asarray(addrs, np.int64)[keep],
        size[keep],
        t[keep],
        block[keep],
        np.zeros(int(keep.sum()), np.int16),
        meta,
    )


def _int(tok: str, path, line, what) -> int:
    try:
        return int(tok, 0)
    except ValueError:
        raise InputError(f"{what} {tok!r} is not an integer", path=path, line=line) from None


_OPS = {"malloc": MALLOC, "free": FREE, "read": READ, "mutable": WRITE, "write": WRITE, "layer": LAYER}


def read_singa(path) -> AllocTrace:
    """A SINGA trace in any of its text formats (found from the first line): memInfo
    (`Malloc ADDRESS BYTES MS` / `Free ADDRESS MS`), blockInfo (`OP ADDRESS TIME` with the
    bytes on mallocs only), SwapGPU's appended form (`OP ADDRESS BYTES TIME` on every op, as
    `SwapGPU::Append` writes it: the authors' `vec_block_fresh_vgg.csv`) and vec_run
    (`INDEX OP ADDRESS BYTES TIME`)."""
    p = str(path)
    try:
        text = Path(p).read_text()
    except FileNotFoundError:
        raise InputError("allocation trace not found", path=p) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read allocation trace: {e}", path=p) from None
    kinds, addrs, sizes, times, lines = [], [], [], [], []
    fmt = None
    sized = False  # blockInfo lines with the bytes on every op
    for ln, raw in enumerate(text.splitlines(), start=1):
        tok = raw.split()
        if not tok:
            continue
        if fmt is None:
            fmt = "vec_run" if re.fullmatch(r"\d+", tok[0]) else "mem"
        if fmt == "vec_run":
            if len(tok) != 5:
                raise InputError(
                    f"expected 'INDEX OP ADDRESS BYTES TIME', got {raw.strip()!r}", path=p, line=ln
                )
            _int(tok[0], p, ln, "index")
            tok = tok[1:]
        op = _OPS.get(tok[0].lower())
        if op is None:
            raise InputError(
                f"unknown op {tok[0]!r} (expected Malloc, Free, Read, Mutable, Layer)", path=p, line=ln
            )
        if fmt == "vec_run":
            a, s, t = tok[1], tok[2], tok[3]
        elif op == MALLOC:
            if len(tok) < 4 or (len(tok) > 4 and tok[4] != "(data_&size)") or len(tok) > 5:
                raise InputError(
                    f"expected 'Malloc ADDRESS BYTES TIME', got {raw.strip()!r}", path=p, line=ln
                )
            a, s, t = tok[1], tok[2], tok[3]
        elif len(tok) == 4:
            a, s, t = tok[1], tok[2], tok[3]
            sized = True
        else:
            if len(tok) != 3:
                raise InputError(
                    f"expected '{tok[0]} ADDRESS TIME' or '{tok[0]} ADDRESS BYTES TIME', got {raw.strip()!r}",
                    path=p,
                    line=ln,
                )
            a, s, t = tok[1], "-1", tok[2]
        if not a.lower().startswith("0x"):
            raise InputError(f"address {a!r} is not hexadecimal (0x...)", path=p, line=ln)
        kinds.append(op)
        addrs.append(_int(a, p, ln, "address"))
        sizes.append(_int(s, p, ln, "size"))
        times.append(_int(t, p, ln, "time"))
        lines.append(ln)
    if fmt is None:
        raise InputError("allocation trace is empty", path=p)
    name = Path(p).name
    # memInfo_* times are ms, the others ns
    unit = 1_000_000 if name.startswith("memInfo") else 1
    times = [x * unit for x in times]
    pre = []
    if sized or fmt == "vec_run":
        # every op carries its block's bytes: a block whose first op is not its malloc was
        # live when the recording starts (a cut of a longer run, as the authors' three
        # "fresh" iterations): it gets a malloc at the start, before the first op
        seen = set()
        for k, a, sz, ln in zip(kinds, addrs, sizes, lines):
            if a not in seen:
                seen.add(a)
                if k != MALLOC and k != LAYER and sz >= 0:
                    pre.append((a, sz, ln))
        if pre:
            kinds = [MALLOC] * len(pre) + kinds
            addrs = [a for a, _, _ in pre] + addrs
            sizes = [sz for _, sz, _ in pre] + sizes
            lines = [ln for _, _, ln in pre] + lines
            times = [times[0]] * len(pre) + times
    return _resolve(
        p,
        name,
        kinds,
        addrs,
        sizes,
        times,
        lines,
        {
            "source": p,
            "format": "singa-"
            + (
                "vec_run"
                if fmt == "vec_run"
                else "meminfo"
                if unit > 1
                else "vec_block"
                if sized
                else "blockinfo"
            ),
            "live_at_start": len(pre),
        },
    )


# ---------------------------------------------------------------------------------------------
# HDF5 form


def write_hdf5(trace: AllocTrace, path) -> None:
    """/ops/{kind,address,size,time_ns,block,stream}; attrs format, schema_version, name."""
    import json

    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["format"] = FORMAT_NAME
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["name"] = trace.name
        f.attrs["meta"] = json.dumps(
            {k: v for k, v in trace.meta.items() if isinstance(v, (str, int, float, bool))}
        )
        g = f.create_group("ops")
        for col in ("kind", "address", "size", "time_ns", "stream"):
            g.create_dataset(col, data=getattr(trace, col), compression="gzip")


def read_hdf5(path) -> AllocTrace:
    """An HDF5 allocation trace; blocks are resolved from addresses again (the file's own
    `block` column is not trusted)."""
    import json

    import h5py

    p = str(path)
    try:
        f = h5py.File(p, "r")
    except FileNotFoundError:
        raise InputError("allocation trace not found", path=p) from None
    except OSError as e:
        raise InputError(f"not an HDF5 file: {e}", path=p) from None
    with f:
        if f.attrs.get("format") != FORMAT_NAME:
            raise InputError(
                f"not a g10fast allocation trace (attribute format is "
                f"{f.attrs.get('format')!r}, expected {FORMAT_NAME!r})",
                path=p,
            )
        ver = int(f.attrs.get("schema_version", -1))
        if ver != SCHEMA_VERSION:
            raise InputError(f"schema_version {ver} is not supported (expected {SCHEMA_VERSION})", path=p)
        cols = {}
        for c in ("kind", "address", "size", "time_ns"):
            if f"ops/{c}" not in f:
                raise InputError(f"missing dataset /ops/{c}", path=p)
            cols[c] = f[f"ops/{c}"][()]
        n = len(cols["kind"])
        if any(len(v) != n for v in cols.values()):
            raise InputError("the /ops datasets differ in length", path=p)
        stream = f["ops/stream"][()] if "ops/stream" in f else np.zeros(n, np.int16)
        name = str(f.attrs.get("name", Path(p).name))
        meta = json.loads(f.attrs.get("meta", "{}"))
    kinds = cols["kind"].astype(np.int64)
    bad = np.nonzero((kinds < 0) | (kinds > LAYER))[0]
    if len(bad):
        raise InputError(f"op {bad[0]}: kind {kinds[bad[0]]} is not 0..4", path=p + ":/ops/kind")
    sizes = np.where(kinds == MALLOC, cols["size"], -1)
    tr = _resolve(
        p + ":/ops row",
        name,
        kinds.tolist(),
        cols["address"].tolist(),
        sizes.tolist(),
        cols["time_ns"].tolist(),
        list(range(n)),
        meta,
    )
    return AllocTrace(
        tr.name,
        tr.kind,
        tr.address,
        tr.size,
        tr.time_ns,
        tr.block,
        np.asarray(stream, np.int16)[: tr.num_ops],
        tr.meta,
    )


def read_trace(path) -> AllocTrace:
    """An allocation trace in either format: HDF5 (by its signature) or SINGA's text."""
    p = str(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(8)
    except FileNotFoundError:
        raise InputError("allocation trace not found", path=p) from None
    except OSError as e:
        raise InputError(f"cannot read allocation trace: {e.strerror or e}", path=p) from None
    if head == b"\x89HDF\r\n\x1a\n":
        return read_hdf5(p)
    return read_singa(p)


# ---------------------------------------------------------------------------------------------
# from a Workload (E5)


def from_workload(
    w, freq_ghz: float = 1.2, iterations: int = 1, globals_persist: bool = True, kernel_cycles=None
) -> AllocTrace:
    """The allocation trace of a g10fast workload (E5): kernel k reads its inputs and writes
    its outputs at op indices; a non-global tensor is malloc'd just before its first use and
    freed just after its last use; global tensors (weights) are malloc'd once at the start and
    never freed (cross-iteration blocks). Each kernel contributes, in order: the mallocs of
    tensors first used by it, a LAYER marker, READs of its inputs, WRITEs of its outputs, the
    frees of tensors last used by it. Times: each kernel's ops at its start time (ns).
    Addresses: the tensor's address in g10fast's layout (unique per tensor). `kernel_cycles`:
    per-kernel durations to time the ops by instead of `exec_cycles` (a profile run's)."""
    K, T = w.num_kernels, w.num_tensors
    first, last = w.use_span()
    glob = np.asarray(w.is_global, bool)
    cyc = np.asarray(w.exec_cycles if kernel_cycles is None else kernel_cycles, np.float64)
    if cyc.shape != (K,) or (cyc < 0).any():
        raise InputError(f"kernel_cycles must be {K} durations >= 0", param="kernel_cycles")
    t_start = np.concatenate([[0.0], np.cumsum(cyc / (freq_ghz * 1e9))]) * 1e9
    size = np.asarray(w.raw_size, np.int64)
    addr = np.asarray(w.address, np.int64)
    kinds, tens, times, kops = [], [], [], []
    if globals_persist:
        for t in np.nonzero(glob)[0].tolist():
            kinds.append(MALLOC)
            tens.append(t)
            times.append(0)
            kops.append(-1)
    births = [[] for _ in range(K)]
    deaths = [[] for _ in range(K)]
    for t in np.nonzero((~glob if globals_persist else np.ones(T, bool)) & (last >= 0))[0].tolist():
        births[first[t]].append(t)
        deaths[last[t]].append(t)
    it_first = []
    for it in range(iterations):
        it_first.append(len(kinds))
        base = it * t_start[-1]
        for k in range(K):
            tk = int(base + t_start[k])
            for t in births[k]:
                kinds.append(MALLOC)
                tens.append(t)
                times.append(tk)
                kops.append(k)
            outs = w.outputs(k)
            if len(outs):
                kinds.append(LAYER)
                tens.append(int(outs[0]))
                times.append(tk)
                kops.append(k)
            for t in w.inputs(k).tolist():
                kinds.append(READ)
                tens.append(t)
                times.append(tk)
                kops.append(k)
            for t in w.outputs(k).tolist():
                kinds.append(WRITE)
                tens.append(t)
                times.append(tk)
                kops.append(k)
            te = int(base + t_start[k + 1])
            for t in deaths[k]:
                kinds.append(FREE)
                tens.append(t)
                times.append(te)
                kops.append(k)
    kinds = np.asarray(kinds, np.int8)
    tens = np.asarray(tens, np.int64)
    # block ids: one per malloc, in order
    m = kinds == MALLOC
    block = np.full(len(kinds), -1, np.int64)
    cur = np.full(T, -1, np.int64)
    bid = 0
    for i in range(len(kinds)):
        t = tens[i]
        if t < 0:
            continue
        if kinds[i] == MALLOC:
            cur[t] = bid
            bid += 1
        block[i] = cur[t]
    del m
    # kernel_of_op (int64 per op: the kernel within its iteration, -1 for the start-up mallocs
    # of globals) and tensor_of_op: the E5 mapping (meta only, not written to HDF5)
    kops = np.asarray(kops, np.int64)
    # the known period, in malloc/free op indices (start of iteration 0, ops per iteration)
    na = np.concatenate([[0], np.cumsum(kinds <= FREE)])
    period = None
    if iterations >= 2:
        period = (int(na[it_first[0]]), int(na[it_first[1]] - na[it_first[0]]))
    return _make(
        f"{w.name}-b{w.batch_size}",
        kinds,
        addr[tens],
        size[tens],
        np.asarray(times, np.int64),
        block,
        np.zeros(len(kinds)),
        {
            "source": "workload",
            "model": w.name,
            "batch": int(w.batch_size),
            "iterations": int(iterations),
            "kernels": int(K),
            "kernel_of_op": kops,
            "tensor_of_op": tens,
            "period": period,
        },
    )


def from_tensor_events(
    events, size_bytes, name: str = "tensor-engine", absent_at_start: dict | None = None
) -> AllocTrace:
    """The malloc/free sequence of a tensor-engine run (g10fast.engine.tensor: its event rows,
    trace columns), in the order the engine made them: an ALLOC of tensor t at page s is a
    malloc of `size_bytes[t]`; the DEALLOC or EVICT of (t, s) frees it. Blocks the engine
    never frees (weights, O-40's pages held by a pending offload) stay live. Times: the
    event's cycle. `absent_at_start` {tensor: kernel k} (the swap policies' swaps that wrap
    round the iteration, g10fast.policies.trace_swap.swap_hints): the tensor's start-up
    allocation and the eviction that ends it are left out (it is on the host when the
    iteration starts), and it is freed when kernel k − 1 ends (its swap-out for the next
    iteration; k = 0: not freed)."""
    from g10fast.locations import EV_ALLOC, EV_DEALLOC, EV_EVICT, EV_KERNEL

    ev = np.asarray(events, np.int64).reshape(-1, 10)
    absent = {int(t): int(k) for t, k in (absent_at_start or {}).items()}
    keep = (ev[:, 1] == EV_ALLOC) | (ev[:, 1] == EV_DEALLOC) | (ev[:, 1] == EV_EVICT)
    if absent:
        keep |= ev[:, 1] == EV_KERNEL
    ev = ev[keep]
    size_bytes = np.asarray(size_bytes, np.int64)
    kinds, blocks, tens, times = [], [], [], []
    live: dict = {}
    of_tensor: dict = {}  # tensor -> its live keys (absent tensors only)
    skip_evict = set()
    free_after: dict = {}
    for t, k in absent.items():
        if k > 0:
            free_after.setdefault(k - 1, []).append(t)
    nb = 0
    for row in ev.tolist():
        kind, t, s = row[1], row[4], row[5]
        if kind == EV_KERNEL:
            for tt in free_after.get(row[3], ()):
                keys = of_tensor.get(tt)
                if keys:
                    key = keys.pop(0)
                    kinds.append(FREE)
                    blocks.append(live.pop(key))
                    tens.append(tt)
                    times.append(row[0])
            continue
        if kind == EV_ALLOC and t in absent and row[3] == -1:
            skip_evict.add((t, s))  # its start-up copy: on the host in steady state
            continue
        if kind != EV_ALLOC and (t, s) in skip_evict:
            skip_evict.discard((t, s))
            continue
        if kind == EV_ALLOC:
            live[(t, s)] = nb
            if t in absent:
                of_tensor.setdefault(t, []).append((t, s))
            kinds.append(MALLOC)
            blocks.append(nb)
            nb += 1
        else:
            b = live.pop((t, s), None)
            if b is None:  # never allocated in this run's events: nothing to free
                continue
            if t in absent and (t, s) in of_tensor.get(t, ()):
                of_tensor[t].remove((t, s))
            kinds.append(FREE)
            blocks.append(b)
        tens.append(t)
        times.append(row[0])
    tens = np.asarray(tens, np.int64)
    n = len(kinds)
    return _make(
        name,
        kinds,
        np.asarray(blocks, np.int64) << 12,
        size_bytes[tens] if n else np.zeros(0, np.int64),
        times,
        blocks,
        np.zeros(n),
        {"source": "tensor-engine", "tensor_of_op": tens},
    )
