"""Micro-benchmark of the results store: points written and read per second, this checkout's
store (SQLite, store_version 2) against another checkout's (e.g. the HDF5 store of version 1).

    python benchmarks/store_bench.py --points 300 [--legacy-root /tmp/g10fast-base]
        [--out benchmarks/results/store_bench.jsonl]

Each point is the size of a paper-scale point: a result dict of two iterations with their
counters, per-kernel arrays of 2 x 3,000 int64 cycles and 3,000 ideal cycles, a workload
analysis every 20 points. Timed: writing every point (each its own commit: one transaction,
or one open/write/close of the HDF5 file), then `statuses()` and `points()` + `arrays()` of
every point (a resumed sweep, figures).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import git_commit  # noqa: E402


def record(i: int) -> dict:
    rng = np.random.default_rng(i)
    its = [
        {
            "iteration": j,
            "exe_time_cycles": int(rng.integers(1e9, 1e10)),
            "ideal_exe_time_cycles": int(rng.integers(1e9, 1e10)),
            "slowdown": float(rng.random()),
            "stall_cycles": 1,
            "overlap_cycles": 2,
            "compute_cycles": 3,
            "cpu_pf": 4,
            "ssd_pf": 5,
            "unalloc_pf": 6,
            "in_transfer": 7,
            "pages": {"cpu_to_gpu": 1, "ssd_to_gpu": 2, "gpu_to_cpu": 3, "gpu_to_ssd": 4},
        }
        for j in range(2)
    ]
    rec = {
        "hash": f"{i:064x}",
        "label": f"BERT/256-lru-{i}",
        "status": "ok",
        "config": {f"key{k}": k * 1.5 for k in range(60)},
        "point": {
            "model": "BERT",
            "batch_size": 256,
            "policy": "lru",
            "host_mem_gb": 128.0,
            "ssd_gbps": 3.2,
            "pcie_gbps": 15.754,
            "kernel_time_std_dev": 0.0,
            "kernel_speedup": 1.0,
            "group": "bench",
        },
        "result": {
            "status": "ok",
            "iterations": its,
            "reported": 1,
            "workload": {"kernels": 3000, "ideal_cycles": 123456789},
            "system": {f"c{k}": k for k in range(30)},
        },
        "arrays": {
            "kernel_cycles": rng.integers(0, 2**31, (2, 3000)),
            "kernel_ideal_cycles": rng.integers(0, 2**31, 3000),
        },
        "wall_seconds": 1.0,
        "cpu_seconds": 1.0,
    }
    if i % 20 == 0:
        rec["analysis"] = {
            "key": f"M-{i}",
            "total": rng.integers(0, 2**33, 3000),
            "active": rng.integers(0, 2**33, 3000),
            "kernels": 3000,
        }
    return rec


def bench(store_cls, path: str, n: int) -> dict:
    recs = [record(i) for i in range(n)]
    s = store_cls(path)
    t0 = time.perf_counter()
    for r in recs:
        s.write_point(r)
    t_write = time.perf_counter() - t0
    if hasattr(s, "close"):
        s.close()
    t0 = time.perf_counter()
    s = store_cls(path)
    st = s.statuses()
    t_status = time.perf_counter() - t0
    t0 = time.perf_counter()
    pts = s.points()
    for p in pts:
        s.arrays(p.hash)
    t_read = time.perf_counter() - t0
    assert len(st) == len(pts) == n
    size = sum(os.path.getsize(path + x) for x in ("", "-wal") if os.path.exists(path + x))
    return {
        "points": n,
        "write_points_per_s": n / t_write,
        "write_ms_per_point": 1e3 * t_write / n,
        "statuses_s": t_status,
        "read_points_per_s": n / t_read,
        "file_bytes": size,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=300)
    ap.add_argument("--legacy-root", help="another g10fast checkout whose store to compare")
    ap.add_argument("--out", help="append JSON lines here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as td:
        from g10fast.sweep.store import STORE_VERSION, ResultStore

        rows.append(
            {
                "store": f"version {STORE_VERSION} (this checkout)",
                **bench(ResultStore, os.path.join(td, "new.g10db"), args.points),
            }
        )
        if args.legacy_root:
            for m in [m for m in sys.modules if m == "g10fast" or m.startswith("g10fast.")]:
                del sys.modules[m]
            sys.path.insert(0, args.legacy_root)
            legacy = importlib.import_module("g10fast.sweep.store")
            rows.append(
                {
                    "store": f"version {legacy.STORE_VERSION} ({args.legacy_root})",
                    **bench(legacy.ResultStore, os.path.join(td, "old.h5"), args.points),
                }
            )
    for r in rows:
        r.update(
            commit=git_commit(),
            machine=platform.node(),
            cpus=os.cpu_count(),
            time=time.strftime("%Y-%m-%dT%H:%M:%S"),
        )
        print(json.dumps(r))
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
