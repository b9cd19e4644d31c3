"""AppObMem (Li et al., "An Application-oblivious Memory Scheduling System for DNN
Accelerators", ACM TACO 19(4), 2022; seed-policies §3).

No text of the paper, abstract page or code is stored (seed-policies §3.1: searched by title,
authors and keywords); its one headline — "40-60 % memory savings with acceptable performance
loss" — is recalled from the abstract, not read. The row says what checking it would need; it
is "unavailable" until the paper is on this machine, never a pass.
"""

from __future__ import annotations

from g10fast.validate import Claim, Measured, Unavailable


def _memory_saving(quick: bool) -> Measured:
    raise Unavailable(
        "needs the paper (not stored: seed-policies §3.1): the models and batch sizes "
        "behind 40-60 %, the accelerator and its host link, the baseline the saving is "
        "measured against, and the slowdown it calls acceptable. With those, g10fast would "
        "run `appobmem` (g10fast swap --policy appobmem on an allocation trace, or g10fast "
        "run --policy appobmem on a model) at decreasing limits and report the largest "
        "saving whose slowdown is within that bound; the SINGA traces carry no AppObMem "
        "setting, and a bound of our own choosing would be a tuned constant"
    )


CLAIMS = [
    Claim(
        id="appobmem.memory-saving",
        system="AppObMem",
        claim="40-60 % memory savings with acceptable performance loss, without layer "
        "structures or computation graphs",
        source="Li et al., ACM TACO 19(4), 2022, abstract (recalled; not stored)",
        published="40-60 %",
        setting="would be: the paper's models on its accelerator, appobmem at decreasing "
        "limits, the largest saving within the paper's acceptable slowdown",
        unit="%",
        band=(40.0, 60.0),
        measure=_memory_saving,
        why="The paper is not stored, so neither its setting nor what 'acceptable' means "
        "is known (seed-policies §3.1, §3.4: the slowdown bound there is an "
        "assumption). On the G10 models with a 5 % slowdown bound of our own, "
        "docs/allocators.md reports 24 % (BERT-256), 91 % (ResNet152-1280) and 61 % "
        "(Llama-7B), which is no check of this claim.",
    ),
]
