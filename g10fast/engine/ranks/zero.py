"""One training step of one data-parallel rank under DeepSpeed's ZeRO (stage 2 or 3, with or
without offloading to the CPU and NVMe), as a timeline of in-order resources and the links
they share.

What moves where and when is DeepSpeed's (../shared/specs/zero-family.md, read from
`DS:deepspeed/runtime/zero/stage_1_and_2.py`, `stage3.py`, `partitioned_param_coordinator.py`,
`partition_parameters.py`, `swap_tensor/`); every switch is a field of `ZeroSettings` with the
code's default and its documentation, the ZeRO policies' options (g10fast/policies/zero.py).

Resources (`timeline.Timeline`; each but the links executes in issue order):

* ``host``: the Python thread: kernel launches, `.item()` and stream synchronisations, the
  blocking copies; it runs ahead of the GPU until it has to wait for it;
* ``gpu``: the compute stream (kernels, and in stage 2 the bucket reductions and gradient
  copies, which DeepSpeed orders on it);
* ``nccl``: the collectives' stream over NVLink (stage 3's all-gather stream, stage 2's
  reduction stream with overlap_comm);
* ``reduce``: stage 3's gradient reduce stream (the bucket copies, the reduce-scatters and the
  shards' passes);
* ``h2d`` / ``d2h``: the rank's PCIe link, each direction (its share of a shared uplink): a
  copy is issued on a stream (the compute, all-gather or reduce stream), follows that
  stream's previous operation and takes the link at its first free time from then on, so a
  copy of one stream is not held up by an earlier-issued copy of another that is not ready;
* ``cpu``: the optimizer's OpenMP pool (CPU Adam, the unscale and the cast);
* ``nvme_read`` / ``nvme_write``: the rank's share of the NVMe set.

The step simulated is a steady one (DeepSpeed's stage-3 prefetch trace is recorded in step 2
and used from step 3 on). Times are integer nanoseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from g10fast.engine.ranks import cpu as cpu_model
from g10fast.engine.ranks.aio import Aio, io_ns
from g10fast.engine.ranks.collectives import collective_ns
from g10fast.engine.ranks.node import Node
from g10fast.engine.ranks.timeline import Timeline
from g10fast.errors import InputError

FWD, BWD, OPT = 0, 1, 2


@dataclass(frozen=True)
class ZeroSettings:
    """DeepSpeed's configuration keys a ZeRO run takes, each with the default DeepSpeed's code
    applies (not the docs' where they differ): ../shared/specs/zero-family.md, read from
    deepspeedai/DeepSpeed at edaa7221 (`deepspeed/runtime/zero/config.py`,
    `offload_config.py`, `swap_tensor/constants.py`). A ZeRO policy's options are these
    (g10fast/policies/zero.py) and the engine's mode carries them as they are: an option is
    declared here once."""

    #: `zero_optimization.reduce_bucket_size` (elements): gradients are reduced bucket by
    #: bucket (DS config.py, 5e8)
    reduce_bucket_size: float = 5e8
    #: `use_multi_rank_bucket_allreduce` (stage 2): one all-reduce per bucket (True, the
    #: default since PR #4695) or a reduce to each owner
    use_multi_rank_bucket_allreduce: bool = True
    #: `offload_optimizer.pin_memory` / `offload_param.pin_memory`: True since PR #8207
    #: (2026-08-07), False before; pageable copies are staged by the CUDA runtime
    pin_memory: bool = True
    #: pinned over pageable host copies: 6x, DeepSpeed PR #5301's measured speed-up of the
    #: offload copy on one GPU (4-5x on 8 GPUs)
    pageable_slowdown: float = 6.0
    #: `stage3_prefetch_bucket_size` (elements): the code's 5e7 (the docs say 5e8)
    prefetch_bucket_size: float = 5e7
    #: `stage3_max_live_parameters` (elements)
    max_live_parameters: float = 1e9
    #: `stage3_param_persistence_threshold` (elements): smaller parameters stay whole on
    #: every GPU
    param_persistence_threshold: float = 1e5
    #: `sub_group_size` (elements): the optimizer step's tile, NVMe's unit of swapping (the
    #: code's 1e9; the example JSON's 1e12)
    sub_group_size: float = 1e9
    #: `offload_param.buffer_count` / `buffer_size` (elements): pinned NVMe parameter buffers
    buffer_count: int = 5
    buffer_size: float = 1e8
    #: `offload_param.max_in_cpu` (elements per rank kept in pinned host memory with nvme)
    max_in_cpu: float = 1e9
    #: `offload_optimizer.buffer_count`: pinned optimizer swap buffers
    optimizer_buffer_count: int = 4
    #: `offload_optimizer.pipeline_read` / `pipeline_write`: overlap the next sub-group's
    #: read / the previous one's write with the current step
    pipeline_read: bool = False
    pipeline_write: bool = False
    #: the copy of a CPU- or NVMe-resident partition to the GPU before its all-gather blocks
    #: the host (`p.ds_tensor.to(device)` without non_blocking in `_all_gather_dtype`: a
    #: cudaMemcpyAsync and a stream synchronize), as the current code does
    h2d_fetch_blocking: bool = True
    #: issue #1130's pathology (2021 code): torch.cuda.synchronize() before each parameter's
    #: all-gather and a plain blocking copy_, so that no fetch overlaps compute (off: the
    #: current code)
    sync_before_allgather: bool = False
    #: `--bind_cores_to_rank`: each rank's OpenMP pool on its own physical cores (launcher
    #: default: off)
    bind_cores: bool = False
    #: where the pinned optimizer buffers (fp32 master, gradient, 16-bit staging) live:
    #: "deepspeed" (the launcher binds memory with numactl -m only when a rank's cores lie in
    #: one NUMA node, DS:deepspeed/utils/numa.py; otherwise the buffers stay where the
    #: allocating thread first touched them, one NUMA node) or "spread" (over every node of
    #: the rank's cores, as an interleaved allocation would) [ours]
    host_memory_placement: str = "deepspeed"
    #: `aio.block_size` (bytes): the size of one libaio request of the NVMe swapper
    #: (DS:deepspeed/runtime/swap_tensor/constants.py, 1048576; engine/ranks/aio.py)
    aio_block_size: int = Aio.block_size
    #: `aio.queue_depth`: requests a swapper thread keeps in flight (8; the Python
    #: `aio_handle()` constructor's own default, 128, is not what ZeRO-Infinity uses)
    aio_queue_depth: int = Aio.queue_depth
    #: `aio.intra_op_parallelism` (formerly `thread_count`): threads sharing one read or
    #: write (1)
    aio_intra_op_parallelism: int = Aio.intra_op_parallelism
    #: `aio.overlap_events`: a thread submits a new request as each completes (True) or
    #: waits for a whole batch of `aio_queue_depth` (False) (DS:csrc/aio/common/
    #: deepspeed_aio_common.cpp; g10fast/engine/ranks/aio.py has the time model)
    aio_overlap_events: bool = Aio.overlap_events
    #: `aio.use_gds`: GPUDirect Storage, the parameter swapper's buffers on the GPU: a
    #: partition read from NVMe lands there without a copy through host memory (False)
    aio_use_gds: bool = False
    #: [ours] the coordinator's NVMe read-ahead of parameter partitions
    #: (`__prefetch_nvme_param_partitions`: always on in DeepSpeed, bounded by `buffer_count`
    #: free swap buffers and twice the elements of the all-gathers in flight); False: every
    #: partition read at its use, as a what-if
    nvme_param_prefetch: bool = True

    def check_settings(self, prefix: str = "") -> None:
        """Each setting in its range; an error names it as `prefix` + its name."""
        for k in (
            "reduce_bucket_size",
            "prefetch_bucket_size",
            "max_live_parameters",
            "sub_group_size",
            "buffer_size",
            "max_in_cpu",
        ):
            if not getattr(self, k) > 0:
                raise InputError(f"must be > 0, got {getattr(self, k)!r}", param=prefix + k)
        for k in ("buffer_count", "optimizer_buffer_count"):
            if getattr(self, k) < 1:
                raise InputError(f"must be >= 1, got {getattr(self, k)!r}", param=prefix + k)
        if not self.pageable_slowdown >= 1:
            raise InputError(
                f"must be >= 1, got {self.pageable_slowdown!r}", param=prefix + "pageable_slowdown"
            )
        if self.host_memory_placement not in ("deepspeed", "spread"):
            raise InputError(
                f"must be deepspeed or spread, got {self.host_memory_placement!r}",
                param=prefix + "host_memory_placement",
            )
        self.aio.check(prefix + "aio_")

    @property
    def aio(self) -> Aio:
        return Aio(
            self.aio_block_size, self.aio_queue_depth, self.aio_intra_op_parallelism, self.aio_overlap_events
        )


@dataclass(frozen=True)
class ZeroMode(ZeroSettings):
    """What a ZeRO policy tells the ranks engine: its stage, what it offloads where, whether
    the gradients' reductions overlap the backward, and its settings (`ZeroSettings`)."""

    stage: int = 2
    offload_optimizer: str = "none"  # none | cpu | nvme
    offload_param: str = "none"  # none | cpu | nvme
    overlap_comm: bool = False

    def check(self):
        self.check_settings()
        if self.stage not in (2, 3):
            raise InputError(f"ZeRO stage must be 2 or 3, got {self.stage}", param="stage")
        for k in ("offload_optimizer", "offload_param"):
            v = getattr(self, k)
            if v not in ("none", "cpu", "nvme"):
                raise InputError(f"must be none, cpu or nvme, got {v!r}", param=k)
        if self.stage == 2 and self.offload_param != "none":
            raise InputError("parameters are offloaded by stage 3 only", param="offload_param")
        if self.stage == 2 and self.offload_optimizer == "nvme":
            raise InputError(
                "the optimizer goes to NVMe with stage 3 only (DeepSpeed's docs)", param="offload_optimizer"
            )


@dataclass
class ZeroView:
    """What the step model reads of a workload."""

    phase: np.ndarray  # int8[K]: FWD, BWD, OPT
    time_ns: np.ndarray  # int64[K]: the kernels' ideal times
    param: np.ndarray  # int64[P]: tensor id of each parameter, model order
    numel: np.ndarray  # int64[P]
    ready: np.ndarray  # int64[P]: kernel whose end makes the gradient ready (-1: none)
    reads: list  # per kernel: the parameter indices it reads
    activation_peak: int  # bytes: peak of the live non-parameter tensors (fwd + bwd)
    dtype_bytes: int


def kernel_phase(w) -> np.ndarray:
    """FWD / BWD / OPT per kernel: the workload's phases (`meta["kernel_phase"]`, as a
    capture or a pass records them), else read off the kernel names
    (g10fast.workload.fusion.kernel_phase; the optimizer's op class counts as the update)."""
    from g10fast.workload.costmodel import op_class_of
    from g10fast.workload.fusion import kernel_phases

    code = {"forward": FWD, "backward": BWD, "update": OPT}
    out = np.array([code.get(p, FWD) for p in kernel_phases(w)], np.int8)
    for k, n in enumerate(w.kernel_name):
        if op_class_of(n) == "optimizer":
            out[k] = OPT
    return out


def zero_view(w, f_hz: float) -> ZeroView:
    """Parameters, their gradients and the phases of a workload with an optimizer (a built-in
    or captured training step): a parameter is a global tensor that a forward kernel reads
    and an optimizer kernel updates; its gradient is the optimizer kernel's input that a
    backward kernel writes."""
    K, T = w.num_kernels, w.num_tensors
    phase = kernel_phase(w)
    if not (phase == OPT).any():
        raise InputError(
            "the workload has no optimizer kernels: ZeRO partitions an "
            "optimizer's state (use a training step)",
            param="workload",
        )
    glob = np.asarray(w.is_global, bool)
    producer = np.full(T, -1, np.int64)
    fwd_read = np.zeros(T, bool)
    for k in range(K):
        for t in w.outputs(k):
            if producer[t] < 0:
                producer[t] = k
        if phase[k] == FWD:
            fwd_read[w.inputs(k)] = True
    dtype = int(w.meta.get("dtype_bytes", 4))
    # An optimizer kernel's gradients belong to the parameters it reads; one that reads none
    # (PyTorch's for-loop AdamW: `exp_avg.lerp_(grad)`) belongs to the parameter its other
    # tensors (state, temporaries) link it to through the step's other kernels, where that is
    # one parameter. A parameter's gradient is ready when its last gradient is (a weight used
    # twice, a tied embedding: one gradient a use in a built-in graph, their sum in PyTorch).
    opt_k = [int(k) for k in np.flatnonzero(phase == OPT)]
    root = np.arange(T)

    def find(x):
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    is_grad = (~glob) & (producer >= 0) & (phase[np.maximum(producer, 0)] == BWD)
    per_k = []
    for k in opt_k:
        ins = w.inputs(k)
        p = [int(t) for t in ins if glob[t] and fwd_read[t]]
        g = [int(t) for t in ins if is_grad[t]]
        links = [int(t) for t in np.concatenate([ins, w.outputs(k)]) if not is_grad[t]]
        for t in links[1:]:
            root[find(t)] = find(links[0])
        per_k.append((p, g, links[0] if links else -1))
    params, seen = [], set()
    comp_params: dict = {}
    for p, _, _ in per_k:
        for t in p:
            if t not in seen:
                seen.add(t)
                params.append(t)
                comp_params.setdefault(find(t), set()).add(t)
    last_grad = {t: -1 for t in params}
    grads = np.zeros(T, bool)
    for p, g, link in per_k:
        grads[g] = True
        owners = p
        if not owners and link >= 0 and len(comp_params.get(find(link), ())) == 1:
            owners = list(comp_params[find(link)])
        for t in owners:
            last_grad[t] = max([last_grad[t]] + [int(producer[x]) for x in g])
    ready = [last_grad[t] for t in params]
    first_fwd = np.full(T, K, np.int64)
    for k in range(K - 1, -1, -1):
        if phase[k] == FWD:
            first_fwd[w.inputs(k)] = k
    order = np.argsort([first_fwd[t] for t in params], kind="stable")
    params = [params[i] for i in order]
    ready = [ready[i] for i in order]
    pidx = {t: i for i, t in enumerate(params)}
    reads = [
        [pidx[int(t)] for t in w.inputs(k) if int(t) in pidx] if phase[k] != OPT else [] for k in range(K)
    ]
    numel = np.array([max(1, int(w.raw_size[t]) // dtype) for t in params], np.int64)
    # activations: live ranges of non-global, non-gradient tensors over forward + backward
    acc = np.zeros(K + 1, np.int64)
    last = np.full(T, -1, np.int64)
    first = np.full(T, K, np.int64)
    for k in range(K):
        if phase[k] == OPT:
            continue
        for t in np.concatenate([w.inputs(k), w.outputs(k)]):
            first[t] = min(first[t], k)
            last[t] = max(last[t], k)
    keep = (~glob) & (~grads) & (last >= 0)
    np.add.at(acc, first[keep], np.asarray(w.size, np.int64)[keep])
    np.add.at(acc, last[keep] + 1, -np.asarray(w.size, np.int64)[keep])
    peak = int(np.cumsum(acc)[:K].max()) if K else 0
    t_ns = np.ceil(np.asarray(w.exec_cycles, np.float64) / f_hz * 1e9).astype(np.int64)
    return ZeroView(
        phase, t_ns, np.asarray(params, np.int64), numel, np.asarray(ready, np.int64), reads, peak, dtype
    )


@dataclass
class StepResult:
    """One simulated step: its time, the timeline, the memory it needs and what it moved."""

    step_ns: int
    timeline: Timeline
    gpu_bytes: dict
    host_bytes: dict
    counts: dict = field(default_factory=dict)
    failure: dict | None = None


class _Step:
    """Builds one step's operations (see the module docstring)."""

    def __init__(
        self,
        node: Node,
        ranks: int,
        mode: ZeroMode,
        hbm_gbps: float,
        small_kernel_us: float,
    ):
        self.node, self.P, self.m = node, ranks, mode
        self.tl = Timeline()
        self.hbm = hbm_gbps * 1e9
        self.small_ns = small_kernel_us * 1e3
        self.pcie = node.pcie_share_gbps(ranks) * 1e9
        if not mode.pin_memory:
            # pageable host memory: the runtime stages every copy; DeepSpeed PR #5301
            # measured the offload copy 6x faster once pinned (4-5x on 8 GPUs)
            self.pcie /= mode.pageable_slowdown
        self.pool = node.cpu_pool(ranks, mode.bind_cores, mode.host_memory_placement)
        self.nvme_r = node.nvme_read_gbps / ranks
        self.nvme_w = node.nvme_write_gbps / ranks
        self.aio = mode.aio
        self.last_gpu = None
        self.counts = {"host_syncs": 0, "collectives": 0, "fetches": 0, "kernels": 0}

    # ---- primitives -------------------------------------------------------------------
    def launch(self, seconds_ns: int, label: str, deps=(), kind: str = "compute") -> int:
        """The host launches a GPU operation; the stream runs it after its predecessors."""
        h = self.tl.add("host", self.node.launch_us * 1e3, label=f"launch {label}", kind="launch")
        g = self.tl.add("gpu", seconds_ns, (h, self.last_gpu, *deps), label=label, kind=kind)
        self.last_gpu = g
        self.counts["kernels"] += 1
        return g

    def host_sync(self, on: int | None, label: str, deps=()) -> int:
        """The host waits for operation `on` (a stream's tail; and `deps`) and a round trip."""
        self.counts["host_syncs"] += 1
        return self.tl.add("host", self.node.host_sync_us * 1e3, (on, *deps), label=label, kind="sync")

    def device_sync(self, label: str) -> int:
        """`torch.cuda.synchronize()`: the host waits for all the device's work issued so far
        (every stream and copy) and a round trip."""
        return self.host_sync(None, label, deps=self.tl.last_of("gpu", "nccl", "reduce", "h2d", "d2h"))

    def small_kernel(self, nbytes: float, label: str) -> int:
        return self.launch(nbytes / self.hbm * 1e9 + self.small_ns, label, kind="compute")

    def passes(self, sizes: list, n: float, label: str) -> int:
        """`small_kernel`s one after another, one a pass of `sizes[k]` bytes an element over
        `n` elements; the last one's id."""
        for b in sizes:
            g = self.small_kernel(b * n, label)
        return g

    def side_kernel(self, nbytes: float, label: str, deps=(), stream: str = "nccl") -> int:
        """An element-wise kernel on a side stream (DeepSpeed's all-gather stream, "nccl", or
        stage 3's gradient reduce stream, "reduce"): its bytes at the HBM bandwidth and a
        launch, as `small_kernel`."""
        h = self.tl.add("host", self.node.launch_us * 1e3, label=f"launch {label}", kind="launch")
        self.counts["kernels"] += 1
        return self.tl.add(
            stream, nbytes / self.hbm * 1e9 + self.small_ns, (h, *deps), label=label, kind="compute"
        )

    def collective(self, op: str, nbytes: float, label: str, stream: str, deps=()) -> int:
        self.counts["collectives"] += 1
        t = collective_ns(op, nbytes, self.P, self.node.nvlink_busbw_gbps)
        if stream == "gpu":
            h = self.tl.add("host", self.node.launch_us * 1e3, label=f"launch {label}", kind="launch")
            g = self.tl.add(
                "gpu", t, (h, self.last_gpu, *deps), label=label, kind="collective", nbytes=int(nbytes)
            )
            self.last_gpu = g
            return g
        h = self.tl.add("host", self.node.launch_us * 1e3, label=f"launch {label}", kind="launch")
        return self.tl.add(stream, t, (h, *deps), label=label, kind="collective", nbytes=int(nbytes))

    def copy(self, direction: str, nbytes: float, label: str, deps=(), *, stream: str) -> int:
        """A copy issued on CUDA stream `stream` over the rank's link in `direction` (its
        share of it): after the stream's previous operation, at the link's first free time
        (`timeline.Timeline`: the streams share the link)."""
        return self.tl.add(
            direction,
            nbytes / self.pcie * 1e9,
            deps,
            label=label,
            kind=direction,
            nbytes=int(nbytes),
            stream=stream,
        )

    def nvme(self, direction: str, nbytes: float, label: str, deps=()) -> int:
        """One aio request of DeepSpeed's swapper (`aio.io_ns`: the rank's share of the NVMe
        set, the SSD's access latency, the `aio_*` settings)."""
        if direction == "read":
            bw, lat = self.nvme_r, self.node.nvme_read_latency_us
        else:
            bw, lat = self.nvme_w, self.node.nvme_write_latency_us
        return self.tl.add(
            f"nvme_{direction}",
            io_ns(nbytes, bw, lat, self.aio),
            deps,
            label=label,
            kind=f"nvme_{direction}",
            nbytes=int(nbytes),
        )

    def cpu(self, ns: int, label: str, deps=()) -> int:
        return self.tl.add("cpu", ns, deps, label=label, kind="cpu")


def nvme_gpu_gbps(node: Node, mode: ZeroMode, nbytes: float, direction: str) -> float:
    """What DeepSpeed's `ds_io` benchmark reports for one request of `nbytes` between the NVMe
    set and a GPU buffer, on one rank of `node` with `mode`'s aio settings, in GB/s, built from
    the step's own primitives (`_Step.nvme`, `_Step.copy`). Without GPUDirect Storage the
    request goes through a pinned host buffer whole (DS:csrc/aio/py_lib/deepspeed_cpu_op.cpp:
    a read fills it and then `fini` copies it to the GPU; a write first copies the GPU buffer
    to the host, `.to(kCPU).pin_memory()`, whose second, host-side copy is not modelled);
    with `aio_use_gds` the NVMe moves it to or from the GPU itself."""
    st = _Step(node, 1, mode, 1.0, 0.0)
    if direction == "read":
        op = st.nvme("read", nbytes, "ds_io read")
        if not mode.aio_use_gds:
            op = st.copy("h2d", nbytes, "bounce buffer to GPU", deps=(op,), stream="gpu")
    elif direction == "write":
        deps = () if mode.aio_use_gds else (st.copy("d2h", nbytes, "GPU to bounce buffer", stream="gpu"),)
        op = st.nvme("write", nbytes, "ds_io write", deps=deps)
    else:
        raise InputError(f"direction must be read or write, got {direction!r}", param="direction")
    return nbytes / st.tl.finish[op]


def _owned_elements(numel: np.ndarray, ranks: int) -> np.ndarray:
    """Elements of each parameter in rank 0's partition of the flat group (DeepSpeed
    partitions the flat 16-bit group into equal contiguous ranges)."""
    total = int(numel.sum())
    part = -(-total // ranks)
    start = np.concatenate([[0], np.cumsum(numel)[:-1]])
    return np.clip(np.minimum(start + numel, part) - start, 0, None)


def simulate_step(
    v: ZeroView,
    node: Node,
    ranks: int,
    mode: ZeroMode,
    *,
    gpu_memory_bytes: int,
    hbm_gbps: float,
    small_kernel_us: float,
) -> StepResult:
    """One steady training step of rank 0 (every rank is alike)."""
    mode.check()
    if not 1 <= ranks <= node.gpus:
        raise InputError(f"{ranks} ranks on a node of {node.gpus} GPUs", param="--gpus")
    P = ranks
    N = int(v.numel.sum())
    Np = -(-N // P)
    b16 = v.dtype_bytes if v.dtype_bytes < 4 else 4
    st = _Step(node, ranks, mode, hbm_gbps, small_kernel_us)
    gpu_mem, host_mem = _memory(v, mode, P, N, Np, b16)
    res = StepResult(0, st.tl, gpu_mem, host_mem, st.counts)
    need = sum(gpu_mem.values())
    if need > gpu_memory_bytes:
        res.failure = {
            "stage": "memory",
            "reason": f"out of GPU memory: the step needs {need / 2**30:.2f} GiB "
            f"("
            + ", ".join(f"{k} {b / 2**30:.2f}" for k, b in gpu_mem.items())
            + f") on a {gpu_memory_bytes / 2**30:.1f} GiB GPU",
        }
        return res
    host_need = sum(host_mem.values())
    if host_need > node.dram_gb * 1e9 / P:
        res.failure = {
            "stage": "memory",
            "reason": f"out of host memory: each rank needs {host_need / 2**30:.1f} "
            f"GiB of the node's {node.dram_gb:.0f} GB",
        }
        return res
    if mode.stage == 2:
        _stage2(st, v, mode, P, N, Np, b16)
    else:
        _stage3(st, v, mode, P, N, Np, b16)
    res.step_ns = st.tl.makespan
    return res


def _memory(v: ZeroView, mode: ZeroMode, P: int, N: int, Np: int, b16: int):
    """Bytes the step keeps on the GPU and in host memory (zero-family.md §1.2, §3.2, §3.5)."""
    gpu = {"activations": v.activation_peak}
    host = {}
    bucket = int(min(mode.reduce_bucket_size, N)) * b16 * (2 if mode.overlap_comm else 1)
    if mode.stage == 2:
        gpu["parameters"] = N * b16
        gpu["gradient buckets"] = bucket
        if mode.offload_optimizer == "none":
            gpu["optimizer (fp32 master, moments, gradient)"] = 16 * Np
        else:
            host["optimizer (fp32 master, moments, gradient)"] = 16 * Np
            host["16-bit staging"] = b16 * Np
    else:
        persist = int(v.numel[v.numel <= mode.param_persistence_threshold].sum())
        live = int(min(mode.max_live_parameters, N))
        gpu["persistent parameters"] = persist * b16
        gpu["gathered parameters (max live)"] = min(live, N) * b16
        gpu["gradient buckets"] = bucket
        if mode.offload_param == "none":
            gpu["parameter partition"] = Np * b16
        elif mode.offload_param == "cpu" or Np <= mode.max_in_cpu:
            host["parameter partition (pinned)"] = Np * b16
        else:
            host["parameter partition (pinned, max_in_cpu)"] = int(mode.max_in_cpu) * b16
            host["parameter swap buffers"] = int(mode.buffer_count * mode.buffer_size) * b16
        if mode.offload_optimizer == "none":
            gpu["optimizer (fp32 master, moments, gradient)"] = 16 * Np
        elif mode.offload_optimizer == "cpu":
            host["optimizer (fp32 master, moments, gradient)"] = 16 * Np
        else:
            host["optimizer swap buffers"] = (
                int(mode.optimizer_buffer_count * min(mode.sub_group_size, Np)) * 4
            )
    return gpu, host


def _compute(st: _Step, v: ZeroView, k: int, deps=()) -> int:
    return st.launch(int(v.time_ns[k]), f"k{k}", deps)


def _inf_nan_passes(b16: int) -> list:
    """Bytes an element of each kernel of DeepSpeed's eager `_has_inf_or_nan(x)`: `x.float()`
    (a copy unless x is fp32 already), isnan, isinf, logical_or, `.float()`, max
    (DS:deepspeed/runtime/zero/stage_1_and_2.py)."""
    first = [b16 + 4] if b16 < 4 else []
    return first + [5, 5, 3, 5, 4]


def _norm_passes(b16: int) -> list:
    """Bytes an element of a gradient norm in float64: `g.double()`, then the norm's read."""
    return [b16 + 8, 8]


def _stage2(st: _Step, v: ZeroView, m: ZeroMode, P: int, N: int, Np: int, b16: int):
    """ZeRO-2 (zero-family.md §1.3; DS:deepspeed/runtime/zero/stage_1_and_2.py): full 16-bit
    weights on every GPU, no collective in the forward. In the backward each ready gradient
    is copied into the bucket (`reduce_independent_p_g_buckets_and_remove_grads`; not one
    larger than reduce_bucket_size); each full bucket is divided by the world size, flattened
    when it holds several ranks' slices, all-reduced (use_multi_rank_bucket_allreduce, the
    default) or reduced to its owners, on the compute stream unless overlap_comm, and this
    rank's slices copied back. Without offload this rank's parameters' gradients are copied
    into its partition's buffer, and the step runs on the GPU over the owned elements: the
    inf/nan check and the `.item()`, the float64 norm, flatten, the fp32 cast, clipping,
    FusedAdam, the 16-bit copy, the all-gather. With the optimizer on the CPU each owned
    slice is normed, checked for inf/nan (a host sync), cast to fp32 and copied to the host;
    the step runs on the CPU (unscale, CPU Adam, cast), the updated 16-bit partition goes back
    to the GPU and is all-gathered. The element-wise passes take `small_kernel` times (their
    bytes at the HBM bandwidth, one launch each)."""
    K = len(v.phase)
    owned = _owned_elements(v.numel, P)
    start = np.concatenate([[0], np.cumsum(v.numel)[:-1]])
    part = -(-int(v.numel.sum()) // P)
    first_rank = start // part
    last_rank = (start + v.numel - 1) // part
    by_ready: dict[int, list] = {}
    for i, k in enumerate(v.ready.tolist()):
        by_ready.setdefault(k, []).append(i)
    bucket: list = []
    bucket_el = 0
    offload = m.offload_optimizer != "none"
    stream = "nccl" if m.overlap_comm else "gpu"

    def flush():
        nonlocal bucket, bucket_el
        if not bucket:
            return
        st.small_kernel(2 * b16 * bucket_el, "bucket /= world size")
        # several ranks' slices in the bucket: they are flattened into one buffer for the
        # collective and this rank's copied back after it
        several = int(first_rank[bucket].min()) != int(last_rank[bucket].max())
        if several:
            st.small_kernel(2 * b16 * bucket_el, "flatten bucket")
        op = "all_reduce" if m.use_multi_rank_bucket_allreduce else "reduce_scatter"
        r = st.collective(op, bucket_el * b16, f"bucket {op} ({bucket_el:,} el)", stream, deps=(st.last_gpu,))
        if stream != "gpu":
            st.last_gpu = st.tl.add("gpu", 0, (st.last_gpu, r), label="wait reduction", kind="wait")
        mine = int(owned[bucket].sum())
        if several and mine:
            st.small_kernel(2 * b16 * mine, "owned slices back")
        for i in bucket:
            e = int(owned[i])
            if e <= 0:
                continue
            if not offload:
                # the whole parameter's gradient into the partition's buffer
                st.small_kernel(2 * b16 * int(v.numel[i]), f"grad p{i} into partition")
                continue
            st.passes(_norm_passes(b16), e, f"norm p{i}")  # float64 norm of the slice
            chk = st.passes(_inf_nan_passes(b16), int(v.numel[i]), f"inf/nan p{i}")
            st.host_sync(chk, f"inf/nan check p{i}")  # a Python `if` on a GPU bool
            cast = st.small_kernel((b16 + 4) * e, f"fp32 cast p{i}")
            c = st.copy("d2h", 4 * e, f"fp32 grad p{i}", deps=(cast,), stream=stream)
            if stream == "gpu":  # ordered on the compute stream
                st.last_gpu = st.tl.add("gpu", 0, (c,), label="copy done", kind="wait")
        bucket, bucket_el = [], 0

    for k in range(K):
        if v.phase[k] == OPT:
            continue
        _compute(st, v, k)
        for i in by_ready.get(k, ()):
            if bucket_el + int(v.numel[i]) > m.reduce_bucket_size and bucket:
                flush()
            bucket.append(i)
            bucket_el += int(v.numel[i])
            if v.numel[i] <= m.reduce_bucket_size:
                st.small_kernel(2 * b16 * int(v.numel[i]), f"grad p{i} into bucket")
    flush()
    if m.overlap_comm:  # the epilogue's device synchronize
        st.last_gpu = st.tl.add(
            "gpu", 0, (st.last_gpu, *st.tl.last_of("nccl", "d2h")), label="epilogue", kind="wait"
        )
        st.host_sync(st.last_gpu, "epilogue synchronize")
    mine = np.flatnonzero(owned > 0)
    if not offload:
        # the step on the GPU over this rank's elements (`step`): the overflow check per
        # gradient and its `.item()`, the float64 norm per gradient, then the flat partition
        chk = st.last_gpu
        for i in mine:
            chk = st.passes(_inf_nan_passes(b16), int(owned[i]), f"inf/nan p{i}")
        st.host_sync(chk, "overflow .item()")
        for i in mine:
            st.passes(_norm_passes(b16), int(owned[i]), f"norm p{i}")
        st.small_kernel(2 * b16 * Np, "flatten partition")
        st.small_kernel((b16 + 4) * Np, "fp32 cast")
        st.small_kernel(8 * Np, "clip (mul_)")
        st.small_kernel(28 * Np, "FusedAdam")  # reads g, p, m, v; writes p, m, v (fp32)
        st.small_kernel((4 + b16) * Np, "16-bit copy of the partition")
        st.collective("all_gather", N * b16, "all-gather 16-bit params", "gpu")
        return
    # the step on the host (stage_1_and_2.py `step`)
    ov = st.collective("all_reduce", 1, "overflow all-reduce", "gpu")
    st.host_sync(ov, "overflow .item()")
    for i in mine:
        st.host_sync(st.last_gpu, f"norm .item() p{i}")
    nr = st.collective("all_reduce", 8, "norm all-reduce", "gpu")
    h = st.host_sync(nr, "norm .item()")
    c1 = st.cpu(cpu_model.unscale_ns(Np, st.pool), "unscale and clip", deps=(h,))
    c2 = st.cpu(cpu_model.adam_ns(Np, st.pool), "CPU Adam", deps=(c1,))
    c3 = st.cpu(cpu_model.cast_ns(Np, st.pool), "fp32 -> 16-bit cast", deps=(c2,))
    h = st.tl.add("host", 0, (c3,), label="step returns", kind="wait")
    up = st.copy("h2d", b16 * Np, "16-bit partition to GPU", deps=(h,), stream="gpu")
    st.last_gpu = st.tl.add("gpu", 0, (st.last_gpu, up), label="copy done", kind="wait")
    st.collective("all_gather", N * b16, "all-gather 16-bit params", "gpu")


def _nvme_read_ahead(units, jj, at, numel, home_nvme, read_op, ahead, buffer_count, swap_in):
    """The coordinator's NVMe read-ahead after each prefetch (`__prefetch_nvme_param_partitions`,
    DS:deepspeed/runtime/zero/partitioned_param_coordinator.py): walking the trace on from
    where the prefetch stopped (unit `jj`, its parameter `at`), it swaps in, as one async
    batch, the partitions still on NVMe, until the elements it has looked at exceed twice
    those of the all-gathers in flight or it has as many as there are free swap buffers
    (`buffer_count` less the partitions held)."""
    in_flight = 2 * sum(ahead.values())
    free = buffer_count - len(read_op)
    seen, batch = 0, []
    for u in range(jj, len(units)):
        for i in units[u][at if u == jj else 0 :]:
            if seen > in_flight or len(batch) >= free:
                break
            if home_nvme[i] and i not in read_op and i not in batch:
                batch.append(i)
            seen += int(numel[i])
        else:
            continue
        break
    if batch:
        swap_in(batch)


def _stage3(st: _Step, v: ZeroView, m: ZeroMode, P: int, N: int, Np: int, b16: int):
    """ZeRO-3 (zero-family.md §3.2-3.5): parameters partitioned (those of at most
    param_persistence_threshold elements stay whole); before a kernel its parameters are
    fetched (an NVMe read where their partition lives there, the copy of this rank's
    partition to the GPU, an all-gather) and prefetched ahead up to prefetch_bucket_size
    elements and max_live_parameters gathered (stopping at a partition still on NVMe), the
    next NVMe partitions read ahead into free swap buffers (`_nvme_read_ahead`, unless
    nvme_param_prefetch is off); the copy to the GPU blocks the host
    (`.to(device)` without non_blocking: h2d_fetch_blocking) and, with sync_before_allgather,
    the whole device first (the 2021 code of issue #1130); a call that fetches several
    parameters concatenates their partitions first and copies each gathered one out at its
    wait; after the kernel they are released. In the backward each ready gradient is copied
    into the bucket; a full bucket is interleaved by rank, divided by the world size and
    reduce-scattered; with the optimizer offloaded each shard goes to its pinned host buffer
    and back (`partition_grads`), is normed (float64) and cast on the GPU and its fp32 copy
    goes to the host (or NVMe). The step runs sub-group by sub-group (on the CPU: the norm's
    two host syncs, unscale, CPU Adam, cast; on the GPU: DeepSpeed's passes and FusedAdam),
    then `_post_step` gathers the persistent parameters again (stage3.py, traced)."""
    K = len(v.phase)
    persist = v.numel <= m.param_persistence_threshold
    home_nvme = np.zeros(len(v.numel), bool)
    if m.offload_param == "nvme":
        # the first max_in_cpu partition elements per rank stay in pinned host memory
        part = -(-v.numel // P)
        cum = np.cumsum(np.where(persist, 0, part))
        home_nvme = (~persist) & (cum > m.max_in_cpu) & (part * b16 >= 1 << 20)
    gathered = np.zeros(len(v.numel), bool)
    fetch_end: dict[int, int] = {}
    order = [k for k in range(K) if v.phase[k] != OPT]
    units = [[i for i in v.reads[k] if not persist[i]] for k in order]
    live_el = 0
    # NVMe partitions in a swap buffer (read, or being read) until their release, with their
    # reads; `pending`: those read asynchronously and not yet waited for (INFLIGHT)
    read_op: dict[int, int] = {}
    pending: set = set()
    last_read = [None]
    ahead: dict[int, int] = {}  # all-gathered ahead of their use (the coordinator's in-flight registry)

    def swap_in(ids: list) -> None:
        for i in ids:
            read_op[i] = last_read[0] = st.nvme("read", b16 * -(-int(v.numel[i]) // P), f"swap in p{i}")
            pending.add(i)

    coalesced: set = set()  # fetched with others in one call: their gathered copy still to make

    def fetch(ids: list) -> int:
        """One `all_gather_coalesced` call for the parameters `ids` (a sub-module's, or one
        prefetch): their NVMe partitions made available first
        (`_ensure_availability_of_partitioned_params`: those not read are swapped in, one read
        each, and the host waits for every read; else, if some are being read,
        `synchronize_reads`), each partition copied to the GPU (`.to(device)`), then for
        several parameters one `torch.cat` into the send buffer and one all-gather of it
        (`_all_gather_dtype`), for one its own all-gather (`_all_gather_sequential`)."""
        nonlocal live_el
        st.counts["fetches"] += 1
        nvme = [i for i in ids if home_nvme[i]]
        unread = [i for i in nvme if i not in read_op]
        wait = None
        if unread:
            swap_in(unread)  # `swap_in(async_op=False)`: read now, and waited for
        if any(i in pending for i in nvme):
            # `synchronize_reads`: the host waits for every read issued so far
            wait = last_read[0]
            pending.clear()
        if wait is not None:
            st.tl.add("host", 0, (wait,), label="synchronize reads", kind="wait")
        parts = []
        for i in ids:
            e_part = -(-int(v.numel[i]) // P)
            deps = () if not home_nvme[i] else ((read_op[i] if wait is None else wait),)
            if m.sync_before_allgather and m.offload_param != "none":
                st.device_sync(f"device synchronize p{i}")
            # with GPUDirect Storage the swapper's buffers are on the GPU: the partition read
            # from NVMe is there already (`.to(device)` is a no-op)
            if m.offload_param != "none" and not (home_nvme[i] and m.aio_use_gds):
                # the copy is issued on the all-gather stream (`_all_gather_dtype`), after the
                # all-gathers already there; a blocking one waits for them all
                cp = st.copy("h2d", b16 * e_part, f"partition p{i} to GPU", deps=deps, stream="nccl")
                if m.h2d_fetch_blocking:
                    st.host_sync(cp, f"blocking copy p{i}")
                deps = (cp,)
            parts.extend(deps)
        el = int(sum(int(v.numel[i]) for i in ids))
        name = f"p{ids[0]}" if len(ids) == 1 else f"p{ids[0]}..p{ids[-1]} ({len(ids)})"
        deps = tuple(parts)
        if len(ids) > 1:
            # several parameters in one call: their partitions concatenated into the send
            # buffer (`torch.cat(..., out=...)`, one kernel), and each gathered one copied
            # out at its wait
            e_all = sum(-(-int(v.numel[i]) // P) for i in ids)
            deps = (st.side_kernel(2 * b16 * e_all, f"cat {name}", deps=deps),)
            coalesced.update(ids)
        ag = st.collective("all_gather", b16 * el, f"all-gather {name}", "nccl", deps=deps)
        for i in ids:
            gathered[i] = True
            fetch_end[i] = ag
        live_el += el
        return ag

    # the backward's gradient buckets: reduce-scatter, then the partition to the host
    by_ready: dict[int, list] = {}
    for i, k in enumerate(v.ready.tolist()):
        by_ready.setdefault(k, []).append(i)
    bucket: list = []
    bucket_el = 0
    reduce_events: list = []  # each reduced bucket's end on the reduce stream

    def flush():
        nonlocal bucket, bucket_el
        if not bucket:
            return
        # at most max_param_reduce_events (2) buckets outstanding: the host waits for the
        # oldest before reducing another (`__reduce_and_partition_ipg_grads`)
        if len(reduce_events) > 2:
            st.tl.add("host", 0, (reduce_events.pop(0),), label="reduce event synchronize", kind="wait")
        # reduce_scatter_coalesced: the ranks' chunks interleaved into one buffer (not for a
        # single tensor that divides evenly), divided by the world size, reduce-scattered
        prep = st.last_gpu
        if not (len(bucket) == 1 and bucket_el % P == 0):
            prep = st.side_kernel(2 * b16 * bucket_el, "interleave bucket", (prep,), "reduce")
        prep = st.side_kernel(2 * b16 * bucket_el, "bucket /= world size", (prep,), "reduce")
        rs = st.collective(
            "reduce_scatter",
            bucket_el * b16,
            f"reduce-scatter ({bucket_el:,} el)",
            "reduce",
            deps=(prep,),
        )
        done = rs
        e = -(-bucket_el // P)
        if m.offload_optimizer != "none":
            # partition_grads, parameter by parameter on the reduce stream: its shard to its
            # (pinned, host) buffer and straight back, its float64 norm
            # (`_constant_buffered_norm2`) and fp32 cast on the GPU, the fp32 shard to the host
            for i in bucket:
                ei = -(-int(v.numel[i]) // P)
                d = st.copy("d2h", b16 * ei, f"grad shard p{i} to host", deps=(rs,), stream="reduce")
                g = st.copy("h2d", b16 * ei, f"grad shard p{i} back to GPU", deps=(d,), stream="reduce")
                for nb in (*_norm_passes(b16), b16 + 4):
                    g = st.side_kernel(nb * ei, f"shard p{i} norm / fp32 cast", (g,), "reduce")
                done = c = st.copy("d2h", 4 * ei, f"fp32 grad partition p{i}", deps=(g,), stream="reduce")
            if m.offload_optimizer == "nvme":
                st.nvme("write", 4 * e, "gradients to NVMe", deps=(c,))
        else:
            done = st.side_kernel(2 * b16 * e, "grad shard copy", (rs,), "reduce")
        reduce_events.append(done)
        bucket, bucket_el = [], 0

    window = min(m.prefetch_bucket_size, m.max_live_parameters)
    ongoing: list = []  # the coordinator's fetch events: all-gathers waited for, maybe not done
    for j, k in enumerate(order):
        need = list(dict.fromkeys(i for i in units[j] if not gathered[i]))
        if need:
            fetch(need)
        for i in units[j]:
            if i in need or i in ahead:
                # waiting for its all-gather: at most max_ongoing_fetch_events (2) earlier
                # ones not known done, else the host waits for the oldest (`fetch_sub_module`)
                now = st.tl.tail("host")
                while ongoing and st.tl.end(ongoing[0]) <= now:
                    ongoing.pop(0)
                if len(ongoing) > 2:
                    st.tl.add("host", 0, (ongoing.pop(0),), label="fetch event synchronize", kind="wait")
                if i in coalesced:  # its gathered copy, made at the wait on the all-gather stream
                    coalesced.discard(i)
                    fetch_end[i] = st.side_kernel(
                        2 * b16 * int(v.numel[i]), f"gathered p{i}", deps=(fetch_end[i],)
                    )
                ongoing.append(fetch_end[i])
            ahead.pop(i, None)  # waited for now
        # prefetch the next units' parameters up to the bucket and max-live budgets (one
        # call); the coordinator stops at the first partition still on NVMe (not read, not
        # being read), to keep the trace's order
        inflight, live = 0, live_el
        jj, at = j + 1, 0
        batch: dict = {}
        while jj < len(order) and inflight < window and live < m.max_live_parameters:
            stop = False
            for at, i in enumerate(units[jj]):
                if not gathered[i] and i not in batch:
                    if home_nvme[i] and i not in read_op:
                        stop = True
                        break
                    batch[i] = None
                    inflight += int(v.numel[i])
                    live += int(v.numel[i])
            if stop:
                break
            jj, at = jj + 1, 0
        if batch:
            fetch(list(batch))
        for i in batch:
            ahead[i] = int(v.numel[i])
        if m.offload_param == "nvme" and m.nvme_param_prefetch:
            _nvme_read_ahead(units, jj, at, v.numel, home_nvme, read_op, ahead, m.buffer_count, swap_in)
        deps = tuple(fetch_end[i] for i in units[j])
        _compute(st, v, k, deps)
        # release what no later kernel of this pass needs next (max_reuse_distance aside)
        for i in units[j]:
            later = any(i in units[x] for x in range(j + 1, min(len(order), j + 4)))
            if gathered[i] and not later:
                gathered[i] = False
                live_el -= int(v.numel[i])
                read_op.pop(i, None)  # its swap buffer returns (nothing to write back)
                pending.discard(i)
        for i in by_ready.get(k, ()):
            if bucket_el + int(v.numel[i]) > m.reduce_bucket_size and bucket:
                flush()
            bucket.append(i)
            bucket_el += int(v.numel[i])
            if v.numel[i] <= m.reduce_bucket_size:  # into the bucket (`__add_grad_to_ipg_bucket`)
                st.side_kernel(2 * b16 * int(v.numel[i]), f"grad p{i} into bucket", (st.last_gpu,), "reduce")
    flush()
    st.last_gpu = st.tl.add(
        "gpu",
        0,
        (st.last_gpu, *st.tl.last_of("nccl", "reduce", "d2h", "nvme_write")),
        label="epilogue",
        kind="wait",
    )
    st.host_sync(st.last_gpu, "epilogue synchronize")
    groups = max(1, math.ceil(Np / m.sub_group_size))
    if m.offload_optimizer == "none":
        # FusedAdam on the GPU, sub-group by sub-group: each gradient's float64 norm, then
        # the shards concatenated and cast to fp32, clipping, Adam, the 16-bit copy
        for i in np.flatnonzero(~persist):
            st.passes(_norm_passes(b16), -(-int(v.numel[i]) // P), f"norm p{i}")
        for gi in range(groups):
            e = min(m.sub_group_size, Np - gi * m.sub_group_size)
            passes = ((2 * b16, "flatten"), (b16 + 4, "fp32 cast"), (8, "clip (mul_)"), (28, "FusedAdam"))
            for nb, lab in (*passes, (4 + b16, "16-bit copy")):
                st.small_kernel(nb * e, f"{lab} (group {gi})")
        _post_step(st, v, m, persist, P, b16)
        return
    prev_write = None
    # complete_grad_norm_calculation_for_cpu_offload: `total_norm += param_norm**2` for each
    # parameter's gradient norm (two tiny kernels on the GPU, each a launch from the host)
    for i in range(len(v.numel)):
        st.passes((0, 0), 1, f"norm**2 and sum p{i}")
    h = st.last_gpu
    for gi in range(groups):
        e = min(m.sub_group_size, Np - gi * m.sub_group_size)
        # the norm's `float(total_norm)` and `.cpu()` (complete_grad_norm_calculation_for_cpu_offload)
        h = st.host_sync(st.host_sync(h, f"norm float() (group {gi})"), f"norm .cpu() (group {gi})")
        deps = (h,)
        if m.offload_optimizer == "nvme":
            rd = st.nvme(
                "read",
                16 * e,
                f"optimizer state in (group {gi})",
                deps=() if m.pipeline_read else (h, prev_write),
            )
            deps = (h, rd)
        c1 = st.cpu(cpu_model.unscale_ns(e, st.pool), f"unscale (group {gi})", deps=deps)
        c2 = st.cpu(cpu_model.adam_ns(e, st.pool), f"CPU Adam (group {gi})", deps=(c1,))
        c3 = st.cpu(cpu_model.cast_ns(e, st.pool), f"cast (group {gi})", deps=(c2,))
        h = c3
        if m.offload_optimizer == "nvme":
            wr = st.nvme("write", 12 * e, f"optimizer state out (group {gi})", deps=(c3,))
            prev_write = wr
            if not m.pipeline_write:
                h = wr
        if m.offload_param == "nvme":
            st.nvme(
                "write",
                b16 * e * float(np.mean(home_nvme[~persist]) if (~persist).any() else 0.0),
                f"16-bit params out (group {gi})",
                deps=(c3,),
            )
        if m.offload_param == "none":
            up = st.copy("h2d", b16 * e, f"16-bit partition to GPU (group {gi})", deps=(c3,), stream="gpu")
            h = st.host_sync(up, "blocking copy")
    st.tl.add("host", 0, (h,), label="step returns", kind="wait")
    _post_step(st, v, m, persist, P, b16)


def _post_step(st: _Step, v: ZeroView, m: ZeroMode, persist, P: int, b16: int) -> None:
    """`_post_step`: the persistent parameters (those of at most param_persistence_threshold
    elements) gathered again from their updated partitions, the copy to the GPU blocking the
    host where they are offloaded, then a device synchronize."""
    el = int(v.numel[persist].sum())
    if el == 0:
        return
    deps = ()
    if m.offload_param != "none":
        cp = st.copy("h2d", b16 * -(-el // P), "persistent partitions to GPU", stream="gpu")
        deps = (st.host_sync(cp, "blocking copy (persistent)"),)
    st.collective("all_gather", b16 * el, "all-gather persistent params", "gpu", deps=deps)
    st.host_sync(st.last_gpu, "device synchronize (post step)")
