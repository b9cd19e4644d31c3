"""The bound's model of each engine (g10fast.analysis.bounds, docs/bounds.md): what the engine
allows (capacity, per-direction rates, granularity), and its quirks that make a transfer free or
a tensor take no memory mirrored, so that no run of the engine can beat its bound."""

from __future__ import annotations

import numpy as np

from g10fast.analysis.bounds import BoundModel, bound_model


def page_engine_model(w, params) -> BoundModel | None:
    """The page engine's model (time in cycles) under its `SystemParams`; None when the run has
    no memory limit (Ideal: not UVM). Rates are the batcher's per-tick caps (spec §3): per
    direction at most `gpu_cap` pages a tick, `cpu_cap` of them host and `ssd_cap` SSD;
    a page's move is committed at its tick's start, so every window is granted one tick
    (`slack`). Every eviction copies (UVM: a page lives in one place). Host memory is left
    unlimited here (the SSD windows of `host_bytes` are not used): a sweep derives a run at
    another host size from a finished one (g10fast.sweep.reuse), so the result's bound must
    not depend on the host line. (The page runner shares a bound between runs of one
    workload with equal `is_uvm`, `tick`, caps and `frames`: engine/page/run.py `_bound`.)"""
    if not params.is_uvm:
        return None
    page = 4096.0
    tick = float(params.tick)
    g, h, s = float(params.gpu_cap), float(params.cpu_cap), float(params.ssd_cap)
    rate = min(g, h + s) * page / tick
    srate = min(g, s) * page / tick
    return bound_model(
        w,
        capacity_bytes=float(params.frames) * page,
        in_rate=rate,
        out_rate=rate,
        ssd_in_rate=srate,
        ssd_out_rate=srate,
        slack=tick,
        evict_copies=True,
        unit="cycles",
        notes=(
            "page engine: batcher caps per tick, full duplex; one tick of "
            "slack per window (moves committed at the tick's start); every "
            "eviction copies; host memory not limited",
        ),
    )


def tensor_engine_model(w, system, mechanism: str, options) -> BoundModel:
    """The tensor engine's model (time in ms, bytes/ms with GB = 2^30, capacity ×4 for the GDS
    variants, O-32) with the quirks of `options` (TensorOptions) that make a transfer free or
    a tensor take no memory mirrored: O-18/O-33 `gds_weights_free_refetch` (weights move
    free), O-33 `gds_ready_on_alloc` (G10-GDS/Host: a prefetched tensor is ready once
    allocated, so fetches never delay a kernel), O-17 `tensor24_bypass` (tensor 24 needs no
    memory) and FlashNeuron's `fn_reserve_workspace` (tensors never read share one region)."""
    from g10fast.analysis.vitality import vitality
    from g10fast.engine.tensor import GDS_CAPACITY_FACTOR, exec_ms_of

    ghz = float(system.gpu_frequency_ghz)
    ssd = float(system.ssd_bandwidth_gbps) * 2**30 / 1000
    host = (float(system.host_link_gbps) - float(system.ssd_bandwidth_gbps)) * 2**30 / 1000
    cap = int(float(system.gpu_memory_gb) * 1024 * 1024 / 4)
    notes = []
    if mechanism != "offload_set":
        cap *= GDS_CAPACITY_FACTOR
        notes.append("O-32: capacity x4 (the GDS variants')")
    rate = ssd + host if (mechanism == "gds_ssd_host" and host > 0) else ssd
    T = w.num_tensors
    fr = np.zeros(T, bool)
    fw = np.zeros(T, bool)
    excluded = []
    if options.gds_weights_free_refetch:
        fr |= np.asarray(w.is_global, bool)
        fw |= np.asarray(w.is_global, bool)
        notes.append("O-18/O-33 gds_weights_free_refetch: weights move free")
    if options.gds_ready_on_alloc and mechanism != "offload_set":
        fr[:] = True
        notes.append("O-33 gds_ready_on_alloc: fetches never delay a kernel (reads free)")
    if options.tensor24_bypass and T > 24:
        excluded.append(24)
        notes.append("O-17 tensor24_bypass: tensor 24 takes no memory")
    if mechanism == "offload_set" and options.fn_reserve_workspace:
        vit = vitality(w, ghz)
        dead = np.nonzero((np.asarray(vit.death) == -1) & ~np.asarray(w.is_global, bool))[0]
        excluded.extend(dead.tolist())
        notes.append("fn_reserve_workspace: tensors never read take no memory")
    return bound_model(
        w,
        capacity_bytes=float(cap) * 4096.0,
        in_rate=rate,
        out_rate=rate,
        ssd_in_rate=ssd,
        ssd_out_rate=ssd,
        kernel_times=exec_ms_of(w, ghz),
        free_read=fr,
        free_write=fw,
        excluded_tensors=excluded,
        unit="ms",
        notes=tuple(notes),
    )


