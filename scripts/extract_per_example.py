"""Snakemake adapter: per-example losses and gradient norms of a batch's models (numpy for an MLP; TensorFlow for other models)."""

from threadpoolctl import threadpool_limits

from dpaudit.batching import run_jobs
from dpaudit.extract.extract import write_per_example
from dpaudit.io import read_json
from dpaudit.logs import job_logging

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log, threadpool_limits(limits=job.threads):
        dataset = read_json(job.input.info)
        count = write_per_example(
            job.input.model,
            job.input.examples,
            dataset["splits"],
            job.output.outputs,
            job.output.gradients,
            clip_norm=job.params.run["clip_norm"],
            full_gradients=job.params.extract["full_gradients"],
            threads=job.threads,
        )
        log.info("wrote %d examples", count)
