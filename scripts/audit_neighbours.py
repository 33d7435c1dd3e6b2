"""Snakemake adapter: dataset-sensitivity neighbour pairs of one audited dataset (Bernau et al. 2021)."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.identifiability_audit import neighbour_table

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    table = neighbour_table(read_parquet(sm.input.examples), read_json(sm.input.info), sm.params.options, sm.params.top)
    write_parquet(sm.output[0], table.assign(dataset=sm.wildcards.dataset))
    log.info("top pairs:\n%s", table.head(3).to_string())
