"""HDF5 workload trace: a `Workload` in one file (docs/workload-trace-format.md).

    write_workload_h5(path, w, provenance={...})     # temp name, then rename
    w = read_workload_h5(path)                        # every array checked; InputError if not
    w = trace_workload(path, freq_ghz, kernel_speedup) # for a run on a system's clock

Written by `g10fast capture`, by `g10fast workload export` (any built-in or artifact
workload) and read by `g10fast run --workload FILE.h5`. A Workload read back is equal, array
for array, to the one written, so a run on it gives the same result bit for bit.
"""

from __future__ import annotations

import json
import os
import platform
import time
import zlib

import numpy as np

from g10fast.atomic import atomic_path, checked_target
from g10fast.errors import InputError
from g10fast.workload.model import PAGE_SIZE, Workload, address_layout, page_round

FORMAT = "g10fast-workload"
VERSION = 1

#: per-kernel lists a Workload's meta may carry (captured workloads); stored as datasets
KERNEL_STR_META = ("kernel_op", "kernel_kind", "kernel_phase")
KERNEL_NUM_META = ("kernel_flops", "kernel_bytes_accessed")
TENSOR_STR_META = ("tensor_name",)
TENSOR_NUM_META = ("tensor_alloc_kernel", "tensor_free_kernel")

_KERNEL_INT = ("exec_cycles", "input_pf_cycles", "pf_cycles", "workspace_bytes")
_CSR = ("in_ptr", "in_idx", "out_ptr", "out_idx")


def _crc(a: np.ndarray) -> int:
    return int(zlib.crc32(np.ascontiguousarray(a).tobytes()))


def _jsonable(meta: dict) -> dict:
    out = {}
    for k, v in meta.items():
        if (
            k in KERNEL_STR_META
            or k in KERNEL_NUM_META
            or k in TENSOR_STR_META
            or k in TENSOR_NUM_META
            or k == "kernel_class"
        ):
            continue
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            continue
        out[k] = v
    return out


