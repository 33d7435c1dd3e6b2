"""Snakemake adapter: every trained model's privacy dossier of one dataset and its guidance page (issues 18, 23, 24)."""

from dpaudit.io import read_json, read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.report.dossier import build_dossier
from dpaudit.report.exposure import AUDIT_RUN_COLUMNS, flagged_rows, user_ids_of
from dpaudit.report.guidance import build_guidance, targets_from_config

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = sm.wildcards.dataset
    table, info, ledger = read_parquet(sm.input.table), read_json(sm.input.info), read_parquet(sm.input.ledger)
    records = {run: read_json(path) for run, path in zip(sm.params.audited, sm.input.records, strict=True)}
    audit = read_parquet(sm.input.audit_runs[0], columns=AUDIT_RUN_COLUMNS) if sm.input.audit_runs else None
    flags = flagged_rows(table, dataset, canary_records=records, audit_runs=audit)
    user_ids = user_ids_of(read_parquet(sm.input.ids), info)
    scores = dict(zip(sm.params.attacked, sm.input.scores, strict=True))
    pages = zip(sm.params.runs, sm.input.train, sm.input.outputs, sm.output.pages, strict=True)
    for run, train, outputs, html in pages:
        page = build_dossier(
            table, dataset, run, train=read_json(train), outputs=read_parquet(outputs),
            splits=info["splits"], dataset_info=info, canary_record=records.get(run), ledger=ledger,
            loss_column=sm.params.loss, attack_scores=read_parquet(scores[run]) if run in scores else None,
            row_flags=flags, user_ids=user_ids)
        write_bytes(html, page.encode())
        log.info("dossier of %s written (%d bytes)", run, len(page))
    page = build_guidance(table, dataset, png=sm.output.guidance_png, pdf=sm.output.guidance_pdf,
                          targets=targets_from_config(sm.params.targets))
    write_bytes(sm.output.guidance, page.encode())
    log.info("guidance written (%d bytes; %d attacked runs, %d flagged rows)", len(page), len(scores), len(flags))
