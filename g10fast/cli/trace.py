"""Event traces: `trace inspect`, `verify`, `export` (Perfetto, Chrome JSON), `diff`,
`plot`."""

from __future__ import annotations

import argparse
import json
import sys

from g10fast.cli.common import EXIT_BAD_INPUT, fmt_cycles, run_progress
from g10fast.errors import InputError


def add_parsers(sub) -> None:
    """`trace` and its subcommands."""
    t = sub.add_parser("trace", help="inspect an event trace")
    tsub = t.add_subparsers(dest="trace_command", required=True)
    ti = tsub.add_parser("inspect", help="summary of an event-trace file")
    ti.add_argument("file")
    ti.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="read the trace of a killed run up to its last complete chunk",
    )
    ti.set_defaults(func=cmd_trace_inspect)
    tv = tsub.add_parser(
        "verify",
        help="check every chunk of an event trace against its checksum; exit 2 naming each damaged chunk",
    )
    tv.add_argument("file")
    tv.add_argument("--json", action="store_true", help="print the report as JSON")
    tv.set_defaults(func=cmd_trace_verify)
    ti.add_argument(
        "--json",
        action="store_true",
        help="event counts per kind and in all (events), time span, the run's configuration, as JSON",
    )
    _trace_timeline_parsers(tsub)


def _trace_timeline_parsers(tsub) -> None:
    """`trace export`, `trace diff`, `trace plot` (docs/perfetto.md)."""
    te_help = (
        "timeline for ui.perfetto.dev (protobuf) or chrome://tracing (JSON); a range row "
        "(schema 2 and 3: ticks > 1) is placed tick by tick, each at its own time"
    )
    te = tsub.add_parser("export", help=te_help, description=te_help)
    te.add_argument("file")
    te.add_argument("--perfetto", metavar="OUT.pftrace", help="output file")
    te.add_argument("--out", help="output file (same as --perfetto)")
    te.add_argument(
        "--format",
        choices=["perfetto", "json"],
        help="perfetto (default) or json (Chrome trace events; small runs)",
    )
    te.add_argument(
        "--pages",
        action="store_true",
        help="page-level detail: every move, fault and hint (use with --kernels)",
    )
    te.add_argument(
        "--kernels", metavar="A:B", help="only kernel executions A..B-1 (time order, all iterations counted)"
    )
    te.add_argument(
        "--samples", type=int, help="counter samples per counter (default 100,000; 200,000 with --pages)"
    )
    te.add_argument(
        "--flows",
        action="store_true",
        help="a flow arrow from the last page arrival each faulting kernel waited for to the kernel",
    )
    te.add_argument(
        "--open",
        action="store_true",
        help="serve the file once on 127.0.0.1 and print the ui.perfetto.dev URL that loads it",
    )
    te.add_argument(
        "--port", type=int, default=9001, help="port for --open (default 9001, the one the UI allows)"
    )
    te.add_argument("--json", action="store_true", help="print the export's report as JSON")
    te.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)
    te.add_argument("--no-progress", action="store_true", help="no progress lines")
    te.set_defaults(func=cmd_trace_export)
    td_help = (
        "where two runs of the same workload diverge: kernel starts and stalls, and whether "
        "their events are the same in normal form (however pages were grouped into rows and "
        "ticks into ranges; schema 1 and 2 alike), else the first event that differs"
    )
    td = tsub.add_parser("diff", help=td_help, description=td_help)
    td.add_argument("a")
    td.add_argument("b")
    td.add_argument("--top", type=int, default=10, help="kernels listed (default 10)")
    td.add_argument(
        "--no-events",
        action="store_true",
        help="compare kernels only, not events (the event comparison reads both traces twice)",
    )
    td.add_argument("--json", action="store_true", help="print the report as JSON")
    td.set_defaults(func=cmd_trace_diff)
    tp = tsub.add_parser("plot", help="residency per tier and link throughput over time")
    tp.add_argument("file")
    tp.add_argument("--out", required=True, help="figure file (.png, .pdf, .svg)")
    tp.add_argument("--kernels", metavar="A:B", help="only kernel executions A..B-1")
    tp.set_defaults(func=cmd_trace_plot)


