"""Built-in models: `data/models/*.toml` (docs/model-format.md) -> Graph.

A model file names an architecture family and its hyperparameters; the generators below
expand it into the same layer tree (CNNs) or operator records (transformers) that the G10
artifact's front end reads from its model files, and then reuse the front end's own graph
construction (g10fast.workload.cnn / transformer). So a built-in model and the artifact's
file of the same network give identical kernels and tensors (tests/test_builtin.py), while
no artifact file is needed.

Families:
  cnn / resnet     torchvision-style bottleneck ResNets (ResNet-152)
  cnn / inception  Inception-v3 blocks A-E
  cnn / senet      SENet units (SENet-154 as G10 describes it: ungrouped 3x3, ReLU gate, O-26)
  encoder / bert   BERT encoder with G10's operator decomposition (layer norm as 11 ops, ...)
  encoder / vit    ViT encoder (patch convolution, GELU via Erf)
  decoder / gpt2   GPT-2 style pre-norm decoder (LayerNorm, GELU, learned positions)
  decoder / llama  Llama style decoder (RMSNorm, rotary, SwiGLU, untied head)

Decoders take sequence length, micro-batch (the batch size), precision ("bf16-mixed":
bf16 activations, gradients and working weights plus fp32 master weights; or "fp32") and
optimizer ("adamw": two fp32 moments per weight; or "sgd") as parameters. The optimizer
state tensors are global and read and written by each weight's Apply_Grad kernel.

Each Graph carries `meta["parent_flops"]`: forward FLOPs of every matrix-multiply-like
layer or op (keyed by the kernel_parent string), which the cost model uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from g10fast.datadir import data_dir
from g10fast.errors import InputError, read_toml
from g10fast.workload.model import Graph, csr_from_lists

MODEL_FORMAT = "g10fast-model"
MODEL_FORMAT_VERSION = 1
B = "B"  # batch dimension in a shape (written as G10's placeholder 99 in operator records)


def models_dir() -> Path:
    return data_dir() / "models"


# ---------------------------------------------------------------------------------------------
# Model files


@dataclass(frozen=True)
class ModelSpec:
    key: str  # file stem, e.g. "resnet152"
    name: str  # display name / Graph name, e.g. "ResNet152"
    kind: str  # cnn | encoder | decoder
    family: str
    params: dict  # the whole TOML table
    path: str

    @property
    def default_batch(self) -> int:
        return int(self.params.get("default_batch", 1))

    @property
    def artifact(self) -> str | None:
        """Stem of the artifact model file this model reproduces, if any."""
        return self.params.get("artifact")


_KINDS = {"cnn": ("resnet", "inception", "senet"), "encoder": ("bert", "vit"), "decoder": ("gpt2", "llama")}


def read_model_file(path) -> ModelSpec:
    p = Path(path)
    d = read_toml(p, "model file")
    if d.get("format") != MODEL_FORMAT:
        raise InputError(f"format must be {MODEL_FORMAT!r}", path=str(p), param="format")
    if d.get("version") != MODEL_FORMAT_VERSION:
        raise InputError(
            f"unsupported version {d.get('version')!r} (this g10fast reads {MODEL_FORMAT_VERSION})",
            path=str(p),
            param="version",
        )
    kind, family = d.get("kind"), d.get("family")
    if kind not in _KINDS:
        raise InputError(f"unknown kind {kind!r} (known: {', '.join(_KINDS)})", path=str(p), param="kind")
    if family not in _KINDS[kind]:
        raise InputError(
            f"unknown {kind} family {family!r} (known: {', '.join(_KINDS[kind])})",
            path=str(p),
            param="family",
        )
    for key in ("name",):
        if not isinstance(d.get(key), str):
            raise InputError("missing or not a string", path=str(p), param=key)
    return ModelSpec(p.stem, d["name"], kind, family, d, str(p))


def list_models(folder=None) -> list[ModelSpec]:
    folder = Path(folder) if folder is not None else models_dir()
    return [read_model_file(f) for f in sorted(folder.glob("*.toml"))]


def _norm(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


def find_model(name: str, folder=None) -> ModelSpec:
    """A built-in model by file stem, display name or artifact stem (case and '-_' ignored)."""
    p = Path(name)
    if p.suffix == ".toml" and p.is_file():
        return read_model_file(p)
    specs = list_models(folder)
    want = _norm(name)
    for s in specs:
        names = {s.key, s.name} | ({s.artifact} if s.artifact else set())
        names |= set(s.params.get("aliases", []))
        if want in {_norm(x) for x in names}:
            return s
    import difflib

    every = {_norm(x): s.key for s in specs for x in {s.key, s.name, *s.params.get("aliases", [])}}
    hint = difflib.get_close_matches(want, list(every), n=1, cutoff=0.6)
    raise InputError(
        f"unknown built-in model {name!r}"
        + (f" (did you mean {every[hint[0]]!r}?)" if hint else "")
        + "; known: "
        + ", ".join(s.key for s in specs),
        param="model",
    )


def _get(spec: ModelSpec, key: str, kind=int, default=None):
    v = spec.params.get(key, default)
    if v is None:
        raise InputError("missing", path=spec.path, param=key)
    if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
        raise InputError(f"must be a positive integer, got {v!r}", path=spec.path, param=key)
    if kind is str and not isinstance(v, str):
        raise InputError(f"must be a string, got {v!r}", path=spec.path, param=key)
    if kind is list and not isinstance(v, list):
        raise InputError(f"must be a list, got {v!r}", path=spec.path, param=key)
    return v


def load_builtin_graph(name_or_spec, batch_size: int, **overrides) -> Graph:
    """Graph of one training iteration of a built-in model at `batch_size`.

    `overrides` replace top-level parameters of the model file (e.g. seq_len=1024 or
    precision="fp32" for decoders)."""
    spec = _resolved_spec(name_or_spec, overrides)
    _check_batch(batch_size)
    batch_size = int(batch_size)
    if spec.kind == "cnn":
        return _cnn_graph(spec, batch_size)
    if spec.kind == "encoder":
        return _transformer_graph(spec, batch_size)
    return _decoder_graph(spec, batch_size)


# ---------------------------------------------------------------------------------------------
# CNNs: a layer tree like the front end's parse tree, then the front end's own rewiring,
# shape propagation and kernel construction.


class _Tree:
    """Builds cnn.Op / cnn.Block nodes while tracking the channel count."""

    def __init__(self, channels: int, bn_eps: float):
        from g10fast.workload.cnn import Block, Op

        self.Op, self.Block = Op, Block
        self.c = channels
        self.eps = bn_eps

    def conv(self, out, k=(1, 1), s=(1, 1), p=(0, 0), bias=False, cin=None):
        cin = self.c if cin is None else cin
        self.c = out
        return self.Op(
            "Conv2d",
            {
                "in_channels": cin,
                "out_channels": out,
                "kernel_size": tuple(k),
                "stride": tuple(s),
                "padding": tuple(p),
                "bias": bias,
            },
            0,
        )

    def bn(self):
        return self.Op(
            "BatchNorm2d",
            {
                "num_features": self.c,
                "eps": self.eps,
                "momentum": 0.1,
                "affine": True,
                "track_running_stats": True,
            },
            0,
        )

    def relu(self, inplace=True):
        return self.Op("ReLU", {"inplace": inplace}, 0)

    def maxpool(self, k, s, p):
        return self.Op(
            "MaxPool2d", {"kernel_size": k, "stride": s, "padding": p, "dilation": 1, "ceil_mode": False}, 0
        )

    def avgpool(self, n):
        return self.Op("AdaptiveAvgPool2d", {"output_size": (n, n)}, 0)

    def dropout(self, p, inplace=False):
        return self.Op("Dropout", {"p": float(p), "inplace": inplace}, 0)

    def linear(self, out, bias=True):
        cin = self.c
        self.c = out
        return self.Op("Linear", {"in_features": cin, "out_features": out, "bias": bias}, 0)

    def block(self, name, children):
        return self.Block(name, children, 0)

    def basic(self, out, k=(1, 1), s=(1, 1), p=(0, 0), cin=None):
        """conv + bn + relu (Inception's BasicConv2d, SENet's ConvBlock)."""
        return self.block("ConvBlock", [self.conv(out, k, s, p, cin=cin), self.bn(), self.relu()])


def _pair(tok: str, what: str, spec: ModelSpec) -> tuple:
    try:
        if "x" in tok:
            a, b = tok.split("x")
            return int(a), int(b)
        return int(tok), int(tok)
    except ValueError:
        raise InputError(f"bad {what} {tok!r} in a layer line", path=spec.path) from None


def _layer_line(t: _Tree, line: str, spec: ModelSpec):
    """One layer of a `layers` list: 'conv 64 k7 s2 p3 [bias]', 'bn', 'relu', 'maxpool k3 s2 p1',
    'avgpool 1', 'dropout 0.5 [inplace]', 'linear 1000 [bias]' (docs/model-format.md)."""
    w = line.split()
    if not w:
        raise InputError("empty layer line", path=spec.path)
    op, rest = w[0], w[1:]
    opts = {x[0]: x[1:] for x in rest if x[0] in "ksp" and len(x) > 1 and x[1].isdigit()}
    flags = set(rest)
    try:
        if op == "conv":
            return t.conv(
                int(rest[0]),
                _pair(opts.get("k", "1"), "kernel", spec),
                _pair(opts.get("s", "1"), "stride", spec),
                _pair(opts.get("p", "0"), "padding", spec),
                bias="bias" in flags,
            )
        if op == "bn":
            return t.bn()
        if op == "relu":
            return t.relu("copy" not in flags)
        if op == "maxpool":
            return t.maxpool(int(opts["k"]), int(opts["s"]), int(opts.get("p", "0")))
        if op == "avgpool":
            return t.avgpool(int(rest[0]))
        if op == "dropout":
            return t.dropout(float(rest[0]), "inplace" in flags)
        if op == "linear":
            return t.linear(int(rest[0]), "bias" in flags)
    except (IndexError, KeyError, ValueError):
        raise InputError(f"bad layer line {line!r}", path=spec.path) from None
    raise InputError(
        f"unknown layer {op!r} in {line!r} (known: conv, bn, relu, maxpool, avgpool, dropout, linear)",
        path=spec.path,
    )


def _stages(t: _Tree, spec: ModelSpec, unit) -> list:
    """The model's `stages` (units, width, stride), each a Sequential of its units:
    unit(width, stride, first, cin) -> a block; the first unit takes the stage's stride."""
    out = []
    for units, width, stride in _get(spec, "stages", list):
        seq = []
        for u in range(units):
            seq.append(unit(width, stride if u == 0 else 1, u == 0, t.c))
        out.append(t.block("Sequential", seq))
    return out


