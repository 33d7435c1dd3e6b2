"""Snakemake adapter: figures 1-9 and both tables of Bernau et al. 2021 (identifiability)."""

from dpaudit.io import read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots import identifiability as fig

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    out = sm.output
    runs, steps, summary = (read_parquet(p) for p in (sm.input.runs, sm.input.steps, sm.input.summary))
    fig.figure_1(out.fig1, out.fig1_pdf)
    fig.figure_2(out.fig2, out.fig2_pdf)
    fig.figure_3(out.fig3, out.fig3_pdf)
    fig.figure_4(steps, out.fig4, out.fig4_pdf)
    fig.figure_5(steps, out.fig5, out.fig5_pdf)
    fig.figure_6(runs, out.fig6, out.fig6_pdf)
    for dataset in sm.params.datasets:
        fig.figure_audit(summary, dataset, out[f"audit_{dataset}"], out[f"audit_{dataset}_pdf"])
    parameters = fig.parameter_table(sm.params.datasets, sm.params.steps, sm.params.conversion)
    write_parquet(out.parameters, parameters)
    targets = {rho for options in sm.params.datasets.values() for rho in options["rho_beta"]}
    fig.write_tables(parameters, fig.success_table(summary, targets), summary, out.tables)
    log.info("wrote %d figures and the tables", 6 + len(sm.params.datasets))
