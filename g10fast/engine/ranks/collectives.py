"""NCCL collectives on one node's GPU links: time = latency + algorithm bytes / bus bandwidth.

nccl-tests' definitions (NVIDIA/nccl-tests doc/PERFORMANCE.md): for a message of S bytes over
n ranks, the bus bandwidth busbw = algbw x factor, factor 2(n-1)/n for AllReduce and (n-1)/n
for ReduceScatter and AllGather: an all-reduce moves 2(n-1)/n S per rank over the bottleneck
link whatever the algorithm (ring or tree). So

    t = lat + factor(n) x S / busbw

with busbw the node's achieved large-message bus bandwidth (the preset's
`node.nvlink_busbw_gbps`, each with its source). The latency is NCCL's own tuning model
(NVIDIA/nccl src/graph/tuning.cc): a base latency per algorithm and protocol plus a hardware
latency per step, a ring taking 2(n-1) steps for AllReduce and n-1 for the others; the
Simple protocol (large messages): base 8.4 us, NVLink 3.4 us a step (ring). The tree's
log2(n) steps are `algorithm="tree"` (AllReduce only; NCCL's NVLink tree step is 4.0 us, Simple).
"""

from __future__ import annotations

import math

from g10fast.errors import InputError

#: NCCL tuning.cc, Simple protocol (large messages), NVLink: base latency, per-step latency (us)
BASE_LAT_US = {"ring": 8.4, "tree": 8.4}
STEP_LAT_US = {"ring": 3.4, "tree": 4.0}
FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
}


def steps(op: str, n: int, algorithm: str = "ring") -> int:
    if algorithm == "tree":
        if op != "all_reduce":
            raise InputError(f"NCCL's tree runs AllReduce only, not {op}", param="algorithm")
        return 2 * max(1, math.ceil(math.log2(n)))
    return (2 if op == "all_reduce" else 1) * (n - 1)


def collective_ns(op: str, nbytes: float, n: int, busbw_gbps: float, algorithm: str = "ring") -> int:
    """Nanoseconds of one collective of `nbytes` (the whole message: the all-reduced buffer,
    the gathered output, the scattered input) over `n` ranks. One rank: nothing moves."""
    if op not in FACTORS:
        raise InputError(f"unknown collective {op!r} (known: {', '.join(FACTORS)})", param="collective")
    if algorithm not in BASE_LAT_US:
        raise InputError(f"unknown algorithm {algorithm!r} (ring or tree)", param="algorithm")
    if n < 1 or not busbw_gbps > 0:
        raise InputError(
            f"needs n >= 1 ranks and a bandwidth > 0 (got {n}, {busbw_gbps})", param="collective"
        )
    if n == 1 or nbytes <= 0:
        return 0
    lat_us = BASE_LAT_US[algorithm] + steps(op, n, algorithm) * STEP_LAT_US[algorithm]
    t_s = lat_us * 1e-6 + FACTORS[op](n) * float(nbytes) / (busbw_gbps * 1e9)
    return int(math.ceil(t_s * 1e9))
