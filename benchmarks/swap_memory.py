"""The GPU memory each policy needs to run within 5 % of Ideal, on BERT-256, ResNet152-1280
(the G10 artifact's workloads) and Llama-7B (built-in, batch 1, h100-80-pcie5): G10 (page
engine), FlashNeuron and G10-Host (tensor engine), and the swap policies singa_swap (each
score) and appobmem, whose plans run on the tensor engine, under every allocator.

    python benchmarks/swap_memory.py [--models BERT-256,ResNet152-1280,Llama-7B]
                                     [--rerun-g10] [--tolerance 0.05] [--shared ../shared]

The smallest GPU memory size (the system's) that runs (status ok) with slowdown ≤ 1.05 over
Ideal, to `--tolerance`:
- G10 (page engine, minutes a run): bisection (geometric) below the system's size when it
  fits there (down to a quarter of it, `--g10-tolerance`), else between it and the
  footprint.
- FlashNeuron, G10-Host: a geometric grid (×1.25) from the largest kernel's tensors up,
  then bisection between the first size that fits and the one below it (G10-Host's
  slowdown is not monotone in the size). FlashNeuron and G10-Host are
  then run at that size with each allocator placing their allocations (`--allocator`).
- singa_swap (vote, doa, aoa, wdoa) and appobmem (aoa; profile_policy none: planned on the
  nominal kernel times, the E6 profile run on the page engine would cost a G10-sized run per
  step): a grid of planner limits (the GPU left large, so the run never fails; the engine's
  timing does not depend on the allocator), not a bisection: the memory a run needs is not
  monotone in the limit (`swap_row`). Per allocator, the least peak reserved bytes among
  the runs with slowdown ≤ 1.05.
G10's page-engine runs take minutes on ResNet152-1280 and Llama-7B on a loaded machine:
its rows are reused from benchmarks/results/swap_memory.jsonl unless `--rerun-g10`
(`--reuse` names more policies to reuse).

Writes benchmarks/results/swap_memory.jsonl (one line per model and policy, with the commit)
and docs/swap-memory.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path

from _bench import git_commit  # noqa: E402  (benchmarks/, the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.alloc.allocators import ALLOCATORS  # noqa: E402
from g10fast.run import run, workload_of  # noqa: E402
from g10fast.spec import builtin_spec, from_g10_config, make_spec  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "swap_memory.jsonl"
FIG = ROOT / "docs" / "swap-memory.png"
MAX_SLOWDOWN = 1.05
SWAP_VARIANTS = [
    ("singa_swap", "vote"),
    ("singa_swap", "doa"),
    ("singa_swap", "aoa"),
    ("singa_swap", "wdoa"),
    ("appobmem", "aoa"),
]
GPU_POLICIES = ["prefetch_lru", "FlashNeuron", "G10GDSFULL"]


def base_spec(model: str, shared: Path):
    if model == "Llama-7B":
        return builtin_spec("llama-7b", 1, "h100-80-pcie5", "prefetch_lru")
    name, batch = model.split("-")
    from g10fast.config import read_g10_config

    cfg = read_g10_config(
        shared / "g10-artifact" / "src" / "configs" / name / f"{batch}-sim_prefetch_lru.config"
    )
    return from_g10_config(cfg)


def spec_for(base, policy: str, gpu_gb: float, options=None, allocator: str = ""):
    sysm = dataclasses.replace(base.system, gpu_memory_gb=float(gpu_gb))
    return make_spec(
        base.workload, sysm, policy, options or {}, dataclasses.replace(base.engine, allocator=allocator)
    )


def slowdown(res) -> float:
    if res.get("status") != "ok" or res.get("reported") is None:
        return math.inf
    return float(res["iterations"][res["reported"]]["slowdown"])


def bisect(fits, lo: float, hi: float, tol: float, n: int = 0):
    """Smallest x in (lo, hi] with fits(x), fits(hi) known true and lo taken as not fitting
    (fits assumed monotone), to a relative tolerance by geometric steps; (x, evaluations)."""
    while hi / lo > 1 + tol:
        mid = math.sqrt(lo * hi)
        n += 1
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi, n


def kernel_floor_gb(w) -> float:
    """The largest kernel's tensors (GiB): no GPU smaller runs it."""
    import numpy as np

    best = 0
    for k in range(w.num_kernels):
        t = np.union1d(w.inputs(k), w.outputs(k))
        best = max(best, int(w.size[t].sum()))
    return best / 2**30


