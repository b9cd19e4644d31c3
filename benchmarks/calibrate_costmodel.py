"""Calibrate the kernel-time cost model against the G10 artifact's A100 traces.

    python benchmarks/calibrate_costmodel.py [--artifact DIR] [--ranking] [--policies lru,ideal]

1. Reads, for the five paper models and every batch size with traces, the built-in model's
   kernels (FLOPs, bytes) and the measured times (cudnn<B>.txt, InputPF, PF, Workspace).
2. Fits per kernel name the roofline efficiencies and overhead, the fault rate, and the
   workspace ratios (g10fast.workload.costmodel); writes data/costmodel/a100.toml.
3. Writes docs/costmodel-calibration.md: error per kernel name (operator type) and per
   model and batch size.
4. With --ranking: simulates the Figure-11 workloads under every policy with the A100
   traces and with estimated times, and adds the normalised performance side by side.
   Policies whose engine is not implemented yet are listed as not available.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.config import available_batch_sizes, genconfig, trace_paths  # noqa: E402
from g10fast.errors import InputError  # noqa: E402
from g10fast.hardware import load_preset  # noqa: E402
from g10fast.workload import costmodel as cm  # noqa: E402
from g10fast.workload.builtin import load_builtin_graph  # noqa: E402
from g10fast.workload.times import read_trace_file  # noqa: E402

PAPER = [("BERT", "bert-base"), ("VIT", "vit"), ("Inceptionv3", "inceptionv3"),
         ("ResNet152", "resnet152"), ("SENet154", "senet154")]
FIG11 = [("BERT", 256), ("VIT", 1280), ("Inceptionv3", 1536), ("ResNet152", 1280),
         ("SENet154", 1024)]
WEIGHT = np.sqrt   # fit weight per kernel: sqrt of its measured time
POLICY_ORDER = ["lru", "FlashNeuron", "deepUM", "G10GDSSSD", "G10GDSFULL", "prefetch_lru"]
DISPLAY = {"lru": "Base UVM", "FlashNeuron": "FlashNeuron", "deepUM": "DeepUM+",
           "G10GDSSSD": "G10-GDS", "G10GDSFULL": "G10-Host", "prefetch_lru": "G10",
           "ideal": "Ideal"}


def find_artifact(arg):
    cands = [Path(arg)] if arg else []
    cands += [ROOT.parent / "shared" / "g10-artifact"]
    for c in cands:
        if (c / "results").is_dir():
            return c
    sys.exit("no G10 artifact found; pass --artifact DIR")


def collect(artifact):
    """-> list of per-(model, batch) dicts with features and measured quantities."""
    rows = []
    for model, key in PAPER:
        for b in available_batch_sizes(artifact, model):
            g = load_builtin_graph(key, b)
            f = cm.kernel_features(g)
            K = g.num_kernels
            tp = trace_paths(artifact, model, b)
            rows.append(dict(
                model=model, batch=b, feat=f,
                t=read_trace_file(tp["orig_kernel_time_file"], K, "ms") * 1e-3,
                tin=read_trace_file(tp["input_pf_kernel_time_file"], K, "ms") * 1e-3,
                tpf=read_trace_file(tp["pf_kernel_time_file"], K, "ms") * 1e-3,
                ws=read_trace_file(tp["workspace_size_file"], K, "B")))
    return rows


def fit(rows, gpu):
    names = np.concatenate([np.array(r["feat"]["name"]) for r in rows])
    F = np.concatenate([r["feat"]["flops"] for r in rows])
    Din = np.concatenate([r["feat"]["bytes_in"] for r in rows])
    Dout = np.concatenate([r["feat"]["bytes_out"] for r in rows])
    t = np.concatenate([r["t"] for r in rows])
    tin = np.concatenate([r["tin"] for r in rows])
    tpf = np.concatenate([r["tpf"] for r in rows])
    ws = np.concatenate([r["ws"] for r in rows])
    D = Din + Dout
    classes = {}
    for n in sorted(set(names)):
        m = names == n
        classes[n] = cm.fit_roofline(F[m], D[m], t[m], weights=WEIGHT(t[m]), peak=gpu.peak_flops,
                                     bw=gpu.hbm_bytes_per_s)
    mem = ~np.isin(names, cm.MATMUL_KERNELS)
    classes[cm.DEFAULT_CLASS] = cm.fit_roofline(np.zeros(mem.sum()), D[mem], t[mem],
                                                weights=WEIGHT(t[mem]), peak=gpu.peak_flops,
                                                bw=gpu.hbm_bytes_per_s)
    # faults: (t_x - t) = bytes / (phi * link) + o, fitted separately for input faulting
    # (bytes = inputs) and all faulting (inputs + outputs), least squares over all kernels (so
    # that the summed faulting time of an iteration comes out right)
    fault = []
    for dx, bx in ((tin - t, Din), (tpf - t, D)):
        A = np.stack([bx, np.ones_like(bx)], axis=1)
        coef, *_ = np.linalg.lstsq(A, dx, rcond=None)
        slope, over = float(coef[0]), max(0.0, float(coef[1]))
        if over == 0.0:
            slope = float(dx.sum() / bx.sum())
        fault.append((1.0 / (slope * gpu.link_bytes_per_s), over))
    wsr = {}
    for n in sorted(set(names[ws > 0])):
        m = names == n
        wsr[n] = float(ws[m].sum() / D[m].sum())
    return classes, fault, wsr


def write_params(path, classes, fault, wsr, gpu, preset_name):
    lines = ["# Kernel cost-model parameters fitted to the G10 artifact's A100 traces.",
             "# Written by benchmarks/calibrate_costmodel.py; see g10fast/workload/costmodel.py.",
             "", "[reference_gpu]", f'preset = "{preset_name}"', f'model = "{gpu.name}"',
             f"peak_tflops = {gpu.peak_flops / 1e12}", f"hbm_gbps = {gpu.hbm_bytes_per_s / 1e9}",
             f"link_gbps = {gpu.link_bytes_per_s / 1e9}", "",
             "[fault]", f"input_fraction_of_link = {fault[0][0]:.6g}",
             f"input_overhead_us = {fault[0][1] * 1e6:.6g}",
             f"all_fraction_of_link = {fault[1][0]:.6g}", f"all_overhead_us = {fault[1][1] * 1e6:.6g}", "",
             "[workspace]  # bytes of workspace per byte of kernel inputs + outputs"]
    lines += [f'"{n}" = {v:.6g}' for n, v in wsr.items()]
    lines.append("")
    for n, (ef, eb, o) in classes.items():
        lines += [f'[kernel."{n}"]', f"eff_flops = {ef:.6g}", f"eff_bytes = {eb:.6g}",
                  f"overhead_us = {o * 1e6:.6g}", ""]
    tmp = Path(str(path) + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text("\n".join(lines))
    os.replace(tmp, path)


def errors(rows, gpu, params):
    """Per kernel name and per (model, batch) errors of the estimates."""
    per_name = {}
    per_model = []
    for r in rows:
        f = r["feat"]
        K = len(f["name"])
        ef = np.empty(K)
        eb = np.empty(K)
        ov = np.empty(K)
        om = np.zeros(K)
        for k, n in enumerate(f["name"]):
            ef[k], eb[k], ov[k] = params.cls(n)
            om[k] = params.workspace_ratio.get(n, 0.0)
        D = f["bytes_in"] + f["bytes_out"]
        p = cm.roofline(f["flops"], D, gpu.peak_flops, gpu.hbm_bytes_per_s, ef, eb, ov)
        pin, ppf = cm.faulting(p, f["bytes_in"], D, gpu, params)
        pws = np.floor(om * D)
        per_model.append(dict(model=r["model"], batch=r["batch"],
                              t=(r["t"].sum(), p.sum()), tin=(r["tin"].sum(), pin.sum()),
                              tpf=(r["tpf"].sum(), ppf.sum()), ws=(r["ws"].max(), pws.max()),
                              kerr=np.median(np.abs(p / r["t"] - 1))))
        for n in set(f["name"]):
            m = np.array(f["name"]) == n
            d = per_name.setdefault(n, {"t": [], "p": []})
            d["t"].append(r["t"][m])
            d["p"].append(p[m])
    return per_name, per_model


def rel(a, b):
    return 100.0 * (b - a) / a if a else float("nan")


def simulate(artifact, model, batch, policy, estimated, gpu):
    from g10fast.run import run
    from g10fast.workload.costmodel import estimated_workload
    pol = "lru" if policy == "ideal" else policy
    cfg = genconfig(artifact, model, batch, pol)
    if policy == "ideal":
        cfg = cfg.replace(is_UVM=False)
    w = None
    if estimated:
        key = dict(PAPER)[model]
        w = estimated_workload(load_builtin_graph(key, batch), gpu)
    res = run(cfg, workload=w)
    it = res["iterations"][res["reported"]]
    return it["exe_time_cycles"], it["ideal_exe_time_cycles"]


def ranking(artifact, gpu, policies):
    out = {}
    for model, b in FIG11:
        for est in (False, True):
            vals = {}
            for pol in policies:
                t0 = time.perf_counter()
                try:
                    exe, ideal = simulate(artifact, model, b, pol, est, gpu)
                    vals[pol] = (exe, ideal)
                except InputError as e:
                    if "not implement" in str(e) or "needs" in str(e):
                        vals[pol] = None
                    else:
                        raise
                except ZeroDivisionError as e:   # engine failure: reported in the table
                    vals[pol] = f"engine error ({type(e).__name__})"
                print(f"  {model}-{b} {'estimated' if est else 'A100 traces'} {pol}: "
                      f"{vals[pol]} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
            out[(model, b, est)] = vals
    return out


def render(per_name, per_model, params, rank, gpu, policies):
    now = datetime.datetime.now().strftime("%Y-%m-%d")
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    L = ["# Cost-model calibration against the G10 artifact's A100 traces", "",
         f"Generated by `benchmarks/calibrate_costmodel.py` on {now} (commit {commit}). "
         "Do not edit by hand.", "",
         "The model (g10fast/workload/costmodel.py): per kernel, "
         "`t = max(F / (P e_F), D / (BW e_B)) + o` with per-kernel-name efficiencies, "
         f"P = {gpu.peak_flops / 1e12:g} TFLOP/s (A100 FP32), BW = {gpu.hbm_bytes_per_s / 1e9:g} GB/s; "
         "faulting times add bytes / (phi x link) + o_f with, for input faulting, "
         f"phi = {params.fault_in[0]:.4g} of the {gpu.link_bytes_per_s / 1e9:g} GB/s link and "
         f"o_f = {params.fault_in[1] * 1e3:.3g} ms, and for all faulting phi = "
         f"{params.fault_all[0]:.4g}, o_f = {params.fault_all[1] * 1e3:.3g} ms; "
         "workspace = omega x bytes for the kernel names that use one. "
         "Fitted on all 40 (model, batch) trace sets of the five paper models "
         "(time-weighted least squares of the log error).", "",
         "## Error per operator type (kernel name), ideal time", "",
         "`share`: share of the measured time of all kernels. `median |err|`: median relative "
         "error per kernel. `total err`: error of the summed time of that kernel name.", "",
         "| kernel name | kernels | share | e_F | e_B | o (us) | median abs err | total err |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tot_all = sum(np.concatenate(d["t"]).sum() for d in per_name.values())
    for n, d in sorted(per_name.items(), key=lambda kv: -np.concatenate(kv[1]["t"]).sum()):
        t = np.concatenate(d["t"])
        p = np.concatenate(d["p"])
        ef, eb, o = params.cls(n)
        fl = f"{ef:.3g}" if n in cm.MATMUL_KERNELS else "-"
        L.append(f"| {n} | {len(t)} | {100 * t.sum() / tot_all:.2f} % | {fl} | {eb:.3g} | "
                 f"{o * 1e6:.3g} | {100 * np.median(np.abs(p / t - 1)):.1f} % | "
                 f"{rel(t.sum(), p.sum()):+.1f} % |")
    L += ["", "## Error per model and batch size", "",
          "Sums over the iteration's kernels (seconds); err = (estimated - measured) / measured. "
          "Workspace: the largest per-kernel workspace (GiB).", "",
          "| model | batch | ideal: measured | estimated | err | input-faulting err | "
          "all-faulting err | max workspace measured / estimated | median abs kernel err |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in per_model:
        L.append(f"| {m['model']} | {m['batch']} | {m['t'][0]:.3f} | {m['t'][1]:.3f} | "
                 f"{rel(*m['t']):+.1f} % | {rel(*m['tin']):+.1f} % | {rel(*m['tpf']):+.1f} % | "
                 f"{m['ws'][0] / 2**30:.2f} / {m['ws'][1] / 2**30:.2f} | "
                 f"{100 * m['kerr']:.1f} % |")
    if rank:
        L += ["", "## Figure-11 workloads: policies with A100 traces vs estimated times", "",
              "Normalised performance = Ideal time / execution time of the reported iteration "
              "(as Figure 11 plots it), with the artifact's A100 traces (`traces`) and with "
              "cost-model times on the g10-artifact preset (`est.`). Ideal is the ideal time "
              "of each source. `n/a`: the policy's engine is not in this build yet.", "",
              "| workload | " + " | ".join(f"{DISPLAY[p]} traces | {DISPLAY[p]} est." for p in policies
                                          if p != "ideal") + " | ranking traces | ranking est. |",
              "|---|" + "---:|---:|" * (len([p for p in policies if p != "ideal"])) + "---|---|"]
        for model, b in FIG11:
            cells = []
            orders = []
            for est in (False, True):
                vals = rank[(model, b, est)]
                ideal = vals.get("ideal") if isinstance(vals.get("ideal"), tuple) else None
                perf = {}
                for p in policies:
                    if p == "ideal" or not isinstance(vals.get(p), tuple):
                        continue
                    exe, id_c = vals[p]
                    perf[p] = (ideal[0] if ideal else id_c) / exe
                orders.append(" > ".join(DISPLAY[p] for p in sorted(perf, key=lambda q: -perf[q])))
                cells.append(perf)
            row = []
            for p in policies:
                if p == "ideal":
                    continue
                for est, perf in zip((False, True), cells):
                    v = rank[(model, b, est)].get(p)
                    row.append(f"{perf[p]:.4f}" if p in perf else (v if isinstance(v, str) else "n/a"))
            same = "same" if orders[0] == orders[1] else "differs"
            L.append(f"| {model}-{b} | " + " | ".join(row) + f" | {orders[0]} | {orders[1]} ({same}) |")
    L.append("")
    return "\n".join(L)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifact")
    ap.add_argument("--ranking", action="store_true", help="also simulate the Figure-11 workloads")
    ap.add_argument("--policies", default=",".join(POLICY_ORDER + ["ideal"]))
    ap.add_argument("--out", default=str(ROOT / "docs" / "costmodel-calibration.md"))
    ap.add_argument("--params", default=str(ROOT / "data" / "costmodel" / "a100.toml"))
    a = ap.parse_args(argv)
    artifact = find_artifact(a.artifact)
    preset = load_preset("g10-artifact")
    gpu = cm.gpu_from_preset(preset, 4)
    t0 = time.perf_counter()
    rows = collect(artifact)
    print(f"read {len(rows)} trace sets in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    classes, fault, wsr = fit(rows, gpu)
    write_params(a.params, classes, fault, wsr, gpu, "g10-artifact")
    params = cm.load_params(a.params)
    per_name, per_model = errors(rows, gpu, params)
    policies = [p for p in a.policies.split(",") if p]
    rank = ranking(artifact, gpu, policies) if a.ranking else None
    text = render(per_name, per_model, params, rank, gpu, policies)
    tmp = a.out + ".tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, a.out)
    print(f"wrote {a.params} and {a.out} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
