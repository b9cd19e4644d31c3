"""The ranks engine (g10fast/engine/ranks): its timeline against a plain twin, the collective,
CPU and node models by hand-worked numbers, ZeRO steps' invariants (bytes moved, memory,
phases), and the recomputation pass."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from g10fast.api import builtin_spec
from g10fast.engine.ranks import cpu as cm
from g10fast.engine.ranks.collectives import collective_ns
from g10fast.engine.ranks.node import node_of
from g10fast.engine.ranks.timeline import Timeline
from g10fast.errors import InputError
from g10fast.hardware import load_preset
from g10fast.run import run


def schedule_py(ops):
    """The twin: (resource, duration, deps, stream) in issue order -> end times. An operation
    without a stream starts at the latest of its resource's previous end and its
    dependencies' ends; a copy (a stream given, over the link `resource`) is ready at the
    latest of its stream's previous end and its dependencies' ends, and starts at the
    earliest time from then on that no earlier copy on the link overlaps it: `ready`, or
    the end of one of them, whichever first fits."""
    free, ends, busy = {}, [], {}
    for res, dur, deps, stream in ops:
        d = int(math.ceil(dur))
        ready = max([free.get(res if stream is None else stream, 0)] + [ends[x] for x in deps])
        s = ready
        if stream is not None and d:
            spans = busy.setdefault(res, [])
            for t in sorted({ready} | {b for a, b in spans if b >= ready}):
                if all(b <= t or a >= t + d for a, b in spans):
                    s = t
                    break
            spans.append((s, s + d))
        ends.append(s + d)
        free[res if stream is None else stream] = ends[-1]
    return ends


@pytest.mark.parametrize("seed", range(5))
def test_timeline_equals_twin(seed):
    rng = np.random.default_rng(seed)
    ops = []
    for i in range(300):
        deps = (
            tuple(int(d) for d in rng.choice(i, size=min(i, int(rng.integers(0, 4))), replace=False))
            if i
            else ()
        )
        r = ["gpu", "h2d", "cpu", "host", "d2h"][int(rng.integers(0, 5))]
        # copies over the links, issued on a stream (one of them also a kernels' resource)
        stream = ["gpu", "nccl", "reduce"][int(rng.integers(0, 3))] if r in ("h2d", "d2h") else None
        ops.append((r, float(rng.uniform(0, 1000)) * (rng.random() > 0.05), deps, stream))
    tl = Timeline()
    for r, d, deps, stream in ops:
        tl.add(r, d, deps, stream=stream)
    assert tl.finish == schedule_py(ops)
    assert tl.check() == len(ops)
    # a copy ready before an earlier-issued one of another stream went first
    early = [
        i
        for i, (r, _, _, q) in enumerate(ops)
        if q is not None and any(ops[j][0] == r and tl.start[j] > tl.start[i] for j in range(i))
    ]
    assert early
    # a link takes copies issued on a stream; a stream is not a link
    with pytest.raises(InputError, match="a link takes copies"):
        tl.add("d2h", 10)
    with pytest.raises(InputError, match="a link takes copies"):
        tl.add("h2d", 10, stream="d2h")
    assert tl.makespan == max(tl.finish)
    assert tl.busy() == sum(f - s for s, f in zip(tl.start, tl.finish))


def test_collectives_by_hand():
    # all-reduce of 1 GB over 2 ranks at 230 GB/s: NCCL ring/Simple latency 8.4 + 2 x 3.4 us,
    # 2 (n-1)/n x 1e9 / 230e9 s
    assert collective_ns("all_reduce", 1e9, 2, 230.0) == pytest.approx((15.2e-6 + 1e9 / 230e9) * 1e9, abs=1)
    # all-gather of 8 GB over 8 ranks: 7 steps, (7/8) x 8e9 / 370e9
    assert collective_ns("all_gather", 8e9, 8, 370.0) == pytest.approx(
        ((8.4 + 7 * 3.4) * 1e-6 + 7e9 / 370e9) * 1e9, abs=1
    )
    assert collective_ns("reduce_scatter", 1e9, 1, 230.0) == 0
    with pytest.raises(InputError, match="tree"):
        collective_ns("all_gather", 1e9, 4, 230.0, algorithm="tree")


def test_cpu_adam_by_hand():
    pool = cm.CpuPool(cores=64, ghz=2.25, simd_lanes=8, per_core_gbps=20.0, bandwidth_gbps=160.0)
    # 1e9 elements x 28 B at 160 GB/s (memory-bound: compute is 1e9 / 8 x 12 cycles over
    # 64 x 2.25 GHz = 10.4 ms), plus 8 tiles' fork/join of 5 us
    assert cm.adam_ns(1e9, pool) == pytest.approx((28e9 / 160e9 + 8 * 5e-6) * 1e9, abs=1)
    # a 2-core pool is bound by its cores' bandwidth
    small = dataclasses.replace(pool, cores=2)
    assert cm.unscale_ns(1e6, small) == pytest.approx((8e6 / 40e9 + 5e-6) * 1e9, abs=1)
    # compute-bound: 1 lane, 1 core, a slow clock
    slow = cm.CpuPool(1, 0.1, 1, 1000.0, 1000.0)
    assert cm.adam_ns(1e6, slow) == pytest.approx((1e6 * 12 / 0.1e9 + 5e-6) * 1e9, abs=1)


def test_node_shares():
    node = node_of(load_preset("dgx-a100-40"))
    # two GPUs behind one PCIe switch share its 25 GB/s uplink; one alone has it
    assert node.pcie_share_gbps(1) == 25.0 and node.pcie_share_gbps(2) == 12.5
    # bound cores: 2 ranks get a socket each (64 cores, its 160 GB/s); 4 ranks two per socket
    assert node.cpu_pool(2, True).cores == 64 and node.cpu_pool(2, True).gbps == 160.0
    assert node.cpu_pool(4, True).cores == 32 and node.cpu_pool(4, True).gbps == 80.0
    # the pinned buffers of a rank whose 64 cores span four NUMA nodes stay on one node:
    # 160 / 4 GB/s; on a spread placement, the pool's 160
    assert node.cpu_pool(2, True).pinned == 40.0
    assert node.cpu_pool(2, True, "spread").pinned == 160.0
    # 8 ranks of 16 cores: each in one node, memory bound there (numactl -m): the pool's own
    assert node.cpu_pool(8, True).pinned == node.cpu_pool(8, True).gbps == 40.0
    # Adam over 1e9 elements: 12 B pinned at 40 GB/s bind it (0.3 s), not 28 B at 160
    assert cm.adam_ns(1e9, node.cpu_pool(2, True)) == pytest.approx((12e9 / 40e9 + 8 * 5e-6) * 1e9, abs=1)
    with pytest.raises(InputError, match=r"\[node\]"):
        node_of(load_preset("h100-sxm5"))


def _run(
    model, policy, gpus=2, system="dgx-a100-40", batch=1, recompute="none", model_options=None, **options
):
    s = builtin_spec(model, batch, system, policy, options=options or None, model_options=model_options)
    s = s.replace(
        system=s.system.replace(gpus=gpus), workload=dataclasses.replace(s.workload, recompute=recompute)
    )
    return run(s)


SMALL = {"layers": 4, "seq_len": 128}


def test_zero_offload_moves_what_deepspeed_moves():
    r = _run("qwen2.5-1.5b", "zero-offload", model_options=SMALL)
    assert r["status"] == "ok" and r["engine"] == "ranks"
    N = r["parameters"]
    Np = -(-N // 2)
    b = r["breakdown"]
    # fp32 gradients of the owned slices down (4 B an element), the 16-bit partition up
    assert b["d2h_bytes"] == 4 * Np and b["h2d_bytes"] == 2 * Np
    # the step is at least its serial parts: compute, then the CPU step, then the copy up
    assert b["step_s"] >= b["compute_s"] + b["cpu_step_s"] + b["h2d_s"] - 1e-9
    node = node_of(load_preset("dgx-a100-40"))
    pool = node.cpu_pool(2, False)
    assert b["cpu_step_s"] == pytest.approx(
        (cm.unscale_ns(Np, pool) + cm.adam_ns(Np, pool) + cm.cast_ns(Np, pool)) / 1e9
    )
    # one inf/nan host sync per owned parameter (and as many norm .item()s) and 3 more
    assert b["host_syncs"] >= 2 * 1
    its = r["iterations"][0]
    assert its["exe_time_s"] == pytest.approx(b["step_s"], rel=1e-6)
    # without offload nothing crosses PCIe and the step is shorter
    z2 = _run("qwen2.5-1.5b", "zero2", model_options=SMALL)
    assert z2["breakdown"]["d2h_bytes"] == 0 and z2["breakdown"]["step_s"] < b["step_s"]


def test_zero2_gradient_and_step_passes():
    r = _run("qwen2.5-1.5b", "zero2", model_options=SMALL)
    tl = r["timeline"]
    lab = tl["label"]
    dur = {name: int(tl["end_ns"][lab.index(name)] - tl["start_ns"][lab.index(name)]) for name in
           ("FusedAdam", "clip (mul_)", "fp32 cast", "flatten partition")}  # fmt: skip
    params = sum(1 for x in lab if x.startswith("grad p") and x.endswith(" into bucket"))
    buckets = sum(1 for x in lab if x.startswith("bucket all_reduce"))
    assert params > 0 and buckets > 0 and lab.count("bucket /= world size") == buckets
    # without offload, the owned parameters' gradients go on into the partition's buffer
    assert 0 < sum(1 for x in lab if x.endswith(" into partition")) <= params
    # element-wise passes over the owned partition at the HBM bandwidth, one launch each:
    # FusedAdam 28 B an element, clipping 8, the fp32 cast 2 + 4, the flatten 2 + 2
    assert (dur["FusedAdam"] - dur["clip (mul_)"]) / (dur["clip (mul_)"] - dur["fp32 cast"]) == pytest.approx(
        10.0, rel=1e-3
    )
    assert (dur["fp32 cast"] - dur["flatten partition"]) * 10 == pytest.approx(
        dur["FusedAdam"] - dur["clip (mul_)"], rel=1e-3
    )
    assert lab.count("overflow .item()") == 1


def test_stage3_fetches_partitions_and_blocking_costs():
    r = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL)
    b = r["breakdown"]
    assert r["status"] == "ok" and b["fetches"] > 0 and b["h2d_bytes"] > 0
    # every fetch copies this rank's partition (1/4, rounded up) of a parameter
    assert b["h2d_bytes"] % 2 == 0
    # each partition's copy is queued on the all-gather stream: after the all-gathers issued
    # before it, and the blocking copy's host wait after it
    tl = r["timeline"]
    last_ag, checked = None, 0
    for n, lab in enumerate(tl["label"]):
        if lab.startswith("all-gather p"):
            last_ag = n
        elif lab.endswith(" to GPU") and lab.startswith("partition p") and last_ag is not None:
            assert tl["start_ns"][n] >= tl["end_ns"][last_ag]
            checked += 1
    assert checked > 0
    # a call that fetches several parameters (`all_gather_coalesced`): each partition copied
    # to the GPU, one torch.cat of them into the send buffer, one all-gather of them all
    calls, parts = 0, []
    for lab, nb in zip(tl["label"], tl["bytes"]):
        if lab.startswith("partition p") and lab.endswith(" to GPU"):
            parts.append(int(nb))
        elif lab.startswith("cat p"):
            k = int(lab.rsplit("(", 1)[1].rstrip(")"))
            assert len(parts) == k > 1
        elif lab.startswith("all-gather p") and "persistent" not in lab:
            k = int(lab.rsplit("(", 1)[1].rstrip(")")) if "(" in lab else 1
            assert len(parts) == k
            # every rank's partition of each (this rank's rounded up)
            assert 4 * sum(parts) - 4 * 2 * k < int(nb) <= 4 * sum(parts)
            calls += k > 1
            parts = []
    assert calls > 0
    # at most 2 reduced buckets outstanding: from the fourth bucket on, the host waits for
    # the oldest before reducing another (max_param_reduce_events)
    small = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL, reduce_bucket_size=2e6)
    labels = small["timeline"]["label"]
    buckets = sum(lab.startswith("reduce-scatter (") for lab in labels)
    assert buckets > 10 and labels.count("reduce event synchronize") == buckets - 3
    # the coordinator's fetch events: without offloaded parameters (no blocking copy) the
    # host runs ahead of the all-gathers until three are outstanding, then waits
    gpu3 = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL, param_device="none")
    assert gpu3["timeline"]["label"].count("fetch event synchronize") > 0
    # partition_grads with the optimizer on the CPU: each reduced shard to its pinned host
    # buffer and back (2 B an element each way), then its fp32 copy to the host (4 B)
    back = sum(
        int(n)
        for lab, n in zip(tl["label"], tl["bytes"])
        if lab.startswith("grad shard p") and lab.endswith(" back to GPU")
    )
    assert back > 0 and b["d2h_bytes"] == 3 * back
    # each parameter's shard normed (float64: two passes) and cast, and at the step
    # `total_norm += param_norm**2` (two tiny kernels) for each parameter's norm
    shard = [lab.split()[1] for lab in tl["label"] if lab.startswith("shard p") and lab.endswith(" cast")]
    summed = [lab.split()[-1] for lab in tl["label"] if lab.startswith("norm**2 and sum p")]
    assert len(shard) == 3 * len(set(shard)) and sorted(summed) == sorted(2 * sorted(set(shard)))
    # the gradients' passes and reduce-scatters have a stream of their own, beside the all-gathers
    ops = list(zip(tl["label"], tl["resource"]))
    assert {rr for lab, rr in ops if lab.startswith("reduce-scatter (")} == {"reduce"}
    assert {rr for lab, rr in ops if lab.startswith("all-gather p") and lab[12:].isdigit()} == {"nccl"}
    # with everything on the GPU the step is DeepSpeed's passes, FusedAdam among them
    gpu_all = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL, param_device="none",
                   optimizer_device="none")  # fmt: skip
    assert "FusedAdam (group 0)" in gpu_all["timeline"]["label"] and gpu_all["breakdown"]["d2h_bytes"] == 0
    quiet = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL, h2d_fetch_blocking=False)
    assert quiet["breakdown"]["step_s"] <= b["step_s"]
    assert quiet["breakdown"]["host_syncs"] < b["host_syncs"]


def test_streams_share_a_link():
    """A fetch's copy to the GPU (the all-gather stream) issued after a gradient shard's copy
    back (the reduce stream) that is not ready yet goes first: the copy engines serve the
    stream that has work ready; and every copy on the reduce stream follows its previous
    operation there (the stream's order)."""
    r = _run("gpt-10b", "zero3-offload", gpus=1, system="dgx2-v100", batch=10, recompute="full",
             model_options={"layers": 4})  # fmt: skip
    tl = r["timeline"]
    lab, start, end, res = tl["label"], tl["start_ns"], tl["end_ns"], tl["resource"]
    back = [n for n, x in enumerate(lab) if x.startswith("grad shard p") and x.endswith(" back to GPU")]
    fetch = [n for n, x in enumerate(lab) if x.startswith("partition p") and x.endswith(" to GPU")]
    assert any(start[f] < start[b] for f in fetch for b in back if b < f)
    on_reduce = [
        n
        for n, x in enumerate(lab)
        if res[n] == "reduce" or x.startswith(("grad shard p", "fp32 grad partition p"))
    ]
    assert all(start[b] >= end[a] for a, b in zip(on_reduce, on_reduce[1:]))


def test_sync_before_allgather_waits_for_the_whole_device():
    """The 2021 code's torch.cuda.synchronize() before each parameter's fetch: the host waits
    for every operation on the device issued before it (each stream's kernels, the
    collectives, the copies), not the compute stream alone, and the step is longer."""
    base = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL)
    r = _run("qwen2.5-1.5b", "zero3-offload", gpus=4, model_options=SMALL, sync_before_allgather=True)
    tl = r["timeline"]
    device = ("gpu", "nccl", "reduce", "h2d", "d2h")
    syncs = [n for n, x in enumerate(tl["label"]) if x.startswith("device synchronize p")]
    assert syncs
    for n in syncs:
        done = max((tl["end_ns"][j] for j in range(n) if tl["resource"][j] in device), default=0)
        assert tl["end_ns"][n] - tl["start_ns"][n] > 0 and tl["start_ns"][n] >= done
    assert r["breakdown"]["step_s"] > base["breakdown"]["step_s"]


