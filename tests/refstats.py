"""Readers for the C++ reference run's statistics/*.config.gz files (test helpers only).

They turn G10's own tensor and kernel lists into a Graph, so that the analysis can be checked
against G10's outputs without depending on the front ends.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from g10fast.workload.model import Graph, csr_from_lists

SHARED = Path(__file__).resolve().parents[2] / "shared"
REFERENCE = SHARED / "reference"
ARTIFACT = SHARED / "g10-artifact"

_TENSOR = re.compile(
    r"^tensor(\d+) Is weight \(global\)\?: ([01]), Size in byte: (\d+), "
    r"Range:(\d+)--(\d+)$"
)


def _lines(path):
    with gzip.open(path, "rt", encoding="ascii") as f:
        return f.read().splitlines()


@dataclass
class RefTensors:
    size: np.ndarray  # int64, page-rounded bytes
    is_global: np.ndarray  # bool
    offset: np.ndarray  # int64, per-space address offset (Range start)
    end: np.ndarray  # int64, Range end


def parse_tensor_line(text: str) -> tuple[int, bool, int, int, int]:
    m = _TENSOR.match(text)
    if m is None:
        raise ValueError(f"not a tensor line: {text!r}")
    tid, g, size, a, b = m.groups()
    return int(tid), g == "1", int(size), int(a), int(b)


def read_tensors(path) -> RefTensors:
    rows = [parse_tensor_line(t) for t in _lines(path) if t.strip()]
    ids = [r[0] for r in rows]
    assert ids == list(range(len(rows))), "tensors.config ids are not 0..T-1"
    return RefTensors(
        size=np.array([r[2] for r in rows], np.int64),
        is_global=np.array([r[1] for r in rows], bool),
        offset=np.array([r[3] for r in rows], np.int64),
        end=np.array([r[4] for r in rows], np.int64),
    )


@dataclass
class RefKernels:
    name: list
    parent: list
    exec_cycles: np.ndarray
    inputs: list  # list of lists of tensor ids, file order
    outputs: list


def read_kernels(path) -> RefKernels:
    name, parent, cycles, inputs, outputs = [], [], [], [], []
    section = None
    for text in _lines(path):
        if text.startswith("Kernel ID: "):
            kid, kname = re.match(r"^Kernel ID: (\d+), Name: (.*)$", text).groups()
            assert int(kid) == len(name)
            name.append(kname)
            inputs.append([])
            outputs.append([])
            section = None
        elif text.startswith("Parent "):
            parent.append(text)
        elif text.startswith("Execution Time: "):
            cycles.append(int(text.split()[-1]))
        elif text == "Input Tensors:":
            section = inputs
        elif text == "Output Tensors:":
            section = outputs
        elif text.startswith("tensor"):
            section[-1].append(parse_tensor_line(text)[0])
        else:
            section = None  # shape line "(N,C,H,W)" or separator
    return RefKernels(name, parent, np.array(cycles, np.int64), inputs, outputs)


def reference_graph(run: str, drop_workspaces: int = 0) -> Graph:
    """Graph of a reference run, from its tensors.config and kernels.config.

    With drop_workspaces = n, the last n tensors (the workspaces) and their uses are removed,
    so that build_workload can add them back from the workspace trace."""
    stats = REFERENCE / run / "statistics"
    tens = read_tensors(stats / "tensors.config.gz")
    kern = read_kernels(stats / "kernels.config.gz")
    T = tens.size.shape[0] - drop_workspaces
    ins = [[t for t in r if t < T] for r in kern.inputs]
    outs = [[t for t in r if t < T] for r in kern.outputs]
    in_ptr, in_idx = csr_from_lists(ins)
    out_ptr, out_idx = csr_from_lists(outs)
    return Graph(
        name=run,
        batch_size=0,
        raw_size=tens.size[:T].copy(),
        is_global=tens.is_global[:T].copy(),
        kernel_name=kern.name,
        kernel_parent=kern.parent,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
    )


@dataclass
class RefIntervals:
    birth: np.ndarray  # int64[T], -1 for globals ("Global!")
    death: np.ndarray  # int64[T]
    is_global: np.ndarray
    tensor: np.ndarray  # per interval
    index: np.ndarray  # the "interval i" number within its tensor
    start: np.ndarray
    end: np.ndarray
    time_text: list  # the printed "Estimated Time" strings


def read_intervals(path) -> RefIntervals:
    birth, death, glob = [], [], []
    tensor, index, start, end, times = [], [], [], [], []
    current = -1
    for text in _lines(path):
        if text.startswith("tensor"):
            current = parse_tensor_line(text)[0]
        elif text.startswith("Liveness: "):
            b, d = re.match(r"^Liveness: Birth: (-?\d+), Death: (-?\d+)\.$", text).groups()
            assert current == len(birth)
            birth.append(int(b))
            death.append(int(d))
            glob.append(False)
        elif text == "Global!":
            assert current == len(birth)
            birth.append(-1)
            death.append(-1)
            glob.append(True)
        elif text.startswith("interval "):
            i, s, e = re.match(r"^interval (\d+): (-?\d+)--------(-?\d+)$", text).groups()
            tensor.append(current)
            index.append(int(i))
            start.append(int(s))
            end.append(int(e))
        elif text.startswith("Estimated Time:"):
            times.append(text[len("Estimated Time:") :])
    assert len(times) == len(tensor)
    return RefIntervals(
        np.array(birth),
        np.array(death),
        np.array(glob, bool),
        np.array(tensor),
        np.array(index),
        np.array(start),
        np.array(end),
        times,
    )


def read_interval_text(run: str) -> str:
    with gzip.open(REFERENCE / run / "statistics" / "interval.config.gz", "rt", encoding="ascii") as f:
        return f.read()
