"""Snakemake adapter: the per-run PMP table of the report (Lowy et al. 2024)."""

from dpaudit.io import atomic_path, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.pmp.report import pmp_report_table

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    table, html = pmp_report_table([read_parquet(path) for path in sm.input.metrics])
    write_parquet(sm.output.table, table)
    with atomic_path(sm.output.html, suffix=".html") as tmp:
        tmp.write_text(html)
    log.info("%d runs, %d with a failed ordering check", len(table), int(table["ordering_holds"].eq(False).sum()))
