"""Kernels compiled ahead of time, when g10fast is installed: a first run without a compile.

A run's kernels are Numba functions compiled on first use and kept in Numba's on-disk cache
(`g10fast.jit`); with an empty cache the first BERT-128 Base UVM run spent 22-38 CPU s
compiling the page engine (benchmarks/results/cold-start-journal.md). Here the kernels a run
calls from Python are compiled once more, ahead of time, into a CPython extension module that
the install builds on the machine it installs on (`setup.py`'s build step runs
`g10fast.warm.build_aot`: `python -m g10fast.aot build DIR MODULE ...` in a process of its own
with an empty Numba cache):
`g10fast/_aot*.<platform suffix>` and their record `g10fast/_aot.json`. Numba's `numba.pycc`
compiles it (pending deprecation since Numba 0.57 with no replacement yet; where it is gone, or
the compile fails, the install goes on without the module and every kernel is compiled on
first use as before).

Which kernels: a kernel module declares its entry points with `export(kernel, signature,
bind)`: `kernel(*args, *bind)` for arguments of the Numba types the signature names, the
`bind` values fixed (a kernel a kernel takes as an argument, such as the page engine's eviction
rule, or None). The build imports the modules it is given (`g10fast.warm.aot_modules`: every
engine record's `kernels` and the bound's and planner's kernel modules) and compiles every
entry they declare. A caller asks for `entry(kernel,
*bind)`: the compiled entry when it can be used, else `kernel` itself with `bind` appended;
both give the same results (the same source, compiled by the same Numba: the entries are
checked against the JIT's in tests/test_aot.py).

When the module is used (each checked once a process, `status()` says which failed):

* the record's stamp equals a SHA-256 of every `.py` file of the installed package: a module
  built from other sources is never run (an edited checkout falls back to the JIT until
  `g10fast warm --aot` or a reinstall builds it again);
* the CPU is the one it was built for. The module is compiled for the build machine's CPU and
  its feature string, as the JIT compiles for the CPU it runs on (code for a generic x86-64
  CPU ran a SENet154-1024 Base UVM engine 10-40 % slower here), so a wheel carried to another
  CPU model does not use it, and never runs instructions its CPU lacks. Checked on Linux by
  the CPU's description in /proc/cpuinfo (`cpu_id`: vendor, family, model, stepping, flags:
  the CPUID bits LLVM reads), elsewhere by LLVM's host CPU name and features (`llvm_cpu`);
* Numba's, llvmlite's and Python's versions and Numba's CPU settings (NUMBA_CPU_NAME,
  NUMBA_CPU_FEATURES, NUMBA_ENABLE_AVX) equal those it was built with (`versions`);
* neither G10FAST_NO_JIT (plain Python kernels) nor G10FAST_NO_AOT (any value but "" and "0":
  the JIT only) is set.

A call goes to the compiled entry only when every argument has the type the entry was compiled
for (an array's dtype, dimensions, layout and writability, checked at each call: an entry
reads its arguments with no check of its own), else to the kernel.

None of these checks imports Numba (the record keeps each entry's argument checks), and the
kernels are made only when first needed (`g10fast.jit`): a run the module serves whole never
imports Numba or loads LLVM, which took 66 MiB of a process's memory.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from g10fast.jit import NO_JIT

NO_AOT = os.environ.get("G10FAST_NO_AOT", "") not in ("", "0")
NAME = "_aot"  # the extension module, g10fast._aot
PACKAGE_DIR = Path(__file__).resolve().parent
RECORD = PACKAGE_DIR / f"{NAME}.json"
_EXPORTS: list = []  # (key, kernel, signature text, bind, with reference counting)
MODULES = {False: NAME, True: NAME + "_rt"}  # the modules by reference counting


def _name(obj) -> str:
    """A bound value or kernel by name: "module.qualname" (a Numba dispatcher or a function),
    repr otherwise (None)."""
    fn = getattr(obj, "py_func", obj)
    if callable(fn) and hasattr(fn, "__qualname__"):
        return f"{fn.__module__}.{fn.__qualname__}"
    return repr(obj)


def key(kernel, bind=()) -> str:
    """The name of the entry `kernel(*args, *bind)`."""
    return f"{_name(kernel)}[{', '.join(_name(b) for b in bind)}]"


def export(kernel, signature: str, bind=()) -> None:
    """Declare `kernel(*args, *bind)`, args of the Numba types of `signature` ("i8(i8[::1],
    f8)": the return type and the arguments before `bind`), an entry compiled ahead of time.
    Nothing happens at run time but the declaration.

    Kernels compiled without Numba's reference counting (`kernel_nonrt`) go into a module
    compiled without it (`_aot`), the others into one with it (`_aot_rt`): an entry with
    reference counting would release the arrays such a kernel returns, which it never took a
    reference to. So a kernel without it that returns arrays is declared returning `none`
    (its result dropped): arrays cannot be handed to Python without a reference count."""
    opts = getattr(kernel, "targetoptions", None)
    nrt = bool(opts.get("_nrt", True)) if opts is not None else True
    _EXPORTS.append((key(kernel, bind), kernel, signature, tuple(bind), nrt))


def source_stamp(root: Path = PACKAGE_DIR) -> str:
    """SHA-256 of the package's Python sources (every `.py` file under `root`, by relative path
    and contents)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def versions() -> dict:
    """What the compiled code depends on besides its sources and the CPU, read without importing
    Numba: Numba's and llvmlite's versions, Python's, the platform, and Numba's settings of
    the target CPU (NUMBA_CPU_NAME, NUMBA_CPU_FEATURES, NUMBA_ENABLE_AVX)."""
    from importlib.metadata import PackageNotFoundError, version

    def v(dist):
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    env = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_ENABLE_AVX")
    return {
        "numba": v("numba"),
        "llvmlite": v("llvmlite"),
        "python": list(sys.version_info[:2]),
        "platform": sys.platform,
        "settings": {k: os.environ.get(k) for k in env},
    }


