"""Numeric views for the privacy-profile family (LeBlond et al. 2023, §5).

A view keeps every raw row (Adult's '?' rows included, so row ids match the
paper's 1-based indices), standardizes each chosen column (ddof = 0) and divides
every row by the largest row norm, so that max‖x‖ = 1 and the sensitivity 2/(nΛ) holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpaudit.profile.model import check_view

ADULT_TWO_FEATURES = (0, 4)  # age, education-num: the paper's "first and fifth columns"
ADULT_SIX_FEATURES = (0, 2, 4, 10, 11, 12)  # the six continuous columns (LeBlond et al. 2023, Sec. 5.1 uses six; the paper names none)
ADULT_COLUMN_NAMES = ("age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
                      "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
                      "hours_per_week", "native_country", "income")
BREAST_CANCER_TWO_FEATURES = (0, 1)


@dataclass(frozen=True)
class ProfileView:
    features: np.ndarray  # (n, d), rows in the unit ball
    labels: np.ndarray  # (n,), ±1
    row_ids: np.ndarray  # 1-based row numbers in the source file
    feature_names: tuple[str, ...]
    metadata: dict = field(default_factory=dict)


def scale_rows(raw: np.ndarray, fit_rows: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Standardize columns, then divide by the largest row norm; statistics from ``fit_rows`` (default all)."""
    raw = np.asarray(raw, dtype=np.float64)
    fitted = raw if fit_rows is None else raw[fit_rows]
    means = fitted.mean(axis=0)
    stds = fitted.std(axis=0)
    if (stds == 0).any():
        raise ValueError(f"constant feature column(s) {np.flatnonzero(stds == 0).tolist()} cannot be standardized")
    z = (raw - means) / stds
    norms = np.linalg.norm((fitted - means) / stds, axis=1)
    max_norm = float(norms.max())
    return z / max_norm, {"means": means.tolist(), "stds": stds.tolist(), "max_row_norm": max_norm,
                          "max_norm_row_index": int(np.argmax(norms)), "std_ddof": 0}


def make_view(raw: np.ndarray, labels: np.ndarray, names: tuple[str, ...], *, first_rows: int | None,
              scale_on_subset: bool, metadata: dict, key: str = "first_rows") -> ProfileView:
    """``key`` names ``first_rows`` in errors (the config path, e.g. profile.views.<name>.first_rows)."""
    n_total = raw.shape[0]
    if first_rows is not None and not 2 <= int(first_rows) <= n_total:
        raise ValueError(f"{key} = {first_rows}: must be between 2 and the {n_total} rows of "
                         f"{metadata.get('source', 'the source')}")
    keep = np.arange(n_total if first_rows is None else int(first_rows))
    fit_rows = keep if scale_on_subset else None
    scaled, scaling = scale_rows(raw, fit_rows)
    features, labels_pm = check_view(scaled[keep], np.asarray(labels)[keep], row_ids=keep + 1)
    return ProfileView(features=features, labels=labels_pm, row_ids=keep + 1, feature_names=names,
                       metadata={**metadata, **scaling, "first_rows": first_rows,
                                 "scale_fitted_on": "subset" if scale_on_subset else "full", "n": int(keep.size)})


def _columns(columns, width: int, source: str, key: str) -> tuple[int, ...]:
    """The 0-based raw columns, refused with the view's key and the valid range when out of range."""
    columns = tuple(int(c) for c in columns)
    for position, column in enumerate(columns):
        if not 0 <= column < width:
            raise ValueError(f"{key}[{position}]: column {column} does not exist in source {source} "
                             f"({width} columns); write a column in 0..{width - 1}")
    return columns


def adult_view(path: str | Path, columns=ADULT_TWO_FEATURES, *, first_rows: int | None = None,
               scale_on_subset: bool = True, key: str = "first_rows", columns_key: str = "columns") -> ProfileView:
    """Numeric Adult view from the raw ``adult.data``: t = +1 for income ">50K", −1 otherwise."""
    from dpaudit.data.adult import _read_adult
    from dpaudit.data.download import sha256_file

    columns = _columns(columns, len(ADULT_COLUMN_NAMES), "adult", columns_key)
    frame, _ = _read_adult(path)
    names = tuple(ADULT_COLUMN_NAMES[c] for c in columns)
    raw = frame[list(names)].astype(np.float64).to_numpy()
    income = frame["income"].str.rstrip(".")
    unknown = sorted(set(income) - {">50K", "<=50K"})
    if unknown:
        raise ValueError(f"{path}: unexpected income values {unknown}")
    labels = np.where(income == ">50K", 1, -1)
    meta = {"dataset": "adult", "source": "adult.data", "sha256": sha256_file(path), "columns": list(columns)}
    return make_view(raw, labels, names, first_rows=first_rows, scale_on_subset=scale_on_subset, metadata=meta,
                     key=key)


def breast_cancer_view(columns=BREAST_CANCER_TWO_FEATURES, *, first_rows: int | None = None,
                       scale_on_subset: bool = True, key: str = "first_rows",
                       columns_key: str = "columns") -> ProfileView:
    """Offline view (scikit-learn's copy of WDBC): t = +1 for benign (target 1), −1 for malignant."""
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    columns = _columns(columns, len(bunch.feature_names), "breast_cancer", columns_key)
    names = tuple(str(bunch.feature_names[c]) for c in columns)
    labels = np.where(bunch.target == 1, 1, -1)
    meta = {"dataset": "breast_cancer", "source": "sklearn.datasets.load_breast_cancer", "columns": list(columns)}
    return make_view(bunch.data[:, columns], labels, names, first_rows=first_rows,
                     scale_on_subset=scale_on_subset, metadata=meta, key=key)


VIEW_LOADERS = {"adult": adult_view, "breast_cancer": breast_cancer_view}


def load_view(spec: dict, raw_path: str | Path | None = None, name: str = "<name>") -> ProfileView:
    """The view a config entry (``profile.views.<name>``) describes; Adult reads ``raw_path``."""
    options = {"first_rows": spec.get("first_rows"), "scale_on_subset": spec.get("scale_on_subset", True),
               "key": f"profile.views.{name}.first_rows", "columns_key": f"profile.views.{name}.columns"}
    if spec["source"] == "adult":
        if raw_path is None:
            raise ValueError("an adult view needs the raw adult.data file")
        return adult_view(raw_path, spec["columns"], **options)
    if spec["source"] not in VIEW_LOADERS:
        raise ValueError(f"profile view source {spec['source']!r} is not one of {sorted(VIEW_LOADERS)}")
    return VIEW_LOADERS[spec["source"]](spec["columns"], **options)
