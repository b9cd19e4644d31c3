"""DeepSpeed's ZeRO on the ranks engine: `zero2` (ZeRO stage 2, nothing offloaded),
`zero-offload` (stage 2 with the optimizer on the CPU), `zero3-offload` (stage 3 with the
parameters and the optimizer on the CPU) and `zero-infinity` (stage 3 with both on NVMe).

Every option is a DeepSpeed configuration key with the default the code applies (not the
docs' where they differ): ../shared/specs/zero-family.md, read from deepspeedai/DeepSpeed at
edaa7221 (`deepspeed/runtime/zero/config.py`, `offload_config.py`,
`swap_tensor/constants.py`). The engine's mechanisms: g10fast/engine/ranks/zero.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from g10fast.engine.ranks.zero import ZeroMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


#: the engine's defaults, DeepSpeed's (g10fast/engine/ranks/zero.py, aio.py): written once there
_D = ZeroMode()


@dataclass(frozen=True)
class Options:
    #: `zero_optimization.reduce_bucket_size` (elements): gradients are reduced bucket by
    #: bucket (DS config.py, 5e8)
    reduce_bucket_size: float = _D.reduce_bucket_size
    #: `overlap_comm`; -1: DeepSpeed's default, False for stage 2 and True for stage 3
    #: (validator overlap_comm_valid); 0 / 1 to set it
    overlap_comm: int = -1
    #: `use_multi_rank_bucket_allreduce` (stage 2): one all-reduce per bucket (True, the
    #: default since PR #4695) or a reduce to each owner
    use_multi_rank_bucket_allreduce: bool = _D.use_multi_rank_bucket_allreduce
    #: `offload_optimizer.pin_memory` / `offload_param.pin_memory`: True since PR #8207
    #: (2026-08-07), False before; pageable copies are staged by the CUDA runtime
    pin_memory: bool = _D.pin_memory
    #: pinned over pageable host copies: 6x, DeepSpeed PR #5301's measured speed-up of the
    #: offload copy on one GPU (4-5x on 8 GPUs)
    pageable_slowdown: float = _D.pageable_slowdown
    #: `stage3_prefetch_bucket_size` (elements): the code's 5e7 (the docs say 5e8)
    prefetch_bucket_size: float = _D.prefetch_bucket_size
    #: `stage3_max_live_parameters` (elements)
    max_live_parameters: float = _D.max_live_parameters
    #: `stage3_param_persistence_threshold` (elements): smaller parameters stay whole on
    #: every GPU
    param_persistence_threshold: float = _D.param_persistence_threshold
    #: `sub_group_size` (elements): the optimizer step's tile, NVMe's unit of swapping (the
    #: code's 1e9; the example JSON's 1e12)
    sub_group_size: float = _D.sub_group_size
    #: `offload_param.buffer_count` / `buffer_size` (elements): pinned NVMe parameter buffers
    buffer_count: int = _D.buffer_count
    buffer_size: float = _D.buffer_size
    #: `offload_param.max_in_cpu` (elements per rank kept in pinned host memory with nvme)
    max_in_cpu: float = _D.max_in_cpu
    #: `offload_optimizer.buffer_count`: pinned optimizer swap buffers
    optimizer_buffer_count: int = _D.optimizer_buffer_count
    #: `offload_optimizer.pipeline_read` / `pipeline_write`: overlap the next sub-group's
    #: read / the previous one's write with the current step
    pipeline_read: bool = _D.pipeline_read
    pipeline_write: bool = _D.pipeline_write
    #: the copy of a CPU- or NVMe-resident partition to the GPU before its all-gather blocks
    #: the host (`p.ds_tensor.to(device)` without non_blocking in `_all_gather_dtype`: a
    #: cudaMemcpyAsync and a stream synchronize), as the current code does
    h2d_fetch_blocking: bool = _D.h2d_fetch_blocking
    #: issue #1130's pathology (2021 code): torch.cuda.synchronize() before each parameter's
    #: all-gather and a plain blocking copy_, so that no fetch overlaps compute (off: the
    #: current code)
    sync_before_allgather: bool = _D.sync_before_allgather
    #: `--bind_cores_to_rank`: each rank's OpenMP pool on its own physical cores (launcher
    #: default: off)
    bind_cores: bool = _D.bind_cores
    #: `offload_optimizer.device` / `offload_param.device` of a stage-3 policy ("": the
    #: policy's own: cpu for zero3-offload, nvme for zero-infinity; "none", "cpu", "nvme")
    optimizer_device: str = ""
    param_device: str = ""
    #: where the pinned optimizer buffers (fp32 master, gradient, 16-bit staging) live:
    #: "deepspeed" (the launcher binds memory with numactl -m only when a rank's cores lie in
    #: one NUMA node, DS:deepspeed/utils/numa.py; otherwise the buffers stay where the
    #: allocating thread first touched them, one NUMA node) or "spread" (over every node of
    #: the rank's cores, as an interleaved allocation would) [ours]
    host_memory_placement: str = _D.host_memory_placement
    #: `aio.block_size` (bytes): the size of one libaio request of the NVMe swapper
    #: (DS:deepspeed/runtime/swap_tensor/constants.py, 1048576)
    aio_block_size: int = _D.aio_block_size
    #: `aio.queue_depth`: requests a swapper thread keeps in flight (8; the Python
    #: `aio_handle()` constructor's own default, 128, is not what ZeRO-Infinity uses)
    aio_queue_depth: int = _D.aio_queue_depth
    #: `aio.intra_op_parallelism` (formerly `thread_count`): threads sharing one read or
    #: write (1)
    aio_intra_op_parallelism: int = _D.aio_intra_op_parallelism
    #: `aio.overlap_events`: a thread submits a new request as each completes (True) or
    #: waits for a whole batch of `aio_queue_depth` (False) (DS:csrc/aio/common/
    #: deepspeed_aio_common.cpp; g10fast/engine/ranks/aio.py has the time model)
    aio_overlap_events: bool = _D.aio_overlap_events
    #: `aio.use_gds`: GPUDirect Storage, the parameter swapper's buffers on the GPU: a
    #: partition read from NVMe lands there without a copy through host memory (False)
    aio_use_gds: bool = _D.aio_use_gds
    #: [ours] the coordinator's NVMe read-ahead of parameter partitions
    #: (`__prefetch_nvme_param_partitions`: always on in DeepSpeed, bounded by `buffer_count`
    #: free swap buffers and twice the elements of the all-gathers in flight); False: every
    #: partition read at its use, as a what-if
    nvme_param_prefetch: bool = _D.nvme_param_prefetch

    def check(self):
        for k in (
            "reduce_bucket_size",
            "prefetch_bucket_size",
            "max_live_parameters",
            "sub_group_size",
            "buffer_size",
            "max_in_cpu",
        ):
            if not getattr(self, k) > 0:
                raise InputError(f"must be > 0, got {getattr(self, k)!r}", param=f"policy.{k}")
        if self.overlap_comm not in (-1, 0, 1):
            raise InputError(
                f"must be -1 (DeepSpeed's default), 0 or 1, got {self.overlap_comm!r}",
                param="policy.overlap_comm",
            )
        for k in ("buffer_count", "optimizer_buffer_count"):
            if getattr(self, k) < 1:
                raise InputError(f"must be >= 1, got {getattr(self, k)!r}", param=f"policy.{k}")
        for k in ("optimizer_device", "param_device"):
            if getattr(self, k) not in ("", "none", "cpu", "nvme"):
                raise InputError(f"must be none, cpu or nvme, got {getattr(self, k)!r}", param=f"policy.{k}")
        if not self.pageable_slowdown >= 1:
            raise InputError(
                f"must be >= 1, got {self.pageable_slowdown!r}", param="policy.pageable_slowdown"
            )


def _mode(stage: int, opt: str, param: str):
    def engine_mode(o: Options, engine=None) -> ZeroMode:
        overlap = (stage == 3) if o.overlap_comm == -1 else bool(o.overlap_comm)
        if stage == 2 and (o.optimizer_device or o.param_device):
            raise InputError(
                "the devices are stage 3's (zero3-offload, zero-infinity); "
                "zero-offload puts the optimizer on the CPU, zero2 nothing",
                param="policy.optimizer_device",
            )
        # every option the mode has passes as it is (one name: DeepSpeed's key)
        shared = {
            f.name: getattr(o, f.name)
            for f in dataclasses.fields(ZeroMode)
            if hasattr(o, f.name) and f.name != "overlap_comm"
        }
        m = ZeroMode(
            stage=stage,
            offload_optimizer=o.optimizer_device or opt,
            offload_param=o.param_device or param,
            overlap_comm=overlap,
            **shared,
        )
        m.check()
        return m

    return engine_mode


_PAPER = "DeepSpeed (deepspeedai/DeepSpeed): ZeRO (SC'20), ZeRO-Offload (ATC'21), ZeRO-Infinity (SC'21)"

RECORDS = (
    PolicyRecord(
        name="zero2",
        display="ZeRO-2",
        engine="ranks",
        plan_depends_on_host=False,
        engine_mode=_mode(2, "none", "none"),
        options=Options,
        aliases=("zero-2",),
        paper=_PAPER,
        order=200,
        colour="#8c564b",
        description="ZeRO stage 2: gradients and optimizer state partitioned over the ranks, all on the GPUs",
    ),
    PolicyRecord(
        name="zero-offload",
        display="ZeRO-Offload",
        engine="ranks",
        plan_depends_on_host=False,
        engine_mode=_mode(2, "cpu", "none"),
        options=Options,
        aliases=("zero2-offload",),
        paper=_PAPER,
        order=201,
        colour="#c49c94",
        description="ZeRO-2 with the optimizer state and step on the CPU (CPU Adam)",
    ),
    PolicyRecord(
        name="zero3-offload",
        display="ZeRO-3 Offload",
        engine="ranks",
        plan_depends_on_host=False,
        engine_mode=_mode(3, "cpu", "cpu"),
        options=Options,
        paper=_PAPER,
        order=202,
        colour="#7f7f7f",
        description="ZeRO-3 with the parameters and the optimizer on the CPU",
    ),
    PolicyRecord(
        name="zero-infinity",
        display="ZeRO-Infinity",
        engine="ranks",
        plan_depends_on_host=False,
        engine_mode=_mode(3, "nvme", "nvme"),
        options=Options,
        aliases=("zero3-nvme",),
        paper=_PAPER,
        order=203,
        colour="#bcbd22",
        description="ZeRO-3 with the parameters and the optimizer state on NVMe (DeepSpeed's aio swapper)",
    ),
)
