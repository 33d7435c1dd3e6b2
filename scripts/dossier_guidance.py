"""Snakemake adapter: the guidance page to choose ε of one dataset (issue 18)."""

from dpaudit.io import read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.report.dossier import build_guidance

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    page = build_guidance(read_parquet(sm.input.table), sm.wildcards.dataset, png=sm.output.png, pdf=sm.output.pdf)
    write_bytes(sm.output.html, page.encode())
    log.info("guidance written (%d bytes)", len(page))
