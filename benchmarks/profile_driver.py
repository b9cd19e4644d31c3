"""Where a driver-engine run's time goes: the pipeline's phases, and the kernel's functions.

    python benchmarks/profile_driver.py ResNet152:1280:uvm SENet154:1024:pump [--perf]

For each point MODEL:BATCH:POLICY (an artifact model, as `g10fast run --g10 ... --model M
--batch B --policy P`), in a fresh process: a warm-up run of BERT-128 under the same policy
(loads the Numba cache), then the timed run. Printed per point: the run's CPU seconds, the
CPU of the engine's `simulate` call (the Numba kernel), of the policy's planner and of the
rest (workload, statistics, bound), and the process's peak RSS; plus the kernel's work
counts from its outputs (kernels, faults, fault batches, pages moved).

`--perf` also samples the process under Linux `perf` (CPU clock) and attributes the samples
that fall in the engine's compiled code to its functions (those LLVM did not inline into
`simulate`), as benchmarks/profile_engine.py does for the page engine: the cached object of
`simulate` is read with `objdump -t` and placed where the loaded function starts.
`--lines` (with --perf) compiles the engine with debug information (NUMBA_DEBUGINFO=1, into
its own cache folder, --debug-cache: the first run compiles, about a minute) and attributes
the samples to source lines of g10fast/engine/driver/kernels.py (`addr2line`; Numba records
no inlining, so a line of a helper LLVM inlined counts as that helper's line). Debug
information slows the code down (about 1.6x), so use it for shares, not for seconds.
"""

from __future__ import annotations

import argparse
import collections
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

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _spec(model: str, batch: int, policy: str):
    from g10fast import policies
    from g10fast.config import genconfig
    from g10fast.spec import from_g10_config

    rec = policies.get(policy)
    return from_g10_config(genconfig(ARTIFACT, model, batch, rec.artifact or "lru"), policy=rec.name)


