"""How g10fast's Numba kernels are compiled: the one place that defines the decorators.

Every kernel module (`engine.page.kernels`, `engine.tensor.kernels`, `planner.g10_kernels`,
`analysis.bounds`, ...) takes its decorator from here:

* `kernel`: `njit(cache=True)`, compiled once and kept in Numba's on-disk cache (the
  `__pycache__` folder next to the module, or NUMBA_CACHE_DIR).
* `kernel_nonrt`: the same without Numba's reference counting (`_nrt=False`), for kernels
  that never allocate (the page engine): the atomic increments and decrements that NRT wraps
  around each array argument of each call otherwise cost more than the page moves themselves.
* `kernel_nonrt_internal`: `kernel_nonrt` for a kernel that other kernels call: **link-only**.
  Numba normally finishes every kernel on its own: its LLVM module, with the modules of all
  the kernels it calls linked in, optimised at O3 and compiled to machine code; then each
  caller links that module again and optimises and compiles the whole again, so a kernel deep
  in the page engine's call tree went through LLVM once for each kernel above it, and its
  own machine code was never run (the callers run their own copies). A link-only kernel stops
  after its own function-level passes: its library links its callees' IR and nothing more
  (`LinkOnlyLibrary`), no CPython wrapper, no machine code, nothing in the on-disk cache
  (there is nothing to load: a cached caller holds all of its callees' code). The kernel a
  run calls from Python (`run_engine`) optimises and compiles the whole tree once. A cold
  BERT-128 lru run's LLVM work went from 16.3 to 5.9 s
  (benchmarks/results/page-engine-bulk-journal.md, "Ninth step"). Called from Python (a
  test, a debugger session), a link-only kernel compiles a full, cached twin of itself on
  first use and runs that. `kernel_internal` is the same with reference counting (the
  planner's helpers).
* `jit(**options)`: any other combination (`inline="always"` and the like), same switch;
  `jit(internal=True, ...)` is the link-only variant.

Calls between kernels are typed without literal values (`_plain_calls`): by default Numba
compiles a called kernel once per distinct combination of constant arguments at its call sites
(`_q_push(qb, S, Q_PF_CPU, p, 1)` and `_q_push(qb, S, Q_PF_SSD, p, 1)` are two compiles, typed
`Literal[int](0)` and `Literal[int](1)`); here the arguments are typed as their plain types
(`int64`, `bool`, a tuple of them), so each kernel is compiled once per argument *types*. The
machine types are the same, so the results are too; LLVM still sees the constants where it
inlines the call. A cold BERT-128 lru run compiled 113 kernel versions before (`_q_push` 14
times, `_emit` 9), 68 with it, about 30 % less compile CPU
(benchmarks/results/page-engine-bulk-journal.md, "Cold compile"). A kernel whose typing
needs a literal argument falls back to Numba's own typing.

A compile from Python (the first call of a cached kernel: Numba compiles it and everything it
calls, or loads it from the cache) runs inside one call with a large frame (`_deep_stack_call`).
CPython 3.11 and later keep the frames of a thread in 16 KiB chunks of a data stack; a chunk is
mapped when a call crosses into it and unmapped when that call returns, so the compiler's deep,
oscillating recursion mapped and unmapped the same chunk 0.4-1.3 M times in a cold start (each
a page fault and a zeroed page: 2-6 s of system CPU, depending on the caller's stack depth).
The large frame (70,000 unused local slots) makes the interpreter map one 1 MiB chunk whose
rest holds the compile's frames: 0.1 M faults and 0.2-0.3 s at every depth.

A cached kernel's on-disk cache is stale when its own source file changes (Numba 0.68 compares
a SHA-256 of the file's contents), not when a kernel it calls changes in another file,
although the cache holds that kernel's code too: a kernel whose callees live in other modules
declares them (`cache_depends_on`), and their files' contents (SHA-256, as Numba's own stamp)
join its cache's stamp. Contents, not file times: a fresh clone, a CI checkout beside a
restored cache or a copy has new times and the same code (with times, a `touch` of one page
engine file recompiled the whole engine: 0.69 -> 22.2 CPU s for BERT-128 lru,
benchmarks/results/cold-start-journal.md). A cached
kernel that takes another kernel as an argument (the page engine's eviction rule) is compiled
once per argument kernel, each a type of its own; Numba keys such a type on the kernel object
of one process, so its cache would never hit and would grow by an entry per process: the
kernel's cache keys it by the argument kernel's module, name and file instead
(`cache_kernel_arguments`).

What the on-disk cache can carry to another machine (benchmarks/results/cold-start-journal.md,
"What a cache built elsewhere can and cannot carry"): an entry hits only under the same Numba
and Python versions, the same source contents and the same CPU (LLVM's host CPU name and
feature string are part of every entry's key); under NUMBA_CACHE_DIR its folder is also named
by a hash of the source folder's absolute path, and the in-tree `__pycache__` is used only
where it is writable. So a cache shipped in a wheel would serve only the build machine's CPU
model. What is sound is a compile on the machine that runs: the install's own build step
compiles the kernels a run calls from Python ahead of time there, into an extension module
that is used only on that CPU, with those sources and that Numba (`g10fast.aot`); the rest
compile on first use into the cache later runs read, or in `g10fast warm` (g10fast/warm.py)
in a Dockerfile or a CI step; sweep and Dask workers on one machine load the same module and
read the cache its first run filled.

Every kernel is made lazily (`_Lazy`): the decorator records the function and its options,
and the Numba dispatcher is made (and Numba imported) only when the kernel is first called
from Python, typed in another kernel's compile, or asked for a dispatcher attribute. A run
whose kernels were compiled ahead of time (`g10fast.aot`) never imports Numba: 66 MiB less
memory (SENet154-1024 Base UVM peaked at 488 MiB against 613; `import numba` loads and
initialises LLVM) and no start-up cost. Module globals that kernels read but only Numba can
give are set when the first kernel is made (`on_first_kernel`, `numba.objmode`), C functions
that kernels call are declared with `external`.

Switch: G10FAST_NO_JIT=1 (any value but "" and "0") leaves every g10fast kernel a plain
Python function, for a debugger, coverage or a print while chasing a bug (slow: hundreds of
times slower; the small tests are fine). It is read once, at import. NUMBA_DISABLE_JIT=1
does the same for every Numba function of the process (g10fast's and any other library's);
G10FAST_NO_JIT only touches g10fast's kernels, and needs no knowledge of Numba's settings.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import sys
import threading
from types import CodeType

NO_JIT = os.environ.get("G10FAST_NO_JIT", "") not in ("", "0")

_ON_NUMBA: list = []  # callables run once, with the numba module, before the first kernel is made
_MAKING = threading.RLock()


def on_first_kernel(fn) -> None:
    """Run `fn(numba)` before the first kernel of this process is made (`_Lazy`), or now if one
    has been: for module globals that kernels read but only Numba can give (`numba.objmode`)."""
    if NO_JIT or _ON_NUMBA is None:  # (under G10FAST_NO_JIT the kernels run as Python: now)
        import numba

        fn(numba)
    else:
        _ON_NUMBA.append(fn)


def _numba_needed():
    global _ON_NUMBA
    if _ON_NUMBA is not None:  # (called holding _MAKING)
        import numba

        todo, _ON_NUMBA = _ON_NUMBA, None
        for fn in todo:
            fn(numba)


class _Lazy:
    """A kernel whose Numba dispatcher is made when it is first needed: called from Python,
    typed in another kernel's compile (Numba asks `_numba_type_`), or asked for any attribute
    of the dispatcher. Until then Numba is not imported: a run whose kernels were all compiled
    ahead of time (g10fast.aot) never imports it (66 MiB of memory and 0.25 s of start).
    `py_func` and `targetoptions` (the decorator's options) are known without it. Made, the
    dispatcher also replaces the kernel in its module's namespace (later calls go straight to
    it); references taken before (`from m import k`) keep this object, which forwards."""

    __slots__ = ("py_func", "targetoptions", "_make", "_disp", "_after", "__dict__")

    def __init__(self, fn, make, options):
        self.py_func = fn
        self.targetoptions = dict(options)
        self._make = make
        self._disp = None
        self._after = []
        functools.update_wrapper(self, fn)

    def _dispatcher(self):
        d = self._disp
        if d is None:
            with _MAKING:  # (threads of one process: one dispatcher a kernel)
                d = self._disp
                if d is None:
                    _numba_needed()
                    d = self._make(self.py_func)
                    for fn in self._after:
                        fn(d)
                    self._disp = d
                    mod = sys.modules.get(self.py_func.__module__)
                    if mod is not None and getattr(mod, self.py_func.__name__, None) is self:
                        setattr(mod, self.py_func.__name__, d)
        return d

    def __call__(self, *args, **kws):
        return self._dispatcher()(*(a._dispatcher() if type(a) is _Lazy else a for a in args), **kws)

    @property
    def _numba_type_(self):
        from numba.core import types

        return types.Dispatcher(self._dispatcher())

    def __getattr__(self, name):
        if name.startswith("__") or name in _Lazy.__slots__:
            raise AttributeError(name)
        return getattr(self._dispatcher(), name)

    def __reduce__(self):  # (by reference, as a Numba dispatcher pickles)
        return (_kernel_by_name, (self.py_func.__module__, self.py_func.__qualname__))

    def __repr__(self):
        return f"<g10fast kernel {self.py_func.__module__}.{self.py_func.__qualname__}>"


def _kernel_by_name(module, qualname):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class external:
    """A C function a kernel calls (Numba's `types.ExternalFunction(symbol, signature)`), made
    when a kernel that calls it is compiled: `signature(types)` gives its signature from
    `numba.core.types`. The symbol is resolved when the compiled code is loaded (the cache
    and the ahead-of-time module keep it by name)."""

    def __init__(self, symbol: str, signature):
        self.symbol = symbol
        self._signature = signature
        self._type = None

    @property
    def _numba_type_(self):
        if self._type is None:
            from numba.core import types

            self._type = types.ExternalFunction(self.symbol, self._signature(types))
        return self._type


def dispatcher(kernel):
    """The Numba dispatcher of a kernel (made now if it was not), or `kernel` itself if it is
    not a g10fast kernel (a dispatcher already, or a plain function under G10FAST_NO_JIT)."""
    return kernel._dispatcher() if type(kernel) is _Lazy else kernel


def _plain_calls(disp):
    """Let `disp`, a Numba dispatcher, be typed at its call sites in other kernels with the
    arguments' plain types instead of their literal values (one compile per argument types,
    not one per constant; see the module's docstring). Numba types such a call through the
    dispatcher's `get_call_template(args, kws)`, which compiles the signature it is given."""
    from numba.core import errors, types

    typed = type(disp).get_call_template

    def get_call_template(args, kws):
        plain = tuple(types.unliteral(a) for a in args)
        plain_kws = {k: types.unliteral(v) for k, v in kws.items()}
        if plain == tuple(args) and plain_kws == kws:
            return typed(disp, args, kws)
        try:
            return typed(disp, plain, plain_kws)
        except errors.TypingError:  # the kernel needs a literal: Numba's own way
            return typed(disp, args, kws)

    disp.get_call_template = get_call_template
    return disp


def _named_class(name, base, attrs):
    """A subclass of a Numba dispatcher class, importable as g10fast.jit.<name> (so that a
    dispatcher of it pickles by reference, as Numba's own do)."""
    cls = type(name, (base,), dict(attrs, __module__=__name__, __qualname__=name))
    globals()[name] = cls
    return cls


_DEEP_SLOTS = 70_000  # unused local slots of `_deep_stack_call`'s frame (8 bytes each)


def _deep_stack_call(fn, args, kws):
    """fn(*args, **kws) from a frame of about 560 KiB (CPython >= 3.11: see the module's
    docstring), so that the frames of the calls below it share one data-stack chunk."""
    return fn(*args, **kws)


if sys.version_info >= (3, 11):
    _code = _deep_stack_call.__code__
    _deep_stack_call.__code__ = _code.replace(
        co_varnames=_code.co_varnames + ("_",) * _DEEP_SLOTS,  # one name: 0.6 MiB
        co_nlocals=_code.co_nlocals + _DEEP_SLOTS,
    )
    del _code

_DEEP = {}  # dispatcher class -> its subclass compiling in `_deep_stack_call`


def _deep_compiles(disp):
    """Make `disp`'s compiles from Python (its `_compile_for_args`, the first call with new
    argument types) run in `_deep_stack_call`."""
    base = type(disp)
    if not hasattr(base, "_compile_for_args"):
        return disp
    cls = _DEEP.get(base)
    if cls is None:

        def _compile_for_args(self, *args, **kws):
            return _deep_stack_call(base._compile_for_args, (self,) + args, kws)

        cls = _DEEP[base] = _named_class(
            "Deep" + base.__name__, base, {"_compile_for_args": _compile_for_args}
        )
    disp.__class__ = cls
    return disp


_INTERNAL = {}  # dispatcher class -> its link-only subclass


def _link_only_dispatcher(disp, twin_options):
    """Give `disp` (a link-only kernel: no CPython wrapper, no machine code of its own) a
    `__call__` for calls from Python: the first one compiles a full twin of the function
    (`njit(cache=True, **twin_options)`, its calls typed as `_plain_calls`) and every call
    runs that. Calls from other kernels do not go through `__call__`; typing sees the same
    dispatcher as before."""
    base = type(disp)
    cls = _INTERNAL.get(base)
    if cls is None:

        def __call__(self, *args, **kws):
            twin = self.__dict__.get("_g10fast_twin")
            if twin is None:
                from numba import njit

                twin = _deep_compiles(
                    _plain_calls(njit(cache=True, **self._g10fast_twin_options)(self.py_func))
                )
                self.__dict__["_g10fast_twin"] = twin
            return twin(*args, **kws)

        cls = _INTERNAL[base] = _named_class("LinkOnly" + base.__name__, base, {"__call__": __call__})
    disp.__class__ = cls
    disp._g10fast_twin_options = dict(twin_options)
    return disp


@functools.cache
def _link_only_compiler():
    """The Numba compiler (pipeline) class of the link-only kernels, built once: the
    nopython pipeline with its lowering pass replaced by one that gives the kernel a
    `LinkOnlyLibrary`. None where this Numba lacks the pieces (the kernels are then
    compiled and cached one by one, as Numba does by default)."""
    try:
        from numba.core import codegen as cg
        from numba.core import compiler, typed_passes
        from numba.core.compiler_machinery import register_pass

        base_library = cg.JITCodeLibrary
        lock = cg.require_global_compiler_lock
        base_library._get_module_for_linking  # noqa: B018  (present, or unusable)
        typed_passes.NativeLowering.run_pass  # noqa: B018
    except (ImportError, AttributeError):
        return None

    class _NoEnvCodegen:
        """The codegen as a link-only library shows it to Numba's lowering: the one call that
        writes a function's environment pointer into the loaded machine code (`set_env`) has
        no machine code to write to and is skipped; everything else is the codegen's."""

        def __init__(self, codegen):
            self._codegen = codegen

        def set_env(self, env_name, env):
            pass

        def __getattr__(self, name):
            return getattr(self._codegen, name)

    class LinkOnlyLibrary(base_library):
        """A code library whose `finalize` links its callees' modules into its own (as
        Numba's does) and stops there: no module optimisation, no machine code, no entry
        point (`get_pointer_to_function` gives 0). Its callers link its module; the kernel
        called from Python optimises and compiles the whole once."""

        @property
        def codegen(self):
            return _NoEnvCodegen(self._codegen)

        def finalize(self):
            lock()
            self._raise_if_finalized()
            seen = set()
            for library in self._linking_libraries:
                if library not in seen:
                    seen.add(library)
                    self._reload_init.update(library._reload_init)
                    self._final_module.link_in(library._get_module_for_linking(), preserve=True)
            self._final_module.verify()
            self._finalized = True

        def get_pointer_to_function(self, name):
            self._ensure_finalized()
            return 0

        def serialize_using_object_code(self):
            raise RuntimeError(f"link-only kernel {self.name} has no machine code to cache")

    @register_pass(mutates_CFG=True, analysis_only=False)
    class LinkOnlyLowering(typed_passes.NativeLowering):
        """Numba's nopython lowering into a `LinkOnlyLibrary`."""

        _name = "g10fast_link_only_lowering"

        def run_pass(self, state):
            if state.library is None:
                state.library = LinkOnlyLibrary(state.targetctx.codegen(), state.func_id.func_qualname)
            return super().run_pass(state)

    class LinkOnlyCompiler(compiler.CompilerBase):
        def define_pipelines(self):
            pm = compiler.DefaultPassBuilder.define_nopython_pipeline(self.state)
            pm.add_pass_after(LinkOnlyLowering, typed_passes.NativeLowering)
            pm.passes = [p for p in pm.passes if p[0] is not typed_passes.NativeLowering]
            pm.finalize()
            return [pm]

    return LinkOnlyCompiler


def jit(*, internal: bool = False, **options):
    """A decorator compiling a function with `njit(cache=True, **options)` (its calls from
    other kernels typed without literal values, `_plain_calls`), or leaving it as it is under
    G10FAST_NO_JIT. `internal`: a link-only kernel for calls from other kernels (see the
    module's docstring), with a full twin compiled for a call from Python."""
    if NO_JIT:
        return lambda fn: fn

    def make(fn):
        from numba import njit

        if internal:
            pipeline = _link_only_compiler()
            if pipeline is None:
                compile_ = njit(cache=True, no_cpython_wrapper=True, **options)
            else:
                compile_ = njit(cache=False, no_cpython_wrapper=True, pipeline_class=pipeline, **options)
            return _link_only_dispatcher(_plain_calls(compile_(fn)), options)
        return _deep_compiles(_plain_calls(njit(cache=True, **options)(fn)))

    return lambda fn: _Lazy(fn, make, options)


def cache_depends_on(disp, modules):
    """Make the on-disk cache of `disp` (a cached kernel) stale when the source file of any of
    `modules` changes, as when its own does (see the module's docstring): the files' times and
    sizes, read now, join the stamp that Numba compares with the one in the cache's index.
    Returns `disp`; does nothing under G10FAST_NO_JIT or where the cache is not Numba's
    index-and-data files. (A kernel not made yet gets it when it is made.)"""
    if type(disp) is _Lazy:
        if disp._disp is None:
            disp._after.append(lambda d: cache_depends_on(d, modules))
            return disp
        cache_depends_on(disp._disp, modules)
        return disp
    cache_file = getattr(getattr(disp, "_cache", None), "_cache_file", None)
    if cache_file is None or not hasattr(cache_file, "_source_stamp"):
        return disp
    stamps = [cache_file._source_stamp]
    for m in modules:
        stamps.append((m.__name__, _file_digest(m.__file__)))
    cache_file._source_stamp = tuple(stamps)
    return disp


def _file_digest(path):
    """SHA-256 of the file's contents (Numba's own source stamp), read once per file time and
    size; None for a file that cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _digest(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _digest(path, mtime_ns, size):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _const_repr(c):
    """A constant of a code object as text that is the same in every process: a nested code
    object (a comprehension, a lambda, an inner function) by `_code_digest` (its repr holds
    its memory address), a frozenset (`x in {"a", "b"}`) sorted (its order follows the
    per-process string hash), tuples element by element, anything else by repr."""
    if isinstance(c, CodeType):
        return f"<code {_code_digest(c)}>"
    if isinstance(c, tuple):
        return "(" + ", ".join(_const_repr(x) for x in c) + ",)"
    if isinstance(c, frozenset):
        return "frozenset({" + ", ".join(sorted(_const_repr(x) for x in c)) + "})"
    return repr(c)


def _code_digest(code):
    """SHA-256 of what a code object computes, the same in every process: its bytecode, its
    constants (`_const_repr`: nested code objects by their own digest), the names it reads
    (globals and attributes, locals, closure variables) and its argument count; not its line
    numbers or file name."""
    parts = [
        code.co_code.hex(),
        _const_repr(code.co_consts),
        repr(code.co_names),
        repr(code.co_varnames),
        repr(code.co_freevars),
        repr(code.co_cellvars),
        repr((code.co_argcount, code.co_kwonlyargcount)),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _kernel_key(t):
    """A stable stand-in for the type `t` of a kernel passed as an argument (its module,
    qualified name, its file's contents, `_file_digest`, and its own code, `_code_digest`,
    for a kernel defined where there is no file: an interactive session, `exec`); any other
    type as it is."""
    from numba.core import types

    if not isinstance(t, types.Dispatcher):
        return t
    fn = t.dispatcher.py_func
    code = fn.__code__
    return ("kernel", fn.__module__, fn.__qualname__, _file_digest(code.co_filename), _code_digest(code))


def cache_kernel_arguments(disp):
    """Key the on-disk cache of `disp` (a cached kernel) on the kernels it takes as arguments
    by their module, qualified name and file (see the module's docstring), so that a compile
    for a kernel argument is cached across processes. Returns `disp`; does nothing under
    G10FAST_NO_JIT. (A kernel not made yet gets it when it is made.)"""
    if type(disp) is _Lazy:
        if disp._disp is None:
            disp._after.append(cache_kernel_arguments)
            return disp
        cache_kernel_arguments(disp._disp)
        return disp
    cache = getattr(disp, "_cache", None)
    if cache is None or not hasattr(cache, "_index_key"):
        return disp
    index_key = cache._index_key
    load_overload = cache.load_overload

    def _index_key(sig, codegen):
        return index_key(tuple(_kernel_key(t) for t in sig), codegen)

    def _load_overload(sig, target_context):
        # The loaded signature names a kernel rebuilt from the cache, not this process's:
        # the compiled code is filed under the argument types asked for, or every call would
        # miss it and load it again.
        cres = load_overload(sig, target_context)
        if cres is not None and tuple(cres.signature.args) != tuple(sig):
            cres = cres._replace(signature=cres.signature.replace(args=tuple(sig)))
        return cres

    cache._index_key = _index_key
    cache.load_overload = _load_overload
    return disp


kernel = jit()
kernel_internal = jit(internal=True)
kernel_nonrt = jit(_nrt=False)
kernel_nonrt_internal = jit(_nrt=False, internal=True)
