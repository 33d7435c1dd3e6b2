"""Reference models of a model trained elsewhere, given as their outputs (issue 44): LiRA's convention.

Carlini et al. 2022's LiRA (and Zarifzadeh et al. 2024's RMIA) score a target against K reference
models trained on random subsets of a population P, each with its inclusion bits ("keep"). A
practitioner who trained such models gives their outputs on P:

* Parquet: one row per (model, example): ``example_id``, ``model`` (0 … K−1), ``included`` (or
  ``keep``: the example was in that model's training data) and ``logits`` (a list column, or
  ``logits_0`` …), every model covering the same examples;
* .npz: ``example_id`` [n], ``logits`` [K, n, C] and ``keep`` (or ``included``) [K, n], read with
  ``allow_pickle=False``.

``reference_pool`` turns them into the pool table the workflow's own reference models are kept in
(``dpaudit.reference.pool.pool_frame``), so ``dpaudit.metrics.attack_rows`` attacks the model exactly
as it attacks a run with its recipe's pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.external.outputs_file import (
    ExternalModelError,
    columns_npz,
    columns_table,
    file_format,
    sha256_of,
    shown_rows,
    values_matrix,
)

__all__ = ["References", "read_references", "reference_pool", "reference_record"]


@dataclass(frozen=True)
class References:
    """K reference models' logits [K, n, C] (float32) and inclusion bits [K, n] on the examples ``ids`` (text)."""

    path: str
    ids: np.ndarray
    logits: np.ndarray
    inclusion: np.ndarray
    sha256: str


def _bits(values: np.ndarray, name: str, path: Path, where: str) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype == bool:
        return values
    ok = np.isin(values, (0, 1))
    if not ok.all():
        raise ExternalModelError(f"{where}: {path}: column {name!r} holds values other than true/false or 1/0; "
                                 "write whether each example was in each reference model's training data")
    return values.astype(bool)


def read_references(path: str | Path, where: str, fmt: str | None = None) -> References:
    """Read and check a reference outputs file (module docstring)."""
    path = Path(path)
    kind = file_format(path, fmt)
    if kind not in ("parquet", "npz"):
        raise ExternalModelError(f"{where}: {path}: reference outputs are .parquet or .npz files")
    if not path.is_file():
        raise ExternalModelError(f"{where}: reference outputs file {path} does not exist; write the path of the file "
                                 "or create it")
    columns = columns_npz(path, where) if kind == "npz" else columns_table(path, kind, "example_id", where)
    bits_name = next((name for name in ("included", "keep") if name in columns), None)
    if "example_id" not in columns or bits_name is None:
        raise ExternalModelError(f"{where}: {path} needs columns example_id, included (or keep) and logits (it has "
                                 f"{sorted(columns)})")
    if kind == "npz":
        logits = np.asarray(columns.get("logits"), dtype=np.float64)
        inclusion = _bits(columns[bits_name], bits_name, path, where)
        ids = np.char.strip(np.asarray(columns["example_id"]).astype(str)).astype(object)
        if logits.ndim != 3 or inclusion.shape != logits.shape[:2] or ids.shape != logits.shape[1:2]:
            raise ExternalModelError(f"{where}: {path}: logits must be [K, n, C], {bits_name} [K, n] and example_id [n]; "
                                     f"got {list(logits.shape)}, {list(inclusion.shape)}, {list(ids.shape)}")
    else:
        if "model" not in columns:
            raise ExternalModelError(f"{where}: {path} needs a column model (0 … K−1): one row per model and example")
        values = values_matrix(columns, "logits", path, where)
        if values is None:
            raise ExternalModelError(f"{where}: {path} has no logits column (nor logits_0 …)")
        frame = pd.DataFrame({"model": np.asarray(columns["model"]), "id": np.char.strip(
            np.asarray(columns["example_id"]).astype(str)), "row": np.arange(len(values))})
        frame = frame.sort_values(["model", "id"], kind="stable")
        models = frame["model"].unique()
        k = len(models)
        if k < 2 or len(frame) % k:
            raise ExternalModelError(f"{where}: {path}: {k} model(s) over {len(frame)} rows; write at least 2 reference "
                                     "models, each covering the same examples")
        order = frame["row"].to_numpy().reshape(k, -1)
        ids_by_model = frame["id"].to_numpy().reshape(k, -1)
        if not (ids_by_model == ids_by_model[0]).all():
            raise ExternalModelError(f"{where}: {path}: the reference models do not cover the same examples; give "
                                     "every model's outputs on every example of the population")
        logits = values[order]
        inclusion = _bits(np.asarray(columns[bits_name]), bits_name, path, where)[order]
        ids = ids_by_model[0].astype(object)
    bad = np.flatnonzero(~np.isfinite(logits).all(axis=(0, 2)))
    if bad.size:
        raise ExternalModelError(f"{where}: {path}: NaN or inf logits for {shown_rows(bad, ids)} (examples); the "
                                 "reference models' outputs must be finite")
    if logits.shape[0] < 2:
        raise ExternalModelError(f"{where}: {path}: {logits.shape[0]} reference model; write at least 2")
    return References(path=str(path), ids=ids, logits=logits.astype(np.float32), inclusion=inclusion,
                      sha256=sha256_of(path))


def reference_pool(references: References, example_ids: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """The pool table (``dpaudit.reference.pool.POOL_COLUMNS``) of the references on their examples
    (``example_ids`` and ``labels``: the dataset's, in the references' order)."""
    from dpaudit.reference.pool import pool_frame

    return pool_frame(references.logits, references.inclusion, np.asarray(example_ids, np.int64),
                      np.asarray(labels, np.int64))


def reference_record(references: References, run: str, labels: np.ndarray, entry: Mapping) -> dict:
    """The references' record (in place of a recipe pool's): what they are, how well each fits (IN) and
    generalizes (OUT) on its examples."""
    correct = np.argmax(references.logits, axis=2) == np.asarray(labels)[None, :]
    with np.errstate(invalid="ignore"):
        inside = (correct & references.inclusion).sum(axis=1) / references.inclusion.sum(axis=1)
        outside = (correct & ~references.inclusion).sum(axis=1) / (~references.inclusion).sum(axis=1)
    return {"runs": [run], "kind": "given_reference_outputs", "file": references.path, "sha256": references.sha256,
            "models": int(references.logits.shape[0]), "examples": int(references.logits.shape[1]),
            "in_accuracy": [float(v) for v in inside], "out_accuracy": [float(v) for v in outside],
            "trained_by": "the practitioner (reference models trained outside dpaudit: their recipe is theirs)"}
