"""The `g10fast` command line.

    g10fast run CONFIG [--g10-root DIR] [--json] [--trace FILE.h5 [--trace-compression none]]
    g10fast run --g10 ARTIFACT_DIR --model BERT --batch 128 --policy lru [--host-mem-gb N ...]
    g10fast run ... --policy prefetch_lru [--plan OUT.csv] [--plan-in IN.csv] [--figure OUT.png]
    g10fast run                      (the default comparison: a built-in model, all policies)
    g10fast run FILE.toml            (a TOML run file, docs/run-format.md)
    g10fast models [--batch N]       (built-in models and their footprint)
    g10fast capture EXAMPLE|module:function --out W.h5 [--batch N --seq-len L --dtype D]
    g10fast workload export MODEL|CONFIG --out W.h5 [--batch N --system S | --g10 DIR]
    g10fast workload inspect W.h5
    g10fast run --workload W.h5 [--policy P --system S]   (an HDF5 workload trace)
    g10fast trace inspect FILE.h5 [--allow-incomplete]
    g10fast trace verify FILE.h5
    g10fast trace export FILE.h5 --perfetto OUT.pftrace [--format json] [--pages] [--kernels A:B]
    g10fast trace diff A.h5 B.h5 | trace plot FILE.h5 --out FIG.png
    g10fast store verify STORE       (every point checked against its checksum)
    g10fast store convert OLD.h5 NEW (a version-1 HDF5 store into a version-2 store)
    g10fast results export STORE --out points.csv|points.parquet
    g10fast sweep MATRIX --store FILE.h5 [--g10 ARTIFACT_DIR] [--workers N] [--dask ADDRESS]
                  [--no-reuse] [--no-keep-buffers]
    g10fast figures STORE.h5 --out DIR [--g10 ARTIFACT_DIR]
    g10fast reproduce --g10 ARTIFACT_DIR [--store FILE.h5] [--out DIR]
    g10fast warm [POLICY ...] [--system PRESET]   (compile the kernels into Numba's cache)

Bad input (missing file, malformed line, unknown key, impossible setting) prints one
message naming the file and line or the parameter, and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from g10fast.cli import alloc, catalog, run, store, sweep, trace, warm, workload
from g10fast.cli.common import ENVIRONMENT_ERRNOS, EXIT_BAD_INPUT, EXIT_INVARIANT, one_line, os_error_text
from g10fast.cli.summary import failure_text, lp_bound_text, summary_text
from g10fast.errors import InputError, InvariantError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_INVARIANT",
    "build_parser",
    "console_main",
    "failure_text",
    "lp_bound_text",
    "main",
    "one_line",
    "summary_text",
]


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser, each from the module of its family, in the order of `--help`."""
    from g10fast import __version__
    from g10fast.validate.cli import add_parser as validate_parser

    p = argparse.ArgumentParser(prog="g10fast", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"g10fast {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    run.add_parsers(sub)  # run
    catalog.add_parsers(sub)  # policies, presets, models
    alloc.add_parsers(sub)  # memory, swap
    trace.add_parsers(sub)  # trace inspect, verify, export, diff, plot
    store.add_parsers(sub)  # store verify, convert; results export
    workload.add_parsers(sub)  # workload export, inspect; capture
    sweep.add_parsers(sub)  # sweep, figures, reproduce
    warm.add_parsers(sub)  # warm
    validate_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from g10fast.progress import close_all

    try:
        return args.func(args)
    except InputError as e:
        close_all()
        sys.stderr.write(f"g10fast: error: {one_line(str(e))}\n")
        return EXIT_BAD_INPUT
    except InvariantError as e:  # --check: a bug in g10fast (docs/invariants.md)
        close_all()
        sys.stderr.write(
            f"g10fast: {one_line(str(e))} (a bug in g10fast: please report it with the command)\n"
        )
        return EXIT_INVARIANT
    except OSError as e:
        if e.errno not in ENVIRONMENT_ERRNOS:
            raise
        close_all()
        sys.stderr.write(f"g10fast: error: {os_error_text(e)}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        close_all()
        sys.stderr.write("g10fast: interrupted\n")
        return 130


def console_main() -> None:
    """The `g10fast` console script: main(), then exit without the interpreter's teardown.

    Every output has been written, closed and renamed by then; what the teardown would do is
    free Numba's compiled code, LLVM and the engine's arrays one object at a time, which
    takes a noticeable share of a short run."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        code = _stdout_closed()
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a C program in `... | head`


def _stdout_closed() -> int:
    """The reader of stdout went away (`g10fast ... | head -1`): end quietly. What is left in
    stdout's buffer goes to /dev/null instead (the Python documentation's recipe, "Note on
    SIGPIPE"), so that no later flush raises again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE
