"""How much a point's result depends on the artifact's arbitrary orders (simulator O-18,
planner O-20): rerun it under other orders and see whether the artifact's number lies in the
spread.

    python benchmarks/order_sensitivity.py FIGURES_DIR/agreement.csv [--g10 DIR]
                                           [--threshold 0.02] [--orders 3]

The artifact walks each kernel's tensors in `unordered_set<Tensor*>` order (pointer hashes,
different from run to run and machine to machine) and, for DeepUM+, issues a kernel's
look-ahead hints in that order too. g10fast fixes one order (ascending tensor ids). For every
distinct point with an `exe_time` row over the threshold (or failing on one side only), this
runs the point again under other orders, each a fixed draw: descending ids, then seeded
random permutations of each kernel's inputs and of its output-only tensors (page engine;
DeepUM+: the hints of each kernel permuted with the same draw) or the tensor engine's other
required orders (`ascending`, `descending`). Appends one JSON line per point to
benchmarks/results/order_sensitivity.jsonl: the reported `exe_time` under each order, the
spread, and whether the artifact's value lies within it (widened by the threshold's half).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.config import genconfig  # noqa: E402
from g10fast.run import build_workload, policy_of, run  # noqa: E402

LABEL = re.compile(
    r"^(?P<m>[^/]+)/(?P<b>\d+)/(?P<pol>\S+)"
    r"(?: host (?P<host>[\d.]+) GiB| ssd (?P<ssd>[\d.]+) GB/s"
    r"| var (?P<var>[\d.]+))? (?P<what>exe_time|ideal/exe)$"
)


def points_over(path, threshold):
    """Distinct points (model, batch, policy, host, ssd, var) with an exe_time row over the
    threshold or failing on one side only, with the artifact's value."""
    out = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["relative_error"] == "":
                continue
            err = float(r["relative_error"])
            if not (err > threshold):
                continue
            m = LABEL.match(r["point"])
            if not m or m["what"] != "exe_time" or m["pol"] == "ideal":
                continue
            key = (
                m["m"],
                int(m["b"]),
                m["pol"],
                None if m["host"] is None else float(m["host"]),
                None if m["ssd"] is None else float(m["ssd"]),
                None if m["var"] is None else float(m["var"]),
            )
            art = math.inf if r["artifact"] == "inf" else float(r["artifact"])
            out.setdefault(key, {"figures": [], "artifact": art, "g10fast": r["g10fast"]})
            out[key]["figures"].append(r["figure"])
    return out


def config_for(art, key):
    m, b, pol, host, ssd, var = key
    kw = {}
    if host is not None:
        kw["host_mem_gb"] = host
    if ssd is not None:
        kw.update(ssd_gbps=ssd, pcie_gbps=32.0)
    if var is not None:
        kw["kernel_time_std_dev"] = var
    return genconfig(art, m, b, pol, **kw)


def _perm_order(w, rng):
    """A per-kernel (inputs, outputs) order: each kernel's inputs and its outputs that are not
    inputs, each permuted by rng (None: descending ids)."""
    order = []
    for k in range(w.num_kernels):
        ins = np.asarray(w.inputs(k))
        outs = np.asarray(w.outputs(k))
        oo = outs[~np.isin(outs, ins)]
        if rng is None:
            order.append((ins[::-1].tolist(), oo[::-1].tolist()))
        else:
            order.append((rng.permutation(ins).tolist(), rng.permutation(oo).tolist()))
    return order


def _perm_hints(plan, order):
    """DeepUM+: each kernel's hints in the order its tensors take in `order` (the artifact
    issues them walking the same hash set)."""
    h = plan.hints
    rank = {}
    for k, (ins, oo) in enumerate(order):
        for i, t in enumerate(list(ins) + list(oo)):
            rank.setdefault((k, t), i)
    K = plan.num_kernels
    keys = [(int(r[0]), rank.get((int(r[0]) % K, int(r[1])), 1 << 30), i) for i, r in enumerate(h)]
    idx = [i for _, _, i in sorted(keys)]
    return dataclasses.replace(plan, hints=h[idx])


def reported_exe(res):
    if res.get("status") != "ok" or res.get("reported") is None:
        return math.inf
    return int(res["iterations"][res["reported"]]["exe_time_cycles"])


def runs(cfg, policy, n_orders):
    """[(order name, reported exe_time or inf)] for the default order and the others."""
    from g10fast.engine.tensor import TensorOptions

    out = []
    w = build_workload(cfg)
    out.append(("default", reported_exe(run(cfg, workload=w))))
    if policy in ("FlashNeuron", "G10GDSSSD", "G10GDSFULL"):
        import dataclasses
        from g10fast.spec import from_g10_config

        spec = from_g10_config(cfg)
        for name in ("ascending", "descending"):
            opts = dataclasses.asdict(TensorOptions(required_order=name, prefetch_order=name))
            eng = dataclasses.replace(spec.engine, compat=tuple(sorted(opts.items())))
            res = run(spec.replace(engine=eng), workload=w)
            out.append((name, reported_exe(res)))
        return out
    plan = None
    if cfg.use_prefetch:
        from g10fast.run import plan_of

        plan = plan_of(cfg, w)
    for i in range(n_orders):
        rng = None if i == 0 else np.random.default_rng(i)
        order = _perm_order(w, rng)
        p = plan
        if plan is not None and policy == "deepUM":
            p = _perm_hints(plan, order)
        res = run(cfg, workload=w, plan=p, required_order=order)
        out.append(("descending" if i == 0 else f"random{i}", reported_exe(res)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("agreement")
    ap.add_argument("--g10", default=str(ROOT.parent / "shared" / "g10-artifact"))
    ap.add_argument("--threshold", type=float, default=0.02)
    ap.add_argument("--orders", type=int, default=3)
    ap.add_argument("--only", help="comma-separated model/batch/policy to keep")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "order_sensitivity.jsonl"))
    a = ap.parse_args(argv)
    art = Path(a.g10)
    pts = points_over(a.agreement, a.threshold)
    if a.only:
        keep = set(a.only.split(","))
        pts = {k: v for k, v in pts.items() if f"{k[0]}/{k[1]}/{k[2]}" in keep}
    print(f"{len(pts)} points over {a.threshold:.0%}", file=sys.stderr)
    for key, info in sorted(pts.items(), key=lambda kv: str(kv[0])):
        t0 = time.perf_counter()
        cfg = config_for(art, key)
        res = runs(cfg, policy_of(cfg), a.orders)
        vals = [v for _, v in res]
        fin = [v for v in vals if math.isfinite(v)]
        artv = info["artifact"]
        lo = min(fin) if fin else math.inf
        hi = max(fin) if fin else math.inf
        half = a.threshold / 2
        if math.isinf(artv):
            covered = any(math.isinf(v) for v in vals)
        else:
            covered = bool(fin) and lo * (1 - half) <= artv <= hi * (1 + half)
        rec = {
            "benchmark": "order_sensitivity",
            "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "model": key[0],
            "batch": key[1],
            "policy": key[2],
            "host_gb": key[3],
            "ssd_gbps": key[4],
            "kernel_time_std_dev": key[5],
            "figures": sorted(set(info["figures"])),
            "artifact": artv,
            "exe_by_order": dict(res),
            "spread": (hi - lo) / lo if fin and lo > 0 else None,
            "artifact_within_spread": covered,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(json.dumps(rec), file=sys.stderr)
        with open(a.out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
