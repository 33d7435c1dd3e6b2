"""The examples table's common parts: splits, standardization, the Arrow table and dataset.json.

Every dataset (``dpaudit.data.datasets``, ``dpaudit.data.adult``, ``dpaudit.data.purchase``,
the user's table ``dpaudit.data.table``) builds its examples table with these: the stratified
split and its one rounding rule (``_share``), the scaling fitted on one split
(``fit_on``), the ``x`` column as a fixed-size list of float32 (``features`` reads it back
without per-row Python work) and the info dict of ``dataset.json``.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpaudit.data.download import read_sha256_record, sha256_record_path

__all__ = ["DEFAULT_FRACTIONS", "DEFAULT_SPLIT_SEED", "FIT_ON", "SPLITS", "features", "fit_split_of",
           "stratified_split"]

SPLITS = ("train", "holdout", "test")
DEFAULT_SPLIT_SEED = 0
DEFAULT_FRACTIONS = (0.5, 0.25, 0.25)


def _sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def stratified_split(
    labels: np.ndarray, seed: int, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS
) -> np.ndarray:
    """Assign each example to train/holdout/test, stratified by label.

    Within each class (in sorted label order) the indices are permuted with one
    generator seeded by ``seed``; the first ``round(f_train * n_c)`` go to train,
    the next ``round(f_holdout * n_c)`` to holdout, the rest to test. Done by
    hand rather than with scikit-learn so the assignment depends only on numpy's
    PCG64 stream, not on a library's splitting internals.
    """
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or min(fractions) <= 0 or not math.isclose(sum(fractions), 1.0):
        raise ValueError(
            f"split fractions must be three positive numbers summing to 1: {fractions}"
        )
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    split = np.empty(labels.shape[0], dtype=object)
    for value in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == value))
        n_train = _share(fractions[0], idx.size)
        n_holdout = _share(fractions[1], idx.size)
        split[idx[:n_train]] = "train"
        split[idx[n_train : n_train + n_holdout]] = "holdout"
        split[idx[n_train + n_holdout :]] = "test"
    return split.astype(str)


def _share(fraction: float, size: int) -> int:
    """Examples of a class of ``size`` that go to a split of ``fraction`` (the one rounding rule)."""
    return int(round(fraction * size))


def _raw_file_info(
    raw_files: Mapping[str, Path], sources: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Hash each raw file for dataset.json, checking it against a recorded hash if any.

    The sidecar is the hash pinned on first download; a file that no longer
    matches it was replaced or damaged after that download, and results built
    from it would silently differ from earlier ones.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, path in sorted(raw_files.items()):
        actual = _sha256(path)
        record = sha256_record_path(path)
        recorded = read_sha256_record(record)
        if recorded is not None and recorded != actual:
            raise ValueError(
                f"{path} has sha256 {actual} but {recorded} was recorded on first download "
                f"({record}); the raw file changed since, so it is not used"
            )
        out[name] = {
            "sha256": actual,
            "bytes": Path(path).stat().st_size,
            "sources": list(sources.get(name, [])),
            "sha256_verified_against": None if recorded is None else str(record),
        }
    return out


def _standardize(
    x: np.ndarray, train_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Standardize columns with training-split statistics only.

    Non-members must not influence the transform, or the preprocessing itself
    would leak membership information. Constant training columns (e.g. blank
    border pixels in digits) are centred but not scaled. Returns the result and
    the mean, std (ddof=0) and the scale actually divided by.
    """
    mean = x[train_mask].mean(axis=0)
    std = x[train_mask].std(axis=0)
    scale = np.where(std > 0, std, 1.0)
    return (x - mean) / scale, mean, std, scale


