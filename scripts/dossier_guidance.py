"""Snakemake adapter: the guidance page to choose ε of one dataset."""

from dpaudit.io import read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.report.guidance import build_guidance, targets_from_config

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    page = build_guidance(read_parquet(sm.input.table), sm.wildcards.dataset, png=sm.output.png, pdf=sm.output.pdf,
                          targets=targets_from_config(sm.params.targets))
    write_bytes(sm.output.html, page.encode())
    log.info("guidance written (%d bytes)", len(page))
