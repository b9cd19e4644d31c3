"""How far the host runs ahead of the GPU: the kernel boundary by which each kernel is launched.

A training loop launches kernels asynchronously; the host gets ahead of the GPU until either
the stream's launch queue is full (a launch then blocks until a queued kernel finishes) or
the script reads a value back from the GPU (`loss.item()`), which waits for every kernel
launched so far. A policy that acts at launch time (PUMP's prefetch, E1 of
specs/seed-policies.md §1.4) can act no earlier than that launch.

Time on this clock is counted in kernel boundaries, not cycles: `launched_by(...)[g] = j`
means kernel g (of the flattened sequence g = iteration * K + k) has been launched by the
start of kernel j, the earliest boundary the bounds allow. The host's own cost per launch
(4-5 µs, `specs/uvm-hardware-facts.md` §4.1) is not modelled: it moves a launch later than
this only while the GPU's kernels are shorter than the host's work per launch
(`host_bound_kernels` counts them).

    L = launched_by(K, n_iter, LaunchOptions(), sync_kernel(workload))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from g10fast.errors import InputError

SYNCS = ("loss", "iteration", "none")


@dataclass(frozen=True)
class LaunchOptions:
    """The host's run-ahead bounds, each with the real system's default."""

    #: launches a stream holds before a further launch blocks until a queued kernel finishes:
    #: "the buffer size is about 1000 kernels" (a 190 µs kernel launched 10,000 times: the
    #: first ~1000 launches took 4-5 µs, each later one about a kernel's time; the same per
    #: stream with three streams): NVIDIA forum thread 68937 and StackOverflow 53970187
    #: (specs/uvm-hardware-facts.md §4.1); 0: unbounded
    queue_depth: int = 1000
    #: where the training loop reads a value back (a device-wide wait for every kernel
    #: launched so far): "loss" (`loss.item()` right after the forward pass's loss, once per
    #: iteration, before backward: pytorch/examples imagenet/main.py train(), which read
    #: `loss.data[0]` the same way in its 2018 version; TF1's `session.run` returns the
    #: fetched loss likewise), "iteration" (at the iteration's last kernel), "none"
    sync: str = "loss"

    def check(self, prefix: str = "policy") -> LaunchOptions:
        if (
            isinstance(self.queue_depth, bool)
            or not isinstance(self.queue_depth, int)
            or self.queue_depth < 0
        ):
            raise InputError(
                f"must be an integer >= 0 (0: unbounded), got {self.queue_depth!r}",
                param=f"{prefix}.launch_queue_depth",
            )
        if self.sync not in SYNCS:
            raise InputError(f"must be one of {', '.join(SYNCS)}, got {self.sync!r}", param=f"{prefix}.sync")
        return self


def sync_kernel(kernel_name, sync: str) -> int:
    """The kernel (0..K-1) after which the loop waits for the GPU, -1 for none: the last
    `makeLoss*` kernel for "loss" (the iteration's last kernel when the model has none), the
    last kernel for "iteration"."""
    K = len(kernel_name)
    if sync == "none" or K == 0:
        return -1
    if sync == "loss":
        for k in range(K - 1, -1, -1):
            if str(kernel_name[k]).startswith("makeLoss"):
                return k
    return K - 1


def launched_by(K: int, n_iter: int, opts: LaunchOptions, sync_k) -> np.ndarray:
    """int64[n_iter * K]: per kernel g, the first kernel at whose start the host has launched
    it. Bounds: no launch before the start of kernel g - queue_depth + 1 (kernels
    g - depth + 1 .. g are then queued: kernel g - depth has finished); none after a sync
    kernel s (global index) before s has ended, i.e. before the start of s + 1; never later
    than g itself, never before an earlier kernel's launch (the host launches in order).
    sync_k: one kernel (0..K-1, -1: none) or several (an array: e.g. the loss and every
    kernel after which the allocator calls a synchronising cudaFree), the same in every
    iteration."""
    opts.check()
    S = np.unique(np.atleast_1d(np.asarray(sync_k, dtype=np.int64)))
    S = S[S >= 0]
    if len(S) and (S[-1] >= K):
        raise InputError(f"sync kernel {int(S[-1])} outside 0..{K - 1}", param="policy.sync")
    n = K * n_iter
    g = np.arange(n, dtype=np.int64)
    out = np.zeros(n, np.int64)
    if opts.queue_depth:
        out = np.maximum(out, g - opts.queue_depth + 1)
    if len(S) and n:
        gs = (np.arange(n_iter, dtype=np.int64)[:, None] * K + S[None, :]).ravel()
        i = np.searchsorted(gs, g, side="left") - 1  # the last sync strictly before g
        out = np.where(i >= 0, np.maximum(out, gs[np.maximum(i, 0)] + 1), out)
    out = np.minimum(np.maximum.accumulate(out), g) if n else out
    return out


def host_bound_kernels(exec_seconds: np.ndarray, launch_us: float = 5.0) -> int:
    """How many kernels run shorter than one launch of the host (`launch_us`, 4-5 µs in the
    forum's measurement): only behind those can the host fall behind the GPU."""
    return int((np.asarray(exec_seconds) * 1e6 < launch_us).sum())
