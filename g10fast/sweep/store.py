"""The sweep results store: one SQLite database (WAL mode), one row per point keyed by its
config hash, each with a SHA-256 checksum (docs/store-format.md, store_version 2).

Tables:

    meta(key, value)        format = "g10fast-results-store", store_version = 2, created
    points(hash, status, attrs, config, result, arrays, checksum)
                            attrs/config/result: JSON text; arrays: the per-kernel arrays in
                            one zlib-compressed blob (`pack_arrays`); checksum: SHA-256 of
                            the other columns (`point_checksum`)
    workloads(key, attrs, arrays, checksum)   per-(model, batch) workload analysis
    claims(hash, owner, host, pid, claimed_at)   points a running sweep has taken

Every point is written in one `BEGIN IMMEDIATE` transaction (synchronous = FULL): a kill or a
full disk at any instant leaves the store at its last committed point. Several processes
may write (two sweeps on one store); a point is claimed before it runs so that no two sweeps
run it, and a claim whose process is dead (same host) or that is older than `CLAIM_LEASE`
seconds (another host) is taken over. Readers (figures, exports) read while a sweep writes.
A point whose checksum does not match is "damaged": reading it raises InputError (or it is
left out with damaged="skip"), `verify()` names it, and a sweep runs it again.

Version-1 stores (HDF5, g10fast/sweep/store_hdf5.py) are read through the same class:
`ResultStore(path)` returns an `HDF5Store` for them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import sqlite3
import struct
import time
import zlib

import numpy as np

from ..errors import InputError
from ..trace import pid_alive as _pid_alive
from .point import STORE_FORMAT, StoredPoint

__all__ = [
    "STORE_FORMAT",
    "STORE_VERSION",
    "StoredPoint",
    "ResultStore",
    "to_jsonable",
    "open_store",
    "point_checksum",
    "pack_arrays",
    "unpack_arrays",
    "TMP_PREFIX",
]

STORE_VERSION = 2
SQLITE_MAGIC = b"SQLite format 3\x00"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
#: a claim older than this (seconds) is taken over even when its owner cannot be checked
#: (another host); an owner refreshes its claims at every point it writes
CLAIM_LEASE = 6 * 3600.0
#: how long a writer waits for another writer's transaction (milliseconds)
BUSY_TIMEOUT_MS = 60_000
#: temporary files of a store being created: `.<name>.<pid>.<random>.tmp` beside it
TMP_PREFIX = "."
_POINT_ATTRS = (
    "label",
    "model",
    "batch_size",
    "policy",
    "host_mem_gb",
    "ssd_gbps",
    "pcie_gbps",
    "kernel_time_std_dev",
    "ran_seed",
    "kernel_speedup",
    "group",
)
_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE points(hash TEXT PRIMARY KEY, status TEXT NOT NULL, attrs TEXT NOT NULL,
                    config TEXT NOT NULL, result TEXT, arrays BLOB, checksum TEXT NOT NULL);
CREATE TABLE workloads(key TEXT PRIMARY KEY, attrs TEXT NOT NULL, arrays BLOB,
                       checksum TEXT NOT NULL);
CREATE TABLE claims(hash TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL,
                    pid INTEGER NOT NULL, claimed_at REAL NOT NULL);
"""


