"""The profiling harness's dry-run path (no PyTorch, no GPU needed)."""

import subprocess
import sys
from pathlib import Path

import numpy as np

from g10fast.workload.profile import read_profile, workload_from_profile
from g10fast.workload.builtin import load_builtin_graph

ROOT = Path(__file__).resolve().parents[1]


def test_dry_run_writes_a_measured_profile(tmp_path):
    out = tmp_path / "vit.prof.gz"
    r = subprocess.run([sys.executable, str(ROOT / "kernels" / "profile_torch.py"), "vit",
                        "--batch", "2", "--dry-run", "--repeats", "1", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    p = read_profile(out)
    assert p.source == "measured" and p.meta["dry_run"] == "True"
    g = load_builtin_graph("vit", 2)
    assert p.names == list(g.kernel_name)
    assert np.all(p.time_us <= p.input_faulting_us) and np.all(p.input_faulting_us <= p.all_faulting_us)
    assert workload_from_profile(g, p).num_kernels == g.num_kernels
