"""The driver engine: what the real nvidia-uvm driver does (docs/driver-engine.md).

Beside the G10-compatible page engine (which reproduces the artifact's assumptions), this
engine models the driver of `specs/seed-policies.md` §5: 4 KiB pages in 2 MiB VA blocks laid
over the workload's addresses (one managed arena from address 0, as a caching allocator on
managed memory gives), replayable faults serviced in batches (up to 256 per batch, one fault
latency per batch), each fault grown to its 64 KiB big page, then the density prefetcher
(per faulted page, the largest subtree of the VA block's tree over 51 % marked is fetched),
eviction of whole 2 MiB root chunks from a list ordered by allocation, write-back of evicted
pages, transfers with a size-dependent throughput (UVMSmart's fit) or a flat one. Every
choice is a field of `DriverOptions` with the driver's default; the costs a measurement
fixes (per fault batch, the migration link and curve, a managed cudaFree, the size of a
fresh allocation that is not faulted afresh) come from the hardware preset's [driver]
section: on h100-sxm5 fitted to kernels measured on that GPU
(benchmarks/fit_driver_h100.py, docs/driver-h100.md), on the other presets derived from it.
`fresh_allocations` models a framework on a non-caching managed allocator (the `uvm`
policy: every tensor but the weights allocated, first-touched and freed each iteration).

Kernel time = the kernel's compute time (the workload's exec_cycles, never the artifact's
faulting traces) + the stalls the engine computes: the stream barrier (waiting for the
kernel's own prefetches, E2), fault batches (latency + eviction write-back + migration) and
waits for in-flight prefetches of the pages it touches. Time is integer GPU cycles at the
system's clock (`System.f_hz`).

    run = simulate_driver(workload, system, DriverOptions(), hints=DriverHints(...))
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from g10fast import aot
from g10fast.engine.driver import kernels as dk
from g10fast.errors import InputError, one_of
from g10fast.workload.model import PAGE_SIZE

PREFETCHERS = {"none": dk.PF_NONE, "density": dk.PF_DENSITY, "tbn": dk.PF_TBN}
EVICTIONS = {
    "alloc2m": dk.EV_ALLOC2M,
    "access2m": dk.EV_ACCESS2M,
    "lru4k": dk.EV_LRU4K,
    "tbn64k": dk.EV_TBN64K,
}
PAGE_EVICTIONS = ("lru4k", "tbn64k")  # capacity in pages, a 4 KiB LRU list
CURVES = ("uvmsmart", "flat")
HINT_KINDS = {
    "prefetch": dk.HINT_PREFETCH,
    "evict": dk.HINT_EVICT,
    "discard": dk.HINT_DISCARD,
    "preevict": dk.HINT_PREEVICT,
}


@dataclass(frozen=True)
class DriverOptions:
    """The driver's choices, each with the driver's default (docs/driver-engine.md)."""

    #: faults fetched and serviced per batch (uvm_perf_fault_batch_count)
    fault_batch: int = 256
    #: far-fault service time per batch, µs; < 0: the preset's [driver] fault_batch_us (the
    #: H100 fit: benchmarks/fit_driver_h100.py), else the system's uvm.fault_latency_us
    fault_latency_us: float = -1.0
    #: the link bandwidth the transfer curve uses, as a fraction of min(host link, GPU link);
    #: < 0: the preset's [driver] link_fraction (fitted on the H100's fault-driven
    #: migrations: 16 of its 50 GB/s, flat), else 1
    link_fraction: float = -1.0
    #: one synchronising cudaFree of managed memory (a freed temporary), µs; < 0: the preset's
    #: [driver] managed_free_us (the H100 fit), else 0. Paid only where allocations are freed:
    #: fresh_allocations (a non-caching allocator on managed memory)
    managed_free_us: float = -1.0
    #: every tensor that is not a weight is a managed allocation made at its first use in the
    #: iteration and freed (cudaFree: synchronising, managed_free_us) after its last use, so
    #: each iteration first-touches it afresh: PyTorch on a CUDAPluggableAllocator of plain
    #: cudaMallocManaged / cudaFree, the supported way to train on managed memory
    #: (specs/uvm-hardware-facts.md §4.1, §4.3; the measured harness, docs/profile-format.md).
    #: False: one arena populated once (a caching allocator over managed memory)
    fresh_allocations: bool = False
    #: with fresh_allocations: an allocation of at most this many KiB is never faulted
    #: afresh (it stays populated, and is not discarded when freed); < 0: the preset's
    #: [driver] small_alloc_kib, else 0. Measured on the H100: a fresh output of <= 256 KiB
    #: costs a median 0.4-1.3 us of first touch (1,710 kernels), not a fault batch; the
    #: threshold (64 KiB) is the H100 fit's choice among 0, 64, 256, 1024 (the mechanism,
    #: presumably the CUDA driver sub-allocating small managed allocations from memory it
    #: keeps, is not documented)
    small_alloc_kib: int = -1
    #: with fresh_allocations: each allocation is prefetched to the GPU on the compute stream
    #: when made (cudaMemPrefetchAsync at allocation, uvm-hardware-facts.md §5 E1), so its
    #: first user waits for the prefetch instead of faulting
    prefetch_at_alloc: bool = False
    #: a fault first grows to its big page (uvm_va_block_gpu_big_page_size), KiB
    big_page_kib: int = 64
    #: "density" (uvm_perf_prefetch, the driver), "tbn" (UVMSmart's tree-based neighbourhood,
    #: 64 KiB leaves, > 50 %, cascading), "none"
    prefetcher: str = "density"
    #: density threshold, % (uvm_perf_prefetch_threshold)
    density_threshold: int = 51
    #: "alloc2m": whole 2 MiB root chunks, list ordered by allocation (uvm_pmm_gpu.c);
    #: "access2m": the same list moved to the tail on every access; "lru4k": true LRU of
    #: 4 KiB pages (UVMSmart's LRU-4K), one 4 KiB write-back per page; "tbn64k": UVMSmart's
    #: TBN pre-eviction: the LRU page's 64 KiB basic block, then every subtree of its VA
    #: block's tree with 0 < resident < half (bottom-up, cascading)
    evict: str = "alloc2m"
    #: drop clean pages (fetched from a tier that keeps a valid copy, not written since)
    #: instead of writing them back; the driver writes back everything (False)
    skip_clean_writeback: bool = False
    #: "uvmsmart": BW(s) = (2a/π)·atan(0.07292·KB), a = 0.75 × link (anchors.md §4);
    #: "flat": the link's bandwidth at every size; "": the preset's [driver] transfer_curve
    #: (the H100 fit's choice), else "uvmsmart"
    transfer_curve: str = ""
    #: UVMSmart halves the throughput of transfers of 2 MiB or more
    curve_halve_2mib: bool = True
    #: fixed cost per transfer, µs (on top of the curve)
    transfer_overhead_us: float = 0.0
    #: a kernel touching a page whose prefetch is still in flight: False = it stalls until
    #: the arrival (its compute comes after); True = its compute overlaps the wait (end =
    #: max(end, arrival), the G10 engine's credit)
    inflight_overlap: bool = False

    def check(self) -> "DriverOptions":
        def bad(name, msg):
            raise InputError(msg, param=f"engine.compat.{name}")

        for f in ("fault_batch", "big_page_kib", "density_threshold", "small_alloc_kib"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                bad(f, f"must be an integer, got {v!r}")
        if not 1 <= self.fault_batch <= 65536:
            bad("fault_batch", f"must be in 1..65536, got {self.fault_batch}")
        if self.big_page_kib not in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
            bad("big_page_kib", f"must be a power of two in 4..2048, got {self.big_page_kib}")
        if not 1 <= self.density_threshold <= 100:
            bad("density_threshold", f"must be in 1..100, got {self.density_threshold}")
        if self.prefetcher not in PREFETCHERS:
            bad("prefetcher", f"must be one of {', '.join(PREFETCHERS)}, got {self.prefetcher!r}")
        if self.evict not in EVICTIONS:
            bad("evict", f"must be one of {', '.join(EVICTIONS)}, got {self.evict!r}")
        if self.transfer_curve not in CURVES + ("",):
            bad("transfer_curve", f"must be one of {', '.join(CURVES)}, got {self.transfer_curve!r}")
        for f in (
            "skip_clean_writeback",
            "curve_halve_2mib",
            "inflight_overlap",
            "fresh_allocations",
            "prefetch_at_alloc",
        ):
            if not isinstance(getattr(self, f), bool):
                bad(f, f"must be true or false, got {getattr(self, f)!r}")
        for f in ("fault_latency_us", "transfer_overhead_us", "link_fraction", "managed_free_us"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                bad(f, f"must be a number, got {v!r}")
        if self.transfer_overhead_us < 0:
            bad("transfer_overhead_us", f"must be >= 0, got {self.transfer_overhead_us}")
        if self.small_alloc_kib < -1:
            bad("small_alloc_kib", f"must be >= 0 (or -1: the preset's), got {self.small_alloc_kib}")
        if self.link_fraction == 0 or self.link_fraction > 1:
            bad("link_fraction", f"must be in (0, 1] (or < 0: the preset's), got {self.link_fraction}")
        if self.prefetch_at_alloc and not self.fresh_allocations:
            bad("prefetch_at_alloc", "needs fresh_allocations = true")
        return self


def driver_options(values: dict | tuple | None = None, base: dict | None = None) -> DriverOptions:
    """DriverOptions from the defaults, a policy's fixed settings (`base`) and the run's
    engine.compat switches (`values`), each key checked."""
    known = {f.name for f in dataclasses.fields(DriverOptions)}
    merged = dict(base or {})
    for k, v in dict(values or {}).items():
        one_of(k, sorted(known), "driver-engine option", param=f"engine.compat.{k}")
        merged[k] = v
    for k in ("fault_latency_us", "transfer_overhead_us", "link_fraction", "managed_free_us"):
        if isinstance(merged.get(k), int) and not isinstance(merged.get(k), bool):
            merged[k] = float(merged[k])
    return DriverOptions(**merged).check()


# ---------------------------------------------------------------------------------------------
# transfers


def transfer_gbps(nbytes: int, link_gbps: float, curve: str, halve_2mib: bool) -> float:
    """Throughput (GB/s) of one transfer of nbytes on a link of link_gbps."""
    if curve == "flat":
        return float(link_gbps)
    a = 0.75 * float(link_gbps)
    bw = 2.0 * a / math.pi * math.atan(0.07292 * nbytes / 1024.0)
    if halve_2mib and nbytes >= 2 * 2**20:
        bw /= 2.0
    return bw


def transfer_table(
    link_gbps: float, f_hz: int, curve: str, halve_2mib: bool, overhead_us: float, latency_us: float = 0.0
) -> np.ndarray:
    """int64[513]: cycles of one transfer of n = 0..512 pages (index 0: 0)."""
    out = np.zeros(dk.VA_PAGES + 1, np.int64)
    for n in range(1, dk.VA_PAGES + 1):
        b = n * PAGE_SIZE
        sec = (overhead_us + latency_us) * 1e-6 + b / (transfer_gbps(b, link_gbps, curve, halve_2mib) * 1e9)
        out[n] = int(math.ceil(sec * f_hz))
    return out


# ---------------------------------------------------------------------------------------------
# hints and requests


@dataclass(frozen=True)
class DriverHints:
    """What a policy asks of the driver, over the flattened kernel sequence g = it*K + k.

    Rows (sorted by `issue`): issue int64 (the hint is issued at the start of kernel g, before
    its barrier: a cudaMemPrefetchAsync on the one prefetch stream), start_page, n_pages,
    kind (HINT_KINDS: prefetch to the GPU, evict to the host, discard). wait int64[n_iter*K]:
    the row kernel g waits for (-1: none; E2's stream barrier)."""

    issue: np.ndarray
    start_page: np.ndarray
    n_pages: np.ndarray
    kind: np.ndarray
    wait: np.ndarray | None = None
    info: dict = dataclasses.field(default_factory=dict)
    #: preevict rows act only while the GPU holds more than this fraction of its pages
    preevict_fraction: float = 1.0

    @classmethod
    def empty(cls) -> "DriverHints":
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z)


