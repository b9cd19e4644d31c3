"""Exact reuse of a page-engine run at another host memory size (issue 6).

The host memory line enters the page engine only through comparisons of the host pages in use
with it (`host_used < HOST`, `host_used == HOST`, `host_used >= HOST`; HOST = the result's
`system.host_line`, in pages). The engine reports `host_peak_pages`, the most host pages in use
at any moment of the run; `host_used` never exceeds it. So a run at line H1 whose peak P is
below H1 (P < H1: the line never came into play) and a run at line H2 > P with everything else
equal see the same outcome of every comparison: they are the same simulation, step for step,
whether H2 is larger or smaller than H1. The engine's other inputs must be equal too:

* lru, ideal: no plan.
* deepUM: the look-ahead plan depends on the workload and the prefetch degree only
  (`g10fast.planner.deepum`), never on the host line.
* prefetch_lru (G10): the planner reads the host size (`planner_params.cpu_line`), so the plan
  of H2 is made and its hint array (the only plan input of `simulate_pages`) compared with the
  source's (`plan_digest`, SHA-256 of the int64 hint rows); the point is simulated when they
  differ. The result's `plan` summary and the planner arrays are those of H2's own plan.

The derived result is the source's with `system` recomputed for H2 (only `host_line` may
differ: every other field is checked equal, else the point is simulated), H2's plan summary
and planner arrays (prefetch_lru), and the derivation's own `wall_seconds` / `peak_rss_bytes`.
The store marks the point with `derived_from` (the config hash of the simulated point) and
`derivation` = "host_line_above_peak".

Scheduling (`ReuseScheduler`): the page-engine points that differ only in
`CPU_memory_line_GB` form a host group; its point with the largest line runs first (the least
constrained run, the lowest peak), the other points of the group with a line above 0 wait for
it, and every point whose line is above the peak of a finished run of its group is derived
instead of simulated. Points of a line at or below every known peak are simulated; their runs
become sources in turn. Stored points (a resumed sweep) are sources too, when their result has
`host_peak_pages` (and, for prefetch_lru, their store entry a plan digest).

The engine's own parts (its system parameters of a configuration, a plan's summary and
arrays) come from the module its record names (`EngineRecord.host_reuse`:
g10fast.engine.page.reuse); this module names no engine.
"""

from __future__ import annotations

import copy
import hashlib
import os
import resource
import time

import numpy as np

__all__ = [
    "DERIVATION",
    "host_group",
    "host_line_pages",
    "plan_digest",
    "source_from_record",
    "source_from_stored",
    "derive_result",
    "derive_locally",
    "derived_record",
    "ReuseScheduler",
    "plan_depends_on_host",
]

DERIVATION = "host_line_above_peak"


def plan_depends_on_host(policy: str) -> bool:
    """Whether the policy's plan reads the host memory size (its registry record says): then
    the plan of the derived point is made and compared with the source's."""
    from .. import policies

    return policies.get(policy).plan_depends_on_host


def _policy_and_cfg(config: dict):
    from ..config import G10Config
    from ..run import policy_of

    cfg = G10Config(**config)
    return policy_of(cfg), cfg


def _reuse_module(policy: str):
    """The module of the policy's engine that derives points at other host sizes (its
    record's `host_reuse`: `system(cfg)`, `plan_parts(plan, reported)`), or None."""
    from .. import policies

    return policies.engine(policies.get(policy).engine).host_reuse_module()


def _host_reuse(policy: str) -> bool:
    """Whether the policy's engine gives points at other host sizes (its record's
    `host_reuse`)."""
    from .. import policies

    return bool(policies.engine(policies.get(policy).engine).host_reuse)


def _engine_reuses(name) -> bool:
    """Whether a result's engine (by name; anything else: no) gives points at other host
    sizes."""
    from ..engine.registry import engines

    return any(e.name == name and e.host_reuse for e in engines())


def host_group(config: dict):
    """The key shared by the page-engine configurations that differ only in
    CPU_memory_line_GB (and the output location); None for the tensor-engine policies."""
    from ..config import OUTPUT_KEYS

    try:
        policy, _ = _policy_and_cfg(config)
    except Exception:  # an invalid config: the worker reports it
        return None
    if not _host_reuse(policy):
        return None
    return tuple(
        sorted((k, repr(v)) for k, v in config.items() if k not in OUTPUT_KEYS and k != "CPU_memory_line_GB")
    )


