"""What every command shares: the exit statuses, --option KEY=VALUE, --check, progress,
one-line messages, the G10 artifact's folder."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from g10fast.errors import InputError

EXIT_BAD_INPUT = 2
EXIT_INVARIANT = 3


def find_artifact() -> Path | None:
    """../shared/g10-artifact next to the checkout or the working directory, or $G10_ARTIFACT."""
    env = os.environ.get("G10_ARTIFACT")
    cands = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[2]  # the checkout (g10fast/cli/common.py)
    cands += [
        here.parent / "shared" / "g10-artifact",
        Path.cwd().parent / "shared" / "g10-artifact",
        Path.cwd() / "shared" / "g10-artifact",
    ]
    for c in cands:
        if (c / "frontend" / "Nets").is_dir():
            return c
    return None


def add_progress_flags(parser) -> None:
    """--progress and --no-progress (read by run_progress and the sweep)."""
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show the progress bar even "
        "when stderr is not a terminal (default there: a plain line every 5 s, "
        "$G10FAST_PROGRESS_INTERVAL)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar or lines")


def run_progress(args, label: str):
    """The progress(done, total) callback of one run: a tqdm bar on a terminal (or with
    --progress), plain lines every few seconds otherwise, none with --no-progress
    (g10fast/progress.py)."""
    from g10fast.progress import RunProgress

    return RunProgress(label, enabled=not args.no_progress, bar=True if args.progress else None)


def fmt_cycles(c: int, f_hz: float = 1.2e9) -> str:
    return f"{c:,} cycles ({c / f_hz:.3f} s at {f_hz / 1e9:g} GHz)"


def parse_options(items) -> dict:
    """--option KEY=VALUE pairs: values read as TOML (true, 8, 0.5, "text")."""
    import tomllib

    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise InputError(f"expected KEY=VALUE, got {it!r}", param="--option")
        try:
            out[k.strip()] = tomllib.loads(f"v = {v.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[k.strip()] = v.strip()
    return out


def check_arg(args) -> bool | str:
    """run()'s `check` from --check and --check-full."""
    return "full" if getattr(args, "check_full", False) else bool(args.check)


def kernel_times_warning(res: dict) -> None:
    """A run whose kernel times are for another GPU than its system's says so on stderr
    (the result's "kernel_times_warning", g10fast.workload.provenance.kernel_times_fields)."""
    if res.get("kernel_times_warning"):
        print(f"warning: {res['kernel_times_warning']}", file=sys.stderr)


def engines_with(capability: str) -> str:
    """ "the page engine", "the page and tensor engines": the engines whose record says
    `capability` (a flag of g10fast.engine.registry.EngineRecord: kernel_order, allocator,
    lp_bound, timeline), for a message that says which policies a flag applies to."""
    from g10fast import policies

    names = [e.name for e in policies.engines() if getattr(e, capability)]
    if not names:
        return "no engine"
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"the {listed} engine{'s' if len(names) > 1 else ''}"


def one_line(text: str) -> str:
    """`text` on one line: HDF5's messages carry a newline (the C library's ctime() inside
    "file write failed: time = ..."); every line break and the spaces around it become one
    space."""
    import re

    return re.sub(r"\s*[\r\n]+\s*", " ", text).strip()


#: errors of the machine, not of the program: a full disk, a quota, a file too large for the
#: file system or the process's limit, a read-only file system, no permission, an I/O error
ENVIRONMENT_ERRNOS = frozenset(
    getattr(errno, n)
    for n in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EACCES", "EPERM", "EIO")
    if hasattr(errno, n)
)


def os_error_text(e: OSError) -> str:
    """One line for an OSError of `ENVIRONMENT_ERRNOS`, naming the file when known."""
    what = e.strerror or errno.errorcode.get(e.errno, "") or str(e)
    where = f"{e.filename}: " if e.filename else ""
    hint = {
        errno.ENOSPC: "the disk is full: free some space and run the command again",
        errno.EFBIG: "the file is larger than the file system or this process may write",
    }
    return one_line(f"{where}cannot write: {what}" + (f" ({hint[e.errno]})" if e.errno in hint else ""))
