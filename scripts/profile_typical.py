"""Snakemake adapter: typical profiles, per-neighbour losses and regime thresholds of one view."""

from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.profile.study import typical_artifacts

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    base = read_json(sm.input.base)
    out = typical_artifacts(read_parquet(sm.input.worst_case), view_name=sm.wildcards.view,
                            dataset=base["view"]["dataset"], n=base["n"],
                            lam=sm.params.lam, log10_epsilons=sm.params.log10_epsilons, draws=sm.params.draws,
                            seed=sm.params.seed)
    for name in ("typical", "per_neighbour", "metrics"):
        write_parquet(sm.output[name], out[name])
    write_json(sm.output.thresholds, out["thresholds"])
    log.info("thresholds: %s", {k: v for k, v in out["thresholds"].items() if k != "definitions"})
