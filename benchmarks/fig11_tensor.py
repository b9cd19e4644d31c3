"""The tensor engine's cells of Figure 11 (FlashNeuron, G10GDSSSD, G10GDSFULL × 5 models), and
the two FlashNeuron references, each in a fresh process: wall time, CPU seconds, peak RSS, and
the error against the artifact's all.base.txt (or the reference's sim_result.final).

    python benchmarks/fig11_tensor.py [--shared ../shared] [--note TEXT]

Appends one JSON line per run to benchmarks/results/fig11_tensor.jsonl with the git commit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import git_commit  # noqa: E402  (benchmarks/, the script's folder)

ROOT = Path(__file__).resolve().parents[1]
FIG11 = [
    ("BERT", 256, 0),
    ("VIT", 1280, 1),
    ("Inceptionv3", 1536, 2),
    ("ResNet152", 1280, 3),
    ("SENet154", 1024, 4),
]
COLUMNS = ["lru", "FlashNeuron", "deepUM", "G10GDSSSD", "G10GDSFULL", "prefetch_lru", "ideal"]
POLICIES = ["FlashNeuron", "G10GDSSSD", "G10GDSFULL"]
REFS = [("BERT", 128), ("ResNet152", 256)]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from g10fast.config import read_g10_config
from g10fast.errors import InputError
from g10fast.run import run, to_json_ready
try:
    r = to_json_ready(run(read_g10_config(sys.argv[1])))
except InputError as e:
    r = {"status": "error", "error": str(e)}
r["process_wall_seconds"] = time.perf_counter() - t0
print(json.dumps(r, default=float))
"""


def all_base(path: Path) -> list:
    rows = []
    for line in path.read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) == 7 and all(p == "inf" or p.replace(".", "").isdigit() for p in parts):
            rows.append(parts)
    return rows


def final(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            k, v = line.split("=")
            out[k.strip()] = float(v)
    return out


def cpu_seconds(path: Path) -> float:
    u = s = 0.0
    for line in path.read_text().splitlines():
        if "User time" in line:
            u = float(line.split(":")[-1])
        if "System time" in line:
            s = float(line.split(":")[-1])
    return u + s


def child(config: Path, env) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["bench_wall_seconds"] = wall
    r["bench_cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    r["bench_peak_rss_bytes"] = after.ru_maxrss * 1024
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--note", default="")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fig11_tensor.jsonl")
    args = ap.parse_args(argv)
    art = args.shared / "g10-artifact"
    base = all_base(art / "example_results" / "overall_performance" / "all.base.txt")
    commit = git_commit()
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(ROOT))
    records = []
    for model, batch, row in FIG11:
        for pol in POLICIES:
            cfg = art / "src" / "configs" / model / f"{batch}-sim_{pol}.config"
            r = child(cfg, env)
            exp = base[row][COLUMNS.index(pol)]
            rec = {
                "kind": "fig11",
                "model": model,
                "batch": batch,
                "policy": pol,
                "status": r.get("status"),
                "expected_cycles": exp,
            }
            if r.get("status") == "ok":
                got = r["iterations"][0]["exe_time_cycles"]
                rec["exe_time_cycles"] = got
                rec["exe_time_ms"] = r["iterations"][0]["exe_time_ms"]
                rec["rel_error"] = None if exp == "inf" else got / int(exp) - 1
                rec["matches"] = exp != "inf" and abs(got / int(exp) - 1) <= 0.01
            elif r.get("status") == "failed":
                rec["failure"] = r.get("failure")
                rec["matches"] = exp == "inf"
            else:
                rec["error"] = r.get("error")
                rec["matches"] = None
            records.append(
                rec
                | {
                    "wall_seconds": r["bench_wall_seconds"],
                    "run_wall_seconds": r.get("wall_seconds"),
                    "cpu_seconds": r["bench_cpu_seconds"],
                    "peak_rss_bytes": r["bench_peak_rss_bytes"],
                }
            )
            print(json.dumps(records[-1], default=str), flush=True)
    for model, batch in REFS:
        ref = args.shared / "reference" / f"{model}-{batch}-FlashNeuron"
        r = child(art / "src" / "configs" / model / f"{batch}-sim_FlashNeuron.config", env)
        exp = final(ref / "sim_result.final")
        cpp = cpu_seconds(ref / "time.txt")
        got = r["fn_native"]["total_exe_time"]
        rec = {
            "kind": "reference",
            "model": model,
            "batch": batch,
            "policy": "FlashNeuron",
            "status": r["status"],
            "total_exe_time_ms": got,
            "expected_ms": exp["total_exe_time"],
            "rel_error": float("%g" % got) / exp["total_exe_time"] - 1,
            "bytes_match": r["fn_native"]["total_ssd2gpu_byte"] == exp["total_ssd2gpu_byte"],
            "wall_seconds": r["bench_wall_seconds"],
            "cpu_seconds": r["bench_cpu_seconds"],
            "peak_rss_bytes": r["bench_peak_rss_bytes"],
            "cpp_cpu_seconds": cpp,
            "cpu_ratio_cpp_over_ours": cpp / r["bench_cpu_seconds"],
        }
        records.append(rec)
        print(json.dumps(rec, default=str), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    tmp = args.out.with_suffix(".tmp")
    old = args.out.read_text() if args.out.exists() else ""
    with open(tmp, "w") as f:
        f.write(old)
        for rec in records:
            f.write(json.dumps(dict(rec, commit=commit, date=stamp, note=args.note), default=str) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
