"""Snakemake adapter: the privacy card of one trained model (Geambasu's DP lecture)."""

from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_bytes, write_parquet
from dpaudit.logs import job_logging
from dpaudit.report.cards import build_privacy_card

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    train = {**read_json(sm.input.train), "dataset": sm.wildcards.dataset, "run": sm.wildcards.run}
    page, rows = build_privacy_card(
        read_parquet(sm.input.outputs), read_parquet(sm.input.mia), train, read_json(sm.input.info),
        sm.output.figure, alpha=sm.params.alpha, loss_column=sm.params.loss,
        canary=read_parquet(sm.input.canary) if "canary" in sm.input.keys() else None,
    )
    rows = metric_rows("privacy_card", rows, dataset=sm.wildcards.dataset, run=sm.wildcards.run)
    write_bytes(sm.output.card, page.encode())
    write_parquet(sm.output.metrics, rows)
    log.info("card written; ROC inside DP region: %s", rows.loc[rows["metric"] == "roc_inside_dp_region", "value_bool"].item())
