"""Run a matrix into a results store: long-lived worker processes, or a Dask cluster.

    summary = run_sweep(resolved_points, "results.h5", workers=2)

Points already in the store with status ok or failed (the simulator itself reported that the
run cannot go, like the artifact's "inf" cells) are skipped; points stored with status error
(an exception: unimplemented policy, bad input, a crash) are run again unless
`retry_errors=False`; points whose stored checksum fails (damaged) are run again. This
process writes the store, one point per transaction, as results arrive, so an interrupted
sweep resumes where it stopped. Each point is claimed in the store before it is handed to a
worker: a second sweep on the same store skips the points the first one holds (and takes
over the claims of a sweep that died).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..progress import SweepProgress
from .reuse import ReuseScheduler, derive_locally
from .store import ResultStore
from .worker import execute, release_buffers, task_for

__all__ = ["SweepSummary", "SweepProgress", "run_sweep", "plan_sweep"]

log = logging.getLogger(__name__)

#: in-process runs of one task before a crashed worker is blamed on it
_MAX_POOL_CRASHES = 2


@dataclass
class SweepSummary:
    total: int = 0  # points in the matrix
    skipped: int = 0  # already in the store
    ran: int = 0  # run in this session
    ok: int = 0
    failed: int = 0  # the simulator reported a failed run (status failed)
    errors: int = 0  # exceptions (status error)
    wall_seconds: float = 0.0
    point_seconds: list = field(default_factory=list)  # wall time of each point run
    peak_worker_rss_bytes: int = 0
    error_labels: list = field(default_factory=list)
    interrupted: bool = False
    reused: int = 0  # of `ran`: derived from a run at another host line (reuse.py)
    reuse_saved_cpu_seconds: float = 0.0  # CPU of the reused runs less that of the derivations
    elsewhere: int = 0  # left to another sweep on the same store (it holds them)
    damaged: int = 0  # stored points whose checksum failed: run again
    repaired: int = 0  # damaged rows put right without a run (a changed key, a
    # damaged workload analysis computed again), or dropped

    def text(self) -> str:
        s = (
            f"{self.total} points: {self.skipped} already stored, {self.ran} run "
            f"({self.ok} ok, {self.failed} failed runs, {self.errors} errors) in "
            f"{_fmt_dur(self.wall_seconds)}"
        )
        if self.damaged:
            s += f"; {self.damaged} damaged stored points run again"
        if self.repaired:
            s += f"; {self.repaired} damaged rows repaired (a changed key or a workload analysis)"
        if self.elsewhere:
            s += f"; {self.elsewhere} left to another sweep running on the same store"
        if self.reused:
            s += (
                f"; {self.reused} of them reused a run at another host memory size "
                f"(about {_fmt_dur(self.reuse_saved_cpu_seconds)} of CPU saved)"
            )
        if self.interrupted:
            s += " (interrupted)"
        return s


def _fmt_dur(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = int(round(s))
    h, r = divmod(s, 3600)
    m, sec = divmod(r, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def _group_key(rp) -> str:
    return f"{rp.label.split('/')[0]}-{rp.point.batch}"


# The relative cost of a point per page of its workload is the policy record's `sweep_cost`
# (from the CPU seconds of the Figure-11 points, benchmarks/results/sweep_extrapolation.jsonl;
# e.g. ResNet152-1280: lru 25.8 s, deepUM 26.5 s, prefetch_lru 17.3 s, the tensor engine
# 0.1-0.3 s, which simulates tensors, not pages).
#: Peak bytes per sample of the bundled models (the workloads' `total` maximum / batch size,
#: from the stored workload analyses), for sweeps whose store has no analysis yet.
BYTES_PER_SAMPLE = {"BERT": 2.0e8, "VIT": 4.8e7, "Inceptionv3": 9.4e7, "ResNet152": 2.3e8, "SENet154": 2.3e8}
#: Points whose workload fits in GPU memory move no pages: a fraction of the cost.
FIT_COST = 0.2


def estimate_cost(rp, peak_bytes: float | None = None) -> float:
    """A relative cost for scheduling (not seconds): the workload's peak pages times the
    policy's factor, less when the workload fits in GPU memory. `peak_bytes` (the stored
    workload analysis's peak) replaces the per-model estimate."""
    pt = rp.point
    if peak_bytes is None:
        per = BYTES_PER_SAMPLE.get(pt.model, float(np.median(list(BYTES_PER_SAMPLE.values()))))
        peak_bytes = per * pt.batch
    gpu = (
        float(rp.config.GPU_memory_size_GB) if rp.config is not None else float(rp.spec.system.gpu_memory_gb)
    ) * 2**30
    from g10fast import policies

    cost = peak_bytes / 4096 * policies.get(pt.policy).sweep_cost
    return cost if peak_bytes > gpu else cost * FIT_COST


