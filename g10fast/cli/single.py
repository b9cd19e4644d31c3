"""One run of `g10fast run`: a RunSpec with the flags of one run (--plan, --plan-in,
--kernel-order, --trace, --figure, --timeline), printed as a summary or JSON."""

from __future__ import annotations

import json
import sys

from g10fast.atomic import checked_target
from g10fast.cli.common import check_arg, engines_with, kernel_times_warning, run_progress
from g10fast.cli.specs import in_run_file
from g10fast.cli.summary import summary_text
from g10fast.errors import InputError


def run_one(args, spec, note, run_file: dict | None = None) -> int:
    """One run of a RunSpec with the flags of `run` (a G10 config, --model, --g10, --workload,
    or a run file with one policy: `run_file` its parsed dict, whose errors name its lines)."""
    from g10fast import policies
    from g10fast.results import to_json_ready
    from g10fast.run import run

    progress = run_progress(args, "simulating")
    if args.trace is not None:
        checked_target(args.trace)
    for opt in ("plan", "figure"):
        if getattr(args, opt) is not None:
            checked_target(getattr(args, opt), f"--{opt}")
    if args.figure is not None:
        from g10fast.figures import check_image_path

        check_image_path(args.figure, "--figure")
    rec = spec.record
    if getattr(args, "timeline", None) is not None:
        if not policies.engine(rec.engine).timeline:
            raise InputError(
                f"only the policies of {engines_with('timeline')} write a timeline; "
                f"the {rec.engine} engine writes an event trace (--trace) for "
                "`g10fast trace export --perfetto`",
                param="--timeline",
            )
        checked_target(args.timeline, "--timeline")
    kw = {}
    if args.kernel_order is not None:
        if not policies.engine(rec.engine).kernel_order:
            raise InputError(
                f"only the policies of {engines_with('kernel_order')} take a kernel order",
                param="--kernel-order",
            )
        from g10fast.workload.kernel_order import read_kernel_order

        kw["required_order"] = read_kernel_order(args.kernel_order)
    if args.plan_in is not None:
        mode = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
        if not getattr(mode, "use_prefetch", False):
            raise InputError(
                "a plan needs a page-engine policy that applies hints (prefetch_lru or deepUM)",
                param="--plan-in",
            )
        from g10fast.planner.io import read_plan
        from g10fast.run import workload_of

        kw["workload"] = workload_of(spec)
        kw["plan"] = read_plan(args.plan_in, kw["workload"].num_kernels, kw["workload"].num_tensors)
    if args.trace_compression != "deflate":
        if args.trace is None:
            raise InputError("goes with --trace FILE.h5", param="--trace-compression")
        kw["trace_compression"] = args.trace_compression
    try:
        res = run(
            spec, trace_path=args.trace, progress=progress, check=check_arg(args), bound=args.bound, **kw
        )
    except InputError as e:
        raise (e if run_file is None else in_run_file(e, run_file)) from None
    kernel_times_warning(res)
    if args.plan is not None:
        if "plan_object" not in res:
            raise InputError("this policy has no plan (use prefetch_lru or deepUM)", param="--plan")
        from g10fast.planner.io import write_plan

        write_plan(res["plan_object"], args.plan)
    if args.figure is not None:
        from g10fast.figures.memory import plot_memory

        plot_memory(res, args.figure)
    if getattr(args, "timeline", None) is not None:
        policies.engine(rec.engine).write_timeline(res, args.timeline)
    if args.json:
        out = to_json_ready(res)
        if note:
            out["note"] = note
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(summary_text(res, note))
        if res.get("fusion"):
            fu = res["fusion"]
            print(
                f"fusion {fu['mode']}: {fu['kernels_before']:,} -> {fu['kernels_after']:,} "
                f"kernels, {fu['deleted_tensors']:,} tensors "
                f"({fu['deleted_bytes'] / 2**30:.1f} GiB) deleted (docs/fusion.md)"
            )
        if "plan" in res and "hint_counts" in res["plan"]:
            pl = res["plan"]
            line = f"plan: {pl['hints']:,} hints {pl['hint_counts']}"
            if "decisions" in pl:
                line += (
                    f"; estimated peak {pl['peak_estimate_bytes'] / 2**30:.1f} GiB vs "
                    f"capacity {pl['capacity_bytes'] / 2**30:.1f} GiB"
                )
            print(line)
        if args.trace:
            print(f"event trace written to {args.trace}")
        if args.plan:
            print(f"plan written to {args.plan}")
        if args.figure:
            print(f"figure written to {args.figure}")
        if getattr(args, "timeline", None):
            print(f"timeline written to {args.timeline} (ui.perfetto.dev opens it)")
    return 0
