"""Snakemake adapter: canary-audit rows of a batch's runs."""

from dpaudit.batching import run_jobs
from dpaudit.contract.delta import evaluation_delta
from dpaudit.contract.external import is_external
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.canary.outside import outside_rows
from dpaudit.metrics.canary.rows import run_canary_metrics

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        train = read_json(job.input.train)
        audited = "scores" in job.input.keys()
        if is_external(train):  # issue 44: the verdict from the black-box bound, what it could see
            rows = outside_rows(train, read_parquet(job.input.mia))
        else:
            rows = run_canary_metrics(train, read_parquet(job.input.scores) if audited else None,
                                      read_json(job.input.record) if audited else None, job.params.get("options", {}),
                                      delta=evaluation_delta(train))
        rows = metric_rows("canary", rows, dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_parquet(job.output[0], rows)
        log.info("%d canary rows", len(rows))
