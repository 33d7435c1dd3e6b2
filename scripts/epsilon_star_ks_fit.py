"""Snakemake adapter: Negoescu et al. 2023, Fig. 6, GMM/KS fit of transformed training losses, without and with DP."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.epsilon_star_simulations import plot_fig6

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    splits = read_json(sm.input.info)["splits"]
    panels = {}
    for mechanism, label in (("baseline", "(a) without DP"), ("dpsgd", "(b) with DP-SGD")):
        outputs = read_parquet(sm.input[mechanism], columns=["split", "loss_logit"])
        members = outputs.loc[outputs["split"] == splits["members"], "loss_logit"].to_numpy()
        nonmembers = outputs.loc[outputs["split"] == splits["nonmembers"], "loss_logit"].to_numpy()
        panels[label] = (members, nonmembers)
    table = plot_fig6(panels, sm.output.figure, seed=sm.params.options["seed"])
    table["dataset"] = sm.params.runs["dataset"]
    # Run names are too long for panel titles; the table says which run each panel is.
    runs = {"(a) without DP": sm.params.runs["baseline"], "(b) with DP-SGD": sm.params.runs["dpsgd"]}
    table["run"] = table["panel"].map(runs)
    write_parquet(sm.output.table, table)
    log.info("%d KS rows", len(table))
