"""Kernel-time and workspace traces (workloads spec §2; planner spec §2.7, §3.1–3.4).

Trace files hold one line per kernel, ``<id> <value> <unit>``: ``ms`` for the three time files
(ideal, inputs faulting, all faulting) and ``B`` for the cuDNN workspace file. Times become
integer GPU cycles exactly as G10 converts them, so that sums match the artifact's "ideal" numbers.
"""

from __future__ import annotations

import math
import os

import numpy as np

from g10fast.errors import InputError
from g10fast.workload.model import Graph, Workload, build_workload

_UNITS = ("ms", "B")


def read_trace_file(path, n_kernels: int, unit: str) -> np.ndarray:
    """Read a ``"<id> <value> <unit>"`` trace of exactly `n_kernels` lines -> float64[n_kernels].

    Ids are parsed as (zero-padded) integers and must be 0..K-1 in order. Trailing blank lines
    are ignored; any other deviation raises InputError naming the file and line."""
    if unit not in _UNITS:
        raise ValueError(f"unit must be one of {_UNITS}, got {unit!r}")
    path = os.fspath(path)
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise InputError("trace file not found", path=path) from None
    except UnicodeDecodeError as e:
        raise InputError(f"trace file is not plain text ({e.reason})", path=path) from None
    except OSError as e:
        raise InputError(f"cannot read trace file: {e.strerror}", path=path) from None
    while lines and not lines[-1].strip():
        lines.pop()
    what = "workspace size" if unit == "B" else "kernel time"
    values = np.empty(len(lines), dtype=np.float64)
    for i, text in enumerate(lines):
        tokens = text.split()
        where = dict(path=path, line=i + 1)
        if len(tokens) != 3:
            raise InputError(f"expected '<kernel id> <{what}> {unit}', got {text.strip()!r}", **where)
        sid, sval, sunit = tokens
        if sunit != unit:
            raise InputError(f"expected unit '{unit}', got '{sunit}'", **where)
        if not sid.isdigit():
            raise InputError(f"kernel id {sid!r} is not a non-negative integer", **where)
        if int(sid) != i:
            raise InputError(
                f"kernel id {int(sid)} found where {i} was expected (ids must be 0..K-1 in order)", **where
            )
        try:
            val = float(sval)
        except ValueError:
            raise InputError(f"{what} {sval!r} is not a number", **where) from None
        if not math.isfinite(val) or val < 0:
            raise InputError(f"{what} {sval!r} must be finite and >= 0", **where)
        if unit == "B" and not val.is_integer():
            raise InputError(f"workspace size {sval!r} is not a whole number of bytes", **where)
        values[i] = val
    if len(lines) != n_kernels:
        raise InputError(f"trace has {len(lines)} lines but the model has {n_kernels} kernels", path=path)
    return values


def frequency_hz(freq_ghz: float) -> int:
    """G10's integer clock: ``(uint64)(GPU_frequency_GHz * 1e9)`` (simulator spec §0).

    The planner spec (§3.2) writes f_Hz = GHz * 1e9 without the truncation; both are
    1,200,000,000 at the 1.2 GHz of every artifact config, where the per-kernel truncated sums
    reproduce all 40 "ideal cycles" values of g10-workloads.md §2."""
    if not (isinstance(freq_ghz, (int, float)) and math.isfinite(freq_ghz) and freq_ghz > 0):
        raise InputError(f"must be a positive number of GHz, got {freq_ghz!r}", param="GPU_frequency_GHz")
    f = int(float(freq_ghz) * 1e9)
    if f <= 0:
        raise InputError(f"{freq_ghz!r} GHz is below 1 Hz", param="GPU_frequency_GHz")
    return f


def _ms_to_cycles(ms: np.ndarray, f_hz: int) -> np.ndarray:
    # trunc(ms * f / 1000), evaluated left to right in double precision as G10 does
    return np.trunc(np.asarray(ms, dtype=np.float64) * float(f_hz) / 1000.0)