def test_out_of_memory_is_a_failed_result():
    r = _run("qwen2.5-3b", "zero2", batch=4)
    assert r["status"] == "failed"
    assert "out of GPU memory" in r["failure"]["reason"]
    assert r["memory"]["gpu_bytes_needed"] > r["memory"]["gpu_bytes_available"]


def test_bad_settings():
    with pytest.raises(InputError, match="ranks on a node of 8"):
        _run("qwen2.5-1.5b", "zero2", gpus=9, model_options=SMALL)
    with pytest.raises(InputError, match="stage 3"):
        _run("qwen2.5-1.5b", "zero-offload", model_options=SMALL, optimizer_device="nvme")
    with pytest.raises(InputError, match=r"\[node\]"):
        _run("qwen2.5-1.5b", "zero2", gpus=1, system="h100-sxm5", model_options=SMALL)


def io_py(nbytes, gbps, lat_us, block, qd, threads, overlap):
    """The twin of aio.io_ns, I/O by I/O: each thread's I/Os go in waves of the queue depth
    (an I/O is its latency, then its block at the full rate; with overlap a wave follows the
    previous one's completions, without it the whole batch waits); the set's bandwidth is a
    floor: one latency and then every byte at its rate."""
    per = nbytes / threads
    n = math.ceil(per / block)
    t_waves, left = 0.0, n
    while left > 0:
        k = min(qd, left)
        t_waves += lat_us * 1e3 + (min(block, per) / gbps if overlap else 0.0)
        left -= k
    if overlap:
        return max(t_waves, lat_us * 1e3 + nbytes / gbps)
    return t_waves + nbytes / gbps


