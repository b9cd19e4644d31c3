"""Ideal (is_UVM 0): the engine's time equals the sum of the truncated kernel cycles.

The full check over every (model, batch) of the artifact is benchmarks/ideal_all.py; here the
smallest generated batch of each of the five paper models."""

from __future__ import annotations

from pathlib import Path

import pytest

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"

# ideal cycles per (model, batch), workloads spec §2 table
IDEAL = {
    ("BERT", 128): 7087159999,
    ("VIT", 256): 2549893347,
    ("Inceptionv3", 512): 64334907021,
    ("ResNet152", 256): 127328819564,
    ("SENet154", 256): 155317502505,
}


@pytest.mark.skipif(not (ARTIFACT / "results").is_dir(), reason="../shared/g10-artifact absent")
@pytest.mark.parametrize("model,batch", sorted(IDEAL))
def test_ideal_equals_sum_of_kernel_cycles(model, batch):
    from g10fast.config import genconfig
    from g10fast.run import run

    cfg = genconfig(ARTIFACT, model, batch, "lru").replace(is_UVM=False)
    res = run(cfg)
    assert res["policy"] == "ideal"
    for it in res["iterations"]:
        assert it["exe_time_cycles"] == IDEAL[(model, batch)]
        assert it["ideal_exe_time_cycles"] == IDEAL[(model, batch)]
        assert it["stall_cycles"] == 0
        assert it["pages"]["incoming"] == 0
