"""g10fast.jit: calls between kernels are typed without literal values (`_plain_calls`), so a
kernel called with different constants at its call sites is compiled once per argument types;
a kernel whose typing needs a literal still compiles (Numba's own typing). Uncached
dispatchers (plain njit), so that each test compiles and counts afresh."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from numba import njit, types

from g10fast.jit import NO_JIT, _plain_calls

pytestmark = pytest.mark.skipif(NO_JIT, reason="G10FAST_NO_JIT: nothing is compiled")


def _push(q, a, n):
    q[a] += n
    return q[a]


def _callers(callee):
    @njit
    def caller(q, x, flag):
        s = callee(q, 0, 1)  # Literal[int](0), Literal[int](1)
        s += callee(q, 1, 1)  # Literal[int](1), Literal[int](1)
        s += callee(q, 2, x)  # Literal[int](2), int64
        s += callee(q, x, 3)  # int64, Literal[int](3)
        if flag:
            s += callee(q, x, x)
        return s

    return caller


def test_one_compile_per_argument_types():
    import numpy as np

    plain = _plain_calls(njit(_push))
    q = np.zeros(4, np.int64)
    assert _callers(plain)(q, 3, True) == 1 + 1 + 3 + 3 + 6
    assert list(q) == [1, 1, 3, 6]
    assert len(plain.signatures) == 1
    (sig,) = plain.signatures
    assert sig[1:] == (types.int64, types.int64)


def test_numba_default_compiles_per_constant():
    # the behaviour _plain_calls avoids: without it every literal combination is a compile
    import numpy as np

    literal = njit(_push)
    q = np.zeros(4, np.int64)
    _callers(literal)(q, 3, True)
    assert len(literal.signatures) == 5


def test_same_results_as_numba_default():
    import numpy as np

    q1, q2 = np.zeros(4, np.int64), np.zeros(4, np.int64)
    for x, flag in ((3, True), (0, False), (2, True)):
        assert _callers(_plain_calls(njit(_push)))(q1, x, flag) == _callers(njit(_push))(q2, x, flag)
    assert list(q1) == list(q2)


def test_literal_needed_falls_back():
    # indexing a heterogeneous tuple needs a literal index: typed with plain int64 it fails,
    # so the call is typed the way Numba does by default
    pick = _plain_calls(njit(lambda t, i: t[i]))

    @njit
    def caller():
        t = (1, 2.5)
        return pick(t, 0) + pick(t, 1)

    assert caller() == 3.5
    assert all(isinstance(s[1], types.IntegerLiteral) for s in pick.signatures)


def _link_only(fn):
    # a link-only kernel as jit(internal=True) builds it, uncached (each test compiles anew)
    from g10fast.jit import _link_only_dispatcher, _link_only_compiler

    pipeline = _link_only_compiler()
    assert pipeline is not None, "this Numba lacks what link-only kernels need"
    return _link_only_dispatcher(_plain_calls(njit(fn, no_cpython_wrapper=True, pipeline_class=pipeline)), {})


def test_link_only_kernel_runs_inside_its_caller():
    # another kernel links it in and runs it; it has no machine code of its own
    import numpy as np

    inner = _link_only(_push)
    outer = _callers(inner)
    q = np.zeros(4, np.int64)
    assert outer(q, 3, False) == 1 + 1 + 3 + 3
    assert list(q) == [1, 1, 3, 3]
    (cres,) = inner.overloads.values()
    assert type(cres.library).__name__ == "LinkOnlyLibrary"
    assert cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name) == 0
    # the caller's library holds the callee's code: a real entry point
    (outer_cres,) = outer.overloads.values()
    assert outer_cres.library.get_pointer_to_function(outer_cres.fndesc.llvm_func_name) != 0
    with pytest.raises(RuntimeError, match="link-only kernel"):
        cres.library.serialize_using_object_code()


def test_link_only_kernel_called_from_python_runs_a_twin():
    # a call from Python compiles a full twin once and runs it, with the same results
    import numpy as np

    inner = _link_only(_push)
    q = np.zeros(4, np.int64)
    assert inner(q, 2, 5) == 5
    assert inner(q, 2, 1) == 6
    assert list(q) == [0, 0, 6, 0]
    twin = inner.__dict__["_g10fast_twin"]
    assert len(twin.signatures) == 1 and len(inner.signatures) == 0


def test_page_engine_kernels_link_only():
    # every page-engine kernel but run_engine is link-only; Python calls of them still work
    import numpy as np

    from g10fast.engine.page import kernels as pk
    from g10fast.jit import dispatcher

    assert type(dispatcher(pk._batch_move_x)).__name__.startswith("LinkOnly")
    assert type(dispatcher(pk._uniform_state)).__name__.startswith("LinkOnly")
    assert not type(dispatcher(pk.run_engine)).__name__.startswith("LinkOnly")
    assert pk._uniform_state(np.full(4, 2, np.uint8), 0, 4) == 2
    assert pk._uniform_state(np.array([2, 2, 3, 2], np.uint8), 0, 4) == -1


def test_deep_stack_call():
    # runs the function with its arguments from one large frame (CPython >= 3.11)
    import sys

    from g10fast.jit import _DEEP_SLOTS, _deep_stack_call

    assert _deep_stack_call(lambda a, b=0: (a, b), (1,), {"b": 2}) == (1, 2)
    with pytest.raises(ZeroDivisionError):
        _deep_stack_call(lambda: 1 // 0, (), {})
    if sys.version_info >= (3, 11):
        assert _deep_stack_call.__code__.co_nlocals >= _DEEP_SLOTS


def test_compiles_from_python_go_through_the_deep_stack(monkeypatch):
    # a cached kernel's first call compiles inside _deep_stack_call
    import numpy as np

    import g10fast.jit as j

    calls = []
    real = j._deep_stack_call

    def spy(fn, args, kws):
        calls.append(fn.__name__)
        return real(fn, args, kws)

    monkeypatch.setattr(j, "_deep_stack_call", spy)
    k = j._deep_compiles(_plain_calls(njit(_push)))
    q = np.zeros(3, np.int64)
    assert k(q, 1, 4) == 4 and k(q, 1, 1) == 5
    assert calls == ["_compile_for_args"]  # the first call compiled, once
    assert type(k).__name__ == "DeepCPUDispatcher"


def test_cache_depends_on_other_modules(tmp_path):
    # a kernel's cache stamp takes in the files of the modules it declares, by their contents
    # (SHA-256, as Numba's own stamp): an edit of one gives another stamp, so Numba finds the
    # cache stale; a new file time with the same contents (a clone, a checkout, a copy) does not
    import hashlib
    import os
    import types as pytypes

    from g10fast.jit import cache_depends_on, jit

    dep = tmp_path / "dep_mod.py"
    dep.write_text("X = 1\n")
    mod = pytypes.ModuleType("dep_mod")
    mod.__file__ = str(dep)
    k1 = jit()(_push)
    own = k1._cache._cache_file._source_stamp
    assert cache_depends_on(k1, [mod]) is k1
    s1 = k1._cache._cache_file._source_stamp
    assert s1 == (own, ("dep_mod", hashlib.sha256(b"X = 1\n").hexdigest()))
    st = dep.stat()
    os.utime(dep, ns=(st.st_atime_ns, st.st_mtime_ns + 10**10))
    assert cache_depends_on(jit()(_push), [mod])._cache._cache_file._source_stamp == s1
    dep.write_text("X = 22\n")
    k2 = cache_depends_on(jit()(_push), [mod])
    s2 = k2._cache._cache_file._source_stamp
    assert s2 == (own, ("dep_mod", hashlib.sha256(b"X = 22\n").hexdigest()))


def test_page_engine_cache_depends_on_every_stage_module():
    # run_engine's cache holds the whole engine: every stage module's file is in its stamp
    from g10fast.engine.page import kernels as pk

    stamp = pk.run_engine._cache._cache_file._source_stamp
    assert {s[0] for s in stamp[1:]} >= {m.__name__ for m in pk.MODULES}


_ARG_KERNELS = """
import sys
import numpy as np
from g10fast.jit import cache_kernel_arguments, kernel_nonrt, kernel_nonrt_internal