def required_runs(w, required_order=None):
    """Per kernel, its touched page runs in order: inputs ascending, then outputs that are not
    inputs, ascending (the page engine's order). Returns (ptr, start, n, write)."""
    from g10fast.workload.model import required_csr

    ptr, idx = required_csr(w) if required_order is None else required_order
    K = w.num_kernels
    kk = np.repeat(np.arange(K), np.diff(ptr))
    out_set = set((np.repeat(np.arange(K), np.diff(w.out_ptr)) * (w.num_tensors + 1) + w.out_idx).tolist())
    write = np.fromiter(
        ((int(k) * (w.num_tensors + 1) + int(t)) in out_set for k, t in zip(kk, idx)),
        dtype=np.bool_,
        count=len(idx),
    )
    sp = w.start_page.astype(np.int64)[idx]
    n = w.n_pages.astype(np.int64)[idx]
    keep = n > 0
    # drop empty tensors, fix the pointer
    cnt = np.bincount(kk[keep], minlength=K)
    p2 = np.zeros(K + 1, np.int64)
    p2[1:] = np.cumsum(cnt)
    return p2, sp[keep], n[keep], write[keep]


def tensor_hints(w, rows, n_iter: int) -> DriverHints:
    """G10-format hint rows (issued kernel 0..K, tensor, from, to), applied every iteration,
    as driver hints: to GPU -> prefetch, to host/SSD -> evict (to the host; the driver cannot
    target the SSD), to NOT_PRESENT -> discard. A row at K fires at kernel 0 of the next
    iteration (dropped after the last)."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    K = w.num_kernels
    kind = np.where(
        rows[:, 3] == 3, dk.HINT_PREFETCH, np.where(rows[:, 3] == 0, dk.HINT_DISCARD, dk.HINT_EVICT)
    )
    sp = w.start_page.astype(np.int64)[rows[:, 1]]
    npg = w.n_pages.astype(np.int64)[rows[:, 1]]
    iss = (
        np.concatenate([rows[:, 0] + it * K for it in range(n_iter)]) if len(rows) else np.zeros(0, np.int64)
    )
    rep = max(n_iter, 1)
    sp, npg, kind = np.tile(sp, rep), np.tile(npg, rep), np.tile(kind, rep)
    keep = iss < n_iter * K
    order = np.argsort(iss[keep], kind="stable")
    return DriverHints(
        iss[keep][order], sp[keep][order], npg[keep][order], kind[keep][order].astype(np.int64)
    )


def allocation_rows(w, n_iter: int, prefetch: bool, small_pages: int = 0):
    """fresh_allocations as hint rows over the flattened kernels g = it*K + k: every tensor
    that is not a weight (is_global false) and that a kernel touches is discarded (freed:
    its pages dropped, no write-back) at the start of the kernel after its last user, and,
    with prefetch, prefetched to the GPU at the start of its first user, which waits for it.
    Tensors of at most small_pages pages are freed (counted) but neither discarded nor
    prefetched. Returns (issue, start_page, n_pages, kind, None, frees int64[K]: the tensors
    freed after kernel k)."""
    K = w.num_kernels
    first, last = w.use_span()
    npg = w.n_pages.astype(np.int64)
    sp = w.start_page.astype(np.int64)
    ts = np.nonzero((last >= 0) & ~np.asarray(w.is_global, bool) & (npg > 0))[0]
    frees = np.bincount(last[ts], minlength=K).astype(np.int64)
    ts = ts[npg[ts] > small_pages]
    iss, st, nn, kd = [], [], [], []
    for it in range(n_iter):
        base = it * K
        iss.append(base + last[ts] + 1)
        kd.append(np.full(len(ts), dk.HINT_DISCARD, np.int64))
        if prefetch:
            iss.append(base + first[ts])
            kd.append(np.full(len(ts), dk.HINT_PREFETCH, np.int64))
        st.extend([sp[ts]] * (2 if prefetch else 1))
        nn.extend([npg[ts]] * (2 if prefetch else 1))
    if not iss:
        z = np.zeros(0, np.int64)
        return z, z, z, z, np.full(n_iter * K, -1, np.int64), frees
    iss, st, nn, kd = (np.concatenate(x) for x in (iss, st, nn, kd))
    keep = iss < n_iter * K
    # at one kernel: the frees before the allocations (the caller frees, then allocates)
    order = np.lexsort((kd[keep] == dk.HINT_PREFETCH, iss[keep]))
    return iss[keep][order], st[keep][order], nn[keep][order], kd[keep][order], None, frees


def _merge_hints(hints: DriverHints, rows, G: int) -> DriverHints:
    """The policy's hints and the allocation rows in one FIFO, sorted by issue kernel (at one
    kernel: allocation rows first, as the host allocates before it launches); a kernel waits
    for the later of its own wait row and its last allocation prefetch."""
    ai, ast, an, ak, _, _ = rows
    pi = np.asarray(hints.issue, np.int64)
    iss = np.concatenate([ai, pi])
    src = np.concatenate([np.zeros(len(ai), np.int64), np.ones(len(pi), np.int64)])
    order = np.lexsort((src, iss))
    pos = np.empty(len(order), np.int64)
    pos[order] = np.arange(len(order))
    wait = np.full(G, -1, np.int64)
    if hints.wait is not None:
        pw = np.asarray(hints.wait, np.int64)
        m = pw >= 0
        wait[m] = pos[len(ai) + pw[m]]
    pf = np.nonzero(ak == dk.HINT_PREFETCH)[0]
    if len(pf):
        np.maximum.at(wait, ai[pf], pos[pf])
    cat = lambda a, b: np.concatenate([np.asarray(a, np.int64), np.asarray(b, np.int64)])
    return DriverHints(
        iss[order],
        cat(ast, hints.start_page)[order],
        cat(an, hints.n_pages)[order],
        cat(ak, hints.kind)[order],
        wait,
        dict(hints.info),
        hints.preevict_fraction,
    )


# ---------------------------------------------------------------------------------------------
# the run


@dataclass
class DriverRun:
    kernels: np.ndarray  # int64 [n_iter*K, K_COLS] (driver.kernels.K_*)
    counters: np.ndarray  # int64 [n_iter, C_COLS] (driver.kernels.C_*)
    bits: tuple  # final residency bitmaps (BG, BH, BS, CH, CS), uint64[nb, 8]
    hint_done: np.ndarray
    scalars: np.ndarray
    fault_log: tuple  # (kernel, block) of the logged iteration
    status: str
    failure: dict | None
    options: DriverOptions
    params: dict
    npages: int = 0
    #: per kernel k, the cycles of the managed frees after it (fresh_allocations), inside
    #: K_END and counted as stall by iteration_stats
    free_cycles: np.ndarray | None = None

    @property
    def loc(self) -> np.ndarray:
        """int8[npages]: the final tier of every page (LOC_*), unpacked from the bitmaps."""
        return dk.unpack_loc(self.bits[0], self.bits[1], self.bits[2], self.npages)

    @property
    def copy(self) -> np.ndarray:
        """int8[npages]: the tier of each GPU page's clean copy (skip_clean_writeback)."""
        return dk.unpack_copy(self.bits[0], self.bits[3], self.bits[4], self.npages)