def test_aio_time_by_hand_and_against_its_twin():
    from g10fast.engine.ranks.aio import Aio, io_ns

    # DeepSpeed's defaults on dgx-a100-40's set shared by 2 ranks (5.05 GB/s, 80 us): 1 GiB
    # is bandwidth-bound, one latency to fill the pipe
    assert io_ns(2**30, 5.05, 80.0, Aio()) == pytest.approx(80e3 + 2**30 / 5.05)
    # queue depth 1 and 64 KiB blocks: every I/O waits its latency (16,384 of them)
    assert io_ns(2**30, 5.05, 80.0, Aio(65536, 1)) == pytest.approx(16384 * (80e3 + 65536 / 5.05))
    # without overlapping events every batch of 8 waits its latency, then its bytes
    assert io_ns(2**30, 5.05, 80.0, Aio(overlap_events=False)) == pytest.approx(128 * 80e3 + 2**30 / 5.05)
    assert io_ns(0, 5.05, 80.0, Aio()) == 0.0
    rng = np.random.default_rng(7)
    for _ in range(300):
        nb = float(rng.integers(1, 2**32))
        bw, lat = float(rng.uniform(0.5, 30)), float(rng.uniform(0, 200))
        blk, qd, th = int(2 ** rng.integers(9, 24)), int(rng.integers(1, 65)), int(rng.integers(1, 9))
        over = bool(rng.integers(0, 2))
        a = Aio(blk, qd, th, over)
        t = io_ns(nb, bw, lat, a)
        assert t == pytest.approx(io_py(nb, bw, lat, blk, qd, th, over), rel=1e-9)
        # never faster than the set's bandwidth; overlapping never slower than batches;
        # a deeper queue or more threads never slower
        assert t >= nb / bw - 1e-6
        assert (
            io_ns(nb, bw, lat, dataclasses.replace(a, overlap_events=True))
            <= io_ns(nb, bw, lat, dataclasses.replace(a, overlap_events=False)) + 1e-6
        )
        assert io_ns(nb, bw, lat, dataclasses.replace(a, queue_depth=qd * 2)) <= t + 1e-6
    for bad in ({"aio_queue_depth": 0}, {"aio_block_size": -1}, {"aio_intra_op_parallelism": 1.5}):
        with pytest.raises(InputError, match=list(bad)[0]):
            _run("qwen2.5-1.5b", "zero-infinity", model_options=SMALL, **bad)


