"""The tensor-granular engine (G10's "FN simulator", simulator spec §12, planner spec §6.7):
validation, set-up and statistics around the Numba kernel `tensor.kernels.simulate`.

    simulate_tensors(workload, system, mechanism, plan, trace=None, progress=None) -> TensorRun

`mechanism` (g10fast.engine.tensor.mode.MECHANISMS; a policy gives it as a TensorMode):
"offload_set" (the artifact's FlashNeuron mode) takes an offload set (an object with
`make_loss`, `offload_tensor`, `offload_kernel`: a FlashNeuronPlan), "gds_ssd" and
"gds_ssd_host" (its G10GDSSSD and G10GDSFULL modes) a hint list: int64 rows (issued_kernel,
tensor, from, to), as the page engine takes them; `gds_plan` below post-processes a G10 plan
for the GDS variants (planner spec §5.8, §6.5).

Units (spec §12): one iteration; time in milliseconds (float64), kernel time = cycles / (GHz·1e9)
· 1000; bandwidths in bytes/ms with GB = 2^30; SSD lane SSD_GBps, host lane (CPU_GBps − SSD_GBps);
GPU memory GPU_GB·2^30 / 4096 pages, ×4 for the GDS variants (O-32).

A run that cannot place a tensor is a result: `TensorRun.status == "failed"` with `failure`
(tensor, kernel, pages needed, free pages, largest free run), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from g10fast import aot
from g10fast.analysis.vitality import Vitality, vitality
from g10fast.engine.tensor import kernels as tk
from g10fast.errors import InputError
from g10fast.locations import NOT_PRESENT
from g10fast.workload.model import Workload, max_kernel_pages

#: the engine's modes, by the artifact's names of its migration policies (sim §12)
#: mechanism -> the kernel's mode
MODES = {"offload_set": tk.MODE_FN, "gds_ssd": tk.MODE_GDS_SSD, "gds_ssd_host": tk.MODE_GDS_FULL}
GDS_CAPACITY_FACTOR = 4  # O-32: the GDS variants get 4x the GPU pages

# the engine's event columns are the trace's (g10fast/trace.py)
N_COLS = 10


@dataclass(frozen=True)
class TensorOptions:
    """The artifact's quirks of this engine, each on by default (named by its O-n number)."""

    largest_misses_last_page: bool = True  # O-27 (planner): trailing free run of 1 page missed
    tensor24_bypass: bool = True  # O-17 (planner): failed alloc of tensor 24 = success
    gds_ready_on_alloc: bool = True  # O-33: queued prefetch is ready once allocated
    gds_weights_free_refetch: bool = True  # O-18 / O-33: evicted weights come back without fetch
    fn_rest_recompute: bool = False  # FN prefetch: recompute the room after each prefetch
    gds_fetch_during_offload: bool = True  # O-40: prefetch of a tensor still being offloaded
    offload_skip_dead: bool = False  # improvement (O-41 off): drop the queued offload of
    # a tensor freed before it started
    bytes_at_schedule: bool = True  # O-42: byte counts include transfers still queued
    gds_reoffload: bool = True  # O-43: offload hint while offloading: a second one
    gds_demand_from_ssd: bool = True  # O-44: on-demand fetches read the SSD (host too)
    fn_reserve_workspace: bool = True  # FN: one region for the largest death -1 tensor
    # O-18: the order of a kernel's required tensors is the artifact's unordered_set hash order;
    # we pick fixed orders (REQUIRED_ORDERS), one for making them resident (step 2, which
    # decides the allocator's placement) and one for the FlashNeuron prefetch walk (step 5,
    # which stops at the first tensor that does not fit). docs/tensor-engine.md measures them.
    required_order: str = "inputs_outputs"
    prefetch_order: str = "inputs_outputs"

    def flags(self) -> int:
        f = 0
        if self.largest_misses_last_page:
            f |= tk.OPT_LARGEST_MISSES_LAST1
        if self.tensor24_bypass:
            f |= tk.OPT_TENSOR24
        if self.gds_ready_on_alloc:
            f |= tk.OPT_GDS_READY_ON_ALLOC
        if self.gds_weights_free_refetch:
            f |= tk.OPT_GDS_GLOBAL_NO_FETCH
        if self.fn_rest_recompute:
            f |= tk.OPT_FN_REST_RECOMPUTE
        if self.gds_fetch_during_offload:
            f |= tk.OPT_GDS_FETCH_DURING_OFFLOAD
        if self.offload_skip_dead:
            f |= tk.OPT_OFFLOAD_SKIP_DEAD
        if self.bytes_at_schedule:
            f |= tk.OPT_BYTES_AT_SCHEDULE
        if self.gds_reoffload:
            f |= tk.OPT_REOFFLOAD
        if self.gds_demand_from_ssd:
            f |= tk.OPT_DEMAND_FROM_SSD
        return f


