"""Adult (UCI census income): the raw files' columns and their reading into the examples table.

holdout = test = adult.test (Negoescu et al. 2023, Sec. 4): its rows are all labelled
``holdout`` and the utility split is ``holdout``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpaudit.data.examples import (
    _fit_record,
    _info,
    _raw_file_info,
    _standardize,
    _to_table,
    fit_split_of,
)

__all__ = ["ADULT_CATEGORICAL", "ADULT_COLUMNS", "ADULT_LABELS", "ADULT_NUMERIC"]

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)
ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
)
ADULT_CATEGORICAL = (
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native_country",
)
ADULT_LABELS = {"<=50K": 0, ">50K": 1}


def _read_adult(path: str | os.PathLike) -> tuple[Any, dict[str, int]]:
    """Parse one UCI Adult file into a frame of strings, keeping every row.

    adult.test starts with a ``|1x3 Cross validator`` line and both files end
    with a blank line; those are dropped and counted. "?" stays a literal string
    (NA parsing is off) so it becomes its own category.
    """
    import pandas as pd

    text = Path(path).read_text(encoding="ascii")
    lines = text.splitlines()
    kept = [line for line in lines if line.strip() and not line.startswith("|")]
    skipped = {
        "comment_lines": sum(line.startswith("|") for line in lines),
        "blank_lines": sum(not line.strip() for line in lines),
    }
    frame = pd.read_csv(
        io.StringIO("\n".join(kept)),
        header=None,
        names=list(ADULT_COLUMNS),
        dtype=str,
        skipinitialspace=True,
        keep_default_na=False,
        na_filter=False,
        index_col=False,
    )
    frame = frame.apply(lambda column: column.str.strip())
    if (frame["income"] == "").any():
        bad = int(np.flatnonzero((frame["income"] == "").to_numpy())[0])
        raise ValueError(f"{path}: data row {bad} has fewer than {len(ADULT_COLUMNS)} fields")
    return frame, skipped


def _adult(
    raw_files: Mapping[str, Path], params: Mapping[str, Any]
) -> tuple[pa.Table, dict[str, Any]]:
    missing = {"adult.data", "adult.test"} - set(raw_files)
    if missing:
        raise ValueError(f"adult needs raw files {sorted(missing)}")
    train, skipped_train = _read_adult(raw_files["adult.data"])
    test, skipped_test = _read_adult(raw_files["adult.test"])
    n_train = len(train)

    def labels(frame: Any, where: str) -> np.ndarray:
        # adult.test writes "<=50K." / ">50K."; the '.' is not part of the class.
        raw = frame["income"].str.rstrip(".")
        unknown = sorted(set(raw) - set(ADULT_LABELS))
        if unknown:
            raise ValueError(f"{where}: unexpected income values {unknown}")
        return raw.map(ADULT_LABELS).to_numpy(dtype=np.int64)

    y = np.concatenate([labels(train, "adult.data"), labels(test, "adult.test")])

    def numeric(frame: Any, where: str) -> np.ndarray:
        try:
            return frame[list(ADULT_NUMERIC)].astype(np.float64).to_numpy()
        except ValueError as exc:
            raise ValueError(f"{where}: non-numeric value in a numeric column: {exc}") from exc

    num = np.concatenate([numeric(train, "adult.data"), numeric(test, "adult.test")])
    is_train = np.arange(len(y)) < n_train
    fit_on, _ = fit_split_of(params)
    fit_rows = is_train if fit_on == "members" else ~is_train
    fit_file = "adult.data (train)" if fit_on == "members" else "adult.test (holdout)"
    num_std, mean, std, scale = _standardize(num, fit_rows)

    # Categories come from adult.data (the members) only, sorted, so the encoding
    # never depends on non-member rows; an adult.test value unseen in training
    # would get an all-zero block (counted below). On the real files the union
    # equals the training set except that 'Holand-Netherlands' occurs only in
    # adult.data, so both choices give the same 102 indicator columns.
    blocks = [num_std]
    categories: dict[str, list[str]] = {}
    unseen: dict[str, int] = {}
    feature_names = list(ADULT_NUMERIC)
    for column in ADULT_CATEGORICAL:
        values = np.concatenate(
            [train[column].to_numpy(dtype=str), test[column].to_numpy(dtype=str)]
        )
        cats = np.array(sorted(set(values[fit_rows])))
        pos = np.searchsorted(cats, values)
        pos_clipped = np.minimum(pos, cats.size - 1)
        known = cats[pos_clipped] == values
        onehot = np.zeros((values.size, cats.size))
        rows = np.flatnonzero(known)
        onehot[rows, pos_clipped[known]] = 1.0
        blocks.append(onehot)
        categories[column] = cats.tolist()
        unseen[column] = int((~known).sum())
        feature_names += [f"{column}={c}" for c in cats]
    x = np.hstack(blocks)

    split = np.where(is_train, "train", "holdout")
    raw_info = _raw_file_info(raw_files, params.get("sources", {}))
    preprocessing = {
        "rows": "all rows kept (no NA dropping); '?' is its own category",
        "label": "income '>50K' -> 1, '<=50K' -> 0; trailing '.' of adult.test labels stripped",
        "skipped_lines": {"adult.data": skipped_train, "adult.test": skipped_test},
        "numeric_columns": list(ADULT_NUMERIC),
        "categorical_columns": list(ADULT_CATEGORICAL),
        **_fit_record(fit_on),
        "categories_from": fit_file,
        "categories": categories,
        "unseen_test_categories": unseen,
        "standardize": {
            "fit_on": "train" if fit_on == "members" else "holdout",
            "columns": list(ADULT_NUMERIC),
            "mean": mean.tolist(),
            "std": std.tolist(),
            "scale": scale.tolist(),
        },
        "one_hot": "indicator columns left as 0/1 (not standardized)",
        "split": {
            "method": "official files",
            "train": "adult.data",
            "holdout": "adult.test (also the utility set)",
        },
        "example_id": "row order: adult.data rows 0..n_train-1, then adult.test rows",
        "note": (
            "adult.test has 16,281 data rows; Negoescu et al. report 16,280 (one row lost "
            "in their pipeline). All 16,281 are kept here."
        ),
    }
    table = _to_table(np.arange(y.size), split, y, x)
    info = _info(
        "adult",
        y,
        split,
        x.shape[1],
        2,
        "holdout",
        preprocessing,
        {"source": {"kind": "raw_files", "files": sorted(raw_info)}, "raw_files": raw_info},
        feature_names=feature_names,
        label_names=["<=50K", ">50K"],
    )
    return table, info
