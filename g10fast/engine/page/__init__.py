"""The G10-compatible page-level UVM engine: validation, set-up and statistics around the
Numba kernels of `page.kernels` (simulator spec §3–§9, §13, §14; the kernels live in stage
modules, `page.layout` to `page.loop`, and `page.kernels` names them all).

    simulate_pages(workload, page_params(system, mode), hints=None, trace=None,
                   progress=None) -> PageRun
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import sys
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from g10fast import aot
from g10fast.engine.page import kernels as pk
from g10fast.engine.page import rules
from g10fast.analysis.vitality import vitality
from g10fast.errors import InputError
from g10fast.trace_kernels import MERGE_OPEN, merge_ticks
from g10fast.workload.model import PAGE_SIZE, Workload, kernel_pages, output_only_csr

# Page counts below this keep the LRU list in int32 entries (page << 4 | generation)
LRU_INT32_PAGES = 1 << 27
# The bulk paths (`bulk=None` takes this): whole-tensor hints and pre-deallocations settled on
# uniform page ranges, with the same results as the per-page engine, which stays selectable as
# the reference (`bulk=False`; docs/page-engine-bulk.md)
BULK_DEFAULT = True
# In the bulk engine under the LRU policies (extent LRU), traced or not: a busy tick that repeats
# the last one that ran stage by stage is carried out directly (page.replay, "A busy tick
# replayed"; same results). False runs every tick stage by stage (a check of the replay).
REPLAY_DEFAULT = True
# In the bulk engine on the extent LRU (the LRU policies, DeepUM without pre-evictions): a
# tensor that a pre-allocation hint queues whole while its states are all 0 (TT_Z) keeps them
# lazy (TT_LZ): its bytes stay 0, standing for "in transfer" until its pages arrive, in order,
# for IN_GPU after, and for NOT_PRESENT once dropped in order (DeepUM; `_lz_state`); if it is
# freed wholly resident with none of them written since, no pass reads or clears them. Any
# other hint or fault scan of the tensor writes them out first (`_lz_fix`). Same results;
# False writes every state as it changes (a check of the lazy states).
LAZY_DEFAULT = True
# Give the page states of freed tensors back to the operating system when they hold only
# zeros (page.release, "freed page states given back"; Linux only, same results): the page
# states' memory follows the live tensors instead of every page ever touched
RELEASE_DEFAULT = sys.platform.startswith("linux")
# With the release: the memory of freed page states waits in a pool and is moved to where the
# next tensors' states are written, instead of being given back and mapped (and cleared) again
# (page.release, "The memory of freed states reused"; Linux 5.7 and later, else as before; same
# results)
RECYCLE_DEFAULT = RELEASE_DEFAULT
#: the most memory the pool holds, bytes (`_give_back`): what a run may keep beyond its live
#: tensors' states
POOL_CAP = 64 << 20
#: the fewest memory pages one move takes: a move (mremap) took 9-17 us in SENet154-1024 G10 and
#: DeepUM+ runs on the test machine, a memory page mapped again about 1.5 us
MOVE_MIN = 8
# (with it, the page states are kept in the system's small memory pages: see _small_pages)
MADV_NOHUGEPAGE = 15


class SimulationError(RuntimeError):
    """The engine reached a state the artifact treats as a fatal assertion."""


@dataclass(frozen=True)
class PageMode:
    """What a policy tells the page engine (simulator spec §11): whether pages start outside
    the GPU (`is_uvm`; False is Ideal), whether hints are applied, DeepUM's migration policy
    (its window, look-ahead degree and dropped dead victims), the eviction rule, and how many
    iterations to simulate.

    eviction: the eviction rule (g10fast.engine.page.rules): a registered name, "arrival"
    (the artifact's LRU, FIFO by GPU arrival) or "deepum" (DeepUM's ring), or a rule kernel
    of the policy's own (`rules.eviction_rule`; it runs on the general per-page path, with
    the bulk paths off); None: "deepum" under DeepUM, else "arrival"."""

    is_uvm: bool = True
    use_prefetch: bool = False
    deepum: bool = False
    prefetch_degree: int = 0
    num_iteration: int = 2
    eviction: object = None


@dataclass(frozen=True)
class SystemParams:
    """Derived constants of the G10 UVM simulator (spec §3), all integers except the rates."""

    frames: int  # G
    host_line: int  # host memory, pages
    tick: int  # ii, cycles
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
    ghz: float = 0.0  # the GPU clock as given (vitality's time base)
    eviction: str = "arrival"  # the eviction rule's registered name (engine.page.rules)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def page_params(system, mode: PageMode) -> SystemParams:
    """§3's constants of a `g10fast.system.System` under a policy's `PageMode`; the page
    engine's own checks (no division by zero, no tick of 0 cycles) name the preset parameter."""
    from g10fast.system import PARAM

    f_hz = int(system.gpu_frequency_ghz * 1e9)
    if f_hz <= 0:
        raise InputError("must be > 0", param=PARAM["gpu_frequency_ghz"])
    f = float(f_hz)
    B = int(system.batch_pages)
    if B <= 0:
        raise InputError("must be > 0", param=PARAM["batch_pages"])
    gpu_gbps = float(system.gpu_link_gbps)
    if gpu_gbps <= 0:
        raise InputError("must be > 0", param=PARAM["gpu_link_gbps"])
    gpu_bpc = gpu_gbps * 1e9 / f
    cpu_bpc = float(system.host_link_gbps) * 1e9 / f
    ssd_bpc = float(system.ssd_bandwidth_gbps) * 1e9 / f
    tick = int(B * 4096 / gpu_bpc)
    cpu_cap = int(B / gpu_gbps * float(system.host_link_gbps))
    ssd_cap = int(B / gpu_gbps * float(system.ssd_bandwidth_gbps))
    malloc_cpp = math.floor(float(system.gpu_malloc_us_per_byte) * 4096 * 1e-6 * f + 0.5)
    if malloc_cpp <= 0:
        raise InputError(
            "gives 0 cycles per page (the artifact divides by zero, O-30)",
            param=PARAM["gpu_malloc_us_per_byte"],
        )
    if tick <= 0:
        raise InputError("gives a batcher tick of 0 cycles", param=PARAM["batch_pages"])
    if cpu_cap < 1:
        raise InputError(
            f"moves 0 pages per batcher tick of {B} pages (host transfers would never progress)",
            param=PARAM["host_link_gbps"],
        )
    if ssd_cap < 1:
        raise InputError(
            f"moves 0 pages per batcher tick of {B} pages (SSD transfers would never progress)",
            param=PARAM["ssd_bandwidth_gbps"],
        )
    if tick // malloc_cpp < 1:
        raise InputError(
            f"{malloc_cpp} cycles per page exceed the {tick}-cycle batcher tick: "
            "no page could ever be allocated",
            param=PARAM["gpu_malloc_us_per_byte"],
        )
    frames = math.floor(float(system.gpu_memory_gb) * 2**30 / PAGE_SIZE + 0.5)
    host_line = int(float(system.host_memory_gb) * 2**30 / PAGE_SIZE)
    if frames <= 0:
        raise InputError("must give at least one GPU page", param=PARAM["gpu_memory_gb"])
    if host_line < 0:
        raise InputError("must be >= 0", param=PARAM["host_memory_gb"])
    if host_line >= 2**31:
        raise InputError("overflows the engine's int32 host page count (O-30)", param=PARAM["host_memory_gb"])
    if mode.deepum and mode.prefetch_degree < 0:
        raise InputError("must be >= 0 for DeepUM", param="policy.prefetch_degree")
    eviction = rules.eviction_name(
        mode.eviction if mode.eviction is not None else "deepum" if mode.deepum else "arrival"
    )
    if eviction == "deepum" and not mode.deepum:
        raise InputError(
            "DeepUM's ring reads DeepUM's window: it needs DeepUM's migration policy (PageMode.deepum)",
            param="policy.eviction",
        )
    if eviction == "arrival" and mode.deepum:
        raise InputError(
            "DeepUM's migration goes with its ring (eviction 'deepum') or a rule "
            "of the policy's own, not 'arrival'",
            param="policy.eviction",
        )
    n_iter = int(mode.num_iteration)
    if n_iter < 1:
        raise InputError("must be >= 1", param="engine.num_iteration")
    return SystemParams(
        frames=frames,
        host_line=host_line,
        tick=tick,
        gpu_cap=B,
        cpu_cap=cpu_cap,
        ssd_cap=ssd_cap,
        alloc_cap=tick // malloc_cpp,
        f_hz=f_hz,
        gpu_bpc=gpu_bpc,
        cpu_bpc=cpu_bpc,
        ssd_bpc=ssd_bpc,
        lsys=int(system.fault_latency_us),
        lssd=int(system.ssd_latency_us),
        num_iteration=n_iter,
        is_uvm=bool(mode.is_uvm),
        use_prefetch=bool(mode.use_prefetch),
        deepum=bool(mode.deepum),
        prefetch_degree=max(int(mode.prefetch_degree), 0),
        ghz=float(system.gpu_frequency_ghz),
        eviction=eviction,
    )


