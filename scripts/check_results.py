"""Snakemake adapter: footers and headers of every final table and figure (dpaudit.checks)."""

from dpaudit.checks import check_results
from dpaudit.io import write_json
from dpaudit.logs import job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    record = check_results(sm.input)
    write_json(sm.output[0], record)
    log.info("%d final outputs whole: %s", record["checked"], record["kinds"])
