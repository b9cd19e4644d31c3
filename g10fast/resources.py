"""What a run needs in memory, estimated before its engine starts, against what this machine
has (issue 37, item 7: `--batch 100000` ran for a minute into 14.2 GiB).

    need = estimate_run_bytes(spec, workload)      # {"total": bytes, "parts": {...}}
    check_run_memory(spec, workload)               # InputError (exit 2) when it cannot fit

The estimate is this process's memory now (the interpreter, the libraries, the workload
arrays) plus the engine's state that grows with the workload, from the arrays the engines
allocate:

* the G10-compatible page engine: one uint8 state per 4 KiB page of the workload
  (`engine/page/__init__.py`, `pstate`, 1 byte a page: the operating system maps its pages as the
  engine first touches them, and a run touches every tensor), and for DeepUM+ the LRU ring
  of page entries (a power of two >= 1.25 x the pages that can be live, 4 bytes an entry,
  8 beyond `LRU_INT32_PAGES`); per tensor and per kernel rows of int64;
* the driver engine: five residency bitmaps of one bit per page (`engine/driver/__init__.py`,
  `DriverRun.bits`: GPU, host, SSD and two clean/dirty maps) and a few int64 per 2 MiB block;
* the tensor, swap and ranks engines: state per tensor, kernel and allocation, no per-page
  array;
* each engine's own parts come from its record (`EngineRecord.memory`:
  `engine/page/run.py`, `engine/driver/run.py`, `memory_parts`);
* `ENGINE_LOAD_BYTES` for loading an engine's compiled code.

Measured (benchmarks/results/memory_estimate.md, this machine, BERT-base, peak RSS against
the estimate): the page engine's peak grows by 1.00-1.04 bytes per page between batch 256,
1,024 and 4,096 (38.8 M to 618 M pages: 212 MiB to 772 MiB), and batch 100,000 needs
1.5e10 pages = 14.0 GiB of page states, the 14.2 GiB the issue saw; the driver engine grows
by 0.43 bytes per page (the estimate's 0.75 is above it: CH and CS are empty under most
policies). The check refuses a run when the estimate is above the memory available to this
process: /proc/meminfo's MemAvailable, the cgroup's memory.max less its memory.current, and
RLIMIT_AS, the least of them. `G10FAST_MEMORY_CHECK=0` turns the check off.
"""

from __future__ import annotations

import os
import resource

from .errors import InputError

__all__ = ["estimate_run_bytes", "available_bytes", "check_run_memory", "ENGINE_LOAD_BYTES"]

#: loading an engine's compiled kernels (Numba's code and LLVM) after the workload is built:
#: the peak of a BERT-base batch-8 lru run (167 MiB) less this process's memory just before
#: its engine started (about 100 MiB), rounded up
ENGINE_LOAD_BYTES = 96 * 2**20
#: int64 columns the page engine keeps per tensor and per kernel (pk.TT_COLS, pk.KT_COLS and
#: the kernel statistics), rounded up
PER_TENSOR_BYTES = 32 * 8
PER_KERNEL_BYTES = 32 * 8
ENV = "G10FAST_MEMORY_CHECK"


def _rss_now() -> int:
    """This process's resident memory now (bytes)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def estimate_run_bytes(spec, workload) -> dict:
    """{"total": bytes, "parts": {name: bytes}}: what a run of `spec` on `workload` needs at
    its peak (see the module's docstring for each part; an engine's own parts come from its
    record's `memory`)."""
    rec = spec.record
    T, K = int(workload.num_tensors), int(workload.num_kernels)
    parts = {
        "this process now": _rss_now(),
        "engine code": ENGINE_LOAD_BYTES,
        "per tensor and kernel": T * PER_TENSOR_BYTES + K * PER_KERNEL_BYTES,
    }
    from .engine.registry import engine

    parts.update(engine(rec.engine).memory_parts(spec, workload))
    return {"total": int(sum(parts.values())), "parts": parts}


def available_bytes() -> int | None:
    """Memory this process may still take (bytes): the least of /proc/meminfo's MemAvailable,
    the cgroup v2 limit less its use, and RLIMIT_AS less what this process maps; None when
    none is known."""
    cands = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    cands.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not cands:
        try:
            cands.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError, AttributeError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            lim = fh.read().strip()
        if lim != "max":
            with open("/sys/fs/cgroup/memory.current") as fh:
                cands.append(int(lim) - int(fh.read().strip()))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        cands.append(int(soft))
    return max(0, min(cands)) if cands else None


def _gib(b: int) -> str:
    return f"{b / 2**30:,.1f} GiB"


def check_run_memory(spec, workload) -> dict:
    """The estimate of `estimate_run_bytes`; InputError (naming workload.batch, with the
    estimate and its largest parts) when it is above `available_bytes()`."""
    est = estimate_run_bytes(spec, workload)
    if os.environ.get(ENV, "1").strip().lower() in ("0", "off", "no", "false"):
        return est
    avail = available_bytes()
    need = est["total"] - est["parts"]["this process now"]
    if avail is not None and need > avail:
        big = sorted(est["parts"].items(), key=lambda kv: -kv[1])[:3]
        raise InputError(
            f"this run needs about {_gib(est['total'])} of memory "
            f"({', '.join(f'{k} {_gib(v)}' for k, v in big)}; "
            f"{workload.num_pages:,} pages of {workload.name} at batch "
            f"{workload.batch_size}) and this machine has {_gib(avail)} available: use a "
            f"smaller batch or a machine with more memory ({ENV}=0 skips this check)",
            param="workload.batch",
        )
    return est