def plan_sweep(
    resolved, store: ResultStore, retry_errors: bool = True, damaged: list | None = None
) -> tuple[list, int]:
    """(tasks to run, number skipped), longest first: the (model, batch) groups by their
    estimated total cost, descending, and within a group the points by estimated cost,
    descending (`estimate_cost`), so that the long points do not come last and leave one
    worker idle. The points of one (model, batch) are kept together so that a worker's
    workload, vitality and plan caches are hit; the first task of a (model, batch) without a
    stored workload analysis computes it."""
    have = store.statuses()
    if damaged is not None:
        damaged.extend(h for h, st in have.items() if st == "damaged")
    keep = ("ok", "failed") if retry_errors else ("ok", "failed", "error")
    todo = [rp for rp in resolved if have.get(rp.hash) not in keep]
    skipped = len(resolved) - len(todo)
    analysed = store.workload_keys(intact=True)  # a damaged analysis is computed again
    peaks = {}
    for key in {_group_key(rp) for rp in todo} & analysed:
        an = store.workload(key)
        if an is not None and len(an.get("total", ())):
            peaks[key] = float(np.max(an["total"]))
    cost = {rp.hash: estimate_cost(rp, peaks.get(_group_key(rp))) for rp in todo}
    group_cost: dict = {}
    for rp in todo:
        group_cost[_group_key(rp)] = group_cost.get(_group_key(rp), 0.0) + cost[rp.hash]
    first_seen = {}
    for rp in todo:
        first_seen.setdefault(_group_key(rp), len(first_seen))
    todo.sort(key=lambda rp: (-group_cost[_group_key(rp)], first_seen[_group_key(rp)], -cost[rp.hash]))
    tasks = []
    for rp in todo:
        key = _group_key(rp)
        t = task_for(rp, None if key in analysed else key)
        t["cost"] = cost[rp.hash]
        t["workload_key"] = key
        tasks.append(t)
        analysed.add(key)
    return tasks, skipped


