"""Planners: vitality in, a MigrationPlan of hint arrays out.

  plan_g10(workload, vitality, cfg, **options)   G10's Smart Tensor Migration (spec §5)
  deepum_hints(workload, degree) / plan_deepum    DeepUM+'s look-ahead prefetch (spec §6.3)
  plan_for_config(workload, cfg)                  the plan a G10 config's policy uses
  write_plan / read_plan                          the plan file (docs/plan-format.md)
"""

from g10fast.planner.deepum import deepum_hints, plan_deepum
from g10fast.planner.g10 import OPTIONS, plan_g10, planner_params
from g10fast.planner.plan import MigrationPlan, sort_hints


def plan_for_config(workload, cfg, vitality=None, **options) -> MigrationPlan:
    """The plan of a page-engine config: DeepUM's look-ahead for migration_policy DEEPUM,
    else G10's plan (also for lru, where the engine ignores it, O-28)."""
    from g10fast.analysis.vitality import vitality as _vitality

    if str(cfg.migration_policy).upper() == "DEEPUM":
        return plan_deepum(workload, int(cfg.prefetch_degree))
    v = vitality if vitality is not None else _vitality(workload, cfg.GPU_frequency_GHz)
    return plan_g10(workload, v, cfg, **options)


__all__ = ["MigrationPlan", "OPTIONS", "deepum_hints", "plan_deepum", "plan_for_config",
           "plan_g10", "planner_params", "sort_hints"]
