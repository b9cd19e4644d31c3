"""The built-in models against their published parameter counts, and the built-in decoder
against a capture of the same network (g10fast.workload.builtin, docs/model-format.md).

Parameter counts are the network's trainable parameters at its own shapes
(`builtin.parameter_count`), which do not depend on the batch (issue 37 item 1). The
decoder comparison builds GPT-2 XL's width with 4 layers at batch 8 both ways: the built-in
decoder (fused attention, layer norm and GELU, its default) and the PyTorch module of
g10fast/capture/examples.py captured on the CPU (F.scaled_dot_product_attention,
nn.LayerNorm, F.gelu), fp32 and AdamW on both sides; the band is issue 37 item 4's target
(footprint and peak live within 10 %).
"""

from __future__ import annotations

import functools

from g10fast.validate import Claim, Measured
from g10fast.validate.captured import need_torch, ratio_measures, ratios


def _params_millions(model: str) -> Measured:
    from g10fast.workload.builtin import load_builtin_graph, parameter_count

    counts = {
        b: parameter_count(load_builtin_graph(model, b, **({"seq_len": 128} if model == "llama-7b" else {})))
        for b in (1, 8)
    }
    n = counts[8]
    return Measured(n / 1e6, f"{n:,} parameters at batch 8 ({counts[1]:,} at batch 1)")


#: the comparison's network: GPT-2 XL's width (Radford et al. 2019, Table 2: 48 layers of
#: d_model 1600; 25 heads as the released checkpoint), 4 of its layers, batch 8, sequence
#: 1024, GPT-2's vocabulary; fp32 on both sides (the capture's "bfloat16" keeps bf16 moments,
#: the built-in "bf16-mixed" fp32 master weights and moments: not the same training)
DECODER = {"layers": 4, "hidden": 1600, "heads": 25, "seq_len": 1024, "vocab": 50257, "batch": 8}


@functools.lru_cache(maxsize=None)
def _decoder_ratios() -> tuple[float, float, str]:
    need_torch()
    from g10fast.api import builtin_workload
    from g10fast.capture import capture, to_workload
    from g10fast.capture.examples import GPT2, _lm_inputs, lm_loss
    from g10fast.capture.model import Model, adamw

    d = DECODER
    L, H, NH, S, V, B = (d[k] for k in ("layers", "hidden", "heads", "seq_len", "vocab", "batch"))
    cap = to_workload(
        capture(
            Model(
                "gpt2-xl-4",
                lambda: GPT2(V, S, H, NH, L),
                _lm_inputs(B, S, V),
                lm_loss,
                adamw("adamw"),
                B,
                "float32",
                {"seq_len": S, "family": "gpt2"},
            )
        )
    )
    w = builtin_workload(
        "gpt2-xl",
        B,
        "g10-artifact",
        layers=L,
        hidden=H,
        heads=NH,
        ffn=4 * H,
        seq_len=S,
        vocab=V,
        precision="fp32",
    )
    return ratios(w, cap)


_footprint_ratio, _live_ratio = ratio_measures(_decoder_ratios)


_DEC_SETTING = (
    "GPT-2 XL's width (hidden 1600, 25 heads), 4 layers, batch 8, sequence 1024, "
    "vocabulary 50257, fp32, AdamW: built-in gpt2-xl (default fused attention) "
    "against g10fast capture of capture/examples.py's GPT2 on the CPU"
)

CLAIMS = [
    Claim(
        id="models.bert-base-parameters",
        system="built-in models",
        claim="BERT-base has 110 M parameters",
        source="Devlin et al. 2019 (BERT), section 3: BERT_BASE (L=12, H=768, A=12, Total Parameters=110M)",
        published="110 M",
        setting="bert-base (data/models/bert-base.toml), any batch",
        unit="M",
        band=(105.0, 115.0),
        measure=lambda q: _params_millions("bert-base"),
        why="The band is the published figure's rounding (110 M to two digits). Ours is "
        "BertModel with its pooler at sequence 128: 109.48 M less the 384 position "
        "rows beyond 128 that the graph never reads and one 768-element weight G10's "
        "file uses twice; no MLM head.",
    ),
    Claim(
        id="models.resnet152-parameters",
        system="built-in models",
        claim="ResNet-152 has 60,192,808 parameters",
        source="torchvision, models/resnet.py ResNet152_Weights.IMAGENET1K_V1 meta num_params",
        published="60,192,808",
        setting="resnet152 (data/models/resnet152.toml), any batch",
        unit="M",
        band=(60.192808, 60.192808),
        measure=lambda q: _params_millions("resnet152"),
    ),
    Claim(
        id="models.gpt2-xl-parameters",
        system="built-in models",
        claim="GPT-2's largest model has 1542 M parameters",
        source="Radford et al. 2019 (GPT-2), Table 2",
        published="1542 M",
        setting="gpt2-xl (48 layers, hidden 1600, 1024 positions, tied head)",
        unit="M",
        band=(1541.5, 1542.5),
        measure=lambda q: _params_millions("gpt2-xl"),
        why="The paper's Table 2 counts are not those of the released checkpoints: the "
        "smallest, listed as 117 M, has 124.4 M parameters (the capture of "
        "capture/examples.py's gpt2-small counts 124.4 M, docs/capture.md), and the "
        "released gpt2-xl has 1,557,611,200 (48 x 12 x 1600^2 + 48 x 13 x 1600 "
        "weights and biases, 50257 x 1600 tied embedding, 1024 x 1600 positions, "
        "final norm): our count, the paper's architecture at its published sizes.",
    ),
    Claim(
        id="models.llama-7b-parameters",
        system="built-in models",
        claim="LLaMA-7B has 6.7 B parameters",
        source="Touvron et al. 2023 (LLaMA), Table 2",
        published="6.7 B",
        setting="llama-7b (32 layers, hidden 4096, SwiGLU 11008, vocabulary 32000, untied)",
        unit="M",
        band=(6650.0, 6750.0),
        measure=lambda q: _params_millions("llama-7b"),
        why="The band is the published figure's rounding (6.7 B to two digits).",
    ),
    Claim(
        id="models.decoder-capture-footprint",
        system="built-in models",
        claim="the built-in decoder's footprint is within 10 % of a capture of the same network",
        source="issue 37 item 4's target; capture: g10fast/capture (docs/capture.md)",
        published="ratio 1 +- 10 %",
        setting=_DEC_SETTING,
        unit="x",
        band=(0.9, 1.1),
        measure=_footprint_ratio,
    ),
    Claim(
        id="models.decoder-capture-peak-live",
        system="built-in models",
        claim="the built-in decoder's peak live bytes are within 10 % of a capture of the same network",
        source="issue 37 item 4's target; capture: g10fast/capture (docs/capture.md)",
        published="ratio 1 +- 10 %",
        setting=_DEC_SETTING,
        unit="x",
        band=(0.9, 1.1),
        measure=_live_ratio,
    ),
]
