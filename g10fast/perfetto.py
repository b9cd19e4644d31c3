"""Timeline export of an HDF5 event trace (docs/perfetto.md): Perfetto protobuf or Chrome JSON,
read chunk by chunk in bounded memory and encoded with numpy; `diff` of two traces,
`inspect_json`, and a residency / link-throughput figure.

What the export shows (one process track "g10fast: MODEL batch B POLICY", its children):

* "GPU compute": one slice per kernel execution, named by kernel; args kernel id, iteration,
  faulted pages, wait (start minus the previous kernel's end) and, when the trace holds the
  kernels' times (`/kernels/exec_cycles`), stall = end - previous end - exec time (for the
  page engine, whose TRANSFER rows mark its transfer periods, its own per-kernel stall, O-37
  included). Planner hints are instants on this track at their
  time: one per kernel execution with the hint counts (default), one per hint (`pages=True`).
* "page faults": one slice per kernel execution that faulted, its pages by source as args;
  with `pages=True` one instant per FAULT row.
* one track per link and direction ("SSD→GPU", "host→GPU", "GPU→SSD", "GPU→host"): page moves
  as slices. A move of c pages at time t occupies [t - c·4096/bandwidth, t] on its link (the
  time is when the pages arrive); moves closer than the merge gap are one slice (a batched run,
  args pages and moves). With `pages=True` every move is also an instant with its tensor and
  first page.
* counters: GPU-, host- and SSD-resident bytes, and per link the bytes in flight and the
  throughput, each averaged over the sample interval.

Perfetto's format is written by hand (about 15 field numbers of perfetto_trace.proto): one
matrix of bytes per batch of packets, its valid bytes selected by a mask (the protobuf
encoding of every packet of a batch at once). The `perfetto` package is needed only by the
tests that decode the result.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .atomic import atomic_path, checked_target
from .errors import InputError
from .trace import EventKind, Location, open_trace
from .trace_ranges import compare_events, iter_expanded

PAGE_BYTES = 4096
#: (src, dst, name) of every link and direction, in track order
LINKS = (
    (Location.IN_SSD, Location.IN_GPU, "SSD→GPU"),
    (Location.IN_CPU, Location.IN_GPU, "host→GPU"),
    (Location.IN_GPU, Location.IN_SSD, "GPU→SSD"),
    (Location.IN_GPU, Location.IN_CPU, "GPU→host"),
)
#: tiers whose resident bytes are counted: (location, name)
TIERS = ((Location.IN_GPU, "GPU"), (Location.IN_CPU, "host"), (Location.IN_SSD, "SSD"))
#: `trace plot`: a fixed colour per tier and per link (matplotlib's tab10; no colour in both
#: panels), and per series in draw order a width and a dash
PLOT_COLOURS = {
    "GPU": "tab:blue",
    "host": "tab:orange",
    "SSD": "tab:green",
    "SSD→GPU": "tab:red",
    "host→GPU": "tab:purple",
    "GPU→SSD": "tab:brown",
    "GPU→host": "tab:cyan",
}
PLOT_WIDTHS = (2.4, 1.8, 1.3, 0.9)
PLOT_DASHES = ("-", "--", "-.", ":")
DEFAULT_SAMPLES = 100_000  # counter samples per counter, aggregated export
PAGES_SAMPLES = 200_000  # with pages=True (scratch: ~150 bytes per interval)
MIN_INTERVAL = 1000  # cycles: no counter interval is shorter (a page-engine tick
# is 15,599 cycles on the artifact's system)
CHUNK_ROWS = 1 << 18
ENCODE_ROWS = 1 << 15  # packets encoded at once (scratch: ~100 bytes per row, x3)

# track uuids
U_ROOT, U_GPU, U_FAULTS = 1, 2, 3
# fmt: off
U_LINK = 10          # + link index
U_TIER = 20          # + tier index
U_INFLIGHT = 30      # + link index
U_RATE = 40          # + link index
U_FAULT_CTR = 50
SEQ = 0x6710
# fmt: on

# TrackEvent.Type
T_BEGIN, T_END, T_INSTANT, T_COUNTER = 1, 2, 3, 4


# =============================================================================================
# protobuf encoding with numpy
# =============================================================================================


def _varint_scalar(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint_scalar((field << 3) | wire)


def _pb(fields) -> bytes:
    """A message from [(field, value)]: int -> varint, bytes -> length-delimited,
    str -> UTF-8 length-delimited, list of bytes -> repeated length-delimited."""
    out = bytearray()
    for field, value in fields:
        if value is None:
            continue
        if isinstance(value, bool) or isinstance(value, (int, np.integer)):
            out += _tag(field, 0) + _varint_scalar(int(value))
        else:
            b = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            out += _tag(field, 2) + _varint_scalar(len(b)) + b
    return bytes(out)


def _varint_cols(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint64 values -> (bytes [n, w] uint8, lengths [n]); w = the longest encoding."""
    v = np.asarray(v).astype(np.uint64, copy=True)
    n = v.size
    cols, ln = [], np.ones(n, np.int64)
    for _ in range(10):
        b = (v & np.uint64(0x7F)).astype(np.uint8)
        v >>= np.uint64(7)
        more = v != 0
        b[more] |= 0x80
        cols.append(b)
        if not more.any():
            break
        ln += more
    return np.stack(cols, axis=1) if n else np.zeros((0, 1), np.uint8), ln


class _Rows:
    """n messages built field by field as byte columns plus a validity mask; ``tobytes()``
    is their concatenation (row-major selection of the valid bytes)."""

    def __init__(self, n: int):
        self.n = n
        self.mats: list = []
        self.masks: list = []

    def const(self, bs: bytes, present=None) -> "_Rows":
        a = np.frombuffer(bs, np.uint8)
        self.mats.append(np.broadcast_to(a, (self.n, a.size)))
        if present is None:
            self.masks.append(np.ones((self.n, a.size), bool))
        else:
            self.masks.append(np.repeat(present[:, None], a.size, axis=1))
        return self

    def varint(self, v, present=None) -> "_Rows":
        mat, ln = _varint_cols(v)
        mask = np.arange(mat.shape[1])[None, :] < ln[:, None]
        if present is not None:
            mask &= present[:, None]
        self.mats.append(mat)
        self.masks.append(mask)
        return self

    def field(self, field: int, v, present=None) -> "_Rows":
        return self.const(_tag(field, 0), present).varint(v, present)

    def fixed64(self, field: int, v, present=None) -> "_Rows":
        self.const(_tag(field, 1), present)
        mat = np.ascontiguousarray(np.asarray(v, "<u8")).view(np.uint8).reshape(self.n, 8)
        self.mats.append(mat)
        self.masks.append(
            np.ones((self.n, 8), bool) if present is None else np.repeat(present[:, None], 8, axis=1)
        )
        return self

    def nested(self, field: int, inner: "_Rows", present=None) -> "_Rows":
        ln = inner.nbytes()
        self.const(_tag(field, 2), present).varint(ln, present)
        for m, k in zip(inner.mats, inner.masks):
            self.mats.append(m)
            self.masks.append(k if present is None else k & present[:, None])
        return self

    def nbytes(self) -> np.ndarray:
        if not self.masks:
            return np.zeros(self.n, np.int64)
        return sum(k.sum(axis=1, dtype=np.int64) for k in self.masks)

    def tobytes(self) -> bytes:
        if self.n == 0 or not self.mats:
            return b""
        m = np.concatenate([np.ascontiguousarray(x) for x in self.mats], axis=1)
        k = np.concatenate(self.masks, axis=1)
        return m[k].tobytes()


