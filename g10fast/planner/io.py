"""The plan file (docs/plan-format.md): a CSV text file of hints, one per line.

    # g10fast plan 1
    # policy prefetch_lru
    # kernels 1369
    kernel,tensor,from,to
    0,1,Not_Known,In_gpu
    ...

Lines starting with '#' and blank lines are ignored, except that `# kernels K` (if present)
is checked against the workload. Locations are G10's names (Not_present, In_ssd, In_cpu,
In_gpu, Not_Known) or their codes 0-4.

`read_plan` also reads the hint lines of the C++ binary's own statistics/prefetch_guide.config
(`Issued Time: k Tensor: t G:x From: A, To: B`), so that the engine can run on the C++'s plan
in the C++'s order (O-18, O-19; docs/tensor-order.md).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib

import numpy as np

from g10fast.atomic import atomic_path
from g10fast.errors import InputError
from g10fast.planner.plan import LOCATION_NAMES, MigrationPlan, sort_hints

HEADER = "kernel,tensor,from,to"
_G10_GUIDE = re.compile(r"^Issued Time: (\d+) Tensor: (\d+) G:\S+ From: (\S+), To: (\S+)$")
_CODES = {n.lower(): i for i, n in enumerate(LOCATION_NAMES[:5])}


def write_plan(plan: MigrationPlan, path) -> None:
    """Write the plan's hints (in engine order) to `path` (temporary name, then renamed)."""
    path = os.fspath(path)
    lines = ["# g10fast plan 1", f"# policy {plan.policy}", f"# kernels {plan.num_kernels}", HEADER]
    for k, t, f, to in plan.hints.tolist():
        lines.append(f"{k},{t},{LOCATION_NAMES[f]},{LOCATION_NAMES[to]}")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def _loc(text, path, line, param):
    s = text.strip()
    if s.isdigit() and int(s) < 5:
        return int(s)
    code = _CODES.get(s.lower())
    if code is None:
        raise InputError(
            f"unknown location {s!r} (Not_present, In_ssd, In_cpu, In_gpu, Not_Known or 0-4)",
            path=path,
            line=line,
            param=param,
        )
    return code


def read_plan(
    path, num_kernels: int | None = None, num_tensors: int | None = None, order: str = "stable"
) -> MigrationPlan:
    """Read a plan file; hints are sorted by kernel (stable: same-kernel hints keep the file
    order, which is the order the engine applies them in)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError("plan file not found", path=path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        rows, policy, declared_k = _read_rows(opener, path, num_kernels, num_tensors)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(
            f"not a plan file (a text CSV, docs/plan-format.md): {type(exc).__name__}: {exc}", path=path
        ) from None
    if num_kernels is not None and declared_k is not None and declared_k != num_kernels:
        raise InputError(
            f"the plan is for {declared_k} kernels, the workload has {num_kernels}",
            path=path,
            param="kernels",
        )
    h = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    K = num_kernels if num_kernels is not None else (declared_k or int(h[:, 0].max(initial=0)))
    return MigrationPlan(
        policy=policy, num_kernels=int(K), hints=sort_hints(h, order), emitted=h, info={"source": path}
    )


def _read_rows(opener, path, num_kernels, num_tensors):
    """(hint rows, policy, declared kernel count) of a plan file (read_plan)."""
    rows = []
    policy = "file"
    declared_k = None
    with opener(path, "rt", encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            s = raw.strip()
            if not s:
                continue
            if s.startswith("#"):
                parts = s[1:].split()
                if len(parts) == 2 and parts[0] == "kernels":
                    try:
                        declared_k = int(parts[1])
                    except ValueError:
                        raise InputError("bad kernel count", path=path, line=n) from None
                elif len(parts) == 2 and parts[0] == "policy":
                    policy = parts[1]
                continue
            if s.replace(" ", "") == HEADER:
                continue
            g = _G10_GUIDE.match(s)
            if g is not None:
                # a line of G10's own statistics/prefetch_guide.config (its hints in the
                # order its simulator applies them: O-18's hash-set order, O-19's sort)
                s = f"{g.group(1)},{g.group(2)},{g.group(3)},{g.group(4)}"
                if policy == "file":
                    policy = "g10-guide"
            cols = [c.strip() for c in s.split(",")]
            if len(cols) != 4:
                raise InputError(
                    f"expected 4 comma-separated fields ({HEADER}), got {len(cols)}", path=path, line=n
                )
            try:
                k, t = int(cols[0]), int(cols[1])
            except ValueError:
                raise InputError("kernel and tensor must be integers", path=path, line=n) from None
            fr = _loc(cols[2], path, n, "from")
            to = _loc(cols[3], path, n, "to")
            K = num_kernels if num_kernels is not None else declared_k
            if k < 0 or (K is not None and k > K):
                raise InputError(f"kernel {k} outside [0, {K}]", path=path, line=n, param="kernel")
            if t < 0 or (num_tensors is not None and t >= num_tensors):
                raise InputError(f"tensor {t} outside [0, {num_tensors})", path=path, line=n, param="tensor")
            if to == 4:
                raise InputError("a hint cannot move a tensor to Not_Known", path=path, line=n, param="to")
            rows.append((k, t, fr, to))
    return rows, policy, declared_k
