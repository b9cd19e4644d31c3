"""DeepSpeed's aio settings and what they cost ZeRO-Infinity: the NVMe rate one swapper request
reaches by block size and queue depth (g10fast/engine/ranks/aio.py on dgx-a100-40's NVMe set),
and the step time of a ZeRO-Infinity run by queue depth and block size.

    python benchmarks/aio_sweep.py [--out docs/zero-aio.png] [--quick]

Left panel: one 1 GiB read by one rank (the whole set's 10.1 GB/s, 80 us access latency, as
the preset gives them) against `aio_block_size`, one line per `aio_queue_depth`, one thread,
overlapping events (and DeepSpeed's default queue depth without them, dashed). Right panel:
Qwen2.5-1.5B, batch 4 a GPU, 2 GPUs of dgx-a100-40, zero-infinity with every parameter
partition on NVMe (`max_in_cpu` 1), step time against `aio_queue_depth` for three block
sizes. Appends one JSON line per step run to benchmarks/results/aio_sweep.jsonl.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SYSTEM = "dgx-a100-40"
BLOCKS = [2**k for k in range(12, 25)]  # 4 KiB .. 16 MiB
DEPTHS = (1, 2, 4, 8, 32)
STEP_DEPTHS = (1, 2, 4, 8, 16, 32)
STEP_BLOCKS = (65536, 262144, 1048576)


def request_rates() -> dict:
    """GB/s of one 1 GiB read by one rank, per queue depth, per block size (and the default
    depth without overlapping events under the key 'batches')."""
    from g10fast.engine.ranks.aio import Aio, io_ns
    from g10fast.engine.ranks.node import node_of
    from g10fast.hardware import load_preset

    node = node_of(load_preset(SYSTEM))
    G = 2**30
    out = {}
    for q in DEPTHS:
        out[q] = [G / io_ns(G, node.nvme_read_gbps, node.nvme_read_latency_us, Aio(b, q)) for b in BLOCKS]
    out["batches"] = [
        G / io_ns(G, node.nvme_read_gbps, node.nvme_read_latency_us, Aio(b, 8, overlap_events=False))
        for b in BLOCKS
    ]
    out["set_gbps"] = node.nvme_read_gbps
    return out


def step_run(qd: int, block: int, quick: bool) -> dict:
    import dataclasses

    from g10fast.api import builtin_spec
    from g10fast.run import run

    opts = {"max_in_cpu": 1.0, "aio_queue_depth": qd, "aio_block_size": block}
    s = builtin_spec("qwen2.5-1.5b", 4, SYSTEM, "zero-infinity", options=opts,
                     model_options={"layers": 4} if quick else None)  # fmt: skip
    s = s.replace(system=dataclasses.replace(s.system, gpus=2))
    t0 = time.process_time()
    r = run(s)
    b = r["breakdown"]
    return {
        "model": "qwen2.5-1.5b",
        "batch": 4,
        "gpus": 2,
        "system": SYSTEM,
        "aio_queue_depth": qd,
        "aio_block_size": block,
        "status": r["status"],
        "step_s": b["step_s"],
        "nvme_read_s": b["nvme_read_s"],
        "nvme_write_s": b["nvme_write_s"],
        "cpu_s": round(time.process_time() - t0, 2),
    }


def figure(rates: dict, steps: list, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from _bench import save_figure

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    kib = [b / 1024 for b in BLOCKS]
    for q in DEPTHS:
        a1.plot(kib, rates[q], marker="o", ms=3, label=f"queue depth {q}" + (" (default)" if q == 8 else ""))
    a1.plot(kib, rates["batches"], ls="--", color="grey", label="queue depth 8, overlap_events off")
    a1.axhline(rates["set_gbps"], color="black", lw=0.8, ls=":", label="the set's rate (ds_io, input)")
    a1.axvline(1024, color="tab:red", lw=0.8, ls=":", label="default block (1 MiB)")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("aio_block_size (KiB)")
    a1.set_ylabel("rate of one 1 GiB read (GB/s)")
    a1.set_title(f"One swapper request, {SYSTEM}'s NVMe set (one rank, one thread)", fontsize=9)
    a1.legend(fontsize=7)
    for blk in STEP_BLOCKS:
        mine = sorted((r for r in steps if r["aio_block_size"] == blk), key=lambda r: r["aio_queue_depth"])
        a2.plot(
            [r["aio_queue_depth"] for r in mine],
            [r["step_s"] for r in mine],
            marker="o",
            ms=3,
            label=f"block {blk // 1024} KiB",
        )
    a2.set_xscale("log", base=2)
    a2.set_xlabel("aio_queue_depth")
    a2.set_ylabel("step time (s)")
    a2.set_title("Qwen2.5-1.5B, batch 4 a GPU, 2 GPUs, zero-infinity (all partitions on NVMe)", fontsize=9)
    a2.legend(fontsize=7)
    fig.suptitle("ZeRO-Infinity's NVMe swaps by DeepSpeed's aio settings (model, g10fast)")
    save_figure(fig, path)


def main(argv=None):
    from _bench import append_record, figure_args, git_commit

    a = figure_args(__doc__, HERE.parent / "docs" / "zero-aio.png", "a 4-layer model (a smoke run)", argv)
    rates = request_rates()
    steps = []
    n = len(STEP_DEPTHS) * len(STEP_BLOCKS)
    for blk in STEP_BLOCKS:
        for qd in STEP_DEPTHS:
            r = step_run(qd, blk, a.quick)
            steps.append(r)
            print(
                f"[{len(steps)}/{n}] block {blk} queue depth {qd}: step {r['step_s']:.2f} s", file=sys.stderr
            )
            append_record(
                HERE / "results" / "aio_sweep.jsonl",
                dict(
                    r,
                    commit=git_commit(),
                    quick=a.quick,
                    date=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                ),
            )
    figure(rates, steps, a.out)
    print(a.out)


if __name__ == "__main__":
    main()
