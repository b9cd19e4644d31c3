"""G10's `key value` run configuration: reading it, validating it, and generating it like the artifact.

Spec: g10-workloads.md §1.4 (file rules, keys, defaults, sanity checks) and §4 (`genconfigs.py`),
g10-simulator.md §2.5, §3 and §11, g10-planner.md §1.

* `G10Config`: one field per key G10's `main()` accepts, same spelling, G10's defaults. The alias key
  `is_profiling` has no field of its own: it sets `is_simulation = not value`, as in G10.
* `read_g10_config(path)`: the file rules of G10's `main()`: first token key, second token value,
  further tokens ignored, empty lines skipped, a line is a comment only when its first token is exactly
  `#`, a repeated key overwrites the earlier one. Stricter than G10 where G10 would silently go wrong:
  malformed numbers (G10: `stoi`/`stod` prefix parsing), unknown policy names (G10: a warning, then
  LRU / OURS) and missing input files are `InputError`s naming file and line.
  Relative file paths are resolved as the artifact resolves them when run from `src/` (see
  `read_g10_config`); the fields hold the resolved absolute paths. The raw strings as written are
  available from `parse_g10_config_lines`.
* `validate(cfg)`: the artifact's start-up sanity checks plus the checks that stop the engines from
  dividing by zero or looping forever (O-30).
* `genconfig(...)`: the configuration `src/resources/genconfigs.py` writes for one experiment point.
* `config_hash(cfg)`: a stable hash of everything but the output location.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass

from g10fast.errors import InputError

PAGE_SIZE = 4096

EVICTION_POLICIES = (
    "RANDOM",
    "LRU",
    "TOLERANT",
    "GUIDED",
    "GUIDED_LRU",
    "PERFECT_GUIDED",
    "PERFECT_GUIDED_LRU",
    "DEEPUM",
)
GUIDED_POLICIES = ("GUIDED", "GUIDED_LRU", "PERFECT_GUIDED", "PERFECT_GUIDED_LRU")
MIGRATION_POLICIES = ("OURS", "DEEPUM", "FLASHNEURON", "G10GDSSSD", "G10GDSFULL")
FN_MIGRATION_POLICIES = ("FLASHNEURON", "G10GDSSSD", "G10GDSFULL")

# The artifact's six policy names (genconfigs.py), in the order of its figures.
POLICIES = ("lru", "FlashNeuron", "deepUM", "prefetch_lru", "G10GDSSSD", "G10GDSFULL")


@dataclass(frozen=True)
class G10Config:
    """One G10 run configuration. Fields are the config keys (g10-workloads.md §1.4), G10's defaults.

    A value of -1 in a "must set" field (see `REQUIRED_FOR_SIMULATION`) means the key was not given.
    File fields hold absolute paths after `read_g10_config` / `genconfig`, or "" when not given.
    Policy strings are stored upper-case, as G10 upper-cases them.
    """

    output_folder: str = ""
    output_override: bool = False
    is_simulation: bool = True
    is_individual: bool = True
    is_compile: bool = True
    compile_max_thread_num: int = -1
    is_run: bool = True
    is_cudnn: bool = False
    is_input_pf_only: bool = False
    is_resnet: int = 0
    is_inception: int = 0
    is_senet: int = 0
    is_transformer: int = -1
    trans_borden: int = 184
    batch_size: int = 0
    input_H: int = 0
    input_W: int = 0
    num_iteration: int = -1
    num_threads: int = 0
    is_UVM: bool = True
    use_prefetch: bool = False
    nn_model_input_file: str = ""
    orig_kernel_time_file: str = ""
    pf_kernel_time_file: str = ""
    input_pf_kernel_time_file: str = ""
    workspace_size_file: str = ""
    stat_output_file: str = ""
    migration_policy: str = "OURS"
    eviction_policy: str = "LRU"
    num_candidate: int = -1
    prefetch_degree: int = -1
    delta_parameter: float = -1.0
    system_latency_us: float = -1.0
    CPU_PCIe_bandwidth_GBps: float = -1.0
    CPU_memory_line_GB: float = -1.0
    GPU_PCIe_bandwidth_GBps: float = -1.0
    GPU_memory_size_GB: float = -1.0
    GPU_frequency_GHz: float = -1.0
    GPU_malloc_uspB: float = -1.0
    GPU_free_uspB: float = -1.0
    SSD_PCIe_bandwidth_GBps: float = -1.0
    SSD_read_latency_us: float = -1.0
    SSD_write_latency_us: float = -1.0
    SSD_latency_us: float = -1.0
    PCIe_latency_us: float = -1.0
    PCIe_batch_size_page: int = -1
    kernel_time_std_dev: float = 0.0
    ran_seed: int = 1
    kernel_speedup: float = 1.0

    def __post_init__(self):
        # Coerce and check types so that replace()/direct construction give the same values as parsing.
        for name, kind in _FIELD_KIND.items():
            v = getattr(self, name)
            if kind == "bool":
                if isinstance(v, bool):
                    continue
                if isinstance(v, int):
                    object.__setattr__(self, name, bool(v))
                    continue
            elif kind in ("int", "uint"):
                if isinstance(v, bool):
                    pass
                elif isinstance(v, (int, float)) and float(v).is_integer():
                    if kind == "uint" and v < 0:
                        raise InputError(f"must be >= 0 (unsigned in G10), got {v!r}", param=name)
                    object.__setattr__(self, name, int(v))
                    continue
            elif kind == "float":
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    f = float(v) + 0.0  # -0.0 -> 0.0
                    if not math.isfinite(f):
                        raise InputError(f"must be a finite number, got {v!r}", param=name)
                    object.__setattr__(self, name, f)
                    continue
            elif kind in ("evict", "migr"):
                if isinstance(v, str):
                    u = v.upper()
                    allowed = EVICTION_POLICIES if kind == "evict" else MIGRATION_POLICIES
                    if u not in allowed:
                        raise InputError(f"unknown policy {v!r} (known: {', '.join(allowed)})", param=name)
                    object.__setattr__(self, name, u)
                    continue
            else:  # path / name
                if isinstance(v, os.PathLike):
                    object.__setattr__(self, name, os.fspath(v))
                    continue
                if isinstance(v, str):
                    continue
            raise InputError(f"expected {kind}, got {type(v).__name__} {v!r}", param=name)

    # -- derived -------------------------------------------------------------------------------------------
    @property
    def policy(self) -> str | None:
        """The artifact's policy name (lru, prefetch_lru, deepUM, FlashNeuron, G10GDSSSD, G10GDSFULL).

        FlashNeuron / G10GDS* are decided by `migration_policy` alone (they run the FN simulator, which
        does not look at `use_prefetch`). None for a combination genconfigs.py never writes
        (e.g. TOLERANT or GUIDED eviction, DEEPUM without prefetching).
        """
        m, e = self.migration_policy, self.eviction_policy
        if m == "FLASHNEURON":
            return "FlashNeuron"
        if m in ("G10GDSSSD", "G10GDSFULL"):
            return m
        if m == "DEEPUM" and e == "DEEPUM" and self.use_prefetch:
            return "deepUM"
        if m == "OURS" and e == "LRU":
            return "prefetch_lru" if self.use_prefetch else "lru"
        return None

    @property
    def uses_fn_simulator(self) -> bool:
        """True for FLASHNEURON / G10GDSSSD / G10GDSFULL: the tensor-granular FN simulator (sim §12)."""
        return self.migration_policy in FN_MIGRATION_POLICIES

    def to_dict(self) -> dict:
        """Field name -> value, in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **kw) -> "G10Config":
        """A copy with some fields changed (unknown names raise InputError)."""
        bad = [k for k in kw if k not in _FIELD_KIND]
        if bad:
            raise InputError(f"unknown config key {bad[0]!r}", param=bad[0])
        return dataclasses.replace(self, **kw)