def system_params(cfg) -> SystemParams:
    """§3's constants of an object with the artifact's config attributes (a G10Config, or a
    namespace in tests and benchmarks): its system and its policy keys, read at this boundary."""
    from g10fast.system import System

    mig = str(getattr(cfg, "migration_policy", "OURS") or "OURS").upper()
    evc = str(getattr(cfg, "eviction_policy", "LRU") or "LRU").upper()
    deepum = mig == "DEEPUM"
    if deepum != (evc == "DEEPUM"):
        raise InputError("DEEPUM migration and DEEPUM eviction go together", param="eviction_policy")
    if evc not in ("LRU", "TOLERANT", "DEEPUM"):
        raise InputError(
            f"eviction policy {evc} is not supported by the page engine (LRU, TOLERANT, DEEPUM)",
            param="eviction_policy",
        )
    degree = int(getattr(cfg, "prefetch_degree", -1))
    if deepum and degree < 0:
        raise InputError("must be >= 0 for DEEPUM", param="prefetch_degree")
    n_iter = int(cfg.num_iteration)
    if n_iter < 1:
        raise InputError("must be >= 1", param="num_iteration")
    sys_ = System.from_g10(cfg)
    mode = PageMode(
        is_uvm=bool(cfg.is_UVM),
        use_prefetch=bool(cfg.use_prefetch),
        deepum=deepum,
        prefetch_degree=max(degree, 0),
        num_iteration=n_iter,
    )
    return page_params(sys_, mode)


