"""Snakemake adapter: fetch one raw file from its mirrors, checksum-verified.

The expected hash is resolved here, not at parse time: for files without a
published hash (Purchase-100) it is the one recorded beside the file on the
first download, and a parse-time value would change after that download.
"""

from dpaudit.data.download import fetch, sha256_record_path
from dpaudit.data.registry import expected_sha256, known_check
from dpaudit.logs import job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset, filename = sm.wildcards.dataset, sm.wildcards.filename
    destination = sm.output[0]
    record = sha256_record_path(destination)
    fetch(
        sm.params.sources,
        destination,
        expected_sha256(dataset, filename, record=record),
        log=log,
        record=record,
        check=known_check(dataset, filename),
    )
