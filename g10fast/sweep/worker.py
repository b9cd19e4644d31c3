"""What a sweep worker process does with one point: `execute(task) -> record`.

Workers are long-lived (a process pool or Dask workers): Numba kernels are compiled or loaded
from the cache once per process, and the parsed workload of the last few (model, batch size)
pairs is kept, so the points of one workload parse its model and trace files once.
`execute` never raises for a failing point: the error is in the record it returns.

Work shared between the points of one workload, per worker process: the vitality analysis
(liveness and inactive periods, which depend on the workload and the GPU frequency only) and
the migration plan of the page-engine policies. A G10 plan depends on the workload and the
system (bandwidths, host memory line, latencies, GPU memory), but not on the kernel-time
variation, which is applied after planning (planner spec §3.4): so the Fig. 19 points
(kernel_time_std_dev > 0, their own ran_seed) reuse the plan of their base point. Plans are
keyed by the whole resolved configuration less those two fields (`PLAN_INDEPENDENT`) and
the output location; a DeepUM plan depends on the workload and the prefetch degree only.
Measured, the shared work is small beside the simulation (a G10 plan 0.003-0.15 s, a workload
<= 0.3 s, a simulation 1-40 s; docs/sweep-performance.md).

A task with a "derive" entry (a finished run of the same configuration at another host
memory size, whose peak host use is below this point's line: g10fast/sweep/reuse.py) is
derived from that run instead of simulated; for prefetch_lru only when this point's own plan
has the run's hints, else (and whenever the derivation would not be exact) it is simulated and
the record says why (`derive_refused`).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
import traceback
from collections import OrderedDict

import numpy as np

__all__ = ["execute", "workload_analysis", "kernel_arrays", "clear_cache", "release_buffers"]

#: parsed workloads kept per worker process (a SENet154-1024 workload is ~100 MB)
MAX_CACHED_WORKLOADS = 2
_WORKLOADS: OrderedDict = OrderedDict()
#: (workload key, GPU GHz) -> Vitality of the cached workloads (dropped with the workload)
_VITALITY: dict = {}
#: (workload key, plan key) -> MigrationPlan; a few per workload (a plan is a few MB)
MAX_CACHED_PLANS = 8
_PLANS: OrderedDict = OrderedDict()
#: configuration fields the planners do not read (planner spec §3.2 table, §3.4)
PLAN_INDEPENDENT = ("kernel_time_std_dev", "ran_seed")
#: cache hits of this process (for tests and the benchmark)
CACHE_STATS = {"workload_hits": 0, "vitality_hits": 0, "plan_hits": 0}


def clear_cache() -> None:
    """Drop this process's cached workloads, analyses and plans, and its kept engine
    buffers (`release_buffers`)."""
    _WORKLOADS.clear()
    _VITALITY.clear()
    _PLANS.clear()
    for k in CACHE_STATS:
        CACHE_STATS[k] = 0
    release_buffers()


#: this process keeps the engines' large per-run buffers from point to point (`execute`)
_KEEPING = False


def _keep_buffers() -> None:
    """The engines keep their large per-run buffers from one point to the next in this
    process (the engine registry's `keep_buffers`: the page engine's page states, mapped
    once per process instead of once per run, and never given back during a run), with the
    same results; the process holds them between points (up to the largest run's)."""
    global _KEEPING
    if not _KEEPING:
        from ..engine.registry import keep_buffers

        keep_buffers(True)
        _KEEPING = True


def release_buffers() -> None:
    """Give back the engines' kept buffers (a sweep that ran its points in this process
    calls it at its end)."""
    global _KEEPING
    if _KEEPING:
        from ..engine.registry import keep_buffers

        keep_buffers(False)
        _KEEPING = False


def _workload_key(spec) -> tuple:
    """What a spec's workload depends on: its source, the GPU clock and the speed-up."""
    return (repr(spec.workload), spec.system.gpu_frequency_ghz, spec.engine.kernel_speedup)


def _workload(spec):
    from ..run import workload_of

    key = _workload_key(spec)
    w = _WORKLOADS.get(key)
    if w is not None:
        _WORKLOADS.move_to_end(key)
        return w, True
    w = workload_of(spec)
    _WORKLOADS[key] = w
    while len(_WORKLOADS) > MAX_CACHED_WORKLOADS:
        old, _ = _WORKLOADS.popitem(last=False)
        for vk in [vk for vk in _VITALITY if vk[0] == old]:
            del _VITALITY[vk]
        for pk in [pk for pk in _PLANS if pk[0] == old]:
            del _PLANS[pk]
    return w, False


def _vitality(spec, w):
    """The vitality analysis of the cached workload of `spec` (computed once per workload)."""
    from ..analysis.vitality import vitality

    key = (_workload_key(spec), float(spec.system.gpu_frequency_ghz))
    v = _VITALITY.get(key)
    if v is None:
        v = vitality(w, spec.system.gpu_frequency_ghz)
        _VITALITY[key] = v
    else:
        CACHE_STATS["vitality_hits"] += 1
    return v


def plan_key(spec) -> tuple:
    """What a plan of `spec` depends on (beside the workload): the policy, its options, the
    system, the workload's shape and the engine options the planners may read (not the
    kernel-time variation, applied after planning)."""
    if not hasattr(spec, "engine"):  # a G10Config
        from ..spec import from_g10_config

        spec = from_g10_config(spec)
    eng = {k: v for k, v in spec.engine.to_dict().items() if k not in PLAN_INDEPENDENT}
    return (
        spec.policy.name,
        repr(spec.policy.options),
        repr(spec.system),
        repr(spec.workload.shape),
        repr(sorted(eng.items())),
    )


def _uses_plan(spec) -> bool:
    rec = spec.record
    if rec.planner is None:
        return False
    mode = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
    return getattr(mode, "use_prefetch", True)


def _plan(spec, w):
    """The plan of `spec` (None for policies without one), shared between points that differ
    only in what the planner does not read."""
    from ..engine.registry import engine

    if not _uses_plan(spec) or not engine(spec.record.engine).host_reuse:
        return None
    key = (_workload_key(spec), plan_key(spec))
    plan = _PLANS.get(key)
    if plan is not None:
        CACHE_STATS["plan_hits"] += 1
        _PLANS.move_to_end(key)
        return plan
    from ..run import plan_of

    plan = plan_of(spec, w, vitality=lambda: _vitality(spec, w))
    _PLANS[key] = plan
    while len(_PLANS) > MAX_CACHED_PLANS:
        _PLANS.popitem(last=False)
    return plan


def workload_analysis(w, freq_ghz: float, key: str, v=None) -> dict:
    """Per-kernel memory consumption and tensor inactive periods (Figs 2-4, 20, 21).

    The quantities of G10's `_NNMemConsumptionLog.py` / `_TensorPeriodLog.py` (planner spec
    §7): `active` = bytes of the tensors a kernel uses; its split into input (kernel 0's
    outputs), weight (global) and intermediate; `total` = global bytes plus the bytes of the
    non-global tensors alive at the kernel ([birth, death), death = birth + 1 when never
    read); `sd_size` / `sd_time` / `sd_start` = size (bytes), estimated length (µs, from the
    ideal kernel times) and start kernel of every inactive period. Sizes are the tensors'
    byte sizes before page rounding. Periods are in creation order (G10 sorts them by
    time x size first; the figures sort them again).
    """
    K, T = w.num_kernels, w.num_tensors
    size = np.asarray(w.raw_size, dtype=np.int64)
    glob = np.asarray(w.is_global, dtype=bool)
    kin = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K, dtype=np.int64), np.diff(w.out_ptr))
    pairs = np.unique(
        np.concatenate([kin * T + w.in_idx.astype(np.int64), kout * T + w.out_idx.astype(np.int64)])
    )
    pk, pt = pairs // T, pairs % T
    is_input = np.zeros(T, dtype=bool)
    is_input[w.outputs(0)] = True
    kind = np.where(is_input[pt], 0, np.where(glob[pt], 1, 2))
    parts = [np.bincount(pk[kind == j], weights=size[pt][kind == j], minlength=K) for j in range(3)]
    if v is None:
        from ..analysis.vitality import vitality

        v = vitality(w, freq_ghz)
    birth, death = v.birth.astype(np.int64), v.death.astype(np.int64)
    death = np.where(death == -1, birth + 1, death)
    local = (~glob) & (birth >= 0)
    diff = np.zeros(K + 1, dtype=np.int64)
    np.add.at(diff, birth[local], size[local])
    np.add.at(diff, np.minimum(death[local], K), -size[local])
    total = int(size[glob].sum()) + np.cumsum(diff)[:K]
    return {
        "key": key,
        "active": (parts[0] + parts[1] + parts[2]).astype(np.int64),
        "active_input": parts[0].astype(np.int64),
        "active_weight": parts[1].astype(np.int64),
        "active_intermediate": parts[2].astype(np.int64),
        "total": total.astype(np.int64),
        "sd_size": size[v.iv_tensor].astype(np.int64),
        "sd_time": v.iv_time_us.astype(np.float64),
        "sd_start": v.iv_start.astype(np.int32),
        "global_weight": int(size[glob].sum()),
        "input_size": int(size[0]) if T else 0,
        "kernels": int(K),
        "ideal_cycles": int(w.ideal_cycles),
    }


