"""The `pytorch` allocator against PyTorch memory snapshots recorded on real GPUs
(docs/memory-snapshot.md): per snapshot, the recorded peak reserved bytes (its segments), the
allocator's on the same allocations without a capacity and with the capacity its cache
flushes bound, the share of trace ops at which the two reserved curves differ by what they
differed by when the trace began (the blocks allocated before it, packed afresh), and the
offset at the start. Results: benchmarks/results/memory_snapshots.jsonl.

    python benchmarks/snapshot_reference.py SNAPSHOT.pickle [...] [--source TEXT]

The snapshots are not part of the project (record your own with
torch.cuda.memory._record_memory_history + _dump_snapshot on a GPU, or see the record's
`source` for where the measured ones came from).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from _bench import ROOT, append_record, git_commit

from g10fast.alloc.allocators import run_allocator
from g10fast.alloc.snapshot import pytorch_capacity, pytorch_options, read_snapshot

MiB = 1 << 20


def compare(path, source: str = "") -> dict:
    t0 = time.perf_counter()
    tr = read_snapshot(path)
    read_s = time.perf_counter() - t0
    info = tr.meta["snapshot"]
    rec = {"snapshot": Path(path).name, "source": source, "entries": info["entries"],
           "ops": tr.num_ops, "pre_trace_blocks": info["pre_trace_blocks"],
           "streams": info["streams"], "cache_flushes": info.get("cache_flushes", 0),
           "measured_peak_reserved_mib": None if info["peak_reserved_bytes"] is None
           else info["peak_reserved_bytes"] / MiB,
           "measured_peak_allocated_mib": info["peak_allocated_bytes"] / MiB,
           "pytorch_options": pytorch_options(tr), "read_seconds": round(read_s, 3)}
    meas = tr.meta.get("reserved_of_op")
    n = info["pre_trace_blocks"]
    for key, cap in (("unbounded", None), ("flush_bound", pytorch_capacity(tr))):
        if key == "flush_bound" and cap is None:
            continue
        r = run_allocator(tr, "pytorch", capacity=cap, **pytorch_options(tr))
        row = {"capacity_mib": None if cap is None else round(cap / MiB, 3),
               "status": r.status, "peak_reserved_mib": r.peak_reserved / MiB}
        if meas is not None and r.status == "ok":
            d = r.reserved - meas[r.op_index]
            base = int(d[n - 1]) if n else 0
            row.update(vs_measured=r.peak_reserved / info["peak_reserved_bytes"] - 1.0,
                       offset_at_trace_start_mib=base / MiB,
                       ops_at_start_offset=float((d[n:] == base).mean()) if len(d) > n else 1.0)
        rec[key] = row
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshots", nargs="+")
    ap.add_argument("--source", default="", help="where the snapshots came from (recorded)")
    a = ap.parse_args()
    out = ROOT / "benchmarks" / "results" / "memory_snapshots.jsonl"
    machine = f"{platform.machine()} {os.cpu_count()} cpus {platform.python_version()}"
    for p in a.snapshots:
        rec = compare(p, a.source)
        rec.update(commit=git_commit(), machine=machine,
                   date=time.strftime("%Y-%m-%d", time.gmtime()))
        append_record(out, rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