def run_sweep(
    resolved,
    store_path,
    *,
    workers: int | None = None,
    dask=None,
    progress=None,
    retry_errors: bool = True,
    max_points: int | None = None,
    reuse: bool = True,
    keep_buffers: bool = True,
) -> SweepSummary:
    """Run every point of `resolved` (ResolvedPoints) not yet in the store at `store_path`.

    workers: worker processes (default: CPU count); 0 runs in this process (debugging).
    dask: a Dask scheduler address, or a `distributed.Client` / cluster object.
    max_points: stop after this many points (the rest stay for a later run).
    progress: None or False (no reports), an object with update(label, status, seconds)
    called once per point stored, a callable total -> such an object, or True (a
    g10fast.progress.SweepProgress on stderr).
    reuse: derive a page-engine point from a run of the same configuration at another host
    memory size when the run never came near either host line (exact; g10fast/sweep/reuse.py).
    keep_buffers: each worker keeps the engines' large per-run buffers (the page states) from
    point to point (same results; `worker.execute`); False: every point maps its own and gives
    them back.
    """
    t0 = time.perf_counter()
    store = ResultStore(store_path)
    if store.read_only:
        store.write_point({})  # the InputError that says why (a version-1 store)
    bad: list = []
    repaired = repair_keys(store, resolved)
    tasks, skipped = plan_sweep(resolved, store, retry_errors, damaged=bad)
    if max_points is not None:
        tasks = tasks[: max(0, int(max_points))]
    for t in tasks:
        t["keep_buffers"] = bool(keep_buffers)
    summary = SweepSummary(total=len(resolved), skipped=skipped, repaired=repaired)
    summary.repaired += repair_workloads(store, resolved, tasks)
    summary.damaged = len(set(bad) & {rp.hash for rp in resolved})
    keep = ("ok", "failed") if retry_errors else ("ok", "failed", "error")
    if progress is True:
        progress = SweepProgress(len(tasks))
    elif progress is None or progress is False:
        progress = SweepProgress(len(tasks), enabled=False)
    elif not hasattr(progress, "update"):
        progress = progress(len(tasks))

    sched = _Claiming(ReuseScheduler(tasks, store if reuse else None, reuse=reuse), store, keep, summary)

    def record(rec: dict) -> None:
        store.write_point(rec)
        summary.ran += 1
        st = rec["status"]
        summary.ok += st == "ok"
        summary.failed += st == "failed"
        summary.errors += st == "error"
        if st == "error":
            summary.error_labels.append(rec.get("label", rec["hash"][:12]))
            log.warning("%s: %s", rec.get("label"), rec.get("error", "").splitlines()[0:1])
        summary.point_seconds.append(float(rec.get("wall_seconds") or 0.0))
        summary.peak_worker_rss_bytes = max(
            summary.peak_worker_rss_bytes, int(rec.get("worker_peak_rss_bytes") or 0)
        )
        progress.update(rec.get("label", ""), st, float(rec.get("wall_seconds") or 0.0))
        sched.completed(rec)
        summary.reused = sched.reused
        summary.reuse_saved_cpu_seconds = sched.saved_cpu_seconds
        drain()

    def drain() -> None:
        """The derivations that need no worker, done here."""
        while sched.local:
            for t in sched.take_local():
                r = derive_locally(t)
                if r is None:  # not exact after all: a worker simulates it
                    t.pop("derive", None)
                    t["no_reuse"] = True
                    sched.requeue(t)
                else:
                    record(r)

    try:
        drain()
        if not sched.pending():
            pass
        elif dask is not None:
            _run_dask(sched, dask, record)
        elif workers == 0:
            while sched.pending():
                t = sched.next()
                if t is None:  # only held tasks left (cannot happen): run them
                    sched.release_all()
                    continue
                record(execute(t))
        else:
            n = workers or os.cpu_count() or 1
            _run_pool(
                sched, min(n, sched.pending()), record, kernel_modules(t["point"]["policy"] for t in tasks)
            )
    except KeyboardInterrupt:
        summary.interrupted = True
        raise
    finally:
        release_buffers()  # (kept by points run in this process, which goes on after the sweep)
        summary.wall_seconds = time.perf_counter() - t0
        store.release_claims()
        store.close()
    return summary


def repair_keys(store, resolved) -> int:
    """Put right the damaged point rows that a run of this matrix would never overwrite: a row
    whose key (hash) was changed. When its checksum holds under the key of a point of this
    matrix, the row is that point's: it moves there (unless the point is stored whole under
    its own key, then it is dropped). When it does not hold anywhere but its attributes name
    a point of this matrix stored under another key, the row is that point's damaged copy:
    it is dropped (the point is stored, or this sweep runs it). -> rows repaired."""
    from .store import point_checksum

    if not hasattr(store, "damaged_rows"):  # a version-1 store: read-only
        return 0
    bad = store.damaged_rows()
    if not bad:
        return 0
    by_hash = {rp.hash: rp for rp in resolved}
    by_label: dict = {}
    for rp in resolved:
        by_label.setdefault(rp.label, []).append(rp.hash)
    status = store.statuses()
    n = 0
    for rowid, stored, label, row in bad:
        if stored in by_hash:
            continue  # its own key: the sweep runs it again
        rest = row[1:6]
        cands = by_label.get(label) or list(by_hash)
        true = next((h for h in cands if point_checksum(h, *rest) == row[6]), None)
        if true is not None:
            store.refile(rowid, None if status.get(true) not in (None, "damaged") else true)
            n += 1
        elif label in by_label:
            store.refile(rowid, None)
            n += 1
    return n


