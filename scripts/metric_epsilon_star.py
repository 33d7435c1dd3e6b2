"""Snakemake adapter: Epsilon* (source 002) of one run, with its utility."""

from dpaudit.aggregate import with_keys
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.epsilon_star import epsilon_star_run_metrics

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = read_json(sm.input.info)
    train = read_json(sm.input.train)
    options = sm.params.options
    metrics = epsilon_star_run_metrics(
        read_parquet(sm.input.outputs),
        members_split=dataset["splits"]["members"],
        nonmembers_split=dataset["splits"]["nonmembers"],
        utility_split=dataset["splits"]["utility"],
        classes=int(dataset["classes"]),
        delta=float(train["delta"]),
        grid_size=options["grid_size"],
        alpha=options["alpha"],
        empirical_filter=options["empirical_filter"],
    )
    metrics = with_keys(metrics, dataset=sm.wildcards.dataset, run=sm.wildcards.run, family="epsilon_star")
    write_parquet(sm.output[0], metrics)
    headline = metrics[(metrics["metric"] == "eps_star") & (metrics["estimator"] == "parametric")]
    log.info("parametric ε*: %s", dict(zip(headline["loss"], headline["value"].round(4), strict=True)))
