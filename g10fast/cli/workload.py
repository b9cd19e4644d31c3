"""Workload traces: `workload export`, `workload inspect`, `capture` (a PyTorch step)."""

from __future__ import annotations

import os
from pathlib import Path

from g10fast.errors import InputError


def add_parsers(sub) -> None:
    wk = sub.add_parser("workload", help="export or inspect an HDF5 workload trace")
    wsub = wk.add_subparsers(dest="workload_command", required=True)
    we = wsub.add_parser(
        "export",
        help="write a built-in or artifact workload as an HDF5 "
        "workload trace (docs/workload-trace-format.md)",
    )
    we.add_argument(
        "source",
        help="a built-in model (`g10fast models`), a G10 config file, "
        "or with --g10 an artifact model (BERT, VIT, ResNet152, ...)",
    )
    we.add_argument("--out", required=True, help="the HDF5 file to write")
    we.add_argument("--batch", type=int, help="batch size")
    we.add_argument("--system", help="hardware preset of a built-in model (default g10-artifact)")
    we.add_argument("--g10", type=Path, help="the G10 artifact folder")
    we.set_defaults(func=cmd_workload_export)
    wi = wsub.add_parser("inspect", help="summary and provenance of a workload trace")
    wi.add_argument("file")
    wi.set_defaults(func=cmd_workload_inspect)
    ca = sub.add_parser(
        "capture",
        help="record one training iteration of a PyTorch model on "
        "fake CPU tensors into an HDF5 workload trace (needs torch; "
        "docs/capture.md)",
    )
    ca.add_argument(
        "model",
        help="a bundled example (gpt2-small, gpt2-xl, llama-7b, "
        "qwen2.5-1.5b, qwen2.5-3b, resnet50, mlp, tiny-transformer) "
        "or module:function returning a g10fast.capture.Model",
    )
    ca.add_argument("--out", required=True, help="the HDF5 workload trace to write")
    ca.add_argument("--batch", type=int, help="batch size")
    ca.add_argument("--seq-len", type=int, help="sequence length (language models)")
    ca.add_argument("--dtype", help="float32, bfloat16 or float16 (default: the example's)")
    ca.add_argument(
        "--system",
        default="g10-artifact",
        help="hardware preset whose GPU the kernel times are estimated for",
    )
    ca.add_argument("--optimizer", help="adamw (default), adamw-foreach, adamw-fused or sgd")
    ca.add_argument(
        "--memory-snapshot",
        metavar="OUT.pickle",
        help="also write the captured step's allocations through each allocator "
        "as PyTorch memory snapshots (OUT.<allocator>.pickle; "
        "docs/memory-snapshot.md)",
    )
    ca.set_defaults(func=cmd_capture)


def cmd_workload_export(args) -> int:
    from g10fast.workload.h5trace import write_workload_h5
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec, from_g10_config
    from g10fast.config import genconfig, read_g10_config
    from g10fast.workload.times import frequency_hz

    if args.g10 is not None:
        spec = from_g10_config(genconfig(args.g10, args.source, args.batch or 128, "lru"))
        source = "artifact"
    elif os.path.isfile(args.source) and not args.source.endswith(".toml"):
        spec = from_g10_config(read_g10_config(args.source), source=args.source)
        source = "artifact"
    else:
        spec = builtin_spec(args.source, args.batch, args.system or "g10-artifact")
        source = "builtin"
    w = workload_of(spec)
    sysm = spec.system
    write_workload_h5(
        args.out,
        w,
        {
            "source": source,
            "model": spec.workload.model,
            "batch": spec.workload.batch,
            "gpu": sysm.gpu_model,
            "system_preset": sysm.name or "",
            "kernel_times": w.meta.get("kernel_times", "artifact" if source == "artifact" else "estimated"),
            "command": "g10fast workload export " + args.source,
        },
        freq_hz=frequency_hz(sysm.gpu_frequency_ghz),
        transformer=spec.workload.shape.transformer,
        trans_borden=spec.workload.shape.borden,
    )
    print(
        f"{w.name} batch {w.batch_size}: {w.num_kernels} kernels, {w.num_tensors} tensors, "
        f"{w.footprint_bytes / 2**30:.2f} GiB -> {args.out}"
    )
    return 0


def cmd_workload_inspect(args) -> int:
    from g10fast.workload.h5trace import read_attrs, read_workload_h5

    a = read_attrs(args.file)
    w = read_workload_h5(args.file)
    print(f"{args.file}: {a['format']} version {a['version']}")
    print(
        f"  {w.name} batch {w.batch_size}: {w.num_kernels} kernels, {w.num_tensors} tensors "
        f"({int(w.is_global.sum())} global, {w.weights_bytes / 2**30:.3f} GiB), footprint "
        f"{w.footprint_bytes / 2**30:.3f} GiB, ideal {w.ideal_cycles:,} cycles at "
        f"{int(a['freq_hz']) / 1e9:g} GHz"
    )
    for k, v in sorted(a["provenance"].items()):
        print(f"  {k}: {v}")
    return 0


def cmd_capture(args) -> int:
    try:
        from g10fast.capture import capture_cli
    except ImportError as e:  # pragma: no cover - torch missing
        raise InputError(
            f"capture needs torch ({e}); pip install 'g10fast[torch]'", param="capture"
        ) from None
    return capture_cli(args)
