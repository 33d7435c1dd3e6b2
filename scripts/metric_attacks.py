"""Snakemake adapter: LiRA and RMIA against one run with its recipe's reference pool (mia rows, scores)."""

from dpaudit.contract.delta import evaluation_delta
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.attack_rows import attack_rows

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    train = read_json(sm.input.train)
    pool_info = read_json(sm.input.pool_info)
    if sm.wildcards.run not in pool_info["runs"]:
        raise ValueError(f"{sm.input.pool_info} is the pool of runs {pool_info['runs']}, not of {sm.wildcards.run}")
    rows, scores = attack_rows(read_parquet(sm.input.outputs), read_parquet(sm.input.pool), sm.params.options,
                               delta=evaluation_delta(train), accountant_epsilon=float(train["epsilon"]))
    rows = metric_rows("mia", rows, dataset=sm.wildcards.dataset, run=sm.wildcards.run)
    write_parquet(sm.output.rows, rows)
    write_parquet(sm.output.scores, scores)
    log.info("%d attack rows, %d scored examples", len(rows), len(scores))