@dataclass
class PageRun:
    """Raw outcome of one page-engine run (converted to a SimResult by `g10fast.results`)."""

    params: SystemParams
    kernels: np.ndarray  # int64 [n, KS_COLS], completion order
    pcie: np.ndarray  # int64 [num_iteration, PC_COLS]
    boundaries: np.ndarray  # int64 [m, 3]: iteration, time, 1 begin / 0 end
    gpu_used: int
    host_used: int
    host_peak: int = 0  # most host pages in use at any moment (S_HOST_PEAK)
    pstate: np.ndarray | None = None
    live_page_evictions: int = 0
    amplification: tuple = (0, 0)
    extra: dict = field(default_factory=dict)


def _hint_table(hints, K, T):
    """Hints as int64 [H, 4] rows (issued kernel, tensor, from, to), stably sorted by time."""
    if hints is None or len(hints) == 0:
        return np.zeros((0, 4), dtype=np.int64)
    h = np.asarray(hints, dtype=np.int64).reshape(-1, 4)
    t, tensor, fr, to = h[:, 0], h[:, 1], h[:, 2], h[:, 3]
    if (t < 0).any() or (t > K).any():
        raise InputError(f"hint issue kernel outside [0, {K}]", param="hints")
    if (tensor < 0).any() or (tensor >= T).any():
        raise InputError(f"hint tensor outside [0, {T})", param="hints")
    if (to == pk.IN_GPU_LEAST).any() or ((fr == pk.IN_GPU_LEAST) & (to == pk.IN_GPU)).any():
        raise InputError("Pin/Unpin hints (TOLERANT) are not supported", param="hints")
    order = np.argsort(t, kind="stable")
    out = h[order].copy()
    out[:, 2:] = out[:, 2:].astype(np.int8)  # from / to: 8-bit location codes
    return out


def _apply_required_order(w: Workload, kt, kidx, required_order):
    """Reorder each kernel's inputs and output-only tensors in kidx (O-18).

    required_order: a sequence of (inputs, outputs) per kernel, in the processing order to
    use; outputs may repeat inputs (they are dropped, as in §2.2's ordered form). The sets
    must be the workload's."""
    K = w.num_kernels
    if len(required_order) != K:
        raise InputError(
            f"required order lists {len(required_order)} kernels, the workload has {K}",
            param="required_order",
        )
    kidx = kidx.copy()
    for k, (ins, outs) in enumerate(required_order):
        a, b, c = int(kt[k, pk.KT_IN]), int(kt[k, pk.KT_OO]), int(kt[k + 1, pk.KT_IN])
        ins = [int(x) for x in ins]
        seen = set(ins)
        oo = [int(x) for x in outs if int(x) not in seen]
        if sorted(ins) != sorted(kidx[a:b].tolist()) or sorted(oo) != sorted(kidx[b:c].tolist()):
            raise InputError(
                f"kernel {k} ({w.kernel_name[k]}): the required order lists other "
                "tensors than the workload's inputs and outputs",
                param="required_order",
            )
        kidx[a:b] = ins
        kidx[b:c] = oo
    return kidx


def _kernel_table(w: Workload, oo) -> tuple[np.ndarray, np.ndarray]:
    """kt int64 [K + 1, KT_COLS] and kidx int32: per kernel its inputs, then its
    output-only tensors (§2.2, oo = output_only_csr(w)), in kidx[kt[k, KT_IN]:kt[k, KT_OO]]
    and kidx[kt[k, KT_OO]:kt[k + 1, KT_IN]]; and the kernel's exec / input-PF / PF cycles."""
    K = w.num_kernels
    oo_ptr, oo_idx = oo
    n_in = np.diff(w.in_ptr).astype(np.int64)
    n_oo = np.diff(oo_ptr).astype(np.int64)
    kt = np.zeros((K + 1, pk.KT_COLS), dtype=np.int64)
    kt[1:, pk.KT_IN] = np.cumsum(n_in + n_oo)
    kt[:K, pk.KT_OO] = kt[:K, pk.KT_IN] + n_in
    kt[K, pk.KT_OO] = kt[K, pk.KT_IN]
    kt[:K, pk.KT_EXEC] = w.exec_cycles
    kt[:K, pk.KT_INPF] = w.input_pf_cycles
    kt[:K, pk.KT_PF] = w.pf_cycles
    kidx = np.zeros(int(kt[K, pk.KT_IN]), dtype=np.int32)
    # input j of kernel k goes to kt[k, KT_IN] + (j - in_ptr[k]); likewise output-only ones
    kin = np.repeat(np.arange(K), n_in)
    koo = np.repeat(np.arange(K), n_oo)
    kidx[kt[kin, pk.KT_IN] + np.arange(len(kin)) - w.in_ptr[kin]] = w.in_idx
    kidx[kt[koo, pk.KT_OO] + np.arange(len(koo)) - oo_ptr[koo]] = oo_idx
    return kt, kidx


