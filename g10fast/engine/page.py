"""The G10-compatible page-level UVM engine: validation, set-up and statistics around the
Numba kernels of `page_kernels` (simulator spec §3–§9, §13, §14).

    simulate_pages(workload, system, hints=None, trace=None, progress=None) -> PageRun
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from g10fast.engine import page_kernels as pk
from g10fast.errors import InputError
from g10fast.workload.model import PAGE_SIZE, Workload

# Policies of the page engine: name -> (use_prefetch, DEEPUM)
PAGE_POLICIES = {"lru": (0, 0), "prefetch_lru": (1, 0), "deepUM": (1, 1)}


class SimulationError(RuntimeError):
    """The engine reached a state the artifact treats as a fatal assertion."""


@dataclass(frozen=True)
class SystemParams:
    """Derived constants of the G10 UVM simulator (spec §3), all integers except the rates."""

    frames: int              # G
    host_line: int           # host memory, pages
    tick: int                # ii, cycles
    gpu_cap: int
    cpu_cap: int
    ssd_cap: int
    alloc_cap: int
    f_hz: int
    gpu_bpc: float
    cpu_bpc: float
    ssd_bpc: float
    lsys: int
    lssd: int
    num_iteration: int
    is_uvm: bool
    use_prefetch: bool
    deepum: bool
    prefetch_degree: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def system_params(cfg) -> SystemParams:
    """Compute §3's constants from an object with G10 config attributes."""
    f_hz = int(cfg.GPU_frequency_GHz * 1e9)
    if f_hz <= 0:
        raise InputError("must be > 0", param="GPU_frequency_GHz")
    f = float(f_hz)
    B = int(cfg.PCIe_batch_size_page)
    if B <= 0:
        raise InputError("must be > 0", param="PCIe_batch_size_page")
    gpu_gbps = float(cfg.GPU_PCIe_bandwidth_GBps)
    if gpu_gbps <= 0:
        raise InputError("must be > 0", param="GPU_PCIe_bandwidth_GBps")
    gpu_bpc = gpu_gbps * 1e9 / f
    cpu_bpc = float(cfg.CPU_PCIe_bandwidth_GBps) * 1e9 / f
    ssd_bpc = float(cfg.SSD_PCIe_bandwidth_GBps) * 1e9 / f
    tick = int(B * 4096 / gpu_bpc)
    cpu_cap = int(B / gpu_gbps * float(cfg.CPU_PCIe_bandwidth_GBps))
    ssd_cap = int(B / gpu_gbps * float(cfg.SSD_PCIe_bandwidth_GBps))
    malloc_cpp = math.floor(float(cfg.GPU_malloc_uspB) * 4096 * 1e-6 * f + 0.5)
    if malloc_cpp <= 0:
        raise InputError("gives 0 cycles per page (the artifact divides by zero, O-30)",
                         param="GPU_malloc_uspB")
    if tick <= 0:
        raise InputError("gives a batcher tick of 0 cycles", param="PCIe_batch_size_page")
    frames = math.floor(float(cfg.GPU_memory_size_GB) * 2 ** 30 / PAGE_SIZE + 0.5)
    host_line = int(float(cfg.CPU_memory_line_GB) * 2 ** 30 / PAGE_SIZE)
    if frames <= 0:
        raise InputError("must give at least one GPU page", param="GPU_memory_size_GB")
    if host_line < 0:
        raise InputError("must be >= 0", param="CPU_memory_line_GB")
    mig = str(getattr(cfg, "migration_policy", "OURS") or "OURS").upper()
    evc = str(getattr(cfg, "eviction_policy", "LRU") or "LRU").upper()
    deepum = mig == "DEEPUM"
    if deepum != (evc == "DEEPUM"):
        raise InputError("DEEPUM migration and DEEPUM eviction go together", param="eviction_policy")
    if evc not in ("LRU", "TOLERANT", "DEEPUM"):
        raise InputError(f"eviction policy {evc} is not supported by the page engine "
                         "(LRU, TOLERANT, DEEPUM)", param="eviction_policy")
    degree = int(getattr(cfg, "prefetch_degree", -1))
    if deepum and degree < 0:
        raise InputError("must be >= 0 for DEEPUM", param="prefetch_degree")
    n_iter = int(cfg.num_iteration)
    if n_iter < 1:
        raise InputError("must be >= 1", param="num_iteration")
    return SystemParams(
        frames=frames, host_line=host_line, tick=tick, gpu_cap=B, cpu_cap=cpu_cap,
        ssd_cap=ssd_cap, alloc_cap=tick // malloc_cpp, f_hz=f_hz, gpu_bpc=gpu_bpc,
        cpu_bpc=cpu_bpc, ssd_bpc=ssd_bpc, lsys=int(cfg.system_latency_us),
        lssd=int(cfg.SSD_latency_us), num_iteration=n_iter, is_uvm=bool(cfg.is_UVM),
        use_prefetch=bool(cfg.use_prefetch), deepum=deepum, prefetch_degree=max(degree, 0))


