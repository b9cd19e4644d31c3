"""HDF5 event trace: what the simulation engine did, one row per event (docs/trace-format.md).

The engine hands over events in batches as an int64 array ``buf[n, N_COLS]`` whose columns are
the ``COL_*`` constants below. ``EventTraceWriter`` stores each column as its own chunked,
compressed, resizable 1-D dataset under ``/events``, in bounded memory, and publishes the file
atomically: it writes ``.<name>.<pid>.<token>.tmp`` in the target directory and renames it over
the target only when ``close()`` succeeds; on error or abort the temporary file is removed.
``open_trace`` reads it back, whole or in chunks.

Damage is detected: every stored chunk has a CRC-32 (``/checksums/<column>``, one uint32 per
chunk, of the chunk's stored bytes), checked on every read, and the root attributes have a
SHA-256 (``header_sha256`` from the start, ``attrs_sha256`` at close), checked at open;
``verify_trace`` names each damaged chunk. The temporary file is written in HDF5's SWMR mode
and flushed after every stored chunk set, so the file of a killed run opens (with
``allow_incomplete=True``) and reads up to its last complete chunk; a later writer of the same
target removes the temporary files of dead processes, and ``open_trace`` of a missing trace
names them (``find_temporaries``).

Chunks are shuffled and compressed by a small thread pool (numpy's copy and ISA-L's
deflate, ``isal``, release the GIL) and stored with HDF5's direct chunk write: the stored bytes
are a standard zlib stream of the shuffled chunk, what HDF5's own shuffle + deflate filters
decode, so any HDF5 reader reads them; reading decodes chunks the same way in parallel when the
filters are the standard pair, and falls back to plain h5py slicing otherwise.
``compression="none"`` (the CLI's ``--trace-compression none``) stores the chunks unfiltered
instead, for speed: 53 bytes per event, read by any HDF5 reader, with the same per-chunk CRC-32
of the stored bytes.

Schema version 2 adds two columns, ``ticks`` and ``period``: a row of a page-moving kind may
stand for ``ticks`` batcher ticks ``period`` cycles apart (a "range row", written by the bulk
page engine); version 3 adds ``stride``: the pages from one tick's first page to the next's
(0: the ticks' runs follow one another). ``g10fast.trace_ranges`` expands them
(``expand_ticks``, ``per_page``) and gives the form two traces of one run share however their
engines grouped pages (``normal_form``). Version 4 adds no column: a ``FAULT`` row may stand for
``ticks`` runs of one fault scan, all at its time (period 0), ``stride`` pages apart (the bulk
page engine's scan of a tensor whose pages alternate between the CPU and the SSD). Version 1
files (ten columns), version 2 files (twelve) and version 3 files still read, with ``ticks`` 1,
``period`` 0 and ``stride`` 0 for the columns they lack.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import hashlib
import json
import os
import weakref
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from isal import isal_zlib  # ISA-L's deflate: the same zlib streams, several times faster

from . import locations
from .atomic import temporary_name
from .errors import InputError

SCHEMA_VERSION = 4
FORMAT_NAME = "g10fast-event-trace"
EVENTS_GROUP = "events"
CHECKSUM_GROUP = "checksums"
KERNELS_GROUP = "kernels"  # optional: per-kernel tables (``exec_cycles``), docs/trace-format.md
#: root attributes covered by ``header_sha256`` (written first) and, with ``n_events``,
#: ``complete`` and ``summary``, by ``attrs_sha256`` (written at close)
HEADER_ATTRS = ("format", "schema_version", "columns", "kind_names", "location_names", "config", "meta")
CLOSE_ATTRS = HEADER_ATTRS + ("n_events", "complete", "summary")

# Columns of the engine's event buffer, in order.
# fmt: off
COL_TIME = 0        # int64 cycles (KERNEL: start cycle)
COL_KIND = 1        # EventKind
COL_ITERATION = 2   # iteration number
COL_KERNEL = 3      # kernel id, -1 none
COL_TENSOR = 4      # tensor id, -1 none
COL_PAGE = 5        # first page index (byte address // 4096), -1 none
COL_COUNT = 6       # pages in the run
COL_SRC = 7         # Location the pages come from, -1 none
COL_DST = 8         # Location the pages go to, -1 none
COL_VALUE = 9       # kind-specific int64
COL_TICKS = 10      # batcher ticks the row stands for (>= 1; 1: an ordinary row), version 2
COL_PERIOD = 11     # cycles between those ticks (0 when ticks == 1), version 2
COL_STRIDE = 12     # pages between those ticks' first pages (0: count // ticks), version 3
N_COLS = 13
N_COLS_V1 = 10      # the columns of a version 1 file (and of the engines that write no ranges)
N_COLS_V2 = 12      # the columns of a version 2 file (and of the engines that write no strides)
# fmt: on

COLUMNS = (
    "time",
    "kind",
    "iteration",
    "kernel",
    "tensor",
    "page",
    "count",
    "src",
    "dst",
    "value",
    "ticks",
    "period",
    "stride",
)
#: the columns a version 1 file stores (it has no ``ticks`` / ``period`` / ``stride``: they
#: read as 1, 0 and 0), and a version 2 file (no ``stride``)
COLUMNS_V1 = COLUMNS[:N_COLS_V1]
COLUMNS_V2 = COLUMNS[:N_COLS_V2]
#: the versions ``open_trace`` reads; the writer writes the last
SCHEMA_VERSIONS = (1, 2, 3, 4)
#: kinds whose rows may stand for several batcher ticks (``ticks`` > 1, "range rows")
RANGE_KINDS = frozenset({locations.EV_FETCH, locations.EV_ALLOC, locations.EV_EVICT, locations.EV_DEALLOC})

# Stored dtype per column (little-endian): the narrowest type that holds what the engine produces.
COLUMN_DTYPES = {
    "time": np.dtype("<i8"),
    "kind": np.dtype("<i1"),
    "iteration": np.dtype("<i2"),
    "kernel": np.dtype("<i4"),
    "tensor": np.dtype("<i4"),
    "page": np.dtype("<i8"),
    "count": np.dtype("<i4"),
    "src": np.dtype("<i1"),
    "dst": np.dtype("<i1"),
    "value": np.dtype("<i8"),
    "ticks": np.dtype("<i4"),
    "period": np.dtype("<i8"),
    "stride": np.dtype("<i8"),
}
#: what the columns an older file (or a narrower batch) lacks read as
ABSENT_DEFAULTS = {"ticks": 1, "period": 0, "stride": 0}
#: the widths of the event buffers ``EventTraceWriter.append`` takes
BUFFER_WIDTHS = (N_COLS, N_COLS_V2, N_COLS_V1)

# Filters, chosen by measurement (docs/trace-format.md, "Compression"): byte shuffle + deflate
# level 1. Against lzf (+shuffle) it gives files ~25% smaller at similar write speed and faster
# reads; levels 4-6 shrink files by a further 5-8% for 1.5-3x the compression time.
DEFLATE_LEVEL = 1
#: the writer's ``compression`` choices: "deflate" (shuffle + deflate level 1, the default) or
#: "none" (chunks stored unfiltered: about deflate's write speed with the ISA-L writer, 53
#: bytes/event: 60-80x larger files; docs/trace-format.md)
COMPRESSIONS = ("deflate", "none")
DEFAULT_COMPRESSION = "deflate"
DEFAULT_CHUNK_ROWS = 1 << 16
READ_CHUNKS = 4  # storage chunks per read step (iter_chunks default, read, to_buffer)
_H5Z_FILTER_DEFLATE = 1
_H5Z_FILTER_SHUFFLE = 2


class EventKind(enum.IntEnum):
    """Value of the ``kind`` column."""

    KERNEL = locations.EV_KERNEL  # time = start, value = end cycle, count = pages faulted
    #                                   by its fault scan
    FAULT = locations.EV_FAULT  # pages queued by a kernel's fault scan; src = where they
    #                                   are (0, 1, 2)
    FETCH = locations.EV_FETCH  # pages moved to the GPU by the batcher; src 1/2; value 1
    #                                   demand, 0 prefetch
    ALLOC = locations.EV_ALLOC  # first touch / pre-allocation on the GPU; src 0; value as
    #                                   FETCH
    EVICT = locations.EV_EVICT  # pages leaving the GPU; dst 0 dropped, 1 SSD, 2 CPU;
    #                                   value 1 victim, 0 planned
    HINT = locations.EV_HINT  # planner hint applied at kernel start; src = from, dst =
    #                                   to, count = queued
    DEALLOC = locations.EV_DEALLOC  # pages freed by a pre-deallocation hint; src = where they
    #                                   were
    TRANSFER = locations.EV_TRANSFER  # batcher transfer boundary; value 1 begin, 0 end


#: kinds whose rows carry no page count (``count`` is -1, docs/trace-format.md)
PAGELESS_KINDS = frozenset({EventKind.TRANSFER})


class Location(enum.IntEnum):
    """Value of the ``src`` / ``dst`` columns (-1: none)."""

    NOT_PRESENT = locations.NOT_PRESENT
    IN_SSD = locations.IN_SSD
    IN_CPU = locations.IN_CPU
    IN_GPU = locations.IN_GPU
    NOT_KNOWN = locations.NOT_KNOWN
    IN_GPU_LEAST = locations.IN_GPU_LEAST


KIND_NAMES = [k.name for k in EventKind]
LOCATION_NAMES = [loc.name for loc in Location]


_I64 = np.iinfo(np.int64)


def _allowed_range(col: str) -> tuple[int, int] | None:
    """Values ``append`` accepts in a column, or None for the full int64 range."""
    if col == "kind":
        return 0, len(EventKind) - 1
    if col in ("src", "dst"):
        return -1, len(Location) - 1
    if col == "ticks":
        return 1, int(np.iinfo(np.int32).max)
    if col in ("period", "stride"):
        return 0, int(_I64.max)
    dt = COLUMN_DTYPES[col]
    if dt.itemsize >= 8:
        return None
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


_CHECKED = [(c, col, _allowed_range(col)) for c, col in enumerate(COLUMNS) if _allowed_range(col) is not None]
# the same per column, for trace_kernels.split_checked (unchecked columns: the int64 range)
_CHECK_LO = np.array([(_allowed_range(col) or (_I64.min, _I64.max))[0] for col in COLUMNS], dtype=np.int64)
_CHECK_HI = np.array([(_allowed_range(col) or (_I64.min, _I64.max))[1] for col in COLUMNS], dtype=np.int64)


def default_threads() -> int:
    """Worker threads for chunk compression: up to 4, at most the CPUs this process may use."""
    try:
        ncpu = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        ncpu = os.cpu_count() or 1
    return max(1, min(4, ncpu))


# -- JSON attributes -------------------------------------------------------------------------


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (Path, os.PathLike)):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


#: Keys of a result that measure this process, not the simulation (wall and CPU seconds,
#: memory): left out of the trace, whose bytes and checksums are then a function of the
#: configuration alone (two runs of one configuration write byte-identical files). They stay
#: in the run's result (`--json`).
TIMING_KEYS = frozenset({"plan_seconds", "wall_seconds", "cpu_seconds", "peak_rss_bytes"})


def without_timings(obj):
    """`obj` (a result's JSON-ready tree) without the keys of `TIMING_KEYS`, at any depth."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, (list, tuple)):
        return [without_timings(v) for v in obj]
    return obj


def _to_json(obj, what: str) -> str:
    try:
        return json.dumps(obj if obj is not None else {}, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"trace {what} cannot be stored as JSON: {exc}") from None


def _one_line(exc) -> str:
    """An exception's text on one line (HDF5's write errors carry ctime()'s newline)."""
    return " ".join(str(exc).split())


def _attr_str(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return _attr_str(value[()])
    return value if value is None or isinstance(value, str) else str(value)


def _attr_json(attrs, name: str, path: str, default):
    if name not in attrs:
        return default
    try:
        return json.loads(_attr_str(attrs[name]))
    except (TypeError, ValueError) as exc:
        raise InputError(f"attribute '{name}' is not valid JSON: {exc}", path=path) from None


# -- chunk codec (the HDF5 shuffle + deflate pipeline) ---------------------------------------


def _encode(arr: np.ndarray, level: int) -> bytes:
    """HDF5 shuffle (byte planes) then deflate (zlib stream) of one whole chunk."""
    size = arr.dtype.itemsize
    if size > 1:
        planes = np.empty((size, arr.shape[0]), dtype=np.uint8)
        _shuffle(arr.view(np.uint8).reshape(-1, size), planes)
        arr = planes
    return isal_zlib.compress(arr, level)


def _shuffle(src: np.ndarray, planes: np.ndarray) -> None:
    """``planes[j, i] = src[i, j]`` (HDF5's shuffle; numpy's copy releases the GIL, and took
    0.20 ms a 65,536-value int64 chunk against 0.15 ms for a Numba loop, which a traced run then
    had to import and load: docs/trace-format.md)."""
    planes[...] = src.T


def _store_job(arr: np.ndarray, compression: str):
    """-> (bytes to store, their CRC-32) for one chunk; "none" stores ``arr`` itself (the
    caller keeps it unchanged until it is written)."""
    data = _encode(arr, DEFLATE_LEVEL) if compression == "deflate" else arr
    return data, zlib.crc32(data)


def _decode(data: bytes, filter_mask: int, dtype: np.dtype, rows: int, codec: str = "deflate") -> np.ndarray:
    """Inverse of ``_encode`` (codec "deflate"; ``filter_mask`` bit i set means filter i was
    skipped), or the stored bytes as they are (codec "none")."""
    if codec == "none":
        arr = np.frombuffer(data, dtype=dtype)
        if arr.shape[0] != rows:
            raise ValueError(f"stored chunk holds {arr.shape[0]} values, expected {rows}")
        return arr
    if not filter_mask & 2:
        data = isal_zlib.decompress(data)
    raw = np.frombuffer(data, dtype=np.uint8)
    size = dtype.itemsize
    if size == 1 or filter_mask & 1:
        return raw.view(dtype)
    # numpy, not a kernel: readers (trace export, inspect) need not import Numba (~70 MiB)
    planes = raw.reshape(size, rows)
    out = np.empty((rows, size), dtype=np.uint8)
    for j in range(size):
        out[:, j] = planes[j]
    return out.view(dtype).reshape(rows)


def _attrs_digest(attrs, names) -> str:
    """SHA-256 of the root attributes ``names`` (as the reader sees them)."""
    h = hashlib.sha256()
    for k in names:
        v = attrs.get(k) if hasattr(attrs, "get") else attrs[k]
        if v is None:
            t = "\x00absent"
        elif k == "complete":
            t = str(bool(v))
        elif k in ("schema_version", "n_events"):
            t = str(int(v))
        else:
            t = _attr_str(v)
        h.update(k.encode() + b"=" + t.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


def pid_alive(pid: int) -> bool:
    """Whether a process of this host still runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def find_temporaries(path) -> list[tuple[str, int, bool]]:
    """The temporary files ``.<name>.<pid>.<token>.tmp`` of writers of ``path``:
    ``[(temporary path, writer pid, writer alive)]``, newest first."""
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    out = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return out
    for e in entries:
        if not (e.startswith(f".{name}.") and e.endswith(".tmp")):
            continue
        parts = e[len(name) + 2 : -4].split(".")
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        full = os.path.join(directory, e)
        try:
            mtime = os.path.getmtime(full)
        except OSError:
            continue
        out.append((mtime, full, int(parts[0])))
    out.sort(reverse=True)
    return [(f, pid, pid_alive(pid)) for _, f, pid in out]


def clean_temporaries(path) -> list[str]:
    """Remove the temporary files of writers of ``path`` whose process is gone (a killed
    run's); -> the removed files."""
    removed = []
    for f, pid, alive in find_temporaries(path):
        if not alive and pid != os.getpid():
            _remove_quietly(f)
            removed.append(f)
    return removed


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _abandon(h5file, pool, tmp_path: str) -> None:
    """Finalizer of a writer that was not closed: drop the half-written file."""
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
    try:
        h5file.close()
    except Exception:  # noqa: BLE001 - the file may already be unusable; it is deleted next
        pass
    _remove_quietly(tmp_path)


class _Lazy:
    """A 'future' computed when its result is asked for (decoding without threads)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def result(self):
        return self.fn(*self.args)


class _Done:
    """A finished 'future' for synchronous encoding (threads=0)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class EventTraceWriter:
    """Streams event batches into an HDF5 event trace; a context manager.

    ``append(buf)`` takes the engine's integer ``[n, N_COLS]`` array, ``[n, N_COLS_V2]``
    (stride 0 for every row) or ``[n, N_COLS_V1]`` (ticks 1, period 0, stride 0), any n
    including 0, and buffers up to ``chunk_rows``
    rows per column. Each full buffer becomes one chunk per column,
    compressed by ``threads`` worker threads (0: in the calling thread) while the caller goes on;
    at most ``threads + 1`` chunk sets wait for their encoding, so memory stays under about
    ``53 * chunk_rows * (threads + 3)`` bytes plus their compressed size (~25 MB with 4 threads)
    whatever the trace length.
    ``compression``: "deflate" (default: shuffle + deflate level 1) or "none" (chunks stored
    unfiltered; the threads then only compute the checksums), docs/trace-format.md.
    Leaving the ``with`` block normally calls ``close()`` (flush, publish); leaving it by an
    exception calls ``abort()`` (nothing is published, the temporary file is removed).
    """

    def __init__(
        self,
        path,
        config: dict,
        meta: dict | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        threads: int | None = None,
        compression: str = DEFAULT_COMPRESSION,
    ):
        import h5py

        if compression not in COMPRESSIONS:
            raise InputError(
                f"unknown trace compression {compression!r}; choose {' or '.join(COMPRESSIONS)}",
                param="compression",
            )

        chunk_rows = int(chunk_rows)
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        threads = default_threads() if threads is None else int(threads)
        if threads < 0:
            raise ValueError(f"threads must be >= 0, got {threads}")
        config_json = _to_json(config, "config")
        meta_json = _to_json(meta, "meta")

        self.path = os.fspath(path)
        directory, name = os.path.split(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise InputError(f"directory {directory} does not exist", path=self.path)
        if os.path.isdir(self.path):
            raise InputError("trace path is a directory", path=self.path)
        self._state = "opening"
        clean_temporaries(self.path)
        self.tmp_path = temporary_name(self.path)  # what find_temporaries looks for
        try:
            # v110 object headers hold attributes over 64 KiB (large configs and summaries).
            f = h5py.File(self.tmp_path, "w", libver=("v110", "v110"))
        except OSError as exc:
            _remove_quietly(self.tmp_path)
            raise InputError(f"cannot create trace file: {exc}", path=self.path) from None
        self._file = f
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="g10trace") if threads else None
        self._finalizer = weakref.finalize(self, _abandon, f, self._pool, self.tmp_path)
        try:
            a = f.attrs
            a["format"] = FORMAT_NAME
            a["schema_version"] = np.int64(SCHEMA_VERSION)
            a["complete"] = False
            a["n_events"] = np.int64(0)
            a["columns"] = json.dumps(list(COLUMNS))
            a["kind_names"] = json.dumps(KIND_NAMES)
            a["location_names"] = json.dumps(LOCATION_NAMES)
            a["config"] = config_json
            a["meta"] = meta_json
            g = f.create_group(EVENTS_GROUP)
            filters = (
                dict(compression="gzip", compression_opts=DEFLATE_LEVEL, shuffle=True)
                if compression == "deflate"
                else {}
            )
            self._datasets = [
                g.create_dataset(
                    col,
                    shape=(0,),
                    maxshape=(None,),
                    dtype=COLUMN_DTYPES[col],
                    chunks=(chunk_rows,),
                    **filters,
                )
                for col in COLUMNS
            ]
            cg = f.create_group(CHECKSUM_GROUP)
            cg.attrs["algorithm"] = "crc32 of each stored (compressed) chunk, in chunk order"
            self._checksums = [
                cg.create_dataset(col, shape=(0,), maxshape=(None,), dtype="<u4", chunks=(1024,))
                for col in COLUMNS
            ]
            a["header_sha256"] = _attrs_digest(a, HEADER_ATTRS)
            # single-writer/multiple-reader mode: what is flushed stays readable if the
            # process dies (open_trace(..., allow_incomplete=True))
            f.swmr_mode = True
        except BaseException:
            self.abort()
            raise
        self.chunk_rows = chunk_rows
        self.threads = threads
        self.compression = compression
        self._ds_rows = 0  # length of the /events datasets
        self._cs_rows = 0  # length of the /checksums datasets
        self._one = h5py.h5s.create_simple((1,))  # memory space of one checksum
        self._max_pending = threads + 1 if threads else 0
        self._pending = collections.deque()  # (offset, rows after it, futures, buffers)
        self._spare = []  # buffer sets to reuse
        self._buffers = self._new_buffers()
        self._fill = 0  # rows in self._buffers
        self._queued = 0  # rows handed to chunks (pending or written)
        self._written = 0  # rows stored in the datasets
        self._summary_json: str | None = None
        self._kernel_times: np.ndarray | None = None
        self._state = "open"

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> "EventTraceWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if self._state == "open":
                self.close()
        else:
            self.abort()

    @property
    def n_events(self) -> int:
        """Events appended so far."""
        return self._queued + self._fill

    @contextlib.contextmanager
    def _writing(self):
        """Any error inside aborts the writer (nothing is published, the temporary file is
        removed); an OSError (a full disk, a failing device) becomes an InputError naming the
        trace."""
        try:
            yield
        except OSError as exc:
            self.abort()
            raise InputError(
                f"cannot write the event trace ({_one_line(exc)}): a full disk "
                f"or a failing device? nothing was published, the temporary "
                f"file is removed",
                path=self.path,
            ) from None
        except BaseException:
            self.abort()
            raise

    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"event trace writer for {self.path} is {self._state}")

    def _new_buffers(self) -> list:
        if self._spare:
            return self._spare.pop()
        return [np.empty(self.chunk_rows, dtype=COLUMN_DTYPES[c]) for c in COLUMNS]

    # -- writing ---------------------------------------------------------------------------
    def append(self, buf) -> None:
        """Append events from an integer ``[n, N_COLS]`` array (rows in engine column order),
        ``[n, N_COLS_V2]`` (the twelve columns before ``stride``: stride 0) or
        ``[n, N_COLS_V1]`` (the ten columns before ``ticks``: ticks 1, period 0, stride 0).

        A batch with a value that does not fit its column (kind not an EventKind, src/dst not
        a Location or -1, iteration beyond int16, kernel/tensor/count/ticks beyond int32,
        ticks < 1, period or stride < 0) or a range row that breaks the rules of
        docs/trace-format.md (ticks > 1 only on FETCH, ALLOC, EVICT, DEALLOC rows, with count a
        positive multiple of ticks and period > 0, and on FAULT rows of several runs, with
        period 0 and a stride; period 0 when ticks is 1; a stride above 0 only with ticks > 1
        and above count // ticks) raises ValueError and is not appended; the writer stays
        usable.
        """
        self._check_open()
        buf = np.asarray(buf)
        if buf.ndim != 2 or buf.shape[1] not in BUFFER_WIDTHS:
            raise ValueError(
                f"event buffer must have shape (n, {N_COLS}), (n, {N_COLS_V2}) or (n, {N_COLS_V1}), "
                f"got {buf.shape}"
            )
        if buf.dtype.kind not in "iu":
            raise TypeError(f"event buffer must hold integers, got dtype {buf.dtype}")
        n, width = buf.shape
        split = None  # one pass over the rows: range check and column split
        if buf.dtype == np.int64 and buf.flags.c_contiguous and n >= 256:
            from .jit import NO_JIT

            if not NO_JIT:
                from . import aot
                from .trace_kernels import split_checked

                split = aot.entry(split_checked)
        if split is None:
            step = max(self.chunk_rows, 1 << 16)
            for pos in range(0, n, step):
                self._check_ranges(buf[pos : pos + step], self.n_events + pos)
        with self._writing():
            # The batch goes into the current buffer set and, when it fills, into further
            # ones; nothing is handed to the encoder until the whole batch has passed the
            # range check, so a bad batch leaves the trace as it was.
            full, bufs, fill, pos, bad = [], self._buffers, self._fill, 0, False
            while pos < n:
                take = min(n - pos, self.chunk_rows - fill)
                piece = buf[pos : pos + take]
                if split is not None:
                    bad |= split(piece, fill, _CHECK_LO, _CHECK_HI, *bufs)
                else:
                    for c in range(width):
                        bufs[c][fill : fill + take] = piece[:, c]
                    for c in range(width, N_COLS):
                        bufs[c][fill : fill + take] = ABSENT_DEFAULTS[COLUMNS[c]]
                fill += take
                pos += take
                if fill == self.chunk_rows:
                    full.append(bufs)
                    bufs, fill = self._new_buffers(), 0
            if not bad:
                for b in full:
                    self._hand(b, self.chunk_rows)
                self._buffers, self._fill = bufs, fill
        if bad:
            self._spare.extend(b for b in full[1:] + [bufs] if b is not self._buffers)
            self._check_ranges(buf, self.n_events)  # names the first bad value
            raise AssertionError("the range check and its kernel disagree")  # unreachable

    @staticmethod
    def _check_ranges(piece: np.ndarray, first_row: int) -> None:
        """Raise ValueError naming the first value of ``piece`` outside its column's range, or
        the first range row (``ticks`` > 1) that breaks a rule of the format."""
        for c, col, (lo, hi) in _CHECKED:
            if c >= piece.shape[1]:
                continue
            v = piece[:, c]
            if v.min() < lo or v.max() > hi:
                bad = int(np.flatnonzero((v < lo) | (v > hi))[0])
                raise ValueError(
                    f"event {first_row + bad}: column '{col}' = {int(v[bad])} is outside [{lo}, {hi}]"
                )
        if piece.shape[1] < N_COLS_V2 or piece.shape[0] == 0:
            return
        ticks, period = piece[:, COL_TICKS], piece[:, COL_PERIOD]
        kind, count = piece[:, COL_KIND], piece[:, COL_COUNT]
        stride = piece[:, COL_STRIDE] if piece.shape[1] > COL_STRIDE else np.zeros_like(ticks)
        rng = ticks > 1
        runs = rng & (kind == EventKind.FAULT)  # a fault scan's runs: one time, strided
        rng_t = rng & ~runs
        rules = (
            ("period", (~rng) & (period != 0), "with ticks = 1: an ordinary row's period is 0"),
            ("stride", (~rng) & (stride != 0), "with ticks = 1: an ordinary row's stride is 0"),
            (
                "stride",
                rng & (stride != 0) & (stride <= count // np.maximum(ticks, 1)),
                "is not above the pages of a tick (count // ticks; 0 stands for that stride)",
            ),
            (
                "ticks",
                rng_t & ~np.isin(kind, sorted(RANGE_KINDS)),
                "on a {kind} row: only FETCH, ALLOC, EVICT and DEALLOC rows may stand for several "
                "ticks (and FAULT rows for several runs)",
            ),
            (
                "count",
                rng & ((count <= 0) | (count % np.maximum(ticks, 1) != 0)),
                "is not a positive multiple of ticks = {ticks}",
            ),
            ("period", rng_t & (period <= 0), "with ticks = {ticks}: a range row's period must be > 0"),
            ("period", runs & (period != 0), "on a FAULT row of {ticks} runs: its runs' period is 0"),
            ("stride", runs & (stride == 0), "on a FAULT row of {ticks} runs: give its runs' stride"),
        )
        value = {"period": period, "stride": stride, "ticks": ticks, "count": count}
        for col, m, why in rules:
            if m.any():
                i = int(np.flatnonzero(m)[0])
                k = int(kind[i])
                name = EventKind(k).name if 0 <= k < len(EventKind) else str(k)
                raise ValueError(
                    f"event {first_row + i}: column '{col}' = {int(value[col][i])} "
                    + why.format(kind=name, ticks=int(ticks[i]))
                )

    def _flush(self) -> None:
        """Hand the buffered rows to the encoder as one chunk per column."""
        if self._fill:
            self._hand(self._buffers, self._fill)
            self._buffers, self._fill = self._new_buffers(), 0

    def _hand(self, bufs: list, m: int) -> None:
        """Hand the first ``m`` rows of the buffer set ``bufs`` to the encoder (it is reused
        once they are stored)."""
        if m < self.chunk_rows:  # the last, partial chunk: HDF5 stores chunks whole
            for b in bufs:
                b[m:] = 0
        if self._pool is None:
            futures = [_Done(_store_job(b, self.compression)) for b in bufs]
        else:
            futures = [self._pool.submit(_store_job, b, self.compression) for b in bufs]
        self._pending.append((self._queued, self._queued + m, futures, bufs))
        self._queued += m
        while len(self._pending) > self._max_pending:
            self._store_oldest()

    def _store_oldest(self) -> None:
        offset, end, futures, bufs = self._pending.popleft()
        crcs = np.empty(len(COLUMNS), dtype="<u4")
        grow = self._ds_rows < end  # every column has the same length (h5py's .shape is slow)
        for i, (ds, fut) in enumerate(zip(self._datasets, futures)):
            data, crcs[i] = fut.result()
            if grow:
                ds.id.set_extent((end,))  # ds.resize without h5py's checks
            ds.id.write_direct_chunk((offset,), data, 0)
        self._ds_rows = max(self._ds_rows, end)
        k = offset // self.chunk_rows
        grow = self._cs_rows < k + 1
        for i, cs in enumerate(self._checksums):  # after the data: a checksum vouches
            if grow:
                cs.id.set_extent((k + 1,))
            space = cs.id.get_space()  # cs[k] = crc, without h5py's slicing cost
            space.select_hyperslab((k,), (1,))
            cs.id.write(self._one, space, crcs[i : i + 1])
        self._cs_rows = max(self._cs_rows, k + 1)
        self._file.flush()
        self._written = end
        self._spare.append(bufs)

    def rewind(self, n: int) -> None:
        """Drop every event after the first ``n`` (the engine reruns a simulation from the
        start when one step overflowed its queues, and replays its events)."""
        self._check_open()
        n = int(n)
        if not 0 <= n <= self.n_events:
            raise ValueError(f"cannot rewind to {n} events: {self.n_events} appended")
        with self._writing():
            if n < self._queued:
                while self._pending:
                    self._store_oldest()
                start = n - n % self.chunk_rows
                keep = [ds[start:n] for ds in self._datasets]
                for ds in self._datasets:
                    ds.resize((start,))
                for cs in self._checksums:
                    cs.resize((start // self.chunk_rows,))
                self._ds_rows, self._cs_rows = start, start // self.chunk_rows
                self._queued = self._written = start
                for b, k in zip(self._buffers, keep):
                    b[: n - start] = k
                self._fill = n - start
            else:
                self._fill = n - self._queued

    def set_summary(self, summary: dict) -> None:
        """Store ``summary`` (per-iteration statistics) as the JSON attribute ``summary`` at
        close, without its wall-clock measurements (``TIMING_KEYS``)."""
        self._check_open()
        self._summary_json = _to_json(without_timings(summary), "summary")

    def set_kernel_times(self, exec_cycles) -> None:
        """Store every kernel's nominal execution time (cycles, indexed by kernel id) as
        ``/kernels/exec_cycles`` at close: readers derive each kernel's stall from it."""
        self._check_open()
        a = np.asarray(exec_cycles)
        if a.ndim != 1 or a.dtype.kind not in "iuf":
            raise ValueError(f"kernel times must be a 1-D numeric array, got {a.shape} {a.dtype}")
        self._kernel_times = np.rint(a).astype("<i8")

    def close(self, summary: dict | None = None) -> None:
        """Write what is buffered, mark the file complete, rename it to its final name."""
        if self._state == "closed":
            return
        self._check_open()
        if summary is not None:
            self.set_summary(summary)
        with self._writing():
            self._flush()
            while self._pending:
                self._store_oldest()
            self._file.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            # attributes cannot change in SWMR mode: reopened, finished, renamed
            import h5py

            with h5py.File(self.tmp_path, "r+", libver=("v110", "v110")) as f:
                a = f.attrs
                if self._summary_json is not None:
                    a["summary"] = self._summary_json
                if self._kernel_times is not None:
                    kd = f.create_group(KERNELS_GROUP).create_dataset("exec_cycles", data=self._kernel_times)
                    kd.attrs["crc32"] = np.uint32(zlib.crc32(self._kernel_times.tobytes()))
                a["n_events"] = np.int64(self._written)
                a["complete"] = True
                a["attrs_sha256"] = _attrs_digest(a, CLOSE_ATTRS)
            os.replace(self.tmp_path, self.path)
        self._finalizer.detach()
        self._state = "closed"
        self._buffers, self._spare = [], []

    def abort(self) -> None:
        """Discard everything: close and remove the temporary file; the target is left untouched."""
        if self._state == "closed":
            return
        self._state = "aborted"
        self._buffers, self._spare = [], []
        self._pending = collections.deque()
        self._finalizer()  # stops the pool, closes the file, removes the temporary file; once


class EventTrace:
    """An open event trace (see ``open_trace``); a context manager that closes the file."""

    def __init__(
        self,
        path,
        h5file,
        allow_incomplete: bool = False,
        threads: int | None = None,
        check_attrs: bool = True,
    ):
        import h5py

        self.path = os.fspath(path)
        self._file = h5file
        self.attrs_damaged = ""
        a = h5file.attrs
        fmt = _attr_str(a.get("format"))
        if fmt != FORMAT_NAME:
            raise InputError(
                f"not a g10fast event trace (format attribute is {fmt!r}, expected {FORMAT_NAME!r})",
                path=self.path,
            )
        version = a.get("schema_version")
        try:
            version = int(version)
        except (TypeError, ValueError):
            raise InputError(
                f"bad or missing schema_version attribute ({version!r})", path=self.path
            ) from None
        if version not in SCHEMA_VERSIONS:
            raise InputError(
                f"unsupported event trace schema_version {version} "
                f"(this g10fast reads versions {', '.join(map(str, SCHEMA_VERSIONS))})",
                path=self.path,
            )
        self.schema_version = version
        #: the columns the file stores (a version 1 file: no ``ticks`` / ``period`` /
        #: ``stride``, a version 2 file: no ``stride``, which read as ``ABSENT_DEFAULTS``)
        self.stored_columns = {1: COLUMNS_V1, 2: COLUMNS_V2}.get(version, COLUMNS)
        self.complete = bool(a.get("complete", False))
        for name, names in (("attrs_sha256", CLOSE_ATTRS), ("header_sha256", HEADER_ATTRS)):
            if name in a:
                if _attr_str(a[name]) != _attrs_digest(a, names):
                    self.attrs_damaged = (
                        f"the root attributes are damaged ({name} does not "
                        f"match: config, meta, summary or n_events changed)"
                    )
                    if check_attrs:
                        raise InputError(f"event trace is damaged: {self.attrs_damaged}", path=self.path)
                break
        if not self.complete and not allow_incomplete:
            raise InputError(
                "incomplete event trace: the writer did not finish "
                "(open_trace(..., allow_incomplete=True) reads what it stored)",
                path=self.path,
            )
        group = h5file.get(EVENTS_GROUP)
        if not isinstance(group, h5py.Group):
            raise InputError(f"missing group /{EVENTS_GROUP}", path=self.path)
        missing = [c for c in self.stored_columns if not isinstance(group.get(c), h5py.Dataset)]
        if missing:
            raise InputError(f"missing column(s) {', '.join(missing)} in /{EVENTS_GROUP}", path=self.path)
        self._ds = {c: group[c] for c in self.stored_columns}
        for c, ds in self._ds.items():
            if ds.ndim != 1 or ds.dtype.kind not in "iu":
                raise InputError(
                    f"column '{c}' must be a 1-D integer dataset, got shape {ds.shape} dtype {ds.dtype}",
                    path=self.path,
                )
        lengths = sorted({ds.shape[0] for ds in self._ds.values()})
        chunks = self._ds["time"].chunks
        self.chunk_rows = int(chunks[0]) if chunks else DEFAULT_CHUNK_ROWS
        self._direct = {c: _direct_codec(ds) for c, ds in self._ds.items()}
        codecs = set(self._direct.values())
        #: "deflate", "none", or "other" (other or mixed filters: read through h5py)
        self.compression = codecs.pop() if len(codecs) == 1 and None not in codecs else "other"
        self._cks = None
        cg = h5file.get(CHECKSUM_GROUP)
        if isinstance(cg, h5py.Group) and all(
            isinstance(cg.get(c), h5py.Dataset) for c in self.stored_columns
        ):
            self._cks = {c: np.asarray(cg[c][()], dtype=np.uint32) for c in self.stored_columns}
        if self.complete:
            n = int(a.get("n_events", -1))
            if lengths != [n]:
                raise InputError(
                    f"event trace is damaged: column lengths {lengths} disagree with n_events = {n}",
                    path=self.path,
                )
            if self._cks is not None:
                want = -(-n // self.chunk_rows)
                short = sorted({len(v) for v in self._cks.values()} - {want})
                if short:
                    raise InputError(
                        f"event trace is damaged: {short[0]} chunk checksums for {want} chunks",
                        path=self.path,
                    )
        else:
            n = lengths[0]
            if self._cks is not None:  # the last complete chunk: all columns, checksum right
                k = min(-(-n // self.chunk_rows), min(len(v) for v in self._cks.values()))
                while k > 0 and not self._chunk_ok(k - 1):
                    k -= 1
                n = min(n, k * self.chunk_rows)
        self.n_events = n
        self.config = _attr_json(a, "config", self.path, {})
        self.meta = _attr_json(a, "meta", self.path, {})
        self.summary = _attr_json(a, "summary", self.path, None)
        self.kind_names = _attr_json(a, "kind_names", self.path, KIND_NAMES)
        self.location_names = _attr_json(a, "location_names", self.path, LOCATION_NAMES)
        self._threads = default_threads() if threads is None else int(threads)
        self._pool = None

    def kernel_exec_cycles(self) -> np.ndarray | None:
        """Every kernel's nominal execution time in cycles (``/kernels/exec_cycles``), or None
        when the trace has none (older writers); InputError when its checksum fails."""
        import h5py

        g = self._file.get(KERNELS_GROUP)
        ds = g.get("exec_cycles") if isinstance(g, h5py.Group) else None
        if not isinstance(ds, h5py.Dataset):
            return None
        try:
            a = np.asarray(ds[()], dtype="<i8")
        except Exception as exc:  # noqa: BLE001 - HDF5 raises many types on damage
            raise InputError(
                f"event trace is damaged: /kernels/exec_cycles unreadable ({exc})", path=self.path
            ) from None
        crc = ds.attrs.get("crc32")
        if crc is not None and zlib.crc32(a.tobytes()) != int(crc):
            raise InputError("event trace is damaged: /kernels/exec_cycles checksum mismatch", path=self.path)
        return a

    # -- checksums -------------------------------------------------------------------------
    def _chunk_ok(self, k: int) -> bool:
        """Whether chunk ``k`` of every column is stored with its checksum."""
        for c in self.stored_columns:
            try:
                _, data = self._ds[c].id.read_direct_chunk((k * self.chunk_rows,))
            except Exception:  # noqa: BLE001 - not stored (a killed writer), or damaged
                return False
            if k >= len(self._cks[c]) or zlib.crc32(data) != int(self._cks[c][k]):
                return False
        return True

    def _damaged(self, col: str, k: int, why: str) -> InputError:
        R = self.chunk_rows
        return InputError(
            f"event trace is damaged: column '{col}' chunk {k} (events "
            f"{k * R}-{min(self.n_events, (k + 1) * R) - 1}): {why}; "
            f"`g10fast trace verify {self.path}` lists every damaged chunk",
            path=self.path,
        )

    def verify(self, raise_on_damage: bool = False) -> list[str]:
        """Check every chunk of every column (its checksum; a trace without checksums: that it
        decodes) and the attributes: -> one line per damaged chunk or attribute (empty: whole).
        ``raise_on_damage``: an InputError naming the first damage instead."""
        bad = []
        if self.attrs_damaged:
            bad.append(self.attrs_damaged)
        R = self.chunk_rows
        nchunks = -(-self.n_events // R)
        for c in self.stored_columns:
            ds = self._ds[c]
            for k in range(nchunks):
                try:
                    if self._cks is not None and self._direct[c]:
                        mask, data = ds.id.read_direct_chunk((k * R,))
                        if zlib.crc32(data) != int(self._cks[c][k]):
                            raise ValueError("checksum mismatch")
                    elif self._direct[c]:
                        mask, data = ds.id.read_direct_chunk((k * R,))
                        _decode(data, mask, ds.dtype, R, self._direct[c])
                    else:
                        ds[k * R : min(self.n_events, (k + 1) * R)]
                except Exception as exc:  # noqa: BLE001 - HDF5/zlib raise many types on damage
                    why = (
                        str(exc)
                        if isinstance(exc, ValueError)
                        else f"unreadable ({type(exc).__name__}: {exc})"
                    )
                    bad.append(
                        f"column '{c}' chunk {k} (events {k * R}-"
                        f"{min(self.n_events, (k + 1) * R) - 1}): {why}"
                    )
        if bad and raise_on_damage:
            raise InputError(
                f"event trace is damaged: {bad[0]}"
                f"{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''}; "
                f"`g10fast trace verify {self.path}` lists them",
                path=self.path,
            )
        return bad

    @property
    def has_checksums(self) -> bool:
        return self._cks is not None

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._file.close()

    def __enter__(self) -> "EventTrace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return self.n_events

    def __repr__(self) -> str:
        return f"EventTrace({self.path!r}, n_events={self.n_events})"

    @property
    def columns(self) -> tuple:
        return COLUMNS

    # -- reading ---------------------------------------------------------------------------
    def _columns(self, columns) -> list:
        if columns is None:
            return list(COLUMNS)
        cols = [columns] if isinstance(columns, str) else list(columns)
        unknown = [str(c) for c in cols if c not in COLUMN_DTYPES]
        if unknown:
            raise InputError(
                f"unknown column(s) {', '.join(unknown)}; columns are {', '.join(COLUMNS)}", param="columns"
            )
        return cols

    def _range(self, start, stop) -> tuple[int, int]:
        start, stop, _ = slice(start, stop).indices(self.n_events)
        return start, max(start, stop)

    def _read_rows(self, cols: list, lo: int, hi: int) -> dict:
        """Rows [lo, hi) of ``cols``: whole stored chunks, each checked against its checksum,
        decoded in parallel where possible; InputError naming a damaged chunk. A column the
        file does not store (``ticks``, ``period``, ``stride`` of an older file) reads as its
        ``ABSENT_DEFAULTS`` value."""
        absent = [c for c in cols if c not in self._ds]
        if absent:
            out = self._read_rows([c for c in cols if c in self._ds], lo, hi)
            for c in absent:
                out[c] = np.full(max(0, hi - lo), ABSENT_DEFAULTS[c], dtype=COLUMN_DTYPES[c])
            return {c: out[c] for c in cols}
        R = self.chunk_rows
        if hi <= lo:
            return {c: np.empty(0, dtype=self._ds[c].dtype) for c in cols}
        c0 = lo // R
        c1 = -(-hi // R)  # chunks c0 .. c1-1 hold the rows
        verified = self._cks is not None
        use_pool = self._threads > 0 and c1 - c0 >= 2
        if not verified and not use_pool:
            return {c: self._plain_rows(c, lo, hi) for c in cols}
        if use_pool and self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="g10trace")
        jobs = {}
        for c in cols:
            ds = self._ds[c]
            if not self._direct[c]:
                continue
            futures = []
            for k in range(c0, c1):
                try:
                    mask, data = ds.id.read_direct_chunk((k * R,))
                except (RuntimeError, OSError, KeyError, ValueError) as exc:
                    if verified:
                        raise self._damaged(c, k, f"chunk unreadable ({exc})") from None
                    futures = None  # e.g. a chunk never written: let HDF5 fill it in below
                    break
                if verified and zlib.crc32(data) != int(self._cks[c][k]):
                    raise self._damaged(c, k, "checksum mismatch")
                codec = self._direct[c]
                if use_pool:
                    futures.append(self._pool.submit(_decode, data, mask, ds.dtype, R, codec))
                else:
                    futures.append(_Lazy(_decode, data, mask, ds.dtype, R, codec))
            if futures is not None:
                jobs[c] = futures
        out = {}
        for c in cols:
            if c not in jobs:
                out[c] = self._plain_rows(c, lo, hi)
                continue
            arr = np.empty(hi - lo, dtype=self._ds[c].dtype)
            for k, fut in zip(range(c0, c1), jobs[c]):
                a, b = max(lo, k * R), min(hi, (k + 1) * R)
                try:
                    arr[a - lo : b - lo] = fut.result()[a - k * R : b - k * R]
                except (zlib.error, isal_zlib.error, ValueError) as exc:
                    raise self._damaged(c, k, f"does not decode ({exc})") from None
            out[c] = arr
        return out

    def _plain_rows(self, c: str, lo: int, hi: int) -> np.ndarray:
        try:
            return self._ds[c][lo:hi]
        except Exception as exc:  # noqa: BLE001 - HDF5 raises OSError, RuntimeError, ...
            raise InputError(
                f"event trace is damaged: column '{c}' events {lo}-{hi - 1} "
                f"unreadable ({type(exc).__name__}: {exc})",
                path=self.path,
            ) from None

    def read(self, columns=None, start: int = 0, stop: int | None = None) -> dict:
        """Rows ``[start, stop)`` of the given columns (all by default) as a dict of arrays."""
        cols = self._columns(columns)
        start, stop = self._range(start, stop)
        out = {}
        step = READ_CHUNKS * self.chunk_rows
        for c in cols:  # column by column keeps the transient decode memory small
            arr = np.empty(stop - start, dtype=self._ds[c].dtype if c in self._ds else COLUMN_DTYPES[c])
            for lo in range(start, stop, step):
                hi = min(lo + step, stop)
                arr[lo - start : hi - start] = self._read_rows([c], lo, hi)[c]
            out[c] = arr
        return out

    def iter_chunks(self, rows: int | None = None, columns=None, start: int = 0, stop: int | None = None):
        """Yield dicts of column arrays of at most ``rows`` rows each, in order (bounded memory).

        The default ``rows`` is ``READ_CHUNKS`` storage chunks (262,144 events by default,
        ~14 MB for all columns). Rows are as stored: a range row (``ticks`` > 1) is one row
        (``g10fast.trace_ranges.iter_expanded`` yields them expanded).
        """
        cols = self._columns(columns)
        rows = READ_CHUNKS * self.chunk_rows if rows is None else int(rows)
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        start, stop = self._range(start, stop)
        for lo in range(start, stop, rows):
            yield self._read_rows(cols, lo, min(lo + rows, stop))

    def to_buffer(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows ``[start, stop)`` in the engine's int64 ``[n, N_COLS]`` layout (a version 1
        file too: its ``ticks`` 1, ``period`` 0)."""
        start, stop = self._range(start, stop)
        out = np.empty((stop - start, N_COLS), dtype=np.int64)
        step = READ_CHUNKS * self.chunk_rows
        for lo in range(start, stop, step):
            ch = self._read_rows(list(COLUMNS), lo, min(lo + step, stop))
            for c, col in enumerate(COLUMNS):
                out[lo - start : lo - start + len(ch[col]), c] = ch[col]
        return out

    def _per_kind(self, weights: str | None) -> dict:
        total = np.zeros(len(EventKind), dtype=np.int64)
        cols = ["kind"] if weights is None else ["kind", weights]
        for ch in self.iter_chunks(columns=cols):
            kind = ch["kind"]
            if kind.size == 0:
                continue
            if kind.min() < 0:
                raise InputError(f"negative event kind {int(kind.min())}", path=self.path)
            if weights is None:
                part = np.bincount(kind, minlength=total.size)
            else:
                # float64 sums are exact here: one chunk holds far fewer than 2**53 pages.
                # -1 is "not used" (TRANSFER rows have no page count): it adds nothing
                w = np.maximum(np.asarray(ch[weights], dtype=np.float64), 0.0)
                part = np.rint(np.bincount(kind, weights=w, minlength=total.size))
            if part.size > total.size:
                total = np.concatenate([total, np.zeros(part.size - total.size, np.int64)])
            total += part.astype(np.int64)
        return {(EventKind(k) if k < len(EventKind) else k): int(v) for k, v in enumerate(total)}

    def count_by_kind(self) -> dict:
        """Number of events (rows) per kind, ``{EventKind: int}`` with every known kind present."""
        return self._per_kind(None)

    def ticks_by_kind(self) -> dict:
        """Ordinary rows per kind that the rows stand for (the sum of ``ticks``: a range row of
        m ticks counts m), ``{EventKind: int}``; equal to ``count_by_kind()`` in a trace
        without range rows (every version 1 trace)."""
        if "ticks" not in self._ds:
            return self._per_kind(None)
        return self._per_kind("ticks")

    def pages_by_kind(self) -> dict:
        """Sum of ``count`` (pages) per kind, ``{EventKind: int}``; a count of -1 (the column
        is not used, e.g. by every TRANSFER row) adds nothing, and the kinds of
        ``PAGELESS_KINDS`` are always 0."""
        return self._per_kind("count")


def _direct_codec(ds) -> str | None:
    """How ``ds``'s stored chunks decode without HDF5's filters: "deflate" (chunked 1-D
    little-endian with exactly shuffle then deflate), "none" (chunked, no filters), or None
    (anything else: read through h5py)."""
    if ds.chunks is None or ds.dtype.byteorder == ">":
        return None
    plist = ds.id.get_create_plist()
    codes = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if codes == [_H5Z_FILTER_SHUFFLE, _H5Z_FILTER_DEFLATE]:
        return "deflate"
    return "none" if codes == [] else None


def _missing_message(path: str) -> str:
    tmps = find_temporaries(path)
    if not tmps:
        return "no such event trace file"
    f, pid, alive = tmps[0]
    if alive:
        return (
            f"no such event trace file yet: process {pid} is writing it ({f}; "
            f"`g10fast trace inspect --allow-incomplete {f}` reads what it stored)"
        )
    more = f" and {len(tmps) - 1} older" if len(tmps) > 1 else ""
    return (
        f"no such event trace file: the run writing it (process {pid}) did not finish; "
        f"its incomplete trace is {f}{more} (`g10fast trace inspect --allow-incomplete "
        f"{f}` reads it up to its last complete chunk; the next run writing {path} "
        f"removes it)"
    )


def open_trace(
    path, allow_incomplete: bool = False, threads: int | None = None, check_attrs: bool = True
) -> EventTrace:
    """Open an event trace for reading; raises InputError when it is not a usable trace.

    ``threads``: decoder threads (default: up to 4; 0 decodes in the calling thread).
    ``allow_incomplete``: read the file of a writer that did not finish (killed), up to its
    last complete chunk. ``check_attrs=False``: open a trace whose attribute checksum fails
    (``verify_trace`` does, to report it).
    """
    import h5py

    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(_missing_message(path), path=path)
    if os.path.isdir(path):
        raise InputError("is a directory, not an event trace file", path=path)
    try:
        is_h5 = h5py.is_hdf5(path)
    except OSError as exc:
        raise InputError(f"cannot read event trace: {exc}", path=path) from None
    if not is_h5:
        raise InputError("not an HDF5 file (expected a g10fast event trace)", path=path)
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        if "open for" not in str(exc) and "SWMR" not in str(exc):
            raise InputError(f"cannot open event trace (damaged HDF5 file: {exc})", path=path) from None
        try:  # written in SWMR mode by a writer that has not closed it (killed, or running)
            f = h5py.File(path, "r", swmr=True)
        except OSError:
            raise InputError(
                f"cannot open event trace (open for writing by another program, "
                f"or a damaged HDF5 file: {exc})",
                path=path,
            ) from None
    try:
        return EventTrace(
            path, f, allow_incomplete=allow_incomplete, threads=threads, check_attrs=check_attrs
        )
    except InputError:
        f.close()
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged HDF5 structure raises many types
        f.close()
        raise InputError(
            f"cannot read event trace (damaged HDF5 structure: {type(exc).__name__}: {exc})", path=path
        ) from None
    except BaseException:
        f.close()
        raise


def verify_trace(path) -> dict:
    """Check an event trace: -> {"damaged": [lines], "lines": [lines to print], "chunks": n,
    "checksums": bool, "complete": bool}. A file that does not open is an InputError."""
    tr = open_trace(path, allow_incomplete=True, check_attrs=False)
    try:
        bad = tr.verify()
        nchunks = -(-tr.n_events // tr.chunk_rows) * len(tr.stored_columns)
        lines = [f"{path}: damaged {b}" for b in bad]
        return {
            "damaged": bad,
            "lines": lines,
            "chunks": nchunks,
            "checksums": tr.has_checksums,
            "complete": tr.complete,
            "n_events": tr.n_events,
        }
    finally:
        tr.close()
