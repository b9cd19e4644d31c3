"""Numba kernels of the G10-compatible page-level UVM engine (simulator spec §4–§9, §13).

Everything here takes plain arrays and scalars. The Python wrapper in `page.py` validates
inputs, packs the arrays and drives `run_engine`, which is resumable: it returns
`ST_PAUSE` when an output buffer needs draining or a queue needs room, with all of its
state in the arrays it was given, and continues where it stopped when called again.

State layout (few packed arrays, so that the hot functions take few arguments):

* `pstate[V] uint8`, one byte per virtual page: bits 0-1 location (NOT_PRESENT, IN_SSD,
  IN_CPU, IN_GPU), bit 2 in_transfer, bit 3 member of the wait set, bits 4-7 an LRU
  generation used to recognise stale LRU entries. It is read as int64: shifts of a uint8
  are typed unsigned, and Numba compares unsigned with signed integers in floating point.
  The memory of a freed tensor's states goes back to the operating system when they are all
  zero (`_release_free`, Linux), so the states take memory for the live tensors only.
* `tt[T, TT_COLS] int64`, one row per tensor: first page, pages, global, birth, death, raw
  bytes, required by the current kernel, in the DeepUM window, and `TT_RES`, the number of
  its pages that are IN_GPU and not in transfer (kept exact at every page-state change; a
  kernel's residency check compares it with the page count).
* `srt[2, n+1] int64`: first pages of the non-empty tensors in ascending order (with the
  page count as a sentinel) and the tensor ids, for page -> tensor lookups; the positions
  of the last lookups are cached in S.
* The "LRU" list (O-6: FIFO by GPU arrival) is an append-only array `lru` of entries
  `page << 4 | generation` (int32 while the page count is below 2**27, else int64) with
  tombstones (-1), compacted in place when full. An entry is live iff its page is IN_GPU
  and its recorded generation equals the page's. A page removed where its slot is unknown
  (pre-evict, pre-deallocation) bumps its generation; on wrap-around the list is compacted
  first so that no stale entry can be mistaken for a live one. For the LRU policies, and
  for DeepUM without planned pre-evictions, the bulk engine keeps the list as extents in
  `lru` instead (P_XLRU, "The LRU list as extents" below): no stale entries, generations or
  compactions.
* Eight FIFO queues of page runs `(first page, count)` in ring buffers `qb[NQ, cap, 2]`
  (capacity a power of two), heads and tails in S.
* Scalars, the integer parameters (`P_*`) and the per-tick counters (`C_*`) all live in
  `S int64[NS]` (indices below); the float parameters in `F float64[3]`.
"""

from __future__ import annotations

import ctypes
import sys
from collections import namedtuple

import numpy as np
from numba import types as _nbtypes

from g10fast.jit import NO_JIT, jit, kernel_nonrt, kernel_nonrt_internal
# ---- page locations (G10's PageLocation enum, g10fast.locations) ----
from g10fast.locations import (  # noqa: F401  (re-exported: pk.IN_GPU and the like)
    IN_CPU, IN_GPU, IN_GPU_LEAST, IN_SSD, NOT_KNOWN, NOT_PRESENT)

# ---- page state pstate[p] (uint8, read as int64) ----
LOC_MASK = 3       # bits 0-1: location (NOT_PRESENT, IN_SSD, IN_CPU, IN_GPU)
F_TRANSFER = 4     # bit 2: in transfer
F_WAIT = 8         # bit 3: member of the wait set
GEN_SHIFT = 4      # bits 4-7: LRU generation (stale LRU entries carry another)
GEN_MASK = 15
RES_MASK = LOC_MASK | F_TRANSFER     # (st & RES_MASK) == IN_GPU: resident, not in transfer

# ---- queues of page runs qb[q, cap, 2] (first page, count) ----
Q_PF_CPU = 0       # demand faults on pages in CPU memory
Q_PF_SSD = 1       # demand faults on pages in SSD
Q_PF_ALLOC = 2     # demand allocations (first touch)
Q_PREFETCH_SSD = 3  # planned prefetches from SSD
Q_PREFETCH_CPU = 4  # planned prefetches from CPU
Q_PREALLOC = 5     # planned allocations
Q_PREEVICT_SSD = 6  # planned evictions to SSD
Q_PREEVICT_CPU = 7  # planned evictions to CPU
NQ = 8

# ---- tensor table columns tt[T, ...] (int64) ----
TT_START = 0       # first virtual page of the tensor
TT_NP = 1          # its size, pages
TT_GLOBAL = 2      # 1: global (alive for the whole run), else 0
TT_BIRTH = 3       # kernel that creates it (index)
TT_DEATH = 4       # first kernel at which it is dead (index; -1: alive in its birth kernel only)
TT_RAW = 5         # its size, bytes (before page alignment)
TT_REQ = 6         # 1: required by the current kernel
TT_WIN = 7         # 1: in the DeepUM window
TT_RES = 8         # pages IN_GPU and not in transfer (kept exact; compared with TT_NP)
TT_XH = 9          # extent LRU (P_XLRU): the first of its extents in its chain, -1 none
TT_COLS = 10

# ---- kernel table columns kt[K + 1, ...] (int64) ----
KT_IN = 0          # kernel k's tensors in kidx: inputs kidx[kt[k, 0]:kt[k, 1]], then the
KT_OO = 1          # output-only ones kidx[kt[k, 1]:kt[k + 1, 0]] (positions in kidx)
KT_EXEC = 2        # execution time without faults, cycles
KT_INPF = 3        # execution time with its inputs faulting (profiled), cycles
KT_PF = 4          # execution time with all its tensors faulting (profiled), cycles
KT_COLS = 5

# ---- float parameters F[...] (float64) ----
F_GPU_BPC = 0      # GPU PCIe bandwidth, bytes per cycle
F_SSD_BPC = 1      # SSD PCIe bandwidth, bytes per cycle
F_FREQ = 2         # GPU frequency, Hz (f as double)
NP_FLOAT = 3

# ---- scalar state S[...] (int64); times in GPU cycles, memory in pages ----
S_KB_PENDING = 0   # 1: a kernel event (a kernel begins, or resumes) is pending
S_KB_TIME = 1      # its time, cycles
S_KB_SEQ = 2       # its sequence number (orders events of equal time)
S_KB_KERNEL = 3    # its kernel (index)
S_KB_NEWITER = 4   # 1: the pending kernel event starts a new iteration
S_TICK_TIME = 5    # time of the next batcher tick, cycles
S_TICK_SEQ = 6     # its sequence number
S_SEQ = 7          # next sequence number to hand out
S_CUR_KERNEL = 8   # current kernel (index)
S_CUR_ITER = 9     # current iteration (0-based)
S_RESCHED = 10     # 1: the current kernel waits for its faults (rescheduled, §9.6)
S_R_FIRST = 11     # time of its first (faulting) start, cycles
S_R_PFTIME = 12    # its stall-model run time from that first start, cycles (§7)
S_R_STARTED = 13   # 1: it has resumed (its resume event is queued)
S_R_INTR = 14      # its fault counts over its starts: interruptions,
S_R_CPU = 15       # pages faulted from CPU,
S_R_SSD = 16       # pages faulted from SSD,
S_R_NP = 17        # pages allocated on first touch (not present)
S_GPU_USED = 18    # GPU frames in use, pages
S_HOST_USED = 19   # host memory in use, pages
S_WAIT = 20        # size of the wait set (pages with F_WAIT), pages
S_XFER = 21        # 1: a transfer period is open (data_transferring)
S_HINT = 22        # hint cursor (row of ht applied next)
S_LRU_HEAD = 23    # LRU list head, position in lru (monotonic, taken modulo P_LCAP)
S_LRU_TAIL = 24    # LRU list tail (one past the last entry), position
S_LRU_CUR = 25     # LRU cursor ("suggested LRU base"), position; == tail means END
S_NSTAT = 26       # kernel statistics rows written to kstat
S_NBND = 27        # transfer boundary rows written to bnd
S_NEV = 28         # event rows written to ev
S_DONE = 29        # 1: the simulation has ended
S_ERROR = 30       # error code (E_*), E_NONE while all is well
S_ERR_A = 31       # the error's detail: the page (host overflow) or kernel (refault)
S_ERR_B = 32       # (unused, reserved for a second detail)
S_IN_OPEN = 33     # index in ev of the last incoming event (run merging), -1 none
S_OUT_OPEN = 34    # index in ev of the last outgoing event (run merging), -1 none
S_LIVE_WARN = 35   # "PF EVICTING LIVING PAGE" warnings, count
S_DEEPUM_END = 36  # 1: DeepUM's cursor is stuck at END (O-15)
S_AMP_RAW = 37     # bytes of the faulted tensors, raw (fault amplification numerator)
S_AMP_ALIGNED = 38  # bytes of the faulted tensors, page-aligned
S_TC_A = 39        # page -> tensor lookup caches (positions in srt): allocated pages,
S_TC_B = 40        # victims,
S_TC_C = 41        # DeepUM window tests
S_REQ_K = 42       # kernel whose required set is marked in tt[:, TT_REQ], -1 none
S_WIN_K = 43       # first kernel of the DeepUM window marked in tt[:, TT_WIN], -1 none
S_EV_PAUSE = 44    # pause when S_NEV reaches this (rows)
S_STAT_PAUSE = 45  # pause when S_NSTAT reaches this (rows)
S_LRU_STALE = 46   # pages removed from the LRU list with their slot unknown since the last
                   # compaction (0: every entry that is not a tombstone is live)
S_LRU_SCAN = 47    # entries before this position are ineligible victims for good (reset at
                   # compaction)
S_QH = 48          # queue heads S[S_QH + q], q < NQ (monotonic run counters)
S_QT = 56          # queue tails S[S_QT + q] (monotonic run counters)
# integer parameters (set once by page.py)
P_G = 64           # GPU memory, frames (pages)
P_HOST = 65        # host memory line, pages
P_II = 66          # batcher tick, cycles
P_GPU_CAP = 67     # pages a tick may move over the GPU link (each way)
P_CPU_CAP = 68     # pages a tick may move over the CPU link (each way)
P_SSD_CAP = 69     # pages a tick may move over the SSD link (each way)
P_ALLOC_CAP = 70   # pages a tick may allocate (tick / malloc time per page)
P_NUM_ITER = 71    # iterations to run
P_USE_PREFETCH = 72  # 1: apply the planner's hints
P_DEEPUM = 73      # 1: migration + eviction policy DEEPUM
P_DEGREE = 74      # prefetch_degree (DeepUM window, kernels)
P_IS_UVM = 75      # 1: UVM (pages move), 0: ideal mode
P_TRACE = 76       # 1: write events to ev
P_F_HZ = 77        # uint64 GPU frequency in Hz (integer, for O-1)
P_LSYS = 78        # int(system_latency_us), microseconds
P_LSSD = 79        # int(SSD_latency_us), microseconds
# per-tick counters (of the last busy tick; pages, or a location)
C_IN = 80          # pages fetched into the GPU
C_IN_SSD = 81      # of which from SSD
C_IN_CPU = 82      # of which from CPU
C_OUT = 83         # pages evicted from the GPU (to SSD or CPU; drops not counted)
C_OUT_SSD = 84     # of which to SSD
C_OUT_CPU = 85     # of which to CPU
C_ALLOC = 86       # pages given a GPU frame (fetched or allocated)
C_FFS = 87         # forced_fetch_src: a location, NOT_KNOWN when not forced
C_FED = 88         # forced_evc_dest: a location, NOT_KNOWN when not forced
P_LCAP = 89        # capacity of the LRU ring (a power of two); lru[P_LCAP:] holds one
                   # word per page bucket: the mask of generations its stale entries carry
# fault-scan counts of a kernel start (§6.3), S[S_CNT + i]: 0 interruptions; 1-3 input pages
# from CPU, SSD, not present; 4-6 output pages from CPU, SSD, not present; 7-8 input and
# output pages in all
S_CNT = 90
S_HOST_PEAK = 99   # the most host pages ever in use (a run at a host line above it is the
                   # same run: every comparison with the line comes out the same)
P_BULK = 100       # 1: the bulk paths (whole-tensor hints and pre-deallocations settled on
                   # uniform page ranges, untraced; same results, see docs/page-engine-bulk.md)
S_X_HEAD = 101     # extent LRU (P_XLRU): first extent of the list (the least recent), -1
S_X_TAIL = 102     # last extent (the most recent), -1
S_X_FREE = 103     # first freed extent record, -1
S_X_NFREE = 104    # free extent records (freed ones and those never used)
P_XLRU = 105       # 1: the LRU list is kept as extents in `lru` (LRU policies, bulk engine)
P_XMARGIN = 106    # free extent records a busy tick may need (pause and grow below it)
# a repeated busy tick replayed (P_REPLAY; see "A busy tick replayed" below): the template,
# the last busy tick that ran stage by stage and qualified
S_RP_MASK = 107    # queues holding pages at its start (bit q), -1: no template
S_RP_HOST = 108    # host use at its start
S_RP_GPU = 109     # GPU use at its start
S_RP_SEQ = 110     # S_SEQ at its start (an in-place continuation moves it: no template)
S_RP_GMODE = 111   # how the GPU use may start a replayed tick: any (4: no queue in the mask
                   # gives frames); bit 0, at S_RP_GPU (where the template began and ended);
                   # bit 1, below the frames by more than the pages the template gave frames
S_RP_C = 112       # its counters at its end (9 slots: c_in .. c_fed, as `_fresh_counters`)
S_RP_N = 121       # pages it took from queue q (8 slots)
S_RP_P0 = 129      # first page of queue q's head run at its start (8 slots)
S_RP_QH = 137      # head slot of queue q at its start (8 slots)
S_RP_QT = 145      # tail slot of queue q at its start (8 slots)
S_RP_CN = 153      # pages at the head of that run at its first page's place (8 slots, bounded)
S_RP_T = 161       # per queue, the tensor of its last replayed pages (8 slots),
S_RP_TLO = 169     # its first page,
S_RP_THI = 177     # its end page
P_REPLAY = 185     # 1: replay repeated busy ticks (bulk engine, extent LRU, untraced)
S_RP_COUNT = 186   # busy ticks replayed (a statistic)
S_RP_HMODE = 187   # how the host use may start a replayed tick: bit 0, at S_RP_HOST (where
                   # the template began and ended); bit 1, below the line by more than the
                   # pages the template evicted to the host
S_RP_HNET = 188    # its change of the host use
S_RP_GNET = 189    # its change of the GPU use
S_RP_PROG = 190    # its program (the destinations of its evicted pages): 0 not recorded yet,
                   # 1 recorded, -1 not recordable (more than two runs in a stage)
S_RP_HEXC = 191    # the most the host use rose above its start during the tick
S_RP_PD = 192      # per queue q, 4 slots at S_RP_PD + 4 q: the destination and count of the
                   # first run of its stage's evicted pages (victims or pre-evicted pages),
                   # then of the second run
S_RP_LOC = 224     # the place of queue q's pages in the template (8 slots)
P_RELEASE = 232    # the operating system's page size, bytes, when the page states of freed
                   # tensors may be given back to it (`_release_free`), else 0
S_RELEASED = 233   # bytes of page states given back (a statistic)
S_X_CUR = 234      # DeepUM on extents: the record of the cursor's page (a hint: checked, and
                   # looked up again when stale); the cursor, S_LRU_CUR, is then a page or -1
S_X_BUMP = 235     # the first extent record never used (those from it on are free, unlinked)
NS = 236
STALE_BUCKETS = 1 << 16

# run statuses
ST_DONE = 0
ST_PAUSE = 1
ST_ERROR = 2

# error codes (S[S_ERROR])
E_NONE = 0
E_QUEUE_OVERFLOW = 1        # a page queue is full
E_NO_VICTIM = 2             # the GPU is full and no page can be evicted
E_HOST_OVERFLOW = 3         # an eviction to CPU finds the host memory full (page: S_ERR_A)
E_DEAD_LIVE_EVICT = 4       # a planned eviction drops a live page
E_REFAULT_AFTER_RESUME = 5  # a resumed kernel faults again (O-14; kernel: S_ERR_A)
E_BUFFER_OVERFLOW = 6       # the event buffer is full
E_EXTENTS = 7               # the extent LRU ran out of records (an engine defect)
E_REPLAY = 8                # a replayed busy tick ended unlike its template (an engine defect)

# event kinds (g10fast.trace); event rows ev[n, EV_COLS] hold time (cycles), kind,
# iteration, kernel, tensor, first page, page count, src, dst, value (trace.COL_*)
EV_KERNEL = 0
EV_FAULT = 1
EV_FETCH = 2
EV_ALLOC = 3
EV_EVICT = 4
EV_HINT = 5
EV_DEALLOC = 6
EV_TRANSFER = 7
EV_COLS = 10

# kernel statistics columns kstat[n, ...] (int64), one row per completed kernel
KS_ITER = 0        # iteration
KS_KERNEL = 1      # kernel (index)
KS_START = 2       # start (its first start, when it faulted), cycles
KS_END = 3         # end, cycles
KS_INTR = 4        # page-fault interruptions (pages found in transfer), count
KS_CPU = 5         # pages faulted from CPU
KS_SSD = 6         # pages faulted from SSD
KS_NP = 7          # pages allocated on first touch
KS_HOST = 8        # host memory in use at completion, pages
KS_GPU = 9         # GPU frames in use at completion, pages
KS_COLS = 10

# per-iteration traffic columns pcie[it, ...] (int64), sums of the busy ticks' counters
PC_ALLOC = 0       # pages given a GPU frame
PC_IN = 1          # pages fetched into the GPU
PC_IN_SSD = 2      # of which from SSD
PC_IN_CPU = 3      # of which from CPU
PC_OUT = 4         # pages evicted from the GPU (to SSD or CPU)
PC_OUT_SSD = 5     # of which to SSD
PC_OUT_CPU = 6     # of which to CPU
PC_COLS = 7
# transfer boundaries bnd[n, 3] (int64): iteration, time (cycles), 1 begin / 0 end

# batcher stages (§9.2), in order
_G_PE_SSD = 0      # pre-evict to SSD
_G_PE_CPU = 1      # pre-evict to CPU
_G_PF_SSD = 2      # demand fetch from SSD
_G_PF_CPU = 3      # demand fetch from CPU
_G_PF_ALLOC = 4    # demand allocation
_G_PRE_SSD = 5     # prefetch from SSD
_G_PRE_CPU = 6     # prefetch from CPU
_G_PREALLOC = 7    # pre-allocation
_G_RS_SSD = 8      # DeepUM lock-up rescue: prefetch queues drained as faults
_G_RS_CPU = 9
_G_RS_ALLOC = 10
_G_END = 11
# the queue each allocating stage takes its pages from (pre-eviction stages: Q_PREEVICT_*)
_STAGE_QUEUE = (Q_PREEVICT_SSD, Q_PREEVICT_CPU, Q_PF_SSD, Q_PF_CPU, Q_PF_ALLOC, Q_PREFETCH_SSD,
                Q_PREFETCH_CPU, Q_PREALLOC, Q_PREFETCH_SSD, Q_PREFETCH_CPU, Q_PREALLOC)


# Every function here is compiled without Numba's reference counting (`_nrt=False`, see
# g10fast.jit): none allocates, and the atomic increments and decrements that NRT
# wraps around each array argument of each call otherwise cost more than the page moves
# themselves. All but `run_engine` are link-only (`_kernel`, g10fast.jit's
# `kernel_nonrt_internal`): their IR goes into their callers' and LLVM optimises and compiles
# the whole engine once, in `run_engine` (`_kernel_py`, the kernel Python calls); a test that
# calls one of them from Python gets a compiled twin of it.
_kernel = kernel_nonrt_internal
_kernel_py = kernel_nonrt
# Array indices that are never negative are cast to unsigned where they are used (`_u`): Numba
# then leaves out the negative-index wrap-around (a sign test, an add of the length, and in
# these register-starved loops a reload of the length from the stack) on every access.
_u = np.uint64
# pages checked at once (without a branch) where `_batch_move` extends a run of victims
_RUN_CHUNK = 16
# The stall model divides by bandwidths that can be 0 (O-11): IEEE semantics, not Python's
# ZeroDivisionError.
_kernel_ieee = jit(_nrt=False, error_model="numpy", internal=True)
# The stages of a busy tick that run once per stage or tick (`_stage_admission`, the fetch
# fast path `_fetch_fast` and its helpers, `_tick_end`, ...) are plain compiled calls, like the
# small helpers above them: LLVM inlines the small ones, and `_fetch_fast` runs its own loop
# with its state in registers. The general path, taken once per page (`_general_page`,
# `_select_victim`, `_evict_page`, `_alloc_page`), is always inlined into `_busy_ticks` by
# LLVM (`forceinline`), so that the tick's state stays in registers across it (compiled as
# calls, traced runs, a call per page, were 20% slower). Numba's IR inlining of it (until
# 6bdc9bd) gave the same speed but cost a cold start about 4 s more (the IR inliner copies the
# callee's scope block by block; benchmarks/results/page-engine-bulk-journal.md, "Ninth
# step"); Numba's IR inlining of every stage gave bit-identical results but a slower busy
# tick and a first compile about 10 s longer (benchmarks/results/engine_split.jsonl).
_kernel_stage = kernel_nonrt_internal
_kernel_page = jit(_nrt=False, internal=True, forceinline=True)


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------

@_kernel
def tensor_of(srt, S, c, p):
    """Tensor owning page p: the last non-empty tensor whose first page is <= p.

    srt[0] holds the first pages (plus the page count as a sentinel), srt[1] the tensor
    ids; S[c] caches the position of the last lookup through cache slot c."""
    i = S[c]
    if srt[0, _u(i)] <= p and p < srt[0, _u(i + 1)]:
        return srt[1, _u(i)]
    lo = 0
    hi = srt.shape[1] - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if srt[0, _u(mid)] <= p:
            lo = mid
        else:
            hi = mid
    S[c] = lo
    return srt[1, _u(lo)]


@_kernel
def _q_push(qb, S, q, p, n):
    """Append pages p..p+n-1 to queue q, merging with the last run when contiguous."""
    cap = qb.shape[1]
    m = cap - 1
    h = S[S_QH + q]
    t = S[S_QT + q]
    if t > h:
        last = (t - 1) & m
        if qb[q, _u(last), 0] + qb[q, _u(last), 1] == p:
            qb[q, _u(last), 1] += n
            return
    if t - h >= cap:
        S[S_ERROR] = E_QUEUE_OVERFLOW
        return
    slot = t & m
    qb[q, _u(slot), 0] = p
    qb[q, _u(slot), 1] = n
    S[S_QT + q] = t + 1


@_kernel
def _q_pop(qb, S, q):
    slot = S[S_QH + q] & (qb.shape[1] - 1)
    if qb[q, _u(slot), 1] > 1:
        qb[q, _u(slot), 0] += 1
        qb[q, _u(slot), 1] -= 1
    else:
        S[S_QH + q] += 1


@_kernel
def _emit(ev, S, t, kind, it, k, tensor, page, count, src, dst, value):
    n = S[S_NEV]
    if n >= ev.shape[0]:
        S[S_ERROR] = E_BUFFER_OVERFLOW
        return -1
    ev[n, 0] = t
    ev[n, 1] = kind
    ev[n, 2] = it
    ev[n, 3] = k
    ev[n, 4] = tensor
    ev[n, 5] = page
    ev[n, 6] = count
    ev[n, 7] = src
    ev[n, 8] = dst
    ev[n, 9] = value
    S[S_NEV] = n + 1
    return n