# Kind of each field; "uint" is unsigned in G10, "path" an input file, "outpath" the output folder.
_FIELD_KIND: dict[str, str] = {
    "output_folder": "outpath",
    "output_override": "bool",
    "is_simulation": "bool",
    "is_individual": "bool",
    "is_compile": "bool",
    "compile_max_thread_num": "int",
    "is_run": "bool",
    "is_cudnn": "bool",
    "is_input_pf_only": "bool",
    "is_resnet": "uint",
    "is_inception": "uint",
    "is_senet": "uint",
    "is_transformer": "int",
    "trans_borden": "int",
    "batch_size": "int",
    "input_H": "int",
    "input_W": "int",
    "num_iteration": "int",
    "num_threads": "int",
    "is_UVM": "bool",
    "use_prefetch": "bool",
    "nn_model_input_file": "path",
    "orig_kernel_time_file": "path",
    "pf_kernel_time_file": "path",
    "input_pf_kernel_time_file": "path",
    "workspace_size_file": "path",
    "stat_output_file": "name",
    "migration_policy": "migr",
    "eviction_policy": "evict",
    "num_candidate": "int",
    "prefetch_degree": "int",
    "delta_parameter": "float",
    "system_latency_us": "float",
    "CPU_PCIe_bandwidth_GBps": "float",
    "CPU_memory_line_GB": "float",
    "GPU_PCIe_bandwidth_GBps": "float",
    "GPU_memory_size_GB": "float",
    "GPU_frequency_GHz": "float",
    "GPU_malloc_uspB": "float",
    "GPU_free_uspB": "float",
    "SSD_PCIe_bandwidth_GBps": "float",
    "SSD_read_latency_us": "float",
    "SSD_write_latency_us": "float",
    "SSD_latency_us": "float",
    "PCIe_latency_us": "float",
    "PCIe_batch_size_page": "int",
    "kernel_time_std_dev": "float",
    "ran_seed": "uint",
    "kernel_speedup": "float",
}
assert tuple(_FIELD_KIND) == tuple(f.name for f in dataclasses.fields(G10Config))

