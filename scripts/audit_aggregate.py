"""Snakemake adapter: the audit's runs and steps tables and their summary per configuration."""

import pandas as pd

from dpaudit.io import read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.identifiability import summarize_audit

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    runs = pd.concat([read_parquet(p) for p in sm.input.runs], ignore_index=True)
    steps = pd.concat([read_parquet(p) for p in sm.input.steps], ignore_index=True)
    summary = summarize_audit(runs, steps, alpha=sm.params.alpha)
    write_parquet(sm.output.runs, runs)
    write_parquet(sm.output.steps, steps)
    write_parquet(sm.output.summary, summary)
    log.info("%d configurations, %d runs; health failures: %d", len(summary), len(runs),
             int((summary["ls_violations"] > 0).sum() + summary["eta_ks_failed"].sum()))
