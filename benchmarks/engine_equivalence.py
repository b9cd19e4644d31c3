"""Bit-for-bit equivalence check of the page engine (g10fast.engine.page.simulate_pages).

Runs 82 small random workloads (30-200 GPU frames, 0-300 host frames, 2-5 iterations)
under lru, prefetch_lru with random hints (prefetch, pre-evict, pre-deallocate), deepUM
with look-ahead hints, and deepUM under pressure (wide window, random hints too), plus one
ideal-mode run: 329 cases, each without and with a trace collector, some also with tiny
queue and event buffers and a progress callback (705 runs). It stores or compares all
that the engine returns: kernel rows, pcie counters, transfer boundaries, gpu/host use,
warnings, amplification, the final page state, the collected trace events and progress
calls (or the error raised). Save the reference with the engine to compare against (e.g.
before a change), then check after each change.

    python benchmarks/engine_equivalence.py save  [DIR]   # record reference outputs
    python benchmarks/engine_equivalence.py check [DIR]   # compare with them

DIR defaults to /tmp/g10fast_engine_ref. The final page state is compared on its low four
bits (location, in-transfer, wait-set); the high bits are the engine's private LRU
generation tag and are compared only when --full-pstate is given.

--models adds the artifact's BERT-128 and ResNet152-256 (lru, a traced lru run, and
prefetch_lru / deepUM with the hints of the original binary's prefetch_guide.config), from
../shared next to the repository (skipped when absent), and prints their run times.
--lru-int64 forces the engine's int64 LRU entries (used above 2**27 pages).
--engine bulk / per-page runs the page engine with its bulk paths on / off (default: the
engine's default, g10fast.engine.page.BULK_DEFAULT); --every N checks only every N-th
synthetic case (a quick subset while iterating). --kept-states runs them all on the page
states one process keeps from run to run (`g10fast.engine.page.keep_buffers`, a sweep
worker's way).

Event streams are compared row for row, or, where two runs group pages into rows differently
(a traced bulk run writes ranges of pages, ticks and a fault scan's runs, trace schema 4), by
their per-page events (`g10fast.trace_ranges.normal_form`); a model run's rows are kept in
DIR/model_events.npz.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from g10fast.engine.page import simulate_pages
from g10fast.workload.model import PAGE_SIZE, Graph, build_workload, csr_from_lists

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from synth import Collector  # noqa: E402  (the engine tests' trace sink)

NOT_PRESENT, IN_SSD, IN_CPU, IN_GPU, NOT_KNOWN = 0, 1, 2, 3, 4

BASE = dict(
    num_iteration=2,
    is_UVM=1,
    use_prefetch=0,
    eviction_policy="LRU",
    migration_policy="OURS",
    prefetch_degree=-1,
    GPU_frequency_GHz=1.2,
    GPU_memory_size_GB=40.0,
    CPU_memory_line_GB=128.0,
    GPU_PCIe_bandwidth_GBps=15.754,
    CPU_PCIe_bandwidth_GBps=15.754,
    SSD_PCIe_bandwidth_GBps=3.2,
    PCIe_batch_size_page=50,
    GPU_malloc_uspB=8.14e-7,
    system_latency_us=45,
    SSD_latency_us=20,
)


def random_workload(rng, frames, long=False):
    """A random Workload whose every kernel fits in `frames` GPU pages (`long`: more kernels
    and tensors, so that the LRU list wraps and compacts)."""
    K = int(rng.integers(30, 70)) if long else int(rng.integers(3, 16))
    T = int(rng.integers(40, 90)) if long else int(rng.integers(4, 32))
    maxp = int(rng.integers(1, max(2, frames // 3)))
    pages = rng.integers(1, maxp + 1, size=T)
    raw = pages * PAGE_SIZE - rng.integers(0, PAGE_SIZE, size=T)
    is_global = rng.random(T) < rng.uniform(0.1, 0.5)
    ins = [set() for _ in range(K)]
    outs = [set() for _ in range(K)]
    for t in range(T):
        if is_global[t]:
            for k in rng.choice(K, size=int(rng.integers(1, min(K, 4) + 1)), replace=False):
                ins[k].add(t)
                if rng.random() < 0.3:
                    outs[k].add(t)
        else:
            p = int(rng.integers(0, K))
            outs[p].add(t)
            later = np.arange(p + 1, K)
            n = min(len(later), int(rng.integers(0, 4)))
            for k in rng.choice(later, size=n, replace=False) if n else []:
                ins[k].add(t)
                if rng.random() < 0.15:
                    outs[k].add(t)
    ws = np.where(rng.random(K) < 0.3, rng.integers(1, max(2, maxp), size=K), 0)
    for k in range(K):
        if not ins[k] and not outs[k]:
            outs[k].add(int(rng.integers(0, T)))
        while True:
            req = sorted(ins[k] | outs[k])
            if sum(int(pages[t]) for t in req) + int(ws[k]) <= frames or len(req) == 1:
                break
            t = req[int(rng.integers(0, len(req)))]
            ins[k].discard(t)
            outs[k].discard(t)
        if sum(int(pages[t]) for t in ins[k] | outs[k]) + int(ws[k]) > frames:
            ws[k] = 0
    in_ptr, in_idx = csr_from_lists([sorted(s) for s in ins])
    out_ptr, out_idx = csr_from_lists([sorted(s) for s in outs])
    g = Graph(
        name="eq",
        batch_size=1,
        raw_size=raw.astype(np.int64),
        is_global=is_global,
        kernel_name=[f"K{k}" for k in range(K)],
        kernel_parent=[""] * K,
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
    )
    exe = rng.integers(1_000, 400_000, size=K)
    if rng.random() < 0.3:
        exe[rng.integers(0, K)] = int(rng.integers(2_000_000, 30_000_000))  # long idle stretches
    inpf = np.maximum(exe, (exe * rng.uniform(0.8, 4.0, size=K)).astype(np.int64))
    pf = np.maximum(inpf, (inpf * rng.uniform(0.8, 4.0, size=K)).astype(np.int64))
    wsb = np.where(ws > 0, ws * PAGE_SIZE - rng.integers(0, PAGE_SIZE, size=K), 0)
    return build_workload(g, exe, inpf, pf, wsb)


def random_hints(rng, w):
    K = w.num_kernels
    used = sorted(set(w.in_idx.tolist()) | set(w.out_idx.tolist()))
    while True:
        hints = []
        for _ in range(int(rng.integers(2, 4 * K + 3))):
            to = int(rng.choice([IN_GPU, IN_GPU, IN_GPU, IN_SSD, IN_CPU, NOT_PRESENT]))
            hints.append((int(rng.integers(0, K + 1)), int(rng.choice(used)), NOT_KNOWN, to))
        if len({h[0] % K for h in hints}) >= 2:
            return hints


def deepum_hints(w, ahead=(2,)):
    """DeepUM-style hints: at kernel k, prefetch the tensors of kernels k + a, a in `ahead`."""
    K = w.num_kernels
    hints = []
    for k in range(K):
        for a in ahead:
            j = (k + a) % K
            for t in sorted(set(w.inputs(j).tolist()) | set(w.outputs(j).tolist())):
                hints.append((k, t, NOT_KNOWN, IN_GPU))
    return hints


def make_cases(n_workloads=70, n_long=12, seed=12345):
    """(name, workload, config dict, hints) for every synthetic case, deterministically."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_workloads + n_long):
        frames = int(rng.integers(30, 201))
        host = int(rng.integers(0, 301))
        w = random_workload(rng, frames, long=i >= n_workloads)
        base = dict(BASE)
        base["GPU_memory_size_GB"] = frames * PAGE_SIZE / 2**30
        base["CPU_memory_line_GB"] = host * PAGE_SIZE / 2**30
        base["num_iteration"] = int(rng.integers(2, 4)) if i < n_workloads else 5
        if rng.random() < 0.25:
            base["PCIe_batch_size_page"] = int(rng.integers(5, 60))
        if rng.random() < 0.2:
            base["SSD_PCIe_bandwidth_GBps"] = float(rng.choice([6.4, 9.6, 12.8]))
        if rng.random() < 0.15:
            base["GPU_malloc_uspB"] = 8.14e-7 * float(rng.integers(5, 300))
        cases.append((f"w{i}-lru", w, dict(base), None))
        cfg = dict(base, use_prefetch=1)
        cases.append((f"w{i}-prefetch", w, cfg, random_hints(rng, w)))
        cfg = dict(
            base,
            use_prefetch=1,
            eviction_policy="DEEPUM",
            migration_policy="DEEPUM",
            prefetch_degree=int(rng.choice([0, 1, 2, 2, 3])),
        )
        cases.append((f"w{i}-deepum", w, cfg, deepum_hints(w)))
        # DeepUM under pressure: a wide window, look-ahead prefetches plus random hints
        # (pre-evictions and pre-deallocations too)
        cfg = dict(cfg, prefetch_degree=int(rng.integers(1, 7)))
        hints = deepum_hints(w, ahead=(1, 2, 3)) + random_hints(rng, w)
        cases.append((f"w{i}-deepum2", w, cfg, sorted(hints, key=lambda h: h[0])))
    # ideal mode (no page moves)
    w = cases[0][1]
    cases.append(("ideal", w, dict(cases[0][2], is_UVM=0), None))
    return cases


