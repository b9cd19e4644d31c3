"""A TOML run file or the default run: one run, or a comparison of policies with its
table, notes and figure."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from g10fast.cli.common import check_arg, engines_with, kernel_times_warning, parse_options, run_progress
from g10fast.cli.single import run_one
from g10fast.cli.specs import SYSTEM_FLAG, in_run_file, option_names, system_flags, with_run_flags
from g10fast.cli.summary import lp_bound_text
from g10fast.errors import InputError


def run_from_file(args, spec: dict, note: str) -> int:
    """A TOML run file or the default run: one result, or a comparison table and figure.
    Every flag of `run` applies here or is refused (exit 2): the system flags (--system for
    the default run, --host-mem-gb, --ssd-gbps, --pcie-gbps), --option, --allocator, --check
    and --bound apply to every policy that takes them; with one policy the run is a single
    run (--plan, --plan-in, --kernel-order, --trace, --figure as for a built-in model); a
    comparison refuses the flags that write or read one run's file."""
    from g10fast import policies
    from g10fast.api import comparison_figure, comparison_text, run_specs
    from g10fast.results import to_json_ready
    from g10fast.spec import run_file_specs

    run_file = args.config is not None
    fixed = (
        ("model", "batch", "policy", "system", "g10", "g10_root", "workload") if run_file else ("g10_root",)
    )
    for flag in fixed:
        if getattr(args, flag, None) is not None:
            what = (
                "a run file: set it in the file"
                if run_file
                else "the default run (it resolves a G10 config file's relative paths)"
            )
            raise InputError(
                f"--{flag.replace('_', '-')} cannot change {what}", param=f"--{flag.replace('_', '-')}"
            )
    if getattr(args, "fuse", None) is not None:
        spec = dict(spec, workload=dict(spec.get("workload") or {}, fuse=args.fuse))
    if getattr(args, "recompute", None) is not None:
        spec = dict(spec, workload=dict(spec.get("workload") or {}, recompute=args.recompute))
    if not run_file and args.system is not None:
        # the default run on another preset: that preset as it is (the default run's 10 GB
        # of GPU memory is its setting of g10-artifact)
        spec = dict(spec, system={"preset": args.system})
    try:
        specs = with_run_flags(args, run_file_specs(spec))
    except InputError as e:
        raise in_run_file(e, spec) from None
    if len(specs) == 1:
        return run_one(args, specs[0], note, run_file=spec)
    for flag, why in (
        ("plan", "writes one policy's plan"),
        ("plan_in", "replays one plan"),
        ("kernel_order", "orders one run's tensors"),
        ("trace", "writes one run's events"),
        ("timeline", f"writes one run's timeline ({engines_with('timeline')})"),
    ):
        if getattr(args, flag, None) is not None:
            raise InputError(
                f"--{flag.replace('_', '-')} {why}: this is a comparison of "
                f"{len(specs)} policies; give one policy (--model M --policy P, or "
                "a run file with [policy] name = ...)",
                param=f"--{flag.replace('_', '-')}",
            )
    if args.trace_compression != "deflate":
        raise InputError("goes with --trace, which a comparison does not take", param="--trace-compression")
    fig = _comparison_figure_path(args, spec)
    if fig is not None:
        from g10fast.figures import check_image_path

        check_image_path(fig, "--figure")
    bound = _comparison_bound(args, specs)
    try:
        res = run_specs(
            specs,
            progress_factory=lambda p: run_progress(args, policies.display(p)),
            check=check_arg(args),
            bound=bound,
        )
    except InputError as e:
        raise in_run_file(e, spec) from None
    kernel_times_warning(res[0] if res else {})
    title = note
    if args.json:
        json.dump([to_json_ready(r) for r in res], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(comparison_text(res, title))
        for line in _comparison_notes(args, specs, res, bound):
            print(line)
    if fig is None:
        return 0
    comparison_figure(res, fig, title)
    # with --json, stdout holds the JSON alone
    (sys.stderr if args.json else sys.stdout).write(f"figure written to {fig}\n")
    return 0


def _comparison_bound(args, specs) -> dict | str:
    """--bound for a comparison: "lp" for the policies whose engine the LP models (its record's
    lp_bound), refused when none of them is one."""
    from g10fast import policies

    if args.bound != "lp":
        return args.bound
    lp = {s.policy.name: "lp" if policies.engine(s.record.engine).lp_bound else "window" for s in specs}
    if "lp" not in lp.values():
        raise InputError(
            f"the LP models {engines_with('lp_bound')}; no policy of this comparison runs on one",
            param="--bound",
        )
    return lp


def _comparison_notes(args, specs, results, bound) -> list[str]:
    """What the flags changed in a comparison, under its table."""
    from g10fast import policies

    lines = []
    sysf = system_flags(args)
    if sysf:
        lines.append(
            "system: " + ", ".join(f"{SYSTEM_FLAG[k]} {v:g}" for k, v in sysf.items() if k != "gpu_link_gbps")
        )
    opts = parse_options(args.option)
    for k, v in opts.items():
        who = [policies.display(s.policy.name) for s in specs if k in option_names(s)]
        lines.append(f"--option {k}={v!r}: applied to {', '.join(who)}")
    if getattr(args, "allocator", None):
        for r in results:
            if "gpu_memory_needed_bytes" in r:
                lines.append(
                    f"{policies.display(r['policy'])}: GPU memory needed "
                    f"{r['gpu_memory_needed_bytes'] / 2**30:.3f} GiB "
                    f"({r['allocator']['allocator']})"
                )
    if isinstance(bound, dict):
        for r in results:
            lp = (r.get("bound") or {}).get("lp")
            if lp is not None and r.get("status") == "ok":
                lines.append(f"{policies.display(r['policy'])}: " + lp_bound_text(r["bound"]).strip())
        skipped = [policies.display(p) for p, b in bound.items() if b != "lp"]
        if skipped:
            lines.append(
                f"--bound lp: no LP for {', '.join(skipped)} (the LP models {engines_with('lp_bound')})"
            )
    if check_arg(args):
        n = sum(int(r.get("invariant_checks") or 0) for r in results)
        lines.append(f"--check: every policy's invariants held ({n:,} checks; docs/invariants.md)")
    return lines


DEFAULT_COMPARISON_FIGURE = "g10fast-comparison.png"


def _comparison_figure_path(args, spec: dict) -> str | None:
    """Where a comparison's figure goes: --figure PATH; none with --no-figure; else
    <run-file-stem>-comparison.png in the working folder for a run file, and
    g10fast-comparison.png for the default run."""
    if getattr(args, "no_figure", False):
        if args.figure is not None:
            raise InputError("give --figure PATH or --no-figure, not both", param="--no-figure")
        return None
    if args.figure is not None:
        return str(args.figure)
    run_file = spec.get("_path")
    if run_file:
        return f"{Path(run_file).stem}-comparison.png"
    return DEFAULT_COMPARISON_FIGURE
