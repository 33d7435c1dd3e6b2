"""Snakemake adapter: train the runs of a batch (whole recipes), one after the other, and record each run's train.json."""

from dpaudit.audit.mechanism_checks import MechanismObserver
from dpaudit.batching import run_jobs
from dpaudit.io import read_json, read_parquet, write_json
from dpaudit.logs import job_logging
from dpaudit.training.train import train_model

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        dataset = read_json(job.input.info)
        params = {**job.params.training, **job.params.run, "delta": dataset["delta"]["resolved"]}
        info = train_model(read_parquet(job.input.examples), dataset["splits"], params, job.output.model,
                           threads=job.threads, log=log, checkpoints=job.params.get("checkpoints", 0),
                           checkpoint_path=job.output.get("checkpoints"), run=job.wildcards.run,
                           dataset=job.wildcards.dataset, observer=MechanismObserver())
        info.update(dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_json(job.output.info, info)
