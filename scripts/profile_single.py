"""Snakemake adapter: single-model privacy profiles of one view (Fig 4)."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.profile.study import single_model_artifact

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    base = read_json(sm.input.base)
    frame, offsets = single_model_artifact(read_parquet(sm.input.worst_case), n=base["n"], lam=sm.params.lam,
                                           log10_epsilon=sm.params.log10_epsilon, seed=sm.params.seed)
    write_parquet(sm.output[0], frame)
    log.info("models M - A(x): %s", offsets)
