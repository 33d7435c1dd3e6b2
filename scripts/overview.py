"""Snakemake adapter: the overview of every model (results/index.html) and the report's landing view (issue 34)."""

from dpaudit.io import read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.report.overview import build_overview, landing_fragment

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    table = read_parquet(sm.input.table)
    page = build_overview(table, dict(zip(sm.params.datasets, sm.input.figures, strict=True)))
    write_bytes(sm.output.page, page.encode())
    write_bytes(sm.output.landing, landing_fragment(page).encode())
    log.info("overview written (%d bytes)", len(page))
