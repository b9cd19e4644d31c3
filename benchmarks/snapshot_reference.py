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

import numpy as np
from _bench import ROOT, append_record, git_commit

from g10fast.alloc.allocators import run_allocator
from g10fast.alloc.snapshot import pytorch_capacity, pytorch_options, read_snapshot

MiB = 1 << 20


def figure(path, out) -> str:
    """Reserved bytes over op index: the snapshot's (measured), the `pytorch` allocator's
    without a capacity and under its cache flushes' bound, and the live bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tr = read_snapshot(path)
    meas = tr.meta.get("reserved_of_op")
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = np.arange(tr.num_ops)
    ax.plot(x, tr.live_bytes() / MiB, color="0.6", lw=1.0, label="allocated (live)")
    if meas is not None:
        ax.step(
            x,
            meas / MiB,
            where="post",
            color="black",
            ls="--",
            lw=1.2,
            label=f"recorded reserved (peak {meas.max() / MiB:,.0f} MiB)",
        )
    caps = [("no capacity", None)]
    if pytorch_capacity(tr) is not None:
        caps.append(
            (f"capacity < {(pytorch_capacity(tr) + 1) / MiB:,.0f} MiB (cache flushes)", pytorch_capacity(tr))
        )
    for label, cap in caps:
        r = run_allocator(tr, "pytorch", capacity=cap, **pytorch_options(tr))
        ax.step(
            r.op_index,
            r.reserved / MiB,
            where="post",
            lw=1.0,
            label=f"pytorch here, {label} (peak {r.peak_reserved / MiB:,.0f} MiB)",
        )
    ax.set_xlabel("op index (allocations and frees)")
    ax.set_ylabel("GPU memory (MiB)")
    ax.set_title(f"{Path(path).name}: the caching allocator recorded vs simulated")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return str(out)


def compare(path, source: str = "") -> dict:
    t0 = time.perf_counter()
    tr = read_snapshot(path)
    read_s = time.perf_counter() - t0
    info = tr.meta["snapshot"]
    rec = {
        "snapshot": Path(path).name,
        "source": source,
        "entries": info["entries"],
        "ops": tr.num_ops,
        "pre_trace_blocks": info["pre_trace_blocks"],
        "streams": info["streams"],
        "cache_flushes": info.get("cache_flushes", 0),
        "measured_peak_reserved_mib": None
        if info["peak_reserved_bytes"] is None
        else info["peak_reserved_bytes"] / MiB,
        "measured_peak_allocated_mib": info["peak_allocated_bytes"] / MiB,
        "pytorch_options": pytorch_options(tr),
        "read_seconds": round(read_s, 3),
    }
    meas = tr.meta.get("reserved_of_op")
    n = info["pre_trace_blocks"]
    for key, cap in (("unbounded", None), ("flush_bound", pytorch_capacity(tr))):
        if key == "flush_bound" and cap is None:
            continue
        r = run_allocator(tr, "pytorch", capacity=cap, **pytorch_options(tr))
        row = {
            "capacity_mib": None if cap is None else round(cap / MiB, 3),
            "status": r.status,
            "peak_reserved_mib": r.peak_reserved / MiB,
        }
        if meas is not None and r.status == "ok":
            d = r.reserved - meas[r.op_index]
            base = int(d[n - 1]) if n else 0
            row.update(
                vs_measured=r.peak_reserved / info["peak_reserved_bytes"] - 1.0,
                offset_at_trace_start_mib=base / MiB,
                ops_at_start_offset=float((d[n:] == base).mean()) if len(d) > n else 1.0,
            )
        rec[key] = row
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshots", nargs="+")
    ap.add_argument("--source", default="", help="where the snapshots came from (recorded)")
    ap.add_argument("--figure", metavar="PREFIX", help="also draw PREFIX-<snapshot>.png")
    ap.add_argument("--no-record", action="store_true", help="figures only")
    a = ap.parse_args()
    out = ROOT / "benchmarks" / "results" / "memory_snapshots.jsonl"
    machine = f"{platform.machine()} {os.cpu_count()} cpus {platform.python_version()}"
    for p in a.snapshots:
        if a.figure:
            print(figure(p, f"{a.figure}-{Path(p).stem}.png"))
        if a.no_record:
            continue
        rec = compare(p, a.source)
        rec.update(commit=git_commit(), machine=machine, date=time.strftime("%Y-%m-%d", time.gmtime()))
        append_record(out, rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
