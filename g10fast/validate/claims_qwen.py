"""Qwen2.5-1.5B and -3B (data/models/qwen2.5-*.toml, the models of DeepSpeed's measured
ZeRO runs) against the parameter counts of their model cards, and the built-in models
against a capture of the same network (g10fast/capture/examples.py `qwen25`, issue 40 item 4).

Parameter counts are the built-in graph's trainable parameters (`builtin.parameter_count`:
the tied embedding once, q/k/v biases, grouped-query K and V); the detail adds the capture
example's count (its module built on the meta device). The non-embedding count is the total
less the vocabulary x hidden embedding, as the cards count it. The capture comparison builds
Qwen2.5-1.5B's width with 2 of its 28 layers at its built-in batch and sequence both ways,
fp32, the capture with fused AdamW (one kernel a parameter, no temporaries: the built-in's
one Apply_Grad a weight); the band is the issue's target (within 10 %).
"""

from __future__ import annotations

import functools

from g10fast.validate import Claim, Measured
from g10fast.validate.captured import need_torch, ratio_measures, ratios

CARD = (
    "Qwen/{} model card (huggingface.co/Qwen/{}, README.md: 'Number of Parameters', "
    "'Number of Paramaters (Non-Embedding)')"
)


@functools.lru_cache(maxsize=None)
def _counts(model: str) -> tuple[int, int, str]:
    from g10fast.workload.builtin import find_model, load_builtin_graph, parameter_count

    spec = find_model(model)
    n = parameter_count(load_builtin_graph(model, 1, seq_len=16))
    emb = int(spec.params["vocab"]) * int(spec.params["hidden"])
    detail = (
        f"{n:,} parameters, {n - emb:,} without the {emb:,} of the tied embedding "
        f"({spec.params['layers']} layers, hidden {spec.params['hidden']}, "
        f"{spec.params['heads']}/{spec.params['kv_heads']} heads)"
    )
    try:
        import torch
    except ImportError:
        return n, emb, detail + "; capture example not counted (no torch)"
    from g10fast.capture.examples import EXAMPLES

    with torch.device("meta"):
        mod = EXAMPLES[model]().module()
    nc = sum(p.numel() for p in mod.parameters())
    return n, emb, detail + f"; the capture example counts {nc:,}"


def _total(model: str):
    def measure(quick: bool) -> Measured:
        n, _, detail = _counts(model)
        return Measured(n / 1e9, detail)

    return measure


def _non_embedding(model: str):
    def measure(quick: bool) -> Measured:
        n, emb, detail = _counts(model)
        return Measured((n - emb) / 1e9, detail)

    return measure


#: the comparison's network: Qwen2.5-1.5B (config.json: hidden 1536, 12 query and 2 key/value
#: heads, FFN 8960, vocabulary 151,936, tied) with 2 layers, at its built-in batch 4 x 512
PAIR = {"layers": 2, "batch": 4, "seq_len": 512}


@functools.lru_cache(maxsize=None)
def _pair() -> tuple[float, float, str]:
    need_torch()
    from g10fast.api import builtin_workload
    from g10fast.capture import capture, to_workload
    from g10fast.capture.examples import qwen25

    L, B, S = PAIR["layers"], PAIR["batch"], PAIR["seq_len"]
    c = capture(qwen25("1.5b", batch=B, seq_len=S, dtype="float32", optimizer="adamw-fused", layers=L))
    cap = to_workload(c)
    w = builtin_workload("qwen2.5-1.5b", B, "g10-artifact", layers=L, seq_len=S, precision="fp32")
    return ratios(w, cap, f"; parameters {c.params:,} captured")


_footprint, _live = ratio_measures(_pair)


_PAIR_SETTING = (
    "Qwen2.5-1.5B's width (hidden 1536, 12/2 heads, FFN 8960, vocabulary 151,936, "
    "tied), 2 layers, batch 4, sequence 512, fp32: built-in qwen2.5-1.5b against "
    "g10fast capture of capture/examples.py's Qwen2ForCausalLM with fused AdamW"
)