@_kernel
def _emit_run(ev, S, open_idx, t, kind, it, k, tensor, page, src, dst, value):
    """Emit one page, extending the open run at ev[S[open_idx]] when it continues it."""
    o = S[open_idx]
    if o >= 0:
        if (ev[o, 0] == t and ev[o, 1] == kind and ev[o, 4] == tensor
                and ev[o, 5] + ev[o, 6] == page and ev[o, 7] == src and ev[o, 8] == dst
                and ev[o, 9] == value):
            ev[o, 6] += 1
            return
    S[open_idx] = _emit(ev, S, t, kind, it, k, tensor, page, 1, src, dst, value)


@_kernel
def _admit(stage, evict_ok, c_in, c_in_ssd, c_in_cpu, c_alloc, GPU_CAP, CPU_CAP, SSD_CAP,
           ALLOC_CAP):
    """Whether an allocating stage (§9.2) may take one more page this tick: prefetches are
    bounded by their link and the GPU link, demand and rescue fetches by the GPU link and the
    allocation budget, allocations by the budget; all need a frame or room to evict to."""
    if stage == _G_PRE_SSD:
        return c_in_ssd < SSD_CAP and c_in < GPU_CAP and evict_ok
    if stage == _G_PRE_CPU:
        return c_in_cpu < CPU_CAP and c_in < GPU_CAP and evict_ok
    if stage == _G_PF_ALLOC or stage == _G_PREALLOC or stage == _G_RS_ALLOC:
        return evict_ok and c_alloc < ALLOC_CAP
    return c_in < GPU_CAP and c_alloc < ALLOC_CAP and evict_ok


@_kernel
def _no_faults_queued(S):
    """Whether the three demand queues (faults from CPU, from SSD, allocations) are empty."""
    return (S[S_QT + Q_PF_CPU] == S[S_QH + Q_PF_CPU]
            and S[S_QT + Q_PF_SSD] == S[S_QH + Q_PF_SSD]
            and S[S_QT + Q_PF_ALLOC] == S[S_QH + Q_PF_ALLOC])


@_kernel
def _live(st, e):
    """Whether LRU entry e (>= 0) is live, st being its page's state (int64)."""
    return (st & LOC_MASK) == IN_GPU and (st >> GEN_SHIFT) == (e & GEN_MASK)


@_kernel
def _eligible(st, e):
    """Whether LRU entry e (>= 0) is live and its page not in transfer (a victim)."""
    return (st & RES_MASK) == IN_GPU and (st >> GEN_SHIFT) == (e & GEN_MASK)


@_kernel
def _is_alive(tt, T, k):
    if tt[_u(T), TT_GLOBAL]:
        return True
    d = tt[_u(T), TT_DEATH]
    if d == -1:
        return k == tt[_u(T), TT_BIRTH]
    return tt[_u(T), TT_BIRTH] <= k and k < d


# ----------------------------------------------------------------------------------------
# LRU list (FIFO by arrival, O-6)
# ----------------------------------------------------------------------------------------

@_kernel
def _lru_compact(lru, pstate, S):
    """Drop the entries that are not live, keeping the order; the cursor moves to the first
    live entry at or after it (or the tail). The list is a ring (positions are monotonic,
    taken modulo the power-of-two capacity), so this runs only when it is full of entries
    between head and tail, not each time the tail wraps."""
    lm = S[P_LCAP] - 1
    head = S[S_LRU_HEAD]
    tail = S[S_LRU_TAIL]
    cur = S[S_LRU_CUR]
    n = 0
    new_cur = -1
    check = S[S_LRU_STALE] != 0
    # (S_LRU_STALE == 0: no page left the list with its slot unknown since the last
    # compaction, so every entry that is not a tombstone is live)
    for s in range(head, tail):
        if s == cur:
            new_cur = n
        e = lru[_u(s & lm)]
        if e >= 0:
            if check and not _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e):
                continue
            lru[_u((head + n) & lm)] = e
            n += 1
    if new_cur < 0:
        new_cur = n
    S[S_LRU_TAIL] = head + n
    S[S_LRU_CUR] = head + new_cur
    S[S_LRU_STALE] = 0
    S[S_LRU_SCAN] = head
    if check:
        for i in range(S[P_LCAP], S[P_LCAP] + STALE_BUCKETS):
            lru[_u(i)] = 0


@_kernel
def _lru_live(lru, pstate, S, s):
    e = lru[_u(s & (S[P_LCAP] - 1))]
    if e < 0:
        return False
    return _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e)


@_kernel
def _lru_remove_unknown(lru, pstate, S, p):
    """Remove page p (IN_GPU) from the list where its slot is unknown: bump its generation,
    which leaves its entry stale (it no longer matches the page's generation)."""
    if _cursor_page(lru, pstate, S) == p:
        S[S_LRU_CUR] = S[S_LRU_HEAD]          # removing the cursor's page resets it (§8.1)
    st = np.int64(pstate[_u(p)])
    g, _compacted = _new_generation(lru, pstate, S, p, st >> GEN_SHIFT)
    pstate[_u(p)] = (st & 15) | (g << GEN_SHIFT)


@_kernel
def _cur_norm(lru, lm, pstate, c, tail):
    """The first position at or after c that holds a live entry, else the tail (END).

    DeepUM's cursor is, in the artifact, a `std::list` iterator: on a live page, or END
    (§8). A ring position that only dead entries follow up to the tail is END there, which
    a page appended later stays behind; and removing the first live page after a position
    removes the iterator's page (§8.1: the cursor resets). So under DeepUM the cursor is
    brought onto its live entry (this) before an append (the callers of `_lru_append`,
    `_batch_move`) and before the removal tests (`_cursor_page`). Under the LRU policies it is never observed.
    (Until this, a cursor left after dead entries took a later arrival as its page; no
    output of the equivalence runs, the artifact's models or Figure 11 changed.) Inside
    `_lru_append` this made the LRU policies' runs slower (Inceptionv3-1536 Base UVM by about
    a fifth: the same code, compiled otherwise), so its DeepUM callers call it first."""
    while c < tail:
        e = np.int64(lru[_u(c & lm)])
        if e < 0:
            c -= e
            continue
        if _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e):
            return c
        c += 1
    return tail


@_kernel
def _cursor_page(lru, pstate, S):
    """The page of the cursor's LRU entry if that entry is live, else -1."""
    if S[P_DEEPUM]:
        S[S_LRU_CUR] = _cur_norm(lru, S[P_LCAP] - 1, pstate, S[S_LRU_CUR], S[S_LRU_TAIL])
    cur = S[S_LRU_CUR]
    if cur < S[S_LRU_TAIL] and _lru_live(lru, pstate, S, cur):
        return lru[_u(cur & (S[P_LCAP] - 1))] >> GEN_SHIFT
    return -1


@_kernel
def _new_generation(lru, pstate, S, p, g0):
    """The generation that page p (live, generation g0) takes on leaving the list where its
    slot is unknown, recording its entry as stale; and whether the list was compacted.

    Stale entries are recorded per page bucket since the last compaction, as a 16-bit mask
    of the generations they carry (one word per bucket: a page's bucket is one load, and
    the consecutive pages of a tensor removed one after another touch consecutive words);
    an old entry of p could look live again only if p took a generation that one of its
    stale entries carries. p takes the first generation after its own that no stale entry
    of its bucket carries; only when all are taken is the list compacted first (p still
    live, so that every stale entry of p goes), after which any other generation is free."""
    w = S[P_LCAP] + (p & (STALE_BUCKETS - 1))
    g = _free_generation(np.int64(lru[_u(w)]), g0)
    compacted = g < 0
    if compacted:
        _lru_compact(lru, pstate, S)
        g = (g0 + 1) & GEN_MASK
    lru[_u(w)] = np.int64(lru[_u(w)]) | (1 << g0)
    S[S_LRU_STALE] += 1
    return g, compacted


@_kernel
def _free_generation(mask, g0):
    """The first generation after g0 (cyclically, g0 excluded) whose bit in mask is clear,
    or -1 if there is none."""
    g = (g0 + 1) & GEN_MASK
    while g != g0:
        if not (mask >> g) & 1:
            return g
        g = (g + 1) & GEN_MASK
    return -1


@_kernel
def _lru_advance_head(lru, pstate, S):
    """The head past the entries that are not live. A tombstone is -1, or -d at the first
    slot of a run of d tombstones that `_batch_move` took at once (within one turn of the
    ring): the run is jumped. A tombstone stays one until a compaction, which rewrites every
    position below the new tail, so a run never covers a live entry nor passes the tail.
    The kernel-start scan jumps them too; every other reader (the victim scans, the
    compaction, `_lru_live`) takes any negative entry as dead: the victim scans start at the
    last victim or just past it, where a recorded run is rarely ahead. (This walk, over a ring too large
    for the caches, was most of `_kernel_begin`'s time under DeepUM.)"""
    h = S[S_LRU_HEAD]
    t = S[S_LRU_TAIL]
    lm = S[P_LCAP] - 1
    while h < t:
        e = np.int64(lru[_u(h & lm)])
        if e < 0:
            h -= e
        elif _live(np.int64(pstate[_u(e >> GEN_SHIFT)]), e):
            break
        else:
            h += 1
    S[S_LRU_HEAD] = h
    if S[S_LRU_CUR] < h:
        S[S_LRU_CUR] = h


# ----------------------------------------------------------------------------------------
# The LRU list as extents (P_XLRU: `lru`, `prefetch_lru`, bulk engine; issue 23)
#
# For the LRU policies the victim is the first page in list order that is resident and not in
# transfer (§8.1; benchmarks/results/page-engine-bulk-journal.md, "When are LRU compactions
# observable?", proves the ring's cursor and compactions unobservable for them), and a GPU
# page in transfer leaves the GPU before its flag clears. So the list is kept as exactly the
# GPU pages not in transfer, in arrival order: a doubly linked list of extents (runs of
# consecutive pages of one tensor that arrived one after another), each also in a chain of its
# tensor's extents (head in tt[T, TT_XH]). A page joins at the tail when it takes a GPU frame,
# and leaves when it is a victim (at the head), when a pre-eviction flags it in transfer, and
# when it leaves the GPU otherwise (pre-evicted or pre-deallocated: its tensor's chain finds
# it). No stale entries, no generations, no compactions; the victim search is a read of the
# head. The records live in `lru` (int64, XW words each: first page, end page, tensor,
# previous, next, previous and next in the tensor's chain); freed ones are chained through
# X_NEXT from S[S_X_FREE], and the records from S[S_X_BUMP] on were never used (so that the
# wrapper's array, `np.empty`, takes memory only as records are first taken, and a larger
# array costs nothing). The engine pauses while fewer than P_XMARGIN records are free (as many
# as one busy tick can take), and the wrapper grows the array. tt[T, TT_RES] equals the pages
# of T's extents.
# ----------------------------------------------------------------------------------------

XW = 8
X_LO = 0
X_HI = 1
X_T = 2
X_PREV = 3
X_NEXT = 4
X_TPREV = 5
X_TNEXT = 6


@_kernel
def _x_new(lru, S, tt, T, lo, hi, after):
    """A new extent [lo, hi) of tensor T, linked after extent `after` (-1: at the head of the
    list), and at the head of T's chain. Returns its record (-1 when none is free: E_EXTENTS)."""
    i = S[S_X_FREE]
    if i >= 0:
        S[S_X_FREE] = lru[_u(i * XW + X_NEXT)]
    else:
        i = S[S_X_BUMP]
        if i >= lru.shape[0] // XW:
            S[S_ERROR] = E_EXTENTS
            return -1
        S[S_X_BUMP] = i + 1
    b = i * XW
    S[S_X_NFREE] -= 1
    lru[_u(b + X_LO)] = lo
    lru[_u(b + X_HI)] = hi
    lru[_u(b + X_T)] = T
    if after >= 0:
        nx = lru[_u(after * XW + X_NEXT)]
        lru[_u(after * XW + X_NEXT)] = i
    else:
        nx = S[S_X_HEAD]
        S[S_X_HEAD] = i
    lru[_u(b + X_PREV)] = after
    lru[_u(b + X_NEXT)] = nx
    if nx >= 0:
        lru[_u(nx * XW + X_PREV)] = i
    else:
        S[S_X_TAIL] = i
    h = tt[_u(T), TT_XH]
    lru[_u(b + X_TPREV)] = -1
    lru[_u(b + X_TNEXT)] = h
    if h >= 0:
        lru[_u(h * XW + X_TPREV)] = i
    tt[_u(T), TT_XH] = i
    return i


@_kernel
def _x_free(lru, S, tt, i):
    """Unlink extent i from the list and from its tensor's chain; its record becomes free."""
    b = i * XW
    pv = lru[_u(b + X_PREV)]
    nx = lru[_u(b + X_NEXT)]
    if pv >= 0:
        lru[_u(pv * XW + X_NEXT)] = nx
    else:
        S[S_X_HEAD] = nx
    if nx >= 0:
        lru[_u(nx * XW + X_PREV)] = pv
    else:
        S[S_X_TAIL] = pv
    tp = lru[_u(b + X_TPREV)]
    tn = lru[_u(b + X_TNEXT)]
    if tp >= 0:
        lru[_u(tp * XW + X_TNEXT)] = tn
    else:
        tt[_u(lru[_u(b + X_T)]), TT_XH] = tn
    if tn >= 0:
        lru[_u(tn * XW + X_TPREV)] = tp
    lru[_u(b + X_NEXT)] = S[S_X_FREE]
    S[S_X_FREE] = i
    S[S_X_NFREE] += 1


@_kernel
def _x_take(lru, S, tt, n):
    """The first n pages of the list (all of its head extent's, n >= 1) leave it."""
    h = S[S_X_HEAD]
    lo = lru[_u(h * XW + X_LO)] + n
    if lo >= lru[_u(h * XW + X_HI)]:
        _x_free(lru, S, tt, h)
    else:
        lru[_u(h * XW + X_LO)] = lo


@_kernel
def _x_remove(lru, S, tt, T, a, b):
    """Tensor T's pages a .. b - 1 that are in the list leave it (its chain finds them).
    Under DeepUM, removing the cursor's page resets the cursor to the list's head (§8.1)."""
    c = S[S_LRU_CUR]
    reset = S[P_DEEPUM] != 0 and a <= c and c < b
    i = tt[_u(T), TT_XH]
    while i >= 0:
        nx = lru[_u(i * XW + X_TNEXT)]
        lo = lru[_u(i * XW + X_LO)]
        hi = lru[_u(i * XW + X_HI)]
        if hi > a and lo < b:
            if a <= lo and hi <= b:
                _x_free(lru, S, tt, i)
            elif lo < a and hi > b:
                lru[_u(i * XW + X_HI)] = a
                _x_new(lru, S, tt, T, b, hi, i)      # the rest keeps its place
            elif lo < a:
                lru[_u(i * XW + X_HI)] = a
            else:
                lru[_u(i * XW + X_LO)] = b
        i = nx
    if reset:
        h = S[S_X_HEAD]
        S[S_LRU_CUR] = lru[_u(h * XW + X_LO)] if h >= 0 else -1
        S[S_X_CUR] = h


@_kernel
def _x_arrive(lru, S, tt, pstate, T, p, n, wait):
    """Pages p .. p + n - 1 of tensor T (none in the GPU) take GPU frames, in this order: IN_GPU,
    transfer and wait-set flags cleared, at the list's tail (`_lru_append` for extents; the
    tail extent grows when they continue it). Returns the wait-set size after them."""
    nw = 0
    for pp in range(p, p + n):
        st = np.int64(pstate[_u(pp)])
        nw += (st & F_WAIT) // F_WAIT
        pstate[_u(pp)] = (st & ~(LOC_MASK | F_TRANSFER | F_WAIT)) | IN_GPU
    tl = S[S_X_TAIL]
    if tl >= 0 and lru[_u(tl * XW + X_HI)] == p and lru[_u(tl * XW + X_T)] == T:
        lru[_u(tl * XW + X_HI)] = p + n
    else:
        _x_new(lru, S, tt, T, p, p + n, tl)
    return wait - nw


# DeepUM on extents (P_XLRU with P_DEEPUM; bulk engine, runs without pre-evictions). The
# artifact's cursor is a list iterator (§8.2): a page of the list, or END. It is kept as that
# page (-1: END) in S_LRU_CUR (the busy tick's `lru_cur`), with the record holding it in
# S_X_CUR as a hint. Non-PF victims are taken from the cursor, skipping the extents of window
# tensors; PF victims are the list's first pages (no GPU page is in transfer without
# pre-evictions); a victim that is the cursor's page moves it to the next page of the list,
# and removing the cursor's page otherwise resets it to the head (`_x_remove`).

@_kernel
def _xd_rec(lru, S, tt, srt, c):
    """The record holding page c (in the list): S_X_CUR when it does, else found in the chain
    of c's tensor (and kept in S_X_CUR)."""
    r = S[S_X_CUR]
    if r >= 0 and lru[_u(r * XW + X_LO)] <= c and c < lru[_u(r * XW + X_HI)]:
        return r
    i = _tpos(srt, 0, c)
    r = tt[srt[1, _u(i)], TT_XH]
    while r >= 0:
        if lru[_u(r * XW + X_LO)] <= c and c < lru[_u(r * XW + X_HI)]:
            break
        r = lru[_u(r * XW + X_TNEXT)]
    if r < 0:
        S[S_ERROR] = E_EXTENTS
    S[S_X_CUR] = r
    return r


@_kernel
def _xd_after(lru, S, r, e):
    """The page of the list after record r's pages before e (lo(r) < e <= hi(r)), -1 (END) if
    none; read before those pages leave. Keeps its record in S_X_CUR when it is the next one."""
    if e < lru[_u(r * XW + X_HI)]:
        S[S_X_CUR] = r
        return e
    n = lru[_u(r * XW + X_NEXT)]
    S[S_X_CUR] = n
    if n < 0:
        return -1
    return lru[_u(n * XW + X_LO)]


@_kernel
def _xd_take(lru, S, tt, r, v, n):
    """Pages v .. v + n - 1 of record r (within it) leave the list."""
    b = r * XW
    lo = lru[_u(b + X_LO)]
    hi = lru[_u(b + X_HI)]
    if v == lo:
        if v + n >= hi:
            _x_free(lru, S, tt, r)
        else:
            lru[_u(b + X_LO)] = v + n
    elif v + n >= hi:
        lru[_u(b + X_HI)] = v
    else:
        lru[_u(b + X_HI)] = v
        _x_new(lru, S, tt, lru[_u(b + X_T)], v + n, hi, r)


@_kernel
def _xd_victim_np(lru, S, tt, srt, c):
    """DeepUM's non-PF victim on extents: the first page from the cursor page c (-1: END)
    whose tensor is outside the window. Returns its record and page (-1, -1: none)."""
    if c < 0:
        return -1, -1
    r = _xd_rec(lru, S, tt, srt, c)
    v = c
    while r >= 0:
        if tt[_u(lru[_u(r * XW + X_T)]), TT_WIN] == 0:
            return r, v
        r = lru[_u(r * XW + X_NEXT)]
        if r >= 0:
            v = lru[_u(r * XW + X_LO)]
    return -1, -1


@_kernel
def _xd_victim(dnp, lru, S, tt, srt, cur, dum_end):
    """A DeepUM victim on extents (dnp: non-PF, from the cursor; else the list's first page):
    its record and page (-1, -1: none)."""
    if dnp:
        if dum_end != 0:
            return -1, -1
        return _xd_victim_np(lru, S, tt, srt, cur)
    h = S[S_X_HEAD]
    if h < 0:
        return -1, -1
    return h, lru[_u(h * XW + X_LO)]


@_kernel
def _xd_evict(dnp, lru, S, tt, r, v, n, cur):
    """Victims v .. v + n - 1 of record r leave the list: the cursor moves past them when it
    was their search's start (non-PF) or on one of them (PF). Returns the cursor."""
    if dnp or (cur >= v and cur < v + n):
        cur = _xd_after(lru, S, r, v + n)
    _xd_take(lru, S, tt, r, v, n)
    return cur


# ----------------------------------------------------------------------------------------
# batcher (§9.2, §9.3): helpers of the busy tick's stages (the stages themselves below).
# A failed allocation (no victim, or an error) ends its stage, and the prefetch-from-SSD
# one also skips the prefetch-from-CPU stage (the artifact's stages are grouped so).
# ----------------------------------------------------------------------------------------

@_kernel
def _tpos(srt, i, p):
    """Position in srt of the tensor owning page p (see `tensor_of`), i being the position
    of the last lookup."""
    if srt[0, _u(i)] <= p and p < srt[0, _u(i + 1)]:
        return i
    lo = 0
    hi = srt.shape[1] - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if srt[0, _u(mid)] <= p:
            lo = mid
        else:
            hi = mid
    return lo


@_kernel
def _tensor_at(tt, srt, i, p):
    """The tensor owning page p (`_tpos` from position i): its position in srt, id, first and
    end page, and whether the current kernel requires it."""
    i = _tpos(srt, i, p)
    T = srt[1, _u(i)]
    return i, T, srt[0, _u(i)], srt[0, _u(i + 1)], tt[_u(T), TT_REQ]


@_kernel
def _run_pop(qb, q, qm, qh, qt, rp, rn, n):
    """Pop the first n (<= rn) pages of a queue whose head run (rp, rn at position qh) is held
    in locals: the new qh, rp, rn (rp, rn unchanged when the queue is left empty)."""
    if rn > n:
        return qh, rp + n, rn - n
    qh += 1
    if qh < qt:
        return qh, qb[q, _u(qh & qm), 0], qb[q, _u(qh & qm), 1]
    return qh, rp, rn


@_kernel
def _lru_append(lru, lm, pstate, p, st0, lru_tail, lru_cur, wait):
    """Give page p (state st0, not in the GPU) a GPU frame: IN_GPU, appended at the LRU tail,
    its transfer and wait-set flags cleared. Returns the new tail, cursor and wait-set size."""
    st = (st0 & ~LOC_MASK) | IN_GPU
    lt = lru_tail
    lru[_u(lt & lm)] = (p << GEN_SHIFT) | (st >> GEN_SHIFT)
    if lru_cur == lt:
        # A std::list cursor at END stays END when a page is appended; an index cursor
        # equal to the tail would otherwise point at the new element.
        lru_cur = lt + 1
    st &= ~F_TRANSFER
    if st & F_WAIT:
        st &= ~F_WAIT
        wait -= 1
    pstate[_u(p)] = st
    return lt + 1, lru_cur, wait


@_kernel
def _count_in(src, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, n):
    """A tick's incoming counters after n pages fetched from src (IN_SSD or IN_CPU), and the
    forced fetch source once a link is full (§9.3; n > 1 only where the link's counter cannot
    pass its cap before the last of them)."""
    c_in += n
    c_alloc += n
    if src == IN_SSD:
        c_in_ssd += n
        if c_in_ssd == SSD_CAP:
            c_ffs = IN_CPU
    else:
        c_in_cpu += n
        if c_in_cpu == CPU_CAP:
            c_ffs = IN_SSD
    return c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs


