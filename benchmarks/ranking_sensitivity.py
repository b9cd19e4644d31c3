"""How sensitive is a Figure-11 policy ranking to small changes of the kernel times?

    python benchmarks/ranking_sensitivity.py [--artifact DIR] [--workload VIT-1280 ...]
                                             [--sigma 0.01] [--seeds 8] [--store FILE]

For each workload, runs the six Figure-11 policies with two sets of kernel times: the
artifact's A100 traces and the cost model's estimates (family lines fitted without the
workload's own batch, as docs/costmodel-calibration.md's ranking table), each unperturbed
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
    return r, {"traces": (r["t"], r["tin"], r["tpf"], r["ws"].astype(float)), "est": est}


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
        pols = [p for p in C.POLICY_ORDER
                if base.get(p) is not None and D[wl + (0, "est")].get(p) is not None]
        r0 = rank(base, pols)
        row = {"workload": f"{wl[0]}-{wl[1]}", "sigma": wl[2], "seeds": len(seeds) - 1,
               "ranking_traces": " > ".join(C.DISPLAY[p] for p in r0),
               "ranking_est": " > ".join(C.DISPLAY[p] for p in rank(D[wl + (0, "est")], pols))}
        for src in ("traces", "est"):
            rs = [rank(D[wl + (s, src)], pols) for s in seeds if s > 0]
            row[f"keep_{src}"] = sum(r == r0 for r in rs)
            for p in pols:
                vals = [D[wl + (s, src)][p] for s in seeds]
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
            for j, (src, col) in enumerate((("traces", "tab:blue"), ("est", "tab:orange"))):
                v = row.get(f"{src}:{p}")
                if not v:
                    continue
                x = i + (j - 0.5) * 0.3
                ax.plot([x, x], [v[1], v[2]], color=col, lw=4, alpha=0.5, solid_capstyle="butt")
                ax.plot([x], [v[0]], "o", color=col, ms=4,
                        label=("A100 traces" if src == "traces" else "estimated") if i == 0 else None)
        ax.set_xticks(range(len(C.POLICY_ORDER)))
        ax.set_xticklabels([C.DISPLAY[p] for p in C.POLICY_ORDER], rotation=60, ha="right",
                           fontsize=8)
        ax.set_title(f"{row['workload']}: ranking kept {row['keep_traces']}/{row['seeds']} "
                     f"(traces), {row['keep_est']}/{row['seeds']} (est.)", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("performance normalised to Ideal")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Figure-11 workloads under {rows[0]['sigma']:.0%} kernel-time noise: "
                 "unperturbed (dot) and range (bar)", fontsize=9)
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifact")
    ap.add_argument("--workload", action="append", help="e.g. VIT-1280 (default: the two "
                    "whose ranking differs, BERT-256 and VIT-1280)")
    ap.add_argument("--sigma", type=float, default=0.01)
    ap.add_argument("--seeds", type=int, default=8, help="seeds 0..N-1; 0 is unperturbed")
    ap.add_argument("--store", default=str(ROOT / "benchmarks" / "results" /
                                           "ranking_sensitivity.jsonl"))
    ap.add_argument("--swap", help="policy: swap in the traces' times per kernel class")
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
            print(f"{wl} {a.swap}: traces {performance(artifact, model, b, g, a.swap, *T):.4f} "
                  f"estimated {base:.4f}")
            share = {n: T[0][names == n].sum() / T[0].sum() for n in set(names)}
            for n in sorted(share, key=lambda x: -share[x])[:8]:
                m = names == n
                H = [np.where(m, T[i], E[i]) for i in range(4)]
                print(f"  traces for {n:28s} ({share[n]:.1%} of the time): "
                      f"{performance(artifact, model, b, g, a.swap, *H):.4f}")
            continue
        K = g.num_kernels
        for seed in range(a.seeds):
            fac = (np.ones(K) if seed == 0 else
                   np.exp(np.random.default_rng(seed).normal(0.0, a.sigma, K)))
            for name, Q in src.items():
                t = Q[0] * fac
                tin = np.maximum(Q[1] * fac, t)
                tpf = np.maximum(Q[2] * fac, tin)
                for pol in C.POLICY_ORDER:
                    key = (model, b, a.sigma, seed, name, pol)
                    if key in done:
                        continue
                    v = performance(artifact, model, b, g, pol, t, tin, tpf, Q[3])
                    with open(store, "a") as f:
                        f.write(json.dumps(dict(model=model, batch=b, sigma=a.sigma, seed=seed,
                                                src=name, policy=pol, perf=v)) + "\n")
            print(f"  {wl} seed {seed} done", file=sys.stderr, flush=True)
    if a.swap:
        return
    rows_out = summarise(store)
    if a.figure:
        figure(rows_out, Path(a.figure))
    for row in rows_out:
        print(f"{row['workload']} (sigma {row['sigma']}, {row['seeds']} perturbed seeds)")
        print(f"  ranking, traces:    {row['ranking_traces']}")
        print(f"  ranking, estimated: {row['ranking_est']}")
        for p in C.POLICY_ORDER:
            cells = []
            for s in ("traces", "est"):
                v = row.get(f"{s}:{p}")
                if v:
                    cells.append(f"{s} {v[0]:.4f} [{v[1]:.4f}, {v[2]:.4f}]")
            if cells:
                print(f"  {C.DISPLAY[p]:11s} " + "   ".join(cells))
        print(f"  perturbed seeds keeping the traces' ranking: traces {row['keep_traces']}/"
              f"{row['seeds']}, estimated {row['keep_est']}/{row['seeds']}")


if __name__ == "__main__":
    main()
