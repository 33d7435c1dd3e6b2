"""Snakemake adapter: practical membership privacy (Lowy et al. 2024) of one run."""

from threadpoolctl import threadpool_limits

from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.pmp.pool import POOL_COLUMNS
from dpaudit.metrics.pmp.run import pmp_run_metrics

sm = snakemake  # noqa: F821
with job_logging(sm) as log, threadpool_limits(limits=sm.threads):
    dataset = read_json(sm.input.info)
    with_pool = "pool" in sm.input.keys()  # Recipe C: the run's recipe reference pool
    rows, per_example = pmp_run_metrics(
        read_parquet(sm.input.examples), dataset["splits"], read_json(sm.input.train),
        gradients_path=sm.input.pairs, options=sm.params.options, log=log,
        pool=read_parquet(sm.input.pool, columns=list(POOL_COLUMNS)) if with_pool else None,
        pool_info=read_json(sm.input.pool_info) if with_pool else None,
    )
    keys = {"dataset": sm.wildcards.dataset, "run": sm.wildcards.run}
    write_parquet(sm.output.metrics, metric_rows("pmp", rows, **keys))
    write_parquet(sm.output.per_example, per_example.assign(**keys))
    headline = rows[rows["metric"].isin(["epsilon_pmp", "empirical_epsilon_lower_bound"])]
    log.info("PMP: %s", dict(zip(headline["method"], headline["value"].round(4), strict=True)))
