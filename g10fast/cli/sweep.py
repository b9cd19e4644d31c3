"""Experiment matrices: `sweep`, `figures`, `reproduce`."""

from __future__ import annotations

from pathlib import Path

from g10fast.cli.common import add_progress_flags, find_artifact
from g10fast.errors import InputError


def _sweep_opts(q) -> None:
    """The flags `sweep` and `reproduce` share: workers, Dask, progress, reuse, kept buffers."""
    q.add_argument(
        "--workers",
        default=None,
        metavar="N",
        help="worker processes (default: CPU count; 0 = in this process)",
    )
    q.add_argument(
        "--dask", metavar="ADDRESS", help="run on a Dask distributed scheduler (pip install 'g10fast[dask]')"
    )
    add_progress_flags(q)
    q.add_argument(
        "--no-reuse",
        action="store_true",
        help="simulate every point; by default a page-engine point whose host "
        "memory line is above the peak host use of a run of the same "
        "configuration at another host size is derived from that run "
        "(the same simulation; docs/sweep-performance.md)",
    )
    q.add_argument(
        "--no-keep-buffers",
        action="store_true",
        help="map each point's page states afresh and give freed ones back as it runs, so "
        "that a worker's memory follows its current point; by default a worker keeps them "
        "from point to point (the same results, 13-18 %% less CPU for the page engine's "
        "points, up to the largest point's states held: docs/sweep-performance.md)",
    )


def add_parsers(sub) -> None:
    """`sweep`, `figures`, `reproduce`."""
    sw = sub.add_parser(
        "sweep",
        help="run an experiment matrix into a results store",
        description="Run every point of a TOML experiment matrix "
        "(docs/matrix-format.md) into a results store "
        "(docs/store-format.md); points already stored are skipped.",
    )
    sw.add_argument(
        "matrix",
        help="a matrix file, or the name of a bundled one in data/matrices (artifact, fig11, ..., smoke)",
    )
    sw.add_argument(
        "--store", required=True, help="results store (SQLite, created if missing; docs/store-format.md)"
    )
    sw.add_argument("--g10", type=Path, help="the G10 artifact folder (default: found)")
    sw.add_argument("--max-points", type=int, help="run at most this many points now")
    sw.add_argument(
        "--no-retry-errors",
        action="store_true",
        help="skip points stored with status error instead of running them again",
    )
    _sweep_opts(sw)
    sw.set_defaults(func=cmd_sweep)

    fg = sub.add_parser(
        "figures",
        help="draw the paper's figures from a results store",
        description="Draw Figures 2, 3, 4 and 11-19 (PNG and PDF) from a results "
        "store, beside the artifact's example results, and write "
        "agreement.csv.",
    )
    fg.add_argument("store", help="HDF5 results store")
    fg.add_argument("--out", required=True, type=Path, help="output folder")
    fg.add_argument("--g10", type=Path, help="the G10 artifact folder, for its example_results")
    fg.add_argument("--only", nargs="+", type=int, help="only these figure numbers")
    fg.set_defaults(func=cmd_figures)

    rp = sub.add_parser(
        "reproduce",
        help="the whole evaluation: sweep + figures + agreement",
        description="Run the artifact's matrix (or --matrix) into the store, "
        "then draw every figure and summarise the agreement.",
    )
    rp.add_argument("--g10", type=Path, help="the G10 artifact folder (default: found)")
    rp.add_argument(
        "--store", default="g10fast-results.g10db", help="results store (default g10fast-results.g10db)"
    )
    rp.add_argument("--out", type=Path, default=Path("figures"), help="figure folder (default figures/)")
    rp.add_argument("--matrix", default="artifact", help="matrix (default: artifact, 1,410 points)")
    _sweep_opts(rp)
    rp.set_defaults(func=cmd_reproduce)


def _artifact_arg(g10) -> Path:
    artifact = g10 if g10 is not None else find_artifact()
    if artifact is None:
        raise InputError(
            "no G10 artifact found (looked for ../shared/g10-artifact and "
            "$G10_ARTIFACT); pass --g10 ARTIFACT_DIR",
            param="--g10",
        )
    if not (Path(artifact) / "frontend" / "Nets").is_dir():
        raise InputError("not the G10 artifact root (no frontend/Nets)", path=str(artifact))
    return Path(artifact)


def _sweep_progress(args):
    """The sweep's reporter factory (total points -> reporter): one tqdm bar on a terminal (or
    with --progress), plain lines every few seconds otherwise, none with --no-progress."""
    from g10fast.progress import SweepProgress

    return lambda total: SweepProgress(
        total, enabled=not args.no_progress, tty=True if args.progress else None
    )


def _sweep(
    matrix,
    store,
    artifact,
    workers,
    dask,
    prog,
    retry_errors=True,
    max_points=None,
    reuse=True,
    keep_buffers=True,
):
    from g10fast.sweep.matrix import expand_matrix, named_matrix, resolve_points
    from g10fast.sweep.runner import run_sweep

    path = named_matrix(matrix)
    resolved = resolve_points(expand_matrix(path), artifact)
    summary = run_sweep(
        resolved,
        store,
        workers=workers,
        dask=dask,
        progress=prog,
        retry_errors=retry_errors,
        max_points=max_points,
        reuse=reuse,
        keep_buffers=keep_buffers,
    )
    return summary


def _sweep_args(args, workers, artifact, **kw):
    """`_sweep` of the matrix, store and shared flags (`_sweep_opts`) of `sweep` or
    `reproduce`."""
    return _sweep(
        args.matrix,
        args.store,
        artifact,
        workers,
        args.dask,
        _sweep_progress(args),
        reuse=not args.no_reuse,
        keep_buffers=not args.no_keep_buffers,
        **kw,
    )


def _workers(text) -> int | None:
    """--workers: None (default: CPU count), 0 (in this process) or a positive integer."""
    if text is None:
        return None
    try:
        n = int(str(text).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise InputError(
            f"must be a positive number of worker processes, or 0 to run in this process; got {text!r}",
            param="--workers",
        )
    return n


def cmd_sweep(args) -> int:
    workers = _workers(args.workers)
    if args.max_points is not None and args.max_points < 1:
        raise InputError(
            f"must be at least 1 point, got {args.max_points} (leave it out to run every point)",
            param="--max-points",
        )
    summary = _sweep_args(
        args,
        workers,
        _artifact_arg(args.g10),
        retry_errors=not args.no_retry_errors,
        max_points=args.max_points,
    )
    print(summary.text())
    if summary.error_labels:
        print(
            "errors: "
            + ", ".join(summary.error_labels[:20])
            + (" ..." if len(summary.error_labels) > 20 else "")
        )
    print(f"results in {args.store}")
    return 0


def cmd_figures(args) -> int:
    from g10fast.figures import draw_all

    artifact = args.g10 if args.g10 is not None else find_artifact()
    report = draw_all(args.store, args.out, artifact_dir=artifact, only=args.only)
    print(report.text())
    return 0


def cmd_reproduce(args) -> int:
    from g10fast.figures import draw_all

    workers = _workers(args.workers)
    artifact = _artifact_arg(args.g10)
    summary = _sweep_args(args, workers, artifact)
    print(summary.text())
    report = draw_all(args.store, args.out, artifact_dir=artifact)
    print(report.text())
    return 0
