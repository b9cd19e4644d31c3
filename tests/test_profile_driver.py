"""The function names of benchmarks/profile_driver.py (perf itself is not needed)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from profile_driver import short_name  # noqa: E402


def test_short_name():
    assert (
        short_name(
            "_ZN7g10fast6engine6driver7kernels13prefetch_bitsB3v12B36c8tJTIeFIjxB2"
            "IKSgI4CrvQCltYEAA_3d_3dE5ArrayIyLi1E1A7mutable7alignedE"
        )
        == "prefetch_bits"
    )
    assert (
        short_name("_ZN7g10fast6engine6driver7kernels9_simulateB2v5B36c8tJTIeFIjxB2IKSgI4CrvQCltYEAA_3d_3dE")
        == "_simulate"
    )
    assert short_name("_ZN7g10fast6engine6driver7kernels4popcB2v1B36c8tJTIeFIjxE") == "popc"
    assert short_name("NRT_incref") == "NRT_incref"
