"""`g10fast run`: its flags, and the way from them to one run or a comparison."""

from __future__ import annotations

import sys
from pathlib import Path

from g10fast.atomic import checked_target
from g10fast.cli.common import add_progress_flags
from g10fast.cli.compare import run_from_file
from g10fast.cli.single import run_one
from g10fast.cli.specs import spec_from_args, with_run_flags
from g10fast.errors import InputError


def add_parsers(sub) -> None:
    """The `run` command's flags."""
    r = sub.add_parser(
        "run",
        help="simulate one configuration",
        description="Simulate one G10 configuration: a G10 .config file, or the "
        "point genconfigs.py would generate (--g10 ... --model ...).",
    )
    r.add_argument(
        "config",
        nargs="?",
        help="a TOML run file (docs/run-format.md) or a G10 "
        "config file (key value lines); none: the default "
        "comparison of all policies on a built-in model",
    )
    r.add_argument(
        "--g10-root",
        help="folder that the config's relative paths are relative to "
        "(the artifact's src/); default: found from the config",
    )
    r.add_argument("--g10", type=Path, help="the G10 artifact folder, to build a config like genconfigs.py")
    r.add_argument(
        "--model",
        help="a built-in model (`g10fast models`), or with --g10 one of "
        "BERT, VIT, Inceptionv3, ResNet152, SENet154",
    )
    r.add_argument("--batch", type=int, help="batch size")
    r.add_argument(
        "--workload",
        help="an HDF5 workload trace (`g10fast capture`, `g10fast "
        "workload export`; docs/workload-trace-format.md)",
    )
    r.add_argument(
        "--system", help="hardware preset of a built-in model (`g10fast presets`; default g10-artifact)"
    )
    r.add_argument(
        "--policy",
        help="a policy of `g10fast policies` (name, alias or display "
        "name); with a config file it replaces the file's",
    )
    r.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a policy option (`g10fast policies` lists them); repeatable",
    )
    r.add_argument("--plan", help="write the migration plan (hints) to this CSV file (docs/plan-format.md)")
    r.add_argument(
        "--plan-in",
        help="run the engine on this plan file instead of planning (e.g. a hand-edited --plan output)",
    )
    r.add_argument(
        "--kernel-order",
        help="process each kernel's tensors in the order of this "
        "G10 statistics/kernels.config (the C++'s hash-set order, O-18; page-engine "
        "policies; docs/tensor-order.md) instead of ascending tensor ids",
    )
    r.add_argument(
        "--figure",
        help="write a figure to this image file: for one run, estimated "
        "vs simulated GPU memory per kernel; for a comparison (the "
        "default run, TOML runs), the comparison (default "
        "g10fast-comparison.png for the default run, "
        "RUNFILE-comparison.png for RUNFILE.toml, in the working "
        "folder)",
    )
    r.add_argument("--no-figure", action="store_true", help="write no comparison figure")
    r.add_argument("--host-mem-gb", type=float, help="host memory for swapping, GiB")
    r.add_argument(
        "--allocator",
        help="an offset-level allocator (cuda_malloc, cnmem, pytorch, "
        "singa_colour, bump) that places the run's allocations: the result's GPU "
        "memory needed (tensor-engine and swap policies; docs/allocators.md)",
    )
    r.add_argument("--ssd-gbps", type=float, help="SSD bandwidth, GB/s")
    r.add_argument("--pcie-gbps", type=float, help="PCIe (host and GPU link) bandwidth, GB/s")
    r.add_argument(
        "--gpus",
        type=int,
        metavar="N",
        help="data-parallel GPUs of the preset's node (the ranks engine's ZeRO policies; docs/zero.md)",
    )
    r.add_argument(
        "--recompute",
        choices=["none", "full", "selective"],
        help="activation checkpointing, a workload pass any policy takes: every "
        "layer (full) or the attention core (selective) recomputed in the "
        "backward (docs/zero.md)",
    )
    r.add_argument(
        "--timeline",
        metavar="OUT.json",
        help="the ranks engine's step as a Perfetto/Chrome trace: a track for the "
        "host thread, the CPU's optimizer, the GPU, NVLink, each PCIe "
        "direction and NVMe",
    )
    r.add_argument(
        "--fuse",
        choices=["none", "xla", "stitch"],
        help="fuse memory-intensive "
        "kernels before planning as XLA or FusionStitching would (docs/fusion.md; "
        "default none; a run file sets workload.fuse)",
    )
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument(
        "--check",
        action="store_true",
        help="assert the engine's invariants at every kernel boundary (capacity "
        "never exceeded, each page in one place, the LRU list whole; "
        "docs/invariants.md); same result, measured 1.4-1.8x the time of a "
        "plain run (BERT-128, ResNet152-256)",
    )
    r.add_argument(
        "--check-full",
        action="store_true",
        help="--check with the page engine's event stream too (bytes moved = bytes "
        "arrived) and the page table read at every kernel boundary up to 1 Mi "
        "pages, every k-th above; same result, measured 27-49x the time of a "
        "plain run (BERT-128, ResNet152-256)",
    )
    r.add_argument(
        "--bound",
        choices=("window", "lp"),
        default="window",
        help="lp: also the checkpoint LP bound (page and tensor engines; SciPy, "
        "seconds; shown under the summary or the comparison; docs/bounds.md)",
    )
    r.add_argument("--trace", help="write the engine's events to this HDF5 file")
    r.add_argument(
        "--memory-snapshot",
        metavar="OUT.pickle",
        help="write the workload's allocations (its derived allocation trace, one "
        "iteration) through each allocator (--allocator: that one) as PyTorch "
        "memory snapshots for pytorch.org/memory_viz (several: "
        "OUT.<allocator>.pickle; docs/memory-snapshot.md)",
    )
    r.add_argument(
        "--trace-compression",
        choices=("deflate", "none"),
        default="deflate",
        help="the event trace's chunks: deflate (default, shuffle + deflate 1) or "
        "none (stored unfiltered: ~1.6x faster to write, ~80x larger; "
        "docs/trace-format.md)",
    )
    add_progress_flags(r)
    r.set_defaults(func=run_and_memory_snapshots)