def cpu_id() -> str:
    """The CPU as Linux describes it (/proc/cpuinfo: vendor, family, model, its name, stepping
    and feature flags, the first processor's), as a SHA-256; "" where there is no such file.
    LLVM derives the host CPU name and features Numba compiles for from the same CPUID bits
    (less those the kernel turned off, which it leaves out of the flags too), so an equal
    digest means an equal target without loading LLVM."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    first = text.split("\n\n")[0]
    keep = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    fields = {}
    for line in first.splitlines():
        k, _, val = line.partition(":")
        if k.strip() in keep:
            fields[k.strip()] = " ".join(sorted(val.split())) if k.strip() == "flags" else val.strip()
    if "flags" not in fields:
        return ""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def llvm_cpu() -> dict:
    """The CPU as LLVM names it and its feature string, with Numba's overrides: the target the
    JIT compiles for (this imports Numba)."""
    import llvmlite.binding as ll
    from numba.core import codegen, config

    return {
        "cpu": ll.get_host_cpu_name() if config.CPU_NAME is None else config.CPU_NAME,
        "features": codegen.get_host_cpu_features() if config.CPU_FEATURES is None else config.CPU_FEATURES,
    }


def _same_machine(rec: dict) -> str:
    """ "" when the record's machine is this one, else what differs."""
    if rec["versions"] != json.loads(json.dumps(versions())):
        return f"built with other versions ({rec['versions']})"
    here = cpu_id()
    if rec["cpu_id"] and here:
        return "" if here == rec["cpu_id"] else f"built for another CPU ({rec['llvm_cpu']['cpu']})"
    return "" if rec["llvm_cpu"] == llvm_cpu() else f"built for another CPU ({rec['llvm_cpu']['cpu']})"


# ---- the build (a process of its own: `python -m g10fast.aot build DIR MODULE ...`) ----


