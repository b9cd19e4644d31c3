"""Paired before/after timings of artifact points on two source trees, alternating.

    python benchmarks/paired_timing.py --base /tmp/wt-base --new . \
        --points BERT:128:lru ResNet152:1280:prefetch_lru SENet154:1024:deepUM --repeats 3

A point is MODEL:BATCH:POLICY, or MODEL:BATCH:POLICY:HOST_GB for another host memory line
(genconfig's `host_mem_gb`, as the matrix's cpu_varying group: `Inceptionv3:1792:deepUM:0`).
POLICY is an artifact policy (lru, prefetch_lru, deepUM, ...) or any registered policy, run on
the artifact's model and system as `g10fast run --g10 ... --policy` does (the driver engine's
uvm, pump, g10_driver, ...).
Each measurement is a fresh process running one tree (PYTHONPATH=tree): a warm-up run of
BERT-128 under the same policy first (loads the Numba cache, warms the allocator), then the
timed run of the point; it reports the run's CPU and wall seconds and the process's peak RSS.
Trees alternate (base, new, base, new, ...), so that a drift of the machine hits both.
`--side-by-side` runs each pair's two processes at the same time instead, each pinned to a
CPU of its own (swapped from pair to pair), for a machine whose speed drifts within seconds
(a shared VM: one tree's runs 1.3-2.2 s where the other's were 1.0-1.3 s, run after run);
each pair's ratio is recorded too.
`--compile` also times a cold start of each tree: the Numba caches under the tree removed,
then BERT-128 lru (compile included). One JSON line per invocation goes to
benchmarks/results/paired_timing.jsonl, with both trees' commits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _bench import append_record, git_commit

HERE = Path(__file__).resolve().parent
ARTIFACT = HERE.parents[1] / "shared" / "g10-artifact"

CHILD = r"""
import json, resource, sys, time
from g10fast.config import genconfig
from g10fast.run import run
art, model, batch, policy, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
trace = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else None
host = float(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[7] != "-" else None
from g10fast.errors import InputError
def point(m, b, host=None):
    try:
        return genconfig(art, m, b, policy, host_mem_gb=host)
    except InputError:      # not the artifact's (the driver engine's): as `g10fast run --g10`
        from g10fast import policies
        from g10fast.spec import from_g10_config
        rec = policies.get(policy)
        return from_g10_config(genconfig(art, m, b, rec.artifact or "lru"), policy=rec.name)
t0 = time.perf_counter(); c0 = time.process_time()
if warm:  # (a traced point's warm-up is traced too: it loads the traced engine and the writer)
    run(point("BERT", 128), trace_path=trace and trace + ".warm.h5")
    if trace:
        import os
        os.unlink(trace + ".warm.h5")
t1 = time.perf_counter(); c1 = time.process_time()
res = run(point(model, batch, host), trace_path=trace)
t2 = time.perf_counter(); c2 = time.process_time()
it = res["iterations"][res["reported"]]
out = {"warmup_wall_s": t1 - t0, "wall_s": t2 - t1, "cpu_s": c2 - c1,
       "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
       "exe_time_cycles": it["exe_time_cycles"]}
if trace:
    import os
    from g10fast.trace import open_trace
    with open_trace(trace) as tr:
        out["trace_rows"] = len(tr)
    out["trace_bytes"] = os.path.getsize(trace)
    os.unlink(trace)
print(json.dumps(out))
"""


def launch(
    tree: Path, art: Path, point: str, warm: bool = True, trace: str | None = None, cpu: int | None = None
) -> subprocess.Popen:
    """Start one fresh process of `tree` (pinned to CPU `cpu` when given): a warm-up run, then
    the point's run (written to the event trace `trace`, removed after its rows are counted,
    when given). `collect` reads its result."""
    model, batch, policy, *host = point.split(":")
    if len(host) > 1:
        raise SystemExit(f"paired_timing: point {point!r}: MODEL:BATCH:POLICY[:HOST_GB] expected")
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(art), model, batch, policy, "1" if warm else "0", trace or "-"]
        + host[:1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(tree),
        preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})),
    )


def collect(p: subprocess.Popen, tree: Path, point: str) -> dict:
    out, err = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"{tree} {point}: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def measure(tree: Path, art: Path, point: str, warm: bool = True, trace: str | None = None) -> dict:
    """One fresh process of `tree` (`launch`), waited for: its result."""
    return collect(launch(tree, art, point, warm, trace), tree, point)


def clear_numba_cache(tree: Path) -> int:
    n = 0
    for d in (tree / "g10fast").rglob("__pycache__"):
        for f in d.iterdir():
            if f.suffix in (".nbi", ".nbc"):
                f.unlink()
                n += 1
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument(
        "--points", nargs="+", default=["BERT:128:lru", "ResNet152:1280:prefetch_lru", "SENet154:1024:deepUM"]
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="also time a cold start of each tree")
    ap.add_argument(
        "--side-by-side",
        action="store_true",
        help="run each pair's two processes at once, each pinned to a CPU of its own (the CPUs "
        "swapped from pair to pair), so that a drift of the machine hits both alike",
    )
    ap.add_argument("--g10", type=Path, default=ARTIFACT)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "paired_timing.jsonl")
    a = ap.parse_args(argv)
    if not (a.g10 / "frontend" / "Nets").is_dir():
        sys.stderr.write(f"no G10 artifact at {a.g10}\n")
        return 2
    trees = {"base": a.base.resolve(), "new": a.new.resolve()}
    rows = {}
    if a.compile:
        for name, tree in trees.items():
            clear_numba_cache(tree)
            t0 = time.perf_counter()
            r = measure(tree, a.g10, "BERT:128:lru", warm=False)
            rows[f"cold_start_{name}_s"] = time.perf_counter() - t0
            rows[f"cold_run_{name}_wall_s"] = r["wall_s"]
            sys.stderr.write(f"cold start {name}: {rows[f'cold_start_{name}_s']:.1f} s\n")
    cpus = sorted(os.sched_getaffinity(0)) if a.side_by_side else []
    if a.side_by_side and len(cpus) < 2:
        sys.stderr.write("paired_timing: --side-by-side needs two CPUs\n")
        return 2
    out = {p: {"base": [], "new": []} for p in a.points}
    for rep in range(a.repeats):
        for point in a.points:
            order = ("base", "new") if rep % 2 == 0 else ("new", "base")
            if a.side_by_side:
                procs = {name: launch(trees[name], a.g10, point, cpu=cpus[i]) for i, name in enumerate(order)}
                got = {name: collect(procs[name], trees[name], point) for name in order}
            else:
                got = {name: measure(trees[name], a.g10, point) for name in order}
            for name in order:
                r = got[name]
                out[point][name].append(r)
                sys.stderr.write(
                    f"{point} {name}: cpu {r['cpu_s']:.2f} s, wall {r['wall_s']:.2f}"
                    f" s, {r['peak_rss_mib']:.0f} MiB\n"
                )
    summary = {}
    for point, d in out.items():
        same = {r["exe_time_cycles"] for r in d["base"] + d["new"]}
        summary[point] = {
            "base_cpu_s": [round(r["cpu_s"], 3) for r in d["base"]],
            "new_cpu_s": [round(r["cpu_s"], 3) for r in d["new"]],
            "base_peak_rss_mib": max(r["peak_rss_mib"] for r in d["base"]),
            "new_peak_rss_mib": max(r["peak_rss_mib"] for r in d["new"]),
            "median_ratio_new_over_base": round(
                statistics.median(r["cpu_s"] for r in d["new"])
                / statistics.median(r["cpu_s"] for r in d["base"]),
                4,
            ),
            "min_ratio_new_over_base": round(
                min(r["cpu_s"] for r in d["new"]) / min(r["cpu_s"] for r in d["base"]), 4
            ),
            "same_result": len(same) == 1,
        }
        if a.side_by_side:
            ratios = [n["cpu_s"] / b["cpu_s"] for b, n in zip(d["base"], d["new"])]
            summary[point]["pair_ratios_new_over_base"] = [round(x, 4) for x in ratios]
    rec = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "base": git_commit(trees["base"]),
        "new": git_commit(trees["new"]),
        "machine": os.uname().nodename,
        "cpus": os.cpu_count(),
        "repeats": a.repeats,
        "side_by_side": a.side_by_side,
        "points": summary,
        **rows,
    }
    append_record(a.out, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