def test_zero_infinity_aio_settings_and_gds():
    # every parameter partition on NVMe (max_in_cpu 1): each fetch reads it, then copies it
    base = _run("qwen2.5-1.5b", "zero-infinity", model_options=SMALL, max_in_cpu=1.0)
    b = base["breakdown"]
    assert b["nvme_read_bytes"] > 0 and b["h2d_bytes"] > 0
    # shallow queues of small blocks: the same bytes, more NVMe time, a longer step
    slow = _run(
        "qwen2.5-1.5b",
        "zero-infinity",
        model_options=SMALL,
        max_in_cpu=1.0,
        aio_queue_depth=1,
        aio_block_size=4096,
    )["breakdown"]
    assert slow["nvme_read_bytes"] == b["nvme_read_bytes"]
    assert slow["nvme_read_s"] > 2 * b["nvme_read_s"] and slow["step_s"] > b["step_s"]
    # GPUDirect Storage: the partitions read from NVMe are not copied through host memory
    gds = _run("qwen2.5-1.5b", "zero-infinity", model_options=SMALL, max_in_cpu=1.0, aio_use_gds=True)[
        "breakdown"
    ]
    assert gds["nvme_read_bytes"] == b["nvme_read_bytes"]
    assert gds["h2d_bytes"] < b["h2d_bytes"] and gds["host_syncs"] < b["host_syncs"]
    assert gds["step_s"] <= b["step_s"]


