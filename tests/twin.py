"""Slow, plain-Python reference twin of G10's page-level UVM event simulator.

Written from `../shared/specs/g10-simulator.md` (§0-§11, §13, §14) and g10-planner.md §6.3 only,
independently of the Numba engine, so that the two can be compared on small workloads.
It is meant to be read next to the spec: section numbers (§n) and quirk numbers (O-n)
are cited where the code reproduces them.

Entry points:
  run_twin(workload, cfg, hints=None, order=None) -> dict   the simulation (see its docstring)
  deepum_hints(workload, degree)                  DeepUM's oracle look-ahead hints (planner §6.3)
  stall_model(...)                                the §7 page-fault time, bit-exact in IEEE double
  derived_constants(cfg)                          §3
  final_stats(...)                                the analysis pass of §14.5 / §14.6
  check_invariants(result, workload, cfg)         conservation and capacity checks on a result

Fixed orders (O-18 says any fixed order is fine; this is the one g10fast uses):
  a kernel's required list = its inputs in ascending tensor id, then its outputs that are not
  inputs, ascending; the pages of a tensor in ascending address order.

Not modelled: the RANDOM / GUIDED* eviction policies (§8.3), the kernel-time variation and
speed-up (§2.2; the workload's cycles are used as given), the log files and pf_tensor records.

Checked against the original binary (../shared/reference), hints in prefetch_guide.config
order: every sim_result.kernel line and every sim_result.final value is reproduced exactly for
BERT-128 lru / prefetch_lru / deepUM (19.5 M pages) and ResNet152-256 prefetch_lru / deepUM
(60.3 M pages) with the ascending order, and for ResNet152-256-lru with `order` taken from
statistics/kernels.config (that file lists each kernel's tensors in the C++ hash-set order;
with the ascending order its traffic differs by ~0.1 % from iteration 0 and its kernel lines
from iteration 1, kernel 1171 on: O-18).
"""

from __future__ import annotations

import math
from collections import deque
from types import SimpleNamespace

import numpy as np

PAGE_SIZE = 4096

# Page locations (§4.1); NOT_KNOWN and IN_GPU_LEAST occur only in hints.
NOT_PRESENT, IN_SSD, IN_CPU, IN_GPU, NOT_KNOWN, IN_GPU_LEAST = range(6)

# The artifact's "no measurable PF slowdown" bandwidth, bytes/ms (O-2).
NO_SLOWDOWN_BW = 1063004400

QUEUE_NAMES = (
    "pf_CPU",
    "pf_SSD",
    "pf_alloc",
    "prefetch_SSD",
    "prefetch_CPU",
    "prealloc",
    "preevict_SSD",
    "preevict_CPU",
)


# ---------------------------------------------------------------------------------------------
# §3 derived constants


def _c_round(x: float) -> int:
    """C's round(): half away from zero (Python's round() is half-to-even)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def derived_constants(cfg) -> SimpleNamespace:
    """The System constructor's constants (§3), with C++ truncations."""
    f = int(cfg.GPU_frequency_GHz * 1e9)  # uint64 Hz
    B = int(cfg.PCIe_batch_size_page)
    gpu_bpc = cfg.GPU_PCIe_bandwidth_GBps * 1e9 / f
    cpu_bpc = cfg.CPU_PCIe_bandwidth_GBps * 1e9 / f
    ssd_bpc = cfg.SSD_PCIe_bandwidth_GBps * 1e9 / f
    ii = int(B * PAGE_SIZE / gpu_bpc)
    malloc_cpp = _c_round(cfg.GPU_malloc_uspB * PAGE_SIZE * 1e-6 * f)
    if malloc_cpp == 0:
        raise ValueError("GPU_malloc_uspB too small: malloc cycles per page rounds to 0 (O-30)")
    return SimpleNamespace(
        f=f,
        G=_c_round(cfg.GPU_memory_size_GB * 2**30 / PAGE_SIZE),
        GPU_Bpc=gpu_bpc,
        CPU_Bpc=cpu_bpc,
        SSD_Bpc=ssd_bpc,
        ii=ii,
        GPU_cap=B,
        CPU_cap=int(B / cfg.GPU_PCIe_bandwidth_GBps * cfg.CPU_PCIe_bandwidth_GBps),
        SSD_cap=int(B / cfg.GPU_PCIe_bandwidth_GBps * cfg.SSD_PCIe_bandwidth_GBps),
        malloc_cpp=malloc_cpp,
        alloc_cap=ii // malloc_cpp,
        host_line=int(cfg.CPU_memory_line_GB * 2**30 / PAGE_SIZE),
        l_sys=int(cfg.system_latency_us),
        l_ssd=int(cfg.SSD_latency_us),
    )


# ---------------------------------------------------------------------------------------------
# §7 stall model


