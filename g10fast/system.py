"""The system a run simulates, in the shape of the hardware presets (docs/run-format.md).

    System.from_preset(load_preset("h100-80-pcie5"))   # a preset (g10fast.hardware)
    System.from_g10(cfg)                               # the system part of a G10 config
    system.g10_fields()                                # back to the artifact's keys

Every engine and planner reads its hardware from a `System`; nothing downstream sees the
artifact's 50 keys. Parameter names in messages are the preset's dotted names
(`host.link_gbps`), the same in TOML files, `--set` overrides and the Python API.

The artifact has three link bandwidths: the CPU link (`host.link_gbps`), the SSD link
(`ssd.bandwidth_gbps`) and the GPU's own PCIe link (`host.gpu_link_gbps`, the total the GPU
can move per direction; the presets set it equal to the CPU link, as genconfigs.py does).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from g10fast.errors import InputError

#: (field, preset key, G10 config key)
_MAP = (
    ("gpu_memory_gb", "gpu.memory_gb", "GPU_memory_size_GB"),
    ("gpu_frequency_ghz", "gpu.frequency_ghz", "GPU_frequency_GHz"),
    ("gpu_malloc_us_per_byte", "gpu.malloc_us_per_byte", "GPU_malloc_uspB"),
    ("gpu_free_us_per_byte", "gpu.free_us_per_byte", "GPU_free_uspB"),
    ("host_memory_gb", "host.memory_gb", "CPU_memory_line_GB"),
    ("host_link_gbps", "host.link_gbps", "CPU_PCIe_bandwidth_GBps"),
    ("gpu_link_gbps", "host.gpu_link_gbps", "GPU_PCIe_bandwidth_GBps"),
    ("link_latency_us", "host.link_latency_us", "PCIe_latency_us"),
    ("batch_pages", "host.batch_pages", "PCIe_batch_size_page"),
    ("ssd_bandwidth_gbps", "ssd.bandwidth_gbps", "SSD_PCIe_bandwidth_GBps"),
    ("ssd_read_latency_us", "ssd.read_latency_us", "SSD_read_latency_us"),
    ("ssd_write_latency_us", "ssd.write_latency_us", "SSD_write_latency_us"),
    ("ssd_latency_us", "ssd.latency_us", "SSD_latency_us"),
    ("fault_latency_us", "uvm.fault_latency_us", "system_latency_us"),
)
#: field -> preset key (what messages name)
PARAM = {f: p for f, p, _ in _MAP}
#: field -> the artifact's config key
G10_KEY = {f: g for f, _, g in _MAP}


@dataclass(frozen=True)
class System:
    """GPU, host, SSD and UVM parameters (the preset's sections, flattened)."""

    gpu_memory_gb: float
    gpu_frequency_ghz: float
    host_memory_gb: float
    host_link_gbps: float
    ssd_bandwidth_gbps: float
    gpu_link_gbps: float | None = None  # None: the host link's bandwidth
    gpu_malloc_us_per_byte: float = 8.14e-7
    gpu_free_us_per_byte: float = 0.0
    link_latency_us: float = 5.0
    batch_pages: int = 50
    ssd_read_latency_us: float = 12.0
    ssd_write_latency_us: float = 16.0
    ssd_latency_us: float = 20.0
    fault_latency_us: float = 45.0
    # compute figures for the cost model (not read by the engines)
    gpu_hbm_gbps: float = 0.0
    gpu_peak_tflops_fp32: float = 0.0
    gpu_peak_tflops_bf16: float = 0.0
    gpu_model: str = ""
    #: the cost-model parameter file for this GPU's kernel times (the preset's
    #: `gpu.cost_params`, g10fast.workload.costmodel.Gpu.params); "" picks by gpu_model
    gpu_cost_params: str = ""
    name: str = ""  # the preset's name, "" for a G10 config
    #: data-parallel ranks (GPUs of the preset's [node]; the ranks engine; `--gpus N`)
    gpus: int = 1

    def __post_init__(self):
        if self.gpu_link_gbps is None:
            object.__setattr__(self, "gpu_link_gbps", self.host_link_gbps)
        for f, p in PARAM.items():
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"must be a finite number, got {v!r}", param=p)
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1:
            raise InputError(f"must be an integer >= 1, got {self.gpus!r}", param="system.gpus")
        if int(self.batch_pages) != self.batch_pages:
            raise InputError(f"must be an integer, got {self.batch_pages!r}", param=PARAM["batch_pages"])

    # -- what every engine needs ---------------------------------------------------------
    def check(self) -> "System":
        """The checks every engine needs (no engine divides by zero, no count overflows its
        64-bit integers: `LIMITS`); each engine adds its own. Raises InputError naming the
        preset parameter."""
        for f in (
            "gpu_memory_gb",
            "gpu_frequency_ghz",
            "host_link_gbps",
            "gpu_link_gbps",
            "ssd_bandwidth_gbps",
            "batch_pages",
        ):
            if not getattr(self, f) > 0:
                raise InputError(f"must be > 0, got {getattr(self, f)!r}", param=PARAM[f])
        for f in (
            "host_memory_gb",
            "gpu_malloc_us_per_byte",
            "gpu_free_us_per_byte",
            "link_latency_us",
            "ssd_read_latency_us",
            "ssd_write_latency_us",
            "ssd_latency_us",
            "fault_latency_us",
        ):
            v = getattr(self, f)
            if v < 0 and not (v == -1 and G10_KEY[f] in _G10_UNSET_OK):
                raise InputError(f"must be >= 0, got {v!r}", param=PARAM[f])
        for f, (lo, hi) in LIMITS.items():
            v = getattr(self, f)
            if v > 0 and not lo <= v <= hi:
                bound = f"at most {hi:.15g}" if v > hi else f"at least {lo:.15g}"
                raise InputError(
                    f"must be {bound}, got {v:g}: outside what the engines' "
                    f"64-bit counts can take (g10fast.system.LIMITS)",
                    param=PARAM[f],
                )
        return self

    @property
    def f_hz(self) -> int:
        """The engines' clock, cycles per second (as the artifact truncates it)."""
        return int(self.gpu_frequency_ghz * 1e9)

    def replace(self, **kw) -> "System":
        bad = [k for k in kw if k not in _FIELDS]
        if bad:
            raise InputError(f"unknown system parameter {bad[0]!r}", param=bad[0])
        return dataclasses.replace(self, **kw)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        # fields added later leave the dict (and so every spec hash) as before at their default
        for k, default in (("gpus", 1), ("gpu_cost_params", "")):
            if d[k] == default:
                del d[k]
        return d

    # -- conversions -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict) -> "System":
        bad = [k for k in d if k not in _FIELDS]
        if bad:
            raise InputError(f"unknown system parameter {bad[0]!r}", param=bad[0])
        return cls(**d)

    @classmethod
    def from_preset(cls, preset: dict) -> "System":
        """A preset dict of `g10fast.hardware.load_preset` (overrides already applied)."""
        g, h, s, u = preset["gpu"], preset["host"], preset["ssd"], preset["uvm"]
        return cls(
            gpu_memory_gb=g["memory_gb"],
            gpu_frequency_ghz=g["frequency_ghz"],
            gpu_malloc_us_per_byte=g["malloc_us_per_byte"],
            gpu_free_us_per_byte=g["free_us_per_byte"],
            host_memory_gb=h["memory_gb"],
            host_link_gbps=h["link_gbps"],
            gpu_link_gbps=h.get("gpu_link_gbps"),
            link_latency_us=h["link_latency_us"],
            batch_pages=int(h["batch_pages"]),
            ssd_bandwidth_gbps=s["bandwidth_gbps"],
            ssd_read_latency_us=s["read_latency_us"],
            ssd_write_latency_us=s["write_latency_us"],
            ssd_latency_us=s["latency_us"],
            fault_latency_us=u["fault_latency_us"],
            gpu_hbm_gbps=g.get("hbm_gbps", 0.0),
            gpu_peak_tflops_fp32=g.get("peak_tflops_fp32", 0.0),
            gpu_peak_tflops_bf16=g.get("peak_tflops_bf16", 0.0),
            gpu_model=str(g.get("model", "")),
            gpu_cost_params=str(g.get("cost_params", "")),
            name=str(preset.get("name", "")),
        )

    @classmethod
    def from_g10(cls, cfg) -> "System":
        """The system part of a G10 config (or any object with its attribute names; the
        optional keys a namespace may lack take `_G10_OPTIONAL`'s values)."""
        vals = {}
        for f, k in G10_KEY.items():
            v = getattr(cfg, k, None)
            if v is None:
                if k == "GPU_PCIe_bandwidth_GBps":
                    v = getattr(cfg, "CPU_PCIe_bandwidth_GBps", None)
                elif k in _G10_OPTIONAL:
                    v = _G10_OPTIONAL[k]
                if v is None:
                    raise InputError("missing", param=k)
            vals[f] = int(v) if f == "batch_pages" else float(v)
        return cls(**vals)

    def g10_fields(self) -> dict:
        """The artifact's config keys of this system."""
        return {
            k: (int(getattr(self, f)) if f == "batch_pages" else getattr(self, f)) for f, k in G10_KEY.items()
        }