#: the [driver] keys of a hardware preset (data/hardware/<name>.toml)
PRESET_KEYS = ("fault_batch_us", "link_fraction", "managed_free_us", "small_alloc_kib")


@functools.lru_cache(maxsize=None)
def _preset_driver(name: str) -> tuple:
    from g10fast.hardware import hardware_dir
    from g10fast.errors import read_toml

    p = hardware_dir() / f"{name}.toml"
    if not name or not p.is_file():
        return ()
    sec = read_toml(p, "hardware preset").get("driver")
    if not isinstance(sec, dict):
        return ()
    out = []
    curve = sec.get("transfer_curve", "uvmsmart")
    if curve not in CURVES:
        raise InputError(
            f"driver.transfer_curve: must be one of {', '.join(CURVES)}, got {curve!r}",
            path=str(p),
            param="driver.transfer_curve",
        )
    out.append(("transfer_curve", curve))
    for k in PRESET_KEYS:
        v = sec.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError(
                f"driver.{k}: missing or not a number >= 0 (got {v!r})", path=str(p), param=f"driver.{k}"
            )
        out.append((k, float(v)))
    return tuple(out)


def preset_driver(system) -> dict:
    """The driver engine's measured values of the system's hardware preset (its [driver]
    section: PRESET_KEYS and transfer_curve), {} for a system without one
    (a G10 config, a System built in code, a preset without the section)."""
    return dict(_preset_driver(str(getattr(system, "name", "") or "")))


