"""The `validate` command: parser and handler (wired into g10fast.cli)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from g10fast.errors import InputError

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def add_parser(sub) -> None:
    v = sub.add_parser(
        "validate",
        help="every published claim and measured comparison: source, g10fast's "
        "value, band and verdict (docs/validation.md)",
    )
    v.add_argument(
        "--quick",
        action="store_true",
        help="the subset that ends in a few minutes on 2 cores (smaller settings)",
    )
    v.add_argument(
        "--only",
        action="append",
        metavar="ID|SYSTEM",
        help="only these rows (a claim id, an id prefix or a system; repeatable)",
    )
    v.add_argument("--json", action="store_true", help="one JSON object: the rows")
    v.add_argument("--figure", type=Path, help="each row's value against its band (.png, .pdf, .svg)")
    v.add_argument(
        "--markdown",
        type=Path,
        metavar="OUT.md",
        help="write the rows as markdown (docs/validation.md is this file)",
    )
    v.add_argument("--list", action="store_true", help="list the rows without running them")
    v.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    v.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    import g10fast.validate as val

    if args.figure is not None and args.figure.suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(f"a figure ends in {', '.join(FIGURE_SUFFIXES)}", param="--figure")
    if args.markdown is not None and args.markdown.suffix.lower() != ".md":
        raise InputError("the markdown file ends in .md", param="--markdown")
    for p in (args.figure, args.markdown):
        if p is not None and not p.resolve().parent.is_dir():
            raise InputError(f"no such folder: {p.resolve().parent}", param=str(p))
    claims = val.select(val.all_claims(), quick=args.quick, only=args.only)
    if args.only and not claims:
        raise InputError(
            f"no row matches {', '.join(args.only)} (see g10fast validate --list)", param="--only"
        )
    if args.list:
        for c in claims:
            sys.stdout.write(f"{c.id}\t{c.system}\t{'quick' if c.quick else 'full'}\t{c.claim}\n")
        return 0

    t0 = time.time()

    def progress(i, n, cid):
        if args.no_progress:
            return
        if cid:
            sys.stderr.write(f"validate: [{i + 1}/{n}] {cid} ({time.time() - t0:.0f} s)\n")
        else:
            sys.stderr.write(f"validate: {n} rows in {time.time() - t0:.0f} s\n")

    rows = val.run(claims, args.quick, progress)
    if args.json:
        sys.stdout.write(
            json.dumps({"quick": args.quick, "rows": [r.to_dict() for r in rows]}, indent=1) + "\n"
        )
    else:
        sys.stdout.write(val.text_table(rows) + "\n")
    if args.markdown is not None:
        from g10fast.atomic import atomic_path

        cmd = (
            "g10fast validate"
            + (" --quick" if args.quick else "")
            + f" --markdown {args.markdown.as_posix()}"
        )
        stamp = time.strftime("%Y-%m-%d", time.gmtime())
        text = val.markdown(rows, quick=args.quick, command=cmd, stamp=stamp)
        with atomic_path(args.markdown) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    if args.figure is not None:
        val.figure(rows, args.figure)
    return 0
