"""Snakemake adapter: per-canary scores of one run (audit twin or linear releases)."""

from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.training.canary import canary_scores

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = read_json(sm.input.info)
    params = {**sm.params.training, **sm.params.run, "delta": dataset["delta"]["resolved"]}
    scores, record = canary_scores(read_parquet(sm.input.examples), dataset["splits"], params,
                                   read_json(sm.input.train), sm.params.options, threads=sm.threads, log=log,
                                   run=sm.wildcards.run)
    record.update(dataset=sm.wildcards.dataset, run=sm.wildcards.run)
    write_parquet(sm.output.scores, scores)
    write_json(sm.output.record, record)
