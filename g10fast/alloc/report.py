"""Tables and figures of allocator runs: peak reserved against peak live, memory over op index."""

from __future__ import annotations

MiB = 1 << 20


def memory_text(trace, results) -> str:
    lines = [f"{trace.name}: {trace.num_ops:,} ops, {trace.num_blocks:,} blocks"]
    pl = results[0].peak_live if results else 0
    lines.append(f"peak live {pl / MiB:,.1f} MiB (the lower bound)")
    lines.append(
        f"{'allocator':<14} {'peak reserved (MiB)':>20} {'vs live':>8} "
        f"{'frag at live peak (MiB)':>24}  status"
    )
    for r in results:
        s = r.summary()
        status = r.status
        if r.oom:
            o = r.oom
            status = (
                f"OOM at op {o['op']} (block {o['block']}, {o['bytes']:,} B): "
                f"{o['free_bytes']:,} B free in {o['free_pieces']} pieces, largest "
                f"{o['largest_free_bytes']:,} B"
            )
        lines.append(
            f"{r.allocator:<14} {r.peak_reserved / MiB:>20,.1f} "
            f"{100 * s['overhead']:>+7.1f}% {s['fragmentation_at_live_peak_bytes'] / MiB:>24,.1f}"
            f"  {status}"
        )
        x = r.extra
        if x.get("pool_bytes"):
            more = (
                f", switch at op {x['switch_op']:,}, {x['pool_hits']:,} pool hits, "
                f"{x['fallbacks']:,} cudaMalloc fall-backs"
                if x.get("switch_op") is not None
                else ""
            )
            if x.get("mem_usage_bytes") is not None:
                more += f"; it reports {x['mem_usage_bytes'] / MiB:,.1f} MiB (GetMemUsage)"
            lines.append(f"{'':14} pool {x['pool_bytes'] / MiB:,.1f} MiB{more}")
    return "\n".join(lines)


def memory_figure(trace, results, path, title: str | None = None) -> str:
    """Reserved bytes over op index, one line per allocator, and the live bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    if results:
        r0 = results[0]
        ax.plot(r0.op_index, r0.live / MiB, color="black", lw=1.0, label="live (lower bound)")
    measured = trace.meta.get("reserved_of_op")  # a PyTorch memory snapshot's own segments
    if measured is not None and len(measured):
        ax.step(
            range(len(measured)),
            measured / MiB,
            where="post",
            color="black",
            ls="--",
            lw=1.0,
            label=f"snapshot, measured (peak {measured.max() / MiB:,.0f} MiB)",
        )
    for r in results:
        if r.allocator == "cuda_malloc":
            continue
        ax.step(
            r.op_index,
            r.reserved / MiB,
            where="post",
            lw=1.0,
            label=f"{r.allocator} (peak {r.peak_reserved / MiB:,.0f} MiB)",
        )
    ax.set_xlabel("op index")
    ax.set_ylabel("GPU memory (MiB)")
    ax.set_title(title or trace.name)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def swap_figure(rows, path, title: str = "", percent: bool = False, marks=None, marks_label: str = "") -> str:
    """Overhead per iteration against the memory limit, one line per score (rows of
    `sweep_limits`; plans that cannot meet the limit are left out). `percent`: the overhead
    as a share of the iteration (its clock); `marks`: [(limit MiB, value)] points to show
    beside the curves (a published curve's values, say), named `marks_label`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for sc in dict.fromkeys(r["score"] for r in rows):
        rr = [r for r in rows if r["score"] == sc and r["status"] == "ok"]
        y = [(100 * r["overhead_fraction"] if percent else 1e3 * r["overhead_per_iteration_s"]) for r in rr]
        ax.plot([r["limit_bytes"] / MiB for r in rr], y, marker=".", lw=1, label=sc)
    if marks:
        ax.plot(
            [m[0] for m in marks],
            [m[1] for m in marks],
            marker="x",
            color="black",
            ms=8,
            ls="none",
            label=marks_label or None,
        )
    ax.set_xlabel("memory limit (MiB)")
    ax.set_ylabel("overhead (% of an iteration)" if percent else "overhead per iteration (ms)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
