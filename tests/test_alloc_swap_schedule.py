"""SINGA's stick-to-limit schedule pinned by hand-worked cases and a plain-Python twin
(tests/alloc_twin.swap_schedule_twin): the overhead `g10fast swap` prints and the swap figures
plot, the swap-in lateness, the clock (`iteration_ns`) and every score by its name."""

import numpy as np
import pytest
from alloc_twin import swap_schedule_twin

from g10fast.alloc.swap import (
    SCORE_NAMES,
    SCORES,
    SINGA_VGG_ITERATION_NS,
    LinkCost,
    check_plan,
    plan_swaps,
)
from g10fast.alloc.trace import FREE, LAYER, MALLOC, READ, AllocTrace
from g10fast.errors import InputError

ONE_NS_PER_BYTE = LinkCost(1.0, 0.0, 1.0, 0.0)  # T_out(s) = T_in(s) = s ns


def _trace(t_read_a=210):
    """One iteration: A (100 B) written by a layer at op 1 and read again at op 6; B (300 B)
    and C (50 B) make the peak (450 B at op 3)."""
    ops = [
        (MALLOC, 0, 100, 0),
        (LAYER, 0, 100, 10),
        (MALLOC, 1, 300, 20),
        (MALLOC, 2, 50, 30),
        (FREE, 2, 50, 40),
        (FREE, 1, 300, 200),
        (READ, 0, 100, t_read_a),
        (FREE, 0, 100, 220),
    ]
    k, blk, size, t = (np.asarray(x) for x in zip(*ops))
    return AllocTrace(
        "hand",
        k.astype(np.int8),
        (blk * 4096 + 4096).astype(np.int64),
        size.astype(np.int64),
        t.astype(np.int64),
        blk.astype(np.int64),
        np.zeros(len(k), np.int16),
        {},
    )


def _plan(tr, limit, **kw):
    return plan_swaps(tr, limit, "singa_swap", "vote", link=ONE_NS_PER_BYTE, period=(0, 6), min_block=1, **kw)


def test_swap_out_wait_by_hand():
    # limit 400: A goes over [1, 6). Its swap-out starts at t=10 and ends at 110; the copy may
    # be held up to the peak op 3, but holding it there makes 450 > 400: it is dropped after
    # op 2 (t=20) and the 90 ns left of the transfer are a wait. The swap-in must end by
    # t(6)=210: it starts at 110 (op 4 is the latest op before: 40 <= 110, and it is the op
    # after the peak), 300 + 100 = 400 fits: no lateness.
    p = _plan(_trace(), 400)
    check_plan(_trace(), p)
    assert p.num_swaps == 1 and p.block.tolist() == [0]
    assert p.overhead_ns == 90.0
    assert p.out_end_idx.tolist() == [2] and p.in_start_idx.tolist() == [4]
    assert p.in_end_ns.tolist() == [210.0]
    assert p.peak_after == 400
    assert p.load.tolist() == [100, 100, 400, 350, 400, 100, 100, 0]


def test_swap_in_lateness_by_hand():
    # limit 350: the swap-out must be dropped right after op 1 (400 > 350 at op 2): wait
    # 110 - t(1)=10 = 100. The swap-in planned from t=110 at op 4 would make 400 > 350 there:
    # it starts after op 4, at op 5 (t=200), and ends at 300, 90 ns after A's read at 210.
    p = _plan(_trace(), 350)
    assert p.overhead_ns == 190.0
    assert p.out_end_idx.tolist() == [1] and p.in_start_idx.tolist() == [5]
    assert p.in_end_ns.tolist() == [300.0]
    assert p.in_end_ns[0] - 210 == 90.0  # the swap-in's lateness
    assert p.summary()["overhead_per_iteration_s"] == pytest.approx(190e-9)