_FIELDS = tuple(f.name for f in dataclasses.fields(System))

#: The range of each parameter that the engines' integer arithmetic can take: page counts,
#: byte counts and cycle counts are int64 (2^63 ~ 9.2e18), cycles at the GPU clock. Not a
#: model of any machine: every preset and the artifact's sweeps are far inside (memories
#: 40-1024 GB, links 3.2-450 GB/s, 1.2 GHz, latencies 1-80 us). Memories up to 2^20 GiB
#: (1 PiB, 2^38 pages); bandwidths from 1e-3 GB/s (moving 1 TiB then takes 1.1e6 s, 1.1e17
#: cycles at 100 GHz) to 1e6 GB/s; clocks up to 100 GHz; latencies up to 1e9 us (1,000 s,
#: 1e14 cycles at 100 GHz); malloc/free costs up to 1 us per byte (a 4 KiB page: 4.1 ms);
#: up to 2^20 pages per transfer batch.
LIMITS = {
    "gpu_memory_gb": (0.0, 2.0**20),
    "host_memory_gb": (0.0, 2.0**20),
    "gpu_frequency_ghz": (0.0, 100.0),
    "host_link_gbps": (1e-3, 1e6),
    "gpu_link_gbps": (1e-3, 1e6),
    "ssd_bandwidth_gbps": (1e-3, 1e6),
    "gpu_malloc_us_per_byte": (0.0, 1.0),
    "gpu_free_us_per_byte": (0.0, 1.0),
    "link_latency_us": (0.0, 1e9),
    "ssd_read_latency_us": (0.0, 1e9),
    "ssd_write_latency_us": (0.0, 1e9),
    "ssd_latency_us": (0.0, 1e9),
    "fault_latency_us": (0.0, 1e9),
    "batch_pages": (1, 2**20),
}
#: keys a test namespace may leave out, with the values the engines then use
_G10_OPTIONAL = {
    "GPU_free_uspB": 0.0,
    "PCIe_latency_us": 5.0,
    "SSD_read_latency_us": 12.0,
    "SSD_write_latency_us": 16.0,
    "SSD_latency_us": 0.0,
    "system_latency_us": 0.0,
    "GPU_malloc_uspB": 8.14e-7,
    "PCIe_batch_size_page": 50,
    "CPU_memory_line_GB": 0.0,
}
#: the artifact's optional keys where -1 means "not given"
_G10_UNSET_OK = (
    "system_latency_us",
    "SSD_latency_us",
    "SSD_read_latency_us",
    "SSD_write_latency_us",
    "PCIe_latency_us",
)


