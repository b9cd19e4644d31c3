"""Cold start of source trees, paired and alternating: each tree's Numba cache removed, then
BERT-128 lru (the artifact config; `--policy`: another policy) in a fresh process, compile
included; with `--job default` the default comparison instead (`g10fast run --no-progress`
in an empty folder, its table compared across trees); with `--trace` the BERT-128 run traced
(a first traced run).

    python benchmarks/cold_start.py --trees /tmp/wt-4cfa /tmp/wt-949d . --depths 0 5 13 29

A tree whose kernels were compiled ahead of time (g10fast.aot: `python -m g10fast.aot build`
with the tree on PYTHONPATH, as its install does) runs them without a compile; each tree's
record says whether it did (`aot`: g10fast.aot.status() in that tree, or "none" before the
module existed). G10FAST_NO_AOT=1 in this process's environment turns it off for every tree.

One round per depth in --depths; round r runs the trees in the given order (odd r) or reversed
(even r), so that a drift of the shared machine hits every tree. In a round of depth N the
child calls the run N Python frames deeper than paired_timing.py's child (depth 0 is exactly
its cold start): under CPython 3.11 the compile's minor page faults, and with them its sys
time, change by up to 3x with that depth alone (a frame-stack chunk mapped and unmapped over
and over where the compile's recursion straddles a chunk boundary), for any tree; several
depths average that out. Before each run the tree's `__pycache__` *.nbi / *.nbc files
are removed (paired_timing.clear_numba_cache). Per run: user and sys CPU seconds of the child
(getrusage), wall seconds, minor page faults (the sys time follows them: see "Cold compile" in
benchmarks/results/page-engine-bulk-journal.md), the 1-minute load average before the
run, and the run's result (exe_time_cycles, the same for every tree). One JSON line per
invocation goes to benchmarks/results/cold_start.jsonl, with every tree's commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import append_record, git_commit
from paired_timing import ARTIFACT, CHILD, clear_numba_cache

DEEP_CHILD = r"""
import sys
depth = int(sys.argv.pop())
code = sys.argv.pop()
def deep(n):
    if n == 0:
        exec(code, {"__name__": "__main__"})
    else:
        deep(n - 1)
