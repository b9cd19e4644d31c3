"""The listings: `policies`, `presets`, `models`."""

from __future__ import annotations

import json
import sys


def add_parsers(sub) -> None:
    """`policies`, `presets`, `models`."""
    po = sub.add_parser(
        "policies", help="list the policies (name, display name, engine, paper, options with defaults)"
    )
    po.add_argument("--json", action="store_true", help="print JSON")
    po.set_defaults(func=cmd_policies)
    pr = sub.add_parser("presets", help="list the hardware presets")
    pr.add_argument("--json", action="store_true", help="print JSON")
    pr.set_defaults(func=cmd_presets)
    m = sub.add_parser("models", help="list the built-in models and their footprint")
    m.add_argument("--batch", type=int, help="batch size (default: each model's default)")
    m.add_argument(
        "--system",
        default="g10-artifact",
        help="hardware preset for the 'x GPU' column (default g10-artifact)",
    )
    m.add_argument("--json", action="store_true", help="print JSON")
    m.set_defaults(func=cmd_models)


def _registry_rows() -> list[dict]:
    from g10fast import policies

    return [
        {
            "name": r.name,
            "display": r.display,
            "engine": r.engine,
            "aliases": list(r.aliases),
            "artifact": r.artifact,
            "paper": r.paper,
            "description": r.description,
            "plan_depends_on_host": r.plan_depends_on_host,
            "in_default_comparison": r.in_default_comparison,
            "options": r.option_defaults(),
        }
        for r in policies.records()
    ]


def policies_table(rows: list[dict], width: int = 100) -> str:
    """`g10fast policies` as text: columns as wide as their longest entry, each policy's
    options wrapped under the paper column."""
    import textwrap

    heads = ("policy", "shown as", "engine")
    keys = ("name", "display", "engine")
    w = [max(len(h), *(len(str(r[k])) for r in rows)) for h, k in zip(heads, keys)]
    indent = " " * (sum(w) + len(w))
    lines = [" ".join(h.ljust(n) for h, n in zip(heads, w)) + " paper"]
    for r in rows:
        lines.append(" ".join(str(r[k]).ljust(n) for k, n in zip(keys, w)) + " " + r["paper"])
        if r["options"]:
            opts = ", ".join(f"{k}={v}" for k, v in r["options"].items())
            lines += textwrap.wrap(
                f"options: {opts}",
                width=max(len(indent) + 40, width),
                initial_indent=indent,
                subsequent_indent=indent + "  ",
                break_on_hyphens=False,
                break_long_words=False,
            )
    return "\n".join(lines)


def cmd_policies(args) -> int:
    rows = _registry_rows()
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(policies_table(rows))
    print(
        "(names, aliases and display names are accepted by --policy; options: --option "
        "KEY=VALUE, or [policy.options] in a run file)"
    )
    return 0


def cmd_presets(args) -> int:
    from g10fast.hardware import list_presets, load_preset
    from g10fast.workload.costmodel import estimate_basis, gpu_from_preset

    rows = []
    for name in list_presets():
        p = load_preset(name)
        rows.append(
            {
                "name": name,
                "description": p.get("description", ""),
                "gpu": p["gpu"],
                "host": p["host"],
                "ssd": p["ssd"],
                "uvm": p["uvm"],
                "kernel_times": estimate_basis(gpu_from_preset(p)),
            }
        )
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    # memories in GiB (the engines take memory_gb as 2^30 bytes), bandwidths in GB/s (1e9)
    print(f"{'preset':<16} {'GPU GiB':>7} {'host GiB':>8} {'host GB/s':>10} {'SSD GB/s':>9}  description")
    for r in rows:
        print(
            f"{r['name']:<16} {r['gpu']['memory_gb']:>7g} {r['host']['memory_gb']:>8g} "
            f"{r['host']['link_gbps']:>10g} {r['ssd']['bandwidth_gbps']:>9g}  "
            f"{r['description']}"
        )
        print(f"{'':<16} estimated kernel times: {r['kernel_times']}")
    print(
        "(a built-in model's kernel times are estimated for the preset's GPU as shown: the "
        "artifact's A100 traces keep their fixed per-kernel costs, so at small batches "
        "g10-artifact's times are far above another A100 preset's; a workload trace keeps "
        "the times of the GPU it was made for, and a run on another GPU warns. "
        "docs/model-format.md)"
    )
    return 0


def cmd_models(args) -> int:
    from g10fast.hardware import load_preset
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec
    from g10fast.workload.builtin import list_models, parameter_count

    gpu_gb = load_preset(args.system)["gpu"]["memory_gb"]
    rows = []
    for s in list_models():
        b = args.batch if args.batch is not None else s.default_batch
        # the workload a run of this model builds (`g10fast run --model M --batch B
        # --system S`): its footprint includes the cost model's cuDNN workspaces
        w = workload_of(builtin_spec(s, b, args.system, "ideal"))
        fp = w.footprint_bytes
        ws = int(w.size[w.workspace_tensor[w.workspace_tensor >= 0]].sum())
        rows.append(
            (
                s.key,
                s.name,
                s.kind + "/" + s.family,
                b,
                parameter_count(w) / 1e6,
                w.num_kernels,
                fp / 2**30,
                fp / (gpu_gb * 2**30),
                "paper" if s.params.get("paper") else "",
                ws / 2**30,
            )
        )
    if args.json:
        keys = (
            "key",
            "name",
            "family",
            "batch",
            "params_millions",
            "kernels",
            "footprint_gib",
            "gpu_multiple",
            "paper",
            "workspace_gib",
        )
        json.dump([dict(zip(keys, r)) for r in rows], sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(
        f"{'model':<12} {'name':<12} {'family':<16} {'batch':>6} {'params (M)':>10} "
        f"{'kernels':>8} {'footprint (GiB)':>15} {'x GPU':>6}"
    )
    for r in rows:
        print(
            f"{r[0]:<12} {r[1]:<12} {r[2]:<16} {r[3]:>6} {r[4]:>10.1f} {r[5]:>8} "
            f"{r[6]:>15.1f} {r[7]:>6.2f} {r[8]}"
        )
    print(
        f"(footprint: every tensor of one iteration and the estimated cuDNN workspaces, the "
        f"footprint_bytes of a run on {args.system}; x GPU: footprint / the {gpu_gb:g} GiB "
        f"GPU of preset {args.system}; params: the network's trainable parameters; batch: "
        f"{'--batch' if args.batch else 'each model default'})"
    )
    return 0
