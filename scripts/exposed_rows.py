"""Snakemake adapter: the rows the reference-model attacks single out across one dataset's grid (issue 24)."""

from dpaudit.io import read_json, read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.plots.exposed import plot_exposed_rows
from dpaudit.report.exposed_page import build_exposed_page, exposed_analysis
from dpaudit.report.exposure import AUDIT_RUN_COLUMNS, flagged_rows

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = sm.wildcards.dataset
    table = read_parquet(sm.input.table)
    scores = {run: read_parquet(path) for run, path in zip(sm.params.runs, sm.input.scores, strict=True)}
    records = {run: read_json(path) for run, path in zip(sm.params.audited, sm.input.records, strict=True)}
    audit = read_parquet(sm.input.audit_runs[0], columns=AUDIT_RUN_COLUMNS) if sm.input.audit_runs else None
    flags = flagged_rows(table, dataset, canary_records=records, audit_runs=audit)
    analysis = exposed_analysis(table, dataset, scores, sm.params.run_params)
    plot_exposed_rows(**analysis.figure(), dataset=dataset, png=sm.output.png, pdf=sm.output.pdf)
    page = build_exposed_page(analysis, dataset, png=sm.output.png, flags=flags)
    write_bytes(sm.output.page, page.encode())
    log.info("exposed rows of %d models written (%d bytes, %d flagged rows)", len(scores), len(page), len(flags))
