"""What the rows comparing a built-in model with a capture of the same network share
(claims_models, claims_qwen): torch's presence, the two ratios and their detail."""

from __future__ import annotations

from g10fast.validate import Measured, Unavailable


def need_torch() -> None:
    """Unavailable unless torch is installed (a capture needs it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise Unavailable("torch is not installed (pip install -e '.[torch]')") from None


def ratios(w, cap, extra: str = "") -> tuple[float, float, str]:
    """(built-in footprint / captured footprint, built-in peak live bytes / captured, the
    detail line; `extra` appended to it)."""
    from g10fast.workload.fusion import live_bytes

    lc, lw = int(live_bytes(cap).max()), int(live_bytes(w).max())
    G = 2**30
    detail = (
        f"footprint {w.footprint_bytes / G:.2f} GiB built-in, "
        f"{cap.footprint_bytes / G:.2f} GiB captured; peak live {lw / G:.2f} and "
        f"{lc / G:.2f} GiB{extra}"
    )
    return w.footprint_bytes / cap.footprint_bytes, lw / lc, detail


def ratio_measures(pair):
    """The two rows' measures (footprint ratio, peak-live ratio) of `pair() -> ratios(...)`."""

    def footprint(quick: bool) -> Measured:
        fp, _, detail = pair()
        return Measured(fp, detail)

    def live(quick: bool) -> Measured:
        _, lv, detail = pair()
        return Measured(lv, detail)

    return footprint, live
