"""Snakemake adapter: one dataset's audit figure (accountant ε vs measured ε) and its data table."""

from dpaudit.io import read_parquet, write_parquet
from dpaudit.logs import job_logging
from dpaudit.plots.audit import audit_dataset, plot_audit

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    audit = audit_dataset(read_parquet(sm.input.table), sm.wildcards.dataset)
    write_parquet(sm.output.data, audit)
    plot_audit(audit, sm.output.png, sm.output.pdf)
    log.info("audit figure of %s: %d runs", sm.wildcards.dataset, len(audit))
