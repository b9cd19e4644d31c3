"""Where validation rows find the data outside the package: the G10 artifact, the C++ binary's
reference runs and the external traces under ../shared (or $G10_ARTIFACT, $G10_REFERENCE,
$G10_SHARED). A row whose data is absent raises `Unavailable` naming what it looked for."""

from __future__ import annotations

import os
from pathlib import Path

from g10fast.validate import Unavailable


def shared_dir() -> Path:
    env = os.environ.get("G10_SHARED")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2]
    for c in (here.parent / "shared", Path.cwd().parent / "shared", Path.cwd() / "shared"):
        if c.is_dir():
            return c
    return here.parent / "shared"


def artifact_dir() -> Path:
    p = Path(os.environ.get("G10_ARTIFACT") or shared_dir() / "g10-artifact")
    if not (p / "frontend" / "Nets").is_dir():
        raise Unavailable(f"the G10 artifact is not at {p} (set $G10_ARTIFACT)")
    return p


def reference_dir() -> Path:
    p = Path(os.environ.get("G10_REFERENCE") or shared_dir() / "reference")
    if not p.is_dir():
        raise Unavailable(f"the C++ binary's reference runs are not at {p} (set $G10_REFERENCE)")
    return p


def external_dir(name: str) -> Path:
    p = shared_dir() / "external" / name
    if not p.is_dir():
        raise Unavailable(f"{p} is absent")
    return p