def repair_workloads(store, resolved, tasks) -> int:
    """Compute again, here, each damaged workload analysis of this matrix's workloads that no
    task of this sweep computes (every point of that workload is already stored); the next
    task of a workload computes the others. -> analyses written."""
    from .worker import analysis_of, task_for

    if not hasattr(store, "damaged_rows"):
        return 0
    damaged = store.workload_keys() - store.workload_keys(intact=True)
    if not damaged:
        return 0
    covered = {t.get("analyze") for t in tasks}
    n = 0
    for key in sorted(damaged - covered):
        rp = next((rp for rp in resolved if _group_key(rp) == key), None)
        if rp is None:
            continue  # not a workload of this matrix
        store.write_workload(analysis_of(task_for(rp, key)))
        n += 1
    return n


class _Claiming:
    """The scheduler, with every task claimed in the store as it is handed out: a task that
    another sweep holds, or that another sweep finished meanwhile, is dropped."""

    def __init__(self, sched, store, keep, summary):
        self._s, self._store, self._keep, self._summary = sched, store, keep, summary

    def __getattr__(self, name):
        return getattr(self._s, name)

    def next(self):
        while True:
            t = self._s.next()
            if t is None or self._claim(t):
                return t
            self._s.dropped(t)

    def take_local(self) -> list:
        out = []
        for t in self._s.take_local():
            if self._claim(t):
                out.append(t)
            else:
                self._s.dropped(t)
        return out

    def _claim(self, t) -> bool:
        if self._store.try_claim(t["hash"], self._keep):
            return True
        self._summary.elsewhere += 1
        return False


def _crash_record(task: dict, msg: str) -> dict:
    return {
        "hash": task["hash"],
        "label": task.get("label", ""),
        "point": task.get("point", {}),
        "config": task["config"],
        "status": "error",
        "error": msg,
        "error_type": "WorkerCrash",
        "result": None,
        "arrays": None,
        "analysis": None,
    }


#: the planner's module with cache=True Numba kernels (G10's), beside the engines' own
_PLANNER_MODULES = ("g10fast.planner.g10_kernels",)


def kernel_modules(policy_names) -> tuple[str, ...]:
    """The modules with cache=True Numba kernels that points of these policies compile: the
    planner's and those of the policies' engines (their records' `kernels`), in order, once."""
    from g10fast import policies

    out = dict.fromkeys(_PLANNER_MODULES)
    for name in dict.fromkeys(policy_names):
        out.update(dict.fromkeys(policies.engine(policies.get(name).engine).kernels))
    return tuple(out)


def numba_cache_warm(modules=None) -> bool:
    """Whether every Numba kernel module of `modules` (default: those of every registered
    engine and the planner) has a fresh on-disk cache for this machine: then the workers load
    the kernels and none of them writes the cache. Asked of Numba's own cache objects (the
    module's cached kernels, imported, nothing compiled), each reading the index Numba would
    read (in-tree `__pycache__`, NUMBA_CACHE_DIR's folder for this source path, or the
    user-wide cache where the package is read-only): a module is warm when one of them holds
    an entry for this CPU, of this Numba and of these sources (the index's stamp), and none
    has an index left stale by a change of the sources (a kernel never compiled has none). A
    cache of another tree, another source version or another CPU under the same
    NUMBA_CACHE_DIR is not warm: the workers would all compile at once."""
    import importlib

    from numba.core.registry import cpu_target

    from g10fast import policies

    if modules is None:
        modules = _PLANNER_MODULES + tuple(m for e in policies.engines() for m in e.kernels)
    cpu = cpu_target.target_context.codegen().magic_tuple()
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            return False
        files = [
            getattr(getattr(v, "_cache", None), "_cache_file", None)
            for v in vars(mod).values()
            if getattr(getattr(v, "py_func", None), "__module__", None) == name
        ]
        files = [f for f in files if f is not None and hasattr(f, "_load_index")]
        fresh = False
        for f in files:
            try:
                index = f._load_index()
            except Exception:  # an unreadable or foreign index: not warm
                return False
            if not index and os.path.exists(f._index_path):
                return False  # stale: its sources changed since
            fresh = fresh or any(key[1] == cpu for key in index)
        if not fresh:
            return False
    return True


