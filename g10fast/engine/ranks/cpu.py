"""The CPU as a compute resource: DeepSpeed's CPU Adam and the host-side gradient handling.

CPU Adam (DS:csrc/includes/cpu_adam.h, cpu_adam_impl.cpp; ../shared/specs/zero-family.md §2)
runs one OpenMP-parallel, SIMD-vectorised pass over the rank's flat fp32 partition, tile by
tile (TILE = 128 Mi elements, one fork and join per tile). Per element it reads the gradient,
both moments and the parameter and writes the moments and the parameter: 16 B read + 12 B
written, about 10 vector operations (1 sqrt, 1 divide, ~8 multiply/FMA). The ZeRO optimizer
adds, on the CPU, an unscale of the fp32 gradient (4 + 4 B) and the fp32 -> 16-bit cast
into the pinned staging buffer (4 + 2 B). So each pass is bound by the slower of

    memory:  elements x bytes / min(cores x per-core bandwidth, the sockets' bandwidth share)
    compute: elements x cycles per element / (cores x clock)

plus one OpenMP fork/join per tile. The bandwidths are the node's (`[node]` of the preset,
STREAM-class figures with their source); `benchmarks/cpu_adam.py` measures an Adam step and a
triad on the machine it runs on and compares them with this model fed that machine's own
figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: bytes per element of each pass (zero-family.md §2.2, from the code)
ADAM_BYTES = 16 + 12
ADAM_PINNED_BYTES = 4 + 4 + 4  # the fp32 gradient read, the fp32 parameter read and written
UNSCALE_BYTES = 4 + 4
CAST_BYTES = 4 + 2
#: CPU Adam's tile (DS:csrc/includes/simd.h TILE) and an OpenMP fork/join (us): the fork/join
#: of a parallel region on a socket is 1-10 us (EPCC OpenMP micro-benchmarks' PARALLEL
#: overhead on many-core x86); 5 us is taken
TILE = 128 * 1024 * 1024
FORK_JOIN_US = 5.0
#: cycles per SIMD vector of the Adam update: ~8 FMA/mul at 2 per cycle, a vector divide and a
#: vector square root (Agner Fog's instruction tables: reciprocal throughputs of a few cycles
#: each on Zen 2 / Ice Lake and later); 12 cycles a vector is taken
CYCLES_PER_VECTOR = 12.0


@dataclass(frozen=True)
class CpuPool:
    """The cores a rank's optimizer runs on and the memory bandwidth they share."""

    cores: int
    ghz: float
    simd_lanes: int  # fp32 lanes: 8 (AVX2), 16 (AVX-512), 4 (NEON / SVE-128)
    per_core_gbps: float  # DRAM bandwidth one core reaches alone
    bandwidth_gbps: float  # the bandwidth this pool may use (its sockets' share)
    #: the bandwidth of the memory holding the pinned buffers (0: the pool's): one NUMA
    #: node's when they were first touched there (node.Node.cpu_pool)
    pinned_gbps: float = 0.0

    @property
    def gbps(self) -> float:
        return min(self.cores * self.per_core_gbps, self.bandwidth_gbps)

    @property
    def pinned(self) -> float:
        return min(self.gbps, self.pinned_gbps) if self.pinned_gbps else self.gbps


def pass_ns(
    elements: float,
    bytes_per_element: float,
    pool: CpuPool,
    vectors_cycles: float = 0.0,
    tiles: int = 0,
    pinned_bytes: float = 0.0,
) -> int:
    """One bandwidth-bound pass over `elements` (with `vectors_cycles` cycles per SIMD
    vector of compute beside it, and `tiles` OpenMP regions). `pinned_bytes` of the
    element's bytes are in the pinned buffers (`CpuPool.pinned`), streamed beside the rest."""
    if elements <= 0:
        return 0
    # every byte crosses the pool's memory; the pinned ones also the channels of their node
    t_mem = max(
        elements * bytes_per_element / (pool.gbps * 1e9), elements * pinned_bytes / (pool.pinned * 1e9)
    )
    t_cpu = 0.0
    if vectors_cycles:
        t_cpu = elements / pool.simd_lanes * vectors_cycles / (pool.cores * pool.ghz * 1e9)
    return int(math.ceil((max(t_mem, t_cpu) + tiles * FORK_JOIN_US * 1e-6) * 1e9))


def adam_ns(elements: float, pool: CpuPool) -> int:
    """DeepSpeed CPU Adam over `elements` fp32 elements (params, grads and both moments).
    The fp32 parameter and gradient are ZeRO's pinned partitions (12 B an element); the
    moments are CPU Adam's own pageable tensors (torch.zeros_like, filled in parallel)."""
    return pass_ns(
        elements,
        ADAM_BYTES,
        pool,
        CYCLES_PER_VECTOR,
        tiles=max(1, math.ceil(elements / TILE)),
        pinned_bytes=ADAM_PINNED_BYTES,
    )


def unscale_ns(elements: float, pool: CpuPool) -> int:
    """The unscale and clip of the pinned fp32 gradient partition."""
    return pass_ns(elements, UNSCALE_BYTES, pool, tiles=1, pinned_bytes=UNSCALE_BYTES)


def cast_ns(elements: float, pool: CpuPool) -> int:
    """The fp32 partition cast into the pinned 16-bit staging buffer."""
    return pass_ns(elements, CAST_BYTES, pool, tiles=1, pinned_bytes=CAST_BYTES)
