"""Snakemake adapter: the privacy–utility figure from the metrics table."""

from dpaudit.aggregate import summary_from_table
from dpaudit.io import read_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.privacy_utility import plot_privacy_utility

sm = snakemake  # noqa: F821
with job_logging(sm):
    summary = summary_from_table(read_parquet(sm.input[0]))
    plot_privacy_utility(summary, sm.output.png, sm.output.pdf)