def run_and_memory_snapshots(args) -> int:
    """`run`, then with --memory-snapshot the run's workload (its derived allocation trace, one
    iteration, as `g10fast memory MODEL`) through each allocator (--allocator: that one), each
    written as a PyTorch memory snapshot (docs/memory-snapshot.md)."""
    if not getattr(args, "memory_snapshot", None):
        return cmd_run(args)
    checked_target(args.memory_snapshot, "--memory-snapshot")
    rc = cmd_run(args)
    from g10fast.alloc.snapshot import write_workload_snapshots
    from g10fast.run import workload_of

    if (
        args.config is None
        and args.g10 is None
        and args.model is None
        and args.batch is None
        and args.policy is None
        and getattr(args, "workload", None) is None
        or str(args.config).endswith(".toml")
    ):
        from g10fast.api import DEFAULT_RUN, read_run_file
        from g10fast.spec import run_file_specs

        rf = DEFAULT_RUN if args.config is None else read_run_file(args.config)
        if args.fuse is not None:
            rf = dict(rf, workload=dict(rf.get("workload") or {}, fuse=args.fuse))
        if args.config is None and args.system is not None:  # as run_from_file
            rf = dict(rf, system={"preset": args.system})
        spec = with_run_flags(args, run_file_specs(rf))[0]  # the system flags too
    else:
        spec, _ = spec_from_args(args)
        if args.fuse is not None:
            from g10fast.spec import with_fuse

            spec = with_fuse(spec, args.fuse)
    names = [args.allocator] if getattr(args, "allocator", None) else None
    for p in write_workload_snapshots(
        workload_of(spec), args.memory_snapshot, names, spec.system.gpu_frequency_ghz
    ):
        (sys.stderr if args.json else sys.stdout).write(f"memory snapshot written to {p}\n")
    return rc


def cmd_run(args) -> int:
    if (
        args.config is None
        and args.g10 is None
        and args.model is None
        and args.batch is None
        and args.policy is None
        and getattr(args, "workload", None) is None
    ):
        # the default comparison: the flags that change a run apply to it (run_from_file)
        from g10fast.api import DEFAULT_RUN

        w = DEFAULT_RUN["workload"]
        on = (
            f"the {args.system} system"
            if args.system is not None
            else f"the {DEFAULT_RUN['system']['preset']} system with "
            f"{DEFAULT_RUN['system']['overrides']['gpu.memory_gb']:g} GiB of GPU memory"
        )
        note = f"default run: built-in {w['model']} at batch {w['batch']} on {on}, estimated kernel times"
        return run_from_file(args, DEFAULT_RUN, note)
    if args.config is not None and str(args.config).endswith(".toml"):
        from g10fast.api import read_run_file

        return run_from_file(args, read_run_file(args.config), f"run file {args.config}")
    if args.g10_root is not None and args.config is None:
        raise InputError(
            "resolves a G10 config file's relative paths: give the config file "
            "(g10fast run CONFIG --g10-root DIR)",
            param="--g10-root",
        )
    spec, note = spec_from_args(args)
    if args.fuse is not None:
        from g10fast.spec import with_fuse

        spec = with_fuse(spec, args.fuse)
    if args.recompute is not None:
        from g10fast.spec import with_recompute

        spec = with_recompute(spec, args.recompute)
    if args.gpus is not None:
        spec = spec.replace(system=spec.system.replace(gpus=args.gpus))
    if getattr(args, "allocator", None):
        import dataclasses

        spec = spec.replace(engine=dataclasses.replace(spec.engine, allocator=args.allocator).check())
    return run_one(args, spec, note)
