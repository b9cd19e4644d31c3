"""Ideal runs (is_UVM 0) for every (model, batch) with traces in the artifact: the engine's
execution time must equal the sum of the truncated kernel cycles. Appends to
benchmarks/results/ideal_all.jsonl.  python benchmarks/ideal_all.py"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from g10fast.config import available_batch_sizes, genconfig
from g10fast.run import build_workload, run

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = ROOT.parent / "shared" / "g10-artifact"


def main() -> int:
    if not ARTIFACT.is_dir():
        print("../shared/g10-artifact not found")
        return 0
    out = ROOT / "benchmarks" / "results" / "ideal_all.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    bad = 0
    for model in ("BERT", "VIT", "Inceptionv3", "ResNet152", "SENet154"):
        for batch in available_batch_sizes(ARTIFACT, model):
            cfg = genconfig(ARTIFACT, model, batch, "lru").replace(is_UVM=False)
            w = build_workload(cfg)
            t0 = time.perf_counter()
            res = run(cfg, workload=w)
            exe = [it["exe_time_cycles"] for it in res["iterations"]]
            ok = all(e == w.ideal_cycles for e in exe)
            bad += not ok
            rec = {
                "model": model,
                "batch": batch,
                "ideal_cycles": w.ideal_cycles,
                "exe_time_cycles": exe,
                "equal": ok,
                "seconds": time.perf_counter() - t0,
            }
            print(json.dumps(rec), flush=True)
            with open(out, "a") as f:
                f.write(json.dumps(rec) + "\n")
    print(f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
