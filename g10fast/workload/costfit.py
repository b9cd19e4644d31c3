"""Fit the cost model's per-GPU parameters to measured kernel-time profiles (docs/costmodel-h100.md).

The measured profiles (kernels/profile_torch.py; docs/profile-format.md) give, per kernel of a
built-in model, its ideal time (and, for some, its two faulting times and its workspace). The
fit keeps the cost model a function of each kernel's FLOPs F, bytes D = D_in + D_out and op
class, so that any workload that knows those (a built-in model, a captured one) gets the same
times (`g10fast.workload.costmodel.kernel_times`):

  ideal           t     = F / (P e_F) + D / (BW e_B) + o      (additive; "form = additive")
  input faulting  t_in  = t + (D_out + w) / (phi_in link) + o_in
  all faulting    t_all = t + D_out / (phi_all link) + o_all
  workspace       w     = omega D

P is the GPU's peak for the model's element type, BW its HBM bandwidth. The additive form is
used rather than the A100 fit's max() roofline because it fits the H100's kernels better when
whole models are held out (median error of the iteration's ideal time 9 % against 14.5 %,
docs/costmodel-h100.md) and is linear in its parameters: per class, (1 / e_F, 1 / e_B, o) is
the non-negative least-squares solution of the relative errors t_est / t - 1, weighted by the
kernel's time (plus a floor, so that short kernels count too), which takes milliseconds.

Classes, from the most specific: the kernel name (a built-in model's, e.g. Conv2d_Forward)
when it occurs in at least MIN_MODELS (1) of the fitting models; else its coarse op class
(`costmodel.op_class_of`: conv, matmul, norm, softmax, pool, reduction, elementwise,
optimizer, copy); else "*" (every kernel). A captured workload's kernels are looked up by
coarse class. Faulting (phi, o) are fitted on the profiles that measured faulting, all
kernels together, by least squares of the absolute extra time; omega per class on the
kernels that allocated a workspace. The faulting bytes are not the A100 fit's (D_in, D):
the measuring harness's input-faulting mode keeps the inputs resident and lets the outputs
and the workspace take first-touch faults, and held out by model the extra time follows
D_out + w (median error of the extra time 13 % against 33 % for D_in) and, for all faulting,
D_out (10 % against 20 % for D); FAULT_BASIS.

`leave_one_model_out` refits without each model in turn and scores that model: the error
the documentation reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from g10fast.errors import InputError

# fmt: off
MIN_MODELS = 1          # a kernel name gets its own parameters when this many models have it
FLOOR = 0.2             # weight floor: 0.2 / n per kernel beside its share of the class's time
FORM = "additive"
FAULT_BASIS = ("out_ws", "out")   # costmodel.FAULT_BASES of input and all faulting
# fmt: on


@dataclass
class MeasuredSet:
    """One measured profile with the cost model's features of its kernels."""

    path: str
    model: str
    batch: int
    dtype_bytes: int
    names: list
    flops: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    time_s: np.ndarray
    input_pf_s: np.ndarray
    pf_s: np.ndarray
    workspace_bytes: np.ndarray
    faulting_measured: bool


def load_measured(paths) -> list:
    """MeasuredSet per profile path (built-in models only: their Graph gives F and D)."""
    from g10fast.workload.builtin import find_model, load_builtin_graph
    from g10fast.workload.costmodel import kernel_features
    from g10fast.workload.profile import graph_options, read_profile

    out = []
    for p in paths:
        prof = read_profile(p)
        # a decoder's attention and point-wise form as the profile ran it: profiles that do
        # not say were measured before the fused forms became the default
        over = graph_options(prof, find_model(prof.model))
        g = load_builtin_graph(prof.model, prof.batch, **over)
        if list(g.kernel_name) != prof.names:
            raise InputError("kernel names differ from the built-in model's", path=str(p))
        f = kernel_features(g)
        faulted = not prof.meta.get("faulting", "").startswith("not measured")
        out.append(
            MeasuredSet(
                str(p),
                prof.model,
                prof.batch,
                int(g.meta.get("dtype_bytes", 4)),
                prof.names,
                f["flops"],
                f["bytes_in"],
                f["bytes_out"],
                prof.time_us * 1e-6,
                prof.input_faulting_us * 1e-6,
                prof.all_faulting_us * 1e-6,
                prof.workspace_bytes.astype(float),
                faulted,
            )
        )
    return out


def _stack(sets, peak_of, bw):
    xf = np.concatenate([s.flops / peak_of(s.dtype_bytes) for s in sets])
    xd = np.concatenate([(s.bytes_in + s.bytes_out) / bw for s in sets])
    t = np.concatenate([s.time_s for s in sets])
    names = np.array([n for s in sets for n in s.names])
    model = np.array([s.model for s in sets for _ in s.names])
    return xf, xd, t, names, model


