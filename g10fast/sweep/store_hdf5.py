"""Reader of version-1 results stores: one HDF5 file, one group per point keyed by its config
hash (docs/store-format.md, "Version 1"). Since store version 2 (SQLite,
g10fast/sweep/store.py) such files are read-only: `figures`, `results export` and
`store verify` read them, `g10fast store convert OLD NEW` copies them into a version-2 store.

Layout:

    /                       attrs format="g10fast-results-store", store_version=1
    /points/<config hash>/  attrs (status, label, the matrix point, timings, ...),
                            datasets config (JSON text), result (JSON text),
                            arrays/<name> (per-kernel arrays, e.g. kernel_cycles)
    /workloads/<Model>-<B>/ per-(model, batch) workload analysis (datasets and attrs)

Groups named `.tmp-*` are points a killed writer did not finish: ignored. Version-1 points
carry no checksum; every read error (HDF5's own, a missing dataset, invalid JSON) is an
InputError naming the file and the point.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import InputError

__all__ = ["HDF5_VERSION", "HDF5Store"]

HDF5_VERSION = 1
_TMP_PREFIX = ".tmp-"


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


class HDF5Store:
    """A version-1 (HDF5) results store, read-only. Same reading API as `ResultStore`."""

    version = HDF5_VERSION
    read_only = True

    def __init__(self, path):
        import h5py

        from .point import STORE_FORMAT

        self.path = os.fspath(path)
        self._h5py = h5py
        with self._open() as f:
            fmt = _plain(f.attrs.get("format"))
            if fmt != STORE_FORMAT:
                raise InputError(
                    f"not a g10fast results store (format attribute {fmt!r}, expected {STORE_FORMAT!r})",
                    path=self.path,
                )
            ver = f.attrs.get("store_version", -1)
            try:
                ver = int(ver)
            except (TypeError, ValueError):
                ver = -1
            if ver != HDF5_VERSION:
                raise InputError(
                    f"results store version {ver} is not supported (this g10fast reads versions 1 and 2)",
                    path=self.path,
                )
            for name in ("points", "workloads"):
                if name not in f:
                    raise InputError(f"results store lacks its /{name} group", path=self.path)

    def _open(self):
        try:
            return self._h5py.File(self.path, "r")
        except (OSError, ValueError) as exc:
            raise InputError(
                f"cannot open the results store (damaged HDF5 file: {exc}); "
                f"move it away or pass another --store",
                path=self.path,
            ) from None

    def _damaged(self, exc, what="") -> InputError:
        return InputError(
            f"results store is damaged{what} ({type(exc).__name__}: {exc}); "
            f"`g10fast store verify {self.path}` lists what can be read",
            path=self.path,
        )

    def close(self) -> None:
        pass

    # -- reading -----------------------------------------------------------------------------
    def point_hashes(self) -> list[str]:
        with self._open() as f:
            try:
                return [k for k in f["points"] if not k.startswith(_TMP_PREFIX)]
            except Exception as exc:  # noqa: BLE001 - HDF5 raises many types on damage
                raise self._damaged(exc) from None

    def statuses(self) -> dict[str, str]:
        with self._open() as f:
            try:
                return {
                    k: _str(g.attrs.get("status", "error"))
                    for k, g in f["points"].items()
                    if not k.startswith(_TMP_PREFIX)
                }
            except Exception as exc:  # noqa: BLE001
                raise self._damaged(exc) from None

    def workload_keys(self, intact: bool = False) -> set[str]:
        with self._open() as f:
            try:
                return {k for k in f["workloads"] if not k.startswith(_TMP_PREFIX)}
            except Exception as exc:  # noqa: BLE001
                raise self._damaged(exc) from None

    def _point(self, h, g):
        from .point import StoredPoint

        attrs = {k: _plain(v) for k, v in g.attrs.items()}
        config = json.loads(_str(g["config"][()])) if "config" in g else {}
        result = json.loads(_str(g["result"][()])) if "result" in g else None
        names = tuple(g["arrays"].keys()) if "arrays" in g else ()
        return StoredPoint(
            h, attrs.get("status", "error"), attrs, config, result, attrs.get("error", ""), names
        )

    def points(self, damaged: str = "raise") -> list:
        out = []
        self.damaged_hashes = []
        with self._open() as f:
            try:
                keys = [k for k in f["points"] if not k.startswith(_TMP_PREFIX)]
            except Exception as exc:  # noqa: BLE001
                raise self._damaged(exc) from None
            for h in keys:
                try:
                    out.append(self._point(h, f["points"][h]))
                except Exception as exc:  # noqa: BLE001
                    if damaged == "raise":
                        raise self._damaged(exc, f" at point {h}") from None
                    self.damaged_hashes.append(h)
        return out

    def verify(self) -> dict:
        """{"points": n readable, "damaged": [(hash, label, why)], "checksums": False}"""
        bad, n = [], 0
        try:
            f = self._open()
        except InputError as exc:
            return {"points": 0, "damaged": [("(file)", "", str(exc))], "checksums": False, "workloads": 0}
        with f:
            try:
                keys = [k for k in f["points"] if not k.startswith(_TMP_PREFIX)]
            except Exception as exc:  # noqa: BLE001
                return {
                    "points": 0,
                    "damaged": [("(index)", "", str(exc))],
                    "checksums": False,
                    "workloads": 0,
                }
            for h in keys:
                try:
                    p = self._point(h, f["points"][h])
                    g = f["points"][h]
                    if "arrays" in g:
                        for d in g["arrays"].values():
                            d[()]
                    n += 1
                except Exception as exc:  # noqa: BLE001
                    bad.append((h, "", f"{type(exc).__name__}: {exc}"))
                    continue
                del p
        return {"points": n, "damaged": bad, "checksums": False, "workloads": 0}

    def arrays(self, hash_: str) -> dict:
        with self._open() as f:
            try:
                g = f["points"].get(hash_)
                if g is None or "arrays" not in g:
                    return {}
                return {k: d[()] for k, d in g["arrays"].items()}
            except Exception as exc:  # noqa: BLE001
                raise self._damaged(exc, f" at point {hash_}") from None

    def workload(self, key: str):
        with self._open() as f:
            try:
                g = f["workloads"].get(key)
                if g is None:
                    return None
                out = {k: d[()] for k, d in g.items()}
                out.update({k: _plain(v) for k, v in g.attrs.items()})
                return out
            except Exception as exc:  # noqa: BLE001
                raise self._damaged(exc, f" at workload {key}") from None

    # -- writing: refused ----------------------------------------------------------------------
    def _refuse(self):
        raise InputError(
            "is a version-1 (HDF5) results store, read-only since version 2: "
            f"`g10fast store convert {self.path} NEW.g10db` copies it into a "
            "version-2 store, or pass another --store",
            path=self.path,
        )

    def write_point(self, rec: dict) -> None:
        self._refuse()

    def try_claim(self, *a, **k):
        self._refuse()
