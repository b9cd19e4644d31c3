"""`warm`: compile the policies' kernels into Numba's on-disk cache before the first run."""

from __future__ import annotations

import json
import sys


def add_parsers(sub) -> None:
    """`warm`."""
    w = sub.add_parser(
        "warm",
        help="compile the kernels of the policies' engines into Numba's on-disk cache "
        "(one run each of the default comparison's workload), for a Docker image "
        "or a CI job: later runs on this machine start warm (g10fast/warm.py)",
    )
    w.add_argument(
        "policies", nargs="*", metavar="POLICY", help="policies to warm (default: every registered policy)"
    )
    w.add_argument(
        "--system",
        help="hardware preset to run them on (default: the default "
        "comparison's, g10-artifact at 10 GB; the ZeRO policies "
        "need one with a [node] table, e.g. dgx-a100-40)",
    )
    w.add_argument(
        "--aot",
        action="store_true",
        help="first build the kernels compiled ahead of time again (what the install does: "
        "after editing a checkout; g10fast/aot.py)",
    )
    w.add_argument("--json", action="store_true", help="print the rows as JSON")
    w.set_defaults(func=cmd_warm)


def cmd_warm(args) -> int:
    from g10fast import policies
    from g10fast.hardware import load_preset
    from g10fast.warm import warm

    for name in args.policies:  # an unknown name or preset: InputError first
        policies.get(name)
    if args.system is not None:
        load_preset(args.system)

    from g10fast import aot
    from g10fast.errors import InputError

    if args.aot:
        from g10fast.warm import build_aot

        r = build_aot()
        if r.returncode != 0:
            raise InputError(f"the build failed: {r.stderr.strip()[-1500:]}", param="--aot")
        aot._STATE.clear()  # (read the new module's record)
    st = aot.status()
    if not args.json:
        if st["used"]:
            n = sum(st["entries"].values())
            print(f"kernels compiled ahead of time: used ({n} entries; the runs below compile the rest)")
        else:
            print(f"kernels compiled ahead of time: not used ({st['why']})")

    def show(row):
        if args.json:
            return
        if "error" in row:
            print(f"{row['policy']:<16} {row['engine']:<7} not warmed: {row['error']}")
        else:
            print(f"{row['policy']:<16} {row['engine']:<7} {row['cpu_s']:7.2f} CPU s {row['wall_s']:7.2f} s")

    if not args.json:
        print("policy           engine  run with its compile (a warm cache: well under a second)")
    rows = warm(args.policies or None, system=args.system, progress=show)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0
