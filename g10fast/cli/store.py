"""Results stores: `store verify`, `store convert`, `results export`."""

from __future__ import annotations

import json
import sys

from g10fast.cli.common import EXIT_BAD_INPUT


def add_parsers(sub) -> None:
    """The `store` and `results` commands."""
    st = sub.add_parser("store", help="check or convert a results store")
    ssub = st.add_subparsers(dest="store_command", required=True)
    sv = ssub.add_parser(
        "verify", help="check every stored point against its checksum; exit 2 naming each damaged point"
    )
    sv.add_argument("store")
    sv.add_argument("--json", action="store_true", help="print the report as JSON")
    sv.set_defaults(func=cmd_store_verify)
    sc = ssub.add_parser(
        "convert",
        help="copy a version-1 (HDF5) store, or what still reads of a damaged store, into a version-2 store",
    )
    sc.add_argument("old")
    sc.add_argument("new")
    sc.set_defaults(func=cmd_store_convert)
    rs = sub.add_parser("results", help="export a results store")
    rsub = rs.add_subparsers(dest="results_command", required=True)
    re_ = rsub.add_parser("export", help="one row per point: parameters, status, times, traffic")
    re_.add_argument("store")
    re_.add_argument("--out", required=True, help="points.csv or points.parquet (pyarrow)")
    re_.set_defaults(func=cmd_results_export)


def cmd_store_verify(args) -> int:
    from g10fast.sweep.store import ResultStore

    s = ResultStore(args.store, create=False)
    rep = s.verify()
    s.close()
    n_bad = len(rep["damaged"]) + (1 if rep.get("structure") else 0)
    if args.json:
        json.dump(
            {
                "store": args.store,
                "version": s.version,
                **rep,
                "damaged": [{"hash": h, "label": lb, "why": w} for h, lb, w in rep["damaged"]],
            },
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
        return EXIT_BAD_INPUT if n_bad else 0
    for line in rep.get("structure") or []:
        print(f"{args.store}: SQLite structure: {line}")
    for h, label, why in rep["damaged"]:
        print(f"{args.store}: damaged point {h}{f' ({label})' if label else ''}: {why}")
    how = "checksums" if rep["checksums"] else "read back (a version-1 store has no checksums)"
    print(f"{args.store}: {rep['points']} points ok ({how}), {len(rep['damaged'])} damaged")
    if n_bad:
        print(
            "a sweep of the same matrix runs the damaged points again, and puts back a "
            "point stored under a changed key and a damaged workload analysis"
        )
        return EXIT_BAD_INPUT
    return 0


def cmd_store_convert(args) -> int:
    from g10fast.sweep.store import convert_store

    n, bad = convert_store(args.old, args.new)
    print(
        f"{n} points copied from {args.old} into {args.new}"
        + (f"; {bad} damaged points left out (a sweep runs them again)" if bad else "")
    )
    return 0


def cmd_results_export(args) -> int:
    from g10fast.sweep.export import export_points

    rep = export_points(args.store, args.out)
    print(
        f"{rep['rows']} points written to {rep['path']}"
        + (
            f" ({rep['damaged']} damaged points left out: g10fast store verify {args.store})"
            if rep["damaged"]
            else ""
        )
    )
    return 0
