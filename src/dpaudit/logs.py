"""Logging for Snakemake script jobs.

The ``log:`` directive only names a file; it redirects nothing. Scripts call
``job_logging(snakemake)`` so that Python logging, warnings, anything written to
stdout/stderr by native libraries (TensorFlow's C++ logs) and the traceback of a
failure all land in the job's log file.

A job that Snakemake runs ends with ``os._exit(0)`` once its block has finished and the
log is closed: every output is written and closed by then (``dpaudit.io`` writes through
closed temporary files it renames), and the interpreter's teardown of TensorFlow's modules
cost about 1 s of CPU per job (pandas, pyarrow and scipy about 0.2 s), for nothing
(issue 23). A failing job exits the normal way, with its traceback; tests, which pass
their own ``snakemake`` object, keep the normal exit.

A ``Refusal`` (one of dpaudit's own checks: a bad cell of a table, a damaged file, ...) is
not a crash: its message goes to the log and, as one line, to the terminal, and the job
exits with status 1 and no traceback (issue 35). Any other exception keeps its traceback.
While a job's block runs, ``terminal_write`` reaches the stderr the job was started with (the
one ``job_logging`` redirected to the log): ``dpaudit.progress`` sends a long job's progress
there, at most one line per job a minute (issue 37).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REFUSAL_EXIT = 1


class Refusal(Exception):
    """An input or file dpaudit refuses on purpose; the message names what is wrong and the fix.

    Mixed into the project's error classes (``TableError(Refusal, ValueError)``, ...) so
    callers catching ValueError or OSError still do."""
class InputRefusal(Refusal, ValueError):
    """A value of the user's config or data a job refuses (a batch larger than the members, more input
    canaries than non-members, a loss that became non-finite): one line, no traceback (issue 46)."""


# The job's original stderr (a duplicated descriptor), its label, start and last terminal line,
# while a job_logging block runs; None outside one.
_TERMINAL: dict | None = None


@contextmanager
def job_logging(snakemake, name: str | None = None) -> Iterator[logging.Logger]:
    log_files = list(getattr(snakemake, "log", []) or [])
    logger = logging.getLogger(name or f"dpaudit.{getattr(snakemake, 'rule', 'job')}")
    if not log_files:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        yield logger
        return
    path = Path(log_files[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a", buffering=1)  # noqa: SIM115 - owned by this context
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(handle.fileno(), 1)
    os.dup2(handle.fileno(), 2)
    root = logging.getLogger()
    handler = logging.StreamHandler(handle)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    # the kernel's peak of this run alone (a batch's later runs start from the memory held then)
    reset_peak_rss()
    start = time.perf_counter()
    wildcards = dict(getattr(snakemake, "wildcards", {}) or {})
    logger.info("start %s %s", getattr(snakemake, "rule", ""), wildcards)
    global _TERMINAL
    label = " ".join([str(getattr(snakemake, "rule", "job")), *(f"{k}={v}" for k, v in wildcards.items())])
    _TERMINAL = {"fd": saved[1], "label": label, "start": time.monotonic(), "last": None}
    finished = False
    refused: Refusal | None = None
    try:
        yield logger
    except Refusal as error:
        logger.error("refused: %s", error)
        if not _run_by_snakemake(snakemake):
            raise  # a test's stand-in sees the refusal itself
        refused = error
    except BaseException as error:
        logger.exception("job failed")
        if _in_batch(snakemake) and not isinstance(error, KeyboardInterrupt):
            # the batch's other runs share this job: the terminal line names the one that failed
            os.write(saved[1], f"dpaudit: {label} failed: {type(error).__name__}: {error}\n"
                               f"  (log: {path})\n".encode())
        raise
    else:
        peak = peak_rss_mb()
        logger.info("done in %.2f s%s", time.perf_counter() - start,
                    "" if peak is None else f"; peak resident memory {peak:.0f} MB (kernel VmHWM)")
        finished = True
    finally:
        _TERMINAL = None
        root.removeHandler(handler)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        handle.close()
    if refused is not None:
        print(f"dpaudit refused ({label}): {refused}\n"
              f"  (log: {path})", file=sys.stderr, flush=True)
        raise SystemExit(REFUSAL_EXIT)
    if finished and _run_by_snakemake(snakemake) and getattr(snakemake, "last", True):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def terminal_write(line: str, *, every: float) -> bool:
    """Write ``[<rule> <wildcards>] <line>`` to the job's original stderr when the job has run
    for at least ``every`` seconds and wrote no such line in the last ``every`` seconds; True if
    written. Outside a ``job_logging`` block: nothing (the logger already reaches stderr)."""
    state = _TERMINAL
    if state is None:
        return False
    now = time.monotonic()
    if now - state["start"] < every or (state["last"] is not None and now - state["last"] < every):
        return False
    state["last"] = now
    try:
        os.write(state["fd"], f"[{state['label']}] {line}\n".encode())
    except OSError:  # a closed terminal must not fail the job
        return False
    return True


def announce(logger: logging.Logger, line: str) -> None:
    """A line the user should read once (a decision taken from their data, issue 46): to the job's
    log and, inside a ``job_logging`` block, to the terminal too."""
    logger.info(line)
    terminal_write(line, every=0)


def peak_rss_mb() -> float | None:
    """This process's peak resident set in MB (2^20 bytes) as the kernel counts it (``VmHWM`` of
    /proc/self/status, every page it held at once, sampled by nothing), or None where there is no
    such file (issue 47: Snakemake's benchmark ``max_rss`` samples every 30 s after the first 15 s
    and missed a job's peak)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's ``VmHWM`` of this process to its resident set now (Linux 4.0 and later:
    ``5`` written to /proc/self/clear_refs), so a batch's later run reports its own peak; False
    where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _in_batch(snakemake) -> bool:
    """True for one run of a batch job (``dpaudit.batching.RunJob``)."""
    return getattr(snakemake, "batch", None) is not None


def _run_by_snakemake(snakemake) -> bool:
    """True for the object Snakemake's script preamble unpickles (``snakemake.iocontainers.Snakemake``
    in Snakemake 9, ``snakemake.script.Snakemake`` before), or a run of a batch job it started;
    never for a test's stand-in."""
    kind = type(getattr(snakemake, "batch", None) or snakemake)
    return kind.__name__ == "Snakemake" and kind.__module__ in ("snakemake.iocontainers", "snakemake.script")