def driver_engine_model(w, params: dict, options, *, first_iteration: bool = False) -> BoundModel:
    """The driver engine's model (time in cycles) from its `system_params` and DriverOptions
    (g10fast.engine.driver, docs/bounds.md):

    * rate: the most bytes per cycle one transfer of the engine's tables ever moves (its
      transfer curve, per-transfer overhead and latency, 1..512 pages of one 2 MiB VA block,
      host or SSD), over two sequential paths: the prefetch stream and the fault path, which
      runs only between a kernel's start and its compute (`fault_path`);
    * capacity: the GPU's pages, or its whole 2 MiB root chunks (chunk eviction);
    * a kernel's pages may be evicted by its own later fault batches (`touched_evictable`);
    * no write windows: the stream frees a page when it processes its eviction and may write
      it back later, so no write-back is provably before the memory it frees is reused;
    * the first iteration (`first_iteration`): every page starts unpopulated and a first touch
      zero-fills it for free, so weights are live only from their first use there."""
    import dataclasses as _dc
    from g10fast.engine.driver import kernels as dk

    page = 4096.0
    rates = []
    for name in ("h2d", "ssd_r"):
        tab = np.asarray(params[name], np.float64)
        n = np.arange(1, tab.shape[0])
        rates.append(float(np.max(n * page / np.maximum(tab[1:], 1.0))))
    rate = max(rates)
    pages = int(params["gpu_pages"])
    notes = [
        "driver engine: the fastest single transfer of its tables "
        f"({rate * float(params['f_hz']) / 1e9:.4g} GB/s) on each of two paths (prefetch "
        "stream, fault path between compute)",
        "a kernel's own pages may be evicted by its later fault batches",
        "no write windows (the stream frees memory before its write-back ends)",
    ]
    if options.evict != "lru4k":
        pages = min(pages, int(params["gpu_chunks"]) * dk.VA_PAGES)
        notes.append("capacity: whole 2 MiB root chunks")
    if first_iteration:
        w = _dc.replace(w, is_global=np.zeros(w.num_tensors, bool))
        notes.append("first iteration: first touches zero-fill, weights live from first use")
    T = w.num_tensors
    return bound_model(
        w,
        capacity_bytes=float(pages) * page,
        in_rate=rate,
        out_rate=rate,
        ssd_in_rate=rate,
        ssd_out_rate=rate,
        free_write=np.ones(T, bool),
        unit="cycles",
        notes=tuple(notes),
        touched_evictable=True,
        fault_path=True,
    )


def swap_engine_bound(w, link, gpu_bytes: int, f_hz: float) -> dict:
    """The bound of the machine the swap planner describes (g10fast.policies.trace_swap,
    docs/bounds.md): the real GPU's capacity, two FIFO channels at the link's bandwidth
    (latency left out), swap-outs ending before the memory is reused. The swap runner times
    its plan on the tensor engine with room for every tensor (run.run_swap_engine), so the
    run's own bound is that engine's model (Ideal there); this one is reported beside it as
    `physical`, and a run below it is the planner's overlap of channels, not a better
    schedule. The top-level fields say Ideal (no transfer window is provable for the plan)."""
    import dataclasses as _dc
    from g10fast.analysis.bounds import bound_summary, max_working_set

    ideal = float(np.asarray(w.exec_cycles, np.float64).sum())
    wr = _dc.replace(w, size=np.asarray(w.raw_size, np.int64))
    rin = 1e9 / (float(link.in_ns_per_byte) * float(f_hz))
    rout = 1e9 / (float(link.out_ns_per_byte) * float(f_hz))
    phys = bound_model(
        wr,
        capacity_bytes=float(gpu_bytes),
        in_rate=rin,
        out_rate=rout,
        ssd_in_rate=rin,
        ssd_out_rate=rout,
        unit="cycles",
        notes=("two FIFO channels at the link's bandwidth (latency left out), raw tensor bytes",),
    )
    ps = bound_summary(phys, wr, ideal)
    feasible = max_working_set(phys, wr) <= float(gpu_bytes)
    return {
        "time": ideal,
        "window": ideal,
        "traffic": ideal,
        "feasible": bool(feasible),
        "unit": "cycles",
        "windows": [],
        "physical": {
            "time": ps["time"],
            "window": ps["window"],
            "traffic": ps["traffic"],
            "windows": ps["windows"],
            "model": ps["model"],
        },
        "model": {
            "capacity_bytes": float(gpu_bytes),
            "host_bytes": None,
            "notes": [
                "swap engine: an estimator on nominal op times (swap-ins may "
                "overlap on the channel, copies released before their "
                "swap-out ends): no transfer window is provable, the bound is "
                "Ideal; `physical` is the two-FIFO-channel machine's bound"
            ],
        },
    }