def system_params(system, opts: DriverOptions) -> dict:
    """The engine's integer parameters from a System and the options. An option < 0 takes
    the preset's [driver] value (preset_driver), else the System's own figure."""
    f_hz = int(system.f_hz)
    gpu_pages = int(float(system.gpu_memory_gb) * 2**30) // PAGE_SIZE
    host_pages = int(float(system.host_memory_gb) * 2**30) // PAGE_SIZE
    pre = preset_driver(system)
    frac = opts.link_fraction if opts.link_fraction > 0 else pre.get("link_fraction", 1.0)
    link = min(float(system.host_link_gbps), float(system.gpu_link_gbps)) * frac
    lat = (
        opts.fault_latency_us
        if opts.fault_latency_us >= 0
        else pre.get("fault_batch_us", float(system.fault_latency_us))
    )
    free_us = opts.managed_free_us if opts.managed_free_us >= 0 else pre.get("managed_free_us", 0.0)
    small = opts.small_alloc_kib if opts.small_alloc_kib >= 0 else int(pre.get("small_alloc_kib", 0))
    curve = opts.transfer_curve or pre.get("transfer_curve", "uvmsmart")
    halve, ov = opts.curve_halve_2mib, opts.transfer_overhead_us
    return {
        "f_hz": f_hz,
        "gpu_pages": gpu_pages,
        "gpu_chunks": gpu_pages // dk.VA_PAGES,
        "host_pages": host_pages,
        "link_gbps": link,
        "fault_latency_us": lat,
        "fault_latency_cycles": int(round(lat * 1e-6 * f_hz)),
        "managed_free_us": free_us,
        "managed_free_cycles": int(round(free_us * 1e-6 * f_hz)),
        "small_alloc_pages": small * 1024 // PAGE_SIZE,
        "transfer_curve": curve,
        "big_pages": opts.big_page_kib * 1024 // PAGE_SIZE,
        "h2d": transfer_table(link, f_hz, curve, halve, ov),
        "d2h": transfer_table(link, f_hz, curve, halve, ov),
        "ssd_r": transfer_table(
            float(system.ssd_bandwidth_gbps), f_hz, "flat", False, ov, float(system.ssd_read_latency_us)
        ),
        "ssd_w": transfer_table(
            float(system.ssd_bandwidth_gbps), f_hz, "flat", False, ov, float(system.ssd_write_latency_us)
        ),
    }


