"""Snakemake adapter: every trained model's privacy dossier of one dataset, its ladder figures and its guidance page (issues 18, 23, 24, 34)."""

from dpaudit.io import read_json, read_parquet, write_bytes
from dpaudit.logs import job_logging
from dpaudit.plots.guidance import draw_guidance
from dpaudit.plots.ladder import write_ladders
from dpaudit.report.dossier import build_dossier
from dpaudit.report.exposure import AUDIT_RUN_COLUMNS, flagged_rows, user_ids_of
from dpaudit.report.guidance import build_guidance, guidance_choices, targets_from_config

sm, out = snakemake, snakemake.output  # noqa: F821
with job_logging(sm) as log:
    dataset, runs = sm.wildcards.dataset, sm.params.runs
    table, info, ledger = read_parquet(sm.input.table), read_json(sm.input.info), read_parquet(sm.input.ledger)
    records = {run: read_json(path) for run, path in zip(sm.params.audited, sm.input.records, strict=True)}
    audit = read_parquet(sm.input.audit_runs[0], columns=AUDIT_RUN_COLUMNS) if sm.input.audit_runs else None
    flags = flagged_rows(table, dataset, canary_records=records, audit_runs=audit)
    user_ids = user_ids_of(read_parquet(sm.input.ids), info)
    scores = dict(zip(sm.params.attacked, sm.input.scores, strict=True))
    ladders = write_ladders(table, dataset, runs, out.ladders, out.ladder_data, grid_png=out.ladder_grid,
                            grid_pdf=out.ladder_grid_pdf, grid_data=out.ladder_grid_data)
    for run, train, outputs, html in zip(runs, sm.input.train, sm.input.outputs, out.pages, strict=True):
        page = build_dossier(
            table, dataset, run, train=read_json(train), outputs=read_parquet(outputs), splits=info["splits"],
            dataset_info=info, canary_record=records.get(run), ledger=ledger, loss_column=sm.params.loss,
            attack_scores=read_parquet(scores[run]) if run in scores else None, row_flags=flags,
            ladder_png=ladders[run], user_ids=user_ids)
        write_bytes(html, page.encode())
    choices = guidance_choices(table, dataset, targets_from_config(sm.params.targets))
    draw_guidance(table, dataset, choices, out.guidance_png, out.guidance_pdf)
    write_bytes(out.guidance, build_guidance(table, dataset, png=out.guidance_png, choices=choices).encode())
    log.info("%d dossiers with ladders and the guidance written (%d attacked runs, %d flagged rows)", len(runs), len(scores), len(flags))