def to_jsonable(x):
    """Plain-JSON form of a result value (numpy scalars/arrays to Python numbers/lists)."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, float) and not np.isfinite(x):
        return None if np.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


# -- encoding ---------------------------------------------------------------------------------


def pack_arrays(arrays: dict | None) -> bytes | None:
    """Numeric arrays -> one blob: zlib(JSON header length (u32) + JSON header + raw bytes).
    Exact round trip of dtype, shape and values (`unpack_arrays`)."""
    if not arrays:
        return None
    header, raws, off = [], [], 0
    for name, arr in arrays.items():
        a = np.asarray(arr)
        if a.dtype.hasobject:
            raise TypeError(f"array {name!r} has dtype object and cannot be stored")
        raw = a.tobytes(order="C")
        header.append(
            {
                "name": str(name),
                "dtype": a.dtype.str,
                "shape": list(a.shape),
                "offset": off,
                "nbytes": len(raw),
            }
        )
        raws.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    return zlib.compress(struct.pack("<I", len(h)) + h + b"".join(raws), 4)


def unpack_arrays(blob) -> dict:
    if not blob:
        return {}
    data = zlib.decompress(blob)
    (n,) = struct.unpack_from("<I", data)
    header = json.loads(data[4 : 4 + n])
    base = 4 + n
    out = {}
    for e in header:
        a = np.frombuffer(
            data,
            dtype=np.dtype(e["dtype"]),
            count=int(np.prod(e["shape"], dtype=np.int64)),
            offset=base + e["offset"],
        )
        out[e["name"]] = a.reshape(e["shape"]).copy()
    return out


def _array_names(blob) -> tuple:
    """The names in an array blob, decompressing only its header."""
    d = zlib.decompressobj()
    head = d.decompress(blob, 4)
    (n,) = struct.unpack_from("<I", head)
    header = d.decompress(d.unconsumed_tail, n)
    if len(header) != n:
        raise ValueError("array blob header cut short")
    return tuple(e["name"] for e in json.loads(header))


def point_checksum(*fields) -> str:
    """SHA-256 over the fields (str, bytes or None), each prefixed by its length (None: -1)."""
    h = hashlib.sha256()
    for v in fields:
        if v is None:
            h.update(struct.pack("<q", -1))
            continue
        b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        h.update(struct.pack("<q", len(b)))
        h.update(b)
    return h.hexdigest()


def _dumps(x) -> str:
    return json.dumps(to_jsonable(x))


def _text(b: bytes) -> str:
    """SQLite TEXT as str. A column whose bytes are not UTF-8 (damage) reads with U+FFFD in
    their place, so that its row's checksum fails and the row is one damaged point, instead of
    an error that stops the whole query."""
    return b.decode("utf-8", "replace")


def file_kind(path: str) -> str:
    """'sqlite', 'hdf5', 'empty' or 'other', from the first bytes of the file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise InputError(f"cannot read the results store: {exc.strerror or exc}", path=path) from None
    if not head:
        return "empty"
    if head == SQLITE_MAGIC:
        return "sqlite"
    if head[:8] == HDF5_MAGIC:
        return "hdf5"
    return "other"


def clean_temporaries(path: str) -> list[str]:
    """Remove the temporary files `.<name>.<pid>.<random>.tmp` of a store being created whose
    process is gone; returns the removed paths."""
    d, name = os.path.split(os.path.abspath(path))
    out = []
    try:
        entries = os.listdir(d)
    except OSError:
        return out
    for e in entries:
        if not (e.startswith(f".{name}.") and (e.endswith(".tmp") or ".tmp-" in e)):
            continue
        parts = e[len(name) + 2 :].split(".")
        try:
            pid = int(parts[0])
        except (ValueError, IndexError):
            continue
        if pid != os.getpid() and _pid_alive(pid):
            continue
        try:
            os.unlink(os.path.join(d, e))
            out.append(os.path.join(d, e))
        except OSError:
            pass
    return out


def open_store(path, *, create: bool = True):
    """`ResultStore(path, create=create)`: an SQLite store, or a version-1 HDF5 store."""
    return ResultStore(path, create=create)


