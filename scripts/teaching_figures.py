"""Snakemake adapter: the DP lecture's teaching figures F1-F5 (Geambasu's DP lecture, its worked examples)."""

from dpaudit.logs import job_logging
from dpaudit.plots.teaching import all_teaching_figures

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    all_teaching_figures({name: path for name, path in sm.output.items() if name != "pdfs"})
    log.info("wrote %s", ", ".join(sm.output))
