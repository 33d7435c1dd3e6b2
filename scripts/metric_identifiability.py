"""Snakemake adapter: identifiability bounds (Bernau et al. 2021) of a batch's trained runs."""

from dpaudit.batching import run_jobs
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.identifiability import run_identifiability

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        rows = run_identifiability(read_json(job.input.train))
        rows = metric_rows("identifiability", rows, dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_parquet(job.output[0], rows)
        log.info("%d identifiability rows (%d applicable)", len(rows), int(rows["applicable"].sum()))
