"""g10fast: a fast, faithful re-implementation of the G10 (MICRO'23) memory simulator.

Stages (each a plain function over arrays):

    model file ─► Graph ─► Workload (+ kernel times) ─► Vitality ─► engine ─► SimResult
"""

__version__ = "0.1.0"
