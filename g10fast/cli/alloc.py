"""Allocation traces: `memory` (an allocator's replay) and `swap` (SINGA's and AppObMem's
swap planners)."""

from __future__ import annotations

import json
import sys

from g10fast.atomic import checked_target
from g10fast.cli.common import parse_options
from g10fast.errors import InputError


def _source_opts(q) -> None:
    """The SOURCE argument and its flags, shared by `memory` and `swap`."""
    q.add_argument(
        "source",
        metavar="SOURCE",
        help="an allocation trace (HDF5, docs/alloc-trace-format.md, or a SINGA "
        "text trace), a G10 config file, or a built-in model name",
    )
    q.add_argument("--batch", type=int, help="batch size of a built-in model")
    q.add_argument(
        "--system", default="g10-artifact", help="hardware preset of a built-in model (default g10-artifact)"
    )
    q.add_argument(
        "--iterations", type=int, default=1, help="iterations of a model's derived trace (default 1)"
    )
    q.add_argument(
        "--device",
        type=int,
        help="the device of a PyTorch memory snapshot (default: its only one; docs/memory-snapshot.md)",
    )
    q.add_argument("--json", action="store_true", help="print JSON")


def add_parsers(sub) -> None:
    """`memory` and `swap`."""
    me = sub.add_parser(
        "memory",
        help="peak live, peak reserved and fragmentation of an allocator on an allocation trace",
        description="Replay the mallocs and frees of SOURCE through an "
        "offset-level allocator (docs/allocators.md).",
    )
    _source_opts(me)
    me.add_argument(
        "--allocator", default="all", help="cuda_malloc, cnmem, pytorch, singa_colour, bump, or all (default)"
    )
    me.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="an allocator option (docs/allocators.md); repeatable",
    )
    me.add_argument(
        "--capacity-mib",
        type=float,
        help="GPU memory in MiB (default unlimited): a request that does not fit is an OOM result",
    )
    me.add_argument("--figure", help="write memory over op index (one line per allocator) to this image file")
    me.add_argument(
        "--period",
        choices=["singa", "match"],
        help="also detect the iteration (SINGA's repeat test or the robust match)",
    )
    me.add_argument(
        "--memory-snapshot",
        metavar="OUT.pickle",
        help="write each allocator's run as a PyTorch memory snapshot for "
        "pytorch.org/memory_viz (several allocators: OUT.<allocator>.pickle; "
        "docs/memory-snapshot.md)",
    )
    me.set_defaults(func=cmd_memory)
    sp = sub.add_parser(
        "swap",
        help="plan swaps on an allocation trace under a memory limit (SINGA's planner or AppObMem)",
        description="Plan swaps of one iteration of SOURCE so that its load "
        "stays under the limit, and report the overhead per "
        "iteration (docs/allocators.md).",
    )
    _source_opts(sp)
    sp.add_argument("--policy", default="singa_swap", choices=["singa_swap", "appobmem"])
    sp.add_argument("--limit-mib", type=float, help="the memory limit, MiB")
    sp.add_argument(
        "--accesses",
        default="alloc_free_access",
        choices=["alloc_free_access", "alloc_free_only"],
        help="what the planner sees: mallocs, frees and accesses, or mallocs and "
        "frees only (AppObMem's appob.trace; a block is taken as used at its "
        "malloc and before its free)",
    )
    sp.add_argument(
        "--sweep-limits", metavar="A:B:STEP", help="plan at every limit from A to B MiB (the overhead curve)"
    )
    sp.add_argument(
        "--score",
        choices=["vote", "doa_origin", "pri", "doa", "aoa", "wdoa", "subwdoa"],
        help="candidate order, SINGA's paper and code (docs/allocators.md; "
        "default: vote for singa_swap, aoa for appobmem; a sweep without it "
        "draws every one)",
    )
    sp.add_argument(
        "--offline-analysis",
        action="store_true",
        help="SINGA's authors' offline analysis that drew the paper's overhead "
        "figure, its slips included (docs/allocators.md)",
    )
    sp.add_argument(
        "--base-mib",
        type=float,
        metavar="MIB",
        help="memory live throughout that the trace does not show (blocks "
        "allocated before a recording starts), added to its load",
    )
    sp.add_argument(
        "--iteration-ms",
        type=float,
        metavar="MS",
        help="the clock: the planned iteration lasts MS on the GPU it ran on (the "
        "trace's timestamps are rescaled; SINGA's VGG: 81.57, the authors' "
        "measurement); default: the trace's own timestamps",
    )
    sp.add_argument("--mode", default="stick_to_limit", choices=["stick_to_limit", "no_overhead"])
    sp.add_argument(
        "--faithful-quirks", action="store_true", help="SINGA's C++ quirks: WDOA = 0, DOA = gap - 2 T_out"
    )
    sp.add_argument(
        "--period",
        choices=["singa", "match", "known"],
        help="iteration detection (default: known for a model, singa for singa_swap, match for appobmem)",
    )
    sp.add_argument(
        "--link",
        default="singa",
        choices=["singa", "preset"],
        help="transfer costs: SINGA's measured PCIe fit (default) or the preset's host link",
    )
    sp.add_argument(
        "--allocator",
        help="also place the planned iteration, with the swaps' "
        "frees and mallocs, with this allocator and report the GPU memory it needs",
    )
    sp.add_argument("--figure", help="with --sweep-limits: draw the curve to this image file")
    sp.set_defaults(func=cmd_swap)


