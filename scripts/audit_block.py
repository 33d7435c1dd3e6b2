"""Snakemake adapter: one block of audited full-batch DP-SGD runs (Bernau et al. 2021)."""

from threadpoolctl import threadpool_limits

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.metrics.identifiability_audit import run_audit_block

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    w = sm.wildcards
    # The audited models are small: BLAS threads beyond the job's own only add contention.
    with threadpool_limits(limits=sm.threads):
        runs, steps, vectors = run_audit_block(
            read_parquet(sm.input.examples), read_json(sm.input.info), read_parquet(sm.input.neighbours),
            w.dataset, sm.params.options, sm.params.audit, w.audit_config, sm.params.config, int(w.block),
        )
    write_parquet(sm.output.runs, runs)
    write_parquet(sm.output.steps, steps)
    write_parquet(sm.output.vectors, vectors)
    log.info("%d runs, win rate %.3f, z = %.4g", len(runs), runs["win"].mean(), runs["noise_multiplier"].iloc[0])
