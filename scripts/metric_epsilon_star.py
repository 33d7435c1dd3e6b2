"""Snakemake adapter: Epsilon* (Negoescu et al. 2023) of a batch's runs, with flags, interval and utility."""

from dpaudit.batching import run_jobs
from dpaudit.contract.delta import evaluation_delta
from dpaudit.contract.external import run_splits
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.epsilon_star import epsilon_star_run_metrics

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        dataset, train, options = read_json(job.input.info), read_json(job.input.train), job.params.options
        splits = run_splits(dataset, train)
        metrics = epsilon_star_run_metrics(
            read_parquet(job.input.outputs),
            members_split=splits["members"], nonmembers_split=splits["nonmembers"],
            utility_split=splits["utility"], classes=int(dataset["classes"]),
            delta=evaluation_delta(train),
            grid_size=options["grid_size"], alpha=options["alpha"], empirical_filter=options["empirical_filter"],
            bootstrap=options["bootstrap"] if options["bootstrap"]["resamples"] > 0 else None,
            goodness_of_fit=options["goodness_of_fit"] if options["goodness_of_fit"]["enabled"] else None,
            null=options["permutation_null"] if options["permutation_null"]["permutations"] > 0 else None,
        )
        metrics = metric_rows("epsilon_star", metrics, dataset=job.wildcards.dataset, run=job.wildcards.run)
        write_parquet(job.output[0], metrics)
        for row in metrics[metrics["metric"] == "epsilon_star"].itertuples():
            log.info("%s %s ε* = %.4f [%.4f, %.4f] ceiling %.4f at_ceiling=%s on_boundary=%s n_kept=%d "
                     "normal_rejected=%s", row.loss, row.estimator, row.value, row.boot_low, row.boot_high,
                     row.ceiling, row.at_ceiling, row.on_boundary, row.n_kept, row.normal_rejected)
