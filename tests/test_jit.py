"""g10fast.jit: calls between kernels are typed without literal values (`_plain_calls`), so a
kernel called with different constants at its call sites is compiled once per argument types;
a kernel whose typing needs a literal still compiles (Numba's own typing). Uncached
dispatchers (plain njit), so that each test compiles and counts afresh."""

from __future__ import annotations

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
        s = callee(q, 0, 1)            # Literal[int](0), Literal[int](1)
        s += callee(q, 1, 1)           # Literal[int](1), Literal[int](1)
        s += callee(q, 2, x)           # Literal[int](2), int64
        s += callee(q, x, 3)           # int64, Literal[int](3)
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
        assert _callers(_plain_calls(njit(_push)))(q1, x, flag) == \
            _callers(njit(_push))(q2, x, flag)
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


def test_kernels_only_variant():
    # no CPython wrapper: another kernel calls it as usual; a call from Python raises
    # TypeError (naming it) instead of jumping into the missing wrapper
    import numpy as np

    from g10fast.jit import _kernels_only
    inner = _kernels_only(_plain_calls(njit(_push, no_cpython_wrapper=True)))
    outer = _callers(inner)
    q = np.zeros(4, np.int64)
    assert outer(q, 3, False) == 1 + 1 + 3 + 3
    assert list(q) == [1, 1, 3, 3]
    with pytest.raises(TypeError, match="_push is compiled for calls from other kernels only"):
        inner(q, 0, 1)
    assert list(q) == [1, 1, 3, 3]


def test_page_engine_kernels_only():
    # the page engine's internal kernels refuse Python calls; those Python calls work
    import numpy as np

    from g10fast.engine import page_kernels as pk
    with pytest.raises(TypeError, match="_batch_move_x is compiled for calls"):
        pk._batch_move_x(0, 0, 0, False, 0, 0, 0, np.zeros(1, np.uint8), np.zeros(8, np.int64),
                         np.zeros(pk.NS, np.int64), np.zeros((1, 10), np.int64), 0, 0, 0)
    assert pk._uniform_state(np.full(4, 2, np.uint8), 0, 4) == 2