def kernel_cycles(orig_ms, input_pf_ms, pf_ms, freq_ghz: float, kernel_speedup: float = 1.0):
    """Times in ms -> (exec, input_pf, pf) cycles, int64[K], per planner spec §3.2.

    With speedup s, each kernel loses the same absolute ``delta = c - c/s`` cycles in all three
    times; then exec <= input_pf <= pf is enforced by clamping upwards. exec must be > 0."""
    f_hz = frequency_hz(freq_ghz)
    if not (math.isfinite(kernel_speedup) and kernel_speedup > 0):
        raise InputError(f"must be a positive number, got {kernel_speedup!r}", param="kernel_speedup")
    orig_ms = np.asarray(orig_ms, dtype=np.float64)
    input_pf_ms = np.asarray(input_pf_ms, dtype=np.float64)
    pf_ms = np.asarray(pf_ms, dtype=np.float64)
    if not (orig_ms.shape == input_pf_ms.shape == pf_ms.shape and orig_ms.ndim == 1):
        raise ValueError("the three time arrays must be 1-D and of equal length")
    c = _ms_to_cycles(orig_ms, f_hz)
    delta = c - c / float(kernel_speedup)
    exec_c = np.trunc(c - delta).astype(np.int64)
    bad = np.nonzero(exec_c <= 0)[0]
    if bad.size:
        k = int(bad[0])
        raise InputError(
            f"kernel {k} takes {orig_ms[k]!r} ms = {int(exec_c[k])} cycles "
            f"(speedup {kernel_speedup!r}); every kernel needs at least one cycle",
            param="orig_kernel_time_file",
        )
    inpf = np.maximum(np.trunc(_ms_to_cycles(input_pf_ms, f_hz) - delta).astype(np.int64), exec_c)
    pf = np.maximum(np.trunc(_ms_to_cycles(pf_ms, f_hz) - delta).astype(np.int64), inpf)
    return exec_c, inpf, pf


def mt19937_raw(seed: int, n: int) -> np.ndarray:
    """First `n` raw 32-bit outputs of ``std::mt19937(seed)``, as uint64.

    numpy's legacy RandomState seeding is the same init_genrand as the C++ constructor, and
    its MT19937 bit generator's ``random_raw`` returns the generator's 32-bit outputs as they
    are (checked in tests: the 10000th output for seed 5489 is 4123659995, as the C++
    standard requires). std::mt19937 reduces its seed modulo 2^32, and so does this."""
    legacy = np.random.RandomState(int(seed) % (1 << 32))
    _, key, pos = legacy.get_state()[:3]
    bg = np.random.MT19937()
    bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
    return bg.random_raw(n)


def libstdcxx_canonical(raw: np.ndarray) -> np.ndarray:
    """libstdc++ generate_canonical<double, 53> from pairs of 32-bit outputs -> float64 in [0, 1).

    u = (r1 + r2 * 2^32) / 2^64, the sum rounded to double; a result of 1.0 becomes the
    largest double below 1."""
    raw = np.asarray(raw, dtype=np.uint64)
    r1 = raw[0::2].astype(np.float64)
    r2 = raw[1::2].astype(np.float64)
    u = (r1 + r2 * 4294967296.0) / 18446744073709551616.0
    return np.where(u >= 1.0, np.nextafter(1.0, 0.0), u)


def perturb_kernel_times(exec_cycles, input_pf_cycles, pf_cycles, sigma: float, ran_seed: int):
    """Kernel-time variation (planner spec §3.4, simulator spec §2.2), bit-exact with libstdc++.

    A ``std::mt19937`` (default seed 5489, reseeded with `ran_seed` when it is not 1) draws one
    ``uniform_real_distribution<double>(1-sigma, 1+sigma)`` ratio per kernel in kernel order; the
    ratio is clamped to [0.1, 1.9] and the three cycle counts are multiplied by it and truncated."""
    if not (math.isfinite(sigma) and sigma >= 0):
        raise InputError(f"must be a finite number >= 0, got {sigma!r}", param="kernel_time_std_dev")
    arrays = [np.asarray(a, dtype=np.int64) for a in (exec_cycles, input_pf_cycles, pf_cycles)]
    K = arrays[0].shape[0]
    seed = 5489 if int(ran_seed) == 1 else int(ran_seed)
    u = libstdcxx_canonical(mt19937_raw(seed, 2 * K))
    a = 1.0 - float(sigma)
    b = 1.0 + float(sigma)
    ratio = np.clip(u * (b - a) + a, 0.1, 1.9)
    return tuple(np.trunc(x.astype(np.float64) * ratio).astype(np.int64) for x in arrays)


def load_workload(
    graph: Graph,
    orig_path,
    input_pf_path,
    pf_path,
    workspace_path,
    freq_ghz: float,
    kernel_speedup: float = 1.0,
) -> Workload:
    """Read the four trace files of a model (ideal, InputPF, PF, Workspace) into a Workload."""
    K = graph.num_kernels
    orig = read_trace_file(orig_path, K, "ms")
    inpf = read_trace_file(input_pf_path, K, "ms")
    pf = read_trace_file(pf_path, K, "ms")
    ws = read_trace_file(workspace_path, K, "B")
    exec_c, inpf_c, pf_c = kernel_cycles(orig, inpf, pf, freq_ghz, kernel_speedup)
    return build_workload(graph, exec_c, inpf_c, pf_c, ws.astype(np.int64))