def kernel_arrays(result: dict, exec_cycles: np.ndarray) -> dict:
    """Per-kernel arrays kept in the store: from the page engine's `kernels` table, the time
    of every kernel in every iteration (`kernel_cycles`, int64 [iterations, K], end - start,
    -1 where absent) and the ideal time of every kernel (`kernel_ideal_cycles`); every other
    numpy array in the result (e.g. a tensor engine's per-kernel stall) as it is."""
    out = {}
    K = int(exec_cycles.shape[0])
    for name, val in result.items():
        if name == "kernels" and isinstance(val, np.ndarray) and val.ndim == 2 and val.shape[1] >= 4:
            n_iter = int(val[:, 0].max()) + 1 if len(val) else 0
            kc = np.full((n_iter, K), -1, dtype=np.int64)
            kc[val[:, 0], val[:, 1]] = val[:, 3] - val[:, 2]
            out["kernel_cycles"] = kc
            out["kernel_ideal_cycles"] = np.asarray(exec_cycles, dtype=np.int64)
        elif isinstance(val, np.ndarray):
            out[name] = val
    return out


def _peak_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def execute(task: dict) -> dict:
    """Run one point. task: hash, label, point (dict), config (G10Config fields) or spec (a
    RunSpec dict, for policies the artifact's format cannot say), analyze (store the workload
    analysis under this key, or None), keep_buffers (default True: this process keeps the
    engines' large buffers for its next point, `_keep_buffers`; False: gives them back).
    Returns the store record."""
    from .. import __version__
    from ..config import G10Config
    from ..errors import InputError
    from ..spec import RunSpec, from_g10_config

    t0 = time.perf_counter()
    c0 = time.process_time()
    rec = {
        "hash": task["hash"],
        "label": task.get("label", ""),
        "point": task.get("point", {}),
        "config": task.get("config"),
        "status": "error",
        "error": "",
        "error_type": "",
        "result": None,
        "arrays": None,
        "analysis": None,
        "g10fast_version": __version__,
        "worker_pid": os.getpid(),
    }
    try:
        if task.get("config") is not None:
            spec = from_g10_config(G10Config(**task["config"]))
        else:
            spec = RunSpec.from_dict(task["spec"])
            rec["spec"] = task["spec"]
        from ..run import run
        from .reuse import derive_result, derived_record, plan_depends_on_host, plan_digest

        if task.get("keep_buffers", True):
            _keep_buffers()
        else:
            release_buffers()
        derive = task.get("derive") if task.get("config") is not None else None
        own_plan = plan_depends_on_host(spec.policy.name)
        if derive is not None and not task.get("analyze") and not own_plan:
            result, arrays = derive_result(task["config"], derive, None, t0=t0)
            if result is not None:
                return derived_record(task, derive, result, arrays, t0, c0, __version__)
            rec["derive_refused"], derive = arrays, None
        tw = time.process_time()
        w, cached = _workload(spec)
        rec["workload_cpu_seconds"] = time.process_time() - tw
        CACHE_STATS["workload_hits"] += cached
        if task.get("analyze"):
            rec["analysis"] = workload_analysis(
                w, spec.system.gpu_frequency_ghz, task["analyze"], v=_vitality(spec, w)
            )
        hits = CACHE_STATS["plan_hits"]
        plan = _plan(spec, w)
        rec["cache"] = {"workload": bool(cached), "plan": CACHE_STATS["plan_hits"] > hits}
        if derive is not None:
            # the run at another host line is this run when the plan is the same (reuse.py)
            result, arrays = derive_result(task["config"], derive, plan if own_plan else None, t0=t0)
            if result is not None:
                d = derived_record(task, derive, result, arrays, t0, c0, __version__)
                d.update(
                    analysis=rec["analysis"],
                    cache=rec["cache"],
                    workload_cpu_seconds=rec["workload_cpu_seconds"],
                )
                return d
            rec["derive_refused"] = arrays
        res = run(spec, workload=w, plan=plan, vitality=lambda: _vitality(spec, w))
        rec["plan_digest"] = None if plan is None else plan_digest(plan.hints)
        exec_cycles = w.exec_cycles
        if spec.engine.kernel_time_std_dev:
            from ..workload.times import perturb_kernel_times

            exec_cycles = perturb_kernel_times(
                w.exec_cycles,
                w.input_pf_cycles,
                w.pf_cycles,
                spec.engine.kernel_time_std_dev,
                spec.engine.ran_seed,
            )[0]
        rec["arrays"] = kernel_arrays(res, exec_cycles)
        # the planner's arrays (per kernel and per inactive period) go with the arrays; the
        # plan object itself is not stored (rerun the point with --plan to get it)
        for name, val in (res.get("planner") or {}).items():
            if isinstance(val, np.ndarray):
                rec["arrays"][f"planner_{name}"] = val
        rec["result"] = {
            k: v
            for k, v in res.items()
            if not isinstance(v, np.ndarray) and k not in ("plan_object", "planner")
        }
        status = str(res.get("status", "ok"))
        rec["status"] = "ok" if status == "ok" else "failed"
        if rec["status"] == "failed":
            rec["error"] = str(res.get("error") or res.get("reason") or status)
            rec["error_type"] = "simulation failed"
    except InputError as exc:
        rec["error"], rec["error_type"] = str(exc), "InputError"
    except Exception as exc:  # a bug or a resource error: record it, keep the sweep going
        tb = traceback.format_exc(limit=6)
        rec["error"] = f"{type(exc).__name__}: {exc}\n{tb}"
        rec["error_type"] = type(exc).__name__
    rec["wall_seconds"] = time.perf_counter() - t0
    rec["cpu_seconds"] = time.process_time() - c0
    rec["worker_peak_rss_bytes"] = _peak_rss()
    return rec


def analysis_of(task: dict) -> dict:
    """The workload analysis of a task's workload under `task["analyze"]` alone (no run): what
    a sweep computes again in its own process when a stored analysis is damaged and every
    point of its workload is already stored (runner.repair_workloads)."""
    from ..config import G10Config
    from ..spec import RunSpec, from_g10_config

    spec = (
        from_g10_config(G10Config(**task["config"]))
        if task.get("config") is not None
        else RunSpec.from_dict(task["spec"])
    )
    w, _ = _workload(spec)
    return workload_analysis(w, spec.system.gpu_frequency_ghz, task["analyze"], v=_vitality(spec, w))


def task_for(rp, analyze_key: str | None = None) -> dict:
    """The picklable task of a ResolvedPoint."""
    pt = dataclasses.asdict(rp.point)
    pt["batch_size"] = pt.pop("batch")
    return {
        "hash": rp.hash,
        "label": rp.label,
        "point": pt,
        "config": rp.config.to_dict() if rp.config is not None else None,
        "spec": rp.spec.to_dict() if rp.spec is not None else None,
        "analyze": analyze_key,
    }
