"""Planners: vitality in, a MigrationPlan of hint arrays out.

plan_g10(workload, vitality, cfg, **options)   G10's Smart Tensor Migration (spec §5)
deepum_hints(workload, degree) / plan_deepum    DeepUM+'s look-ahead prefetch (spec §6.3)
write_plan / read_plan                          the plan file (docs/plan-format.md)
"""

from g10fast.planner.deepum import deepum_hints, plan_deepum
from g10fast.planner.g10 import OPTIONS, plan_g10, planner_params
from g10fast.planner.plan import MigrationPlan, sort_hints


__all__ = [
    "MigrationPlan",
    "OPTIONS",
    "deepum_hints",
    "plan_deepum",
    "plan_g10",
    "planner_params",
    "sort_hints",
]
