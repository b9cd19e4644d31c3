"""`g10fast results export STORE --out points.csv|points.parquet`: one row per stored point.

Columns (`EXPORT_COLUMNS`): the point's configuration hash and label, its matrix parameters
(model, batch_size, policy, host_mem_gb, ssd_gbps, pcie_gbps, kernel_time_std_dev, ran_seed,
kernel_speedup, group), its status and error, and the numbers of the reported iteration
(the one the artifact's figure scripts use): exe_time_cycles, ideal_exe_time_cycles,
exe_time_s and ideal_time_s (cycles / the configuration's GPU_frequency_GHz, empty when the
configuration has no frequency), slowdown, stall / overlap / compute cycles, page faults,
pages moved per link and direction; then where the point came from (derived_from) and its
cost (wall_seconds, cpu_seconds); then the provable bound (docs/bounds.md) and the gap split:
bound_time_cycles, bound_forced_cycles (bound − ideal: what the hardware forces),
bound_gap_cycles (time − bound: what the policy adds), bound_time_s. A failed or errored
point has its parameters and status, and empty numbers. Reading works while a sweep writes
the store (SQLite WAL); damaged points are left out and counted (`g10fast store verify`
names them).

Parquet needs pyarrow (the optional extra `g10fast[parquet]`).
"""

from __future__ import annotations

import csv
import math
import os

from ..atomic import atomic_path, checked_target
from ..errors import InputError

__all__ = ["EXPORT_COLUMNS", "export_rows", "export_points"]

_PARAMS = (
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
_ITER = ("exe_time_cycles", "ideal_exe_time_cycles")
_ITER2 = (
    "slowdown",
    "stall_cycles",
    "overlap_cycles",
    "compute_cycles",
    "cpu_pf",
    "ssd_pf",
    "unalloc_pf",
    "in_transfer",
)
_PAGES = ("cpu_to_gpu", "ssd_to_gpu", "gpu_to_cpu", "gpu_to_ssd")
#: the provable bound and the gap split (docs/bounds.md): bound − ideal is what the hardware
#: forces, time − bound what the policy adds; empty for points stored before the bound
_BOUND = ("bound_time_cycles", "bound_forced_cycles", "bound_gap_cycles")
EXPORT_COLUMNS = (
    ("hash", "label")
    + _PARAMS
    + ("status", "error_type", "error")
    + _ITER
    + ("exe_time_s", "ideal_time_s")
    + _ITER2
    + tuple(f"pages_{k}" for k in _PAGES)
    + ("derived_from", "wall_seconds", "cpu_seconds")
    + _BOUND
    + ("bound_time_s",)
)
#: column types for Parquet (the rest are strings)
_INT = (
    {
        "batch_size",
        "ran_seed",
        "exe_time_cycles",
        "ideal_exe_time_cycles",
        "stall_cycles",
        "overlap_cycles",
        "compute_cycles",
        "cpu_pf",
        "ssd_pf",
        "unalloc_pf",
        "in_transfer",
    }
    | {f"pages_{k}" for k in _PAGES}
    | set(_BOUND)
)
_FLOAT = {
    "host_mem_gb",
    "ssd_gbps",
    "pcie_gbps",
    "kernel_time_std_dev",
    "kernel_speedup",
    "exe_time_s",
    "ideal_time_s",
    "slowdown",
    "wall_seconds",
    "cpu_seconds",
    "bound_time_s",
}


def _num(v):
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf}.get(v, None)
    return v


def export_rows(store) -> tuple[list[dict], int]:
    """(one dict per readable point, in EXPORT_COLUMNS order; number of damaged points)."""
    pts = store.points(damaged="skip")
    n_damaged = len(store.damaged_hashes)
    rows = []
    for p in pts:
        a = p.attrs
        row = {c: None for c in EXPORT_COLUMNS}
        row["hash"], row["label"] = p.hash, p.label
        for k in _PARAMS:
            row[k] = a.get(k)
        row["status"] = p.status
        row["error_type"] = a.get("error_type") or None
        row["error"] = (p.error or "").strip().splitlines()[-1] if p.error else None
        row["derived_from"] = a.get("derived_from")
        row["wall_seconds"] = a.get("wall_seconds")
        row["cpu_seconds"] = a.get("cpu_seconds")
        r = p.result or {}
        its = r.get("iterations") or []
        rep = r.get("reported")
        if p.status == "ok" and its and isinstance(rep, int) and 0 <= rep < len(its):
            it = its[rep]
            for k in _ITER + _ITER2 + _BOUND + ("bound_time_s",):
                row[k] = _num(it.get(k))
            for k in _PAGES:
                row[f"pages_{k}"] = (it.get("pages") or {}).get(k)
            ghz = p.config.get("GPU_frequency_GHz")
            if isinstance(ghz, (int, float)) and ghz > 0:
                for k, out in (("exe_time_cycles", "exe_time_s"), ("ideal_exe_time_cycles", "ideal_time_s")):
                    if isinstance(row[k], (int, float)):
                        row[out] = row[k] / (ghz * 1e9)
        rows.append(row)
    return rows, n_damaged


def export_points(store_path, out) -> dict:
    """Write the points of the store at `store_path` to `out` (.csv or .parquet).
    -> {"rows": n, "damaged": n left out, "path": out}"""
    from .store import ResultStore

    out = os.fspath(out)
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".csv", ".parquet"):
        raise InputError("the output must end in .csv or .parquet", param="--out")
    checked_target(out)
    pa = pq = None
    if ext == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError(
                "writing Parquet needs pyarrow, which is not installed (pip install "
                "'g10fast[parquet]'); or write .csv",
                param="--out",
            ) from None
    store = ResultStore(store_path, create=False)
    try:
        rows, n_damaged = export_rows(store)
    finally:
        store.close()
    try:
        with atomic_path(out) as tmp:
            if ext == ".csv":
                with open(tmp, "w", newline="", encoding="utf-8") as fh:
                    w = csv.DictWriter(fh, fieldnames=list(EXPORT_COLUMNS))
                    w.writeheader()
                    for r in rows:
                        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
            else:
                fields = []
                for c in EXPORT_COLUMNS:
                    t = pa.int64() if c in _INT else pa.float64() if c in _FLOAT else pa.string()
                    fields.append(pa.field(c, t))
                cols = {}
                for f in fields:
                    vals = [r[f.name] for r in rows]
                    if f.type == pa.string():
                        vals = [None if v is None else str(v) for v in vals]
                    elif f.type == pa.float64():
                        vals = [None if v is None else float(v) for v in vals]
                    else:
                        vals = [None if v is None else int(v) for v in vals]
                    cols[f.name] = pa.array(vals, type=f.type)
                pq.write_table(pa.table(cols, schema=pa.schema(fields)), tmp)
    except OSError as exc:
        raise InputError(f"cannot write the export: {exc.strerror or exc}", path=out) from None
    return {"rows": len(rows), "damaged": n_damaged, "path": out}