#: Every key G10's main() accepts: the fields plus the alias `is_profiling`.
CONFIG_KEYS = tuple(_FIELD_KIND) + ("is_profiling",)
#: Input files, in the order they are resolved (the first one found fixes the base directory).
INPUT_FILE_KEYS = (
    "nn_model_input_file",
    "orig_kernel_time_file",
    "pf_kernel_time_file",
    "input_pf_kernel_time_file",
    "workspace_size_file",
)
#: Keys whose G10 default -1 means "must set" for a simulation (g10-workloads.md §1.4).
REQUIRED_FOR_SIMULATION = (
    "num_iteration",
    "CPU_PCIe_bandwidth_GBps",
    "CPU_memory_line_GB",
    "GPU_PCIe_bandwidth_GBps",
    "GPU_memory_size_GB",
    "GPU_frequency_GHz",
    "GPU_malloc_uspB",
    "GPU_free_uspB",
    "SSD_PCIe_bandwidth_GBps",
    "PCIe_batch_size_page",
)
#: Keys where -1 means "not given" and G10 runs anyway; any other negative value is rejected.
_OPTIONAL_MINUS_ONE = (
    "delta_parameter",
    "system_latency_us",
    "SSD_latency_us",
    "SSD_read_latency_us",
    "SSD_write_latency_us",
    "PCIe_latency_us",
)

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)


# ------------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------------