def host_line_pages(config: dict) -> int | None:
    """The engine's host line (pages) of a configuration, None if it has none."""
    try:
        policy, cfg = _policy_and_cfg(config)
        return int(_reuse_module(policy).system(cfg)["host_line"])
    except Exception:
        return None


def plan_digest(hints) -> str | None:
    """SHA-256 of a plan's hint array (int64 rows): equal digests, equal engine input."""
    if hints is None:
        return None
    h = np.ascontiguousarray(np.asarray(hints, dtype=np.int64))
    d = hashlib.sha256(repr(h.shape).encode())
    d.update(h.tobytes())
    return d.hexdigest()


def _peak_and_line(result) -> tuple[int, int] | None:
    if not isinstance(result, dict) or not _engine_reuses(result.get("engine")):
        return None
    peak = result.get("host_peak_pages")
    line = (result.get("system") or {}).get("host_line")
    if isinstance(peak, bool) or isinstance(line, bool):
        return None
    try:
        peak, line = int(peak), int(line)
    except (TypeError, ValueError):
        return None
    if not 0 <= peak < line:  # the line came into play: the run is not line-independent
        return None
    return peak, line


def _keep_array(name: str) -> bool:
    # planner arrays other than the simulated GPU use come from the derived point's own plan
    return not name.startswith("planner_") or name == "planner_simulated_gpu_bytes"


def source_from_record(rec: dict) -> dict | None:
    """A run that other host lines of its group can reuse (picklable dict), or None."""
    if rec.get("status") != "ok":
        return None
    pl = _peak_and_line(rec.get("result"))
    if pl is None:
        return None
    arrays = {k: v for k, v in (rec.get("arrays") or {}).items() if _keep_array(k)}
    return {
        "hash": rec.get("derived_from") or rec["hash"],
        "peak": pl[0],
        "host_line": pl[1],
        "result": rec["result"],
        "arrays": arrays,
        "plan_digest": rec.get("plan_digest"),
        "cpu_seconds": float(rec.get("source_cpu_seconds") or rec.get("cpu_seconds") or 0.0),
    }


def source_from_stored(p) -> dict | None:
    """The same from a StoredPoint (arrays loaded later: `arrays` None, `stored_hash` set)."""
    if p.status != "ok":
        return None
    pl = _peak_and_line(p.result)
    if pl is None:
        return None
    a = p.attrs
    return {
        "hash": a.get("derived_from") or p.hash,
        "peak": pl[0],
        "host_line": pl[1],
        "result": p.result,
        "arrays": None,
        "stored_hash": p.hash,
        "plan_digest": a.get("plan_hints_sha256") or None,
        "cpu_seconds": float(a.get("source_cpu_seconds") or a.get("cpu_seconds") or 0.0),
    }


def _peak_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def derive_result(config: dict, source: dict, plan=None, *, t0: float | None = None):
    """(result, arrays) of the configuration `config` from the run `source`, or (None, reason)
    when the reuse would not be exact. `plan`: the configuration's own plan (needed for the
    policies whose plan reads the host size)."""
    from .store import to_jsonable

    t0 = time.perf_counter() if t0 is None else t0
    policy, cfg = _policy_and_cfg(config)
    src = source["result"]
    eng = _reuse_module(policy)
    if eng is None or src.get("policy") != policy:
        return None, f"policy {policy} is not reused"
    sys2 = eng.system(cfg)
    sys1 = dict(src.get("system") or {})
    if sorted(sys1) != sorted(sys2) or to_jsonable(
        {k: v for k, v in sys1.items() if k != "host_line"}
    ) != to_jsonable({k: v for k, v in sys2.items() if k != "host_line"}):
        return None, "system parameters other than the host line differ"
    if not int(source["peak"]) < int(sys2["host_line"]):
        return None, "host line at or below the source's peak"
    if source.get("arrays") is None:
        return None, "source arrays not loaded"
    result = copy.deepcopy(src)
    arrays = {k: np.array(v, copy=True) for k, v in source["arrays"].items() if _keep_array(k)}
    if plan_depends_on_host(policy):
        if plan is None or source.get("plan_digest") is None:
            return None, "no plan to compare"
        if plan_digest(plan.hints) != source["plan_digest"]:
            return None, "the plan at this host line differs"
        result["plan"], parts = eng.plan_parts(plan, int(result["reported"]))
        # the simulated GPU use comes from the (same) run; the rest from this point's plan
        for name, val in parts.items():
            if isinstance(val, np.ndarray) and name != "simulated_gpu_bytes":
                arrays[f"planner_{name}"] = val
    result["system"] = sys2
    result["wall_seconds"] = time.perf_counter() - t0
    result["peak_rss_bytes"] = _peak_rss()
    return result, arrays