def run_case(w, cfg, hints, traced, small):
    """One run; `small`: tiny queue and event buffers (regrowth, pauses) and a progress
    callback whose calls are recorded."""
    kw = {}
    calls = []
    if small:
        kw = dict(
            queue_capacity=8, event_capacity=1 << 12, progress=lambda done, total: calls.append((done, total))
        )
    col = Collector() if traced else None
    try:
        r = simulate_pages(w, SimpleNamespace(**cfg), hints=hints, trace=col, keep_state=True, **kw)
    except Exception as e:  # errors are outcomes too
        return {"error": f"{type(e).__name__}: {e}", "events": col.events if traced else None}
    return {
        "kernels": r.kernels,
        "pcie": r.pcie,
        "boundaries": r.boundaries,
        "gpu_used": r.gpu_used,
        "host_used": r.host_used,
        "pstate": r.pstate,
        "live": r.live_page_evictions,
        "amp": tuple(r.amplification),
        "extra": dict(r.extra),
        "events": col.events if traced else None,
        "progress": calls,
    }


def run_all(every=1):
    out = {}
    for i, (name, w, cfg, hints) in enumerate(make_cases()):
        if i % every:
            continue
        out[name] = run_case(w, cfg, hints, False, False)
        out[name + "+trace"] = run_case(w, cfg, hints, True, i % 5 == 0)
        if i % 7 == 0:
            out[name + "+small"] = run_case(w, cfg, hints, False, True)
    return out


