"""`g10fast validate`: every published claim and measured comparison, our value, the verdict.

A claim is one row: the system, what its authors (or a measurement) say, where they say it,
the setting g10fast runs it on, g10fast's value, the band that counts as agreeing, and the
verdict. Rows live beside the system they check, one module `claims_<topic>.py` in this
package each, with a module-level ``CLAIMS`` list; `all_claims()` finds them by name, so a
new system adds a file here and edits no table elsewhere.

A row's `measure(quick)` returns a `Measured` (the value, and a line of detail: the runs it
took, per-model figures). `quick=True` is the `--quick` subset's smaller setting (the row's
`quick_setting`); a row with `quick=False` is left out of `--quick`. A measurement that needs
data this machine lacks (the G10 artifact under ../shared, say) raises `Unavailable`; its
verdict is "unavailable", never a pass.

Verdicts: "agrees" (the value lies in the band), "misses" (it does not: the row's `why`
says why, with evidence), "unavailable".
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import time
from dataclasses import dataclass
from typing import Callable

AGREES = "agrees"
MISSES = "misses"
UNAVAILABLE = "unavailable"


class Unavailable(Exception):
    """The data a row needs is not on this machine (the message says which)."""


@dataclass(frozen=True)
class Measured:
    value: float
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    """One published claim or measured comparison and how g10fast checks it.

    id: unique, "<system>.<what>" in lower case ("pump.speedup-vs-uvm").
    system: the system's display name ("PUMP", "SINGA swap", "driver engine").
    claim: what the source says, in a line ("about 2x over naive UM on average").
    source: paper, section or table, or repository and file.
    published: the published value as text ("2.0x mean", "13.3 %").
    setting: what g10fast runs to compare (models, batch, system, oversubscription).
    unit: of the value and the band ("x", "%", "s", "ms").
    band: (low, high), inclusive; the value agrees when low <= value <= high.
    measure: quick -> Measured.
    quick: part of `--quick`; quick_setting: the setting when quick (default: `setting`).
    why: when the row misses, or agrees only in part: the reason, with its evidence.
    """

    id: str
    system: str
    claim: str
    source: str
    published: str
    setting: str
    unit: str
    band: tuple[float, float]
    measure: Callable[[bool], Measured]
    quick: bool = True
    quick_setting: str = ""
    why: str = ""


@dataclass
class Row:
    """A claim's outcome."""

    claim: Claim
    value: float | None
    verdict: str
    detail: str = ""
    seconds: float = 0.0
    quick: bool = False

    def to_dict(self) -> dict:
        c = self.claim
        return {
            "id": c.id,
            "system": c.system,
            "claim": c.claim,
            "source": c.source,
            "published": c.published,
            "setting": (c.quick_setting or c.setting) if self.quick else c.setting,
            "unit": c.unit,
            "band": [c.band[0], c.band[1]],
            "value": self.value,
            "verdict": self.verdict,
            "detail": self.detail,
            "why": c.why,
            "seconds": round(self.seconds, 2),
        }


def all_claims() -> list[Claim]:
    """Every claim of every `claims_*` module of this package, in module then list order."""
    import g10fast.validate as pkg

    out: list[Claim] = []
    seen: set[str] = set()
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not info.name.startswith("claims_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for c in getattr(mod, "CLAIMS", []):
            if c.id in seen:
                raise ValueError(f"claim id {c.id!r} is defined twice ({info.name})")
            seen.add(c.id)
            out.append(c)
    return out


def select(claims: list[Claim], *, quick: bool = False, only: list[str] | None = None) -> list[Claim]:
    """The claims `--quick` and `--only` keep (`only`: ids, id prefixes or system names,
    case-insensitive)."""
    keep = [c for c in claims if c.quick or not quick]
    if only:
        keys = [k.lower() for k in only]
        keep = [
            c
            for c in keep
            if any(
                c.id.lower() == k or c.id.lower().startswith(k + ".") or c.system.lower() == k for k in keys
            )
        ]
    return keep


def verdict(claim: Claim, value: float) -> str:
    lo, hi = claim.band
    if value is None or not math.isfinite(value):
        return MISSES
    return AGREES if lo <= value <= hi else MISSES


def evaluate(claim: Claim, quick: bool) -> Row:
    """Measure one claim; an `Unavailable` becomes that verdict, any other error propagates
    (a row that cannot be computed is a defect, not a verdict)."""
    t0 = time.perf_counter()
    try:
        m = claim.measure(quick)
    except Unavailable as e:
        return Row(claim, None, UNAVAILABLE, str(e), time.perf_counter() - t0, quick)
    return Row(
        claim, float(m.value), verdict(claim, float(m.value)), m.detail, time.perf_counter() - t0, quick
    )


def run(
    claims: list[Claim], quick: bool, progress: Callable[[int, int, str], None] | None = None
) -> list[Row]:
    rows = []
    for i, c in enumerate(claims):
        if progress is not None:
            progress(i, len(claims), c.id)
        rows.append(evaluate(c, quick))
    if progress is not None:
        progress(len(claims), len(claims), "")
    return rows


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a != 0 and (a >= 1e5 or a < 1e-3):
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.1f}"
    return f"{v:.4g}"


