"""g10fast validate rows of the built-in models (g10fast/validate/claims_models.py)."""

import pytest

from g10fast.validate import AGREES, MISSES, evaluate
from g10fast.validate.claims_models import CLAIMS

BY_ID = {c.id: c for c in CLAIMS}


@pytest.mark.parametrize(
    "cid,verdict,lo,hi",
    [
        ("models.bert-base-parameters", AGREES, 109.18656, 109.18656),
        ("models.resnet152-parameters", AGREES, 60.192808, 60.192808),
        ("models.gpt2-xl-parameters", MISSES, 1557.6112, 1557.6112),
        ("models.llama-7b-parameters", AGREES, 6738.415616, 6738.415616),
    ],
)
def test_parameter_rows(cid, verdict, lo, hi):
    row = evaluate(BY_ID[cid], quick=True)
    assert row.verdict == verdict
    assert lo - 1e-9 <= row.value <= hi + 1e-9


def test_decoder_against_capture_rows():
    pytest.importorskip("torch")
    fp = evaluate(BY_ID["models.decoder-capture-footprint"], quick=True)
    live = evaluate(BY_ID["models.decoder-capture-peak-live"], quick=True)
    assert fp.verdict == AGREES and 1.07 <= fp.value <= 1.10  # measured 1.085
    assert live.verdict == AGREES and 0.98 <= live.value <= 1.02  # measured 0.9996
