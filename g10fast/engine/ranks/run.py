"""The ranks engine's runner (its registry record: g10fast.engine.ranks.record): a ZeRO
policy's step (g10fast.engine.ranks.simulate_ranks) with the schema's identity fields, the
bound and the seconds."""

from __future__ import annotations

from g10fast.engine.common import model_label
from g10fast.engine.ranks import simulate_ranks
from g10fast.errors import InvariantError
from g10fast.results import add_bound, add_seconds, new_result, workload_summary
from g10fast.workload.model import PAGE_SIZE


def run_ranks_engine(
    spec, rec, ctx, *, plan=None, trace=None, progress=None, required_order=None, check=False, baseline=None
) -> dict:
    """A ZeRO policy on the ranks engine (g10fast.engine.ranks): one data-parallel rank."""
    res = new_result(spec, "ranks", model_label(spec))
    try:
        part = simulate_ranks(spec, rec, ctx, trace=trace, check=check)
    except AssertionError as e:
        raise InvariantError(f"invariant broken in the ranks engine's step: {e}") from None
    f_hz = part.pop("f_hz")
    bound = part.pop("bound_summary", None)
    res.update(part)
    if bound is not None:
        add_bound(res, bound, f_hz)
    res["workload"] = workload_summary(ctx.workload, int(spec.system.gpu_memory_gb * 2**30) // PAGE_SIZE)
    return add_seconds(res, f_hz)
