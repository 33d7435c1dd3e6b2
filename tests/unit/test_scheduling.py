"""profiles/default's job rate limit marker and the Snakefile's onstart drop (dpaudit.scheduling)."""

import subprocess
import sys
import textwrap

from snakemake.scheduling.job_scheduler import JobRateLimiter
from snakemake.settings.types import MaxJobsPerTimespan

from dpaudit.scheduling import UNLIMITED_JOB_RATE, drop_unbinding_rate_limit


class _Scheduler:
    def __init__(self, limit):
        self.job_rate_limiter = None if limit is None else JobRateLimiter(MaxJobsPerTimespan.parse_choice(limit))


class _Workflow:
    def __init__(self, limit):
        self.scheduler = _Scheduler(limit)


def test_only_the_profiles_marker_is_dropped():
    marker = _Workflow("1000/3s")
    assert drop_unbinding_rate_limit(marker) and marker.scheduler.job_rate_limiter is None
    for chosen in ("100/1s", "1000/1s", "50/3s", "1000/3m"):
        kept = _Workflow(chosen)
        assert not drop_unbinding_rate_limit(kept) and kept.scheduler.job_rate_limiter is not None
    assert not drop_unbinding_rate_limit(_Workflow(None))
    assert not drop_unbinding_rate_limit(object())  # no scheduler: nothing to drop, no error
    assert UNLIMITED_JOB_RATE == (1000, 3.0)


def test_a_real_run_with_the_marker_starts_no_rate_timer(tmp_path):
    # The locked Snakemake: with the marker and the onstart drop, its scheduling loop arms no
    # re-evaluation timer; with a limit someone chose, it arms one per pass (as before). A
    # sitecustomize counts threading.Timer starts in the snakemake process.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(textwrap.dedent("""
        import atexit, sys, threading
        _count = [0]
        _start = threading.Timer.start
        def _counting(self):
            _count[0] += 1
            return _start(self)
        threading.Timer.start = _counting
        atexit.register(lambda: print("TIMERS", _count[0], file=sys.stderr))
    """))
    (tmp_path / "Snakefile").write_text(textwrap.dedent("""
        from dpaudit.scheduling import drop_unbinding_rate_limit

        onstart:
            drop_unbinding_rate_limit(workflow)

        rule all:
            input: expand("out/{i}.txt", i=range(6))

        rule one:
            output: "out/{i}.txt"
            shell: "sleep 0.2; touch {output}"
    """))
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}

    def timers(limit):
        run = subprocess.run(
            [sys.executable, "-m", "snakemake", "-c2", "--max-jobs-per-timespan", limit, "--forceall"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        return int(run.stderr.rsplit("TIMERS", 1)[1].split()[0])

    assert timers("1000/3s") == 0
    assert timers("100/1s") > 0
