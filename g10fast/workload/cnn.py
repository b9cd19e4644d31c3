"""CNN front end: G10's PyTorch module printout (workloads spec §1.1, format (a)) -> Graph.

Three stages, each a plain function:
  1. `tokenize` + `_Parser`: the grammar of G10's `scanner.l` / `parser.y` (workloads spec §1.1),
     a hand-written recursive-descent parser producing a small tree of blocks and operators.
  2. `_flatten`: leaf operators become layers in print order, chained to the previous one; after
     each composite block of a known name the family-specific layers are inserted and the edges
     rewired at G10's hard-coded relative positions (planner spec §2.2).
  3. `_build`: shape propagation (§2.3), tensors in creation order (§2.4) and the kernels of one
     training iteration (§2.5).

Quirks reproduced on purpose: one ReLU per ResNet block and none after the Add (planner O-26);
Inception's average-pool branch is a MaxPool2d(3, 1, 1); the SENet gate is a ReLU and the Scale
kernel reads only the gate (O-26); the misspelt kernel name "Add_MultiGredient" (O-25).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from g10fast.errors import InputError
from g10fast.workload.model import Graph, csr_from_lists

FAMILIES = ("resnet", "inception", "senet")

KEYWORDS = frozenset(
    (
        "Sequential",
        "Conv2d",
        "ReLU",
        "MaxPool2d",
        "AdaptiveAvgPool2d",
        "Linear",
        "Dropout",
        "BatchNorm2d",
        "kernel_size",
        "stride",
        "padding",
        "bias",
        "inplace",
        "dilation",
        "ceil_mode",
        "output_size",
        "in_features",
        "out_features",
        "p",
        "eps",
        "momentum",
        "affine",
        "track_running_stats",
    )
)
OPERATORS = ("Conv2d", "ReLU", "MaxPool2d", "AdaptiveAvgPool2d", "Linear", "Dropout", "BatchNorm2d")

_MAX_DEPTH = 100  # nesting limit of blocks (a real printout nests 5 deep)
_MAX_BYTES = 1 << 62  # a tensor larger than this cannot be addressed in int64

# ---------------------------------------------------------------------------------------------
# 1. Lexer and parser

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v]+)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[:=,()])
  | (?P<bad>.)
""",
    re.VERBOSE | re.DOTALL,
)


class Token(NamedTuple):
    """A token (a tuple: made 17 k times for SENet154, where a frozen dataclass cost 2 us each)."""

    kind: str  # "kw", "ident", "int", "float", "bool", "punct", "eof"
    value: object
    pos: int  # character offset in the text

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of file"
        if self.kind in ("kw", "punct"):
            return f"'{self.value}'"
        if self.kind == "ident":
            return f"identifier '{self.value}'"
        if self.kind == "bool":
            return f"boolean {self.value}"
        return f"{'integer' if self.kind == 'int' else 'number'} {self.value}"


class _Source:
    """Text plus a line index, to turn character offsets into line:col for messages."""

    def __init__(self, text: str, path: str):
        self.text = text
        self.path = path
        self._nl = [m.start() for m in re.finditer("\n", text)]

    def line_col(self, pos: int) -> tuple[int, int]:
        i = bisect.bisect_left(self._nl, pos)
        start = self._nl[i - 1] + 1 if i > 0 else 0
        return i + 1, pos - start + 1

    def error(self, pos: int, message: str) -> InputError:
        line, col = self.line_col(pos)
        err = InputError(f"{self.path}:{line}:{col}: {message}")
        err.path, err.line, err.col = self.path, line, col
        return err


def tokenize(src: _Source) -> list[Token]:
    """Tokens of a module printout, as G10's scanner.l splits it (workloads spec §1.1)."""
    toks: list[Token] = []
    append = toks.append
    for m in _TOKEN_RE.finditer(src.text):
        kind = m.lastgroup
        if kind == "ws":
            continue
        s = m.group()
        pos = m.start()
        if kind == "word":
            if s in KEYWORDS:
                append(Token("kw", s, pos))
            elif s == "True" or s == "False":
                append(Token("bool", s == "True", pos))
            else:
                append(Token("ident", s, pos))
        elif kind == "punct":
            append(Token("punct", s, pos))
        elif kind == "int":
            append(Token("int", int(s), pos))
        elif kind == "float":
            append(Token("float", float(s), pos))
        else:
            raise src.error(pos, f"unexpected character {s!r}")
    append(Token("eof", None, len(src.text)))
    return toks


