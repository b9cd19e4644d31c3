"""Time a whole sweep: the artifact's 1,410-point matrix, or a named subset.

    python benchmarks/sweep_matrix.py [MATRIX] [--policies lru ideal] [--workers N]
                                      [--store FILE] [--g10 DIR] [--out FILE]

MATRIX is a file or a bundled matrix name (default: artifact). --policies keeps only those
policies' points. The sweep runs into a fresh store (unless --store names an existing one, in
which case finished points are skipped, as in `g10fast sweep`). While it runs, the resident
memory of this process and all its descendants is sampled every 0.5 s (the sum of VmRSS from
/proc), and at the end RUSAGE_CHILDREN gives the largest single worker's peak. Appends one
JSON line to benchmarks/results/sweep_matrix.jsonl: wall time, points, statuses, the per-point
time distribution (min, median, p90, max, total), peak summed RSS, and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

from _bench import git_commit  # noqa: E402  (benchmarks/, the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast import __version__  # noqa: E402
from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points  # noqa: E402
from g10fast.sweep.runner import run_sweep  # noqa: E402


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _tree_rss(pid: int) -> int:
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for ln in fh:
                    if ln.startswith("VmRSS:"):
                        total += int(ln.split()[1]) * 1024
                        break
        except OSError:
            continue
        stack.extend(_children(p))
    return total


class RssSampler(threading.Thread):
    def __init__(self, interval=0.5):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = 0
        self.stop = threading.Event()

    def run(self):
        me = os.getpid()
        while not self.stop.is_set():
            self.peak = max(self.peak, _tree_rss(me))
            self.stop.wait(self.interval)


def _pct(xs, q):
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("matrix", nargs="?", default="artifact")
    ap.add_argument("--policies", nargs="+", help="keep only these policies' points")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--store", help="results store (default: a fresh temporary file)")
    ap.add_argument("--g10", default=str(ROOT.parent / "shared" / "g10-artifact"))
    ap.add_argument("--note", default="", help="free text stored with the record")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sweep_matrix.jsonl"))
    args = ap.parse_args(argv)

    path = named_matrix(args.matrix)
    points = expand_matrix(path)
    if args.policies:
        points = [p for p in points if p.policy in set(args.policies)]
    resolved = resolve_points(points, args.g10)
    tmpdir = None
    store = args.store
    if store is None:
        tmpdir = tempfile.mkdtemp(prefix="g10fast-bench-")
        store = os.path.join(tmpdir, "results.h5")
    sampler = RssSampler()
    sampler.start()
    t0 = time.perf_counter()
    summary = run_sweep(resolved, store, workers=args.workers, progress=True)
    wall = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    pts = summary.point_seconds
    rec = {
        "benchmark": "sweep_matrix",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "g10fast_version": __version__,
        "matrix": str(path.name),
        "policies": args.policies,
        "points": len(resolved),
        "ran": summary.ran,
        "skipped": summary.skipped,
        "ok": summary.ok,
        "failed": summary.failed,
        "errors": summary.errors,
        "reused": summary.reused,
        "reuse_saved_cpu_seconds": round(summary.reuse_saved_cpu_seconds, 1),
        "commit": git_commit(),
        "workers": args.workers or os.cpu_count(),
        "wall_seconds": round(wall, 2),
        "point_seconds": {
            "min": _pct(pts, 0),
            "median": _pct(pts, 50),
            "p90": _pct(pts, 90),
            "max": _pct(pts, 100),
            "sum": round(sum(pts), 2),
        },
        "point_seconds_all": [round(x, 3) for x in pts],
        "peak_rss_sum_bytes": sampler.peak,
        "peak_rss_largest_worker_bytes": int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024,
        "peak_rss_parent_bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "note": args.note,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(summary.text())
    print(
        f"wall {wall:.1f} s; per point median {rec['point_seconds']['median']} s, "
        f"max {rec['point_seconds']['max']} s; peak RSS of all processes "
        f"{sampler.peak / 2**30:.2f} GiB; recorded in {args.out}"
    )
    if tmpdir:
        try:
            os.remove(store)
            os.rmdir(tmpdir)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
