"""g10fast validate rows of Qwen2.5 (g10fast/validate/claims_qwen.py)."""

import pytest

from g10fast.validate import AGREES, evaluate
from g10fast.validate.claims_qwen import CLAIMS

BY_ID = {c.id: c for c in CLAIMS}


@pytest.mark.parametrize(
    "cid,n",
    [
        # 151,936 x 1536 embedding + 28 x 46,797,824 a layer + the final norm's 1536
        ("qwen.1.5b-parameters", 1_543_714_304),
        ("qwen.1.5b-non-embedding", 1_543_714_304 - 151_936 * 1536),
        # 151,936 x 2048 + 36 x 77,076,992 + 2048
        ("qwen.3b-parameters", 3_085_938_688),
        ("qwen.3b-non-embedding", 3_085_938_688 - 151_936 * 2048),
    ],
)
def test_parameter_rows(cid, n):
    row = evaluate(BY_ID[cid], quick=True)
    assert row.verdict == AGREES
    assert row.value == pytest.approx(n / 1e9, abs=1e-12)
    if cid.endswith("-parameters") and "no torch" not in row.detail:
        assert row.detail.endswith(f"the capture example counts {n:,}")


def test_layer_arithmetic():
    """The per-layer counts above, by hand: q (with bias), k and v (2 heads of 128, with
    biases), o, three SwiGLU matrices, two RMSNorm weights."""

    def layer(h, f, kv):
        return h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * f + 2 * h

    assert layer(1536, 8960, 256) == 46_797_824
    assert 151_936 * 1536 + 28 * layer(1536, 8960, 256) + 1536 == 1_543_714_304
    assert layer(2048, 11008, 256) == 77_076_992
    assert 151_936 * 2048 + 36 * layer(2048, 11008, 256) + 2048 == 3_085_938_688


def test_capture_rows():
    pytest.importorskip("torch")
    fp = evaluate(BY_ID["qwen.capture-footprint"], quick=True)
    live = evaluate(BY_ID["qwen.capture-peak-live"], quick=True)
    assert fp.verdict == AGREES and 0.90 <= fp.value <= 0.95  # measured 0.921
    assert live.verdict == AGREES and 1.00 <= live.value <= 1.03  # measured 1.015
    assert "parameters 326,970,880 captured" in fp.detail
