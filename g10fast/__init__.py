"""g10fast: a fast, faithful re-implementation of the G10 (MICRO'23) memory simulator.

Stages (each a plain function over arrays):

    model file ─► Graph ─► Workload (+ kernel times) ─► Vitality ─► plan ─► engine ─► result

A RunSpec (g10fast.spec) names the policy; the policy's record (g10fast.policies) names its
planner and its engine; the engine's record (g10fast.engine.registry) names its runner
(g10fast.engine.<name>.run), which returns the one result schema (g10fast.results).
g10fast.run.run is the pipeline; docs/engines.md and docs/adding-a-policy.md tell more.
"""

__version__ = "0.1.0"