def _resnet_blocks(t: _Tree, spec: ModelSpec) -> list:
    exp = _get(spec, "expansion", default=4)

    def bottleneck(width, s, first, cin):
        kids = [
            t.conv(width),
            t.bn(),
            t.conv(width, (3, 3), (s, s), (1, 1)),
            t.bn(),
            t.conv(width * exp),
            t.bn(),
            t.relu(),
        ]  # one ReLU per block (O-26)
        if s != 1 or cin != width * exp:
            kids.append(t.block("Sequential", [t.conv(width * exp, s=(s, s), cin=cin), t.bn()]))
        return t.block("Bottleneck", kids)

    return _stages(t, spec, bottleneck)


def _inception_block(t: _Tree, kind: str, arg) -> object:
    cin = t.c
    b = lambda o, k=(1, 1), s=(1, 1), p=(0, 0), ci=None: t.basic(o, k, s, p, cin=ci)  # noqa
    if kind == "A":
        kids = [
            b(64, ci=cin),
            b(48, ci=cin),
            b(64, (5, 5), p=(2, 2), ci=48),
            b(64, ci=cin),
            b(96, (3, 3), p=(1, 1), ci=64),
            b(96, (3, 3), p=(1, 1), ci=96),
            b(arg, ci=cin),
        ]
        t.c = 64 + 64 + 96 + arg
    elif kind == "B":
        kids = [
            b(384, (3, 3), (2, 2), ci=cin),
            b(64, ci=cin),
            b(96, (3, 3), p=(1, 1), ci=64),
            b(96, (3, 3), (2, 2), ci=96),
        ]
        t.c = 384 + 96 + cin
    elif kind == "C":
        c7 = arg
        kids = [
            b(192, ci=cin),
            b(c7, ci=cin),
            b(c7, (1, 7), p=(0, 3), ci=c7),
            b(192, (7, 1), p=(3, 0), ci=c7),
            b(c7, ci=cin),
            b(c7, (7, 1), p=(3, 0), ci=c7),
            b(c7, (1, 7), p=(0, 3), ci=c7),
            b(c7, (7, 1), p=(3, 0), ci=c7),
            b(192, (1, 7), p=(0, 3), ci=c7),
            b(192, ci=cin),
        ]
        t.c = 768
    elif kind == "D":
        kids = [
            b(192, ci=cin),
            b(320, (3, 3), (2, 2), ci=192),
            b(192, ci=cin),
            b(192, (1, 7), p=(0, 3), ci=192),
            b(192, (7, 1), p=(3, 0), ci=192),
            b(192, (3, 3), (2, 2), ci=192),
        ]
        t.c = 320 + 192 + cin
    else:  # E
        kids = [
            b(320, ci=cin),
            b(384, ci=cin),
            b(384, (1, 3), p=(0, 1), ci=384),
            b(384, (3, 1), p=(1, 0), ci=384),
            b(448, ci=cin),
            b(384, (3, 3), p=(1, 1), ci=448),
            b(384, (1, 3), p=(0, 1), ci=384),
            b(384, (3, 1), p=(1, 0), ci=384),
            b(192, ci=cin),
        ]
        t.c = 320 + 768 + 768 + 192
    return t.block("Inception" + kind, kids)


