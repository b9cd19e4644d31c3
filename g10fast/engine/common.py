"""What every engine's runner shares (g10fast.engine.*.run): the invariant check's level, the
kernel-time variation, the model's label in results and the compatibility switches of an
engine's options."""

from __future__ import annotations

import dataclasses

from g10fast.errors import InputError
from g10fast.workload.times import perturb_kernel_times


#: the levels of `check` (True is "state"; docs/invariants.md): "state" checks each engine's
#: state at every kernel boundary; "full" adds the page engine's event-stream sums and a
#: page-table scan at every check
CHECK_LEVELS = ("state", "full")


def check_level(check) -> str | None:
    """None (no check), "state" or "full" from `check` (False/None, True, or a level)."""
    if check is None or check is False:
        return None
    if check is True:
        return "state"
    if check not in CHECK_LEVELS:
        raise InputError(f"must be one of {', '.join(CHECK_LEVELS)} (or True), got {check!r}", param="check")
    return check


def perturbed(w, engine):
    """Kernel-time variation (Fig. 19): applied after planning, before the engine (§2.2)."""
    if not engine.kernel_time_std_dev:
        return w
    e, i, p = perturb_kernel_times(
        w.exec_cycles, w.input_pf_cycles, w.pf_cycles, engine.kernel_time_std_dev, engine.ran_seed
    )
    return dataclasses.replace(w, exec_cycles=e, input_pf_cycles=i, pf_cycles=p)


def model_label(spec) -> str:
    """The model's name in a result: the built-in model's canonical name, else the spec's."""
    if spec.workload.kind == "builtin":
        from g10fast.workload.builtin import find_model

        return find_model(spec.workload.model).name
    return spec.workload.model


def compat_options(cls, engine):
    """An engine's options dataclass with the spec's compatibility switches applied."""
    known = {f.name for f in dataclasses.fields(cls)}
    compat = dict(engine.compat)
    for k in compat:
        if k not in known:
            raise InputError(
                f"unknown compatibility switch {k!r} of this engine (known: {', '.join(sorted(known))})",
                param=f"engine.compat.{k}",
            )
    return cls(**compat)