def encode_track_events(
    ts, typ, track, name_iid=None, counter=None, args=(), args_mask=None, flow=None, terminating_flow=None
) -> bytes:
    """``Trace.packet`` repeated: one TracePacket per row with timestamp ``ts`` (ns) and a
    TrackEvent {type, track_uuid, name_iid?, counter_value?, debug_annotations (name_iid,
    int_value) for each (iid, values) of ``args``, on the rows of ``args_mask`` (all by
    default), flow_ids / terminating_flow_ids (one each, left out where 0)}; a ``name_iid``
    of 0 is left out. Scalars broadcast."""
    ts = np.asarray(ts, np.int64)
    n = ts.size
    if n == 0:
        return b""
    if n > ENCODE_ROWS:  # bounded scratch memory: the byte matrices hold ENCODE_ROWS rows

        def part(x, lo):
            if x is None:
                return None
            a = np.asarray(x)
            return a if a.ndim == 0 else a[lo : lo + ENCODE_ROWS]

        return b"".join(
            encode_track_events(
                ts[lo : lo + ENCODE_ROWS],
                part(typ, lo),
                part(track, lo),
                part(name_iid, lo),
                part(counter, lo),
                [(i, part(v, lo)) for i, v in args],
                part(args_mask, lo),
                part(flow, lo),
                part(terminating_flow, lo),
            )
            for lo in range(0, n, ENCODE_ROWS)
        )

    def col(x):
        a = np.asarray(x)
        return np.broadcast_to(a, (n,)) if a.ndim == 0 else a

    te = _Rows(n)
    te.field(9, col(typ).astype(np.uint64))
    te.field(11, col(track).astype(np.uint64))
    if name_iid is not None:
        ni = col(name_iid).astype(np.int64)
        te.field(10, ni.astype(np.uint64), present=ni > 0)
    if counter is not None:
        te.const(_tag(30, 0)).varint(col(counter).astype(np.int64).view(np.uint64))
    for iid, values in args:
        v = col(values).astype(np.int64)
        da = _Rows(n).const(_tag(1, 0) + _varint_scalar(iid)).const(_tag(4, 0)).varint(v.view(np.uint64))
        te.nested(4, da, present=args_mask)
    for field, f in ((47, flow), (48, terminating_flow)):
        if f is not None:
            f = col(f).astype(np.int64)
            te.fixed64(field, f, present=f > 0)
    pk = _Rows(n)
    pk.field(8, ts.astype(np.uint64))
    pk.const(_tag(10, 0) + _varint_scalar(SEQ) + _tag(13, 0) + _varint_scalar(2))
    pk.nested(11, te)
    return _Rows(n).nested(1, pk).tobytes()


def _track_descriptor(
    uuid: int,
    name: str,
    parent: int | None = None,
    counter_unit=None,
    rank: int | None = None,
    unit_name: str | None = None,
    ordering: int | None = None,
) -> bytes:
    counter = None
    if counter_unit is not None or unit_name is not None:
        counter = _pb([(3, counter_unit), (6, unit_name)])
    td = _pb([(1, uuid), (2, name), (5, parent), (8, counter), (11, ordering), (12, rank)])
    return _pb([(1, _pb([(60, td)]))])


def _interned_packet(event_names: list[str], arg_names: list[str]) -> bytes:
    """The first packet of the sequence: every interned name (iid = index + 1)."""
    ev = [(2, _pb([(1, i + 1), (2, s)])) for i, s in enumerate(event_names)]
    an = [(3, _pb([(1, i + 1), (2, s)])) for i, s in enumerate(arg_names)]
    pkt = _pb([(10, SEQ), (13, 1), (12, _pb(ev + an))])
    return _pb([(1, pkt)])


# =============================================================================================
# output sinks: Perfetto protobuf and Chrome JSON
# =============================================================================================

ARG_NAMES = [
    "kernel",
    "iteration",
    "faulted_pages",
    "wait_ns",
    "stall_ns",
    "pages",
    "moves",
    "tensor",
    "first_page",
    "demand",
    "from",
    "to",
    "from_SSD",
    "from_host",
    "not_present",
    "hints",
    "to_GPU",
    "to_host",
    "to_SSD",
    "dealloc",
    "bytes",
]
_ARG = {n: i + 1 for i, n in enumerate(ARG_NAMES)}


class _Sink:
    """Collects tracks and events; subclasses write them."""

    def __init__(self, fh, names: list[str]):
        self.fh = fh
        self.names = names
        self.iid = {s: i + 1 for i, s in enumerate(names)}
        self.packets = 0

    def name_id(self, s: str) -> int:
        return self.iid[s]


class _ProtoSink(_Sink):
    def __init__(self, fh, names, tracks):
        super().__init__(fh, names)
        for t in tracks:
            fh.write(_track_descriptor(**t))
        fh.write(_interned_packet(names, ARG_NAMES))
        self.packets = len(tracks) + 1

    def slices(self, track, begin, end, name_iid, args=(), terminating_flow=None):
        n = len(begin)
        if n == 0:
            return
        ts = np.empty(2 * n, np.int64)
        ts[0::2], ts[1::2] = begin, end
        typ = np.empty(2 * n, np.int64)
        typ[0::2], typ[1::2] = T_BEGIN, T_END
        nid = np.zeros(2 * n, np.int64)
        nid[0::2] = name_iid
        a2 = []
        for k, v in args:  # args on the begin packet only
            full = np.zeros(2 * n, np.int64)
            full[0::2] = v
            a2.append((k, full))
        mask = np.zeros(2 * n, bool)
        mask[0::2] = True
        tf = None
        if terminating_flow is not None:
            tf = np.zeros(2 * n, np.int64)
            tf[0::2] = terminating_flow
        self.fh.write(
            encode_track_events(
                ts, typ, track, nid, args=[(_ARG[k], v) for k, v in a2], args_mask=mask, terminating_flow=tf
            )
        )
        self.packets += 2 * n

    def instants(self, track, ts, name_iid, args=(), flow=None):
        if len(ts) == 0:
            return
        self.fh.write(
            encode_track_events(
                ts, T_INSTANT, track, name_iid, args=[(_ARG[k], v) for k, v in args], flow=flow
            )
        )
        self.packets += len(ts)

    def counter(self, track, ts, values):
        if len(ts) == 0:
            return
        self.fh.write(encode_track_events(ts, T_COUNTER, track, counter=values))
        self.packets += len(ts)


