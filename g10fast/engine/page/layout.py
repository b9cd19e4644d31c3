"""The page engine's state layout: the packed arrays' columns and slots, the run statuses,
error codes, event kinds, and the decorators of the page engine's Numba kernels.

The engine's kernels are split by stage, one module each (all take plain arrays and scalars):

* `layout` (this module): the state layout below and the decorators;
* `helpers`: page -> tensor lookups, the page-run queues, event rows, admission tests;
* `lru`: the "LRU" list (O-6) as a ring of page entries, as extents (P_XLRU), and DeepUM's
  cursor on extents;
* `stages`: helpers of a busy tick's stages and the pre-eviction fast path;
* `batch`: a busy tick's parameters, a stage's admission, runs of page moves with victims;
* `fetch`: the fetch fast path (`_fetch_fast`);
* `rules`: the eviction rules (`arrival`, `deepum`), kernels the engine specialises on;
* `general`: the general per-page path (victim selection, eviction, allocation), a tick's end;
* `replay`: a busy tick replayed (P_REPLAY);
* `release`: freed page states given back to the operating system;
* `kernel_begin`: the stall model, deallocations, hints, the fault scan, a kernel's begin;
* `loop`: the event loop, `_busy_ticks` and `run_engine` (the kernel Python calls).

`g10fast.engine.page.kernels` re-exports all of their names: the page engine's kernel
namespace, as the wrapper (`g10fast.engine.page`), the invariant check and the tests use it.
The wrapper validates inputs, packs the arrays and drives `run_engine`.

State layout (few packed arrays, so that the hot functions take few arguments):

* `pstate[V] uint8`, one byte per virtual page: bits 0-1 location (NOT_PRESENT, IN_SSD,
  IN_CPU, IN_GPU), bit 2 in_transfer, bit 3 member of the wait set, bits 4-7 an LRU
  generation used to recognise stale LRU entries. It is read as int64: shifts of a uint8
  are typed unsigned, and Numba compares unsigned with signed integers in floating point.
  The memory of a freed tensor's states goes back to the operating system when they are all
  zero (`_release_free`, Linux), or waits in a pool to be moved to where the next states are
  written (`page.release`, "reused"), so the states take memory for the live tensors only.
* `tt[T, TT_COLS] int64`, one row per tensor: first page, pages, global, birth, death, raw
  bytes, required by the current kernel, in the DeepUM window, and `TT_RES`, the number of
  its pages that are IN_GPU and not in transfer (kept exact at every page-state change; a
  kernel's residency check compares it with the page count), and `TT_Z`: 1 when every
  state of its pages is known to be 0 (NOT_PRESENT, no flag, generation 0; bulk engine):
  set at the start (every tensor but the global ones) and where a pre-deallocation leaves
  them all 0, cleared before a hint or a fault scan writes any of them (only those write the
  states of pages that are not present and not in transfer), so that the hints and fault
  scans of a tensor just freed or never used take its state without reading it; `TT_LZ`
  `TT_LA` and `TT_LD`: a tensor whose states are lazy (P_LAZY), its bytes 0 standing for
  F_TRANSFER from page TT_LA on, for IN_GPU below it and for NOT_PRESENT below TT_LD
  (`helpers._lz_state`).
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
  `lru` instead (P_XLRU, "The LRU list as extents" in `lru`): no stale entries, generations or
  compactions.
* Eight FIFO queues of page runs `(first page, count)` in ring buffers `qb[NQ, cap, 2]`
  (capacity a power of two), heads and tails in S.
* Scalars, the integer parameters (`P_*`) and the per-tick counters (`C_*`) all live in
  `S int64[NS]` (indices below); the float parameters in `F float64[3]`.
"""

from __future__ import annotations

import numpy as np

from g10fast.jit import jit, kernel_nonrt, kernel_nonrt_internal

# ---- page locations (G10's PageLocation enum, g10fast.locations) ----
from g10fast.locations import (  # noqa: F401  (re-exported: pk.IN_GPU and the like)
    IN_CPU,
    IN_GPU,
    IN_GPU_LEAST,
    IN_SSD,
    NOT_KNOWN,
    NOT_PRESENT,
)

# ---- page state pstate[p] (uint8, read as int64) ----
# fmt: off
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
TT_Z = 10          # 1: every state of its pages is 0, known without reading them (P_BULK)
TT_LZ = 11         # P_LAZY: 0, or its states are lazy (`_lz_state`): 1, and 2 once a page of it
                   # that left the GPU came back (its byte written)
TT_LA = 12         # P_LAZY, lazy states: a page whose state byte is 0 is IN_GPU below this
                   # page and in transfer (F_TRANSFER, queued to be allocated) from it,
