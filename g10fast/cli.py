"""The `g10fast` command line.

    g10fast run CONFIG [--g10-root DIR] [--json] [--trace FILE.h5]
    g10fast run --g10 ARTIFACT_DIR --model BERT --batch 128 --policy lru [--host-mem-gb N ...]
    g10fast run ... --policy prefetch_lru [--plan OUT.csv] [--plan-in IN.csv] [--figure OUT.png]
    g10fast run                      (the default comparison: a built-in model, all policies)
    g10fast run FILE.toml            (a TOML run file, docs/run-format.md)
    g10fast models [--batch N]       (built-in models and their footprint)
    g10fast trace inspect FILE.h5 [--allow-incomplete]
    g10fast trace verify FILE.h5
    g10fast store verify STORE       (every point checked against its checksum)
    g10fast store convert OLD.h5 NEW (a version-1 HDF5 store into a version-2 store)
    g10fast results export STORE --out points.csv|points.parquet
    g10fast sweep MATRIX --store FILE.h5 [--g10 ARTIFACT_DIR] [--workers N] [--dask ADDRESS]
                  [--no-reuse]
    g10fast figures STORE.h5 --out DIR [--g10 ARTIFACT_DIR]
    g10fast reproduce --g10 ARTIFACT_DIR [--store FILE.h5] [--out DIR]

Bad input (missing file, malformed line, unknown key, impossible setting) prints one
message naming the file and line or the parameter, and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from g10fast.errors import InputError

EXIT_BAD_INPUT = 2


def _find_artifact() -> Path | None:
    """../shared/g10-artifact next to the checkout or the working directory, or $G10_ARTIFACT."""
    env = os.environ.get("G10_ARTIFACT")
    cands = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[1]
    cands += [here.parent / "shared" / "g10-artifact", Path.cwd().parent / "shared" / "g10-artifact",
              Path.cwd() / "shared" / "g10-artifact"]
    for c in cands:
        if (c / "frontend" / "Nets").is_dir():
            return c
    return None


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal, or forced)."""

    def __init__(self, label: str, enabled: bool):
        self.label = label
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < total and now - self.last < 0.2:
            return
        self.last = now
        frac = done / total if total else 1.0
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        el = now - self.t0
        eta = el / frac - el if frac > 0 else float("nan")
        sys.stderr.write(f"\r{self.label} [{bar}] {100 * frac:5.1f}%  {el:6.1f}s"
                         f"  eta {eta:5.1f}s ")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _fmt_cycles(c: int) -> str:
    return f"{c:,} cycles ({c / 1.2e9:.3f} s at 1.2 GHz)"


def summary_text(res: dict, note: str | None = None) -> str:
    lines = []
    if note:
        lines.append(note)
    w = res["workload"]
    lines.append(f"{res['model']}  batch {res['batch_size']}  policy {res['policy']}  "
                 f"({w['kernels']} kernels, {w['tensors']} tensors, "
                 f"{w['footprint_bytes'] / 2**30:.1f} GiB = {100 * w['overcommitment']:.0f}% of GPU)")
    if res.get("status") == "failed":
        lines.append(failure_text(res))
    for it in res["iterations"]:
        mark = "  <- reported" if it["iteration"] == res["reported"] else ""
        pg = it["pages"]
        lines.append(f"iteration {it['iteration']}{mark}")
        lines.append(f"  execution time   {_fmt_cycles(it['exe_time_cycles'])}")
        if "exe_time_ms" in it:
            lines.append(f"  (tensor engine, one iteration: {it['exe_time_ms']:.6g} ms, "
                         f"stall {it['stall_ms']:.6g} ms, overlap {it['overlap_ms']:.6g} ms)")
        lines.append(f"  ideal            {_fmt_cycles(it['ideal_exe_time_cycles'])}   "
                     f"slowdown {it['slowdown']:.4f}")
        lines.append(f"  stall / overlap / compute   {it['stall_cycles']:,} / "
                     f"{it['overlap_cycles']:,} / {it['compute_cycles']:,}")
        lines.append(f"  page faults  host {it['cpu_pf']:,}  SSD {it['ssd_pf']:,}  "
                     f"unallocated {it['unalloc_pf']:,}  in transfer {it['in_transfer']:,}")
        lines.append(f"  pages moved  host->GPU {pg['cpu_to_gpu']:,}  SSD->GPU {pg['ssd_to_gpu']:,}"
                     f"  GPU->host {pg['gpu_to_cpu']:,}  GPU->SSD {pg['gpu_to_ssd']:,}")
    lines.append(f"wall {res['wall_seconds']:.2f} s, peak memory {res['peak_rss_bytes'] / 2**20:.0f} MiB")
    return "\n".join(lines)


