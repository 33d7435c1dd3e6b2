"""Snakemake adapter: fetch a raw file for the privacy-profile views, checksum-verified."""

from dpaudit.data.download import fetch, sha256_record_path
from dpaudit.data.registry import known_check, known_sha256
from dpaudit.logs import job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    source, filename = sm.wildcards.source, sm.wildcards.filename
    expected = known_sha256(source, filename)
    if expected is None:
        raise ValueError(f"{source}/{filename} has no published sha256; profile views need a pinned file")
    fetch(sm.params.sources, sm.output[0], expected, log=log, record=sha256_record_path(sm.output[0]),
          check=known_check(source, filename))
