"""Snakemake adapter: one dataset's canary figures (one-run bound vs guesses, trade-off curves)."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.canary import canary_figures

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    guesses = canary_figures(
        read_parquet(sm.input.table), [read_json(p) for p in sm.input.records],
        [read_parquet(p) for p in sm.input.scores], sm.wildcards.dataset, alpha=sm.params.alpha,
        guesses_png=sm.output.guesses, guesses_pdf=sm.output.guesses_pdf,
        tradeoff_png=sm.output.tradeoff, tradeoff_pdf=sm.output.tradeoff_pdf)
    write_parquet(sm.output.guesses_data, guesses)
    log.info("canary figures of %s: %d runs", sm.wildcards.dataset, guesses["run"].nunique())