def _same_events(x, y, name):
    """Two runs' event streams are the same: row for row, or, where the rows group pages
    differently (a traced bulk run writes ranges of pages, ticks and a fault scan's runs,
    trace schema 4), the same per-page events (`g10fast.trace_ranges.normal_form`). A model's
    stream is kept as its row count and md5 with its rows in EVENTS_FILE (save), read back to
    compare."""
    if isinstance(x, tuple) and isinstance(y, tuple):
        if x == y[:2]:
            return True
        xr = _REF_EVENTS.get(name)
        if xr is None or len(y) < 3:
            return False
        x, y = xr, y[2]
    if x.shape == y.shape and np.array_equal(x, y):
        return True
    from g10fast.trace_ranges import normal_form

    return np.array_equal(normal_form(x), normal_form(y))


#: a model run's event rows (the reference's, read from EVENTS_FILE by check)
_REF_EVENTS: dict = {}
EVENTS_FILE = "model_events.npz"


def compare(ref, new, full_pstate=False):
    bad = []
    for name in ref:
        a, b = ref[name], new.get(name)
        if b is None:
            bad.append((name, "missing"))
            continue
        if ("error" in a) != ("error" in b):
            # (one run ended in an error, the other did not: their keys differ, so the
            # loop below alone would skip every key the error lacks)
            bad.append((name, "error: " + str(b.get("error", a.get("error")))))
            continue
        for key in a:
            if key not in b:
                continue  # (pstate_full_md5 without --full-pstate)
            x, y = a[key], b.get(key)
            if key == "pstate" and x is not None and y is not None and not full_pstate:
                x, y = x & 15, y & 15
            if key == "events" and x is not None and y is not None:
                same = _same_events(x, y, name)
            elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
                same = (
                    isinstance(x, np.ndarray)
                    and isinstance(y, np.ndarray)
                    and x.shape == y.shape
                    and np.array_equal(x, y)
                )
            else:
                same = x == y
            if not same:
                bad.append((name, key))
    return bad


