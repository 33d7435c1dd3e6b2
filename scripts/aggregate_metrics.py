"""Snakemake adapter: the long metrics table and the per-run summary page."""

from dpaudit.aggregate import (
    collect_metrics,
    load_train_infos,
    runs_frame,
    summary_frame,
    summary_html,
)
from dpaudit.contract.metrics import write_metric_table
from dpaudit.io import write_bytes
from dpaudit.logs import job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    runs = runs_frame(sm.params.runs, load_train_infos(sm.input.train, sm.params.run_keys))
    table = collect_metrics([*sm.input.metrics, *sm.input.get("dataset_metrics", []),
                             *sm.input.get("attack_metrics", [])], runs)
    write_metric_table(sm.output.table, table)
    write_bytes(sm.output.runs, summary_html(summary_frame(table, runs)).encode())
    log.info("%d metric rows over %d runs", len(table), len(runs))
