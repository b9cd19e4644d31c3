"""The provable lower bound beside Ideal and every policy (issue 24, docs/bounds.md).

    python benchmarks/bounds_table.py [--workloads BERT-256,...] [--no-policies] [--lp 100]

Workloads: the paper's five at the paper's batches from the G10 artifact (on the artifact's
system, g10-artifact: 40 GB, 15.754 GB/s, SSD 3.2 GB/s, 128 GB host) and Llama-7B / GPT-2 XL
(built-in, cost-model times) on h100-80-pcie5, and again with an 8 GB/s host link. Per
workload: the window and traffic bounds of each engine's model (and how long they took),
optionally the checkpoint LP on the `--lp` kernels of largest deficit, then every registered
policy's run: its time, its bound (from the result), and the invariant time >= bound. Appends
JSON lines to benchmarks/results/bounds.jsonl; `--figure` draws docs/bounds.png from that
file's latest rows and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import git_commit  # noqa: E402

ARTIFACT = ROOT.parent / "shared" / "g10-artifact"
PAPER = [("BERT", 256), ("VIT", 1280), ("Inceptionv3", 1536), ("ResNet152", 1280), ("SENet154", 1024)]
BUILTIN = [("llama-7b", 1), ("gpt2-xl", 16)]
#: the built-in models again on a slow host link (8 GB/s, SSD 4 GB/s), where the bound binds
SLOW = {"host.link_gbps": 8.0, "ssd.bandwidth_gbps": 4.0}
OUT = ROOT / "benchmarks" / "results" / "bounds.jsonl"


def _workloads(names):
    from g10fast.config import genconfig
    from g10fast.run import build_workload
    from g10fast.spec import builtin_spec, from_g10_config
    from g10fast.run import workload_of

    for model, batch in PAPER:
        label = f"{model}-{batch}"
        if names and label not in names:
            continue
        cfg = genconfig(ARTIFACT, model, batch, "lru")
        base = from_g10_config(cfg)
        yield label, base, build_workload(cfg)
    for model, batch in BUILTIN:
        for over, suffix in ((None, ""), (SLOW, "@8GB/s")):
            label = f"{model}-{batch}{suffix}"
            if names and label not in names:
                continue
            base = builtin_spec(model, batch, "h100-80-pcie5", "lru", overrides=over)
            yield label, base, workload_of(base)


def measure(args):
    from g10fast import policies
    from g10fast.analysis.bounds import bound_summary, traffic_bound, window_bound
    from g10fast.engine.bound_models import page_engine_model, tensor_engine_model
    from g10fast.engine.page import PageMode, page_params
    from g10fast.engine.tensor import TensorOptions
    from g10fast.run import run
    from g10fast.spec import make_spec

    commit = git_commit()
    names = set(args.workloads.split(",")) if args.workloads else None
    OUT.parent.mkdir(parents=True, exist_ok=True)
    for label, base, w in _workloads(names):
        rec = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "commit": commit,
            "nproc": os.cpu_count(),
            "workload": label,
            "system": base.system.name or "g10-artifact",
            "kernels": w.num_kernels,
            "tensors": w.num_tensors,
            "ideal_cycles": int(w.ideal_cycles),
            "f_hz": base.system.f_hz,
        }
        p = page_params(base.system, PageMode(True, False, num_iteration=2))
        t0 = time.perf_counter()
        m = page_engine_model(w, p)
        wb = window_bound(m)
        t_win = time.perf_counter() - t0
        t0 = time.perf_counter()
        tb = traffic_bound(m)
        t_tr = time.perf_counter() - t0
        s = bound_summary(m, w, float(w.exec_cycles.sum()))
        rec.update(
            {
                "page_window_cycles": wb.time,
                "page_traffic_cycles": tb.time,
                "page_window_seconds": t_win,
                "page_traffic_seconds": t_tr,
                "binding_windows": s["windows"],
                "max_deficit_bytes": s["max_deficit_bytes"],
                "traffic_bytes_in": tb.bytes_in,
            }
        )
        # the same with the host memory limit (SSD windows): not in results (sweep reuse)
        import dataclasses

        mh = dataclasses.replace(m, host_bytes=float(p.host_line) * 4096.0)
        rec["page_window_host_cycles"] = window_bound(mh).time
        for mode in ("FlashNeuron", "G10GDSSSD", "G10GDSFULL"):
            sysm = base.system.replace(host_memory_gb=0.0) if mode == "G10GDSSSD" else base.system
            t0 = time.perf_counter()
            mech = {"FlashNeuron": "offload_set", "G10GDSSSD": "gds_ssd", "G10GDSFULL": "gds_ssd_host"}[mode]
            tm = tensor_engine_model(w, sysm, mech, TensorOptions())
            rec[f"tensor_{mode}_window_ms"] = window_bound(tm).time
            rec[f"tensor_{mode}_seconds"] = time.perf_counter() - t0
        # the driver engine's model (default options; steady state) and the swap engine's
        # physical machine (its provable bound is Ideal)
        from g10fast.engine.bound_models import driver_engine_model, swap_engine_bound
        from g10fast.engine.driver import DriverOptions, system_params

        t0 = time.perf_counter()
        dm = driver_engine_model(w, system_params(base.system, DriverOptions()), DriverOptions())
        ds = bound_summary(dm, w, float(w.exec_cycles.sum()))
        rec["driver_bound_cycles"] = ds["time"]
        rec["driver_bound_seconds"] = time.perf_counter() - t0
        from g10fast.alloc.swap import LinkCost

        t0 = time.perf_counter()
        sw = swap_engine_bound(
            w,
            LinkCost.from_gbps(float(base.system.host_link_gbps), float(base.system.link_latency_us)),
            int(float(base.system.gpu_memory_gb) * 2**30),
            base.system.f_hz,
        )
        rec["swap_physical_cycles"] = sw["physical"]["time"]
        rec["swap_bound_seconds"] = time.perf_counter() - t0
        if args.lp:
            from g10fast.analysis.bounds_lp import default_checkpoints, lp_bound

            t0 = time.perf_counter()
            try:
                lp = lp_bound(m, default_checkpoints(m, args.lp), time_limit=120)
                rec.update(
                    {
                        "lp_cycles": lp.time,
                        "lp_checkpoints": int(len(lp.checkpoints)),
                        "lp_variables": lp.variables,
                        "lp_status": lp.status,
                    }
                )
            except Exception as e:  # a benchmark records what failed
                rec["lp_error"] = str(e)
            rec["lp_seconds"] = time.perf_counter() - t0
        print(json.dumps({k: v for k, v in rec.items() if k != "binding_windows"}), flush=True)
        runs = {}
        if not args.no_policies:
            for r in policies.records():
                if args.engines and r.engine not in args.engines.split(","):
                    continue
                spec = make_spec(base.workload, base.system, r.name, engine=base.engine)
                t0 = time.perf_counter()
                try:
                    res = run(spec, workload=w)
                except Exception as e:  # noqa: BLE001 - recorded
                    runs[r.name] = {"status": "error", "error": str(e)[:200]}
                    continue
                d = {
                    "status": res["status"],
                    "engine": res["engine"],
                    "wall_s": time.perf_counter() - t0,
                    "bound_cycles": res["bound"]["time_cycles"],
                    "bound_notes": res["bound"]["model"]["notes"],
                }
                if "physical" in res["bound"]:
                    d["physical_bound_cycles"] = res["bound"]["physical"]["time"]
                if res["status"] == "ok":
                    it = res["iterations"][res["reported"]]
                    d.update(
                        exe_cycles=int(it["exe_time_cycles"]),
                        ideal_cycles=int(it["ideal_exe_time_cycles"]),
                        below_bound=bool(it["exe_time_cycles"] < it["bound_time_cycles"]),
                    )
                else:
                    d["failure"] = str(res.get("failure"))[:200]
                runs[r.name] = d
                print(f"  {r.name}: {json.dumps(d)}", flush=True)
        if args.merge and OUT.exists():
            prev = {r["workload"]: r for r in latest_rows()}.get(label)
            if prev:
                for k, v in prev["runs"].items():
                    runs.setdefault(k, dict(v, from_commit=prev["commit"]))
        rec["runs"] = runs
        with open(OUT, "a") as f:
            f.write(json.dumps(rec) + "\n")


def latest_rows():
    rows = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        if r.get("runs"):
            rows[r["workload"]] = r
    order = [f"{m}-{b}" for m, b in PAPER] + [f"{m}-{b}{s}" for m, b in BUILTIN for s in ("", "@8GB/s")]
    return [rows[k] for k in order if k in rows]


def _cell(d, ideal):
    if d.get("status") == "ok":
        return f"{d['exe_cycles'] / ideal:.3f} ({d['bound_cycles'] / ideal:.3f})"
    return "failed" if d.get("status") == "failed" else "—"


def table_and_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from g10fast import policies

    rows = latest_rows()
    recs = [r for r in policies.records() if r.name != "ideal"]
    # table 1: the bounds of each engine's model and how long they took
    print(
        "| workload | K | page | page, host limit | tensor FN / GDS / Host | driver | swap "
        "(physical) | seconds: page, tensor (3), driver, swap |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        i = r["ideal_cycles"]
        f = r["f_hz"]
        tens = " / ".join(
            f"{r[f'tensor_{m}_window_ms'] * 1e-3 * f / i:.3f}"
            for m in ("FlashNeuron", "G10GDSSSD", "G10GDSFULL")
        )
        ts = sum(r[f"tensor_{m}_seconds"] for m in ("FlashNeuron", "G10GDSSSD", "G10GDSFULL"))
        print(
            f"| {r['workload']} | {r['kernels']} | {r['page_window_cycles'] / i:.4f} | "
            f"{r['page_window_host_cycles'] / i:.4f} | {tens} | "
            f"{r.get('driver_bound_cycles', float('nan')) / i:.4f} | "
            f"{r.get('swap_physical_cycles', float('nan')) / i:.4f} | "
            f"{r['page_window_seconds'] + r['page_traffic_seconds']:.2f}, {ts:.2f}, "
            f"{r.get('driver_bound_seconds', float('nan')):.2f}, "
            f"{r.get('swap_bound_seconds', float('nan')):.2f} |"
        )
    # table 2 and 3: every policy, time / Ideal (its bound / Ideal)
    for eng in (("page", "tensor"), ("driver", "swap")):
        sub = [x for x in recs if x.engine in eng]
        print()
        print("| workload | " + " | ".join(x.display for x in sub) + " |")
        print("|---|" + "---|" * len(sub))
        for r in rows:
            print(
                f"| {r['workload']} | "
                + " | ".join(_cell(r["runs"].get(x.name, {}), r["ideal_cycles"]) for x in sub)
                + " |"
            )
    # table 4: the gap split: of the time above Ideal, the share the hardware forces
    print()
    print("| workload | " + " | ".join(x.display for x in recs) + " |")
    print("|---|" + "---|" * len(recs))
    for r in rows:
        cells = []
        for x in recs:
            d = r["runs"].get(x.name, {})
            if d.get("status") != "ok":
                cells.append("—")
                continue
            above = d["exe_cycles"] - d["ideal_cycles"]
            forced = max(0, d["bound_cycles"] - d["ideal_cycles"])
            cells.append(f"{100 * forced / above:.0f} %" if above > 0 else "(at Ideal)")
        print(f"| {r['workload']} | " + " | ".join(cells) + " |")
    # the figure: one panel per workload
    nc = 3
    nr = (len(rows) + nc - 1) // nc
    fig, axes = plt.subplots(nr, nc, figsize=(16, 4.4 * nr), squeeze=False)
    for ax, r in zip(axes.flat, rows):
        ideal = r["ideal_cycles"]
        names = ["Ideal", "bound (page)"] + [x.display for x in recs]
        vals = [1.0, r["page_window_cycles"] / ideal]
        cols = ["#444444", "#000000"] + [x.colour or "#1f77b4" for x in recs]
        bnd = [None, None]
        for x in recs:
            d = r["runs"].get(x.name, {})
            ok = d.get("status") == "ok"
            vals.append(d["exe_cycles"] / ideal if ok else float("nan"))
            bnd.append(d["bound_cycles"] / ideal if "bound_cycles" in d else None)
        xs = np.arange(len(vals))
        ax.bar(xs, [v if v == v else 0.0 for v in vals], color=cols, bottom=0.0)
        for xi, bv in zip(xs, bnd):
            if bv is not None:
                ax.plot([xi - 0.45, xi + 0.45], [bv, bv], color="red", lw=1.8)
        top = max(v for v in vals if v == v)
        for xi, v in zip(xs, vals):
            if v != v:
                ax.text(xi, 1.05, "failed", rotation=90, fontsize=7, ha="center", va="bottom")
        ax.set_yscale("log")
        ax.set_ylim(0.9, top * 1.6)
        ax.set_xticks(xs, names, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("time / Ideal (log)")
        ax.set_title(r["workload"], fontsize=10)
        ax.axhline(1.0, color="#888888", lw=0.5)
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    fig.suptitle(
        "Iteration time / Ideal: Ideal, the page engine's bound and every policy; red "
        "line: the bound of the policy's own engine",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(ROOT / "docs" / "bounds.png", dpi=90)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="")
    ap.add_argument("--no-policies", action="store_true")
    ap.add_argument("--engines", default="", help="run only the policies of these engines")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the runs of the latest row of a workload for engines not run",
    )
    ap.add_argument("--lp", type=int, default=0, help="checkpoint LP on this many kernels")
    ap.add_argument("--figure", action="store_true", help="table and figure from the results")
    a = ap.parse_args(argv)
    if a.figure:
        table_and_figure()
        return 0
    if not ARTIFACT.is_dir():
        print("../shared/g10-artifact not found")
        return 0
    measure(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
