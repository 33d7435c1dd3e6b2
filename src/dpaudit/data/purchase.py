"""Purchase-100 (Shokri et al. 2017's public file): reading it and its seeded random 67/33 split.

Negoescu et al. 2023, Sec. 4: utility is accuracy on D̄, so the split has ``train`` and
``holdout`` rows and no ``test`` rows.
"""

from __future__ import annotations

import math
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpaudit.data.examples import (
    DEFAULT_SPLIT_SEED,
    _fit_record,
    _info,
    _raw_file_info,
    _to_table,
    fit_split_of,
)

__all__ = ["PURCHASE_CLASSES", "PURCHASE_FILE", "PURCHASE_MEMBER", "PURCHASE_TEST_SIZE", "random_split"]

PURCHASE_FILE = "dataset_purchase.tgz"
PURCHASE_MEMBER = "dataset_purchase"
PURCHASE_D = 600
PURCHASE_CLASSES = 100
PURCHASE_PUBLISHED_N = 197_324
PURCHASE_TEST_SIZE = 0.33
PURCHASE_VERSION_NOTE = (
    "Shokri et al. 2017 public file, 197,324 records; the paper used a 311,540-record "
    "version from raw Kaggle data, so n and δ differ"
)


def random_split(n: int, seed: int, test_size: float = PURCHASE_TEST_SIZE) -> np.ndarray:
    """Assign ``n`` examples to train/holdout at random, sized like sklearn's split.

    ``ceil(test_size * n)`` examples (the same float expression as scikit-learn's
    ``train_test_split``) go to holdout, the rest to train; for Purchase-100 that
    is 65,117 / 132,207 (Negoescu et al. 2023 give ~300,000 records; the sizes match scikit-learn's test_size = 0.33, rounded up). Which examples go where comes from a
    permutation by numpy's PCG64 seeded with ``seed`` -- not stratified, as in
    the paper's random split.
    """
    n = int(n)
    test_size = float(test_size)
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must lie in (0, 1), got {test_size}")
    n_holdout = math.ceil(test_size * n)
    if n_holdout < 1 or n - n_holdout < 1:
        raise ValueError(f"n={n} with test_size={test_size} leaves an empty split")
    order = np.random.default_rng(seed).permutation(n)
    split = np.full(n, "train", dtype=object)
    split[order[n - n_holdout :]] = "holdout"
    return split.astype(str)


def _read_purchase(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Labels (1..100) and features (0/1) of the tgz as uint8 arrays.

    The member is parsed straight from the decompressing stream (no extraction
    to disk) by Arrow's CSV reader with every column typed uint8. Arrow rejects
    out-of-range text ('256', '-1', '1.5') where pandas' ``dtype=np.uint8``
    silently wraps it, and uint8 keeps the 197,324 x 601 table at ~120 MB.
    """
    import pyarrow.csv as pa_csv

    columns = PURCHASE_D + 1
    read_options = pa_csv.ReadOptions(autogenerate_column_names=True)
    convert_options = pa_csv.ConvertOptions(
        column_types={f"f{k}": pa.uint8() for k in range(columns)},
        strings_can_be_null=False,
    )
    table = None
    try:
        with tarfile.open(path, mode="r|gz") as archive:
            for member in archive:
                if member.name.removeprefix("./") != PURCHASE_MEMBER or not member.isfile():
                    continue
                stream = archive.extractfile(member)
                if stream is None:
                    continue
                try:
                    table = pa_csv.read_csv(
                        stream, read_options=read_options, convert_options=convert_options
                    )
                except pa.ArrowInvalid as exc:
                    raise ValueError(
                        f"{path}: {PURCHASE_MEMBER} is not rows of "
                        f"'label,f1,...,f{PURCHASE_D}' with integers 0..255: {exc}"
                    ) from exc
                break
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ValueError(f"{path}: not a readable gzip tar: {exc}") from exc
    if table is None:
        raise ValueError(f"{path}: the archive has no regular file {PURCHASE_MEMBER!r}")
    if table.num_columns != columns:
        raise ValueError(
            f"{path}: {PURCHASE_MEMBER} has {table.num_columns} columns, expected "
            f"{columns} (label + {PURCHASE_D} features)"
        )
    empty = [k for k, column in enumerate(table.columns) if column.null_count]
    if empty:
        raise ValueError(f"{path}: {PURCHASE_MEMBER} has empty fields in column(s) {empty[:10]}")
    values = np.column_stack([column.to_numpy() for column in table.columns])
    return values[:, 0], values[:, 1:]


def _purchase(
    raw_files: Mapping[str, Path], params: Mapping[str, Any]
) -> tuple[pa.Table, dict[str, Any]]:
    if PURCHASE_FILE not in raw_files:
        raise ValueError(f"purchase100 needs raw file {PURCHASE_FILE!r}")
    path = raw_files[PURCHASE_FILE]
    seed = int(params.get("split_seed", DEFAULT_SPLIT_SEED))
    raw_info = _raw_file_info({PURCHASE_FILE: path}, params.get("sources", {}))
    raw_label, x = _read_purchase(path)
    if raw_label.min() < 1 or raw_label.max() > PURCHASE_CLASSES:
        bad = int(np.flatnonzero((raw_label < 1) | (raw_label > PURCHASE_CLASSES))[0])
        raise ValueError(
            f"{path}: row {bad} has label {int(raw_label[bad])}, expected 1..{PURCHASE_CLASSES}"
        )
    if x.max() > 1:
        row = int(np.flatnonzero((x > 1).any(axis=1))[0])
        raise ValueError(f"{path}: row {row} has a feature outside {{0, 1}}")
    y = raw_label.astype(np.int64) - 1
    split = random_split(y.size, seed, PURCHASE_TEST_SIZE)
    n_holdout = int(np.sum(split == "holdout"))
    preprocessing = {
        "label": f"raw label 1..{PURCHASE_CLASSES} -> label - 1 (0..{PURCHASE_CLASSES - 1})",
        "features": (
            f"{PURCHASE_D} binary features kept as float32 0/1; not standardized "
            "(already binary in the Shokri et al. preprocessing)"
        ),
        "standardize": None,
        **_fit_record(fit_split_of(params)[0], fitted=False),
        "split": {
            "method": "random, not stratified (numpy PCG64 permutation)",
            "split_seed": seed,
            "test_size": PURCHASE_TEST_SIZE,
            "rounding": "holdout = ceil(test_size * n), as sklearn train_test_split",
            "n_train": int(y.size - n_holdout),
            "n_holdout": n_holdout,
            "train": "members",
            "holdout": "non-members, also the utility set",
        },
        "example_id": f"0-based row order of {PURCHASE_MEMBER}",
    }
    table = _to_table(np.arange(y.size), split, y, x)
    info = _info(
        "purchase100",
        y,
        split,
        PURCHASE_D,
        PURCHASE_CLASSES,
        "holdout",
        preprocessing,
        {"source": {"kind": "raw_files", "files": sorted(raw_info)}, "raw_files": raw_info},
        version_note=PURCHASE_VERSION_NOTE,
        published_n=PURCHASE_PUBLISHED_N,
        matches_published_n=bool(y.size == PURCHASE_PUBLISHED_N),
        label_names=[str(k) for k in range(1, PURCHASE_CLASSES + 1)],
    )
    return table, info