@dataclass
class Op:
    """A leaf operator of the printout."""

    type: str
    args: dict
    pos: int


@dataclass
class Block:
    """A composite block: a user block `Name( Layer+ )` or a `Sequential( SeqBlock+ )`."""

    name: str
    children: list
    pos: int


class _Parser:
    """Recursive descent over the grammar of G10's parser.y (workloads spec §1.1)."""

    def __init__(self, src: _Source, toks: list[Token]):
        self.src = src
        # (the end-of-file token twice more: `peek` looks at most one past the current token,
        # and nothing is taken past the first)
        self.toks = toks + [toks[-1], toks[-1]]
        self.i = 0

    # -- token helpers
    def peek(self, k: int = 0) -> Token:
        return self.toks[self.i + k]

    def fail(self, expected: str, tok: Token | None = None) -> InputError:
        tok = tok or self.peek()
        return self.src.error(tok.pos, f"syntax error: expected {expected}, found {tok.describe()}")

    def take(self, kind: str, value=None, expected: str | None = None) -> Token:
        tok = self.peek()
        if tok.kind != kind or (value is not None and tok.value != value):
            if expected is None:
                expected = (
                    f"'{value}'"
                    if value is not None
                    else {
                        "kw": "a keyword",
                        "ident": "an identifier",
                        "int": "an integer",
                        "float": "a number with a decimal point or exponent (e.g. 0.5, 1e-05)",
                        "bool": "True or False",
                    }[kind]
                )
            raise self.fail(expected, tok)
        self.i += 1
        return tok

    def punct(self, c: str) -> None:
        self.take("punct", c)

    def is_punct(self, c: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.kind == "punct" and t.value == c

    # -- grammar
    def model(self) -> Block:
        name = self.take("ident", expected="the model name (an identifier such as 'ResNet')")
        self.punct("(")
        children = self.layers(1)
        self.punct(")")
        self.take("eof", expected="end of file after the model's closing ')'")
        return Block(name.value, children, name.pos)

    def layers(self, depth: int) -> list:
        """Layer+ up to the closing ')' (not consumed)."""
        out = [self.layer(depth)]
        while self.is_punct("("):
            out.append(self.layer(depth))
        return out

    def layer(self, depth: int):
        self.punct("(")
        self.take("ident", expected="a layer name (an identifier) after '('")
        self.punct(")")
        self.punct(":")
        tok = self.peek()
        if tok.kind == "kw" and tok.value == "Sequential":
            self.i += 1
            self.punct("(")
            if depth >= _MAX_DEPTH:
                raise self.src.error(tok.pos, f"blocks nested more than {_MAX_DEPTH} deep")
            children = [self.seq_block(depth + 1)]
            while self.is_punct("("):
                children.append(self.seq_block(depth + 1))
            self.punct(")")
            return Block("Sequential", children, tok.pos)
        return self.block(depth)

    def seq_block(self, depth: int):
        self.punct("(")
        t = self.peek()
        if t.kind not in ("int", "ident"):
            raise self.fail("an index or a name inside a Sequential, e.g. '(0)'")
        self.i += 1
        self.punct(")")
        self.punct(":")
        return self.block(depth)

    def block(self, depth: int):
        tok = self.peek()
        if tok.kind == "kw" and tok.value in OPERATORS:
            return self.operator()
        if tok.kind != "ident":
            raise self.fail("an operator (" + ", ".join(OPERATORS) + ") or a block name")
        self.i += 1
        if not self.is_punct("(") or not self.is_punct("(", 1):
            if self.is_punct("("):
                raise self.src.error(
                    tok.pos,
                    f"unknown operator '{tok.value}': G10's grammar accepts only "
                    + ", ".join(OPERATORS)
                    + "; a user block must contain '(name): ...' children",
                )
            raise self.fail(f"'(' after block name '{tok.value}'")
        if depth >= _MAX_DEPTH:
            raise self.src.error(tok.pos, f"blocks nested more than {_MAX_DEPTH} deep")
        self.i += 1
        children = self.layers(depth + 1)
        self.punct(")")
        return Block(tok.value, children, tok.pos)

    # -- operators: fixed argument order, nothing may be left out (§1.1 table)
    def kwarg(self, name: str) -> None:
        self.take("kw", name, expected=f"'{name}='")
        self.punct("=")

    def keywords(self, a: dict, *names) -> None:
        """`name=value` for each (name, token kind) of `names` in that order, separated by
        commas, into `a`."""
        for j, (name, kind) in enumerate(names):
            if j:
                self.punct(",")
            self.kwarg(name)
            a[name] = self.take(kind).value

    def pair(self) -> tuple[int, int]:
        self.punct("(")
        a = self.take("int").value
        self.punct(",")
        b = self.take("int").value
        self.punct(")")
        return a, b

    def operator(self) -> Op:
        tok = self.take("kw")
        t = tok.value
        self.punct("(")
        a: dict = {}
        if t == "Conv2d":
            a["in_channels"] = self.take("int").value
            self.punct(",")
            a["out_channels"] = self.take("int").value
            self.punct(",")
            self.kwarg("kernel_size")
            a["kernel_size"] = self.pair()
            self.punct(",")
            self.kwarg("stride")
            a["stride"] = self.pair()
            a["padding"], a["bias"] = (0, 0), True
            if self.is_punct(")"):
                raise self.fail("',' then 'padding=' or 'bias=' (G10 needs at least one of them)")
            self.punct(",")
            nxt = self.peek()
            if nxt.kind == "kw" and nxt.value == "padding":
                self.kwarg("padding")
                a["padding"] = self.pair()
                if self.is_punct(","):
                    self.i += 1
                    self.kwarg("bias")
                    a["bias"] = self.take("bool").value
            elif nxt.kind == "kw" and nxt.value == "bias":
                self.kwarg("bias")
                a["bias"] = self.take("bool").value
            else:
                raise self.fail("'padding=' or 'bias='")
        elif t == "ReLU":
            self.keywords(a, ("inplace", "bool"))
        elif t == "MaxPool2d":
            for name in ("kernel_size", "stride", "padding", "dilation"):
                self.kwarg(name)
                a[name] = self.take(
                    "int", expected=f"an integer for {name} (G10 accepts scalars only here)"
                ).value
                self.punct(",")
            self.kwarg("ceil_mode")
            a["ceil_mode"] = self.take("bool").value
        elif t == "AdaptiveAvgPool2d":
            self.kwarg("output_size")
            a["output_size"] = self.pair()
        elif t == "Linear":
            self.keywords(a, ("in_features", "int"), ("out_features", "int"), ("bias", "bool"))
        elif t == "Dropout":
            self.keywords(a, ("p", "float"), ("inplace", "bool"))
        elif t == "BatchNorm2d":
            a["num_features"] = self.take("int").value
            self.punct(",")
            self.keywords(
                a,
                ("eps", "float"),
                ("momentum", "float"),
                ("affine", "bool"),
                ("track_running_stats", "bool"),
            )
        else:  # pragma: no cover - OPERATORS and this chain list the same names
            raise self.fail("an operator")
        self.punct(")")
        return Op(t, a, tok.pos)


def parse_printout(text: str, path: str = "<string>") -> Block:
    """Parse a printout into its tree (top Block = the model). Raises InputError."""
    src = _Source(text, path)
    return _Parser(src, tokenize(src)).model()


# ---------------------------------------------------------------------------------------------
# 2. Layers and the hard-coded block rewiring (planner spec §2.2)


@dataclass(eq=False)
class Layer:
    type: str
    args: dict
    pos: int  # character offset of the operator / of the block that inserted it
    prev: list = field(default_factory=list)
    next: list = field(default_factory=list)
    scale_ref: "Layer | None" = None  # Scale: layer whose output gives H and W
    # filled by _build
    id: int = -1
    shape: tuple = ()  # input (N, C, H, W)
    out_shape: tuple = ()
    t: dict = field(default_factory=dict)  # tensor role -> tensor id
    other_inputs: list = field(default_factory=list)
    other_d_inputs: list = field(default_factory=list)
    other_d_outputs: list = field(default_factory=list)


def _link(a: Layer, b: Layer) -> None:
    a.next.append(b)
    b.prev.append(a)


def _chain(seq) -> None:
    for a, b in zip(seq, seq[1:]):
        _link(a, b)


# Number of leaf layers each rewired block must contribute (keyed by its number of children),
# as G10's fixed offsets assume them (planner spec §2.2).
_EXPECTED = {
    "resnet": {"Bottleneck": {8: 9, 7: 7}, "BasicBlock": {6: 7, 5: 5}},
    "inception": {
        "InceptionA": {7: 21},
        "InceptionB": {4: 12},
        "InceptionC": {10: 30},
        "InceptionD": {6: 18},
        "InceptionE": {9: 27},
    },
    "senet": {"SENetUnit": {3: 14, 4: 16}},
}


def _rewire(family: str, blk: Block, B: Layer, L: list, src: _Source) -> list:
    """Rewire the leaf layers L of block `blk` whose input layer is B; returns the block's new
    layer order (with inserted Add / Concat / MaxPool2d / Scale layers)."""
    name = blk.name
    rule = _EXPECTED[family][name]
    nchild = len(blk.children)
    if nchild not in rule or len(L) != rule[nchild]:
        shapes = " or ".join(f"{c} children / {n} layers" for c, n in rule.items())
        extra = (
            " (each BasicConv2d must be conv, bn, relu: G10 itself aborts on a channel "
            "mismatch for such a model)"
            if family == "inception"
            else ""
        )
        raise src.error(
            blk.pos,
            f"{name} block has {nchild} children and {len(L)} layers; "
            f"G10's hard-coded {family} rewiring expects {shapes}{extra}",
        )
    # Forget the default chaining inside the block and from B, then link explicitly.
    inside = set(map(id, L))
    B.next = [x for x in B.next if id(x) not in inside]
    for x in L:
        x.prev, x.next = [], []

    def new(t: str, **args) -> Layer:
        return Layer(t, args, blk.pos)

    def branch(seq, src_layer: Layer) -> None:
        _link(src_layer, seq[0])
        _chain(seq)

    if name in ("Bottleneck", "BasicBlock"):
        add = new("Add")
        nmain = 7 if name == "Bottleneck" else 5
        main, ds = L[:nmain], L[nmain:]
        branch(main, B)
        if ds:  # downsample: Add.prev = [main end, ds_bn]
            branch(ds, B)
            _link(main[-1], add)
            _link(ds[-1], add)
        else:  # identity: Add.prev = [B, main end]
            _link(B, add)
            _link(main[-1], add)
        return L + [add]

    if family == "inception":

        def mp(stride: int, pad: int) -> Layer:
            return new("MaxPool2d", kernel_size=3, stride=stride, padding=pad, dilation=1, ceil_mode=False)

        cat = new("Concat")
        if name in ("InceptionA", "InceptionC"):
            # A: 1x1 (3), 5x5 (6), 3x3dbl (9), pool conv (3); C: 1x1 (3), 7x7 (9), 7x7dbl (15), pool (3)
            cuts = (0, 3, 9, 18, 21) if name == "InceptionA" else (0, 3, 12, 27, 30)
            br = [L[cuts[j] : cuts[j + 1]] for j in range(4)]
            pool = mp(1, 1)
            for s in br[:3]:
                branch(s, B)
            _link(B, pool)
            branch(br[3], pool)
            for s in br:
                _link(s[-1], cat)
            return br[0] + br[1] + br[2] + [pool] + br[3] + [cat]
        if name in ("InceptionB", "InceptionD"):
            cut = 3 if name == "InceptionB" else 6
            b1, b2 = L[:cut], L[cut:]
            pool = mp(2, 0)
            branch(b1, B)
            branch(b2, B)
            _link(B, pool)
            for x in (b1[-1], b2[-1], pool):
                _link(x, cat)
            return b1 + b2 + [pool, cat]
        # InceptionE
        b1, b3_1, b3_2a, b3_2b = L[0:3], L[3:6], L[6:9], L[9:12]
        d1, d2, d3a, d3b, bp = L[12:15], L[15:18], L[18:21], L[21:24], L[24:27]
        c0, c1, pool = new("Concat"), new("Concat"), mp(1, 1)
        branch(b1, B)
        branch(b3_1, B)
        branch(d1 + d2, B)
        _link(B, pool)
        branch(b3_2a, b3_1[-1])
        branch(b3_2b, b3_1[-1])
        _link(b3_2a[-1], c0)
        _link(b3_2b[-1], c0)
        branch(d3a, d2[-1])
        branch(d3b, d2[-1])
        _link(d3a[-1], c1)
        _link(d3b[-1], c1)
        branch(bp, pool)
        for x in (b1[-1], c0, c1, bp[-1]):
            _link(x, cat)
        return b1 + b3_1 + b3_2a + b3_2b + [c0] + d1 + d2 + d3a + d3b + [c1, pool] + bp + [cat]

    # SENetUnit: body (8), se (5), [identity_conv (2)], activ (1)
    body_se, activ = L[:13], L[-1]
    ident = L[13:15] if nchild == 4 else []
    scale, add = new("Scale"), new("Add")
    branch(body_se, B)
    _link(body_se[-1], scale)
    if ident:
        branch(ident, B)
        _link(scale, add)
        _link(ident[-1], add)
        scale.scale_ref = ident[-1]
    else:
        _link(scale, add)
        _link(B, add)
        scale.scale_ref = B
    _link(add, activ)
    return body_se + [scale] + ident + [add, activ]


def _flatten(model: Block, family: str | None, src: _Source) -> list:
    """Leaf operators -> layers in print order, with the family's rewiring (planner spec §2.2)."""
    layers: list = []
    rules = _EXPECTED.get(family, {}) if family else {}

    def visit(node) -> None:
        if isinstance(node, Op):
            lay = Layer(node.type, node.args, node.pos)
            if layers:
                _link(layers[-1], lay)
            layers.append(lay)
            return
        b = len(layers) - 1
        for child in node.children:
            visit(child)
        if node.name in rules:
            if b < 0:
                raise src.error(node.pos, f"{node.name} block has no input layer before it")
            layers[b + 1 :] = _rewire(family, node, layers[b], layers[b + 1 :], src)

    for child in model.children:
        visit(child)
    return layers


# ---------------------------------------------------------------------------------------------
# 3. Shapes, tensors, kernels (planner spec §2.3-§2.5)


def _out_dim(src: _Source, lay: Layer, what: str, x: int, k: int, s: int, p: int) -> int:
    if s <= 0:
        raise src.error(lay.pos, f"{lay.type}: {what} stride must be positive, got {s}")
    num = x - k + 2 * p
    if num < 0:
        raise src.error(lay.pos, f"{lay.type}: kernel {k} with padding {p} does not fit the input {what} {x}")
    return num // s + 1


def _shapes(layers: list, batch: int, in_h: int, in_w: int, src: _Source) -> None:
    """(N, C, H, W) in and out of every layer (planner spec §2.3), in list order; a Scale's
    reference layer (SENet's id_bn) comes after it in the list and is computed on demand."""
    for i, lay in enumerate(layers):
        lay.id = i
    busy: set = set()

    def compute(lay: Layer) -> None:
        if lay.out_shape:
            return
        if id(lay) in busy:  # pragma: no cover - the rewiring builds no cycles
            raise src.error(lay.pos, f"layer {lay.id} depends on its own output")
        busy.add(id(lay))
        for q in lay.prev:
            compute(q)
        if lay.scale_ref is not None:
            compute(lay.scale_ref)
        busy.discard(id(lay))
        i, t, a = lay.id, lay.type, lay.args
        if i == 0:
            N, C, H, W = batch, a["in_channels"], in_h, in_w
        else:
            p0 = lay.prev[0]
            N, C, H, W = p0.out_shape
            if t == "Concat":
                for q in lay.prev[1:]:
                    if q.out_shape[2:] != (H, W):
                        raise src.error(
                            lay.pos, f"Concat inputs differ in H, W: {p0.out_shape} vs {q.out_shape}"
                        )
                C = sum(q.out_shape[1] for q in lay.prev)
            elif t == "Add":
                for q in lay.prev[1:]:
                    if q.out_shape != p0.out_shape:
                        raise src.error(
                            lay.pos, f"Add inputs differ in shape: {p0.out_shape} vs {q.out_shape}"
                        )
        lay.shape = (N, C, H, W)
        if min(lay.shape) <= 0:
            raise src.error(lay.pos, f"{t} layer {i} gets an empty input shape {lay.shape}")
        if t == "Conv2d":
            # G10 asserts on a channel mismatch (workloads spec §1.1, Inceptionv3-O); checking
            # the convolution's in_channels against its input is our reading of that assert.
            if a["in_channels"] != C:
                raise src.error(
                    lay.pos,
                    f"channel mismatch: Conv2d expects {a['in_channels']} "
                    f"input channels, its input layer gives {C}",
                )
            (r, s), (s0, s1), (p0_, p1_) = a["kernel_size"], a["stride"], a["padding"]
            out = (
                N,
                a["out_channels"],
                _out_dim(src, lay, "H", H, r, s0, p0_),
                _out_dim(src, lay, "W", W, s, s1, p1_),
            )
        elif t == "MaxPool2d":
            k, s, p = a["kernel_size"], a["stride"], a["padding"]
            out = (N, C, _out_dim(src, lay, "H", H, k, s, p), _out_dim(src, lay, "W", W, k, s, p))
        elif t == "AdaptiveAvgPool2d":
            out = (N, C) + tuple(a["output_size"])
        elif t == "Linear":
            if a["in_features"] <= 0:
                raise src.error(lay.pos, "Linear: in_features must be positive")
            out = (N, C * H * W // a["in_features"] * a["out_features"], 1, 1)
        elif t == "Scale":
            out = (N, C) + lay.scale_ref.out_shape[2:]
        else:  # ReLU, BatchNorm2d, Dropout, Add, Concat
            out = (N, C, H, W)
        if min(out) <= 0:
            raise src.error(lay.pos, f"{t} layer {i} gets an empty output shape {out} from input {lay.shape}")
        lay.out_shape = out

    for lay in layers:
        compute(lay)


def _build(layers: list, src: _Source):
    """Tensors (creation order = id) and kernels of one training iteration."""
    raw: list = []
    glob: list = []

    def tensor(nbytes: int, is_global: bool = False) -> int:
        if nbytes > _MAX_BYTES:
            raise src.error(cur.pos, f"tensor of {nbytes} bytes is too large")
        raw.append(nbytes)
        glob.append(is_global)
        return len(raw) - 1

    def numel(shape) -> int:
        n = 1
        for d in shape:
            n *= d
        return n

    # Forward dataflow (§2.4)
    for i, cur in enumerate(layers):
        t, a, T = cur.type, cur.args, cur.t
        N, C, H, W = cur.shape
        nchw, nkpq = 4 * numel(cur.shape), 4 * numel(cur.out_shape)
        if i == 0:
            T["in"] = tensor(nchw)  # input activation A0
        else:
            T["in"] = cur.prev[0].t["out"]
            if t in ("Add", "Concat"):
                cur.other_inputs = [q.t["out"] for q in cur.prev[1:]]
        if t == "Conv2d":
            kh, kw = a["kernel_size"]
            wsize = 4 * a["out_channels"] * C * kh * kw
            T["out"] = tensor(nkpq)
            T["w"] = tensor(wsize, True)
            T["dw"] = tensor(wsize)
            T["din"] = tensor(nchw)
        elif t == "ReLU":
            T["out"] = T["in"] if a["inplace"] else tensor(nchw)
            T["din"] = tensor(nchw)
        elif t in ("MaxPool2d", "AdaptiveAvgPool2d"):
            T["out"] = tensor(nkpq)
            T["din"] = tensor(nchw)
        elif t == "Dropout":
            T["musk"] = tensor(nchw)
            T["out"] = T["in"] if a["inplace"] else tensor(nchw)
            T["din"] = tensor(nchw)
        elif t == "Linear":
            wsize = 4 * a["in_features"] * a["out_features"]
            T["w"] = tensor(wsize, True)
            T["out"] = tensor(nkpq)
            T["din"] = tensor(nchw)
            T["dw"] = tensor(wsize)
            if a["bias"]:
                T["b"] = tensor(4 * a["out_features"], True)
                T["db"] = tensor(4 * a["out_features"])
        elif t == "BatchNorm2d":
            T["out"] = tensor(nchw)
            T["din"] = tensor(nchw)
            T["ab"] = tensor(8 * C, True)
            T["dab"] = tensor(8 * C)
            T["mu"], T["var"] = tensor(4 * C), tensor(4 * C)
            T["v1"], T["v2"] = tensor(nchw), tensor(4 * C)
            T["dmu"], T["dvar"] = tensor(4 * C), tensor(4 * C)
            T["dv1"], T["dv2"] = tensor(nchw), tensor(4 * C)
            if a["track_running_stats"]:
                T["rm"], T["rv"] = tensor(4 * C, True), tensor(4 * C, True)
        elif t == "Add":
            T["out"] = tensor(nchw)  # no d_input: preds reuse d_output
        elif t == "Concat":
            # sizes use each predecessor's *input* channel count (§2.4)
            T["din"] = tensor(4 * N * H * W * cur.prev[0].shape[1])
            cur.other_d_inputs = [tensor(4 * N * H * W * q.shape[1]) for q in cur.prev[1:]]
            T["out"] = tensor(nchw)
        elif t == "Scale":
            T["out"] = tensor(nkpq)
            T["din"] = tensor(nchw)

    # Backward aliasing (§2.4): the only new tensor is the loss gradient.
    last = layers[-1]
    cur = last
    last.t["dout"] = tensor(4 * numel(last.out_shape))
    for cur in reversed(layers[:-1]):
        if not cur.next:  # pragma: no cover - every non-last layer gets a successor
            raise src.error(cur.pos, f"{cur.type} layer {cur.id} has no successor")
        for k, nx in enumerate(cur.next):
            if nx.type == "Add":
                g = nx.t["dout"]
            elif nx.type == "Concat":
                idx = nx.prev.index(cur)
                g = nx.t["din"] if idx == 0 else nx.other_d_inputs[idx - 1]
            else:
                g = nx.t["din"]
            if k == 0:
                cur.t["dout"] = g
            else:
                cur.other_d_outputs.append(g)

    # Kernels (§2.5)
    kname: list = []
    kpar: list = []
    kin: list = []
    kout: list = []

    def kern(name: str, lay: Layer, ins, outs) -> None:
        kname.append(name)
        kpar.append(f"{lay.id}:{lay.type}")
        kin.append(ins)
        kout.append(outs)

    for lay in layers:
        t, T = lay.type, lay.t
        if t == "Conv2d":
            if lay.id == 0:
                kern("LoadData_A0", lay, [], [T["in"]])
            kern("Conv2d_Forward", lay, [T["in"], T["w"]], [T["out"]])
        elif t in ("ReLU", "AdaptiveAvgPool2d", "MaxPool2d", "Scale"):
            kern(f"{t}_Forward", lay, [T["in"]], [T["out"]])
        elif t == "Dropout":
            kern("Dropout_Forward", lay, [T["in"], T["musk"]], [T["out"]])
        elif t == "Linear":
            kern("Linear_Forward", lay, [T["in"], T["w"]] + ([T["b"]] if "b" in T else []), [T["out"]])
        elif t == "BatchNorm2d":
            run = [T["rm"], T["rv"]] if "rm" in T else []
            kern(
                "BatchNorm2d_Forward",
                lay,
                [T["in"], T["ab"]] + run,
                [T["out"], T["mu"], T["var"], T["v1"], T["v2"]] + run,
            )
        else:  # Add, Concat
            kern(f"{t}_Forward", lay, [T["in"]] + lay.other_inputs, [T["out"]])
    kern("makeLoss", last, [last.t["out"]], [last.t["dout"]])

    for lay in reversed(layers):
        t, T = lay.type, lay.t
        g = T["dout"]
        if lay.other_d_outputs:
            kern("Add_MultiGredient", lay, [g] + lay.other_d_outputs, [g])  # O-25 spelling
        if t == "Conv2d":
            kern("Conv2d_Backward_Weight", lay, [g, T["in"]], [T["dw"]])
            kern("Conv2d_Backward_Input", lay, [g, T["w"]], [T["din"]])
            kern("Conv2d_Apply_Grad", lay, [T["dw"], T["w"]], [T["w"]])
        elif t in ("ReLU", "AdaptiveAvgPool2d", "MaxPool2d"):
            kern(f"{t}_Backward", lay, [T["in"], g], [T["din"]])
        elif t == "Dropout":
            kern("Dropout_Backward", lay, [T["musk"], g], [T["din"]])
        elif t == "Linear":
            if "b" in T:
                kern("Linear_Backward_Bias", lay, [g], [T["db"]])
                kern("Linear_Apply_Grad_Bias", lay, [T["db"], T["b"]], [T["b"]])
            kern("Linear_Backward_Weight", lay, [g, T["in"]], [T["dw"]])
            kern("Linear_Backward_Input", lay, [T["w"], g], [T["din"]])
            kern("Linear_Apply_Grad_Weight", lay, [T["dw"], T["w"]], [T["w"]])
        elif t == "BatchNorm2d":
            kern(
                "BatchNorm2d_Backward",
                lay,
                [g, T["v1"], T["v2"], T["ab"]],
                [T["din"], T["dab"], T["dmu"], T["dvar"], T["dv1"], T["dv2"]],
            )
            kern("BatchNorm2d_Apply_Grad", lay, [T["dab"], T["ab"]], [T["ab"]])
        elif t == "Concat":
            kern("Concat_Backward", lay, [g], [T["din"]] + lay.other_d_inputs)
        elif t == "Scale":
            kern("Scale_Backward", lay, [g], [T["din"]])
        # Add: no backward kernel

    return raw, glob, kname, kpar, kin, kout


# ---------------------------------------------------------------------------------------------
# Entry points


def _check_params(batch_size, input_h, input_w, family) -> None:
    for name, v in (("batch_size", batch_size), ("input_h", input_h), ("input_w", input_w)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise InputError(f"must be a positive integer, got {v!r}", param=name)
    if family is not None and family not in FAMILIES:
        raise InputError(f"unknown CNN family {family!r}; expected one of {FAMILIES} or None", param="family")


def layers_from_text(
    text: str, batch_size: int, input_h: int, input_w: int, family: str | None, path: str = "<string>"
) -> list:
    """Parse, flatten, rewire and shape-propagate; returns the layer list (ids = positions)."""
    _check_params(batch_size, input_h, input_w, family)
    src = _Source(text, path)
    model = _Parser(src, tokenize(src)).model()
    layers = _flatten(model, family, src)
    if layers[0].type != "Conv2d":
        raise src.error(
            layers[0].pos, f"the first layer must be a Conv2d (G10 requires it), found {layers[0].type}"
        )
    _shapes(layers, int(batch_size), int(input_h), int(input_w), src)
    return layers


def graph_from_text(
    text: str,
    batch_size: int,
    input_h: int,
    input_w: int,
    family: str | None,
    name: str = "model",
    path: str = "<string>",
) -> Graph:
    """Build the Graph of one training iteration from printout text."""
    layers = layers_from_text(text, batch_size, input_h, input_w, family, path)
    raw, glob, kname, kpar, kin, kout = _build(layers, _Source(text, path))
    in_ptr, in_idx = csr_from_lists(kin)
    out_ptr, out_idx = csr_from_lists(kout)
    return Graph(
        name=name,
        batch_size=int(batch_size),
        raw_size=np.asarray(raw, dtype=np.int64),
        is_global=np.asarray(glob, dtype=bool),
        kernel_name=kname,
        kernel_parent=kpar,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        meta={"format": "cnn", "path": path, "family": family},
    )


def parse_cnn(
    path, batch_size: int, input_h: int, input_w: int, family: str | None, name: str | None = None
) -> Graph:
    """Read a G10 CNN model file (PyTorch module printout) and build one training iteration.

    family: "resnet", "inception", "senet" (G10's is_resnet / is_inception / is_senet) or None.
    Raises InputError for a missing or malformed file and for a graph G10 would reject."""
    p = Path(path)
    _check_params(batch_size, input_h, input_w, family)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read the model file: {e.strerror or e}", path=str(p)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not a UTF-8 text file (byte {e.start})", path=str(p)) from None
    return graph_from_text(
        text, batch_size, input_h, input_w, family, name=name if name is not None else p.stem, path=str(p)
    )