# ------------------------------------------------------------------------------ scheduling
class ReuseScheduler:
    """Hands out the sweep's tasks in their order, holding the host-memory variants of a
    page-engine point until the largest-line point of their group has run, and turning points
    whose line is above a finished run's peak into derivations.

        sched = ReuseScheduler(tasks, store, reuse=True)
        t = sched.next()             # a task for a worker, or None (none ready now)
        sched.take_local()           # derivations the parent does itself (no plan, no analysis)
        sched.completed(rec)         # every record, of a worker or of the parent
        sched.pending()              # tasks not yet handed out

    A task handed out with a "derive" entry is derived by the worker (`worker.execute`), which
    makes the point's plan first and simulates when the reuse would not be exact. Without
    reuse the tasks come out exactly in their order. Every task's workload analysis is asked
    of the first task of its (model, batch) that is handed out."""

    def __init__(self, tasks: list, store=None, reuse: bool = True):
        self.reuse = bool(reuse)
        self.order = list(tasks)
        self.local: list = []
        self._analysis = {}  # workload key -> still to compute
        for t in self.order:
            if t.get("analyze"):
                self._analysis[t["analyze"]] = True
            t["workload_key"] = t.get("workload_key") or t.get("analyze") or _workload_key_of(t)
            t["analyze"] = None
        self.group: dict = {}  # task hash -> host group key
        self.line: dict = {}  # task hash -> host line (pages)
        self.policy: dict = {}
        self.held: set = set()  # hashes waiting for their group's first run
        self.first_of: dict = {}  # group -> hash of the run the held ones wait for
        self.sources: dict = {}  # group -> [source dicts]
        self.n_pending: dict = {}  # group -> tasks not yet handed out
        self.reused = 0
        self.saved_cpu_seconds = 0.0
        self._store = store
        if not self.reuse:
            return
        for t in self.order:
            g = host_group(t["config"])
            line = host_line_pages(t["config"]) if g is not None else None
            if g is None or line is None:
                continue
            self.group[t["hash"]] = g
            self.line[t["hash"]] = line
            self.policy[t["hash"]] = _policy_and_cfg(t["config"])[0]
            self.n_pending[g] = self.n_pending.get(g, 0) + 1
        if not self.group:
            return
        if store is not None:
            groups = set(self.group.values())
            for p in store.points(damaged="skip"):
                src = source_from_stored(p) if p.status == "ok" else None
                if src is None:
                    continue
                g = host_group(p.config)
                if g in groups:
                    self.sources.setdefault(g, []).append(src)
        for g in list(self.sources):
            self._derive_group(g)
        # in each group the points take the group's places in the order by descending line:
        # the largest line runs first; the other points with a line above 0 wait for it (a
        # line of 0 is below every peak: never derived, never waiting)
        members: dict = {}
        for i, t in enumerate(self.order):
            g = self.group.get(t["hash"])
            if g is not None and not t.get("derive"):
                members.setdefault(g, []).append(i)
        for g, idx in members.items():
            if len(idx) < 2:
                continue
            ts = sorted((self.order[i] for i in idx), key=lambda t: -self.line[t["hash"]])
            for i, t in zip(idx, ts):
                self.order[i] = t
            wait = [t["hash"] for t in ts[1:] if self.line[t["hash"]] > 0]
            if wait and self.line[ts[0]["hash"]] > 0:
                self.first_of[g] = ts[0]["hash"]
                self.held.update(wait)

    # -- handing out -------------------------------------------------------------------------
    def pending(self) -> int:
        return len(self.order) + len(self.local)

    def next(self) -> dict | None:
        for i, t in enumerate(self.order):
            if t["hash"] in self.held:
                continue
            del self.order[i]
            self._handed_out(t)
            return t
        return None

    def take_local(self) -> list:
        out, self.local = self.local, []
        return out

    def requeue(self, t: dict) -> None:
        """A task handed out but not finished (its worker died): first in line again."""
        self.order.insert(0, t)
        g = self.group.get(t["hash"])
        if g is not None:
            self.n_pending[g] = self.n_pending.get(g, 0) + 1

    def release_all(self) -> None:
        self.held.clear()

    def dropped(self, t: dict) -> None:
        """A task handed out that will not run here (another sweep holds it): the tasks
        that waited for it are released."""
        g = self.group.get(t["hash"])
        if g is not None and self.first_of.get(g) == t["hash"]:
            del self.first_of[g]
            self.held -= {x["hash"] for x in self.order if self.group.get(x["hash"]) == g}

    def _handed_out(self, t: dict) -> None:
        key = t.get("workload_key")
        if key and self._analysis.pop(key, False):
            t["analyze"] = key
        g = self.group.get(t["hash"])
        if g is not None:
            self.n_pending[g] -= 1

    # -- results -----------------------------------------------------------------------------
    def completed(self, rec: dict) -> None:
        h = rec["hash"]
        g = self.group.get(h)
        if g is None:
            return
        if rec.get("derived_from"):
            self.reused += 1
            self.saved_cpu_seconds += max(
                0.0, float(rec.get("source_cpu_seconds") or 0.0) - float(rec.get("cpu_seconds") or 0.0)
            )
        else:
            src = source_from_record(rec)
            if src is not None:
                self.sources.setdefault(g, []).append(src)
        if self.first_of.get(g) == h:
            del self.first_of[g]
            self.held -= {t["hash"] for t in self.order if self.group.get(t["hash"]) == g}
        self._derive_group(g)
        if self.n_pending.get(g, 0) <= 0:
            self.sources.pop(g, None)

    def _derive_group(self, g) -> None:
        """Turn the group's tasks not yet handed out whose line is above a source's peak into
        derivations: done by the parent when no plan and no analysis is needed, else by a
        worker (the task carries its source)."""
        srcs = self.sources.get(g)
        if not srcs:
            return
        keep = []
        for t in self.order:
            h = t["hash"]
            if self.group.get(h) != g or t.get("derive") or t.get("no_reuse"):
                keep.append(t)
                continue
            src = min((s for s in srcs if s["peak"] < self.line[h]), default=None, key=lambda s: s["peak"])
            if src is None:
                keep.append(t)
                continue
            if src.get("arrays") is None:
                src["arrays"] = {
                    k: v for k, v in self._store.arrays(src["stored_hash"]).items() if _keep_array(k)
                }
            t["derive"] = src
            self.held.discard(h)
            needs_worker = plan_depends_on_host(self.policy[h]) or self._analysis.get(
                t.get("workload_key"), False
            )
            if needs_worker:
                keep.append(t)
            else:
                self._handed_out(t)
                self.local.append(t)
        self.order = keep


