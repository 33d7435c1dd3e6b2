"""Snakemake adapter: Figs 2-7 of the privacy profile for one view."""

from dpaudit.io import read_json, read_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.profile import write_profile_figures
from dpaudit.profile.study import read_thresholds

sm = snakemake  # noqa: F821
with job_logging(sm):
    outputs = {f"fig{k}": (sm.output[f"fig{k}"], sm.output[f"fig{k}_pdf"]) for k in range(2, 8)}
    write_profile_figures(
        outputs, worst=read_parquet(sm.input.worst_case), exact=read_parquet(sm.input.exact),
        single=read_parquet(sm.input.single), typical=read_parquet(sm.input.typical),
        per_neighbour=read_parquet(sm.input.per_neighbour), thresholds=read_thresholds(sm.input.thresholds),
        d=int(read_json(sm.input.base)["d"]),
    )
