"""Where the page engine's time goes, function by function (Linux `perf` and `objdump`).

Runs one artifact configuration under `perf record` (CPU-clock sampling) and attributes the
samples that fall in the engine's compiled code to its functions: run_engine, _busy_ticks,
_preevict_run, _apply_hint, _dealloc_pages, _lru_compact, ... (those LLVM did not inline).
Numba loads the engine from its on-disk cache, where no symbol reaches perf; this script
finds the engine's cached object file, reads the offsets of its functions in the object's
code section with `objdump -t`, and places them at the address where the loaded run_engine
starts. Samples outside the engine (Python, planning, NumPy, the kernel) count as "(other)".

    python benchmarks/profile_engine.py ResNet152 1536 prefetch_lru [--freq 2000] [--top 20] [--trace]

MODEL, BATCH and POLICY name ../shared/g10-artifact/src/configs/MODEL/BATCH-sim_POLICY.config
(POLICY: lru, prefetch_lru, deepUM, with the artifact's suffixes such as lru-cpu64). The
engine time printed is the CPU time of the simulate_pages call alone, warm cache; the first
run after an edit of a page engine module compiles, so run it twice then.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = ROOT.parent / "shared" / "g10-artifact"


def text_symbols(obj: Path) -> list[tuple[int, int, str]]:
    """(offset, size, name) of the functions in the object's large-code section, sorted."""
    out = subprocess.run(["objdump", "-t", str(obj)], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[-3] == ".ltext" and f[-1] != ".ltext":
            syms.append((int(f[0], 16), int(f[-2], 16), f[-1]))
    return sorted(syms)


#: a page engine kernel's symbol: the stage module (`4page4loop`, `4page5fetch`, ...; the one
#: module `page_kernels` before the split) and the kernel's name (group 1)
KERNEL_SYMBOL = r"page(?:.kernels|\d+[a-z_]+?)\d+(\w+?)B\d"


def short_name(mangled: str) -> str:
    """A page engine kernel's name out of Numba's mangled symbol (`_ZN7g10fast6engine4page4
    loop11_busy_ticksB3v11...` -> `_busy_ticks`; the stage module's name is left out, as the
    single module's, `page_kernels`, before the engine's kernels were split by stage)."""
    m = re.search(KERNEL_SYMBOL, mangled)
    return m.group(1) if m else mangled[:60]


def attribute(ips, base: int, syms) -> collections.Counter:
    """Sample counts per function: each instruction pointer in [base + offset, base + offset
    + size) of a symbol counts for it, any other for "(other)"."""
    starts = [base + s[0] for s in syms]
    counts = collections.Counter()
    for ip in ips:
        i = bisect.bisect_right(starts, ip) - 1
        if i >= 0 and ip < starts[i] + syms[i][1]:
            counts[short_name(syms[i][2])] += 1
        else:
            counts["(other)"] += 1
    return counts


def _config_path(model: str, batch: str, policy: str) -> Path:
    return ARTIFACT / "src" / "configs" / model / f"{batch}-sim_{policy}.config"


class _CountingSink:
    """A trace sink that only counts the rows (--trace: the engine's traced paths alone)."""

    n_events = 0

    def append(self, buf):
        self.n_events += len(buf)

    def rewind(self, n):
        self.n_events = n


def child(args) -> None:
    """Under perf: simulate, then write the loaded engine's address and cached object."""
    from g10fast.config import read_g10_config, validate
    from g10fast.engine.page import kernels as pk
    from g10fast.engine.page import simulate_pages
    from g10fast.run import plan_of
    from g10fast.run import _perturbed, build_workload

    cfg = validate(read_g10_config(_config_path(args.model, args.batch, args.policy)))
    if args.host_gb is not None:
        cfg = dataclasses.replace(cfg, CPU_memory_line_GB=args.host_gb)
    w = build_workload(cfg)
    hints = plan_of(cfg, w).hints if cfg.use_prefetch else None
    w = _perturbed(w, cfg)
    c0 = time.process_time()
    simulate_pages(w, cfg, hints=hints, trace=_CountingSink() if args.trace else None)
    seconds = time.process_time() - c0
    # the overload just used: the cache file of run_engine that holds its symbol
    _sig, cres = list(pk.run_engine.overloads.items())[-1]
    name = cres.fndesc.llvm_func_name
    addr = cres.library.get_pointer_to_function(name)
    cache_dir = Path(os.environ.get("NUMBA_CACHE_DIR") or Path(pk.__file__).parent / "__pycache__")
    line = pk.run_engine.py_func.__code__.co_firstlineno
    blob = None
    stem = Path(pk.run_engine.py_func.__code__.co_filename).stem
    for f in sorted(cache_dir.rglob(f"{stem}.run_engine-{line}.*.nbc")):
        data = f.read_bytes()
        if name.encode() in data:
            blob = data[data.find(b"\x7fELF") :]
            break
    if blob is None:
        raise SystemExit(f"profile_engine: no cached object of run_engine in {cache_dir}")
    Path(args.out, "engine.o").write_bytes(blob)
    Path(args.out, "engine.json").write_text(
        json.dumps({"symbol": name, "address": addr, "seconds": seconds})
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("batch")
    ap.add_argument("policy")
    ap.add_argument("--freq", type=int, default=2000, help="samples per second (default 2000)")
    ap.add_argument("--top", type=int, default=20, help="functions listed (default 20)")
    ap.add_argument("--trace", action="store_true", help="a traced run (rows counted, not written)")
    ap.add_argument("--host-gb", type=float, help="host memory line, GB (default: the configuration's)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    for tool in ("perf", "objdump"):
        if shutil.which(tool) is None:
            print(f"profile_engine: `{tool}` not found (Linux perf and binutils are needed)", file=sys.stderr)
            return 2
    cfg = _config_path(args.model, args.batch, args.policy)
    if not cfg.is_file():
        print(f"profile_engine: no such configuration: {cfg}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp, "perf.data")
        cmd = [sys.executable, __file__, args.model, args.batch, args.policy, "--child", "--out", tmp]
        cmd += ["--trace"] if args.trace else []
        cmd += ["--host-gb", str(args.host_gb)] if args.host_gb is not None else []
        rc = subprocess.run(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.freq), "-o", str(data), "--"] + cmd
        ).returncode
        if rc != 0:
            print(f"profile_engine: the profiled run failed (exit status {rc})", file=sys.stderr)
            return 2
        info = json.loads(Path(tmp, "engine.json").read_text())
        syms = text_symbols(Path(tmp, "engine.o"))
        base = info["address"] - next(s[0] for s in syms if s[2] == info["symbol"])
        out = subprocess.run(
            ["perf", "script", "-i", str(data), "-F", "ip"], capture_output=True, text=True, check=True
        ).stdout
        counts = attribute((int(x, 16) for x in out.split()), base, syms)
    total = sum(counts.values())
    print(
        f"{args.model}-{args.batch} {args.policy}: engine {info['seconds']:.2f} s CPU; "
        f"{total} samples of the whole process"
    )
    for fn, n in counts.most_common(args.top):
        print(f"  {100 * n / total:5.1f} %  {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
