"""Event-trace benchmark: paper-scale runs with and without --trace, a synthetic trace of N
events written / inspected / exported in bounded memory, and the Perfetto export of a trace.

    python benchmarks/trace_bench.py runs [--g10 DIR] [--out DIR]     # the three paper-scale runs
    python benchmarks/trace_bench.py synthetic N [--out DIR]           # N-event writer loop
    python benchmarks/trace_bench.py export FILE.h5 [...]              # export time and size
    python benchmarks/trace_bench.py writer FILE.h5 [--compression none]  # the writer alone

Every measurement runs in its own child process, so peak RSS (ru_maxrss) is that step's alone.
Results are appended to benchmarks/results/trace_bench.jsonl with the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import ROOT, git_commit  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "trace_bench.jsonl"
PY = sys.executable

# (label, G10 artifact model folder, batch, policy)
RUNS = [
    ("ResNet152-1280 Base UVM", "ResNet152", 1280, "lru"),
    ("ResNet152-1280 G10", "ResNet152", 1280, "prefetch_lru"),
    ("SENet154-1024 DeepUM+", "SENet154", 1024, "deepUM"),
]


def child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (this worktree first on the path); it prints one
    JSON line; -> that dict with the child's peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pre = (
        "import json, os, resource, time, sys\n"
        "def _rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
    )
    out = subprocess.run([PY, "-c", pre + code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"child failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_run(cfg: str, trace_path: str | None) -> dict:
    g10root = str(Path(cfg).parents[2])  # the artifact's src/: its paths are relative to it
    code = f"""
import g10fast.trace as T
from g10fast.run import run
from g10fast.config import read_g10_config
from g10fast.spec import from_g10_config
spent = [0.0]
for name in ("append", "close"):
    orig = getattr(T.EventTraceWriter, name)
    def timed(self, *a, _o=orig, **k):
        t = time.perf_counter()
        try:
            return _o(self, *a, **k)
        finally:
            spent[0] += time.perf_counter() - t
    setattr(T.EventTraceWriter, name, timed)
spec = from_g10_config(read_g10_config({cfg!r}, g10_root={g10root!r}))
run(spec)                                     # warm-up: Numba's compile is not timed
t0 = time.perf_counter(); c0 = time.process_time()
res = run(spec, trace_path={trace_path!r})
wall = time.perf_counter() - t0; cpu = time.process_time() - c0
out = {{"wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": _rss(), "writer_s": spent[0],
        "status": res.get("status")}}
if {trace_path!r}:
    with T.open_trace({trace_path!r}) as tr:
        out["events"] = tr.n_events
    out["file_bytes"] = os.path.getsize({trace_path!r})
print(json.dumps(out))
"""
    return child(code)


def export_once(trace: str, out: str, fmt: str = "perfetto", extra: str = "") -> dict:
    code = f"""
from g10fast.perfetto import export_trace
t0 = time.perf_counter(); c0 = time.process_time()
rep = export_trace({trace!r}, {out!r}, fmt={fmt!r}{extra})
out = {{"export_wall_s": time.perf_counter() - t0, "export_cpu_s": time.process_time() - c0,
        "export_peak_rss_bytes": _rss(), **rep}}
print(json.dumps(out))
"""
    return child(code)


def inspect_once(trace: str) -> dict:
    code = f"""
from g10fast.perfetto import inspect_json
t0 = time.perf_counter()
rep = inspect_json({trace!r})
print(json.dumps({{"inspect_wall_s": time.perf_counter() - t0, "inspect_peak_rss_bytes": _rss(),
                  "events": rep["events"]}}))
"""
    return child(code)


def record(entry: dict) -> None:
    entry = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": git_commit(),
        "cpus": len(os.sched_getaffinity(0)),
        "load_avg": os.getloadavg()[0],
        **entry,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as fh:
        fh.write(json.dumps(entry) + "\n")
    print(json.dumps(entry))


def cmd_runs(args) -> None:
    g10 = Path(args.g10)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for label, model, batch, policy in RUNS:
        if args.only and args.only not in label:
            continue
        cfg = str(g10 / "src" / "configs" / model / f"{batch}-sim_{policy}.config")
        h5 = str(out / f"{model}{batch}_{policy}.h5")
        no = one_run(cfg, None)
        yes = one_run(cfg, h5)
        entry = {
            "bench": "run",
            "label": label,
            "config": cfg,
            "without_trace": no,
            "with_trace": yes,
            "write_events_per_s": yes["events"] / yes["writer_s"] if yes["writer_s"] else None,
        }
        if not args.no_export:
            pf = str(out / f"{model}{batch}_{policy}.pftrace")
            entry["export"] = export_once(h5, pf)
        record(entry)


def cmd_synthetic(args) -> None:
    n = int(float(args.n))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    h5 = str(out / f"synthetic_{n}.h5")
    code = f"""
import numpy as np
sys.path.insert(0, {str(ROOT / "tests")!r})
from synth_trace import engine_like_batch
from g10fast.trace import EventTraceWriter
N = {n}
from synth_trace import KERNEL_CYCLES, KERNELS_PER_ITERATION, ROWS_PER_KERNEL
B = ROWS_PER_KERNEL * KERNELS_PER_ITERATION     # one iteration per batch: shifted copies
base = engine_like_batch(B, seed=1)
isk = base[:, 1] == 0
spent = 0.0
t0 = time.perf_counter()
with EventTraceWriter({h5!r}, config={{"synthetic": True}}, meta={{"model": "synthetic"}}) as w:
    done = 0
    while done < N:
        m = min(B, N - done)
        blk = done // B
        b = base[:m].copy()
        b[:, 0] += blk * KERNELS_PER_ITERATION * KERNEL_CYCLES
        b[isk[:m], 9] += blk * KERNELS_PER_ITERATION * KERNEL_CYCLES
        b[:, 2] += blk
        t1 = time.perf_counter()
        w.append(b)
        spent += time.perf_counter() - t1
        done += m
    t1 = time.perf_counter()
    w.close()
    spent += time.perf_counter() - t1