@dataclass
class TensorRun:
    """What one tensor-engine run produced (native units: ms and bytes)."""

    mechanism: str
    status: str  # "ok" or "failed"
    failure: dict | None  # tensor, kernel, pages_needed, free_pages, largest_free_pages, ...
    total_ms: float
    ideal_ms: float
    transfer_ms: float
    ssd_to_gpu_bytes: int
    gpu_to_ssd_bytes: int
    cpu_to_gpu_bytes: int
    gpu_to_cpu_bytes: int
    kernel_start_ms: np.ndarray  # loop start of each kernel (before its allocations)
    kernel_launch_ms: np.ndarray  # when its data was ready
    kernel_end_ms: np.ndarray
    exec_ms: np.ndarray
    kernels_done: int
    capacity_pages: int
    events: np.ndarray  # int64 [n, 10], trace columns; col 0 = time in cycles
    event_ms: np.ndarray  # float64 [n]
    params: dict = field(default_factory=dict)

    @property
    def stall_ms(self) -> float:
        return self.total_ms - self.ideal_ms

    @property
    def overlap_ms(self) -> float:
        return self.transfer_ms - self.stall_ms

    @property
    def execution_only_ms(self) -> float:
        return self.ideal_ms - self.overlap_ms

    def kernel_stall(self) -> np.ndarray:
        """sim_result.kernelStall: (finish - start - exec)/exec per kernel, < 1e-4 written as 0."""
        n = self.kernels_done
        with np.errstate(divide="ignore", invalid="ignore"):
            s = (self.kernel_end_ms[:n] - self.kernel_start_ms[:n] - self.exec_ms[:n]) / self.exec_ms[:n]
        return np.where(s < 1e-4, 0.0, s)


def exec_ms_of(workload: Workload, freq_ghz: float) -> np.ndarray:
    """Kernel times in ms: cycles / (GHz·1e9) · 1000 (planner spec §6.7)."""
    return np.asarray(workload.exec_cycles, dtype=np.float64) / (float(freq_ghz) * 1e9) * 1000.0


def ideal_ms_of(exec_ms: np.ndarray) -> float:
    """Σ exec_ms, summed left to right like the engine's clock."""
    s = 0.0
    for x in exec_ms.tolist():
        s += x
    return s


REQUIRED_ORDERS = ("inputs_outputs", "ascending", "descending")


