"""How long one read or write of DeepSpeed's asynchronous I/O library (`aio`) takes on an
NVMe set: the swapper's unit of work in ZeRO-Infinity.

What the library does with a request of `nbytes` (DS:csrc/aio/common/deepspeed_aio_common.cpp,
DS:csrc/aio/py_lib/deepspeed_cpu_op.cpp; ../shared/specs/zero-family.md §3.5):

* the request is split evenly over `intra_op_parallelism` threads (`_num_bytes_per_thread`),
  each with its own libaio context;
* each thread cuts its share into I/Os of `block_size` bytes (the last one shorter);
* `overlap_events` on (`do_aio_operation_overlap`): a thread keeps up to `queue_depth` I/Os in
  flight and submits a new one whenever one completes; off (`do_aio_operation_sequential`):
  it submits a batch of `queue_depth` I/Os and waits for all of them before the next batch.

The model: an I/O waits the device's access latency (the preset's SSD read or write latency)
and then moves its block at the set's bandwidth (the rank's share of it). With overlapping
events, a thread's I/Os pass in waves of `queue_depth`, each wave one latency and one block
long, unless the set's bandwidth is the limit (one latency to fill the pipe, then the bytes at
the set's rate); without, every batch pays the latency and then its bytes at the set's rate.

    overlap:     t = max(ceil(n / q) * (L + B / bw),  L + nbytes / bw)
    sequential:  t = ceil(n / q) * L + nbytes / bw

with n the I/Os of one thread, q = min(queue_depth, n), B the block, L the latency and bw
the bandwidth. At DeepSpeed's defaults (1 MiB blocks, queue depth 8, one thread) a request of
more than a few MiB is bandwidth-bound on any set of this project's presets (one 1 MiB I/O at
5 GB/s is 210 us against an 80 us read latency): the latency costs one access per request.
Small blocks or a shallow queue make it latency-bound, which is what `ds_nvme_tune` sweeps.
`single_submit` (one `io_submit` call per I/O instead of one per batch) is not modelled: its
cost is a system call per I/O, for which no measured figure is at hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from g10fast.errors import InputError


@dataclass(frozen=True)
class Aio:
    """DeepSpeed's `aio` configuration block (its code's defaults,
    DS:deepspeed/runtime/swap_tensor/constants.py)."""

    block_size: int = 1048576
    queue_depth: int = 8
    intra_op_parallelism: int = 1
    overlap_events: bool = True

    def check(self, prefix: str = "policy.aio_"):
        for k in ("block_size", "queue_depth", "intra_op_parallelism"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"must be an integer >= 1, got {v!r}", param=prefix + k)


def io_ns(nbytes: float, gbps: float, latency_us: float, aio: Aio) -> float:
    """Nanoseconds one aio read or write of `nbytes` takes at `gbps` (GB/s, the rank's share
    of the NVMe set) with an access latency of `latency_us` (see the module docstring)."""
    if nbytes <= 0:
        return 0.0
    per_thread = nbytes / aio.intra_op_parallelism
    n = math.ceil(per_thread / aio.block_size)
    q = min(aio.queue_depth, n)
    waves = math.ceil(n / q)
    lat = latency_us * 1e3
    data = nbytes / gbps  # bytes / (GB/s) = ns
    if aio.overlap_events:
        return max(waves * (lat + min(aio.block_size, per_thread) / gbps), lat + data)
    return waves * lat + data