def gpu_policy_row(base, w, policy, tol):
    footprint_gb = float(w.size.sum()) / 2**30
    memo = {}

    def fits(g):
        r = run(spec_for(base, policy, g), workload=w)
        memo[g] = r
        return slowdown(r) <= MAX_SLOWDOWN

    t0 = time.perf_counter()
    g0 = float(base.system.gpu_memory_gb)
    floor = max(kernel_floor_gb(w), 0.25)
    if policy != "prefetch_lru":
        # not monotone (G10-Host at BERT-256: 1.10 at 40 GB, 1.36 at 120, 1.00 at 150): a
        # coarse geometric grid from the floor up, then bisection below its first fit
        grid = [floor]
        while grid[-1] < footprint_gb * 1.05:
            grid.append(grid[-1] * 1.25)
        n = 0
        g = None
        for i, x in enumerate(grid):
            n += 1
            if fits(x):
                g = x if i == 0 else bisect(fits, grid[i - 1], x, tol)[0]
                break
        n = len(memo)
    elif fits(g0):
        lo = max(floor, g0 / 4) if policy == "prefetch_lru" else floor
        g, n = bisect(fits, lo, g0, tol, 1)
    elif fits(footprint_gb * 1.05):
        g, n = bisect(fits, g0, footprint_gb * 1.05, tol, 2)
    else:
        g, n = None, 2
    row = {
        "policy": policy,
        "score": None,
        "bisected": "gpu_memory",
        "runs": n,
        "gpu_memory_gb": g,
        "slowdown": slowdown(memo[g]) if g else None,
        "kernel_floor_gb": floor,
    }
    if g is not None and policy != "prefetch_lru":
        row["allocators"] = {}
        for a in ALLOCATORS:
            r = run(spec_for(base, policy, g, allocator=a), workload=w)
            row["allocators"][a] = r["gpu_memory_needed_bytes"] / 2**30
    row["wall_s"] = round(time.perf_counter() - t0, 2)
    return row


GRID = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.42, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1, 0.07, 0.05, 0.035, 0.025)


def swap_row(base, w, policy, score, tol):
    """The swap policy's runs over a grid of limits (fractions of the unswapped peak), the
    GPU left large: the need (cuda_malloc: live bytes) is not monotone in the limit (a tight
    limit congests the link; swaps whose swap-out cannot start before the next use are left
    out), so a grid, not a bisection. Each allocator then places the runs at the three
    feasible limits (slowdown <= 1.05) with the least live need; its need is the least."""
    big = float(w.size.sum()) / 2**30 * 4 + 16
    opts = {"score": score}
    if policy == "appobmem":
        opts["profile_policy"] = "none"
    t0 = time.perf_counter()
    pts = []
    for frac in GRID:
        r = run(spec_for(base, policy, big, dict(opts, limit_fraction=frac), "cuda_malloc"), workload=w)
        pts.append((frac, slowdown(r), r["gpu_memory_needed_bytes"] / 2**30, r))
        if slowdown(r) > MAX_SLOWDOWN * 1.1:
            break  # tighter limits only slow it more
    feas = sorted([p for p in pts if p[1] <= MAX_SLOWDOWN], key=lambda p: p[2])
    row = {
        "policy": policy,
        "score": score,
        "searched": "limit grid",
        "runs": len(pts),
        "grid": [[p[0], round(p[1], 4), round(p[2], 3)] for p in pts],
    }
    if feas:
        frac, sd, need, r = feas[0]
        pl = r["plan"]
        row.update(
            limit_fraction=frac,
            slowdown=sd,
            limit_gb=pl["limit_bytes"] / 2**30,
            load_peak_gb=pl["peak_bytes"] / 2**30,
            unswapped_peak_gb=pl["peak_before_bytes"] / 2**30,
            swaps=pl["swaps"],
            hinted_swaps=pl["hinted_swaps"],
            wrapping_swaps=pl["wrapping_swaps"],
            late_left_out=pl["late_left_out"],
            allocators={"cuda_malloc": need},
            allocator_limit_fraction={"cuda_malloc": frac},
        )
        for a in ALLOCATORS:
            if a == "cuda_malloc":
                continue
            best = None
            for frac2, _, _, _ in feas[:3]:
                ra = run(spec_for(base, policy, big, dict(opts, limit_fraction=frac2), a), workload=w)
                v = ra["gpu_memory_needed_bytes"] / 2**30
                if best is None or v < best[0]:
                    best = (v, frac2)
            row["allocators"][a] = best[0]
            row["allocator_limit_fraction"][a] = best[1]
    row["wall_s"] = round(time.perf_counter() - t0, 2)
    return row