def stall_model(
    exec_cycles,
    input_pf_cycles,
    pf_cycles,
    total_in,
    cpu_in,
    ssd_in,
    np_in,
    total_out,
    cpu_out,
    ssd_out,
    np_out,
    c,
) -> int:
    """page_fault_time(k, info) = exec_cycles + ΔPF_cycles, evaluated in IEEE double exactly
    in the order of §7 (numpy float64 so that x/0 gives inf/nan as in C++, not an exception).

    `c` is derived_constants(cfg). Raises ValueError when ΔPF is not finite (O-11: the C++
    converts inf/nan to uint64, which is undefined)."""
    d = np.float64
    with np.errstate(all="ignore"):
        F_in = cpu_in + ssd_in + np_in
        F_out = cpu_out + ssd_out + np_out
        r_in = d(F_in) / d(total_in) if total_in != 0 else d(0.0)
        r_out = d(F_out) / d(total_out) if total_out != 0 else d(0.0)
        r_in_ssd = d(ssd_in) / d(F_in) if F_in != 0 else d(0.0)
        r_out_ssd = d(ssd_out) / d(F_out) if F_out != 0 else d(0.0)
        s_in = d(total_in * PAGE_SIZE)
        s_out = d(total_out * PAGE_SIZE)
        f_int = c.f
        # O-1: integer division of cycles by integer Hz, *then* x1000 -> whole seconds only.
        t00 = d((int(pf_cycles) // f_int) * 1000)
        t10 = d((int(input_pf_cycles) // f_int) * 1000)
        t11 = d((int(exec_cycles) // f_int) * 1000)
        f = d(c.f)
        BW_pcie = d(c.GPU_Bpc) * f / d(1000)
        BW_ssd = d(c.SSD_Bpc) * f / d(1000)
        l_sys = d(c.l_sys)
        l_ssd = d(c.l_ssd)
        if t00 <= t11:
            t00 = t11
        if t10 < t11:
            t10 = t11
        if t10 > t00:
            t10 = t00
        BW_cpu_in = d(NO_SLOWDOWN_BW) if t00 == t10 else s_in / (t00 - t10)  # O-4 pairing
        BW_cpu_out = d(NO_SLOWDOWN_BW) if t10 == t11 else s_out / (t10 - t11)
        BW_ssd_in = BW_cpu_in * l_sys / (l_sys + l_ssd)
        if BW_ssd_in > BW_ssd:
            BW_ssd_in = BW_ssd
        BW_ssd_out = BW_cpu_out * l_sys / (l_sys + l_ssd)
        if BW_ssd_out > BW_ssd:
            BW_ssd_out = BW_ssd
        if r_in_ssd == 0:
            BW_ssd_in = d(0.0)
        if r_out_ssd == 0:
            BW_ssd_out = d(0.0)
        cap = BW_pcie - max(BW_ssd_in, BW_ssd_out)
        if BW_cpu_in > cap:
            BW_cpu_in = cap
        if BW_cpu_out > cap:
            BW_cpu_out = cap
        T_ssd_in = d(0.0) if r_in_ssd == 0 else r_in * r_in_ssd * s_in / BW_ssd_in
        T_ssd_out = d(0.0) if r_out_ssd == 0 else r_out * r_out_ssd * s_out / BW_ssd_out
        T_cpu = r_in * (d(1) - r_in_ssd) * s_in / BW_cpu_in + r_out * (d(1) - r_out_ssd) * s_out / BW_cpu_out
        T_ssd = T_ssd_in + T_ssd_out
        dT_ms = T_cpu if T_ssd < T_cpu else T_ssd  # std::max(a, b) with NaN semantics
        cycles = dT_ms / d(1000) * f
    return int(exec_cycles) + _gcc_double_to_uint64(cycles)


def _gcc_double_to_uint64(x) -> int:
    """The C++ `(uint64_t) x` as g++ emits it for x86-64 without AVX-512 (O-11): values below
    2^63 go through a signed truncation; others have 2^63 subtracted first and the top bit
    flipped back, and the signed truncation of anything out of range (inf, NaN, >= 2^63) is
    the "integer indefinite" 0x8000000000000000."""
    two63 = 2.0**63
    indefinite = 1 << 63

    def cvttsd2si(v):
        if not np.isfinite(v) or not (-two63 <= v < two63):
            return indefinite
        return int(v) & ((1 << 64) - 1)

    if np.isnan(x) or x < two63:  # comisd unordered/below: the direct path
        return cvttsd2si(x)
    return cvttsd2si(x - two63) ^ indefinite


# ---------------------------------------------------------------------------------------------
# Workload helpers


def kernel_required(workload) -> list:
    """Per kernel: (inputs ascending, outputs-not-inputs ascending) as lists of tensor ids."""
    out = []
    for k in range(workload.num_kernels):
        ins = sorted(set(int(t) for t in workload.inputs(k)))
        outs = sorted(set(int(t) for t in workload.outputs(k)) - set(ins))
        out.append((ins, outs))
    return out


def liveness(workload) -> tuple[list, list]:
    """(birth, death) per tensor (§2.1 / planner §4.1). birth = -1 for an unused tensor."""
    T, K = workload.num_tensors, workload.num_kernels
    birth, death = [-1] * T, [-1] * T
    for k in range(K):
        for t in list(workload.inputs(k)) + list(workload.outputs(k)):
            if birth[t] == -1:
                birth[t] = k
        for t in workload.inputs(k):
            death[t] = k + 1  # 1 + last kernel that reads it
    return birth, death


def deepum_hints(workload, degree: int) -> list:
    """DeepUM's oracle look-ahead (planner §6.3): at kernel i, a NOT_KNOWN -> IN_GPU hint for
    every required tensor of kernel (i + degree) mod K, inputs then outputs, ascending."""
    K = workload.num_kernels
    req = kernel_required(workload)
    hints = []
    for i in range(K):
        ins, outs = req[(i + degree) % K]
        for t in ins + outs:
            hints.append((i, t, NOT_KNOWN, IN_GPU))
    return hints


# ---------------------------------------------------------------------------------------------
# §4.2 LRU list with its cursor ("suggested LRU base")


class LRUList:
    """Doubly linked list of resident pages, head = least recently allocated (O-6: FIFO).

    `cursor` is a page or None (= END). Removing or touching the cursor's page resets the
    cursor to the list head (§8.1)."""

    def __init__(self):
        self.prev = {}
        self.next = {}
        self.head = None
        self.tail = None
        self.cursor = None

    def __contains__(self, p):
        return p in self.prev

    def __len__(self):
        return len(self.prev)

    def __iter__(self):
        p = self.head
        while p is not None:
            yield p
            p = self.next[p]

    def _unlink(self, p):
        a, b = self.prev.pop(p), self.next.pop(p)
        if a is None:
            self.head = b
        else:
            self.next[a] = b
        if b is None:
            self.tail = a
        else:
            self.prev[b] = a

    def append(self, p):
        """Insert at the MRU tail (allocation / arrival). The 'touch right after' is a no-op."""
        assert p not in self.prev
        self.prev[p] = self.tail
        self.next[p] = None
        if self.tail is None:
            self.head = p
        else:
            self.next[self.tail] = p
        self.tail = p

    def remove(self, p):
        self._unlink(p)
        if self.cursor == p:
            self.cursor = self.head

    def move_to_head(self, p):
        """Pin (O-16: evicted first). Touching the cursor page resets the cursor (O-17 is UB
        in the C++; here the cursor simply goes to the head)."""
        self._unlink(p)
        self.prev[p] = None
        self.next[p] = self.head
        if self.head is None:
            self.tail = p
        else:
            self.prev[self.head] = p
        self.head = p
        if self.cursor == p:
            self.cursor = self.head

    def move_to_tail(self, p):
        """Unpin."""
        self._unlink(p)
        self.append(p)
        if self.cursor == p:
            self.cursor = self.head


# ---------------------------------------------------------------------------------------------
# The simulator


def _validate(cfg, c, workload, eviction, migration, degree):
    """Start-up sanity checks (§2.5) and the front end's working-set check (§1 step 4)."""
    names = (
        "num_iteration",
        "GPU_frequency_GHz",
        "GPU_memory_size_GB",
        "CPU_memory_line_GB",
        "GPU_PCIe_bandwidth_GBps",
        "CPU_PCIe_bandwidth_GBps",
        "SSD_PCIe_bandwidth_GBps",
        "PCIe_batch_size_page",
        "GPU_malloc_uspB",
        "system_latency_us",
        "SSD_latency_us",
    )
    for n in names:
        if getattr(cfg, n) < 0:
            raise ValueError(f"config {n} must be >= 0")
    g, cp, s = (cfg.GPU_PCIe_bandwidth_GBps, cfg.CPU_PCIe_bandwidth_GBps, cfg.SSD_PCIe_bandwidth_GBps)
    if not (s <= g and cp <= g and s <= cp and g <= s + cp):
        raise ValueError("bandwidths must satisfy SSD <= CPU <= GPU <= SSD + CPU")
    if (migration == "DEEPUM") != (eviction == "DEEPUM"):
        raise ValueError("DEEPUM migration requires DEEPUM eviction and vice versa")
    if migration == "DEEPUM" and degree < 0:
        raise ValueError("prefetch_degree must be >= 0 for DEEPUM")
    if migration != "DEEPUM" and degree > 0:
        raise ValueError("prefetch_degree must be <= 0 unless DEEPUM")
    if migration not in ("OURS", "DEEPUM"):
        raise ValueError(f"migration_policy {migration} is not a UVM-simulator policy")
    if eviction not in ("LRU", "DEEPUM"):
        raise ValueError(f"eviction_policy {eviction} is not modelled by the twin")
    if workload.num_kernels < 2:
        # a kernel event for the same kernel cannot be told apart from a resumption (§5.2)
        raise ValueError("the twin needs at least 2 kernels")
    for k, (ins, outs) in enumerate(kernel_required(workload)):
        pages = sum(int(workload.size[t]) // PAGE_SIZE for t in ins + outs)
        if pages > c.G:
            raise ValueError(f"kernel {k} needs {pages} pages > {c.G} GPU frames")


class _Sim:
    """All simulator state (§4) plus the two event handlers (§6, §9)."""

    def __init__(self, workload, cfg, hints, max_ticks, order=None):
        self.wl = workload
        self.c = c = derived_constants(cfg)
        eviction = str(cfg.eviction_policy).upper()
        if eviction == "TOLERANT":
            eviction = "LRU"
        if eviction not in (
            "RANDOM",
            "LRU",
            "GUIDED",
            "GUIDED_LRU",
            "PERFECT_GUIDED",
            "PERFECT_GUIDED_LRU",
            "DEEPUM",
        ):
            eviction = "LRU"  # anything else -> LRU (§2.5)
        migration = str(getattr(cfg, "migration_policy", "OURS") or "OURS").upper()
        self.degree = int(getattr(cfg, "prefetch_degree", -1))
        _validate(cfg, c, workload, eviction, migration, self.degree)
        self.deepum = migration == "DEEPUM"
        self.num_iteration = int(cfg.num_iteration)
        self.use_prefetch = bool(cfg.use_prefetch)
        self.is_uvm = bool(cfg.is_UVM)
        self.max_ticks = max_ticks

        self.K = workload.num_kernels
        self.exec = [int(x) for x in workload.exec_cycles]
        self.input_pf = [int(x) for x in workload.input_pf_cycles]
        self.pf = [int(x) for x in workload.pf_cycles]
        self.req = kernel_required(workload)
        if order is not None:  # another fixed order (O-18), same sets
            order = [(list(map(int, a)), list(map(int, b))) for a, b in order]
            if [(sorted(a), sorted(b)) for a, b in order] != self.req:
                raise ValueError("order must list each kernel's inputs and outputs-not-inputs")
            self.req = order
        self.req_set = [set(a) | set(b) for a, b in self.req]
        self.birth, self.death = liveness(workload)
        self.is_global = [bool(g) for g in workload.is_global]
        self.t_start = [int(a) // PAGE_SIZE for a in workload.address]
        self.t_pages = [int(s) // PAGE_SIZE for s in workload.size]
        self.V = V = workload.num_pages
        self.tensor_of = [-1] * V
        for t in range(workload.num_tensors):
            for p in range(self.t_start[t], self.t_start[t] + self.t_pages[t]):
                self.tensor_of[p] = t
        assert -1 not in self.tensor_of

        if hints is None and self.use_prefetch and self.deepum:
            hints = deepum_hints(workload, self.degree)
        self.hints = list(hints) if (hints is not None and self.use_prefetch) else []
        self.hint_cursor = 0

        # §4.1 per-page state. is_UVM 0: everything IN_GPU without a frame (§11.7).
        if self.is_uvm:
            self.loc = [IN_SSD if self.is_global[self.tensor_of[p]] else NOT_PRESENT for p in range(V)]
        else:
            self.loc = [IN_GPU] * V
        self.in_transfer = [False] * V
        self.has_frame = [False] * V
        self.gpu_used = 0
        self.host_used = 0
        self.host_peak = 0
        self.lru = LRUList()
        self.q = {n: deque() for n in QUEUE_NAMES}
        self.wait_set = set()

        # §4.5
        self.current_kernel = 0
        self.current_iteration = 0
        self.required_set = set()
        self.window_set = set()
        self.resched = None
        self.data_transferring = False

        # events (§5 / §17.3): at most one kernel event and one batcher event
        self.seq = 0
        self.kb = None  # (time, seq, kernel)
        self.tick_time = 0
        self.tick_seq = 0

        # outputs
        self.kernel_rec = []
        self.pcie_rec = []
        self.boundary_rec = []
        self.counters = dict(
            fetch_ssd=0,
            fetch_cpu=0,
            alloc_new=0,
            evict_ssd=0,
            evict_cpu=0,
            drop=0,
            dealloc_gpu=0,
            dealloc_cpu=0,
            dealloc_ssd=0,
            gpu_in=0,
            gpu_out=0,
            host_in=0,
            host_out=0,
            ticks=0,
            # branch diagnostics, for coverage assertions in tests
            rescue=0,
            nonpf_stall=0,
            refault=0,
            preevict=0,
            zero_fault_waits=0,
            sticky_end=0,
        )

    # --- small predicates -------------------------------------------------------------------
    def pages(self, t):
        return range(self.t_start[t], self.t_start[t] + self.t_pages[t])

    def gpu_full(self):
        return self.gpu_used == self.c.G

    def host_full(self):
        return self.host_used == self.c.host_line

    def is_alive(self, t, k):
        if self.is_global[t]:
            return True
        if self.death[t] == -1:
            return k == self.birth[t]
        return self.birth[t] <= k < self.death[t]

    def next_seq(self):
        s = self.seq
        self.seq += 1
        return s

    # --- frames -----------------------------------------------------------------------------
    def take_frame(self, p):
        assert not self.has_frame[p] and self.gpu_used < self.c.G
        self.has_frame[p] = True
        self.gpu_used += 1
        self.counters["gpu_in"] += 1
        self.lru.append(p)

    def release_frame(self, p):
        """Free p's GPU frame and unlink it from the LRU list. A page that is IN_GPU without a
        frame (is_UVM 0, O-31) frees nothing."""
        if self.has_frame[p]:
            self.has_frame[p] = False
            self.gpu_used -= 1
            self.counters["gpu_out"] += 1
            self.lru.remove(p)

    def free_host_frame(self):
        assert self.host_used > 0
        self.host_used -= 1
        self.counters["host_out"] += 1

    # =========================================================================================
    # §6 KernelBeginEvent

    def kernel_begin(self, k, now):
        self.required_set = self.req_set[k]
        # 6.1 eviction-cursor set-up
        if self.deepum:
            self.window_set = set()
            for j in range(self.degree):
                self.window_set |= self.req_set[(k + j) % self.K]
            p = self.lru.head
            while p is not None and self.tensor_of[p] in self.window_set:
                p = self.lru.next[p]
            self.lru.cursor = p
        else:
            p = self.lru.head
            while p is not None and self.in_transfer[p]:
                p = self.lru.next[p]
            self.lru.cursor = p
        ins, outs = self.req[k]
        required_list = ins + outs
        # 6.2 hints
        if self.use_prefetch:
            self.apply_hints(k)
        # 6.3 residency check
        if not self.all_required_pages_resident(required_list):
            info = dict(
                total_in=0,
                total_out=0,
                cpu_in=0,
                ssd_in=0,
                np_in=0,
                cpu_out=0,
                ssd_out=0,
                np_out=0,
                in_transfer=0,
            )
            for t in ins:
                self.fault_scan(t, True, info)
            for t in outs:
                self.fault_scan(t, False, info)
            for t in required_list:
                for p in self.pages(t):
                    if self.in_transfer[p]:
                        self.wait_set.add(p)
            pf_time = stall_model(
                self.exec[k],
                self.input_pf[k],
                self.pf[k],
                info["total_in"],
                info["cpu_in"],
                info["ssd_in"],
                info["np_in"],
                info["total_out"],
                info["cpu_out"],
                info["ssd_out"],
                info["np_out"],
                self.c,
            )
            if (
                sum(
                    info[x]
                    for x in ("cpu_in", "ssd_in", "np_in", "cpu_out", "ssd_out", "np_out", "in_transfer")
                )
                == 0
            ):
                self.counters["zero_fault_waits"] += 1  # O-12
            if self.resched is None:
                self.resched = dict(first=now, pf_time=pf_time, started=False, infos=[])
            assert not self.resched["started"], "resumed kernel found missing pages (O-14)"
            self.resched["infos"].append(info)
            # no event: the batcher resumes this kernel (§9.6)
        else:
            # 6.4 completion
            counts = [0, 0, 0, 0]  # in_transfer, cpu_pf, ssd_pf, unalloc_pf
            if self.resched is not None:
                start = self.resched["first"]
                end = max(start + self.resched["pf_time"], now)  # O-13
                for i in self.resched["infos"]:
                    counts[0] += i["in_transfer"]
                    counts[1] += i["cpu_in"] + i["cpu_out"]
                    counts[2] += i["ssd_in"] + i["ssd_out"]
                    counts[3] += i["np_in"] + i["np_out"]
                self.resched = None
            else:
                start = now
                end = now + self.exec[k]
            self.kernel_rec.append(
                (self.current_iteration, k, start, end, *counts, self.host_used, self.gpu_used)
            )
            self.kb = (end, self.next_seq(), (k + 1) % self.K)
            self.wait_set.clear()

    def all_required_pages_resident(self, required_list):
        if self.q["pf_alloc"] or self.q["pf_CPU"] or self.q["pf_SSD"]:
            return False
        for t in required_list:
            for p in self.pages(t):
                if self.loc[p] != IN_GPU or self.in_transfer[p]:
                    return False
        return True

    def fault_scan(self, t, is_input, info):
        sfx = "in" if is_input else "out"
        info["total_" + sfx] += self.t_pages[t]
        for p in self.pages(t):
            if self.in_transfer[p]:
                info["in_transfer"] += 1  # not a fault, not in the stall model
                continue
            loc = self.loc[p]
            if loc == NOT_PRESENT:
                info["np_" + sfx] += 1
                self.q["pf_alloc"].append(p)
            elif loc == IN_SSD:
                info["ssd_" + sfx] += 1
                self.q["pf_SSD"].append(p)
            elif loc == IN_CPU:
                info["cpu_" + sfx] += 1
                self.q["pf_CPU"].append(p)
            else:
                continue  # IN_GPU: resident
            self.in_transfer[p] = True

    # --- §2.3 hints -------------------------------------------------------------------------
    def apply_hints(self, k):
        n = len(self.hints)
        if n == 0:
            return
        applied = 0
        while self.hints[self.hint_cursor][0] % self.K == k:
            if applied == n:
                raise RuntimeError("every hint maps to one kernel: the C++ never terminates (O-29)")
            self.apply_hint(self.hints[self.hint_cursor])
            self.hint_cursor = (self.hint_cursor + 1) % n
            applied += 1

    def apply_hint(self, hint):
        _, t, frm, to = hint
        for p in self.pages(t):
            if self.in_transfer[p]:
                continue  # O-23 for pre-dealloc
            loc = self.loc[p]
            if to == IN_GPU_LEAST:  # "Pin": to the LRU head (O-16)
                if p in self.lru:
                    self.lru.move_to_head(p)
            elif frm == IN_GPU_LEAST and to == IN_GPU:  # "Unpin": to the MRU tail
                if p in self.lru:
                    self.lru.move_to_tail(p)
            elif to == IN_GPU:  # prealloc / prefetch
                if loc == NOT_PRESENT:
                    self.q["prealloc"].append(p)
                elif loc == IN_SSD:
                    self.q["prefetch_SSD"].append(p)
                elif loc == IN_CPU:
                    self.q["prefetch_CPU"].append(p)
                else:
                    continue
                self.in_transfer[p] = True
            elif to == IN_SSD or to == IN_CPU:  # pre-evict
                if loc == IN_GPU:
                    self.q["preevict_SSD" if to == IN_SSD else "preevict_CPU"].append(p)
                    self.in_transfer[p] = True
            elif to == NOT_PRESENT:  # pre-dealloc: immediate, no traffic
                if loc == IN_GPU:
                    if self.has_frame[p]:
                        self.counters["dealloc_gpu"] += 1
                    self.release_frame(p)
                elif loc == IN_CPU:
                    self.free_host_frame()
                    self.counters["dealloc_cpu"] += 1
                elif loc == IN_SSD:
                    self.counters["dealloc_ssd"] += 1
                self.loc[p] = NOT_PRESENT
            # anything else: ignored

    # =========================================================================================
    # §9 BatcherEvent

    def batcher(self, t):
        self.counters["ticks"] += 1
        # 9.1 per-tick counters
        self.n_in = self.n_in_ssd = self.n_in_cpu = 0
        self.n_out = self.n_out_ssd = self.n_out_cpu = 0
        self.n_alloc = 0
        self.forced_fetch_src = NOT_KNOWN
        self.forced_evc_dest = NOT_KNOWN
        q = self.q
        if any(q[n] for n in QUEUE_NAMES):
            if self.host_full():
                self.forced_evc_dest = IN_SSD
            self.stage_preevict()
            self.stage_pf_fetch(q["pf_SSD"], IN_SSD)
            self.stage_pf_fetch(q["pf_CPU"], IN_CPU)
            self.stage_alloc(q["pf_alloc"], True)
            self.stage_prefetch()
            self.stage_alloc(q["prealloc"], False)
            if (
                self.deepum
                and self.resched is not None
                and not self.resched["started"]
                and self.wait_set
                and self.n_in + self.n_out == 0
            ):
                # DeepUM "lock-up" rescue: prefetches treated as faults
                self.counters["rescue"] += 1
                self.stage_pf_fetch(q["prefetch_SSD"], IN_SSD)
                self.stage_pf_fetch(q["prefetch_CPU"], IN_CPU)
                self.stage_alloc(q["prealloc"], True)
            if not self.data_transferring:
                self.boundary_rec.append((self.current_iteration, t, 1))
                self.data_transferring = True
        elif self.data_transferring:
            self.boundary_rec.append((self.current_iteration, t, 0))
            self.data_transferring = False
        if self.n_in > 0 or self.n_out > 0:  # O-21: allocation-only ticks not written
            self.pcie_rec.append(
                (
                    self.current_iteration,
                    t,
                    self.n_alloc,
                    self.n_in,
                    self.n_in_ssd,
                    self.n_in_cpu,
                    self.n_out,
                    self.n_out_ssd,
                    self.n_out_cpu,
                )
            )
        # 9.6 resume the waiting kernel
        if (
            self.resched is not None
            and not q["pf_alloc"]
            and not q["pf_CPU"]
            and not q["pf_SSD"]
            and not self.wait_set
        ):
            assert self.kb is None
            self.kb = (t, self.next_seq(), self.current_kernel)
            self.resched["started"] = True
            self.wait_set.clear()
        # the successor tick is pushed by the caller, after the kernel event (§5.2)

    def evict_ok(self):
        c = self.c
        return (not self.gpu_full()) or (
            self.n_out < c.GPU_cap and (not self.host_full() or self.n_out_ssd < c.SSD_cap)
        )

    def stage_preevict(self):
        c = self.c
        qs = self.q["preevict_SSD"]
        while self.n_out_ssd < c.SSD_cap and self.n_out < c.GPU_cap and qs:
            p = qs[0]
            dest = self.forced_evc_dest if self.forced_evc_dest != NOT_KNOWN else IN_SSD
            self.evict(p, dest, False)
            qs.popleft()
        qc = self.q["preevict_CPU"]
        while (
            (
                (self.host_full() and self.n_out_ssd < c.SSD_cap)
                or (not self.host_full() and self.n_out_cpu < c.CPU_cap)
            )
            and self.n_out < c.GPU_cap
            and qc
        ):
            p = qc[0]
            dest = self.forced_evc_dest if self.forced_evc_dest != NOT_KNOWN else IN_CPU
            self.evict(p, dest, False)
            qc.popleft()

    def stage_pf_fetch(self, queue, src):
        c = self.c
        while self.n_in < c.GPU_cap and self.n_alloc < c.alloc_cap and self.evict_ok() and queue:
            p = queue.popleft()
            assert self.loc[p] != IN_GPU
            r = self.fetch(p, src, True)
            assert r >= 0  # a PF allocation always finds a victim
            if self.forced_fetch_src not in (NOT_KNOWN, src):
                break

    def stage_alloc(self, queue, is_pf):
        c = self.c
        while self.evict_ok() and self.n_alloc < c.alloc_cap and queue:
            r = self.alloc_page(queue[0], is_pf)
            if r < 0:
                break  # DeepUM: no non-window victim
            self.counters["alloc_new"] += 1
            self.n_alloc += 1
            queue.popleft()

    def stage_prefetch(self):
        c = self.c
        qs, qc = self.q["prefetch_SSD"], self.q["prefetch_CPU"]
        while self.n_in_ssd < c.SSD_cap and self.n_in < c.GPU_cap and self.evict_ok() and qs:
            p = qs[0]
            if self.loc[p] == IN_SSD:
                if self.fetch(p, IN_SSD, False) < 0:
                    return  # the whole prefetch stage, no pop
            elif self.loc[p] == IN_CPU:
                qc.append(p)
            qs.popleft()
        while self.n_in_cpu < c.CPU_cap and self.n_in < c.GPU_cap and self.evict_ok() and qc:
            p = qc[0]
            if self.loc[p] == IN_CPU:
                if self.fetch(p, IN_CPU, False) < 0:
                    return
            elif self.loc[p] == IN_SSD:
                qs.append(p)
            qc.popleft()

    # --- §9.3 page operations ---------------------------------------------------------------
    def fetch(self, p, src, is_pf):
        r = self.alloc_page(p, is_pf)
        if r < 0:
            return r
        self.record_fetch(src, 1)
        self.in_transfer[p] = False
        self.wait_set.discard(p)
        return r

    def alloc_page(self, p, is_pf):
        if not self.gpu_full():
            self.take_frame(p)
            if self.loc[p] == IN_CPU:
                self.free_host_frame()
                if self.forced_evc_dest == IN_SSD:
                    self.forced_evc_dest = NOT_KNOWN
        else:
            is_pf = is_pf or self.tensor_of[p] in self.required_set
            v, dest = self.select_victim(is_pf)
            if v is None:
                return -1
            assert not self.in_transfer[v]
            if dest != NOT_PRESENT and self.forced_evc_dest != NOT_KNOWN:
                dest = self.forced_evc_dest
            self.evict(v, dest, True)
            if self.loc[p] == IN_CPU:
                self.free_host_frame()
                if self.forced_evc_dest == IN_SSD:
                    self.forced_evc_dest = NOT_KNOWN
            self.take_frame(p)
        self.loc[p] = IN_GPU
        self.in_transfer[p] = False
        self.wait_set.discard(p)
        return 1

    def evict(self, v, dest, is_pf):
        t = self.tensor_of[v]
        if self.is_alive(t, self.current_kernel) and dest == NOT_PRESENT and not is_pf:
            raise RuntimeError("evicting a living page to NOT_PRESENT outside a fault")
        assert self.loc[v] == IN_GPU
        if dest == IN_CPU:
            assert self.host_used < self.c.host_line, "host memory overflow"
            self.host_used += 1
            self.host_peak = max(self.host_peak, self.host_used)
            self.counters["host_in"] += 1
            self.counters["evict_cpu"] += 1
            self.loc[v] = IN_CPU
            n = 1
        elif dest == IN_SSD:
            self.counters["evict_ssd"] += 1
            self.loc[v] = IN_SSD
            n = 1
        else:
            self.counters["drop"] += 1
            self.loc[v] = NOT_PRESENT
            n = 0
        self.record_evict(dest, n)
        if not is_pf:
            self.counters["preevict"] += 1
        if t in self.required_set:  # fault it straight back
            self.counters["refault"] += 1
            name = {IN_CPU: "pf_CPU", IN_SSD: "pf_SSD", NOT_PRESENT: "pf_alloc"}[dest]
            self.q[name].append(v)
            self.in_transfer[v] = True
            self.wait_set.add(v)
        else:
            self.in_transfer[v] = False
        self.release_frame(v)
        return n

    def record_fetch(self, src, n):
        c = self.c
        assert self.forced_fetch_src in (NOT_KNOWN, src)
        if src == IN_SSD:
            self.counters["fetch_ssd"] += n
            self.n_in_ssd += n
            if self.n_in_ssd == c.SSD_cap:
                self.forced_fetch_src = IN_CPU
        else:
            self.counters["fetch_cpu"] += n
            self.n_in_cpu += n
            if self.n_in_cpu == c.CPU_cap:
                self.forced_fetch_src = IN_SSD
        self.n_alloc += n
        self.n_in += n

    def record_evict(self, dest, n):
        c = self.c
        if n == 0:
            return
        assert self.forced_evc_dest in (NOT_KNOWN, dest)
        if dest == IN_SSD:
            self.n_out_ssd += n
            self.n_out += n
            if self.n_out_ssd == c.SSD_cap:
                self.forced_evc_dest = IN_CPU
        else:
            self.n_out_cpu += n
            self.n_out += n
            if self.n_out_cpu == c.CPU_cap or self.host_full():
                self.forced_evc_dest = IN_SSD

    # --- §8 victim selection ----------------------------------------------------------------
    def select_victim(self, is_pf):
        """(victim page, destination) or (None, None) when DeepUM finds no non-window page."""
        lru = self.lru
        nxt = lru.next
        if not self.deepum:  # §8.1 LRU
            p = lru.cursor
            while p is not None and self.in_transfer[p]:
                p = nxt[p]
            if p is None:  # END: restart from the head
                p = lru.head
                while p is not None and self.in_transfer[p]:
                    p = nxt[p]
                if p is None:
                    raise RuntimeError("GPU full of in-transfer pages: no LRU victim")
            lru.cursor = nxt[p]
            return p, IN_CPU
        # §8.2 DEEPUM
        if not is_pf:
            p = lru.cursor
            while p is not None and self.tensor_of[p] in self.window_set:
                p = nxt[p]
            if p is None:
                if lru.cursor is None:
                    self.counters["sticky_end"] += 1
                lru.cursor = None  # sticky END until next kernel (O-15)
                self.counters["nonpf_stall"] += 1
                return None, None
            lru.cursor = nxt[p]
        else:
            p = lru.head
            while p is not None and self.in_transfer[p]:
                p = nxt[p]
            if p is None:
                raise RuntimeError("GPU full of in-transfer pages: no DeepUM PF victim")
            if p == lru.cursor:
                lru.cursor = nxt[p]
        dest = IN_CPU if self.is_alive(self.tensor_of[p], self.current_kernel) else NOT_PRESENT
        return p, dest

    # =========================================================================================
    # §5 / §17.3 event loop

    def run(self):
        self.kb = (0, self.next_seq(), 0)
        self.tick_time, self.tick_seq = 0, self.next_seq()
        while True:
            kb = self.kb
            if kb is not None and (kb[0], kb[1]) < (self.tick_time, self.tick_seq):
                time, _, k = kb
                if k != self.current_kernel:  # shouldExecute(): a new kernel
                    if k == 0:
                        self.current_iteration += 1
                    self.current_kernel = k
                if self.current_iteration >= self.num_iteration:
                    break  # event and pending tick discarded
                self.kb = None
                self.kernel_begin(k, time)
            else:
                if self.max_ticks is not None and self.counters["ticks"] >= self.max_ticks:
                    raise RuntimeError(f"tick limit {self.max_ticks} reached")
                self.batcher(self.tick_time)
                self.tick_time += self.c.ii
                self.tick_seq = self.next_seq()


# ---------------------------------------------------------------------------------------------
# §14.5 / §14.6 analysis


def final_stats(kernels, pcie, boundaries, exec_cycles, pf_cycles) -> tuple[dict, list]:
    """The analysis pass: (final dict keyed like sim_result.final, per-kernel breakdown list).

    kernels: (iter, kid, start, end, in_transfer, cpu_pf, ssd_pf, unalloc_pf, host, gpu) in
    completion order; pcie: (iter, t, alloc, in, in_ssd, in_cpu, out, out_ssd, out_cpu);
    boundaries: (iter, t, 1|0). Breakdown rows: (iter, kid, total, compute, overlap, stall)."""
    final = {}
    d = np.float64
    # kernel_stat
    iters = sorted({r[0] for r in kernels})
    per = {
        n: dict(in_transfer=0, cpu_pf=0, ssd_pf=0, unalloc_pf=0, exe_time=0, ideal_exe_time=0, pf_exe_time=0)
        for n in iters
    }
    prev_end = 0
    for r in kernels:
        s = per[r[0]]
        s["in_transfer"] += r[4]
        s["cpu_pf"] += r[5]
        s["ssd_pf"] += r[6]
        s["unalloc_pf"] += r[7]
        s["exe_time"] += r[3] - prev_end
        s["ideal_exe_time"] += int(exec_cycles[r[1]])
        s["pf_exe_time"] += int(pf_cycles[r[1]])
        prev_end = r[3]
    tot = {
        key: sum(per[n][key] for n in iters)
        for key in (
            "in_transfer",
            "cpu_pf",
            "ssd_pf",
            "unalloc_pf",
            "exe_time",
            "ideal_exe_time",
            "pf_exe_time",
        )
    }
    with np.errstate(all="ignore"):
        for name, s in [(f"iter{n}", per[n]) for n in iters] + [("total", tot)]:
            for key in (
                "in_transfer",
                "cpu_pf",
                "ssd_pf",
                "unalloc_pf",
                "exe_time",
                "ideal_exe_time",
                "pf_exe_time",
            ):
                final[f"kernel_stat.{name}.{key}"] = s[key]
            final[f"kernel_stat.{name}.slowdown"] = float(d(s["exe_time"]) / d(s["ideal_exe_time"]))
            final[f"kernel_stat.{name}.speedup"] = float(d(s["pf_exe_time"]) / d(s["exe_time"]))
    # pcie_stat: only iterations with records (O-21); total always
    keys = (
        "alloc",
        "incoming_pg",
        "incoming_pg_ssd",
        "incoming_pg_cpu",
        "outgoing_pg",
        "outgoing_pg_ssd",
        "outgoing_pg_cpu",
    )
    piters = sorted({r[0] for r in pcie})
    pper = {n: dict.fromkeys(keys, 0) for n in piters}
    for r in pcie:
        for key, v in zip(keys, r[2:]):
            pper[r[0]][key] += v
    ptot = {key: sum(pper[n][key] for n in piters) for key in keys}
    for name, s in [(f"iter{n}", pper[n]) for n in piters] + [("total", ptot)]:
        for key in (
            "alloc",
            "incoming_pg",
            "incoming_pg_cpu",
            "incoming_pg_ssd",
            "outgoing_pg",
            "outgoing_pg_cpu",
            "outgoing_pg_ssd",
        ):
            final[f"pcie_stat.{name}.{key}"] = s[key]
    # §14.6 breakdown. Transfer intervals [begin, end]; one left open closes at the last end.
    intervals = []
    begin = None
    for _, t, flag in boundaries:
        if flag == 1:
            assert begin is None
            begin = t
        else:
            assert begin is not None
            intervals.append((begin, t))
            begin = None
    last_end = kernels[-1][3] if kernels else 0
    if begin is not None:
        intervals.append((begin, last_end))
    ideal_of = {}
    for r in kernels:  # ideal = exec from the iteration-0 line
        if r[0] == 0:
            ideal_of[r[1]] = int(exec_cycles[r[1]])
    rows = []
    sums = {}
    prev_end = 0
    for r in kernels:
        n, kid, end = r[0], r[1], r[3]
        tx = sum(max(0, min(end, e) - max(prev_end, b)) for b, e in intervals)
        ideal = ideal_of.get(kid, int(exec_cycles[kid]))
        total = end - prev_end
        compute = total - tx
        overlap = tx + ideal - total
        stall = total - ideal
        if overlap < 0:  # O-37
            stall -= overlap
            overlap = 0
        rows.append((n, kid, total, compute, overlap, stall))
        if n < 2:  # O-38: two iterations only
            acc = sums.setdefault(n, [0, 0, 0])
            acc[0] += stall
            acc[1] += overlap
            acc[2] += compute
        prev_end = end
    for n in sorted(sums):
        final[f"total_time_breakdown_stall.iter{n}"] = sums[n][0]
        final[f"total_time_breakdown_overlap.iter{n}"] = sums[n][1]
        final[f"total_time_breakdown_executiuonOnly.iter{n}"] = sums[n][2]  # (sic)
    return final, rows


# ---------------------------------------------------------------------------------------------
# Public entry point


def run_twin(workload, cfg, hints=None, max_ticks=None, order=None) -> dict:
    """Simulate `workload` under `cfg` (attributes named like G10's config keys).

    hints: (issued_time, tensor_id, from_loc, to_loc) tuples sorted by issued_time; used only
    when cfg.use_prefetch. With migration_policy DEEPUM and hints None, deepum_hints() is used.
    max_ticks: optional safety limit on batcher ticks (RuntimeError when reached).
    order: optional per-kernel (inputs, outputs-not-inputs) lists in another processing order
    (e.g. the C++ hash-set order printed in statistics/kernels.config); default ascending ids.

    Returns dict with "kernels", "pcie", "boundaries" (lists of tuples, §14.1-§14.3), "final"
    (§14.5 keys of sim_result.final incl. the §14.6 breakdown), "kernel_breakdown" (per kernel
    (iter, kid, total, compute, overlap, stall)), "constants" (§3) and "state" (final page
    state, occupancy, queues, LRU order and conservation counters)."""
    sim = _Sim(workload, cfg, hints, max_ticks, order)
    sim.run()
    final, rows = final_stats(
        sim.kernel_rec, sim.pcie_rec, sim.boundary_rec, workload.exec_cycles, workload.pf_cycles
    )
    state = dict(
        loc=np.array(sim.loc, dtype=np.int8),
        in_transfer=np.array(sim.in_transfer, dtype=bool),
        has_frame=np.array(sim.has_frame, dtype=bool),
        gpu_used=sim.gpu_used,
        host_used=sim.host_used,
        host_peak=sim.host_peak,
        lru=list(sim.lru),
        queues={n: list(sim.q[n]) for n in QUEUE_NAMES},
        wait_set=sorted(sim.wait_set),
        waiting=sim.resched is not None,
        current_kernel=sim.current_kernel,
        current_iteration=sim.current_iteration,
        hint_cursor=sim.hint_cursor,
        counters=dict(sim.counters),
    )
    return dict(
        kernels=sim.kernel_rec,
        pcie=sim.pcie_rec,
        boundaries=sim.boundary_rec,
        final=final,
        kernel_breakdown=rows,
        constants=vars(sim.c).copy(),
        state=state,
    )


def check_invariants(res, workload, cfg) -> None:
    """Assert conservation and capacity invariants (aesthetics #9) on a run_twin-style result."""
    c = derived_constants(cfg)
    st = res["state"]
    loc, in_tr, has_frame = st["loc"], st["in_transfer"], st["has_frame"]
    V = workload.num_pages
    assert len(loc) == V and set(np.unique(loc)) <= {NOT_PRESENT, IN_SSD, IN_CPU, IN_GPU}
    counts = np.bincount(loc, minlength=4)
    assert counts.sum() == V  # every page in one place
    # GPU: frames <-> LRU list <-> counter, within capacity
    assert 0 <= st["gpu_used"] <= c.G
    assert st["gpu_used"] == int(has_frame.sum()) == len(st["lru"]) == len(set(st["lru"]))
    assert all(loc[p] == IN_GPU for p in st["lru"])
    assert bool(np.all(has_frame <= (loc == IN_GPU)))
    if cfg.is_UVM:
        assert int(counts[IN_GPU]) == st["gpu_used"]
    # host: counter == IN_CPU pages, within the memory line
    assert 0 <= st["host_used"] <= c.host_line
    assert st["host_used"] == int(counts[IN_CPU])
    # in_transfer <=> queued, each queued page once, in a queue matching its location
    queued = [p for n in QUEUE_NAMES for p in st["queues"][n]]
    assert len(queued) == len(set(queued))
    assert set(queued) == set(np.nonzero(in_tr)[0].tolist())
    want = dict(
        pf_CPU=IN_CPU,
        prefetch_CPU=IN_CPU,
        pf_SSD=IN_SSD,
        prefetch_SSD=IN_SSD,
        pf_alloc=NOT_PRESENT,
        prealloc=NOT_PRESENT,
        preevict_SSD=IN_GPU,
        preevict_CPU=IN_GPU,
    )
    for n, ps in st["queues"].items():
        assert all(loc[p] == want[n] for p in ps), n
    assert set(st["wait_set"]) <= set(queued)
    # traffic: per-tick budgets and pages moved == pages recorded
    cnt = st["counters"]
    for _, _, alloc, i, i_s, i_c, o, o_s, o_c in res["pcie"]:
        assert i == i_s + i_c and o == o_s + o_c and (i > 0 or o > 0)
        assert i <= c.GPU_cap and i_s <= c.SSD_cap and i_c <= c.CPU_cap
        assert o <= c.GPU_cap and o_s <= c.SSD_cap
        assert i <= alloc <= c.alloc_cap + c.GPU_cap
    assert sum(r[3] for r in res["pcie"]) == cnt["fetch_ssd"] + cnt["fetch_cpu"]
    assert sum(r[4] for r in res["pcie"]) == cnt["fetch_ssd"]
    assert sum(r[6] for r in res["pcie"]) == cnt["evict_ssd"] + cnt["evict_cpu"]
    assert sum(r[7] for r in res["pcie"]) == cnt["evict_ssd"]
    assert cnt["gpu_in"] == cnt["fetch_ssd"] + cnt["fetch_cpu"] + cnt["alloc_new"]
    assert cnt["gpu_out"] == cnt["evict_ssd"] + cnt["evict_cpu"] + cnt["drop"] + cnt["dealloc_gpu"]
    assert cnt["gpu_in"] - cnt["gpu_out"] == st["gpu_used"]
    assert cnt["host_in"] - cnt["host_out"] == st["host_used"]
    assert cnt["host_out"] == cnt["fetch_cpu"] + cnt["dealloc_cpu"]
    # kernels: a contiguous timeline, each kernel at least its ideal time, K per iteration
    K = workload.num_kernels
    prev = 0
    for i, r in enumerate(res["kernels"]):
        it, kid, start, end = r[:4]
        assert (it, kid) == (i // K, i % K)
        assert start == prev and end >= start + int(workload.exec_cycles[kid])
        assert r[8] <= c.host_line and r[9] <= c.G
        prev = end
    assert len(res["kernels"]) == K * int(cfg.num_iteration)
    # boundaries alternate begin/end at tick times
    for j, (_, t, flag) in enumerate(res["boundaries"]):
        assert flag == (1 if j % 2 == 0 else 0) and t % c.ii == 0
