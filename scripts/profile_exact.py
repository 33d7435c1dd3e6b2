"""Snakemake adapter: exact retraining of every row-removed neighbour of one view."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.profile.data import load_view
from dpaudit.profile.study import base_weights, exact_artifact

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    view = load_view(sm.params.view, sm.input.get("raw"), sm.wildcards.view)
    exact = exact_artifact(view, base_weights(read_json(sm.input.base)), read_parquet(sm.input.worst_case),
                           sm.params.lam)
    write_parquet(sm.output[0], exact)
    log.info("max relative deviation of A_wc from exact retraining: %.4g (median %.4g)",
             exact["rel_dev"].max(), exact["rel_dev"].median())
