"""The page engine's part of the sweep's exact host-size reuse (g10fast.sweep.reuse asks the
engine record's `host_reuse` for this module): the engine's system parameters of a
configuration and a derived point's own plan summary and planner arrays."""

from __future__ import annotations

from g10fast.engine.page import system_params
from g10fast.engine.page.result import plan_summary, planner_arrays


def system(cfg) -> dict:
    """The result's `system` of a G10Config (its `host_line` in pages)."""
    return system_params(cfg).as_dict()


def plan_parts(plan, reported: int) -> tuple[dict, dict]:
    """(the result's `plan` summary, the planner arrays) of `plan`, with no run (the
    simulated GPU use is zeros: the derived point takes its source's)."""
    return plan_summary(plan), planner_arrays(plan, None, int(reported))