@kernel_nonrt_internal
def plus_one(x, i):
    return x[i] + 1

@kernel_nonrt_internal
def minus(x, i):
    return -x[i]

@kernel_nonrt
def total(x, rule):
    s = 0
    for i in range(x.shape[0]):
        s += rule(x, i)
    return s

cache_kernel_arguments(total)
x = np.arange(4)
out = [total(x, plus_one), total(x, minus), total(x, plus_one), total(x, minus)]
print(out, sum(total.stats.cache_hits.values()), sum(total.stats.cache_misses.values()),
      len(total.overloads))
"""


def test_kernel_arguments_cached_across_processes(tmp_path):
    # a cached kernel taking a kernel argument: compiled once per argument kernel in the first
    # process, loaded from the cache in the next (keyed by the argument's name, not the
    # object), and filed under this process's types (a second call runs it, loads nothing)
    import os
    import subprocess
    import sys

    (tmp_path / "argk.py").write_text(_ARG_KERNELS)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    src = tmp_path / "argk.py"

    def run():
        return (
            subprocess.run([sys.executable, str(src)], env=env, check=True, capture_output=True, text=True)
            .stdout.split("]")[1]
            .split()
        )

    outs = [run(), run()]
    assert outs[0] == ["0", "2", "2"]  # compiled: 2 misses, 2 overloads
    assert outs[1] == ["2", "0", "2"]  # loaded: 2 hits, no miss, 2 overloads
    st = src.stat()  # a new time, the same code: still loaded
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**10))
    assert run() == ["2", "0", "2"]


def test_kernel_argument_key_without_a_file():
    # two kernels of one name defined where there is no file (exec, a notebook): their cache
    # keys differ by their own code, so the second does not load the first's compiled engine
    from numba.core import types as nbtypes

    from g10fast.jit import _kernel_key, dispatcher, jit

    keys = []
    for body in ("return x + 1", "return x - 1"):
        ns = {}
        exec(f"def rule(x):\n    {body}\n", ns)
        keys.append(_kernel_key(nbtypes.Dispatcher(dispatcher(jit(internal=True)(ns["rule"])))))
    assert keys[0][0] == keys[1][0] == "kernel" and keys[0][2] == keys[1][2] == "rule"
    assert keys[0][3] is None and keys[1][3] is None  # no file to read
    assert keys[0][4] != keys[1][4]  # their own code differs
    assert _kernel_key(nbtypes.int64) is nbtypes.int64


def test_kernel_argument_key_with_nested_code():
    # a rule holding a nested code object (a comprehension, an inner function): its key is
    # its code, not the nested object's address (59e702d hashed repr(co_consts), which holds
    # it: two equal definitions had different keys, in one process and across processes)
    from numba.core import types as nbtypes

    from g10fast.jit import _code_digest, _kernel_key, dispatcher, jit

    src = (
        "def rule(x):\n"
        "    sq = lambda v: v * {k}\n"
        "    return sum([sq(x[j]) for j in range(x.shape[0]) if x[j] in {{1, 2, 'a'}}])\n"
    )
    keys = []
    for k in (2, 2, 3):
        ns = {}
        exec(src.format(k=k), ns)
        assert any(
            not isinstance(c, (int, str, tuple, frozenset, type(None))) for c in ns["rule"].__code__.co_consts
        )  # a nested code object
        keys.append(_kernel_key(nbtypes.Dispatcher(dispatcher(jit(internal=True)(ns["rule"])))))
    assert keys[0] == keys[1]  # two definitions of the same code
    assert keys[0][4] != keys[2][4]  # the lambda's constant differs
    assert _code_digest(test_kernel_argument_key_with_nested_code.__code__) != keys[0][4]


_NESTED_RULE = """
import numpy as np
from g10fast.jit import cache_kernel_arguments, kernel, kernel_internal

