"""Snakemake adapter: Negoescu et al. 2023, Figs 3-5 (Gamma and Normal simulations of ε*)."""

from dpaudit.io import write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.epsilon_star_simulations import plot_fig3, plot_fig4, plot_fig5
from dpaudit.simulations.epsilon_star import simulate_fig3, simulate_gamma

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    options = sm.params.options
    frame = simulate_gamma(sizes=options["sizes"], n_repeats=options["repeats"], delta=options["delta"],
                           seed=options["seed"])
    write_parquet(sm.output.table, frame)
    fig3 = simulate_fig3(seed=options["seed"])
    write_parquet(sm.output.fig3_table, fig3)
    plot_fig3(fig3, sm.output.fig3)
    plot_fig4(frame, sm.output.fig4)
    plot_fig5(frame, sm.output.fig5)
    log.info("%d simulated ε* values", len(frame))