def failure_text(res: dict) -> str:
    """The human summary of a failed run (the artifact writes no result; figures show inf)."""
    f = res.get("failure") or {}
    lines = [f"FAILED: {res['policy']} cannot run this configuration ({f.get('stage', '?')})",
             f"  {f.get('reason', '')}"]
    if f.get("tensor") is not None:
        k = f.get("kernel")
        where = "at start-up" if k is None or k < 0 else f"at kernel {k} ({f.get('kernel_name')})"
        lines.append(f"  tensor {f['tensor']} ({f['pages_needed']:,} pages) does not fit {where}: "
                     f"{f['free_pages']:,} pages free, largest free run {f['largest_free_pages']:,} "
                     f"pages, of {f.get('capacity_pages', 0):,}")
    return "\n".join(lines)


def _config_from_args(args) -> tuple:
    """-> (G10Config, note) from a config file, from --g10 flags, or the default run."""
    from g10fast.config import genconfig, read_g10_config

    if args.config is not None:
        if args.g10 is not None:
            raise InputError("give either a config file or --g10 with --model/--batch/--policy",
                             param="--g10")
        return read_g10_config(args.config, g10_root=args.g10_root), None
    note = None
    artifact = args.g10
    if artifact is None:
        if args.model is not None or args.batch is not None:
            raise InputError("--model/--batch need --g10 ARTIFACT_DIR", param="--g10")
        artifact = _find_artifact()
        if artifact is None:
            raise InputError("no configuration given and no G10 artifact found (looked for "
                             "../shared/g10-artifact and $G10_ARTIFACT); pass CONFIG or --g10 DIR",
                             param="CONFIG")
        note = (f"default run: the G10 artifact's BERT-128 Base-UVM (lru) configuration, "
                f"from {artifact}")
    model = args.model or "BERT"
    batch = args.batch if args.batch is not None else 128
    policy = args.policy or "lru"
    ideal = policy.lower() == "ideal"
    cfg = genconfig(artifact, model, batch, "lru" if ideal else policy,
                    host_mem_gb=args.host_mem_gb, ssd_gbps=args.ssd_gbps, pcie_gbps=args.pcie_gbps)
    if ideal:
        cfg = cfg.replace(is_UVM=False)
    return cfg, note


