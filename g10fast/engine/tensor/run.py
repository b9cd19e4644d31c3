"""The tensor engine's runner (its registry record: g10fast.engine.tensor.record): a policy's
plan through `simulate_tensors`, the result (g10fast.engine.tensor.result), an offset-level
allocator over the run's allocations when one is asked for, and the bound
(g10fast.engine.bound_models.tensor_engine_model; ms, O-34)."""

from __future__ import annotations

import numpy as np

from g10fast.analysis.bounds import bound_summary
from g10fast.engine.bound_models import tensor_engine_model
from g10fast.engine.common import compat_options, model_label
from g10fast.engine.tensor import TensorOptions, exec_ms_of, simulate_tensors
from g10fast.engine.tensor.mode import TensorMode
from g10fast.engine.tensor.result import tensor_result
from g10fast.errors import InputError
from g10fast.results import add_bound
from g10fast.workload.model import PAGE_SIZE


def run_tensor_engine(
    spec, rec, ctx, *, plan=None, trace=None, progress=None, required_order=None, check=False, baseline=None
) -> dict:
    """The tensor-granular engine (FlashNeuron, G10-GDS, G10-Host; spec §12, units O-34)."""
    w = ctx.workload
    mech = tensor_mode(rec, spec).mechanism
    f_hz = float(spec.system.f_hz)
    plan_failure = None
    if mech == "offload_set":
        if plan is None:
            plan = rec.planner(ctx)
        plan_info = {
            "offloads": int(len(plan.offload_tensor)),
            "gpu_line_bytes": int(plan.gpu_line),
            "max_kernel_pages": int(plan.max_kernel_pages),
            "make_loss": int(plan.make_loss),
            "remaining_bytes": int(plan.remaining_bytes),
            "candidates": int(plan.candidates),
            "discovery_order": spec.policy.options.discovery_order,
        }
        engine_plan = plan
        if not plan.ok:
            plan_failure = {
                "stage": "planner",
                "reason": plan.reason,
                "tensor": None,
                "kernel": None,
                "kernel_name": None,
                "pages_needed": None,
                "free_pages": None,
                "largest_free_pages": None,
            }
    elif plan is None:
        g10plan = rec.planner(ctx)
        engine_plan = np.asarray(g10plan.hints, dtype=np.int64)
        plan_info = {
            "hints": int(len(engine_plan)),
            "target_bytes": int(g10plan.target),
            **{k: v for k, v in g10plan.info.items() if k != "options"},
        }
    else:
        hints = getattr(plan, "hints", plan)
        engine_plan = np.asarray(hints, dtype=np.int64)
        plan_info = {"hints": int(len(engine_plan)), "source": "given"}
    trun = None
    if plan_failure is None:
        trun = simulate_tensors(
            w,
            spec.system,
            mech,
            engine_plan,
            vit=ctx.vitality(),
            options=compat_options(TensorOptions, spec.engine),
            trace=trace,
            progress=progress,
        )
    res = tensor_result(spec, model_label(spec), w, trun, plan_failure, plan_info, f_hz, PAGE_SIZE)
    if check and trun is not None:
        from g10fast.engine.tensor.check import check_tensor_run

        res["invariant_checks"] = check_tensor_run(trun, w)
    if spec.engine.allocator and trun is not None:
        alloc = allocator_need(trun, w, spec.engine.allocator)
        res["gpu_memory_needed_bytes"] = int(alloc.peak_reserved)
        res["allocator"] = alloc.summary()
        allocator_fits(res, spec.engine.allocator, int(float(spec.system.gpu_memory_gb) * 2**30))
    m = tensor_engine_model(w, spec.system, mech, compat_options(TensorOptions, spec.engine))
    summary = bound_summary(m, w, float(exec_ms_of(w, spec.system.gpu_frequency_ghz).sum()))
    return add_bound(res, summary, f_hz, unit_ms=True)


def lp_model(spec, rec, w):
    """The tensor engine's model for the checkpoint LP (ms): (model, unit_ms)."""
    return tensor_engine_model(
        w, spec.system, tensor_mode(rec, spec).mechanism, compat_options(TensorOptions, spec.engine)
    ), True


def tensor_mode(rec, spec) -> TensorMode:
    """The TensorMode a policy's record gives for the spec's options."""
    mode = rec.engine_mode(spec.policy.options, spec.engine) if rec.engine_mode else None
    if not isinstance(mode, TensorMode):
        raise InputError(
            f"policy {rec.name} must give the tensor engine a TensorMode (its record's engine_mode)",
            param="policy",
        )
    return mode


def allocator_fits(res: dict, allocator: str, gpu_bytes: int, detail: str = "") -> dict:
    """A run whose allocator needs more GPU memory than the GPU has cannot run there: status
    `failed` at stage `allocator`, the need in the reason (the engine's run stays in the
    result: it is what the allocator placed)."""
    need = int(res["gpu_memory_needed_bytes"])
    if res["status"] == "ok" and need > gpu_bytes:
        res["status"] = "failed"
        res["failure"] = {
            "stage": "allocator",
            "reason": f"needs {need / 2**30:.3f} GiB of GPU memory ({allocator} on "
            f"the run's allocations{detail}), the GPU has "
            f"{gpu_bytes / 2**30:.3f} GiB",
            "tensor": None,
            "kernel": None,
            "kernel_name": None,
            "pages_needed": None,
            "free_pages": None,
            "largest_free_pages": None,
        }
    return res


def allocator_need(trun, w, name: str, absent_at_start=None):
    """An allocator (by name) over a tensor-engine run's allocations and frees: its AllocResult
    (peak reserved = the GPU memory that allocator needs for the run)."""
    from g10fast.alloc.allocators import run_allocator
    from g10fast.alloc.trace import from_tensor_events

    return run_allocator(
        from_tensor_events(trun.events, w.raw_size, w.name, absent_at_start=absent_at_start), name
    )