def kernel_bytes(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Bytes of each kernel's distinct input and output tensors (requested sizes)."""
    raw = w.raw_size.astype(np.int64)
    K = w.num_kernels
    bi = np.zeros(K, np.int64)
    bo = np.zeros(K, np.int64)
    np.add.at(bi, np.repeat(np.arange(K), np.diff(w.in_ptr)), raw[w.in_idx])
    np.add.at(bo, np.repeat(np.arange(K), np.diff(w.out_ptr)), raw[w.out_idx])
    return bi, bo


def kernel_flops(w: Workload) -> np.ndarray:
    """FLOPs per kernel: a captured (or fused) workload's own, else the built-in cost model's
    (matrix-multiply-like kernels take their layer's forward FLOPs), else zeros."""
    if len(w.meta.get("kernel_flops", ())) == w.num_kernels:
        return np.asarray(w.meta["kernel_flops"], dtype=np.float64)
    pf = w.meta.get("parent_flops")
    out = np.zeros(w.num_kernels)
    if pf:
        from g10fast.workload.model import MATMUL_KERNELS

        for k, (n, p) in enumerate(zip(w.kernel_name, w.kernel_parent)):
            if n in MATMUL_KERNELS:
                out[k] = pf.get(p, 0)
    return out


def _versions() -> dict:
    from g10fast import __version__
    import h5py

    v = {
        "g10fast": __version__,
        "numpy": np.__version__,
        "h5py": h5py.__version__,
        "python": platform.python_version(),
    }
    try:
        import sys

        if "torch" in sys.modules:
            v["torch"] = sys.modules["torch"].__version__
    except Exception:  # pragma: no cover
        pass
    return v


def write_workload_h5(
    path,
    w: Workload,
    provenance: dict | None = None,
    *,
    freq_hz: int = 1_200_000_000,
    transformer: bool | None = None,
    trans_borden: int = 184,
) -> None:
    """Write `w` to `path` (temporary name first, then renamed).

    provenance: source ("builtin", "artifact", "capture", ...), model, batch, gpu, command and
    any other str/number items; tool versions and the date are added. freq_hz: the clock the
    cycles are counted in. transformer / trans_borden: what the artifact's per-workload quirks
    key on (O-15), kept so a replay plans as the original did."""
    import h5py

    path = checked_target(path)
    prov = {"source": "?", "model": w.name, "batch": int(w.batch_size), "gpu": "?"}
    prov.update({k: v for k, v in (provenance or {}).items() if v is not None})
    prov["created_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for k, v in _versions().items():
        prov.setdefault(f"version_{k}", v)
    if transformer is None:
        transformer = bool(
            w.meta.get("family") in ("bert", "vit", "gpt2", "llama") or w.meta.get("transformer", False)
        )
    str_dt = h5py.string_dtype("utf-8")
    K, T = w.num_kernels, w.num_tensors
    bi, bo = kernel_bytes(w)
    try:
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT
            f.attrs["version"] = VERSION
            f.attrs["name"] = w.name
            f.attrs["batch_size"] = int(w.batch_size)
            f.attrs["num_kernels"] = K
            f.attrs["num_tensors"] = T
            f.attrs["weights_bytes"] = int(w.weights_bytes)
            f.attrs["freq_hz"] = int(freq_hz)
            f.attrs["transformer"] = int(bool(transformer))
            f.attrs["trans_borden"] = int(trans_borden)
            f.attrs["meta_json"] = json.dumps(_jsonable(w.meta), sort_keys=True)
            pg = f.create_group("provenance")
            for k, v in prov.items():
                pg.attrs[k] = v if isinstance(v, (int, float, np.integer, np.floating)) else str(v)

            def put(grp, name, arr, dtype=None):
                a = np.asarray(arr, dtype=dtype)
                ds = grp.create_dataset(
                    name, data=a, compression="gzip" if a.size > 4096 else None, shuffle=a.size > 4096
                )
                ds.attrs["crc32"] = _crc(a)

            kg = f.create_group("kernels")
            kg.create_dataset("name", data=list(w.kernel_name), dtype=str_dt)
            kg.create_dataset("parent", data=list(w.kernel_parent), dtype=str_dt)
            for m in KERNEL_STR_META:
                vals = w.meta.get(m)
                # absent, or stale (a pass such as fusion changed the kernels): empty strings
                vals = [str(v) for v in vals] if vals is not None and len(vals) == K else [""] * K
                kg.create_dataset(m.removeprefix("kernel_"), data=vals, dtype=str_dt)
            for n in _KERNEL_INT:
                put(kg, n, getattr(w, n), np.int64)
            put(kg, "workspace_tensor", w.workspace_tensor, np.int32)
            put(kg, "flops", kernel_flops(w), np.float64)
            put(kg, "bytes_in", bi, np.int64)
            put(kg, "bytes_out", bo, np.int64)
            tg = f.create_group("tensors")
            put(tg, "raw_size", w.raw_size, np.int64)
            put(tg, "size", w.size, np.int64)
            put(tg, "is_global", w.is_global, np.uint8)
            put(tg, "address", w.address, np.int64)
            names = w.meta.get("tensor_name")
            if names is not None and len(names) == T:
                tg.create_dataset("name", data=list(names), dtype=str_dt)
            for m in TENSOR_NUM_META:
                if m in w.meta and len(w.meta[m]) == T:
                    put(tg, m.removeprefix("tensor_"), w.meta[m], np.int64)
            if len(w.meta.get("kernel_bytes_accessed", ())) == K:
                put(kg, "bytes_accessed", w.meta["kernel_bytes_accessed"], np.int64)
            if len(w.meta.get("kernel_class", ())) == K:
                kg.create_dataset("cost_class", data=list(w.meta["kernel_class"]), dtype=str_dt)
            ig = f.create_group("incidence")
            for n in _CSR:
                put(ig, n, getattr(w, n), np.int32 if n.endswith("idx") else np.int64)
            f.attrs["complete"] = 1
    except OSError as e:
        raise InputError(f"cannot write the workload trace ({e}); nothing was written", path=path) from None


def _bad(path, msg):
    return InputError(f"not a valid workload trace: {msg}", path=path)


def _py(v):
    if isinstance(v, bytes):
        return v.decode()
    return v.item() if isinstance(v, np.generic) else v


def read_attrs(path) -> dict:
    """The root attributes and provenance of a workload trace (cheap: no arrays read)."""
    import h5py

    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError("workload trace not found", path=path)
    try:
        with h5py.File(path, "r") as f:
            a = {k: _py(v) for k, v in f.attrs.items()}
            if a.get("format") != FORMAT:
                raise _bad(path, f"format attribute is {a.get('format')!r}, expected {FORMAT!r}")
            a["provenance"] = (
                {k: _py(v) for k, v in f["provenance"].attrs.items()} if "provenance" in f else {}
            )
            return a
    except InputError:
        raise
    except Exception as e:  # h5py raises OSError, KeyError, ValueError on damaged files
        raise _bad(path, f"cannot be read as HDF5 ({type(e).__name__}: {e})") from None


def read_workload_h5(path) -> Workload:
    """The Workload of a trace file; a missing, damaged or inconsistent file is one
    InputError naming the file and what is wrong."""
    import h5py

    path = os.fspath(path)
    a = read_attrs(path)
    ver = a.get("version")
    if ver != VERSION:
        raise _bad(path, f"version {ver!r} (this g10fast reads version {VERSION})")
    if not a.get("complete"):
        raise _bad(path, "incomplete (no 'complete' attribute: the writer did not finish)")
    try:
        with h5py.File(path, "r") as f:

            def get(grp, n, dtype):
                if grp not in f or n not in f[grp]:
                    raise _bad(path, f"dataset /{grp}/{n} is missing")
                ds = f[grp][n]
                arr = np.asarray(ds[()], dtype=dtype)
                crc = ds.attrs.get("crc32")
                if crc is not None and int(crc) != _crc(np.asarray(ds[()])):
                    raise _bad(path, f"dataset /{grp}/{n} fails its checksum (damaged)")
                return arr

            def strs(grp, n, required=True):
                if grp not in f or n not in f[grp]:
                    if required:
                        raise _bad(path, f"dataset /{grp}/{n} is missing")
                    return None
                return [s.decode() if isinstance(s, bytes) else str(s) for s in f[grp][n][()]]

            K, T = int(a["num_kernels"]), int(a["num_tensors"])
            kern = {n: get("kernels", n, np.int64) for n in _KERNEL_INT}
            ws_t = get("kernels", "workspace_tensor", np.int32)
            flops = get("kernels", "flops", np.float64)
            ten = {n: get("tensors", n, np.int64) for n in ("raw_size", "size", "address")}
            is_global = get("tensors", "is_global", np.uint8).astype(bool)
            csr = {n: get("incidence", n, np.int32 if n.endswith("idx") else np.int64) for n in _CSR}
            names = strs("kernels", "name")
            parents = strs("kernels", "parent")
            smeta = {m: strs("kernels", m.removeprefix("kernel_"), False) for m in KERNEL_STR_META}
            tnames = strs("tensors", "name", False)
            tnum = {
                m: get("tensors", m.removeprefix("tensor_"), np.int64)
                for m in TENSOR_NUM_META
                if m.removeprefix("tensor_") in f["tensors"]
            }
            if "bytes_accessed" in f["kernels"]:
                tnum["kernel_bytes_accessed"] = get("kernels", "bytes_accessed", np.int64)
            cls = strs("kernels", "cost_class", False)
    except InputError:
        raise
    except Exception as e:
        raise _bad(path, f"cannot be read ({type(e).__name__}: {e})") from None
    try:
        meta = json.loads(a.get("meta_json", "{}"))
    except ValueError:
        raise _bad(path, "meta_json attribute is not JSON") from None
    _check(path, K, T, kern, ws_t, ten, is_global, csr, names, parents, int(a["weights_bytes"]))
    for m, v in smeta.items():
        if v is not None and any(v):
            meta[m] = v
    if "kernel_op" in meta or "fusion" in meta:
        meta["kernel_flops"] = flops
    if tnames is not None:
        meta["tensor_name"] = tnames
    meta.update(tnum)
    if cls is not None:
        meta["kernel_class"] = cls
    meta["trace_file"] = os.path.abspath(path)
    return Workload(
        name=str(a["name"]),
        batch_size=int(a["batch_size"]),
        raw_size=ten["raw_size"],
        size=ten["size"],
        is_global=is_global,
        address=ten["address"],
        weights_bytes=int(a["weights_bytes"]),
        kernel_name=names,
        kernel_parent=parents,
        in_ptr=csr["in_ptr"],
        in_idx=csr["in_idx"],
        out_ptr=csr["out_ptr"],
        out_idx=csr["out_idx"],
        exec_cycles=kern["exec_cycles"],
        input_pf_cycles=kern["input_pf_cycles"],
        pf_cycles=kern["pf_cycles"],
        workspace_bytes=kern["workspace_bytes"],
        workspace_tensor=ws_t,
        meta=meta,
    )


def _check(path, K, T, kern, ws_t, ten, is_global, csr, names, parents, W):
    def need(cond, msg):
        if not cond:
            raise _bad(path, msg)

    for n, v in list(kern.items()) + [("workspace_tensor", ws_t)]:
        need(v.shape == (K,), f"/kernels/{n} has shape {v.shape}, expected ({K},)")
    need(len(names) == K and len(parents) == K, "kernel name/parent lists are not K long")
    for n, v in list(ten.items()) + [("is_global", is_global)]:
        need(v.shape == (T,), f"/tensors/{n} has shape {v.shape}, expected ({T},)")
    for side in ("in", "out"):
        ptr, idx = csr[f"{side}_ptr"], csr[f"{side}_idx"]
        need(
            ptr.shape == (K + 1,) and ptr[0] == 0 and np.all(np.diff(ptr) >= 0) and ptr[-1] == idx.shape[0],
            f"/incidence/{side}_ptr is not a CSR row pointer",
        )
        need(
            idx.size == 0 or (idx.min() >= 0 and idx.max() < T),
            f"/incidence/{side}_idx names a tensor outside 0..{T - 1}",
        )
        rows_ok = np.ones(idx.size, bool)
        if idx.size > 1:
            same_row = np.repeat(np.arange(K), np.diff(ptr))
            d = np.diff(idx.astype(np.int64))
            rows_ok = (d > 0) | (same_row[1:] != same_row[:-1])
        need(bool(np.all(rows_ok)), f"/incidence/{side}_idx rows are not sorted and unique")
    e, i, p = kern["exec_cycles"], kern["input_pf_cycles"], kern["pf_cycles"]
    need(bool(np.all(e > 0)), "a kernel has exec_cycles <= 0")
    need(bool(np.all(e <= i) and np.all(i <= p)), "kernel times break exec <= input_pf <= pf")
    need(bool(np.all(ten["raw_size"] >= 0)), "a tensor has a negative size")
    need(
        bool(np.array_equal(ten["size"], page_round(ten["raw_size"]))),
        f"/tensors/size is not raw_size rounded up to {PAGE_SIZE} bytes",
    )
    addr, Wc = address_layout(ten["size"], is_global)
    need(
        bool(np.array_equal(addr, ten["address"])) and Wc == W,
        "/tensors/address is not the two-space bump layout of the sizes",
    )
    need(
        bool(np.all((ws_t == -1) | ((ws_t >= 0) & (ws_t < T)))),
        "/kernels/workspace_tensor names a tensor outside the file",
    )


def trace_workload(path, freq_ghz: float = 1.2, kernel_speedup: float = 1.0) -> Workload:
    """The trace's Workload on a system clocked at `freq_ghz`: cycles rescaled when the file
    counts them in another clock (trunc(c * f_new / f_file), at least 1, order kept), and
    `kernel_speedup` applied as the artifact applies it (the same absolute cut from all three
    times)."""
    import dataclasses
    import math

    from g10fast.workload.times import frequency_hz

    w = read_workload_h5(path)
    f_file = int(read_attrs(path)["freq_hz"])
    f = frequency_hz(freq_ghz)
    if f == f_file and kernel_speedup == 1.0:
        return w
    if not (math.isfinite(kernel_speedup) and kernel_speedup > 0):
        raise InputError(f"must be a positive number, got {kernel_speedup!r}", param="kernel_speedup")
    c = [
        np.trunc(x.astype(np.float64) * (float(f) / float(f_file)))
        for x in (w.exec_cycles, w.input_pf_cycles, w.pf_cycles)
    ]
    delta = c[0] - c[0] / float(kernel_speedup)
    e = np.maximum(np.trunc(c[0] - delta).astype(np.int64), 1)
    i = np.maximum(np.trunc(c[1] - delta).astype(np.int64), e)
    p = np.maximum(np.trunc(c[2] - delta).astype(np.int64), i)
    return dataclasses.replace(w, exec_cycles=e, input_pf_cycles=i, pf_cycles=p)


def trace_shape(path):
    """The ArtifactShape a trace was written with (O-15's keys)."""
    from g10fast.workload.model import ArtifactShape

    a = read_attrs(path)
    return ArtifactShape(
        bool(int(a.get("transformer", 0))), int(a.get("trans_borden", 184)), int(a.get("batch_size", 0))
    )