class ResultStore:
    """Read and write a results store. Opening validates it (InputError if unreadable)."""

    version = STORE_VERSION
    read_only = False

    def __new__(cls, path=None, *, create: bool = True):
        if cls is ResultStore and path is not None:
            p = os.fspath(path)
            if os.path.isfile(p) and file_kind(p) == "hdf5":
                from .store_hdf5 import HDF5Store

                return HDF5Store(p)
        return super().__new__(cls)

    def __init__(self, path, *, create: bool = True):
        self.path = os.fspath(path)
        self._con = None
        self._pid = None
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.host = socket.gethostname()
        exists = os.path.exists(self.path)
        if not exists and not create:
            raise InputError("results store not found", path=self.path)
        if exists and os.path.isdir(self.path):
            raise InputError("is a directory, not a results store", path=self.path)
        if not exists:
            self._create()
        kind = file_kind(self.path)
        if kind != "sqlite":
            what = {"empty": "an empty file", "other": "neither an SQLite nor an HDF5 file"}.get(kind, kind)
            raise InputError(
                f"cannot open the results store: not a g10fast results store "
                f"({what}); move it away or pass another --store",
                path=self.path,
            )
        if create:
            clean_temporaries(self.path)
        self._check()

    # -- connection ------------------------------------------------------------------------------
    def _create(self) -> None:
        d, name = os.path.split(os.path.abspath(self.path))
        if not os.path.isdir(d):
            raise InputError("folder does not exist", path=d)
        tmp = os.path.join(d, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                con.executescript(_SCHEMA)
                con.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [
                        ("format", STORE_FORMAT),
                        ("store_version", str(STORE_VERSION)),
                        ("created", time.strftime("%Y-%m-%dT%H:%M:%S")),
                    ],
                )
                con.execute("PRAGMA journal_mode=WAL")
            finally:
                con.close()
            try:
                os.link(tmp, self.path)  # never over a store another process created
            except FileExistsError:
                pass
        except sqlite3.Error as exc:
            raise self._error(exc, "create") from None
        except OSError as exc:
            raise InputError(
                f"cannot create the results store: {exc.strerror or exc}", path=self.path
            ) from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(tmp + suffix)
                except OSError:
                    pass

    def _connect(self) -> sqlite3.Connection:
        if self._con is not None and self._pid == os.getpid():
            return self._con
        try:
            con = sqlite3.connect(
                self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000.0, check_same_thread=False
            )
            con.text_factory = _text
            con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            con.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise self._error(exc, "open") from None
        self._con, self._pid = con, os.getpid()
        return con

    def close(self) -> None:
        if self._con is not None and self._pid == os.getpid():
            try:
                self._con.close()
            except sqlite3.Error:
                pass
        self._con = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_con"] = None
        return d

    def _error(self, exc: Exception, doing: str) -> InputError:
        """The one message for an SQLite error (sqlite3.Error), told apart by SQLite's result
        code (`sqlite_errorcode`), never by the message's words: the message may quote a
        damaged column's text ("Could not decode to UTF-8 column ... with text '...'")."""
        msg = " ".join(str(exc).split())[:300]
        code = getattr(exc, "sqlite_errorcode", None)
        primary = None if code is None else code & 0xFF  # extended codes keep it in 8 bits
        if primary == sqlite3.SQLITE_FULL:
            return InputError(
                f"cannot write the results store: the disk is full ({msg}); every "
                f"point stored before is safe: free some space and run the "
                f"sweep again",
                path=self.path,
            )
        if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return InputError(
                f"results store is locked by another process for over "
                f"{BUSY_TIMEOUT_MS // 1000} s ({msg}); try again when it is done",
                path=self.path,
            )
        if primary == sqlite3.SQLITE_READONLY:
            return InputError(f"cannot write the results store: {msg}", path=self.path)
        if primary == sqlite3.SQLITE_CANTOPEN:
            return InputError(f"cannot open the results store: {msg}", path=self.path)
        if primary == sqlite3.SQLITE_IOERR:
            return InputError(
                f"cannot {doing} the results store: I/O error ({msg}): a full "
                f"disk or a failing device; every point stored before is safe",
                path=self.path,
            )
        return InputError(
            f"results store is damaged ({msg}); `g10fast store verify "
            f"{self.path}` lists the damaged points, `g10fast store convert "
            f"{self.path} NEW` copies the points that still read",
            path=self.path,
        )

    def _query(self, sql: str, args=(), doing: str = "read"):
        try:
            return self._connect().execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc, doing) from None

    def _check(self) -> None:
        try:
            rows = dict(self._connect().execute("SELECT key, value FROM meta").fetchall())
            tables = {
                r[0] for r in self._connect().execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as exc:
            if "no such table" in str(exc):
                raise InputError(
                    "not a g10fast results store (an SQLite database without its "
                    "meta table); move it away or pass another --store",
                    path=self.path,
                ) from None
            raise self._error(exc, "open") from None
        fmt = rows.get("format")
        if fmt != STORE_FORMAT:
            raise InputError(
                f"not a g10fast results store (format {fmt!r}, expected {STORE_FORMAT!r})", path=self.path
            )
        ver = rows.get("store_version")
        if ver != str(STORE_VERSION):
            raise InputError(
                f"results store version {ver} is not supported (this g10fast reads versions 1 and 2)",
                path=self.path,
            )
        missing = {"points", "workloads", "claims"} - tables
        if missing:
            raise InputError(f"results store lacks its table(s) {', '.join(sorted(missing))}", path=self.path)

    # -- reading -----------------------------------------------------------------------------------
    @staticmethod
    def _row_ok(row) -> bool:
        h, status, attrs, config, result, arrays, checksum = row
        return point_checksum(h, status, attrs, config, result, arrays) == checksum

    def point_hashes(self) -> list[str]:
        return [r[0] for r in self._query("SELECT hash FROM points ORDER BY rowid")]

    def statuses(self) -> dict[str, str]:
        """config hash -> status of every stored point; "damaged" where the checksum fails."""
        out = {}
        for row in self._query(
            "SELECT hash, status, attrs, config, result, arrays, checksum FROM points ORDER BY rowid"
        ):
            out[row[0]] = row[1] if self._row_ok(row) else "damaged"
        return out

    def workload_keys(self, intact: bool = False) -> set[str]:
        """The keys of the stored workload analyses; intact=True: those whose checksum holds
        (a damaged one is computed again by the next sweep of its workload)."""
        if not intact:
            return {r[0] for r in self._query("SELECT key FROM workloads")}
        return {
            k
            for k, a, b, c in self._query("SELECT key, attrs, arrays, checksum FROM workloads")
            if point_checksum(k, a, b) == c
        }

    def damaged_rows(self) -> list[tuple]:
        """(rowid, stored hash, label or "", the row's seven columns) of every point whose
        checksum fails; label is read from the attributes when they still parse. (The rowid
        names the row even when its key's bytes are damaged.)"""
        out = []
        for rid, *row in self._query(
            "SELECT rowid, hash, status, attrs, config, result, arrays, checksum FROM points ORDER BY rowid"
        ):
            if self._row_ok(row):
                continue
            try:
                label = json.loads(row[2]).get("label", "") or ""
            except (ValueError, AttributeError):
                label = ""
            out.append((rid, row[0], str(label), tuple(row)))
        return out

    def refile(self, rowid: int, true_hash: str | None) -> None:
        """Repair the point row `rowid` (`damaged_rows`), stored under a changed key: move it
        to `true_hash` (its checksum holds there), or drop it (true_hash None: the point is
        stored, or is run again, under its own key). One transaction."""
        with self._transaction() as con:
            if true_hash is None:
                con.execute("DELETE FROM points WHERE rowid = ?", (rowid,))
            else:
                con.execute("DELETE FROM points WHERE hash = ?", (true_hash,))
                con.execute("UPDATE points SET hash = ? WHERE rowid = ?", (true_hash, rowid))

    def write_workload(self, analysis: dict) -> None:
        """Store (or replace) one workload analysis (`worker.workload_analysis`)."""
        row = self.encode_workload(analysis)
        with self._transaction() as con:
            con.execute("INSERT OR REPLACE INTO workloads VALUES (?, ?, ?, ?)", row)

    def _decode(self, row) -> StoredPoint:
        h, status, attrs, config, result, arrays, checksum = row
        if not self._row_ok(row):
            raise ValueError("checksum mismatch")
        a = json.loads(attrs)
        names = _array_names(arrays) if arrays else ()
        return StoredPoint(
            h,
            status,
            a,
            json.loads(config),
            None if result is None else json.loads(result),
            a.get("error", ""),
            names,
        )

    def points(self, damaged: str = "raise") -> list[StoredPoint]:
        """Every stored point (without its arrays; see `arrays`). A damaged point raises an
        InputError naming it (damaged="raise") or is left out (damaged="skip"; their hashes
        are then in `damaged_hashes`)."""
        out, bad = [], []
        for row in self._query(
            "SELECT hash, status, attrs, config, result, arrays, checksum FROM points ORDER BY rowid"
        ):
            try:
                out.append(self._decode(row))
            except (ValueError, TypeError, zlib.error, struct.error, KeyError):
                bad.append(row[0])
        self.damaged_hashes = bad
        if bad and damaged == "raise":
            raise InputError(
                f"results store has {len(bad)} damaged point(s) "
                f"({', '.join(b[:12] for b in bad[:5])}"
                f"{' ...' if len(bad) > 5 else ''}); `g10fast store verify "
                f"{self.path}` names them, and a sweep of the same matrix runs "
                f"them again",
                path=self.path,
            )
        return out

    def arrays(self, hash_: str) -> dict[str, np.ndarray]:
        """The per-kernel arrays of one point (empty dict if none)."""
        rows = self._query(
            "SELECT hash, status, attrs, config, result, arrays, checksum FROM points WHERE hash = ?",
            (hash_,),
        )
        if not rows:
            return {}
        if not self._row_ok(rows[0]):
            raise InputError(
                f"results store point {hash_[:12]} is damaged (checksum mismatch); "
                f"a sweep of the same matrix runs it again",
                path=self.path,
            )
        try:
            return unpack_arrays(rows[0][5])
        except (ValueError, zlib.error, struct.error, KeyError) as exc:
            raise InputError(f"results store point {hash_[:12]} is damaged ({exc})", path=self.path) from None

    def workload(self, key: str) -> dict | None:
        """The workload analysis of `<Model>-<B>` (arrays and attributes), or None."""
        rows = self._query("SELECT key, attrs, arrays, checksum FROM workloads WHERE key = ?", (key,))
        if not rows:
            return None
        k, attrs, arrays, checksum = rows[0]
        if point_checksum(k, attrs, arrays) != checksum:
            return None  # damaged: treated as absent (a sweep computes it again)
        out = unpack_arrays(arrays)
        out.update(json.loads(attrs))
        return out

    def verify(self) -> dict:
        """Check every point and workload row against its checksum, and SQLite's own
        structure (PRAGMA quick_check). -> {"points": n good, "damaged": [(hash, label, why)],
        "workloads": n good, "structure": [quick_check lines other than "ok"], "checksums": True}"""
        bad, n, nw, structure = [], 0, 0, []
        try:
            structure = [r[0] for r in self._connect().execute("PRAGMA quick_check") if r[0] != "ok"]
        except sqlite3.Error as exc:
            structure = [str(exc)]
        try:
            hashes = self.point_hashes()
        except InputError as exc:
            return {
                "points": 0,
                "damaged": [("(table points)", "", str(exc))],
                "workloads": 0,
                "structure": structure,
                "checksums": True,
            }
        for h in hashes:
            try:
                rows = (
                    self._connect()
                    .execute(
                        "SELECT hash, status, attrs, config, result, arrays, checksum FROM points "
                        "WHERE hash = ?",
                        (h,),
                    )
                    .fetchall()
                )
                if not rows:
                    raise ValueError("row missing from the table (index damaged)")
                label = ""
                try:
                    label = json.loads(rows[0][2]).get("label", "")
                except (ValueError, AttributeError):
                    pass
                if not self._row_ok(rows[0]):
                    bad.append((h, label, "checksum mismatch"))
                    continue
                self._decode(rows[0])
                unpack_arrays(rows[0][5])
                n += 1
            except (sqlite3.Error, ValueError, TypeError, zlib.error, struct.error, KeyError) as exc:
                bad.append((h, "", f"{type(exc).__name__}: {exc}"))
        try:
            for k, attrs, arrays, checksum in self._connect().execute(
                "SELECT key, attrs, arrays, checksum FROM workloads"
            ):
                if point_checksum(k, attrs, arrays) != checksum:
                    bad.append((f"workload {k}", "", "checksum mismatch"))
                else:
                    nw += 1
        except sqlite3.Error as exc:
            bad.append(("(table workloads)", "", str(exc)))
        return {"points": n, "damaged": bad, "workloads": nw, "structure": structure, "checksums": True}

    # -- claims ------------------------------------------------------------------------------------
    def _begin(self):
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")
        return con

    @contextlib.contextmanager
    def _transaction(self):
        """One write transaction: BEGIN IMMEDIATE, the block, COMMIT (unless the block ended it);
        ROLLBACK when the block raises; an SQLite error as a store write error."""
        try:
            con = self._begin()
            try:
                yield con
                if con.in_transaction:
                    con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    try:
                        con.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise
        except sqlite3.Error as exc:
            raise self._error(exc, "write") from None

    def try_claim(self, hash_: str, keep=("ok", "failed")) -> bool:
        """Take `hash_` for this sweep: False when it is stored with a status in `keep` (and
        its checksum holds) or another live sweep holds it."""
        with self._transaction() as con:
            rows = con.execute(
                "SELECT hash, status, attrs, config, result, arrays, checksum FROM points WHERE hash = ?",
                (hash_,),
            ).fetchall()
            if rows and rows[0][1] in keep and self._row_ok(rows[0]):
                con.execute("ROLLBACK")
                return False
            c = con.execute(
                "SELECT owner, host, pid, claimed_at FROM claims WHERE hash = ?", (hash_,)
            ).fetchall()
            if c and c[0][0] != self.owner and not self._stale(*c[0][1:]):
                con.execute("ROLLBACK")
                return False
            con.execute(
                "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                (hash_, self.owner, self.host, os.getpid(), time.time()),
            )
        return True

    def _stale(self, host: str, pid: int, claimed_at: float) -> bool:
        """A claim whose process is gone (same host), or older than CLAIM_LEASE (any host:
        its owner refreshes it with every point it writes)."""
        if time.time() - float(claimed_at) > CLAIM_LEASE:
            return True
        return host == self.host and not _pid_alive(int(pid))

    def release_claims(self) -> None:
        """Drop every claim of this store object (the end of a sweep)."""
        try:
            con = self._begin()
            con.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
            con.execute("COMMIT")
        except sqlite3.Error:
            try:
                if self._con is not None and self._con.in_transaction:
                    self._con.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def claims(self) -> list[tuple]:
        """(hash, owner, host, pid, claimed_at) of every claim."""
        return self._query("SELECT hash, owner, host, pid, claimed_at FROM claims")

    # -- writing -----------------------------------------------------------------------------------
    @staticmethod
    def encode_point(rec: dict) -> tuple:
        """The row of a record from `g10fast.sweep.worker.execute`: (hash, status, attrs,
        config, result, arrays, checksum)."""
        h = rec["hash"]
        attrs = {"status": rec["status"]}
        pt = rec.get("point", {}) or {}
        for k in _POINT_ATTRS:
            v = rec.get("label", "") if k == "label" else pt.get(k)
            if v is not None:
                attrs[k] = v
        attrs["error"] = rec.get("error") or ""
        attrs["error_type"] = rec.get("error_type") or ""
        for k in (
            "wall_seconds",
            "cpu_seconds",
            "workload_cpu_seconds",
            "worker_peak_rss_bytes",
            "worker_pid",
        ):
            if rec.get(k) is not None:
                attrs[k] = rec[k]
        for k, attr in (
            ("derived_from", "derived_from"),
            ("derivation", "derivation"),
            ("source_cpu_seconds", "source_cpu_seconds"),
            ("plan_digest", "plan_hints_sha256"),
            ("derive_refused", "derive_refused"),
        ):
            if rec.get(k) is not None:
                attrs[attr] = rec[k]
        for k, v in (rec.get("cache") or {}).items():
            attrs[f"cache_{k}"] = bool(v)
        attrs["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        attrs["g10fast_version"] = rec.get("g10fast_version", "")
        a = _dumps(attrs)
        c = _dumps(rec.get("config", {}))
        r = None if rec.get("result") is None else _dumps(rec["result"])
        arr = pack_arrays(rec.get("arrays"))
        return (h, str(rec["status"]), a, c, r, arr, point_checksum(h, str(rec["status"]), a, c, r, arr))

    @staticmethod
    def encode_workload(an: dict) -> tuple:
        key = an["key"]
        arrays = {k: v for k, v in an.items() if k != "key" and isinstance(v, np.ndarray)}
        attrs = _dumps({k: v for k, v in an.items() if k != "key" and k not in arrays})
        blob = pack_arrays(arrays)
        return (key, attrs, blob, point_checksum(key, attrs, blob))

    def write_point(self, rec: dict) -> None:
        """Store one finished point (a record from `g10fast.sweep.worker.execute`) and its
        workload analysis, if any, in one transaction; release its claim."""
        row = self.encode_point(rec)
        an = rec.get("analysis")
        wrow = self.encode_workload(an) if an else None
        with self._transaction() as con:
            con.execute("INSERT OR REPLACE INTO points VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            if wrow is not None:
                con.execute("INSERT OR REPLACE INTO workloads VALUES (?, ?, ?, ?)", wrow)
            con.execute("DELETE FROM claims WHERE hash = ?", (row[0],))
            con.execute("UPDATE claims SET claimed_at = ? WHERE owner = ?", (time.time(), self.owner))


def convert_store(src, dst) -> tuple[int, int]:
    """Copy every readable point (with its arrays) and workload analysis of the store at `src`
    (any version; a damaged store too: what still reads, checksums holding) into the
    version-2 store at `dst` (created if missing). Attributes are kept as they are
    (finished_at included). -> (points copied, damaged points left out)."""
    s = ResultStore(src, create=False)
    d = ResultStore(dst)
    if d.read_only:
        d.write_point({})
    if os.path.abspath(s.path) == os.path.abspath(d.path):
        raise InputError("the new store must be another file", path=d.path)
    rows, wrows, bad = [], [], 0
    if isinstance(s, ResultStore):
        for h in s.point_hashes():
            try:
                r = (
                    s._connect()
                    .execute(
                        "SELECT hash, status, attrs, config, result, arrays, checksum FROM points "
                        "WHERE hash = ?",
                        (h,),
                    )
                    .fetchall()
                )
            except sqlite3.Error:
                r = []
            if r and s._row_ok(r[0]):
                rows.append(tuple(r[0]))
            else:
                bad += 1
        try:
            for w in s._connect().execute("SELECT key, attrs, arrays, checksum FROM workloads"):
                if point_checksum(*w[:3]) == w[3]:
                    wrows.append(tuple(w))
        except sqlite3.Error:
            pass
    else:
        pts = s.points(damaged="skip")
        bad = len(s.damaged_hashes)
        for p in pts:
            a, c = _dumps(p.attrs), _dumps(p.config)
            r = None if p.result is None else _dumps(p.result)
            arr = pack_arrays(s.arrays(p.hash))
            st = str(p.status)
            rows.append((p.hash, st, a, c, r, arr, point_checksum(p.hash, st, a, c, r, arr)))
        for key in sorted(s.workload_keys()):
            w = s.workload(key)
            if w is not None:
                wrows.append(d.encode_workload({**w, "key": key}))
    for sql, batch in (
        ("INSERT OR REPLACE INTO points VALUES (?, ?, ?, ?, ?, ?, ?)", rows),
        ("INSERT OR REPLACE INTO workloads VALUES (?, ?, ?, ?)", wrows),
    ):
        for row in batch:
            try:
                con = d._begin()
                con.execute(sql, row)
                con.execute("COMMIT")
            except sqlite3.Error as exc:
                raise d._error(exc, "write") from None
    s.close()
    d.close()
    return len(rows), bad
