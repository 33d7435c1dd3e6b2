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
    start = time.perf_counter()
    wildcards = dict(getattr(snakemake, "wildcards", {}) or {})
    logger.info("start %s %s", getattr(snakemake, "rule", ""), wildcards)
    finished = False
    refused: Refusal | None = None
    try:
        yield logger
    except Refusal as error:
        logger.error("refused: %s", error)
        if not _run_by_snakemake(snakemake):
            raise  # a test's stand-in sees the refusal itself
        refused = error
    except BaseException:
        logger.exception("job failed")
        raise
    else:
        logger.info("done in %.2f s", time.perf_counter() - start)
        finished = True
    finally:
        root.removeHandler(handler)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        handle.close()
    if refused is not None:
        job = " ".join([str(getattr(snakemake, "rule", "job")), *(f"{k}={v}" for k, v in wildcards.items())])
        print(f"dpaudit refused ({job}): {refused}\n"
              f"  (log: {path})", file=sys.stderr, flush=True)
        raise SystemExit(REFUSAL_EXIT)
    if finished and _run_by_snakemake(snakemake):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _run_by_snakemake(snakemake) -> bool:
    """True for the object Snakemake's script preamble unpickles (``snakemake.iocontainers.Snakemake``
    in Snakemake 9, ``snakemake.script.Snakemake`` before), never for a test's stand-in."""
    kind = type(snakemake)
    return kind.__name__ == "Snakemake" and kind.__module__ in ("snakemake.iocontainers", "snakemake.script")
