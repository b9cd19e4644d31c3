"""Issue 37's bad-input checks on a fresh clone: every command below must end with exit
status 2 and one line on stderr, `g10fast: error: ...`, without a traceback, and before any
long work (each is timed).

    python benchmarks/bad_input.py [--repo PATH] [--keep DIR]

The checkout at PATH (default: this one) is cloned (`git clone`, the committed state only)
into a temporary folder and each command runs there as `python -m g10fast.cli` with the
clone first on PYTHONPATH, in the current interpreter's environment. Prints one row per
command (status, lines, seconds, the message) and exits 1 when any check fails.
Record: benchmarks/results/bad-input-fresh-clone.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKS = [
    (
        "extreme host memory",
        ["run", "--model", "bert-base", "--batch", "8", "--policy", "lru", "--host-mem-gb", "1e300"],
        "host.memory_gb",
    ),
    (
        "vanishing PCIe bandwidth",
        ["run", "--model", "bert-base", "--batch", "8", "--policy", "lru", "--pcie-gbps", "1e-300"],
        "host.link_gbps",
    ),
    (
        "extreme SSD bandwidth",
        ["run", "--model", "bert-base", "--batch", "8", "--policy", "lru", "--ssd-gbps", "1e300"],
        "ssd.bandwidth_gbps",
    ),
    (
        "option beyond 64 bits",
        [
            "run",
            "--model",
            "bert-base",
            "--batch",
            "8",
            "--policy",
            "deepUM",
            "--option",
            "prefetch_degree=99999999999999999999",
        ],
        "policy.prefetch_degree",
    ),
    (
        "binary --plan-in",
        ["run", "--model", "bert-base", "--batch", "8", "--policy", "prefetch_lru", "--plan-in", "{bin}"],
        "not a plan file",
    ),
    (
        "--figure out.xyz",
        ["run", "--model", "bert-base", "--batch", "8", "--policy", "lru", "--figure", "out.xyz"],
        "cannot write a figure as .xyz",
    ),
    (
        "trace plot --out x.xyz",
        ["trace", "plot", "{empty}", "--out", "x.xyz"],
        "cannot write a figure as .xyz",
    ),
    (
        "--port 99999999",
        ["trace", "export", "{empty}", "--perfetto", "o.pftrace", "--open", "--port", "99999999"],
        "'--port'",
    ),
    (
        "--samples 0",
        ["trace", "export", "{empty}", "--perfetto", "o.pftrace", "--samples", "0"],
        "'--samples'",
    ),
    ("--max-points -1", ["sweep", "smoke", "--store", "s.g10db", "--max-points", "-1"], "'--max-points'"),
    (
        "a batch this machine cannot hold",
        ["run", "--model", "bert-base", "--batch", "10000000", "--policy", "lru"],
        "this run needs about",
    ),
    ("unknown model", ["run", "--model", "bert-bas"], "did you mean 'bert-base'"),
    ("unknown preset", ["models", "--system", "h100-sxm"], "did you mean 'h100-sxm5'"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--keep", type=Path, help="clone into this folder (kept) instead")
    a = ap.parse_args(argv)
    tmp = None
    if a.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="g10fast-fresh-")
        root = Path(tmp.name)
    else:
        root = a.keep
        root.mkdir(parents=True, exist_ok=True)
    clone = root / "clone"
    subprocess.run(["git", "clone", "-q", str(a.repo), str(clone)], check=True)
    head = subprocess.run(
        ["git", "-C", str(clone), "log", "-1", "--format=%h"], capture_output=True, text=True, check=True
    ).stdout.strip()
    work = root / "work"
    work.mkdir(exist_ok=True)
    (work / "bin.csv").write_bytes(os.urandom(3000))
    (work / "empty.h5").write_bytes(b"")
    env = dict(os.environ, PYTHONPATH=str(clone), G10FAST_PROGRESS_INTERVAL="3600")
    art = a.repo.resolve().parent / "shared" / "g10-artifact"
    if art.is_dir():
        env.setdefault("G10_ARTIFACT", str(art))
    print(f"fresh clone of {a.repo} at {head}")
    print(f"{'check':<34} {'exit':>4} {'lines':>5} {'s':>5}  message")
    bad = 0
    for name, args, needle in CHECKS:
        args = [x.format(bin=work / "bin.csv", empty=work / "empty.h5") for x in args]
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "g10fast.cli", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        dt = time.perf_counter() - t0
        err = r.stderr
        ok = (
            r.returncode == 2
            and err.startswith("g10fast: error: ")
            and err.count("\n") == 1
            and "Traceback" not in err
            and needle in err
        )
        bad += not ok
        msg = err.strip().replace("g10fast: error: ", "")
        print(
            f"{name:<34} {r.returncode:>4} {err.count(chr(10)):>5} {dt:>5.1f}  "
            f"{'' if ok else 'FAIL '}{msg[:150]}"
        )
    print(f"{len(CHECKS) - bad} of {len(CHECKS)} checks pass")
    if tmp is not None:
        tmp.cleanup()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
