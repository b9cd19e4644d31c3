"""Capture time and memory (GPT-2 small, GPT-2 XL at seq 1024, Llama-7B), the captured GPT-2 XL
beside the built-in `gpt2-xl`, and the captured Llama-7B under every default policy.

    python benchmarks/capture_bench.py [--part capture,compare,policies]
    python benchmarks/capture_bench.py --part policies --system h100-sxm5 --builtin
    python benchmarks/capture_bench.py --part tables      (docs/capture.md's tables)

Each capture runs in its own process (peak RSS = that process's maximum resident set,
torch's import included). Appends JSON lines to benchmarks/results/capture_bench.jsonl.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import git_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "capture_bench.jsonl"

CAPTURES = [("gpt2-small", 8, 1024), ("gpt2-xl", 8, 1024), ("llama-7b", 4, 2048)]

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import torch
t_import = time.perf_counter() - t0
from g10fast.capture import capture, to_workload, resolve_model
from g10fast.workload.h5trace import write_workload_h5
name, dtype, out = sys.argv[1], sys.argv[4], sys.argv[5]
batch, seq = int(sys.argv[2]), int(sys.argv[3])
m = resolve_model(name, batch=batch, seq_len=seq, dtype=dtype)
c0 = time.process_time()
cap = capture(m)
cpu = time.process_time() - c0
t1 = time.perf_counter()
w = to_workload(cap, "g10-artifact")
t_wl = time.perf_counter() - t1
t1 = time.perf_counter()
write_workload_h5(out, w, {"source": "capture", "model": name, "batch": batch})
t_write = time.perf_counter() - t1
ph = w.meta["kernel_phase"]
print(json.dumps({"model": name, "batch": batch, "seq_len": seq, "dtype": dtype,
    "parameters": cap.params, "torch_ops": cap.ops_seen, "kernels": w.num_kernels,
    "kernels_fwd": ph.count("forward"), "kernels_bwd": ph.count("backward"),
    "kernels_opt": ph.count("update"), "tensors": w.num_tensors,
    "capture_s": round(cap.seconds, 2), "capture_cpu_s": round(cpu, 2),
    "import_torch_s": round(t_import, 2),
    "to_workload_s": round(t_wl, 2), "write_h5_s": round(t_write, 2),
    "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "peak_live_gib_recorded": round(cap.peak_live_bytes() / 2**30, 3)}))
"""


def record(d):
    d = dict(
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        commit=git_commit(),
        nproc=os.cpu_count(),
        load_average=[round(x, 2) for x in os.getloadavg()],
        **d,
    )
    print(json.dumps(d), flush=True)
    with open(OUT, "a") as f:
        f.write(json.dumps(d) + "\n")
    return d


def capture_to(name, batch, seq, dtype, out):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(batch), str(seq), dtype, out],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if p.returncode:
        raise RuntimeError(p.stderr[-2000:])
    d = json.loads(p.stdout.strip().splitlines()[-1])
    d["process_wall_s"] = round(time.perf_counter() - t0, 2)
    return d


def live_peak(w) -> int:
    """Peak of bytes live under G10's model: global tensors always, every other tensor from
    the first to the last kernel that touches it (page-rounded sizes)."""
    import numpy as np

    K = w.num_kernels
    kin = np.repeat(np.arange(K), np.diff(w.in_ptr))
    kout = np.repeat(np.arange(K), np.diff(w.out_ptr))
    ks = np.concatenate([kin, kout])
    ts = np.concatenate([w.in_idx, w.out_idx]).astype(np.int64)
    first = np.full(w.num_tensors, K, np.int64)
    last = np.full(w.num_tensors, -1, np.int64)
    np.minimum.at(first, ts, ks)
    np.maximum.at(last, ts, ks)
    size = w.size.astype(np.int64)
    loc = ~w.is_global & (last >= 0)
    delta = np.zeros(K + 1, np.int64)
    np.add.at(delta, first[loc], size[loc])
    np.add.at(delta, last[loc] + 1, -size[loc])
    return int(np.cumsum(delta)[:K].max() + size[w.is_global].sum())