def test_clock_rescales_the_trace_not_the_transfers():
    # the iteration (t(7) - t(0) = 220 ns) made to last 440 ns: every op time doubles,
    # transfers stay 100 ns. Swap-out 20 -> 120, dropped after op 1 (t=20): wait 100.
    # Swap-in must end by 420: from 320, held off op 4 (over the limit) to op 5 (t=400):
    # ends at 500, late by 80. 180 in all, of a 440 ns iteration.
    p = _plan(_trace(), 350, iteration_ns=440.0)
    assert p.overhead_ns == 180.0
    assert p.iteration_ns == 440.0
    s = p.summary()
    assert s["clock"] == "iteration" and s["overhead_fraction"] == pytest.approx(180 / 440)
    assert s["recorded_iteration_s"] == pytest.approx(220e-9)
    assert _plan(_trace(), 350).summary()["clock"] == "trace"
    with pytest.raises(InputError, match="iteration_s"):
        _plan(_trace(), 350, iteration_ns=0.0)


@pytest.mark.parametrize("limit", [450, 400, 380, 350])
def test_hand_trace_against_the_twin(limit):
    tr = _trace()
    for clock in (None, 440.0, 1e5):
        p = _plan(tr, limit, iteration_ns=clock)
        swaps = list(zip((p.r_idx + p.start).tolist(), (p.d_idx + p.start).tolist(), p.size.tolist()))
        ov, in_end, load = swap_schedule_twin(
            tr, 0, 0, 8, 8, 3, swaps, ONE_NS_PER_BYTE.t_out, ONE_NS_PER_BYTE.t_in, limit, iteration_ns=clock
        )
        assert p.overhead_ns == pytest.approx(ov)
        assert p.in_end_ns.tolist() == pytest.approx(in_end)
        assert p.load.tolist() == load


def _vit():
    from g10fast.memory_source import load_source

    return load_source("vit", batch=8, iterations=3)


@pytest.fixture(scope="module")
def vit():
    return _vit()


def test_model_trace_against_the_twin(vit):
    """Every score at three limits on ViT-8's derived trace: the planner's overhead, swap-in
    ends and load equal the twin's schedule of the same swaps, and some are late."""
    link = LinkCost.from_gbps(16)
    top = plan_swaps(vit, 1 << 62)
    late = 0
    for frac in (0.9, 0.75, 0.6):
        lim = int(frac * top.peak_before)
        for score in SCORES:
            p = plan_swaps(vit, lim, "singa_swap", score, link=link)
            a, b = (p.start + x for x in p.info["context"])
            swaps = list(zip((p.r_idx + p.start).tolist(), (p.d_idx + p.start).tolist(), p.size.tolist()))
            ov, in_end, load = swap_schedule_twin(
                vit,
                a,
                p.start,
                p.start + p.length,
                b,
                p.start + p.info["peak_idx"],
                swaps,
                link.t_out,
                link.t_in,
                lim,
            )
            assert p.overhead_ns == pytest.approx(ov, rel=1e-12, abs=1e-6), (frac, score)
            assert p.in_end_ns.tolist() == pytest.approx(in_end, rel=1e-12), (frac, score)
            assert p.load.tolist() == load
            late += int(p.overhead_ns > 0)
    assert late > 0


def test_every_score_has_its_names():
    assert set(SCORES) == {"vote", "doa_origin", "pri", "doa", "aoa", "wdoa", "subwdoa"}
    assert SCORE_NAMES["aoa"][0] == "Area of Absence (AOA)"
    assert "pri_net" in SCORE_NAMES["aoa"][1] and "sub-wdto" in SCORE_NAMES["subwdoa"][1]
    assert SINGA_VGG_ITERATION_NS == pytest.approx(81.571072e6)