def _run_builtin(args, spec: dict, note: str) -> int:
    """A TOML run file or the default run: one result, or a comparison table and figure."""
    from g10fast.api import comparison_figure, comparison_text, run_spec
    from g10fast.run import to_json_ready

    show = args.progress or (sys.stderr.isatty() and not args.no_progress)
    res = run_spec(spec, progress_factory=lambda p: Progress(f"{p:>12}", show))
    if isinstance(res, dict):
        if args.json:
            json.dump(to_json_ready(res), sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            print(summary_text(res, note))
        return 0
    title = note
    if args.json:
        json.dump([to_json_ready(r) for r in res], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(comparison_text(res, title))
    fig = args.figure or "g10fast-comparison.png"
    d = Path(fig).resolve().parent
    if not d.is_dir():
        raise InputError("folder does not exist", path=str(d))
    comparison_figure(res, fig, title)
    if not args.json:
        print(f"figure written to {fig}")
    return 0


def cmd_run(args) -> int:
    from g10fast.config import validate
    from g10fast.run import run, to_json_ready

    if args.config is None and args.g10 is None and args.model is None and args.batch is None \
            and args.policy is None:
        from g10fast.api import DEFAULT_RUN
        w = DEFAULT_RUN["workload"]
        note = (f"default run: built-in {w['model']} at batch {w['batch']} on the "
                f"{DEFAULT_RUN['system']['preset']} system with "
                f"{DEFAULT_RUN['system']['overrides']['gpu.memory_gb']:g} GB of GPU memory, "
                "estimated kernel times")
        return _run_builtin(args, DEFAULT_RUN, note)
    if args.config is not None and str(args.config).endswith(".toml"):
        from g10fast.api import read_run_file
        return _run_builtin(args, read_run_file(args.config), f"run file {args.config}")
    cfg, note = _config_from_args(args)
    if args.config is not None and any(v is not None for v in (args.host_mem_gb, args.ssd_gbps,
                                                                 args.pcie_gbps)):
        over = {}
        if args.host_mem_gb is not None:
            over["CPU_memory_line_GB"] = args.host_mem_gb
        if args.ssd_gbps is not None:
            over["SSD_PCIe_bandwidth_GBps"] = args.ssd_gbps
        if args.pcie_gbps is not None:
            over["CPU_PCIe_bandwidth_GBps"] = args.pcie_gbps
            over["GPU_PCIe_bandwidth_GBps"] = args.pcie_gbps
        cfg = cfg.replace(**over)
    cfg = validate(cfg)
    show = args.progress or (sys.stderr.isatty() and not args.no_progress)
    progress = Progress("simulating", show)
    if args.trace is not None:
        d = Path(args.trace).resolve().parent
        if not d.is_dir():
            raise InputError("folder does not exist", path=str(d))
    for opt in ("plan", "figure"):
        target = getattr(args, opt)
        if target is not None and not Path(target).resolve().parent.is_dir():
            raise InputError("folder does not exist", path=str(Path(target).resolve().parent),
                             param=f"--{opt}")
    plan = None
    order_kw = {}
    if args.kernel_order is not None:
        from g10fast.run import policy_of, TENSOR_ENGINE_POLICIES
        if policy_of(cfg) in TENSOR_ENGINE_POLICIES:
            raise InputError("only the page-engine policies take a kernel order",
                             param="--kernel-order")
        from g10fast.workload.kernel_order import read_kernel_order
        order_kw["required_order"] = read_kernel_order(args.kernel_order)
    if args.plan_in is not None:
        if not cfg.use_prefetch:
            raise InputError("a plan needs a policy that applies hints (prefetch_lru or deepUM)",
                             param="--plan-in")
        from g10fast.planner.io import read_plan
        from g10fast.run import build_workload
        workload = build_workload(cfg)
        plan = read_plan(args.plan_in, workload.num_kernels, workload.num_tensors)
        res = run(cfg, trace_path=args.trace, progress=progress, workload=workload, plan=plan,
                  **order_kw)
    else:
        res = run(cfg, trace_path=args.trace, progress=progress, **order_kw)
    if args.plan is not None:
        if "plan" not in res:
            raise InputError("this policy has no plan (use prefetch_lru or deepUM)",
                             param="--plan")
        from g10fast.planner.io import write_plan
        write_plan(res["plan_object"], args.plan)
    if args.figure is not None:
        from g10fast.planner.figure import plot_memory
        plot_memory(res, args.figure)
    if args.json:
        out = to_json_ready(res)
        if note:
            out["note"] = note
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(summary_text(res, note))
        if "plan" in res:
            pl = res["plan"]
            line = f"plan: {pl['hints']:,} hints {pl['hint_counts']}"
            if "decisions" in pl:
                line += (f"; estimated peak {pl['peak_estimate_bytes'] / 2**30:.1f} GiB vs "
                         f"capacity {pl['capacity_bytes'] / 2**30:.1f} GiB")
            print(line)
        if args.trace:
            print(f"event trace written to {args.trace}")
        if args.plan:
            print(f"plan written to {args.plan}")
        if args.figure:
            print(f"figure written to {args.figure}")
    return 0


def cmd_models(args) -> int:
    from g10fast.hardware import load_preset
    from g10fast.workload.builtin import footprint_bytes, list_models, load_builtin_graph, \
        parameter_count

    gpu_gb = load_preset(args.system)["gpu"]["memory_gb"]
    rows = []
    for s in list_models():
        b = args.batch if args.batch is not None else s.default_batch
        g = load_builtin_graph(s, b)
        fp = footprint_bytes(g)
        rows.append((s.key, s.name, s.kind + "/" + s.family, b, parameter_count(g) / 1e6,
                     g.num_kernels, fp / 2**30, fp / (gpu_gb * 2**30),
                     "paper" if s.params.get("paper") else ""))
    if args.json:
        keys = ("key", "name", "family", "batch", "params_millions", "kernels", "footprint_gib",
                "gpu_multiple", "paper")
        json.dump([dict(zip(keys, r)) for r in rows], sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"{'model':<12} {'name':<12} {'family':<16} {'batch':>6} {'params (M)':>10} "
          f"{'kernels':>8} {'footprint (GiB)':>15} {'x GPU':>6}")
    for r in rows:
        print(f"{r[0]:<12} {r[1]:<12} {r[2]:<16} {r[3]:>6} {r[4]:>10.1f} {r[5]:>8} "
              f"{r[6]:>15.1f} {r[7]:>6.2f} {r[8]}")
    print(f"(x GPU: footprint / the {gpu_gb:g} GB GPU of preset {args.system}; batch: "
          f"{'--batch' if args.batch else 'each model default'})")
    return 0


def cmd_trace_inspect(args) -> int:
    from g10fast.trace import open_trace

    tr = open_trace(args.file, allow_incomplete=args.allow_incomplete)
    try:
        tr.verify(raise_on_damage=True)
        print(f"{args.file}: schema {tr.schema_version}, {tr.n_events:,} events"
              + ("" if tr.complete else " (incomplete: up to the last complete chunk)"))
        meta = tr.meta or {}
        print(f"model {meta.get('model')} batch {meta.get('batch_size')} "
              f"policy {meta.get('policy')}")
        counts = tr.count_by_kind()
        pages = tr.pages_by_kind()
        for kind, n in counts.items():
            name = getattr(kind, "name", str(kind))
            print(f"  {name:10s} {n:>12,} events {pages.get(kind, 0):>14,} pages")
    finally:
        tr.close()
    return 0


def cmd_trace_verify(args) -> int:
    from g10fast.trace import verify_trace

    rep = verify_trace(args.file)
    if args.json:
        json.dump({k: v for k, v in rep.items() if k != "lines"}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_BAD_INPUT if rep["damaged"] else 0
    for line in rep["lines"]:
        print(line)
    if rep["damaged"]:
        print(f"{args.file}: {len(rep['damaged'])} damaged chunk(s) or attribute(s)")
        return EXIT_BAD_INPUT
    print(f"{args.file}: ok, {rep['chunks']} chunks checked"
          f"{'' if rep['checksums'] else ' (a trace without checksums: chunks decoded)'}"
          f"{'' if rep['complete'] else ' (incomplete: the writer did not finish)'}")
    return 0


def cmd_store_verify(args) -> int:
    from g10fast.sweep.store import ResultStore

    s = ResultStore(args.store, create=False)
    rep = s.verify()
    s.close()
    n_bad = len(rep["damaged"]) + (1 if rep.get("structure") else 0)
    if args.json:
        json.dump({"store": args.store, "version": s.version, **rep,
                   "damaged": [{"hash": h, "label": lb, "why": w} for h, lb, w in rep["damaged"]]},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_BAD_INPUT if n_bad else 0
    for line in rep.get("structure") or []:
        print(f"{args.store}: SQLite structure: {line}")
    for h, label, why in rep["damaged"]:
        print(f"{args.store}: damaged point {h}{f' ({label})' if label else ''}: {why}")
    how = "checksums" if rep["checksums"] else "read back (a version-1 store has no checksums)"
    print(f"{args.store}: {rep['points']} points ok ({how}), {len(rep['damaged'])} damaged")
    if n_bad:
        print("a sweep of the same matrix runs the damaged points again")
        return EXIT_BAD_INPUT
    return 0


def cmd_store_convert(args) -> int:
    from g10fast.sweep.store import convert_store

    n, bad = convert_store(args.old, args.new)
    print(f"{n} points copied from {args.old} into {args.new}"
          + (f"; {bad} damaged points left out (a sweep runs them again)" if bad else ""))
    return 0


def cmd_results_export(args) -> int:
    from g10fast.sweep.export import export_points

    rep = export_points(args.store, args.out)
    print(f"{rep['rows']} points written to {rep['path']}"
          + (f" ({rep['damaged']} damaged points left out: g10fast store verify "
             f"{args.store})" if rep["damaged"] else ""))
    return 0


def _store_parsers(sub) -> None:
    """The `store` and `results` commands, and `trace verify` (added to `trace`)."""
    st = sub.add_parser("store", help="check or convert a results store")
    ssub = st.add_subparsers(dest="store_command", required=True)
    sv = ssub.add_parser("verify", help="check every stored point against its checksum; "
                                        "exit 2 naming each damaged point")
    sv.add_argument("store")
    sv.add_argument("--json", action="store_true", help="print the report as JSON")
    sv.set_defaults(func=cmd_store_verify)
    sc = ssub.add_parser("convert", help="copy a version-1 (HDF5) store, or what still reads "
                                         "of a damaged store, into a version-2 store")
    sc.add_argument("old")
    sc.add_argument("new")
    sc.set_defaults(func=cmd_store_convert)
    rs = sub.add_parser("results", help="export a results store")
    rsub = rs.add_subparsers(dest="results_command", required=True)
    re_ = rsub.add_parser("export", help="one row per point: parameters, status, times, traffic")
    re_.add_argument("store")
    re_.add_argument("--out", required=True, help="points.csv or points.parquet (pyarrow)")
    re_.set_defaults(func=cmd_results_export)


def _artifact_arg(g10) -> Path:
    artifact = g10 if g10 is not None else _find_artifact()
    if artifact is None:
        raise InputError("no G10 artifact found (looked for ../shared/g10-artifact and "
                         "$G10_ARTIFACT); pass --g10 ARTIFACT_DIR", param="--g10")
    if not (Path(artifact) / "frontend" / "Nets").is_dir():
        raise InputError("not the G10 artifact root (no frontend/Nets)", path=str(artifact))
    return Path(artifact)


def _sweep(matrix, store, artifact, workers, dask, show, retry_errors=True, max_points=None,
           reuse=True):
    from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points
    from g10fast.sweep.runner import run_sweep

    path = named_matrix(matrix)
    resolved = resolve_points(expand_matrix(path), artifact)
    prog = None if not show else True
    summary = run_sweep(resolved, store, workers=workers, dask=dask, progress=prog,
                        retry_errors=retry_errors, max_points=max_points, reuse=reuse)
    return summary


def cmd_sweep(args) -> int:
    artifact = _artifact_arg(args.g10)
    show = args.progress or (sys.stderr.isatty() and not args.no_progress)
    summary = _sweep(args.matrix, args.store, artifact, args.workers, args.dask, show,
                     retry_errors=not args.no_retry_errors, max_points=args.max_points,
                     reuse=not args.no_reuse)
    print(summary.text())
    if summary.error_labels:
        print("errors: " + ", ".join(summary.error_labels[:20])
              + (" ..." if len(summary.error_labels) > 20 else ""))
    print(f"results in {args.store}")
    return 0


def cmd_figures(args) -> int:
    from g10fast.figures import draw_all

    artifact = args.g10 if args.g10 is not None else _find_artifact()
    report = draw_all(args.store, args.out, artifact_dir=artifact, only=args.only)
    print(report.text())
    return 0


def cmd_reproduce(args) -> int:
    from g10fast.figures import draw_all

    artifact = _artifact_arg(args.g10)
    show = args.progress or (sys.stderr.isatty() and not args.no_progress)
    summary = _sweep(args.matrix, args.store, artifact, args.workers, args.dask, show,
                     reuse=not args.no_reuse)
    print(summary.text())
    report = draw_all(args.store, args.out, artifact_dir=artifact)
    print(report.text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="g10fast", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="simulate one configuration",
                       description="Simulate one G10 configuration: a G10 .config file, or the "
                                   "point genconfigs.py would generate (--g10 ... --model ...).")
    r.add_argument("config", nargs="?", help="a TOML run file (docs/run-format.md) or a G10 "
                                             "config file (key value lines); none: the default "
                                             "comparison of all policies on a built-in model")
    r.add_argument("--g10-root", help="folder that the config's relative paths are relative to "
                                      "(the artifact's src/); default: found from the config")
    r.add_argument("--g10", type=Path, help="the G10 artifact folder, to build a config like "
                                            "genconfigs.py")
    r.add_argument("--model", help="BERT, VIT, Inceptionv3, ResNet152, SENet154 (with --g10)")
    r.add_argument("--batch", type=int, help="batch size (with --g10)")
    r.add_argument("--policy", help="lru (Base UVM), prefetch_lru (G10), deepUM (DeepUM+), "
                                    "FlashNeuron, G10GDSSSD (G10-GDS), G10GDSFULL (G10-Host) "
                                    "or ideal (with --g10)")
    r.add_argument("--plan", help="write the migration plan (hints) to this CSV file "
                                  "(docs/plan-format.md)")
    r.add_argument("--plan-in", help="run the engine on this plan file instead of planning "
                                     "(e.g. a hand-edited --plan output)")
    r.add_argument("--kernel-order", help="process each kernel's tensors in the order of this "
                   "G10 statistics/kernels.config (the C++'s hash-set order, O-18; page-engine "
                   "policies; docs/tensor-order.md) instead of ascending tensor ids")
    r.add_argument("--figure", help="write a figure to this image file: for one run, estimated "
                                    "vs simulated GPU memory per kernel; for a comparison (the "
                                    "default run, TOML runs), the comparison (default "
                                    "g10fast-comparison.png)")
    r.add_argument("--host-mem-gb", type=float, help="host memory for swapping, GiB")
    r.add_argument("--ssd-gbps", type=float, help="SSD bandwidth, GB/s")
    r.add_argument("--pcie-gbps", type=float, help="PCIe (host and GPU link) bandwidth, GB/s")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--trace", help="write the engine's events to this HDF5 file")
    r.add_argument("--progress", action="store_true", help="always show the progress bar")
    r.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    r.set_defaults(func=cmd_run)
    m = sub.add_parser("models", help="list the built-in models and their footprint")
    m.add_argument("--batch", type=int, help="batch size (default: each model's default)")
    m.add_argument("--system", default="g10-artifact", help="hardware preset for the 'x GPU' "
                                                            "column (default g10-artifact)")
    m.add_argument("--json", action="store_true", help="print JSON")
    m.set_defaults(func=cmd_models)
    t = sub.add_parser("trace", help="inspect an event trace")
    tsub = t.add_subparsers(dest="trace_command", required=True)
    ti = tsub.add_parser("inspect", help="summary of an event-trace file")
    ti.add_argument("file")
    ti.add_argument("--allow-incomplete", action="store_true",
                    help="read the trace of a killed run up to its last complete chunk")
    ti.set_defaults(func=cmd_trace_inspect)
    tv = tsub.add_parser("verify", help="check every chunk of an event trace against its "
                                        "checksum; exit 2 naming each damaged chunk")
    tv.add_argument("file")
    tv.add_argument("--json", action="store_true", help="print the report as JSON")
    tv.set_defaults(func=cmd_trace_verify)
    _store_parsers(sub)

    def sweep_opts(q):
        q.add_argument("--workers", type=int, default=None,
                       help="worker processes (default: CPU count; 0 = in this process)")
        q.add_argument("--dask", metavar="ADDRESS",
                       help="run on a Dask distributed scheduler (pip install 'g10fast[dask]')")
        q.add_argument("--progress", action="store_true", help="always show the progress line")
        q.add_argument("--no-progress", action="store_true", help="never show it")
        q.add_argument("--no-reuse", action="store_true",
                       help="simulate every point; by default a page-engine point whose host "
                            "memory line is above the peak host use of a run of the same "
                            "configuration at another host size is derived from that run "
                            "(the same simulation; docs/sweep-performance.md)")

    sw = sub.add_parser("sweep", help="run an experiment matrix into a results store",
                        description="Run every point of a TOML experiment matrix "
                                    "(docs/matrix-format.md) into a results store "
                                    "(docs/store-format.md); points already stored are skipped.")
    sw.add_argument("matrix", help="a matrix file, or the name of a bundled one in data/matrices "
                                   "(artifact, fig11, ..., smoke)")
    sw.add_argument("--store", required=True, help="results store (SQLite, created if missing; "
                                                   "docs/store-format.md)")
    sw.add_argument("--g10", type=Path, help="the G10 artifact folder (default: found)")
    sw.add_argument("--max-points", type=int, help="run at most this many points now")
    sw.add_argument("--no-retry-errors", action="store_true",
                    help="skip points stored with status error instead of running them again")
    sweep_opts(sw)
    sw.set_defaults(func=cmd_sweep)

    fg = sub.add_parser("figures", help="draw the paper's figures from a results store",
                        description="Draw Figures 2, 3, 4 and 11-19 (PNG and PDF) from a results "
                                    "store, beside the artifact's example results, and write "
                                    "agreement.csv.")
    fg.add_argument("store", help="HDF5 results store")
    fg.add_argument("--out", required=True, type=Path, help="output folder")
    fg.add_argument("--g10", type=Path, help="the G10 artifact folder, for its example_results")
    fg.add_argument("--only", nargs="+", type=int, help="only these figure numbers")
    fg.set_defaults(func=cmd_figures)

    rp = sub.add_parser("reproduce", help="the whole evaluation: sweep + figures + agreement",
                        description="Run the artifact's matrix (or --matrix) into the store, "
                                    "then draw every figure and summarise the agreement.")
    rp.add_argument("--g10", type=Path, help="the G10 artifact folder (default: found)")
    rp.add_argument("--store", default="g10fast-results.g10db",
                    help="results store (default g10fast-results.g10db)")
    rp.add_argument("--out", type=Path, default=Path("figures"), help="figure folder "
                                                                      "(default figures/)")
    rp.add_argument("--matrix", default="artifact", help="matrix (default: artifact, 1,410 points)")
    sweep_opts(rp)
    rp.set_defaults(func=cmd_reproduce)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as e:
        sys.stderr.write(f"g10fast: error: {e}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("g10fast: interrupted\n")
        return 130


def console_main() -> None:
    """The `g10fast` console script: main(), then exit without the interpreter's teardown.

    Every output has been written, closed and renamed by then; what the teardown would do is
    free Numba's compiled code, LLVM and the engine's arrays one object at a time, which
    takes a noticeable share of a short run."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
