"""Machine code of the page engine in two source trees, function by function.

    python benchmarks/engine_asm_diff.py /tmp/wt-base .

Each tree compiles the engine afresh (an empty NUMBA_CACHE_DIR) in its own process, runs
BERT-128 lru (int32 LRU entries) and writes the assembly of `run_engine`'s module: every
function LLVM did not inline into `run_engine`. Per function: instructions in each tree and
whether they are the same (jump-table and constant-pool label numbers and symbol names
ignored). A change meant for compile time only should leave the hot functions the same;
where it does, their run time cannot change. A function whose name carries Literal is a
literal specialization (one compile per constant argument).
"""

from __future__ import annotations

import collections
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ARTIFACT = Path(__file__).resolve().parents[2] / "shared" / "g10-artifact"

CHILD = r"""
import sys
from g10fast.config import genconfig
from g10fast.run import run
from g10fast.engine.page import kernels as pk
run(genconfig(sys.argv[1], "BERT", 128, "lru"))
with open(sys.argv[2], "w") as f:
    for asm in pk.run_engine.inspect_asm().values():
        f.write(asm)
"""


def dump(tree: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=cache)
        subprocess.run(
            [sys.executable, "-c", CHILD, str(ARTIFACT), str(out)], env=env, cwd=str(tree), check=True
        )


def functions(path: Path) -> dict[str, list[str]]:
    """Function name (kernel, with a [Literal xN] mark) -> normalised instructions."""
    funcs = collections.defaultdict(list)
    cur = None
    for line in open(path):
        if re.match(r"^[_A-Za-z][\w.$]*:\s*$", line):
            name = line.strip()[:-1]
            m = re.search(r"page(?:.kernels\d*|\d+[a-z_]+?\d+)(\w+?)B", name)
            cur = ("cpython." if "cpython" in name else "cfunc." if name.startswith("cfunc") else "") + (
                m.group(1) if m else name[:40]
            )
            if "Literal" in name:
                cur += f" [Literal x{name.count('Literal')}]"
        elif cur and line.startswith("\t") and not line.startswith("\t."):
            ins = line.split("#")[0].strip()
            funcs[cur].append(re.sub(r"\.L\w+|_ZN\S+", "L", ins))
    return funcs


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as d:
        outs = []
        for i, tree in enumerate(argv):
            out = Path(d) / f"{i}.s"
            dump(Path(tree).resolve(), out)
            outs.append(functions(out))
    a, b = outs
    print(f"{'base':>7} {'new':>7}  function (instructions; same / differs)")
    for k in sorted(set(a) | set(b)):
        same = a.get(k) == b.get(k)
        na = len(a[k]) if k in a else "-"
        nb = len(b[k]) if k in b else "-"
        extra = ""
        if not same and k in a and k in b:
            n = sum(1 for x in difflib.ndiff(a[k], b[k]) if x[:1] in "+-")
            extra = f" ({n} lines differ)"
        print(f"{na:>7} {nb:>7}  {k}: {'same' if same else 'differs'}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
