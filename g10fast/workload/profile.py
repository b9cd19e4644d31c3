"""Kernel-time profiles: one file per (GPU, model, batch) in kernels/ (docs/profile-format.md).

A profile is gzip-compressed UTF-8 text:

    # g10fast-profile 1
    source = estimated            (or: measured)
    gpu = NVIDIA A100 40GB (SXM4)
    model = bert-base
    batch = 256
    kernels = 1369
    ...                           (other `key = value` lines: tool, date, preset, notes)
    # id name time_us input_faulting_us all_faulting_us workspace_bytes
    0 GatherV2_Forward 12.5 9000.1 9800.2 0
    ...

Times are microseconds (decimal), workspace whole bytes; ids are 0..K-1 in order and names
must match the model's kernels (checked when a profile is applied to a Graph).
"""

from __future__ import annotations

import gzip
import math
import os
from dataclasses import dataclass, field

import numpy as np

from g10fast.atomic import atomic_path
from g10fast.errors import InputError

MAGIC = "# g10fast-profile 1"
SOURCES = ("estimated", "measured")
COLUMNS = "# id name time_us input_faulting_us all_faulting_us workspace_bytes"


@dataclass
class Profile:
    source: str
    gpu: str
    model: str
    batch: int
    names: list
    time_us: np.ndarray
    input_faulting_us: np.ndarray
    all_faulting_us: np.ndarray
    workspace_bytes: np.ndarray
    meta: dict = field(default_factory=dict)


def write_profile(path, prof: Profile) -> None:
    if prof.source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}")
    K = len(prof.names)
    lines = [
        MAGIC,
        f"source = {prof.source}",
        f"gpu = {prof.gpu}",
        f"model = {prof.model}",
        f"batch = {prof.batch}",
        f"kernels = {K}",
    ]
    lines += [
        f"{k} = {v}" for k, v in prof.meta.items() if k not in ("source", "gpu", "model", "batch", "kernels")
    ]
    lines.append(COLUMNS)
    for k in range(K):
        lines.append(
            f"{k} {prof.names[k]} {prof.time_us[k]:.6g} {prof.input_faulting_us[k]:.6g} "
            f"{prof.all_faulting_us[k]:.6g} {int(prof.workspace_bytes[k])}"
        )
    with atomic_path(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write("\n".join(lines) + "\n")


def read_profile(path) -> Profile:
    path = os.fspath(path)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise InputError("profile not found", path=path) from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"not a gzip-compressed text profile ({e})", path=path) from None
    if not lines or lines[0].strip() != MAGIC:
        raise InputError(f"first line must be {MAGIC!r}", path=path, line=1)
    head: dict = {}
    i = 1
    while i < len(lines) and not lines[i].startswith("#"):
        k, sep, v = lines[i].partition("=")
        if not sep:
            raise InputError(f"expected 'key = value', got {lines[i]!r}", path=path, line=i + 1)
        head[k.strip()] = v.strip()
        i += 1
    for k in ("source", "gpu", "model", "batch", "kernels"):
        if k not in head:
            raise InputError(f"header has no '{k} = ...' line", path=path, line=i + 1)
    if head["source"] not in SOURCES:
        raise InputError(
            f"source must be estimated or measured, got {head['source']!r}", path=path, param="source"
        )
    try:
        K = int(head["kernels"])
        batch = int(head["batch"])
    except ValueError:
        raise InputError("kernels and batch must be integers", path=path) from None
    if i >= len(lines) or lines[i].strip() != COLUMNS:
        raise InputError(f"expected the column line {COLUMNS!r}", path=path, line=i + 1)
    body = [ln for ln in lines[i + 1 :] if ln.strip()]
    if len(body) != K:
        raise InputError(f"header says {K} kernels, file has {len(body)} rows", path=path)
    names = []
    vals = np.zeros((K, 4))
    for j, ln in enumerate(body):
        t = ln.split()
        where = dict(path=path, line=i + 2 + j)
        if len(t) != 6:
            raise InputError(f"expected 6 fields, got {len(t)}", **where)
        if t[0] != str(j):
            raise InputError(f"kernel id {t[0]!r} where {j} was expected", **where)
        names.append(t[1])
        try:
            row = [float(x) for x in t[2:]]
        except ValueError:
            raise InputError("times and workspace must be numbers", **where) from None
        if not all(math.isfinite(x) and x >= 0 for x in row):
            raise InputError("times and workspace must be finite and >= 0", **where)
        if row[0] <= 0:
            raise InputError("kernel time must be > 0", **where)
        vals[j] = row
    meta = {k: v for k, v in head.items() if k not in ("source", "gpu", "model", "batch", "kernels")}
    return Profile(
        head["source"],
        head["gpu"],
        head["model"],
        batch,
        names,
        vals[:, 0],
        vals[:, 1],
        vals[:, 2],
        vals[:, 3].astype(np.int64),
        meta,
    )