def fit_additive(xf, xd, t, floor: float = FLOOR):
    """Non-negative (a, b, o) minimising sum w ((a xf + b xd + o) / t - 1)^2, w = t / sum t +
    floor / n. -> (a, b, o)."""
    from scipy.optimize import nnls

    t = np.asarray(t, dtype=np.float64)
    w = t / t.sum() + floor / len(t)
    A = np.stack([xf, xd, np.ones_like(t)], axis=1) / t[:, None] * np.sqrt(w)[:, None]
    c, _ = nnls(A, np.sqrt(w))
    return float(c[0]), float(c[1]), float(c[2])


def fit_line_through(x, y):
    """Non-negative (a, o) of y = a x + o, ordinary least squares (absolute errors, so that
    the long kernels, which make the sums, dominate; many faulting kernels take well under a
    microsecond more than their ideal time, which a relative error would overweight)."""
    from scipy.optimize import nnls

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    scale = max(float(np.abs(y).max()), 1e-12)
    c, _ = nnls(np.stack([x, np.ones_like(x)], axis=1) / scale, y / scale)
    return float(c[0]), float(c[1])


def fit_roofline(xf, xd, t, floor: float = FLOOR):
    """Non-negative (a, b, o) minimising sum w ((max(a xf, b xd) + o) / t - 1)^2 (the max()
    roofline; same weights as `fit_additive`, whose solution starts the search). -> (a, b, o)."""
    from scipy.optimize import least_squares

    t = np.asarray(t, dtype=np.float64)
    w = np.sqrt(t / t.sum() + floor / len(t))
    x0 = np.maximum(np.asarray(fit_additive(xf, xd, t, floor)), 1e-12)

    def res(c):
        return w * ((np.maximum(c[0] * xf, c[1] * xd) + c[2]) / t - 1.0)

    scale = np.array([1.0, 1.0, max(float(np.median(t)), 1e-9)])
    r = least_squares(res, x0, bounds=(0.0, np.inf), x_scale=scale, method="trf", max_nfev=200)
    return float(r.x[0]), float(r.x[1]), float(r.x[2])


def fit(
    sets,
    peak_of,
    bw: float,
    link: float,
    *,
    form: str = FORM,
    min_models: int = MIN_MODELS,
    floor: float = FLOOR,
) -> dict:
    """Parameters fitted on `sets` -> dict with
    classes {class: (e_F, e_B, o_s)}, fault_in (phi, o_s), fault_all (phi, o_s),
    workspace {class: omega}, counts {class: kernels}, form. `form`, `min_models` and
    `floor`: the model-selection choices (`SELECTION`), the shipped ones by default."""
    from g10fast.workload.costmodel import DEFAULT_CLASS, op_class_of

    xf, xd, t, names, model = _stack(sets, peak_of, bw)
    coarse = np.array([op_class_of(n) for n in names])
    groups = {}
    for n in np.unique(names):
        if len(np.unique(model[names == n])) >= min_models:
            groups[str(n)] = names == n
    for c in np.unique(coarse):
        groups[str(c)] = coarse == c
    groups[DEFAULT_CLASS] = np.ones(len(t), dtype=bool)
    classes, counts = {}, {}
    one = fit_additive if form == "additive" else fit_roofline
    for key, m in groups.items():
        a, b, o = one(xf[m], xd[m], t[m], floor)
        classes[key] = (1.0 / a if a > 0 else math.inf, 1.0 / b if b > 0 else math.inf, o)
        counts[key] = int(m.sum())
    # faulting: extra time over the ideal one, from the sets that measured it
    # workspace: ratio of sums per kernel name and per op class, where any was allocated
    ws = np.concatenate([s.workspace_bytes for s in sets])
    dd = xd * bw
    workspace = {}
    for key in list(np.unique(names[ws > 0])) + list(np.unique(coarse[ws > 0])):
        m = (names == key) | (coarse == key)
        workspace[str(key)] = float(ws[m].sum() / dd[m].sum())
    fs = [s for s in sets if s.faulting_measured]
    fault_in = fault_all = (1.0, 0.0)
    if fs:
        from g10fast.workload.costmodel import fault_bytes

        b_in = np.concatenate([s.bytes_in for s in fs])
        b_all = np.concatenate([s.bytes_in + s.bytes_out for s in fs])
        w = np.concatenate([s.workspace_bytes for s in fs])  # measured, as the fit sees it
        x_in = np.concatenate([s.input_pf_s - s.time_s for s in fs])
        x_all = np.concatenate([s.pf_s - s.time_s for s in fs])
        keep = (b_in > 0) & (b_all > b_in)  # kernels that fault at all (costmodel.faulting)
        fit_in = fault_bytes(FAULT_BASIS[0], b_in, b_all, w)
        fit_all = fault_bytes(FAULT_BASIS[1], b_in, b_all, w)
        a, o = fit_line_through(fit_in[keep] / link, x_in[keep])
        fault_in = (1.0 / a if a > 0 else math.inf, o)
        a, o = fit_line_through(fit_all[keep] / link, x_all[keep])
        fault_all = (1.0 / a if a > 0 else math.inf, o)
    return {
        "classes": classes,
        "fault_in": fault_in,
        "fault_all": fault_all,
        "workspace": workspace,
        "counts": counts,
        "form": form,
    }


