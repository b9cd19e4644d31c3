"""Hardware presets: data/hardware/<name>.toml (docs/run-format.md) -> G10Config fields.

A preset describes the GPU (memory, HBM bandwidth, compute peaks), the host link and
memory, the SSD and the UVM fault latency, with a [sources] table saying where each figure
comes from (../shared/specs/anchors.md section 4). Overrides are dotted keys, e.g.
{"gpu.memory_gb": 20, "host.link_gbps": 32}.
"""

from __future__ import annotations

import copy
from pathlib import Path

from g10fast.datadir import data_dir
from g10fast.errors import InputError, read_toml, toml_key_line

HARDWARE_FORMAT = "g10fast-hardware"
PRESETS = ("g10-artifact", "a100-80-pcie4", "h100-80-pcie5", "h100-sxm5", "gh200-c2c")

# section -> key -> kind; every key is required in a preset
_SCHEMA = {
    "gpu": {
        "model": str,
        "memory_gb": float,
        "hbm_gbps": float,
        "peak_tflops_fp32": float,
        "peak_tflops_bf16": float,
        "frequency_ghz": float,
        "malloc_us_per_byte": float,
        "free_us_per_byte": float,
    },
    "host": {"memory_gb": float, "link_gbps": float, "link_latency_us": float, "batch_pages": int},
    "ssd": {
        "bandwidth_gbps": float,
        "read_latency_us": float,
        "write_latency_us": float,
        "latency_us": float,
    },
    "uvm": {"fault_latency_us": float},
}


def hardware_dir() -> Path:
    return data_dir() / "hardware"


def list_presets() -> list[str]:
    return sorted(p.stem for p in hardware_dir().glob("*.toml"))


def load_preset(name_or_path, overrides: dict | None = None) -> dict:
    """A preset as a dict (sections gpu, host, ssd, uvm, sources), overrides applied, checked."""
    p = Path(str(name_or_path))
    if not (p.suffix == ".toml" and p.is_file()):
        p = hardware_dir() / f"{name_or_path}.toml"
        if not p.is_file():
            import difflib

            hint = difflib.get_close_matches(str(name_or_path), list_presets(), n=1)
            raise InputError(
                f"unknown hardware preset {name_or_path!r}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + "; known: "
                + ", ".join(list_presets()),
                param="system.preset",
            )
    d = read_toml(p, "hardware preset")
    if d.get("format") != HARDWARE_FORMAT:
        raise InputError(f"format must be {HARDWARE_FORMAT!r}", path=str(p), param="format")
    d = copy.deepcopy(d)
    d.setdefault("name", p.stem)
    for key, val in (overrides or {}).items():
        sec, _, k = str(key).partition(".")
        if sec not in _SCHEMA or k not in _SCHEMA[sec]:
            raise InputError(
                f"unknown hardware parameter {key!r} (known: "
                + ", ".join(f"{s}.{x}" for s in _SCHEMA for x in _SCHEMA[s])
                + ")",
                param=str(key),
            )
        d.setdefault(sec, {})[k] = val
    given = {str(k) for k in (overrides or {})}

    def bad(where: str, msg: str):
        """An error naming the override, or the preset file, line and key."""
        if where in given:
            return InputError(msg, param=where)
        return InputError(f"{where}: {msg}", path=str(p), line=toml_key_line(p, where), param=where)

    for sec, keys in _SCHEMA.items():
        if not isinstance(d.get(sec), dict):
            raise InputError(f"missing section [{sec}]", path=str(p), param=sec)
        for k, kind in keys.items():
            v = d[sec].get(k)
            where = f"{sec}.{k}"
            if kind is str:
                if not isinstance(v, str) or not v.strip():
                    raise bad(where, "missing, empty or not a string")
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise bad(where, f"missing or not a number (got {v!r})")
            if not v >= 0 or v == float("inf") or (kind is int and int(v) != v):
                what = "integer" if kind is int else "number"
                raise bad(where, f"must be a finite, non-negative {what}, got {v!r}")
            d[sec][k] = kind(v)
    for where in (
        "gpu.memory_gb",
        "gpu.hbm_gbps",
        "gpu.frequency_ghz",
        "host.link_gbps",
        "ssd.bandwidth_gbps",
        "host.batch_pages",
    ):
        s, k = where.split(".")
        if d[s][k] <= 0:
            raise bad(where, f"must be > 0, got {d[s][k]!r}")
    d["path"] = str(p)
    return d


def config_fields(preset: dict) -> dict:
    """G10Config fields of a preset (the system part of a configuration)."""
    g, h, s, u = preset["gpu"], preset["host"], preset["ssd"], preset["uvm"]
    return dict(
        GPU_memory_size_GB=g["memory_gb"],
        GPU_frequency_GHz=g["frequency_ghz"],
        GPU_malloc_uspB=g["malloc_us_per_byte"],
        GPU_free_uspB=g["free_us_per_byte"],
        CPU_PCIe_bandwidth_GBps=h["link_gbps"],
        GPU_PCIe_bandwidth_GBps=h["link_gbps"],
        CPU_memory_line_GB=h["memory_gb"],
        PCIe_latency_us=h["link_latency_us"],
        PCIe_batch_size_page=h["batch_pages"],
        SSD_PCIe_bandwidth_GBps=s["bandwidth_gbps"],
        SSD_read_latency_us=s["read_latency_us"],
        SSD_write_latency_us=s["write_latency_us"],
        SSD_latency_us=s["latency_us"],
        system_latency_us=u["fault_latency_us"],
    )


def preset_key_of(field: str) -> str | None:
    """The preset key ("ssd.bandwidth_gbps") that sets a G10Config field, or None."""
    names = {sec: {k: f"{sec}.{k}" for k in keys} for sec, keys in _SCHEMA.items()}
    return config_fields(names).get(field)
