"""Snakemake adapter: fetch one raw file from its mirrors, checksum-verified."""

from dpaudit.data.download import fetch
from dpaudit.logs import job_logging

with job_logging(snakemake) as log:  # noqa: F821
    fetch(snakemake.params.sources, snakemake.output[0], snakemake.params.sha256, log=log)  # noqa: F821