@_kernel
def _count_out(dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP,
               n):
    """A tick's outgoing counters after n pages evicted to dest (IN_SSD or IN_CPU), host_used
    being the host use just after the last of them, and the forced eviction destination once a
    link or the host is full (§9.3; n > 1 only where neither can fill before the last page)."""
    c_out += n
    if dest == IN_SSD:
        c_out_ssd += n
        if c_out_ssd == SSD_CAP:
            c_fed = IN_CPU
    else:
        c_out_cpu += n
        if c_out_cpu == CPU_CAP or host_used == HOST:
            c_fed = IN_SSD
    return c_out, c_out_ssd, c_out_cpu, c_fed


@_kernel
def _preevict_gpu_run(lru, pstate, L, p0, p1, cur_page, dest):
    """Bulk pre-eviction (P_BULK) of pages p0 .. p1 - 1 to dest: each page in the GPU leaves
    the LRU list as `_new_generation` takes it out (the first generation after its own that
    no stale entry of its bucket carries, which then carries its old one), as in
    `_preevict_run`'s page loop; the run stops before a page not in the GPU, the cursor's
    page, or one whose bucket has no free generation (a compaction), which the page loop
    takes. Returns the pages moved and how many of them were resident and not in
    transfer."""
    res_d = 0
    for p in range(p0, p1):
        if p == cur_page:
            return p - p0, res_d
        st = np.int64(pstate[_u(p)])
        if (st & LOC_MASK) != IN_GPU:
            return p - p0, res_d
        g0 = st >> GEN_SHIFT
        w = L + (p & (STALE_BUCKETS - 1))
        mask = np.int64(lru[_u(w)])
        m2 = mask | (1 << g0)
        m2 = m2 | (m2 << 16)
        free = ~(m2 >> (g0 + 1)) & 0xFFFF
        if free == 0:
            return p - p0, res_d
        i = 0
        while not (free >> i) & 1:
            i += 1
        lru[_u(w)] = mask | (1 << g0)
        pstate[_u(p)] = ((st & (15 & ~LOC_MASK & ~F_TRANSFER)) | dest
                         | (((g0 + 1 + i) & GEN_MASK) << GEN_SHIFT))
        if (st & RES_MASK) == IN_GPU:
            res_d += 1
    return p1 - p0, res_d


@_kernel
def _preevict_x_run(pstate, p0, p1, dest):
    """`_preevict_gpu_run` on the extent LRU (no generations, no cursor): pages p0 .. p1 - 1 go
    to dest while they are in the GPU. Returns the pages moved and how many of them were
    resident and not in transfer (those the caller takes out of the list)."""
    res_d = 0
    for p in range(p0, p1):
        st = np.int64(pstate[_u(p)])
        if (st & LOC_MASK) != IN_GPU:
            return p - p0, res_d
        if not (st & F_TRANSFER):
            res_d += 1
        pstate[_u(p)] = (st & ~(LOC_MASK | F_TRANSFER)) | dest
    return p1 - p0, res_d


@_kernel
def _preevict_run(stage, q, qb, S, pstate, lru, tt, srt, c_out, c_out_ssd, c_out_cpu, c_fed,
                  host_used, host_peak, gpu_used, tc_b, lru_tail, lru_cur, lru_scan):
    """Pre-eviction fast path of a batcher tick (untraced): stage `stage`'s queued GPU pages
    in a tight loop. Each page goes exactly as the general path's pre-eviction
    (`_general_page`, `_evict_page`: its LRU entry left stale as `_lru_remove_unknown` does,
    the cursor's page looked up only when it changes, as in `_dealloc_pages`); the loop stops
    at a page not in the GPU, of a required tensor or overflowing the host, which the general
    path then takes.
    A function of its own (not inlined), so that the fetch loop keeps its registers.
    Returns the number of pages moved and the tick's state after them."""
    SSD_CAP = S[P_SSD_CAP]
    CPU_CAP = S[P_CPU_CAP]
    GPU_CAP = S[P_GPU_CAP]
    HOST = S[P_HOST]
    qm = qb.shape[1] - 1
    qh = S[S_QH + q]
    qt = S[S_QT + q]
    qslot = qh & qm
    rp = qb[q, _u(qslot), 0]
    rn = qb[q, _u(qslot), 1]
    moved = 0
    S[S_LRU_TAIL] = lru_tail
    S[S_LRU_CUR] = lru_cur
    S[S_LRU_SCAN] = lru_scan
    xl = S[P_XLRU] != 0
    cur_page = -1 if xl else _cursor_page(lru, pstate, S)
    et_lo = 0
    et_hi = 0
    et_T = 0
    et_req = 0
    et_d = 0
    bulk = S[P_BULK] != 0
    while True:
        if stage == _G_PE_SSD:
            if not (c_out_ssd < SSD_CAP and c_out < GPU_CAP):
                break
        else:
            host_full = host_used == HOST
            if not (c_out < GPU_CAP and ((host_full and c_out_ssd < SSD_CAP) or
                                         (not host_full and c_out_cpu < CPU_CAP))):
                break
        p = rp
        st0 = np.int64(pstate[_u(p)])
        if (st0 & LOC_MASK) != IN_GPU:
            break
        if p < et_lo or p >= et_hi:
            if et_d != 0:
                tt[_u(et_T), TT_RES] += et_d
                et_d = 0
            tc_b, et_T, et_lo, et_hi, et_req = _tensor_at(tt, srt, tc_b, p)
        if et_req:
            break
        if c_fed != NOT_KNOWN:
            dest = c_fed
        else:
            dest = IN_SSD if stage == _G_PE_SSD else IN_CPU
        if dest == IN_CPU and host_used >= HOST:
            break
        if bulk:
            # bulk: the pages of the queue's head run that go the same way, with no counter
            # reaching its cap before the last of them (the page loop takes that one)
            m = rn
            if et_hi - p < m:
                m = et_hi - p
            if GPU_CAP - c_out - 1 < m:
                m = GPU_CAP - c_out - 1
            if dest == IN_SSD:
                if SSD_CAP - c_out_ssd - 1 < m:
                    m = SSD_CAP - c_out_ssd - 1
            else:
                if CPU_CAP - c_out_cpu - 1 < m:
                    m = CPU_CAP - c_out_cpu - 1
                if HOST - host_used - 1 < m:
                    m = HOST - host_used - 1
            if m >= 2:
                if xl:
                    d, res_d = _preevict_x_run(pstate, p, p + m, dest)
                    if res_d > 0:
                        _x_remove(lru, S, tt, et_T, p, p + d)
                else:
                    d, res_d = _preevict_gpu_run(lru, pstate, S[P_LCAP], p, p + m, cur_page,
                                                 dest)
                    S[S_LRU_STALE] += d
                if d > 0:
                    moved += d
                    qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, d)
                    if dest == IN_CPU:
                        host_used += d
                        if host_used > host_peak:
                            host_peak = host_used
                    gpu_used -= d
                    c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                        dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP,
                        SSD_CAP, d)
                    et_d -= res_d
                    if qh >= qt:
                        break
                    continue
        # -- committed: page p goes now --
        moved += 1
        qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, 1)
        if dest == IN_CPU:
            host_used += 1
            if host_used > host_peak:
                host_peak = host_used
        if xl:
            if (st0 & RES_MASK) == IN_GPU:
                _x_remove(lru, S, tt, et_T, p, p + 1)
            pstate[_u(p)] = (st0 & ~(LOC_MASK | F_TRANSFER)) | dest
        else:
            if p == cur_page:
                S[S_LRU_CUR] = S[S_LRU_HEAD]          # (§8.1)
                cur_page = _cursor_page(lru, pstate, S)
            g, compacted = _new_generation(lru, pstate, S, p, st0 >> GEN_SHIFT)
            if compacted:
                cur_page = _cursor_page(lru, pstate, S)
            pstate[_u(p)] = (((st0 & (15 & ~LOC_MASK & ~F_TRANSFER)) | dest)
                             | (g << GEN_SHIFT))
        gpu_used -= 1
        c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
            dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP, SSD_CAP, 1)
        if (st0 & RES_MASK) == IN_GPU:
            et_d -= 1
        if qh >= qt:
            break
    if et_d != 0:
        tt[_u(et_T), TT_RES] += et_d
    S[S_QH + q] = qh
    if qh < qt:
        qb[q, _u(qh & qm), 0] = rp
        qb[q, _u(qh & qm), 1] = rn
    lru_tail = S[S_LRU_TAIL]
    lru_cur = S[S_LRU_CUR]
    lru_scan = S[S_LRU_SCAN]
    return (moved, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, host_peak, gpu_used, tc_b,
            lru_tail, lru_cur, lru_scan)


@_kernel
def _add_traffic(pcie, it, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc):
    """A busy tick's end: its page counts added to iteration it's traffic (a tick that moved
    nothing adds nothing, not even its allocations)."""
    if c_in > 0 or c_out > 0:
        pcie[it, PC_ALLOC] += c_alloc
        pcie[it, PC_IN] += c_in
        pcie[it, PC_IN_SSD] += c_in_ssd
        pcie[it, PC_IN_CPU] += c_in_cpu
        pcie[it, PC_OUT] += c_out
        pcie[it, PC_OUT_SSD] += c_out_ssd
        pcie[it, PC_OUT_CPU] += c_out_cpu


@_kernel
def _tick_repeats(S, stage, q, qlen, half, t_next, deepum, wait, c_moved, gpu_used, host_used,
                  nbnd_cap):
    """Whether a busy tick whose allocating stage `stage` (queue q, `qlen` pages still
    queued, S[S_QH + q] up to date) has just reached a cap is followed by one that starts
    with the same stage: no other queue holds a page (the later stages, and the next tick's
    earlier ones, find nothing), the tick would not start the DeepUM rescue, its end would
    neither open a transfer period nor resume the waiting kernel, the event loop would take
    the tick at t_next next (no kernel event due before it, no pause, no queue past half
    full), and the stage admits a page with the next tick's fresh counters."""
    for qq in range(NQ):
        if qq != q and S[S_QT + qq] != S[S_QH + qq]:
            return False
    if deepum and S[S_RESCHED] != 0 and S[S_R_STARTED] == 0 and wait > 0 and c_moved == 0:
        return False
    if S[S_XFER] == 0 or S[S_ERROR] != E_NONE:
        return False
    if S[S_RESCHED] != 0 and _no_faults_queued(S) and wait == 0:
        return False
    if (S[S_NBND] + 4 > nbnd_cap or S[S_NEV] >= S[S_EV_PAUSE]
            or S[S_NSTAT] >= S[S_STAT_PAUSE]):
        return False
    if qlen <= 0 or qlen > half:
        return False
    if S[S_X_NFREE] < S[P_XMARGIN]:
        return False
    if S[S_KB_PENDING] and (S[S_KB_TIME] < t_next or (S[S_KB_TIME] == t_next
                                                       and S[S_KB_SEQ] < S[S_SEQ])):
        return False
    evict_ok = gpu_used < S[P_G] or (S[P_GPU_CAP] > 0 and (host_used < S[P_HOST]
                                                          or S[P_SSD_CAP] > 0))
    return _admit(stage, evict_ok, 0, 0, 0, 0, S[P_GPU_CAP], S[P_CPU_CAP], S[P_SSD_CAP],
                  S[P_ALLOC_CAP])


# ----------------------------------------------------------------------------------------
# a busy batcher tick, stage by stage (§9.2, §9.3)
#
# `_busy_ticks` runs busy ticks one after another; each tick resets its counters
# (`_fresh_counters`) and runs the stages in order, each taking pages from its queue while
# it admits them (`_stage_admission`). A stage's pages go by one of three paths, which move
# them identically: the pre-eviction fast path (`_preevict_run`), the fetch fast path
# (`_fetch_fast`: runs of pages with `_batch_limit` and `_batch_move`, single pages with
# `_fast_victim`), both untraced, and the general path (`_general_page`: one page with
# `_select_victim`, `_evict_page`, `_alloc_page`), which takes everything the fast paths
# leave to it. Then the tick ends (`_tick_end`), and `_next_tick_busy` says whether the next
# event is another busy tick that can run here. The hot scalar state (per-tick counters,
# memory use, wait-set size, LRU positions, lookup caches) travels through these functions
# as arguments and return values, so that it stays in registers instead of S (the arrays
# may alias for the compiler, so every S access would otherwise be a memory operation).
# ----------------------------------------------------------------------------------------

# The parameters a busy tick reads, from S once per `_busy_ticks` call: GPU frames, host line
# (pages), per-tick caps (pages: GPU link, CPU link, SSD link, allocations), DeepUM policy
# (bool), LRU capacity and its mask, LRU head position (not moved during a tick), extent LRU
# (bool, P_XLRU; the ring's capacity is then unbounded for the room tests). A tuple of
# locals (registers), where reads of S, which may alias the arrays written in the tick, would
# be memory loads on every page.
TickParams = namedtuple("TickParams", ["G", "HOST", "GPU_CAP", "CPU_CAP", "SSD_CAP",
                                       "ALLOC_CAP", "deepum", "lcap", "lm", "hd", "xl"])


@_kernel_stage
def _tick_params(S):
    """The busy tick's parameters (`TickParams`) from S."""
    return TickParams(S[P_G], S[P_HOST], S[P_GPU_CAP], S[P_CPU_CAP], S[P_SSD_CAP],
                      S[P_ALLOC_CAP], S[P_DEEPUM] != 0, S[P_LCAP], S[P_LCAP] - 1,
                      S[S_LRU_HEAD], S[P_XLRU] != 0)


@_kernel_stage
def _fresh_counters(host_used, HOST):
    """A tick's counters at its start (§9.3): c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd,
    c_out_cpu, c_alloc all 0, no forced fetch source, and the eviction destination forced to
    SSD when the host memory is full."""
    c_fed = IN_SSD if host_used == HOST else NOT_KNOWN
    return 0, 0, 0, 0, 0, 0, 0, NOT_KNOWN, c_fed


@_kernel_stage
def _next_stage_after_failure(stage):
    """The stage after a failed allocation (no victim, an error): the next one, except that
    prefetch-from-SSD also skips prefetch-from-CPU (the artifact groups them)."""
    return _G_PREALLOC if stage == _G_PRE_SSD else stage + 1


@_kernel_stage
def _stage_admission(stage, rescue, S, prm, wait, gpu_used, host_used, c_in, c_in_ssd,
                     c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc):
    """Stage `stage`'s queue and whether it admits a page now. The DeepUM "lock-up" rescue
    (§9.2) is decided once, when the regular stages are over: when it does not start, the
    tick's stages end (stage _G_END is returned). Returns stage, queue, admitted, rescue."""
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    HOST = prm.HOST
    if stage == _G_PE_SSD:
        return stage, Q_PREEVICT_SSD, c_out_ssd < SSD_CAP and c_out < GPU_CAP, rescue
    if stage == _G_PE_CPU:
        host_full = host_used == HOST
        ok = c_out < GPU_CAP and ((host_full and c_out_ssd < SSD_CAP)
                                  or (not host_full and c_out_cpu < CPU_CAP))
        return stage, Q_PREEVICT_CPU, ok, rescue
    if stage == _G_RS_SSD and not rescue:
        if not (prm.deepum and S[S_RESCHED] != 0 and S[S_R_STARTED] == 0 and wait > 0
                and c_in + c_out == 0):
            return _G_END, 0, False, rescue
        rescue = True
    evict_ok = gpu_used < prm.G or (c_out < GPU_CAP and
                                    (host_used < HOST or c_out_ssd < SSD_CAP))
    ok = _admit(stage, evict_ok, c_in, c_in_ssd, c_in_cpu, c_alloc, GPU_CAP, CPU_CAP, SSD_CAP,
                prm.ALLOC_CAP)
    return stage, _STAGE_QUEUE[stage], ok, rescue


@_kernel_stage
def _batch_limit(nb, is_fetch_s, is_pre_s, fsrc, a_src, b_ev, b_dest, gpu_used, host_used,
                 c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, prm):
    """How many of the next nb pages (of one queued run, one tensor, with LRU room) the
    fetch fast path may move at once: the run is cut where a counter would reach its cap
    (incoming, per-link, allocation, outgoing when each page needs a victim going to
    b_dest), or the GPU or the host would fill, so that the admission tests, the forced
    source and destination and the queue pop are settled once for the run, after it."""
    G = prm.G
    HOST = prm.HOST
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    ALLOC_CAP = prm.ALLOC_CAP
    if is_fetch_s:
        if GPU_CAP - c_in < nb:
            nb = GPU_CAP - c_in
        lim = SSD_CAP - c_in_ssd if fsrc == IN_SSD else CPU_CAP - c_in_cpu
        if lim < nb:
            nb = lim
    if not is_pre_s and ALLOC_CAP - c_alloc < nb:
        nb = ALLOC_CAP - c_alloc
    if b_ev and b_dest != NOT_PRESENT:
        if GPU_CAP - c_out < nb:
            nb = GPU_CAP - c_out
        if b_dest == IN_CPU:
            # (a page from host memory frees its host page right after its victim took one)
            h_room = HOST - host_used if a_src != IN_CPU else (nb if host_used < HOST else 0)
            if h_room < nb:
                nb = h_room
            if CPU_CAP - c_out_cpu < nb:
                nb = CPU_CAP - c_out_cpu
        else:
            if SSD_CAP - c_out_ssd < nb:
                nb = SSD_CAP - c_out_ssd
            if a_src == IN_CPU and nb > 1:
                nb = 1        # its fetch unforces the destination
    elif not b_ev and G - gpu_used < nb:
        nb = G - gpu_used
    return nb


@_kernel_stage
def _streak_ticks(nb, rn, t_pages, ring_room, t, ii, S, stage, is_fetch_s, fsrc, gpu_used,
                  host_used, prm, b_dest, c_fed0):
    """A streak of identical busy ticks (issue 23): the fetch fast path's first run of a tick
    that began with fresh counters (c_fed0 its forced eviction destination), nb pages (its
    cap-limited run length), each with a victim going to b_dest, SSD (the host is full) or,
    under DeepUM, dropped (NOT_PRESENT), from SSD or not present, so that neither the host
    use nor the GPU use changes. If the tick stops after those nb
    pages (a cap, or its link full) and the next ones would start the same way and do the
    same (their pages in the same queued run and tensor, LRU room, no kernel event due before
    them; the rest of `_tick_repeats` does not change while such ticks run: no page enters
    another queue, the demand queue stays non-empty, the host and GPU use stay put), then
    `_batch_move` may take up to ns * nb pages at once and the whole ticks among them be
    ended in closed form. Returns ns (< 2: no streak) and the counters of a whole tick."""
    HOST = prm.HOST
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    f_out = 0
    f_out_ssd = 0
    f_out_cpu = 0
    if b_dest != NOT_PRESENT:
        f_out, f_out_ssd, f_out_cpu, _f_fed = _count_out(b_dest, 0, 0, 0, c_fed0, host_used,
                                                         HOST, CPU_CAP, SSD_CAP, nb)
    f_in = 0
    f_in_ssd = 0
    f_in_cpu = 0
    f_alloc = nb
    forced = False
    if is_fetch_s:
        f_in, f_in_ssd, f_in_cpu, f_alloc, f_ffs = _count_in(fsrc, 0, 0, 0, 0, NOT_KNOWN,
                                                             CPU_CAP, SSD_CAP, nb)
        forced = f_ffs != NOT_KNOWN and f_ffs != fsrc
    cnt = (f_in, f_in_ssd, f_in_cpu, f_out, f_out_ssd, f_out_cpu, f_alloc)
    evict_ok = gpu_used < prm.G or (f_out < GPU_CAP and (host_used < HOST or f_out_ssd < SSD_CAP))
    if not forced and _admit(stage, evict_ok, f_in, f_in_ssd, f_in_cpu, f_alloc, GPU_CAP,
                             CPU_CAP, SSD_CAP, prm.ALLOC_CAP):
        return 0, cnt           # the tick would go on after its nb pages
    ns = (rn - 1) // nb         # the run outlasts the streak: the queue stays as it is
    if t_pages // nb < ns:
        ns = t_pages // nb
    if (ring_room - 1) // nb < ns:
        ns = (ring_room - 1) // nb
    if S[S_KB_PENDING]:
        kb = (S[S_KB_TIME] - t - 1) // ii   # the tick ends before the kernel event
        if kb < ns:
            ns = kb
    return ns, cnt