def cmd_trace_inspect(args) -> int:
    from g10fast.trace import PAGELESS_KINDS, EventKind, open_trace

    if getattr(args, "json", False):
        from g10fast.perfetto import inspect_json

        json.dump(inspect_json(args.file, allow_incomplete=args.allow_incomplete), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    tr = open_trace(args.file, allow_incomplete=args.allow_incomplete)
    try:
        tr.verify(raise_on_damage=True)
        print(
            f"{args.file}: schema {tr.schema_version}, {tr.n_events:,} events"
            + ("" if tr.complete else " (incomplete: up to the last complete chunk)")
        )
        meta = tr.meta or {}
        print(f"model {meta.get('model')} batch {meta.get('batch_size')} policy {meta.get('policy')}")
        counts = tr.count_by_kind()
        pages = tr.pages_by_kind()
        # schema 2 to 4: a range row stands for several batcher ticks, a FAULT row of schema 4
        # for several runs of one fault scan (docs/trace-format.md)
        ticks = tr.ticks_by_kind() if tr.schema_version >= 2 else {}
        for kind, n in counts.items():
            name = getattr(kind, "name", str(kind))
            if kind in PAGELESS_KINDS:  # a transfer's begin/end marks: no pages
                print(f"  {name:10s} {n:>12,} events {'(begin/end marks)':>20}")
            else:
                m = ticks.get(kind, n)
                of = "runs" if kind == EventKind.FAULT else "ticks"
                more = f" (as {m:,} rows of {of})" if m != n else ""
                print(f"  {name:10s} {n:>12,} events {pages.get(kind, 0):>14,} pages{more}")
    finally:
        tr.close()
    return 0


def cmd_trace_verify(args) -> int:
    from g10fast.trace import verify_trace

    rep = verify_trace(args.file)
    if args.json:
        json.dump({k: v for k, v in rep.items() if k != "lines"}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_BAD_INPUT if rep["damaged"] else 0
    for line in rep["lines"]:
        print(line)
    if rep["damaged"]:
        print(f"{args.file}: {len(rep['damaged'])} damaged chunk(s) or attribute(s)")
        return EXIT_BAD_INPUT
    print(
        f"{args.file}: ok, {rep['chunks']} chunks checked"
        f"{'' if rep['checksums'] else ' (a trace without checksums: chunks decoded)'}"
        f"{'' if rep['complete'] else ' (incomplete: the writer did not finish)'}"
    )
    return 0


def cmd_trace_export(args) -> int:
    from g10fast.perfetto import export_trace, serve_once

    out = args.perfetto or args.out
    if out is None:
        raise InputError(
            "give the output file: --perfetto OUT.pftrace (or --out OUT.json with --format json)",
            param="--perfetto",
        )
    fmt = args.format or ("json" if str(out).endswith(".json") else "perfetto")
    if args.samples is not None and args.samples < 1:
        raise InputError(f"must be at least 1 counter sample, got {args.samples}", param="--samples")
    if not 1 <= args.port <= 65535:
        raise InputError(f"must be a TCP port, 1 to 65535, got {args.port}", param="--port")
    progress = run_progress(args, "exporting")
    progress.unit = "event"  # events read from the trace
    try:
        rep = export_trace(
            args.file,
            out,
            fmt=fmt,
            pages=args.pages,
            kernels=args.kernels,
            samples=args.samples,
            flows=args.flows,
            progress=progress,
        )
    except OSError as e:  # a full disk: the message names the file being written
        if e.filename is None:
            e.filename = str(out)
        raise
    progress.close()
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        a, b = rep["kernel_range"]
        unit = "packets" if fmt == "perfetto" else "events"
        print(
            f"{out}: {rep['bytes']:,} bytes, {rep['packets']:,} {unit} "
            f"({rep['kernel_slices']:,} kernel slices {a}..{b - 1}, "
            f"{sum(rep['link_slices']):,} transfer slices, {rep['fault_slices']:,} fault slices, "
            f"{rep['hint_instants']:,} hint instants; counters every "
            f"{rep['counter_interval_cycles']:,} cycles)"
        )
    if args.open:
        if fmt != "perfetto":
            raise InputError("--open serves a Perfetto file: drop --format json", param="--open")
        serve_once(
            out,
            port=args.port,
            on_ready=lambda url: print(
                f"open {url}\n(serving {out} once on 127.0.0.1:{args.port}; Ctrl-C stops)", flush=True
            ),
        )
    return 0


def cmd_trace_diff(args) -> int:
    from g10fast.perfetto import diff_traces

    if args.top < 0:
        raise InputError(f"must be 0 or more kernels, got {args.top}", param="--top")
    rep = diff_traces(args.a, args.b, top=args.top, events=not args.no_events)
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    f = rep["f_hz"]
    print(
        f"A {rep['a']}: {rep['executions_a']:,} kernel executions, ends at "
        f"{fmt_cycles(rep['end_a_cycles'], f)}"
    )
    print(
        f"B {rep['b']}: {rep['executions_b']:,} kernel executions, ends at "
        f"{fmt_cycles(rep['end_b_cycles'], f)}"
    )
    d = rep["first_start_difference"]
    if d is None:
        print("every matched kernel starts at the same cycle")
    else:
        print(
            f"first kernel whose start differs: execution {d['execution']} (iteration "
            f"{d['iteration']}, kernel {d['kernel']} {d['name']}): A {d['start_a_cycles']:,}, "
            f"B {d['start_b_cycles']:,} ({d['difference_cycles']:+,} cycles)"
        )
    print(
        f"{rep['executions_with_different_stall']:,} executions with a different stall, "
        f"in all {rep['total_stall_difference_cycles']:+,} cycles (B - A)"
    )
    if rep["top"]:
        print(f"{'exec':>6} {'iter':>4} {'kernel':>6} {'stall B - A (cycles)':>22}  name")
        for r in rep["top"]:
            print(
                f"{r['execution']:>6} {r['iteration']:>4} {r['kernel']:>6} "
                f"{r['stall_difference_cycles']:>+22,}  {r['name']}"
            )
    ev = rep.get("events")
    if ev is not None and ev["equal"]:
        print(f"events: the same ({ev['rows']:,} rows in normal form: page events however grouped)")
    elif ev is not None:
        d = ev["first_difference"]
        print(f"events: first difference at normal-form row {d['index']:,} (time order; the same before it)")
        print(f"  A {_event_text(d['a'])}")
        print(f"  B {_event_text(d['b'])}")
    return 0


def _event_text(r) -> str:
    """One normal-form event row, readable."""
    if r is None:
        return "(no more events)"
    from g10fast.trace import Location

    where = (
        f" pages {r['page']:,}..{r['page'] + r['count'] - 1:,}" if r["count"] > 0 and r["page"] >= 0 else ""
    )
    loc = lambda v: Location(v).name if 0 <= v < len(Location) else "none"
    return (
        f"cycle {r['time']:,}: {r['kind_name']} iteration {r['iteration']} kernel {r['kernel']} "
        f"tensor {r['tensor']}{where} {loc(r['src'])} -> {loc(r['dst'])} value {r['value']}"
    )


def cmd_trace_plot(args) -> int:
    from g10fast.figures import check_image_path
    from g10fast.perfetto import plot_trace

    check_image_path(args.out, "--out")  # before the pass over the trace
    rep = plot_trace(args.file, args.out, kernels=args.kernels)
    a, b = rep["kernel_range"]
    print(f"figure written to {args.out} (kernels {a}..{b - 1})")
    return 0
