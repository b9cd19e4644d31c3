"""The sweep results store: one HDF5 file, one group per point keyed by its config hash.

Layout (docs/store-format.md):

    /                       attrs format="g10fast-results-store", store_version=1
    /points/<config hash>/  attrs status (ok | failed | error), label, model, batch_size,
                            policy, host_mem_gb, ssd_gbps, pcie_gbps, kernel_time_std_dev,
                            ran_seed, kernel_speedup, group, error, error_type, wall_seconds,
                            finished_at, cpu_seconds, workload_cpu_seconds,
                            worker_peak_rss_bytes, g10fast_version; plan_hints_sha256 (a
                            page-engine plan's hints); derived_from, derivation,
                            source_cpu_seconds (a point reused from a run at another host
                            line); derive_refused (why such a reuse was not exact)
                            datasets config (JSON text), result (JSON text),
                            arrays/<name> (per-kernel arrays, e.g. kernel_cycles)
    /workloads/<Model>-<B>/ per-(model, batch) workload analysis for Figs 2-4:
                            datasets active, active_input, active_weight, active_intermediate,
                            total (bytes per kernel), sd_size (bytes), sd_time (µs),
                            sd_start (kernel); attrs global_weight, input_size, kernels

Only one process writes (the sweep's parent). Every write opens the file, writes the point
into a temporary group, renames it to its hash, and closes the file, so a sweep killed at
any moment leaves every earlier point readable and at most one half-written temporary
group, which the next open removes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

__all__ = ["STORE_FORMAT", "STORE_VERSION", "StoredPoint", "ResultStore", "to_jsonable"]

STORE_FORMAT = "g10fast-results-store"
STORE_VERSION = 1
_TMP_PREFIX = ".tmp-"
_POINT_ATTRS = ("label", "model", "batch_size", "policy", "host_mem_gb", "ssd_gbps",
                "pcie_gbps", "kernel_time_std_dev", "ran_seed", "kernel_speedup", "group")


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


@dataclass
class StoredPoint:
    """One point read back from the store."""

    hash: str
    status: str
    attrs: dict
    config: dict
    result: dict | None
    error: str = ""
    array_names: tuple = field(default_factory=tuple)

    @property
    def label(self) -> str:
        return self.attrs.get("label", self.hash[:12])


class ResultStore:
    """Read and write a results store file. Opening validates it (InputError if unreadable)."""

    def __init__(self, path, *, create: bool = True):
        import h5py

        self.path = os.fspath(path)
        self._h5py = h5py
        exists = os.path.exists(self.path)
        if not exists and not create:
            raise InputError("results store not found", path=self.path)
        if exists:
            if os.path.isdir(self.path):
                raise InputError("is a directory, not a results store", path=self.path)
            self._check(cleanup=create)
        else:
            d = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(d):
                raise InputError("folder does not exist", path=d)
            tmp = self.path + f".{os.getpid()}.new"
            with h5py.File(tmp, "w") as f:
                f.attrs["format"] = STORE_FORMAT
                f.attrs["store_version"] = STORE_VERSION
                f.attrs["created"] = time.strftime("%Y-%m-%dT%H:%M:%S")
                f.create_group("points")
                f.create_group("workloads")
            os.replace(tmp, self.path)

    # -- opening -----------------------------------------------------------------------------------
    def _open(self, mode: str):
        try:
            return self._h5py.File(self.path, mode)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot open the results store (corrupted or not an HDF5 file: "
                             f"{exc}); move it away or pass another --store", path=self.path) from None

    def _check(self, cleanup: bool) -> None:
        with self._open("r+" if cleanup else "r") as f:
            fmt = f.attrs.get("format")
            if isinstance(fmt, bytes):
                fmt = fmt.decode()
            if fmt != STORE_FORMAT:
                raise InputError(f"not a g10fast results store (format attribute {fmt!r}, expected "
                                 f"{STORE_FORMAT!r})", path=self.path)
            ver = int(f.attrs.get("store_version", -1))
            if ver != STORE_VERSION:
                raise InputError(f"results store version {ver} is not supported (this g10fast "
                                 f"reads version {STORE_VERSION})", path=self.path)
            for name in ("points", "workloads"):
                if name not in f:
                    raise InputError(f"results store lacks its /{name} group", path=self.path)
            if cleanup:
                for g in ("points", "workloads"):
                    for k in [k for k in f[g] if k.startswith(_TMP_PREFIX)]:
                        del f[g][k]   # left by a writer killed mid-write

    # -- reading -----------------------------------------------------------------------------------
    def statuses(self) -> dict[str, str]:
        """config hash -> status of every stored point."""
        with self._open("r") as f:
            try:
                return {k: _str(g.attrs.get("status", "error")) for k, g in f["points"].items()
                        if not k.startswith(_TMP_PREFIX)}
            except (OSError, KeyError, RuntimeError) as exc:
                raise InputError(f"results store is damaged ({exc})", path=self.path) from None

    def workload_keys(self) -> set[str]:
        with self._open("r") as f:
            return {k for k in f["workloads"] if not k.startswith(_TMP_PREFIX)}

    def points(self) -> list[StoredPoint]:
        """Every stored point (without its arrays; see `arrays`)."""
        out = []
        with self._open("r") as f:
            try:
                for h, g in f["points"].items():
                    if h.startswith(_TMP_PREFIX):
                        continue
                    attrs = {k: _plain(v) for k, v in g.attrs.items()}
                    config = json.loads(_str(g["config"][()])) if "config" in g else {}
                    result = json.loads(_str(g["result"][()])) if "result" in g else None
                    names = tuple(g["arrays"].keys()) if "arrays" in g else ()
                    out.append(StoredPoint(h, attrs.get("status", "error"), attrs, config, result,
                                           attrs.get("error", ""), names))
            except (OSError, KeyError, RuntimeError, ValueError) as exc:
                raise InputError(f"results store is damaged ({exc})", path=self.path) from None
        return out

    def arrays(self, hash_: str) -> dict[str, np.ndarray]:
        """The per-kernel arrays of one point (empty dict if none)."""
        with self._open("r") as f:
            g = f["points"].get(hash_)
            if g is None or "arrays" not in g:
                return {}
            return {k: d[()] for k, d in g["arrays"].items()}

    def workload(self, key: str) -> dict | None:
        """The workload analysis of `<Model>-<B>` (arrays and attributes), or None."""
        with self._open("r") as f:
            g = f["workloads"].get(key)
            if g is None:
                return None
            out = {k: d[()] for k, d in g.items()}
            out.update({k: _plain(v) for k, v in g.attrs.items()})
            return out

    # -- writing (one process only) ------------------------------------------------------------------
    def write_point(self, rec: dict) -> None:
        """Store one finished point (a record from `g10fast.sweep.worker.execute`)."""
        h = rec["hash"]
        with self._open("r+") as f:
            pts = f["points"]
            tmp = _TMP_PREFIX + h
            if tmp in pts:
                del pts[tmp]
            g = pts.create_group(tmp)
            g.attrs["status"] = rec["status"]
            for k in _POINT_ATTRS:
                v = rec.get("point", {}).get(k)
                if k == "label":
                    v = rec.get("label", "")
                if v is None:
                    continue
                g.attrs[k] = v
            g.attrs["error"] = rec.get("error") or ""
            g.attrs["error_type"] = rec.get("error_type") or ""
            for k in ("wall_seconds", "cpu_seconds", "workload_cpu_seconds", "worker_peak_rss_bytes",
                      "worker_pid"):
                if rec.get(k) is not None:
                    g.attrs[k] = rec[k]
            # reuse of a run at another host line (g10fast/sweep/reuse.py)
            for k, attr in (("derived_from", "derived_from"), ("derivation", "derivation"),
                            ("source_cpu_seconds", "source_cpu_seconds"),
                            ("plan_digest", "plan_hints_sha256"),
                            ("derive_refused", "derive_refused")):
                if rec.get(k) is not None:
                    g.attrs[attr] = rec[k]
            for k, v in (rec.get("cache") or {}).items():
                g.attrs[f"cache_{k}"] = bool(v)
            g.attrs["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            g.attrs["g10fast_version"] = rec.get("g10fast_version", "")
            g.create_dataset("config", data=json.dumps(to_jsonable(rec.get("config", {}))))
            if rec.get("result") is not None:
                g.create_dataset("result", data=json.dumps(to_jsonable(rec["result"])))
            arrays = rec.get("arrays") or {}
            if arrays:
                a = g.create_group("arrays")
                for name, arr in arrays.items():
                    arr = np.asarray(arr)
                    kw = {"compression": "gzip", "compression_opts": 4} if arr.size > 256 else {}
                    a.create_dataset(name, data=arr, **kw)
            if h in pts:
                del pts[h]
            pts.move(tmp, h)
            an = rec.get("analysis")
            if an:
                self._write_workload(f, an)
            f.flush()

    def _write_workload(self, f, an: dict) -> None:
        wl = f["workloads"]
        key = an["key"]
        tmp = _TMP_PREFIX + key
        if tmp in wl:
            del wl[tmp]
        g = wl.create_group(tmp)
        for k, v in an.items():
            if k == "key":
                continue
            if isinstance(v, np.ndarray):
                kw = {"compression": "gzip", "compression_opts": 4} if v.size > 256 else {}
                g.create_dataset(k, data=v, **kw)
            else:
                g.attrs[k] = v
        if key in wl:
            del wl[key]
        wl.move(tmp, key)


def _str(v) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8")
    return str(v)


def _plain(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.generic):
        return v.item()
    return v
