"""Figures from a small synthetic results store (no simulation): every figure draws, missing
points are gaps, agreement rows compare the right numbers."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from g10fast.figures import draw_all, relative_error
from g10fast.figures.data import FIG11_WORKLOADS, Reference, Results, parse_table
from g10fast.sweep.store import ResultStore

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"


def fake_result(exe, ideal, policy, *, stall=0, overlap=0, pages=(0, 0, 0, 0), reported=1):
    it = {
        "iteration": 0,
        "exe_time_cycles": exe * 2,
        "ideal_exe_time_cycles": ideal,
        "stall_cycles": 1,
        "overlap_cycles": 1,
        "compute_cycles": 1,
        "pages": {},
    }
    it1 = {
        "iteration": 1,
        "exe_time_cycles": exe,
        "ideal_exe_time_cycles": ideal,
        "stall_cycles": stall,
        "overlap_cycles": overlap,
        "compute_cycles": exe - stall - overlap,
        "pages": dict(zip(("ssd_to_gpu", "gpu_to_ssd", "cpu_to_gpu", "gpu_to_cpu"), pages)),
    }
    return {
        "status": "ok",
        "policy": policy,
        "iterations": [it, it1],
        "reported": reported,
        "workload": {"ideal_cycles": ideal},
    }


def put(
    store,
    h,
    model,
    batch,
    policy,
    result,
    *,
    status="ok",
    host=128.0,
    ssd=3.2,
    pcie=15.754,
    var=0.0,
    arrays=None,
    analysis=None,
    error="",
):
    store.write_point(
        {
            "hash": h,
            "label": f"{model}/{batch}-{policy}",
            "status": status,
            "error": error,
            "point": {
                "model": model,
                "batch_size": batch,
                "policy": policy,
                "host_mem_gb": host,
                "ssd_gbps": ssd,
                "pcie_gbps": pcie,
                "kernel_time_std_dev": var,
                "kernel_speedup": 1.0,
                "group": "t",
            },
            "config": {"batch_size": batch},
            "result": result,
            "arrays": arrays,
            "analysis": analysis,
            "wall_seconds": 0.5,
        }
    )


def small_store(path) -> ResultStore:
    s = ResultStore(path)
    n = 0
    for m, b in FIG11_WORKLOADS:
        for i, pol in enumerate(("lru", "deepUM", "prefetch_lru", "G10GDSFULL")):
            n += 1
            K = 5
            kc = np.array([[10, 20, 30, 40, 50], [10, 20, 30, 40, 500]], dtype=np.int64)
            put(
                s,
                f"h{n:03d}",
                m,
                b,
                pol,
                fake_result(1000 * (4 - i), 900, pol, stall=100, overlap=50, pages=(1, 2, 3, 4)),
                arrays={"kernel_cycles": kc, "kernel_ideal_cycles": np.full(K, 10, np.int64)},
            )
        n += 1
        put(s, f"h{n:03d}", m, b, "FlashNeuron", None, status="failed", error="does not fit")
    # a point of Fig. 15 and a host-memory point of Fig. 16; one errored point
    put(s, "x1", "BERT", 128, "lru", fake_result(13178010664, 7087159999, "lru"))
    put(s, "x2", "BERT", 256, "prefetch_lru", fake_result(12341928800, 8742558777, "prefetch_lru"), host=0.0)
    put(s, "x3", "VIT", 256, "deepUM", None, status="error", error="InputError: not implemented")
    for v in (0.05, 0.1):
        put(s, f"v{v}", "BERT", 256, "prefetch_lru", fake_result(1000, 990, "prefetch_lru"), var=v)
    an = {
        "key": "BERT-128",
        "active": np.array([5, 6, 7], np.int64),
        "active_input": np.array([1, 1, 1], np.int64),
        "active_weight": np.array([2, 2, 2], np.int64),
        "active_intermediate": np.array([2, 3, 4], np.int64),
        "total": np.array([10, 12, 11], np.int64),
        "sd_size": np.array([4096, 8192], np.int64),
        "sd_time": np.array([12.5, 3000.0]),
        "sd_start": np.array([0, 1], np.int32),
        "global_weight": 4,
        "input_size": 1,
        "kernels": 3,
        "ideal_cycles": 30,
    }
    put(s, "x4", "BERT", 128, "ideal", fake_result(7087159999, 7087159999, "ideal"), analysis=an)
    return s


def test_results_lookup(tmp_path):
    s = small_store(tmp_path / "r.h5")
    r = Results(s)
    st = r.get("BERT", 256, "lru")
    # reported iteration 1; lru: stall := stall - overlap, overlap := 0 (spec §5.2)
    assert st["exe"] == 4000 and st["stall"] == 50 and st["overlap"] == 0
    assert r.get("BERT", 256, "deepUM")["overlap"] == 50
    assert r.get("BERT", 256, "FlashNeuron")["exe"] == math.inf  # failed run = artifact inf
    assert r.get("VIT", 256, "deepUM") is None  # error = missing
    assert r.get("BERT", 512, "lru") is None
    assert r.ideal("BERT", 256) == 900
    assert r.get("BERT", 256, "prefetch_lru", host=0)["exe"] == 12341928800
    sd = r.kernel_slowdown("BERT", 256, "lru")
    assert sd.tolist() == [1.0, 2.0, 3.0, 4.0, 50.0]
    assert r.workload("BERT", 128)["sd_time"].tolist() == [12.5, 3000.0]
    assert r.workload("VIT", 512) is None


def test_relative_error():
    assert relative_error(101, 100) == pytest.approx(0.01)
    assert relative_error(math.inf, math.inf) == 0.0
    assert relative_error(5, math.inf) == math.inf
    assert relative_error(0, 0) == 0.0
    assert relative_error(None, 3) is None


def test_every_figure_from_small_store(tmp_path):
    s = small_store(tmp_path / "r.h5")
    out = tmp_path / "figs"
    artifact = ARTIFACT if ARTIFACT.is_dir() else None
    rep = draw_all(s.path, out, artifact_dir=artifact)
    for n in (2, 3, 4, 11, 12, 13, 14, 15, 16, 17, 18, 19):
        for ext in ("png", "pdf"):
            f = list(out.glob(f"fig{n:02d}_*.{ext}"))
            assert len(f) == 1 and f[0].stat().st_size > 1000, (n, ext)
    with open(out / "agreement.csv") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["figure", "point", "g10fast", "artifact", "relative_error"]
    if artifact is None:
        assert rows == []
        return
    by = {(r["figure"], r["point"]): r for r in rows}
    # the one real artifact value in the store agrees exactly
    r = by[("15", "BERT/128/lru exe_time")]
    assert r["g10fast"] == "13178010664" and r["artifact"] == "13178010664"
    assert float(r["relative_error"]) == 0.0
    # FlashNeuron failed both here and in the artifact (inf) -> agreement
    r = by[("11", "VIT/1280/FlashNeuron exe_time")]
    assert r["g10fast"] == "inf" and r["artifact"] == "inf" and float(r["relative_error"]) == 0
    # a point the store lacks: blank g10fast value, no error
    r = by[("11", "BERT/256/G10GDSSSD exe_time")]
    assert r["g10fast"] == "" and r["relative_error"] == ""
    r = by[("16", "BERT/256/prefetch_lru host 0 GiB exe_time")]
    assert r["artifact"] == "12341928800" and float(r["relative_error"]) == 0
    # Fig. 13 compares slowdown percentiles of the artifact's sim_result.kernel copies
    assert ("13", "BERT/256/lru slowdown p50") in by
    summary = {x["figure"]: x for x in rep.summary()}
    assert summary[15]["compared"] >= 1 and summary["all"]["points"] == len(rows)
    assert "agreement" in rep.text()


@pytest.mark.skipif(not ARTIFACT.is_dir(), reason="G10 artifact not available")
def test_reference_tables_match_spec():
    ref = Reference(ARTIFACT)
    f11 = ref.fig11()
    assert f11[("BERT", 256, "prefetch_lru")] == 8773229325
    assert f11[("VIT", 1280, "FlashNeuron")] == math.inf
    assert ref.fig12()[("BERT", 256, "FlashNeuron", "stall")] == pytest.approx(2930.03 * 1.2e6)
    assert ref.fig14()[("SENet154", 1024, "lru", "gpu2ssd")] == 479537590
    assert ref.fig15()[("Inceptionv3", 1792, "prefetch_lru")] == 84114846477
    assert ref.fig16(None)[("ResNet152", 1536, 192.0)] == 146198351710
    assert ref.fig16("deepUM")[("VIT", 1024, 0.0)] == 29011207388
    assert ref.fig18()[("BERT", 512, 6.4, "ideal")] == 11799396628
    assert ref.fig19()[("VIT", 1280, 0.2)] == pytest.approx(0.6674499042607699)
    sd = ref.fig13()
    assert len(sd[("BERT", "lru")]) == 1369 and len(sd[("SENet154", "FlashNeuron")]) == 2319
    # spec §6.9: BERT lru p50 4.145
    assert np.percentile(sd[("BERT", "lru")], 50) == pytest.approx(4.145, abs=1e-3)


def test_parse_table(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("a | b\n\nX|B = 1\n1 inf\n\n2\n3.5 4\n")
    h, blocks = parse_table(f)
    assert h == ["a", "b"] and blocks == [("X|B = 1", [[1.0, math.inf]]), ("2", [[3.5, 4.0]])]


# ------------------------------------------------------------- issue 37: figures and output
def test_one_side_failed_is_said_not_max_inf(tmp_path):
    """`figures` printed 'max inf' where the artifact failed and g10fast ran: those points
    are counted apart and named; the median and max are over the points both ran."""
    from g10fast.figures import FigureReport

    rep = FigureReport(tmp_path)
    rep.rows = [
        (12, "Inceptionv3/1536/FlashNeuron overlap", 2.0, math.inf, math.inf),
        (12, "Inceptionv3/1536/FlashNeuron stall", 1.0, math.inf, math.inf),
        (12, "BERT/256/lru stall", 1.01, 1.0, relative_error(1.01, 1.0)),
        (12, "VIT/1280/FlashNeuron stall", math.inf, math.inf, 0.0),
        (11, "VIT/256/lru exe_time", math.inf, 5.0, math.inf),
        (11, "BERT/256/G10GDSSSD exe_time", None, 5.0, None),
    ]
    s = {x["figure"]: x for x in rep.summary()}
    assert s[12]["max"] == pytest.approx(0.01) and s[12]["compared"] == 2
    assert (s[12]["artifact_failed"], s[12]["g10fast_failed"]) == (2, 0)
    assert (s[11]["artifact_failed"], s[11]["g10fast_failed"], s[11]["missing"]) == (0, 1, 1)
    assert s[11]["max"] is None and s["all"]["over_2pct"] == 0
    text = rep.text()
    assert "inf " not in text.split("details")[0].replace("(inf)", "")
    assert "Fig. 12 Inceptionv3/1536/FlashNeuron: the artifact failed (inf), g10fast ran" in text
    assert "Fig. 11 VIT/256/lru: g10fast failed (inf), the artifact ran" in text
    assert text.count("Inceptionv3/1536/FlashNeuron") == 1
    assert re.search(r"^\s+12\s+4\s+2\s+0\s+0\.500%\s+1\.000%\s+0\s+2$", text, re.M), text


def test_figure_12_labels_do_not_overlap(tmp_path):
    """The rotated policy names under the bars and the workload names under them: no two
    label boxes overlap (figure 12's workload names used to cross FlashNeuron)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from g10fast.figures.plots import make_display

    s = small_store(tmp_path / "r.g10db")
    artifact = ARTIFACT if ARTIFACT.is_dir() else None
    fig = make_display(12, Results(s.path), Reference(artifact)).plot()
    fig.savefig(tmp_path / "f.png", dpi=150)
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    minor = [t.get_window_extent(r) for t in ax.get_xticklabels(minor=True) if t.get_text()]
    major = [t.get_window_extent(r) for t in ax.get_xticklabels() if t.get_text()]
    assert len(minor) == 20 and len(major) == 5
    lowest = min(b.y0 for b in minor)
    assert all(b.y1 < lowest for b in major)  # every workload name below
    assert all(b.y0 >= 0 for b in major)  # and inside the figure
    plt.close(fig)