wall = time.perf_counter() - t0
print(json.dumps({{"write_wall_s": wall, "writer_s": spent, "write_events_per_s": N / spent,
                  "write_peak_rss_bytes": _rss()}}))
"""
    w = child(code)
    entry = {"bench": "synthetic", "events": n, "file_bytes": os.path.getsize(h5), **w}
    entry.update(inspect_once(h5))
    pf = str(out / f"synthetic_{n}.pftrace")
    entry["export"] = export_once(h5, pf)
    record(entry)
    if not args.keep:
        for p in (h5, pf):
            try:
                os.unlink(p)
            except OSError:
                pass


def cmd_export(args) -> None:
    extra = f", pages={args.pages!r}, kernels={args.kernels!r}"
    for f in args.files:
        ext = ".json" if args.format == "json" else ".pftrace"
        pf = str(Path(args.out) / (Path(f).stem + ext))
        record({"bench": "export", "trace": f, "export": export_once(f, pf, args.format, extra)})


def cmd_writer(args) -> None:
    """The writer alone on real engine rows: the first 4 M rows of a trace, appended again and
    again (time shifted) in batches of --batch rows, until --events."""
    n = int(float(args.events))
    code = f"""
import numpy as np
from g10fast.trace import EventTraceWriter, open_trace
with open_trace({args.file!r}) as tr:
    base = tr.to_buffer(0, min(tr.n_events, 4_000_000))
span = int(base[:, 0].max()) + 1
B = {int(args.batch)}
tw = time.perf_counter()          # warm-up: numba and the writer's kernels (from its cache)
with EventTraceWriter({str(Path(args.out) / "warm.h5")!r}, config={{}}) as w:
    w.append(base[:1000])
os.unlink({str(Path(args.out) / "warm.h5")!r})
warm = time.perf_counter() - tw
w = EventTraceWriter({str(Path(args.out) / "writer_bench.h5")!r}, config={{}}, threads={args.threads!r},
                     compression={args.compression!r})
t0 = time.perf_counter(); c0 = time.process_time()
done = 0
spent = 0.0        # inside append and close: the writer's own time (not the time shift below)
while done < {n}:
    for lo in range(0, len(base), B):
        m = min(B, {n} - done)
        if m <= 0:
            break
        b = base[lo:lo + m]
        if done >= len(base):
            b = b.copy(); b[:, 0] += (done // len(base)) * span
        t1 = time.perf_counter()
        w.append(b)
        spent += time.perf_counter() - t1
        done += len(b)
t1 = time.perf_counter()
w.close()
spent += time.perf_counter() - t1
wall = time.perf_counter() - t0; cpu = time.process_time() - c0
print(json.dumps({{"events": done, "warm_up_s": warm, "wall_s": wall, "cpu_s": cpu,
                  "events_per_s": done / wall, "writer_s": spent, "writer_events_per_s": done / spent,
                  "events_per_cpu_s": done / cpu, "peak_rss_bytes": _rss(),
                  "file_bytes": os.path.getsize({str(Path(args.out) / "writer_bench.h5")!r})}}))
"""
    res = child(code)
    os.unlink(str(Path(args.out) / "writer_bench.h5"))
    res["file_bytes_per_event"] = res["file_bytes"] / res["events"]
    record(
        {
            "bench": "writer",
            "source": args.file,
            "batch": int(args.batch),
            "threads": args.threads,
            "compression": args.compression,
            **res,
        }
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("runs")
    r.add_argument("--g10", default=str(ROOT.parent / "shared" / "g10-artifact"))
    r.add_argument("--out", default=tempfile.gettempdir() + "/g10trace_bench")
    r.add_argument("--only", help="only the run whose label contains this")
    r.add_argument("--no-export", action="store_true")
    r.set_defaults(func=cmd_runs)
    s = sub.add_parser("synthetic")
    s.add_argument("n")
    s.add_argument("--out", default=tempfile.gettempdir() + "/g10trace_bench")
    s.add_argument("--keep", action="store_true")
    s.set_defaults(func=cmd_synthetic)
    e = sub.add_parser("export")
    e.add_argument("files", nargs="+")
    e.add_argument("--out", default=tempfile.gettempdir() + "/g10trace_bench")
    e.add_argument("--format", default="perfetto", choices=["perfetto", "json"])
    e.add_argument("--pages", action="store_true")
    e.add_argument("--kernels")
    e.set_defaults(func=cmd_export)
    wr = sub.add_parser("writer")
    wr.add_argument("file")
    wr.add_argument("--events", default="20e6")
    wr.add_argument("--batch", default=65536)
    wr.add_argument("--threads", type=int, default=None)
    wr.add_argument(
        "--compression",
        default="deflate",
        choices=["deflate", "none"],
        help='the writer\'s compression (docs/trace-format.md, "Compression")',
    )
    wr.add_argument("--out", default=tempfile.gettempdir() + "/g10trace_bench")
    wr.set_defaults(func=cmd_writer)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