def _bound_function(kernel, nargs: int, bind: tuple, returns: bool):
    """A Python function of `nargs` arguments calling `kernel(*args, *bind)`, the bound values
    as its globals (constants to Numba); returning its result, or nothing (`returns` False)."""
    args = ", ".join(f"a{i}" for i in range(nargs))
    bound = ", ".join(f"b{i}" for i in range(len(bind)))
    ns = {"kernel": kernel, **{f"b{i}": b for i, b in enumerate(bind)}}
    ret = "return " if returns else ""
    exec(f"def entry({args}):\n    {ret}kernel({args}{', ' if bind else ''}{bound})\n", ns)
    return ns["entry"]


def _build_here(dest: Path, modules=()) -> dict:
    """Import `modules` and compile every entry declared into `dest`/_aot*.<suffix>, then write
    their record (the modules first, the record last: a record names complete modules). This
    process's Numba cache must be empty (a kernel loaded from the cache holds machine code,
    not the code the extension links)."""
    import llvmlite.binding as ll
    from numba.core import codegen, sigutils, types
    from numba.pycc import CC

    failed = {}
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:  # (a module the build cannot import: its entries are left out)
            failed[m] = f"{type(e).__name__}: {e}"
    mach = llvm_cpu()
    # The module is compiled for this CPU with its features (numba.pycc compiles for a generic
    # CPU, or a named one with that model's default features, which a virtual machine may
    # lack): the JIT's own target.
    codegen.AOTCPUCodegen._customize_tm_features = lambda self: mach["features"]
    entries, files = {}, {}
    for old in dest.glob(f"{NAME}*"):
        if old.suffix != ".py":
            old.unlink()
    for nrt, name in MODULES.items():
        todo = [(i, e) for i, e in enumerate(_EXPORTS) if e[4] == nrt]
        if not todo:
            continue
        cc = CC(name)
        cc.use_nrt = nrt
        cc.output_dir = str(dest)
        cc.target_cpu = mach["cpu"] or ll.get_host_cpu_name()
        for i, (k, kernel, sig, bind, _nrt) in todo:
            args, ret = sigutils.normalize_signature(sig)
            sym = f"e{i}"
            cc.export(sym, sig)(_bound_function(kernel, len(args), bind, ret != types.none))
            e = {"module": name, "symbol": sym, "signature": sig, "checks": [_arg_check(t) for t in args]}
            entries.setdefault(k, []).append(e)
        cc.compile()
        files[name] = cc.output_file
    rec = {
        "stamp": source_stamp(PACKAGE_DIR),
        "versions": versions(),
        "cpu_id": cpu_id(),
        "llvm_cpu": mach,
        "modules": files,
        "entries": entries,
        "not_imported": failed,
    }
    tmp = dest / f"{NAME}.json.tmp"
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True))
    os.replace(tmp, dest / f"{NAME}.json")
    return rec


