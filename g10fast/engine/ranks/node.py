"""A node's data-parallel resources: its GPUs and their links, the CPU sockets, host memory
and the NVMe set, from the `[node]` table of a hardware preset (data/hardware/*.toml; every
figure's source in the preset's `[sources] node`). Ranks are symmetric: one is simulated, the
others cost what they share with it (the NVLink fabric in collectives, a PCIe uplink, a
socket's memory bandwidth, the NVMe set)."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields

from g10fast.engine.ranks.cpu import CpuPool
from g10fast.errors import InputError


@dataclass(frozen=True)
class Node:
    gpus: int  # GPUs in the node (the most ranks)
    nvlink_busbw_gbps: float  # NCCL bus bandwidth reached with large messages (GB/s)
    pcie_gbps: float  # pinned host<->device copy bandwidth of one GPU alone (GB/s, per direction)
    gpus_per_pcie_uplink: int  # GPUs behind one PCIe switch uplink to the CPU
    pcie_uplink_gbps: float  # that uplink's bandwidth per direction (GB/s)
    cpu_sockets: int
    cores_per_socket: int  # physical cores
    cpu_ghz: float
    simd_fp32_lanes: int  # 8 AVX2, 16 AVX-512
    dram_gbps_per_socket: float  # STREAM-class bandwidth of one socket (GB/s)
    per_core_dram_gbps: float  # what one core reaches alone (GB/s)
    dram_gb: float  # host memory
    nvme_read_gbps: float  # the NVMe set, read (GB/s)
    nvme_write_gbps: float  # the NVMe set, write (GB/s)
    host_sync_us: float  # a host wait on the GPU (cudaStreamSynchronize + tiny copy)
    launch_us: float  # host time to launch one kernel from PyTorch eager
    numa_nodes_per_socket: int = 1  # NUMA nodes a socket is split into (AMD's NPS setting)
    # the NVMe set's access latency, read and write (us): the preset's [ssd] latencies (they
    # are the system's, so that an override of them applies; `node_for`), unless given here
    nvme_read_latency_us: float = 0.0
    nvme_write_latency_us: float = 0.0

    def pcie_share_gbps(self, ranks: int) -> float:
        """Per-direction host-link bandwidth of one rank when every rank copies at once: its
        own link, or its share of the uplink it has with the other ranks behind the same
        switch (ranks fill switches in order, as GPU ids do)."""
        behind = min(self.gpus_per_pcie_uplink, max(1, ranks))
        return min(self.pcie_gbps, self.pcie_uplink_gbps / behind)

    def cores_per_numa(self) -> int:
        return max(1, self.cores_per_socket // self.numa_nodes_per_socket)

    def cpu_pool(self, ranks: int, bind_cores: bool, placement: str = "deepspeed") -> CpuPool:
        """The cores one rank's optimizer uses. `bind_cores` (DeepSpeed's --bind_cores_to_rank,
        DS:deepspeed/utils/numa.py): each local rank gets total physical cores // ranks
        contiguous cores and OMP_NUM_THREADS of that; its memory bandwidth is its share of the
        sockets those cores sit on. Unbound, each rank's OpenMP pool spans every core and the
        ranks share the whole node's bandwidth equally (their threads time-share the cores)."""
        ranks = max(1, ranks)
        total = self.cpu_sockets * self.cores_per_socket
        cores = max(1, total // ranks)
        if bind_cores:
            sockets = max(1, math.ceil(cores / self.cores_per_socket))
            per_socket_ranks = max(1, math.ceil(ranks / self.cpu_sockets))
            share = (
                sockets
                * self.dram_gbps_per_socket
                / (per_socket_ranks if cores <= self.cores_per_socket else 1)
            )
        else:
            share = self.cpu_sockets * self.dram_gbps_per_socket / ranks
        # the pinned buffers (fp32 master and gradient, 16-bit staging): DeepSpeed's launcher
        # binds memory (numactl -m) only when a rank's cores lie in one NUMA node
        # (DS:deepspeed/utils/numa.py); otherwise they are where the thread that allocated
        # and first touched them runs: one NUMA node, whose bandwidth they share
        node_gbps = self.dram_gbps_per_socket / self.numa_nodes_per_socket
        spans = (
            (cores > self.cores_per_numa())
            if bind_cores
            else (self.cpu_sockets * self.numa_nodes_per_socket > 1)
        )
        pinned = node_gbps if (placement == "deepspeed" and spans) else share
        return CpuPool(
            cores, self.cpu_ghz, self.simd_fp32_lanes, self.per_core_dram_gbps, share, min(pinned, share)
        )


#: Node fields taken from the preset's [ssd] table when its [node] table does not give them
_SSD_KEYS = {"nvme_read_latency_us": "read_latency_us", "nvme_write_latency_us": "write_latency_us"}


def node_of(preset: dict) -> Node:
    """The [node] table of a preset as a Node; a preset without one is a one-GPU node built
    from its gpu/host/ssd sections (every [node] key may then be given as an override)."""
    d = preset.get("node")
    where = preset.get("path") or preset.get("name", "preset")
    if d is None:
        raise InputError(
            "this preset has no [node] table (GPUs, links, CPU sockets, NVMe): "
            "a data-parallel run needs one, e.g. --system dgx-a100-40",
            path=str(where),
            param="node",
        )
    vals = {}
    ssd = preset.get("ssd") or {}
    for f in fields(Node):
        v = d.get(f.name, f.default if f.default is not MISSING else None)
        name = f"node.{f.name}"
        zero_ok = f.name in _SSD_KEYS  # a latency may be 0
        if zero_ok and f.name not in d:
            name = f"ssd.{_SSD_KEYS[f.name]}"
            v = ssd.get(_SSD_KEYS[f.name], v)
        kind = int if f.type in ("int", int) else float
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or (v < 0 if zero_ok else v <= 0)
            or (kind is int and int(v) != v)
        ):
            raise InputError(
                f"{name} must be a finite number {'>= 0' if zero_ok else '> 0'}"
                + (" (an integer)" if kind is int else "")
                + f", got {v!r}",
                path=str(where),
                param=name,
            )
        vals[f.name] = kind(v)
    return Node(**vals)
