"""The C++ simulator's order of each kernel's tensors, read from its own statistics (O-18).

G10 keeps a kernel's inputs and outputs in hash sets of object pointers; the order in which it
walks them decides the order of fault-queue entries and therefore the LRU order (simulator
spec §2.2, O-18). g10fast uses ascending tensor ids. The C++ writes the sets, in that walk
order, to `<output_folder>/statistics/kernels.config`; this module reads that file so that a
run can use the same order (`g10fast run --kernel-order FILE`, `simulate_pages(...,
required_order=...)`).

    read_kernel_order(path) -> list of (inputs, outputs) per kernel, in file order

The file (plain or .gz) has per kernel a block
    Kernel ID: <k>, Name: <name>
    Parent Layer ID:...
    Execution Time: <cycles>
    (<shape>)
    Input Tensors:
    tensor<i> Is weight (global)?: ...
    Output Tensors:
    tensor<j> Is weight (global)?: ...
    ____...
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from g10fast.errors import InputError

_KERNEL = re.compile(r"^Kernel ID: (\d+), Name: ")
_TENSOR = re.compile(r"^tensor(\d+) ")


def read_kernel_order(path) -> list[tuple[list[int], list[int]]]:
    """Per kernel, its input and output tensor ids in the order of G10's kernels.config."""
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f"cannot read: {e}", path=str(path)) from None
    out: list[tuple[list[int], list[int]]] = []
    section = None
    for n, text in enumerate(lines, 1):
        m = _KERNEL.match(text)
        if m:
            if int(m.group(1)) != len(out):
                raise InputError(
                    f"kernel {m.group(1)} where kernel {len(out)} was expected", path=str(path), line=n
                )
            out.append(([], []))
            section = None
        elif text == "Input Tensors:" and out:
            section = out[-1][0]
        elif text == "Output Tensors:" and out:
            section = out[-1][1]
        elif section is not None and _TENSOR.match(text):
            section.append(int(_TENSOR.match(text).group(1)))
        else:
            section = None
    if not out:
        raise InputError("no 'Kernel ID:' blocks (not a G10 statistics/kernels.config)", path=str(path))
    return out
