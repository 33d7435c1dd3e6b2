"""Progress lines for long loops (issue 37): done/total, rate and the estimated time left.

API::

    from dpaudit.progress import Progress

    with Progress("Recipe B chi sums", total=n_blocks, unit="blocks", log=log) as progress:
        for block in blocks:
            ...
            progress.advance()            # or advance(k) for k units

* A line ``<label>: <done>/<total> <unit> (<pct>%), <rate> <unit>/s, ETA <s> s, <elapsed> s elapsed``
  goes to ``log`` (a ``logging.Logger``; default the ``dpaudit.progress`` logger, which a job's
  ``dpaudit.logs.job_logging`` sends to the job's log file) whenever at least ``interval``
  seconds have passed since the last line (or since the start). ``advance`` only reads the
  clock, so calling it per block costs nothing measurable. A loop shorter than the interval
  logs nothing; one that logged gets a closing ``<label>: done, <total> <unit> in <s> s`` line.
* ``interval``: the argument, else the environment value ``DPAUDIT_PROGRESS_SECONDS`` (tests set
  it small), else 10 s.
* The terminal: a job's stdout and stderr go to its log file (``job_logging``), so a watcher
  of Snakemake's terminal would see nothing for minutes. Once the job has run for more than
  ``DPAUDIT_PROGRESS_TERMINAL_SECONDS`` (default 60 s, counted from the job's start), a progress
  line is also written to the stderr the job was started with (``dpaudit.logs.terminal_write``,
  Snakemake's terminal on a workstation, the SLURM job's output file on a cluster), prefixed with
  the job's rule and wildcards, at most once per that many seconds per job: one line a minute
  per long job, not one per interval. Outside a job (tests, benches) nothing extra is written.
* ``Progress.total`` may be 0 (nothing to do: no line).

Import floor 0 (``logs`` only): every layer's loops may use it.
"""

from __future__ import annotations

import logging
import os
import time

from dpaudit import logs

__all__ = ["DEFAULT_INTERVAL", "Progress", "progress_interval", "terminal_interval"]

DEFAULT_INTERVAL = 10.0
DEFAULT_TERMINAL = 60.0
_LOG = logging.getLogger("dpaudit.progress")


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a number of seconds; unset it or "
                         f"give e.g. {name}=10") from None
    if not value >= 0:
        raise ValueError(f"environment variable {name}={raw!r} must be >= 0 seconds")
    return value


def progress_interval() -> float:
    """Seconds between progress lines: ``DPAUDIT_PROGRESS_SECONDS`` or 10."""
    return _seconds("DPAUDIT_PROGRESS_SECONDS", DEFAULT_INTERVAL)


def terminal_interval() -> float:
    """Seconds a job runs before (and between) its terminal lines: ``DPAUDIT_PROGRESS_TERMINAL_SECONDS`` or 60."""
    return _seconds("DPAUDIT_PROGRESS_TERMINAL_SECONDS", DEFAULT_TERMINAL)


def _duration(seconds: float) -> str:
    if not seconds < float("inf"):
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Progress of one loop (module docstring)."""

    def __init__(self, label: str, total: int, *, unit: str = "items", log: logging.Logger | None = None,
                 interval: float | None = None):
        self.label, self.total, self.unit = str(label), int(total), str(unit)
        self.log = log or _LOG
        self.interval = progress_interval() if interval is None else float(interval)
        self.done = 0
        self.start = self.last = time.monotonic()
        self.lines = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.finish()

    def finish(self) -> None:
        """The closing line of a loop that logged (the ``with`` block's end, for loops not in one)."""
        if self.lines:
            self.log.info("%s: done, %d %s in %s", self.label, self.done, self.unit,
                          _duration(time.monotonic() - self.start))

    def advance(self, units: int = 1) -> None:
        self.done += int(units)
        now = time.monotonic()
        if now - self.last >= self.interval and self.total > 0:
            self.last = now
            self.lines += 1
            line = self.line(now)
            self.log.info("%s", line)
            logs.terminal_write(line, every=terminal_interval())

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"{self.label}: {self.done}/{self.total} {self.unit} ({100.0 * self.done / self.total:.0f}%), "
                f"{rate:.3g} {self.unit}/s, ETA {_duration(max(left, 0.0))}, {_duration(elapsed)} elapsed")
