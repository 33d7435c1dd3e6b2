"""Snakemake adapter: train one run of the grid and record train.json."""

from dpaudit.io import read_json, read_parquet, write_json
from dpaudit.logs import job_logging
from dpaudit.training.train import train_model

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = read_json(sm.input.info)
    params = {**sm.params.training, **sm.params.run, "delta": dataset["delta"]["resolved"]}
    info = train_model(read_parquet(sm.input.examples), dataset["splits"], params, sm.output.model,
                       threads=sm.threads, log=log, checkpoints=sm.params.get("checkpoints", 0),
                       checkpoint_path=sm.output.get("checkpoints"), run=sm.wildcards.run,
                       dataset=sm.wildcards.dataset)
    info.update(dataset=sm.wildcards.dataset, run=sm.wildcards.run)
    write_json(sm.output.info, info)
