"""Snakemake's command line in forked children of one warm process, for the tests.

A test's ``snakemake`` call (tests/workflow/helpers.py) used to start a new interpreter that
spends ~1.3 s of CPU importing Snakemake before it reads the Snakefile; make test makes about 70
such calls (45 dry-runs, 22 runs, counted on 2026-11-27). Here one server process per test worker
imports ``snakemake.cli`` once (and nothing of dpaudit, whose copy under test comes from the
call's PYTHONPATH) and forks a child per call. The child is still its own process: it takes the
call's argv, environment, working directory and PYTHONPATH, writes its output to files, and ends
like the console script would (``snakemake.cli.main`` raises SystemExit; the interpreter's normal
shutdown runs atexit), so a test sees what a subprocess would show it.

What differs from a fresh interpreter: the children of one server share its hash seed, so two
parses in one worker iterate sets in the same order (tests/e2e/test_tiny_run.py therefore parses
the finished tiny run again in fresh interpreters under two other seeds and expects nothing to
do); numpy's BLAS threads were configured by the server's environment (no test sets a thread count
for Snakemake; the jobs Snakemake starts are fresh interpreters).

Protocol: one JSON line per call on the server's stdin (argv, env, cwd, stdout and stderr file
paths, timeout); one JSON line back with the child's return code, or ``"timeout": true`` after the
child was killed. The server exits at end of input.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys


def _become_call(request: dict, base_path: list[str]) -> None:
    """In the forked child: take the call's process state, then run Snakemake's main."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    # The path a console script would start with: its own folder, then PYTHONPATH (made absolute,
    # as site does), then the interpreter's own entries.
    extra = [os.path.abspath(entry) for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [os.path.dirname(argv[0]), *extra, *base_path[1:]]
    importlib.invalidate_caches()
    sys.argv = list(argv)
    from snakemake.cli import main

    main(argv[1:])  # raises SystemExit with Snakemake's code; nothing here catches it


def _wait(pid: int, timeout: float) -> dict:
    """The child's return code, or a timeout after killing it (as ``subprocess.run`` does)."""
    descriptor = os.pidfd_open(pid)  # sleeps until the child ends or the time is up (Linux 5.3+)
    try:
        ended = bool(select.select([descriptor], [], [], timeout)[0])
    finally:
        os.close(descriptor)
    if not ended:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return {"returncode": os.waitstatus_to_exitcode(status)} if ended else {"timeout": True}


# What every call imports before it reads the project's code (python -X importtime of a dry-run):
# Snakemake's command line, what it loads lazily (config validation, storage, the report) and the
# third-party packages dpaudit's parse-time modules use. Never dpaudit: the call's PYTHONPATH says
# which copy of it the call runs.
# (scipy is left to the calls: its own OpenBLAS would start one more thread in the server before
# every fork; numpy's, which Snakemake's import loads, is fork-safe as multiprocessing relies on.)
PRELOADED = ("snakemake.cli", "snakemake.api", "snakemake.utils", "snakemake.report.html_reporter",
             "jsonschema", "smart_open", "nbformat", "numpy", "pandas", "pyarrow.parquet", "yaml")


def serve() -> None:
    if not hasattr(os, "pidfd_open"):
        raise RuntimeError("tests/snakemake_fork.py needs Linux 5.3 or later (os.pidfd_open), as the test cluster does")
    for name in PRELOADED:
        importlib.import_module(name)
    if any(name == "dpaudit" or name.startswith("dpaudit.") for name in sys.modules):
        raise RuntimeError("the Snakemake fork server imported dpaudit; calls must import their own copy")
    base_path = list(sys.path)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _become_call(request, base_path)
        sys.stdout.write(json.dumps(_wait(pid, request["timeout"])) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