def child(point: str, out: str | None) -> dict:
    """One point in this process: phases' CPU, work counts, peak RSS (and, for --perf, the
    loaded simulate's address and cached object)."""
    import resource

    from g10fast import policies
    from g10fast.engine.driver import kernels as dk
    from g10fast.run import run

    model, batch, policy = point.split(":")
    run(_spec("BERT", 128, policy))  # warm: the Numba cache loaded
    acc = collections.Counter()
    orig_sim = dk.simulate
    rec = policies.get(policy)
    orig_plan = rec.planner
    outs = []

    def sim(*a, **k):
        c0 = time.process_time()
        r = orig_sim(*a, **k)
        acc["simulate_s"] += time.process_time() - c0
        outs.append(r)
        return r

    def plan(*a, **k):
        c0 = time.process_time()
        r = orig_plan(*a, **k)
        acc["planner_s"] += time.process_time() - c0
        return r

    dk.simulate = sim
    if orig_plan is not None:
        object.__setattr__(rec, "planner", plan)
    spec = _spec(model, int(batch), policy)
    c0 = time.process_time()
    res = run(spec)
    cpu = time.process_time() - c0
    dk.simulate = orig_sim
    if orig_plan is not None:
        object.__setattr__(rec, "planner", orig_plan)
    kern, cnt = outs[-1][0], outs[-1][1]
    c = cnt.sum(axis=0)
    row = {
        "point": point,
        "cpu_s": round(cpu, 3),
        "simulate_s": round(acc["simulate_s"], 3),
        "planner_s": round(acc["planner_s"], 3),
        "rest_s": round(cpu - acc["simulate_s"] - acc["planner_s"], 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "kernels": int(kern.shape[0]),
        "faults": int(c[dk.C_FAULTS]),
        "fault_batches": int(c[dk.C_BATCHES]),
        "pages_in": int(c[dk.C_IN_CPU] + c[dk.C_IN_SSD] + c[dk.C_ALLOC]),
        "pages_out": int(c[dk.C_OUT_CPU] + c[dk.C_OUT_SSD]),
        "prefetched": int(c[dk.C_PREFETCHED]),
        "discarded": int(c[dk.C_DISCARD]),
        "exe_time_cycles": res["iterations"][res["reported"]]["exe_time_cycles"],
    }
    if out:
        _sig, cres = list(orig_sim.overloads.items())[-1]
        name = cres.fndesc.llvm_func_name
        addr = cres.library.get_pointer_to_function(name)
        cache = Path(os.environ.get("NUMBA_CACHE_DIR") or Path(dk.__file__).parent / "__pycache__")
        line = orig_sim.py_func.__code__.co_firstlineno
        blob = None
        for f in sorted(cache.rglob(f"kernels.simulate-{line}.*.nbc")):
            data = f.read_bytes()
            if name.encode() in data:
                blob = data[data.find(b"\x7fELF") :]
                break
        if blob is None:
            raise SystemExit(f"profile_driver: no cached object of simulate in {cache}")
        Path(out, "engine.o").write_bytes(blob)
        Path(out, "engine.json").write_text(json.dumps({"symbol": name, "address": addr}))
    return row


def short_name(mangled: str) -> str:
    m = re.search(r"driver\d+kernels\d+(\w+?)B\d", mangled)
    return m.group(1) if m else mangled[:60]


def source_lines(obj: Path, offsets) -> dict:
    """{offset in .ltext: "line"} from the object's debug information (`addr2line`)."""
    out = subprocess.run(
        ["addr2line", "-a", "-e", str(obj), "-j", ".ltext"] + [hex(o) for o in offsets],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    res = {}
    for i in range(0, len(out) - 1, 2):
        res[int(out[i], 16)] = out[i + 1].rsplit(":", 1)[-1].split()[0]
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("points", nargs="+", help="MODEL:BATCH:POLICY")
    ap.add_argument("--perf", action="store_true", help="sample the kernel's functions")
    ap.add_argument("--freq", type=int, default=2000)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--lines", action="store_true", help="with --perf: samples per source line")
    ap.add_argument(
        "--debug-cache",
        default="/tmp/g10fast-driver-debuginfo-cache",
        help="Numba cache folder of the --lines build",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.points[0], a.out)))
        return 0
    if not (ARTIFACT / "frontend" / "Nets").is_dir():
        print(f"profile_driver: no G10 artifact at {ARTIFACT}", file=sys.stderr)
        return 2
    if a.perf and (shutil.which("perf") is None or shutil.which("objdump") is None):
        print("profile_driver: `perf` and `objdump` are needed for --perf", file=sys.stderr)
        return 2
    import profile_engine
    from profile_engine import attribute, text_symbols

    profile_engine.short_name = short_name
    for point in a.points:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, __file__, point, "--child"] + (["--out", tmp] if a.perf else [])
            if a.perf:
                cmd = [
                    "perf",
                    "record",
                    "-q",
                    "-e",
                    "cpu-clock",
                    "-F",
                    str(a.freq),
                    "-o",
                    str(Path(tmp, "perf.data")),
                    "--",
                ] + cmd
            env = dict(os.environ)
            if a.lines:
                env.update(NUMBA_DEBUGINFO="1", NUMBA_CACHE_DIR=a.debug_cache)
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if p.returncode != 0:
                print(f"profile_driver: {point} failed:\n{p.stderr[-2000:]}", file=sys.stderr)
                return 2
            row = json.loads(p.stdout.strip().splitlines()[-1])
            print(json.dumps(row))
            if a.perf:
                info = json.loads(Path(tmp, "engine.json").read_text())
                syms = text_symbols(Path(tmp, "engine.o"))
                base = info["address"] - next(s[0] for s in syms if s[2] == info["symbol"])
                ips = subprocess.run(
                    ["perf", "script", "-i", str(Path(tmp, "perf.data")), "-F", "ip"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                ips = [int(x, 16) for x in ips.split()]
                counts = attribute(ips, base, syms)
                total = sum(counts.values())
                print(f"  {total} samples of the whole process")
                for fn, n in counts.most_common(a.top):
                    print(f"  {100 * n / total:5.1f} %  {fn}")
                if a.lines:
                    end = max(s[0] + s[1] for s in syms)
                    offs = collections.Counter(ip - base for ip in ips if 0 <= ip - base < end)
                    ins = sum(offs.values())
                    lines = source_lines(Path(tmp, "engine.o"), sorted(offs))
                    per = collections.Counter()
                    for o, n in offs.items():
                        per[lines.get(o, "?")] += n
                    print(f"  {ins} samples in the engine, by line of kernels.py:")
                    for ln, n in per.most_common(a.top):
                        print(f"  {100 * n / ins:5.1f} %  {ln}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
