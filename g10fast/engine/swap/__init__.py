"""The swap engine: trace-driven swap plans (SINGA's planner, AppObMem) timed on the tensor
engine as host-link hints, placed by an offset-level allocator (docs/allocators.md).

Its runner (`g10fast.engine.swap.run:run_swap_engine`) plans on the allocation trace derived
from the workload, hands the plan's rows to the tensor engine and runs the allocator over
that run's allocations; its record is `g10fast.engine.swap.record.RECORD`.
"""
