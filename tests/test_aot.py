"""Kernels compiled ahead of time (g10fast.aot): when the module is used, how a call chooses
between it and the JIT, the build itself on a small kernel, and the installed module's
entries against the JIT's kernels on the default comparison (every result field equal)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from g10fast import aot
from g10fast.jit import NO_JIT


@pytest.fixture
def fresh_state(monkeypatch):
    """aot's per-process state emptied for the test and put back after it."""
    monkeypatch.setattr(aot, "_STATE", {})
    return aot._STATE


def _kernel(a, b, c=None):
    return ("kernel", c)


def test_entry_without_a_module_is_the_kernel(fresh_state):
    fresh_state.update(entries={}, why="test")
    assert aot.entry(_kernel) is _kernel
    assert aot.entry(_kernel, 7)(1, 2) == ("kernel", 7)


def test_entry_calls_the_compiled_code_only_for_its_argument_types(fresh_state):
    from numba.core import sigutils

    args, _ = sigutils.normalize_signature("i8(i8[:, ::1], f8)")
    calls = []
    compiled = lambda a, b: calls.append((a, b)) or "compiled"  # noqa: E731
    checks = tuple(tuple(aot._arg_check(t)) for t in args)
    fresh_state.update(entries={aot.key(_kernel, (None,)): [(compiled, checks)]}, why="")
    call = aot.entry(_kernel, None)
    a = np.zeros((3, 4), np.int64)
    assert call(a, 1.5) == "compiled"
    assert call(a, np.float64(2.0)) == "compiled"
    assert len(calls) == 2
    ro = a.copy()
    ro.flags.writeable = False
    for bad in (
        (a.astype(np.int32), 1.5),  # dtype
        (a[:, ::2], 1.5),  # layout
        (np.zeros(12, np.int64), 1.5),  # dimensions
        (ro, 1.5),  # read-only where the kernel writes
        (a, 1),  # an int where a float64 is compiled
        (a, np.float32(1.5)),
        (a, True),
        (a.tolist(), 1.5),  # not an array
    ):
        assert call(*bad) == ("kernel", None)
    assert len(calls) == 2


def _record(tmp_path, **changes):
    rec = {
        "stamp": aot.source_stamp(),
        "versions": aot.versions(),
        "cpu_id": aot.cpu_id(),
        "llvm_cpu": aot.llvm_cpu(),
        "modules": {},
        "entries": {},
    }
    rec.update(changes)
    p = tmp_path / "_aot.json"
    p.write_text(json.dumps(rec))
    return p


@pytest.mark.skipif(NO_JIT, reason="the module is never used under G10FAST_NO_JIT")
def test_status_says_why_the_module_is_not_used(tmp_path, monkeypatch, fresh_state):
    monkeypatch.setattr(aot, "NO_AOT", False)
    monkeypatch.setattr(aot, "RECORD", tmp_path / "_aot.json")
    assert "not built" in aot.status()["why"]
    fresh_state.clear()
    monkeypatch.setattr(aot, "RECORD", _record(tmp_path, stamp="0" * 64))
    st = aot.status()
    assert not st["used"] and st["why"] == "built from other sources"
    fresh_state.clear()
    other = dict(aot.llvm_cpu(), features="+other")
    monkeypatch.setattr(aot, "RECORD", _record(tmp_path, cpu_id="", llvm_cpu=other))
    assert aot.status()["why"].startswith("built for another CPU")  # (told by LLVM)
    fresh_state.clear()
    if aot.cpu_id():
        monkeypatch.setattr(aot, "RECORD", _record(tmp_path, cpu_id="0" * 64))
        assert aot.status()["why"].startswith("built for another CPU")  # (told by /proc/cpuinfo)
        fresh_state.clear()
    monkeypatch.setattr(aot, "RECORD", _record(tmp_path, versions=dict(aot.versions(), numba="0.1")))
    assert aot.status()["why"].startswith("built with other versions")
    fresh_state.clear()
    (tmp_path / "_aot.json").write_text("{not json")
    assert "unusable" in aot.status()["why"]
    fresh_state.clear()
    monkeypatch.setattr(aot, "NO_AOT", True)
    assert aot.status() == {"used": False, "entries": {}, "why": "G10FAST_NO_AOT is set"}


BUILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np
    from g10fast import aot
    from g10fast.jit import kernel, kernel_nonrt

    @kernel_nonrt
    def add_into(x, k, f):
        for i in range(x.shape[0]):
            x[i] += f(k)
        return x.shape[0]

    @kernel_nonrt
    def twice(k):
        return 2 * k

    @kernel
    def ramp(n):
        return np.arange(n) * 3

    aot.export(add_into, "i8(i8[::1], i8)", bind=(twice,))
    aot.export(ramp, "i8[::1](i8)")
    dest = Path(sys.argv[1])
    dest.mkdir()
    rec = aot._build_here(dest)
    sys.path.insert(0, str(dest))
    import importlib
    m = importlib.import_module("_aot")
    rt = importlib.import_module("_aot_rt")
    e = rec["entries"]
    x = np.arange(4, dtype=np.int64)
    n = getattr(m, e[aot.key(add_into, (twice,))][0]["symbol"])(x, 5)
    r = getattr(rt, e[aot.key(ramp)][0]["symbol"])(4)
    print(json.dumps({"n": n, "x": x.tolist(), "ramp": r.tolist(), "rec": rec}))
    """
)


@pytest.mark.skipif(NO_JIT, reason="the build compiles with Numba")
def test_build_compiles_declared_entries(tmp_path):
    pytest.importorskip("numba.pycc")
    env = dict(__import__("os").environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    script = tmp_path / "build_small.py"  # (a file: cached kernels need one)
    script.write_text(BUILD)
    cmd = [sys.executable, str(script), str(tmp_path / "out")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["n"] == 4 and out["x"] == [10, 11, 12, 13]  # x += twice(5), bound at build
    assert out["ramp"] == [0, 3, 6, 9]  # an array made by the reference-counted module
    rec = out["rec"]
    assert rec["stamp"] == aot.source_stamp() and rec["llvm_cpu"] == aot.llvm_cpu()
    assert rec["versions"] == json.loads(json.dumps(aot.versions())) and rec["cpu_id"] == aot.cpu_id()
    assert set(rec["modules"]) == {"_aot", "_aot_rt"}
    assert (tmp_path / "out" / "_aot.json").is_file()


_MEASURED = ("peak_rss_bytes", "timings")  # (of the process, not of the simulation)


def _strip_times(x):
    """A result as plain values, without the measurements of the process that made it."""
    if isinstance(x, dict):
        return {k: _strip_times(v) for k, v in x.items() if not k.endswith("_seconds") and k not in _MEASURED}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [type(x).__name__, _strip_times(vars(x))]
    if isinstance(x, (list, tuple)):
        return [_strip_times(v) for v in x]
    if isinstance(x, np.ndarray):
        return [x.dtype.str, x.shape, x.tolist()]
    return x


@pytest.mark.skipif(not aot.status()["used"], reason="no compiled module here: " + aot.status()["why"])
def test_compiled_entries_equal_the_jit(monkeypatch):
    """The default comparison (seven policies: the page engine under both built-in rules, the
    tensor engine, the G10 planner, every run's bound) with the compiled entries and with the
    JIT's kernels: every result field but the timings equal, and the entries were called."""
    from g10fast.api import DEFAULT_RUN, run_spec

    used = {}
    entries = {
        k: [(lambda *a, _f=f, _k=k: used.__setitem__(_k, used.get(_k, 0) + 1) or _f(*a), c) for f, c in v]
        for k, v in aot._load().items()
    }
    monkeypatch.setattr(aot, "_STATE", {"entries": entries, "why": ""})
    compiled = run_spec(DEFAULT_RUN)
    assert {
        "g10fast.engine.page.loop.run_engine[g10fast.engine.page.rules.arrival, None]",
        "g10fast.engine.tensor.kernels.simulate[]",
        "g10fast.planner.g10_kernels.main_loop[]",
        "g10fast.analysis.bounds._window_kernel[]",
    } <= set(used)
    deepum = "g10fast.engine.page.loop.run_engine[g10fast.engine.page.rules.deepum"
    assert any(k.startswith(deepum) for k in used)
    monkeypatch.setattr(aot, "_STATE", {"entries": {}, "why": "test"})
    jit = run_spec(DEFAULT_RUN)
    assert _strip_times(compiled) == _strip_times(jit)


@pytest.mark.skipif(not aot.status()["used"], reason="no compiled module here: " + aot.status()["why"])
def test_compiled_traced_page_engine_equals_the_jit(monkeypatch, tmp_path):
    """A traced run of the page engine under both built-in rules (Base UVM, DeepUM+), with the
    compiled entries (the traced engine, the row join, the writer's split) and with the JIT's
    kernels: every result field but the timings equal, the traces' rows equal row for row,
    and the traced entries were called."""
    from g10fast.api import simulate
    from g10fast.trace import open_trace

    used = {}
    entries = {
        k: [(lambda *a, _f=f, _k=k: used.__setitem__(_k, used.get(_k, 0) + 1) or _f(*a), c) for f, c in v]
        for k, v in aot._load().items()
    }
    for policy in ("lru", "deepUM"):
        got = {}
        for how, state in (("aot", {"entries": entries, "why": ""}), ("jit", {"entries": {}, "why": "test"})):
            monkeypatch.setattr(aot, "_STATE", state)
            path = tmp_path / f"{policy}-{how}.h5"
            r = simulate("bert-base", batch=16, system="g10-artifact", policy=policy, trace_path=path)
            assert r["status"] == "ok"
            with open_trace(path) as tr:
                rows = tr.read()
            got[how] = (_strip_times(r), rows)
        assert got["aot"][0] == got["jit"][0]
        assert len(got["aot"][1]["time"]) > 1000
        assert got["aot"][1].keys() == got["jit"][1].keys()
        for col in got["aot"][1]:
            np.testing.assert_array_equal(got["aot"][1][col], got["jit"][1][col], err_msg=f"{policy}: {col}")
    traced = [k for k in used if k.startswith("g10fast.engine.page.loop.run_engine[") and "_emit_ticked" in k]
    assert len(traced) == 2, used
    assert {"g10fast.trace_kernels.split_checked[]", "g10fast.trace_kernels.merge_ticks[]"} <= set(used)


@pytest.mark.skipif(not aot.status()["used"], reason="no compiled module here: " + aot.status()["why"])
def test_compiled_driver_engine_equals_the_jit(monkeypatch):
    """The driver engine's untraced entry (`tr` None: no event rows, no object-mode sink) under
    the real driver's defaults and under PUMP's hints and pre-evictions: every result field
    but the timings equal to the JIT's kernel's, and the entry was called."""
    from g10fast.api import simulate

    used = {}
    key = "g10fast.engine.driver.kernels.simulate[None]"
    entries = {
        k: [(lambda *a, _f=f, _k=k: used.__setitem__(_k, used.get(_k, 0) + 1) or _f(*a), c) for f, c in v]
        for k, v in aot._load().items()
    }
    for policy in ("uvm", "pump"):
        monkeypatch.setattr(aot, "_STATE", {"entries": entries, "why": ""})
        used.clear()
        compiled = simulate("bert-base", batch=16, system="g10-artifact", policy=policy)
        assert used.get(key, 0) == 1, used
        monkeypatch.setattr(aot, "_STATE", {"entries": {}, "why": "test"})
        jit = simulate("bert-base", batch=16, system="g10-artifact", policy=policy)
        assert compiled["status"] == "ok"
        assert _strip_times(compiled) == _strip_times(jit)


@pytest.mark.skipif(not aot.status()["used"], reason="no compiled module here: " + aot.status()["why"])
def test_a_run_the_module_serves_never_imports_numba(tmp_path):
    # the built-in BERT-base under Base UVM and G10 (the page engine, the planner, the bound),
    # under the driver engine untraced (the real driver's defaults, G10's plan as hints), and
    # traced under Base UVM and DeepUM+ (the traced page engine, the row join, the writer):
    # every kernel it calls from Python is compiled ahead of time, so Numba is never imported
    code = (
        "import sys\n"
        "from g10fast.api import simulate\n"
        "for p in ('lru', 'prefetch_lru', 'uvm', 'g10_driver'):\n"
        "    r = simulate('bert-base', batch=16, system='g10-artifact', policy=p)\n"
        "    assert r['status'] == 'ok', r\n"
        "for p in ('lru', 'deepUM'):\n"  # traced runs of the page engine too
        "    r = simulate('bert-base', batch=16, system='g10-artifact', policy=p,\n"
        "                 trace_path=sys.argv[1] + p)\n"
        "    assert r['status'] == 'ok', r\n"
        "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "t-")], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "[]"
