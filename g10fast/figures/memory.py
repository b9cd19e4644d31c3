"""Estimated vs simulated GPU memory over the kernels of an iteration (`g10fast run --figure`).

matplotlib is imported here only, with the Agg backend."""

from __future__ import annotations

import os

from g10fast.atomic import atomic_path


def plot_memory(result: dict, path) -> None:
    """Write a PNG (or any format matplotlib knows from the suffix) of the planner's estimate
    of GPU-resident memory per kernel, the engine's GPU memory in use at the end of each kernel
    of the reported iteration, and the GPU capacity. Temporary name, then renamed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pl = result.get("planner") or {}
    sim = pl.get("simulated_gpu_bytes")
    if sim is None:
        from g10fast.results import gpu_bytes_at_kernel_end

        sim = gpu_bytes_at_kernel_end(result["kernels"], result["reported"], result["workload"]["kernels"])
    gib = 2.0**30
    sysd = result["system"]
    # the driver engine's system parameters count GPU pages, the page engine's frames
    cap = int(sysd["frames"] if "frames" in sysd else sysd["gpu_pages"]) * 4096
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=120)
    x = range(len(sim))
    est = pl.get("estimated_gpu_bytes")
    if est is not None:
        ax.plot(
            x,
            [e / gib for e in est],
            color="tab:orange",
            lw=1.2,
            label="planner estimate (after prefetch placement)",
        )
        pre = pl.get("estimated_gpu_bytes_prealloc")
        if pre is not None:
            ax.plot(
                x,
                [e / gib for e in pre],
                color="tab:orange",
                lw=0.8,
                ls=":",
                label="estimate before migrations",
            )
        tgt = result.get("plan", {}).get("target_bytes")
        if tgt:
            ax.axhline(tgt / gib, color="grey", lw=0.8, ls="--", label="planner target")
    ax.plot(
        x,
        [s / gib for s in sim],
        color="tab:blue",
        lw=1.2,
        label=f"simulated (end of kernel, iteration {result['reported']})",
    )
    ax.axhline(cap / gib, color="black", lw=1.0, label="GPU capacity")
    ax.set_xlabel("kernel")
    ax.set_ylabel("GPU memory (GiB)")
    ax.set_xlim(0, max(len(sim) - 1, 1))
    ax.set_ylim(bottom=0)
    title = (
        f"{result['model']}-{result['batch_size']} {result['policy']}: "
        f"GPU memory per kernel ({result.get('engine', 'page')} engine)"
    )
    dopt = result.get("driver_options")
    if dopt:
        import textwrap

        title += "\n" + textwrap.fill(", ".join(f"{k}={v}" for k, v in dopt.items()), 120)
    ax.set_title(title, fontsize=8 if dopt else None)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = os.fspath(path)
    try:
        with atomic_path(path, os.path.splitext(path)[1] or ".png") as tmp:
            fig.savefig(tmp)
    finally:
        plt.close(fig)
