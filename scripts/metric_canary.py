"""Snakemake adapter: canary-audit rows of one run."""

from dpaudit.contract.delta import evaluation_delta
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.canary.rows import run_canary_metrics

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    train = read_json(sm.input.train)
    audited = "scores" in sm.input.keys()
    rows = run_canary_metrics(train, read_parquet(sm.input.scores) if audited else None,
                              read_json(sm.input.record) if audited else None, sm.params.options,
                              delta=evaluation_delta(train))
    rows = metric_rows("canary", rows, dataset=sm.wildcards.dataset, run=sm.wildcards.run)
    write_parquet(sm.output[0], rows)
    log.info("%d canary rows", len(rows))