def to_params(fitted: dict, reference_gpu: dict):
    from g10fast.workload.costmodel import CostParams

    return CostParams(
        dict(fitted["classes"]),
        tuple(fitted["fault_in"]),
        tuple(fitted["fault_all"]),
        dict(fitted["workspace"]),
        dict(reference_gpu),
        {},
        form=fitted.get("form", FORM),
        fault_basis=FAULT_BASIS,
    )


def predict(s: MeasuredSet, params, gpu) -> dict:
    """Cost-model times of a measured set's kernels (its features) -> dict of arrays."""
    from g10fast.workload.costmodel import kernel_times

    return kernel_times(
        s.flops, s.bytes_in, s.bytes_out, s.names, gpu=gpu, dtype_bytes=s.dtype_bytes, params=params
    )


def leave_one_model_out(
    sets,
    gpu_of,
    reference_gpu: dict,
    bw: float,
    link: float,
    peak_of,
    by: str = "name",
    choice: dict | None = None,
) -> list:
    """For each model: refit without all of its sets, predict them. `by`: "name" (kernel
    names, as a built-in model is estimated) or "class" (coarse op classes only, as a
    captured workload's kernels are); `choice`: fit options (form, min_models, floor).
    -> list of dicts per set: model, batch, measured and estimated sums (ideal, input
    faulting, all faulting), median abs kernel error."""
    from g10fast.workload.costmodel import op_class_of

    rows = []
    for held in sorted({s.model for s in sets}):
        train = [s for s in sets if s.model != held]
        params = to_params(fit(train, peak_of, bw, link, **(choice or {})), reference_gpu)
        for s in sets:
            if s.model != held:
                continue
            if by == "class":
                s = _with_names(s, [op_class_of(n) for n in s.names])
            rows.append(score(s, params, gpu_of(s.dtype_bytes)))
    return rows


#: the model-selection choices the shipped fit was picked from (docs/costmodel-h100.md):
#: the form of the two terms, how many models a kernel name needs for parameters of its
#: own, and the weight floor of short kernels. `nested_leave_one_model_out` picks among
#: them without the held-out model, so that its error is held out of the selection too.
SELECTION = tuple(
    {"form": f, "min_models": m, "floor": fl}
    for f in ("additive", "roofline")
    for m in (1, 2)
    for fl in (0.2, 1.0)
)
#: the thresholds alone (the additive form): what `g10fast validate --quick` selects among
SELECTION_QUICK = tuple(c for c in SELECTION if c["form"] == "additive" and c["floor"] == 0.2)


def median_ideal_error(rows) -> float:
    """Median absolute relative error of the iteration's ideal time over score rows."""
    v = [abs(rel_err(r["estimated"][0], r["measured"][0])) for r in rows]
    return float(np.median(v)) if v else math.nan


def nested_leave_one_model_out(
    sets, gpu_of, reference_gpu: dict, bw: float, link: float, peak_of, by: str = "name", choices=SELECTION
) -> list:
    """Leave-one-model-out with the model selection inside: for each held-out model, every
    choice is scored by leave-one-model-out over the other models only, the best (least
    median ideal-time error) is refitted on all of them and scores the held-out model. ->
    the rows of `leave_one_model_out`, each with the "choice" it was made with."""
    from g10fast.workload.costmodel import op_class_of

    rows = []
    for held in sorted({s.model for s in sets}):
        train = [s for s in sets if s.model != held]
        best = min(
            choices,
            key=lambda c: median_ideal_error(
                leave_one_model_out(train, gpu_of, reference_gpu, bw, link, peak_of, by=by, choice=c)
            ),
        )
        params = to_params(fit(train, peak_of, bw, link, **best), reference_gpu)
        for s in sets:
            if s.model != held:
                continue
            if by == "class":
                s = _with_names(s, [op_class_of(n) for n in s.names])
            rows.append(dict(score(s, params, gpu_of(s.dtype_bytes)), choice=dict(best)))
    return rows


def _with_names(s: MeasuredSet, names):
    import dataclasses

    return dataclasses.replace(s, names=list(names))


def score(s: MeasuredSet, params, gpu) -> dict:
    e = predict(s, params, gpu)
    t = s.time_s
    return {
        "model": s.model,
        "batch": s.batch,
        "kernels": len(t),
        "faulting_measured": s.faulting_measured,
        "measured": (float(t.sum()), float(s.input_pf_s.sum()), float(s.pf_s.sum())),
        "estimated": (float(e["time_s"].sum()), float(e["input_pf_s"].sum()), float(e["pf_s"].sum())),
        "kernel_median_abs_err": float(np.median(np.abs(e["time_s"] / t - 1))),
        "per_kernel": (list(s.names), t, e["time_s"]),
    }


def rel_err(est: float, meas: float) -> float:
    return (est - meas) / meas if meas > 0 else float("nan")


def measured_paths(root) -> list:
    """The committed H100 profiles: all-mode ones, then the ideal-only ones at paper batches."""
    root = Path(root)
    return sorted((root / "kernels" / "h100-sxm5-measured").glob("*.prof.gz")) + sorted(
        (root / "benchmarks" / "results" / "h100-ideal").glob("*.prof.gz")
    )