def summary(w, label):
    import numpy as np

    ph = w.meta.get("kernel_phase")
    d = {
        "workload": label,
        "kernels": w.num_kernels,
        "tensors": w.num_tensors,
        "global_tensors": int(w.is_global.sum()),
        "footprint_gib": round(w.footprint_bytes / 2**30, 3),
        "weights_and_state_gib": round(w.weights_bytes / 2**30, 3),
        "peak_live_gib": round(live_peak(w) / 2**30, 3),
        "ideal_ms_a100": round(w.ideal_cycles / 1.2e6, 1),
        "workspace_gib": round(float(np.sum(w.workspace_bytes)) / 2**30, 3),
    }
    if ph:
        d.update(
            kernels_fwd=ph.count("forward"), kernels_bwd=ph.count("backward"), kernels_opt=ph.count("update")
        )
    return d


def part_capture(tmp):
    for name, batch, seq in CAPTURES:
        d = capture_to(name, batch, seq, "bfloat16", str(Path(tmp) / f"{name}.h5"))
        record({"part": "capture", **d})


def part_compare(tmp):
    from g10fast.api import builtin_workload
    from g10fast.workload.h5trace import read_workload_h5

    b = builtin_workload("gpt2-xl", 8, "g10-artifact")
    record({"part": "compare", **summary(b, "built-in gpt2-xl (bf16-mixed, AdamW)")})
    m = builtin_workload("gpt2-xl", 8, "g10-artifact", attention="materialized", pointwise="decomposed")
    record(
        {
            "part": "compare",
            **summary(m, "built-in gpt2-xl, G10's form (materialized attention, decomposed point-wise)"),
        }
    )
    for dtype in ("bfloat16", "bf16-autocast"):
        p = str(Path(tmp) / f"gpt2-xl-{dtype}.h5")
        c = capture_to("gpt2-xl", 8, 1024, dtype, p)
        w = read_workload_h5(p)
        record(
            {
                "part": "compare",
                **summary(w, f"captured gpt2-xl ({dtype}, AdamW for-loop)"),
                "peak_live_gib_recorded": c["peak_live_gib_recorded"],
            }
        )


def part_policies(tmp, system="h100-80-pcie5", batch=1, builtin=False):
    from g10fast.spec import trace_spec
    from g10fast.workload.h5trace import write_workload_h5
    from g10fast.capture import capture, resolve_model, to_workload
    from g10fast.hardware import load_preset

    preset = load_preset(system)
    cap = capture(resolve_model("llama-7b", batch=batch, seq_len=2048, dtype="bfloat16"))
    w = to_workload(cap, preset)
    p = str(Path(tmp) / "llama.h5")
    write_workload_h5(
        p,
        w,
        {"source": "capture", "model": "llama-7b", "batch": batch},
        freq_hz=int(float(preset["gpu"].get("frequency_ghz", 1.2)) * 1e9),
        transformer=True,
    )
    runs = [("llama-7b (captured)", w, lambda pol: trace_spec(p, preset, pol))]
    if builtin:
        from g10fast.run import workload_of
        from g10fast.spec import builtin_spec

        bw = workload_of(builtin_spec("llama-7b", batch, preset, "lru"))
        runs.append(("llama-7b (built-in)", bw, lambda pol: builtin_spec("llama-7b", batch, preset, pol)))
    for label, wl, make in runs:
        policy_runs(label, wl, make, batch, system)