def test_ds_io_through_the_step_primitives_by_hand():
    from g10fast.engine.ranks.zero import ZeroMode, nvme_gpu_gbps
    from g10fast.validate.claims_zero import CLAIMS

    node = node_of(load_preset("dgx-a100-40"))
    assert (node.nvme_read_latency_us, node.nvme_write_latency_us) == (80.0, 20.0)  # its [ssd]
    G = 2**30
    # bounce buffer: the aio request (one latency, then the set's rate), then the PCIe copy
    assert nvme_gpu_gbps(node, ZeroMode(), G, "read") == pytest.approx(
        G / (80e3 + G / 10.1 + G / 25.0), rel=1e-6
    )
    assert nvme_gpu_gbps(node, ZeroMode(), G, "write") == pytest.approx(
        G / (G / 25.0 + 20e3 + G / 5.3), rel=1e-6
    )
    gds = ZeroMode(aio_use_gds=True)
    assert nvme_gpu_gbps(node, gds, G, "read") == pytest.approx(G / (80e3 + G / 10.1), rel=1e-6)
    assert nvme_gpu_gbps(node, gds, G, "write") == pytest.approx(G / (20e3 + G / 5.3), rel=1e-6)
    # the latencies come from the preset's [ssd] table (0 allowed), or from [node] itself
    import copy

    pre = copy.deepcopy(load_preset("dgx-a100-40"))
    pre["ssd"]["read_latency_us"] = 0.0
    pre["node"]["nvme_write_latency_us"] = 5.0
    n0 = node_of(pre)
    assert (n0.nvme_read_latency_us, n0.nvme_write_latency_us) == (0.0, 5.0)
    assert nvme_gpu_gbps(n0, gds, G, "read") == pytest.approx(10.1, rel=1e-6)
    pre["ssd"]["read_latency_us"] = -1.0
    with pytest.raises(InputError, match="ssd.read_latency_us"):
        node_of(pre)
    rows = {c.id: c for c in CLAIMS}
    assert rows["deepnvme.bounce-read"].measure(True).value == nvme_gpu_gbps(node, ZeroMode(), G, "read")
    with pytest.raises(InputError, match="direction"):
        nvme_gpu_gbps(node, gds, G, "both")


