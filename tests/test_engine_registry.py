"""One home per engine (issue 38): the engine registry's records, the typed mode every
policy hands its engine, and no engine named outside g10fast/engine/ and the registries."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from g10fast import policies
from g10fast.engine import registry

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "g10fast"


def engine_name_switches(source: str, names) -> list[int]:
    """Lines of `source` that switch on an engine's name: a comparison (==, !=, in, not in)
    with a string constant (or a tuple, list or set of them) that is an engine's name, or of
    anything called `engine` (`rec.engine == x`, `res.get("engine") != x`,
    `res["engine"] in x`), or a look-up by a record's `engine` in a literal dict."""
    names = set(names)

    def named(node) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in node.elts)
        return False

    def is_engine(node) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr == "engine"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            a = node.args[0]
            return isinstance(a, ast.Constant) and a.value == "engine"
        if isinstance(node, ast.Subscript):
            s = node.slice
            return isinstance(s, ast.Constant) and s.value == "engine"
        return False

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                continue
            sides = [node.left, *node.comparators]
            if any(named(s) for s in sides) or any(is_engine(s) for s in sides):
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict) and is_engine(node.slice):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_scan_finds_each_kind_of_switch():
    names = [e.name for e in policies.engines()]
    bad = (
        'if rec.engine == "page":\n    pass\n'
        'if res.get("engine") != "ranks":\n    pass\n'
        'x = s.record.engine in ("tensor", "swap")\n'
        'y = "driver" == kind\n'
        'z = {"page": 1}[rec.engine]\n'
        'w = res["engine"] in ok\n'
    )
    assert engine_name_switches(bad, names) == [1, 3, 5, 6, 7, 8]
    good = (
        "if er.allocator:\n    pass\n"
        'x = f.get("tensor") is not None\n'  # a result key, not a comparison
        'y = kind == "pages"\n'
        'names = ("page", "tensor")\n'
    )  # named, not switched on
    assert engine_name_switches(good, names) == []


def test_no_engine_named_outside_the_engines_and_the_registries():
    """No module outside g10fast/engine/ and g10fast/policies/ switches on an engine's name:
    what differs between engines is a field of the engine's record (EngineRecord)."""
    names = [e.name for e in policies.engines()]
    found = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG)
        if rel.parts[0] in ("engine", "policies"):
            continue
        for line in engine_name_switches(f.read_text(), names):
            found.append(f"g10fast/{rel}:{line}")
    assert found == []


#: engine packages (g10fast/engine/<name>/) that a module outside g10fast/engine/ and
#: g10fast/policies/ may still import, with the reason
ENGINE_IMPORTS_ALLOWED = {
    # the validation rows of the driver and ranks engines' own mechanisms (the driver's fault
    # batches and prefetch bits against a measured GPU, the CPU optimizer's time against
    # DeepSpeed's): they measure engine internals that no record or result exposes, and are
    # part of that engine's system as much as its tests are
    "validate/claims_driver.py",
    "validate/claims_zero.py",
}


