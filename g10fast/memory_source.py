"""What `g10fast memory` and `g10fast swap` take as SOURCE (a stage after the run pipeline: a
model's trace is derived from its workload): an allocation trace (HDF5 or SINGA
text), a PyTorch memory snapshot (the `_dump_snapshot` pickle, docs/memory-snapshot.md), a G10
config file (the artifact's model at its batch), or a built-in model name (with a batch). Each
becomes an AllocTrace."""

from __future__ import annotations

from pathlib import Path

from g10fast.alloc.trace import AllocTrace, from_workload, read_trace
from g10fast.errors import InputError


def _workload_trace(spec, iterations: int) -> AllocTrace:
    from g10fast.run import workload_of

    w = workload_of(spec)
    return from_workload(w, freq_ghz=spec.system.gpu_frequency_ghz, iterations=iterations)


def load_source(
    source: str,
    batch: int | None = None,
    system: str = "g10-artifact",
    iterations: int = 1,
    g10_root=None,
    device: int | None = None,
) -> AllocTrace:
    """An AllocTrace from SOURCE (see the module doc). `iterations`: how many iterations a
    workload-derived trace repeats (traces from files are taken as they are). `device`: the
    device of a memory snapshot (default: its only one)."""
    if iterations < 1:
        raise InputError(f"must be >= 1, got {iterations}", param="--iterations")
    p = Path(source)
    from g10fast.alloc.snapshot import is_snapshot_file, read_snapshot

    if p.is_file() and (is_snapshot_file(p) or p.suffix in (".pickle", ".pkl")):
        if batch is not None:
            raise InputError("--batch cannot change a memory snapshot (it records one run)", param="--batch")
        return read_snapshot(p, device)
    if device is not None:
        raise InputError(
            "--device chooses a device of a PyTorch memory snapshot; SOURCE is not one", param="--device"
        )
    if p.is_file():
        head = p.read_bytes()[:4096]
        if b"\x00" not in head and _looks_like_g10_config(head):
            if batch is not None:
                raise InputError(
                    "--batch cannot change a G10 config file (it fixes the batch)", param="--batch"
                )
            from g10fast.config import read_g10_config
            from g10fast.spec import from_g10_config

            cfg = read_g10_config(p, g10_root=g10_root)
            return _workload_trace(from_g10_config(cfg, source=str(p)), iterations)
        return read_trace(p)
    if "/" in source or source.endswith((".text", ".txt", ".csv", ".h5", ".config", ".pickle", ".pkl")):
        raise InputError("allocation trace, memory snapshot or config file not found", path=source)
    from g10fast.spec import builtin_spec

    try:
        spec = builtin_spec(source, batch, system, "lru")
    except InputError as e:
        raise InputError(
            f"{source!r} is neither a file nor a built-in model ({e.message})", param="SOURCE"
        ) from None
    return _workload_trace(spec, iterations)


def _looks_like_g10_config(head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    keys = ("nn_model_input_file", "orig_kernel_time_file", "GPU_memory_size_GB", "output_folder")
    return any(k in text for k in keys)
