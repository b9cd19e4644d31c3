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

from g10fast.engine.ranks.zero import ZeroMode, ZeroSettings
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord


@dataclass(frozen=True)
class Options(ZeroSettings):
    """DeepSpeed's settings (`ZeroSettings`: each key, its code default and its source, written
    once in the engine), and what the policy decides for itself."""

    #: `overlap_comm`; -1: DeepSpeed's default, False for stage 2 and True for stage 3
    #: (validator overlap_comm_valid); 0 / 1 to set it
    overlap_comm: int = -1
    #: `offload_optimizer.device` / `offload_param.device` of a stage-3 policy ("": the
    #: policy's own: cpu for zero3-offload, nvme for zero-infinity; "none", "cpu", "nvme")
    optimizer_device: str = ""
    param_device: str = ""

    def check(self):
        self.check_settings("policy.")
        if self.overlap_comm not in (-1, 0, 1):
            raise InputError(
                f"must be -1 (DeepSpeed's default), 0 or 1, got {self.overlap_comm!r}",
                param="policy.overlap_comm",
            )
        for k in ("optimizer_device", "param_device"):
            if getattr(self, k) not in ("", "none", "cpu", "nvme"):
                raise InputError(f"must be none, cpu or nvme, got {getattr(self, k)!r}", param=f"policy.{k}")


def _mode(stage: int, opt: str, param: str):
    def engine_mode(o: Options, engine=None) -> ZeroMode:
        overlap = (stage == 3) if o.overlap_comm == -1 else bool(o.overlap_comm)
        if stage == 2 and (o.optimizer_device or o.param_device):
            raise InputError(
                "the devices are stage 3's (zero3-offload, zero-infinity); "
                "zero-offload puts the optimizer on the CPU, zero2 nothing",
                param="policy.optimizer_device",
            )
        # every setting passes as it is (one name: DeepSpeed's key)
        shared = {f.name: getattr(o, f.name) for f in dataclasses.fields(ZeroSettings)}
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
