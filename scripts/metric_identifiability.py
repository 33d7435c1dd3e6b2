"""Snakemake adapter: identifiability bounds (Bernau et al. 2021) of one trained run."""

from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.identifiability import run_identifiability

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    rows = run_identifiability(read_json(sm.input.train))
    rows = metric_rows("identifiability", rows, dataset=sm.wildcards.dataset, run=sm.wildcards.run)
    write_parquet(sm.output[0], rows)
    log.info("%d identifiability rows (%d applicable)", len(rows), int(rows["applicable"].sum()))
