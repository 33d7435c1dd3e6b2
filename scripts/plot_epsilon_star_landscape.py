"""Snakemake adapter: the ε* privacy–utility landscape of one dataset (source 002 Figs 1–2)."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.landscape import landscape_for_dataset

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    strategies = landscape_for_dataset(read_parquet(sm.input.table), sm.wildcards.dataset,
                                       read_json(sm.input.info), sm.output.png, sm.output.pdf)
    write_parquet(sm.output.strategies, strategies)
    log.info("%d strategies, %d on the Pareto frontier", len(strategies), int(strategies["on_pareto"].sum()))
