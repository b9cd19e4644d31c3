"""The swap engine's plan-to-engine conversion (docs/allocators.md, "Policies on the models"):
a swap plan of a workload-derived allocation trace (g10fast.alloc.swap) as the tensor
engine's hint rows (`swap_hints`), the options the tensor engine runs swaps under
(`ENGINE_OPTIONS`), the swapped iteration's allocations for the allocator
(`swapped_iteration`) and each op's kernel across iterations (`absolute_kernels`)."""

from __future__ import annotations

import numpy as np


def swapped_iteration(trace, plan):
    """The planned iteration's malloc/free ops with each swap's free (when its swap-out ends)
    and malloc (when its swap-in starts): an AllocTrace for the allocator. Blocks live when
    the iteration starts are malloc'd first."""
    from g10fast.alloc.trace import FREE, MALLOC, AllocTrace

    s, e = plan.start, plan.start + plan.length
    B = int(trace.block.max()) + 1 if trace.num_ops else 0
    mal = np.full(B, trace.num_ops, np.int64)
    fre = np.full(B, trace.num_ops, np.int64)
    m = trace.kind == MALLOC
    mal[trace.block[m]] = np.nonzero(m)[0]
    f = trace.kind == FREE
    fre[trace.block[f]] = np.nonzero(f)[0]
    bsize = np.zeros(B, np.int64)
    bsize[trace.block[m]] = trace.size[m]
    ev = []  # (key, tie, kind, block, new copy)
    for b in np.nonzero((mal < s) & (fre >= s))[0].tolist():
        ev.append((-1.0, 1, MALLOC, b, False))
    for j in range(s, e):
        k = int(trace.kind[j])
        if k <= FREE:
            ev.append((float(j - s), 0 if k == FREE else 1, k, int(trace.block[j]), False))
    for q in range(plan.num_swaps):
        b = int(plan.block[q])
        lo, hi = int(plan.out_end_idx[q]), int(plan.in_start_idx[q])
        if lo >= e - s:
            continue
        ev.append((max(lo, -1) + 0.5, 0, FREE, b, False))
        if hi < e - s:
            ev.append((hi - 0.5, 1, MALLOC, b, True))
    ev.sort(key=lambda x: (x[0], x[1]))
    cur: dict = {}
    kinds, blocks, sizes = [], [], []
    nxt = 0
    for _, _, k, b, new in ev:
        if k == MALLOC:
            if b in cur and not new:
                continue
            cur[b] = nxt
            nxt += 1
            kinds.append(MALLOC)
        else:
            if cur.get(b) is None:
                continue
            kinds.append(FREE)
        blocks.append(cur[b])
        sizes.append(int(bsize[b]))
        if k == FREE:
            cur[b] = None
    n = len(kinds)
    blocks = np.asarray(blocks, np.int64)
    return AllocTrace(
        trace.name + "-swapped",
        np.asarray(kinds, np.int8),
        blocks,
        np.asarray(sizes, np.int64),
        np.arange(n, dtype=np.int64),
        blocks,
        np.zeros(n, np.int16),
        {},
    )


def absolute_kernels(trace) -> np.ndarray:
    """Per op of a workload-derived trace, its kernel counted across iterations (iteration ×
    K + kernel; -1 for the start-up mallocs)."""
    kop = np.asarray(trace.meta["kernel_of_op"], np.int64)
    K = int(trace.meta.get("kernels") or (kop.max() + 1))
    drop = np.zeros(len(kop), np.int64)
    drop[1:] = (kop[1:] < kop[:-1]) & (kop[1:] >= 0)
    return np.where(kop >= 0, kop + K * np.cumsum(drop), -1)


