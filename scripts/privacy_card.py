"""Snakemake adapter: the privacy cards of a batch's trained models (Geambasu's DP lecture)."""

from dpaudit.batching import run_jobs
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_bytes, write_parquet
from dpaudit.logs import job_logging
from dpaudit.report.cards import build_privacy_card

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        train = {**read_json(job.input.train), "dataset": job.wildcards.dataset, "run": job.wildcards.run}
        page, rows = build_privacy_card(
            read_parquet(job.input.outputs), read_parquet(job.input.mia), train, read_json(job.input.info),
            job.output.figure, alpha=job.params.alpha, loss_column=job.params.loss,
            canary=read_parquet(job.input.canary) if "canary" in job.input.keys() else None,
        )
        rows = metric_rows("privacy_card", rows, dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_bytes(job.output.card, page.encode())
        write_parquet(job.output.metrics, rows)
        log.info("card written; ROC inside DP region: %s",
                 rows.loc[rows["metric"] == "roc_inside_dp_region", "value_bool"].item())