def test_nvme_read_ahead_follows_the_coordinator():
    from g10fast.engine.ranks.zero import _nvme_read_ahead

    numel = np.array([100, 100, 50, 400, 100, 100])
    nvme = np.array([True, True, False, True, True, True])
    units = [[0], [1, 2], [3], [4, 5]]
    got = []

    def ahead_of(jj, at, held, inflight, buffers=5):
        got.clear()
        _nvme_read_ahead(
            units, jj, at, numel, nvme, held, inflight, buffers, lambda ids: got.append(list(ids))
        )
        return got[0] if got else []

    # nothing in flight: the first parameter looked at, and no more (0 > 0 fails once)
    assert ahead_of(1, 0, {}, {}) == [1]
    # 150 elements in flight: looks at up to 300 (1, 2, 3 make 550 > 300 after 3), skips 2 (host)
    assert ahead_of(1, 0, {}, {9: 150}) == [1, 3]
    # from the middle of a unit; partitions already held are not read again
    assert ahead_of(1, 1, {3: 0}, {9: 1000}) == [4, 5]
    # at most the free swap buffers: 5 less the 4 held
    assert ahead_of(0, 0, {10: 0, 11: 0, 12: 0, 13: 0}, {9: 1000}) == [0]
    assert ahead_of(0, 0, {10: 0, 11: 0, 12: 0, 13: 0, 14: 0}, {9: 1000}) == []
    assert ahead_of(4, 0, {}, {9: 1000}) == []  # the trace's end

    # a run with every partition on NVMe: the same bytes read, with or without the read-ahead,
    # and with one swap buffer (the read-ahead then waits for buffers to come back)
    b = {}
    for name, opts in (("on", {}), ("off", {"nvme_param_prefetch": False}), ("one", {"buffer_count": 1})):
        r = _run("qwen2.5-1.5b", "zero-infinity", model_options=SMALL, max_in_cpu=1.0, **opts)
        assert r["status"] == "ok"
        b[name] = r["breakdown"]
    assert b["on"]["nvme_read_bytes"] == b["off"]["nvme_read_bytes"] == b["one"]["nvme_read_bytes"] > 0
    assert len({round(x["step_s"], 9) for x in b.values()}) > 1  # the read-ahead changes the timeline