#: a decoder's graph form (data/models, g10fast.workload.builtin) that a profile without a
#: `model.attention` / `model.pointwise` line was measured on: every decoder profile written
#: before fused attention and fused point-wise ops became the decoders' default
PROFILE_FORM_BEFORE = {"attention": "materialized", "pointwise": "decomposed"}


def graph_options(prof: Profile, spec) -> dict:
    """The model-file parameters to build the Graph a profile's kernels follow: for a
    decoder, the attention and point-wise form its header names (`model.attention = ...`),
    else the form before they had a choice (PROFILE_FORM_BEFORE); {} for other models."""
    if getattr(spec, "kind", None) != "decoder":
        return {}
    return {k: prof.meta.get(f"model.{k}", v) for k, v in PROFILE_FORM_BEFORE.items()}


def _form_hint(prof: Profile, g) -> str:
    """For a decoder: the graph form the profile was measured on, as model options."""
    if g.meta.get("family") not in ("gpt2", "llama"):
        return ""
    form = {k: prof.meta.get(f"model.{k}", v) for k, v in PROFILE_FORM_BEFORE.items()}
    return (
        " (the profile follows the decoder's attention = "
        + repr(form["attention"])
        + ", pointwise = "
        + repr(form["pointwise"])
        + ": build the model with those "
        "options, e.g. in the run file's [workload])"
    )


def profile_from_estimate(g, gpu, model_key: str, params=None, meta=None) -> Profile:
    from g10fast.workload.costmodel import estimate

    e = estimate(g, gpu, params)
    return Profile(
        "estimated",
        gpu.name,
        model_key,
        g.batch_size,
        list(g.kernel_name),
        e["time_s"] * 1e6,
        e["input_pf_s"] * 1e6,
        e["pf_s"] * 1e6,
        e["workspace_bytes"].astype(np.int64),
        dict(meta or {}),
    )


def workload_from_profile(g, prof: Profile, freq_ghz: float = 1.2):
    """A Workload of Graph `g` with the profile's times (names must match kernel by kernel)."""
    import dataclasses
    from g10fast.workload.model import build_workload
    from g10fast.workload.times import kernel_cycles

    if len(prof.names) != g.num_kernels:
        raise InputError(
            f"profile has {len(prof.names)} kernels, model {g.name} at batch "
            f"{g.batch_size} has {g.num_kernels}" + _form_hint(prof, g),
            param="kernel_times",
        )
    for k, (a, b) in enumerate(zip(prof.names, g.kernel_name)):
        if a != b:
            raise InputError(
                f"kernel {k} is {a!r} in the profile but {b!r} in the model" + _form_hint(prof, g),
                param="kernel_times",
            )
    if prof.batch != g.batch_size:
        raise InputError(
            f"profile is for batch {prof.batch}, the run uses {g.batch_size}", param="kernel_times"
        )
    c = kernel_cycles(prof.time_us / 1e3, prof.input_faulting_us / 1e3, prof.all_faulting_us / 1e3, freq_ghz)
    w = build_workload(g, *c, prof.workspace_bytes)
    return dataclasses.replace(w, meta=dict(w.meta, kernel_times=prof.source, gpu=prof.gpu))