# ------------------------------------------------------------------ the artifact's models

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
LOCATIONS = {
    "Not_Known": NOT_KNOWN,
    "In_gpu": IN_GPU,
    "In_cpu": IN_CPU,
    "In_ssd": IN_SSD,
    "Not_present": NOT_PRESENT,
}


def _model_workload(model, batch):
    from g10fast.workload.times import load_workload

    art = SHARED / "g10-artifact"
    if model == "BERT":
        from g10fast.workload.transformer import parse_transformer

        g = parse_transformer(str(art / "frontend/Nets/BERT_Base.txt"), batch, 210)
        base = art / f"results/BERT_Base/cudnn{batch}"
    else:
        from g10fast.workload.cnn import parse_cnn

        g = parse_cnn(str(art / "frontend/Nets/ResNet152.txt"), batch, 224, 224, "resnet")
        base = art / f"results/ResNet152/cudnn{batch}"
    return load_workload(g, f"{base}.txt", f"{base}InputPF.txt", f"{base}PF.txt", f"{base}Workspace.txt", 1.2)


def _artifact_hints(ref_dir):
    import gzip
    import re

    hints = []
    with gzip.open(ref_dir / "statistics/prefetch_guide.config.gz", "rt") as f:
        for line in f:
            m = re.match(r"Issued Time: (\d+) Tensor: (\d+) G:\S+ From: (\w+), To: (\w+)", line)
            if m:
                hints.append((int(m.group(1)), int(m.group(2)), LOCATIONS[m.group(3)], LOCATIONS[m.group(4)]))
    return hints


class _Hasher:
    """Trace sink that keeps the row count and an md5 of the events' first ten columns (the
    schema-1 row), and the rows themselves (for a comparison by `normal_form`)."""

    def __init__(self):
        import hashlib

        self.md5 = hashlib.md5()
        self.rows = 0
        self.parts = []

    def append(self, buf):
        b = np.ascontiguousarray(buf, dtype=np.int64)
        self.parts.append(b.copy())
        self.md5.update(np.ascontiguousarray(b[:, :10]).tobytes())
        self.rows += len(b)

    @property
    def events(self):
        return np.concatenate(self.parts) if self.parts else np.zeros((0, 10), np.int64)

    @property
    def n_events(self):
        return self.rows

    def rewind(self, n):
        if n != self.rows:
            raise RuntimeError("a hashing trace sink cannot rewind")


