"""Snakemake adapter: loss-threshold membership-inference metrics of a batch's runs."""

from dpaudit.batching import run_jobs
from dpaudit.contract.delta import evaluation_delta
from dpaudit.contract.external import run_splits
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.mia import mia_metrics

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        dataset = read_json(job.input.info)
        train = read_json(job.input.train)
        splits, options = run_splits(dataset, train), job.params.mia
        metrics = mia_metrics(
            read_parquet(job.input.outputs),
            members_split=splits["members"],
            nonmembers_split=splits["nonmembers"],
            utility_split=splits["utility"],
            delta=evaluation_delta(train),
            accountant_epsilon=float(train["epsilon"]),
            seed=options["seed"],
            alpha=options["alpha"],
            fpr_targets=tuple(options["fpr_targets"]),
            loss_column=options["loss"],
            ci_method=options["ci_method"],
        )
        metrics = metric_rows("mia", metrics, dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_parquet(job.output[0], metrics)
        log.info("%d metric rows", len(metrics))
