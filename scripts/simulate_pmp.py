"""Snakemake adapter: Lowy et al. 2024 Figs 1-6 by simulation."""

from dpaudit.io import write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.pmp import plot_all
from dpaudit.simulations.pmp import simulate_all

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    expmech, gauss, summary = simulate_all(sm.params.options)
    write_parquet(sm.output.expmech, expmech)
    write_parquet(sm.output.gauss, gauss)
    write_parquet(sm.output.summary, summary)
    plot_all(summary, {f"fig{k}": [sm.output[f"fig{k}"], sm.output.pdfs[k - 1]] for k in range(1, 7)})
    bad = int((~expmech["ordering_ok"]).sum() + (~gauss["ordering_ok"]).sum())
    (log.warning if bad else log.info)("ordering ε̃ ≤ ε_exact(X) ≤ ε(X) ≤ ε fails on %d trials", bad)
