"""Recipes: what each kernel of a built-in model computes (the operation, its operands' shapes
and dtypes, its parameters), without PyTorch. The measuring harness (kernels/profile_torch.py)
runs a recipe's real operation on a GPU; the driver engine's H100 fit
(g10fast.engine.driver.fit) lays out a kernel's operands, outputs and temporaries from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from g10fast.workload.builtin import find_model, kernel_layers, load_builtin_graph

ELEMENTWISE = {
    "Add": "add",
    "Subtract": "sub",
    "Multiply": "mul",
    "Divide": "div",
    "Power": "pow",
    "Sqrt": "sqrt",
    "Tanh": "tanh",
    "Erf": "erf",
    "Relu": "relu",
}


@dataclass
class Operand:
    shape: tuple
    dtype: str = "act"  # act (the model's activation dtype) | f32 | i64 | bool
    init: str = "randn"  # randn | zeros | positive | index:N


@dataclass
class Recipe:
    op: str  # an operation name (kernels/profile_torch.py's run_op)
    inputs: list  # [Operand]
    params: dict = field(default_factory=dict)

    def nbytes(self, el: int) -> int:
        size = {"act": el, "f32": 4, "i64": 8, "bool": 1}
        return sum(int(np.prod(o.shape, dtype=np.int64)) * size[o.dtype] for o in self.inputs)


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def broadcast_shape(*shapes) -> tuple:
    """NumPy's (and PyTorch's) broadcast shape of `shapes`."""
    return tuple(np.broadcast_shapes(*shapes))


def broadcasts_to(shape, out) -> bool:
    """Whether `shape` broadcasts to `out` unchanged."""
    try:
        return broadcast_shape(shape, out) == tuple(out)
    except ValueError:
        return False


def _grad_shapes(rec_in, el, raw_outs):
    """For each output tensor of a backward kernel, the record input shape it is the gradient
    of (matched by element count), else the first input's shape."""
    shapes = []
    for nb in raw_outs:
        n = nb // el
        cand = [s for s in rec_in if _numel(s) == n]
        shapes.append(cand[0] if cand else rec_in[0])
    return shapes


