"""Per-iteration statistics of a page-engine run, as the artifact's analysis pass computes
them (simulator spec §14.5 `sim_result.final`, §14.6 the time breakdown, §13 iterations).
"""

from __future__ import annotations

import numpy as np

from g10fast.engine.page import kernels as pk


def transfer_intervals(boundaries: np.ndarray, last_end: int) -> tuple[np.ndarray, np.ndarray]:
    """[begin, end] transfer intervals from boundary records; an open one closes at last_end."""
    b = boundaries
    begins, ends = [], []
    open_t = None
    for flag, t in zip(b[:, 2], b[:, 1]):
        if flag == 1 and open_t is None:
            open_t = int(t)
        elif flag == 0 and open_t is not None:
            begins.append(open_t)
            ends.append(int(t))
            open_t = None
    if open_t is not None:
        begins.append(open_t)
        ends.append(max(int(last_end), open_t))
    return np.asarray(begins, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def _covered(t: np.ndarray, begins: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Total length of the (disjoint, sorted) intervals within [0, t], for each t."""
    if len(begins) == 0:
        return np.zeros_like(t)
    lengths = ends - begins
    before = np.concatenate([[0], np.cumsum(lengths)])
    i = np.searchsorted(begins, t, side="right") - 1
    inside = np.where(i >= 0, np.clip(t - begins[np.maximum(i, 0)], 0, lengths[np.maximum(i, 0)]), 0)
    return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0)


def kernel_breakdown(kernels: np.ndarray, boundaries: np.ndarray, exec_cycles: np.ndarray) -> np.ndarray:
    """Per kernel execution: int64 [n, 4] = total, compute, overlap, stall (§14.6, with O-37)."""
    end = kernels[:, pk.KS_END]
    prev_end = np.concatenate([[0], end[:-1]])
    begins, ends = transfer_intervals(boundaries, int(end[-1]) if len(end) else 0)
    tx = _covered(end, begins, ends) - _covered(prev_end, begins, ends)
    ideal = exec_cycles[kernels[:, pk.KS_KERNEL]]
    total = end - prev_end
    compute = total - tx
    overlap = tx + ideal - total
    stall = total - ideal
    neg = overlap < 0
    stall = np.where(neg, stall - overlap, stall)  # O-37: stall inflated, sum != total
    overlap = np.where(neg, 0, overlap)
    return np.stack([total, compute, overlap, stall], axis=1).astype(np.int64)


def iteration_stats(
    kernels: np.ndarray,
    pcie: np.ndarray,
    boundaries: np.ndarray,
    exec_cycles: np.ndarray,
    pf_cycles: np.ndarray,
    num_iteration: int,
) -> list:
    """One dict per iteration with the §14.5 statistics and the §14.6 breakdown."""
    bd = kernel_breakdown(kernels, boundaries, exec_cycles)
    ideal = int(exec_cycles.sum())
    pf_total = int(pf_cycles.sum())
    out = []
    prev_last_end = 0
    for it in range(num_iteration):
        m = kernels[:, pk.KS_ITER] == it
        if not m.any():
            break
        last_end = int(kernels[m, pk.KS_END][-1])
        exe = last_end - prev_last_end
        prev_last_end = last_end
        pc = pcie[it]
        out.append(
            {
                "iteration": it,
                "exe_time_cycles": exe,
                "ideal_exe_time_cycles": ideal,
                "pf_exe_time_cycles": pf_total,
                "slowdown": exe / ideal if ideal else float("nan"),
                "speedup": pf_total / exe if exe else float("nan"),
                "in_transfer": int(kernels[m, pk.KS_INTR].sum()),
                "cpu_pf": int(kernels[m, pk.KS_CPU].sum()),
                "ssd_pf": int(kernels[m, pk.KS_SSD].sum()),
                "unalloc_pf": int(kernels[m, pk.KS_NP].sum()),
                "stall_cycles": int(bd[m, 3].sum()),
                "overlap_cycles": int(bd[m, 2].sum()),
                "compute_cycles": int(bd[m, 1].sum()),
                "pages": {
                    "alloc": int(pc[pk.PC_ALLOC]),
                    "cpu_to_gpu": int(pc[pk.PC_IN_CPU]),
                    "ssd_to_gpu": int(pc[pk.PC_IN_SSD]),
                    "gpu_to_cpu": int(pc[pk.PC_OUT_CPU]),
                    "gpu_to_ssd": int(pc[pk.PC_OUT_SSD]),
                    "incoming": int(pc[pk.PC_IN]),
                    "outgoing": int(pc[pk.PC_OUT]),
                },
            }
        )
    return out


def reported_iteration(iterations: list) -> int:
    """The iteration the artifact's figure scripts report: argmin of exe_time (O-35)."""
    times = [it["exe_time_cycles"] for it in iterations]
    return int(np.argmin(times)) if times else 0