def engine_package_imports(source: str, module: str, is_package: bool, packages) -> list[int]:
    """Lines of `source` (the module `module`, "g10fast.x.y") that import an engine's package
    (g10fast.engine.<one of packages>, or a module in it), absolutely or relatively, or name
    one as a module path in a string ("g10fast.engine.page.loop", "...:function": what
    importlib would import)."""
    import re

    pkgs = set(packages)
    path_re = re.compile(r"g10fast\.engine\.(\w+)(\.\w+)*(:\w+)?")
    here = module.split(".") if is_package else module.split(".")[:-1]

    def hits(mod: str) -> bool:
        parts = mod.split(".")
        return parts[:2] == ["g10fast", "engine"] and len(parts) > 2 and parts[2] in pkgs

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(here[: len(here) - (node.level - 1)] + ([mod] if mod else []))
            if hits(mod) or any(hits(f"{mod}.{a.name}") for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Import):
            if any(hits(a.name) for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = path_re.fullmatch(node.value.strip())
            if m and m.group(1) in pkgs:
                lines.append(node.lineno)
    return sorted(set(lines))


def _engine_packages() -> list[str]:
    return sorted(d.name for d in (PKG / "engine").iterdir() if (d / "__init__.py").exists())


def test_the_import_scan_finds_each_kind_of_import():
    pk = ["page", "tensor", "ranks"]
    bad = (
        "from g10fast.engine.page import system_params\n"
        "import g10fast.engine.tensor.kernels as tk\n"
        "from g10fast.engine import ranks\n"
        "from ..engine.page.result import plan_summary\n"
        "def f():\n    from ..engine.tensor import kernels\n"
        "MODS = ('g10fast.engine.page.loop', 'g10fast.engine.ranks:timeline_json')\n"
    )
    assert engine_package_imports(bad, "g10fast.sweep.reuse", False, pk) == [1, 2, 3, 4, 6, 7]
    good = (
        "from g10fast.engine.registry import engine\n"
        "from g10fast.engine.stats import kernel_breakdown\n"
        "from g10fast.engine import registry\n"
        "from ..engine.bound_models import page_engine_model\n"
        "'the page engine (g10fast.engine.page) says so'\n"
        "x = 'g10fast.engine.driverless'\n"
    )
    assert engine_package_imports(good, "g10fast.sweep.reuse", False, pk) == []
    # a relative import from a package's __init__ counts from the package itself
    assert engine_package_imports("from .page import x\n", "g10fast.engine", True, pk) == [1]


def _outside_engine_imports(read) -> list[str]:
    """'g10fast/<file>:<line>' of every engine-package import outside g10fast/engine/ and
    g10fast/policies/ (the allowed ones left out), `read(path relative to the repository)`
    giving a file's text."""
    pk = _engine_packages()
    found = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG)
        if rel.parts[0] in ("engine", "policies") or rel.as_posix() in ENGINE_IMPORTS_ALLOWED:
            continue
        text = read(f.relative_to(ROOT).as_posix())
        if text is None:
            continue
        mod = ".".join(("g10fast",) + rel.with_suffix("").parts).removesuffix(".__init__")
        for line in engine_package_imports(text, mod, f.name == "__init__.py", pk):
            found.append(f"g10fast/{rel}:{line}")
    return found


def test_no_engine_package_imported_outside_the_engines_and_the_registries():
    """Nothing outside g10fast/engine/ and g10fast/policies/ imports an engine's package: the
    CLI, the pipeline, the sweeps and the figures ask the engine's record (its runner,
    timeline writer, host-reuse module, kernel modules); the kernel table and the event kinds
    are the result's and the trace's formats (g10fast.results, g10fast.trace)."""
    assert {"page", "tensor", "driver", "swap", "ranks"} <= set(_engine_packages())
    assert _outside_engine_imports(lambda p: (ROOT / p).read_text()) == []


def test_the_import_scan_fails_on_the_code_before_it():
    """The same scan over the tree of commit cddb586 (before the records named the timeline
    writer, the host-reuse module and the kernel modules) finds the imports it removed."""
    import subprocess

    def at(path):
        p = subprocess.run(["git", "show", f"cddb586:{path}"], cwd=ROOT, capture_output=True, text=True)
        return p.stdout if p.returncode == 0 else None

    if at("g10fast/cli/single.py") is None:
        pytest.skip("no git history here")
    found = {x.split(":")[0] for x in _outside_engine_imports(at)}
    assert found == {
        "g10fast/cli/single.py",
        "g10fast/sweep/reuse.py",
        "g10fast/sweep/runner.py",
        "g10fast/figures/memory.py",
        "g10fast/perfetto.py",
        "g10fast/alloc/trace.py",
        "g10fast/alloc/kernels.py",
    }


def test_the_formats_the_engines_write_are_the_results_and_the_traces():
    """The page engine writes its kernel table with g10fast.results' columns and its events
    with g10fast.trace's kinds (the readers outside the engine take them from there)."""
    import numpy as np

    from g10fast import results, trace
    from g10fast.engine.page import kernels as pk

    names = (
        "KS_ITER",
        "KS_KERNEL",
        "KS_START",
        "KS_END",
        "KS_INTR",
        "KS_CPU",
        "KS_SSD",
        "KS_NP",
        "KS_HOST",
        "KS_GPU",
    )
    assert [getattr(results, n) for n in names] == list(range(10)) == [getattr(pk, n) for n in names]
    assert len(results.KERNEL_COLUMNS) == pk.KS_COLS == 10
    assert {k.name: int(k) for k in trace.EventKind} == {
        n: getattr(pk, f"EV_{n}")
        for n in ("KERNEL", "FAULT", "FETCH", "ALLOC", "EVICT", "HINT", "DEALLOC", "TRANSFER")
    }
    assert len(trace.COLUMNS) == pk.EV_COLS
    assert [pk.EV_TICKS, pk.EV_PERIOD, pk.EV_STRIDE] == [trace.COL_TICKS, trace.COL_PERIOD, trace.COL_STRIDE]
    kt = np.array(
        [[0, 1, 0, 5, 0, 0, 0, 0, 0, 7], [1, 0, 9, 12, 0, 0, 0, 0, 0, 3], [1, 2, 12, 20, 0, 0, 0, 0, 0, 4]],
        np.int64,
    )
    assert results.gpu_bytes_at_kernel_end(kt, 1, 4).tolist() == [3 * 4096, 0, 4 * 4096, 0]


