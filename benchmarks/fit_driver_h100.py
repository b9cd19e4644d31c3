"""Fit the driver engine's fault cost and migration link to kernels measured on an H100 under
CUDA managed memory (kernels/h100-sxm5-measured/), nested leave-one-model-out; write the
record.

    python benchmarks/fit_driver_h100.py [--out benchmarks/results/driver_fit_h100.json]
                                         [--cache build/driver_fit_features]

The fit itself (what is measured, what is predicted, the selection) is g10fast.engine.driver.fit;
its final values are the `h100-sxm5` preset's [driver] section (data/hardware/h100-sxm5.toml).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from g10fast.engine.driver import fit

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "kernels" / "h100-sxm5-measured"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "driver_fit_h100.json"),
        help="the record (JSON): held-out errors, folds, final values",
    )
    ap.add_argument(
        "--cache",
        default=str(ROOT / "build" / "driver_fit_features"),
        help="the engine-side features, PREFIX.<small_kib>.npz (recomputed when absent; '' for none)",
    )
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ds = {
        sk: fit.features(
            MEASURED,
            None if a.cache == "" else f"{a.cache}.{sk}.npz",
            small_kib=sk,
            log=lambda line: print(line, file=sys.stderr),
        )
        for sk in fit.SMALL_KIB
    }
    rec = fit.nested_fit(ds)
    rec = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "seconds": round(time.perf_counter() - t0, 1),
        **rec,
    }
    Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps({k: rec[k] for k in ("held_out", "final")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
