"""The trace-driven swap planners (g10fast.alloc.swap): invariants on derived and real traces,
replay with mispredictions, the `g10fast swap` and `g10fast memory` commands."""

import json
from pathlib import Path

import numpy as np
import pytest

from g10fast.alloc.swap import LinkCost, check_plan, plan_swaps, replay, sweep_limits
from g10fast.alloc.trace import AllocTrace, from_workload, read_trace
from g10fast.errors import InputError

TRACES = Path(__file__).resolve().parents[2] / "shared" / "external" / "singa-traces"
MiB = 1 << 20


def _model_trace(iterations=3):
    from g10fast.memory_source import load_source

    return load_source("vit", batch=8, iterations=iterations)


@pytest.fixture(scope="module")
def vit():
    return _model_trace(4)


@pytest.mark.parametrize("policy", ["singa_swap", "appobmem"])
def test_invariants_on_a_model(vit, policy):
    top = plan_swaps(vit, 1 << 62, policy)
    assert top.num_swaps == 0 and top.peak_after == top.peak_before
    n_zero = 0
    for frac in (0.95, 0.85, 0.75, 0.6):
        for score in ("vote", "doa", "aoa", "wdoa"):
            lim = int(frac * top.peak_before)
            p = plan_swaps(vit, lim, policy, score, link=LinkCost.from_gbps(16))
            check_plan(vit, p)  # never absent when touched
            assert p.overhead_ns >= 0
            if p.overhead_ns == 0 and p.peak_after <= lim:
                n_zero += 1
                assert p.load.max() <= lim  # zero overhead: the load stays under
            # swaps come out after their last use and back by their next
            assert (p.r_idx <= p.out_end_idx).all() and (p.in_start_idx <= p.d_idx).all()
            assert p.peak_after <= max(lim, p.peak_before)


def test_tighter_limits_swap_more(vit):
    rows = sweep_limits(
        vit, [int(f * 1.2e9) for f in (1.0, 0.8, 0.6)], "singa_swap", ["aoa"], link=LinkCost.from_gbps(16)
    )
    sw = [r["swapped_bytes"] for r in rows]
    assert sw == sorted(sw)


def test_replay_and_misprediction(vit):
    p = plan_swaps(
        vit, int(0.7 * plan_swaps(vit, 1 << 62).peak_before), "singa_swap", link=LinkCost.from_gbps(16)
    )
    assert p.num_swaps > 0
    rep = replay(vit, p)
    assert rep["iterations"] and all(r["mismatches"] == 0 for r in rep["iterations"])
    # resize the block of the first swap in the next iteration: a misprediction there
    size = vit.size.copy()
    r_next = p.start + p.length + p.r_idx[0]
    size[vit.block == vit.block[r_next]] += 512
    bad = AllocTrace(vit.name, vit.kind, vit.address, size, vit.time_ns, vit.block, vit.stream, vit.meta)
    rep = replay(bad, p)
    assert rep["iterations"][0]["mismatches"] >= 1
    assert rep["iterations"][0]["overhead_s"] > p.overhead_ns * 1e-9
    off = replay(bad, p, on_mismatch="disable")
    assert not off["iterations"][0]["swapping"]
    assert off["iterations"][0]["peak_bytes"] > p.peak_after


def test_faithful_wdoa_is_zero_and_doa_uses_t_out_twice(vit):
    lim = int(0.8 * plan_swaps(vit, 1 << 62).peak_before)
    a = plan_swaps(vit, lim, "singa_swap", "wdoa", faithful_quirks=True)
    b = plan_swaps(vit, lim, "singa_swap", "wdoa")
    check_plan(vit, a)
    check_plan(vit, b)
    # WDOA = 0 for every candidate: the candidates' own order (by block, then op), and as
    # many as it takes to reach the limit
    assert a.num_swaps > 1 and a.peak_after <= lim and b.peak_after <= lim
    assert set(a.block.tolist()) != set(b.block.tolist())
    assert a.summary()["faithful_quirks"] and not b.summary()["faithful_quirks"]
    lk = LinkCost.singa_measured()
    assert lk.t_out(10 * MiB) == pytest.approx(0.0756 * 10 * MiB + 47200)
    assert lk.t_in(10 * MiB) == pytest.approx(0.0823 * 10 * MiB + 9700)


