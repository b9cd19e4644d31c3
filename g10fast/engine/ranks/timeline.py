"""The step's resources: in-order queues, and links that several streams share. Times are
integer nanoseconds.

* An operation on an in-order resource (a CUDA stream's kernels, the host thread, the CPU's
  cores) starts when the resource's previous operation and every operation it depends on
  have ended: each executes its work in the order it was issued, as a stream or a thread
  does.
* A copy is issued on a CUDA stream and moves over a link (one direction of PCIe): it is
  ready when its stream's previous operation (kernel or copy) and its dependencies have
  ended, and it takes the link at the earliest time from then on that the link is free for
  its whole duration (copies of other streams issued earlier but not yet ready do not hold
  it up, as the copy engines serve whichever stream has work ready; a copy is not split).
  Its stream's next operation follows it.

    tl = Timeline()
    a = tl.add("gpu", 1_000, label="Linear_Forward")
    b = tl.add("d2h", 500, deps=(a,), label="grad slice", nbytes=4096, stream="gpu")
    tl.end(b)      # 1_500

`schedule_py` in tests/ is the plain twin of `add`'s rule.
"""

from __future__ import annotations

import bisect

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
        self.stream: list[str | None] = []
        #: a shared link's busy intervals, sorted by start: (start, end)
        self.spans: dict[str, list] = {}

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
        stream: str | None = None,
    ) -> int:
        """Queue an operation; returns its id. `after`: an absolute time (ns) it may not
        start before (a host decision taken at that time). `stream`: the operation is a copy
        issued on that stream, over `resource`, a link the streams share (the module's
        docstring)."""
        d = int(np.ceil(duration_ns))
        if d < 0:
            raise InputError(f"a negative duration ({duration_ns}) for {label or resource}", param="timeline")
        if (stream is None and resource in self.spans) or stream in self.spans or stream == resource:
            raise InputError(
                f"{label or resource}: a link takes copies issued on a stream, a stream is not a link",
                param="timeline",
            )
        s = self.free.get(resource if stream is None else stream, self.t0)
        for i in deps:
            if i is not None and self.finish[i] > s:
                s = self.finish[i]
        if after is not None and after > s:
            s = int(after)
        if stream is not None:
            spans = self.spans.setdefault(resource, [])
            s = _first_gap(spans, s, d)
            if d:
                bisect.insort(spans, (s, s + d))
        self.resource.append(resource)
        self.start.append(s)
        self.finish.append(s + d)
        self.label.append(label)
        self.kind.append(kind or resource)
        self.nbytes.append(int(nbytes))
        self.deps.append(tuple(i for i in deps if i is not None))
        self.after.append(int(after) if after is not None else self.t0)
        self.stream.append(stream)
        i = len(self.finish) - 1
        if stream is None:
            self.free[resource] = s + d
            self.last[resource] = i
        else:
            self.free[stream] = s + d
            self.last[stream] = i
            if s + d >= self.free.get(resource, self.t0):  # the link's last to end
                self.free[resource] = s + d
                self.last[resource] = i
        return i

    def check(self) -> int:
        """The timeline's invariants (AssertionError naming the operation): every operation
        starts once its dependencies ended and its resource's (a copy: its stream's)
        previous operation ended, at the earliest such time (nothing waits for nothing; a
        copy: at the link's first gap from then on that holds it, among the copies queued
        before it), and lasts >= 0; no two copies overlap on a link. Returns the number of
        operations checked."""
        prev: dict[str, int] = {}
        spans: dict[str, list] = {}
        for i, r in enumerate(self.resource):
            s, f = self.start[i], self.finish[i]
            q = self.stream[i]
            assert f >= s, f"operation {i} ({self.label[i]}) ends before it starts"
            ready = max(
                [prev.get(r if q is None else q, self.t0), self.after[i]]
                + [self.finish[d] for d in self.deps[i]]
            )
            for d in self.deps[i]:
                assert d < i, f"operation {i} ({self.label[i]}) depends on a later one ({d})"
            if q is not None:
                sp = spans.setdefault(r, [])
                for a, b in sp:
                    assert b <= s or a >= f or s == f, f"copy {i} ({self.label[i]}) overlaps another on {r}"
                ready = _first_gap(sp, ready, f - s)
                if f > s:
                    bisect.insort(sp, (s, f))
            assert s == ready, (
                f"operation {i} ({self.label[i]}) on {r} starts at {s} ns, not when it is ready ({ready} ns)"
            )
            prev[r if q is None else q] = f
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


def _first_gap(spans: list, ready: int, d: int) -> int:
    """The earliest time >= ready at which [t, t + d) overlaps none of `spans` (busy
    intervals of positive length sorted by start, not overlapping one another)."""
    t = ready
    if d == 0:
        return t
    k = bisect.bisect_left(spans, (t, t))
    if k > 0 and spans[k - 1][1] > t:  # the interval that holds t
        t = spans[k - 1][1]
    while k < len(spans):
        a, b = spans[k]
        if a >= t + d:
            break
        if b > t:
            t = b
        k += 1
    return t