def test_the_sweep_asks_the_records_for_their_kernel_modules():
    from g10fast.sweep.runner import kernel_modules

    assert kernel_modules(["lru", "prefetch_lru", "lru"]) == (
        "g10fast.planner.g10_kernels",
        "g10fast.engine.page.loop",
    )
    assert kernel_modules(["FlashNeuron", "singa_swap", "zero2"]) == (
        "g10fast.planner.g10_kernels",
        "g10fast.engine.tensor.kernels",
        "g10fast.alloc.kernels",
    )


def test_engines_import_no_planner_nor_policy():
    """The planning is the policy's (ctx -> plan); an engine takes plain hints and its mode."""
    found = []
    for f in sorted((PKG / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            mods = []
            if isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module or ""]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            found += [
                f"{f.relative_to(PKG)} imports {m}"
                for m in mods
                if m.split(".")[:2] in (["g10fast", "planner"], ["g10fast", "policies"])
            ]
    assert found == []


def test_every_engine_record_resolves():
    assert [e.name for e in registry.engines()][:5] == list(registry.BUILTIN)
    assert policies.engine is registry.engine and policies.EngineRecord is registry.EngineRecord
    for e in registry.engines():
        assert callable(e.load()), e.name
        assert dataclasses.is_dataclass(e.mode_class()), e.name
        assert e.lp_bound == bool(e.lp_model), e.name
    page, tensor, driver, swap, ranks = (registry.engine(n) for n in registry.BUILTIN)
    assert [e.name for e in registry.engines() if e.kernel_order] == ["page"]
    assert [e.name for e in registry.engines() if e.allocator] == ["tensor", "swap"]
    assert [e.name for e in registry.engines() if e.lp_bound] == ["page", "tensor"]
    assert [e.name for e in registry.engines() if e.host_reuse] == ["page"]
    assert [e.name for e in registry.engines() if e.timeline] == ["ranks"]
    assert ranks.timeline == "g10fast.engine.ranks:timeline_json"
    with pytest.raises(Exception, match=r"no timeline \(a ranks-engine run has one\)"):
        ranks.write_timeline({}, "never-written.json")  # the ranks engine's writer, reached
    with pytest.raises(Exception, match="the page engine writes no timeline"):
        page.write_timeline({"timeline": {}}, "never-written.json")
    assert page.host_reuse_module().__name__ == "g10fast.engine.page.reuse"
    assert tensor.host_reuse_module() is None
    import importlib

    for e in registry.engines():
        for m in e.kernels:  # each names a module with cached Numba kernels
            mod = importlib.import_module(m)
            assert any(
                type(getattr(v, "_cache", None)).__name__ == "FunctionCache" for v in vars(mod).values()
            ), (e.name, m)
    assert [e.name for e in registry.engines() if not e.kernels] == ["ranks"]
    assert page.summary_lines({}) == []
    lines = ranks.summary_lines({"ranks": 8, "system_preset": "dgx-a100-40"})
    assert lines and "8 data-parallel ranks of dgx-a100-40" in lines[0]
    with pytest.raises(Exception, match="unknown engine 'nosuch'"):
        registry.engine("nosuch")
    with pytest.raises(Exception, match="LP models the page and tensor engines"):
        driver.lp_model_of(None, None, None)


@pytest.mark.parametrize("module", ["g10fast.engine.page.record", "g10fast.engine.swap.run"])
def test_an_engine_module_imports_first(module):
    """A record or runner imported before anything else (a fresh interpreter): the registry
    loads the built-in records at its first look-up, not while a record imports it."""
    import subprocess
    import sys

    code = (
        f"import {module}\nfrom g10fast.engine.registry import engines\n"
        "print(','.join(e.name for e in engines()))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [",".join(registry.BUILTIN)]


def test_every_policy_hands_its_engine_the_engines_mode():
    """A policy's record gives its engine an instance of the engine's mode class (no untyped
    extras): for every registered policy, at its default options."""
    from g10fast.spec import EngineOptions

    for rec in policies.records():
        cls = policies.engine(rec.engine).mode_class()
        assert rec.engine_mode is not None, rec.name
        mode = rec.engine_mode(rec.options(), EngineOptions())
        assert isinstance(mode, cls), (rec.name, type(mode), cls)
        assert not hasattr(rec, "extra")
    tbnp = policies.get("tbnp")
    o = tbnp.make_options({"pre_evict": True})
    assert dict(tbnp.engine_mode(o, EngineOptions()).overrides) == {
        "prefetcher": "tbn",
        "big_page_kib": 64,
        "evict": "tbn64k",
    }
    assert policies.get("FlashNeuron").engine_mode(None, None).mechanism == "offload_set"
    assert policies.get("G10-Host").engine_mode(None, None).mechanism == "gds_ssd_host"
    assert (
        policies.get("appobmem").engine_mode(policies.get("appobmem").options(), None).planner == "appobmem"
    )


def _doc_examples():
    """The policy files of docs/adding-a-policy.md (its Python blocks that define a RECORD),
    each as a module's namespace."""
    import re
    import sys
    import types

    text = (ROOT / "docs" / "adding-a-policy.md").read_text()
    out = []
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
        if "\nRECORD = PolicyRecord(" not in block:
            continue
        mod = types.ModuleType(f"doc_example_{i}")
        sys.modules[mod.__name__] = mod  # dataclasses look their module up
        try:
            exec(compile(block, f"docs/adding-a-policy.md#block{i}", "exec"), mod.__dict__)
        finally:
            del sys.modules[mod.__name__]
        out.append(mod.__dict__)
    return out


def test_adding_a_policy_examples_run_as_written():
    """The page-engine and driver-engine policies of docs/adding-a-policy.md, each one file
    and one registry row, run through `run` with the plan and the mode they say."""
    import numpy as np

    import g10fast.api as api
    from g10fast.run import workload_of
    from g10fast.spec import builtin_spec

    page, driver = _doc_examples()
    recs = [page["RECORD"], driver["RECORD"]]
    assert [r.engine for r in recs] == ["page", "driver"]
    over = {"gpu.memory_gb": 0.1}
    for r in recs:
        policies.register(r)
    try:
        w = workload_of(builtin_spec("vit", 8, "g10-artifact", "lru", overrides=over))
        inputs = int(np.diff(w.in_ptr).sum())
        res = api.simulate("vit", 8, "g10-artifact", "ahead", overrides=over, options={"ahead": 3})
        assert res["status"] == "ok" and res["engine"] == "page"
        assert res["plan"]["hints"] == inputs and res["plan"]["ahead"] == 3
        lru = api.simulate("vit", 8, "g10-artifact", "lru", overrides=over)
        assert (
            res["iterations"][res["reported"]]["exe_time_cycles"]
            != lru["iterations"][lru["reported"]]["exe_time_cycles"]
        )
        d = api.simulate("vit", 8, "g10-artifact", "ahead_driver", overrides=over)
        assert d["status"] == "ok" and d["engine"] == "driver"
        n_iter = len(d["iterations"])
        assert d["plan"]["hints"] == n_iter * inputs and d["plan"]["ahead"] == 2
        assert d["driver_options"]["prefetcher"] == "none"
    finally:
        for r in recs:
            policies.unregister(r.name)


def import_graph(pkg: Path) -> dict:
    """module -> the g10fast modules it imports (imports inside functions included; `from
    a.b import c` is an arrow to a.b.c where that is a module, else to a.b)."""
    mods = {}
    for f in pkg.rglob("*.py"):
        name = ".".join(f.relative_to(pkg.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = f
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        here = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t not in (m, "g10fast"):
                    edges[m].add(t)
    return edges


def cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_import_graph_has_no_cycle():
    """No loop among g10fast's modules, imports inside functions included (an engine runner is
    reached through its record's "module:function", from below the pipeline)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert cycles(import_graph(PKG)) == []


@pytest.mark.parametrize("policy", ["FlashNeuron", "uvm", "zero2"])
def test_a_kernel_order_is_refused_before_any_work_where_the_record_takes_none(policy, monkeypatch):
    """The pipeline, not each runner, refuses a required kernel order for an engine whose record
    has no `kernel_order` (the driver's runner would read the page engine's per-kernel lists as
    its own CSR pair): the message names the engines that take one, and no workload is built."""
    from g10fast import run as run_mod
    from g10fast.api import builtin_spec
    from g10fast.errors import InputError

    spec = builtin_spec("bert-base", 8, "dgx-a100-40", policy)
    monkeypatch.setattr(run_mod, "workload_of", lambda s: pytest.fail("a workload was built"))
    with pytest.raises(InputError) as e:
        run_mod.run(spec, required_order=[([0], [1])])
    assert e.value.param == "--kernel-order"
    assert "only the policies of the page engine take a kernel order" in e.value.message
    assert policies.engine(spec.record.engine).name in e.value.message
