"""Snakemake adapter: the ε* privacy–utility landscape of one dataset (Negoescu et al. 2023, Figs 1–2) and its run table."""

from dpaudit.aggregate import summary_from_table
from dpaudit.io import atomic_path, read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.landscape import landscape_for_dataset

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    table = read_parquet(sm.input.table)
    rows = table[table["dataset"] == sm.wildcards.dataset]
    strategies, diagnostics, html = landscape_for_dataset(
        rows, summary_from_table(rows), sm.wildcards.dataset, read_json(sm.input.info), sm.output.png, sm.output.pdf)
    write_parquet(sm.output.strategies, strategies)
    write_parquet(sm.output.runs, diagnostics)
    with atomic_path(sm.output.runs_html, suffix=".html") as tmp:
        tmp.write_text(html, encoding="utf-8")
    log.info("%d strategies, %d on the Pareto frontier", len(strategies), int(strategies["on_pareto"].sum()))