def policy_runs(label, w, make, batch, system):
    from g10fast import policies
    from g10fast.run import run

    ideal = None
    for pol in policies.DEFAULT_POLICIES:
        t0 = time.perf_counter()
        d = {
            "part": "policies",
            "model": label,
            "batch": batch,
            "system": system,
            "policy": pol,
            "kernels": w.num_kernels,
            "footprint_gib": round(w.footprint_bytes / 2**30, 2),
            "ideal_ms": round(w.ideal_cycles / 1.2e6, 1),
        }
        try:
            res = run(make(pol), workload=w)
            if res.get("status") != "ok" or res.get("reported") is None:
                d.update(status=res.get("status"), failure=str(res.get("failure"))[:300])
            else:
                it = res["iterations"][res["reported"]]
                exe = int(it["exe_time_cycles"])
                if pol == "ideal":
                    ideal = exe
                d.update(
                    exe_time_cycles=exe,
                    ideal_exe_time_cycles=int(it["ideal_exe_time_cycles"]),
                    normalised=round((ideal or it["ideal_exe_time_cycles"]) / exe, 4),
                    overcommitment=round(res["workload"]["overcommitment"], 3),
                )
        except Exception as e:  # recorded, not hidden
            d["error"] = f"{type(e).__name__}: {e}"[:300]
        d["wall_s"] = round(time.perf_counter() - t0, 2)
        record(d)


def part_tables(tmp=None, commit_compare=None, commit_policies=None, system="h100-sxm5"):
    """The Markdown tables of docs/capture.md from the results file (latest commit of each
    part unless given)."""
    rows = [json.loads(x) for x in open(OUT)]

    def latest(part, cond=lambda r: True):
        rs = [r for r in rows if r.get("part") == part and cond(r)]
        return rs[-1]["commit"] if rs else None

    cc = commit_compare or latest("compare")
    cmp_ = [r for r in rows if r.get("part") == "compare" and r["commit"] == cc]
    cols = [
        (
            "kernels",
            lambda r: (
                f"{r['kernels']:,}"
                + (
                    f" ({r['kernels_fwd']} / {r['kernels_bwd']} / {r['kernels_opt']})"
                    if "kernels_fwd" in r
                    else ""
                )
            ),
        ),
        ("tensors (global)", lambda r: f"{r['tensors']:,} ({r['global_tensors']:,})"),
        ("footprint", lambda r: f"{r['footprint_gib']:.2f} GiB"),
        ("weights + optimizer state", lambda r: f"{r['weights_and_state_gib']:.2f} GiB"),
        ("peak live", lambda r: f"{r['peak_live_gib']:.2f} GiB"),
        ("ideal time (A100 fit)", lambda r: f"{r['ideal_ms_a100'] / 1e3:.2f} s"),
    ]
    print(f"compare (commit {cc})")
    print("| | " + " | ".join(r["workload"] for r in cmp_) + " |")
    print("|---" * (len(cmp_) + 1) + "|")
    for name, f in cols:
        print(f"| {name} | " + " | ".join(f(r) for r in cmp_) + " |")
    cp = commit_policies or latest("policies", lambda r: r["system"] == system)
    pol = [r for r in rows if r.get("part") == "policies" and r["commit"] == cp and r["system"] == system]
    by = {}
    for r in pol:
        by.setdefault(r["model"], {})[r["policy"]] = r

    def cell(r):
        if r is None:
            return "-"
        if "exe_time_cycles" not in r:
            return f"failed ({r.get('status') or r.get('error', '?')})"
        return f"{r['exe_time_cycles'] / 1.2e6:,.1f} ms ({r['normalised']:.3f})"

    models = list(by)
    print(f"\npolicies on {system} (commit {cp})")
    print("| policy | " + " | ".join(f"{m}: time (normalised)" for m in models) + " |")
    print("|---" * (len(models) + 1) + "|")
    for p in by[models[0]]:
        print(f"| {p} | " + " | ".join(cell(by[m].get(p)) for m in models) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="capture,compare,policies")
    ap.add_argument("--system", default="h100-80-pcie5", help="preset of the policies part")
    ap.add_argument(
        "--builtin", action="store_true", help="policies part: also the built-in llama-7b, side by side"
    )
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for part in a.part.split(","):
            if part == "tables":
                part_tables(system=a.system if a.system != "h100-80-pcie5" else "h100-sxm5")
            elif part == "policies":
                part_policies(tmp, a.system, builtin=a.builtin)
            else:
                {"capture": part_capture, "compare": part_compare}[part](tmp)


if __name__ == "__main__":
    main()
