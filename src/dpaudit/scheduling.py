"""How the workstation profile keeps Snakemake's scheduling loop idle between jobs (issue 23).

Snakemake's job rate limiter (``--max-jobs-per-timespan``, default 100/1s) re-arms a
re-evaluation timer at the end of every pass of the scheduling loop, and the pass that timer
wakes arms another. A pass woken by a finished job therefore starts a chain that wakes the
loop every timespan until the run ends: after N finished jobs, N chains. Each pass re-stats
every ready job's inputs and solves the job selection again. On the default run (294 jobs,
2 cores) the default limit cost ~60 s of the main process's CPU and a 3 s timespan ~26 s,
CPU that the jobs on the same two cores did not get.

A local run cannot start jobs at a rate worth limiting, so ``profiles/default`` asks for no
limit with the marker ``UNLIMITED_JOB_RATE`` and the Snakefile's ``onstart`` handler drops
the scheduler's limiter, the state Snakemake itself runs dry runs in (Snakemake builds the
scheduler after reading the Snakefile, so the handler is the first place that sees it).
Any other value (the command line's, a cluster profile's) is a limit someone chose and is
kept. Should a Snakemake version rename the scheduler's attribute, nothing is dropped
(``tests/unit/test_scheduling.py`` fails on the locked version) and the marker still
means a limit no run reaches whose timers wake the loop every 3 s; a run then ends at
most 3 s after its last job, the timers being non-daemon threads.
"""

from __future__ import annotations

# (jobs, seconds) of profiles/default's max-jobs-per-timespan: "1000/3s"
UNLIMITED_JOB_RATE = (1000, 3.0)


def drop_unbinding_rate_limit(workflow) -> bool:
    """Remove the job rate limiter of ``workflow``'s scheduler if its limit is the
    workstation profile's ``UNLIMITED_JOB_RATE``; True if it was removed."""
    scheduler = getattr(workflow, "scheduler", None)
    limiter = getattr(scheduler, "job_rate_limiter", None)
    if limiter is None or (limiter.max_jobs, float(limiter.timespan)) != UNLIMITED_JOB_RATE:
        return False
    scheduler.job_rate_limiter = None
    return True
