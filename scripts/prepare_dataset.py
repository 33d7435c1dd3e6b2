"""Snakemake adapter: build examples.parquet and dataset.json for one dataset."""

from pathlib import Path

from dpaudit.contract.delta import resolve_delta
from dpaudit.data.datasets import prepare_dataset_ids
from dpaudit.io import write_json, write_parquet
from dpaudit.logs import announce, job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    raw = {name: Path(path) for name, path in sm.input.items()}
    examples, info, ids = prepare_dataset_ids(sm.wildcards.dataset, raw, dict(sm.params.dataset))
    resolved, warnings = resolve_delta(sm.params.delta, info["n_members"], sm.params.allow_large_delta,
                                       name="config.training.delta")
    for warning in warnings:
        log.warning(warning)
    for decision in info.get("table", {}).get("decisions", []):
        announce(log, f"{sm.wildcards.dataset}: decided from the file: {decision}")
    info["delta"] = {"config": sm.params.delta, "resolved": resolved, "warnings": warnings}
    write_parquet(sm.output.examples, examples)
    write_parquet(sm.output.ids, ids)
    write_json(sm.output.info, info)
    log.info("%s: %s members, d=%s, classes=%s", sm.wildcards.dataset, info["n_members"], info["d"], info["classes"])