def _to_table(
    example_id: np.ndarray, split: np.ndarray, label: np.ndarray, x: np.ndarray
) -> pa.Table:
    n, d = x.shape
    flat = pa.array(np.ascontiguousarray(x, dtype=np.float32).reshape(n * d))
    return pa.table(
        {
            "example_id": pa.array(np.asarray(example_id, dtype=np.int64)),
            "split": pa.array(np.asarray(split, dtype=str), type=pa.string()),
            "label": pa.array(np.asarray(label, dtype=np.int64)),
            "x": pa.FixedSizeListArray.from_arrays(flat, d),
        }
    )


def features(data: pa.Table | pa.ChunkedArray | pa.FixedSizeListArray) -> np.ndarray:
    """The ``x`` column as an (n, d) float32 array (zero-copy where Arrow allows)."""
    column = data.column("x") if isinstance(data, pa.Table) else data
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    d = column.type.list_size
    # flatten() honours the array's offset (slices), unlike .values.
    return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, d)


def _class_counts(label: np.ndarray, split: np.ndarray, classes: int) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for name in SPLITS:
        counts = np.bincount(label[split == name], minlength=classes)
        if counts.sum():
            out[name] = {str(k): int(v) for k, v in enumerate(counts)}
    return out


def _info(
    name: str,
    label: np.ndarray,
    split: np.ndarray,
    d: int,
    classes: int,
    utility_split: str,
    preprocessing: dict[str, Any],
    source: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    n_split = {s: int(np.sum(split == s)) for s in SPLITS if np.any(split == s)}
    return {
        "name": name,
        "n": int(label.size),
        "n_per_split": n_split,
        "n_members": n_split.get("train", 0),
        "d": int(d),
        "classes": int(classes),
        "class_counts": _class_counts(label, split, classes),
        "splits": {"members": "train", "nonmembers": "holdout", "utility": utility_split},
        "preprocessing": preprocessing,
        **source,
        **extra,
    }


FIT_ON = {"members": "train", "holdout": "holdout"}


def fit_split_of(params: Mapping[str, Any]) -> tuple[str, str]:
    """(``fit_on`` as configured, the split whose rows fit the scaling and the categories)."""
    fit_on = str(params.get("fit_on", "members"))
    if fit_on not in FIT_ON:
        raise ValueError(f"fit_on must be one of {sorted(FIT_ON)}, got {fit_on!r}")
    return fit_on, FIT_ON[fit_on]


def _fit_record(fit_on: str, fitted: bool = True) -> dict[str, Any]:
    """What dataset.json says of the fitted preprocessing (the dossier reads ``fitted_on_members``)."""
    return {"fit_on": fit_on, "fitted_on_members": fitted and fit_on == "members"}


def _split_params(params: Mapping[str, Any]) -> tuple[int, tuple[float, float, float]]:
    seed = int(params.get("split_seed", DEFAULT_SPLIT_SEED))
    f_train, f_holdout, f_test = (
        float(f) for f in params.get("split_fractions", DEFAULT_FRACTIONS)
    )
    return seed, (f_train, f_holdout, f_test)


def _finish_tabular(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    params: Mapping[str, Any],
    source: dict[str, Any],
    **extra: Any,
) -> tuple[pa.Table, dict[str, Any]]:
    """Split, standardize, package: shared by the non-Adult datasets."""
    seed, fractions = _split_params(params)
    y = np.asarray(y, dtype=np.int64)
    split = stratified_split(y, seed, fractions)
    fit_on, fit_split = fit_split_of(params)
    x_std, mean, std, scale = _standardize(np.asarray(x, dtype=np.float64), split == fit_split)
    classes = int(y.max()) + 1
    preprocessing = {
        "split": {"method": "stratified", "split_seed": seed, "fractions": list(fractions)},
        **_fit_record(fit_on),
        "standardize": {
            "fit_on": fit_split,
            "columns": "all",
            "mean": mean.tolist(),
            "std": std.tolist(),
            "scale": scale.tolist(),
        },
    }
    table = _to_table(np.arange(y.size), split, y, x_std)
    return table, _info(name, y, split, x.shape[1], classes, "test", preprocessing, source, **extra)
