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

    def add(self, resource: str, duration_ns, deps=(), *, label: str = "", kind: str = "",
            nbytes: int = 0, after: int | None = None) -> int:
        """Queue an operation; returns its id. `after`: an absolute time (ns) it may not
        start before (a host decision taken at that time)."""
        d = int(np.ceil(duration_ns))
        if d < 0:
            raise InputError(f"a negative duration ({duration_ns}) for {label or resource}",
                             param="timeline")
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
        self.free[resource] = s + d
        self.last[resource] = len(self.finish) - 1
        return len(self.finish) - 1

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
        return int(sum(f - s for r, k, s, f in zip(self.resource, self.kind, self.start,
                                                   self.finish)
                       if (resource is None or r == resource) and (kind is None or k == kind)))

    def bytes_of(self, kind: str) -> int:
        return int(sum(b for k, b in zip(self.kind, self.nbytes) if k == kind))

    def arrays(self) -> dict:
        """Column arrays for traces and figures."""
        return {"resource": list(self.resource), "kind": list(self.kind),
                "label": list(self.label),
                "start_ns": np.asarray(self.start, np.int64),
                "end_ns": np.asarray(self.finish, np.int64),
                "bytes": np.asarray(self.nbytes, np.int64)}