def parse_g10_config_lines(path) -> list[tuple[str, str, int]]:
    """(key, raw value, line number) for every non-empty, non-comment line, in file order.

    Applies G10's line rules (§1.4) and rejects unknown keys and missing values; values are not
    interpreted here.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read()
    except IsADirectoryError:
        raise InputError("is a directory, not a config file", path=p) from None
    except OSError as exc:
        raise InputError(f"cannot read config file: {exc.strerror or exc}", path=p) from None
    out = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        toks = raw.split()  # ASCII whitespace, like `>>` on a stringstream
        if not toks or toks[0] == b"#":
            continue
        key = toks[0].decode("utf-8", "backslashreplace")
        if key not in CONFIG_KEYS:
            hint = difflib.get_close_matches(key, CONFIG_KEYS, n=1)
            extra = f" (did you mean '{hint[0]}'?)" if hint else ""
            shown = key if key.isprintable() else key.encode("unicode_escape").decode("ascii")
            raise InputError(f"unknown config key '{shown}'{extra}", path=p, line=lineno)
        if len(toks) < 2:
            raise InputError(f"config key '{key}' has no value", path=p, line=lineno)
        try:
            value = toks[1].decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"value of '{key}' is not valid UTF-8", path=p, line=lineno) from None
        out.append((key, value, lineno))
    return out


def _parse_value(key: str, kind: str, text: str, p: str, lineno: int):
    def bad(what):
        return InputError(f"bad value {text!r} for '{key}': expected {what}", path=p, line=lineno)

    if kind in ("int", "uint", "bool"):
        if not _INT_RE.match(text):
            raise bad("an integer" if kind != "bool" else "an integer (0 or 1)")
        v = int(text)
        lo, hi = _UINT32 if kind == "uint" else _INT32
        if not lo <= v <= hi:
            raise bad(f"an integer in [{lo}, {hi}]")
        return bool(v) if kind == "bool" else v
    if kind == "float":
        if not _FLOAT_RE.match(text):
            raise bad("a decimal number")
        v = float(text)
        if not math.isfinite(v):
            raise bad("a finite number")
        return v + 0.0
    if kind in ("evict", "migr"):
        u = text.upper()
        allowed = EVICTION_POLICIES if kind == "evict" else MIGRATION_POLICIES
        if u not in allowed:
            fallback = "LRU" if kind == "evict" else "OURS"
            raise InputError(
                f"unknown {key} {text!r} (known: {', '.join(allowed)}; the artifact would "
                f"silently fall back to {fallback})",
                path=p,
                line=lineno,
            )
        return u
    if "\x00" in text:
        raise bad("a path without NUL characters")
    return text


def _ancestors(d: str) -> list[str]:
    out = [d]
    while True:
        parent = os.path.dirname(d)
        if parent == d:
            return out
        out.append(parent)
        d = parent


def _isfile(p: str) -> bool:
    try:
        return os.path.isfile(p)
    except (OSError, ValueError):
        return False


def read_g10_config(path, g10_root=None) -> G10Config:
    """Read a G10 config file like the artifact's main() (g10-workloads.md §1.4); no sanity checks.

    Relative input files are resolved as the artifact resolves them when run from its `src/` folder:
    against `g10_root` if given, else against the nearest ancestor directory of the config file (the
    file's own folder first) from which all relative input files exist. A relative `output_folder` is
    resolved against that same directory (`g10_root`, or the config file's folder when no input file
    is relative). Paths are stored absolute and canonical (`os.path.realpath`). The strings as written
    are returned by `parse_g10_config_lines`.
    """
    p = os.fspath(path)
    entries = parse_g10_config_lines(p)
    values: dict = {}
    where: dict = {}
    for key, text, lineno in entries:  # in file order: a repeated key overwrites (G10 assigns in order)
        if key == "is_profiling":
            values["is_simulation"] = not _parse_value(key, "bool", text, p, lineno)
            where["is_simulation"] = lineno
            continue
        kind = _FIELD_KIND[key]
        values[key] = _parse_value(key, kind, text, p, lineno)
        where[key] = lineno

    cfg_dir = os.path.dirname(os.path.abspath(p))
    if g10_root is not None:
        candidates = [os.path.abspath(os.fspath(g10_root))]
    else:
        candidates = _ancestors(cfg_dir)

    # Input files: absolute ones must exist; relative ones must all exist from one base directory.
    rel = [k for k in INPUT_FILE_KEYS if values.get(k) and not os.path.isabs(values[k])]
    for k in INPUT_FILE_KEYS:
        v = values.get(k)
        if v and os.path.isabs(v):
            if not _isfile(v):
                raise InputError(f"{k}: file '{v}' not found", path=p, line=where[k])
            values[k] = os.path.realpath(v)
    base = None
    if rel:
        found = [[_isfile(os.path.join(d, values[k])) for k in rel] for d in candidates]
        for d, ok in zip(candidates, found):
            if all(ok):
                base = d
                break
        if base is None:
            # Report against the directory from which most files exist (nearest on ties).
            best = max(range(len(candidates)), key=lambda i: (sum(found[i]), -i))
            d = candidates[best]
            k = rel[found[best].index(False)]
            tried = os.path.normpath(os.path.join(d, values[k]))
            if g10_root is not None:
                how = f"resolved against g10_root {d}"
            else:
                how = (
                    f"resolved against {d}; also tried the config file's folder and its "
                    f"{len(candidates) - 1} ancestor directories"
                )
            raise InputError(
                f"{k}: file '{values[k]}' not found (tried {tried}, {how})", path=p, line=where[k]
            )
        for k in rel:
            values[k] = os.path.realpath(os.path.join(base, values[k]))
    if base is None:
        base = candidates[0]  # g10_root, else the config file's folder

    out = values.get("output_folder")
    if out:
        if len(out) > 1 and out.endswith("/"):
            out = out[:-1]  # G10 strips one trailing '/'
        values["output_folder"] = os.path.realpath(os.path.join(base, out))
    try:
        cfg = G10Config(**values)
    except InputError as exc:  # cannot happen for parsed values; keep the file in the message anyway
        raise InputError(str(exc), path=p) from None
    # where each key was set, for validate()'s messages (not a field: replace() drops it, so a
    # changed config is no longer blamed on the file)
    object.__setattr__(cfg, "_g10_source", (p, dict(where)))
    return cfg


def dump_g10_config(cfg: G10Config) -> str:
    """The config as G10 `key value` text, every key written (absolute paths, floats by repr).

    `read_g10_config` of the text gives back an equal G10Config (input files must exist).
    """
    width = max(len(k) for k in _FIELD_KIND) + 1
    lines = []
    for k, v in cfg.to_dict().items():
        if k == "output_folder" and not v:
            continue  # an empty value cannot be written; "" is the default anyway
        if k in ("stat_output_file",) + INPUT_FILE_KEYS and not v:
            continue
        if isinstance(v, str) and (not v or len(v.split()) != 1 or v.split()[0] != v):
            raise InputError(
                f"{v!r} cannot be written as one token (G10 splits values at whitespace)", param=k
            )
        if isinstance(v, bool):
            v = int(v)
        lines.append(f"{k:<{width}}{v!r}" if isinstance(v, float) else f"{k:<{width}}{v}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------------


def _c_round(x: float) -> int:
    """C `round` for x >= 0 (half away from zero), exact."""
    r = math.floor(x)
    return r + 1 if x - r >= 0.5 else r


def validate(cfg: G10Config) -> G10Config:
    """G10's start-up sanity checks (workloads §1.4, simulator §2.5) plus guards against engine
    divisions by zero / endless loops. Raises InputError(param=<key>); returns cfg when it passes."""

    def fail(param, msg):
        src = getattr(cfg, "_g10_source", None)  # read_g10_config: (file, {key: line})
        if src is not None:
            raise InputError(f"'{param}' {msg}", path=src[0], line=src[1].get(param), param=param)
        raise InputError(msg, param=param)

    if cfg.batch_size <= 0:
        fail("batch_size", f"must be > 0, got {cfg.batch_size} (0 means not set)")
    flags = [k for k in ("is_resnet", "is_inception", "is_senet") if getattr(cfg, k)]
    if len(flags) > 1:
        fail(
            flags[1], f"at most one of is_resnet / is_inception / is_senet may be set, got {', '.join(flags)}"
        )
    if cfg.kernel_speedup <= 0:
        fail("kernel_speedup", f"must be > 0, got {cfg.kernel_speedup}")
    for k in ("trans_borden", "num_threads"):
        if getattr(cfg, k) < 0:
            fail(k, f"must be >= 0, got {getattr(cfg, k)}")
    if cfg.kernel_time_std_dev < 0:
        fail("kernel_time_std_dev", f"must be >= 0, got {cfg.kernel_time_std_dev}")
    if cfg.is_transformer != 1:
        for k in ("input_H", "input_W"):
            if getattr(cfg, k) <= 0:
                fail(k, f"must be > 0 for a CNN model (is_transformer != 1), got {getattr(cfg, k)}")
    if not cfg.is_simulation:
        return cfg

    # Must-set keys, then everything else that must not be negative.
    for k in REQUIRED_FOR_SIMULATION:
        v = getattr(cfg, k)
        if v == -1:
            fail(k, "missing: this key must be set for a simulation (G10's default -1 means unset)")
        if v < 0:
            fail(k, f"must be >= 0, got {v}")
    for k in INPUT_FILE_KEYS:
        if not getattr(cfg, k):
            fail(k, "missing: a simulation needs this input file")
    for k in _OPTIONAL_MINUS_ONE:
        v = getattr(cfg, k)
        if v < 0 and v != -1:
            fail(k, f"must be >= 0 (or -1 for unset), got {v}")
    if cfg.num_iteration < 1:
        fail("num_iteration", f"must be >= 1 for a simulation, got {cfg.num_iteration}")
    for k in (
        "GPU_memory_size_GB",
        "GPU_frequency_GHz",
        "PCIe_batch_size_page",
        "CPU_PCIe_bandwidth_GBps",
        "GPU_PCIe_bandwidth_GBps",
        "SSD_PCIe_bandwidth_GBps",
    ):
        if getattr(cfg, k) <= 0:
            fail(k, f"must be > 0, got {getattr(cfg, k)}")

    ssd, cpu, gpu = cfg.SSD_PCIe_bandwidth_GBps, cfg.CPU_PCIe_bandwidth_GBps, cfg.GPU_PCIe_bandwidth_GBps
    if ssd > cpu:
        fail(
            "SSD_PCIe_bandwidth_GBps",
            f"SSD bandwidth {ssd} exceeds CPU bandwidth {cpu} (need SSD <= CPU <= GPU <= SSD + CPU)",
        )
    if cpu > gpu:
        fail(
            "CPU_PCIe_bandwidth_GBps",
            f"CPU bandwidth {cpu} exceeds GPU bandwidth {gpu} (need SSD <= CPU <= GPU <= SSD + CPU)",
        )
    if gpu > ssd + cpu:
        fail(
            "GPU_PCIe_bandwidth_GBps",
            f"GPU bandwidth {gpu} exceeds SSD + CPU = {ssd + cpu} (need SSD <= CPU <= GPU <= SSD + CPU)",
        )

    mig, ev = cfg.migration_policy, cfg.eviction_policy
    if (mig == "DEEPUM") != (ev == "DEEPUM"):
        fail(
            "eviction_policy" if mig == "DEEPUM" else "migration_policy",
            f"DEEPUM migration and DEEPUM eviction go together (got migration_policy {mig}, "
            f"eviction_policy {ev})",
        )
    if mig == "DEEPUM" and cfg.prefetch_degree < 0:
        fail("prefetch_degree", f"must be >= 0 with DEEPUM, got {cfg.prefetch_degree}")
    if mig != "DEEPUM" and cfg.prefetch_degree > 0:
        fail("prefetch_degree", f"must be <= 0 unless migration_policy is DEEPUM, got {cfg.prefetch_degree}")
    if ev in GUIDED_POLICIES and cfg.num_candidate < 0:
        fail("num_candidate", f"must be >= 0 with eviction_policy {ev}, got {cfg.num_candidate}")
    if ev not in GUIDED_POLICIES and cfg.num_candidate > 0:
        fail("num_candidate", f"must be <= 0 unless eviction_policy is GUIDED*, got {cfg.num_candidate}")

    # Derived constants of the UVM simulator (simulator §3); out-of-range inputs must not overflow here.
    f_hz = cfg.GPU_frequency_GHz * 1e9
    if not math.isfinite(f_hz):
        fail("GPU_frequency_GHz", f"{cfg.GPU_frequency_GHz} is out of range")
    malloc_x = cfg.GPU_malloc_uspB * PAGE_SIZE * 1e-6 * f_hz
    if not math.isfinite(malloc_x) or malloc_x >= 2**62:
        fail("GPU_malloc_uspB", f"{cfg.GPU_malloc_uspB} us/B is out of range")
    malloc_cpp = _c_round(malloc_x)
    if malloc_cpp == 0:  # O-30: alloc_cap = ii / malloc_cpp divides by zero in the artifact
        fail(
            "GPU_malloc_uspB",
            f"{cfg.GPU_malloc_uspB} us/B gives {malloc_x:.3g} cycles per page, which "
            "rounds to 0 (the artifact divides by zero, O-30); use >= "
            f"{0.5 / (PAGE_SIZE * 1e-6 * f_hz):.3g}",
        )
    gpu_bpc = gpu * 1e9 / f_hz
    if not math.isfinite(gpu_bpc) or gpu_bpc == 0.0:
        fail("GPU_PCIe_bandwidth_GBps", f"{gpu} GB/s at {cfg.GPU_frequency_GHz} GHz is out of range")
    if cfg.CPU_memory_line_GB * 2**30 / PAGE_SIZE >= 2**31:
        fail("CPU_memory_line_GB", f"{cfg.CPU_memory_line_GB} GiB overflows G10's int32 host page count")
    if not cfg.uses_fn_simulator:
        b = cfg.PCIe_batch_size_page
        tick_x = b * PAGE_SIZE / gpu_bpc
        if not tick_x < 2**62:
            fail("PCIe_batch_size_page", f"the batcher tick ({b} pages at {gpu} GB/s) is out of range")
        tick = math.floor(tick_x)
        if tick < 1:
            fail(
                "PCIe_batch_size_page",
                f"the batcher tick ({b} pages at {gpu} GB/s) is shorter than one cycle",
            )
        if math.floor(b / gpu * ssd) < 1:
            fail(
                "SSD_PCIe_bandwidth_GBps",
                f"{ssd} GB/s moves 0 pages per tick of {b} pages at {gpu} GB/s "
                "(SSD transfers would never progress); raise it or PCIe_batch_size_page",
            )
        if math.floor(b / gpu * cpu) < 1:
            fail("CPU_PCIe_bandwidth_GBps", f"{cpu} GB/s moves 0 pages per tick of {b} pages at {gpu} GB/s")
        if tick // malloc_cpp < 1:
            fail(
                "GPU_malloc_uspB",
                f"{malloc_cpp} cycles per page exceeds the {tick}-cycle tick: no page "
                "could ever be allocated",
            )
    if mig == "G10GDSFULL" and cpu <= ssd:
        fail(
            "CPU_PCIe_bandwidth_GBps",
            f"G10GDSFULL moves host data at CPU - SSD bandwidth = {cpu - ssd} GB/s; "
            "CPU bandwidth must exceed SSD bandwidth",
        )
    return cfg


# ------------------------------------------------------------------------------------------------------
# genconfigs.py
# ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    key: str  # genconfigs key and config folder name
    net: str  # frontend/Nets/<net>.txt
    resdir: str  # results/<resdir>/
    flags: tuple  # (key, value) model-family keys
    input_hw: int
    var_seed: int  # ran_seed written in kernel_time_varying() configs


MODELS = {
    "inceptionv3": _Model("Inceptionv3", "Inceptionv3", "Inceptionv3", (("is_inception", 1),), 299, 1),
    "resnet152": _Model("ResNet152", "ResNet152", "ResNet152", (("is_resnet", 1),), 224, 10),
    "senet154": _Model("SENet154", "SENet154", "SENet154", (("is_senet", 1),), 224, 25),
    "vit": _Model(
        "VIT", "VIT", "VIT", (("is_transformer", 1), ("trans_borden", 184), ("is_senet", 1)), 224, 1
    ),
    "bert": _Model(
        "BERT",
        "BERT_Base",
        "BERT_Base",
        (("is_transformer", 1), ("trans_borden", 210), ("is_senet", 1)),
        224,
        15,
    ),
}
_MODEL_ALIASES = {"bert_base": "bert"}

# policy -> (use_prefetch, eviction_policy, migration_policy, extra keys)   (workloads §4, simulator §11)
_POLICY_KEYS = {
    "lru": (False, "LRU", "OURS", ()),
    "prefetch_lru": (True, "LRU", "OURS", ()),
    "deepUM": (True, "DEEPUM", "DEEPUM", (("prefetch_degree", 8),)),
    "FlashNeuron": (True, "LRU", "FLASHNEURON", ()),
    "G10GDSSSD": (False, "LRU", "G10GDSSSD", (("CPU_memory_line_GB", 0.0),)),
    "G10GDSFULL": (False, "LRU", "G10GDSFULL", ()),
}

#: genconfigs.py defaults; a parameter equal to its default adds no suffix.
GEN_DEFAULTS = {
    "host_mem_gb": 128.0,
    "ssd_gbps": 3.2,
    "pcie_gbps": 15.754,
    "kernel_time_std_dev": 0.0,
    "kernel_speedup": 1.0,
}

#: Keys genconfigs.py writes identically in every simulation config (workloads §4).
_FIXED = dict(
    is_simulation=True,
    batch_size=0,
    num_iteration=2,
    num_threads=128,
    stat_output_file="sim_result",
    is_UVM=True,
    system_latency_us=45.0,
    GPU_memory_size_GB=40.0,
    GPU_frequency_GHz=1.2,
    GPU_malloc_uspB=0.000000814,
    GPU_free_uspB=0.0,
    SSD_read_latency_us=12.0,
    SSD_write_latency_us=16.0,
    SSD_latency_us=20.0,
    PCIe_latency_us=5.0,
    PCIe_batch_size_page=50,
    delta_parameter=0.5,
)


def resolve_model(model: str) -> _Model:
    """Model name as a user types it (BERT, VIT, Inceptionv3, ResNet152, SENet154; any case)."""
    m = str(model).strip().lower()
    m = _MODEL_ALIASES.get(m, m)
    if m not in MODELS:
        import difflib

        hint = difflib.get_close_matches(m, list(MODELS) + list(_MODEL_ALIASES), n=1)
        hint = [MODELS[_MODEL_ALIASES.get(h, h)].key for h in hint]
        raise InputError(
            f"unknown model {model!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + f"; known: {', '.join(x.key for x in MODELS.values())}",
            param="model",
        )
    return MODELS[m]


def resolve_policy(policy: str) -> str:
    """The artifact's policy name, any case (display names and aliases are the policy
    registry's: g10fast.policies.get)."""
    p = str(policy).strip()
    by_lower = {k.lower(): k for k in _POLICY_KEYS}
    q = p.lower()
    if q in by_lower:
        return by_lower[q]
    raise InputError(
        f"unknown policy {policy!r} (the artifact's: {', '.join(POLICIES)}; "
        "`g10fast policies` lists every policy)",
        param="policy",
    )


def _num_str(x: float, min_decimals: int = 0) -> str:
    """Number as genconfigs writes it in names: 32, 6.4, 0.05, and 0.10 for the variation (2 decimals)."""
    x = float(x)
    if min_decimals and float(f"{x:.{min_decimals}f}") == x:
        return f"{x:.{min_decimals}f}"
    if x.is_integer():
        return str(int(x))
    return repr(x)


def _suffix(host, ssd, pcie, var, spd) -> str:
    parts = []
    if host != GEN_DEFAULTS["host_mem_gb"]:
        parts.append("cpu" + _num_str(host))
    if ssd != GEN_DEFAULTS["ssd_gbps"]:
        parts.append("ssd" + _num_str(ssd))
    if pcie != GEN_DEFAULTS["pcie_gbps"]:
        parts.append("pcie" + _num_str(pcie))
    if var != GEN_DEFAULTS["kernel_time_std_dev"]:
        parts.append("var" + _num_str(var, 2))
    if spd != GEN_DEFAULTS["kernel_speedup"]:
        parts.append("spd" + _num_str(spd))
    return "".join("-" + s.replace(".", "_") for s in parts)


def trace_paths(artifact_dir, model: str, batch_size: int) -> dict[str, str]:
    """The four kernel-trace files genconfigs.py names for (model, B), keyed by config key."""
    m = resolve_model(model)
    d = os.path.join(os.path.realpath(os.fspath(artifact_dir)), "results", m.resdir)
    b = int(batch_size)
    return {
        "orig_kernel_time_file": os.path.join(d, f"cudnn{b}.txt"),
        "pf_kernel_time_file": os.path.join(d, f"cudnn{b}PF.txt"),
        "input_pf_kernel_time_file": os.path.join(d, f"cudnn{b}InputPF.txt"),
        "workspace_size_file": os.path.join(d, f"cudnn{b}Workspace.txt"),
    }


def available_batch_sizes(artifact_dir, model: str) -> list[int]:
    """Batch sizes with all four trace files under results/<resdir>/."""
    m = resolve_model(model)
    d = os.path.join(os.fspath(artifact_dir), "results", m.resdir)
    try:
        names = os.listdir(d)
    except OSError:
        return []
    bs = sorted(int(mm.group(1)) for n in names if (mm := re.fullmatch(r"cudnn([0-9]+)\.txt", n)))
    return [b for b in bs if all(_isfile(p) for p in trace_paths(artifact_dir, model, b).values())]


def _number_param(name, v, default, *, positive):
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"expected a finite number, got {v!r}", param=name)
    v = float(v)
    if v < 0 or (positive and v == 0):
        raise InputError(f"must be {'> 0' if positive else '>= 0'}, got {v}", param=name)
    return v