deep(depth)
"""

HERE = Path(__file__).resolve().parent


DEFAULT_CHILD = r"""
import sys
from g10fast.cli import console_main
sys.argv = ["g10fast", "run", "--no-progress"]
console_main()
"""


def aot_status(tree: Path) -> str:
    """Whether `tree` runs kernels compiled ahead of time: "used", "not used: why", or "none"
    (a tree from before g10fast.aot)."""
    if not (tree / "g10fast" / "aot.py").is_file():
        return "none"
    code = (
        "from g10fast import aot; s = aot.status(); print('used' if s['used'] else 'not used: ' + s['why'])"
    )
    env = dict(os.environ, PYTHONPATH=str(tree))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tree))
    return p.stdout.strip() or p.stderr.strip()[-200:]


def cold_run(
    tree: Path, art: Path, depth: int = 0, job: str = "bert-lru", policy: str = "lru", trace: bool = False
) -> dict:
    clear_numba_cache(tree)
    load = os.getloadavg()[0]
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("NUMBA_CACHE_DIR", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cold-start-") as empty:
        if job == "default":
            code, args = DEFAULT_CHILD, []
        else:  # (traced: the child writes the run's event trace in `empty`, then removes it)
            code, args = (
                CHILD,
                [str(art), "BERT", "128", policy, "0"] + ([str(Path(empty) / "run.h5")] if trace else []),
            )
        cmd = (
            [sys.executable, "-c", code, *args]
            if depth == 0
            else [sys.executable, "-c", DEEP_CHILD, *args, code, str(depth)]
        )
        p = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=empty if job == "default" else str(tree)
        )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{tree}: {p.stderr[-2000:]}")
    if job == "default":  # (the table: every line after the header, the figure's path left out)
        result = hashlib.sha256("\n".join(p.stdout.splitlines()[1:-1]).encode()).hexdigest()[:16]
    else:
        result = json.loads(p.stdout.strip().splitlines()[-1])["exe_time_cycles"]
    user, sys_ = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
    return {
        "user_s": round(user, 2),
        "sys_s": round(sys_, 2),
        "cpu_s": round(user + sys_, 2),
        "wall_s": round(wall, 2),
        "minflt": r1.ru_minflt - r0.ru_minflt,
        "load1": round(load, 2),
        "depth": depth,
        "result": result,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", type=Path, nargs="+", required=True)
    ap.add_argument(
        "--depths",
        type=int,
        nargs="+",
        default=[0, 5, 13, 29],
        help="one round per depth: extra Python frames below the run (default 0 5 13 29)",
    )
    ap.add_argument("--job", choices=("bert-lru", "default"), default="bert-lru")
    ap.add_argument(
        "--policy",
        default="lru",
        help="the BERT-128 job's policy (default lru): any registered policy, run on the artifact's"
        " point as paired_timing.py does (uvm, pump: the driver engine)",
    )
    ap.add_argument(
        "--trace",
        action="store_true",
        help="the BERT-128 job's run traced (its event trace written to a temporary file): a first "
        "traced run",
    )
    ap.add_argument("--g10", type=Path, default=ARTIFACT)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "cold_start.jsonl")
    a = ap.parse_args(argv)
    if not (a.g10 / "frontend" / "Nets").is_dir():
        sys.stderr.write(f"no G10 artifact at {a.g10}\n")
        return 2
    trees = [t.resolve() for t in a.trees]
    names = [git_commit(t) for t in trees]
    # (two trees at one commit, e.g. worktrees of it: each recorded under its own name)
    names = [f"{n}@{t}" if names.count(n) > 1 else n for n, t in zip(names, trees)]
    aot_status_of = [aot_status(t) for t in trees]
    runs = {n: [] for n in names}
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    for r, depth in enumerate(a.depths):
        order = list(zip(names, trees))
        if r % 2:
            order.reverse()
        for name, tree in order:
            res = cold_run(tree, a.g10, depth, a.job, a.policy, a.trace)
            runs[name].append(res)
            sys.stderr.write(
                f"round {r + 1} {name}: cpu {res['cpu_s']:.1f} s (user "
                f"{res['user_s']:.1f}, sys {res['sys_s']:.1f}), wall "
                f"{res['wall_s']:.1f} s, {res['minflt']} minor faults, depth "
                f"{depth}, load "
                f"{res['load1']}\n"
            )
    summary = {}
    for name, rs in runs.items():
        summary[name] = {
            k: [x[k] for x in rs] for k in ("cpu_s", "user_s", "sys_s", "wall_s", "minflt", "load1", "depth")
        }
        summary[name]["median_cpu_s"] = round(statistics.median(x["cpu_s"] for x in rs), 2)
        summary[name]["min_cpu_s"] = min(x["cpu_s"] for x in rs)
        summary[name]["median_user_s"] = round(statistics.median(x["user_s"] for x in rs), 2)
        summary[name]["mean_cpu_s"] = round(statistics.mean(x["cpu_s"] for x in rs), 2)
    same = {x["result"] for rs in runs.values() for x in rs}
    rec = {
        "date": started,
        "what": "cold start: tree's Numba cache removed, "
        + ("the default comparison" if a.job == "default" else f"BERT-128 {a.policy}")
        + (" traced" if a.trace and a.job != "default" else "")
        + " in a fresh process (compile included); CPU of the child (getrusage)",
        "job": a.job,
        "policy": None if a.job == "default" else a.policy,
        "trace": bool(a.trace and a.job != "default"),
        "trees": names,
        "aot": dict(zip(names, aot_status_of)),
        "machine": os.uname().nodename,
        "cpus": os.cpu_count(),
        "depths": a.depths,
        "runs": summary,
        "same_result": len(same) == 1,
    }
    append_record(a.out, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