@_kernel_stage
def _batch_move(p, nb, a_src, b_ev, b_dnp, b_dest, b_lo, b_hi, b_win, b_rq, deepum, pstate,
                lru, lm, hd, lru_tail, lru_cur, lru_scan, wait, vt_d):
    """Move pages p, p+1, ... (at most nb, while they are at a_src) to the GPU, each with a
    victim (b_ev) of the last victim's tensor (pages b_lo..b_hi-1) going to b_dest, found as
    the page loop finds it (DeepUM non-PF, b_dnp: a live page outside the window, from the
    cursor; DeepUM PF: from the scan position; LRU: from the cursor). Stops at a page
    elsewhere, or whose victim (or live page, for DeepUM non-PF) is of another tensor, whose
    lookup the page loop does. b_rq: the victims' tensor is required by the current kernel,
    so each victim is flagged in transfer and joins the wait set (the caller queues them
    again, as one run: the run stops at a victim that does not follow the last one). Returns
    the pages moved, the LRU positions, the wait-set size, the victim tensor's pending TT_RES
    change and the first victim (-1: none)."""
    m = 0
    v0 = -1
    v_end = -1
    # (no victim can be one of the arriving pages: a run of victims is read first, then
    # written, below)
    disjoint = p + nb <= b_lo or p >= b_hi
    while m < nb:
        pp = p + m
        st0 = np.int64(pstate[_u(pp)])
        if (st0 & LOC_MASK) != a_src:
            break
        if not b_ev:
            if deepum and lru_cur < lru_tail:
                lru_cur = _cur_norm(lru, lm, pstate, lru_cur, lru_tail)
            lru_tail, lru_cur, wait = _lru_append(lru, lm, pstate, pp, st0, lru_tail, lru_cur,
                                                  wait)
            m += 1
            continue
        s = lru_scan if (deepum and not b_dnp) else lru_cur
        if s < hd:
            s = hd
        vst0 = 0
        e = -1
        v = -1
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vst0 = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if b_dnp:
                    if _live(vst0, e):
                        v = e >> GEN_SHIFT
                        if v < b_lo or v >= b_hi or not b_win:
                            break
                elif _eligible(vst0, e):
                    v = e >> GEN_SHIFT
                    break
            s += 1
        if s >= lru_tail or v < b_lo or v >= b_hi:
            break
        if b_rq:
            if v0 < 0:
                v0 = v
            elif v != v_end:
                break
        # -- the run from here: while the next entries hold the next pages of the victim's
        # tensor, each the victim the scan would find next (DeepUM non-PF: live, its tensor
        # outside the window as the first one's is; else: not in transfer), and the next
        # pages arrive from a_src. Read first (no store between the loads; chunks of
        # _RUN_CHUNK without a branch, which LLVM vectorises), then written as plain loops,
        # within one turn of the ring for the victims' entries and for the new ones.
        lt = lru_tail
        sb = s & lm
        tb = lt & lm
        j = 1
        if disjoint:
            jmax = nb - m
            if jmax > lt - s:
                jmax = lt - s
            if jmax > b_hi - v:
                jmax = b_hi - v
            if jmax > lm + 1 - sb:
                jmax = lm + 1 - sb
            if jmax > lm + 1 - tb:
                jmax = lm + 1 - tb
            # live: in the GPU (with its entry's generation); else also not in transfer
            fmask = LOC_MASK if b_dnp else RES_MASK
            while j + _RUN_CHUNK <= jmax:
                bad = 0
                for i in range(j, j + _RUN_CHUNK):
                    vs2 = np.int64(pstate[_u(v + i)])
                    bad |= np.int64(lru[_u(sb + i)]) ^ (((v + i) << GEN_SHIFT) |
                                                         (vs2 >> GEN_SHIFT))
                    bad |= (vs2 & fmask) ^ IN_GPU
                    bad |= (np.int64(pstate[_u(pp + i)]) & LOC_MASK) ^ a_src
                if bad != 0:
                    break
                j += _RUN_CHUNK
            while j < jmax:
                vs2 = np.int64(pstate[_u(v + j)])
                if (np.int64(lru[_u(sb + j)]) != (((v + j) << GEN_SHIFT) | (vs2 >> GEN_SHIFT))
                        or (vs2 & fmask) != IN_GPU
                        or (np.int64(pstate[_u(pp + j)]) & LOC_MASK) != a_src):
                    break
                j += 1
        cur0 = lru_cur
        # the positions, as the page loop moves them (victim i at s + i, then its page's
        # entry at lt + i): when s + 1 < lt the two never meet, so the cursor ends past the
        # victims (LRU, DeepUM non-PF), or past them when it was on one of them, or at END
        # when it was at END (DeepUM PF)
        if s + 1 == lt:
            for i in range(j):
                si = s + i
                if not deepum or b_dnp:
                    lru_cur = si + 1
                elif lru_cur == si:
                    lru_cur = si + 1
                if lru_cur == lt + i:
                    lru_cur = lt + i + 1
        elif not deepum or b_dnp:
            lru_cur = s + j
        elif s <= lru_cur and lru_cur < s + j:
            lru_cur = s + j
        elif lru_cur == lt:
            lru_cur = lt + j
        if deepum and not b_dnp:
            lru_scan = s + j - 1
        for i in range(sb, sb + j):
            lru[_u(i)] = -1
        if j > 1:
            lru[_u(sb)] = -j       # a recorded run of tombstones (see _lru_advance_head)
        if b_rq:
            for vi in range(v, v + j):
                vs = np.int64(pstate[_u(vi)])
                if (vs & RES_MASK) == IN_GPU:
                    vt_d -= 1
                if not (vs & F_WAIT):
                    wait += 1
                pstate[_u(vi)] = (vs & ~LOC_MASK) | b_dest | F_TRANSFER | F_WAIT
            v_end = v + j
        else:
            for vi in range(v, v + j):
                vs = np.int64(pstate[_u(vi)])
                pstate[_u(vi)] = ((vs & ~LOC_MASK) | b_dest) & ~F_TRANSFER
                if (vs & RES_MASK) == IN_GPU:
                    vt_d -= 1
        if deepum and lru_cur < lt:
            # (DeepUM: the artifact's cursor is a list iterator, on a live page or at END; a
            # cursor with no live entry before the arrivals was at END when the first one came
            # if the run was one page, or if the cursor lay past the victims)
            cn = _cur_norm(lru, lm, pstate, lru_cur, lt)
            if cn == lt and (j == 1 or cur0 >= s + j):
                cn = lt + j
            lru_cur = cn
        for i in range(j):
            st = (np.int64(pstate[_u(pp + i)]) & ~(LOC_MASK | F_TRANSFER)) | IN_GPU
            lru[_u(tb + i)] = ((pp + i) << GEN_SHIFT) | (st >> GEN_SHIFT)
            if st & F_WAIT:
                st &= ~F_WAIT
                wait -= 1
            pstate[_u(pp + i)] = st
        lru_tail = lt + j
        m += j
    return m, lru_tail, lru_cur, lru_scan, wait, vt_d, v0


@_kernel_page
def _victims_leave(pstate, lo, j, dest):
    """Victims lo .. lo + j - 1 leave the GPU for dest (not in transfer)."""
    for v in range(lo, lo + j):
        pstate[_u(v)] = (np.int64(pstate[_u(v)]) & ~(LOC_MASK | F_TRANSFER)) | dest


@_kernel_stage
def _batch_move_x(p, nb, a_src, b_ev, b_dest, b_lo, b_hi, pstate, lru, S, tt, a_T, wait,
                  vt_d):
    """`_batch_move` on the extent LRU (P_XLRU, LRU policies): pages p, p+1, ... (at most nb,
    while they are at a_src) of tensor a_T move to the GPU, each with a victim (b_ev) going
    to b_dest. The victims are the list's first pages, taken while they are of the last
    victim's tensor (pages b_lo..b_hi-1), a head extent at a time: the pages that arrive
    join the tail, behind the victims of their chunk, as they would one by one. Returns the
    pages moved, the wait-set size and the victim tensor's pending TT_RES change."""
    m = 0
    while m < nb:
        k = nb - m
        lo = 0
        if b_ev:
            h = S[S_X_HEAD]
            if h < 0:
                break
            lo = lru[_u(h * XW + X_LO)]
            if lo < b_lo or lo >= b_hi:
                break
            hi = lru[_u(h * XW + X_HI)]
            if hi - lo < k:
                k = hi - lo
        j = _rp_canon(pstate, p + m, k, a_src)
        if j == 0:
            break
        if b_ev:
            _victims_leave(pstate, lo, j, b_dest)
            _x_take(lru, S, tt, j)
            vt_d -= j
        wait = _x_arrive(lru, S, tt, pstate, a_T, p + m, j, wait)
        m += j
        if j < k:
            break
    return m, wait, vt_d


@_kernel
def _victims_requeued(pstate, lo, j, wait):
    """Victims lo .. lo + j - 1, just gone (of a tensor the current kernel requires), go back
    to the queue of where they went, as the page loop queues them: each is flagged in
    transfer and joins the wait set (the caller pushes them). Returns the wait-set size."""
    for v in range(lo, lo + j):
        vs = np.int64(pstate[_u(v)])
        if not (vs & F_WAIT):
            wait += 1
        pstate[_u(v)] = vs | F_TRANSFER | F_WAIT
    return wait


@_kernel_stage
def _batch_move_xd(p, nb, a_src, b_ev, b_dest, b_lo, b_hi, b_rq, pstate, lru, S, tt, a_T,
                   wait, vt_d, dnp, srt, cur, dum_end):
    """`_batch_move_x` under DeepUM (dnp: non-PF): the victims are `_xd_victim`'s, a record
    at a time, and the cursor `cur` moves as one by one; a run does not take the last page
    of the tail record with others (one by one, the page after it would be the first
    arrival, not END). (A function of its own: with these branches in `_batch_move_x`, the
    LRU policies' runs were slower, Inceptionv3-1536 Base UVM by about a fifth.) b_rq as in
    `_batch_move_x`. Returns the pages moved, the wait-set size, the victim tensor's pending
    TT_RES change, the cursor and the first victim (-1: none)."""
    m = 0
    h = -1
    v0 = -1
    while m < nb:
        k = nb - m
        lo = 0
        if b_ev:
            h, lo = _xd_victim(dnp, lru, S, tt, srt, cur, dum_end)
            if h < 0:
                break
            if lo < b_lo or lo >= b_hi:
                break
            if b_rq:
                if v0 < 0:
                    v0 = lo
                elif lo != v0 + m:
                    break
            hi = lru[_u(h * XW + X_HI)]
            if hi - lo <= k:
                k = hi - lo
                if k >= 2 and lru[_u(h * XW + X_NEXT)] < 0:
                    k -= 1
        j = _rp_canon(pstate, p + m, k, a_src)
        if j == 0:
            break
        if b_ev:
            _victims_leave(pstate, lo, j, b_dest)
            if b_rq:
                wait = _victims_requeued(pstate, lo, j, wait)
            elif b_dest == NOT_PRESENT and S[P_RELEASE] != 0:
                _release_dropped(pstate, lo, lo + j, S)
            cur = _xd_evict(dnp, lru, S, tt, h, lo, j, cur)
            vt_d -= j
        wait = _x_arrive(lru, S, tt, pstate, a_T, p + m, j, wait)
        m += j
        if j < k:
            break
    return m, wait, vt_d, cur, v0


@_kernel_stage
def _fast_victim(dnp, deepum, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan,
                 dum_end, tc_c, wt_lo, wt_hi, wt_win):
    """The fetch fast path's victim for one page (§8): DeepUM non-PF (dnp, §8.2): the first
    live page outside the window from the cursor (none once END is sticky); DeepUM PF: the
    first non-in-transfer page from the scan position; LRU (§8.1): the first
    non-in-transfer page from the cursor. Returns its LRU slot (-1: none), page and state,
    and the window lookup cache (tc_c, and the last looked-up tensor's pages and flag)."""
    vslot = -1
    v = -1
    if deepum and not dnp:
        s = lru_scan
    else:
        s = lru_cur
    if s < hd:
        s = hd
    vst0 = 0
    if dnp:
        if dum_end != 0:
            return vslot, v, vst0, tc_c, wt_lo, wt_hi, wt_win
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vst0 = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if _live(vst0, e):
                    vp = e >> GEN_SHIFT
                    if vp < wt_lo or vp >= wt_hi:
                        tc_c = _tpos(srt, tc_c, vp)
                        wt_lo = srt[0, _u(tc_c)]
                        wt_hi = srt[0, _u(tc_c + 1)]
                        wt_win = tt[srt[1, _u(tc_c)], TT_WIN]
                    if not wt_win:
                        vslot = s
                        v = vp
                        break
            s += 1
    else:
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vst0 = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if _eligible(vst0, e):
                    vslot = s
                    v = e >> GEN_SHIFT
                    break
            s += 1
    return vslot, v, vst0, tc_c, wt_lo, wt_hi, wt_win


@_kernel
def _q_push_served(qb, S, q, qm, qh, qt, rp, rn, rq, v, n):
    """Queue pages v .. v + n - 1 to queue rq while `_fetch_fast` serves queue q, whose head
    run (rp, rn at slot qh; qt its tail) it keeps in locals: for rq == q the head run is put
    back around the push and read again. Returns q's tail and head run."""
    if rq != q:
        _q_push(qb, S, rq, v, n)
        return qt, rp, rn
    S[S_QH + q] = qh
    if qh < qt:
        qb[q, _u(qh & qm), 0] = rp
        qb[q, _u(qh & qm), 1] = rn
    _q_push(qb, S, q, v, n)
    qslot = qh & qm
    return S[S_QT + q], qb[q, _u(qslot), 0], qb[q, _u(qslot), 1]


@_kernel_stage
def _fetch_fast(stage, q, qh, t, it, k, prm, tt, srt, pstate, lru, qb, S, pcie, bnd, counters,
                gpu_used, host_used, host_peak, wait, lru_tail, lru_cur, lru_scan, dum_end,
                tc_a, tc_b, tc_c):
    """Fetch fast path of a batcher tick (untraced): the allocating stage `stage`'s pages
    (queue q, head qh) in a tight loop, by runs (`_batch_limit`, `_batch_move`) or one by one.
    Each page goes exactly as in `_general_page` (admission test, victim from the cursor,
    eviction, allocation, counters); a page that needs anything else (no victim from the
    cursor (DeepUM: from the scan position), a DeepUM non-PF victim, host overflow, a
    required victim whose queue might overflow, LRU compaction, a prefetch page not where
    its queue says) leaves the loop untouched and takes the general path once. When the
    stage reaches a cap and the next tick would start the same way (`_tick_repeats`), the
    tick ends and the next one goes on here. Returns the stage, the tick time, whether the
    general path must take the next page (fast_block) and the tick's state. The tick's
    counters travel as one tuple, as in `_general_page`."""
    c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed = counters
    G = prm.G
    HOST = prm.HOST
    GPU_CAP = prm.GPU_CAP
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    ALLOC_CAP = prm.ALLOC_CAP
    deepum = prm.deepum
    xl = prm.xl
    lcap = prm.lcap
    lm = prm.lm
    hd = prm.hd
    qm = qb.shape[1] - 1
    half = qb.shape[1] // 2
    ii = S[P_II]
    is_fetch_s = stage != _G_PF_ALLOC and stage != _G_PREALLOC
    is_pf_s = stage <= _G_PF_ALLOC
    is_pre_s = stage == _G_PRE_SSD or stage == _G_PRE_CPU
    fsrc = IN_SSD if (stage == _G_PF_SSD or stage == _G_PRE_SSD) else IN_CPU
    qt = S[S_QT + q]
    qslot = qh & qm
    rp = qb[q, _u(qslot), 0]
    rn = qb[q, _u(qslot), 1]
    fast_block = True
    # the tensors of the last victim and of the last allocated page: page range, id,
    # required flag, and the change of TT_RES not yet written (TT_RES is read by nothing in
    # the loop; TT_REQ does not change during a tick)
    vt_lo = 0
    vt_hi = 0
    vt_T = 0
    vt_req = 0
    vt_d = 0
    vt_alive = False
    wt_lo = 0
    wt_hi = 0
    wt_win = 0
    dnp = False
    at_req = 0
    at_lo = 0
    at_hi = 0
    at_T = 0
    at_d = 0
    forced = False
    tk_fresh = False   # the current tick began at a continuation below and nothing moved yet
    streaks = S[P_BULK] != 0   # (a bulk path: the per-page reference ends each tick itself)
    while True:
        evict_ok = gpu_used < G or (c_out < GPU_CAP and
                                    (host_used < HOST or c_out_ssd < SSD_CAP))
        if forced or not _admit(stage, evict_ok, c_in, c_in_ssd, c_in_cpu, c_alloc,
                                GPU_CAP, CPU_CAP, SSD_CAP, ALLOC_CAP):
            # -- the stage is over for this tick (a cap reached, or its link full:
            # `forced`): go on with the next tick here when it would be the same (see
            # `_tick_repeats`), settling the tick's end and the next tick's start as the
            # loops around would
            S[S_QH + q] = qh
            if not _tick_repeats(S, stage, q, qt - qh, half, t + ii, deepum, wait,
                                 c_in + c_out, gpu_used, host_used, bnd.shape[0]):
                if forced:
                    stage += 1
                break
            forced = False
            _add_traffic(pcie, it, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu,
                         c_alloc)
            t += ii
            S[S_TICK_TIME] = t
            S[S_TICK_SEQ] = S[S_SEQ]
            S[S_SEQ] += 1
            (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
             c_fed) = _fresh_counters(host_used, HOST)
            fast_block = True
            tk_fresh = True
            continue
        if lru_tail - hd >= lcap:
            break
        p = rp
        st0 = np.int64(pstate[_u(p)])
        a_src = st0 & LOC_MASK
        if is_pre_s and a_src != fsrc:
            break
        if p < at_lo or p >= at_hi:
            if at_d != 0:
                tt[_u(at_T), TT_RES] += at_d
                at_d = 0
            tc_a, at_T, at_lo, at_hi, at_req = _tensor_at(tt, srt, tc_a, p)
        # -- a run of pages at once (pages of one queued run, one tensor and one location,
        # each with a victim of the last victim's tensor, or none needed), going exactly as
        # the page loop below would take them one by one. A page that ends the run (a
        # victim of another tensor, no victim, another location) is left to the page loop.
        b_dnp = deepum and not is_pf_s and at_req == 0
        if a_src != IN_GPU and not (b_dnp and dum_end != 0):
            nb = rn
            if at_hi - p < nb:
                nb = at_hi - p
            if lcap - (lru_tail - hd) < nb:
                nb = lcap - (lru_tail - hd)
            b_ev = gpu_used >= G
            b_dest = IN_CPU if c_fed == NOT_KNOWN else c_fed
            if deepum and not vt_alive:
                b_dest = NOT_PRESENT
            nb = _batch_limit(nb, is_fetch_s, is_pre_s, fsrc, a_src, b_ev, b_dest, gpu_used,
                              host_used, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd,
                              c_out_cpu, c_alloc, prm)
            b_lo = vt_lo if vt_req == 0 else 0
            b_hi = vt_hi if vt_req == 0 else 0
            # victims of a required tensor go back to the queue of where they go (the page
            # loop's rule below): in bulk, on the ring, as one run, when that queue has room
            # for it with the page loop's test still passing after the push
            b_rq = False
            rq = -1
            if vt_req != 0 and streaks and b_ev:
                rq = (Q_PF_CPU if b_dest == IN_CPU else
                      (Q_PF_SSD if b_dest == IN_SSD else Q_PF_ALLOC))
                used = qt - qh if rq == q else S[S_QT + rq] - S[S_QH + rq]
                if used + 1 < qm:
                    b_rq = True
                    b_lo = vt_lo
                    b_hi = vt_hi
            b_win = tt[_u(vt_T), TT_WIN] != 0
            ns = 0
            f_cnt = (0, 0, 0, 0, 0, 0, 0)
            if (streaks and tk_fresh and b_ev and not b_rq and not deepum and stage >= _G_PF_SSD
                    and is_pf_s
                    and b_dest == IN_SSD
                    and c_fed == IN_SSD and a_src != IN_CPU and nb > 0):
                ns, f_cnt = _streak_ticks(nb, rn, at_hi - p, lcap - (lru_tail - hd), t, ii,
                                          S, stage, is_fetch_s, fsrc, gpu_used, host_used,
                                          prm, IN_SSD, IN_SSD)
            elif (streaks and tk_fresh and b_ev and not b_rq and deepum and xl and not is_pf_s
                    and (b_dest == IN_SSD or b_dest == NOT_PRESENT
                         or (b_dest == IN_CPU and a_src != IN_CPU))
                    and (a_src != IN_CPU or (b_dest == NOT_PRESENT and host_used < HOST))
                    and nb > 0 and S[S_X_NFREE] >= S[P_XMARGIN] + 4):
                # DeepUM's prefetch and pre-allocation ticks (victims to SSD, the host being
                # full, or dropped): the GPU use stays put, and so does the host use but for
                # pages from the host with their victims dropped, which lower it by nb a
                # tick from below the line (every tick starts with no forced destination
                # and the same admission); the demand queues are empty, so a tick's end
                # resumes a waiting kernel when the wait set empties (each arriving page
                # takes at most one from it), and starts the rescue when the tick moved
                # nothing. Victims to the host raise its use by nb a tick: the streak stops
                # short of the line (no tick's end nor start then sees it full)
                ns, f_cnt = _streak_ticks(nb, rn, at_hi - p, lcap - (lru_tail - hd), t, ii,
                                          S, stage, is_fetch_s, fsrc, gpu_used, host_used,
                                          prm, b_dest, c_fed)
                if b_dest == IN_CPU and (HOST - 1 - host_used) // nb < ns:
                    ns = (HOST - 1 - host_used) // nb
                if S[S_RESCHED] != 0:
                    if (wait - 1) // nb < ns:
                        ns = (wait - 1) // nb
                    if S[S_R_STARTED] == 0 and f_cnt[0] + f_cnt[3] == 0:
                        ns = 0
            if xl and deepum:
                m, wait, vt_d, lru_cur, v0 = _batch_move_xd(
                    p, nb * ns if ns >= 2 else nb, a_src, b_ev, b_dest, b_lo, b_hi, b_rq,
                    pstate, lru, S, tt, at_T, wait, vt_d, b_dnp, srt, lru_cur, dum_end)
            elif xl and b_rq:
                # victims of a required tensor, queued again as one run: the head record's
                # first pages (consecutive), flagged after the move
                hx = S[S_X_HEAD]
                v0 = lru[_u(hx * XW + X_LO)] if hx >= 0 else -1
                nbx = nb
                if hx >= 0 and lru[_u(hx * XW + X_HI)] - v0 < nbx:
                    nbx = lru[_u(hx * XW + X_HI)] - v0
                m, wait, vt_d = _batch_move_x(p, nbx, a_src, b_ev, b_dest, b_lo, b_hi, pstate,
                                              lru, S, tt, at_T, wait, vt_d)
                wait = _victims_requeued(pstate, v0, m, wait)
            elif xl:
                m, wait, vt_d = _batch_move_x(
                    p, nb * ns if ns >= 2 else nb, a_src, b_ev, b_dest, b_lo, b_hi, pstate,
                    lru, S, tt, at_T, wait, vt_d)
            else:
                m, lru_tail, lru_cur, lru_scan, wait, vt_d, v0 = _batch_move(
                    p, nb * ns if ns >= 2 else nb, a_src, b_ev, b_dnp, b_dest, b_lo, b_hi,
                    b_win, b_rq, deepum, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan,
                    wait, vt_d)
            if ns >= 2 and m > nb:
                # the whole ticks of a streak, settled as their ends would be one by one
                full = (m - 1) // nb
                f_in, f_in_ssd, f_in_cpu, f_out, f_out_ssd, f_out_cpu, f_alloc = f_cnt
                for _j in range(full):
                    _add_traffic(pcie, it, f_in, f_in_ssd, f_in_cpu, f_out, f_out_ssd,
                                 f_out_cpu, f_alloc)
                t += full * ii
                S[S_TICK_TIME] = t
                S[S_TICK_SEQ] = S[S_SEQ] + full - 1
                S[S_SEQ] += full
                qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, full * nb)
                at_d += full * nb
                m -= full * nb
                if a_src == IN_CPU:
                    host_used -= full * nb
                elif b_dest == IN_CPU:
                    host_used += full * nb
                    if host_used > host_peak:
                        host_peak = host_used
            tk_fresh = False
            if m > 0:
                fast_block = False
                at_d += m
                if b_ev and b_dest != NOT_PRESENT:
                    # host use just after the last victim went
                    h_last = host_used
                    if b_dest == IN_CPU:
                        h_last += 1 if a_src == IN_CPU else m
                        if h_last > host_peak:
                            host_peak = h_last
                        host_used += m
                    c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                        b_dest, c_out, c_out_ssd, c_out_cpu, c_fed, h_last, HOST,
                        CPU_CAP, SSD_CAP, m)
                if not b_ev:
                    gpu_used += m
                if a_src == IN_CPU:
                    host_used -= m
                    if c_fed == IN_SSD:
                        c_fed = NOT_KNOWN
                qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, m)
                if b_rq:
                    # the victims v0 .. v0 + m - 1 queued again (one push: the page loop's
                    # pushes of them one by one merge into it)
                    qt, rp, rn = _q_push_served(qb, S, q, qm, qh, qt, rp, rn, rq, v0, m)
                if is_fetch_s:
                    c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
                        fsrc, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP,
                        SSD_CAP, m)
                    if not is_pre_s and c_ffs != NOT_KNOWN and c_ffs != fsrc:
                        forced = True
                        continue
                else:
                    c_alloc += m
                if qh >= qt:
                    break
                continue
        # -- one page, p --
        vslot = -1
        v = -1
        dest = IN_CPU
        if gpu_used >= G:
            dnp = deepum and not is_pf_s and at_req == 0
            if xl:
                # (the extent list holds just the victims: its first page; DeepUM: `_xd_victim`)
                if deepum:
                    vslot, v = _xd_victim(dnp, lru, S, tt, srt, lru_cur, dum_end)
                    if vslot < 0:
                        break
                else:
                    xh = S[S_X_HEAD]
                    if xh < 0:
                        break
                    vslot = xh
                    v = lru[_u(xh * XW + X_LO)]
                vst0 = np.int64(pstate[_u(v)])
            else:
                vslot, v, vst0, tc_c, wt_lo, wt_hi, wt_win = _fast_victim(
                    dnp, deepum, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan,
                    dum_end, tc_c, wt_lo, wt_hi, wt_win)
            if vslot < 0:
                break
            if v < vt_lo or v >= vt_hi:
                if vt_d != 0:
                    tt[_u(vt_T), TT_RES] += vt_d
                    vt_d = 0
                tc_b, vt_T, vt_lo, vt_hi, vt_req = _tensor_at(tt, srt, tc_b, v)
                vt_alive = _is_alive(tt, vt_T, k)
            if deepum and not vt_alive:
                dest = NOT_PRESENT
            elif c_fed != NOT_KNOWN:
                dest = c_fed
            if dest == IN_CPU and host_used >= HOST:
                break
            if vt_req:
                # a required victim is queued again (to the queue of where it goes); the
                # general path takes it when that queue might be full
                rq = (Q_PF_CPU if dest == IN_CPU else
                      (Q_PF_SSD if dest == IN_SSD else Q_PF_ALLOC))
                if rq == q:
                    if qt - qh >= qm:
                        break
                elif S[S_QT + rq] - S[S_QH + rq] >= qm:
                    break
        # -- committed: page p goes now --
        fast_block = False
        tk_fresh = False
        qh, rp, rn = _run_pop(qb, q, qm, qh, qt, rp, rn, 1)
        if vslot >= 0:
            if xl:
                if deepum:
                    lru_cur = _xd_evict(dnp, lru, S, tt, vslot, v, 1, lru_cur)
                else:
                    _x_take(lru, S, tt, 1)
            else:
                if dnp or not deepum:
                    lru_cur = vslot + 1
                else:
                    lru_scan = vslot
                    if lru_cur == vslot:
                        lru_cur = vslot + 1
                lru[_u(vslot & lm)] = -1
            if dest == IN_CPU:
                host_used += 1
                if host_used > host_peak:
                    host_peak = host_used
            gpu_used -= 1
            if dest != NOT_PRESENT:
                c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                    dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP,
                    SSD_CAP, 1)
            if vt_req:
                qt, rp, rn = _q_push_served(qb, S, q, qm, qh, qt, rp, rn, rq, v, 1)
                vst = (vst0 & ~LOC_MASK) | dest | F_TRANSFER
                if not (vst & F_WAIT):
                    vst |= F_WAIT
                    wait += 1
                pstate[_u(v)] = vst
            else:
                pstate[_u(v)] = ((vst0 & ~LOC_MASK) | dest) & ~F_TRANSFER
                if dest == NOT_PRESENT and xl and S[P_RELEASE] != 0:
                    _release_dropped(pstate, v, v + 1, S)
            if (vst0 & RES_MASK) == IN_GPU:
                vt_d -= 1
        if a_src == IN_CPU:
            host_used -= 1
            if c_fed == IN_SSD:
                c_fed = NOT_KNOWN
        gpu_used += 1
        st0 = np.int64(pstate[_u(p)])
        if xl:
            wait = _x_arrive(lru, S, tt, pstate, at_T, p, 1, wait)
        else:
            if deepum and lru_cur < lru_tail:
                lru_cur = _cur_norm(lru, lm, pstate, lru_cur, lru_tail)
            lru_tail, lru_cur, wait = _lru_append(lru, lm, pstate, p, st0, lru_tail, lru_cur,
                                                  wait)
        if (st0 & RES_MASK) != IN_GPU:
            at_d += 1
        if is_fetch_s:
            c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
                fsrc, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, 1)
            if not is_pre_s and c_ffs != NOT_KNOWN and c_ffs != fsrc:
                forced = True
                continue
        else:
            c_alloc += 1
        if qh >= qt:
            break
    if vt_d != 0:
        tt[_u(vt_T), TT_RES] += vt_d
    if at_d != 0:
        tt[_u(at_T), TT_RES] += at_d
    S[S_QH + q] = qh
    if qh < qt:
        qb[q, _u(qh & qm), 0] = rp
        qb[q, _u(qh & qm), 1] = rn
    return (stage, t, fast_block, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu,
                                   c_alloc, c_ffs, c_fed),
            gpu_used, host_used, host_peak, wait, lru_tail, lru_cur, lru_scan, tc_a, tc_b, tc_c)


