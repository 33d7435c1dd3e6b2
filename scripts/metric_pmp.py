"""Snakemake adapter: practical membership privacy (Lowy et al. 2024) of a batch's runs."""

from threadpoolctl import threadpool_limits

from dpaudit.batching import run_jobs
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.pmp.pool import POOL_COLUMNS
from dpaudit.metrics.pmp.run import pmp_run_metrics

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log, threadpool_limits(limits=job.threads):
        applies = "pairs" in job.input.keys()  # a run Recipes A and B apply to (rules/pmp.smk)
        with_pool = "pool" in job.input.keys()  # Recipe C: the run's recipe reference pool
        rows, per_example = pmp_run_metrics(
            read_parquet(job.input.examples) if applies else None,
            read_json(job.input.info)["splits"] if applies else None, read_json(job.input.train),
            gradients_path=job.input.get("pairs"), options=job.params.options, log=log,
            pool=read_parquet(job.input.pool, columns=list(POOL_COLUMNS)) if with_pool else None,
            pool_info=read_json(job.input.pool_info) if with_pool else None,
        )
        keys = {"dataset": job.wildcards.dataset, "run": job.wildcards.run}
        write_parquet(job.output.metrics, metric_rows("pmp", rows, **keys))
        write_parquet(job.output.per_example, per_example.assign(**keys))
        headline = rows[rows["metric"].isin(["epsilon_pmp", "empirical_epsilon_lower_bound"])]
        log.info("PMP: %s", dict(zip(headline["method"], headline["value"].round(4), strict=True)))