def swap_hints(trace, plan) -> tuple[np.ndarray, dict, dict]:
    """The plan of a workload-derived trace (`from_workload`: its `kernel_of_op` and
    `tensor_of_op`) as the tensor engine's hint rows (kernel, tensor, NOT_KNOWN, to), to =
    IN_CPU (swap-out) or IN_GPU (swap-in); counts; and the tensors absent when the iteration
    starts ({tensor: kernel of its swap-out}).

    In kernels counted across the trace's iterations, a swap is absent from its swap-out's
    kernel (that of its planned start, at the earliest the kernel after the last use) to its
    swap-in's (that of its planned start, after the swap-out's, at the latest the next use's).
    Taken modulo the iteration's K kernels: an absence inside [0, K) gives an out hint and an in
    hint; one that wraps round the iteration's end (weights and optimizer state used last late
    in one iteration and next early in the next) means the tensor is on the host when the
    iteration starts: its swap-out is issued at kernel 0 (in the order of the swap-ins; the
    engine's one iteration starts with every weight resident; the transfer stands for the
    previous iteration's, so each swap still moves its bytes once each way per iteration) and
    its swap-in where planned; the allocator's trace then leaves it out until that swap-in and
    frees it at its swap-out kernel (g10fast.alloc.trace.from_tensor_events, `absent_at_start`).
    An absence that ends at kernel 0 of the next iteration (nothing to fetch inside this one)
    and swaps whose gap is a single kernel are left out and counted."""
    from g10fast.locations import IN_CPU, IN_GPU, NOT_KNOWN

    kop = np.asarray(trace.meta["kernel_of_op"], np.int64)
    top = np.asarray(trace.meta["tensor_of_op"], np.int64)
    K = int(trace.meta.get("kernels") or (kop.max() + 1))
    ak = absolute_kernels(trace)
    s = int(plan.start)
    base = int(ak[s]) - int(kop[s])
    n = trace.num_ops
    rows, absent, proxies = [], {}, []
    wrap = short = edge = 0
    for q in range(plan.num_swaps):
        r, d = s + int(plan.r_idx[q]), s + int(plan.d_idx[q])
        if ak[r] < 0 or d >= n:
            edge += 1
            continue
        kr, kd = int(ak[r]), int(ak[d])
        k_out = max(int(ak[min(s + int(plan.out_start_idx[q]), d)]), kr + 1)
        if k_out >= kd:
            short += 1
            continue
        k_in = min(max(int(ak[min(s + int(plan.in_start_idx[q]), d)]), k_out + 1), kd)
        t = int(top[r])
        o, i = k_out - base, k_in - base
        if 0 <= o and i < K:
            rows.append((o, t, NOT_KNOWN, IN_CPU))
            rows.append((i, t, NOT_KNOWN, IN_GPU))
            continue
        o, i = o % K, i % K
        if i == 0 or t in absent:
            edge += 1
            continue
        wrap += 1
        absent[t] = o
        proxies.append((i, t))
        rows.append((i, t, NOT_KNOWN, IN_GPU))
    # the stand-in swap-outs at kernel 0 in the order their swap-ins come (the out channel
    # is a FIFO: the tensor needed first leaves first)
    rows = [(0, t, NOT_KNOWN, IN_CPU) for i, t in sorted(proxies)] + rows
    h = np.asarray(rows, np.int64).reshape(-1, 4)
    h = h[np.argsort(h[:, 0], kind="stable")]
    return (
        h,
        {
            "hinted_swaps": int(len(rows) // 2),
            "wrapping_swaps": int(wrap),
            "late_left_out": int(short),
            "edge_left_out": int(edge),
        },
        absent,
    )


#: the tensor engine's options for explicit swaps: its artifact quirks (O-n) off, so that a
#: swap costs its transfer and a kernel waits for its data (docs/allocators.md)
ENGINE_OPTIONS = {
    "gds_ready_on_alloc": False,
    "gds_weights_free_refetch": False,
    "gds_fetch_during_offload": False,
    "gds_reoffload": False,
    "gds_demand_from_ssd": False,
    "bytes_at_schedule": False,
    "tensor24_bypass": False,
    "largest_misses_last_page": False,
}
