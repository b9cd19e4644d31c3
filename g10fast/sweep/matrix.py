"""Experiment matrices: a TOML file of axes, expanded to resolved G10 configurations.

Format: docs/matrix-format.md. In short, a matrix is a list of ``[[group]]`` tables; each group
names its axes (models, batch, policies, host_mem_gb, ssd_gbps, pcie_gbps, kernel_time_std_dev,
ran_seed, kernel_speedup), any axis may be a scalar, a list, or a table keyed by model; the
axes are crossed (product), except those named together in ``zip`` which advance in step.
The matrix is the union of its groups, in file order, without duplicates (two points are the
same when their resolved configurations have the same `config_hash`).

    points = expand_matrix("data/matrices/fig11.toml")     # no artifact needed
    resolved = resolve_points(points, artifact_dir)        # G10Config + hash + label each
"""

from __future__ import annotations

import itertools
import math
import os
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..config import GEN_DEFAULTS, G10Config, config_hash, genconfig, resolve_model
from ..errors import InputError, read_toml

__all__ = [
    "AXES",
    "Point",
    "ResolvedPoint",
    "expand_matrix",
    "expand_matrix_dict",
    "resolve_points",
    "matrix_dir",
    "named_matrix",
]

#: Axis name -> (kind, default). Order = enumeration order (the first varies slowest).
AXES: dict[str, tuple[str, object]] = {
    "batch": ("int", None),
    "policies": ("policy", None),
    "host_mem_gb": ("float", GEN_DEFAULTS["host_mem_gb"]),
    "ssd_gbps": ("float", GEN_DEFAULTS["ssd_gbps"]),
    "pcie_gbps": ("float", GEN_DEFAULTS["pcie_gbps"]),
    "kernel_time_std_dev": ("float", GEN_DEFAULTS["kernel_time_std_dev"]),
    "ran_seed": ("seed", None),
    "kernel_speedup": ("float", GEN_DEFAULTS["kernel_speedup"]),
}
_GROUP_KEYS = set(AXES) | {"models", "zip", "name", "description"}
_TOP_KEYS = {"name", "description", "group"}


@dataclass(frozen=True)
class Point:
    """One experiment point, before resolution against an artifact folder."""

    model: str  # genconfigs key: BERT, VIT, Inceptionv3, ResNet152, SENet154
    batch: int
    policy: str  # artifact policy name, or "ideal"
    host_mem_gb: float = GEN_DEFAULTS["host_mem_gb"]
    ssd_gbps: float = GEN_DEFAULTS["ssd_gbps"]
    pcie_gbps: float = GEN_DEFAULTS["pcie_gbps"]
    kernel_time_std_dev: float = GEN_DEFAULTS["kernel_time_std_dev"]
    ran_seed: int | None = None  # None: the artifact's per-model seed (genconfig)
    kernel_speedup: float = GEN_DEFAULTS["kernel_speedup"]
    group: str = ""

    def config(self, artifact_dir) -> G10Config:
        """The G10Config genconfigs.py would write for this point (ideal: lru with is_UVM 0)."""
        pol = "lru" if self.policy == "ideal" else self.policy
        host = self.host_mem_gb
        if pol == "G10GDSSSD" and host == GEN_DEFAULTS["host_mem_gb"]:
            host = None  # genconfig forces 0 GiB itself
        cfg = genconfig(
            artifact_dir,
            self.model,
            self.batch,
            pol,
            host_mem_gb=host,
            ssd_gbps=self.ssd_gbps,
            pcie_gbps=self.pcie_gbps,
            kernel_time_std_dev=self.kernel_time_std_dev,
            ran_seed=self.ran_seed,
            kernel_speedup=self.kernel_speedup,
        )
        if self.policy == "ideal":
            folder = cfg.output_folder
            head, tail = os.path.split(folder)
            b, _, rest = tail.partition("-lru")
            cfg = cfg.replace(is_UVM=False, output_folder=os.path.join(head, f"{b}-ideal{rest}"))
        return cfg


