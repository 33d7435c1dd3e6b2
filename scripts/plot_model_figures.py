"""Snakemake adapter: one dataset's figures over all its models (ROCs, TPR at low FPR, losses, training, utility)."""

from dpaudit.aggregate import summary_from_table
from dpaudit.io import read_json, read_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.models import FIGURES, plot_model_figures

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    table = read_parquet(sm.input.table)
    # one outputs and one train.json per run of the dataset, in the order of params.runs
    outputs = {run: read_parquet(p) for run, p in zip(sm.params.runs, sm.input.outputs, strict=True)}
    train = {run: read_json(p) for run, p in zip(sm.params.runs, sm.input.train, strict=True)}
    paths = {name: (sm.output[name], sm.output[f"{name}_pdf"]) for name in FIGURES}
    plot_model_figures(table, summary_from_table(table), outputs, train, read_json(sm.input.info),
                       sm.params.loss, sm.wildcards.dataset, paths)
    log.info("%s: figures over %d models", sm.wildcards.dataset, len(outputs))
