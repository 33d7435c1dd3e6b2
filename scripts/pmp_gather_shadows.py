"""Snakemake adapter: one table of the shadow models' losses on X for one DP-SGD run (PMP Recipe C)."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.training.shadows import gather_shadow_scores

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = read_json(sm.input.info)
    losses = {index: read_parquet(sm.input[name], columns=["example_id", "loss_ce"])
              for name, index in sm.params.shadows.items()}
    options = sm.params.options
    table = gather_shadow_scores(losses, read_parquet(sm.input.examples), dataset["splits"],
                                 seed=options["parent_seed"], pool=options["nonmember_pool"])
    write_parquet(sm.output[0], table)
    log.info("%d shadow models, %d rows", len(losses), len(table))