def test_scores_order_by_hand():
    """Three candidates across the peak (op 6): X 200 B, Y 100 B, Z 50 B. With T_out = T_in
    = s ns, each score's first pick is the block it ranks first (hand-worked below)."""
    ops = [
        (MALLOC, 0, 200, 0),
        (LAYER, 0, 200, 10),
        (MALLOC, 1, 100, 12),
        (LAYER, 1, 100, 20),
        (MALLOC, 2, 50, 25),
        (LAYER, 2, 50, 30),
        (MALLOC, 3, 1000, 40),
        (FREE, 3, 1000, 50),
        (READ, 0, 200, 100),
        (READ, 2, 50, 250),
        (READ, 1, 100, 300),
        (FREE, 0, 200, 310),
        (FREE, 1, 100, 320),
        (FREE, 2, 50, 330),
    ]
    k, blk, size, t = (np.asarray(x) for x in zip(*ops))
    tr = AllocTrace(
        "scores",
        k.astype(np.int8),
        (blk * 4096 + 4096).astype(np.int64),
        size.astype(np.int64),
        t.astype(np.int64),
        blk.astype(np.int64),
        np.zeros(len(k), np.int16),
        {},
    )
    # load after ops 0..: 200 200 300 300 350 350 1350 350 350 350 350 150 50 0; peak op 6.
    # gaps: X ops 1..8 (90 ns), Y 3..10 (280 ns), Z 5..9 (220 ns).
    # DOA origin: Y 280 > Z 220 > X 90.       pri = gap x size: Y 28000 > X 18000 > Z 11000.
    # DOA = gap - T_out - T_in: Z 120 > Y 80 > X -310.   AOA: Y 8000 > Z 6000 > X -1.55.
    # WDOA = load summed over [r, d): Y 3400 > X 3200 > Z 2400 (subwdoa: the same first).
    # vote = rank sums (DOA origin, AOA, WDOA): Y 3, Z 7, X 8.
    first = {}
    for score in SCORES:
        p = plan_swaps(tr, 1349, "singa_swap", score, link=ONE_NS_PER_BYTE, period=(0, 8), min_block=1)
        assert p.num_swaps == 1
        first[score] = int(p.block[0])
    assert first["doa_origin"] == 1 and first["pri"] == 1 and first["aoa"] == 1
    assert first == {"vote": 1, "doa_origin": 1, "pri": 1, "doa": 2, "aoa": 1, "wdoa": 1, "subwdoa": 1}


def test_vec_block_format_and_blocks_live_at_start(tmp_path):
    """SwapGPU's appended form (bytes on every op), cut from a longer run: a block first seen
    by a read or a free was live when the recording starts and gets a malloc there."""
    from g10fast.alloc.trace import read_trace

    p = tmp_path / "vec_block_cut.csv"
    p.write_text(
        "Read 0xa0 300 1000\n"  # 0xa0: live before the cut
        "Malloc 0xb0 100 1010\n"
        "Mutable 0xb0 100 1020\n"
        "Free 0xa0 300 1030\n"
        "Layer 0xc0 7 1040\n"  # a layer marker alone: not a block
        "Free 0xb0 100 1050\n"
    )
    tr = read_trace(p)
    assert tr.meta["format"] == "singa-vec_block" and tr.meta["live_at_start"] == 1
    assert tr.kind.tolist() == [MALLOC, READ, MALLOC, 3, FREE, FREE]
    assert tr.live_bytes().tolist() == [300, 300, 400, 400, 100, 0]
    assert tr.time_ns.tolist() == [0, 0, 10, 20, 30, 50]
    bad = tmp_path / "bad.csv"
    bad.write_text("Malloc 0xb0 100 1010\nMutable 0xb0 1020 7 8\n")
    with pytest.raises(InputError, match="bad.csv:2"):
        read_trace(bad)


def test_base_bytes_raise_the_load():
    # 50 B the trace does not show: the peak 450 -> 500; at limit 450 A must go, as at 400
    # without them, and the schedule is the same (overhead 90 ns)
    p = _plan(_trace(), 450, base_bytes=50)
    q = _plan(_trace(), 400)
    assert p.peak_before == 500 and p.overhead_ns == q.overhead_ns == 90.0
    assert (p.load - 50).tolist() == q.load.tolist()
    with pytest.raises(InputError, match="base_bytes"):
        _plan(_trace(), 450, base_bytes=-1)


