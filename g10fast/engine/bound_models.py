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
    not depend on the host line."""
    if not params.is_uvm:
        return None
    page = 4096.0
    tick = float(params.tick)
    g, h, s = float(params.gpu_cap), float(params.cpu_cap), float(params.ssd_cap)
    rate = min(g, h + s) * page / tick
    srate = min(g, s) * page / tick
    return bound_model(w, capacity_bytes=float(params.frames) * page, in_rate=rate,
                       out_rate=rate, ssd_in_rate=srate, ssd_out_rate=srate,
                       slack=tick, evict_copies=True, unit="cycles",
                       notes=("page engine: batcher caps per tick, full duplex; one tick of "
                              "slack per window (moves committed at the tick's start); every "
                              "eviction copies; host memory not limited",))


def tensor_engine_model(w, system, mode: str, options) -> BoundModel:
    """The tensor engine's model (time in ms, bytes/ms with GB = 2^30, capacity ×4 for the GDS
    variants, O-32) with the quirks of `options` (TensorOptions) that make a transfer free or
    a tensor take no memory mirrored: O-18/O-33 `gds_weights_free_refetch` (weights move
    free), O-33 `gds_ready_on_alloc` (G10-GDS/Host: a prefetched tensor is ready once
    allocated, so fetches never delay a kernel), O-17 `tensor24_bypass` (tensor 24 needs no
    memory) and FlashNeuron's `fn_reserve_workspace` (tensors never read share one region)."""
    from g10fast.analysis.vitality import vitality
    from g10fast.engine.tensor import GDS_CAPACITY_FACTOR, exec_ms_of

    ghz = float(system.gpu_frequency_ghz)
    ssd = float(system.ssd_bandwidth_gbps) * 2 ** 30 / 1000
    host = (float(system.host_link_gbps) - float(system.ssd_bandwidth_gbps)) * 2 ** 30 / 1000
    cap = int(float(system.gpu_memory_gb) * 1024 * 1024 / 4)
    notes = []
    if mode != "FlashNeuron":
        cap *= GDS_CAPACITY_FACTOR
        notes.append("O-32: capacity x4 (the GDS variants')")
    rate = ssd + host if (mode == "G10GDSFULL" and host > 0) else ssd
    T = w.num_tensors
    fr = np.zeros(T, bool)
    fw = np.zeros(T, bool)
    excluded = []
    if options.gds_weights_free_refetch:
        fr |= np.asarray(w.is_global, bool)
        fw |= np.asarray(w.is_global, bool)
        notes.append("O-18/O-33 gds_weights_free_refetch: weights move free")
    if options.gds_ready_on_alloc and mode != "FlashNeuron":
        fr[:] = True
        notes.append("O-33 gds_ready_on_alloc: fetches never delay a kernel (reads free)")
    if options.tensor24_bypass and T > 24:
        excluded.append(24)
        notes.append("O-17 tensor24_bypass: tensor 24 takes no memory")
    if mode == "FlashNeuron" and options.fn_reserve_workspace:
        vit = vitality(w, ghz)
        dead = np.nonzero((np.asarray(vit.death) == -1) & ~np.asarray(w.is_global, bool))[0]
        excluded.extend(dead.tolist())
        notes.append("fn_reserve_workspace: tensors never read take no memory")
    return bound_model(w, capacity_bytes=float(cap) * 4096.0, in_rate=rate, out_rate=rate,
                       ssd_in_rate=ssd, ssd_out_rate=ssd, kernel_times=exec_ms_of(w, ghz),
                       free_read=fr, free_write=fw, excluded_tensors=excluded, unit="ms",
                       notes=tuple(notes))