def simulate_driver(
    w,
    system,
    opts: DriverOptions | None = None,
    hints: DriverHints | None = None,
    *,
    num_iteration: int = 2,
    log_iter: int = -1,
    required_order=None,
    exec_cycles=None,
    trace=None,
    trace_rows: int = 65536,
) -> DriverRun:
    """Run the driver engine; inputs are checked here (bad input: InputError).

    trace: an object with `append(int64 [n, 10])` (g10fast.trace.EventTraceWriter) that
    receives the event stream (docs/trace-format.md; `tensor` is -1: the driver sees
    addresses), in batches of up to trace_rows rows."""
    opts = (opts or DriverOptions()).check()
    hints = hints or DriverHints.empty()
    if int(num_iteration) < 1:
        raise InputError(f"must be >= 1, got {num_iteration}", param="engine.num_iteration")
    n_iter = int(num_iteration)
    K = w.num_kernels
    P = w.num_pages
    prm = system_params(system, opts)
    if prm["gpu_chunks"] < 1 and opts.evict not in PAGE_EVICTIONS:
        raise InputError(
            "the GPU holds no 2 MiB root chunk (at least 2 MiB of GPU memory is needed)",
            param="gpu.memory_gb",
        )
    if prm["gpu_pages"] < 1:
        raise InputError("the GPU holds no page", param="gpu.memory_gb")
    ptr, rs, rn, rw = required_runs(w, required_order)
    ex = np.ascontiguousarray(w.exec_cycles if exec_cycles is None else exec_cycles, dtype=np.int64)
    if ex.shape != (K,) or (ex < 0).any():
        raise InputError("exec cycles must be K values >= 0", param="workload.exec_cycles")
    G = n_iter * K
    free_cyc = np.zeros(K, np.int64)
    if opts.fresh_allocations:
        if hints.wait is not None and np.asarray(hints.wait).shape != (G,):
            raise InputError("wait must name, per kernel, a hint row issued by then (or -1)", param="plan")
        rows = allocation_rows(w, n_iter, opts.prefetch_at_alloc, prm["small_alloc_pages"])
        hints = _merge_hints(hints, rows, G)
        # the synchronising cudaFree after the kernel: the device drains, then the free runs
        free_cyc = rows[5] * int(prm["managed_free_cycles"])
        ex = ex + free_cyc
    iss = np.asarray(hints.issue, np.int64)
    hs = np.ascontiguousarray(hints.start_page, np.int64)
    hn = np.ascontiguousarray(hints.n_pages, np.int64)
    hk = np.ascontiguousarray(hints.kind, np.int64)
    if not (len(iss) == len(hs) == len(hn) == len(hk)):
        raise InputError("hint arrays differ in length", param="plan")
    if len(iss) and ((iss < 0).any() or (iss >= G).any() or (np.diff(iss) < 0).any()):
        raise InputError("hint issue kernels must be sorted and in 0..n_iter*K-1", param="plan")
    if len(hs) and ((hs < 0).any() or (hn < 0).any() or (hs + hn > P).any()):
        raise InputError("hint page range outside the workload", param="plan")
    if len(hk) and not np.isin(hk, list(HINT_KINDS.values())).all():
        raise InputError("unknown hint kind", param="plan")
    hptr = np.zeros(G + 1, np.int64)
    hptr[1:] = np.cumsum(np.bincount(iss, minlength=G))
    wait = np.full(G, -1, np.int64) if hints.wait is None else np.ascontiguousarray(hints.wait, np.int64)
    if wait.shape != (G,) or (wait >= hptr[1:]).any():
        raise InputError("wait must name, per kernel, a hint row issued by then (or -1)", param="plan")
    log_cap = 0
    if log_iter >= 0:
        first_b = rs // dk.VA_PAGES
        last_b = (rs + rn - 1) // dk.VA_PAGES
        log_cap = int((last_b - first_b + 1).sum()) + K
    ev = np.zeros((max(int(trace_rows), 1) if trace is not None else 1, dk.EV_COLS), np.int64)
    dk._SINK[0] = trace
    try:
        args = (
            K,
            n_iter,
            ptr,
            rs,
            rn,
            rw.astype(np.bool_),
            ex,
            hptr,
            hs,
            hn,
            hk,
            wait,
            P,
            prm["gpu_pages"],
            prm["gpu_chunks"],
            prm["host_pages"],
            opts.fault_batch,
            prm["fault_latency_cycles"],
            prm["big_pages"],
            PREFETCHERS[opts.prefetcher],
            opts.density_threshold,
            EVICTIONS[opts.evict],
            opts.skip_clean_writeback,
            prm["h2d"],
            prm["d2h"],
            prm["ssd_r"],
            prm["ssd_w"],
            int(log_iter),
            log_cap,
            np.zeros(0, np.int8),
            opts.inflight_overlap,
            int(prm["gpu_pages"] * float(hints.preevict_fraction)),
            ev,
        )
        # untraced: the entry compiled ahead of time (g10fast.aot), `tr` None; traced: the JIT's
        # kernel with `tr` True (its event rows and object-mode sink compiled in)
        out = aot.entry(dk.simulate, None)(*args) if trace is None else dk.simulate_traced(*args)
    finally:
        dk._SINK[0] = None
    kern, cnt, BG, BH, BS, CH, CS, done, S, lk, lb, nlog = out
    if trace is not None and S[dk.S_NEV] > 0:
        trace.append(ev[: S[dk.S_NEV]])
    status, failure = "ok", None
    if S[dk.S_FAIL] != dk.FAIL_NONE:
        done_rows = int((kern[:, dk.K_END] > 0).sum())
        status = "failed"
        failure = {
            "stage": "engine",
            "reason": "no evictable root chunk: one fault batch or "
            "prefetch needs more GPU memory than the GPU has",
            "kernel": done_rows % K if K else None,
            "iteration": done_rows // K if K else None,
        }
    params = {k: v for k, v in prm.items() if not isinstance(v, np.ndarray)}
    return DriverRun(
        kern,
        cnt,
        (BG, BH, BS, CH, CS),
        done,
        S,
        (lk[:nlog].copy(), lb[:nlog].copy()),
        status,
        failure,
        opts,
        params,
        P,
        free_cyc,
    )


