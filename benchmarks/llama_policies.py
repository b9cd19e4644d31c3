"""Llama-7B training at a batch that needs more than an H100's memory (batch 1: 1.73x with
the decoders' fused attention, 2.68x with the S x S scores before), under every policy.

    python benchmarks/llama_policies.py [--batch 1] [--system h100-80-pcie5] [--policies ...]

Builds the workload once (cost-model times on the preset's GPU), then runs each policy in
turn in this process and appends one JSON line per policy to
benchmarks/results/llama_policies.jsonl: simulation wall time, the reported iteration's time,
its normalised performance and the workload's oversubscription.
"""

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from _bench import git_commit  # noqa: E402  (benchmarks/, the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast import api  # noqa: E402
from g10fast.hardware import load_preset  # noqa: E402
from g10fast.workload.builtin import find_model  # noqa: E402

POLICIES = ["ideal", "lru", "deepUM", "FlashNeuron", "G10GDSSSD", "G10GDSFULL", "prefetch_lru"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-7b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--system", default="h100-80-pcie5")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "llama_policies.jsonl"))
    a = ap.parse_args(argv)
    commit = git_commit()
    spec = find_model(a.model)
    preset = load_preset(a.system)
    t0 = time.perf_counter()
    w = api.builtin_workload(spec, a.batch, preset)
    t_build = time.perf_counter() - t0
    ideal = None
    for pol in a.policies.split(","):
        load = os.getloadavg()
        t0 = time.perf_counter()
        c0 = time.process_time()
        d = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "commit": commit,
            "nproc": os.cpu_count(),
            "model": spec.name,
            "batch": a.batch,
            "system": a.system,
            "policy": pol,
            "workload_build_s": round(t_build, 2),
            "load_average_before": [round(x, 2) for x in load],
        }
        try:
            res = api.simulate(spec, a.batch, preset, pol, workload=w)
            if res.get("status") != "ok" or res.get("reported") is None:
                d.update(status=res.get("status"), failure=str(res.get("failure")))
                raise StopIteration
            it = res["iterations"][res["reported"]]
            exe = int(it["exe_time_cycles"])
            if pol == "ideal":
                ideal = exe
            d.update(
                exe_time_cycles=exe,
                ideal_exe_time_cycles=int(it["ideal_exe_time_cycles"]),
                normalised=(ideal or it["ideal_exe_time_cycles"]) / exe,
                overcommitment=res["workload"].get("overcommitment"),
                footprint_bytes=res["workload"].get("footprint_bytes"),
            )
        except StopIteration:
            pass
        except Exception as e:  # recorded, not hidden
            d["error"] = f"{type(e).__name__}: {e}"
        d["wall_s"] = round(time.perf_counter() - t0, 2)
        d["cpu_s"] = round(time.process_time() - c0, 2)
        print(json.dumps(d), flush=True)
        with open(a.out, "a") as f:
            f.write(json.dumps(d) + "\n")


if __name__ == "__main__":
    main()
