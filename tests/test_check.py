"""`--check`: every engine's invariants asserted at every kernel boundary (issue 18) — on every
policy of every engine on small synthetic workloads, and on artifact-sized runs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import make_workload  # noqa: E402

from g10fast import policies  # noqa: E402
from g10fast.errors import InvariantError  # noqa: E402
from g10fast.run import run  # noqa: E402
from g10fast.spec import WorkloadSource, make_spec  # noqa: E402
from g10fast.system import System  # noqa: E402
from g10fast.workload.model import PAGE_SIZE  # noqa: E402

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"


def _spec(policy, gpu_pages, host_pages):
    system = System(
        gpu_memory_gb=gpu_pages * PAGE_SIZE / 2**30,
        gpu_frequency_ghz=1.2,
        host_memory_gb=host_pages * PAGE_SIZE / 2**30,
        host_link_gbps=15.754,
        ssd_bandwidth_gbps=3.2,
        fault_latency_us=45.0,
    )
    return make_spec(WorkloadSource("artifact", "synthetic", 1), system, policy)


def _workload(seed, n_kernels, n_tensors, max_pages):
    """A synthetic workload with a makeLoss kernel in the middle (FlashNeuron plans around
    it: activations of the forward half are offloaded)."""
    import dataclasses

    w = make_workload(seed, n_kernels=n_kernels, n_tensors=n_tensors, max_pages=max_pages)
    names = list(w.kernel_name)
    names[n_kernels // 2] = "makeLoss"
    return dataclasses.replace(w, kernel_name=names)


def _same(a, b):
    import json

    assert a["status"] == b["status"]
    assert json.dumps(a["iterations"], sort_keys=True) == json.dumps(b["iterations"], sort_keys=True)


@pytest.mark.parametrize("policy", [r.name for r in policies.records()])
@pytest.mark.parametrize("seed,gpu,host", [(1, 120, 400), (2, 90, 20), (3, 200, 0)])
def test_check_on_every_policy(policy, seed, gpu, host):
    if policies.get(policy).engine == "ranks":
        # a node's data-parallel ranks: a small training step (the engine needs an optimizer)
        # on a preset with a [node]; the seed picks the rank count
        from g10fast.api import builtin_spec

        spec = builtin_spec(
            "qwen2.5-1.5b", 1, "dgx-a100-40", policy, model_options={"layers": 2, "seq_len": 64}
        )
        spec = spec.replace(system=spec.system.replace(gpus=seed))
        plain, checked = run(spec), run(spec, check=True)
        _same(plain, checked)
        assert checked["invariants_checked"] is True
        assert checked["invariant_checks"] == len(plain["timeline"]["start_ns"]) > 100
        return
    if policies.get(policy).engine == "driver":
        gpu, host = gpu * 20, host * 20  # the driver evicts whole 2 MiB chunks: >= 4 chunks
    w = _workload(seed, 16, 40, gpu // 4)
    spec = _spec(policy, gpu, host)
    plain = run(spec, workload=w)
    checked = run(spec, workload=w, check=True)
    _same(plain, checked)
    assert checked["invariants_checked"] is True
    if checked["status"] == "ok" and checked["engine"] != "swap":
        # the page engine checks at every kernel boundary of both iterations; the tensor
        # engine at every event of its one iteration (the swap engine: every swap planned)
        assert checked["invariant_checks"] >= w.num_kernels


def test_a_broken_invariant_names_the_kernel_and_the_invariant():
    from g10fast.engine.page import kernels as pk
    from g10fast.engine.page import page_params, PageMode
    from g10fast.engine.page.check import CountingSink, PageChecker

    w = make_workload(1, n_kernels=6, n_tensors=12, max_pages=10)
    sp = page_params(_spec("lru", 60, 60).system, PageMode())
    sink = CountingSink()
    chk = PageChecker(w, sp, sink, "every")  # a scan at every check
    chk.init_ssd = 0  # this hand-made page table holds no SSD pages
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.S_CUR_KERNEL], S[pk.S_CUR_ITER], S[pk.S_GPU_USED] = 3, 1, 2
    pstate = np.zeros(w.num_pages, dtype=np.uint8)
    pstate[:5] = pk.IN_GPU  # 5 pages on the GPU, the engine counts 2
    pcie = np.zeros((2, pk.PC_COLS), dtype=np.int64)
    where = rf"invariant broken at kernel 3 \({w.kernel_name[3]}\), iteration 1: "
    with pytest.raises(
        InvariantError,
        match=where + r"bytes moved = bytes arrived \(GPU\): "
        "0 pages arrived, 0 left, the GPU holds 2",
    ):
        chk.check(S, pstate, pcie, 0)
    sink.sums["arrive"] = 2
    with pytest.raises(
        InvariantError,
        match=where + "each page in one place: 5 pages are on the GPU in the page table, the engine counts 2",
    ):
        chk.check(S, pstate, pcie, 0)
    S[pk.S_GPU_USED] = sink.sums["arrive"] = 5
    pstate[:5] |= pk.F_TRANSFER
    with pytest.raises(InvariantError, match="5 pages are marked in transfer, the queues hold 0"):
        chk.check(S, pstate, pcie, 0)
    chk.check(S, pstate, pcie, lambda: 5)  # consistent: no error
    S[pk.S_GPU_USED] = sink.sums["arrive"] = sp.frames + 1
    with pytest.raises(InvariantError, match=f"GPU capacity: {sp.frames + 1} pages in use of {sp.frames}"):
        chk.check(S, pstate, pcie, 0)


def test_tensor_check_catches_an_overlap():
    from types import SimpleNamespace

    from g10fast.engine.tensor import kernels as tk
    from g10fast.engine.tensor.check import check_tensor_run

    w = make_workload(1, n_kernels=4, n_tensors=8, max_pages=10)
    ev = np.full((3, 10), -1, dtype=np.int64)
    ev[0, [1, 3]] = tk.EV_KERNEL, 2
    ev[1, [1, 4, 5, 6, 9]] = tk.EV_ALLOC, 1, 0, 4, 0
    ev[2, [1, 4, 5, 6, 9]] = tk.EV_ALLOC, 2, 3, 4, 0
    run_ = SimpleNamespace(capacity_pages=100, events=ev, event_ms=np.arange(3.0))
    with pytest.raises(
        InvariantError,
        match=r"kernel 2 .*tensor 2 placed at pages \[3, 7\) "
        "overlaps",
    ):
        check_tensor_run(run_, w)


@pytest.mark.skipif(not (ARTIFACT / "frontend" / "Nets").is_dir(), reason="no G10 artifact")
@pytest.mark.parametrize("model,batch", [("BERT", 128), ("ResNet152", 256)])
@pytest.mark.parametrize("policy", ["lru", "prefetch_lru", "deepUM", "ideal"])
def test_check_on_artifact_sized_runs(model, batch, policy):
    from g10fast.config import genconfig
    from g10fast.spec import from_g10_config

    cfg = genconfig(ARTIFACT, model, batch, "lru" if policy == "ideal" else policy)
    spec = from_g10_config(cfg.replace(is_UVM=False) if policy == "ideal" else cfg)
    t0 = time.perf_counter()
    res = run(spec, check=True)
    checked_s = time.perf_counter() - t0
    assert res["invariants_checked"] and res["status"] == "ok"
    # the checks change nothing: the reported time is the unchecked run's (recorded in
    # benchmarks/results/check_times.jsonl with the time the checks take)
    plain = run(spec)
    assert res["iterations"] == plain["iterations"]
    assert res["invariant_checks"] >= 2 * res["workload"]["kernels"]
    assert res["invariant_check_level"] == "state"
    if policy != "ideal":
        # the page table is read within a time budget, and always at the run's end
        assert 1 <= res["page_table_scans"] <= res["invariant_checks"]
    assert checked_s > 0


def test_state_check_runs_the_engine_untraced(monkeypatch):
    """`check=True` ("state") runs the page engine without the event stream (its fast paths:
    the counting sink is never made) unless the run writes a trace anyway; "full" adds the
    stream's conservation sums and reads the page table at every check. Same results."""
    import g10fast.engine.page.check as pc

    w = _workload(4, 16, 40, 30)
    spec = _spec("lru", 120, 400)
    plain = run(spec, workload=w)
    full = run(spec, workload=w, check="full")
    assert full["invariant_check_level"] == "full"
    # a small run: its page table read at every check
    assert full["page_table_scans"] == full["invariant_checks"] >= 2 * w.num_kernels
    made = []
    real = pc.CountingSink
    monkeypatch.setattr(pc, "CountingSink", lambda inner=None: made.append(1) or real(inner))
    state = run(spec, workload=w, check=True)
    assert made == [] and state["invariant_check_level"] == "state"
    assert 1 <= state["page_table_scans"] <= state["invariant_checks"] == full["invariant_checks"]
    _same(plain, state)
    _same(plain, full)
    with pytest.raises(Exception, match="check"):
        run(spec, workload=w, check="some")