def test_recompute_full_drops_activations_and_repeats_the_forward():
    from g10fast.engine.ranks.zero import zero_view
    from g10fast.workload.recompute import recompute

    spec = builtin_spec("qwen2.5-1.5b", 2, "dgx-a100-40", "zero2", model_options=SMALL)
    from g10fast.run import workload_of

    w = workload_of(spec)
    r = recompute(w, "full")
    info = r.meta["recompute"]
    assert info["segments"] == 4  # the four layers; not the embedding or head
    assert r.num_kernels == w.num_kernels + info["kernels_added"]
    assert int(r.exec_cycles.sum()) == int(w.exec_cycles.sum()) + info["recomputed_cycles"]
    v0, v1 = zero_view(w, 1.2e9), zero_view(r, 1.2e9)
    assert v1.activation_peak < v0.activation_peak
    assert int(v1.numel.sum()) == int(v0.numel.sum())
    # every tensor a kernel reads exists by then: a weight, or written by an earlier kernel
    seen = set(np.flatnonzero(np.asarray(r.is_global)).tolist())
    for k in range(r.num_kernels):
        consts = [t for t in r.inputs(k) if t not in seen]
        for t in consts:  # graph inputs (data, constants) are never written: first use
            assert not any(t in set(r.outputs(j).tolist()) for j in range(k, r.num_kernels))
        seen.update(r.outputs(k).tolist())
        seen.update(r.inputs(k).tolist())
    # the backward reads no forward activation of a checkpointed layer any more
    assert recompute(w, "none") is w
    with pytest.raises(InputError, match="recomputation"):
        recompute(w, "partial")


