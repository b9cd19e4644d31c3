"""O-18: the order in which a kernel's tensors are processed (the C++ walks hash sets).

The page engine's `required_order` against the plain-Python twin's `order`, the readers of the
C++'s statistics/kernels.config and prefetch_guide.config, and the effect on a reference run
(docs/tensor-order.md)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest

from g10fast.engine.page import simulate_pages
from g10fast.errors import InputError
from g10fast.planner.io import read_plan
from g10fast.workload.kernel_order import read_kernel_order

from synth import kernel_pages, make_workload, tiny_cfg

SHARED = Path(__file__).resolve().parents[2] / "shared"
ARTIFACT = SHARED / "g10-artifact"
REFERENCE = SHARED / "reference"
needs_shared = pytest.mark.skipif(
    not (ARTIFACT / "frontend").is_dir() or not REFERENCE.is_dir(),
    reason="../shared (G10 artifact and reference runs) not present",
)


def _ascending(w):
    return [
        (sorted(set(w.inputs(k).tolist())), sorted(set(w.outputs(k).tolist()) - set(w.inputs(k).tolist())))
        for k in range(w.num_kernels)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_engine_order_matches_twin(seed):
    from twin import run_twin

    w = make_workload(seed, n_kernels=10, n_tensors=24, max_pages=20)
    gpu = int(kernel_pages(w).max()) + 5
    cfg = tiny_cfg(gpu, 30, "lru")
    asc = _ascending(w)
    rev = [(a[::-1], b[::-1]) for a, b in asc]
    base = simulate_pages(w, cfg)
    assert simulate_pages(w, cfg, required_order=asc).kernels.tolist() == base.kernels.tolist()
    run = simulate_pages(w, cfg, required_order=rev)
    twin = run_twin(w, cfg, order=rev)
    assert run.kernels.tolist() == [list(map(int, k)) for k in twin["kernels"]]


def test_order_changes_lru_victims():
    """On at least one of these small over-committed workloads the order changes the result
    (it decides the LRU order of a kernel's pages)."""
    changed = 0
    for seed in range(1, 7):
        w = make_workload(seed, n_kernels=10, n_tensors=24, max_pages=20)
        cfg = tiny_cfg(int(kernel_pages(w).max()) + 5, 30, "lru")
        rev = [(a[::-1], b[::-1]) for a, b in _ascending(w)]
        a = simulate_pages(w, cfg).kernels
        b = simulate_pages(w, cfg, required_order=rev).kernels
        changed += a.tolist() != b.tolist()
    assert changed >= 1


def test_required_order_must_list_the_same_sets():
    w = make_workload(2, n_kernels=10, n_tensors=24, max_pages=20)
    cfg = tiny_cfg(int(kernel_pages(w).max()) + 5, 30, "lru")
    asc = _ascending(w)
    k = next(i for i, (a, b) in enumerate(asc) if a and b)
    bad = list(asc)
    bad[k] = (asc[k][1], asc[k][0])  # inputs and outputs swapped
    with pytest.raises(InputError, match="required order"):
        simulate_pages(w, cfg, required_order=bad)
    with pytest.raises(InputError, match="kernels"):
        simulate_pages(w, cfg, required_order=asc[:-1])
    # outputs may repeat inputs (in-place tensors), as kernels.config lists them
    again = [(a, list(a) + list(b)) for a, b in asc]
    assert (
        simulate_pages(w, cfg, required_order=again).kernels.tolist()
        == simulate_pages(w, cfg).kernels.tolist()
    )


_KC = """Kernel ID: 0, Name: Conv2d_Forward
Parent Layer ID:0; Name:Conv2d
Execution Time: 100
(8,3,4,4)
Input Tensors:
tensor3 Is weight (global)?: 1, Size in byte: 4096, Range:0--4096
tensor1 Is weight (global)?: 0, Size in byte: 8192, Range:0--8192
Output Tensors:
tensor2 Is weight (global)?: 0, Size in byte: 4096, Range:8192--12288
____________________________________________________________________
Kernel ID: 1, Name: ReLU_Forward
Parent Layer ID:1; Name:ReLU
Execution Time: 5
(8,3,4,4)
Input Tensors:
tensor2 Is weight (global)?: 0, Size in byte: 4096, Range:8192--12288
Output Tensors:
tensor2 Is weight (global)?: 0, Size in byte: 4096, Range:8192--12288
tensor0 Is weight (global)?: 0, Size in byte: 4096, Range:12288--16384
____________________________________________________________________
"""


def test_read_kernel_order(tmp_path):
    p = tmp_path / "kernels.config"
    p.write_text(_KC)
    want = [([3, 1], [2]), ([2], [2, 0])]
    assert read_kernel_order(p) == want
    g = tmp_path / "kernels.config.gz"
    with gzip.open(g, "wt") as f:
        f.write(_KC)
    assert read_kernel_order(g) == want
    bad = tmp_path / "bad.config"
    bad.write_text(_KC.replace("Kernel ID: 1,", "Kernel ID: 5,"))
    with pytest.raises(InputError, match="kernel 5"):
        read_kernel_order(bad)
    empty = tmp_path / "empty.config"
    empty.write_text("nothing here\n")
    with pytest.raises(InputError, match="Kernel ID"):
        read_kernel_order(empty)


def test_read_plan_accepts_g10_prefetch_guide(tmp_path):
    p = tmp_path / "prefetch_guide.config"
    p.write_text(
        "Issued Time: 0 Tensor: 48 G:x From: Not_Known, To: In_gpu\n"
        "Issued Time: 0 Tensor: 40 G:o From: Not_Known, To: In_gpu\n"
        "Issued Time: 2 Tensor: 7 G:x From: In_gpu, To: In_ssd\n"
        "Issued Time: 1 Tensor: 9 G:x From: Not_Known, To: Not_present\n"
    )
    plan = read_plan(p, num_kernels=4, num_tensors=50)
    assert plan.policy == "g10-guide"
    # sorted by kernel, the file order kept within a kernel
    assert plan.hints.tolist() == [[0, 48, 4, 3], [0, 40, 4, 3], [1, 9, 4, 0], [2, 7, 3, 1]]


def _kernel_lines(run_dir: Path) -> np.ndarray:
    rows = []
    pat = re.compile(
        r"(\d+)\+(\d+):\[(\d+),(\d+)\]\((\d+),(\d+)\)<(\d+),(\d+),(\d+),(\d+)>"
        r"\((\d+),(\d+)\)"
    )
    with gzip.open(run_dir / "sim_result.kernel.gz", "rt") as f:
        for line in f:
            m = pat.match(line)
            if m:
                g = [int(x) for x in m.groups()]
                rows.append(g[:4] + g[6:12])
    return np.asarray(rows, dtype=np.int64)


@needs_shared
def test_resnet152_256_lru_with_the_cxx_order_is_exact():
    """With ascending ids the kernel lines differ from iteration 1, kernel 1171 on (O-18); with
    the order of the binary's own statistics/kernels.config every line is the binary's."""
    from g10fast.config import read_g10_config
    from g10fast.run import run

    ref_dir = REFERENCE / "ResNet152-256-lru"
    cfg = read_g10_config(ARTIFACT / "src" / "configs" / "ResNet152" / "256-sim_lru.config")
    order = read_kernel_order(ref_dir / "statistics" / "kernels.config.gz")
    lines = _kernel_lines(ref_dir)
    res = run(cfg, required_order=order)
    assert res["tensor_order"] == "given"
    assert np.array_equal(res["kernels"], lines)
    base = run(cfg)["kernels"]
    assert base.shape == lines.shape
    diff = np.nonzero((base != lines).any(axis=1))[0]
    assert len(diff) > 0 and tuple(base[diff[0], :2]) == (1, 1171)


@needs_shared
def test_cli_bert128_deepum_with_the_cxx_plan_and_order(capsys):
    """`--kernel-order` and `--plan-in` with the reference run's own (gzipped) statistics:
    the reported iteration equals the binary's sim_result.final."""
    import json

    from g10fast.cli import main

    ref_dir = REFERENCE / "BERT-128-deepUM"
    st = ref_dir / "statistics"
    cfg = ARTIFACT / "src" / "configs" / "BERT" / "128-sim_deepUM.config"
    assert (
        main(
            [
                "run",
                str(cfg),
                "--json",
                "--no-progress",
                "--kernel-order",
                str(st / "kernels.config.gz"),
                "--plan-in",
                str(st / "prefetch_guide.config.gz"),
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert res["tensor_order"] == "given" and res["plan"]["policy"] == "g10-guide"
    final = {}
    for line in (ref_dir / "sim_result.final").read_text().splitlines():
        m = re.match(r"(\S+) = (\S+)", line)
        if m:
            final[m.group(1)] = float(m.group(2))
    for it in res["iterations"]:
        i = it["iteration"]
        assert it["exe_time_cycles"] == final[f"kernel_stat.iter{i}.exe_time"]
        assert it["pages"]["cpu_to_gpu"] == final[f"pcie_stat.iter{i}.incoming_pg_cpu"]
