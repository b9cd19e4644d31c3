"""The driver engine's runner (its registry record: g10fast.engine.driver.record): a policy's
DriverHints (its planner; None: demand paging) through `simulate_driver` under the
DriverOptions its mode gives, the result and the bound
(g10fast.engine.bound_models.driver_engine_model)."""

from __future__ import annotations

import dataclasses

from g10fast.analysis.bounds import bound_summary
from g10fast.engine.bound_models import driver_engine_model
from g10fast.engine.common import model_label, perturbed
from g10fast.engine.driver import DriverHints, iteration_stats, simulate_driver, system_params
from g10fast.engine.driver.mode import DriverMode
from g10fast.errors import InputError, InvariantError
from g10fast.results import add_bound, add_seconds, new_result, workload_summary

#: the driver engine's state beyond every run's: five bitmaps of one bit per page (GPU, host,
#: SSD and two clean/dirty maps, `DriverRun.bits`) and eight int64 per 2 MiB VA block
DRIVER_BITS_PER_PAGE = 5
DRIVER_BLOCK_BYTES = 8 * 8
VA_PAGES = 512


def run_driver_engine(
    spec, rec, ctx, *, plan=None, trace=None, progress=None, required_order=None, check=False, baseline=None
) -> dict:
    """A policy on the driver engine: its planner gives DriverHints (None: demand paging);
    DriverOptions = defaults < the policy's DriverMode overrides < the run's engine.compat."""
    opts = driver_mode(rec, spec).options(spec.engine.compat)
    w = ctx.workload
    if plan is None and rec.planner is not None:
        plan = rec.planner(ctx)
    if plan is not None and not isinstance(plan, DriverHints):
        raise InputError("the driver engine takes DriverHints (a policy of the driver engine)", param="plan")
    n_iter = int(spec.engine.num_iteration)
    w_sim = perturbed(w, spec.engine)
    run = simulate_driver(
        w_sim, spec.system, opts, plan, num_iteration=n_iter, required_order=required_order, trace=trace
    )
    iterations = iteration_stats(run, w_sim, n_iter)
    if check:
        from g10fast.engine.driver import check_invariants

        try:
            check_invariants(run, w_sim)
        except AssertionError as e:
            raise InvariantError(f"invariant broken in the driver engine's run: {e}") from None
    res = new_result(spec, "driver", model_label(spec))
    res.update(
        {
            "iterations": iterations,
            # the steady state: the last iteration (the first populates memory by zero-fill)
            "reported": len(iterations) - 1 if iterations else None,
            "workload": workload_summary(w, run.params["gpu_pages"]),
            "system": run.params,
            "driver_options": dataclasses.asdict(opts),
            "warnings": {},
            "tensor_order": "ascending" if required_order is None else "given",
            "kernels": run.kernels,
            "failure": run.failure,
        }
    )
    res["status"] = run.status
    if plan is not None:
        res["plan"] = {
            "policy": rec.name,
            "hints": int(len(plan.issue)),
            **{k: v for k, v in plan.info.items() if isinstance(v, (int, float, str, bool))},
        }
    if check:
        res["invariant_checks"] = len(run.kernels)
    add_driver_bound(res, w_sim, run, opts, spec.system)
    return add_seconds(res, run.params["f_hz"])


def driver_mode(rec, spec) -> DriverMode:
    """The DriverMode a policy's record gives for the spec's options."""
    mode = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
    if not isinstance(mode, DriverMode):
        raise InputError(
            f"policy {rec.name} must give the driver engine a DriverMode (its record's engine_mode)",
            param="policy",
        )
    return mode


def add_driver_bound(res, w_sim, run, opts, system):
    """The driver engine's bound (g10fast.engine.bound_models.driver_engine_model) beside
    every iteration; the first iteration gets its own (its first touches zero-fill)."""
    prm = system_params(system, opts)
    ideal = float(w_sim.exec_cycles.sum())
    f_hz = run.params["f_hz"]
    first = bound_summary(driver_engine_model(w_sim, prm, opts, first_iteration=True), w_sim, ideal)
    add_bound(res, bound_summary(driver_engine_model(w_sim, prm, opts), w_sim, ideal), f_hz)
    its = res.get("iterations") or []
    if its:
        one = add_bound({"iterations": [its[0]]}, first, f_hz)
        res["bound"]["first_iteration"] = {
            k: one["bound"][k] for k in ("time", "window", "traffic", "time_cycles", "time_s")
        }
    return res


def memory_parts(spec, workload) -> dict:
    """The driver engine's own memory at its peak (g10fast.resources): the residency bitmaps
    and the per-block rows."""
    pages = int(workload.num_pages)
    blocks = (pages + VA_PAGES - 1) // VA_PAGES
    return {"residency bitmaps": (pages * DRIVER_BITS_PER_PAGE + 7) // 8 + blocks * DRIVER_BLOCK_BYTES}