def _inception_blocks(t: _Tree, spec: ModelSpec) -> list:
    out = []
    for item in _get(spec, "blocks", list):
        w = str(item).split()
        if not w or w[0] not in ("A", "B", "C", "D", "E") or len(w) != (2 if w[0] in "AC" else 1):
            raise InputError(
                f"bad Inception block {item!r} (expected 'A <pool channels>', 'B', "
                "'C <7x7 channels>', 'D' or 'E')",
                path=spec.path,
                param="blocks",
            )
        out.append(_inception_block(t, w[0], int(w[1]) if len(w) > 1 else None))
    return out


def _senet_blocks(t: _Tree, spec: ModelSpec) -> list:
    red = _get(spec, "se_reduction", default=16)

    def unit(width, s, first, cin):
        body = t.block(
            "SENetBottleneck",
            [
                t.basic(width // 2),
                t.basic(width, (3, 3), (s, s), (1, 1)),
                t.block("ConvBlock", [t.conv(width), t.bn()]),
            ],
        )
        # the SE gate is a ReLU in G10's model (O-26)
        se = t.block("SEBlock", [t.avgpool(1), t.conv(width // red), t.relu(), t.conv(width), t.relu()])
        kids = [body, se]
        if first:
            k, p = ((3, 3), (1, 1)) if s != 1 else ((1, 1), (0, 0))
            kids.append(t.block("ConvBlock", [t.conv(width, k, (s, s), p, cin=cin), t.bn()]))
        kids.append(t.relu())
        return t.block("SENetUnit", kids)

    return _stages(t, spec, unit)


def _cnn_layers(spec: ModelSpec, batch: int):
    """The front end's flattened, shaped layer list of a built-in CNN, and its source."""
    from g10fast.workload import cnn

    hw = _get(spec, "input_hw", list)
    t = _Tree(_get(spec, "input_channels", default=3), float(spec.params.get("bn_eps", 1e-5)))
    children = [_layer_line(t, ln, spec) for ln in _get(spec, "stem", list)]
    children += {"resnet": _resnet_blocks, "inception": _inception_blocks, "senet": _senet_blocks}[
        spec.family
    ](t, spec)
    children += [_layer_line(t, ln, spec) for ln in _get(spec, "head", list)]
    model = cnn.Block(spec.name, children, 0)
    src = cnn._Source("", f"builtin:{spec.key}")
    layers = cnn._flatten(model, spec.family, src)
    cnn._shapes(layers, batch, int(hw[0]), int(hw[1]), src)
    return layers, src


def _cnn_graph(spec: ModelSpec, batch: int) -> Graph:
    from g10fast.workload import cnn

    layers, src = _cnn_layers(spec, batch)
    raw, glob, kname, kpar, kin, kout = cnn._build(layers, src)
    flops = {}
    for lay in layers:
        if lay.type == "Conv2d":
            kh, kw = lay.args["kernel_size"]
            n = int(np.prod(lay.out_shape))
            flops[f"{lay.id}:Conv2d"] = 2 * n * lay.shape[1] * kh * kw
        elif lay.type == "Linear":
            flops[f"{lay.id}:Linear"] = 2 * int(np.prod(lay.out_shape)) * lay.args["in_features"]
    in_ptr, in_idx = csr_from_lists(kin)
    out_ptr, out_idx = csr_from_lists(kout)
    params = 0
    for lay in layers:
        a = lay.args
        if lay.type == "Conv2d":
            kh, kw = a["kernel_size"]
            params += a["in_channels"] * a["out_channels"] * kh * kw + (
                a["out_channels"] if a.get("bias") else 0
            )
        elif lay.type == "Linear":
            params += a["in_features"] * a["out_features"] + (a["out_features"] if a.get("bias") else 0)
        elif lay.type == "BatchNorm2d" and a.get("affine", True):
            params += 2 * a["num_features"]
    return Graph(
        name=spec.artifact or spec.name,
        batch_size=batch,
        raw_size=np.asarray(raw, dtype=np.int64),
        is_global=np.asarray(glob, dtype=bool),
        kernel_name=kname,
        kernel_parent=kpar,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        meta={
            "format": "builtin",
            "builtin": spec.key,
            "family": spec.family,
            "parent_flops": flops,
            "dtype_bytes": 4,
            "parameters": params,
        },
    )


# ---------------------------------------------------------------------------------------------
# Transformers: operator records, read by the transformer front end


class _Records:
    """Operator records with symbolic ids; weights become ids below `borden`."""

    def __init__(self):
        self.recs = []  # (ref, type, [(ref, shape)])
        self.n_w = 0
        self.n_o = 0
        self.named: dict = {}  # weight name -> ref (for ties)
        self.flops: dict = {}  # op ref -> forward flops (matrix-multiply-like ops)

    def w(self, name=None):
        if name is not None and name in self.named:
            return self.named[name]
        r = ("w", self.n_w)
        self.n_w += 1
        if name is not None:
            self.named[name] = r
        return r

    def c(self):
        r = ("o", self.n_o)
        self.n_o += 1
        return r

    def op(self, typ, ins):
        if typ == "SoftmaxBasic":
            # G10's softmax is four records; the front end fuses them and keeps the last id
            ((x, shp),) = ins
            a, b, c, d = self.c(), self.c(), self.c(), self.c()
            red = shp[:-1]
            self.recs += [
                (a, typ, [(x, shp)]),
                (b, typ, [(x, shp), (a, red)]),
                (c, typ, [(b, shp)]),
                (d, typ, [(b, shp), (c, red)]),
            ]
            return d
        r = self.c()
        self.recs.append((r, typ, list(ins)))
        return r

    def matmul(self, typ, ins, flops):
        r = self.op(typ, ins)
        self.flops[r] = flops
        return r

    def render(self, batch: int):
        """-> (text with ids, borden, {op id: flops})."""
        W = self.n_w

        def rid(r):
            return r[1] if r[0] == "w" else W + r[1]

        out = []
        for r, typ, ins in self.recs:
            parts = [str(rid(r)), typ, str(len(ins))]
            parts += [str(rid(x)) for x, _ in ins]
            for _, shp in ins:
                parts.append(str(len(shp)))
                parts += ["99" if d == B else str(d) for d in shp]
            parts.append("-" * 19)
            out.append(" ".join(parts))
        flops = {rid(r): f(batch) if callable(f) else f for r, f in self.flops.items()}
        return "\n".join(out) + "\n", W, flops


def _numel(shape, batch):
    return int(np.prod([batch if d == B else d for d in shape], dtype=np.float64))


def _layer_norm(R, x, S, H, gamma, beta, shared, seq_dims=(B,)):
    """G10's decomposed layer norm (11 ops): mean, centre, variance, eps, sqrt, scale, shift."""
    bs = seq_dims + (S,)
    s1 = R.op("Sum", [(x, bs + (H,))])
    m = R.op("Divide", [(s1, bs), (R.c(), bs)])
    d = R.op("Subtract", [(x, bs + (H,)), (m, bs + (H,))])
    p = R.op("Power", [(d, bs + (H,)), (shared["pow"], bs + (H,))])
    s2 = R.op("Sum", [(p, bs + (H,))])
    v = R.op("Divide", [(s2, bs), (R.c(), bs)])
    e = R.op("Add", [(shared["eps"], bs + (1,)), (v, bs + (1,))])
    r = R.op("Sqrt", [(e, bs + (1,))])
    n = R.op("Divide", [(d, bs + (H,)), (r, bs + (H,))])
    g = R.op("Multiply", [(n, bs + (H,)), (gamma, bs + (H,))])
    return R.op("Add", [(g, bs + (H,)), (beta, bs + (H,))])


def _named_weights(R: _Records, spec: ModelSpec):
    """(W, shared): W(name) is the weight of that name (the model's `tie` pairs make two names
    one weight); `shared` the layer norms' shared constants."""
    ties = {a: b for a, b in spec.params.get("tie", [])}
    W = lambda name: R.w(ties.get(name, name))  # noqa: E731
    return W, {"pow": W("ln.pow"), "eps": W("ln.eps")}


def _dense(R: _Records, x, w, bias, S, n_in, n_out, weight_first=False):
    """A linear layer as G10 records it: a Dot of (B, S, n_in) by (n_in, n_out), then its bias
    Add. `weight_first`: the weight is the Dot's first operand, with the activation's shape
    (G10's record of the attention's output projection)."""
    a, b = (w, x) if weight_first else (x, w)
    y = R.matmul("Dot", [(a, (B, S, n_in)), (b, (n_in, n_out))], lambda bs: 2 * bs * S * n_in * n_out)
    return R.op("Add", [(y, (B, S, n_out)), (bias, (B, S, n_out))])


def _attention(R: _Records, qkv, S, NH, dh, scale):
    """Scores of the fused qkv, `scale(scores)`, softmax, and the context."""
    sc = R.matmul(
        "BatchMatMul", [(qkv, (B, NH, S, dh)), (qkv, (B, NH, dh, S))], lambda b: 2 * b * NH * S * S * dh
    )
    sm = R.op("SoftmaxBasic", [(scale(sc), (B, NH, S, S))])
    return R.matmul(
        "BatchMatMul", [(sm, (B, NH, S, S)), (qkv, (B, NH, S, dh))], lambda b: 2 * b * NH * S * S * dh
    )


def _bert_records(spec: ModelSpec) -> _Records:
    L, H, NH, F = (_get(spec, k) for k in ("layers", "hidden", "heads", "ffn"))
    S, V, TV = _get(spec, "seq_len"), _get(spec, "vocab"), _get(spec, "type_vocab")
    dh = H // NH
    R = _Records()
    W, shared = _named_weights(R, spec)
    tt = R.op("GatherV2", [(W("emb.type"), (TV, H)), (R.c(), (B, S))])
    we = R.op("GatherV2", [(W("emb.word"), (V, H)), (R.c(), (B, S))])
    pe = R.op("Add", [(we, (B, S, H)), (W("emb.pos"), (B, S, H))])
    x = R.op("Add", [(pe, (B, S, H)), (tt, (B, S, H))])
    x = _layer_norm(R, x, S, H, W("emb.ln.g"), W("emb.ln.b"), shared)
    mask = None
    scores = (B, NH, S, S)

    def scale(sc):  # scores / scale + the attention mask
        sc = R.op("Divide", [(sc, scores), (W("attn.scale"), scores)])
        return R.op("Add", [(sc, scores), (mask, scores)])

    for i in range(L):
        p = f"layer{i}."
        qkv = _dense(R, x, W(p + "qkv"), W(p + "qkv.b"), S, H, 3 * H)
        if mask is None:
            m1 = R.op("Subtract", [(W("mask.one"), (B, 1, 1, S)), (R.c(), (B, 1, 1, S))])
            mask = R.op("Multiply", [(m1, (B, 1, 1, S)), (W("mask.big"), (B, 1, 1, S))])
        ctx = _attention(R, qkv, S, NH, dh, scale)
        o = _dense(R, ctx, W(p + "proj"), W(p + "proj.b"), S, H, H, weight_first=True)
        o = R.op("Add", [(o, (B, S, H)), (x, (B, S, H))])
        x1 = _layer_norm(R, o, S, H, W(p + "ln1.g"), W(p + "ln1.b"), shared)
        f = _dense(R, x1, W(p + "fc1"), W(p + "fc1.b"), S, H, F)
        f = R.op("Relu", [(f, (B, S, F))])
        f = _dense(R, f, W(p + "fc2"), W(p + "fc2.b"), S, F, H)
        f = R.op("Add", [(f, (B, S, H)), (x1, (B, S, H))])
        x = _layer_norm(R, f, S, H, W(p + "ln2.g"), W(p + "ln2.b"), shared)
    if spec.params.get("pooler", True):
        g = R.op("GatherV2", [(x, (B, S, H)), (W("pool.index"), (1,))])
        d = R.matmul("Dot", [(g, (B, H)), (W("pool.w"), (H, H))], lambda b: 2 * b * H * H)
        d = R.op("Add", [(d, (B, H)), (W("pool.b"), (B, H))])
        R.op("Tanh", [(d, (B, H))])
    return R


def _vit_records(spec: ModelSpec) -> _Records:
    L, H, NH, F = (_get(spec, k) for k in ("layers", "hidden", "heads", "ffn"))
    img, patch, C = _get(spec, "image"), _get(spec, "patch"), _get(spec, "classes")
    g = img // patch
    S = g * g + 1
    dh = H // NH
    R = _Records()
    W, shared = _named_weights(R, spec)
    x = R.matmul(
        "Convolution",
        [(R.c(), (B, 3, img, img)), (W("patch"), (H, 3, patch, patch))],
        lambda b: 2 * b * H * g * g * 3 * patch * patch,
    )
    x = R.op("Add", [(x, (B, H, g, g)), (W("patch.b"), (B, H, g, g))])
    x = R.op("Add", [(W("cls_pos"), (B, S, H)), (x, (B, S, H))])
    sc_c, gd, g1, gh = W("attn.scale"), W("gelu.div"), W("gelu.one"), W("gelu.half")
    for i in range(L):
        p = f"layer{i}."
        h = _layer_norm(R, x, S, H, W(p + "ln1.g"), W(p + "ln1.b"), shared)
        qkv = _dense(R, h, W(p + "qkv"), W(p + "qkv.b"), S, H, 3 * H)
        ctx = _attention(
            R, qkv, S, NH, dh, lambda sc: R.op("Multiply", [(sc, (B, NH, S, S)), (sc_c, (B, NH, S, S))])
        )
        o = _dense(R, ctx, W(p + "proj"), W(p + "proj.b"), S, H, H, weight_first=True)
        x = R.op("Add", [(x, (B, S, H)), (o, (B, S, H))])
        h = _layer_norm(R, x, S, H, W(p + "ln2.g"), W(p + "ln2.b"), shared)
        f = _dense(R, h, W(p + "fc1"), W(p + "fc1.b"), S, H, F)
        e = R.op("Divide", [(f, (B, S, F)), (gd, (B, S, F))])
        e = R.op("Erf", [(e, (B, S, F))])
        e = R.op("Add", [(e, (B, S, F)), (g1, (B, S, F))])
        e = R.op("Multiply", [(f, (B, S, F)), (e, (B, S, F))])
        e = R.op("Multiply", [(e, (B, S, F)), (gh, (B, S, F))])
        f = _dense(R, e, W(p + "fc2"), W(p + "fc2.b"), S, F, H)
        x = R.op("Add", [(x, (B, S, H)), (f, (B, S, H))])
    h = _layer_norm(R, x, S, H, W("ln.g"), W("ln.b"), shared)
    c = R.op("GatherV2", [(h, (B, S, H)), (W("head.index"), (1,))])
    d = R.matmul("Dot", [(c, (B, H)), (W("head.w"), (C, H))], lambda b: 2 * b * H * C)
    R.op("Add", [(d, (B, C)), (W("head.b"), (B, C))])
    return R


def _graph_from_records(
    spec: ModelSpec, R: _Records, batch: int, name: str, parameters: int | None = None
) -> Graph:
    from g10fast.workload.transformer import parse_transformer

    text, borden, flops = R.render(batch)
    g = parse_transformer(f"builtin:{spec.key}", batch, borden, name=name, text=text)
    parent_flops = {}
    for par in set(g.kernel_parent):
        oid = int(par.split(":")[0])
        if oid in flops:
            parent_flops[par] = int(flops[oid])
    meta = dict(g.meta)
    meta.update(
        format="builtin", builtin=spec.key, family=spec.family, parent_flops=parent_flops, dtype_bytes=4
    )
    if parameters is not None:
        meta["parameters"] = int(parameters)
    return Graph(
        g.name,
        g.batch_size,
        g.raw_size,
        g.is_global,
        g.kernel_name,
        g.kernel_parent,
        g.in_ptr,
        g.in_idx,
        g.out_ptr,
        g.out_idx,
        meta,
    )


def _encoder_records(spec: ModelSpec) -> _Records:
    return _bert_records(spec) if spec.family == "bert" else _vit_records(spec)


#: weights of G10's encoder files that are constants, not parameters of the network: the
#: layer norm's exponent and epsilon, the attention mask's operands and scale, GELU's
#: constants, the index the classifier/pooler gathers the first token with
_ENCODER_CONSTANTS = frozenset(
    {
        "ln.pow",
        "ln.eps",
        "mask.one",
        "mask.big",
        "attn.scale",
        "pool.index",
        "gelu.div",
        "gelu.one",
        "gelu.half",
        "head.index",
    }
)


def _encoder_parameters(spec: ModelSpec) -> dict:
    """Elements of each trainable weight of a built-in encoder, by its name in the records,
    at the network's own shape. G10's model files give biases, position embeddings and the
    like the activation's shape (batch x sequence x features, `tie` and O-22 as they are),
    so the Graph's tensor sizes grow with the batch while the network's parameters do not:
    a bias of a layer with n outputs has n, BERT's position table seq_len x hidden (the rows
    the graph reads), ViT's class token and position embeddings (tokens + 1) x hidden."""
    L, H, F = (_get(spec, k) for k in ("layers", "hidden", "ffn"))
    p = {}
    if spec.family == "bert":
        S, V, TV = _get(spec, "seq_len"), _get(spec, "vocab"), _get(spec, "type_vocab")
        p.update(
            {
                "emb.type": TV * H,
                "emb.word": V * H,
                "emb.pos": S * H,
                "emb.ln.g": H,
                "emb.ln.b": H,
                "pool.w": H * H,
                "pool.b": H,
            }
        )
        names = ("ln1", "ln2")
    else:
        img, patch, C = _get(spec, "image"), _get(spec, "patch"), _get(spec, "classes")
        S = (img // patch) ** 2 + 1
        p.update(
            {
                "patch": H * 3 * patch * patch,
                "patch.b": H,
                "cls_pos": S * H + H,
                "ln.g": H,
                "ln.b": H,
                "head.w": C * H,
                "head.b": C,
            }
        )
        names = ("ln1", "ln2")
    for i in range(L):
        q = f"layer{i}."
        p.update(
            {
                q + "qkv": 3 * H * H,
                q + "qkv.b": 3 * H,
                q + "proj": H * H,
                q + "proj.b": H,
                q + "fc1": H * F,
                q + "fc1.b": F,
                q + "fc2": F * H,
                q + "fc2.b": H,
            }
        )
        for n in names:
            p.update({q + n + ".g": H, q + n + ".b": H})
    return p


def _transformer_graph(spec: ModelSpec, batch: int) -> Graph:
    R = _encoder_records(spec)
    numel = _encoder_parameters(spec)
    unknown = set(R.named) - set(numel) - _ENCODER_CONSTANTS
    if unknown:  # pragma: no cover - a weight added to the records without its size
        raise AssertionError(f"no parameter size for {sorted(unknown)}")
    # a tied weight (`tie`) is one tensor: R.named holds each tensor's name once
    params = sum(numel[n] for n in R.named if n in numel)
    return _graph_from_records(spec, R, batch, spec.artifact or spec.name, params)


# ---------------------------------------------------------------------------------------------
# Decoders (GPT-2, Llama) with mixed precision and optimizer state

#: decoder parameters a model file may leave out (their defaults apply)
_DECODER_OPTIONS = ("attention", "pointwise")
PRECISIONS = {"bf16-mixed": 2, "fp32": 4}
OPTIMIZERS = ("adamw", "sgd")
#: a decoder's attention: "fused" (default: one FlashAttention kernel per layer forward and
#: one backward, as PyTorch's scaled_dot_product_attention, FlashAttention-2 and every
#: current training stack run it; no S x S tensor) or "materialized" (the G10 artifact's form
#: of BERT/ViT attention: BatchMatMul, scale, mask, softmax, BatchMatMul, each S x S score
#: tensor and its gradient kept; what the decoders were built with before)
ATTENTIONS = ("fused", "materialized")
#: a decoder's layer norm (GPT-2) and activations (GELU, Llama's SiLU): "fused" (default: one
#: kernel each way, PyTorch's native_layer_norm, gelu and silu, what nn.LayerNorm, F.gelu and
#: F.silu run in eager training) or "decomposed" (G10's element-wise chains, as its BERT/ViT
#: model files write them: layer norm as 11 ops, GELU via Erf, sigmoid via Tanh; what the
#: decoders were built with before). Llama's RMSNorm stays element-wise either way, as
#: eager PyTorch (and the Llama reference code) runs it.
POINTWISE = ("fused", "decomposed")


def _decoder_records(spec: ModelSpec) -> _Records:
    L, H, NH, F, V, S = (_get(spec, k) for k in ("layers", "hidden", "heads", "ffn", "vocab", "seq_len"))
    for k, v in (("hidden", H), ("ffn", F), ("vocab", V), ("seq_len", S)):
        if v == 99:
            raise InputError(
                "99 is reserved for the batch dimension in operator records; choose another size",
                path=spec.path,
                param=k,
            )
    if H % NH:
        raise InputError(f"hidden {H} is not a multiple of heads {NH}", path=spec.path, param="heads")
    attention = spec.params.get("attention", "fused")
    if attention not in ATTENTIONS:
        raise InputError(
            f"unknown attention {attention!r} (known: {', '.join(ATTENTIONS)})",
            path=spec.path,
            param="attention",
        )
    pointwise = spec.params.get("pointwise", "fused")
    if pointwise not in POINTWISE:
        raise InputError(
            f"unknown pointwise {pointwise!r} (known: {', '.join(POINTWISE)})",
            path=spec.path,
            param="pointwise",
        )
    fused_pw = pointwise == "fused"
    llama = spec.family == "llama"
    dh = H // NH
    # grouped-query attention (Llama-2 70B, Qwen2): kv_heads key/value heads of dh each
    NKV = int(spec.params.get("kv_heads", NH))
    if isinstance(spec.params.get("kv_heads", NH), bool) or NKV < 1 or NH % NKV:
        raise InputError(
            f"kv_heads must divide heads {NH}, got {spec.params.get('kv_heads')!r}",
            path=spec.path,
            param="kv_heads",
        )
    KV = NKV * dh
    qkv_bias = bool(spec.params.get("qkv_bias", False))  # Qwen2: biases on q, k, v
    R = _Records()
    one, half, two, eps, nH = R.c(), R.c(), R.c(), R.c(), R.c()  # scalar constants
    if attention == "materialized":
        scale, causal = R.c(), R.c()
    bsh = (B, S, H)

    def norm(x, p):
        if llama:  # RMSNorm: x / sqrt(mean(x^2) + eps) * g
            q = R.op("Power", [(x, bsh), (two, (1,))])
            s = R.op("Sum", [(q, bsh)])
            m = R.op("Divide", [(s, (B, S)), (nH, (1,))])
            e = R.op("Add", [(m, (B, S, 1)), (eps, (1,))])
            r = R.op("Sqrt", [(e, (B, S, 1))])
            n = R.op("Divide", [(x, bsh), (r, bsh)])
            return R.op("Multiply", [(n, bsh), (R.w(p + ".g"), (H,))])
        if fused_pw:
            return R.op("LayerNorm", [(x, bsh), (R.w(p + ".g"), (H,)), (R.w(p + ".b"), (H,))])
        s = R.op("Sum", [(x, bsh)])
        m = R.op("Divide", [(s, (B, S)), (nH, (1,))])
        d = R.op("Subtract", [(x, bsh), (m, bsh)])
        q = R.op("Power", [(d, bsh), (two, (1,))])
        s2 = R.op("Sum", [(q, bsh)])
        v = R.op("Divide", [(s2, (B, S)), (nH, (1,))])
        e = R.op("Add", [(v, (B, S, 1)), (eps, (1,))])
        r = R.op("Sqrt", [(e, (B, S, 1))])
        n = R.op("Divide", [(d, bsh), (r, bsh)])
        g = R.op("Multiply", [(n, bsh), (R.w(p + ".g"), (H,))])
        return R.op("Add", [(g, bsh), (R.w(p + ".b"), (H,))])

    def dot(x, xshape, w, n):
        k = xshape[-1]
        rows = xshape[:-1]
        return R.matmul("Dot", [(x, xshape), (w, (k, n))], lambda b: 2 * _numel(rows, b) * k * n)

    wte = R.w("wte")
    x = R.op("GatherV2", [(wte, (V, H)), (R.c(), (B, S))])
    if not llama:
        pe = R.op("GatherV2", [(R.w("wpe"), (S, H)), (R.c(), (B, S))])
        x = R.op("Add", [(x, bsh), (pe, bsh)])
    cos, sin = R.c(), R.c()
    for i in range(L):
        p = f"layer{i}"
        h = norm(x, p + ".ln1")
        if llama:
            bskv = (B, S, KV)
            q = dot(h, bsh, R.w(p + ".q"), H)
            k = dot(h, bsh, R.w(p + ".k"), KV)
            v = dot(h, bsh, R.w(p + ".v"), KV)
            if qkv_bias:
                q = R.op("Add", [(q, bsh), (R.w(p + ".q.b"), (H,))])
                k = R.op("Add", [(k, bskv), (R.w(p + ".k.b"), (KV,))])
                v = R.op("Add", [(v, bskv), (R.w(p + ".v.b"), (KV,))])
            rot = []
            for t, shp, n in ((q, bsh, H), (k, bskv, KV)):  # rotary: t*cos + rotate(t)*sin
                a = R.op("Multiply", [(t, shp), (cos, (S, n))])
                b_ = R.op("Multiply", [(t, shp), (sin, (S, n))])
                rot.append(R.op("Add", [(a, shp), (b_, shp)]))
            qa, ka, va = ((rot[0], (B, NH, S, dh)), (rot[1], (B, NKV, dh, S)), (v, (B, NKV, S, dh)))
            fused_in = [(rot[0], bsh), (rot[1], bskv), (v, bskv)]
        else:
            qkv = dot(h, bsh, R.w(p + ".qkv"), 3 * H)
            qkv = R.op("Add", [(qkv, (B, S, 3 * H)), (R.w(p + ".qkv.b"), (3 * H,))])
            qa, ka, va = (qkv, (B, NH, S, dh)), (qkv, (B, NH, dh, S)), (qkv, (B, NH, S, dh))
            fused_in = [(qkv, (B, S, 3 * H))]
        if attention == "fused":
            # one kernel, no S x S tensor; causal: the blocks above the diagonal are skipped,
            # half of QK^T and PV's 4 B NH S^2 dh (torch.utils.flop_counter's convention,
            # as g10fast.capture counts a captured flash-attention kernel)
            ctx = R.matmul("FlashAttention", fused_in, lambda b: 2 * b * NH * S * S * dh)
        else:
            sc = R.matmul("BatchMatMul", [qa, ka], lambda b: 2 * b * NH * S * S * dh)
            sc = R.op("Multiply", [(sc, (B, NH, S, S)), (scale, (1,))])
            sc = R.op("Add", [(sc, (B, NH, S, S)), (causal, (S, S))])
            sm = R.op("SoftmaxBasic", [(sc, (B, NH, S, S))])
            ctx = R.matmul("BatchMatMul", [(sm, (B, NH, S, S)), va], lambda b: 2 * b * NH * S * S * dh)
        o = dot(ctx, bsh, R.w(p + ".o"), H)
        if not llama:
            o = R.op("Add", [(o, bsh), (R.w(p + ".o.b"), (H,))])
        x = R.op("Add", [(x, bsh), (o, bsh)])
        h = norm(x, p + ".ln2")
        bsf = (B, S, F)
        if llama:  # SwiGLU: (silu(h Wg) * h Wu) Wd, sigmoid(z) = (1 + tanh(z/2)) / 2
            gt = dot(h, bsh, R.w(p + ".gate"), F)
            up = dot(h, bsh, R.w(p + ".up"), F)
        if llama and fused_pw:
            a = R.op("Silu", [(gt, bsf)])
            a = R.op("Multiply", [(a, bsf), (up, bsf)])
            f = dot(a, bsf, R.w(p + ".down"), H)
        elif llama:
            a = R.op("Multiply", [(gt, bsf), (half, (1,))])
            a = R.op("Tanh", [(a, bsf)])
            a = R.op("Add", [(a, bsf), (one, (1,))])
            a = R.op("Multiply", [(a, bsf), (half, (1,))])
            a = R.op("Multiply", [(gt, bsf), (a, bsf)])
            a = R.op("Multiply", [(a, bsf), (up, bsf)])
            f = dot(a, bsf, R.w(p + ".down"), H)
        else:  # GELU(z) = z/2 (1 + erf(z / sqrt 2))
            f = dot(h, bsh, R.w(p + ".fc1"), F)
            f = R.op("Add", [(f, bsf), (R.w(p + ".fc1.b"), (F,))])
            if fused_pw:
                e = R.op("Gelu", [(f, bsf)])
            else:
                e = R.op("Divide", [(f, bsf), (two, (1,))])
                e = R.op("Erf", [(e, bsf)])
                e = R.op("Add", [(e, bsf), (one, (1,))])
                e = R.op("Multiply", [(f, bsf), (e, bsf)])
                e = R.op("Multiply", [(e, bsf), (half, (1,))])
            f = dot(e, bsf, R.w(p + ".fc2"), H)
            f = R.op("Add", [(f, bsh), (R.w(p + ".fc2.b"), (H,))])
        x = R.op("Add", [(x, bsh), (f, bsh)])
    h = norm(x, "ln_f")
    # the output head: tied to the embedding (GPT-2, Qwen2.5 up to 3B) or its own (Llama)
    head = wte if spec.params.get("tie_embeddings", not llama) else R.w("lm_head")
    logits = R.matmul("Dot", [(h, bsh), (head, (H, V))], lambda b: 2 * b * S * H * V)
    R.op("SoftmaxBasic", [(logits, (B, S, V))])  # softmax of the cross-entropy loss
    return R


def _decoder_graph(spec: ModelSpec, batch: int) -> Graph:
    prec = spec.params.get("precision", "bf16-mixed")
    opt = spec.params.get("optimizer", "adamw")
    if prec not in PRECISIONS:
        raise InputError(
            f"unknown precision {prec!r} (known: {', '.join(PRECISIONS)})", path=spec.path, param="precision"
        )
    if opt not in OPTIMIZERS:
        raise InputError(
            f"unknown optimizer {opt!r} (known: {', '.join(OPTIMIZERS)})", path=spec.path, param="optimizer"
        )
    g = _graph_from_records(spec, _decoder_records(spec), batch, spec.name)
    return with_precision(g, prec, opt)


def _check_batch(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise InputError(f"must be a positive integer, got {batch_size!r}", param="batch_size")


def _resolved_spec(name_or_spec, overrides) -> ModelSpec:
    spec = name_or_spec if isinstance(name_or_spec, ModelSpec) else find_model(name_or_spec)
    if overrides:
        optional = _DECODER_OPTIONS if spec.kind == "decoder" else ()
        bad = [k for k in overrides if k not in spec.params and k not in optional]
        if bad:
            raise InputError(f"model {spec.key} has no parameter {bad[0]!r}", param=bad[0])
        spec = ModelSpec(spec.key, spec.name, spec.kind, spec.family, {**spec.params, **overrides}, spec.path)
    return spec


def kernel_layers(name_or_spec, batch_size: int, **overrides) -> dict:
    """What each `kernel_parent` of a built-in model's Graph computes, with its shapes.

    CNNs: parent "id:Type" -> {"type", "in": input (N, C, H, W), "out": output shape,
    "args": the layer's arguments, "prev": output shapes of all its predecessors (Add,
    Concat), "scale": the gate's shape (Scale)}.
    Operator records (encoders, decoders): parent "id:Type" -> {"type", "in": [input shapes
    with the batch resolved]}; for SoftmaxBasic, the shapes of the record the front end keeps.
    The kernel-time profiler (kernels/profile_torch.py) runs the real operation from these."""
    spec = _resolved_spec(name_or_spec, overrides)
    _check_batch(batch_size)
    batch = int(batch_size)
    out = {}
    if spec.kind == "cnn":
        layers, _ = _cnn_layers(spec, batch)
        for lay in layers:
            info = {
                "type": lay.type,
                "in": tuple(lay.shape),
                "out": tuple(lay.out_shape),
                "args": dict(lay.args),
                "prev": [tuple(q.out_shape) for q in lay.prev],
            }
            if lay.type == "Scale":
                info["scale"] = tuple(lay.shape)
            out[f"{lay.id}:{lay.type}"] = info
        return out
    R = _encoder_records(spec) if spec.kind == "encoder" else _decoder_records(spec)
    W = R.n_w
    for r, typ, ins in R.recs:
        oid = r[1] if r[0] == "w" else W + r[1]
        out[f"{oid}:{typ}"] = {
            "type": typ,
            "in": [tuple(batch if d == B else d for d in shp) for _, shp in ins],
        }
    return out


def with_precision(g: Graph, precision: str, optimizer: str) -> Graph:
    """Re-size a 4-byte-element Graph for `precision` and add the optimizer's state.

    bf16-mixed: every tensor's elements take 2 bytes (activations, gradients, working
    weights); each weight gets an fp32 master copy. adamw: two fp32 moments per weight.
    The added tensors are global and become inputs and outputs of that weight's
    Apply_Grad kernels (they are read and written once per step)."""
    el = PRECISIONS[precision]
    raw = g.raw_size.astype(np.int64) // 4 * el
    glob = g.is_global.astype(bool)
    per_weight = (1 if precision != "fp32" else 0) + (2 if optimizer == "adamw" else 0)
    weights = np.nonzero(glob)[0]
    extra_raw, state_of = [], {}
    T = len(raw)
    for w in weights:
        ids = []
        for _ in range(per_weight):
            ids.append(T + len(extra_raw))
            extra_raw.append(int(g.raw_size[w]))  # fp32: 4 bytes per element
        state_of[int(w)] = ids
    kin, kout = [], []
    for k in range(g.num_kernels):
        i, o = list(g.inputs(k)), list(g.outputs(k))
        if "Apply_Grad" in g.kernel_name[k] and per_weight:
            for w in list(o):
                if glob[w]:
                    i += state_of[int(w)]
                    o += state_of[int(w)]
        kin.append(i)
        kout.append(o)
    in_ptr, in_idx = csr_from_lists(kin)
    out_ptr, out_idx = csr_from_lists(kout)
    meta = dict(g.meta, precision=precision, optimizer=optimizer, dtype_bytes=el)
    return Graph(
        g.name,
        g.batch_size,
        np.concatenate([raw, np.asarray(extra_raw, dtype=np.int64)]),
        np.concatenate([glob, np.ones(len(extra_raw), bool)]),
        g.kernel_name,
        g.kernel_parent,
        in_ptr,
        in_idx,
        out_ptr,
        out_idx,
        meta,
    )


def footprint_bytes(g: Graph) -> int:
    """Page-rounded bytes of all tensors of a Graph (without cuDNN workspaces)."""
    from g10fast.workload.model import page_round

    return int(page_round(g.raw_size).sum())


def parameter_count(g: Graph) -> int:
    """Trainable parameters (elements) of the network: for a built-in model, counted when
    it is built at the network's own shapes (`meta["parameters"]`): convolution and linear
    weights and biases, batch-norm scale and shift (not its running statistics), the
    encoders' weights without the batch-shaped copies G10's model files give them and
    without their constants; a tied weight once. Otherwise (artifact and decoder graphs):
    the elements of the global tensors of the model itself (not optimizer state). `g` may
    also be the Workload built from such a Graph (its meta and tensors are the Graph's, the
    workspaces added after them)."""
    if "parameters" in g.meta:
        return int(g.meta["parameters"])
    el = int(g.meta.get("dtype_bytes", 4))
    glob = np.nonzero(np.asarray(g.is_global, dtype=bool))[0]
    model = glob[: len(glob) - _n_state(g)]  # the optimizer state is added last
    return int(np.asarray(g.raw_size)[model].sum() // el)


def _n_state(g: Graph) -> int:
    if "optimizer" not in g.meta:
        return 0
    per = (1 if g.meta["precision"] != "fp32" else 0) + (2 if g.meta["optimizer"] == "adamw" else 0)
    n_w = int(g.is_global.sum()) // (1 + per) if per else 0
    return n_w * per


def batch_for_footprint(spec, target_bytes: float, lo: int = 1, hi: int = 4096, **kw) -> int:
    """Smallest batch whose footprint reaches `target_bytes` (bisection; footprint is
    monotone in the batch)."""
    if footprint_bytes(load_builtin_graph(spec, lo, **kw)) >= target_bytes:
        return lo
    while footprint_bytes(load_builtin_graph(spec, hi, **kw)) < target_bytes:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if footprint_bytes(load_builtin_graph(spec, mid, **kw)) >= target_bytes:
            hi = mid
        else:
            lo = mid
    return hi


def ceil_div(a, b):
    return -(-a // b)


__all__ = [
    "ModelSpec",
    "read_model_file",
    "list_models",
    "find_model",
    "load_builtin_graph",
    "with_precision",
    "footprint_bytes",
    "parameter_count",
    "models_dir",
    "batch_for_footprint",
    "math",
]