def test_broken_traffic_statistics_are_caught_without_the_event_stream():
    from g10fast.engine.page import kernels as pk
    from g10fast.engine.page import PageMode, page_params
    from g10fast.engine.page.check import PageChecker

    w = make_workload(1, n_kernels=6, n_tensors=12, max_pages=10)
    chk = PageChecker(w, page_params(_spec("lru", 60, 60).system, PageMode()), None)
    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.S_CUR_KERNEL] = 2
    pstate = np.zeros(w.num_pages, dtype=np.uint8)
    pcie = np.zeros((2, pk.PC_COLS), dtype=np.int64)
    pcie[1, [pk.PC_IN, pk.PC_IN_SSD, pk.PC_IN_CPU]] = 7, 3, 4
    chk.check(S, pstate, pcie, 0)  # 7 = 3 + 4: consistent
    pcie[1, pk.PC_OUT] = 1  # an eviction to nowhere
    with pytest.raises(InvariantError, match=r"kernel 2 .*traffic: pages fetched \(evicted\)"):
        chk.check(S, pstate, pcie, 0)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 64, 1001])
def test_count_states_against_numpy(n):
    """The page-table count (eight states a word) against a plain NumPy twin, on every byte
    value and on lengths that leave a tail, and on a view that starts inside a word."""
    from g10fast.engine.page import kernels as pk
    from g10fast.engine.page.check import count_states

    a = np.random.default_rng(n).integers(0, 256, n + 3).astype(np.uint8)
    a[: min(n, 256)] = np.arange(min(n, 256))
    for st in (a[:n], a[3:]):
        loc = st & 3
        twin = [int((loc == k).sum()) for k in range(4)] + [
            int(((st >> 2) & 1).sum()),
            int(((st & pk.RES_MASK) == pk.IN_GPU).sum()),
        ]
        assert count_states(st).tolist() == twin


def test_a_broken_invariant_exits_3_from_the_cli(capsys, monkeypatch):
    """docs/invariants.md: the CLI exits with status 3 and one line naming the invariant."""
    import g10fast.run
    from g10fast.cli import EXIT_INVARIANT, main

    def broken(*a, **k):
        raise InvariantError("invariant broken at kernel 3 (k), iteration 1: GPU capacity")

    monkeypatch.setattr(g10fast.run, "run", broken)
    assert main(["run", "--model", "vit", "--batch", "8", "--check", "--no-progress"]) == EXIT_INVARIANT == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("g10fast: invariant broken at kernel 3 (k), iteration 1: GPU capacity")
