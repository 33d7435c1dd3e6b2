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

Adult's reading is ``dpaudit.data.adult``, Purchase-100's ``dpaudit.data.purchase``, the
user's table ``dpaudit.data.table``; the split, scaling, Arrow table and info every dataset
shares are ``dpaudit.data.examples``.

Raw files are hashed here and the hash goes to ``raw_files`` in the info; if a
sidecar ``{raw file}.sha256`` (written by the download on first use, see
:mod:`dpaudit.data.download`) lies beside a raw file, the file must match it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpaudit.data.examples import (
    DEFAULT_FRACTIONS,
    _finish_tabular,
    _fit_record,
    _info,
    _raw_file_info,
    _share,
    _to_table,
    features,
    fit_split_of,
)

__all__ = [
    "DATASETS",
    "members_before_download",
    "prepare_dataset",
]

DATASETS = ("synthetic", "breast_cancer", "digits", "adult", "purchase100", "mnist", "synthetic_images")
# The image shape [H, W, C] of the built-in image datasets (rows are flattened row-major); a
# CNN reshapes the features back (dpaudit.training.architectures).
IMAGE_SHAPES = {"digits": [8, 8, 1], "mnist": [28, 28, 1]}

SYNTHETIC_DEFAULTS: dict[str, Any] = {
    "n": 2000,
    "d": 20,
    "classes": 2,
    "separation": 2.0,
    "seed": 0,
}
# Class sizes of the scikit-learn bundled datasets (checked against the loaders in
# tests/unit/test_datasets.py): their member counts are known before any job.
BUNDLED_CLASS_SIZES = {
    "breast_cancer": (212, 357),
    "digits": (178, 182, 177, 183, 181, 182, 181, 179, 174, 180),
}


def members_before_download(name: str, params: Mapping[str, Any]) -> int | None:
    """Members (training examples) of a configured dataset when known before any job runs:
    synthetic (from ``n`` and ``classes``) and the bundled breast_cancer and digits
    (stratified 50/25/25 split); None for the downloaded datasets."""
    if name == "synthetic":
        n = int(params.get("n", SYNTHETIC_DEFAULTS["n"]))
        classes = int(params.get("classes", SYNTHETIC_DEFAULTS["classes"]))
        # _synthetic's labels are arange(n) % classes, permuted.
        sizes = [n // classes + (1 if c < n % classes else 0) for c in range(classes)]
    elif name == "synthetic_images":
        from dpaudit.data.arrays import IMAGES_DEFAULTS

        n = int(params.get("n", IMAGES_DEFAULTS["n"]))
        classes = int(params.get("classes", IMAGES_DEFAULTS["classes"]))
        sizes = [n // classes + (1 if c < n % classes else 0) for c in range(classes)]
    elif name in BUNDLED_CLASS_SIZES:
        sizes = list(BUNDLED_CLASS_SIZES[name])
    else:
        return None
    fraction = float(params.get("split_fractions", DEFAULT_FRACTIONS)[0])
    return sum(_share(fraction, size) for size in sizes if size)


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
    image = {"image_shape": IMAGE_SHAPES[name]} if name in IMAGE_SHAPES else {}
    return _finish_tabular(
        name,
        bunch.data,
        bunch.target,
        params,
        source,
        feature_names=names,
        label_names=[str(t) for t in bunch.target_names],
        **image,
    )


def _mnist(raw_files: Mapping[str, Path], params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    from dpaudit.data.mnist import mnist_arrays

    raw_info = _raw_file_info(raw_files, params.get("sources", {}))
    x, y, split, preprocessing = mnist_arrays(raw_files)
    preprocessing = {**preprocessing, **_fit_record(fit_split_of(params)[0], fitted=False)}
    table = _to_table(np.arange(y.size), split, y, x)
    info = _info("mnist", y, split, x.shape[1], 10, "holdout", preprocessing,
                 {"source": {"kind": "raw_files", "files": sorted(raw_info)}, "raw_files": raw_info},
                 label_names=[str(k) for k in range(10)], image_shape=IMAGE_SHAPES["mnist"])
    return table, info


def prepare_dataset(
    name: str, raw_files: Mapping[str, Path], params: Mapping[str, Any]
) -> tuple[pa.Table, dict[str, Any]]:
    """The examples table and ``dataset.json`` info of dataset ``name`` (``prepare_dataset_ids``
    without the ids table)."""
    table, info, _ = prepare_dataset_ids(name, raw_files, params)
    return table, info


# dataset.json's ids.kind of a table whose ids are the user's text (ids.parquet is then needed to join)
TEXT_IDS = "the user's text ids"


def id_table(table: pa.Table, text_ids: np.ndarray | None) -> pa.Table:
    """``ids.parquet``: each example_id with the user's own id as text (the example_id itself
    when the dataset's ids are integers or it has none), to join any output back to them."""
    example_id = table.column("example_id").combine_chunks()
    ids = pa.array(text_ids, pa.string()) if text_ids is not None else pc.cast(example_id, pa.string())
    return pa.table({"example_id": example_id, "id": ids})


def prepare_dataset_ids(
    name: str, raw_files: Mapping[str, Path], params: Mapping[str, Any]
) -> tuple[pa.Table, dict[str, Any], pa.Table]:
    """Build the examples table, the ``dataset.json`` info and the ids table (``id_table``) of dataset ``name``.

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
        file as raw file ``table``;
      - synthetic_images: ``n``, ``image_size``, ``channels``, ``classes``, ``noise``, ``seed``
        (``dpaudit.data.arrays.IMAGES_DEFAULTS``), ``split_seed``, ``split_fractions``;
      - ``source: arrays`` (any name): the user's .npz images (``dpaudit.data.arrays``), with the
        file as raw file ``arrays``.
    Image datasets (digits, mnist, synthetic_images, arrays) record ``image_shape`` [H, W, C].
    """
    params = dict(params or {})
    raw_files = {k: Path(v) for k, v in (raw_files or {}).items()}
    text_ids = None
    if params.get("source") == "table":
        from dpaudit.data.table_prepare import prepare_table

        if "table" not in raw_files:
            raise ValueError(f"dataset {name}: a table dataset needs its file as raw file 'table'")
        table, info, text_ids = prepare_table(name, raw_files["table"], params)
    elif params.get("source") == "arrays":
        from dpaudit.data.arrays import prepare_arrays

        if "arrays" not in raw_files:
            raise ValueError(f"dataset {name}: an arrays dataset needs its .npz file as raw file 'arrays'")
        table, info = prepare_arrays(name, raw_files["arrays"], params)
    elif name == "synthetic_images":
        from dpaudit.data.arrays import synthetic_images

        table, info = synthetic_images(params)
    elif name == "synthetic":
        table, info = _synthetic(params)
    elif name in ("breast_cancer", "digits"):
        table, info = _sklearn(name, params)
    elif name == "adult":
        from dpaudit.data.adult import _adult

        table, info = _adult(raw_files, params)
    elif name == "purchase100":
        from dpaudit.data.purchase import _purchase

        table, info = _purchase(raw_files, params)
    elif name == "mnist":
        table, info = _mnist(raw_files, params)
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    _check_finite(name, table)
    info["ids"] = {"file": "ids.parquet", "columns": ["example_id", "id"],
                   "kind": TEXT_IDS if text_ids is not None else "the example_id itself"}
    return table, info, id_table(table, text_ids)


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
