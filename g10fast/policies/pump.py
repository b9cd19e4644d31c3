"""PUMP (ASP-DAC'22) on the driver engine (`pump`; specs/seed-policies.md §1).

At each kernel launch PUMP prefetches the kernel's memory blocks (cudaMemPrefetchAsync on one
private stream) and makes the kernel wait for them (E2, the stream barrier). The prefetch
stream first waits for the oldest launched kernels to finish, popped from a FIFO window until
the union of the window's block bytes plus the new kernel's fits under a cap (% of GPU
memory). Prefetch(k) is issued once kernel k is launched (E1: the host's run-ahead,
g10fast.engine.driver.launch: the stream's launch queue of about 1000 kernels, the loop's
`loss.item()` once per iteration) and the prefetch stream has reached it (the end of kernel
gate[k], the last kernel popped, and every earlier prefetch: one FIFO stream). Blocks are whole
tensors or their first bytes (E3, the cuBLAS size bug). Eviction is the driver's."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from g10fast.engine.driver.mode import DriverMode
from g10fast.errors import InputError
from g10fast.policies.registry import PolicyRecord

CUDNN = ("Conv2d", "BatchNorm2d")
CUBLAS = ("Linear", "Dot", "BatchMatMul")


@dataclass(frozen=True)
class Options:
    #: window cap, % of GPU memory; -1: PUMP's auto rule (framework hooks 100; else any cuDNN
    #: block 100; else 60)
    cap_factor: int = -1
    #: "library_calls" (an unmodified framework: cuDNN calls all tensors, cuBLAS operands,
    #: native kernels only pointers that were cuDNN blocks), "framework_hooks" (every tensor)
    coverage: str = "library_calls"
    #: cuBLAS operand sizes taken as element counts used as bytes (quirk 1)
    cublas_size_bug: bool = True
    #: cuBLAS calls never enter the window; their blocks join the next kernel's (quirk 2)
    cublas_macro_bug: bool = True
    #: "stream_barrier" (E2: the kernel starts after its prefetches) or "overlap" (it starts
    #: at once and waits only on the pages it touches that are still in flight)
    wait: str = "stream_barrier"
    #: the driver's eviction under PUMP: "alloc2m" (the driver's), "access2m", "lru4k"
    evict: str = "alloc2m"
    #: E1, the host's run-ahead (g10fast.engine.driver.launch.LaunchOptions, whose docstrings cite
    #: the defaults): where the loop waits for the GPU, "loss" (`loss.item()` after the
    #: forward pass), "iteration" (at its end) or "none"
    sync: str = "loss"
    #: launches the stream's queue holds (about 1000 kernels, measured); 0: unbounded
    #: (with sync = "none": the spec's infinite run-ahead)
    launch_queue_depth: int = 1000
    #: under the driver engine's fresh_allocations (a non-caching allocator of
    #: cudaMallocManaged / cudaFree), each cudaFree after a tensor's last user synchronises
    #: the device ("cudaMalloc and cudaFree causes the GPU to synchronize across all
    #: executing CUDA streams": CUDA Programming Guide, stream-ordered allocation; the same
    #: for managed memory: pytorch/pytorch#106200), so the host launches nothing after that
    #: kernel before it ends. PUMP passes cudaFree through to the real call (hook_api/cuda.cpp)
    free_sync: bool = True

    def check(self):
        if not (self.cap_factor == -1 or 1 <= self.cap_factor <= 100):
            raise InputError(f"must be -1 (auto) or 1..100, got {self.cap_factor}", param="policy.cap_factor")
        if self.coverage not in ("library_calls", "framework_hooks"):
            raise InputError(
                f"must be library_calls or framework_hooks, got {self.coverage!r}", param="policy.coverage"
            )
        if self.wait not in ("stream_barrier", "overlap"):
            raise InputError(f"must be stream_barrier or overlap, got {self.wait!r}", param="policy.wait")
        self.launch().check()
        if not isinstance(self.free_sync, bool):
            raise InputError(f"must be true or false, got {self.free_sync!r}", param="policy.free_sync")
        if self.evict not in ("alloc2m", "access2m", "lru4k"):
            raise InputError(f"must be alloc2m, access2m or lru4k, got {self.evict!r}", param="policy.evict")

    def launch(self):
        from g10fast.engine.driver.launch import LaunchOptions

        return LaunchOptions(queue_depth=self.launch_queue_depth, sync=self.sync)


def _kind(name: str) -> str:
    head = name.split("_")[0]
    return "cudnn" if head in CUDNN else "cublas" if head in CUBLAS else "native"


def kernel_blocks(w, options, dtype_bytes: int = 4) -> tuple[list, bool]:
    """Per kernel, PUMP's blocks as (tensor, bytes) and whether the kernel is a cuBLAS call;
    and whether any cuDNN block exists (the auto cap rule)."""
    from g10fast.planner.deepum import required_csr

    ptr, idx = required_csr(w)
    blocks, cublas = [], []
    cudnn_seen = set()
    any_cudnn = False
    for k in range(w.num_kernels):
        ts = idx[ptr[k] : ptr[k + 1]].tolist()
        kind = _kind(w.kernel_name[k])
        if options.coverage == "framework_hooks":
            b = [(t, int(w.size[t])) for t in ts]
        elif kind == "cudnn":
            b = [(t, int(w.size[t])) for t in ts]
            cudnn_seen.update(ts)
            any_cudnn = True
        elif kind == "cublas":
            div = dtype_bytes if options.cublas_size_bug else 1
            b = [(t, max(1, int(w.raw_size[t]) // div)) for t in ts]
        else:
            outs = [t for t in w.outputs(k).tolist() if t in cudnn_seen]
            b = [(outs[0], int(w.size[outs[0]]))] if outs else []
        blocks.append(b)
        cublas.append(kind == "cublas" and options.coverage == "library_calls" and options.cublas_macro_bug)
    return blocks, cublas, any_cudnn


def window_gates(blocks: list, carry: list, cap: int, gpu_bytes: int) -> tuple[list, list]:
    """PUMP's launch window (prefetch.cpp) over a kernel sequence: blocks[g] the (id, bytes)
    set of launch g, carry[g]: a cuBLAS call under the macro bug (prefetches, never enters the
    window; its set joins the next launch's). Returns (gate, prefetched): gate[g] the last
    popped launch (-1: none) when prefetch(g) is issued, prefetched[g] the blocks it
    prefetches (every block of the set not larger than the GPU)."""
    window: deque = deque()
    ref: dict = {}
    win_bytes = 0
    last_pop = -1
    pending: list = []
    gates, pref = [], []
    for g, B in enumerate(blocks):
        cur = list(dict.fromkeys(pending + list(B)))
        # the window's bytes once this set joins it: its own blocks not in the window yet
        # (`extra`, kept as pops drop blocks of the set from the window)
        in_cur = set(cur)
        extra = sum(s for b, s in cur if ref.get((b, s), 0) == 0)
        while win_bytes + extra > cap and window:
            j, Bj = window.popleft()
            last_pop = j
            for key in Bj:
                ref[key] -= 1
                if ref[key] == 0:
                    win_bytes -= key[1]
                    if key in in_cur:
                        extra += key[1]
        gates.append(last_pop)
        pref.append([(b, s) for b, s in cur if s <= gpu_bytes])
        if carry[g]:
            pending = cur
            continue
        pending = []
        window.append((g, cur))
        for key in cur:
            if ref.get(key, 0) == 0:
                win_bytes += key[1]
            ref[key] = ref.get(key, 0) + 1
    return gates, pref


def _mode(o) -> DriverMode:
    """PUMP's settings of the driver engine: its eviction, and whether a prefetch overlaps
    the one in flight."""
    return DriverMode.of(evict=o.evict, inflight_overlap=o.wait == "overlap")


def _fresh_allocations(ctx, o) -> bool:
    """Whether the run's driver options (the engine's defaults < PUMP's < the run's
    engine.compat) allocate and free the non-weight tensors every iteration."""
    compat = getattr(ctx.engine, "compat", ()) or ()
    return bool(_mode(o).options(compat).fresh_allocations)


def planner(ctx):
    from g10fast.engine.driver import HINT_KINDS, DriverHints
    from g10fast.engine.driver.launch import launched_by, sync_kernel
    from g10fast.workload.model import PAGE_SIZE

    w, o = ctx.workload, ctx.options
    n_iter = int(ctx.engine.num_iteration)
    K = w.num_kernels
    gpu_bytes = int(float(ctx.system.gpu_memory_gb) * 2**30)
    blocks, cublas, any_cudnn = kernel_blocks(w, o, int(w.meta.get("dtype_bytes", 4)))
    factor = o.cap_factor
    if factor == -1:
        factor = 100 if (o.coverage == "framework_hooks" or any_cudnn) else 60
    cap = gpu_bytes * factor // 100
    gates, pref = window_gates(blocks * n_iter, cublas * n_iter, cap, gpu_bytes)
    lopt = o.launch()
    sync_k = sync_kernel(w.kernel_name, lopt.sync)
    syncs = [sync_k]
    fresh = _fresh_allocations(ctx, o)
    if fresh and o.free_sync:
        from g10fast.engine.driver import allocation_rows

        frees = allocation_rows(w, 1, False)[5]
        syncs += np.nonzero(frees)[0].tolist()
    launched = launched_by(K, n_iter, lopt, np.asarray(syncs, np.int64))
    iss, sp, npg = [], [], []
    wait = np.full(n_iter * K, -1, np.int64)
    start = w.start_page.astype(np.int64)
    for g in range(n_iter * K):
        # launched (E1), after the end of the last popped kernel, after every earlier row
        # (one FIFO stream)
        first = max(int(launched[g]), gates[g] + 1, iss[-1] if iss else 0)
        for t, nbytes in pref[g]:
            iss.append(first)
            sp.append(int(start[t]))
            npg.append(-(-nbytes // PAGE_SIZE))
        if pref[g] and o.wait == "stream_barrier":
            wait[g] = len(iss) - 1
    n = len(iss)
    kinds = np.full(n, HINT_KINDS["prefetch"], np.int64)
    return DriverHints(
        np.asarray(iss, np.int64),
        np.asarray(sp, np.int64),
        np.asarray(npg, np.int64),
        kinds,
        wait,
        info={
            "cap_factor": int(factor),
            "cap_bytes": int(cap),
            "coverage": o.coverage,
            "sync_kernel": int(sync_k),
            "sync_kernels_per_iteration": len(set(syncs) - {-1}),
            "covered_bytes_per_iteration": int(sum(s for g in range(K) for _, s in pref[g])),
        },
    )


RECORD = PolicyRecord(
    name="pump",
    display="PUMP",
    engine="driver",
    plan_depends_on_host=False,
    planner=planner,
    options=Options,
    aliases=("pump-um",),
    paper="PUMP (ASP-DAC'22): profiling-free unified memory prefetcher",
    description="launch-time prefetch of each kernel's blocks, byte-bounded launch window, "
    "stream barrier; the driver's eviction",
    order=120,
    colour="#e377c2",
    engine_mode=lambda o, engine: _mode(o),
)
