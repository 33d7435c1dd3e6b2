"""Snakemake adapter: Figs 1 and 8 (mechanism samples) of the privacy profile for one view."""

from dpaudit.io import read_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.profile import write_profile_figures

sm = snakemake  # noqa: F821
with job_logging(sm):
    outputs = {f"fig{k}": (sm.output[f"fig{k}"], sm.output[f"fig{k}_pdf"]) for k in (1, 8)}
    write_profile_figures(outputs, samples=read_parquet(sm.input[0]))