@_kernel_page
def _select_victim(deepum, pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan,
                   dum_end, tc_c):
    """Victim selection of the general path (§8) for a page that needs a GPU frame when the
    GPU is full (pf: a demand fetch, or a page of a required tensor). Returns the victim's
    LRU slot (-1: none) and the cursor, scan position, DeepUM END flag and window lookup
    cache after the search."""
    slot = -1
    if deepum and not pf:
        # §8.2 non-PF: from the cursor, skip window tensors; END is sticky (O-15)
        if dum_end == 0:
            s = lru_cur
            if s < hd:
                s = hd
            while s < lru_tail:
                e = lru[_u(s & lm)]
                if e >= 0:
                    vp = e >> GEN_SHIFT
                    vs = np.int64(pstate[_u(vp)])
                    if _live(vs, e):
                        tc_c = _tpos(srt, tc_c, vp)
                        if not tt[srt[1, _u(tc_c)], TT_WIN]:
                            slot = s
                            break
                s += 1
            if slot >= 0:
                lru_cur = slot + 1
            else:
                lru_cur = lru_tail
                dum_end = 1
        return slot, lru_cur, lru_scan, dum_end, tc_c
    if not deepum:
        # §8.1: first non-in-transfer page from the cursor, else from the head. Entries
        # before the cursor are never eligible (they were in transfer when passed, and such
        # pages only leave the list), so one scan from the cursor is the artifact's
        # scan-then-rescan.
        s = lru_cur
        if s < hd:
            s = hd
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vs = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if _eligible(vs, e):
                    slot = s
                    break
            s += 1
    if slot < 0:
        # (DeepUM PF: the first non-in-transfer page from the head.) The scan starts past
        # the entries an earlier one found ineligible: those can never become eligible
        # (tombstones stay dead until a compaction, and a GPU page in transfer leaves the
        # GPU before its flag clears), so this only saves rescanning a growing prefix
        # (quadratic in DeepUM).
        s = lru_scan
        if s < hd:
            s = hd
        while s < lru_tail:
            e = lru[_u(s & lm)]
            if e >= 0:
                vs = np.int64(pstate[_u(e >> GEN_SHIFT)])
                if _eligible(vs, e):
                    slot = s
                    break
            s += 1
        lru_scan = s
    if slot >= 0:
        if not deepum:
            lru_cur = slot + 1
        elif lru_cur == slot:
            lru_cur = slot + 1
    return slot, lru_cur, lru_scan, dum_end, tc_c


@_kernel_page
def _evict_page(v, dest, ev_slot, ev_pf, t, it, k, trace, prm, tt, srt, pstate, lru, qb, S, ev,
                c_out, c_out_ssd, c_out_cpu, c_fed, gpu_used, host_used, host_peak, wait,
                live_warn, lru_tail, lru_cur, lru_scan, tc_b):
    """§9.3 evict: page v leaves the GPU for dest (NOT_PRESENT: dropped). ev_slot is its LRU
    slot when it is a victim (ev_pf), -1 for a pre-eviction (its entry is then left stale).
    A page of a required tensor is queued again as a fault. Errors (a live page dropped by
    a pre-eviction, host overflow) go to S[S_ERROR]. Returns the tick's state after it."""
    HOST = prm.HOST
    lm = prm.lm
    tc_b = _tpos(srt, tc_b, v)
    T = srt[1, _u(tc_b)]
    st0 = np.int64(pstate[_u(v)])
    if dest == NOT_PRESENT and _is_alive(tt, T, k):
        if ev_pf:
            live_warn += 1
        else:
            S[S_ERROR] = E_DEAD_LIVE_EVICT
    n = 0
    overflow = False
    if dest == IN_CPU:
        if host_used >= HOST:
            S[S_ERROR] = E_HOST_OVERFLOW
            S[S_ERR_A] = v
            overflow = True
        else:
            host_used += 1
            if host_used > host_peak:
                host_peak = host_used
            n = 1
    elif dest == IN_SSD:
        n = 1
    if not overflow:
        if prm.xl:
            # the extent list: a victim is its first page; a pre-evicted page leaves it when
            # it was in it (resident, not in transfer)
            if ev_slot >= 0:
                _xd_take(lru, S, tt, ev_slot, v, 1)
            elif (st0 & RES_MASK) == IN_GPU:
                _x_remove(lru, S, tt, T, v, v + 1)
        elif ev_slot >= 0:
            lru[_u(ev_slot & lm)] = -1
        else:
            S[S_LRU_TAIL] = lru_tail
            S[S_LRU_CUR] = lru_cur
            S[S_LRU_SCAN] = lru_scan
            _lru_remove_unknown(lru, pstate, S, v)
            lru_tail = S[S_LRU_TAIL]
            lru_cur = S[S_LRU_CUR]
            lru_scan = S[S_LRU_SCAN]
        st = (np.int64(pstate[_u(v)]) & ~LOC_MASK) | dest
        gpu_used -= 1
        if n != 0:
            c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, prm.CPU_CAP,
                prm.SSD_CAP, 1)
        if trace:
            _emit_run(ev, S, S_OUT_OPEN, t, EV_EVICT, it, k, T, v, IN_GPU, dest,
                      1 if ev_slot >= 0 else 0)
        if tt[_u(T), TT_REQ]:
            if dest == IN_CPU:
                _q_push(qb, S, Q_PF_CPU, v, 1)
            elif dest == IN_SSD:
                _q_push(qb, S, Q_PF_SSD, v, 1)
            else:
                _q_push(qb, S, Q_PF_ALLOC, v, 1)
            st |= F_TRANSFER
            if not (st & F_WAIT):
                st |= F_WAIT
                wait += 1
        else:
            st &= ~F_TRANSFER
        pstate[_u(v)] = st
        if st == 0 and prm.xl and prm.deepum and S[P_RELEASE] != 0:
            _release_dropped(pstate, v, v + 1, S)
        if (st0 & RES_MASK) == IN_GPU:
            tt[_u(T), TT_RES] -= 1
    return (c_out, c_out_ssd, c_out_cpu, c_fed, gpu_used, host_used, host_peak, wait,
            live_warn, lru_tail, lru_cur, lru_scan, tc_b)


@_kernel_page
def _alloc_page(p, a_src, a_tensor, is_fetch, is_pf, t, it, k, trace, prm, tt, pstate, lru, S,
                ev,
                c_fed, gpu_used, host_used, wait, lru_tail, lru_cur, lru_scan):
    """§9.3 alloc_page: page p (at a_src, of tensor a_tensor) takes a free GPU frame, at the
    LRU tail (the list compacted first when it is full). Returns the tick's state after it."""
    lm = prm.lm
    if a_src == IN_CPU:
        host_used -= 1
        if c_fed == IN_SSD:
            c_fed = NOT_KNOWN
    gpu_used += 1
    st0 = np.int64(pstate[_u(p)])
    # (IN_GPU is written before a compaction, which reads the page states)
    pstate[_u(p)] = (st0 & ~LOC_MASK) | IN_GPU
    if prm.xl:
        wait = _x_arrive(lru, S, tt, pstate, a_tensor, p, 1, wait)
    else:
        if lru_tail - prm.hd >= prm.lcap:
            S[S_LRU_TAIL] = lru_tail
            S[S_LRU_CUR] = lru_cur
            S[S_LRU_SCAN] = lru_scan
            _lru_compact(lru, pstate, S)
            lru_tail = S[S_LRU_TAIL]
            lru_cur = S[S_LRU_CUR]
            lru_scan = S[S_LRU_SCAN]
        if prm.deepum and lru_cur < lru_tail:
            lru_cur = _cur_norm(lru, lm, pstate, lru_cur, lru_tail)
        lru_tail, lru_cur, wait = _lru_append(lru, lm, pstate, p, st0, lru_tail, lru_cur,
                                              wait)
    if (st0 & RES_MASK) != IN_GPU:
        tt[a_tensor, TT_RES] += 1
    if trace:
        _emit_run(ev, S, S_IN_OPEN, t, EV_FETCH if is_fetch else EV_ALLOC, it, k, a_tensor, p,
                  a_src, IN_GPU, 1 if is_pf else 0)
    return c_fed, gpu_used, host_used, wait, lru_tail, lru_cur, lru_scan


@_kernel_page
def _general_page(stage, q, t, it, k, trace, prm, tt, srt, pstate, lru, qb, S, ev, counters,
                  gpu_used, host_used, host_peak, wait, live_warn, lru_tail, lru_cur,
                  lru_scan, dum_end, tc_a, tc_b, tc_c):
    """General path of a batcher tick: the head page p of stage `stage`'s queue q, which the
    stage admits. A pre-eviction evicts p; an allocating stage gives p a GPU frame, after
    evicting a victim when the GPU is full (a prefetch page not where its queue says moves
    to the other prefetch queue instead; a stage without a victim is over). Returns the
    stage the tick goes on with and the tick's state. (The tick's counters travel as one
    tuple, `counters`: c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
    c_fed; with them one by one, the call would have more than 30 arguments, which CPython
    passes as *args, and Numba cannot inline such a call.)"""
    c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed = counters
    G = prm.G
    deepum = prm.deepum
    lm = prm.lm
    hd = prm.hd
    qm = qb.shape[1] - 1
    p = qb[q, _u(S[S_QH + q] & qm), 0]

    # ---- what happens to page p ----
    ev_v = -1
    ev_slot = -1
    ev_dest = 0
    ev_pf = False
    a_src = 0
    a_tensor = -1
    is_pf = True
    is_fetch = True
    fetch_src = IN_SSD
    if stage <= _G_PE_CPU:
        # pre-eviction
        ev_v = p
        if c_fed != NOT_KNOWN:
            ev_dest = c_fed
        else:
            ev_dest = IN_SSD if stage == _G_PE_SSD else IN_CPU
    else:
        if stage == _G_PRE_SSD or stage == _G_PRE_CPU:
            loc = np.int64(pstate[_u(p)]) & LOC_MASK
            want = IN_SSD if stage == _G_PRE_SSD else IN_CPU
            if loc != want:
                if loc == IN_CPU and stage == _G_PRE_SSD:
                    _q_push(qb, S, Q_PREFETCH_CPU, p, 1)
                elif loc == IN_SSD and stage == _G_PRE_CPU:
                    _q_push(qb, S, Q_PREFETCH_SSD, p, 1)
                _q_pop(qb, S, q)
                return (stage, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu,
                        c_alloc, c_ffs, c_fed), gpu_used, host_used, host_peak, wait,
                        live_warn, lru_tail, lru_cur, lru_scan, dum_end, tc_a, tc_b, tc_c)
            is_pf = False
            fetch_src = want
        elif stage == _G_PF_ALLOC or stage == _G_RS_ALLOC:
            is_fetch = False
        elif stage == _G_PREALLOC:
            is_fetch = False
            is_pf = False
        else:
            # demand fetches pop before allocating
            fetch_src = IN_SSD if (stage == _G_PF_SSD or stage == _G_RS_SSD) else IN_CPU
            _q_pop(qb, S, q)
        a_src = np.int64(pstate[_u(p)]) & LOC_MASK
        tc_a = _tpos(srt, tc_a, p)
        a_tensor = srt[1, _u(tc_a)]
        if gpu_used >= G:
            # ---- victim selection (§8) ----
            pf = is_pf or tt[a_tensor, TT_REQ] != 0
            if prm.xl:
                # (the extent list holds just the victims: its first page; DeepUM: from the
                # cursor, non-PF, where END is sticky (O-15), or the first page, PF; the
                # slot is the victim's record)
                if deepum:
                    slot, ev_v = _xd_victim(not pf, lru, S, tt, srt, lru_cur, dum_end)
                    if slot >= 0:
                        if not pf or lru_cur == ev_v:
                            lru_cur = _xd_after(lru, S, slot, ev_v + 1)
                    elif not pf and dum_end == 0:
                        lru_cur = -1
                        dum_end = 1
                else:
                    slot = S[S_X_HEAD]
                    if slot >= 0:
                        ev_v = lru[_u(slot * XW + X_LO)]
            else:
                slot, lru_cur, lru_scan, dum_end, tc_c = _select_victim(
                    deepum, pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan,
                    dum_end, tc_c)
            if slot < 0:
                if not (deepum and not pf):
                    S[S_ERROR] = E_NO_VICTIM
                return (_next_stage_after_failure(stage), (c_in, c_in_ssd, c_in_cpu, c_out,
                        c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed), gpu_used, host_used,
                        host_peak, wait, live_warn, lru_tail, lru_cur, lru_scan, dum_end,
                        tc_a, tc_b, tc_c)
            if not prm.xl:
                ev_v = lru[_u(slot & lm)] >> GEN_SHIFT
            ev_slot = slot
            ev_pf = True
            if deepum:
                tc_b = _tpos(srt, tc_b, ev_v)
                ev_dest = IN_CPU if _is_alive(tt, srt[1, _u(tc_b)], k) else NOT_PRESENT
            else:
                ev_dest = IN_CPU
            if ev_dest != NOT_PRESENT and c_fed != NOT_KNOWN:
                ev_dest = c_fed

    # ---- evict page ev_v to ev_dest (§9.3 evict) ----
    if ev_v >= 0:
        (c_out, c_out_ssd, c_out_cpu, c_fed, gpu_used, host_used, host_peak, wait, live_warn,
         lru_tail, lru_cur, lru_scan, tc_b) = _evict_page(
            ev_v, ev_dest, ev_slot, ev_pf, t, it, k, trace, prm, tt, srt, pstate, lru, qb, S, ev,
            c_out, c_out_ssd, c_out_cpu, c_fed, gpu_used, host_used, host_peak, wait,
            live_warn, lru_tail, lru_cur, lru_scan, tc_b)
        if stage <= _G_PE_CPU:
            _q_pop(qb, S, q)
            if S[S_ERROR] != E_NONE:
                stage = _G_PF_SSD
        elif S[S_ERROR] != E_NONE:
            stage = _next_stage_after_failure(stage)
        if stage <= _G_PE_CPU or S[S_ERROR] != E_NONE:
            return (stage, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc,
                    c_ffs, c_fed), gpu_used, host_used, host_peak, wait, live_warn, lru_tail,
                    lru_cur, lru_scan, dum_end, tc_a, tc_b, tc_c)

    # ---- give page p a GPU frame (§9.3 alloc_page) ----
    c_fed, gpu_used, host_used, wait, lru_tail, lru_cur, lru_scan = _alloc_page(
        p, a_src, a_tensor, is_fetch, is_pf, t, it, k, trace, prm, tt, pstate, lru, S, ev, c_fed,
        gpu_used, host_used, wait, lru_tail, lru_cur, lru_scan)

    # ---- stage bookkeeping ----
    if is_fetch:
        c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
            fetch_src, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, prm.CPU_CAP, prm.SSD_CAP, 1)
        if stage == _G_PRE_SSD or stage == _G_PRE_CPU:
            _q_pop(qb, S, q)
        elif c_ffs != NOT_KNOWN and c_ffs != fetch_src:
            stage += 1
    else:
        c_alloc += 1
        _q_pop(qb, S, q)
    return (stage, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
            c_fed), gpu_used, host_used, host_peak, wait, live_warn, lru_tail, lru_cur,
            lru_scan, dum_end, tc_a, tc_b, tc_c)


