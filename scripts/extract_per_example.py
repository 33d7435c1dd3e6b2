"""Snakemake adapter: per-example losses and gradient norms of one model (one TF start-up)."""

from dpaudit.extract.extract import extract_per_example
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = read_json(sm.input.info)
    outputs, gradients = extract_per_example(
        sm.input.model,
        read_parquet(sm.input.examples),
        dataset["splits"],
        clip_norm=sm.params.run["clip_norm"],
        full_gradients=sm.params.extract["full_gradients"],
        threads=sm.threads,
        seed=sm.params.run["seed"],
    )
    write_parquet(sm.output.outputs, outputs)
    write_parquet(sm.output.gradients, gradients)
    log.info("wrote %d examples", len(outputs))