def output_only_csr(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel, the outputs that are not also inputs (ascending): §2.2's ordered form."""
    rows = []
    for k in range(w.num_kernels):
        rows.append(np.setdiff1d(w.outputs(k), w.inputs(k), assume_unique=True))
    ptr = np.zeros(w.num_kernels + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    idx = np.concatenate(rows).astype(np.int32) if ptr[-1] else np.zeros(0, np.int32)
    return ptr, idx


def liveness(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """birth / death per tensor (planner spec §4.1); globals get birth = death = -1."""
    T, K = w.num_tensors, w.num_kernels
    kin = np.repeat(np.arange(K), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K), np.diff(w.out_ptr))
    birth = np.full(T, np.iinfo(np.int32).max, dtype=np.int64)
    np.minimum.at(birth, w.in_idx, kin)
    np.minimum.at(birth, w.out_idx, kout)
    last_read = np.full(T, -1, dtype=np.int64)
    np.maximum.at(last_read, w.in_idx, kin)
    death = np.where(last_read >= 0, last_read + 1, -1)
    birth = np.where(birth == np.iinfo(np.int32).max, -1, birth)
    birth[w.is_global] = -1
    death[w.is_global] = -1
    return birth.astype(np.int32), death.astype(np.int32)


def kernel_pages(w: Workload) -> np.ndarray:
    """Pages of inputs ∪ outputs per kernel."""
    out = np.zeros(w.num_kernels, dtype=np.int64)
    npg = w.n_pages
    oo_ptr, oo_idx = output_only_csr(w)
    for k in range(w.num_kernels):
        out[k] = npg[w.inputs(k)].sum() + npg[oo_idx[oo_ptr[k]:oo_ptr[k + 1]]].sum()
    return out


@dataclass
class PageRun:
    """Raw outcome of one page-engine run (converted to a SimResult by `g10fast.results`)."""

    params: SystemParams
    kernels: np.ndarray            # int64 [n, KS_COLS], completion order
    pcie: np.ndarray               # int64 [num_iteration, PC_COLS]
    boundaries: np.ndarray         # int64 [m, 3]: iteration, time, 1 begin / 0 end
    gpu_used: int
    host_used: int
    pstate: np.ndarray | None = None
    live_page_evictions: int = 0
    amplification: tuple = (0, 0)
    extra: dict = field(default_factory=dict)


def _hint_arrays(hints, K, T):
    if hints is None or len(hints) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z.astype(np.int32), z.astype(np.int8), z.astype(np.int8)
    h = np.asarray(hints, dtype=np.int64).reshape(-1, 4)
    t, tensor, fr, to = h[:, 0], h[:, 1], h[:, 2], h[:, 3]
    if (t < 0).any() or (t > K).any():
        raise InputError(f"hint issue kernel outside [0, {K}]", param="hints")
    if (tensor < 0).any() or (tensor >= T).any():
        raise InputError(f"hint tensor outside [0, {T})", param="hints")
    if (to == pk.IN_GPU_LEAST).any() or ((fr == pk.IN_GPU_LEAST) & (to == pk.IN_GPU)).any():
        raise InputError("Pin/Unpin hints (TOLERANT) are not supported", param="hints")
    order = np.argsort(t, kind="stable")
    return (t[order].copy(), tensor[order].astype(np.int32), fr[order].astype(np.int8),
            to[order].astype(np.int8))


def simulate_pages(w: Workload, cfg, hints=None, trace=None, progress=None,
                   keep_state: bool = False, queue_capacity: int = 1 << 15,
                   event_capacity: int = 1 << 18) -> PageRun:
    """Run the G10 UVM page engine on a workload.

    cfg: an object with the G10 config attributes (g10fast.config.G10Config).
    hints: (issued_kernel, tensor, from, to) rows; applied only if cfg.use_prefetch.
    trace: an object with `append(int64 [n, 10])` receiving the event stream, or None.
    progress: callable(done_kernels, total_kernels) called now and then.
    """
    sp = system_params(cfg)
    K, T = w.num_kernels, w.num_tensors
    if K < 1:
        raise InputError("the workload has no kernels", param="workload")
    kp = kernel_pages(w)
    if sp.is_uvm and kp.max() > sp.frames:
        k = int(kp.argmax())
        raise InputError(f"kernel {k} ({w.kernel_name[k]}) needs {kp[k]} pages, more than the "
                         f"GPU's {sp.frames} (the artifact aborts)", param="GPU_memory_size_GB")
    h_time, h_tensor, h_from, h_to = _hint_arrays(hints if sp.use_prefetch else None, K, T)
    if sp.use_prefetch and len(h_time) and np.all(h_time % K == h_time[0] % K):
        raise InputError("every hint maps to one kernel: the artifact would never stop (O-29)",
                         param="hints")

    in_ptr, in_idx = w.in_ptr.astype(np.int64), w.in_idx.astype(np.int32)
    oo_ptr, oo_idx = output_only_csr(w)
    tstart = w.start_page.astype(np.int64)
    tnp = w.n_pages.astype(np.int64)
    nz = np.nonzero(tnp > 0)[0]
    order = nz[np.argsort(tstart[nz], kind="stable")]
    # sentinel: one past the last page; the spare last cell of sorted_tensor caches the
    # position of the last lookup (see page_kernels.tensor_of)
    sorted_start = np.append(tstart[order], w.num_pages).astype(np.int64)
    sorted_tensor = np.append(order, 0).astype(np.int32)
    birth, death = liveness(w)
    V = w.num_pages

    init = np.uint8(pk.IN_GPU if not sp.is_uvm else pk.NOT_PRESENT)
    pstate = np.full(V, init, dtype=np.uint8)
    if sp.is_uvm:
        for t in np.nonzero(w.is_global)[0]:
            pstate[tstart[t]:tstart[t] + tnp[t]] = pk.IN_SSD
    lru_cap = int(min(V, sp.frames)) + max(int(min(V, sp.frames)) // 4, 1 << 12)
    lru_page = np.full(lru_cap, -1, dtype=np.int32)
    lru_gen = np.zeros(lru_cap, dtype=np.uint8)

    P = np.zeros(pk.NP_INT, dtype=np.int64)
    P[pk.P_G] = sp.frames
    P[pk.P_HOST] = sp.host_line
    P[pk.P_II] = sp.tick
    P[pk.P_GPU_CAP] = sp.gpu_cap
    P[pk.P_CPU_CAP] = sp.cpu_cap
    P[pk.P_SSD_CAP] = sp.ssd_cap
    P[pk.P_ALLOC_CAP] = sp.alloc_cap
    P[pk.P_NUM_ITER] = sp.num_iteration
    P[pk.P_USE_PREFETCH] = int(sp.use_prefetch)
    P[pk.P_DEEPUM] = int(sp.deepum)
    P[pk.P_DEGREE] = sp.prefetch_degree
    P[pk.P_IS_UVM] = int(sp.is_uvm)
    P[pk.P_TRACE] = int(trace is not None)
    P[pk.P_F_HZ] = sp.f_hz
    P[pk.P_LSYS] = sp.lsys
    P[pk.P_LSSD] = sp.lssd
    F = np.array([sp.gpu_bpc, sp.ssd_bpc, float(sp.f_hz)], dtype=np.float64)

    S = np.zeros(pk.NS, dtype=np.int64)
    S[pk.S_KB_PENDING] = 1          # kernel 0 at t = 0, seq 0; first tick at t = 0, seq 1
    S[pk.S_TICK_SEQ] = 1
    S[pk.S_SEQ] = 2
    S[pk.S_IN_OPEN] = -1
    S[pk.S_OUT_OPEN] = -1
    C = np.zeros(pk.NC, dtype=np.int64)
    qs = np.zeros((pk.NQ, queue_capacity), dtype=np.int64)
    qc = np.zeros((pk.NQ, queue_capacity), dtype=np.int64)
    qh = np.zeros(pk.NQ, dtype=np.int64)
    qt = np.zeros(pk.NQ, dtype=np.int64)
    req = np.zeros(T, dtype=np.uint8)
    in_window = np.zeros(T, dtype=np.uint8)
    total = K * sp.num_iteration
    kstat = np.zeros((total, pk.KS_COLS), dtype=np.int64)
    pcie = np.zeros((sp.num_iteration, pk.PC_COLS), dtype=np.int64)
    bnd = np.zeros((1 << 14, 3), dtype=np.int64)
    nbnd_flushed = []
    ev = np.zeros((event_capacity if trace is not None else 1, pk.EV_COLS), dtype=np.int64)
    step = max(total // 200, 1)
    stat_pause_at = step if progress is not None else total + 1
    raw = w.raw_size.astype(np.int64)
    tglobal = w.is_global.astype(np.uint8)

    while True:
        ev_pause_at = ev.shape[0] // 2 if trace is not None else ev.shape[0] + 1
        status = pk.run_engine(in_ptr, in_idx, oo_ptr, oo_idx, w.exec_cycles, w.input_pf_cycles,
                               w.pf_cycles, h_time, h_tensor, h_from, h_to, tstart, tnp, raw,
                               tglobal, birth, death, sorted_start, sorted_tensor, pstate, req,
                               in_window, lru_page, lru_gen, qs, qc, qh, qt, P, F, S, C, kstat,
                               pcie, bnd, ev, ev_pause_at, stat_pause_at)
        if status == pk.ST_ERROR:
            err = int(S[pk.S_ERROR])
            if err == pk.E_QUEUE_OVERFLOW:
                # a single step queued more runs than the ring holds: rerun with more room
                return simulate_pages(w, cfg, hints, trace, progress, keep_state,
                                      queue_capacity * 8, event_capacity)
            if err == pk.E_BUFFER_OVERFLOW and trace is not None:
                raise SimulationError("event buffer overflow within one engine step; "
                                      "rerun with a larger event_capacity")
            raise SimulationError(_error_text(err, S, w))
        if trace is not None and S[pk.S_NEV] > 0:
            trace.append(ev[:S[pk.S_NEV]])
            S[pk.S_NEV] = 0
            S[pk.S_IN_OPEN] = -1
            S[pk.S_OUT_OPEN] = -1
        if S[pk.S_NBND] + 4 > bnd.shape[0]:
            nbnd_flushed.append(bnd[:S[pk.S_NBND]].copy())
            S[pk.S_NBND] = 0
        qlen = int((qt - qh).max())
        if qlen > queue_capacity // 2:
            qs, qc, qh, qt = _grow_queues(qs, qc, qh, qt)
            queue_capacity = qs.shape[1]
        if progress is not None:
            progress(int(S[pk.S_NSTAT]), total)
            while stat_pause_at <= S[pk.S_NSTAT]:
                stat_pause_at += step
        if status == pk.ST_DONE:
            break

    boundaries = np.concatenate(nbnd_flushed + [bnd[:S[pk.S_NBND]]]) if nbnd_flushed \
        else bnd[:S[pk.S_NBND]].copy()
    return PageRun(params=sp, kernels=kstat[:S[pk.S_NSTAT]].copy(), pcie=pcie,
                   boundaries=boundaries, gpu_used=int(S[pk.S_GPU_USED]),
                   host_used=int(S[pk.S_HOST_USED]), pstate=pstate if keep_state else None,
                   live_page_evictions=int(S[pk.S_LIVE_WARN]),
                   amplification=(int(S[pk.S_AMP_RAW]), int(S[pk.S_AMP_ALIGNED])),
                   extra={"queued_pages_left": _queued_pages(qc, qh, qt)})


def _queued_pages(qc, qh, qt) -> int:
    cap = qc.shape[1]
    n = 0
    for q in range(qc.shape[0]):
        for i in range(qh[q], qt[q]):
            n += int(qc[q, i % cap])
    return n


def _grow_queues(qs, qc, qh, qt):
    cap = qs.shape[1]
    ncap = cap * 4
    nqs = np.zeros((qs.shape[0], ncap), dtype=np.int64)
    nqc = np.zeros_like(nqs)
    for q in range(qs.shape[0]):
        n = int(qt[q] - qh[q])
        idx = (np.arange(qh[q], qt[q]) % cap)
        nqs[q, :n] = qs[q, idx]
        nqc[q, :n] = qc[q, idx]
        qh[q], qt[q] = 0, n
    return nqs, nqc, qh, qt


def _error_text(err: int, S, w: Workload) -> str:
    k = int(S[pk.S_CUR_KERNEL])
    where = f"at kernel {k} ({w.kernel_name[k]}), iteration {int(S[pk.S_CUR_ITER])}"
    return {
        pk.E_NO_VICTIM: f"GPU full and every resident page is in transfer: no victim {where}",
        pk.E_HOST_OVERFLOW: f"eviction to a full host memory {where}",
        pk.E_DEAD_LIVE_EVICT: f"a live page was dropped by a non-fault eviction {where}",
        pk.E_REFAULT_AFTER_RESUME: f"a resumed kernel found missing pages (O-14) {where}",
    }.get(err, f"engine error {err} {where}")
