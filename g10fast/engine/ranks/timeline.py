"""The step's resources as in-order queues: an operation starts when its resource is free
and every operation it depends on has ended (a CUDA stream, one direction of a link, the
host thread, the CPU's cores: each executes its work in the order it was issued, as a
stream or a thread does). Times are integer nanoseconds.

    tl = Timeline()
    a = tl.add("gpu", 1_000, label="Linear_Forward")
    b = tl.add("d2h", 500, deps=(a,), label="grad slice", nbytes=4096)
    tl.end(b)      # 1_500

`schedule_py` in tests/ is the plain twin of `add`'s rule.
"""

from __future__ import annotations

import numpy as np

from g10fast.errors import InputError


class Timeline:
    """Operations of one simulated step: resource, start, end (ns), label, kind, bytes."""

    def __init__(self, start_ns: int = 0):
        self.t0 = int(start_ns)
        self.free: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.resource: list[str] = []
        self.start: list[int] = []
        self.finish: list[int] = []
        self.label: list[str] = []
        self.kind: list[str] = []
        self.nbytes: list[int] = []
        self.deps: list[tuple] = []
        self.after: list[int] = []

    def add(
        self,
        resource: str,
        duration_ns,
        deps=(),
        *,
        label: str = "",
        kind: str = "",
        nbytes: int = 0,
        after: int | None = None,
    ) -> int:
        """Queue an operation; returns its id. `after`: an absolute time (ns) it may not
        start before (a host decision taken at that time)."""
        d = int(np.ceil(duration_ns))
        if d < 0:
            raise InputError(f"a negative duration ({duration_ns}) for {label or resource}", param="timeline")
        s = self.free.get(resource, self.t0)
        for i in deps:
            if i is not None and self.finish[i] > s:
                s = self.finish[i]
        if after is not None and after > s:
            s = int(after)
        self.resource.append(resource)
        self.start.append(s)
        self.finish.append(s + d)
        self.label.append(label)
        self.kind.append(kind or resource)
        self.nbytes.append(int(nbytes))
        self.deps.append(tuple(i for i in deps if i is not None))
        self.after.append(int(after) if after is not None else self.t0)
        self.free[resource] = s + d
        self.last[resource] = len(self.finish) - 1
        return len(self.finish) - 1

    def check(self) -> int:
        """The timeline's invariants (AssertionError naming the operation): every operation
        starts once its dependencies ended and its resource's previous operation ended, at
        the earliest such time (nothing waits for nothing), and lasts >= 0. Returns the
        number of operations checked."""
        prev: dict[str, int] = {}
        for i, r in enumerate(self.resource):
            s, f = self.start[i], self.finish[i]
            assert f >= s, f"operation {i} ({self.label[i]}) ends before it starts"
            ready = max([prev.get(r, self.t0), self.after[i]] + [self.finish[d] for d in self.deps[i]])
            for d in self.deps[i]:
                assert d < i, f"operation {i} ({self.label[i]}) depends on a later one ({d})"
            assert s == ready, (
                f"operation {i} ({self.label[i]}) on {r} starts at {s} ns, not when it is ready ({ready} ns)"
            )
            prev[r] = f
        return len(self.resource)

    def bound(self) -> tuple:
        """A lower bound on the makespan from the work alone: each resource runs its
        operations one at a time, so the step lasts at least its busiest resource's total.
        -> (ns, resource)."""
        tot: dict[str, int] = {}
        for r, s, f in zip(self.resource, self.start, self.finish):
            tot[r] = tot.get(r, 0) + (f - s)
        if not tot:
            return 0, ""
        r = max(tot, key=tot.get)
        return tot[r], r

    def last_of(self, *resources: str) -> tuple:
        """The ids of the last operations queued on these resources (those that have one)."""
        return tuple(self.last[r] for r in resources if r in self.last)

    def end(self, i: int) -> int:
        return self.finish[i]

    def tail(self, resource: str) -> int:
        """When the resource's last queued operation ends (its start time if none)."""
        return self.free.get(resource, self.t0)

    @property
    def makespan(self) -> int:
        return max(self.finish, default=self.t0) - self.t0

    def busy(self, resource: str | None = None, kind: str | None = None) -> int:
        """Total ns of the operations on a resource (or of a kind)."""
        return int(
            sum(
                f - s
                for r, k, s, f in zip(self.resource, self.kind, self.start, self.finish)
                if (resource is None or r == resource) and (kind is None or k == kind)
            )
        )

    def bytes_of(self, kind: str) -> int:
        return int(sum(b for k, b in zip(self.kind, self.nbytes) if k == kind))

    def arrays(self) -> dict:
        """Column arrays for traces and figures."""
        return {
            "resource": list(self.resource),
            "kind": list(self.kind),
            "label": list(self.label),
            "start_ns": np.asarray(self.start, np.int64),
            "end_ns": np.asarray(self.finish, np.int64),
            "bytes": np.asarray(self.nbytes, np.int64),
        }
