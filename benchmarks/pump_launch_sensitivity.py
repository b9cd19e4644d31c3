"""How PUMP's gain over naive UM depends on the host's run-ahead bounds (launch queue depth,
sync point), both on the caching allocator, four paper points (docs/pump.md).

    python benchmarks/pump_launch_sensitivity.py > benchmarks/results/pump_launch_sensitivity.md
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import git_commit  # noqa: E402

POINTS = [
    ("bert-base", 256, 1.5),
    ("inceptionv3", 1536, 1.5),
    ("resnet152", 1280, 3.0),
    ("senet154", 1024, 1.5),
]
VARIANTS = [
    ("defaults", ()),
    ("depth 333", (("launch_queue_depth", 333),)),
    ("depth 100", (("launch_queue_depth", 100),)),
    ("depth 3000", (("launch_queue_depth", 3000),)),
    ("sync iteration", (("sync", "iteration"),)),
    ("sync none", (("sync", "none"),)),
]


def main() -> int:
    from g10fast.engine.driver.launch import host_bound_kernels
    from g10fast.validate import claims_pump as cp

    w = cp._workload("bert-base", 256)
    f_hz = 1.2e9  # the g10-artifact preset's clock
    print(
        f"python benchmarks/pump_launch_sensitivity.py at {git_commit()} (g10-artifact "
        f"preset's driver values; bert-256: {w.num_kernels} kernels, "
        f"{host_bound_kernels(w.exec_cycles / f_hz, 10.0)} under 10 us); time(uvm) / "
        f"time(pump), both on the caching allocator\n"
    )
    print("| point | " + " | ".join(v for v, _ in VARIANTS) + " |")
    print("|---|" + "---|" * len(VARIANTS))
    for m, b, r in POINTS:
        tu = cp._time(m, b, r, "uvm", (), cp.CACHING)
        print(
            f"| {m} {b} {r:g}x | "
            + " | ".join(f"{tu / cp._time(m, b, r, 'pump', o, cp.CACHING):.2f}" for _, o in VARIANTS)
            + " |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
