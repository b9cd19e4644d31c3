"""What a policy tells the tensor engine (its record's `engine_mode` returns a TensorMode)."""

from __future__ import annotations

from dataclasses import dataclass

from g10fast.errors import InputError

#: the tensor engine's transfer mechanisms (spec §12): a set of tensors offloaded to the SSD
#: before the run and prefetched back for the backward pass, planned as a FlashNeuronPlan
#: (the artifact's FlashNeuron mode); hint rows moved by GPUDirect Storage to the SSD only
#: (the artifact's G10GDSSSD mode), or to the SSD and host memory (its G10GDSFULL mode)
MECHANISMS = ("offload_set", "gds_ssd", "gds_ssd_host")


@dataclass(frozen=True)
class TensorMode:
    """The tensor engine's mechanism (one of MECHANISMS)."""

    mechanism: str

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise InputError(
                f"the tensor engine's mechanisms are {', '.join(MECHANISMS)}, not {self.mechanism!r}",
                param="engine_mode.mechanism",
            )