TT_LD = 13         # and NOT_PRESENT below this one (dropped, DeepUM: TT_LD <= TT_LA)
TT_COLS = 14

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
# fmt: on
# compaction (0: every entry that is not a tombstone is live)
S_LRU_SCAN = 47  # entries before this position are ineligible victims for good (reset at
# compaction)
# fmt: off
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
# fmt: on
S_HOST_PEAK = 99  # the most host pages ever in use (a run at a host line above it is the
# same run: every comparison with the line comes out the same)
P_BULK = 100  # 1: the bulk paths (whole-tensor hints and pre-deallocations settled on
# uniform page ranges; same results, see docs/page-engine-bulk.md)
# fmt: off
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
# fmt: on
S_RP_GMODE = 111  # how the GPU use may start a replayed tick: any (4: no queue in the mask
# gives frames); bit 0, at S_RP_GPU (where the template began and ended);
# bit 1, below the frames by more than the pages the template gave frames
# fmt: off
S_RP_C = 112       # its counters at its end (9 slots: c_in .. c_fed, as `_fresh_counters`)
S_RP_N = 121       # pages it took from queue q (8 slots)
S_RP_P0 = 129      # first page of queue q's head run at its start (8 slots)
S_RP_QH = 137      # head slot of queue q at its start (8 slots)
S_RP_QT = 145      # tail slot of queue q at its start (8 slots)
S_RP_CN = 153      # pages at the head of that run at its first page's place (8 slots, bounded)
S_RP_T = 161       # per queue, the tensor of its last replayed pages (8 slots),
S_RP_TLO = 169     # its first page,
S_RP_THI = 177     # its end page
P_REPLAY = 185     # 1: replay repeated busy ticks (bulk engine, extent LRU)
S_RP_COUNT = 186   # busy ticks replayed (a statistic)
# fmt: on
S_RP_HMODE = 187  # how the host use may start a replayed tick: bit 0, at S_RP_HOST (where
# the template began and ended); bit 1, below the line by more than the
# pages the template evicted to the host
# fmt: off
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
# fmt: on
S_X_CUR = 234  # DeepUM on extents: the record of the cursor's page (a hint: checked, and
# looked up again when stale); the cursor, S_LRU_CUR, is then a page or -1
S_X_BUMP = 235  # the first extent record never used (those from it on are free, unlinked)
P_RULE = 236  # 1: the eviction rule is not a built-in one (g10fast.engine.page.rules): every
# page takes the general path, and the bulk paths are off
P_LAZY = 237  # 1: lazy states (TT_LZ; the bulk engine on the extent LRU)
S_LZ_FIX = 238  # lazy tensors whose states were written out (`_lz_fix`, a statistic)
S_DROP = 239  # runs of dropped pages whose states' memory is yet to be given back
# (`_drop_release`): run j is pages S[S_DROP + 2 j] .. S[S_DROP + 2 j + 1] - 1, empty when
# equal; N_DROP runs
N_DROP = 4
S_DROP_NEXT = 247  # the run `_drop_release` gives back next to start a new one
#: open rows a direction keeps besides its current one (`_emit_merge`: rows of up to this many
#: runs that take turns tick by tick all stay extendable)
N_OPEN = 2
S_IN_OPEN2 = 248  # the older open incoming rows, most recent first, -1 past the last (N_OPEN)
S_OUT_OPEN2 = S_IN_OPEN2 + N_OPEN  # the older open outgoing rows (N_OPEN)
# The memory of freed page states reused (page.release, "reused"): memory pages whose states
# are all zero wait in a pool, a ring of N_POOL (start, end) address ranges, oldest at
# S_POOL_T, and move (Linux's mremap) to where a tensor's states are mapped next
S_RECYCLE = S_OUT_OPEN2 + N_OPEN  # 1 + the descriptor of /proc/self/pagemap while the pool
# is in use, else 0 (the release off, or a move the system refused: then for the rest of the
# run, as before, memory given back and mapped again)
P_POOL_CAP = S_RECYCLE + 1  # the most bytes the pool holds (the oldest go back to the system)
S_POOL_T = S_RECYCLE + 2  # the pool's oldest entry,
S_POOL_N = S_RECYCLE + 3  # its entries,
S_POOL_BYTES = S_RECYCLE + 4  # and the bytes they span
S_REUSED = S_RECYCLE + 5  # bytes of states' memory moved from the pool (a statistic)
P_MOVE_MIN = S_RECYCLE + 6  # the fewest memory pages one move takes
S_MOVES_LEFT = S_RECYCLE + 7  # moves the run may still make (each may split a mapping in
# two: the process's mappings are limited, vm.max_map_count)
S_POOL = S_RECYCLE + 8  # the entries: entry j at S_POOL + 2 j, S_POOL + 2 j + 1
N_POOL = 32
S_PM = S_POOL + 2 * N_POOL  # scratch: the pagemap entries of up to N_PM memory pages
N_PM = 256
# (`_pool_cut` also keeps the pool's ranges there while it cuts: up to N_POOL + 1 of them, two
# words each; a larger pool needs room here too)
assert N_PM >= 2 * N_POOL + 2
# a busy tick's start, kept when the tick before it moved nothing (`_busy_ticks`, "Empty busy
# ticks"): each queue's head and tail slots and head run, then the LRU positions and flags
S_ES = S_PM + N_PM
N_ES = 4 * NQ + 16
S_ES_COUNT = S_ES + N_ES - 1  # busy ticks ended in closed form so (a statistic)
S_LZ_FREE = S_ES + N_ES  # lazy tensors freed without a pass over their states (a statistic)
S_LZ_BACK = S_LZ_FREE + 1  # arrivals of lazy tensors' pages that had left (TT_LZ 2; a statistic)
S_LZ_DROP = S_LZ_BACK + 1  # runs of lazy tensors' pages dropped without a write (a statistic)
NS = S_LZ_DROP + 1
STALE_BUCKETS = 1 << 16

