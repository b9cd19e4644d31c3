"""The sample attribution of benchmarks/profile_engine.py (perf itself is not needed)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from profile_engine import attribute, short_name  # noqa: E402

BUSY = (
    "_ZN7g10fast6engine12page_kernels11_busy_ticksB3v11B36c8tJTIeFIjxB2IKSgI4CrvQCltYEAA"
    "_3d_3dEx5ArrayIxLi2E1C7mutable7alignedE"
)
RUN = "_ZN7g10fast6engine12page_kernels10run_engineB2v1B36c8tJTIeFIjxB2IKSgI4CrvQCltYEAA_3d_3dE"


def test_short_name():
    # the kernels split by stage: the stage module's name is left out
    assert (
        short_name(
            "_ZN7g10fast6engine4page4loop11_busy_ticksB3v11B36c8tJTIeFIjxB2IKSgI4"
            "CrvQCltYEAA_3d_3dEx5ArrayIxLi2E1C7mutable7alignedE"
        )
        == "_busy_ticks"
    )
    assert (
        short_name("_ZN7g10fast6engine4page5fetch11_fetch_fastB3v12B36c8tJTIeFIjxB2IKSgI4CrvQCltYEAA_3d_3dE")
        == "_fetch_fast"
    )
    assert (
        short_name(
            "_ZN7g10fast6engine4page12kernel_begin13_kernel_beginB2v9B36c8tJTIeFIjxB2IKSgI4CrvQCltYEAA_3d_3dE"
        )
        == "_kernel_begin"
    )
    assert short_name(BUSY) == "_busy_ticks"
    assert short_name(RUN) == "run_engine"
    assert short_name("memcpy") == "memcpy"


def test_attribute_by_offset_and_size():
    syms = [(0x0, 0x100, RUN), (0x200, 0x80, BUSY)]
    base = 0x7F0000000000
    ips = [
        base + 0x10,
        base + 0xFF,
        base + 0x100,  # run_engine, run_engine, gap
        base + 0x200,
        base + 0x27F,
        base + 0x280,  # busy, busy, past its end
        base - 1,
        0x1000,
    ]  # before the code, elsewhere
    counts = attribute(ips, base, syms)
    assert counts == {"run_engine": 2, "_busy_ticks": 2, "(other)": 4}