def required_ordered(workload: Workload, order: str = "inputs_outputs") -> tuple[np.ndarray, np.ndarray]:
    """Per kernel its required tensors (CSR) in a fixed stand-in for the artifact's hash order
    (O-18): "inputs_outputs" = its inputs (ascending id), then its outputs that are not inputs
    (spec §2.2); "ascending" / "descending" = the union by ascending / descending id."""
    if order not in REQUIRED_ORDERS:
        raise ValueError(f"unknown required-tensor order {order!r} (one of {REQUIRED_ORDERS})")
    K = workload.num_kernels
    if order == "inputs_outputs":
        # whole-array form of: per kernel, its inputs, then its outputs not among them (rows
        # are sorted by id, so (kernel, tensor) keys are sorted and searchsorted tests
        # membership)
        in_ptr, out_ptr = np.asarray(workload.in_ptr), np.asarray(workload.out_ptr)
        in_idx = np.asarray(workload.in_idx, dtype=np.int64)
        out_idx = np.asarray(workload.out_idx, dtype=np.int64)
        T = int(max(in_idx.max(initial=-1), out_idx.max(initial=-1))) + 1
        in_k = np.repeat(np.arange(K, dtype=np.int64), np.diff(in_ptr))
        out_k = np.repeat(np.arange(K, dtype=np.int64), np.diff(out_ptr))
        in_keys = in_k * T + in_idx
        out_keys = out_k * T + out_idx
        pos = np.searchsorted(in_keys, out_keys)
        hit = pos < len(in_keys)
        hit[hit] = in_keys[pos[hit]] == out_keys[hit]
        keep = ~hit
        kern = np.concatenate([in_k * 2, out_k[keep] * 2 + 1])
        vals = np.concatenate([in_idx, out_idx[keep]])
        idx = vals[np.argsort(kern, kind="stable")].astype(np.int32)
        ptr = np.zeros(K + 1, np.int64)
        ptr[1:] = np.cumsum(np.bincount(np.concatenate([in_k, out_k[keep]]), minlength=K))
        return ptr, idx
    rows = []
    for k in range(K):
        r = np.union1d(workload.inputs(k), workload.outputs(k))
        if order == "descending":
            r = r[::-1]
        rows.append(np.asarray(r, dtype=np.int32))
    ptr = np.zeros(K + 1, np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    idx = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    return ptr, idx


def hints_by_kernel(hints: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hint rows (issued, tensor, from, to) -> CSR per kernel (ptr, tensor, to), list order kept
    within a kernel (a stable sort by issue kernel; planner O-21). Hints issued at K (pre-deallocs
    after the last kernel) never fire in the single iteration this engine runs."""
    h = np.asarray(hints, dtype=np.int64).reshape(-1, 4)
    h = h[(h[:, 0] >= 0) & (h[:, 0] < K)]
    perm = np.argsort(h[:, 0], kind="stable")
    h = h[perm]
    ptr = np.zeros(K + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(h[:, 0], minlength=K))
    return ptr, h[:, 1].astype(np.int32), h[:, 3].astype(np.int8)


def _cycles(ms: np.ndarray, f_hz: float) -> np.ndarray:
    return np.floor(np.asarray(ms, dtype=np.float64) / 1000.0 * f_hz).astype(np.int64)


def simulate_tensors(
    workload: Workload,
    system,
    mechanism: str,
    plan=None,
    *,
    vit: Vitality | None = None,
    options: TensorOptions = TensorOptions(),
    trace=None,
    progress=None,
) -> TensorRun:
    """Run the tensor engine for one iteration.

    mechanism  "offload_set" (plan: an offload set, e.g. a FlashNeuronPlan), "gds_ssd" or
            "gds_ssd_host" (plan: hint rows (issued, tensor, from, to), already
            post-processed by `gds_plan`).
    system  a g10fast.system.System (an object with the artifact's config attributes is read
            as one).
    trace   an EventTraceWriter or None; progress(done, total) or None."""
    from g10fast.system import PARAM, System

    if mechanism not in MODES:
        raise InputError(
            f"the tensor engine's mechanisms are {sorted(MODES)}, not {mechanism!r}", param="mechanism"
        )
    mode = MODES[mechanism]
    K, T = workload.num_kernels, workload.num_tensors
    if K == 0:
        raise InputError("the workload has no kernels", param="workload")
    if not isinstance(system, System):
        system = System.from_g10(system)
    ghz = float(system.gpu_frequency_ghz)
    if ghz <= 0:
        raise InputError("must be > 0", param=PARAM["gpu_frequency_ghz"])
    gpu_gb = float(system.gpu_memory_gb)
    ssd = float(system.ssd_bandwidth_gbps)
    cpu = float(system.host_link_gbps)
    if gpu_gb <= 0:
        raise InputError("must be > 0", param=PARAM["gpu_memory_gb"])
    if ssd <= 0:
        raise InputError("must be > 0 for the tensor engine", param=PARAM["ssd_bandwidth_gbps"])
    bw_ssd = ssd * 1024 * 1024 * 1024 / 1000
    bw_host = (cpu - ssd) * 1024 * 1024 * 1024 / 1000
    if mode == tk.MODE_GDS_FULL and bw_host <= 0:
        raise InputError(
            "gds_ssd_host (G10-Host) moves host data at the host link's bandwidth "
            "less the SSD's, which must be > 0",
            param=PARAM["host_link_gbps"],
        )
    if bw_host <= 0:
        bw_host = 1.0  # host lanes are unused by offload_set / gds_ssd
    cap = int(gpu_gb * 1024 * 1024 / 4)
    if mode != tk.MODE_FN:
        cap *= GDS_CAPACITY_FACTOR
    f_hz = float(int(ghz * 1e9))

    if vit is None:
        vit = vitality(workload, ghz)
    size_pages = np.asarray(workload.n_pages, dtype=np.int64)
    size_bytes = np.asarray(workload.size, dtype=np.int64)
    is_global = np.asarray(workload.is_global, dtype=np.bool_)
    birth = np.asarray(vit.birth, dtype=np.int32)
    death = np.asarray(vit.death, dtype=np.int32)
    req_ptr, req_idx = required_ordered(workload, options.required_order)
    pf_ptr, pf_idx = required_ordered(workload, options.prefetch_order)
    exec_ms = exec_ms_of(workload, ghz)
    chosen = np.zeros(T, np.bool_)
    off_ptr = np.zeros(K + 1, np.int64)
    off_idx = np.zeros(0, np.int32)
    hint_ptr = np.zeros(K + 1, np.int64)
    hint_tensor = np.zeros(0, np.int32)
    hint_to = np.zeros(0, np.int8)
    fn_reserve = -1
    fn_max = 0
    make_loss = K
    if mode == tk.MODE_FN:
        if not all(hasattr(plan, a) for a in ("make_loss", "offload_tensor", "offload_kernel")):
            raise TypeError(
                "offload_set needs an offload set (make_loss, offload_tensor, "
                "offload_kernel: e.g. a FlashNeuronPlan)"
            )
        make_loss = plan.make_loss
        ot = np.asarray(plan.offload_tensor, dtype=np.int64)
        chosen[ot] = True
        ok = np.asarray(plan.offload_kernel, dtype=np.int64)
        if ok.size and (ok.min() < 0 or ok.max() >= K):
            raise ValueError("offload kernel outside 0..K-1")
        perm = np.argsort(ok, kind="stable")
        off_ptr[1:] = np.cumsum(np.bincount(ok, minlength=K))
        off_idx = ot[perm].astype(np.int32)
        fn_max = max_kernel_pages(workload, non_global_only=True)
        if options.fn_reserve_workspace:
            cand = np.nonzero(~is_global & (death == -1) & (birth >= 0))[0]
            if cand.size:
                fn_reserve = int(cand[np.argmax(size_bytes[cand])])
    else:
        h = np.asarray(plan if plan is not None else np.zeros((0, 4)), dtype=np.int64).reshape(-1, 4)
        if h.size and (h[:, 1].min() < 0 or h[:, 1].max() >= T):
            raise ValueError("hint tensor outside 0..T-1")
        hint_ptr, hint_tensor, hint_to = hints_by_kernel(h, K)
        ev_rows = h[(h[:, 3] == tk.LOC_SSD) | (h[:, 3] == tk.LOC_CPU)]
        chosen[ev_rows[:, 1]] = True

    k_start = np.zeros(K, np.float64)
    k_launch = np.zeros(K, np.float64)
    k_end = np.zeros(K, np.float64)
    clk = np.zeros(4, np.float64)
    cnt = np.zeros(tk.C_N, np.int64)
    fail = np.full(6, -1, np.int64)
    n_ev = 4 * K + 8 * T + 8 * len(hint_tensor) + 6 * len(req_idx) + 64
    while True:
        ev = np.zeros((n_ev, N_COLS), np.int64)
        ev_t = np.zeros(n_ev, np.float64)
        cnt[:] = 0
        st = aot.entry(tk.simulate)(
            mode,
            cap,
            size_pages,
            size_bytes,
            is_global,
            birth,
            death,
            req_ptr,
            req_idx,
            pf_ptr,
            pf_idx,
            exec_ms,
            make_loss,
            chosen,
            off_ptr,
            off_idx,
            fn_reserve,
            fn_max,
            hint_ptr,
            hint_tensor,
            hint_to,
            bw_ssd,
            bw_host,
            options.flags(),
            k_start,
            k_launch,
            k_end,
            ev,
            ev_t,
            clk,
            cnt,
            fail,
        )
        if st != tk.ST_EV_OVERFLOW:
            break
        n_ev *= 2
    if st in (tk.ST_ALLOC_BROKEN, tk.ST_QUEUE_OVERFLOW):
        raise RuntimeError(f"tensor engine internal error (status {st})")
    if st == tk.ST_BAD_HINT:
        raise InputError(
            f"hint for tensor {fail[0]} at kernel {fail[1]} has a destination the "
            "tensor engine does not handle (SSD, host or GPU only)",
            param="hints",
        )
    failure = None
    n_ev = int(cnt[tk.C_NEV])
    ev = ev[:n_ev]
    ev_t = ev_t[:n_ev]
    ev[:, 0] = _cycles(ev_t, f_hz)
    kernels_done = K
    if st == tk.ST_NO_SPACE:
        kernels_done = int(fail[1]) if fail[1] >= 0 else 0
        failure = {
            "reason": 'no space: the allocator cannot place the tensor ("No enough space")',
            "tensor": int(fail[0]),
            "kernel": int(fail[1]),
            "kernel_name": workload.kernel_name[int(fail[1])] if fail[1] >= 0 else None,
            "pages_needed": int(fail[2]),
            "free_pages": int(fail[3]),
            "largest_free_pages": int(fail[4]),
            "capacity_pages": cap,
            "time_ms": float(clk[tk.K_NOW]),
        }
    # ms of every kernel end: KERNEL event value = end cycle
    kmask = ev[:, 1] == tk.EV_KERNEL
    kid = ev[kmask, 3]
    ev[np.nonzero(kmask)[0], 9] = _cycles(k_end[kid], f_hz)
    if trace is not None and n_ev:
        trace.append(ev)
    if progress is not None:
        progress(K, K)
    ideal = ideal_ms_of(exec_ms)
    return TensorRun(
        mechanism=mechanism,
        status="ok" if failure is None else "failed",
        failure=failure,
        total_ms=float(clk[tk.K_NOW]),
        ideal_ms=ideal,
        transfer_ms=float(clk[tk.K_XFER]),
        ssd_to_gpu_bytes=int(cnt[tk.C_SSD_IN]),
        gpu_to_ssd_bytes=int(cnt[tk.C_SSD_OUT]),
        cpu_to_gpu_bytes=int(cnt[tk.C_HOST_IN]),
        gpu_to_cpu_bytes=int(cnt[tk.C_HOST_OUT]),
        kernel_start_ms=k_start,
        kernel_launch_ms=k_launch,
        kernel_end_ms=k_end,
        exec_ms=exec_ms,
        kernels_done=kernels_done,
        capacity_pages=cap,
        events=ev,
        event_ms=ev_t,
        params={
            "capacity_pages": cap,
            "ssd_bytes_per_ms": bw_ssd,
            "host_bytes_per_ms": bw_host,
            "f_hz": int(f_hz),
            "make_loss": int(make_loss),
            "fn_max_pages": int(fn_max),
            "fn_reserve_tensor": int(fn_reserve),
            "options": options.__dict__.copy(),
        },
    )


# ---------------------------------------------------------------------------------------------
# G10-GDS / G10-Host plan post-processing (planner spec §5.2, §5.3, §5.8, §6.5)
# ---------------------------------------------------------------------------------------------

GDS_LOOSEN = 1.060606  # O-15
GDS_LOOSEN_VIT_FULL = 1.269366  # O-15: ViT (borden < 200, transformer) under gds_ssd_host
GDS_HILL_FACTOR = 0.9


def gds_loosen(mechanism: str, is_transformer: int, borden: int) -> float:
    """The GDS variants' loosen factor on the planner's 0.99 target (§5.2, O-15)."""
    if mechanism not in ("gds_ssd", "gds_ssd_host"):
        return 1.0
    if borden < 200 and is_transformer == 1 and mechanism == "gds_ssd_host":
        return GDS_LOOSEN_VIT_FULL
    return GDS_LOOSEN


def gds_target(gpu_memory_gb: float, mechanism: str, is_transformer: int, borden: int) -> int:
    """target = trunc(loosen · trunc(trunc(GPU·2^30) · 0.99))."""
    t = int(int(gpu_memory_gb * 2**30) * 0.99)
    return int(gds_loosen(mechanism, is_transformer, borden) * t)


def strip_prealloc_hints(hints: np.ndarray, birth_issue_mask: np.ndarray | None = None) -> np.ndarray:
    """(b) The GDS variants emit no pre-alloc / pre-dealloc hints: drop every NOT_PRESENT hint,
    and the IN_GPU hints flagged in `birth_issue_mask` (the pre-allocs, when the planner's hint
    list does not tell them apart from prefetches)."""
    h = np.asarray(hints, dtype=np.int64).reshape(-1, 4)
    keep = h[:, 3] != NOT_PRESENT
    if birth_issue_mask is not None:
        keep &= ~np.asarray(birth_issue_mask, dtype=bool)
    return h[keep]


def gds_hill_evictions(
    est: np.ndarray,
    hill_index: int,
    target: int,
    iv_tensor: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
    iv_looped: np.ndarray,
    iv_time_us: np.ndarray,
    size: np.ndarray,
    really_offloaded: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(c) §5.8: extra SSD pre-evictions of the intervals spanning the memory peak.

    est: the planner's per-kernel estimate after §5.7 (bytes); hill_index from §5.3.
    Returns (new hint rows (s, tensor, NOT_KNOWN, IN_SSD), updated est). Intervals are taken by
    time × size descending (stable on creation order: the artifact's std::sort is unstable,
    O-21), skipping those already offloaded, until the hill is under 0.9 × target."""
    est = np.asarray(est, dtype=np.int64).copy()
    K = est.shape[0]
    hill = int(est[hill_index])
    sz = np.asarray(size, dtype=np.int64)[iv_tensor]
    key = np.asarray(iv_time_us, dtype=np.float64) * sz.astype(np.float64)
    order = np.argsort(-key, kind="stable")
    rows = []
    for c in order.tolist():
        if hill < GDS_HILL_FACTOR * target:
            break
        if really_offloaded[c]:
            continue
        s, e = int(iv_start[c]), int(iv_end[c])
        if not iv_looped[c] and s <= hill_index < e:
            t = int(iv_tensor[c])
            rows.append((s, t, tk.LOC_NOT_KNOWN, tk.LOC_SSD))
            est[s + 1 : e] -= sz[c]
            hill -= int(sz[c])
    out = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    assert est.shape[0] == K
    return out, est


def gds_plan(hints: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
    """The hint list the GDS engine consumes: the G10 plan without pre-alloc/pre-dealloc
    (`strip_prealloc_hints`), plus §5.8's extra evictions, stably sorted by issue kernel."""
    h = np.asarray(hints, dtype=np.int64).reshape(-1, 4)
    if extra is not None and len(extra):
        h = np.concatenate([h, np.asarray(extra, dtype=np.int64).reshape(-1, 4)])
    return h[np.argsort(h[:, 0], kind="stable")]