def _run_pool(sched, n: int, record, modules=None) -> None:
    """Long-lived spawn-context worker processes, fed by the scheduler (`ReuseScheduler`:
    the tasks in order, host-memory variants held until their group's first run is done).
    With a cold Numba cache (of `modules`: `kernel_modules`) the first task runs alone so that
    one process fills the cache before the others load it (concurrent cache writes are
    fragile, numba#4807); with a warm one all workers start at once. A worker that dies takes
    down the pool: it is rebuilt, and a task that was running in `_MAX_POOL_CRASHES` crashed
    pools is recorded as an error."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("spawn")
    crashes: dict[str, int] = {}
    first = not numba_cache_warm(modules)
    while sched.pending():
        ex = ProcessPoolExecutor(
            max_workers=n, mp_context=ctx, initializer=_watch_parent, initargs=(os.getpid(),)
        )
        running: dict = {}
        requeue: list = []
        try:
            while sched.pending() or running:
                limit = 1 if (first or n == 1) else 2 * n
                while len(running) < limit:
                    t = sched.next()
                    if t is None:
                        break
                    running[ex.submit(execute, t)] = t
                if not running:  # only held tasks left (cannot happen): run them
                    sched.release_all()
                    continue
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    t = running.pop(fut)
                    try:
                        rec = fut.result()
                    except BrokenProcessPool:
                        requeue.append(t)
                        continue
                    first = False
                    record(rec)
                if requeue:
                    break
        except BaseException:  # Ctrl-C, or the store cannot be written (a full disk)
            _kill_workers(ex)
            # joined, not left to the interpreter's exit: the console script ends with
            # os._exit, and a pool still running then leaks its queues' semaphores
            # ("resource_tracker: There appear to be 5 leaked semaphore objects")
            ex.shutdown(wait=True, cancel_futures=True)
            raise
        if not requeue:
            ex.shutdown(wait=True)
            continue
        # the pool broke: every task in flight is a suspect
        _kill_workers(ex)
        ex.shutdown(wait=False, cancel_futures=True)
        for t in requeue + list(running.values()):
            crashes[t["hash"]] = crashes.get(t["hash"], 0) + 1
            if crashes[t["hash"]] >= _MAX_POOL_CRASHES:
                record(
                    _crash_record(
                        t, "the worker process died while running this point (killed, or out of memory)"
                    )
                )
            else:
                sched.requeue(t)
        n = max(1, n // 2)  # fewer tasks in flight: isolate the culprit


def _watch_parent(parent_pid: int) -> None:
    """Worker initializer: exit when the sweep process is gone (killed with SIGKILL, the pool
    cannot stop its workers; they would wait on their task queue for ever). On Linux the
    kernel is also asked to kill the worker when its parent dies (PR_SET_PDEATHSIG): a
    compiled engine call holds the GIL, so the watching thread alone would let an orphaned
    worker finish its point first."""
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
            if os.getppid() != parent_pid:  # died before the call
                os._exit(1)
        except (OSError, AttributeError):
            pass

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="g10fast-parent-watch", daemon=True).start()


def _kill_workers(ex) -> None:
    procs = getattr(ex, "_processes", None) or {}
    for p in list(procs.values()):
        try:
            p.kill()
        except Exception:
            pass


def _run_dask(sched, dask, record) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise InputError(
            "--dask needs dask.distributed, which is not installed (pip install 'g10fast[dask]')",
            param="--dask",
        ) from None
    own = False
    if isinstance(dask, Client):
        client = dask
    else:
        try:
            client = Client(dask, timeout="30s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError(
                f"cannot connect to the Dask scheduler at {dask!r}: {exc}", param="--dask"
            ) from None
        own = True
    try:
        futures: dict = {}
        ac = as_completed([])

        def submit(t):
            fut = client.submit(execute, t, pure=False, key=f"g10fast-{t['hash']}")
            futures[fut] = t
            ac.add(fut)

        first = sched.next()  # alone: one worker fills the Numba cache
        if first is not None:
            submit(first)
            _collect_one(next(ac), futures, record)
        while True:
            while (t := sched.next()) is not None:
                submit(t)
            if not futures:
                if sched.pending():  # only held tasks left (cannot happen): run them
                    sched.release_all()
                    continue
                break
            _collect_one(next(ac), futures, record)
    finally:
        if own:
            client.close()


def _collect_one(fut, futures: dict, record) -> None:
    t = futures.pop(fut)
    try:
        rec = fut.result()
    except Exception as exc:  # KilledWorker, lost connection, ...
        rec = _crash_record(t, f"Dask could not run this point: {type(exc).__name__}: {exc}")
    fut.release()
    record(rec)