def iteration_stats(run: DriverRun, w, n_iter: int) -> list:
    """Per iteration: the result schema's fields (docs/results.md) from a driver run."""
    kern, cnt = run.kernels, run.counters
    K = w.num_kernels
    ideal = int(np.asarray(w.exec_cycles).sum())
    pf_total = int(np.asarray(w.pf_cycles).sum())
    out = []
    prev = 0
    for it in range(n_iter):
        rows = kern[it * K : (it + 1) * K]
        if run.status != "ok" or K == 0:
            break
        last = int(rows[-1, dk.K_END])
        exe = last - prev
        prev = last
        c = cnt[it]
        stall = int(rows[:, dk.K_STALL].sum())
        if run.free_cycles is not None:
            stall += int(run.free_cycles.sum())
        compute = int(np.asarray(w.exec_cycles).sum())
        out.append(
            {
                "iteration": it,
                "exe_time_cycles": exe,
                "ideal_exe_time_cycles": ideal,
                "pf_exe_time_cycles": pf_total,
                "slowdown": exe / ideal if ideal else float("nan"),
                "speedup": pf_total / exe if exe else float("nan"),
                "in_transfer": 0,
                "cpu_pf": int(c[dk.C_IN_CPU]),
                "ssd_pf": int(c[dk.C_IN_SSD]),
                "unalloc_pf": int(c[dk.C_ALLOC]),
                "stall_cycles": stall,
                "overlap_cycles": max(0, int(c[dk.C_PF_CYCLES])),
                "compute_cycles": compute,
                "faults": int(c[dk.C_FAULTS]),
                "fault_batches": int(c[dk.C_BATCHES]),
                "pages": {
                    "alloc": int(c[dk.C_ALLOC]),
                    "cpu_to_gpu": int(c[dk.C_IN_CPU]),
                    "ssd_to_gpu": int(c[dk.C_IN_SSD]),
                    "gpu_to_cpu": int(c[dk.C_OUT_CPU]),
                    "gpu_to_ssd": int(c[dk.C_OUT_SSD]),
                    "incoming": int(c[dk.C_IN_CPU] + c[dk.C_IN_SSD]),
                    "outgoing": int(c[dk.C_OUT_CPU] + c[dk.C_OUT_SSD]),
                    "clean_dropped": int(c[dk.C_CLEAN_DROP]),
                    "discarded": int(c[dk.C_DISCARD]),
                    "prefetched": int(c[dk.C_PREFETCHED]),
                    "fault_prefetched": int(c[dk.C_DENSITY]),
                },
            }
        )
    return out


