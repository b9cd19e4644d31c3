"""Tensor Vitality Analysis (planner spec §3.3, §4.1–4.3, §4.5; simulator spec §2.1).

Liveness of the non-global tensors, the inactive periods ("Hidding_Interval"s) of every tensor,
and their estimated durations from the kernel time table. Everything is computed from the
kernel→tensor CSR arrays in O(Σ required tensors), without G10's O(T·K) scans.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from g10fast.workload.model import PAGE_SIZE, Workload
from g10fast.workload.times import frequency_hz


@dataclass(frozen=True)
class Vitality:
    """Liveness and inactive periods of one iteration.

    Per tensor (length T):
      birth int32  first kernel that uses a non-global tensor (input or output)
      death int32  1 + last kernel that reads it, or -1 if it is never read (live only at birth)
        Globals are not analysed (they are always alive): birth = death = -1 for them, and
        for a non-global tensor that no kernel uses (G10 leaves those uninitialised).
      iv_ptr int64[T+1]  intervals of tensor t are iv_*[iv_ptr[t]:iv_ptr[t+1]]
    Time tables (µs, planner spec §3.3):
      time_us float64[K+1]       T[k] = start of kernel k, T[K] = iteration length
      time_ext_us float64[2K+1]  T extended by a second iteration, for wrap-around intervals
    Intervals (length I, G10's creation order: tensor id, then the gaps between uses in time
    order, then a global's wrap-around interval, looped or the non-looped [0, u_1)):
      iv_tensor int32, iv_start int32 (s), iv_end int32 (e; the next use), iv_looped bool
      (e < s: wraps into the next iteration), iv_time_us float64 (estimated duration)
    """

    birth: np.ndarray
    death: np.ndarray
    time_us: np.ndarray
    time_ext_us: np.ndarray
    iv_tensor: np.ndarray
    iv_start: np.ndarray
    iv_end: np.ndarray
    iv_looped: np.ndarray
    iv_time_us: np.ndarray
    iv_ptr: np.ndarray

    @property
    def num_intervals(self) -> int:
        return int(self.iv_tensor.shape[0])


def time_table(exec_cycles: np.ndarray, freq_ghz: float) -> tuple[np.ndarray, np.ndarray]:
    """T[0..K] and Text[0..2K] in µs: T[i+1] = T[i] + exec_i / (GHz*1000), summed in order."""
    frequency_hz(freq_ghz)  # validates the parameter
    exec_cycles = np.asarray(exec_cycles, dtype=np.int64)
    K = exec_cycles.shape[0]
    t = np.zeros(K + 1, dtype=np.float64)
    # np.add.accumulate is a sequential left-to-right sum, like G10's running total
    np.add.accumulate(exec_cycles.astype(np.float64) / (float(freq_ghz) * 1000.0), out=t[1:])
    t_ext = np.concatenate([t, t[K] + t[1:]])
    return t, t_ext


def _uses(workload: Workload):
    """Unique (tensor, kernel) use pairs sorted by tensor then kernel, and a read flag for each."""
    K = workload.num_kernels
    T = workload.num_tensors
    kin = np.repeat(np.arange(K, dtype=np.int64), np.diff(workload.in_ptr))
    kout = np.repeat(np.arange(K, dtype=np.int64), np.diff(workload.out_ptr))
    tin = workload.in_idx.astype(np.int64)
    tout = workload.out_idx.astype(np.int64)
    # key = tensor*K + kernel; a read (input) wins over a write of the same pair
    key_in = np.unique(tin * K + kin)
    key_all = np.unique(np.concatenate([key_in, tout * K + kout]))
    is_read = np.isin(key_all, key_in, assume_unique=True)
    ut = key_all // K if K else key_all
    uk = key_all % K if K else key_all
    if ut.size and (ut.max() >= T or ut.min() < 0):
        raise ValueError("kernel incidence refers to a tensor id outside 0..T-1")
    return ut, uk, is_read


def vitality(workload: Workload, freq_ghz: float) -> Vitality:
    """Liveness (§4.1), inactive periods (§4.2, §4.5) and their times (§4.3)."""
    K = workload.num_kernels
    T = workload.num_tensors
    is_global = np.asarray(workload.is_global, dtype=bool)
    t, t_ext = time_table(workload.exec_cycles, freq_ghz)
    ut, uk, is_read = _uses(workload)

    # §4.1 liveness: birth = first use, death = last read + 1 (or -1); locals only
    first = np.full(T, -1, dtype=np.int64)
    last_read = np.full(T, -1, dtype=np.int64)
    if ut.size:
        starts = np.r_[0, np.nonzero(np.diff(ut))[0] + 1]
        first[ut[starts]] = uk[starts]  # pairs are sorted by kernel within a tensor
        np.maximum.at(last_read, ut[is_read], uk[is_read])
    local = ~is_global
    birth = np.where(local, first, -1)
    death = np.where(local & (last_read >= 0), last_read + 1, -1)

    # uses that delimit intervals: all uses of a global; uses of a local before its death
    # (writes after the last read are ignored; never-read locals get no intervals)
    keep = is_global[ut] | (death[ut] > uk)
    ut, uk = ut[keep], uk[keep]

    # gaps between consecutive uses of the same tensor: [u_q + 1, u_{q+1}) if non-empty
    same = ut[1:] == ut[:-1]
    gap = same & (uk[1:] > uk[:-1] + 1)
    g_t, g_s, g_e = ut[1:][gap], uk[:-1][gap] + 1, uk[1:][gap]

    # §4.2 wrap-around for globals with at least one use (first use u_1, last use u_m)
    if ut.size:
        heads = np.r_[0, np.nonzero(~same)[0] + 1]
        tails = np.r_[heads[1:] - 1, ut.size - 1]
    else:
        heads = tails = np.zeros(0, dtype=np.int64)
    w_t = ut[heads]
    u1, um = uk[heads], uk[tails]
    glob = is_global[w_t]
    looped_sel = glob & (um < K - 1)  # [u_m + 1, u_1), e < s (e may be 0)
    front_sel = glob & (um == K - 1) & (u1 > 0)  # non-looped [0, u_1)
    l_t, l_s, l_e = w_t[looped_sel], um[looped_sel] + 1, u1[looped_sel]
    f_t, f_s, f_e = w_t[front_sel], np.zeros(int(front_sel.sum()), np.int64), u1[front_sel]

    iv_t = np.concatenate([g_t, f_t, l_t])
    iv_s = np.concatenate([g_s, f_s, l_s])
    iv_e = np.concatenate([g_e, f_e, l_e])
    iv_l = np.concatenate([np.zeros(g_t.size + f_t.size, bool), np.ones(l_t.size, bool)])
    wrap = np.concatenate([np.zeros(g_t.size, bool), np.ones(f_t.size + l_t.size, bool)])
    # creation order: tensor id, then the gaps chronologically, then the wrap-around interval.
    # G10 appends a global's wrap interval last even when it is the non-looped [0, u_1)
    # (observed in ResNet152-256's interval.config, e.g. tensor 2: [2, 1297) before [0, 1))
    order = np.lexsort((iv_s, wrap, iv_t))
    iv_t, iv_s, iv_e, iv_l = iv_t[order], iv_s[order], iv_e[order], iv_l[order]

    # §4.3 times: T[e] - T[s]; looped: Text[e + K] - Text[s] = (T[K] + T[e]) - T[s]
    iv_time = np.where(iv_l, t_ext[iv_e + K] - t[iv_s], t[iv_e] - t[iv_s])

    iv_ptr = np.zeros(T + 1, dtype=np.int64)
    iv_ptr[1:] = np.cumsum(np.bincount(iv_t, minlength=T))
    return Vitality(
        birth=birth.astype(np.int32),
        death=death.astype(np.int32),
        time_us=t,
        time_ext_us=t_ext,
        iv_tensor=iv_t.astype(np.int32),
        iv_start=iv_s.astype(np.int32),
        iv_end=iv_e.astype(np.int32),
        iv_looped=iv_l,
        iv_time_us=iv_time.astype(np.float64),
        iv_ptr=iv_ptr,
    )


def is_alive(v: Vitality, workload: Workload, k: int) -> np.ndarray:
    """bool[T]: tensor t is alive at kernel k (simulator spec §2.1).

    Globals always; a never-read local only at its birth kernel; others in [birth, death)."""
    g = np.asarray(workload.is_global, dtype=bool)
    in_range = (v.birth <= k) & (k < v.death)
    return g | np.where(v.death == -1, v.birth == k, in_range)


def _fmt(x: float) -> str:
    """C++ default ostream formatting of a double: 6 significant digits, like printf %g."""
    return "%g" % x


def _tensor_line(tid: int, is_global: bool, size: int, offset: int) -> str:
    end = offset + (size + PAGE_SIZE - 1) // PAGE_SIZE * PAGE_SIZE
    return f"tensor{tid} Is weight (global)?: {int(is_global)}, Size in byte: {size}, Range:{offset}--{end}"


def interval_config_text(v: Vitality, workload: Workload) -> str:
    """The text of G10's statistics/interval.config (planner spec §7).

    Per tensor: its line, then ``Liveness: Birth: b, Death: d.`` or ``Global!`` and 60 '_';
    then its line again, ``Hidding Intervals:``, per interval ``interval i: s--------e`` and
    ``Estimated Time:<µs>``, and 63 '_'. Range uses the per-space offset (weights and
    intermediates each start at 0)."""
    g = np.asarray(workload.is_global, dtype=bool)
    size = np.asarray(workload.size, dtype=np.int64)
    offset = np.where(g, workload.address, workload.address - workload.weights_bytes)
    sep60, sep63 = "_" * 60, "_" * 63
    out = []
    ptr = v.iv_ptr
    s_list, e_list, time_list = v.iv_start.tolist(), v.iv_end.tolist(), v.iv_time_us.tolist()
    birth, death = v.birth.tolist(), v.death.tolist()
    for tid in range(workload.num_tensors):
        line = _tensor_line(tid, bool(g[tid]), int(size[tid]), int(offset[tid]))
        out.append(line)
        out.append("Global!" if g[tid] else f"Liveness: Birth: {birth[tid]}, Death: {death[tid]}.")
        out.append(sep60)
        out.append(line)
        out.append("Hidding Intervals:")
        for j, i in enumerate(range(int(ptr[tid]), int(ptr[tid + 1]))):
            out.append(f"interval {j}: {s_list[i]}--------{e_list[i]}")
            out.append("Estimated Time:" + _fmt(time_list[i]))
        out.append(sep63)
    return "\n".join(out) + "\n"


def write_interval_config(v: Vitality, workload: Workload, path) -> None:
    """Write `interval_config_text` to `path` (G10's statistics/interval.config)."""
    with open(os.fspath(path), "w", encoding="ascii", newline="\n") as f:
        f.write(interval_config_text(v, workload))