# run statuses
ST_DONE = 0
ST_PAUSE = 1
ST_ERROR = 2

# error codes (S[S_ERROR])
E_NONE = 0
# fmt: off
E_QUEUE_OVERFLOW = 1        # a page queue is full
E_NO_VICTIM = 2             # the GPU is full and no page can be evicted
E_HOST_OVERFLOW = 3         # an eviction to CPU finds the host memory full (page: S_ERR_A)
E_DEAD_LIVE_EVICT = 4       # a planned eviction drops a live page
E_REFAULT_AFTER_RESUME = 5  # a resumed kernel faults again (O-14; kernel: S_ERR_A)
E_BUFFER_OVERFLOW = 6       # the event buffer is full
E_EXTENTS = 7               # the extent LRU ran out of records (an engine defect)
E_REPLAY = 8                # a replayed busy tick ended unlike its template (an engine defect)
# fmt: on

# event kinds (g10fast.trace); event rows ev[n, EV_COLS] hold time (cycles), kind,
# iteration, kernel, tensor, first page, page count, src, dst, value, ticks, period, stride
# (trace.COL_*; a row of ticks m > 1 stands for m rows, period cycles apart, of count / m
# pages each, their first pages stride apart (0: count / m): docs/trace-format.md, "Range
# rows")
EV_KERNEL = 0
EV_FAULT = 1
EV_FETCH = 2
EV_ALLOC = 3
EV_EVICT = 4
EV_HINT = 5
EV_DEALLOC = 6
EV_TRANSFER = 7
EV_TICKS = 10
EV_PERIOD = 11
EV_STRIDE = 12
EV_COLS = 13

# kernel statistics columns kstat[n, ...] (int64), one row per completed kernel
# fmt: off
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
# fmt: on
# the queue each allocating stage takes its pages from (pre-eviction stages: Q_PREEVICT_*)
_STAGE_QUEUE = (
    Q_PREEVICT_SSD,
    Q_PREEVICT_CPU,
    Q_PF_SSD,
    Q_PF_CPU,
    Q_PF_ALLOC,
    Q_PREFETCH_SSD,
    Q_PREFETCH_CPU,
    Q_PREALLOC,
    Q_PREFETCH_SSD,
    Q_PREFETCH_CPU,
    Q_PREALLOC,
)


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
# The stages of a busy tick that run once per stage or tick (`_tick_end`, `_rp_end`, ...) are
# plain compiled calls, like the small helpers above them: LLVM inlines the small ones. The
# general path, taken once per page (`_general_page`, the eviction rule (`rules`),
# `_evict_page`, `_alloc_page`), is always inlined into `_busy_ticks` by LLVM (`forceinline`),
# so that the tick's state stays in registers across it (compiled as calls, traced runs, a call
# per page, were 20% slower). So are the stages called from one or two places several times a
# tick (those decorated `_kernel_page`: the fetch fast path, the stage admission, the runs of
# moves, the end-of-tick checks, the replay's batch and tick, the queue pushes): a call passes
# each array as its whole struct on the stack (a 1-d array 7 words, a 2-d one 9), and the
# calls' pushes were a third of `_fetch_fast`'s samples and over half of `_busy_ticks`'s and
# `_rp_ticks`'s (`perf annotate`, session 59; benchmarks/results/page-engine-bulk-journal.md,
# "Twenty-third step"). Numba's IR inlining (until 6bdc9bd) gave the general path the same
# speed but cost a cold start about 4 s more (the IR inliner copies the callee's scope block by
# block; the journal's "Ninth step"); Numba's IR inlining of every stage gave bit-identical
# results but a slower busy tick and a first compile about 10 s longer
# (benchmarks/results/engine_split.jsonl).
_kernel_stage = kernel_nonrt_internal
_kernel_page = jit(_nrt=False, internal=True, forceinline=True)
