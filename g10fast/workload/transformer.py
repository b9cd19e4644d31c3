"""Front end for G10's operator-record models (format (b): BERT_Base, VIT, NeRF).

Builds the tensors and kernels of one training iteration exactly as G10's transformer
path does (planner spec §2.6, workloads spec §1.2 and §3.1):

* parse: records ``op_id type n in_1..in_n (rank d..d)*n -------------------``; a dimension
  of 99 means the batch size; the last record that mentions a tensor id fixes its shape
  (O-22); a ``SoftmaxBasic`` record swallows the next 3 records and takes the op id of the
  third one;
* tensors, per op in file order: output, inputs, one gradient tensor per differentiable
  input (appended to the producer's output gradients), and after the last op the loss;
  a tensor is global iff its id < ``borden``;
* kernels: forward kernels in op order, ``makeLoss``, backward kernels in reverse op order.

Besides G10's op types the reader knows ``FlashAttention`` (not in any artifact file; the
built-in decoders write it, g10fast.workload.builtin): fused causal attention whose inputs
are q, k and v (or one fused qkv tensor) and whose output is the context; no S x S score
tensor exists. Its backward kernel reads the inputs, the output and the output gradient and
writes the gradients of every input (FlashAttention-2, Dao 2023, Algorithm 2). The
row-wise log-sum-exp the real kernel keeps for its backward pass (B x heads x S fp32
values, under 1 MiB per layer for GPT-2 XL at batch 8) is not a tensor here. Likewise
``LayerNorm`` (inputs x, scale, shift: PyTorch's native_layer_norm, one kernel each way, its
per-row mean and 1/std not tensors here), ``Gelu`` and ``Silu`` (one element-wise kernel
each way) are what PyTorch runs for nn.LayerNorm, F.gelu and F.silu.

Kernel inputs and outputs are sets; they are stored sorted by tensor id (G10 uses hash
order, O-20). Situations where G10 would exit or dereference a missing tensor (an unknown
op type, a missing output gradient, O-22; a Dot/Convolution without a weight, ...) raise
InputError naming the file and the line of the offending record or token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from g10fast.errors import InputError
from g10fast.workload.model import Graph, csr_from_lists

SEPARATOR = "-" * 19
BATCH_PLACEHOLDER = 99
BYTES_PER_ELEMENT = 4
MAX_TENSOR_BYTES = 1 << 50

# op type -> forward kernel name (the backward names are built per type below)
FORWARD_NAME = {
    "GatherV2": "GatherV2_Forward",
    "Convolution": "Conv2d_Forward",
    "Dot": "Linear_Forward",
    "Relu": "ReLU_Forward",
    "FlashAttention": "FlashAttention_Forward",
    "LayerNorm": "LayerNorm_Forward",
    "Gelu": "Gelu_Forward",
    "Silu": "Silu_Forward",
    **{
        t: f"{t}_Forward"
        for t in (
            "Add",
            "BatchMatMul",
            "Divide",
            "Multiply",
            "Power",
            "SoftmaxBasic",
            "Sqrt",
            "Subtract",
            "Sum",
            "Tanh",
            "Erf",
        )
    },
}
_BACKWARD_PREFIX = {"Relu": "ReLU"}


class _Op:
    __slots__ = ("op_id", "type", "ids", "line", "out", "ins", "d_ins", "d_outs")

    def __init__(self, op_id, type_, ids, line):
        self.op_id = op_id
        self.type = type_
        self.ids = ids  # input tensor ids, as in the record
        self.line = line  # line of the record's op_id token
        self.out = -1  # tensor index of the output
        self.ins = []  # tensor index per input
        self.d_ins = []  # gradient tensor index per input, -1 = constant
        self.d_outs = []  # gradient tensors of the output (one per consumer input)


def _tokenize(path: str, text: str | None = None) -> tuple[list, list]:
    if text is None:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise InputError(f"cannot read model file: {e.strerror or e}", path=path) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(
                "model file is not UTF-8 text", path=path, line=data.count(b"\n", 0, e.start) + 1
            ) from None
    toks: list = []
    lines: list = []
    for ln, row in enumerate(text.split("\n"), 1):
        parts = row.split()
        if parts:
            toks.extend(parts)
            lines.extend([ln] * len(parts))
    return toks, lines


def _read_records(path: str, toks: list, lines: list, batch_size: int):
    """-> (fused ops in file order, shape map id -> raw bytes)."""
    n_tok = len(toks)
    end_line = lines[-1] if lines else 1
    pos = 0
    raw_of: dict = {}  # tensor id -> raw bytes; last record mentioning it wins (O-22)

    def need(count, start_line):
        if pos + count > n_tok:
            raise InputError(
                f"truncated record (started at line {start_line}): unexpected end of file",
                path=path,
                line=end_line,
            )

    def integer(i, what):
        t = toks[i]
        if not (t.isascii() and t.isdigit()):
            raise InputError(f"{what}: expected a non-negative integer, got {t!r}", path=path, line=lines[i])
        return int(t)

    def record():
        nonlocal pos
        start = lines[pos]
        need(3, start)
        op_id = integer(pos, "op id")
        typ = toks[pos + 1]
        if typ not in FORWARD_NAME:
            raise InputError(
                f"unknown op type {typ!r} (known: {', '.join(sorted(FORWARD_NAME))})",
                path=path,
                line=lines[pos + 1],
            )
        n = integer(pos + 2, "input count")
        pos += 3
        need(n, start)
        ids = [integer(pos + j, "input tensor id") for j in range(n)]
        pos += n
        for tid in ids:
            need(1, start)
            rank = integer(pos, f"rank of input tensor {tid}")
            pos += 1
            need(rank, start)
            size = BYTES_PER_ELEMENT
            for j in range(rank):
                d = integer(pos + j, f"dimension of input tensor {tid}")
                if d == 0:
                    raise InputError(f"dimension of input tensor {tid} is 0", path=path, line=lines[pos + j])
                size *= batch_size if d == BATCH_PLACEHOLDER else d
                if size > MAX_TENSOR_BYTES:
                    raise InputError(
                        f"input tensor {tid} is implausibly large (> 2^50 bytes)",
                        path=path,
                        line=lines[pos + j],
                    )
            pos += rank
            raw_of[tid] = size
        need(1, start)
        if toks[pos] != SEPARATOR:
            raise InputError(
                f"expected the separator {SEPARATOR!r}, got {toks[pos]!r}", path=path, line=lines[pos]
            )
        pos += 1
        return op_id, typ, ids, start

    ops: list = []
    seen: dict = {}
    while pos < n_tok:
        op_id, typ, ids, start = record()
        if typ == "SoftmaxBasic":
            # the next 3 records are the pieces of the same softmax: their input shapes
            # are registered, the records dropped, and the op takes the third one's id
            for _ in range(3):
                if pos >= n_tok:
                    raise InputError(
                        f"SoftmaxBasic record at line {start} must be followed by 3 more records",
                        path=path,
                        line=end_line,
                    )
                op_id = record()[0]
        if op_id in seen:
            raise InputError(f"duplicate op id {op_id} (first at line {seen[op_id]})", path=path, line=start)
        seen[op_id] = start
        ops.append(_Op(op_id, typ, ids, start))
    if not ops:
        raise InputError("no operator records", path=path, line=end_line)
    return ops, raw_of


def parse_transformer(
    path, batch_size: int, borden: int, name: str | None = None, *, text: str | None = None
) -> Graph:
    """Read a format-(b) model file and build G10's training iteration (see module doc).

    With `text`, the records are read from that string instead (`path` then only names the
    source in messages); the built-in models use this (g10fast.workload.builtin)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InputError(f"batch size must be a positive integer, got {batch_size!r}", param="batch_size")
    if isinstance(borden, bool) or not isinstance(borden, (int, np.integer)):
        raise InputError(f"borden must be an integer, got {borden!r}", param="borden")
    batch_size = int(batch_size)
    borden = int(borden)
    spath = str(path)
    toks, lines = _tokenize(spath, text)
    ops, raw_of = _read_records(spath, toks, lines, batch_size)
    op_of = {op.op_id: op for op in ops}

    raw: list = []
    glob: list = []
    tensor_of: dict = {}  # tensor id -> tensor index (ids registered by records only)

    def new_tensor(size, is_global):
        raw.append(size)
        glob.append(is_global)
        return len(raw) - 1

    def fail(op, msg):
        raise InputError(f"op {op.op_id} ({op.type}): {msg}", path=spath, line=op.line)

    # ---- tensors (transformer_op_datalow_pass) ----
    for op in ops:
        if op.op_id in raw_of:  # consumed somewhere: registered shape
            if op.op_id not in tensor_of:
                tensor_of[op.op_id] = new_tensor(raw_of[op.op_id], op.op_id < borden)
            op.out = tensor_of[op.op_id]
        else:  # nobody consumes it: shape of input 0
            if not op.ids:
                fail(op, "the output is never consumed and the op has no input to size it")
            op.out = new_tensor(raw_of[op.ids[0]], False)
        for tid in op.ids:
            if tid not in tensor_of:
                tensor_of[tid] = new_tensor(raw_of[tid], tid < borden)
            op.ins.append(tensor_of[tid])
        for tid, t in zip(op.ids, op.ins):
            producer = op_of.get(tid)
            if op.type == "Power":
                wants_grad = not glob[t] and producer is not None
            else:
                wants_grad = glob[t] or producer is not None
            if wants_grad:
                d = new_tensor(raw[t], False)
                if producer is not None:
                    producer.d_outs.append(d)
            else:
                d = -1
            op.d_ins.append(d)
    last = ops[-1]
    last.d_outs.insert(0, new_tensor(raw[last.out], False))  # the loss

    # ---- kernels (transformer_scheduling_kernels) ----
    names: list = []
    parents: list = []
    k_in: list = []
    k_out: list = []

    def emit(op, kname, ins, outs):
        names.append(kname)
        parents.append(f"{op.op_id}:{op.type}")
        k_in.append(ins)
        k_out.append(outs)

    for op in ops:
        emit(op, FORWARD_NAME[op.type], op.ins, [op.out])
    emit(last, "makeLoss", [last.out], [last.d_outs[0]])

    for op in reversed(ops):
        if not op.d_outs:
            fail(
                op,
                "the output is never consumed but the op is not the last one "
                "(it would have no output gradient)",
            )
        if len(op.d_outs) > 1:
            emit(op, "Add_MultiGredient", list(op.d_outs), [op.d_outs[0]])
        g = op.d_outs[0]
        typ = op.type
        ins, d_ins = op.ins, op.d_ins
        n = len(ins)

        def need_inputs(count):
            if n < count:
                fail(op, f"needs at least {count} input(s) for its backward pass, has {n}")

        def grad_of(j):
            if d_ins[j] < 0:
                fail(op, f"input {op.ids[j]} has no gradient, but the backward pass writes it")
            return d_ins[j]

        def apply_last_global():
            gl = [j for j in range(n) if glob[ins[j]]]
            if gl:
                j = gl[-1]
                emit(op, "Apply_Grad", [ins[j], d_ins[j]], [ins[j]])

        if typ in ("GatherV2", "Dot", "Convolution"):
            gl = [j for j in range(n) if glob[ins[j]]]
            if not gl:
                fail(op, "has no global (weight) input")
            w = gl[-1]
            others = [j for j in range(n) if j != w]
            if not others:
                fail(op, "has no data input besides the weight")
            if typ == "GatherV2":
                x = [j for j in others if not glob[ins[j]]]
                x = x[-1] if x else others[0]
                outs = [d_ins[w]] + ([d_ins[x]] if d_ins[x] >= 0 else [])
                emit(op, "GatherV2_Backward", [g, ins[x]], outs)
                emit(op, "Apply_Grad", [d_ins[w], ins[w]], [ins[w]])
            else:
                x = others[0]
                pre = "Linear" if typ == "Dot" else "Conv2d"
                emit(op, f"{pre}_Backward_Weight", [g, ins[x]], [d_ins[w]])
                if d_ins[x] >= 0:
                    emit(op, f"{pre}_Backward_Input", [ins[w], g], [d_ins[x]])
                emit(
                    op,
                    "Linear_Apply_Grad_Weight" if typ == "Dot" else "Apply_Grad",
                    [d_ins[w], ins[w]],
                    [ins[w]],
                )
        elif typ in ("Relu", "SoftmaxBasic", "Sqrt", "Sum", "Tanh", "Erf", "Gelu", "Silu"):
            need_inputs(1)
            emit(op, f"{_BACKWARD_PREFIX.get(typ, typ)}_Backward", [ins[0], g], [grad_of(0)])
        elif typ in ("Add", "Subtract"):
            emit(op, f"{typ}_Backward", [g], [d for d in d_ins if d >= 0])
            apply_last_global()
        elif typ in ("BatchMatMul", "Multiply"):
            for k in (0, 1):
                if k < n and d_ins[k] >= 0:
                    need_inputs(2)
                    emit(op, f"{typ}_Backward", [g, ins[1 - k]], [d_ins[k]])
            apply_last_global()
        elif typ == "Divide":
            need_inputs(2)
            if d_ins[0] >= 0:
                emit(op, "Divide_Backward_A", [ins[1], g], [d_ins[0]])
            if d_ins[1] >= 0:
                emit(op, "Divide_Backward_B", [ins[1], op.out, g], [d_ins[1]])
            apply_last_global()
        elif typ == "Power":
            need_inputs(2)
            emit(op, "Power_Backward", [g, ins[0], ins[1]], [grad_of(0)])
        elif typ == "LayerNorm":
            # native_layer_norm_backward: reads x, the scale and the output gradient, writes
            # the gradients of x, scale and shift; then each weight's update
            need_inputs(1)
            emit(op, "LayerNorm_Backward", list(ins[:2]) + [g], [d for d in d_ins if d >= 0])
            for j in range(n):
                if glob[ins[j]] and d_ins[j] >= 0:
                    emit(op, "Apply_Grad", [ins[j], d_ins[j]], [ins[j]])
        elif typ == "FlashAttention":
            # recomputes the scores from q, k, v and reads the output (FlashAttention-2's
            # backward pass), writes the gradients of all of q, k, v in one kernel
            need_inputs(1)
            emit(op, "FlashAttention_Backward", list(ins) + [op.out, g], [d for d in d_ins if d >= 0])
        else:  # pragma: no cover - FORWARD_NAME and this dispatch list the same types
            fail(op, "no backward rule")

    in_ptr, in_idx = csr_from_lists(k_in)
    out_ptr, out_idx = csr_from_lists(k_out)
    return Graph(
        name=name if name is not None else Path(spath).stem,
        batch_size=batch_size,
        raw_size=np.asarray(raw, dtype=np.int64),
        is_global=np.asarray(glob, dtype=bool),
        kernel_name=names,
        kernel_parent=parents,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        meta={"format": "transformer", "path": spath, "borden": borden},
    )
