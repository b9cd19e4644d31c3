"""Calibrate the kernel-time cost model against the G10 artifact's A100 traces.

    python benchmarks/calibrate_costmodel.py [--artifact DIR] [--ranking] [--policies lru,ideal]
                                             [--families held-out|all]

1. Reads, for the five paper models and every batch size with traces, the built-in model's
   kernels (FLOPs, bytes) and the measured times (cudnn<B>.txt, InputPF, PF, Workspace).
2. Fits per kernel name the roofline efficiencies and overhead, the fault rate, and the
   workspace ratios (g10fast.workload.costmodel); writes data/costmodel/a100.toml.
3. Writes docs/costmodel-calibration.md: error per kernel name (operator type) and per
   model and batch size.
4. With --ranking: simulates the Figure-11 workloads under every policy with the A100
   traces and with estimated times, and adds the normalised performance side by side:
   one table for the cost model as shipped (`--families all`) and one for family lines
   refitted without the workload's own trace set (`--families held-out`, the default).
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

PAPER = [
    ("BERT", "bert-base"),
    ("VIT", "vit"),
    ("Inceptionv3", "inceptionv3"),
    ("ResNet152", "resnet152"),
    ("SENet154", "senet154"),
]
FIG11 = [("BERT", 256), ("VIT", 1280), ("Inceptionv3", 1536), ("ResNet152", 1280), ("SENet154", 1024)]
WEIGHT = np.sqrt  # fit weight per kernel: sqrt of its measured time
POLICY_ORDER = ["lru", "FlashNeuron", "deepUM", "G10GDSSSD", "G10GDSFULL", "prefetch_lru"]
DISPLAY = {
    "lru": "Base UVM",
    "FlashNeuron": "FlashNeuron",
    "deepUM": "DeepUM+",
    "G10GDSSSD": "G10-GDS",
    "G10GDSFULL": "G10-Host",
    "prefetch_lru": "G10",
    "ideal": "Ideal",
}


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
            rows.append(
                dict(
                    model=model,
                    batch=b,
                    feat=f,
                    keys=cm.family_keys(g, f["flops"]),
                    t=read_trace_file(tp["orig_kernel_time_file"], K, "ms") * 1e-3,
                    tin=read_trace_file(tp["input_pf_kernel_time_file"], K, "ms") * 1e-3,
                    tpf=read_trace_file(tp["pf_kernel_time_file"], K, "ms") * 1e-3,
                    ws=read_trace_file(tp["workspace_size_file"], K, "B"),
                )
            )
    return rows


PLATEAU_S = 0.02  # a family whose batch-independent time exceeds this (and half its time)


def family_sums(rows):
    """-> {(key, model, batch): array [n, Sx, Sxx, Sy_q, Sxy_q for q in t, tin, tpf, ws]}."""
    out = {}
    for r in rows:
        x = float(r["batch"])
        ys = (r["t"], r["tin"], r["tpf"], r["ws"].astype(np.float64))
        for k, key in enumerate(r["keys"]):
            a = out.get((key, r["model"], r["batch"]))
            if a is None:
                a = out[(key, r["model"], r["batch"])] = np.zeros(3 + 2 * len(ys))
            a[0] += 1
            a[1] += x
            a[2] += x * x
            for q, y in enumerate(ys):
                a[3 + 2 * q] += y[k]
                a[4 + 2 * q] += x * y[k]
    return out


def _line(n, sx, sxx, sy, sxy):
    det = n * sxx - sx * sx
    if det <= 1e-9 * n * sxx:
        return 0.0, sy / sx
    b = (n * sxy - sx * sy) / det
    a = (sy - b * sx) / n
    if a < 0:
        return 0.0, sxy / sxx
    if b < 0:
        return sy / n, 0.0
    return a, b


def fit_families(sums, exclude=None):
    """Family lines q = a + b * batch from the per-group sums, leaving out the groups of
    `exclude` = (model, batch); -> {key: 8 floats}."""
    tot = {}
    for (key, model, batch), a in sums.items():
        if exclude is not None and (model, batch) == exclude:
            continue
        if key in tot:
            tot[key] = tot[key] + a
        else:
            tot[key] = a.copy()
    fams = {}
    for key, a in tot.items():
        n, sx, sxx = a[0], a[1], a[2]
        v = []
        for q in range(4):
            v.extend(_line(n, sx, sxx, a[3 + 2 * q], a[4 + 2 * q]))
        fams[key] = tuple(float(x) for x in v)
    return fams


def plateau_families(fams, rows):
    bmax = {}
    for r in rows:
        for key in r["keys"]:
            bmax[key] = max(bmax.get(key, 0), r["batch"])
    return {k for k, v in fams.items() if v[0] > PLATEAU_S and v[0] > 0.5 * (v[0] + v[1] * bmax.get(k, 0))}


def fit(rows, gpu, plateau):
    names = np.concatenate([np.array(r["feat"]["name"]) for r in rows])
    F = np.concatenate([r["feat"]["flops"] for r in rows])
    Din = np.concatenate([r["feat"]["bytes_in"] for r in rows])
    Dout = np.concatenate([r["feat"]["bytes_out"] for r in rows])
    t = np.concatenate([r["t"] for r in rows])
    tin = np.concatenate([r["tin"] for r in rows])
    tpf = np.concatenate([r["tpf"] for r in rows])
    ws = np.concatenate([r["ws"] for r in rows])
    keep = ~np.concatenate([np.array([k in plateau for k in r["keys"]], dtype=bool) for r in rows])
    names, F, Din, Dout, t, tin, tpf, ws = (x[keep] for x in (names, F, Din, Dout, t, tin, tpf, ws))
    D = Din + Dout
    classes = {}
    for n in sorted(set(names)):
        m = names == n
        classes[n] = cm.fit_roofline(
            F[m], D[m], t[m], weights=WEIGHT(t[m]), peak=gpu.peak_flops, bw=gpu.hbm_bytes_per_s
        )
    mem = ~np.isin(names, cm.MATMUL_KERNELS)
    classes[cm.DEFAULT_CLASS] = cm.fit_roofline(
        np.zeros(mem.sum()),
        D[mem],
        t[mem],
        weights=WEIGHT(t[mem]),
        peak=gpu.peak_flops,
        bw=gpu.hbm_bytes_per_s,
    )
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
    lines = [
        "# Kernel cost-model parameters fitted to the G10 artifact's A100 traces.",
        "# Written by benchmarks/calibrate_costmodel.py; see g10fast/workload/costmodel.py.",
        "",
        "[reference_gpu]",
        f'preset = "{preset_name}"',
        f'model = "{gpu.name}"',
        f"peak_tflops = {gpu.peak_flops / 1e12}",
        f"hbm_gbps = {gpu.hbm_bytes_per_s / 1e9}",
        f"link_gbps = {gpu.link_bytes_per_s / 1e9}",
        "",
        "[fault]",
        f"input_fraction_of_link = {fault[0][0]:.6g}",
        f"input_overhead_us = {fault[0][1] * 1e6:.6g}",
        f"all_fraction_of_link = {fault[1][0]:.6g}",
        f"all_overhead_us = {fault[1][1] * 1e6:.6g}",
        "",
        "[workspace]  # bytes of workspace per byte of kernel inputs + outputs",
    ]
    lines += [f'"{n}" = {v:.6g}' for n, v in wsr.items()]
    lines.append("")
    for n, (ef, eb, o) in classes.items():
        lines += [
            f'[kernel."{n}"]',
            f"eff_flops = {ef:.6g}",
            f"eff_bytes = {eb:.6g}",
            f"overhead_us = {o * 1e6:.6g}",
            "",
        ]
    tmp = Path(str(path) + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text("\n".join(lines))
    os.replace(tmp, path)


def predict(r, gpu, params, fams):
    """Estimates for one trace set: roofline, then the family lines of `fams` where known."""
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
    B = float(r["batch"])
    for k, key in enumerate(r["keys"] if fams else ()):
        v = fams.get(key)
        if v is None:
            continue
        p[k] = max(v[0] + v[1] * B, 1e-7)
        pin[k] = max(v[2] + v[3] * B, p[k])
        ppf[k] = max(v[4] + v[5] * B, pin[k])
        pws[k] = max(0.0, np.floor(v[6] + v[7] * B))
    return p, pin, ppf, pws


def errors(rows, gpu, params, sums):
    """Per kernel name and per (model, batch) errors of three estimates: families fitted on
    all trace sets (`in`), families fitted without the trace set's own (model, batch)
    (`held`, what a batch size without a trace gets) and the roofline alone (`roof`, what
    any other GPU gets)."""
    per_name = {}
    per_model = []
    for r in rows:
        f = r["feat"]
        held = fit_families(sums, exclude=(r["model"], r["batch"]))
        est = {
            "in": predict(r, gpu, params, params.families),
            "held": predict(r, gpu, params, held),
            "roof": predict(r, gpu, params, None),
        }
        ph = est["held"]
        per_model.append(
            dict(
                model=r["model"],
                batch=r["batch"],
                t=(r["t"].sum(), est["in"][0].sum()),
                held=(r["t"].sum(), ph[0].sum()),
                roof=(r["t"].sum(), est["roof"][0].sum()),
                tin=(r["tin"].sum(), ph[1].sum()),
                tpf=(r["tpf"].sum(), ph[2].sum()),
                ws=(r["ws"].max(), ph[3].max()),
                kerr=np.median(np.abs(ph[0] / r["t"] - 1)),
            )
        )
        names = np.array(f["name"])
        for n in set(f["name"]):
            m = names == n
            d = per_name.setdefault(n, {"t": [], "held": [], "roof": []})
            d["t"].append(r["t"][m])
            d["held"].append(ph[0][m])
            d["roof"].append(est["roof"][0][m])
    return per_name, per_model


def rel(a, b):
    return 100.0 * (b - a) / a if a else float("nan")


def simulate(artifact, model, batch, policy, gpu, params):
    """One run with cost-model times (params: with the families held out for this batch)."""
    from g10fast.run import run
    from g10fast.workload.costmodel import estimated_workload

    pol = "lru" if policy == "ideal" else policy
    cfg = genconfig(artifact, model, batch, pol)
    if policy == "ideal":
        cfg = cfg.replace(is_UVM=False)
    w = estimated_workload(load_builtin_graph(dict(PAPER)[model], batch), gpu, params=params)
    res = run(cfg, workload=w)
    if res.get("status") != "ok" or res.get("reported") is None:
        f = res.get("failure") or {}
        raise PolicyFailed(f"{f.get('stage', '?')}: {f.get('reason', f)}")
    it = res["iterations"][res["reported"]]
    return it["exe_time_cycles"], it["ideal_exe_time_cycles"]


class PolicyFailed(Exception):
    """The policy cannot run the workload (FlashNeuron: weights + working set do not fit)."""


ART_NAMES = {"ViT": "VIT"}
ART_POLICIES = ["lru", "FlashNeuron", "deepUM", "G10GDSSSD", "G10GDSFULL", "prefetch_lru", "ideal"]


def artifact_results(artifact):
    """The artifact's A100-trace results (example_results/overall_performance/all.base.txt):
    {(model, batch): {policy: cycles or None (inf: the policy failed)}}."""
    path = artifact / "example_results" / "overall_performance" / "all.base.txt"
    out = {}
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if "|B = " in ln:
            parts = ln.split("|")
            model = ART_NAMES.get(parts[0], parts[0])
            b = int(parts[1].split("=")[1])
            vals = lines[i + 1].split()
            out[(model, b)] = {p: (None if v == "inf" else int(v)) for p, v in zip(ART_POLICIES, vals)}
    return out


HELD_OUT = "batch held out"
ALL_SETS = "all trace sets"


def read_ranking(store) -> dict:
    """The recorded estimated-times runs: {(model, batch, policy, families): record}."""
    import json

    done = {}
    if store.exists():
        for ln in store.read_text().splitlines():
            d = json.loads(ln)
            done[(d["model"], d["batch"], d["policy"], d.get("families", HELD_OUT))] = d
    return done


def ranking(artifact, gpu, params, sums, policies, store, only=None, families=HELD_OUT):
    """Estimated-times side of the Figure-11 comparison; every finished run is appended to
    `store` (JSON lines) and not repeated, so the table can be built up over several calls.
    families: HELD_OUT (the family lines refitted without the workload's own trace set) or
    ALL_SETS (the cost model as shipped: data/costmodel's lines, fitted on every trace set)."""
    import dataclasses
    import json

    done = read_ranking(store)
    for model, b in FIG11:
        if only and f"{model}-{b}" not in only:
            continue
        p = (
            dataclasses.replace(params, families=fit_families(sums, exclude=(model, b)))
            if families == HELD_OUT
            else params
        )
        for pol in policies:
            if (model, b, pol, families) in done:
                continue
            t0 = time.perf_counter()
            d = {"model": model, "batch": b, "policy": pol, "kernel_times": "estimated", "families": families}
            try:
                exe, ideal = simulate(artifact, model, b, pol, gpu, p)
                d.update(exe_time_cycles=int(exe), ideal_exe_time_cycles=int(ideal))
            except (InputError, ZeroDivisionError, PolicyFailed) as e:
                d.update(error=f"{type(e).__name__}: {e}")
            d["wall_s"] = round(time.perf_counter() - t0, 1)
            print(f"  {model}-{b} estimated {pol}: {d}", file=sys.stderr)
            with open(store, "a") as f:
                f.write(json.dumps(d) + "\n")
            done[(model, b, pol, families)] = d
    return done


def render(per_name, per_model, params, rank, art, gpu, policies, nplateau):
    now = datetime.datetime.now().strftime("%Y-%m-%d")
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = "?"
    nf = len(params.families or {})
    L = [
        "# Cost-model calibration against the G10 artifact's A100 traces",
        "",
        f"Generated by `benchmarks/calibrate_costmodel.py` on {now} (commit {commit}). Do not edit by hand.",
        "",
        "The model (g10fast/workload/costmodel.py) has two parts.",
        "",
        f"1. **Family lines** (the reference GPU only): {nf} families, a family being a kernel "
        "name with its shape per sample (FLOPs, weight sizes, activation sizes); per family "
        "time, input-faulting time, all-faulting time and workspace are each `a + b x batch`, "
        "least squares over the trace sets that contain it "
        "(data/costmodel/a100-families.tsv). The artifact's CNN traces need this: "
        f"{nplateau} families are *plateaus*, a fixed cost of ~0.6 s (Conv2d_Forward, "
        "Conv2d_Backward_Input) or ~0.12 s (Conv2d_Backward_Weight) at every batch size, "
        "for the same layer shapes in every trace (e.g. all 36 ResNet-152 1x1 256->1024 "
        "forward convolutions, but none of the 35 1x1 1024->256 ones). They make the CNN "
        "iteration times almost flat in the batch (ResNet-152: 106 s at 256, 114 s at "
        "2048) and are not predictable from FLOPs or bytes.",
        "2. **Roofline** (every kernel on any other GPU, and kernels of unknown families): "
        "`t = max(F / (P e_F), D / (BW e_B)) + o` with per-kernel-name efficiencies, "
        f"P = {gpu.peak_flops / 1e12:g} TFLOP/s (A100 FP32), BW = {gpu.hbm_bytes_per_s / 1e9:g} GB/s, "
        "fitted on the kernels of non-plateau families only (time-weighted least squares of "
        "the log error); faulting times add bytes / (phi x link) + o_f with, for input "
        f"faulting, phi = {params.fault_in[0]:.4g} of the {gpu.link_bytes_per_s / 1e9:g} GB/s "
        f"link and o_f = {params.fault_in[1] * 1e3:.3g} ms, and for all faulting phi = "
        f"{params.fault_all[0]:.4g}, o_f = {params.fault_all[1] * 1e3:.3g} ms; "
        "workspace = omega x bytes for the kernel names that use one.",
        "",
        "Errors are reported three ways. `held out`: family lines refitted without the "
        "trace set being scored (its model at that batch), i.e. a prediction for a batch "
        "size whose trace is not used; this is the headline number. `in-sample`: all trace "
        "sets used. `roofline`: the roofline alone, as any GPU other than the reference gets "
        "it; on the CNNs it misses the plateaus by construction (it estimates what the "
        "kernels should cost, not the artifact's profiler's fixed costs).",
        "",
        "## Error per operator type (kernel name), ideal time",
        "",
        "`share`: share of the measured time of all kernels. `median |err|`: median relative "
        "error per kernel. `total err`: error of the summed time of that kernel name.",
        "",
        "| kernel name | kernels | share | e_F | e_B | o (us) | median abs err (held out) | "
        "total err (held out) | total err (roofline) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    tot_all = sum(np.concatenate(d["t"]).sum() for d in per_name.values())
    for n, d in sorted(per_name.items(), key=lambda kv: -np.concatenate(kv[1]["t"]).sum()):
        t = np.concatenate(d["t"])
        p = np.concatenate(d["held"])
        q = np.concatenate(d["roof"])
        ef, eb, o = params.cls(n)
        fl = f"{ef:.3g}" if n in cm.MATMUL_KERNELS else "-"
        L.append(
            f"| {n} | {len(t)} | {100 * t.sum() / tot_all:.2f} % | {fl} | {eb:.3g} | "
            f"{o * 1e6:.3g} | {100 * np.median(np.abs(p / t - 1)):.1f} % | "
            f"{rel(t.sum(), p.sum()):+.1f} % | {rel(t.sum(), q.sum()):+.1f} % |"
        )
    L += [
        "",
        "## Error per model and batch size",
        "",
        "Sums over the iteration's kernels (seconds); err = (estimated - measured) / measured. "
        "Faulting and workspace columns: held out. Workspace: the largest per-kernel "
        "workspace (GiB).",
        "",
        "| model | batch | ideal: measured | held out | err held out | err in-sample | "
        "err roofline | input-faulting err | all-faulting err | max workspace measured / "
        "estimated | median abs kernel err |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in per_model:
        L.append(
            f"| {m['model']} | {m['batch']} | {m['t'][0]:.3f} | {m['held'][1]:.3f} | "
            f"{rel(*m['held']):+.1f} % | {rel(*m['t']):+.1f} % | {rel(*m['roof']):+.1f} % | "
            f"{rel(*m['tin']):+.1f} % | {rel(*m['tpf']):+.1f} % | "
            f"{m['ws'][0] / 2**30:.2f} / {m['ws'][1] / 2**30:.2f} | "
            f"{100 * m['kerr']:.1f} % |"
        )
    if rank is not None:
        pols = [p for p in ART_POLICIES if p in policies]
        L += [
            "",
            "## Figure-11 workloads: policies with A100 traces vs estimated times",
            "",
            "Normalised performance = Ideal time / execution time of the reported iteration "
            "(as Figure 11 plots it). `traces`: the artifact's own results with its A100 "
            "traces (example_results/overall_performance/all.base.txt; g10fast's engines "
            "reproduce them, benchmarks/results/fig11_*.jsonl). `est.`: g10fast with "
            "cost-model times on the g10-artifact preset, Ideal from the same source; two "
            "tables, by how the family lines were fitted. "
            "`fails`: FlashNeuron cannot run the workload (the artifact reports inf). "
            "`not run`: not simulated in the time available (see below). Rankings list "
            "the policies from fastest to slowest; the verdict compares the order of the "
            "policies that complete under both sources; ties (equal times, e.g. G10 = Ideal) "
            "are listed in the order of the columns. Why the G10 variants can swap places "
            "under changes of a fraction of a per cent of single kernel times, in the traces "
            "themselves: docs/ranking-sensitivity.md.",
        ]
        for fam, title in (
            (
                ALL_SETS,
                "### The cost model as shipped (family lines fitted on "
                "every trace set: what `estimated_workload` gives)",
            ),
            (
                HELD_OUT,
                "### Held out (family lines refitted without the "
                "workload's own trace set: a prediction for a batch without a "
                "trace)",
            ),
        ):
            if any(k[3] == fam for k in rank):
                L += ["", title, ""] + _ranking_table(rank, fam, art, pols)
        walls = [d.get("wall_s", 0) for d in rank.values()]
        L += [
            "",
            f"Estimated-times runs recorded: {len(rank)} "
            f"(benchmarks/results/ranking_estimated.jsonl), {sum(walls):.0f} s of "
            "simulation on a shared 2-core machine.",
        ]
    L.append("")
    return "\n".join(L)


def _ranking_table(rank, fam, art, pols) -> list:
    """The Markdown rows of the ranking table for the runs of one family fit."""
    shown = [p for p in pols if p != "ideal"]
    L = [
        "| workload | "
        + " | ".join(f"{DISPLAY[p]} traces | {DISPLAY[p]} est." for p in shown)
        + " | ranking traces | ranking est. |",
        "|---|" + "---:|---:|" * len(shown) + "---|---|",
    ]
    for model, b in FIG11:
        tr = art.get((model, b), {})
        perf_t = {p: tr["ideal"] / tr[p] for p in shown if tr.get(p) and tr.get("ideal")}
        est = {p: rank.get((model, b, p, fam)) for p in pols}
        ide = est.get("ideal")
        perf_e = {}
        for p in shown:
            d = est.get(p)
            if d and "exe_time_cycles" in d and ide and "exe_time_cycles" in ide:
                perf_e[p] = ide["exe_time_cycles"] / d["exe_time_cycles"]
        row = []
        for p in shown:
            row.append(f"{perf_t[p]:.4f}" if p in perf_t else "fails")
            d = est.get(p)
            if p in perf_e:
                row.append(f"{perf_e[p]:.4f}")
            elif d and "error" in d:
                row.append("fails" if d["error"].startswith("PolicyFailed") else d["error"].split(":")[0])
            else:
                row.append("not run")
        o_t = [DISPLAY[p] for p in sorted(perf_t, key=lambda q: -perf_t[q])]
        o_e = [DISPLAY[p] for p in sorted(perf_e, key=lambda q: -perf_e[q])]
        complete = len(perf_e) == len(
            [p for p in shown if est.get(p) is not None and "error" not in est[p]]
        ) and all(est.get(p) is not None for p in pols)
        if not perf_e:
            verdict = "not run"
        elif not complete:
            verdict = "incomplete"
        else:
            common = set(perf_t) & set(perf_e)
            c_t = [p for p in sorted(common, key=lambda q: -perf_t[q])]
            c_e = [p for p in sorted(common, key=lambda q: -perf_e[q])]
            verdict = "same" if c_t == c_e else "differs"
            if set(perf_t) != set(perf_e):
                verdict += " over the policies both complete"
        L.append(
            f"| {model}-{b} | " + " | ".join(row) + f" | {' > '.join(o_t)} | {' > '.join(o_e)} ({verdict}) |"
        )
    return L


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifact")
    ap.add_argument(
        "--ranking", action="store_true", help="also simulate the Figure-11 workloads with estimated times"
    )
    ap.add_argument(
        "--workloads",
        help="comma-separated Figure-11 workloads to simulate (e.g. BERT-256,VIT-1280); default all",
    )
    ap.add_argument("--policies", default=",".join(ART_POLICIES))
    ap.add_argument(
        "--families",
        choices=("held-out", "all"),
        default="held-out",
        help="with --ranking: family lines refitted without the workload's own "
        "trace set (held-out), or the shipped ones fitted on all (all)",
    )
    ap.add_argument("--out", default=str(ROOT / "docs" / "costmodel-calibration.md"))
    ap.add_argument("--params", default=str(ROOT / "data" / "costmodel" / "a100.toml"))
    ap.add_argument("--store", default=str(ROOT / "benchmarks" / "results" / "ranking_estimated.jsonl"))
    a = ap.parse_args(argv)
    artifact = find_artifact(a.artifact)
    preset = load_preset("g10-artifact")
    gpu = cm.gpu_from_preset(preset, 4)
    t0 = time.perf_counter()
    rows = collect(artifact)
    print(f"read {len(rows)} trace sets in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    sums = family_sums(rows)
    fams = fit_families(sums)
    plateau = plateau_families(fams, rows)
    classes, fault, wsr = fit(rows, gpu, plateau)
    write_params(a.params, classes, fault, wsr, gpu, "g10-artifact")
    cm.write_families(
        cm.families_path(a.params),
        fams,
        "Kernel families of the G10 artifact's A100 traces: q = a + b * batch.\n"
        "Written by benchmarks/calibrate_costmodel.py; see "
        "g10fast/workload/costmodel.py.\nkey = name|FLOPs per sample|weight "
        "sizes|activation sizes per sample",
    )
    params = cm.load_params(a.params)
    per_name, per_model = errors(rows, gpu, params, sums)
    policies = [p for p in a.policies.split(",") if p]
    store = Path(a.store)
    rank = None
    if a.ranking:
        only = set(a.workloads.split(",")) if a.workloads else None
        fam = ALL_SETS if a.families == "all" else HELD_OUT
        ranking(artifact, gpu, params, sums, policies, store, only, fam)
    if store.exists():
        rank = read_ranking(store)
    art = artifact_results(artifact)
    text = render(per_name, per_model, params, rank, art, gpu, policies, len(plateau))
    tmp = a.out + ".tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, a.out)
    print(f"wrote {a.params} and {a.out} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