def test_bad_input(vit):
    with pytest.raises(InputError, match="unknown score"):
        plan_swaps(vit, 1, "singa_swap", "area")
    with pytest.raises(InputError, match="unknown swap policy"):
        plan_swaps(vit, 1, "lru")
    with pytest.raises(InputError, match="limit"):
        plan_swaps(vit, -1)


@pytest.mark.parametrize("name", ["vec_run_5_vgg.csv", "blockInfo_resnet_315.text"])
def test_real_traces(name):
    if not (TRACES / name).exists():
        pytest.skip("no ../shared/external/singa-traces")
    tr = read_trace(TRACES / name)
    top = plan_swaps(tr, 1 << 62)
    n_zero = 0
    for policy in ("singa_swap", "appobmem"):
        for frac in (0.9, 0.7):
            p = plan_swaps(tr, int(frac * top.peak_before), policy)
            check_plan(tr, p)
            assert p.peak_after <= int(frac * top.peak_before)
            if p.overhead_ns == 0:
                n_zero += 1
                assert p.load.max() <= int(frac * top.peak_before)
    assert n_zero > 0


def test_cli_memory_and_swap(tmp_path, capsys):
    from g10fast.alloc.trace import write_hdf5
    from g10fast.cli import main

    tr = _model_trace(3)
    f = tmp_path / "vit.h5"
    write_hdf5(tr, f)
    assert main(["memory", str(f), "--allocator", "cnmem", "--json", "--period", "match"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "ok" and d["peak_reserved_bytes"] >= d["peak_live_bytes"] > 0
    assert d["period"]["found"] and d["period"]["length"] == tr.meta["period"][1]
    assert main(["memory", str(f), "--capacity-mib", "1", "--allocator", "pytorch", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "oom" and d["oom"]["bytes"] > 0
    assert main(["memory", "vit", "--batch", "8", "--figure", str(tmp_path / "m.png")]) == 0
    assert (tmp_path / "m.png").exists()
    assert "peak live" in capsys.readouterr().out
    assert (
        main(
            [
                "swap",
                "vit",
                "--batch",
                "8",
                "--limit-mib",
                "300",
                "--json",
                "--link",
                "preset",
                "--allocator",
                "cnmem",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert {"overhead_per_iteration_s", "iteration_s", "peak_bytes", "status"} <= set(d)
    assert d["gpu_memory_needed_bytes"] >= d["peak_bytes"] and d["swaps"] > 0
    assert (
        main(["swap", "vit", "--batch", "8", "--sweep-limits", "700:1100:200", "--score", "aoa", "--json"])
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert len(d["rows"]) == 3
    for bad in (
        ["memory", str(f), "--allocator", "nope"],
        ["swap", "vit", "--batch", "8"],
        ["swap", "vit", "--batch", "8", "--sweep-limits", "5:1:1"],
        ["swap", "vit", "--batch", "8", "--limit-mib", "300", "--allocator", "x"],
        ["memory", str(tmp_path / "none.h5")],
    ):
        assert main(bad) == 2


# ---------------------------------------------------------------------------------------------
# the policies on the models (the swap engine)


@pytest.mark.parametrize("policy", ["singa_swap", "appobmem"])
def test_policy_on_a_model(policy):
    import g10fast.api as api
    from g10fast import policies

    assert policy not in policies.DEFAULT_POLICIES
    res = api.simulate(
        "vit", 8, "g10-artifact", policy, options={"limit_fraction": 0.6, "allocator": "cnmem"}
    )
    assert res["engine"] == "swap" and res["status"] == "ok"
    it = res["iterations"][0]
    # timed by the tensor engine: kernel time plus waits for the host link
    assert it["exe_time_ms"] >= it["ideal_exe_time_ms"] > 0
    assert it["exe_time_cycles"] >= it["ideal_exe_time_cycles"] - 1
    pl = res["plan"]
    # every hinted swap moved its tensor out and back over the host link, nothing to the SSD
    assert pl["hinted_swaps"] > 0 and it["pages"]["ssd_to_gpu"] == it["pages"]["gpu_to_ssd"] == 0
    assert it["pages"]["cpu_to_gpu"] == it["pages"]["gpu_to_cpu"] > 0
    assert pl["swaps"] > 0 and pl["peak_bytes"] <= pl["limit_bytes"] < pl["peak_before_bytes"]
    need = res["gpu_memory_needed_bytes"]
    assert need == res["allocator"]["peak_reserved_bytes"] >= res["allocator"]["peak_live_bytes"]
    # less memory than the unswapped iteration needs under the same allocator
    full = api.simulate(
        "vit", 8, "g10-artifact", policy, options={"limit_fraction": 1.0, "allocator": "cnmem"}
    )
    assert full["plan"]["swaps"] == 0 and full["gpu_memory_needed_bytes"] > need
    # a GPU smaller than the need: a failed run naming the need
    small = api.simulate(
        "vit", 8, "g10-artifact", policy, overrides={"gpu.memory_gb": 0.05}, options={"limit_fraction": 0.6}
    )
    assert small["status"] == "failed" and "GiB of GPU memory" in small["failure"]["reason"]
    with pytest.raises(InputError, match="allocator"):
        api.simulate("vit", 8, "g10-artifact", policy, options={"allocator": "tlsf"})
    if policy == "appobmem":
        # E6: the plan is made on the times of a Base-UVM profile run
        assert res["profile"]["policy"] == "lru" and res["profile"]["iteration_s"] > 0
        tight = api.simulate(
            "vit",
            8,
            "g10-artifact",
            policy,
            overrides={"gpu.memory_gb": 0.3},
            options={"limit_fraction": 0.6, "allocator": "cnmem"},
        )
        ideal_s = tight["iterations"][0]["ideal_exe_time_cycles"] / tight["f_hz"]
        assert tight["profile"]["iteration_s"] > ideal_s  # faults distort the profile
        assert tight["plan"]["swaps"] > 0


def test_swapped_iteration_places_without_overlap():
    from alloc_twin import check_placement
    from g10fast.alloc.allocators import run_allocator
    from g10fast.policies.trace_swap import swapped_iteration

    tr = _model_trace(3)
    p = plan_swaps(tr, int(0.6 * plan_swaps(tr, 1 << 62).peak_before), "singa_swap")
    sw = swapped_iteration(tr, p)
    for a in ("cnmem", "singa_colour", "pytorch"):
        res = run_allocator(sw, a)
        check_placement(sw, res)
    # the swapped iteration's load peak is the plan's
    assert int(sw.live_bytes().max()) <= max(p.peak_after, int(sw.live_bytes()[0]))


def test_swap_policies_sweep_into_the_store(tmp_path):
    artifact = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"
    if not (artifact / "frontend" / "Nets").is_dir():
        pytest.skip("no ../shared/g10-artifact")
    from g10fast.figures.data import Results
    from g10fast.sweep.matrix import expand_matrix_dict, resolve_points
    from g10fast.sweep.runner import run_sweep

    matrix = {
        "group": [{"name": "seed", "models": ["VIT"], "batch": [256], "policies": ["SINGA-Swap", "appobmem"]}]
    }
    pts = resolve_points(expand_matrix_dict(matrix), artifact)
    assert [p.point.policy for p in pts] == ["singa_swap", "appobmem"]
    summary = run_sweep(pts, str(tmp_path / "s.h5"), workers=0)
    assert "2 ok" in summary.text()
    st = Results(str(tmp_path / "s.h5")).get("VIT", 256, "singa_swap")
    assert st["exe"] >= 0.9999 * st["ideal"] > 0  # tensor-engine ms, rounded to cycles


def test_swap_plan_runs_on_the_tensor_engine():
    """The swap runner feeds the plan to the (unchanged) tensor engine as hint rows: the same
    rows given to simulate_tensors directly give the same time, and the allocator's need is
    the allocator over the engine's allocations; a tensor is resident whenever a kernel needs
    it (the engine's own invariants, --check)."""
    import dataclasses

    import g10fast.api as api
    from g10fast.alloc.allocators import run_allocator
    from g10fast.alloc.swap import LinkCost
    from g10fast.alloc.trace import from_tensor_events
    from g10fast.engine.tensor import TensorOptions, simulate_tensors
    from g10fast.locations import IN_CPU, IN_GPU
    from g10fast.policies.trace_swap import ENGINE_OPTIONS, swap_hints
    from g10fast.run import run
    from g10fast.spec import builtin_spec

    spec = builtin_spec(
        "vit", 8, "g10-artifact", "singa_swap", options={"limit_fraction": 0.6}, engine={"allocator": "cnmem"}
    )
    w = api.builtin_workload("vit", 8, "g10-artifact")
    res = run(spec, workload=w, check=True)
    assert res["status"] == "ok" and res["invariant_checks"] > 0
    assert res["allocator"]["allocator"] == "cnmem"  # the run option beats the default
    tr = from_workload(w, freq_ghz=spec.system.gpu_frequency_ghz, iterations=3)
    p = plan_swaps(
        tr,
        res["plan"]["limit_bytes"],
        "singa_swap",
        "vote",
        link=LinkCost.from_gbps(spec.system.host_link_gbps, spec.system.link_latency_us),
        periodic=True,
    )
    hints, info, absent = swap_hints(tr, p)
    assert info["hinted_swaps"] == res["plan"]["hinted_swaps"] == len(hints) // 2
    # each swap: out at a kernel after the last use, back at a kernel up to the next use
    outs, ins = hints[hints[:, 3] == IN_CPU], hints[hints[:, 3] == IN_GPU]
    assert len(outs) == len(ins) and (np.sort(ins[:, 0]) > 0).all()
    for t in np.unique(outs[:, 1]):
        o, i = np.sort(outs[outs[:, 1] == t, 0]), np.sort(ins[ins[:, 1] == t, 0])
        assert (o < i).all()
    ssd = spec.system.ssd_bandwidth_gbps
    esys = dataclasses.replace(
        spec.system,
        gpu_memory_gb=float(w.size.sum()) / 2**30 + 1.0,
        host_link_gbps=spec.system.host_link_gbps + ssd,
    )
    trun = simulate_tensors(w, esys, "gds_ssd_host", hints, options=TensorOptions(**ENGINE_OPTIONS))
    assert trun.total_ms == res["iterations"][0]["exe_time_ms"]
    assert trun.cpu_to_gpu_bytes == trun.gpu_to_cpu_bytes > 0
    need = run_allocator(
        from_tensor_events(trun.events, w.raw_size, absent_at_start=absent), "cnmem"
    ).peak_reserved
    assert need == res["gpu_memory_needed_bytes"]
    # the same allocator over a tensor-engine policy's run: its need, beside its result
    fn = api.simulate("vit", 8, "g10-artifact", "FlashNeuron", engine={"allocator": "cnmem"})
    assert fn["gpu_memory_needed_bytes"] >= fn["allocator"]["peak_live_bytes"] > 0
    with pytest.raises(InputError, match="allocator"):
        api.simulate("vit", 8, "g10-artifact", "lru", engine={"allocator": "cnmem"})


def test_tensor_events_to_alloc_trace():
    from g10fast.alloc.trace import FREE, MALLOC, from_tensor_events
    from g10fast.engine.page.kernels import EV_ALLOC, EV_DEALLOC, EV_EVICT, EV_KERNEL

    ev = np.zeros((6, 10), np.int64)
    # tensor 3 at page 0, tensor 5 at page 10, kernel marker, 3 evicted, 3 back at 20, 5 freed
    for i, (k, t, pg) in enumerate(
        [
            (EV_ALLOC, 3, 0),
            (EV_ALLOC, 5, 10),
            (EV_KERNEL, -1, -1),
            (EV_EVICT, 3, 0),
            (EV_ALLOC, 3, 20),
            (EV_DEALLOC, 5, 10),
        ]
    ):
        ev[i, 1], ev[i, 4], ev[i, 5], ev[i, 0] = k, t, pg, i
    sizes = np.arange(10) * 1000
    tr = from_tensor_events(ev, sizes)
    assert tr.kind.tolist() == [MALLOC, MALLOC, FREE, MALLOC, FREE]
    assert tr.block.tolist() == [0, 1, 0, 2, 1]
    assert tr.size.tolist() == [3000, 5000, 3000, 3000, 5000]
    assert tr.live_bytes().tolist() == [3000, 8000, 5000, 8000, 3000]


def test_wrapping_swap_is_absent_at_start_for_the_allocator():
    """A swap that wraps round the iteration (swap_hints' absent_at_start): the start-up copy
    and its stand-in eviction are left out; the tensor lives from its swap-in to the end of
    the kernel before its swap-out."""
    from g10fast.alloc.trace import FREE, MALLOC, from_tensor_events
    from g10fast.engine.page.kernels import EV_ALLOC, EV_DEALLOC, EV_EVICT, EV_KERNEL

    rows = [
        (EV_ALLOC, -1, 3, 0),
        (EV_ALLOC, -1, 4, 8),  # start-up: weights 3 and 4
        (EV_EVICT, 0, 3, 0),
        (EV_KERNEL, 0, -1, -1),  # stand-in swap-out of 3
        (EV_ALLOC, 1, 3, 16),
        (EV_KERNEL, 1, -1, -1),  # 3 swapped in for kernel 1
        (EV_ALLOC, 2, 5, 24),
        (EV_KERNEL, 2, -1, -1),
        (EV_DEALLOC, 2, 5, 24),
    ]
    ev = np.zeros((len(rows), 10), np.int64)
    for i, (k, kern, t, pg) in enumerate(rows):
        ev[i, 0], ev[i, 1], ev[i, 3], ev[i, 4], ev[i, 5] = i, k, kern, t, pg
    sizes = np.arange(10) * 100
    tr = from_tensor_events(ev, sizes, absent_at_start={3: 2})
    assert tr.kind.tolist() == [MALLOC, MALLOC, FREE, MALLOC, FREE]
    assert tr.size.tolist() == [400, 300, 300, 500, 500]
    assert tr.live_bytes().tolist() == [400, 700, 400, 900, 400]
    plain = from_tensor_events(ev, sizes)
    assert plain.live_bytes().max() == 1200 and plain.num_blocks == 4


def test_appobmem_alloc_free_only(vit):
    """appob.trace = alloc_free_only: the planner sees mallocs and frees only; a block is a
    candidate when it lives across the peak (used at its malloc and before its free), and the
    accesses it did not see that fall while the block is away are counted."""
    from g10fast.alloc.trace import FREE

    limit = int(0.6 * plan_swaps(vit, 1 << 62, "appobmem").peak_before)
    full = plan_swaps(vit, limit, "appobmem")
    blind = plan_swaps(vit, limit, "appobmem", accesses="alloc_free_only")
    assert blind.num_swaps > 0 and blind.info["accesses"] == "alloc_free_only"
    # every swap runs from the block's malloc (or an earlier iteration's access) to its free
    for q in range(blind.num_swaps):
        assert vit.kind[blind.start + blind.d_idx[q]] == FREE
    # it cannot see the uses in between: some fall while the block is away
    assert blind.info["absent_accesses"] > 0
    with pytest.raises(Exception):
        check_plan(vit, blind)
    assert full.info["accesses"] == "alloc_free_access" and "absent_accesses" not in full.info
    # a trace without accesses (SINGA's memInfo) now plans
    no_acc = AllocTrace(
        vit.name,
        vit.kind[vit.kind <= FREE],
        vit.address[vit.kind <= FREE],
        vit.size[vit.kind <= FREE],
        vit.time_ns[vit.kind <= FREE],
        vit.block[vit.kind <= FREE],
        vit.stream[vit.kind <= FREE],
        {},
    )
    assert plan_swaps(no_acc, limit, "appobmem").num_swaps == 0
    p = plan_swaps(no_acc, limit, "appobmem", accesses="alloc_free_only")
    assert p.num_swaps > 0 and p.info["absent_accesses"] == 0
    with pytest.raises(InputError, match="alloc_free"):
        plan_swaps(vit, limit, "appobmem", accesses="some")
    # on the model, through the tensor engine: it runs, the blind spots cost demand fetches
    import g10fast.api as api

    res = api.simulate(
        "vit",
        8,
        "g10-artifact",
        "appobmem",
        options={"limit_fraction": 0.6, "trace": "alloc_free_only", "profile_policy": "none"},
    )
    assert res["status"] == "ok" and res["plan"]["absent_accesses"] > 0


def test_periodic_load_and_whole_kernel_gaps(vit):
    """plan_swaps(periodic=True): a chosen swap leaves the load in the neighbouring
    iterations too, so a limit takes no more swaps; op_group: every swap's gap holds a whole
    kernel."""
    from g10fast.policies.trace_swap import absolute_kernels

    peak = plan_swaps(vit, 1 << 62).peak_before
    ak = absolute_kernels(vit)
    for frac in (0.8, 0.6):
        one = plan_swaps(vit, int(frac * peak), "singa_swap")
        per = plan_swaps(vit, int(frac * peak), "singa_swap", periodic=True, op_group=ak)
        assert per.num_swaps <= one.num_swaps and per.peak_after <= per.limit_bytes
        s = per.start
        assert (ak[s + per.d_idx] - ak[s + per.r_idx] >= 2).all()
    # the absolute kernel climbs by K from one iteration to the next
    K = vit.meta["kernels"]
    kop = vit.meta["kernel_of_op"]
    first = [i for i in range(1, len(kop)) if kop[i] == 0 and kop[i - 1] > 0]
    assert [int(ak[i]) for i in first] == [K * (j + 1) for j in range(len(first))]


def test_fit_allocator_lowers_the_limit():
    """A need above the GPU's memory (the allocator's overhead over the load) lowers the
    planner's limit by the excess and plans again; without fit_allocator it is a failure."""
    import g10fast.api as api

    kw = dict(overrides={"gpu.memory_gb": 0.35}, engine={"allocator": "cnmem"})
    res = api.simulate("vit", 8, "g10-artifact", "singa_swap", **kw)
    gpu = int(0.35 * 2**30)
    rounds = res["fit_rounds"]
    assert len(rounds) >= 2 and rounds[0]["gpu_memory_needed_bytes"] > gpu
    assert rounds[1]["limit_bytes"] == rounds[0]["limit_bytes"] - (rounds[0]["gpu_memory_needed_bytes"] - gpu)
    assert res["status"] == "ok" and res["gpu_memory_needed_bytes"] <= gpu
    stiff = api.simulate("vit", 8, "g10-artifact", "singa_swap", options={"fit_allocator": False}, **kw)
    assert stiff["status"] == "failed" and stiff["failure"]["stage"] == "allocator"
    assert len(stiff["fit_rounds"]) == 1