def run_models():
    import hashlib

    out = {}
    if not (SHARED / "g10-artifact").is_dir():
        print(f"  (no {SHARED}: models skipped)")
        return out
    for model, batch, label in (("BERT", 128, "BERT"), ("RESNET", 256, "ResNet152")):
        w = _model_workload(model, batch)
        runs = [("lru", dict(BASE), None, False), ("lru+trace", dict(BASE), None, True)]
        for pol in ("prefetch_lru", "deepUM"):
            ref_dir = SHARED / "reference" / f"{label}-{batch}-{pol}"
            if (ref_dir / "statistics/prefetch_guide.config.gz").is_file():
                cfg = dict(BASE, use_prefetch=1)
                if pol == "deepUM":
                    cfg.update(eviction_policy="DEEPUM", migration_policy="DEEPUM", prefetch_degree=8)
                runs.append((pol, cfg, _artifact_hints(ref_dir), False))
        for pol, cfg, hints, traced in runs:
            if traced and model != "BERT":
                continue
            sink = _Hasher() if traced else None
            t0 = time.time()
            r = simulate_pages(w, SimpleNamespace(**cfg), hints=hints, trace=sink, keep_state=True)
            dt = time.time() - t0
            name = f"{model}-{batch}-{pol}"
            print(f"  {name}: {dt:.2f} s", flush=True)
            out[name] = {
                "kernels": r.kernels,
                "pcie": r.pcie,
                "boundaries": r.boundaries,
                "gpu_used": r.gpu_used,
                "host_used": r.host_used,
                "live": r.live_page_evictions,
                "amp": tuple(r.amplification),
                "extra": dict(r.extra),
                "pstate_md5": hashlib.md5((r.pstate & 15).tobytes()).hexdigest(),
                "pstate_full_md5": hashlib.md5(r.pstate.tobytes()).hexdigest(),
                "events": (sink.rows, sink.md5.hexdigest(), sink.events) if traced else None,
            }
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["save", "check"])
    ap.add_argument("dir", nargs="?", default="/tmp/g10fast_engine_ref")
    ap.add_argument("--full-pstate", action="store_true")
    ap.add_argument("--models", action="store_true")
    ap.add_argument("--lru-int64", action="store_true")
    ap.add_argument(
        "--engine",
        choices=["default", "bulk", "per-page"],
        default="default",
        help="bulk: the bulk paths on; per-page: the reference engine; default: "
        "the engine's default (g10fast.engine.page.BULK_DEFAULT)",
    )
    ap.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="N",
        help="check: only every N-th synthetic case (a quick subset)",
    )
    ap.add_argument(
        "--kept-states",
        action="store_true",
        help="every run on the page states kept from run to run (keep_buffers, as sweep workers)",
    )
    a = ap.parse_args(argv)
    import g10fast.engine.page as page

    page.keep_buffers(a.kept_states)

    if a.lru_int64:
        page.LRU_INT32_PAGES = 0
    if a.engine != "default":
        page.BULK_DEFAULT = a.engine == "bulk"
    t0 = time.time()
    res = run_all(max(a.every, 1) if a.mode == "check" else 1)
    dt = time.time() - t0
    if a.models:
        models = run_models()
        if a.mode == "check" and not a.full_pstate:
            for r in models.values():
                r.pop("pstate_full_md5")
        rows = {k: r["events"][2] for k, r in models.items() if r.get("events") is not None}
        if a.mode == "save":
            for r in models.values():
                if r.get("events") is not None:
                    r["events"] = r["events"][:2]
            Path(a.dir).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(Path(a.dir) / EVENTS_FILE, **rows)
        elif (Path(a.dir) / EVENTS_FILE).is_file():
            with np.load(Path(a.dir) / EVENTS_FILE) as z:
                _REF_EVENTS.update({k: z[k] for k in z.files})
        res.update(models)
    path = Path(a.dir) / "synthetic.pkl"
    n_err = sum(1 for r in res.values() if "error" in r)
    if a.mode == "save":
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump(res, f)
        print(f"saved {len(res)} runs ({n_err} ending in an error) to {path} in {dt:.1f} s")
        return 0
    with open(path, "rb") as f:
        ref = pickle.load(f)
    if not a.models:
        ref = {k: v for k, v in ref.items() if not k.startswith(("BERT-", "RESNET-"))}
    if a.every > 1:
        ref = {k: v for k, v in ref.items() if k in res or k.startswith(("BERT-", "RESNET-"))}
    elif not any(k.startswith(("BERT-", "RESNET-")) for k in ref):
        print("  (the reference holds no model runs: save it with --models)")
    bad = compare(ref, res, a.full_pstate)
    print(f"compared {len(ref)} runs ({n_err} ending in an error) in {dt:.1f} s: {len(bad)} differences")
    for name, key in bad[:40]:
        print("  DIFF", name, key)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
