"""The kernel-time sources of the Figure-11 ranking comparison (benchmarks/)."""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import calibrate_costmodel as C  # noqa: E402
import ranking_sensitivity as R  # noqa: E402


def test_family_mean_equalises_each_family_and_keeps_its_total():
    keys = ["a|1", "b|2", "a|1", "c|3", "b|2", "a|1"]
    t = np.array([1.0, 10.0, 2.0, 5.0, 30.0, 6.0])
    tin = t * 2
    tpf = t * 3
    ws = np.array([0.0, 7.0, 0.0, 0.0, 9.0, 1.0])
    out = R.family_mean({"keys": keys}, (t, tin, tpf, ws))
    np.testing.assert_allclose(out[0], [3.0, 20.0, 3.0, 5.0, 20.0, 3.0])
    np.testing.assert_allclose(out[1], 2 * out[0])
    np.testing.assert_allclose(out[2], 3 * out[0])
    np.testing.assert_array_equal(out[3], ws)  # workspace is left as measured
    for q in range(3):
        assert np.isclose(out[q].sum(), (t, tin, tpf)[q].sum())


def test_read_ranking_keys_records_by_family_fit(tmp_path):
    store = tmp_path / "r.jsonl"
    recs = [
        {"model": "BERT", "batch": 256, "policy": "lru", "exe_time_cycles": 5},
        {"model": "BERT", "batch": 256, "policy": "lru", "exe_time_cycles": 6, "families": C.ALL_SETS},
    ]
    store.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = C.read_ranking(store)
    assert got[("BERT", 256, "lru", C.HELD_OUT)]["exe_time_cycles"] == 5  # older records
    assert got[("BERT", 256, "lru", C.ALL_SETS)]["exe_time_cycles"] == 6
    assert len(got) == 2