_WHY_FOOTPRINT = (
    "Agrees at -7.9 %; nearly all of it is the tied embedding's gradient: autograd sums the "
    "two uses' gradients (the head's and the embedding's, 890 MiB each in fp32) into a third "
    "V x H tensor (`add` in the backward), where the built-in graph keeps one gradient a use "
    "and applies the optimizer once a use (two Apply_Grad kernels on the embedding). "
    "Without that tensor the footprints agree within 2 % (tests/test_capture.py). With the "
    "default for-loop AdamW the capture's footprint is 28 % above the built-in's (ratio "
    "0.78): its sqrt and division temporaries a parameter, 2 x 890 MiB for the embedding."
)

CLAIMS = [
    Claim(
        id="qwen.1.5b-parameters",
        system="Qwen2.5",
        claim="Qwen2.5-1.5B has 1.54 B parameters",
        source=CARD.format("Qwen2.5-1.5B", "Qwen2.5-1.5B"),
        published="1.54 B",
        setting="qwen2.5-1.5b (28 layers, hidden 1536, 12/2 heads, FFN 8960, vocabulary "
        "151,936, tied), any batch",
        unit="B",
        band=(1.535, 1.545),
        measure=_total("qwen2.5-1.5b"),
        why="The band is the card's rounding (1.54 B to two decimals).",
    ),
    Claim(
        id="qwen.1.5b-non-embedding",
        system="Qwen2.5",
        claim="Qwen2.5-1.5B has 1.31 B parameters besides the embedding",
        source=CARD.format("Qwen2.5-1.5B", "Qwen2.5-1.5B"),
        published="1.31 B",
        setting="qwen2.5-1.5b, its count less vocabulary x hidden",
        unit="B",
        band=(1.305, 1.315),
        measure=_non_embedding("qwen2.5-1.5b"),
        why="The band is the card's rounding (1.31 B to two decimals).",
    ),
    Claim(
        id="qwen.3b-parameters",
        system="Qwen2.5",
        claim="Qwen2.5-3B has 3.09 B parameters",
        source=CARD.format("Qwen2.5-3B", "Qwen2.5-3B"),
        published="3.09 B",
        setting="qwen2.5-3b (36 layers, hidden 2048, 16/2 heads, FFN 11008, vocabulary "
        "151,936, tied), any batch",
        unit="B",
        band=(3.085, 3.095),
        measure=_total("qwen2.5-3b"),
        why="The band is the card's rounding (3.09 B to two decimals).",
    ),
    Claim(
        id="qwen.3b-non-embedding",
        system="Qwen2.5",
        claim="Qwen2.5-3B has 2.77 B parameters besides the embedding",
        source=CARD.format("Qwen2.5-3B", "Qwen2.5-3B"),
        published="2.77 B",
        setting="qwen2.5-3b, its count less vocabulary x hidden",
        unit="B",
        band=(2.765, 2.775),
        measure=_non_embedding("qwen2.5-3b"),
        why="The band is the card's rounding (2.77 B to two decimals).",
    ),
    Claim(
        id="qwen.capture-footprint",
        system="Qwen2.5",
        claim="the built-in Qwen2.5's footprint is within 10 % of a capture of the same network",
        source="issue 40 item 4's target; capture: g10fast/capture (docs/capture.md)",
        published="ratio 1 +- 10 %",
        setting=_PAIR_SETTING,
        unit="x",
        band=(0.9, 1.1),
        measure=_footprint,
        why=_WHY_FOOTPRINT,
    ),
    Claim(
        id="qwen.capture-peak-live",
        system="Qwen2.5",
        claim="the built-in Qwen2.5's peak live bytes are within 10 % of a capture of the same network",
        source="issue 40 item 4's target; capture: g10fast/capture (docs/capture.md)",
        published="ratio 1 +- 10 %",
        setting=_PAIR_SETTING,
        unit="x",
        band=(0.9, 1.1),
        measure=_live,
    ),
]