def old_rows():
    rows = []
    if OUT.exists():
        for line in OUT.read_text().splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def figure(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(len(models), 1, figsize=(11, 3.3 * len(models)), squeeze=False)
    colours = dict(zip(ALLOCATORS, ["#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]))
    for ax, m in zip(axes[:, 0], models):
        mr = [r for r in rows if r["model"] == m]
        labels = []
        x = 0
        for r in mr:
            lab = {"prefetch_lru": "G10", "FlashNeuron": "FlashNeuron", "G10GDSFULL": "G10-Host"}.get(
                r["policy"], f"{r['policy']}\n{r['score']}"
            )
            labels.append((x, lab))
            if r["policy"] == "prefetch_lru":
                v = r.get("gpu_memory_gb")
                ax.bar(x, v if v else 0, 0.7, color="#7f7f7f", label="G10 (GPU size)" if x == 0 else None)
                if not v:
                    ax.text(x, 0, "no size\n≤ 5 %", ha="center", va="bottom", fontsize=7)
            else:
                al = r.get("allocators") or {}
                for j, a in enumerate(ALLOCATORS):
                    v = al.get(a)
                    ax.bar(
                        x - 0.35 + 0.14 * (j + 0.5),
                        v if v else 0,
                        0.14,
                        color=colours[a],
                        label=a if m == models[0] and x == 3 else None,
                    )
                if r["policy"] in ("FlashNeuron", "G10GDSFULL") and r.get("gpu_memory_gb"):
                    ax.plot(
                        [x - 0.4, x + 0.4],
                        [r["gpu_memory_gb"]] * 2,
                        "k--",
                        lw=1,
                        label="GPU size of the run" if m == models[0] and x == 1 else None,
                    )
                if not al:
                    ax.text(x, 0, "none\n≤ 5 %", ha="center", va="bottom", fontsize=7)
            x += 1
        ax.set_xticks([p for p, _ in labels], [lab for _, lab in labels], fontsize=7)
        ax.set_ylabel("GPU memory needed (GiB)")
        ax.set_title(f"{m}: smallest GPU memory within 5 % of Ideal", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    h, lab = axes[0, 0].get_legend_handles_labels()
    axes[0, 0].legend(h, lab, fontsize=7, ncol=3, loc="upper right")
    fig.tight_layout()
    tmp = str(path) + ".tmp.png"
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, path)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="BERT-256,ResNet152-1280,Llama-7B")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--rerun-g10", action="store_true")
    ap.add_argument(
        "--reuse",
        default="prefetch_lru",
        help="policies whose rows are reused from the results file when there "
        "(comma list; default G10's, prefetch_lru)",
    )
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--g10-tolerance", type=float, default=0.15)
    a = ap.parse_args(argv)
    commit = git_commit()
    prev = {(r["model"], r["policy"], r.get("score")): r for r in old_rows()}
    new = []
    for m in a.models.split(","):
        base = base_spec(m, a.shared)
        w = workload_of(base)
        for pol in GPU_POLICIES:
            reuse = pol in a.reuse.split(",") and not (pol == "prefetch_lru" and a.rerun_g10)
            if reuse and (m, pol, None) in prev:
                row = dict(prev[(m, pol, None)], reused=True)
            else:
                row = gpu_policy_row(base, w, pol, a.g10_tolerance if pol == "prefetch_lru" else a.tolerance)
            row.update(model=m)
            new.append(row)
            print(json.dumps(row), flush=True)
        for pol, score in SWAP_VARIANTS:
            row = swap_row(base, w, pol, score, a.tolerance)
            row.update(model=m)
            new.append(row)
            print(json.dumps(row), flush=True)
    stamp = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": commit,
        "nproc": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    keep = [r for r in old_rows() if r["model"] not in a.models.split(",")]
    rows = keep + [dict(r, **({} if r.get("reused") else stamp)) for r in new]
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, OUT)
    figure(rows, FIG)
    print(f"wrote {OUT} and {FIG}")


if __name__ == "__main__":
    main()