def genconfig(
    artifact_dir,
    model: str,
    batch_size: int,
    policy: str,
    *,
    host_mem_gb=None,
    ssd_gbps=None,
    pcie_gbps=None,
    kernel_time_std_dev=None,
    ran_seed=None,
    kernel_speedup=None,
) -> G10Config:
    """The simulation config genconfigs.py writes for one point (g10-workloads.md §4), validated.

    Paths are absolute, into `artifact_dir` (the artifact root holding frontend/, results/, src/);
    `output_folder` is results/<resdir>/<B>-<policy><suffix>. `pcie_gbps` sets both the CPU and GPU
    link (the SSD sweep of the artifact passes ssd_gbps and pcie_gbps=32 together). With a
    kernel-time variation, `ran_seed` defaults to the artifact's per-model seed (BERT 15,
    ResNet152 10, SENet154 25, others 1). G10GDSSSD always gets 0 GiB host memory.
    """
    m = resolve_model(model)
    pol = resolve_policy(policy)
    root = os.path.realpath(os.fspath(artifact_dir))
    net = os.path.join(root, "frontend", "Nets", m.net + ".txt")
    if not _isfile(net):
        raise InputError(f"no model file {net} (is this the G10 artifact root?)", param="artifact_dir")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InputError(f"must be a positive integer, got {batch_size!r}", param="batch_size")
    traces = trace_paths(root, m.key, batch_size)
    missing = [p for p in traces.values() if not _isfile(p)]
    if missing:
        have = available_batch_sizes(root, m.key)
        raise InputError(
            f"no kernel traces for {m.key} at batch size {batch_size} ({missing[0]} missing); "
            f"available: {', '.join(map(str, have)) or 'none'}",
            param="batch_size",
        )
    host = _number_param("host_mem_gb", host_mem_gb, GEN_DEFAULTS["host_mem_gb"], positive=False)
    ssd = _number_param("ssd_gbps", ssd_gbps, GEN_DEFAULTS["ssd_gbps"], positive=True)
    pcie = _number_param("pcie_gbps", pcie_gbps, GEN_DEFAULTS["pcie_gbps"], positive=True)
    var = _number_param(
        "kernel_time_std_dev", kernel_time_std_dev, GEN_DEFAULTS["kernel_time_std_dev"], positive=False
    )
    spd = _number_param("kernel_speedup", kernel_speedup, GEN_DEFAULTS["kernel_speedup"], positive=True)
    if pol == "G10GDSSSD" and host != GEN_DEFAULTS["host_mem_gb"]:
        raise InputError(
            "G10GDSSSD always runs with 0 GiB host memory (genconfigs forces "
            "CPU_memory_line_GB 0); leave host_mem_gb unset",
            param="host_mem_gb",
        )
    if ran_seed is None:
        seed = m.var_seed if var != 0 else 1
    elif isinstance(ran_seed, bool) or not isinstance(ran_seed, int) or not 0 <= ran_seed < 2**32:
        raise InputError(f"must be an integer in [0, 2^32), got {ran_seed!r}", param="ran_seed")
    else:
        seed = ran_seed

    use_prefetch, ev, mig, extra = _POLICY_KEYS[pol]
    values = dict(_FIXED)
    values.update(m.flags)
    values.update(
        output_folder=os.path.join(
            root, "results", m.resdir, f"{batch_size}-{pol}{_suffix(host, ssd, pcie, var, spd)}"
        ),
        batch_size=batch_size,
        input_H=m.input_hw,
        input_W=m.input_hw,
        nn_model_input_file=net,
        use_prefetch=use_prefetch,
        eviction_policy=ev,
        migration_policy=mig,
        CPU_PCIe_bandwidth_GBps=pcie,
        GPU_PCIe_bandwidth_GBps=pcie,
        CPU_memory_line_GB=host,
        SSD_PCIe_bandwidth_GBps=ssd,
        kernel_time_std_dev=var,
        ran_seed=seed,
        kernel_speedup=spd,
    )
    values.update(traces)
    values.update(extra)
    return validate(G10Config(**values))


# ------------------------------------------------------------------------------------------------------
# Hash
# ------------------------------------------------------------------------------------------------------

#: Fields that only say where results go; they do not change what is simulated.
OUTPUT_KEYS = ("output_folder", "stat_output_file", "output_override")


def config_hash(cfg: G10Config) -> str:
    """SHA-256 hex digest of the resolved configuration without its output location.

    Stable across runs and Python versions: canonical JSON of the fields (sorted keys, floats by
    repr), file fields by their resolved path (not their content).
    """
    d = {k: v for k, v in cfg.to_dict().items() if k not in OUTPUT_KEYS}
    blob = json.dumps({"format": "g10config-v1", "config": d}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