def simulate_pages(
    w: Workload,
    params,
    hints=None,
    trace=None,
    progress=None,
    keep_state: bool = False,
    queue_capacity: int = 1 << 15,
    event_capacity: int = 1 << 18,
    required_order=None,
    check: bool = False,
    bulk: bool | None = None,
) -> PageRun:
    """Run the G10 UVM page engine on a workload.

    params: the engine's constants, `page_params(system, mode)`; an object with the
        artifact's config attributes (a G10Config) is converted by `system_params`.
    hints: (issued_kernel, tensor, from, to) rows; applied only if the mode uses prefetch.
    trace: an object with `append(int64 [n, 13])` receiving the event stream (trace schema
        4: the bulk paths' rows of runs, of ticks joined by `trace_ranges.merge_ticks`, and of
        a fault scan's runs;
        the per-page engine's `[n, 12]` rows of runs), `n_events` and `rewind(n)`
        (g10fast.trace.EventTraceWriter), or None. A batch it is handed is reused after
        `append` returns: a sink that keeps the rows copies them.
    progress: callable(done_kernels, total_kernels) called now and then.
    queue_capacity (rounded up to a power of two) and event_capacity: initial sizes of the
    page-run queues (grown as needed) and of the event buffer.
    required_order: None for the fixed ascending order of a kernel's inputs, then of its
    output-only tensors; or per kernel a pair (inputs, outputs) in the order to process them,
    e.g. the C++ hash-set order read from its statistics/kernels.config (O-18,
    g10fast.workload.kernel_order).
    check: assert the engine's invariants at every kernel boundary (g10fast.engine.page.check;
    InvariantError names the kernel and the invariant): True or "state" (untraced, page-table
    scans within a time budget), "full" (the event stream's conservation sums too, a scan at
    every check: much slower); the results are the same.
    bulk: settle whole-tensor hints and pre-deallocations on uniform page ranges (same
    results); None: `BULK_DEFAULT`; False: the per-page reference engine. An eviction rule
    that is not built in (`params.eviction`, g10fast.engine.page.rules) always runs on the
    per-page engine's general path.
    """
    sp = params if isinstance(params, SystemParams) else system_params(params)
    checker = None
    user_trace = trace
    if check:
        from g10fast.engine.page.check import CountingSink, PageChecker, check_level

        # the event stream's conservation sums where the run writes one anyway, or "full";
        # else the engine runs untraced, on its fast paths (page.check's docstring)
        full = check_level(check) == "full"
        if trace is not None or full:
            trace = CountingSink(user_trace)
    K, T = w.num_kernels, w.num_tensors
    if K < 1:
        raise InputError("the workload has no kernels", param="workload")
    oo = output_only_csr(w)
    kp = kernel_pages(w, oo)
    if sp.is_uvm and kp.max() > sp.frames:
        k = int(kp.argmax())
        raise InputError(
            f"kernel {k} ({w.kernel_name[k]}) needs {kp[k]} pages, more than the "
            f"GPU's {sp.frames} (the artifact aborts)",
            param="gpu.memory_gb",
        )
    ht = _hint_table(hints if sp.use_prefetch else None, K, T)
    if sp.use_prefetch and len(ht) and np.all(ht[:, 0] % K == ht[0, 0] % K):
        raise InputError("every hint maps to one kernel: the artifact would never stop (O-29)", param="hints")
    queue_capacity = 1 << max(int(queue_capacity) - 1, 1).bit_length()  # a power of two

    kt, kidx = _kernel_table(w, oo)
    if required_order is not None:
        kidx = _apply_required_order(w, kt, kidx, required_order)
    tstart = w.start_page.astype(np.int64)
    tnp = w.n_pages.astype(np.int64)
    V = w.num_pages
    vit = vitality(w, sp.ghz)  # DeepUM's is_alive (§8.2)
    birth, death = vit.birth.astype(np.int32), vit.death.astype(np.int32)
    tt = np.zeros((T, pk.TT_COLS), dtype=np.int64)
    tt[:, pk.TT_START] = tstart
    tt[:, pk.TT_NP] = tnp
    tt[:, pk.TT_GLOBAL] = w.is_global
    tt[:, pk.TT_BIRTH] = birth
    tt[:, pk.TT_DEATH] = death
    tt[:, pk.TT_RAW] = w.raw_size
    nz = np.nonzero(tnp > 0)[0]
    order = nz[np.argsort(tstart[nz], kind="stable")]
    # page -> tensor lookup: first pages in ascending order, with one past the last page as a
    # sentinel, and the tensor ids (see page.helpers.tensor_of)
    srt = np.zeros((2, len(order) + 1), dtype=np.int64)
    srt[0, :-1] = tstart[order]
    srt[0, -1] = V
    srt[1, :-1] = order

    # UVM: every page NOT_PRESENT (0) at first, from np.zeros: the operating system maps
    # zero pages as the engine first touches them (no pass writing V bytes ahead, and the
    # pages of tensors it never touches take no memory); in a process that keeps its buffers
    # (`keep_buffers`: sweep workers), the kept states, zeroed, whose freed states are then
    # not given back (`StateBuffer`)
    pstate = STATES.take(V) if sp.is_uvm else None
    kept = pstate is not None
    if not kept:
        if not sp.is_uvm:
            pstate = np.full(V, pk.IN_GPU, dtype=np.uint8)
        elif RELEASE_DEFAULT:
            pstate = _fresh_states(V)
            _small_pages(pstate)
        else:
            pstate = np.zeros(V, dtype=np.uint8)
    if sp.is_uvm:
        for t in np.nonzero(w.is_global)[0]:
            pstate[tstart[t] : tstart[t] + tnp[t]] = pk.IN_SSD
    else:
        tt[:, pk.TT_RES] = tnp  # every page resident from the start
    bulk = BULK_DEFAULT if bulk is None else bool(bulk)
    # the eviction rule: a kernel the engine is compiled for; one that is not built in runs
    # on the general per-page path (the bulk and fast paths know the built-in rules only)
    rule = rules.eviction_kernel(sp.eviction)
    own_rule = sp.eviction not in rules.BUILTIN
    bulk = bulk and not own_rule
    if sp.is_uvm and bulk:
        # every state 0 at the start but the global tensors' (IN_SSD): known (TT_Z)
        tt[:, pk.TT_Z] = (tnp > 0) & ~np.asarray(w.is_global, dtype=bool)
    S = np.zeros(pk.NS, dtype=np.int64)
    # The LRU list: for the LRU policies in the bulk engine, extents (page.lru, "The LRU
    # list as extents"); else the reference ring of page entries.
    # DeepUM on extents too (its cursor a page of the list), but for runs with planned
    # pre-evictions: under DeepUM a GPU page in transfer stays a non-PF victim (§8.2), which
    # the extent list (GPU pages not in transfer) does not hold; those keep the ring.
    # Ideal (not UVM: every page resident from the start, none arrives or leaves) on extents
    # as well, with the same results: the ring's int32 entries compiled the whole engine once
    # more for Ideal alone (the default comparison: 3 compiles of the engine -> 2;
    # benchmarks/results/cold-start-journal.md). Its list stays empty, as the ring did: the
    # checker's extent invariant (the list holds the resident pages) is a UVM run's
    preevicts = bool(len(ht)) and bool(np.any((ht[:, 3] == pk.IN_SSD) | (ht[:, 3] == pk.IN_CPU)))
    xl = bulk and not (sp.deepum and preevicts)
    if xl:
        # records a busy tick can take: one per page it gives a frame (allocations and
        # prefetches) and one per page it pre-evicts (a split)
        S[pk.P_XMARGIN] = sp.alloc_cap + 3 * sp.gpu_cap + 16
        lru = _extent_records(max(_EXTENTS_INITIAL, 4 * int(S[pk.P_XMARGIN])), S)
        tt[:, pk.TT_XH] = -1
        S[pk.P_XLRU] = 1
        S[pk.P_LCAP] = 1 << 62  # (the ring's room tests never bind)
        S[pk.S_X_HEAD] = -1
        S[pk.S_X_TAIL] = -1
        S[pk.P_REPLAY] = int(REPLAY_DEFAULT and not sp.deepum)
        S[pk.P_LAZY] = int(LAZY_DEFAULT and sp.is_uvm)
        S[pk.S_LRU_CUR] = -1  # (DeepUM: END)
        S[pk.S_X_CUR] = -1
    else:
        # a ring of power-of-two capacity with at least 1/4 slack over the pages that can be
        # live
        live_max = int(min(V, sp.frames))
        lru_cap = 1 << (live_max + max(live_max // 4, 1 << 12) - 1).bit_length()
        # LRU entries are page << 4 | generation: int32 while that fits (512 GiB of pages)
        # (the engine reads only the slots it has written: no need to initialise them)
        lru = np.empty(lru_cap + pk.STALE_BUCKETS, dtype=np.int32 if V < LRU_INT32_PAGES else np.int64)
        lru[lru_cap:] = 0
        S[pk.P_LCAP] = lru_cap
    S[pk.P_G] = sp.frames
    S[pk.P_HOST] = sp.host_line
    S[pk.P_II] = sp.tick
    S[pk.P_GPU_CAP] = sp.gpu_cap
    S[pk.P_CPU_CAP] = sp.cpu_cap
    S[pk.P_SSD_CAP] = sp.ssd_cap
    S[pk.P_ALLOC_CAP] = sp.alloc_cap
    S[pk.P_NUM_ITER] = sp.num_iteration
    S[pk.P_USE_PREFETCH] = int(sp.use_prefetch)
    S[pk.P_DEEPUM] = int(sp.deepum)
    S[pk.P_DEGREE] = sp.prefetch_degree
    S[pk.P_IS_UVM] = int(sp.is_uvm)
    S[pk.P_TRACE] = int(trace is not None)
    S[pk.P_BULK] = int(bulk)
    S[pk.P_RULE] = int(own_rule)
    S[pk.P_RELEASE] = mmap.PAGESIZE if RELEASE_DEFAULT and not kept else 0
    if S[pk.P_RELEASE] and RECYCLE_DEFAULT:
        S[pk.S_RECYCLE] = _pagemap() + 1
        S[pk.P_POOL_CAP] = POOL_CAP
        S[pk.P_MOVE_MIN] = MOVE_MIN
        S[pk.S_MOVES_LEFT] = _moves_allowed()
    S[pk.P_F_HZ] = sp.f_hz
    S[pk.P_LSYS] = sp.lsys
    S[pk.P_LSSD] = sp.lssd
    F = np.array([sp.gpu_bpc, sp.ssd_bpc, float(sp.f_hz)], dtype=np.float64)
    S[pk.S_KB_PENDING] = 1  # kernel 0 at t = 0, seq 0; first tick at t = 0, seq 1
    S[pk.S_TICK_SEQ] = 1
    S[pk.S_SEQ] = 2
    S[pk.S_IN_OPEN] = -1
    S[pk.S_OUT_OPEN] = -1
    S[pk.S_IN_OPEN2 : pk.S_IN_OPEN2 + pk.N_OPEN] = -1
    S[pk.S_OUT_OPEN2 : pk.S_OUT_OPEN2 + pk.N_OPEN] = -1
    S[pk.S_REQ_K] = -1
    S[pk.S_RP_MASK] = -1
    S[pk.S_WIN_K] = -1
    qb = np.zeros((pk.NQ, queue_capacity, 2), dtype=np.int64)
    total = K * sp.num_iteration
    kstat = np.zeros((total, pk.KS_COLS), dtype=np.int64)
    pcie = np.zeros((sp.num_iteration, pk.PC_COLS), dtype=np.int64)
    bnd = np.zeros((1 << 14, 3), dtype=np.int64)
    nbnd_flushed = []
    ev = np.zeros((event_capacity if trace is not None else 1, pk.EV_COLS), dtype=np.int64)
    # the emitter of the fast paths' rows, None untraced: the engine is compiled once for
    # each, and an untraced run's fast paths carry no code of the trace (`emit is not None`
    # tests are pruned at compile time)
    emit = pk._emit_ticked if trace is not None else None
    step = max(total // 200, 1) if not check else 1
    S[pk.S_STAT_PAUSE] = step if (progress is not None or check) else total + 1
    if check:
        checker = PageChecker(w, sp, trace, "stride" if full else "budget")

    events_before = trace.n_events if trace is not None else 0
    merged = None  # the joined rows of an event buffer (traced bulk runs)
    opens = np.full((4, MERGE_OPEN), -1, dtype=np.int64)
    # the engine: compiled ahead of time where it was (g10fast.aot), else on first use
    run_engine = aot.entry(pk.run_engine, rule, emit)
    join = aot.entry(merge_ticks)  # (the rows of consecutive ticks joined: traced runs)
    while True:
        S[pk.S_EV_PAUSE] = ev.shape[0] // 2 if trace is not None else ev.shape[0] + 1
        status = run_engine(kt, kidx, ht, tt, srt, pstate, lru, qb, S, F, kstat, pcie, bnd, ev)
        if status == pk.ST_ERROR:
            err = int(S[pk.S_ERROR])
            if err == pk.E_QUEUE_OVERFLOW:
                # a single step queued more runs than the ring holds: rerun with more room,
                # dropping the events this attempt has already written
                if trace is not None:
                    trace.rewind(events_before)
                return simulate_pages(
                    w,
                    sp,
                    hints,
                    user_trace,
                    progress,
                    keep_state,
                    queue_capacity * 8,
                    event_capacity,
                    required_order,
                    check,
                    bulk,
                )
            if err == pk.E_BUFFER_OVERFLOW and trace is not None:
                raise SimulationError(
                    "event buffer overflow within one engine step; rerun with a larger event_capacity"
                )
            raise SimulationError(_error_text(err, S, w))
        if trace is not None and S[pk.S_NEV] > 0:
            # the bulk engine's rows of consecutive ticks joined into range rows (strided where
            # the ticks' runs do not follow one another: trace schema 3 and 4); the per-page
            # engine's rows as they are
            if bulk:
                if merged is None or merged.shape[0] < ev.shape[0]:
                    merged = np.empty_like(ev)
                opens.fill(-1)
                trace.append(merged[: join(ev[: S[pk.S_NEV]], merged, opens)])
            else:
                trace.append(ev[: S[pk.S_NEV]])
            ev[: S[pk.S_NEV], pk.EV_STRIDE] = 0  # (`_emit` leaves it to the rows that have one)
            S[pk.S_NEV] = 0
            S[pk.S_IN_OPEN] = -1
            S[pk.S_OUT_OPEN] = -1
            S[pk.S_IN_OPEN2 : pk.S_IN_OPEN2 + pk.N_OPEN] = -1
            S[pk.S_OUT_OPEN2 : pk.S_OUT_OPEN2 + pk.N_OPEN] = -1
        if S[pk.S_NBND] + 4 > bnd.shape[0]:
            nbnd_flushed.append(bnd[: S[pk.S_NBND]].copy())
            S[pk.S_NBND] = 0
        if checker is not None:
            checker.check(
                S,
                pstate,
                pcie,
                lambda: _queued_pages(qb, S),
                last=status == pk.ST_DONE,
                extents=(lru, tt) if xl and sp.is_uvm else None,
                tt=tt if bulk and sp.is_uvm else None,
            )
        if xl and S[pk.S_X_NFREE] < 2 * S[pk.P_XMARGIN]:
            lru = _extent_records(2 * len(lru) // pk.XW + 2 * int(S[pk.P_XMARGIN]), S, lru)
        qlen = int((S[pk.S_QT : pk.S_QT + pk.NQ] - S[pk.S_QH : pk.S_QH + pk.NQ]).max())
        if qlen > queue_capacity // 2:
            qb = _grow_queues(qb, S)
            queue_capacity = qb.shape[1]
        if progress is not None or check:
            if progress is not None:
                progress(int(S[pk.S_NSTAT]), total)
            while S[pk.S_STAT_PAUSE] <= S[pk.S_NSTAT]:
                S[pk.S_STAT_PAUSE] += step
        if status == pk.ST_DONE:
            break

    pk.lz_written(pstate, tt, copy=False)  # (the final states as the engine reads them)
    boundaries = (
        np.concatenate(nbnd_flushed + [bnd[: S[pk.S_NBND]]]) if nbnd_flushed else bnd[: S[pk.S_NBND]].copy()
    )
    return PageRun(
        params=sp,
        kernels=kstat[: S[pk.S_NSTAT]].copy(),
        pcie=pcie,
        boundaries=boundaries,
        gpu_used=int(S[pk.S_GPU_USED]),
        host_used=int(S[pk.S_HOST_USED]),
        host_peak=int(S[pk.S_HOST_PEAK]),
        pstate=(pstate.copy() if kept else pstate) if keep_state else None,  # (not the kept buffer)
        live_page_evictions=int(S[pk.S_LIVE_WARN]),
        amplification=(int(S[pk.S_AMP_RAW]), int(S[pk.S_AMP_ALIGNED])),
        extra={
            "queued_pages_left": _queued_pages(qb, S),
            **({"invariant_checks": checker.checks, "page_table_scans": checker.scans} if check else {}),
        },
    )


_EXTENTS_INITIAL = 1 << 18  # (64 bytes each, memory taken only as they are first used)


class StateBuffer:
    """The page states of a process's UVM runs, kept from one run to the next when the
    process asks for it (`keep_buffers(True)`: a sweep worker, which runs point after point).

    A run normally maps fresh states (`_fresh_states`) and gives those of freed tensors back
    to the operating system as it goes (`RELEASE_DEFAULT`, page.release), or moves their memory
    to where the next tensors' states are written (`RECYCLE_DEFAULT`): its memory follows the
    live tensors, at a cost of system time (without the reuse every tensor's states were
    mapped again each iteration, 0.2-0.37 s on the paper-scale G10 and DeepUM+ points; with
    it, 0.08-0.28 s: benchmarks/results/page-engine-bulk-journal.md, "Fifteenth step" and
    "Eighteenth step"). A kept buffer is
    mapped once per process: a run takes it (`take`), zeroed where an earlier run wrote, and
    gives nothing back while it runs (P_RELEASE 0); the process then holds the states of the
    largest run it made (up to 428 MiB: SENet154-1024) between runs. The states a run starts
    from are the same, so are its results.

    One run holds the buffer at a time (another, in a thread or nested, maps its own): the
    buffer is held while the view `take` returned is alive (a weak reference), so a run
    that ends, returns or raises frees it without a call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keep = False
        self._buf: np.ndarray | None = None
        self._dirty = 0  # states from here on are zero (never written since the last zeroing)
        self._holder = None  # a weak reference to the view of the run holding the buffer
        self.runs = 0  # runs that took the buffer (a statistic)

    def take(self, V: int) -> np.ndarray | None:
        """The first V states of the kept buffer, all zero (NOT_PRESENT), or None when no
        buffer is kept or another run holds it."""
        with self._lock:
            if not self.keep or (self._holder is not None and self._holder() is not None):
                return None
            if self._buf is None or self._buf.shape[0] < V:
                self._buf = None  # (the old states given back before the new ones are mapped)
                # (room for half as many pages again, mapped only where a run writes: a sweep's
                # next, slightly larger workload does not map it all again)
                self._buf = np.zeros(V + V // 2, dtype=np.uint8)
                if RELEASE_DEFAULT:
                    _small_pages(self._buf)
                self._dirty = 0
            view = self._buf[:V]
            self._holder = weakref.ref(view)
            z = min(V, self._dirty)
            self._dirty = max(self._dirty, V)
            self.runs += 1
        view[:z] = 0
        return view

    def set_keep(self, keep: bool) -> None:
        """Keep the buffer from run to run (True), or stop and give it back (False; a run
        holding it keeps its view to its end)."""
        with self._lock:
            self.keep = bool(keep)
            if not self.keep:
                self._buf = None
                self._holder = None
                self._dirty = 0

    @property
    def nbytes(self) -> int:
        """The kept buffer's size (0: none)."""
        return 0 if self._buf is None else int(self._buf.nbytes)


#: this process's kept page states (`keep_buffers`)
STATES = StateBuffer()


def keep_buffers(keep: bool = True) -> None:
    """Keep the page states of this process's UVM runs from one run to the next (True), so
    that a process running many points maps them once (a sweep worker; the engine registry's
    `keep_buffers`), or (False, the default) map them per run and give freed tensors' states
    back as the run goes: memory following the live tensors (`StateBuffer`)."""
    STATES.set_keep(keep)


_PAGEMAP: list = [None, -1]  # (the process it was opened in, the descriptor)


def _pagemap() -> int:
    """A descriptor of this process's /proc/self/pagemap (kept open; opened again in a
    forked child, whose own it must be), or -1 where it cannot be read."""
    pid = os.getpid()
    if _PAGEMAP[0] != pid:
        try:
            fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            fd = -1
        _PAGEMAP[:] = [pid, fd]
    return _PAGEMAP[1]


def _moves_allowed() -> int:
    """How many moves of page-state memory a run may make: a move can add two mappings to
    the process (`page.release`, "reused"), and a process has at most vm.max_map_count of them
    (65,530 by default; a SENet154-1024 DeepUM+ run ends with about 13,500): a quarter of the
    room left, the rest for everything else the process maps."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            used = sum(1 for _ in f)
    except (OSError, ValueError):
        return 0
    return max(0, (limit - used) // 4)


def _fresh_states(V: int) -> np.ndarray:
    """V zero states in memory of their own, mapped from the operating system (private,
    anonymous): what the release and its reuse assume. (np.zeros does map arrays this
    large, but its allocator takes them from memory it already holds below a threshold that
    grows as the process frees large arrays, up to 32 MiB: there the states' memory pages
    are mapped already, and shared with other arrays at its ends.)"""
    m = mmap.mmap(-1, max(V, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(m, dtype=np.uint8, count=V)


def _small_pages(a: np.ndarray) -> None:
    """Keep array `a` in the operating system's small memory pages (Linux's
    madvise(MADV_NOHUGEPAGE); nothing else changes). NumPy asks for transparent huge pages
    (2 MiB) for arrays of 4 MiB and more; for the page states that made the release of freed
    tensors' states (`_release_free`) and their mapping again (`_populate`, first writes)
    work in 2 MiB units: every write into a released or untouched range zeroed and kept a
    whole 2 MiB page. Measured on SENet154-1024 G10 (`perf record`, warm-up included): 13.5 %
    of the process's samples in the kernel's page clearing; peak 424 MiB, 311 MiB in small
    pages (benchmarks/results/page-engine-bulk-journal.md, "Eleventh step")."""
    if a.nbytes < (4 << 20):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int)
    libc.madvise.restype = ctypes.c_int
    # (from the memory page where the array starts: the advice is a mapping's flag, harmless
    # to a neighbour sharing that page)
    start = a.ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
    libc.madvise(start, a.ctypes.data + a.nbytes - start, MADV_NOHUGEPAGE)


def _extent_records(n: int, S, old=None) -> np.ndarray:
    """Storage for n extent records of the extent LRU (`pk.XW` int64 words each): the records
    of `old` kept in place, the others free (never used: from S[S_X_BUMP] on, not written
    here, so they take no memory until the engine takes them)."""
    lru = np.empty(n * pk.XW, dtype=np.int64)
    n0 = 0
    if old is not None:
        n0 = len(old) // pk.XW
        used = int(S[pk.S_X_BUMP]) * pk.XW
        lru[:used] = old[:used]
    else:
        S[pk.S_X_FREE] = -1
        S[pk.S_X_BUMP] = 0
    S[pk.S_X_NFREE] += n - n0
    return lru


def _queued_pages(qb, S) -> int:
    cap = qb.shape[1]
    n = 0
    for q in range(qb.shape[0]):
        for i in range(int(S[pk.S_QH + q]), int(S[pk.S_QT + q])):
            n += int(qb[q, i % cap, 1])
    return n


def _grow_queues(qb, S):
    """A copy of the queues with four times the capacity (each queue's runs from slot 0)."""
    cap = qb.shape[1]
    nqb = np.zeros((qb.shape[0], cap * 4, 2), dtype=np.int64)
    for q in range(qb.shape[0]):
        h, t = int(S[pk.S_QH + q]), int(S[pk.S_QT + q])
        nqb[q, : t - h] = qb[q, np.arange(h, t) % cap]
        S[pk.S_QH + q], S[pk.S_QT + q] = 0, t - h
    return nqb


def _error_text(err: int, S, w: Workload) -> str:
    k = int(S[pk.S_CUR_KERNEL])
    where = f"at kernel {k} ({w.kernel_name[k]}), iteration {int(S[pk.S_CUR_ITER])}"
    return {
        pk.E_NO_VICTIM: f"GPU full and every resident page is in transfer: no victim {where}",
        pk.E_HOST_OVERFLOW: f"eviction to a full host memory {where}",
        pk.E_DEAD_LIVE_EVICT: f"a live page was dropped by a non-fault eviction {where}",
        pk.E_REFAULT_AFTER_RESUME: f"a resumed kernel found missing pages (O-14) {where}",
        pk.E_EXTENTS: f"the extent LRU ran out of records (an engine defect) {where}",
        pk.E_REPLAY: f"a replayed busy tick ended unlike its template (an engine defect) {where}",
    }.get(err, f"engine error {err} {where}")


# ---------------------------------------------------------------------------------------------
# Accessors of the engine's output columns (the only readers of KS_* outside the engine)


def empty_kernel_table() -> np.ndarray:
    """A kernel table with no rows (the shape `PageRun.kernels` has)."""
    return np.zeros((0, pk.KS_COLS), dtype=np.int64)
