"""What a policy tells the driver engine (its record's `engine_mode` returns a DriverMode):
the DriverOptions it fixes, over the engine's defaults and under the run's engine.compat
switches (DriverOptions = defaults < the mode's `overrides` < engine.compat)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DriverMode:
    """`overrides`: (DriverOptions field, value) pairs the policy fixes (each checked by
    `driver_options` when the run starts)."""

    overrides: tuple = ()

    @classmethod
    def of(cls, **values) -> DriverMode:
        """DriverMode(overrides=...) from keywords, in the order given."""
        return cls(tuple(values.items()))

    def options(self, compat=()):
        """The run's DriverOptions: the engine's defaults, these overrides, then `compat`
        (the run's engine.compat switches)."""
        from g10fast.engine.driver import driver_options

        return driver_options(dict(compat or ()), dict(self.overrides))