class _JsonSink(_Sink):
    """Chrome trace-event JSON (chrome://tracing, Perfetto, speedscope): X, i, C, M events."""

    def __init__(self, fh, names, tracks):
        super().__init__(fh, names)
        self.first = True
        self.tid = {}
        self.counter_name = {}
        fh.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        root = next(t for t in tracks if t["uuid"] == U_ROOT)
        self._emit(
            [json.dumps({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": root["name"]}})]
        )
        for t in tracks:
            if t["uuid"] == U_ROOT:
                continue
            if t.get("counter_unit") is not None or t.get("unit_name") is not None:
                self.counter_name[t["uuid"]] = t["name"]
            else:
                tid = len(self.tid) + 1
                self.tid[t["uuid"]] = tid
                self._emit(
                    [
                        json.dumps(
                            {
                                "ph": "M",
                                "name": "thread_name",
                                "pid": 1,
                                "tid": tid,
                                "args": {"name": t["name"]},
                            }
                        ),
                        json.dumps(
                            {
                                "ph": "M",
                                "name": "thread_sort_index",
                                "pid": 1,
                                "tid": tid,
                                "args": {"sort_index": tid},
                            }
                        ),
                    ]
                )

    def _emit(self, lines):
        if not lines:
            return
        self.fh.write(("" if self.first else ",\n") + ",\n".join(lines))
        self.first = False
        self.packets += len(lines)

    @staticmethod
    def _us(ns) -> list[str]:
        return [f"{x / 1000:.3f}" for x in np.asarray(ns).tolist()]

    def _args(self, args, i) -> str:
        return ",".join(f'"{k}":{int(v[i])}' for k, v in args)

    def slices(self, track, begin, end, name_iid, args=(), terminating_flow=None):
        tid = self.tid[track]
        if terminating_flow is not None:
            tf = np.asarray(terminating_flow)
            tb = self._us(begin)
            self._emit(
                [
                    f'{{"ph":"f","bp":"e","id":{int(tf[i])},"name":"waited for",'
                    f'"cat":"flow","pid":1,"tid":{tid},"ts":{tb[i]}}}'
                    for i in range(len(tf))
                    if tf[i] > 0
                ]
            )
        nid = np.broadcast_to(np.asarray(name_iid), (len(begin),))
        args = [(k, np.broadcast_to(np.asarray(v), (len(begin),))) for k, v in args]
        dur = np.asarray(end) - np.asarray(begin)
        tsb, du = self._us(begin), self._us(dur)
        self._emit(
            [
                f'{{"ph":"X","pid":1,"tid":{tid},"ts":{tsb[i]},"dur":{du[i]},'
                f'"name":{json.dumps(self.names[nid[i] - 1])},"args":{{{self._args(args, i)}}}}}'
                for i in range(len(begin))
            ]
        )

    def instants(self, track, ts, name_iid, args=(), flow=None):
        tid = self.tid[track]
        if flow is not None:
            fl = np.asarray(flow)
            tt = self._us(ts)
            self._emit(
                [
                    f'{{"ph":"s","id":{int(fl[i])},"name":"waited for","cat":"flow",'
                    f'"pid":1,"tid":{tid},"ts":{tt[i]}}}'
                    for i in range(len(fl))
                ]
            )
        nid = np.broadcast_to(np.asarray(name_iid), (len(ts),))
        args = [(k, np.broadcast_to(np.asarray(v), (len(ts),))) for k, v in args]
        t = self._us(ts)
        self._emit(
            [
                f'{{"ph":"i","s":"t","pid":1,"tid":{tid},"ts":{t[i]},'
                f'"name":{json.dumps(self.names[nid[i] - 1])},"args":{{{self._args(args, i)}}}}}'
                for i in range(len(ts))
            ]
        )

    def counter(self, track, ts, values):
        name = json.dumps(self.counter_name[track])
        t = self._us(ts)
        v = np.asarray(values).tolist()
        self._emit(
            [
                f'{{"ph":"C","pid":1,"ts":{t[i]},"name":{name},"args":{{"value":{v[i]}}}}}'
                for i in range(len(t))
            ]
        )

    def close(self):
        self.fh.write("\n]}\n")


# =============================================================================================
# reading the trace
# =============================================================================================


class _Run:
    """What pass 1 learns: the clock, the links' bandwidths, every kernel execution."""

    def __init__(self, tr):
        self.tr = tr
        cfg = tr.config or {}
        system = cfg.get("system") if isinstance(cfg.get("system"), dict) else {}
        summ = tr.summary or {}
        f_hz = summ.get("f_hz") or (system.get("gpu_frequency_ghz") or 0) * 1e9
        self.f_hz = float(f_hz) if f_hz else 1e9
        f_ghz = self.f_hz / 1e9
        ssd = float(system.get("ssd_bandwidth_gbps") or 0) / f_ghz  # bytes per cycle
        host = float(system.get("host_link_gbps") or 0) / f_ghz
        self.bpc = [ssd, host, ssd, host]
        meta = tr.meta or {}
        self.kernel_names = list(meta.get("kernel_names") or [])
        self.title = "g10fast: " + " ".join(
            str(x)
            for x in (
                meta.get("model"),
                f"batch {meta.get('batch_size')}" if meta.get("batch_size") is not None else None,
                meta.get("policy"),
            )
            if x
        )
        self.exec_cycles = tr.kernel_exec_cycles() if hasattr(tr, "kernel_exec_cycles") else None
        self._scan()

    def ns(self, cycles) -> np.ndarray:
        return np.rint(np.asarray(cycles, np.float64) * (1e9 / self.f_hz)).astype(np.int64)

    def _scan(self):
        tr = self.tr
        tmin, tmax = None, None
        ks, ke, kid, kit, kcnt = [], [], [], [], []
        bt, bv = [], []
        self.n_rows = 0  # rows with range rows expanded (trace_ranges), what _write reads
        for ch in iter_expanded(
            tr, rows=CHUNK_ROWS, columns=["time", "kind", "iteration", "kernel", "count", "src", "value"]
        ):
            t = ch["time"]
            self.n_rows += t.size
            if t.size == 0:
                continue
            kind = ch["kind"]
            # the page engine's transfer periods: TRANSFER rows without a link
            pm = (kind == EventKind.TRANSFER) & (ch["src"] < 0)
            if pm.any():
                bt.append(t[pm].astype(np.int64))
                bv.append(ch["value"][pm].astype(np.int64))
            m = kind == EventKind.KERNEL
            lo, hi = int(t.min()), int(t.max())
            if m.any():
                ks.append(t[m].astype(np.int64))
                ke.append(ch["value"][m].astype(np.int64))
                kid.append(ch["kernel"][m].astype(np.int64))
                kit.append(ch["iteration"][m].astype(np.int64))
                kcnt.append(ch["count"][m].astype(np.int64))
                hi = max(hi, int(ke[-1].max()))
            tmin = lo if tmin is None else min(tmin, lo)
            tmax = hi if tmax is None else max(tmax, hi)
        self.periods = (np.concatenate(bt), np.concatenate(bv)) if bt else None
        self.tmin = 0 if tmin is None else min(0, tmin)
        self.tmax = 0 if tmax is None else tmax
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)
        start, end = cat(ks), cat(ke)
        order = np.argsort(start, kind="stable")
        self.k_start = start[order]
        self.k_end = np.maximum(end[order], self.k_start)
        self.k_id, self.k_iter, self.k_faulted = cat(kid)[order], cat(kit)[order], cat(kcnt)[order]
        n = self.k_start.size
        self.k_prev_end = (
            np.concatenate([[0], np.maximum.accumulate(self.k_end)[:-1]]) if n else np.zeros(0, np.int64)
        )
        # execution index of (iteration, kernel): the first execution with that key
        keys = self.k_iter * (1 << 32) + self.k_id
        o = np.argsort(keys, kind="stable")
        self._keys, self._key_exec = keys[o], o

    def exec_of(self, iteration, kernel) -> np.ndarray:
        """Execution index of each (iteration, kernel), -1 where there is none."""
        keys = np.asarray(iteration, np.int64) * (1 << 32) + np.asarray(kernel, np.int64)
        if self._keys.size == 0:
            return np.full(keys.shape, -1, np.int64)
        i = np.searchsorted(self._keys, keys)
        i = np.minimum(i, self._keys.size - 1)
        return np.where(self._keys[i] == keys, self._key_exec[i], -1)

    def kernel_name(self, k: int) -> str:
        if 0 <= k < len(self.kernel_names):
            return str(self.kernel_names[k])
        return f"kernel {k}"

    def stall(self) -> np.ndarray | None:
        """Per execution: end - previous end - exec time (cycles), or None without times.
        With the page engine's transfer periods in the trace, the engine's own per-kernel
        stall (g10fast.engine.stats.kernel_breakdown, O-37 included)."""
        ex = self.exec_cycles
        if ex is None or self.k_id.size == 0:
            return None
        ok = (self.k_id >= 0) & (self.k_id < ex.size)
        kid = np.clip(self.k_id, 0, max(ex.size - 1, 0))
        if self.periods is not None and ok.all():
            from g10fast.engine.stats import kernel_breakdown
            from g10fast.results import KERNEL_COLUMNS, KS_END, KS_KERNEL

            kern = np.zeros((self.k_id.size, len(KERNEL_COLUMNS)), np.int64)
            kern[:, KS_KERNEL] = self.k_id
            kern[:, KS_END] = self.k_end
            t, v = self.periods
            bnd = np.stack([np.zeros_like(t), t, v], axis=1)
            return kernel_breakdown(kern, bnd, ex)[:, 3]
        e = np.where(ok, ex[kid], 0)
        return np.where(ok, self.k_end - self.k_prev_end - e, 0)


def parse_kernel_range(text: str | None, n_exec: int) -> tuple[int, int] | None:
    """'A:B' -> (A, B): kernel executions A .. B-1 in time order; InputError if out of bounds."""
    if text is None:
        return None
    try:
        a_s, b_s = str(text).split(":")
        a = int(a_s) if a_s.strip() else 0
        b = int(b_s) if b_s.strip() else n_exec
    except ValueError:
        raise InputError(
            f"kernel range {text!r} is not A:B (kernel executions A to B-1, in time order)", param="--kernels"
        ) from None
    if not (0 <= a < b <= n_exec):
        raise InputError(
            f"kernel range {a}:{b} is out of bounds: the trace has {n_exec} kernel executions (0:{n_exec})",
            param="--kernels",
        )
    return a, b


# =============================================================================================
# pass 2: counters, link slices, faults, hints
# =============================================================================================


def _window(run: "_Run", kernels: str | None) -> tuple[int, int, int, int]:
    """The kernel executions [a, b) of `--kernels A:B` (all without it) and the time window
    [w0, w1] (cycles) they span."""
    rng = parse_kernel_range(kernels, run.k_start.size)
    if rng is None:
        return 0, run.k_start.size, run.tmin, run.tmax
    a, b = rng
    return a, b, int(run.k_start[a]), int(run.k_end[b - 1])


def _moves(ch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Effective (src, dst, pages) of every row: FETCH goes to the GPU, EVICT leaves it, ALLOC
    comes from nowhere, DEALLOC goes nowhere; other kinds move nothing (pages 0)."""
    kind = ch["kind"]
    src = ch["src"].astype(np.int64)
    dst = ch["dst"].astype(np.int64)
    cnt = np.maximum(ch["count"].astype(np.int64), 0)
    fetch = kind == EventKind.FETCH
    evict = kind == EventKind.EVICT
    alloc = kind == EventKind.ALLOC
    dealloc = kind == EventKind.DEALLOC
    dst = np.where(fetch | alloc, int(Location.IN_GPU), dst)
    src = np.where(evict, int(Location.IN_GPU), src)
    src = np.where(alloc, int(Location.NOT_PRESENT), src)
    dst = np.where(dealloc, int(Location.NOT_PRESENT), dst)
    moving = fetch | evict | alloc | dealloc
    cnt = np.where(moving, cnt, 0)
    # IN_GPU_LEAST is GPU memory
    src = np.where(src == Location.IN_GPU_LEAST, int(Location.IN_GPU), src)
    dst = np.where(dst == Location.IN_GPU_LEAST, int(Location.IN_GPU), dst)
    return src, dst, cnt


class _Bins:
    """Counters on a grid of ``nb`` bins of ``w`` cycles from ``t0``: tier deltas (their sum
    before the bin's end), and per link the time integral of bytes in flight and of the
    transfer rate (difference arrays of a piecewise-linear integral)."""

    def __init__(self, t0: int, t1: int, samples: int, min_interval: int = MIN_INTERVAL):
        span = max(1, int(t1) - int(t0))
        self.t0 = int(t0)
        self.w = max(1, int(min_interval), -(-span // max(1, samples)))
        self.nb = -(-span // self.w)
        nb = self.nb
        self.tier = np.zeros((len(TIERS), nb + 2))  # index 0: before t0
        self.A = np.zeros((2, len(LINKS), nb + 2))  # slope changes (in flight, rate)
        self.B = np.zeros((2, len(LINKS), nb + 2))

    def idx(self, t) -> np.ndarray:
        """Index into the delta arrays of a point at time t: 0 before t0, bin + 1 inside,
        nb + 1 at or after the end."""
        i = np.floor_divide(np.asarray(t, np.int64) - self.t0, self.w) + 1
        return np.clip(i, 0, self.nb + 1)

    @staticmethod
    def _acc(target, i, lo, hi, weights):
        """target[i] += weights, summed: a bincount over the chunk's index range [lo, hi]
        (rows are nearly in time order, so the range is short; at worst it is the bins)."""
        target[lo : hi + 1] += np.bincount(i - lo, weights=weights, minlength=hi - lo + 1)

    def add_tiers(self, t, src, dst, cnt):
        m = cnt > 0
        if not m.any():
            return
        i = self.idx(t[m])
        lo, hi = int(i.min()), int(i.max())
        src, dst, cnt = src[m], dst[m], cnt[m]
        for j, (loc, _) in enumerate(TIERS):
            d = np.where(dst == loc, cnt, 0) - np.where(src == loc, cnt, 0)
            if d.any():
                self._acc(self.tier[j], i, lo, hi, d.astype(np.float64))

    def add_link(self, L: int, s, e, nbytes):
        """Transfers [s, e) of ``nbytes`` on link L."""
        if len(s) == 0:
            return
        d = np.maximum(e - s, 1).astype(np.float64)
        rs = (np.asarray(s, np.int64) - self.t0).astype(np.float64)
        re_ = (np.asarray(e, np.int64) - self.t0).astype(np.float64)
        i_s, i_e = self.idx(s), self.idx(e)
        ls, hs, le, he = int(i_s.min()), int(i_s.max()), int(i_e.min()), int(i_e.max())
        for q, slope in enumerate((nbytes.astype(np.float64), nbytes / d)):
            self._acc(self.A[q, L], i_s, ls, hs, slope)
            self._acc(self.A[q, L], i_e, le, he, -slope)
            self._acc(self.B[q, L], i_s, ls, hs, slope * rs)
            self._acc(self.B[q, L], i_e, le, he, -slope * re_)

    def edges(self) -> np.ndarray:
        return self.t0 + self.w * np.arange(self.nb + 1, dtype=np.int64)

    def tier_values(self) -> np.ndarray:
        """[tiers, nb] pages resident at the end of each bin; SSD and host start at the level
        that keeps them non-negative (pages there before their first move are not events)."""
        cum = np.cumsum(self.tier, axis=1)[:, 1 : self.nb + 1]
        for j, (loc, _) in enumerate(TIERS):
            if loc != Location.IN_GPU and cum.shape[1]:
                low = cum[j].min()
                if low < 0:
                    cum[j] -= low
        return np.rint(cum).astype(np.int64)

    def link_values(self) -> tuple[np.ndarray, np.ndarray]:
        """([links, nb] mean bytes in flight, [links, nb] mean bytes per cycle) per bin."""
        rel = (self.edges() - self.t0).astype(np.float64)  # nb + 1 edges
        cA = np.cumsum(self.A, axis=2)[:, :, : self.nb + 1]
        cB = np.cumsum(self.B, axis=2)[:, :, : self.nb + 1]
        F = rel[None, None, :] * cA - cB
        mean = np.diff(F, axis=2) / self.w
        return np.maximum(mean[0], 0), np.maximum(mean[1], 0)


class _LinkMerger:
    """Merges one link's transfers into slices: consecutive transfers (in arrival order)
    closer than ``gap`` cycles are one slice; slices never overlap."""

    def __init__(self, gap: int):
        self.gap = int(gap)
        self.open = None  # [s, e, pages, moves]
        self.last_end = None

    def feed(self, s, e, pages) -> list[np.ndarray]:
        """-> closed slices [begin, end, pages, moves] as arrays."""
        if len(s) == 0:
            return [np.zeros(0, np.int64)] * 4
        if e.size > 1 and not (e[1:] >= e[:-1]).all():
            o = np.argsort(e, kind="stable")
            s, e, pages = s[o], e[o], pages[o]
        moves = np.ones(len(e), np.int64)
        if self.open is not None:  # the slice still open from the previous chunk
            s = np.concatenate([[self.open[0]], s])
            e = np.concatenate([[self.open[1]], e])
            pages = np.concatenate([[self.open[2]], pages])
            moves = np.concatenate([[self.open[3]], moves])
        emax = np.maximum.accumulate(e)
        new = np.ones(len(s), bool)
        new[1:] = s[1:] > emax[:-1] + self.gap
        starts = np.flatnonzero(new)
        gs = np.minimum.reduceat(s, starts)
        ge = np.maximum.reduceat(e, starts)
        gp = np.add.reduceat(pages, starts)
        gm = np.add.reduceat(moves, starts)
        self.open = [int(gs[-1]), int(ge[-1]), int(gp[-1]), int(gm[-1])]
        out = [gs[:-1], ge[:-1], gp[:-1], gm[:-1]]
        return self._clamp(out)

    def _clamp(self, out):
        b, e = out[0].copy(), out[1].copy()
        if len(b):
            lo = self.last_end
            # never overlap the previous slice (out-of-order rows across chunks)
            prev = np.concatenate([[lo if lo is not None else b[0]], e[:-1]])
            b = np.maximum(b, prev)
            e = np.maximum(e, b)
            self.last_end = int(e[-1])
        return [b, e, out[2], out[3]]

    def close(self):
        if self.open is None:
            return [np.zeros(0, np.int64)] * 4
        o = self.open
        self.open = None
        return self._clamp([np.array([o[0]]), np.array([o[1]]), np.array([o[2]]), np.array([o[3]])])


# =============================================================================================
# export
# =============================================================================================


def _tracks(run: _Run) -> list[dict]:
    tr = [
        dict(uuid=U_ROOT, name=run.title or "g10fast", ordering=3),
        dict(uuid=U_GPU, name="GPU compute", parent=U_ROOT, rank=0),
        dict(uuid=U_FAULTS, name="page faults", parent=U_ROOT, rank=1),
    ]
    for L, (_, _, name) in enumerate(LINKS):
        tr.append(dict(uuid=U_LINK + L, name=name, parent=U_ROOT, rank=2 + L))
    r = 10
    for j, (_, name) in enumerate(TIERS):
        tr.append(dict(uuid=U_TIER + j, name=f"{name}-resident bytes", parent=U_ROOT, counter_unit=3, rank=r))
        r += 1
    for L, (_, _, name) in enumerate(LINKS):
        tr.append(
            dict(uuid=U_INFLIGHT + L, name=f"{name} bytes in flight", parent=U_ROOT, counter_unit=3, rank=r)
        )
        r += 1
    for L, (_, _, name) in enumerate(LINKS):
        tr.append(
            dict(uuid=U_RATE + L, name=f"{name} throughput (bytes/s)", parent=U_ROOT, unit_name="B/s", rank=r)
        )
        r += 1
    tr.append(dict(uuid=U_FAULT_CTR, name="faulted pages per kernel", parent=U_ROOT, counter_unit=2, rank=r))
    return tr


def _names(run: _Run) -> list[str]:
    kn = [run.kernel_name(int(k)) for k in np.unique(run.k_id)] if run.k_id.size else []
    loc_names = {int(v): v.name for v in Location}
    fixed = (
        ["faults", "hints"]
        + [f"hint → {loc_names[v]}" for v in sorted(loc_names)]
        + [f"hint → {v}" for v in ("none",)]
        + [name for _, _, name in LINKS]
        + [f"{name} move" for _, _, name in LINKS]
        + ["fault", "arrived"]
    )
    out, seen = [], set()
    for s in fixed + kn:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def export_trace(
    path,
    out,
    fmt: str = "perfetto",
    pages: bool = False,
    kernels: str | None = None,
    samples: int | None = None,
    merge_gap: int | None = None,
    flows: bool = False,
    progress=None,
) -> dict:
    """Write the timeline of the event trace ``path`` to ``out`` (Perfetto protobuf, or Chrome
    JSON with ``fmt="json"``); -> a report dict. ``pages``: page-level detail (one instant per
    move, fault and hint); ``kernels``: "A:B", only kernel executions A..B-1 (time order);
    ``samples``: counter samples per counter; ``merge_gap``: cycles between two transfers on
    a link that still merge into one slice (default: the counter interval);
    ``flows``: a flow from the last page arrival a faulting kernel waited for to its slice.
    Written to a temporary name and renamed; InputError on a bad trace or range."""
    if fmt not in ("perfetto", "json"):
        raise InputError(f"unknown export format {fmt!r} (perfetto or json)", param="--format")
    out = checked_target(out)
    tr = open_trace(path)
    try:
        run = _Run(tr)
        a, b, w0, w1 = _window(run, kernels)
        nsamp = int(samples) if samples else (PAGES_SAMPLES if pages else DEFAULT_SAMPLES)
        bins = _Bins(w0, max(w1, w0 + 1), nsamp)
        gap = int(merge_gap) if merge_gap is not None else bins.w
        names = _names(run)
        tracks = _tracks(run)
        with (
            atomic_path(out) as tmp,
            open(
                tmp,
                "wb" if fmt == "perfetto" else "w",
                **({} if fmt == "perfetto" else {"encoding": "utf-8"}),
            ) as fh,
        ):
            sink = (_ProtoSink if fmt == "perfetto" else _JsonSink)(fh, names, tracks)
            rep = _write(run, sink, bins, gap, pages, a, b, w0, w1, progress, flows)
            if fmt == "json":
                sink.close()
    finally:
        tr.close()
    rep.update(
        {
            "output": out,
            "format": fmt,
            "bytes": os.path.getsize(out),
            "packets": sink.packets,
            "events_read": tr.n_events,
            "rows_expanded": run.n_rows,  # events_read with every range row's ticks
            "kernel_range": [a, b],
            "window_cycles": [w0, w1],
            "counter_interval_cycles": bins.w,
            "counter_samples_max": bins.nb,
            "merge_gap_cycles": gap,
            "f_hz": run.f_hz,
            "pages": bool(pages),
        }
    )
    return rep


def _write(run: _Run, sink, bins: _Bins, gap, pages, a, b, w0, w1, progress, flows=False) -> dict:
    ns = run.ns
    rep = {
        "kernel_slices": 0,
        "link_slices": [0] * len(LINKS),
        "fault_slices": 0,
        "hint_instants": 0,
        "move_instants": 0,
        "fault_instants": 0,
    }
    # -- kernels (pass 1) -------------------------------------------------------------
    sel = slice(a, b)
    ks, ke = run.k_start[sel], run.k_end[sel]
    kid, kit, kf = run.k_id[sel], run.k_iter[sel], run.k_faulted[sel]
    wait = run.k_start[sel] - run.k_prev_end[sel]
    stall = run.stall()
    args = [("kernel", kid), ("iteration", kit), ("faulted_pages", kf), ("wait_ns", ns(np.maximum(wait, 0)))]
    if stall is not None:
        args.append(("stall_ns", ns(stall[sel])))
    nid = (
        np.array([sink.name_id(run.kernel_name(int(k))) for k in np.unique(kid)], np.int64)
        if kid.size
        else np.zeros(0, np.int64)
    )
    uk = np.unique(kid)
    kname = nid[np.searchsorted(uk, kid)] if kid.size else kid
    # flows: the last page arrival on the GPU within a faulting kernel's [start, end]
    last_in = np.full(ks.size, np.iinfo(np.int64).min, np.int64) if flows else None
    last_link = np.zeros(ks.size, np.int64) if flows else None
    # per-execution accumulators (bounded by the number of kernel executions)
    n_ex = run.k_start.size
    nloc = len(Location)
    fault_src = np.zeros((n_ex, nloc), np.int64)
    hint_dst = np.zeros((n_ex, nloc + 1), np.int64)
    hint_pages = np.zeros(n_ex, np.int64)
    merg = [_LinkMerger(gap) for _ in LINKS]
    tr = run.tr
    total = run.n_rows
    done = 0
    move_name = [sink.name_id(f"{name} move") for _, _, name in LINKS]
    link_name = [sink.name_id(name) for _, _, name in LINKS]
    in_win = lambda t: (t >= w0) & (t <= w1)
    for ch in iter_expanded(tr, rows=CHUNK_ROWS):  # a range row: its ticks, each at its time
        t = ch["time"].astype(np.int64)
        kind = ch["kind"]
        src, dst, cnt = _moves(ch)
        bins.add_tiers(t, src, dst, cnt)
        # links
        mv = np.flatnonzero((cnt > 0) & ((kind == EventKind.FETCH) | (kind == EventKind.EVICT)))
        code = src[mv] * 16 + dst[mv]
        for L, (ls, ld, _) in enumerate(LINKS):
            m = mv[code == int(ls) * 16 + int(ld)]  # row indices of this link's moves
            if m.size == 0:
                continue
            e = t[m]
            c = cnt[m]
            nbytes = c * PAGE_BYTES
            d = np.ceil(nbytes / run.bpc[L]).astype(np.int64) if run.bpc[L] > 0 else np.ones(c.size, np.int64)
            s = e - np.maximum(d, 1)
            bins.add_link(L, s, e, nbytes)
            if flows and ld == Location.IN_GPU and ks.size:
                x = np.searchsorted(ks, e, side="right") - 1  # execution started before e
                ok = (x >= 0) & (kf[np.maximum(x, 0)] > 0)
                ok &= e <= ke[np.maximum(x, 0)]
                if ok.any():
                    xs, es = x[ok], e[ok]
                    before = last_in[xs].copy()
                    np.maximum.at(last_in, xs, es)
                    changed = last_in[xs] != before
                    last_link[xs[changed]] = L
            w = (e >= w0) & (s <= w1)
            if w.any():
                gs, ge, gp, gm = merg[L].feed(np.maximum(s[w], w0), np.minimum(e[w], w1), c[w])
                _link_slices(sink, run, L, link_name[L], gs, ge, gp, gm, rep)
            if pages:
                wi = in_win(e)
                sink.instants(
                    U_LINK + L,
                    ns(e[wi]),
                    move_name[L],
                    [
                        ("tensor", ch["tensor"][m][wi]),
                        ("first_page", ch["page"][m][wi]),
                        ("pages", c[wi]),
                        ("demand", ch["value"][m][wi]),
                    ],
                )
                rep["move_instants"] += int(wi.sum())
        # faults and hints per execution
        fm = kind == EventKind.FAULT
        hm = kind == EventKind.HINT
        if fm.any() or hm.any():
            fh = fm | hm
            ex = np.full(t.size, -1, np.int64)
            ex[fh] = run.exec_of(ch["iteration"][fh], ch["kernel"][fh])
            if fm.any():
                e_ = ex[fm]
                ok = e_ >= 0
                sl = np.clip(ch["src"][fm].astype(np.int64), 0, nloc - 1)
                np.add.at(fault_src, (e_[ok], sl[ok]), np.maximum(ch["count"][fm][ok], 0))
                if pages:
                    tt = t[fm]
                    w = in_win(tt)
                    sink.instants(
                        U_FAULTS,
                        ns(tt[w]),
                        sink.name_id("fault"),
                        [
                            ("tensor", ch["tensor"][fm][w]),
                            ("first_page", ch["page"][fm][w]),
                            ("pages", ch["count"][fm][w]),
                            ("from", ch["src"][fm][w]),
                        ],
                    )
                    rep["fault_instants"] += int(w.sum())
            if hm.any():
                e_ = ex[hm]
                ok = e_ >= 0
                dl = ch["dst"][hm].astype(np.int64)
                dl = np.where((dl >= 0) & (dl < nloc), dl, nloc)
                np.add.at(hint_dst, (e_[ok], dl[ok]), 1)
                np.add.at(hint_pages, e_[ok], np.maximum(ch["count"][hm][ok], 0))
                if pages:
                    tt = t[hm]
                    w = in_win(tt)
                    dd = ch["dst"][hm][w].astype(np.int64)
                    locn = {int(v): v.name for v in Location}
                    nm = np.array([sink.name_id(f"hint → {locn.get(int(x), 'none')}") for x in dd], np.int64)
                    sink.instants(
                        U_GPU,
                        ns(tt[w]),
                        nm,
                        [
                            ("tensor", ch["tensor"][hm][w]),
                            ("pages", ch["count"][hm][w]),
                            ("kernel", ch["kernel"][hm][w]),
                            ("to", dd),
                        ],
                    )
                    rep["hint_instants"] += int(w.sum())
        done += t.size
        if progress is not None:
            progress(done, total)
    for L in range(len(LINKS)):
        gs, ge, gp, gm = merg[L].close()
        _link_slices(sink, run, L, link_name[L], gs, ge, gp, gm, rep)
    # kernel slices, ending the flows from the arrivals they waited for
    term = None
    if flows:
        has = last_in > np.iinfo(np.int64).min
        term = np.where(has, np.arange(ks.size) + a + 1, 0)
        for L in range(len(LINKS)):
            m = has & (last_link == L)
            if m.any():
                sink.instants(
                    U_LINK + L, ns(last_in[m]), sink.name_id("arrived"), [("kernel", kid[m])], flow=term[m]
                )
        rep["flows"] = int(has.sum())
    for lo in range(0, ks.size, CHUNK_ROWS):
        hi = lo + CHUNK_ROWS
        sink.slices(
            U_GPU,
            ns(ks[lo:hi]),
            ns(ke[lo:hi]),
            kname[lo:hi],
            [(k, v[lo:hi]) for k, v in args],
            terminating_flow=None if term is None else term[lo:hi],
        )
    rep["kernel_slices"] = int(ks.size)
    # faults: one slice per faulting execution in the range
    fs = fault_src[sel]
    fl = np.flatnonzero(kf > 0)
    if fl.size:
        sink.slices(
            U_FAULTS,
            ns(ks[fl]),
            ns(ke[fl]),
            sink.name_id("faults"),
            [
                ("faulted_pages", kf[fl]),
                ("from_SSD", fs[fl, Location.IN_SSD]),
                ("from_host", fs[fl, Location.IN_CPU]),
                ("not_present", fs[fl, Location.NOT_PRESENT]),
                ("kernel", kid[fl]),
                ("iteration", kit[fl]),
            ],
        )
    rep["fault_slices"] = int(fl.size)
    # fault counter: pages at the kernel's start, 0 at its end
    if ks.size:
        tsc = np.empty(2 * ks.size, np.int64)
        tsc[0::2], tsc[1::2] = ns(ks), ns(ke)
        vv = np.zeros(2 * ks.size, np.int64)
        vv[0::2] = kf
        sink.counter(U_FAULT_CTR, tsc, vv)
    # hints: one instant per execution with hints (aggregated)
    if not pages:
        hd, hp = hint_dst[sel], hint_pages[sel]
        hx = np.flatnonzero(hd.sum(axis=1) > 0)
        if hx.size:
            sink.instants(
                U_GPU,
                ns(ks[hx]),
                sink.name_id("hints"),
                [
                    ("hints", hd[hx].sum(axis=1)),
                    ("to_GPU", hd[hx, Location.IN_GPU]),
                    ("to_host", hd[hx, Location.IN_CPU]),
                    ("to_SSD", hd[hx, Location.IN_SSD]),
                    ("dealloc", hd[hx, Location.NOT_PRESENT]),
                    ("pages", hp[hx]),
                    ("kernel", kid[hx]),
                ],
            )
        rep["hint_instants"] = int(hx.size)
    # counters
    edges = bins.edges()
    tvals = bins.tier_values()
    inflight, rate = bins.link_values()
    tns = ns(edges[:-1])
    rep["counter_samples"] = {}
    for j, (_, name) in enumerate(TIERS):
        n = _counter(sink, U_TIER + j, tns, tvals[j] * PAGE_BYTES)
        rep["counter_samples"][f"{name}-resident bytes"] = n
    for L, (_, _, name) in enumerate(LINKS):
        rep["counter_samples"][f"{name} bytes in flight"] = _counter(
            sink, U_INFLIGHT + L, tns, np.rint(inflight[L]).astype(np.int64)
        )
        rep["counter_samples"][f"{name} throughput"] = _counter(
            sink, U_RATE + L, tns, np.rint(rate[L] * run.f_hz).astype(np.int64)
        )
    return rep


def _link_slices(sink, run, L, name_iid, gs, ge, gp, gm, rep):
    if len(gs) == 0:
        return
    sink.slices(
        U_LINK + L,
        run.ns(gs),
        run.ns(ge),
        name_iid,
        [("pages", gp), ("moves", gm), ("bytes", gp * PAGE_BYTES)],
    )
    rep["link_slices"][L] += int(len(gs))


def _counter(sink, track, tns, values) -> int:
    """Samples where the value changes (and the first); -> how many."""
    if len(values) == 0:
        return 0
    keep = np.ones(len(values), bool)
    keep[1:] = values[1:] != values[:-1]
    idx = np.flatnonzero(keep)
    for lo in range(0, idx.size, CHUNK_ROWS):
        part = idx[lo : lo + CHUNK_ROWS]
        sink.counter(track, tns[part], values[part])
    return int(idx.size)


# =============================================================================================
# serving once for ui.perfetto.dev
# =============================================================================================

PERFETTO_PORT = 9001  # the only port ui.perfetto.dev's content-security policy allows


def serve_once(path, port: int = PERFETTO_PORT, on_ready=None, timeout: float | None = None) -> str:
    """Serve ``path`` once on 127.0.0.1:``port`` (with the CORS header ui.perfetto.dev needs);
    calls ``on_ready(url)`` with the UI's URL, returns after one GET of the file."""
    import http.server

    path = os.fspath(path)
    fname = os.path.basename(path)

    class Handler(http.server.BaseHTTPRequestHandler):
        done = False

        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path.lstrip("/") != fname:
                self.send_error(404)
                return
            size = os.path.getsize(path)
            self.send_response(200)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with open(path, "rb") as fh:
                while True:
                    b = fh.read(1 << 20)
                    if not b:
                        break
                    self.wfile.write(b)
            Handler.done = True

        def do_POST(self):  # the UI probes for a trace_processor RPC server: not us
            self.send_error(404)

    try:
        srv = http.server.HTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{port} ({exc})", param="--port") from None
    srv.timeout = 1.0
    url = f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/{fname}"
    if on_ready is not None:
        on_ready(url)
    import time as _time

    t0 = _time.monotonic()
    try:
        while not Handler.done:
            srv.handle_request()
            if timeout is not None and _time.monotonic() - t0 > timeout:
                break
    finally:
        srv.server_close()
    return url


# =============================================================================================
# inspect --json, diff
# =============================================================================================


def inspect_json(path, allow_incomplete: bool = False) -> dict:
    """Event counts per kind and in all (``events``), pages per kind, the time span, the
    run's configuration and provenance: a dict ready for JSON."""
    tr = open_trace(path, allow_incomplete=allow_incomplete)
    try:
        tr.verify(raise_on_damage=True)
        counts = tr.count_by_kind()
        pages = tr.pages_by_kind()
        run = _Run(tr)
        meta = dict(tr.meta or {})
        names = meta.pop("kernel_names", None)
        if names is not None:
            meta["kernel_names"] = len(names)
        key = lambda k: getattr(k, "name", str(k))
        return {
            "file": os.fspath(path),
            "schema_version": tr.schema_version,
            "complete": tr.complete,
            "events": tr.n_events,
            "compression": tr.compression,
            "events_by_kind": {key(k): int(v) for k, v in counts.items()},
            "ticks_by_kind": {key(k): int(v) for k, v in tr.ticks_by_kind().items()},
            "pages_by_kind": {key(k): int(v) for k, v in pages.items()},
            "kernel_executions": int(run.k_start.size),
            "time_span": {
                "first_cycles": int(run.tmin),
                "last_cycles": int(run.tmax),
                "cycles": int(run.tmax - run.tmin),
                "f_hz": run.f_hz,
                "seconds": (run.tmax - run.tmin) / run.f_hz,
            },
            "has_kernel_times": run.exec_cycles is not None,
            "config": tr.config,
            "meta": meta,
        }
    finally:
        tr.close()


def diff_traces(path_a, path_b, top: int = 10, events: bool = True) -> dict:
    """Where two runs of the same workload diverge: the first kernel execution whose start
    differs, and per kernel execution the stall difference (B - A), the ``top`` largest;
    ``events``: whether the events are the same in normal form, however the engines grouped
    pages into rows and ticks into ranges, and the first that differs (``compare_events``)."""
    runs = []
    for p in (path_a, path_b):
        tr = open_trace(p)
        try:
            runs.append(_Run(tr))
        finally:
            tr.close()
    A, B = runs
    ka = A.k_iter * (1 << 32) + A.k_id
    kb = B.k_iter * (1 << 32) + B.k_id
    ua, ub = np.unique(A.k_id), np.unique(B.k_id)
    if not np.array_equal(ua, ub) or (A.kernel_names and B.kernel_names and A.kernel_names != B.kernel_names):
        raise InputError(
            f"not two runs of the same workload: {ua.size} kernels in "
            f"{path_a}, {ub.size} in {path_b} (or their names differ)",
            path=os.fspath(path_b),
        )
    common, ia, ib = np.intersect1d(ka, kb, assume_unique=False, return_indices=True)
    order = np.argsort(ia)
    ia, ib = ia[order], ib[order]
    ds = B.k_start[ib] - A.k_start[ia]
    # per execution: total = end - previous end; stall = total - exec; B - A is the same
    tot_a = A.k_end[ia] - A.k_prev_end[ia]
    tot_b = B.k_end[ib] - B.k_prev_end[ib]
    dstall = tot_b - tot_a
    first = None
    nz = np.flatnonzero(ds != 0)
    if nz.size:
        i = int(nz[0])
        first = {
            "execution": int(ia[i]),
            "iteration": int(A.k_iter[ia[i]]),
            "kernel": int(A.k_id[ia[i]]),
            "name": A.kernel_name(int(A.k_id[ia[i]])),
            "start_a_cycles": int(A.k_start[ia[i]]),
            "start_b_cycles": int(B.k_start[ib[i]]),
            "difference_cycles": int(ds[i]),
        }
    o = np.argsort(-np.abs(dstall), kind="stable")[: max(0, int(top))]
    sa, sb = A.stall(), B.stall()
    rows = []
    for i in o:
        if dstall[i] == 0:
            break
        r = {
            "execution": int(ia[i]),
            "iteration": int(A.k_iter[ia[i]]),
            "kernel": int(A.k_id[ia[i]]),
            "name": A.kernel_name(int(A.k_id[ia[i]])),
            "time_a_cycles": int(tot_a[i]),
            "time_b_cycles": int(tot_b[i]),
            "stall_difference_cycles": int(dstall[i]),
        }
        if sa is not None and sb is not None:
            r["stall_a_cycles"], r["stall_b_cycles"] = int(sa[ia[i]]), int(sb[ib[i]])
        rows.append(r)
    end_a = int(A.k_end.max()) if A.k_end.size else 0
    end_b = int(B.k_end.max()) if B.k_end.size else 0
    return {
        "a": os.fspath(path_a),
        "b": os.fspath(path_b),
        "f_hz": A.f_hz,
        "executions_a": int(A.k_start.size),
        "executions_b": int(B.k_start.size),
        "matched": int(common.size),
        "end_a_cycles": end_a,
        "end_b_cycles": end_b,
        "first_start_difference": first,
        "executions_with_different_stall": int((dstall != 0).sum()),
        "total_stall_difference_cycles": int(dstall.sum()),
        "top": rows,
        **({"events": _compare_files(path_a, path_b)} if events else {}),
    }


def _compare_files(path_a, path_b) -> dict:
    with open_trace(path_a) as ta, open_trace(path_b) as tb:
        return compare_events(ta, tb)


# =============================================================================================
# figure
# =============================================================================================


def plot_trace(path, out, kernels: str | None = None, samples: int = 2000) -> dict:
    """Residency per tier (GiB) and link throughput (GB/s) over time (ms), kernels shaded;
    written to ``out`` (any matplotlib format) via a temporary name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = checked_target(out)
    tr = open_trace(path)
    try:
        run = _Run(tr)
        a, b, w0, w1 = _window(run, kernels)
        bins = _Bins(w0, max(w1, w0 + 1), samples)
        for ch in iter_expanded(tr, rows=CHUNK_ROWS, columns=["time", "kind", "count", "src", "dst"]):
            t = ch["time"].astype(np.int64)
            src, dst, cnt = _moves(ch)
            bins.add_tiers(t, src, dst, cnt)
            for L, (ls, ld, _) in enumerate(LINKS):
                m = (
                    (src == ls)
                    & (dst == ld)
                    & (cnt > 0)
                    & ((ch["kind"] == EventKind.FETCH) | (ch["kind"] == EventKind.EVICT))
                )
                if m.any():
                    nbytes = cnt[m] * PAGE_BYTES
                    d = (
                        np.ceil(nbytes / run.bpc[L]).astype(np.int64)
                        if run.bpc[L] > 0
                        else np.ones(int(m.sum()), np.int64)
                    )
                    bins.add_link(L, t[m] - np.maximum(d, 1), t[m], nbytes)
    finally:
        tr.close()
    edges = bins.edges()
    ms = (edges[:-1] + bins.w / 2) / run.f_hz * 1e3
    tiers = bins.tier_values() * PAGE_BYTES / 2**30
    _, rate = bins.link_values()
    rate = rate * run.f_hz / 1e9
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    # one colour per series in both panels, none shared between a tier and a link; each
    # series a little thinner than the one drawn before it and in its own dash, so that a
    # series equal to an earlier one shows inside it instead of hiding it
    for j, (_, name) in enumerate(TIERS):
        ax1.plot(ms, tiers[j], label=name, color=PLOT_COLOURS[name], lw=PLOT_WIDTHS[j], ls=PLOT_DASHES[j])
    for L, (_, _, name) in enumerate(LINKS):
        if rate[L].any():
            ax2.plot(ms, rate[L], label=name, color=PLOT_COLOURS[name], lw=PLOT_WIDTHS[L], ls=PLOT_DASHES[L])
    ks, ke = run.k_start[a:b], run.k_end[a:b]
    spans = [((s / run.f_hz * 1e3), ((e - s) / run.f_hz * 1e3)) for s, e in zip(ks, ke)]
    for ax in (ax1, ax2):
        lo, hi = ax.get_ylim() if ax.lines else (0, 1)
        ax.broken_barh(spans[0::2], (lo, hi - lo), color="0.85", zorder=0, lw=0)
        ax.broken_barh(spans[1::2], (lo, hi - lo), color="0.93", zorder=0, lw=0)
        ax.set_ylim(lo, hi)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(loc="upper right", fontsize=8)
    ax1.set_ylabel("resident (GiB)")
    ax2.set_ylabel("link throughput (GB/s)")
    ax2.set_xlabel("simulated time (ms)")
    iv = bins.w / run.f_hz
    iv_text = f"{iv * 1e3:.3g} ms" if iv >= 1e-3 else f"{iv * 1e6:.3g} µs"
    ax1.set_title(f"{run.title or path}: kernels {a}..{b - 1} shaded (means over {iv_text})", fontsize=9)
    fig.tight_layout()
    try:
        with atomic_path(out, os.path.splitext(out)[1] or ".png") as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return {"output": out, "kernel_range": [a, b], "interval_cycles": bins.w}