def build(dest: Path = PACKAGE_DIR, modules=(), timeout: float | None = None) -> subprocess.CompletedProcess:
    """Build the entries `modules` declare into `dest` (the package's folder: where `import
    g10fast._aot` finds them) in a fresh process with an empty Numba cache; its output is
    returned, not raised."""
    with tempfile.TemporaryDirectory(prefix="g10fast-aot-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        env.pop("G10FAST_NO_JIT", None)
        env.pop("NUMBA_DISABLE_JIT", None)
        return subprocess.run(
            [sys.executable, "-m", "g10fast.aot", "build", str(dest), *modules],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


# ---- at run time ----

_STATE: dict = {}  # "entries": {key: (function, argument checks)}, "why": why none


_INT64 = (-(2**63), 2**63)


def _arg_check(t) -> list:
    """How a call checks an argument against Numba type `t`, as the record keeps it: ["array",
    dtype, ndim, layout, writable] for an array, ["int64"], ["float64"] or ["bool"] for those
    scalars, ["typeof", the type's name] otherwise (numba.typeof at the call)."""
    from numba.core import types

    if isinstance(t, types.Array):
        return ["array", np.dtype(str(t.dtype)).str, t.ndim, t.layout, t.mutable]
    if t in (types.int64, types.float64, types.boolean):
        return [{types.int64: "int64", types.float64: "float64", types.boolean: "bool"}[t]]
    return ["typeof", str(t)]


def _matches(check, a) -> bool:
    kind = check[0]
    if kind == "array":
        if type(a) is not np.ndarray:
            return False
        _, dtype, ndim, layout, mutable = check
        if a.dtype.str != dtype or a.ndim != ndim or not a.flags.aligned:
            return False
        if mutable and not a.flags.writeable:
            return False
        if layout == "C":
            return a.flags.c_contiguous
        if layout == "F":
            return a.flags.f_contiguous
        return True
    if kind == "int64":
        return (type(a) is int and _INT64[0] <= a < _INT64[1]) or type(a) is np.int64
    if kind == "float64":
        return type(a) is float or type(a) is np.float64
    if kind == "bool":
        return type(a) is bool or type(a) is np.bool_
    import numba

    return str(numba.typeof(a)) == check[1]


def _load() -> dict:
    if "entries" in _STATE:
        return _STATE["entries"]
    entries, why = {}, ""
    if NO_JIT:
        why = "G10FAST_NO_JIT is set"
    elif NO_AOT:
        why = "G10FAST_NO_AOT is set"
    elif not RECORD.is_file():
        why = f"no {RECORD.name} (not built: `g10fast warm --aot` builds it)"
    else:
        try:
            rec = json.loads(RECORD.read_text())
            same_sources = rec["stamp"] == source_stamp(PACKAGE_DIR)
            why = _same_machine(rec) if same_sources else "built from other sources"
            if not why:
                mods = {m: importlib.import_module(f"g10fast.{m}") for m in rec["modules"]}
                for k, sigs in rec["entries"].items():
                    for e in sigs:
                        checks = tuple(tuple(c) for c in e["checks"])
                        entries.setdefault(k, []).append((getattr(mods[e["module"]], e["symbol"]), checks))
        except Exception as e:  # a damaged record or module: the JIT, and why
            entries, why = {}, f"{RECORD.name} unusable: {type(e).__name__}: {e}"
    _STATE["entries"], _STATE["why"] = entries, why
    return entries


def status() -> dict:
    """Whether the compiled module is used in this process: {"used": bool, "entries": {key:
    number of signatures}, "why": why not, or ""}."""
    entries = _load()
    return {"used": bool(entries), "entries": {k: len(v) for k, v in entries.items()}, "why": _STATE["why"]}


def entry(kernel, *bind):
    """`kernel(*args, *bind)` as a function of `args`: the compiled entry where one is declared
    and usable and the arguments have its types, else the kernel."""
    found = _load().get(key(kernel, bind))
    if found is None:
        if not bind:
            return kernel
        return lambda *args: kernel(*args, *bind)

    def call(*args):
        for fn, checks in found:
            if len(args) == len(checks) and all(_matches(c, a) for c, a in zip(checks, args)):
                return fn(*args)
        return kernel(*args, *bind)

    return call


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "build":
        sys.stderr.write("usage: python -m g10fast.aot build DIR [MODULE ...]\n")
        return 2
    rec = _build_here(Path(argv[1]), argv[2:])
    n = sum(len(v) for v in rec["entries"].values())
    where = ", ".join(str(Path(argv[1]) / f) for f in rec["modules"].values())
    sys.stdout.write(f"g10fast.aot: {n} entries in {where}\n")
    for m, why in rec["not_imported"].items():
        sys.stdout.write(f"g10fast.aot: {m} not imported ({why}): its entries are not in the module\n")
    return 0


if __name__ == "__main__":
    # (the kernel modules declare their entries to g10fast.aot, not to this __main__)
    from g10fast import aot as _aot

    sys.exit(_aot.main())
