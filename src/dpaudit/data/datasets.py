"""Turn raw or generated data into the examples table (docs/architecture.md, Data contracts).

:func:`prepare_dataset` returns a :class:`pyarrow.Table` (not a pandas frame)
with columns ``example_id`` int64, ``split`` string, ``label`` int64 and ``x``
``fixed_size_list<float32>[d]``, plus a JSON-serializable info dict for
``dataset.json``. A Table is returned because pandas 3 can hold the fixed-size
list column (as ``ArrowDtype``) but a Parquet file written from such a frame
carries pandas metadata that pandas 3 / pyarrow 26 cannot read back
(``NotImplementedError: Passing pyarrow type specific parameters ([d]) in the
string``); a Table written directly round-trips. :func:`features` turns the
``x`` column back into a 2-D numpy array without per-row Python work.

Splits: members are ``train``, non-members ``holdout``, utility is measured on
``test`` -- except for Adult, where holdout = test = adult.test (Negoescu et al. 2023, Sec. 4),
so its rows are all labelled ``holdout`` and the info says the utility split is
``holdout``. Purchase-100 is the same (Negoescu et al. 2023, Sec. 4: utility is accuracy on D̄):
a seeded random 67/33 split into ``train`` and ``holdout``, no ``test`` rows.

Raw files are hashed here and the hash goes to ``raw_files`` in the info; if a
sidecar ``{raw file}.sha256`` (written by the download on first use, see
:mod:`dpaudit.data.download`) lies beside a raw file, the file must match it.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpaudit.data.download import read_sha256_record, sha256_record_path

__all__ = [
    "ADULT_CATEGORICAL",
    "ADULT_COLUMNS",
    "ADULT_NUMERIC",
    "DATASETS",
    "PURCHASE_FILE",
    "PURCHASE_MEMBER",
    "PURCHASE_TEST_SIZE",
    "SPLITS",
    "features",
    "members_before_download",
    "prepare_dataset",
    "random_split",
    "stratified_split",
]

SPLITS = ("train", "holdout", "test")
DATASETS = ("synthetic", "breast_cancer", "digits", "adult", "purchase100", "mnist")

SYNTHETIC_DEFAULTS: dict[str, Any] = {
    "n": 2000,
    "d": 20,
    "classes": 2,
    "separation": 2.0,
    "seed": 0,
}
DEFAULT_SPLIT_SEED = 0
DEFAULT_FRACTIONS = (0.5, 0.25, 0.25)
# Class sizes of the scikit-learn bundled datasets (checked against the loaders in
# tests/unit/test_datasets.py): their member counts are known before any job.
BUNDLED_CLASS_SIZES = {
    "breast_cancer": (212, 357),
    "digits": (178, 182, 177, 183, 181, 182, 181, 179, 174, 180),
}

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


# ---------------------------------------------------------------------------
# helpers


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


def members_before_download(name: str, params: Mapping[str, Any]) -> int | None:
    """Members (training examples) of a configured dataset when known before any job runs:
    synthetic (from ``n`` and ``classes``) and the bundled breast_cancer and digits
    (stratified 50/25/25 split); None for the downloaded datasets."""
    if name == "synthetic":
        n = int(params.get("n", SYNTHETIC_DEFAULTS["n"]))
        classes = int(params.get("classes", SYNTHETIC_DEFAULTS["classes"]))
        # _synthetic's labels are arange(n) % classes, permuted.
        sizes = [n // classes + (1 if c < n % classes else 0) for c in range(classes)]
    elif name in BUNDLED_CLASS_SIZES:
        sizes = list(BUNDLED_CLASS_SIZES[name])
    else:
        return None
    fraction = float(params.get("split_fractions", DEFAULT_FRACTIONS)[0])
    return sum(_share(fraction, size) for size in sizes if size)


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


# ---------------------------------------------------------------------------
# datasets


def _synthetic(params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    p = {key: params.get(key, default) for key, default in SYNTHETIC_DEFAULTS.items()}
    n, d, classes = int(p["n"]), int(p["d"]), int(p["classes"])
    separation, seed = float(p["separation"]), int(p["seed"])
    if n < 4 * classes or d < 1 or classes < 2:
        raise ValueError(f"synthetic needs classes >= 2, d >= 1, n >= 4*classes: {p}")
    rng = np.random.default_rng(seed)
    # Class means are random unit directions scaled by `separation`; every class
    # has identity covariance, so `separation` is the mean's distance from the
    # origin in units of the noise standard deviation.
    centers = rng.standard_normal((classes, d))
    centers *= separation / np.linalg.norm(centers, axis=1, keepdims=True)
    # Balanced classes in a seeded random order, so example_id order carries
    # no label information.
    y = rng.permutation(np.arange(n) % classes)
    x = centers[y] + rng.standard_normal((n, d))
    source = {"source": {"kind": "generated", "generator": "gaussian_blobs", "params": p}}
    return _finish_tabular("synthetic", x, y, params, source)


def _sklearn(name: str, params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    import sklearn
    from sklearn import datasets as skd

    loader = {"breast_cancer": skd.load_breast_cancer, "digits": skd.load_digits}[name]
    bunch = loader()
    source = {
        "source": {
            "kind": "sklearn_bundled",
            "loader": f"sklearn.datasets.{loader.__name__}",
            "sklearn_version": sklearn.__version__,
        }
    }
    names = [str(f) for f in getattr(bunch, "feature_names", [])] or None
    return _finish_tabular(
        name,
        bunch.data,
        bunch.target,
        params,
        source,
        feature_names=names,
        label_names=[str(t) for t in bunch.target_names],
    )


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


def _mnist(raw_files: Mapping[str, Path], params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    from dpaudit.data.mnist import mnist_arrays

    raw_info = _raw_file_info(raw_files, params.get("sources", {}))
    x, y, split, preprocessing = mnist_arrays(raw_files)
    preprocessing = {**preprocessing, **_fit_record(fit_split_of(params)[0], fitted=False)}
    table = _to_table(np.arange(y.size), split, y, x)
    info = _info("mnist", y, split, x.shape[1], 10, "holdout", preprocessing,
                 {"source": {"kind": "raw_files", "files": sorted(raw_info)}, "raw_files": raw_info},
                 label_names=[str(k) for k in range(10)])
    return table, info


def prepare_dataset(
    name: str, raw_files: Mapping[str, Path], params: Mapping[str, Any]
) -> tuple[pa.Table, dict[str, Any]]:
    """Build the examples table and ``dataset.json`` info for dataset ``name``.

    params keys (all optional):
      - synthetic: ``n``, ``d``, ``classes``, ``separation``, ``seed`` (see
        SYNTHETIC_DEFAULTS), ``split_seed``, ``split_fractions``;
      - breast_cancer, digits: ``split_seed`` (default 0), ``split_fractions``
        (default [0.5, 0.25, 0.25]);
      - adult: ``sources`` = {raw file name: [source, ...]} to record where the
        raw files came from (their sha256 is computed from ``raw_files``);
      - purchase100: ``split_seed`` (default 0) for the 67/33 random split, and
        ``sources`` as for adult;
      - every dataset: ``fit_on`` = ``members`` (default) or ``holdout``, the split whose
        rows fit the standardization and the categories (nothing is fitted for
        purchase100 and mnist, whose features are fixed transforms);
      - ``source: table`` (any name): the table keys of :mod:`dpaudit.data.table`, with the
        file as raw file ``table``.
    """
    params = dict(params or {})
    raw_files = {k: Path(v) for k, v in (raw_files or {}).items()}
    if params.get("source") == "table":
        from dpaudit.data.table import prepare_table

        if "table" not in raw_files:
            raise ValueError(f"dataset {name}: a table dataset needs its file as raw file 'table'")
        table, info = prepare_table(name, raw_files["table"], params)
    elif name == "synthetic":
        table, info = _synthetic(params)
    elif name in ("breast_cancer", "digits"):
        table, info = _sklearn(name, params)
    elif name == "adult":
        table, info = _adult(raw_files, params)
    elif name == "purchase100":
        table, info = _purchase(raw_files, params)
    elif name == "mnist":
        table, info = _mnist(raw_files, params)
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    _check_finite(name, table)
    return table, info


def _check_finite(name: str, table: pa.Table) -> None:
    """Refuse non-finite features: every later job (training, ε*, the audit) would turn them into NaN."""
    x = features(table)
    bad = ~np.isfinite(x)
    if bad.any():
        row, column = (int(i[0]) for i in np.nonzero(bad))
        example_id = int(table.column("example_id")[row].as_py())
        raise ValueError(f"dataset {name}: {int(bad.sum())} non-finite feature value(s) (the first: example_id "
                         f"{example_id}, feature {column}); check the raw data or the dataset's parameters under "
                         f"config.datasets.{name}")
