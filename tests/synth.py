"""Small random workloads and tiny system configs for engine-versus-twin tests."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from g10fast.workload.model import PAGE_SIZE, Graph, build_workload, csr_from_lists

# G10 artifact defaults (simulator spec §2.5), for a system of a few dozen pages.
ARTIFACT_DEFAULTS = dict(
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

# Artifact policy names -> config keys (simulator spec §11).
POLICIES = {
    "lru": dict(use_prefetch=0, eviction_policy="LRU", migration_policy="OURS", prefetch_degree=-1),
    "prefetch_lru": dict(use_prefetch=1, eviction_policy="LRU", migration_policy="OURS", prefetch_degree=-1),
    "deepUM": dict(use_prefetch=1, eviction_policy="DEEPUM", migration_policy="DEEPUM", prefetch_degree=8),
}


def tiny_cfg(gpu_frames: int, host_frames: int, policy: str | None = None, **kw) -> SimpleNamespace:
    """Artifact defaults with a GPU of `gpu_frames` pages and host memory of `host_frames` pages.

    `policy` ("lru", "prefetch_lru", "deepUM") sets the policy keys; `kw` overrides any key."""
    d = dict(ARTIFACT_DEFAULTS)
    d["GPU_memory_size_GB"] = gpu_frames * PAGE_SIZE / 2**30
    d["CPU_memory_line_GB"] = host_frames * PAGE_SIZE / 2**30
    if policy is not None:
        d.update(POLICIES[policy])
    unknown = set(kw) - set(d)
    if unknown:
        raise KeyError(f"unknown config keys {sorted(unknown)}")
    d.update(kw)
    return SimpleNamespace(**d)


def make_workload(
    seed: int,
    n_kernels: int = 12,
    n_tensors: int = 30,
    max_pages: int = 40,
    max_kernel_pages: int | None = None,
    p_global: float = 0.3,
    p_workspace: float = 0.3,
    long_pf_kernels: int = 0,
):
    """A random valid Workload (built with build_workload).

    Tensors: globals (weights, read by 1-3 kernels, sometimes updated in place), activations
    (written by one kernel, read by 0-3 later kernels; 0 readers = write-only, death -1; some
    readers update them in place), and a few input-only non-globals (like the input batch).
    Every kernel's working set (inputs, outputs and workspace) is at most `max_kernel_pages`
    (default 3 * max_pages) pages, so a GPU of that many frames runs it.
    `long_pf_kernels` kernels get pf cycles >= 1.2e9 (1 s at 1.2 GHz) to exercise the
    non-degenerate branch of the stall model (O-1)."""
    rng = np.random.default_rng(seed)
    K, T = n_kernels, n_tensors
    cap = 3 * max_pages if max_kernel_pages is None else max_kernel_pages
    if cap < max_pages:
        raise ValueError("max_kernel_pages must be >= max_pages")
    pages = rng.integers(1, max_pages + 1, size=T)
    raw = pages * PAGE_SIZE - rng.integers(0, PAGE_SIZE, size=T)  # page_round restores
    kind = rng.choice(["global", "act", "input"], size=T, p=[p_global, 0.9 - p_global, 0.1])
    ins = [set() for _ in range(K)]
    outs = [set() for _ in range(K)]
    for t in range(T):
        if kind[t] == "global":
            for k in rng.choice(K, size=min(K, rng.integers(1, 4)), replace=False):
                ins[k].add(t)
                if rng.random() < 0.3:
                    outs[k].add(t)  # in-place update
        elif kind[t] == "input":
            for k in rng.choice(K, size=min(K, rng.integers(1, 3)), replace=False):
                ins[k].add(t)
        else:
            p = int(rng.integers(0, K))
            outs[p].add(t)
            later = np.arange(p + 1, K)
            n_read = min(len(later), int(rng.integers(0, 4)))
            for k in rng.choice(later, size=n_read, replace=False) if n_read else []:
                ins[k].add(t)
                if rng.random() < 0.15:
                    outs[k].add(t)  # in-place update
    ws_pages = np.where(rng.random(K) < p_workspace, rng.integers(1, max(2, max_pages // 2), K), 0)
    for k in range(K):
        if not ins[k] and not outs[k]:
            outs[k].add(int(rng.integers(0, T)))
        # shrink the working set to the cap (drop random tensors, keep at least one)
        while True:
            req = sorted(ins[k] | outs[k])
            if sum(int(pages[t]) for t in req) + int(ws_pages[k]) <= cap or len(req) == 1:
                break
            t = req[int(rng.integers(0, len(req)))]
            ins[k].discard(t)
            outs[k].discard(t)
        if sum(int(pages[t]) for t in ins[k] | outs[k]) + int(ws_pages[k]) > cap:
            ws_pages[k] = 0
    in_ptr, in_idx = csr_from_lists([sorted(s) for s in ins])
    out_ptr, out_idx = csr_from_lists([sorted(s) for s in outs])
    graph = Graph(
        name=f"synth{seed}",
        batch_size=1,
        raw_size=raw.astype(np.int64),
        is_global=(kind == "global"),
        kernel_name=[f"K{k}" for k in range(K)],
        kernel_parent=[f"{k}:synth" for k in range(K)],
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
        meta={"seed": seed},
    )
    exe = rng.integers(10_000, 1_000_000, size=K)
    input_pf = np.maximum(exe, (exe * rng.uniform(0.8, 4.0, size=K)).astype(np.int64))
    pf = np.maximum(input_pf, (input_pf * rng.uniform(0.8, 4.0, size=K)).astype(np.int64))
    if long_pf_kernels:
        for k in rng.choice(K, size=min(K, long_pf_kernels), replace=False):
            input_pf[k] = max(int(exe[k]), int(rng.integers(0, 2_500_000_000)))
            pf[k] = max(int(input_pf[k]), int(rng.integers(1_200_000_000, 3_700_000_000)))
    ws_bytes = np.where(ws_pages > 0, ws_pages * PAGE_SIZE - rng.integers(0, PAGE_SIZE, K), 0)
    return build_workload(graph, exe, input_pf, pf, ws_bytes)


def assert_same_runs(a, b, pstate: bool = True, extra: bool = False) -> None:
    """Two page-engine runs (PageRun) ended alike: kernels, traffic, transfer periods, memory
    use, amplification, live-page evictions, (`pstate`) the final page states, both kept
    (keep_state=True), and (`extra`) the engine's extra counters (pages left queued; a
    checked run adds its own)."""
    assert np.array_equal(a.kernels, b.kernels)
    assert np.array_equal(a.pcie, b.pcie)
    assert np.array_equal(a.boundaries, b.boundaries)
    assert (a.gpu_used, a.host_used, a.host_peak) == (b.gpu_used, b.host_used, b.host_peak)
    if pstate:
        assert a.pstate is not None and b.pstate is not None
        assert np.array_equal(a.pstate, b.pstate)
    assert a.amplification == b.amplification
    assert a.live_page_evictions == b.live_page_evictions
    assert not extra or a.extra == b.extra


def kernel_pages(workload) -> np.ndarray:
    """Pages of each kernel's working set (inputs and outputs, counted once)."""
    out = np.zeros(workload.num_kernels, dtype=np.int64)
    for k in range(workload.num_kernels):
        req = set(workload.inputs(k).tolist()) | set(workload.outputs(k).tolist())
        out[k] = sum(int(workload.size[t]) // PAGE_SIZE for t in req)
    return out


def random_hints(workload, seed: int, n_hints: int = 40) -> list:
    """Random G10-style hints (issued_time, tensor, from, to), stably sorted by issued_time.

    Kinds: prefetch / pre-alloc (NOT_KNOWN -> IN_GPU), pre-evict (-> IN_SSD / IN_CPU) and
    pre-dealloc (-> NOT_PRESENT); issued_time in [0, K] (K fires at kernel 0 of the next
    iteration). Only tensors used by some kernel are hinted; at least two kernels are hinted
    (O-29)."""
    from twin import IN_CPU, IN_GPU, IN_SSD, NOT_KNOWN, NOT_PRESENT

    rng = np.random.default_rng(seed)
    K = workload.num_kernels
    used = sorted(set(workload.in_idx.tolist()) | set(workload.out_idx.tolist()))
    to_choices = [IN_GPU, IN_GPU, IN_SSD, IN_CPU, NOT_PRESENT]
    hints = []
    while True:
        hints = [
            (int(rng.integers(0, K + 1)), int(rng.choice(used)), NOT_KNOWN, int(rng.choice(to_choices)))
            for _ in range(n_hints)
        ]
        if len({h[0] % K for h in hints}) >= 2:
            break
    return sorted(hints, key=lambda h: h[0])


class Collector:
    """A trace sink keeping a copy of every appended event buffer (the engines' `trace=`), as
    int64 [n, 12] (trace schema version 2): a ten-column buffer gets ticks 1 and period 0."""

    def __init__(self):
        self.parts = []

    def append(self, buf):
        from g10fast.trace_ranges import as_buffer

        self.parts.append(np.array(as_buffer(buf), dtype=np.int64, copy=True))

    @property
    def n_events(self):
        return sum(len(p) for p in self.parts)

    def rewind(self, n):
        self.parts = [self.events[:n]]

    @property
    def events(self):
        from g10fast.trace import N_COLS

        return np.concatenate(self.parts) if self.parts else np.zeros((0, N_COLS), np.int64)


def count_statistic(monkeypatch, slot: int, counter: list):
    """Make the page engine's run_engine add its statistic S[slot] (S_RP_COUNT, S_ES_COUNT)
    to counter[0] after each call, and reset it. Returns the run_engine it wraps."""
    from g10fast.engine.page import kernels as pk

    engine = pk.run_engine

    def counting(*a):
        status = engine(*a)
        counter[0] += int(a[8][slot])
        a[8][slot] = 0
        return status

    monkeypatch.setattr(pk, "run_engine", counting)
    return engine
