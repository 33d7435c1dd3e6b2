"""Snakemake adapter: the reference-model attacks' figures of one dataset (ROCs, TPR vs ε, matched accuracy)."""

from dpaudit.io import read_json, read_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.attacks import plot_attack_rocs, plot_attack_tpr, plot_reference_accuracy

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = sm.wildcards.dataset
    table = read_parquet(sm.input.table)
    scores = {run: read_parquet(path) for run, path in zip(sm.params.runs, sm.input.scores, strict=True)}
    # each pool with its recipe's runs, which its record no longer lists (issue 47)
    pools = {recipe: {**read_json(path), "runs": runs}
             for (recipe, runs), path in zip(sm.params.recipes.items(), sm.input.pools, strict=True)}
    plot_attack_rocs(scores, sm.params.run_params, sm.params.attacks, dataset, sm.output.roc, sm.output.roc_pdf)
    plot_attack_tpr(table, dataset, sm.output.tpr, sm.output.tpr_pdf)
    plot_reference_accuracy(pools, table, dataset, sm.output.reference_accuracy, sm.output.reference_accuracy_pdf)
    log.info("%d models, %d recipes", len(scores), len(pools))
