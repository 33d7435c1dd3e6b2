"""Snakemake adapter: per-canary scores of a batch's runs (audit twins or linear releases), one after the other."""

from dpaudit.audit.twin import canary_scores
from dpaudit.batching import run_jobs
from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        dataset = read_json(job.input.info)
        params = {**job.params.training, **job.params.run, "delta": dataset["delta"]["resolved"]}
        scores, record = canary_scores(read_parquet(job.input.examples), dataset["splits"], params,
                                       read_json(job.input.train), job.params.options, threads=job.threads,
                                       log=log, run=job.wildcards.run)
        record.update(dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_parquet(job.output.scores, scores)
        write_json(job.output.record, record)