def check_invariants(run: DriverRun, w) -> None:
    """Conservation after a run (raises AssertionError): each page in one place, capacity
    never exceeded at any kernel end, pages moved = pages arrived per tier. Works on the
    residency bitmaps (popcounts), never page by page."""
    BG, BH, BS, CH, CS = run.bits
    cnt = run.counters
    P = w.num_pages
    nb = (P + dk.VA_PAGES - 1) // dk.VA_PAGES
    assert BG.shape == BH.shape == BS.shape == (nb, dk.W)
    # no bit beyond the last page; the tiers are disjoint
    tail = P - (nb - 1) * dk.VA_PAGES if nb else 0
    if nb and tail < dk.VA_PAGES:
        beyond = np.ones(dk.VA_PAGES, np.uint8)
        beyond[:tail] = 0
        beyond = np.packbits(beyond, bitorder="little").view(np.uint64)
        for A in (BG, BH, BS):
            assert not (A[-1] & beyond).any()
    assert not (BG & BH).any() and not (BG & BS).any() and not (BH & BS).any()

    def count(A):
        return int(np.bitwise_count(A).sum())

    on_gpu = count(BG)
    assert on_gpu == int(run.scalars[dk.S_GPU])
    assert (run.kernels[:, dk.K_GPU] <= run.params["gpu_pages"]).all()
    # GPU: zero-filled + arrived - left - discarded-on-gpu = resident
    c = cnt.sum(axis=0)
    gpu_in = c[dk.C_ALLOC] + c[dk.C_IN_CPU] + c[dk.C_IN_SSD]
    gpu_out = c[dk.C_OUT_CPU] + c[dk.C_OUT_SSD] + c[dk.C_CLEAN_DROP]
    assert gpu_in - gpu_out >= on_gpu
    if c[dk.C_DISCARD] == 0:
        assert gpu_in - gpu_out == on_gpu
        # off the GPU: every page that left arrived somewhere (host, SSD, or its clean copy)
        assert c[dk.C_OUT_CPU] + c[dk.C_OUT_SSD] + c[dk.C_CLEAN_DROP] - c[dk.C_IN_CPU] - c[
            dk.C_IN_SSD
        ] == count(BH) + count(BS)
    if run.options.evict not in PAGE_EVICTIONS:
        chunks = int((np.bitwise_count(BG).sum(axis=1) > 0).sum())
        assert chunks == int(run.scalars[dk.S_CHUNKS])
        assert int(run.scalars[dk.S_CHUNKS]) <= run.params["gpu_chunks"]
    host_used = count(BH)
    if CH.shape == BG.shape:
        assert not (CH & ~BG).any() and not (CS & ~BG).any() and not (CH & CS).any()
        host_used += count(CH)
    assert host_used == int(run.scalars[dk.S_HOST])
    assert host_used <= max(run.params["host_pages"], 0) or run.params["host_pages"] == 0