@kernel_internal
def squares(x, i):
    return sum([x[j] * x[j] for j in range(i + 1)])

@kernel
def total(x, rule):
    s = 0
    for i in range(x.shape[0]):
        s += rule(x, i)
    return s

cache_kernel_arguments(total)
x = np.arange(4)
out = [total(x, squares), total(x, squares)]
print(out, sum(total.stats.cache_hits.values()), sum(total.stats.cache_misses.values()),
      len(total.overloads))
"""


def test_kernel_argument_with_a_comprehension_cached_across_processes(tmp_path):
    # a rule with a comprehension (a nested code object): compiled in the first process,
    # loaded from the cache in the second, whose string hashes (PYTHONHASHSEED) and memory
    # layout differ (with 59e702d's key, the second compiled again: 0 hits, 1 miss)
    import os
    import subprocess
    import sys

    src = tmp_path / "nested.py"
    src.write_text(_NESTED_RULE)

    def run(seed):
        env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, str(src)], env=env, check=True, capture_output=True, text=True
        ).stdout
        values, counts = out.split("]")
        return values + "]", counts.split()

    assert run("1") == ("[20, 20]", ["0", "1", "1"])  # 0 + 1 + 5 + 14; compiled: 1 miss
    assert run("2") == ("[20, 20]", ["1", "0", "1"])  # loaded: 1 hit, no miss


LAZY = """
import pickle, sys
from g10fast.jit import dispatcher, kernel

@kernel
def twice(x):
    return 2 * x

@kernel
def add_twice(x, y):
    return twice(x) + y

made = []
print("numba" in sys.modules)                           # nothing made: Numba not imported
assert pickle.loads(pickle.dumps(twice)) is twice       # by reference, still not made
print("numba" in sys.modules)
print(add_twice(3, 1))                                  # made at the call, twice at the typing
print(type(dispatcher(twice)).__name__, type(dispatcher(add_twice)).__name__)
print(sys.modules["__main__"].add_twice is dispatcher(add_twice))  # its module's name rebound
print(twice.py_func.__name__, twice(5))
"""


def test_kernels_are_made_when_first_needed(tmp_path):
    # a kernel is a stand-in until first called from Python or typed in another kernel's
    # compile: Numba is imported then, not at the import of a kernel module
    from g10fast.jit import NO_JIT

    if NO_JIT:
        pytest.skip("plain Python kernels")
    script = tmp_path / "lazy.py"  # (a file: cached kernels need one)
    script.write_text(LAZY)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    made = ["DeepCPUDispatcher", "DeepCPUDispatcher"]
    assert p.stdout.split() == ["False", "False", "7", *made, "True", "twice", "10"]
