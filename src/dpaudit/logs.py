"""Logging for Snakemake script jobs.

The ``log:`` directive only names a file; it redirects nothing. Scripts call
``job_logging(snakemake)`` so that Python logging, warnings, anything written to
stdout/stderr by native libraries (TensorFlow's C++ logs) and the traceback of a
failure all land in the job's log file.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
    try:
        yield logger
    except BaseException:
        logger.exception("job failed")
        raise
    else:
        logger.info("done in %.2f s", time.perf_counter() - start)
    finally:
        root.removeHandler(handler)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        handle.close()
