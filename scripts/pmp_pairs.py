"""Snakemake adapter: what PMP Recipes A and B need of each batch run's per-example gradients (pmp_pairs.parquet)."""

from threadpoolctl import threadpool_limits

from dpaudit.batching import run_jobs
from dpaudit.extract.extract import write_run_pmp_pairs
from dpaudit.io import read_json
from dpaudit.logs import job_logging

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log, threadpool_limits(limits=job.threads):
        rows = write_run_pmp_pairs(job.input.model, job.input.examples, read_json(job.input.info)["splits"],
                                   path=job.output[0], train=read_json(job.input.train),
                                   checkpoints_path=job.input.checkpoints, parent=job.params.pmp, threads=job.threads)
        log.info("wrote %d rows of the parent set", rows)