class RecipeBook:
    """Recipes for every kernel of one built-in model at one batch."""

    def __init__(self, spec, batch: int, **model_opts):
        self.spec = spec
        self.g = load_builtin_graph(spec, batch, **model_opts)
        self.layers = kernel_layers(spec, batch, **model_opts)
        self.el = int(self.g.meta.get("dtype_bytes", 4))
        self.optimizer = self.g.meta.get("optimizer", "sgd")
        self.flops = self.g.meta.get("parent_flops", {})
        self._seen: dict = {}

    def raw(self, ids) -> list:
        return [int(self.g.raw_size[t]) for t in ids]

    def recipe(self, k: int) -> Recipe:
        g, name, par = self.g, self.g.kernel_name[k], self.g.kernel_parent[k]
        nth = self._seen.get((par, name), 0)
        self._seen[(par, name)] = nth + 1
        info = self.layers[par]
        ins, outs = self.raw(g.inputs(k)), self.raw(g.outputs(k))
        if self.spec.kind == "cnn":
            return self._cnn(name, info, ins, outs)
        return self._record(k, name, par, info, ins, outs, nth)

    # -- optimizer step over a weight of n elements (Apply_Grad kernels)
    def _apply(self, n: int) -> Recipe:
        if self.optimizer == "adamw":
            f = [Operand((n,), "f32") for _ in range(4)]  # master, grad, m, v
            return Recipe("adamw", f + [Operand((n,), "act")])
        return Recipe("sgd", [Operand((n,)), Operand((n,))])

    def _weight_elems(self, ins_raw, outs_raw) -> int:
        return max(outs_raw) // self.el if outs_raw else max(ins_raw) // self.el

    # -- CNN layers
    def _cnn(self, name, info, ins, outs) -> Recipe:
        a, x, y = info["args"], info["in"], info["out"]
        if name == "LoadData_A0":
            return Recipe("fill", [], {"shape": x})
        if name.endswith("Apply_Grad") or name.startswith("Linear_Apply_Grad"):
            return self._apply(self._weight_elems(ins, outs))
        if name.startswith("Conv2d"):
            kh, kw = a["kernel_size"]
            w = (a["out_channels"], x[1], kh, kw)
            p = {"stride": list(a["stride"]), "padding": list(a["padding"])}
            if name == "Conv2d_Forward":
                ops = [Operand(x), Operand(w)] + ([Operand((w[0],))] if a.get("bias") else [])
                return Recipe("conv_fwd", ops, p)
            which = "conv_bwd_weight" if name == "Conv2d_Backward_Weight" else "conv_bwd_input"
            return Recipe(which, [Operand(y), Operand(x), Operand(w)], p)
        if name.startswith("BatchNorm2d"):
            C = x[1]
            p = {"eps": float(a.get("eps", 1e-5)), "momentum": float(a.get("momentum", 0.1))}
            vec = [Operand((C,)), Operand((C,)), Operand((C,)), Operand((C,), init="positive")]
            if name == "BatchNorm2d_Forward":  # x, gamma, beta, running mean, running var
                return Recipe("bn_fwd", [Operand(x)] + vec, p)
            # g, x, gamma, running mean, running var, saved mean, saved inverse std
            return Recipe(
                "bn_bwd",
                [
                    Operand(y),
                    Operand(x),
                    Operand((C,)),
                    Operand((C,)),
                    Operand((C,), init="positive"),
                    Operand((C,)),
                    Operand((C,), init="positive"),
                ],
                p,
            )
        if name == "ReLU_Forward":
            return Recipe("relu", [Operand(x)], {"inplace": bool(a.get("inplace"))})
        if name == "ReLU_Backward":
            return Recipe("relu_bwd", [Operand(y), Operand(y)])
        if name.startswith("MaxPool2d"):
            p = {k: a[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")}
            if name.endswith("Forward"):
                return Recipe("maxpool_fwd", [Operand(x)], p)
            return Recipe("maxpool_bwd", [Operand(y), Operand(x), Operand(y, "i64", "zeros")], p)
        if name.startswith("AdaptiveAvgPool2d"):
            if name.endswith("Forward"):
                return Recipe("avgpool_fwd", [Operand(x)], {"size": list(y[2:])})
            return Recipe("avgpool_bwd", [Operand(y), Operand(x)])
        if name.startswith("Dropout"):
            p = {"p": float(a.get("p", 0.5))}
            if name.endswith("Forward"):
                return Recipe("dropout_fwd", [Operand(x)], p)
            return Recipe("dropout_bwd", [Operand(y), Operand(x, "bool", "zeros")], p)
        if name.startswith("Linear"):
            n_in, n_out, N = a["in_features"], a["out_features"], x[0]
            if name == "Linear_Forward":
                ops = [Operand((N, n_in)), Operand((n_out, n_in))]
                return Recipe("linear", ops + ([Operand((n_out,))] if a.get("bias") else []))
            if name == "Linear_Backward_Bias":
                return Recipe("sum0", [Operand((N, n_out))])
            if name == "Linear_Backward_Weight":  # dW = g^T x
                return Recipe("mm_tn", [Operand((N, n_out)), Operand((N, n_in))])
            return Recipe("mm", [Operand((N, n_out)), Operand((n_out, n_in))])  # dX = g W
        if name == "Add_Forward":
            return Recipe("sum_n", [Operand(s) for s in [x] + info["prev"][1:]])
        if name == "Add_MultiGredient":
            return Recipe("accumulate", [Operand(y) for _ in ins])
        if name == "Concat_Forward":
            return Recipe("cat", [Operand(s) for s in info["prev"]])
        if name == "Concat_Backward":
            return Recipe("split", [Operand(y)], {"sizes": [s[1] for s in info["prev"]]})
        if name == "Scale_Forward":  # the unit's features times the gate
            return Recipe("mul", [Operand(y), Operand(x)])
        if name == "Scale_Backward":  # gradient of the gate: sum over H, W of g * features
            return Recipe("scale_bwd", [Operand(y), Operand(y)])
        if name == "makeLoss":
            return Recipe("loss", [Operand((y[0], _numel(y[1:]))), Operand((y[0], _numel(y[1:])))])
        raise ValueError(f"no recipe for CNN kernel {name}")

    # -- operator records (encoders, decoders)
    def _record(self, k, name, par, info, ins, outs, nth) -> Recipe:
        typ, shp, el = info["type"], info["in"], self.el
        if name in ("Apply_Grad", "Linear_Apply_Grad_Weight"):
            return self._apply(self._weight_elems(ins, outs))
        if name == "makeLoss":
            n = ins[0] // el
            last = self.layers[self.g.kernel_parent[k - 1]]["in"]
            C = last[0][-1]
            return Recipe("loss", [Operand((n // C, C)), Operand((n // C, C))])
        if name == "Add_MultiGredient":
            return Recipe("accumulate", [Operand((outs[0] // el,)) for _ in ins])
        if typ in ("Dot",):
            K = shp[0][-1]
            M = _numel(shp[0]) // K
            N = max(1, int(round(self.flops.get(par, 2 * M * K * K) / (2 * M * K))))
            if name == "Linear_Forward":
                return Recipe("mm", [Operand((M, K)), Operand((K, N))])
            if name == "Linear_Backward_Input":  # dX = g W^T
                return Recipe("mm_nt", [Operand((M, N)), Operand((K, N))])
            return Recipe("mm_tn", [Operand((M, K)), Operand((M, N))])  # dW = X^T g
        if typ == "BatchMatMul":
            a, b = shp[0], shp[1]
            bs = _numel(a[:-2])
            m, kk, n = a[-2], a[-1], b[-1]
            A, Bm, C = (bs, m, kk), (bs, kk, n), (bs, m, n)
            if name == "BatchMatMul_Forward":
                return Recipe("bmm", [Operand(A), Operand(Bm)])
            if nth == 0:  # dA = dC B^T
                return Recipe("bmm_nt", [Operand(C), Operand(Bm)])
            return Recipe("bmm_tn", [Operand(A), Operand(C)])  # dB = A^T dC
        if typ == "Convolution":
            x, w = shp[0], shp[1]
            s = w[2]
            p = {"stride": [s, s], "padding": [0, 0]}
            if name == "Conv2d_Forward":
                return Recipe("conv_fwd", [Operand(x), Operand(w)], p)
            yo = (x[0], w[0], (x[2] - w[2]) // s + 1, (x[3] - w[3]) // s + 1)
            return Recipe("conv_bwd_weight", [Operand(yo), Operand(x), Operand(w)], p)
        if typ == "SoftmaxBasic":
            if name.endswith("Forward"):
                return Recipe("softmax", [Operand(shp[0])])
            return Recipe("softmax_bwd", [Operand(shp[0]), Operand(shp[0])])
        if typ == "FlashAttention":  # fused causal attention
            B_, S_ = shp[0][0], shp[0][1]
            NH = int(self.spec.params["heads"])
            H = shp[-1][-1] if len(shp) == 3 else shp[0][-1] // 3
            qkv = [Operand((B_, NH, S_, H // NH)) for _ in range(3)]
            if name.endswith("Forward"):
                return Recipe("sdpa", qkv)
            return Recipe("sdpa_bwd", qkv + [Operand((B_, NH, S_, H // NH))])
        if typ == "LayerNorm":
            x, H = shp[0], shp[0][-1]
            wb = [Operand((H,)), Operand((H,))]
            if name.endswith("Forward"):
                return Recipe("ln_fwd", [Operand(x)] + wb)
            return Recipe("ln_bwd", [Operand(x), Operand(x)] + wb)
        if typ in ("Gelu", "Silu"):
            opn = typ.lower()
            if name.endswith("Forward"):
                return Recipe(opn, [Operand(shp[0])])
            return Recipe(opn + "_bwd", [Operand(shp[0]), Operand(shp[0])])
        if typ == "Sum":
            if name.endswith("Forward"):
                return Recipe("sum_last", [Operand(shp[0])])
            return Recipe("expand_last", [Operand(shp[0][:-1])], {"n": shp[0][-1]})
        if typ == "GatherV2":
            table, idx = shp[0], shp[1]
            if tuple(idx) == (1,):  # pooler: the first token
                if name.endswith("Forward"):
                    return Recipe("select1", [Operand(table)])
                return Recipe(
                    "select1_bwd", [Operand((table[0],) + tuple(table[2:]))], {"shape": list(table)}
                )
            if name.endswith("Forward"):
                return Recipe("embedding", [Operand(table), Operand(idx, "i64", f"index:{table[0]}")])
            return Recipe(
                "embedding_bwd",
                [Operand(tuple(idx) + (table[1],)), Operand(idx, "i64", f"index:{table[0]}")],
                {"rows": table[0]},
            )
        if typ in ELEMENTWISE:
            full = broadcast_shape(*shp)
            out = full if all(broadcasts_to(s, full) for s in shp) else shp[0]
            opn = ELEMENTWISE[typ]
            if name.endswith("Forward"):
                return Recipe("ew_" + opn, [Operand(s) for s in shp])
            gshapes = _grad_shapes(shp, el, outs)
            if typ in ("Add", "Subtract"):
                return Recipe(
                    "ew_grad_pass",
                    [Operand(out)],
                    {"shapes": [list(s) for s in gshapes], "neg": typ == "Subtract"},
                )
            if typ == "Multiply":  # grad of input nth: g * the other one
                other = shp[1 - nth] if len(shp) > 1 else shp[0]
                tgt = shp[nth] if nth < len(shp) else shp[0]
                return Recipe("ew_grad_mul", [Operand(out), Operand(other)], {"shape": list(tgt)})
            if typ == "Divide":
                if name == "Divide_Backward_A":  # g / b
                    return Recipe("ew_grad_div_a", [Operand(out), Operand(shp[1])], {"shape": list(shp[0])})
                return Recipe(
                    "ew_grad_div_b",
                    [Operand(out), Operand(shp[0]), Operand(shp[1], init="positive")],
                    {"shape": list(shp[1])},
                )
            if typ == "Power":
                return Recipe("ew_grad_pow", [Operand(out), Operand(shp[0])], {"shape": list(shp[0])})
            unary = {"Sqrt": "sqrt_bwd", "Tanh": "tanh_bwd", "Erf": "erf_bwd", "Relu": "relu_bwd"}
            return Recipe(unary[typ], [Operand(out), Operand(out)])
        raise ValueError(f"no recipe for kernel {name} of {par}")


def recipes_for(model: str, batch: int, **model_opts):
    """(the model's spec, its RecipeBook, one Recipe per kernel in kernel order)."""
    spec = find_model(model)
    book = RecipeBook(spec, batch, **model_opts)
    return spec, book, [book.recipe(k) for k in range(book.g.num_kernels)]


__all__ = [
    "ELEMENTWISE",
    "Operand",
    "Recipe",
    "RecipeBook",
    "recipes_for",
    "broadcast_shape",
    "broadcasts_to",
]
