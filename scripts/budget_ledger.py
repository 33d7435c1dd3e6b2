"""Snakemake adapter: the privacy budget ledger of every dataset's grid (Geambasu's DP lecture)."""

from dpaudit.io import read_json, write_bytes, write_parquet
from dpaudit.logs import job_logging
from dpaudit.report.cards import build_budget_ledger

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    infos = []
    for path, (dataset, run) in zip(sm.input.train, sm.params.run_keys, strict=True):
        infos.append({**read_json(path), "dataset": dataset, "run": run})
    runs, totals, page = build_budget_ledger(infos)
    write_parquet(sm.output.runs, runs)
    write_parquet(sm.output.totals, totals)
    write_bytes(sm.output.html, page.encode())
    log.info("ledger of %d runs over %d datasets", len(runs), len(totals))