def _alloc_source(args):
    from g10fast.memory_source import load_source

    return load_source(
        args.source, batch=args.batch, system=args.system, iterations=args.iterations, device=args.device
    )


def cmd_memory(args) -> int:
    """Replay a trace's mallocs and frees through one allocator (or all)."""
    from g10fast.alloc.allocators import ALLOCATORS, run_allocator
    from g10fast.alloc.report import memory_figure, memory_text

    names = list(ALLOCATORS) if args.allocator == "all" else [args.allocator]
    opts = parse_options(args.option)
    if args.allocator == "all" and opts:
        raise InputError("options need one allocator, not all", param="--option")
    for opt in ("figure", "memory_snapshot"):
        if getattr(args, opt) is not None:
            checked_target(getattr(args, opt), "--" + opt.replace("_", "-"))
    cap = None
    if args.capacity_mib is not None:
        if args.capacity_mib < 0:
            raise InputError(f"must be >= 0, got {args.capacity_mib}", param="--capacity-mib")
        cap = int(args.capacity_mib * 2**20)
    tr = _alloc_source(args)
    snap = tr.meta.get("snapshot")
    results = []
    for n in names:
        o, c = opts, cap
        if snap is not None and n == "pytorch":  # set as the recorded allocator was
            from g10fast.alloc.snapshot import pytorch_capacity, pytorch_options

            o = opts or pytorch_options(tr)
            c = cap if cap is not None else pytorch_capacity(tr)
        results.append(run_allocator(tr, n, capacity=c, **o))
    per = None
    if args.period:
        from g10fast.alloc.period import detect_period

        per = detect_period(tr, args.period).to_dict()
    if args.json:
        out = [dict(r.summary(), source=args.source, trace=tr.name) for r in results]
        if snap is not None:
            from g10fast.alloc.snapshot import snapshot_comparison

            for o in out:
                o["snapshot"] = snapshot_comparison(tr, results)
        if per is not None:
            for o in out:
                o["period"] = per
        json.dump(out[0] if len(out) == 1 else out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(memory_text(tr, results))
        if snap is not None:
            from g10fast.alloc.snapshot import snapshot_text

            print(snapshot_text(tr, results))
        if per is not None:
            print(
                f"iteration ({per['method']}): "
                + (
                    f"{per['length']:,} malloc/free ops from op {per['start']:,} (score {per['score']:.3f})"
                    if per["found"]
                    else "none found"
                )
            )
    if args.figure:
        memory_figure(tr, results, args.figure)
        (sys.stderr if args.json else sys.stdout).write(f"figure written to {args.figure}\n")
    if args.memory_snapshot:
        from g10fast.alloc.snapshot import write_run_snapshots

        for p in write_run_snapshots(tr, results, args.memory_snapshot):
            (sys.stderr if args.json else sys.stdout).write(f"memory snapshot written to {p}\n")
    return 0


def _limits(text: str) -> list[int]:
    """A:B:STEP in MiB -> byte limits A, A+STEP, ..., up to B inclusive."""
    parts = text.split(":")
    try:
        a, b, st = (float(x) for x in parts)
    except ValueError:
        raise InputError(f"expected A:B:STEP in MiB, got {text!r}", param="--sweep-limits") from None
    if st <= 0 or b < a or a < 0:
        raise InputError(f"need 0 <= A <= B and STEP > 0, got {text!r}", param="--sweep-limits")
    n = int((b - a) / st + 1e-9) + 1
    if n > 10000:
        raise InputError(f"{n} limits: at most 10000", param="--sweep-limits")
    return [int((a + i * st) * 2**20) for i in range(n)]


def cmd_swap(args) -> int:
    """Plan swaps (SINGA's planner or AppObMem) on a trace under a memory limit."""
    from g10fast.alloc.swap import LinkCost, check_plan, plan_swaps, replay, sweep_limits

    if (args.limit_mib is None) == (args.sweep_limits is None):
        raise InputError("give --limit-mib N or --sweep-limits A:B:STEP", param="--limit-mib")
    if args.limit_mib is not None and args.limit_mib < 0:
        raise InputError(f"must be >= 0, got {args.limit_mib}", param="--limit-mib")
    if args.figure is not None:
        checked_target(args.figure, "--figure")
    iterations = args.iterations if args.iterations != 1 else 3
    from g10fast.memory_source import load_source

    tr = load_source(
        args.source, batch=args.batch, system=args.system, iterations=iterations, device=args.device
    )
    if (tr.meta.get("snapshot") or {}).get("times") == "absent":
        raise InputError(
            "the memory snapshot records no times (no time_us: older torch "
            "versions and torch.profiler snapshots record none): a swap plan needs "
            "the time between allocations",
            path=args.source,
        )
    if args.link == "singa":
        link = LinkCost.singa_measured()
    else:
        from g10fast.hardware import load_preset

        pr = load_preset(args.system)
        link = LinkCost.from_gbps(
            float(pr["host"]["link_gbps"]), float(pr["host"].get("link_latency_us", 5.0))
        )
    if args.iteration_ms is not None and not args.iteration_ms > 0:
        raise InputError(f"must be > 0, got {args.iteration_ms}", param="--iteration-ms")
    kw = dict(
        link=link,
        mode=args.mode,
        faithful_quirks=args.faithful_quirks,
        period_method=args.period,
        accesses=args.accesses,
        iteration_ns=None if args.iteration_ms is None else args.iteration_ms * 1e6,
    )
    if args.offline_analysis:
        kw["offline_analysis"] = True
    if args.base_mib is not None:
        if not args.base_mib >= 0:
            raise InputError(f"must be >= 0, got {args.base_mib}", param="--base-mib")
        kw["base_bytes"] = int(args.base_mib * 2**20)
    if args.sweep_limits is not None:
        limits = _limits(args.sweep_limits)
        from g10fast.alloc.swap import SCORES

        scores = (
            [args.score]
            if args.score
            else [sc for sc in SCORES if not (args.offline_analysis and sc == "vote")]
        )
        rows = sweep_limits(tr, limits, args.policy, scores, **kw)
        best = {}
        for r in rows:
            if r["status"] == "ok" and r["overhead_per_iteration_s"] == 0.0:
                red = 1 - r["peak_bytes"] / r["peak_before_bytes"]
                if red > best.get(r["score"], (-1, 0))[0]:
                    best[r["score"]] = (red, r["peak_bytes"])
        if args.json:
            json.dump(
                {
                    "source": args.source,
                    "policy": args.policy,
                    "rows": rows,
                    "zero_overhead_reduction": {k: v[0] for k, v in best.items()},
                },
                sys.stdout,
                indent=1,
            )
            sys.stdout.write("\n")
        else:
            print(f"{tr.name}: {args.policy}, overhead per iteration against the limit")
            print(
                f"{'score':<6} {'limit (MiB)':>12} {'peak (MiB)':>11} {'swaps':>6} "
                f"{'overhead (ms)':>14} {'iteration (ms)':>15}  status"
            )
            for r in rows:
                print(
                    f"{r['score']:<6} {r['limit_bytes'] / 2**20:>12,.1f} "
                    f"{r['peak_bytes'] / 2**20:>11,.1f} {r['swaps']:>6} "
                    f"{1e3 * r['overhead_per_iteration_s']:>14.3f} "
                    f"{1e3 * r['iteration_s']:>15.1f}  {r['status']}"
                )
            for k, (red, pk) in best.items():
                print(
                    f"largest reduction at zero overhead ({k}): {100 * red:.1f}% (peak {pk / 2**20:,.1f} MiB)"
                )
        if args.figure:
            from g10fast.alloc.report import swap_figure

            swap_figure(rows, args.figure, f"{tr.name}: {args.policy}", percent=args.iteration_ms is not None)
            (sys.stderr if args.json else sys.stdout).write(f"figure written to {args.figure}\n")
        return 0
    p = plan_swaps(tr, int(args.limit_mib * 2**20), args.policy, args.score, **kw)
    if args.accesses == "alloc_free_access" and not args.offline_analysis:
        check_plan(tr, p)  # alloc_free_only: its blind spots are counted (absent_accesses)
    rep = replay(tr, p, link)
    alloc = None
    if args.allocator:
        from g10fast.alloc.allocators import run_allocator
        from g10fast.policies.trace_swap import swapped_iteration

        alloc = run_allocator(swapped_iteration(tr, p), args.allocator)
    if args.json:
        out = dict(p.summary(), source=args.source, replay=rep)
        if alloc is not None:
            out["gpu_memory_needed_bytes"] = alloc.peak_reserved
            out["allocator"] = alloc.summary()
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    s = p.summary()
    print(f"{tr.name}: {args.policy} (score {p.score}), limit {args.limit_mib:,.1f} MiB")
    print(
        f"iteration: trace ops {p.start}..{p.start + p.length - 1}, "
        f"{1e3 * s['iteration_s']:.3f} ms; peak {p.peak_before / 2**20:,.1f} MiB without "
        f"swaps, {p.peak_after / 2**20:,.1f} MiB with {p.num_swaps} swaps "
        f"({s['candidates']} candidates)  {s['status']}"
    )
    print(f"{'block':>7} {'MiB':>8} {'last use':>9} {'out done':>9} {'in from':>8} {'next use':>9}")
    for q in range(p.num_swaps):
        print(
            f"{p.block[q]:>7} {p.size[q] / 2**20:>8.2f} {p.r_idx[q]:>9} {p.out_end_idx[q]:>9} "
            f"{p.in_start_idx[q]:>8} {p.d_idx[q]:>9}"
        )
    print(f"overhead per iteration {1e3 * s['overhead_per_iteration_s']:.3f} ms")
    if alloc is not None:
        print(
            f"GPU memory needed: {alloc.peak_reserved / 2**20:,.1f} MiB ({args.allocator} on "
            f"the iteration with the swaps' frees and mallocs; live peak "
            f"{alloc.peak_live / 2**20:,.1f} MiB)"
        )
    if rep["iterations"]:
        mm = sum(r["mismatches"] for r in rep["iterations"])
        print(f"replayed on {len(rep['iterations'])} later iterations: {mm} mispredicted swaps")
    return 0
