"""Analyses of a Workload that planners consume: tensor vitality (liveness, inactive periods)."""

from g10fast.analysis.vitality import (
    Vitality,
    interval_config_text,
    is_alive,
    time_table,
    vitality,
    write_interval_config,
)

__all__ = ["Vitality", "vitality", "is_alive", "time_table", "interval_config_text", "write_interval_config"]
