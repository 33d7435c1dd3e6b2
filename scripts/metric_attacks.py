"""Snakemake adapter: LiRA and RMIA against a batch's runs with their recipes' reference pools (mia rows, scores)."""

from dpaudit.batching import run_jobs
from dpaudit.contract.delta import evaluation_delta
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.attack_rows import attack_rows

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        train = read_json(job.input.train)
        pool_info = read_json(job.input.pool_info)
        if pool_info.get("recipe_name") != job.params.recipe:
            raise ValueError(f"{job.input.pool_info} is the pool of recipe {pool_info.get('recipe_name')!r}, not of "
                             f"run {job.wildcards.run}'s recipe {job.params.recipe!r}")
        rows, scores = attack_rows(read_parquet(job.input.outputs), read_parquet(job.input.pool), job.params.options,
                                   delta=evaluation_delta(train), accountant_epsilon=float(train["epsilon"]))
        rows = metric_rows("mia", rows, dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_parquet(job.output.rows, rows)
        write_parquet(job.output.scores, scores)
        log.info("%d attack rows, %d scored examples", len(rows), len(scores))
