"""Write the estimated kernel-time profiles of the built-in models on the hardware presets.

    python kernels/generate_estimated.py [--batch N] [--preset NAME] [--model KEY]

One file per (preset, model, batch): kernels/<preset>/<model>-b<batch>.prof.gz
(docs/profile-format.md), marked `source = estimated`. By default only each model's default
batch is written (the committed set); other batches are generated on the fly by the run
API (kernel_times = "estimated") or by this script with --batch.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g10fast.hardware import PRESETS, load_preset  # noqa: E402
from g10fast.workload.builtin import list_models, load_builtin_graph  # noqa: E402
from g10fast.workload.costmodel import gpu_from_preset, load_params  # noqa: E402
from g10fast.workload.profile import profile_from_estimate, write_profile  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int)
    ap.add_argument("--preset", action="append")
    ap.add_argument("--model", action="append")
    a = ap.parse_args(argv)
    params = load_params()
    for pname in a.preset or PRESETS:
        preset = load_preset(pname)
        out = ROOT / "kernels" / pname
        out.mkdir(parents=True, exist_ok=True)
        for spec in list_models():
            if a.model and spec.key not in a.model:
                continue
            b = a.batch or spec.default_batch
            g = load_builtin_graph(spec, b)
            gpu = gpu_from_preset(preset, int(g.meta.get("dtype_bytes", 4)))
            meta = {
                "preset": pname,
                "tool": "g10fast cost model (data/costmodel/a100.toml)",
                "precision": g.meta.get("precision", "fp32"),
            }
            if spec.kind == "decoder":  # the graph's form (profile.graph_options reads it)
                meta.update({f"model.{k}": spec.params.get(k, "fused") for k in ("attention", "pointwise")})
            prof = profile_from_estimate(g, gpu, spec.key, params, meta=meta)
            path = out / f"{spec.key}-b{b}.prof.gz"
            write_profile(path, prof)
            print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