@_kernel_stage
def _tick_end(t, it, k, trace, S, pcie, bnd, ev, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd,
              c_out_cpu, c_alloc, wait):
    """The end of a busy tick at time t (§9.6): it opens a transfer period if none is open,
    adds its traffic to iteration it's, resumes the waiting kernel when no fault is left, and
    advances the tick clock. Returns the next tick's time and whether the kernel resumed."""
    if not S[S_XFER]:
        n = S[S_NBND]
        bnd[n, 0] = it
        bnd[n, 1] = t
        bnd[n, 2] = 1
        S[S_NBND] = n + 1
        S[S_XFER] = 1
        if trace:
            _emit(ev, S, t, EV_TRANSFER, it, k, -1, -1, -1, -1, -1, 1)
    _add_traffic(pcie, it, c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc)
    resumed = S[S_RESCHED] != 0 and _no_faults_queued(S) and wait == 0
    if resumed:
        _resume(t, S)
    t += S[P_II]
    S[S_TICK_TIME] = t
    S[S_TICK_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    return t, resumed


@_kernel_stage
def _next_tick_busy(t, S, bnd_cap, half):
    """Whether run_engine's next event (same tests) would be another busy tick at time t,
    with nothing to drain or grow first: no pause due, some queue holding a page, none past
    half full, and no kernel event due before it."""
    if (S[S_NBND] + 4 > bnd_cap or S[S_NEV] >= S[S_EV_PAUSE]
            or S[S_NSTAT] >= S[S_STAT_PAUSE] or S[S_X_NFREE] < S[P_XMARGIN]):
        return False
    busy = False
    for q in range(NQ):
        qlen = S[S_QT + q] - S[S_QH + q]
        if qlen > half:
            return False
        if qlen > 0:
            busy = True
    if not busy:
        return False
    if S[S_KB_PENDING] and (S[S_KB_TIME] < t or (S[S_KB_TIME] == t
                                                and S[S_KB_SEQ] < S[S_TICK_SEQ])):
        return False
    return True


# ----------------------------------------------------------------------------------------
# A busy tick replayed (P_REPLAY: bulk engine, extent LRU, untraced; issue 23)
#
# Most busy ticks that the streaks do not settle repeat the tick before them: each queue that
# holds pages gives the same number of pages, because every stage stops at a per-tick cap.
# What a busy tick does is a function of its start: the fresh counters (from the host use),
# the GPU use (read only by the stages that give frames), which queues hold pages, the
# location of the pages they take and whether those pages' tensors are required (a
# pre-eviction's pages), and, for the pages that find no free frame, the list's first pages
# (whether their tensors are required). So a tick that ran stage by stage with no page left
# to the general path, no in-place continuation, no page queued again, each queue's pages
# taken from its head run, all of them at one place (S_RP_LOC: outside the GPU for the
# queues that give frames, in it for the pre-evictions), and the host use (and the GPU use,
# when it gave frames) back where they began or below their lines all through, is a
# template: the next tick that starts the same way (the same queues holding pages, each head
# run longer than the template took, those pages at the template's place and of one tensor,
# the host and GPU use in the template's mode, no required tensor among the pages
# pre-evicted or among the victims, and no victim of a tensor being pre-evicted) takes the
# same pages from each queue. Such a tick is then carried out directly (`_rp_tick`): its pages
# move as the stages would move them one by one, and its counters must come out equal to the
# template's (else E_REPLAY).
# ----------------------------------------------------------------------------------------
# the queues whose pages take GPU frames (bits 0-5)
_Q_ALLOC_MASK = 63
# the most pages a template takes from one queue (a tick that takes more pays its set-up
# over them anyway; `_rp_begin` reads at most this many pages of each queue)
_RP_MAX = 256


@_kernel
def _rp_canon(pstate, p, n, loc):
    """How many of pages p, p+1, ... (at most n) lie at loc, from the first on."""
    j = 0
    while j < n and (np.int64(pstate[_u(p + j)]) & LOC_MASK) == loc:
        j += 1
    return j


@_kernel_stage
def _rp_begin(S, qb, pstate, gpu_used, host_used):
    """A busy tick that runs stage by stage starts: record what a template needs of its start
    (each queue's head and tail slots, the head run's first page and how many of its pages,
    up to more than a tick can take, are at the place of its first; the host and GPU use;
    S_SEQ). Returns the mask of the queues that hold pages."""
    qm = qb.shape[1] - 1
    mask = 0
    for q in range(NQ):
        qh = S[S_QH + q]
        qt = S[S_QT + q]
        S[S_RP_QH + q] = qh
        S[S_RP_QT + q] = qt
        if qt > qh:
            mask |= 1 << q
            rp = qb[q, _u(qh & qm), 0]
            rn = qb[q, _u(qh & qm), 1]
            S[S_RP_P0 + q] = rp
            loc = np.int64(pstate[_u(rp)]) & LOC_MASK
            S[S_RP_LOC + q] = loc
            S[S_RP_CN + q] = _rp_canon(pstate, rp, min(rn, _RP_MAX), loc)
    S[S_RP_MASK] = -1
    S[S_RP_HOST] = host_used
    S[S_RP_GPU] = gpu_used
    S[S_RP_SEQ] = S[S_SEQ]
    return mask


@_kernel
def _rp_host_ok(S, host_used):
    """Whether the host use lets the template's tick run again: the template's start when it
    ended there too, or low enough that the pages the template evicted to the host leave it
    below the line (the tick then compares the host use with the line as the template did)."""
    hmode = S[S_RP_HMODE]
    return (((hmode & 1) != 0 and host_used == S[S_RP_HOST])
            or ((hmode & 2) != 0 and host_used + S[S_RP_C + 5] < S[P_HOST]))


@_kernel
def _rp_shared(S, qb, qm, mask, mult):
    """Whether two of the template's queues at one place share a page among their next mult
    times the template's pages (a page queued twice: the later stage would find it moved;
    the engine never queues a page twice, so this guard does not fire)."""
    for a in range(NQ):
        na = mult * S[S_RP_N + a] if (mask >> a) & 1 else 0
        if na == 0:
            continue
        pa = qb[a, _u(S[S_QH + a] & qm), 0]
        for b in range(a + 1, NQ):
            nb = mult * S[S_RP_N + b] if (mask >> b) & 1 else 0
            if nb == 0 or S[S_RP_LOC + b] != S[S_RP_LOC + a]:
                continue
            pb = qb[b, _u(S[S_QH + b] & qm), 0]
            if pa < pb + nb and pb < pa + na:
                return True
    return False


@_kernel_stage
def _rp_end(S, qb, mask, n_gen, gpu_used, host_used, c_in, c_in_ssd, c_in_cpu, c_out,
            c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed):
    """The busy tick begun at `_rp_begin` has run its stages (n_gen pages on the general path):
    it becomes the template when it qualifies (see above), else there is none."""
    if n_gen != 0 or S[S_SEQ] != S[S_RP_SEQ] or S[S_ERROR] != E_NONE:
        return
    # the host use: back where it began, or below the line all through (it rises only by
    # the pages evicted to the host)
    h0 = S[S_RP_HOST]
    hmode = (1 if host_used == h0 else 0) | (2 if h0 + c_out_cpu < S[P_HOST] else 0)
    if hmode == 0:
        return
    alloc = (mask & _Q_ALLOC_MASK) != 0
    g0 = S[S_RP_GPU]
    gmode = 4
    if alloc:
        # the GPU use: back where it began, or below the frames all through (it rises only
        # by the pages given frames)
        gmode = (1 if gpu_used == g0 else 0) | (2 if g0 + c_alloc < S[P_G] else 0)
        if gmode == 0:
            return
    if (mask & (mask - 1)) == 0 and alloc:
        return                      # one queue giving frames: the fetch path's streaks
    qm = qb.shape[1] - 1
    total = 0
    for q in range(NQ):
        if S[S_QT + q] != S[S_RP_QT + q]:
            return                          # a page was queued again
        n = 0
        if (mask >> q) & 1:
            qh = S[S_QH + q]
            if qh != S[S_RP_QH + q]:
                return                      # its head run was used up
            n = qb[q, _u(qh & qm), 0] - S[S_RP_P0 + q]
            if n > S[S_RP_CN + q]:
                return                      # pages at two places
            if (S[S_RP_LOC + q] == IN_GPU) != (q >= Q_PREEVICT_SSD):
                return                      # (the general path's)
        S[S_RP_N + q] = n
        total += n
    if total == 0:
        return
    S[S_RP_C] = c_in
    S[S_RP_C + 1] = c_in_ssd
    S[S_RP_C + 2] = c_in_cpu
    S[S_RP_C + 3] = c_out
    S[S_RP_C + 4] = c_out_ssd
    S[S_RP_C + 5] = c_out_cpu
    S[S_RP_C + 6] = c_alloc
    S[S_RP_C + 7] = c_ffs
    S[S_RP_C + 8] = c_fed
    S[S_RP_GMODE] = gmode
    S[S_RP_GNET] = gpu_used - g0
    S[S_RP_PROG] = 0
    S[S_RP_HMODE] = hmode
    S[S_RP_HNET] = host_used - h0
    S[S_RP_MASK] = mask


@_kernel_stage
def _rp_applies(S, qb, pstate, lru, tt, srt, gpu_used, tc_a, G):
    """Whether the busy tick starting now is the template's again (the host use is checked by
    the caller): the same queues hold pages, each head run is longer than the template took
    and those pages are at the template's place, of one tensor (kept in S_RP_T..),
    not required when pre-evicted; the pages that find no free frame have as many listed
    pages ahead of them, none of a required tensor or of a tensor being pre-evicted. Returns
    the answer and the lookup cache."""
    mask = S[S_RP_MASK]
    gmode = S[S_RP_GMODE]
    if not (gmode == 4 or ((gmode & 1) != 0 and gpu_used == S[S_RP_GPU])
            or ((gmode & 2) != 0 and gpu_used + S[S_RP_C + 6] < G)):
        return False, tc_a
    qm = qb.shape[1] - 1
    pe = 0
    na = 0
    pe_a = -1
    pe_b = -1
    for q in range(NQ):
        holds = S[S_QT + q] > S[S_QH + q]
        if holds != (((mask >> q) & 1) == 1):
            return False, tc_a
        n = S[S_RP_N + q]
        if not holds or n == 0:
            continue
        slot = _u(S[S_QH + q] & qm)
        rp = qb[q, slot, 0]
        if qb[q, slot, 1] <= n:
            return False, tc_a
        if rp < S[S_RP_TLO + q] or rp + n > S[S_RP_THI + q]:
            tc_a, T, lo, hi, req = _tensor_at(tt, srt, tc_a, rp)
            S[S_RP_T + q] = T
            S[S_RP_TLO + q] = lo
            S[S_RP_THI + q] = hi
            if rp + n > hi:
                return False, tc_a
        if _rp_canon(pstate, rp, n, S[S_RP_LOC + q]) < n:
            return False, tc_a
        if q >= Q_PREEVICT_SSD:
            T = S[S_RP_T + q]
            if tt[_u(T), TT_REQ] != 0:
                return False, tc_a
            pe += n
            if pe_a < 0:
                pe_a = T
            else:
                pe_b = T
        else:
            na += n
    if _rp_shared(S, qb, qm, mask, 1):
        return False, tc_a
    free = G - (gpu_used - pe)
    need = na - free if na > free else 0
    h = S[S_X_HEAD]
    while need > 0:
        if h < 0:
            return False, tc_a
        b = h * XW
        T = lru[_u(b + X_T)]
        if tt[_u(T), TT_REQ] != 0 or T == pe_a or T == pe_b:
            return False, tc_a
        need -= lru[_u(b + X_HI)] - lru[_u(b + X_LO)]
        h = lru[_u(b + X_NEXT)]
    return True, tc_a


@_kernel
def _rp_note(S, q, dest):
    """Record in queue q's program that its stage's next evicted page went to dest (see
    S_RP_PD). Returns False when that makes a third run."""
    b = S_RP_PD + 4 * q
    if S[b + 1] == 0:
        S[b] = dest
        S[b + 1] = 1
    elif S[b + 3] == 0 and S[b] == dest:
        S[b + 1] += 1
    elif S[b + 3] == 0:
        S[b + 2] = dest
        S[b + 3] = 1
    elif S[b + 2] == dest:
        S[b + 3] += 1
    else:
        return False
    return True


@_kernel
def _rp_evict(pstate, p, n, dest):
    """Pages p .. p + n - 1 go from the GPU to dest (transfer flag cleared). Returns how many
    of them were resident and not in transfer."""
    res = 0
    for v in range(p, p + n):
        st = np.int64(pstate[_u(v)])
        if (st & RES_MASK) == IN_GPU:
            res += 1
        pstate[_u(v)] = (st & ~(LOC_MASK | F_TRANSFER)) | dest
    return res


@_kernel
def _rp_take(lru, S, tt, pstate, n, dest):
    """The list's first n pages are evicted to dest, a head extent at a time."""
    while n > 0:
        b = S[S_X_HEAD] * XW
        lo = lru[_u(b + X_LO)]
        j = lru[_u(b + X_HI)] - lo
        if j > n:
            j = n
        T = lru[_u(b + X_T)]
        res = _rp_evict(pstate, lo, j, dest)
        _x_take(lru, S, tt, j)
        tt[_u(T), TT_RES] -= res
        n -= j


@_kernel_stage
def _rp_tick_prog(S, qb, pstate, lru, tt, gpu_used, host_used, host_peak, wait):
    """`_rp_tick` once the template's program is recorded (by its first replay, which went
    page by page and matched the template): the tick's pages move by the program's runs
    (`_rp_move`); the counters are the template's, the host and GPU use change by the
    template's amounts, the host peak by its rise."""
    wait = _rp_move(S, qb, pstate, lru, tt, 1, 0, -2, wait)
    S[S_RP_COUNT] += 1
    if host_used + S[S_RP_HEXC] > host_peak:
        host_peak = host_used + S[S_RP_HEXC]
    return ((S[S_RP_C], S[S_RP_C + 1], S[S_RP_C + 2], S[S_RP_C + 3], S[S_RP_C + 4],
             S[S_RP_C + 5], S[S_RP_C + 6], S[S_RP_C + 7], S[S_RP_C + 8]),
            gpu_used + S[S_RP_GNET], host_used + S[S_RP_HNET], host_peak, wait)


@_kernel_stage
def _rp_tick(S, qb, pstate, lru, tt, prm, gpu_used, host_used, host_peak, wait):
    """Carry out the template's tick again (`_rp_applies` said it applies): the stages in
    order, each taking the template's number of pages from its queue's head run, each page
    as the stages move it (pre-evicted to the forced destination or the stage's own; or
    given a frame, with the list's first page as its victim when the GPU is full, evicted to
    the forced destination or the host), the counters kept as the stages keep them. The
    counters, host and GPU use must end as the template's (else E_REPLAY). Returns the
    counters and the state after the tick."""
    G = prm.G
    HOST = prm.HOST
    CPU_CAP = prm.CPU_CAP
    SSD_CAP = prm.SSD_CAP
    if S[S_RP_PROG] == 1:
        return _rp_tick_prog(S, qb, pstate, lru, tt, gpu_used, host_used, host_peak, wait)
    mask = S[S_RP_MASK]
    qm = qb.shape[1] - 1
    h0 = host_used
    g0 = gpu_used
    hexc = 0
    prog = 1
    for i in range(S_RP_PD, S_RP_PD + 4 * NQ):
        S[i] = 0
    (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
     c_fed) = _fresh_counters(host_used, HOST)
    for stage in range(_G_PE_SSD, _G_RS_SSD):
        q = _STAGE_QUEUE[stage]
        if not (mask >> q) & 1:
            continue
        n = S[S_RP_N + q]
        if n == 0:
            continue
        slot = _u(S[S_QH + q] & qm)
        rp = qb[q, slot, 0]
        T = S[S_RP_T + q]
        if stage <= _G_PE_CPU:
            res = 0
            for p in range(rp, rp + n):
                st = np.int64(pstate[_u(p)])
                if c_fed != NOT_KNOWN:
                    dest = c_fed
                else:
                    dest = IN_SSD if stage == _G_PE_SSD else IN_CPU
                if dest == IN_CPU:
                    host_used += 1
                    if host_used > host_peak:
                        host_peak = host_used
                    if host_used - h0 > hexc:
                        hexc = host_used - h0
                if not _rp_note(S, q, dest):
                    prog = -1
                if (st & RES_MASK) == IN_GPU:
                    res += 1
                pstate[_u(p)] = (st & ~(LOC_MASK | F_TRANSFER)) | dest
                gpu_used -= 1
                c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                    dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP,
                    SSD_CAP, 1)
            if res > 0:
                _x_remove(lru, S, tt, T, rp, rp + n)
                tt[_u(T), TT_RES] -= res
        else:
            is_fetch = stage != _G_PF_ALLOC and stage != _G_PREALLOC
            fsrc = IN_SSD if (stage == _G_PF_SSD or stage == _G_PRE_SSD) else IN_CPU
            src = S[S_RP_LOC + q]
            # the victims, in list order (none of them arrives in this tick)
            h = -1
            v = 0
            v_hi = 0
            v_T = 0
            v_k = 0
            v_res = 0
            for _j in range(n):
                if gpu_used >= G:
                    if v == v_hi:
                        if v_k > 0:
                            _x_take(lru, S, tt, v_k)
                            tt[_u(v_T), TT_RES] -= v_res
                        h = S[S_X_HEAD]
                        v = lru[_u(h * XW + X_LO)]
                        v_hi = lru[_u(h * XW + X_HI)]
                        v_T = lru[_u(h * XW + X_T)]
                        v_k = 0
                        v_res = 0
                    dest = c_fed if c_fed != NOT_KNOWN else IN_CPU
                    vst = np.int64(pstate[_u(v)])
                    pstate[_u(v)] = (vst & ~(LOC_MASK | F_TRANSFER)) | dest
                    if (vst & RES_MASK) == IN_GPU:
                        v_res += 1
                    v += 1
                    v_k += 1
                    if not _rp_note(S, q, dest):
                        prog = -1
                    if dest == IN_CPU:
                        host_used += 1
                        if host_used > host_peak:
                            host_peak = host_used
                        if host_used - h0 > hexc:
                            hexc = host_used - h0
                    gpu_used -= 1
                    c_out, c_out_ssd, c_out_cpu, c_fed = _count_out(
                        dest, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, HOST, CPU_CAP,
                        SSD_CAP, 1)
                if src == IN_CPU:
                    host_used -= 1
                    if c_fed == IN_SSD:
                        c_fed = NOT_KNOWN
                gpu_used += 1
                if is_fetch:
                    c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs = _count_in(
                        fsrc, c_in, c_in_ssd, c_in_cpu, c_alloc, c_ffs, CPU_CAP, SSD_CAP, 1)
                else:
                    c_alloc += 1
            if v_k > 0:
                _x_take(lru, S, tt, v_k)
                tt[_u(v_T), TT_RES] -= v_res
            wait = _x_arrive(lru, S, tt, pstate, T, rp, n, wait)
            tt[_u(T), TT_RES] += n
        qb[q, slot, 0] = rp + n
        qb[q, slot, 1] -= n
    S[S_RP_COUNT] += 1
    if (c_in != S[S_RP_C] or c_in_ssd != S[S_RP_C + 1] or c_in_cpu != S[S_RP_C + 2]
            or c_out != S[S_RP_C + 3] or c_out_ssd != S[S_RP_C + 4]
            or c_out_cpu != S[S_RP_C + 5] or c_alloc != S[S_RP_C + 6]
            or c_ffs != S[S_RP_C + 7] or c_fed != S[S_RP_C + 8]
            or host_used != h0 + S[S_RP_HNET]
            or gpu_used != g0 + S[S_RP_GNET]):
        S[S_ERROR] = E_REPLAY
    S[S_RP_PROG] = prog
    S[S_RP_HEXC] = hexc
    return ((c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
            gpu_used, host_used, host_peak, wait)


@_kernel
def _rp_move(S, qb, pstate, lru, tt, k, nv, vd, wait):
    """The pages of k ticks of the template (its program recorded) move, as k replays one
    after another would move them: the pre-evicted pages by their runs of one destination;
    the victims, the list's first pages, by the runs of the program (all at once when they
    have one destination vd, nv a tick; vd = -2: tick by tick, stage by stage); the arriving
    pages joining the list tick by tick, stage by stage; the queues' head runs and the
    tensors' resident counts after them. Returns the wait-set size."""
    mask = S[S_RP_MASK]
    qm = qb.shape[1] - 1
    for stage in range(_G_PE_SSD, _G_PE_CPU + 1):
        q = _STAGE_QUEUE[stage]
        n = S[S_RP_N + q] if (mask >> q) & 1 else 0
        if n == 0:
            continue
        b = S_RP_PD + 4 * q
        rp = qb[q, _u(S[S_QH + q] & qm), 0]
        if S[b + 3] == 0:
            res = _rp_evict(pstate, rp, k * n, S[b])
        else:
            res = 0
            for j in range(k):
                p = rp + j * n
                res += _rp_evict(pstate, p, S[b + 1], S[b])
                res += _rp_evict(pstate, p + S[b + 1], S[b + 3], S[b + 2])
        if res > 0:
            T = S[S_RP_T + q]
            _x_remove(lru, S, tt, T, rp, rp + k * n)
            tt[_u(T), TT_RES] -= res
    if nv > 0 and vd >= 0:
        _rp_take(lru, S, tt, pstate, k * nv, vd)
    for j in range(k):
        for stage in range(_G_PF_SSD, _G_RS_SSD):
            q = _STAGE_QUEUE[stage]
            n = S[S_RP_N + q] if (mask >> q) & 1 else 0
            if n == 0:
                continue
            if vd == -2:
                b = S_RP_PD + 4 * q
                _rp_take(lru, S, tt, pstate, S[b + 1], S[b])
                _rp_take(lru, S, tt, pstate, S[b + 3], S[b + 2])
            rp = qb[q, _u(S[S_QH + q] & qm), 0]
            wait = _x_arrive(lru, S, tt, pstate, S[S_RP_T + q], rp + j * n, n, wait)
    for q in range(NQ):
        n = S[S_RP_N + q] if (mask >> q) & 1 else 0
        if n == 0:
            continue
        slot = _u(S[S_QH + q] & qm)
        qb[q, slot, 0] += k * n
        qb[q, slot, 1] -= k * n
        if q < Q_PREEVICT_SSD:
            tt[_u(S[S_RP_T + q]), TT_RES] += k * n
    return wait


@_kernel_stage
def _rp_batch(t, it, S, qb, pstate, lru, tt, srt, pcie, prm, gpu_used, host_used, host_peak,
              wait, tc_a):
    """The ticks after a replayed one at once, when the template's program is recorded: as
    many (k >= 2) as the event loop would take one after another, busy, each the template's
    again (`_rp_applies`' tests for all of them: each queue's head run and tensor hold k times
    the template's pages, all at the template's place; the host and GPU use stay within
    their modes; the list has k times the victims ahead of the new pages, none of a required
    or pre-evicted tensor; no kernel event before the last; the free extent records last; no
    resume: a demand queue holds pages, or the kernel is not waiting). Their pages move as k
    replays would move them (the pages that arrive join the list tick by tick, stage by
    stage, as they would), their ends are settled in closed form. The first tick, at t, is
    known to be busy. Returns k (0: none) and the state after them."""
    mask = S[S_RP_MASK]
    G = prm.G
    HOST = prm.HOST
    ii = S[P_II]
    qm = qb.shape[1] - 1
    none = (0, t, gpu_used, host_used, host_peak, wait, tc_a)
    if S[S_XFER] == 0 or ((mask & 7) == 0 and S[S_RESCHED] != 0):
        return none
    k = np.int64(1) << 40
    if S[S_KB_PENDING]:
        kk = (S[S_KB_TIME] - t - 1) // ii + 1
        if kk < k:
            k = kk
    # the host and GPU use at each tick's start
    hnet = S[S_RP_HNET]
    hmode = S[S_RP_HMODE]
    if not ((hmode & 1) != 0 and host_used == S[S_RP_HOST] and hnet == 0):
        if (hmode & 2) == 0:
            return none
        room = HOST - 1 - S[S_RP_C + 5] - host_used
        if room < 0:
            return none
        if hnet > 0 and room // hnet + 1 < k:
            k = room // hnet + 1
    gmode = S[S_RP_GMODE]
    gnet = S[S_RP_GNET]
    if gmode != 4 and not ((gmode & 1) != 0 and gpu_used == S[S_RP_GPU] and gnet == 0):
        if (gmode & 2) == 0:
            return none
        room = G - 1 - S[S_RP_C + 6] - gpu_used
        if room < 0:
            return none
        if gnet > 0 and room // gnet + 1 < k:
            k = room // gnet + 1
    # the queues
    nseg = 0
    nv = 0          # victims of a tick
    vd = -1         # their one destination (-2: more than one)
    pe_a = -1
    pe_b = -1
    for q in range(NQ):
        holds = S[S_QT + q] > S[S_QH + q]
        if holds != (((mask >> q) & 1) == 1):
            return none
        n = S[S_RP_N + q]
        if not holds or n == 0:
            continue
        nseg += 1
        slot = _u(S[S_QH + q] & qm)
        rp = qb[q, slot, 0]
        kk = (qb[q, slot, 1] - 1) // n
        if kk < k:
            k = kk
        if rp < S[S_RP_TLO + q] or rp >= S[S_RP_THI + q]:
            tc_a, T, lo, hi, req = _tensor_at(tt, srt, tc_a, rp)
            S[S_RP_T + q] = T
            S[S_RP_TLO + q] = lo
            S[S_RP_THI + q] = hi
        kk = (S[S_RP_THI + q] - rp) // n
        if kk < k:
            k = kk
        if k < 2:
            return none
        kk = _rp_canon(pstate, rp, k * n, S[S_RP_LOC + q]) // n
        if kk < k:
            k = kk
        b = S_RP_PD + 4 * q
        if q >= Q_PREEVICT_SSD:
            T = S[S_RP_T + q]
            if tt[_u(T), TT_REQ] != 0:
                return none
            if pe_a < 0:
                pe_a = T
            else:
                pe_b = T
        else:
            for r in range(2):
                if S[b + 2 * r + 1] > 0:
                    d = S[b + 2 * r]
                    vd = d if (vd == -1 or vd == d) else -2
                    nv += S[b + 2 * r + 1]
    if k < 2:
        return none
    kk = 1 + (S[S_X_NFREE] - S[P_XMARGIN]) // nseg
    if kk < k:
        k = kk
    if k < 2:
        return none
    if _rp_shared(S, qb, qm, mask, k):
        return none
    if nv > 0:
        # listed pages ahead of the new ones, none of a required or pre-evicted tensor
        have = 0
        h = S[S_X_HEAD]
        while have < k * nv and h >= 0:
            bb = h * XW
            T = lru[_u(bb + X_T)]
            if tt[_u(T), TT_REQ] != 0 or T == pe_a or T == pe_b:
                break
            have += lru[_u(bb + X_HI)] - lru[_u(bb + X_LO)]
            h = lru[_u(bb + X_NEXT)]
        if have // nv < k:
            k = have // nv
        if k < 2:
            return none
    # ---- k ticks ----
    wait = _rp_move(S, qb, pstate, lru, tt, k, nv, vd, wait)
    # ---- their ends (`_tick_end`: the transfer period is open, no resume) ----
    for _j in range(k):
        _add_traffic(pcie, it, S[S_RP_C], S[S_RP_C + 1], S[S_RP_C + 2], S[S_RP_C + 3],
                     S[S_RP_C + 4], S[S_RP_C + 5], S[S_RP_C + 6])
    h_top = host_used + (k - 1) * hnet if hnet > 0 else host_used
    if h_top + S[S_RP_HEXC] > host_peak:
        host_peak = h_top + S[S_RP_HEXC]
    t += k * ii
    S[S_TICK_TIME] = t
    S[S_TICK_SEQ] = S[S_SEQ] + k - 1
    S[S_SEQ] += k
    S[S_RP_COUNT] += k
    return k, t, gpu_used + k * gnet, host_used + k * hnet, host_peak, wait, tc_a


@_kernel_stage
def _rp_ticks(t, it, k, S, qb, pstate, lru, tt, srt, pcie, bnd, ev, prm, gpu_used, host_used,
              host_peak, wait, tc_a, half):
    """Busy ticks from time t carried out as the template's (`_rp_applies`, `_rp_tick`), each
    ended as `_busy_ticks` ends a tick, while they apply and the event loop would take the
    next tick next. Returns how many, whether the next tick is busy too (and may run in
    `_busy_ticks`), the tick time, the last tick's counters and the state."""
    n = 0
    go_on = True
    counters = (0, 0, 0, 0, 0, 0, 0, NOT_KNOWN, NOT_KNOWN)
    while _rp_host_ok(S, host_used):
        ok, tc_a = _rp_applies(S, qb, pstate, lru, tt, srt, gpu_used, tc_a, prm.G)
        if not ok:
            break
        counters, gpu_used, host_used, host_peak, wait = _rp_tick(
            S, qb, pstate, lru, tt, prm, gpu_used, host_used, host_peak, wait)
        c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed = counters
        n += 1
        t, resumed = _tick_end(t, it, k, False, S, pcie, bnd, ev, c_in, c_in_ssd, c_in_cpu,
                               c_out, c_out_ssd, c_out_cpu, c_alloc, wait)
        if resumed or S[S_ERROR] != E_NONE or not _next_tick_busy(t, S, bnd.shape[0], half):
            go_on = False
            break
        S[S_IN_OPEN] = -1
        S[S_OUT_OPEN] = -1
        if S[S_RP_PROG] == 1:
            kb, t, gpu_used, host_used, host_peak, wait, tc_a = _rp_batch(
                t, it, S, qb, pstate, lru, tt, srt, pcie, prm, gpu_used, host_used, host_peak,
                wait, tc_a)
            if kb > 0:
                n += kb
                if not _next_tick_busy(t, S, bnd.shape[0], half):
                    go_on = False
                    break
    return n, go_on, t, counters, gpu_used, host_used, host_peak, wait, tc_a


@_kernel
def _busy_ticks(t, tt, srt, pstate, lru, qb, S, pcie, bnd, ev):
    """Busy batcher ticks from time t (§9.2, §9.3): ticks that find a queued page. Runs the
    stages of the tick, its end (transfer boundary, per-iteration traffic, the resume
    check of §9.6) and advances the tick clock as the event loop would; then, untraced,
    goes on with the next tick as long as the event loop would choose that tick next and
    it is busy too (no kernel event due before it, nothing to drain or grow), so that a run
    of busy ticks pays the set-up below once. The per-tick counters of the last tick are
    left in S[C_*].

    The hot scalar state (per-tick counters, memory use, wait-set size, LRU positions,
    lookup caches) is kept in local variables for the whole run of ticks, passed to and
    returned by the stage functions, and written back to S at the end."""
    prm = _tick_params(S)
    HOST = prm.HOST
    trace = S[P_TRACE] != 0
    it = S[S_CUR_ITER]
    k = S[S_CUR_KERNEL]
    gpu_used = S[S_GPU_USED]
    host_used = S[S_HOST_USED]
    host_peak = S[S_HOST_PEAK]
    wait = S[S_WAIT]
    live_warn = S[S_LIVE_WARN]
    lru_tail = S[S_LRU_TAIL]
    lru_cur = S[S_LRU_CUR]
    lru_scan = S[S_LRU_SCAN]
    dum_end = S[S_DEEPUM_END]
    tc_a = S[S_TC_A]
    tc_b = S[S_TC_B]
    tc_c = S[S_TC_C]
    half = qb.shape[1] // 2
    fast = not trace
    replay = fast and S[P_REPLAY] != 0
    while True:
        # ---- a busy tick at time t (§9.2) ----
        S[S_IN_OPEN] = -1
        S[S_OUT_OPEN] = -1
        if replay and S[S_RP_MASK] >= 0 and _rp_host_ok(S, host_used):
            # ---- the template's tick again, and the ones after it ----
            (n_rp, go_on, t, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc,
                              c_ffs, c_fed),
             gpu_used, host_used, host_peak, wait, tc_a) = _rp_ticks(
                t, it, k, S, qb, pstate, lru, tt, srt, pcie, bnd, ev, prm, gpu_used, host_used,
                host_peak, wait, tc_a, half)
            if n_rp > 0 and not go_on:
                break
            # (else the next tick, if any replayed, is not the template's: it runs below)
        (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
         c_fed) = _fresh_counters(host_used, HOST)
        rp_mask = 0
        n_gen = 0
        if replay:
            rp_mask = _rp_begin(S, qb, pstate, gpu_used, host_used)
        fast_block = False      # the general path takes the stage's next page
        rescue = False
        stage = _G_PE_SSD
        while stage < _G_END:
            stage, q, ok, rescue = _stage_admission(
                stage, rescue, S, prm, wait, gpu_used, host_used, c_in, c_in_ssd, c_in_cpu,
                c_out, c_out_ssd, c_out_cpu, c_alloc)
            if stage >= _G_END:
                break
            qh = S[S_QH + q]
            if not ok or S[S_QT + q] <= qh:
                stage += 1
                fast_block = False
                continue
            if fast and not fast_block and stage <= _G_PE_CPU:
                # ---- pre-eviction fast path (untraced) ----
                (moved, c_out, c_out_ssd, c_out_cpu, c_fed, host_used, host_peak, gpu_used,
                 tc_b, lru_tail, lru_cur, lru_scan) = _preevict_run(
                    stage, q, qb, S, pstate, lru, tt, srt, c_out, c_out_ssd, c_out_cpu, c_fed,
                    host_used, host_peak, gpu_used, tc_b, lru_tail, lru_cur, lru_scan)
                fast_block = moved == 0
                continue
            if fast and not fast_block and _G_PF_SSD <= stage and stage <= _G_PREALLOC:
                # ---- fetch fast path (untraced) ----
                (stage, t, fast_block, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd,
                                        c_out_cpu, c_alloc, c_ffs, c_fed),
                 gpu_used, host_used, host_peak, wait, lru_tail, lru_cur, lru_scan, tc_a, tc_b,
                 tc_c) = _fetch_fast(
                    stage, q, qh, t, it, k, prm, tt, srt, pstate, lru, qb, S, pcie, bnd,
                    (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
                     c_fed), gpu_used, host_used, host_peak, wait, lru_tail, lru_cur, lru_scan,
                    dum_end, tc_a, tc_b, tc_c)
                continue
            # ---- general path: one page ----
            fast_block = False
            n_gen += 1
            (stage, (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs,
                     c_fed), gpu_used, host_used, host_peak, wait, live_warn, lru_tail, lru_cur,
             lru_scan, dum_end, tc_a, tc_b, tc_c) = _general_page(
                stage, q, t, it, k, trace, prm, tt, srt, pstate, lru, qb, S, ev,
                (c_in, c_in_ssd, c_in_cpu, c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed),
                gpu_used, host_used, host_peak, wait, live_warn, lru_tail, lru_cur, lru_scan,
                dum_end, tc_a, tc_b, tc_c)
        if replay:
            _rp_end(S, qb, rp_mask, n_gen, gpu_used, host_used, c_in, c_in_ssd, c_in_cpu,
                    c_out, c_out_ssd, c_out_cpu, c_alloc, c_ffs, c_fed)
        # ---- end of the tick: transfer boundary, traffic, resume check (§9.6) ----
        t, resumed = _tick_end(t, it, k, trace, S, pcie, bnd, ev, c_in, c_in_ssd, c_in_cpu,
                               c_out, c_out_ssd, c_out_cpu, c_alloc, wait)
        # ---- is the next event another busy tick? (run_engine's choice, same tests) ----
        if resumed or trace or S[S_ERROR] != E_NONE:
            break
        if not _next_tick_busy(t, S, bnd.shape[0], half):
            break
    S[C_IN] = c_in
    S[C_IN_SSD] = c_in_ssd
    S[C_IN_CPU] = c_in_cpu
    S[C_OUT] = c_out
    S[C_OUT_SSD] = c_out_ssd
    S[C_OUT_CPU] = c_out_cpu
    S[C_ALLOC] = c_alloc
    S[C_FFS] = c_ffs
    S[C_FED] = c_fed
    S[S_GPU_USED] = gpu_used
    S[S_HOST_USED] = host_used
    S[S_HOST_PEAK] = host_peak
    S[S_WAIT] = wait
    S[S_LIVE_WARN] = live_warn
    S[S_LRU_TAIL] = lru_tail
    S[S_LRU_CUR] = lru_cur
    S[S_LRU_SCAN] = lru_scan
    S[S_DEEPUM_END] = dum_end
    S[S_TC_A] = tc_a
    S[S_TC_B] = tc_b
    S[S_TC_C] = tc_c