def test_timeline_json(tmp_path):
    import json

    from g10fast.engine.ranks import timeline_json

    r = _run("qwen2.5-1.5b", "zero-offload", model_options=SMALL)
    path = timeline_json(r, tmp_path / "t.json")
    ev = json.loads(open(path).read())["traceEvents"]
    tracks = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    assert {
        "CPU: optimizer cores",
        "PCIe: host -> GPU",
        "PCIe: GPU -> host",
        "NVLink: collectives stream",
        "GPU: compute stream",
    } <= tracks
    slices = [e for e in ev if e["ph"] == "X"]
    cpu = [e for e in slices if e["cat"] == "cpu"]
    assert {e["name"] for e in cpu} == {"unscale and clip", "CPU Adam", "fp32 -> 16-bit cast"}
    assert sum(e["args"].get("bytes", 0) for e in slices if e["cat"] == "d2h") == r["breakdown"]["d2h_bytes"]


def test_cli_gpus_recompute_timeline_and_run_file(tmp_path, capsys):
    import json

    from g10fast.cli import main

    out = tmp_path / "t.json"
    argv = [
        "run",
        "--model",
        "qwen2.5-1.5b",
        "--batch",
        "2",
        "--gpus",
        "2",
        "--system",
        "dgx-a100-40",
        "--policy",
        "zero-offload",
        "--recompute",
        "full",
        "--timeline",
        str(out),
        "--json",
        "--no-progress",
        "--option",
        "layers=2",
    ]
    # layers is a model option, not a policy's: refused with one message
    assert main(argv) == 2
    assert "unknown option 'layers'" in capsys.readouterr().err
    argv = argv[:-2]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["engine"] == "ranks" and res["ranks"] == 2
    assert res["breakdown"]["cpu_step_s"] > 0 and res["breakdown"]["d2h_bytes"] > 0
    assert json.loads(out.read_text())["traceEvents"]
    # --timeline is the ranks engine's; --gpus beyond the node; a preset without a node
    assert (
        main(
            [
                "run",
                "--model",
                "bert-base",
                "--batch",
                "8",
                "--policy",
                "lru",
                "--timeline",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    assert main(argv[:5] + ["--gpus", "9"] + argv[7:]) == 2
    assert "ranks on a node of 8" in capsys.readouterr().err
    # a run file: [system] gpus and [workload] recompute
    f = tmp_path / "z.toml"
    f.write_text(
        '[workload]\nmodel = "qwen2.5-1.5b"\nbatch = 2\nrecompute = "full"\nlayers = 2\n'
        '[system]\npreset = "dgx-a100-40"\ngpus = 2\n'
        '[policy]\nnames = ["zero2", "zero-offload"]\n'
    )
    assert main(["run", str(f), "--json", "--no-progress", "--no-figure"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["ranks"] for r in rows] == [2, 2]
    assert all(r["workload"]["kernels"] > 0 for r in rows)
    f.write_text(f.read_text().replace("gpus = 2", "gpus = 0"))
    assert main(["run", str(f), "--no-progress", "--no-figure"]) == 2
    assert "gpus" in capsys.readouterr().err
