"""Progress reporting for the command line; the library never prints.

The engines take a `progress(done, total)` callback (kernels simulated) and the sweep runner
a `progress.update(label, status, seconds)` object (points stored); the reporters here turn
them into

* a tqdm bar on stderr when stderr is a terminal (or when forced): one bar per run, so one
  per policy in a comparison, each left on its own line when the run ends; one bar for a
  sweep, whose postfix names the last point stored and counts the points that were not ok;
* otherwise (a log file, a pipe, CI) one plain line at most every `interval` seconds, and
  one at the end: done/total, percentage, rate, elapsed time and the estimated time left.

The interval is 5 s, or $G10FAST_PROGRESS_INTERVAL seconds.

Sweeps have one bar, not one per worker: the workers are separate processes (a spawn pool
or a Dask cluster) that hand back a point only when it is finished, so a per-worker bar
would need a second channel from every engine call back to this process; the bar's postfix
says which point finished last instead.
"""

from __future__ import annotations

import math
import os
import sys
import time

INTERVAL_ENV = "G10FAST_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 5.0

_open: list = []  # reporters with a live tqdm bar, closed by close_all()


def line_interval(default: float = DEFAULT_INTERVAL) -> float:
    """Seconds between two plain progress lines: $G10FAST_PROGRESS_INTERVAL, else `default`."""
    text = os.environ.get(INTERVAL_ENV)
    if text is None:
        return default
    try:
        v = float(text)
    except ValueError:
        return default
    return v if v >= 0 and math.isfinite(v) else default


def fmt_duration(s: float) -> str:
    """3s, 2m05s, 1h02m03s; ? when unknown."""
    if s != s or s in (float("inf"), float("-inf")):
        return "?"
    s = int(round(max(s, 0.0)))
    h, r = divmod(s, 3600)
    m, sec = divmod(r, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


class _Reporter:
    """A tqdm bar or plain lines on `stream` for one count that goes from 0 to `total`."""

    def __init__(
        self,
        label: str,
        unit: str,
        *,
        enabled: bool = True,
        stream=None,
        bar: bool | None = None,
        interval: float | None = None,
    ):
        self.label = label
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        if bar is None:
            try:
                bar = self.stream.isatty()
            except (AttributeError, ValueError):
                bar = False
        self.bar_mode = bool(bar)
        self.interval = line_interval() if interval is None else float(interval)
        self.t0 = time.perf_counter()
        self.last_line = float("-inf")
        self.bar = None
        self.finished = False
        #: (time, done) of the first report: the rate and the ETA count from there, since the
        #: time before it is start-up (Numba compiling the engine, tens of seconds on a cold
        #: cache), not work: 1 kernel in 41 s would promise 2h23m for 3,000 kernels
        self.first: tuple | None = None

    def _show(self, done: int, total: int, postfix: str = "") -> None:
        if not self.enabled or self.finished:
            return
        final = total > 0 and done >= total
        if self.first is None:
            self.first = (time.perf_counter(), done)
        if self.bar_mode:
            self._show_bar(done, total, postfix)
        else:
            now = time.perf_counter()
            if final or now - self.last_line >= self.interval:
                self.last_line = now
                self.stream.write(self.line(done, total, now, postfix) + "\n")
                self.stream.flush()
        if final:
            self.close()

    def _show_bar(self, done: int, total: int, postfix: str) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                desc=self.label,
                unit=self.unit,
                file=self.stream,
                dynamic_ncols=True,
                mininterval=0.2,
                leave=True,
            )
            # elapsed counts from the reporter's start; the rate and the ETA from the first
            # report (tqdm's rate is (n - initial) / elapsed until its first smoothed step,
            # which is measured from last_print_t / last_print_n)
            now = time.perf_counter()
            self.bar.start_t -= now - self.t0
            self.bar.initial = self.bar.n = self.bar.last_print_n = done
            self.bar.last_print_t = now
            _open.append(self)
        if self.bar.total != total:
            self.bar.total = total
        if postfix:
            self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.update(done - self.bar.n)

    def line(self, done: int, total: int, now: float, postfix: str = "") -> str:
        el = now - self.t0
        t1, d1 = self.first if self.first is not None else (self.t0, 0)
        rate = (done - d1) / (now - t1) if now > t1 and done > d1 else float("nan")
        left = (total - done) / rate if rate > 0 else (0.0 if done >= total else float("nan"))
        pct = 100.0 * done / total if total else 100.0
        r = f"{rate:,.1f}" if rate == rate else "?"
        s = (
            f"{self.label}: {done:,}/{total:,} {self.unit}s ({pct:.1f}%), {r} {self.unit}s/s, "
            f"{fmt_duration(el)} elapsed, ETA {fmt_duration(left)}"
        )
        return s + (f"; {postfix}" if postfix else "")

    def close(self) -> None:
        self.finished = True
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self in _open:
            _open.remove(self)


class RunProgress(_Reporter):
    """The `progress(done, total)` callback of one simulation (kernels simulated)."""

    def __init__(self, label: str, **kw):
        super().__init__(label, "kernel", **kw)

    def __call__(self, done: int, total: int) -> None:
        self._show(int(done), int(total))


class SweepProgress(_Reporter):
    """The sweep runner's reporter: `update(label, status, seconds)` once per point stored."""

    def __init__(
        self,
        total: int,
        *,
        stream=None,
        enabled: bool = True,
        tty: bool | None = None,
        interval: float | None = None,
    ):
        super().__init__(
            "sweep", "point", enabled=enabled and total > 0, stream=stream, bar=tty, interval=interval
        )
        self.total = total
        self.done = self.bad = 0

    def update(self, label: str, status: str, seconds: float) -> None:
        self.done += 1
        self.bad += status != "ok"
        post = f"last: {label} {status} {seconds:.1f}s"
        if self.bad:
            post = f"{self.bad} not ok, " + post
        self._show(self.done, self.total, post)


def close_all() -> None:
    """Close every bar still open (a run that ended in an error), so that the message that
    follows starts on a line of its own."""
    for r in list(_open):
        r.close()