@_kernel
def _resume(t, S):
    """§9.6: the waiting kernel resumes at the tick at time t (its event is queued now)."""
    S[S_KB_PENDING] = 1
    S[S_KB_TIME] = t
    S[S_KB_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    S[S_KB_KERNEL] = S[S_CUR_KERNEL]
    S[S_KB_NEWITER] = 0
    S[S_R_STARTED] = 1


@_kernel
def _quiet_tick(t, S, bnd, ev):
    """A batcher tick at time t that finds no queued page (§9.2): it closes an open
    transfer period and may resume the waiting kernel; it moves nothing. The tick clock is
    advanced by the caller."""
    for i in range(C_IN, C_FED + 1):
        S[i] = 0
    S[C_FFS] = NOT_KNOWN
    S[C_FED] = NOT_KNOWN
    S[S_IN_OPEN] = -1
    S[S_OUT_OPEN] = -1
    if S[S_XFER]:
        it = S[S_CUR_ITER]
        n = S[S_NBND]
        bnd[n, 0] = it
        bnd[n, 1] = t
        bnd[n, 2] = 0
        S[S_NBND] = n + 1
        S[S_XFER] = 0
        if S[P_TRACE]:
            _emit(ev, S, t, EV_TRANSFER, it, S[S_CUR_KERNEL], -1, -1, -1, -1, -1, 0)
    if S[S_RESCHED] and _no_faults_queued(S) and S[S_WAIT] == 0:
        _resume(t, S)


# ----------------------------------------------------------------------------------------
# kernel begin (§6) and the stall model (§7)
# ----------------------------------------------------------------------------------------

@_kernel_ieee
def page_fault_time(exec_c, inpf_c, pf_c, f_int, gpu_bpc, ssd_bpc, freq, l_sys, l_ssd,
                    cpu_in, ssd_in, np_in, cpu_out, ssd_out, np_out, total_in, total_out):
    """exec + ΔPF in cycles, §7, evaluated in IEEE double in the artifact's order (O-1..O-4)."""
    F_in = cpu_in + ssd_in + np_in
    F_out = cpu_out + ssd_out + np_out
    r_in = F_in / total_in if total_in != 0 else 0.0
    r_out = F_out / total_out if total_out != 0 else 0.0
    r_in_ssd = ssd_in / F_in if F_in != 0 else 0.0
    r_out_ssd = ssd_out / F_out if F_out != 0 else 0.0
    s_in = float(total_in * 4096)
    s_out = float(total_out * 4096)
    t00 = (pf_c // f_int) * 1000            # O-1: integer division by the clock in Hz
    t10 = (inpf_c // f_int) * 1000
    t11 = (exec_c // f_int) * 1000
    bw_pcie = gpu_bpc * freq / 1000.0
    bw_ssd = ssd_bpc * freq / 1000.0
    if t00 <= t11:
        t00 = t11
    if t10 < t11:
        t10 = t11
    if t10 > t00:
        t10 = t00
    bw_cpu_in = 1063004400.0 if t00 == t10 else s_in / float(t00 - t10)      # O-2
    bw_cpu_out = 1063004400.0 if t10 == t11 else s_out / float(t10 - t11)    # O-4 pairing
    bw_ssd_in = bw_cpu_in * l_sys / (l_sys + l_ssd)
    if bw_ssd_in > bw_ssd:
        bw_ssd_in = bw_ssd
    bw_ssd_out = bw_cpu_out * l_sys / (l_sys + l_ssd)
    if bw_ssd_out > bw_ssd:
        bw_ssd_out = bw_ssd
    if r_in_ssd == 0:
        bw_ssd_in = 0.0
    if r_out_ssd == 0:
        bw_ssd_out = 0.0
    cap = bw_pcie - max(bw_ssd_in, bw_ssd_out)
    if bw_cpu_in > cap:
        bw_cpu_in = cap
    if bw_cpu_out > cap:
        bw_cpu_out = cap
    t_ssd_in = 0.0 if r_in_ssd == 0 else r_in * r_in_ssd * s_in / bw_ssd_in
    t_ssd_out = 0.0 if r_out_ssd == 0 else r_out * r_out_ssd * s_out / bw_ssd_out
    t_cpu = r_in * (1 - r_in_ssd) * s_in / bw_cpu_in + r_out * (1 - r_out_ssd) * s_out / bw_cpu_out
    a = t_ssd_in + t_ssd_out
    dt_ms = t_cpu if a < t_cpu else a
    d = dt_ms / 1000.0 * freq
    # O-11: with SSD BW == PCIe BW the host-side cap is 0 and T_cpu is x/0. 0/0 (a side
    # without faults) is NaN and loses the max to the SSD time; x/0 is +inf and wins. The
    # artifact's double -> uint64 conversion (g++ x86-64: values >= 2^63 are converted as
    # d - 2^63 with the top bit flipped back) turns +inf, and anything >= 2^64, into 0.
    if not (d < 18446744073709551616.0):
        return exec_c
    return exec_c + np.int64(np.uint64(d))


# ---- freed page states given back to the operating system ----
# The page states of a UVM run start as `np.zeros`, memory the operating system maps as the
# engine first writes it; most tensors live for a part of the iteration only (the live pages
# peak at 17-25 % of all pages on the paper's CNNs), so once a tensor is freed the memory
# pages of its states that hold only zeros (NOT_PRESENT, no other bit) go back to the system
# with Linux's madvise(MADV_DONTNEED): on private anonymous memory they read as zeros again
# and take memory only when written again. Nothing the engine reads changes.
MADV_DONTNEED = 4
MADV_POPULATE_WRITE = 23
if sys.platform.startswith("linux"):
    if NO_JIT:
        _libc = ctypes.CDLL(None, use_errno=True)
        _madvise = _libc.madvise
        _madvise.argtypes = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int)
        _madvise.restype = ctypes.c_int
    else:
        # (an external symbol, resolved when the compiled code is loaded: the cache keeps it)
        _madvise = _nbtypes.ExternalFunction(
            "madvise", _nbtypes.intc(_nbtypes.uintp, _nbtypes.uintp, _nbtypes.intc))
else:
    @kernel_nonrt_internal
    def _madvise(addr, length, advice):
        return -1                      # (never called: P_RELEASE is 0 off Linux)


@_kernel
def _release_free(pstate, p0, n, S):
    """Give back to the operating system the memory pages (S[P_RELEASE] bytes) lying wholly
    within the states of pages p0 .. p0 + n - 1, when every one of their states is zero.
    `pstate` must be private anonymous memory (what `np.zeros` and `np.full` of this size
    map); S[S_RELEASED] counts the bytes given back."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + p0 + ps - 1) // ps * ps
    b = (base + p0 + n) // ps * ps
    if b <= a:
        return
    w = pstate[a - base:b - base].view(np.uint64)     # (a and b are multiples of 8)
    acc = np.uint64(0)
    for i in range(w.shape[0]):
        acc |= w[i]
    if acc == 0 and _madvise(np.uint64(a), np.uint64(b - a), MADV_DONTNEED) == 0:
        S[S_RELEASED] += b - a


@_kernel
def _release_dropped(pstate, lo, hi, S):
    """After pages lo .. hi - 1 were dropped (DeepUM's victims of dead tensors, left
    NOT_PRESENT): give back to the operating system each memory page (S[P_RELEASE] bytes) of
    the states that overlaps them, lies wholly within `pstate` and now holds zero states
    only. DeepUM never pre-deallocates: without this, the states of the tensors it drops
    would keep their memory to the end of the run. Each memory page is scanned from its
    end, where the pages not yet dropped lie when victims go in ascending order."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + lo) // ps * ps
    if a < base:
        a += ps
    e = (base + hi + ps - 1) // ps * ps
    if e > base + pstate.shape[0]:
        e -= ps
    w = ps // 8
    z0 = -1                          # the start of the zero pages found so far in a row
    while a < e:
        blk = pstate[a - base:a - base + ps].view(np.uint64)
        i = w - 1
        while i >= 0 and blk[i] == 0:
            i -= 1
        if i < 0:
            if z0 < 0:
                z0 = a
        elif z0 >= 0:
            if _madvise(np.uint64(z0), np.uint64(a - z0), MADV_DONTNEED) == 0:
                S[S_RELEASED] += a - z0
            z0 = -1
        a += ps
    if z0 >= 0 and _madvise(np.uint64(z0), np.uint64(e - z0), MADV_DONTNEED) == 0:
        S[S_RELEASED] += e - z0


@_kernel
def _populate(pstate, p0, n, S):
    """Map the memory pages lying wholly within the states of pages p0 .. p0 + n - 1 for
    writing at once (Linux's MADV_POPULATE_WRITE; no state changes): where `_release_free`
    gave them back, the writes that follow would otherwise take a page fault each (two
    where a read comes first)."""
    ps = S[P_RELEASE]
    base = np.int64(pstate.ctypes.data)
    a = (base + p0 + ps - 1) // ps * ps
    b = (base + p0 + n) // ps * ps
    if b > a:
        _madvise(np.uint64(a), np.uint64(b - a), MADV_POPULATE_WRITE)


@_kernel
def _dealloc_pages(t, T, p0, n, tt, pstate, lru, S, ev):
    """Pre-deallocation of tensor T's pages p0 .. p0 + n - 1 (§6.2): every page not in
    transfer is freed (O-23: in-transfer pages never are); its GPU pages leave the LRU list
    where their slots are unknown, as `_lru_remove_unknown` does page by page, here in one
    loop that looks up the cursor's page only when it changes. Returns the number of pages
    freed."""
    trace = S[P_TRACE] != 0
    xl = S[P_XLRU] != 0
    # the page of the cursor's entry if that entry is live (removing it resets the cursor)
    cur_page = -1 if xl else _cursor_page(lru, pstate, S)
    freed = 0
    gpu_freed = 0
    host_freed = 0
    for p in range(p0, p0 + n):
        st = np.int64(pstate[_u(p)])
        if st & F_TRANSFER:
            continue
        loc = st & LOC_MASK
        if loc == IN_GPU:
            gpu_freed += 1
            if not xl:                   # (the extent list drops them after the loop)
                if p == cur_page:
                    S[S_LRU_CUR] = S[S_LRU_HEAD]
                    cur_page = _cursor_page(lru, pstate, S)
                g, compacted = _new_generation(lru, pstate, S, p, st >> GEN_SHIFT)
                if compacted:            # the cursor may have moved
                    cur_page = _cursor_page(lru, pstate, S)
                st = (st & 15) | (g << GEN_SHIFT)
        elif loc == IN_CPU:
            host_freed += 1
        if loc != NOT_PRESENT:
            freed += 1
            if trace:
                _emit_run(ev, S, S_OUT_OPEN, t, EV_DEALLOC, S[S_CUR_ITER], S[S_CUR_KERNEL],
                          T, p, loc, NOT_PRESENT, 0)
        pstate[_u(p)] = st & ~LOC_MASK
    if xl and gpu_freed > 0:
        _x_remove(lru, S, tt, T, p0, p0 + n)
    S[S_GPU_USED] -= gpu_freed
    S[S_HOST_USED] -= host_freed
    tt[_u(T), TT_RES] -= gpu_freed
    return freed


# ----------------------------------------------------------------------------------------
# bulk paths (P_BULK): a tensor's pages that all share their location and in-transfer flag
# are settled as one range, with the same outcome as the page loops they replace
# ----------------------------------------------------------------------------------------

_UNIFORM_CHUNK = 4096


@_kernel
def _uniform_state(pstate, p0, n):
    """The location and in-transfer bits (st & RES_MASK) that pages p0 .. p0 + n - 1 (n >= 1)
    all share, or -1 when they differ. A branch-free OR over chunks (vectorised by LLVM),
    stopping at the first chunk that differs."""
    v0 = np.int64(pstate[_u(p0)]) & RES_MASK
    i = p0
    end = p0 + n
    while i < end:
        j = i + _UNIFORM_CHUNK
        if j > end:
            j = end
        acc = 0
        for p in range(i, j):
            acc |= np.int64(pstate[_u(p)]) ^ v0
        if acc & RES_MASK:
            return -1
        i = j
    return v0


@_kernel
def _dealloc_generation(lru, pstate, S, L, p, st, stale, cur_page):
    """Page p (state st, IN_GPU, not in transfer) is deallocated inside a run that keeps the
    stale count in ``stale`` and the cursor's page in ``cur_page``: the cursor resets when it
    is p's (§8.1), p takes the first free generation of its bucket (the list compacted first
    when there is none, as `_new_generation` does) and its entry is recorded as stale.
    Returns the generation, the stale count and the cursor's page."""
    if p == cur_page:
        S[S_LRU_CUR] = S[S_LRU_HEAD]
        cur_page = _cursor_page(lru, pstate, S)
    g0 = st >> GEN_SHIFT
    w = L + (p & (STALE_BUCKETS - 1))
    g = _free_generation(np.int64(lru[_u(w)]), g0)
    if g < 0:
        S[S_LRU_STALE] = stale
        _lru_compact(lru, pstate, S)
        stale = 0
        g = (g0 + 1) & GEN_MASK
        cur_page = _cursor_page(lru, pstate, S)
    lru[_u(w)] = np.int64(lru[_u(w)]) | (1 << g0)
    return g, stale + 1, cur_page


@_kernel
def _dealloc_bulk(t, T, p0, n, tt, pstate, lru, S, ev):
    """`_dealloc_pages` untraced (P_BULK): the same page-by-page outcome, with the generation
    bookkeeping of `_new_generation` in locals (the stale count and the ring's size are not
    reloaded from S for each page), and a range whose pages are all in one place off the GPU
    settled at once. Returns the number of pages freed."""
    u = _uniform_state(pstate, p0, n)
    if u >= 0 and u != IN_GPU:
        if u & F_TRANSFER or u == NOT_PRESENT:
            return 0                     # in transfer: never freed (O-23); absent: nothing
        for p in range(p0, p0 + n):
            pstate[_u(p)] = np.int64(pstate[_u(p)]) & ~LOC_MASK
        if u == IN_CPU:
            S[S_HOST_USED] -= n
        return n
    if S[P_XLRU] != 0:
        # the extent list: the freed GPU pages (every one not in transfer) leave it at once
        if u == IN_GPU:
            for p in range(p0, p0 + n):
                pstate[_u(p)] = np.int64(pstate[_u(p)]) & ~LOC_MASK
            _x_remove(lru, S, tt, T, p0, p0 + n)
            S[S_GPU_USED] -= n
            tt[_u(T), TT_RES] -= n
            return n
        # (a mixed range: `_dealloc_pages`, whose GPU pages cost no generation here)
        return _dealloc_pages(t, T, p0, n, tt, pstate, lru, S, ev)
    cur_page = _cursor_page(lru, pstate, S)
    L = S[P_LCAP]
    stale = S[S_LRU_STALE]
    if u == IN_GPU:
        # every page resident and not in transfer: runs of pages that take the first free
        # generation of their bucket, each broken by a page that is the cursor's or finds no
        # free generation (a compaction), which goes as in `_dealloc_pages`
        p = p0
        end = p0 + n
        while True:
            # (the pre-eviction run with NOT_PRESENT as destination: these pages are not in
            # transfer, so it leaves their other bits as `_dealloc_pages` does)
            d, _res = _preevict_gpu_run(lru, pstate, L, p, end, cur_page, NOT_PRESENT)
            q = p + d
            stale += q - p
            p = q
            if p >= end:
                break
            st = np.int64(pstate[_u(p)])
            g, stale, cur_page = _dealloc_generation(lru, pstate, S, L, p, st, stale, cur_page)
            pstate[_u(p)] = (st & (15 & ~LOC_MASK)) | (g << GEN_SHIFT)
            p += 1
        S[S_LRU_STALE] = stale
        S[S_GPU_USED] -= n
        tt[_u(T), TT_RES] -= n
        return n
    freed = 0
    gpu_freed = 0
    host_freed = 0
    for p in range(p0, p0 + n):
        st = np.int64(pstate[_u(p)])
        if st & F_TRANSFER:
            continue
        loc = st & LOC_MASK
        if loc == IN_GPU:
            gpu_freed += 1
            g, stale, cur_page = _dealloc_generation(lru, pstate, S, L, p, st, stale, cur_page)
            st = (st & 15) | (g << GEN_SHIFT)
        elif loc == IN_CPU:
            host_freed += 1
        if loc != NOT_PRESENT:
            freed += 1
        pstate[_u(p)] = st & ~LOC_MASK
    S[S_LRU_STALE] = stale
    S[S_GPU_USED] -= gpu_freed
    S[S_HOST_USED] -= host_freed
    tt[_u(T), TT_RES] -= gpu_freed
    return freed


@_kernel
def _apply_hint(h, t, ht, tt, pstate, lru, qb, S, ev):
    T = ht[h, 1]
    fr = ht[h, 2]
    to = ht[h, 3]
    p0 = tt[_u(T), TT_START]
    n = tt[_u(T), TT_NP]
    queued = 0
    done = False
    if S[P_BULK] != 0 and n > 0:
        # bulk: a tensor whose pages are all in one place pushes one run (or none), as the
        # page loops below would
        if to == IN_GPU and fr != IN_GPU_LEAST and tt[_u(T), TT_RES] != n:
            if S[P_RELEASE] != 0 and pstate[_u(p0)] == 0:
                _populate(pstate, p0, n, S)
            u = _uniform_state(pstate, p0, n)
            if u >= 0:
                done = True
                q = -1
                if u == NOT_PRESENT:
                    q = Q_PREALLOC
                elif u == IN_SSD:
                    q = Q_PREFETCH_SSD
                elif u == IN_CPU:
                    q = Q_PREFETCH_CPU
                if q >= 0:
                    for p in range(p0, p0 + n):
                        pstate[_u(p)] = np.int64(pstate[_u(p)]) | F_TRANSFER
                    queued = n
                    _q_push(qb, S, q, p0, n)
        elif (to == IN_SSD or to == IN_CPU) and tt[_u(T), TT_RES] != 0:
            u = _uniform_state(pstate, p0, n)
            if u >= 0:
                # (some page resident and not in transfer, so all are)
                done = True
                _q_push(qb, S, Q_PREEVICT_SSD if to == IN_SSD else Q_PREEVICT_CPU, p0, n)
                for p in range(p0, p0 + n):
                    pstate[_u(p)] = np.int64(pstate[_u(p)]) | F_TRANSFER
                queued = n
                tt[_u(T), TT_RES] -= n
                if S[P_XLRU] != 0:
                    _x_remove(lru, S, tt, T, p0, p0 + n)     # in transfer: no victims
        elif to == NOT_PRESENT and not S[P_TRACE]:
            done = True
            queued = _dealloc_bulk(t, T, p0, n, tt, pstate, lru, S, ev)
            if queued == n and S[P_RELEASE] != 0:
                _release_free(pstate, p0, n, S)
    if done:
        pass
    elif to == IN_GPU and fr != IN_GPU_LEAST:
        # (a tensor whose pages are all resident and not in transfer queues nothing: DeepUM
        # re-hints the resident tensors of the look-ahead kernel at every kernel start)
        if tt[_u(T), TT_RES] != n:
            # runs of consecutive pages bound for the same queue are pushed as one (the
            # queues merge contiguous pushes anyway)
            run_q = -1
            run_p = 0
            run_n = 0
            for p in range(p0, p0 + n):
                st = np.int64(pstate[_u(p)])
                q = -1
                if not (st & F_TRANSFER):
                    loc = st & LOC_MASK
                    if loc == NOT_PRESENT:
                        q = Q_PREALLOC
                    elif loc == IN_SSD:
                        q = Q_PREFETCH_SSD
                    elif loc == IN_CPU:
                        q = Q_PREFETCH_CPU
                if q >= 0:
                    pstate[_u(p)] = st | F_TRANSFER
                    queued += 1
                    if q == run_q and run_p + run_n == p:
                        run_n += 1
                        continue
                if run_n > 0:
                    _q_push(qb, S, run_q, run_p, run_n)
                run_q = q
                run_p = p
                run_n = 1 if q >= 0 else 0
            if run_n > 0:
                _q_push(qb, S, run_q, run_p, run_n)
    elif (to == IN_SSD or to == IN_CPU) and tt[_u(T), TT_RES] == 0:
        pass                             # no page resident and not in transfer: none queued
    elif to == IN_SSD or to == IN_CPU:
        q = Q_PREEVICT_SSD if to == IN_SSD else Q_PREEVICT_CPU
        for p in range(p0, p0 + n):
            st = np.int64(pstate[_u(p)])
            if (st & F_TRANSFER) or (st & LOC_MASK) != IN_GPU:
                continue
            _q_push(qb, S, q, p, 1)
            pstate[_u(p)] = st | F_TRANSFER
            queued += 1
        tt[_u(T), TT_RES] -= queued
        if queued > 0 and S[P_XLRU] != 0:
            _x_remove(lru, S, tt, T, p0, p0 + n)             # in transfer: no victims
    elif to == NOT_PRESENT:
        queued = _dealloc_pages(t, T, p0, n, tt, pstate, lru, S, ev)
    # Pin / Unpin (TOLERANT only) are rejected by the Python wrapper.
    if S[P_TRACE]:
        _emit(ev, S, t, EV_HINT, S[S_CUR_ITER], S[S_CUR_KERNEL], T, p0, queued, fr, to, -1)


@_kernel
def _fault_scan(T, is_input, t, tt, pstate, qb, S, ev, trace, k, it):
    """§6.3 fault_scan of one tensor, adding to the counts at S[S_CNT:]: intr, cpu/ssd/np
    in, cpu/ssd/np out, total in/out. Every page left in transfer also joins the wait set
    (the artifact's separate pass over the same pages, merged: the scan never reads the
    wait bit). Returns the number of SSD pages found."""
    p0 = tt[_u(T), TT_START]
    n = tt[_u(T), TT_NP]
    S[S_CNT + (7 if is_input else 8)] += n
    if tt[_u(T), TT_RES] == n:
        return 0                     # all resident and not in transfer: nothing to do
    o = 0 if is_input else 3
    if S[P_BULK] != 0 and n > 0:
        if S[P_RELEASE] != 0 and pstate[_u(p0)] == 0:
            _populate(pstate, p0, n, S)
        u = _uniform_state(pstate, p0, n)
        if u >= 0:
            return _fault_scan_uniform(T, u, o, p0, n, t, pstate, qb, S, ev, trace, k, it)
    # runs of consecutive pages found in the same place are queued (and traced) as one
    run_start = -1
    run_len = 0
    run_loc = -1
    intr = 0
    n_cpu = 0
    n_ssd = 0
    n_np = 0
    n_wait = 0
    for p in range(p0, p0 + n + 1):
        loc = -1
        if p < p0 + n:
            st = np.int64(pstate[_u(p)])
            if st & F_TRANSFER:
                intr += 1
            else:
                loc = st & LOC_MASK
                if loc == IN_GPU:
                    loc = -1
                else:
                    st |= F_TRANSFER
            if (st & F_TRANSFER) and not (st & F_WAIT):
                st |= F_WAIT
                n_wait += 1
            pstate[_u(p)] = st
            if loc >= 0 and loc == run_loc:
                run_len += 1
                continue
        # the run ends before page p (or at the tensor's end)
        if run_len > 0:
            if run_loc == NOT_PRESENT:
                n_np += run_len
                _q_push(qb, S, Q_PF_ALLOC, run_start, run_len)
            elif run_loc == IN_SSD:
                n_ssd += run_len
                _q_push(qb, S, Q_PF_SSD, run_start, run_len)
            else:
                n_cpu += run_len
                _q_push(qb, S, Q_PF_CPU, run_start, run_len)
            if trace:
                _emit(ev, S, t, EV_FAULT, it, k, T, run_start, run_len, run_loc, IN_GPU, 0)
        run_loc = loc
        run_start = p
        run_len = 1 if loc >= 0 else 0
    S[S_CNT] += intr
    S[S_CNT + 1 + o] += n_cpu
    S[S_CNT + 2 + o] += n_ssd
    S[S_CNT + 3 + o] += n_np
    S[S_WAIT] += n_wait
    return n_ssd


@_kernel
def _fault_scan_uniform(T, u, o, p0, n, t, pstate, qb, S, ev, trace, k, it):
    """`_fault_scan` of tensor T's pages p0 .. p0 + n - 1 (n >= 1) when they all share their
    location and in-transfer bits u (`_uniform_state`, P_BULK): the page loop's outcome in
    one step. In transfer: all count as in transfer and join the wait set; elsewhere off
    the GPU: all are flagged in transfer and join the wait set, and go to the location's
    demand queue as the one run (p0, n) the page loop pushes (and traces); in the GPU and
    not in transfer: nothing. Returns the number of SSD pages found."""
    if u == IN_GPU:
        return 0
    flags = F_WAIT if u & F_TRANSFER else F_TRANSFER | F_WAIT
    had = 0
    for p in range(p0, p0 + n):
        st = pstate[_u(p)]
        had += (st >> 3) & 1                     # (F_WAIT, bit 3)
        pstate[_u(p)] = st | flags
    S[S_WAIT] += n - had
    if u & F_TRANSFER:
        S[S_CNT] += n
        return 0
    loc = u & LOC_MASK
    if loc == NOT_PRESENT:
        S[S_CNT + 3 + o] += n
        _q_push(qb, S, Q_PF_ALLOC, p0, n)
    elif loc == IN_SSD:
        S[S_CNT + 2 + o] += n
        _q_push(qb, S, Q_PF_SSD, p0, n)
    else:
        S[S_CNT + 1 + o] += n
        _q_push(qb, S, Q_PF_CPU, p0, n)
    if trace:
        _emit(ev, S, t, EV_FAULT, it, k, T, p0, n, loc, IN_GPU, 0)
    return n if loc == IN_SSD else 0


@_kernel
def _mark(kt, kidx, tt, k, col, flag):
    """tt[_u(T), col] = flag for the inputs and output-only tensors of kernel k."""
    for j in range(kt[k, KT_IN], kt[k + 1, KT_IN]):
        tt[kidx[j], col] = flag


@_kernel
def _kernel_begin(k, now, kt, kidx, ht, tt, srt, pstate, lru, qb, S, F, kstat,
                  ev):
    K = kt.shape[0] - 1
    it = S[S_CUR_ITER]
    trace = S[P_TRACE] != 0
    # required set of this kernel (clear the previous kernel's)
    if S[S_REQ_K] >= 0:
        _mark(kt, kidx, tt, S[S_REQ_K], TT_REQ, 0)
    _mark(kt, kidx, tt, k, TT_REQ, 1)
    S[S_REQ_K] = k
    S[S_IN_OPEN] = -1
    S[S_OUT_OPEN] = -1
    # 6.1 eviction cursor
    S[S_DEEPUM_END] = 0
    if S[P_DEEPUM]:
        deg = S[P_DEGREE]
        if S[S_WIN_K] >= 0:
            for j in range(deg):
                _mark(kt, kidx, tt, (S[S_WIN_K] + j) % K, TT_WIN, 0)
        for j in range(deg):
            _mark(kt, kidx, tt, (k + j) % K, TT_WIN, 1)
        S[S_WIN_K] = k
    if S[P_DEEPUM] and S[P_XLRU]:
        # (on extents: the first page of the first extent of a tensor outside the window)
        r = S[S_X_HEAD]
        while r >= 0 and tt[_u(lru[_u(r * XW + X_T)]), TT_WIN] != 0:
            r = lru[_u(r * XW + X_NEXT)]
        S[S_X_CUR] = r
        if r >= 0:
            S[S_LRU_CUR] = lru[_u(r * XW + X_LO)]
        else:
            S[S_LRU_CUR] = -1
            S[S_DEEPUM_END] = 1
    elif S[P_DEEPUM]:
        _lru_advance_head(lru, pstate, S)
        s = S[S_LRU_HEAD]
        tail = S[S_LRU_TAIL]
        lm = S[P_LCAP] - 1
        # (an entry of the window tensor looked up last is passed without reading its
        # page's state: live or not, it is not the cursor's)
        c = S[S_TC_C]
        wlo = 0
        whi = 0
        while s < tail:
            e = np.int64(lru[_u(s & lm)])
            if e < 0:
                s -= e               # a tombstone, or a run of them (_lru_advance_head)
                continue
            p = e >> GEN_SHIFT
            if p < wlo or p >= whi:
                st = np.int64(pstate[_u(p)])
                if _live(st, e):
                    c = _tpos(srt, c, p)
                    if not tt[srt[1, _u(c)], TT_WIN]:
                        break
                    wlo = srt[0, _u(c)]
                    whi = srt[0, _u(c + 1)]
            s += 1
        S[S_TC_C] = c
        S[S_LRU_CUR] = s
        if s >= tail:
            S[S_DEEPUM_END] = 1
    elif not S[P_XLRU]:
        _lru_advance_head(lru, pstate, S)
        S[S_LRU_CUR] = S[S_LRU_HEAD]
    # 6.2 hints, consumed cyclically
    H = ht.shape[0]
    if S[P_USE_PREFETCH] and H > 0:
        n_applied = 0
        h = S[S_HINT]
        while n_applied < H and ht[h, 0] % K == k:
            _apply_hint(h, now, ht, tt, pstate, lru, qb, S, ev)
            h = (h + 1) % H
            n_applied += 1
        S[S_HINT] = h
    # 6.3 residency check: per-tensor counts of pages IN_GPU and not in transfer
    resident = _no_faults_queued(S)
    if resident:
        for j in range(kt[k, KT_IN], kt[k + 1, KT_IN]):
            T = kidx[j]
            if tt[_u(T), TT_RES] != tt[_u(T), TT_NP]:
                resident = False
                break
    if not resident:
        if S[S_RESCHED] and S[S_R_STARTED]:
            S[S_ERROR] = E_REFAULT_AFTER_RESUME        # O-14: unreachable in the artifact
            S[S_ERR_A] = k
            return
        for i in range(9):
            S[S_CNT + i] = 0
        for j in range(kt[k, KT_IN], kt[k, KT_OO]):
            T = np.int64(kidx[j])   # (int64: one compile of _fault_scan and _emit)
            if _fault_scan(T, True, now, tt, pstate, qb, S, ev, trace, k, it) > 0:
                S[S_AMP_RAW] += tt[_u(T), TT_RAW]
                S[S_AMP_ALIGNED] += tt[_u(T), TT_NP] * 4096
        for j in range(kt[k, KT_OO], kt[k + 1, KT_IN]):
            T = np.int64(kidx[j])
            if _fault_scan(T, False, now, tt, pstate, qb, S, ev, trace, k, it) > 0:
                S[S_AMP_RAW] += tt[_u(T), TT_RAW]
                S[S_AMP_ALIGNED] += tt[_u(T), TT_NP] * 4096
        pf_time = page_fault_time(kt[k, KT_EXEC], kt[k, KT_INPF], kt[k, KT_PF], S[P_F_HZ],
                                  F[F_GPU_BPC], F[F_SSD_BPC], F[F_FREQ], S[P_LSYS], S[P_LSSD],
                                  S[S_CNT + 1], S[S_CNT + 2], S[S_CNT + 3], S[S_CNT + 4],
                                  S[S_CNT + 5], S[S_CNT + 6], S[S_CNT + 7], S[S_CNT + 8])
        if not S[S_RESCHED]:
            S[S_RESCHED] = 1
            S[S_R_FIRST] = now
            S[S_R_PFTIME] = pf_time
            S[S_R_STARTED] = 0
            S[S_R_INTR] = 0
            S[S_R_CPU] = 0
            S[S_R_SSD] = 0
            S[S_R_NP] = 0
        S[S_R_INTR] += S[S_CNT]
        S[S_R_CPU] += S[S_CNT + 1] + S[S_CNT + 4]
        S[S_R_SSD] += S[S_CNT + 2] + S[S_CNT + 5]
        S[S_R_NP] += S[S_CNT + 3] + S[S_CNT + 6]
        return
    # 6.4 completion
    n = S[S_NSTAT]
    if S[S_RESCHED]:
        start = S[S_R_FIRST]
        end = start + S[S_R_PFTIME]
        if end < now:
            end = now
        kstat[n, KS_INTR] = S[S_R_INTR]
        kstat[n, KS_CPU] = S[S_R_CPU]
        kstat[n, KS_SSD] = S[S_R_SSD]
        kstat[n, KS_NP] = S[S_R_NP]
        S[S_RESCHED] = 0
    else:
        start = now
        end = now + kt[k, KT_EXEC]
        kstat[n, KS_INTR] = 0
        kstat[n, KS_CPU] = 0
        kstat[n, KS_SSD] = 0
        kstat[n, KS_NP] = 0
    kstat[n, KS_ITER] = it
    kstat[n, KS_KERNEL] = k
    kstat[n, KS_START] = start
    kstat[n, KS_END] = end
    kstat[n, KS_HOST] = S[S_HOST_USED]
    kstat[n, KS_GPU] = S[S_GPU_USED]
    S[S_NSTAT] = n + 1
    if trace:
        _emit(ev, S, start, EV_KERNEL, it, k, -1, -1,
              kstat[n, KS_CPU] + kstat[n, KS_SSD] + kstat[n, KS_NP], -1, -1, end)
    S[S_KB_PENDING] = 1
    S[S_KB_TIME] = end
    S[S_KB_SEQ] = S[S_SEQ]
    S[S_SEQ] += 1
    S[S_KB_KERNEL] = (k + 1) % K
    S[S_KB_NEWITER] = 1 if k == K - 1 else 0
    if S[S_WAIT] != 0:
        # wait_set.clear(): not reachable with the artifact's rules, kept exact anyway
        for p in range(pstate.shape[0]):
            pstate[_u(p)] &= ~F_WAIT
        S[S_WAIT] = 0


# ----------------------------------------------------------------------------------------
# the event loop (§5, §17.3)
# ----------------------------------------------------------------------------------------

@_kernel_py
def run_engine(kt, kidx, ht, tt, srt, pstate, lru, qb, S, F, kstat, pcie, bnd,
               ev):
    """Run until the simulation ends (ST_DONE), an error (ST_ERROR), or a pause (ST_PAUSE:
    the boundary or event buffer needs draining, a queue is half full, or S[S_STAT_PAUSE]
    kernels have completed, for progress reports). Resumable."""
    num_iter = S[P_NUM_ITER]
    half = qb.shape[1] // 2
    ii = S[P_II]
    while True:
        if S[S_ERROR] != E_NONE:
            return ST_ERROR
        # pause points: only between events, so that no step can overflow a buffer
        if (S[S_NBND] + 4 > bnd.shape[0] or S[S_NEV] >= S[S_EV_PAUSE]
                or S[S_NSTAT] >= S[S_STAT_PAUSE] or S[S_X_NFREE] < S[P_XMARGIN]):
            return ST_PAUSE
        idle = True
        for q in range(NQ):
            qlen = S[S_QT + q] - S[S_QH + q]
            if qlen > half:
                return ST_PAUSE
            if qlen > 0:
                idle = False
        kb_first = False
        if S[S_KB_PENDING]:
            if S[S_KB_TIME] < S[S_TICK_TIME]:
                kb_first = True
            elif S[S_KB_TIME] == S[S_TICK_TIME] and S[S_KB_SEQ] < S[S_TICK_SEQ]:
                kb_first = True
        if kb_first:
            k = S[S_KB_KERNEL]
            if S[S_KB_NEWITER]:
                S[S_CUR_ITER] += 1
                S[S_KB_NEWITER] = 0
            S[S_CUR_KERNEL] = k
            if S[S_CUR_ITER] >= num_iter:
                S[S_DONE] = 1
                return ST_DONE
            S[S_KB_PENDING] = 0
            _kernel_begin(k, S[S_KB_TIME], kt, kidx, ht, tt, srt, pstate, lru,
                          qb, S, F, kstat, ev)
        else:
            t = S[S_TICK_TIME]
            m = 1
            if idle and not S[S_XFER] and not S[S_RESCHED] and S[S_KB_PENDING]:
                # Idle ticks (§17.3): no queued page, no open transfer, no waiting kernel.
                # Every tick before the pending kernel event does nothing but take a
                # sequence number; those after the current one carry a sequence number
                # above the kernel event's, so they run iff their time is before it.
                for i in range(C_IN, C_FED + 1):
                    S[i] = 0
                S[C_FFS] = NOT_KNOWN
                S[C_FED] = NOT_KNOWN
                S[S_IN_OPEN] = -1
                S[S_OUT_OPEN] = -1
                kb_t = S[S_KB_TIME]
                if kb_t > t:
                    m = 1 + (kb_t - t - 1) // ii
            elif idle:
                _quiet_tick(t, S, bnd, ev)
            else:
                # busy ticks advance the clock themselves (possibly several ticks)
                _busy_ticks(t, tt, srt, pstate, lru, qb, S, pcie, bnd, ev)
                continue
            S[S_TICK_TIME] = t + m * ii
            S[S_TICK_SEQ] = S[S_SEQ] + m - 1
            S[S_SEQ] += m