@dataclass(frozen=True)
class ResolvedPoint:
    point: Point
    config: G10Config | None  # None: a policy the artifact's format cannot say (see spec)
    hash: str
    label: str  # <config folder>/<output folder name>, e.g. BERT/256-lru-ssd6_4-pcie32
    spec: object = None  # the RunSpec of a point without a G10 config


def matrix_dir() -> Path:
    """data/matrices (g10fast.datadir.data_dir)."""
    from g10fast.datadir import data_dir

    return data_dir() / "matrices"


def named_matrix(name_or_path) -> Path:
    """A matrix file: an existing path, or the name of one in data/matrices (fig11, artifact...)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    cand = matrix_dir() / (p.name if p.suffix == ".toml" else p.name + ".toml")
    if cand.is_file() and len(p.parts) == 1:
        return cand
    known = sorted(x.stem for x in matrix_dir().glob("*.toml"))
    raise InputError(
        f"no matrix file {str(name_or_path)!r} (not a file, and not one of the "
        f"bundled matrices: {', '.join(known)})",
        path=str(name_or_path),
    )


def expand_matrix(path) -> list[Point]:
    """Read a TOML matrix file and expand it to its points (file order, duplicates kept)."""
    p = os.fspath(path)
    data = read_toml(p, "matrix file")
    return expand_matrix_dict(data, source=p)


def expand_matrix_dict(data: dict, source: str | None = None) -> list[Point]:
    """Expand an already parsed matrix (the TOML document as a dict)."""

    def fail(msg, param=None):
        raise InputError(msg, path=source, param=param)

    bad = set(data) - _TOP_KEYS
    if bad:
        fail(
            f"unknown top-level key {sorted(bad)[0]!r} (allowed: {', '.join(sorted(_TOP_KEYS))})",
            param=sorted(bad)[0],
        )
    groups = data.get("group")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        fail("a matrix needs at least one [[group]] table", param="group")
    out: list[Point] = []
    for gi, g in enumerate(groups):
        gname = str(g.get("name", f"group{gi + 1}"))
        try:
            out.extend(_expand_group(g, gname))
        except InputError as exc:
            raise InputError(f"[[group]] {gname!r}: {exc}", path=source, param=exc.param) from None
    return out


def _scalar(axis: str, kind: str, v):
    if kind == "policy":
        if not isinstance(v, str):
            raise InputError(f"expected a policy name, got {v!r}", param=axis)
        from g10fast import policies

        return policies.get(v, param=axis).name
    if kind in ("int", "seed"):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if kind == "int" else 0):
            raise InputError(
                f"expected a {'positive ' if kind == 'int' else ''}integer, got {v!r}", param=axis
            )
        return int(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"expected a non-negative number, got {v!r}", param=axis)
    return float(v)


def _values(axis: str, spec, model_key: str, models: dict) -> list:
    """The list of values of one axis for one model."""
    kind, default = AXES[axis]
    if isinstance(spec, dict):
        by_model = {}
        for k, v in spec.items():
            if k == "default":
                by_model["default"] = v
                continue
            try:
                by_model[resolve_model(k).key] = v
            except InputError:
                raise InputError(
                    f"table key {k!r} is not a model (known: "
                    f"{', '.join(m.key for m in models.values())}, or 'default')",
                    param=axis,
                ) from None
        if model_key in by_model:
            spec = by_model[model_key]
        elif "default" in by_model:
            spec = by_model["default"]
        elif default is not None or kind == "seed":
            return [default]
        else:
            raise InputError(
                f"no value for model {model_key} (add it to the table or give 'default')", param=axis
            )
    vals = spec if isinstance(spec, list) else [spec]
    if not vals:
        raise InputError("an axis needs at least one value", param=axis)
    return [_scalar(axis, kind, v) for v in vals]


def _expand_group(g: dict, gname: str) -> list[Point]:
    from ..config import MODELS

    bad = set(g) - _GROUP_KEYS
    if bad:
        k = sorted(bad)[0]
        raise InputError(
            f"unknown axis {k!r} (allowed: {', '.join(['models'] + list(AXES))}, zip, name, description)",
            param=k,
        )
    for need in ("models", "batch", "policies"):
        if need not in g:
            raise InputError(f"missing axis {need!r}", param=need)
    models = g["models"]
    models = models if isinstance(models, list) else [models]
    if not models or not all(isinstance(m, str) for m in models):
        raise InputError("expected a list of model names", param="models")
    zips = g.get("zip", [])
    if not isinstance(zips, list) or not all(isinstance(z, list) and len(z) >= 2 for z in zips):
        raise InputError("expected a list of lists of two or more axis names", param="zip")
    zipped = [a for z in zips for a in z]
    for a in zipped:
        if a not in AXES:
            raise InputError(f"zip names {a!r}, which is not an axis", param="zip")
    if len(set(zipped)) != len(zipped):
        raise InputError("an axis appears in more than one zip bundle", param="zip")

    out = []
    for mname in models:
        mkey = resolve_model(mname).key
        vals = {}
        for a, (kind, default) in AXES.items():
            if a in g:
                vals[a] = _values(a, g[a], mkey, MODELS)
            else:
                vals[a] = [default]
        # one factor per free axis, one per zip bundle (list of tuples)
        factors: list[tuple[tuple[str, ...], list[tuple]]] = []
        for z in zips:
            lens = {a: len(vals[a]) for a in z}
            if len(set(lens.values())) != 1:
                raise InputError(
                    f"zipped axes have different lengths for {mkey}: "
                    + ", ".join(f"{a}={n}" for a, n in lens.items()),
                    param="zip",
                )
            factors.append((tuple(z), list(zip(*(vals[a] for a in z)))))
        for a in AXES:
            if a not in zipped:
                factors.append(((a,), [(v,) for v in vals[a]]))
        # enumerate in AXES order: sort the factors by their first axis' position
        order = list(AXES)
        factors.sort(key=lambda f: min(order.index(a) for a in f[0]))
        for combo in itertools.product(*(f[1] for f in factors)):
            kv = {}
            for (names, _), values in zip(factors, combo):
                kv.update(zip(names, values))
            out.append(
                Point(
                    model=mkey,
                    batch=kv["batch"],
                    policy=kv["policies"],
                    host_mem_gb=kv["host_mem_gb"],
                    ssd_gbps=kv["ssd_gbps"],
                    pcie_gbps=kv["pcie_gbps"],
                    kernel_time_std_dev=kv["kernel_time_std_dev"],
                    ran_seed=kv["ran_seed"],
                    kernel_speedup=kv["kernel_speedup"],
                    group=gname,
                )
            )
    return out


def resolve_points(points, artifact_dir) -> list[ResolvedPoint]:
    """Resolve points to configs against the artifact folder; drops duplicates (same hash)."""
    seen: set[str] = set()
    out = []
    from g10fast import policies
    from g10fast.spec import from_g10_config

    for pt in points:
        rec = policies.get(pt.policy)
        spec = None
        try:
            if rec.artifact is not None:
                cfg = pt.config(artifact_dir)
            else:  # the workload and system of the point, under the registry's policy
                base = dataclasses.replace(pt, policy="lru").config(artifact_dir)
                spec = from_g10_config(base, policy=rec.name)
                cfg = None
        except InputError as exc:
            raise InputError(f"point {pt.model}/{pt.batch}/{pt.policy} (group {pt.group!r}): {exc}") from None
        h = config_hash(cfg) if cfg is not None else spec.hash()
        if h in seen:
            continue
        seen.add(h)
        if cfg is not None:
            label = f"{resolve_model(pt.model).key}/{os.path.basename(cfg.output_folder)}"
        else:
            folder = os.path.basename(base.output_folder).replace("-lru", f"-{rec.name}", 1)
            label = f"{resolve_model(pt.model).key}/{folder}"
        out.append(ResolvedPoint(pt, cfg, h, label, spec))
    return out
