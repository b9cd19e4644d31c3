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
PAPER = [("BERT", 256), ("VIT", 1280), ("Inceptionv3", 1536), ("ResNet152", 1280),
         ("SENet154", 1024)]
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
        rec = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit,
               "nproc": os.cpu_count(), "workload": label, "system": base.system.name or
               "g10-artifact", "kernels": w.num_kernels, "tensors": w.num_tensors,
               "ideal_cycles": int(w.ideal_cycles), "f_hz": base.system.f_hz}
        p = page_params(base.system, PageMode(True, False, num_iteration=2))
        t0 = time.perf_counter()
        m = page_engine_model(w, p)
        wb = window_bound(m)
        t_win = time.perf_counter() - t0
        t0 = time.perf_counter()
        tb = traffic_bound(m)
        t_tr = time.perf_counter() - t0
        s = bound_summary(m, w, float(w.exec_cycles.sum()))
        rec.update({"page_window_cycles": wb.time, "page_traffic_cycles": tb.time,
                    "page_window_seconds": t_win, "page_traffic_seconds": t_tr,
                    "binding_windows": s["windows"], "max_deficit_bytes": s["max_deficit_bytes"],
                    "traffic_bytes_in": tb.bytes_in})
        # the same with the host memory limit (SSD windows): not in results (sweep reuse)
        import dataclasses
        mh = dataclasses.replace(m, host_bytes=float(p.host_line) * 4096.0)
        rec["page_window_host_cycles"] = window_bound(mh).time
        for mode in ("FlashNeuron", "G10GDSSSD", "G10GDSFULL"):
            sysm = base.system.replace(host_memory_gb=0.0) if mode == "G10GDSSSD" else base.system
            t0 = time.perf_counter()
            tm = tensor_engine_model(w, sysm, mode, TensorOptions())
            rec[f"tensor_{mode}_window_ms"] = window_bound(tm).time
            rec[f"tensor_{mode}_seconds"] = time.perf_counter() - t0
        if args.lp:
            from g10fast.analysis.bounds_lp import default_checkpoints, lp_bound
            t0 = time.perf_counter()
            try:
                lp = lp_bound(m, default_checkpoints(m, args.lp), time_limit=120)
                rec.update({"lp_cycles": lp.time, "lp_checkpoints": int(len(lp.checkpoints)),
                            "lp_variables": lp.variables, "lp_status": lp.status})
            except Exception as e:        # a benchmark records what failed
                rec["lp_error"] = str(e)
            rec["lp_seconds"] = time.perf_counter() - t0
        print(json.dumps({k: v for k, v in rec.items() if k != "binding_windows"}), flush=True)
        runs = {}
        if not args.no_policies:
            for r in policies.records():
                spec = make_spec(base.workload, base.system, r.name, engine=base.engine)
                t0 = time.perf_counter()
                try:
                    res = run(spec, workload=w)
                except Exception as e:    # noqa: BLE001 - recorded
                    runs[r.name] = {"status": "error", "error": str(e)[:200]}
                    continue
                d = {"status": res["status"], "engine": res["engine"],
                     "wall_s": time.perf_counter() - t0,
                     "bound_cycles": res["bound"]["time_cycles"],
                     "bound_notes": res["bound"]["model"]["notes"]}
                if res["status"] == "ok":
                    it = res["iterations"][res["reported"]]
                    d.update(exe_cycles=int(it["exe_time_cycles"]),
                             ideal_cycles=int(it["ideal_exe_time_cycles"]),
                             below_bound=bool(it["exe_time_cycles"] < it["bound_time_cycles"]))
                else:
                    d["failure"] = str(res.get("failure"))[:200]
                runs[r.name] = d
                print(f"  {r.name}: {json.dumps(d)}", flush=True)
        rec["runs"] = runs
        with open(OUT, "a") as f:
            f.write(json.dumps(rec) + "\n")


def latest_rows():
    rows = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        if r.get("runs"):
            rows[r["workload"]] = r
    order = [f"{m}-{b}" for m, b in PAPER] + [f"{m}-{b}{s}" for m, b in BUILTIN
                                             for s in ("", "@8GB/s")]
    return [rows[k] for k in order if k in rows]


def table_and_figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from g10fast import policies
    rows = latest_rows()
    recs = [r for r in policies.records() if r.name != "ideal"]
    head = ("| workload | K | window bound / Ideal (page) | with host limit | bound s | "
            + " | ".join(r.display for r in recs) + " |")
    print(head)
    print("|" + "---|" * (4 + len(recs) + 1))
    for r in rows:
        ideal = r["ideal_cycles"]
        cells = []
        for rec in recs:
            d = r["runs"].get(rec.name, {})
            if d.get("status") == "ok":
                cells.append(f"{d['exe_cycles'] / ideal:.3f} ({d['bound_cycles'] / ideal:.3f})")
            else:
                cells.append("failed" if d.get("status") == "failed" else "—")
        print(f"| {r['workload']} | {r['kernels']} | {r['page_window_cycles'] / ideal:.4f} | "
              f"{r['page_window_host_cycles'] / ideal:.4f} | "
              f"{r['page_window_seconds'] + r['page_traffic_seconds']:.2f} | "
              + " | ".join(cells) + " |")
    fig, ax = plt.subplots(figsize=(12, 4.2))
    n = 2 + len(recs)
    width = 0.8 / n
    x = np.arange(len(rows))
    vals = [[1.0] * len(rows), [r["page_window_cycles"] / r["ideal_cycles"] for r in rows]]
    labels = ["Ideal", "bound (page engine)"]
    colours = ["#444444", "#000000"]
    for rec in recs:
        v = []
        for r in rows:
            d = r["runs"].get(rec.name, {})
            v.append(d["exe_cycles"] / r["ideal_cycles"] if d.get("status") == "ok" else 0.0)
        vals.append(v)
        labels.append(rec.display)
        colours.append(rec.colour or None)
    for i, (v, lab, col) in enumerate(zip(vals, labels, colours)):
        ax.bar(x + (i - n / 2 + 0.5) * width, v, width, label=lab, color=col,
               hatch="//" if lab.startswith("bound") else None,
               edgecolor="white" if lab.startswith("bound") else None)
    ax.set_xticks(x, [r["workload"] for r in rows], fontsize=8)
    ax.set_ylabel("iteration time / Ideal")
    ax.axhline(1.0, color="#888888", lw=0.5)
    ax.set_title("Ideal, the provable bound and every policy (0 = failed run)")
    ax.legend(ncol=5, fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "bounds.png", dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="")
    ap.add_argument("--no-policies", action="store_true")
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
