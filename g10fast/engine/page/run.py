"""The page engine's runner (its registry record: g10fast.engine.page.record): a policy's
PageMode and plan through `simulate_pages`, the result (g10fast.engine.page.result) and its
bound (g10fast.engine.bound_models.page_engine_model)."""

from __future__ import annotations

from g10fast.analysis.bounds import bound_summary
from g10fast.engine.bound_models import page_engine_model
from g10fast.engine.common import model_label, perturbed
from g10fast.engine.page import LRU_INT32_PAGES, PAGE_SIZE, page_params, simulate_pages
from g10fast.engine.page.result import page_result
from g10fast.engine.stats import iteration_stats, reported_iteration
from g10fast.errors import InputError
from g10fast.results import add_bound


def run_page_engine(spec, rec, ctx, *, plan=None, trace=None, progress=None,
                    required_order=None, check=False, baseline=None) -> dict:
    """The G10-compatible page engine under a policy's PageMode and plan."""
    if spec.engine.compat:
        raise InputError("the page engine has no compatibility switches (its quirks are "
                         "always on: it is the artifact's)", param="engine.compat")
    mode = rec.engine_mode(spec.policy.options, spec.engine)
    params = page_params(spec.system, mode)
    w = ctx.workload
    if plan is None and mode.use_prefetch and rec.planner is not None:
        plan = rec.planner(ctx)
    w_sim = perturbed(w, spec.engine)
    page_run = simulate_pages(w_sim, params, hints=None if plan is None else plan.hints,
                              trace=trace, progress=progress, required_order=required_order,
                              check=check, bulk=spec.engine.page_bulk)
    iterations = iteration_stats(page_run.kernels, page_run.pcie, page_run.boundaries,
                                 w_sim.exec_cycles, w_sim.pf_cycles,
                                 page_run.params.num_iteration)
    res = page_result(spec, model_label(spec), w, w_sim, page_run, iterations,
                      reported_iteration(iterations), plan, required_order)
    if check:
        res["invariant_checks"] = page_run.extra["invariant_checks"]
        res["page_table_scans"] = page_run.extra["page_table_scans"]
    summary = bound_summary(page_engine_model(w_sim, page_run.params), w_sim,
                            float(w_sim.exec_cycles.sum()))
    return add_bound(res, summary, page_run.params.f_hz)


def lp_model(spec, rec, w):
    """The page engine's model for the checkpoint LP (cycles): (model or None, unit_ms)."""
    mode = rec.engine_mode(spec.policy.options, spec.engine)
    return page_engine_model(perturbed(w, spec.engine), page_params(spec.system, mode)), False


def memory_parts(spec, workload) -> dict:
    """The page engine's own memory at its peak (g10fast.resources): a byte a page for the
    page states, and DeepUM's LRU ring (int32 slots below LRU_INT32_PAGES pages, else
    int64)."""
    rec = spec.record
    pages = int(workload.num_pages)
    parts = {"page states (1 byte a page)": pages}
    mode = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
    if getattr(mode, "deepum", False):
        frames = int(float(spec.system.gpu_memory_gb) * 2**30 / PAGE_SIZE + 0.5)
        live = min(pages, frames)
        cap = 1 << (live + max(live // 4, 1 << 12) - 1).bit_length()
        parts["LRU ring"] = cap * (4 if pages < LRU_INT32_PAGES else 8)
    return parts