@dataclass(frozen=True)
class EngineOptions:
    """How a run is simulated, whatever the policy: iterations, kernel-time variation
    (Fig. 19), its seed, and the kernel speed-up of the artifact's `kernel_speedup`."""

    num_iteration: int = 2
    kernel_time_std_dev: float = 0.0
    ran_seed: int = 1
    kernel_speedup: float = 1.0
    #: the engine's own compatibility switches, (name, value) pairs: the fields of its options
    #: class (e.g. the tensor engine's TensorOptions: O-n quirks and tensor orders)
    compat: tuple = ()
    #: an offset-level allocator (g10fast.alloc.allocators.ALLOCATORS) that places the run's
    #: allocations and frees after it: its peak reserved bytes are the result's
    #: `gpu_memory_needed_bytes` (tensor-engine and swap policies; docs/allocators.md). ""
    #: none (and left out of to_dict, so that earlier specs keep their hash)
    allocator: str = ""
    #: the G10-compatible page engine's bulk paths (whole-tensor hints and pre-deallocations
    #: settled on uniform page ranges; the same results): None takes the engine's default
    #: (g10fast.engine.page.BULK_DEFAULT), False the per-page reference engine. Left out of
    #: `to_dict` while None, so that configuration hashes do not change.
    page_bulk: bool | None = None

    def __post_init__(self):
        if isinstance(self.compat, dict):
            object.__setattr__(self, "compat", tuple(sorted(self.compat.items())))

    def check(self) -> "EngineOptions":
        if (
            isinstance(self.num_iteration, bool)
            or int(self.num_iteration) != self.num_iteration
            or self.num_iteration < 1
        ):
            raise InputError(
                f"must be an integer >= 1, got {self.num_iteration!r}", param="engine.num_iteration"
            )
        if not (
            isinstance(self.kernel_time_std_dev, (int, float))
            and math.isfinite(self.kernel_time_std_dev)
            and self.kernel_time_std_dev >= 0
        ):
            raise InputError(
                f"must be >= 0, got {self.kernel_time_std_dev!r}", param="engine.kernel_time_std_dev"
            )
        if (
            isinstance(self.ran_seed, bool)
            or not isinstance(self.ran_seed, int)
            or not 0 <= self.ran_seed < 2**32
        ):
            raise InputError(
                f"must be an integer in [0, 2^32), got {self.ran_seed!r}", param="engine.ran_seed"
            )
        if not (isinstance(self.kernel_speedup, (int, float)) and self.kernel_speedup > 0):
            raise InputError(
                f"must be > 0, got {float(self.kernel_speedup)!r}", param="engine.kernel_speedup"
            )
        if self.allocator is not None and not isinstance(self.allocator, str):
            raise InputError(f"must be an allocator's name, got {self.allocator!r}", param="engine.allocator")
        if self.page_bulk is not None and not isinstance(self.page_bulk, bool):
            raise InputError(
                f"must be true, false or absent, got {self.page_bulk!r}", param="engine.page_bulk"
            )
        return self

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["compat"] = dict(self.compat)
        if not d["allocator"]:
            del d["allocator"]
        if d["page_bulk"] is None:
            del d["page_bulk"]
        return d


ENGINE_OPTION_KEYS = tuple(f.name for f in dataclasses.fields(EngineOptions))
