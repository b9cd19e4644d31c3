"""How sensitive is a Figure-11 policy ranking to small changes of the kernel times?

    python benchmarks/ranking_sensitivity.py [--artifact DIR] [--workload VIT-1280 ...]
                                             [--sigma 0.01] [--seeds 8] [--store FILE]

For each workload, runs the six Figure-11 policies with three sets of kernel times: the
artifact's A100 traces (`traces`), the cost model's estimates with the family lines fitted
without the workload's own batch (`est`, as docs/costmodel-calibration.md's ranking table),
and the estimates of the cost model as shipped (`est-all`: data/costmodel's family lines,
fitted on every trace set; what `estimated_workload` gives a user), and the traces with each
kernel's times replaced by the mean of its family in the same trace (`traces-mean`: the
profiler's per-kernel scatter removed, as a model of kernel times sees it), each unperturbed
(seed 0) and multiplied per kernel by exp(N(0, sigma)) for seeds 1..N (the three quantities
of a kernel by the same factor, the clamps kept). Results are appended to the store (JSON
lines; finished runs are not repeated) and summarised: the range of each policy's
normalised performance (Ideal / execution time) and how many perturbed seeds keep the
unperturbed traces' ranking. Swapping the traces' times in for one kernel class or one
kernel at a time (`--swap POLICY`) shows which kernels move a result.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_costmodel as C  # noqa: E402
from g10fast.config import genconfig  # noqa: E402
from g10fast.hardware import load_preset  # noqa: E402
from g10fast.run import run  # noqa: E402
from g10fast.workload import costmodel as cm  # noqa: E402
from g10fast.workload.builtin import load_builtin_graph  # noqa: E402
from g10fast.workload.model import build_workload  # noqa: E402
from g10fast.workload.times import kernel_cycles  # noqa: E402


def performance(artifact, model, batch, g, policy, t, tin, tpf, ws):
    c = kernel_cycles(t * 1e3, tin * 1e3, tpf * 1e3, 1.2)
    w = build_workload(g, *c, ws.astype(np.int64))
    res = run(genconfig(artifact, model, batch, policy), workload=w)
    if res.get("status") != "ok" or res.get("reported") is None:
        return None
    it = res["iterations"][res["reported"]]
    return it["ideal_exe_time_cycles"] / it["exe_time_cycles"]


def sources(artifact, rows, sums, model, batch):
    params = cm.load_params()
    gpu = cm.gpu_from_preset(load_preset("g10-artifact"))
    p = dataclasses.replace(params, families=C.fit_families(sums, exclude=(model, batch)))
    r = next(x for x in rows if x["model"] == model and x["batch"] == batch)
    est = C.predict(r, gpu, p, p.families)
    shipped = C.predict(r, gpu, params, params.families)
    traces = (r["t"], r["tin"], r["tpf"], r["ws"].astype(float))
    return r, {"traces": traces, "est": est, "est-all": shipped, "traces-mean": family_mean(r, traces)}


def family_mean(r, traces):
    """The traces with every kernel's three times replaced by the mean over the kernels of its
    family (name and shape, `calibrate_costmodel`'s key) in the same trace set: the per-kernel
    scatter of the profiler removed, each family's total kept (workspace unchanged)."""
    _, gid = np.unique(np.asarray(r["keys"], dtype=object).astype(str), return_inverse=True)
    n = np.bincount(gid)
    mean = [(np.bincount(gid, weights=q) / n)[gid] for q in traces[:3]]
    return (*mean, traces[3])


COLOURS = {"traces": "tab:blue", "traces-mean": "tab:purple", "est": "tab:orange", "est-all": "tab:green"}
#: the kernel-time sources, as stored (`src`) and as printed
SOURCES = {
    "traces": "A100 traces",
    "traces-mean": "A100 traces, family means",
    "est": "estimated, batch held out",
    "est-all": "estimated, shipped model",
}


def rank(v, pols):
    return tuple(sorted([p for p in pols if v.get(p) is not None], key=lambda p: -v[p]))


def summarise(store: Path) -> list:
    D = defaultdict(dict)
    for ln in store.read_text().splitlines():
        d = json.loads(ln)
        D[(d["model"], d["batch"], d["sigma"], d["seed"], d["src"])][d["policy"]] = d["perf"]
    out = []
    for wl in sorted({k[:3] for k in D}):
        seeds = sorted({k[3] for k in D if k[:3] == wl and len(D[k]) == len(C.POLICY_ORDER)})
        if 0 not in seeds:
            continue
        base = D[wl + (0, "traces")]
        pols = [
            p for p in C.POLICY_ORDER if base.get(p) is not None and D[wl + (0, "est")].get(p) is not None
        ]
        r0 = rank(base, pols)
        row = {
            "workload": f"{wl[0]}-{wl[1]}",
            "sigma": wl[2],
            "seeds": len(seeds) - 1,
            "sources": [src for src in SOURCES if wl + (0, src) in D],
        }
        for src in row["sources"]:
            row[f"ranking_{src}"] = " > ".join(C.DISPLAY[p] for p in rank(D[wl + (0, src)], pols))
            done = [s for s in seeds if s > 0 and len(D.get(wl + (s, src), {})) == len(C.POLICY_ORDER)]
            rs = [rank(D[wl + (s, src)], pols) for s in done]
            row[f"keep_{src}"] = sum(r == r0 for r in rs)
            row[f"seeds_{src}"] = len(done)
            for p in pols:
                vals = [D[wl + (s, src)][p] for s in [0] + done]
                row[f"{src}:{p}"] = (vals[0], min(vals), max(vals))
        out.append(row)
    return out


def figure(rows, path: Path) -> None:
    """One panel per workload: each policy's normalised performance, unperturbed (marker) and
    its range under the noise (bar), A100 traces beside estimates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, row in zip(axes, rows):
        for i, p in enumerate(C.POLICY_ORDER):
            srcs = row["sources"]
            for j, src in enumerate(srcs):
                v = row.get(f"{src}:{p}")
                if not v:
                    continue
                col = COLOURS[src]
                x = i + (j - (len(srcs) - 1) / 2) * 0.25
                ax.plot([x, x], [v[1], v[2]], color=col, lw=4, alpha=0.5, solid_capstyle="butt")
                ax.plot([x], [v[0]], "o", color=col, ms=4, label=SOURCES[src] if i == 0 else None)
        ax.set_xticks(range(len(C.POLICY_ORDER)))
        ax.set_xticklabels([C.DISPLAY[p] for p in C.POLICY_ORDER], rotation=60, ha="right", fontsize=8)
        kept = ", ".join(
            f"{s} {row['keep_' + s]}/{row['seeds_' + s]}" for s in row["sources"] if row["seeds_" + s]
        )
        ax.set_title(f"{row['workload']}\nranking kept under noise: {kept}", fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("performance normalised to Ideal")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"Figure-11 workloads under {rows[0]['sigma']:.0%} kernel-time noise: "
        "unperturbed (dot) and range (bar); kept: perturbed seeds keeping the "
        "traces' ranking, per source",
        fontsize=9,
    )
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifact")
    ap.add_argument(
        "--workload",
        action="append",
        help="e.g. VIT-1280 (default: the two whose ranking differs, BERT-256 and VIT-1280)",
    )
    ap.add_argument("--sigma", type=float, default=0.01)
    ap.add_argument("--seeds", type=int, default=8, help="seeds 0..N-1; 0 is unperturbed")
    ap.add_argument("--store", default=str(ROOT / "benchmarks" / "results" / "ranking_sensitivity.jsonl"))
    ap.add_argument("--swap", help="policy: swap in the traces' times per kernel class")
    ap.add_argument(
        "--sources",
        default=",".join(SOURCES),
        help=f"kernel-time sources to run (default: {','.join(SOURCES)})",
    )
    ap.add_argument("--figure", help="also draw the ranges to this PNG (from the store)")
    a = ap.parse_args(argv)
    artifact = C.find_artifact(a.artifact)
    keys = dict(C.PAPER)
    wls = a.workload or ["BERT-256", "VIT-1280"]
    rows = C.collect(artifact)
    sums = C.family_sums(rows)
    store = Path(a.store)
    done = set()
    if store.exists():
        for ln in store.read_text().splitlines():
            d = json.loads(ln)
            done.add((d["model"], d["batch"], d["sigma"], d["seed"], d["src"], d["policy"]))
    for wl in wls:
        model, _, b = wl.rpartition("-")
        b = int(b)
        g = load_builtin_graph(keys[model], b)
        r, src = sources(artifact, rows, sums, model, b)
        if a.swap:
            T, E = src["traces"], src["est"]
            names = np.array(r["feat"]["name"])
            base = performance(artifact, model, b, g, a.swap, *E)
            print(
                f"{wl} {a.swap}: traces {performance(artifact, model, b, g, a.swap, *T):.4f} "
                f"estimated {base:.4f}"
            )
            share = {n: T[0][names == n].sum() / T[0].sum() for n in set(names)}
            for n in sorted(share, key=lambda x: -share[x])[:8]:
                m = names == n
                H = [np.where(m, T[i], E[i]) for i in range(4)]
                print(
                    f"  traces for {n:28s} ({share[n]:.1%} of the time): "
                    f"{performance(artifact, model, b, g, a.swap, *H):.4f}"
                )
            continue
        K = g.num_kernels
        for seed in range(a.seeds):
            fac = np.ones(K) if seed == 0 else np.exp(np.random.default_rng(seed).normal(0.0, a.sigma, K))
            for name, Q in src.items():
                if name not in a.sources.split(","):
                    continue
                t = Q[0] * fac
                tin = np.maximum(Q[1] * fac, t)
                tpf = np.maximum(Q[2] * fac, tin)
                for pol in C.POLICY_ORDER:
                    key = (model, b, a.sigma, seed, name, pol)
                    if key in done:
                        continue
                    v = performance(artifact, model, b, g, pol, t, tin, tpf, Q[3])
                    with open(store, "a") as f:
                        f.write(
                            json.dumps(
                                dict(
                                    model=model,
                                    batch=b,
                                    sigma=a.sigma,
                                    seed=seed,
                                    src=name,
                                    policy=pol,
                                    perf=v,
                                )
                            )
                            + "\n"
                        )
            print(f"  {wl} seed {seed} done", file=sys.stderr, flush=True)
    if a.swap:
        return
    rows_out = summarise(store)
    if a.figure:
        figure(rows_out, Path(a.figure))
    for row in rows_out:
        print(f"{row['workload']} (sigma {row['sigma']}, {row['seeds']} perturbed seeds)")
        for src in row["sources"]:
            print(f"  ranking, {SOURCES[src] + ':':27s} {row['ranking_' + src]}")
        for p in C.POLICY_ORDER:
            cells = []
            for s in row["sources"]:
                v = row.get(f"{s}:{p}")
                if v:
                    cells.append(f"{s} {v[0]:.4f} [{v[1]:.4f}, {v[2]:.4f}]")
            if cells:
                print(f"  {C.DISPLAY[p]:11s} " + "   ".join(cells))
        print(
            "  perturbed seeds keeping the traces' unperturbed ranking: "
            + ", ".join(f"{s} {row['keep_' + s]}/{row['seeds_' + s]}" for s in row["sources"])
        )


if __name__ == "__main__":
    main()
