"""The question a G10-like system is asked first: "and against ZeRO-Infinity?" G10, FlashNeuron,
DeepUM+, naive UM and DeepSpeed's ZeRO family on Llama-7B and GPT-2 XL on one H100 with host
memory and NVMe (the dgx-h100 preset, one GPU: 80 GB, 2 TB host memory, a 4-drive NVMe set).

    python benchmarks/zero_comparison.py [--out docs/zero-family.png] [--quick]

Each system runs on its engine (G10, FlashNeuron, DeepUM+ and Ideal on the G10-compatible
page and tensor engines; naive UM on the driver engine; the ZeRO family on the ranks engine),
the workload being the built-in model with the cost model's H100 kernel times. Writes the
figure (iteration time per system, relative to Ideal, one panel per model) and appends one
JSON line per run to benchmarks/results/zero_comparison.jsonl.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SYSTEM = "dgx-h100"
MODELS = {"llama-7b": 4, "gpt2-xl": 16}
POLICIES = (
    "ideal",
    "prefetch_lru",
    "FlashNeuron",
    "deepUM",
    "uvm",
    "zero-offload",
    "zero3-offload",
    "zero-infinity",
)


def run_one(model: str, batch: int, policy: str, quick: bool) -> dict:
    from g10fast.api import builtin_spec
    from g10fast.run import run

    opts = {"layers": 4} if quick else None
    s = builtin_spec(model, batch, SYSTEM, policy, model_options=opts)
    t0 = time.process_time()
    r = run(s)
    it = r["iterations"][r["reported"]] if r.get("iterations") else {}
    return {
        "model": model,
        "batch": batch,
        "policy": policy,
        "engine": r["engine"],
        "status": r["status"],
        "time_s": it.get("exe_time_s"),
        "ideal_s": it.get("ideal_time_s"),
        "cpu_s": round(time.process_time() - t0, 2),
        "failure": (r.get("failure") or {}).get("reason"),
        "footprint_gib": (r.get("workload") or {}).get("footprint_bytes", 0) / 2**30,
    }


def figure(rows: list, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from g10fast import policies
    from _bench import save_figure

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.2), squeeze=False)
    for ax, m in zip(axes[0], models):
        mine = [r for r in rows if r["model"] == m]
        ideal = next((r["time_s"] for r in mine if r["policy"] == "ideal"), None)
        names, vals, cols = [], [], []
        for r in mine:
            if r["policy"] == "ideal":
                continue
            names.append(policies.display(r["policy"]))
            vals.append(r["time_s"] / ideal if r["status"] == "ok" and ideal else 0.0)
            cols.append(policies.colour(r["policy"]))
        x = range(len(names))
        ax.bar(x, vals, color=cols)
        for i, v in enumerate(vals):
            if v == 0:
                ax.text(i, 1.05, "does not\nrun", ha="center", va="bottom", fontsize=7, color="tab:red")
            else:
                ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
        ax.axhline(1.0, color="black", lw=0.8, ls="--", label="Ideal (unlimited GPU memory)")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("iteration time / Ideal (log)")
        b = mine[0]["batch"]
        ax.set_title(f"{m}, batch {b} ({mine[0]['footprint_gib']:.0f} GiB on an 80 GB H100)", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("One H100 with host memory and NVMe (dgx-h100, 1 GPU): who wins?")
    save_figure(fig, path)


def main(argv=None):
    from _bench import append_record, figure_args, git_commit

    a = figure_args(__doc__, HERE.parent / "docs" / "zero-family.png", "4-layer models (a smoke run)", argv)
    rows = []
    for m, b in MODELS.items():
        for p in POLICIES:
            r = run_one(m, b, p, a.quick)
            rows.append(r)
            append_record(
                HERE / "results" / "zero_comparison.jsonl",
                dict(
                    r,
                    commit=git_commit(),
                    quick=a.quick,
                    date=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                ),
            )
    figure(rows, a.out)
    print(a.out)


if __name__ == "__main__":
    main()