def _workload_key_of(t: dict) -> str | None:
    pt = t.get("point") or {}
    label = t.get("label") or ""
    b = pt.get("batch_size")
    return f"{label.split('/')[0]}-{b}" if label and b is not None else None


def derive_locally(task: dict) -> dict | None:
    """The record of a derivation done in the sweep's parent (no plan needed), or None when
    the reuse would not be exact (the task is then simulated by a worker)."""
    from .. import __version__

    t0, c0 = time.perf_counter(), time.process_time()
    src = task["derive"]
    result, arrays = derive_result(task["config"], src, None, t0=t0)
    if result is None:
        return None
    return derived_record(task, src, result, arrays, t0, c0, __version__)


def derived_record(task, src, result, arrays, t0, c0, version) -> dict:
    return {
        "hash": task["hash"],
        "label": task.get("label", ""),
        "point": task.get("point", {}),
        "config": task["config"],
        "status": "ok",
        "error": "",
        "error_type": "",
        "result": result,
        "arrays": arrays,
        "analysis": None,
        "g10fast_version": version,
        "worker_pid": os.getpid(),
        "derived_from": src["hash"],
        "derivation": DERIVATION,
        "plan_digest": src.get("plan_digest"),
        "source_cpu_seconds": float(src.get("cpu_seconds") or 0.0),
        "wall_seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        "worker_peak_rss_bytes": _peak_rss(),
    }