def band_text(c: Claim) -> str:
    lo, hi = c.band
    if math.isinf(lo) and math.isinf(hi):
        return "any"
    if math.isinf(hi):
        return f">= {_fmt(lo)} {c.unit}"
    if math.isinf(lo):
        return f"<= {_fmt(hi)} {c.unit}"
    return f"{_fmt(lo)} - {_fmt(hi)} {c.unit}"


def text_table(rows: list[Row]) -> str:
    """The terminal table: one line a row, then the count of each verdict."""
    head = ("id", "system", "value", "band", "verdict")
    body = [
        (
            r.claim.id,
            r.claim.system,
            "-" if r.value is None else f"{_fmt(r.value)} {r.claim.unit}",
            band_text(r.claim),
            r.verdict,
        )
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(str(x[i]).ljust(widths[i]) for i in range(len(head))).rstrip() for x in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(summary_line(rows))
    return "\n".join(lines)


def summary_line(rows: list[Row]) -> str:
    n = {v: sum(r.verdict == v for r in rows) for v in (AGREES, MISSES, UNAVAILABLE)}
    return f"{len(rows)} rows: {n[AGREES]} agree, {n[MISSES]} miss, {n[UNAVAILABLE]} unavailable"


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(rows: list[Row], *, quick: bool, command: str, stamp: str) -> str:
    """docs/validation.md: the table, then each row's detail and, where it misses, why."""
    out = [
        "# Validation: every published claim, g10fast's value, the verdict",
        "",
        f"Generated by `{command}` ({stamp}); do not edit by hand. "
        "Each row is a claim of a system's authors or a measurement on real hardware, the "
        "setting g10fast runs it on, g10fast's value and the band that counts as agreeing. "
        "A row that misses says why. Constants are never tuned to the numbers below; where a "
        "default comes from, its option's docstring says.",
        "",
        summary_line(rows) + (" (the `--quick` subset)" if quick else ""),
        "",
        "| system | claim | published | source | setting | g10fast | band | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r.claim
        d = r.to_dict()
        val = "-" if r.value is None else f"{_fmt(r.value)} {c.unit}"
        out.append(
            "| "
            + " | ".join(
                _md_cell(x)
                for x in (
                    c.system,
                    c.claim,
                    c.published,
                    c.source,
                    d["setting"],
                    val,
                    band_text(c),
                    f"**{r.verdict}**",
                )
            )
            + " |"
        )
    out += ["", "## Rows in detail", ""]
    for r in rows:
        c = r.claim
        out.append(f"### `{c.id}`: {r.verdict}")
        out.append("")
        if r.detail:
            out.append(r.detail)
            out.append("")
        if c.why:
            out.append(f"Why: {c.why}")
            out.append("")
        out.append(f"({r.seconds:.1f} s)")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def figure(rows: list[Row], path) -> None:
    """One marker per row: g10fast's value as a fraction of its band (the band drawn from 0
    to 1; misses outside it), coloured by verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from g10fast.atomic import atomic_path

    shown = [r for r in rows if r.value is not None]
    fig, ax = plt.subplots(figsize=(8, 0.32 * max(len(shown), 4) + 1.2))
    colours = {AGREES: "tab:green", MISSES: "tab:red"}
    for i, r in enumerate(shown):
        lo, hi = r.claim.band
        if math.isinf(lo) or math.isinf(hi) or hi == lo:
            pos = 0.5 if r.verdict == AGREES else (1.2 if r.value > hi else -0.2)
        else:
            pos = (r.value - lo) / (hi - lo)
        pos = max(-1.0, min(2.0, pos))
        ax.plot([pos], [i], "o", color=colours.get(r.verdict, "grey"))
    ax.axvspan(0, 1, color="tab:green", alpha=0.12, label="the claim's band")
    ax.set_yticks(range(len(shown)), [r.claim.id for r in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 2.05)
    ax.set_xlabel("g10fast's value within the band (0 = low end, 1 = high end; unitless)")
    ax.set_title("g10fast validate: each claim's value against its band")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=str(path).rsplit(".", 1)[-1])
    plt.close(fig)
