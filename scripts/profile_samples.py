"""Snakemake adapter: samples of both mechanisms for one view (Figs 1 and 8)."""

from dpaudit.io import read_json, read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.profile.data import load_view
from dpaudit.profile.study import base_weights, sample_artifact

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    view = load_view(sm.params.view, sm.input.get("raw"), sm.wildcards.view)
    options = sm.params.samples
    samples = sample_artifact(view, base_weights(read_json(sm.input.base)), read_parquet(sm.input.worst_case),
                              lam=sm.params.lam, log10_epsilons=options["log10_epsilons"],
                              samples=options["per_distribution"], neighbour_count=options["neighbours"],
                              seed=sm.params.seed)
    write_parquet(sm.output[0], samples)
    log.info("%d samples", len(samples))
