"""The paper's figures from a results store, beside the artifact's example results.

report = draw_all("results.h5", "figures/", artifact_dir="…/g10-artifact")
print(report.text())          # agreement summary; report.rows = agreement.csv rows
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import atomic_path
from ..errors import InputError

__all__ = ["draw_all", "FigureReport", "relative_error", "check_image_path"]


def check_image_path(path, param: str) -> str:
    """`path` if matplotlib can write an image there: its folder exists and its extension is
    one of matplotlib's formats (png, pdf, svg, ...). Checked before any work is done, so that
    a long run does not end in an unwritable figure. InputError naming `param` otherwise."""
    from matplotlib.backend_bases import FigureCanvasBase

    p = Path(path)
    if not p.resolve().parent.is_dir():
        raise InputError("folder does not exist", path=str(p.resolve().parent), param=param)
    ext = p.suffix.lower().lstrip(".")
    known = sorted(FigureCanvasBase.get_supported_filetypes())
    if ext not in known:
        what = f".{ext}" if ext else "a file without an extension"
        raise InputError(
            f"cannot write a figure as {what}; use one of {', '.join('.' + k for k in known)}",
            path=str(path),
            param=param,
        )
    return str(path)


def relative_error(ours, theirs):
    """|ours - theirs| / |theirs| as a fraction; 0 when both are 0 or both failed (inf);
    inf when exactly one failed or theirs is 0 and ours is not; None when ours is missing."""
    if ours is None or theirs is None:
        return None
    if math.isinf(ours) or math.isinf(theirs):
        return 0.0 if (math.isinf(ours) and math.isinf(theirs)) else math.inf
    if theirs == 0:
        return 0.0 if ours == 0 else math.inf
    return abs(ours - theirs) / abs(theirs)


@dataclass
class FigureReport:
    out_dir: Path
    files: list = field(default_factory=list)
    rows: list = field(default_factory=list)  # (figure, point, g10fast, artifact, rel)

    def summary(self) -> list[dict]:
        """Per figure: points compared, missing, median and max relative error, # over 2 %,
        all over the points both sides ran (or both failed); the points where exactly one
        side failed (its value inf) are counted apart: `artifact_failed` (g10fast ran) and
        `g10fast_failed` (the artifact ran), never folded into the max as 'inf'."""
        out = []
        figs = sorted({r[0] for r in self.rows})
        for f in figs + ["all"]:
            rows = [r for r in self.rows if f == "all" or r[0] == f]
            errs = sorted(r[4] for r in rows if r[4] is not None and math.isfinite(r[4]))
            n = len(errs)
            med = (errs[n // 2] if n % 2 else 0.5 * (errs[n // 2 - 1] + errs[n // 2])) if n else None
            art = [r for r in rows if _one_failed(r) == "artifact"]
            ours = [r for r in rows if _one_failed(r) == "g10fast"]
            out.append(
                {
                    "figure": f,
                    "points": len(rows),
                    "compared": n,
                    "missing": sum(r[4] is None for r in rows),
                    "median": med,
                    "max": errs[-1] if n else None,
                    "over_2pct": sum(e > 0.02 for e in errs),
                    "artifact_failed": len(art),
                    "g10fast_failed": len(ours),
                }
            )
        return out

    def one_failed(self) -> list[tuple]:
        """(figure, configuration, which side failed) for each configuration where exactly one
        side failed, a configuration's parts (overlap, compute, stall) counted once."""
        seen, out = set(), []
        for r in self.rows:
            side = _one_failed(r)
            if side is None:
                continue
            key = (r[0], str(r[1]).split(" ")[0], side)
            if key not in seen:
                seen.add(key)
                out.append(key)
        return out

    def text(self) -> str:
        lines = [f"figures written to {self.out_dir} ({len(self.files)} files)"]
        if not self.rows:
            lines.append("no comparison with the artifact (no example_results found)")
            return "\n".join(lines)
        lines.append(
            "agreement with the artifact's example_results (relative error where both "
            "ran; 'one failed': points only one side could run):"
        )
        lines.append(
            f"{'figure':>7} {'points':>7} {'compared':>9} {'missing':>8} "
            f"{'median':>9} {'max':>9} {'>2%':>5} {'one failed':>11}"
        )
        for s in self.summary():
            med = "-" if s["median"] is None else f"{100 * s['median']:.3f}%"
            mx = "-" if s["max"] is None else f"{100 * s['max']:.3f}%"
            one = s["artifact_failed"] + s["g10fast_failed"]
            lines.append(
                f"{s['figure']!s:>7} {s['points']:>7} {s['compared']:>9} "
                f"{s['missing']:>8} {med:>9} {mx:>9} {s['over_2pct']:>5} "
                f"{one if one else '-':>11}"
            )
        for fig, point, side in self.one_failed():
            lines.append(
                f"  Fig. {fig} {point}: "
                + (
                    "the artifact failed (inf), g10fast ran"
                    if side == "artifact"
                    else "g10fast failed (inf), the artifact ran"
                )
            )
        lines.append(f"details: {self.out_dir / 'agreement.csv'}")
        return "\n".join(lines)


def _one_failed(row) -> str | None:
    """'artifact' or 'g10fast' when exactly that side of an agreement row failed (inf)."""
    ours, theirs = row[2], row[3]
    if ours is None or theirs is None:
        return None
    if math.isinf(theirs) and not math.isinf(ours):
        return "artifact"
    if math.isinf(ours) and not math.isinf(theirs):
        return "g10fast"
    return None


def draw_all(store, out_dir, artifact_dir=None, only=None) -> FigureReport:
    """Draw every figure (PNG and PDF) and write agreement.csv into out_dir."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .data import Reference, Results
    from .plots import FIGURES, make_display

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output folder: {exc.strerror or exc}", path=str(out)) from None
    results = Results(store)
    reference = Reference(artifact_dir)
    report = FigureReport(out)
    numbers = sorted(FIGURES) if not only else [n for n in sorted(FIGURES) if n in set(only)]
    bad = set(only or ()) - set(FIGURES)
    if bad:
        raise InputError(
            f"no figure {sorted(bad)[0]} (figures: {', '.join(map(str, sorted(FIGURES)))})", param="--only"
        )
    for n in numbers:
        disp = make_display(n, results, reference)
        fig = disp.plot()
        for ext in ("png", "pdf"):
            path = out / f"fig{n:02d}_{disp.name}.{ext}"
            try:
                with atomic_path(path, "." + ext) as tmp:
                    fig.savefig(tmp, dpi=150 if ext == "png" else None)
            except BaseException:
                plt.close(fig)
                raise
            report.files.append(path)
        plt.close(fig)
        for f, point, ours, theirs in disp.agreement:
            report.rows.append((f, point, ours, theirs, relative_error(ours, theirs)))
    with atomic_path(out / "agreement.csv") as tmp, open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["figure", "point", "g10fast", "artifact", "relative_error"])
        for f, point, ours, theirs, rel in report.rows:
            w.writerow([f, point, _cell(ours), _cell(theirs), _cell(rel, rel=True)])
    report.files.append(out / "agreement.csv")
    return report


def _cell(v, rel=False):
    if v is None:
        return ""
    if math.isinf(v):
        return "inf"
    if rel:
        return f"{v:.6g}"
    return f"{v:.10g}" if not float(v).is_integer() else str(int(v))
