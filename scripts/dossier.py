"""Snakemake adapter: the privacy dossier of one trained model (issue 18)."""

from dpaudit.io import read_json, read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.report.dossier import build_dossier

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    inputs = dict(sm.input.items())
    info = read_json(inputs["info"])
    page = build_dossier(
        read_parquet(inputs["table"]), sm.wildcards.dataset, sm.wildcards.run,
        train=read_json(inputs["train"]), outputs=read_parquet(inputs["outputs"]),
        splits=info["splits"], dataset_info=info,
        canary_record=read_json(inputs["record"]) if "record" in inputs else None,
        ledger=read_parquet(inputs["ledger"]), loss_column=sm.params.loss,
    )
    write_bytes(sm.output.html, page.encode())
    log.info("dossier written (%d bytes)", len(page))