def _three(t_iter=1000):
    """The hand trace three times, one iteration every `t_iter` ns."""
    one = _trace()
    n = one.num_ops
    k = np.tile(one.kind, 3)
    blk = np.concatenate([one.block + 3 * i for i in range(3)])
    t = np.concatenate([one.time_ns + t_iter * i for i in range(3)])
    return AllocTrace(
        "hand3",
        k,
        (blk * 4096 + 4096).astype(np.int64),
        np.tile(one.size, 3),
        t.astype(np.int64),
        blk.astype(np.int64),
        np.zeros(3 * n, np.int16),
        {},
    )


def _offline(tr, limit, score="aoa"):
    return plan_swaps(
        tr,
        limit,
        "singa_swap",
        score,
        link=ONE_NS_PER_BYTE,
        period=(0, 6),
        min_block=1,
        offline_analysis=True,
    )


def test_offline_analysis_by_hand():
    """memInfoSwap's schedule on the middle of three iterations (ops 8..15, t = 1000 + the
    hand times). Candidates: A over (9, 14) and B over (10, 13) (its malloc and free count:
    any two ops across the peak op 11). AOA with DOA = gap - T_out only: A 100 x 100, B
    (180 - 300) / 300: A first; A alone brings the peak to 350.
    Limit 400: A's swap-out from t=1010 ends at 1110, the first op at or after it is 13, but
    the iteration's first over-limit op is 11 (450), so it is dropped at op 10 (t=1020):
    wait 90. Its swap-in's lead time is looked up in the first iteration's times (t(6) =
    210 < 1110), so it starts at its use, op 14: no wait is ever counted for it."""
    tr = _three()
    p = _offline(tr, 400)
    assert p.start == 8 and p.block.tolist() == [3] and p.overhead_ns == 90.0
    assert p.out_end_idx.tolist() == [2] and p.in_start_idx.tolist() == [6] == p.d_idx.tolist()
    # limit 350: dropped at op 9 (the first over-limit op is 10): wait 1110 - 1010 = 100;
    # the swap-in, late by 90 ns under SwapGPU's schedule, costs nothing here
    q = _offline(tr, 350)
    assert q.overhead_ns == 100.0 and q.in_start_idx.tolist() == [6]
    intended = plan_swaps(tr, 350, "singa_swap", "aoa", link=ONE_NS_PER_BYTE, period=(0, 6), min_block=1)
    assert intended.overhead_ns == 190.0
    with pytest.raises(InputError, match="offline_analysis"):
        _offline(tr, 350, "vote")
    with pytest.raises(InputError, match="three iterations"):
        plan_swaps(
            _trace(),
            350,
            "singa_swap",
            "aoa",
            link=ONE_NS_PER_BYTE,
            period=(0, 6),
            min_block=1,
            offline_analysis=True,
        )


def test_cli_clock_offline_and_base(vit, capsys):
    """g10fast swap --iteration-ms / --base-mib / --offline-analysis on ViT-8's derived trace:
    the same numbers as the API; bad values exit 2 naming the flag."""
    import json

    from g10fast.cli import main

    peak = plan_swaps(vit, 1 << 62).peak_before
    lim = int(0.7 * peak)
    args = ["swap", "vit", "--batch", "8", "--limit-mib", str(lim / 2**20), "--score", "aoa"]
    ran = 0
    for extra, kw in (
        (["--iteration-ms", "5"], {"iteration_ns": 5e6}),
        (["--base-mib", "3"], {"base_bytes": 3 * 2**20}),
        (["--offline-analysis"], {"offline_analysis": True}),
    ):
        want = plan_swaps(vit, int(lim / 2**20 * 2**20), "singa_swap", "aoa", **kw)
        assert main(args + extra + ["--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["overhead_per_iteration_s"] == pytest.approx(want.overhead_ns * 1e-9)
        assert out["swaps"] == want.num_swaps > 0
        ran += 1
    assert ran == 3
    for bad in (["--iteration-ms", "0"], ["--base-mib", "-1"]):
        assert main(args + bad) == 2
        assert bad[0] in capsys.readouterr().err
