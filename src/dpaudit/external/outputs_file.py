"""An outputs file of a model trained elsewhere, read and checked (issue 44).

The convention is tensorflow-privacy's ``AttackInputData`` (its ``logits``, ``probs`` and
``loss`` arrays), one row per example id instead of a train and a test array, so that a
PyTorch, JAX or scikit-learn user writes it in a few lines:

* Parquet: a column ``example_id`` (integers or text; ``id_column`` names another) and one of
  ``logits`` / ``probs`` (a list column of the C classes' values, or columns ``logits_0`` …
  ``logits_{C-1}``) / ``loss`` (the per-example cross-entropy, ≥ 0);
* CSV: the same with one column per class (``logits_0`` …);
* .npz: arrays ``example_id`` [N] and ``logits`` or ``probs`` [N, C] or ``loss`` [N]
  (read with ``allow_pickle=False``: an object array is refused, nothing is unpickled).

Optional columns: ``label`` (the class index the model was scored against; checked against the
dataset), ``correct`` (whether the model's top class is the label; needed with ``loss`` alone on
more than two classes), and a membership column named by the config (true: member, false: held
out, missing: neither). Every refusal names the file, the column, the first rows and the fix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.logs import Refusal

__all__ = ["KINDS", "PROBABILITY_TOLERANCE", "ExternalModelError", "OutputsFile", "check_values", "file_format",
           "read_outputs_file", "sha256_of", "shown_rows"]

KINDS = ("logits", "probs", "loss")
FORMATS = {".parquet": "parquet", ".csv": "csv", ".csv.gz": "csv", ".npz": "npz"}
# A row of probabilities may be rounded (a CSV written with 4 decimals): |Σp − 1| up to this is kept.
PROBABILITY_TOLERANCE = 1e-3
_SHOWN = 5


class ExternalModelError(Refusal, ValueError):
    """A model trained elsewhere that cannot be audited as given; the message names the file and the fix."""


def shown_rows(rows: np.ndarray, ids: np.ndarray | None = None) -> str:
    """'rows 3 (id 17), 9 (id 40), … (12 in all)': the first offending 0-based data rows of a file."""
    rows = np.asarray(rows)
    parts = [f"{int(r)}" + (f" (id {ids[r]})" if ids is not None else "") for r in rows[:_SHOWN]]
    more = f", … ({rows.size} in all)" if rows.size > _SHOWN else ""
    return ("row " if rows.size == 1 else "rows ") + ", ".join(parts) + more


def file_format(path: str | Path, declared: str | None = None) -> str | None:
    """parquet, csv or npz: ``declared`` if given, else from the file name's suffix."""
    if declared:
        return declared
    name = str(path).lower()
    return next((kind for suffix, kind in FORMATS.items() if name.endswith(suffix)), None)


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class OutputsFile:
    """What an outputs file holds, row order kept: ``ids`` as trimmed text, ``values`` [N, C]
    float64 (logits, probs) or [N] (loss); ``labels``, ``correct`` and ``membership`` (1 member,
    0 held out, -1 neither) when the file has those columns."""

    path: str
    format: str
    kind: str
    ids: np.ndarray
    values: np.ndarray
    labels: np.ndarray | None
    correct: np.ndarray | None
    membership: np.ndarray | None
    sha256: str

    @property
    def width(self) -> int | None:
        return None if self.kind == "loss" else int(self.values.shape[1])


def columns_npz(path: Path, where: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except ValueError as error:  # an object array: loading it would unpickle
        raise ExternalModelError(f"{where}: {path}: {error}; write numeric or text arrays (np.savez with "
                                 "allow_pickle never needed), nothing in it is unpickled") from None
    except (OSError, EOFError) as error:
        raise ExternalModelError(f"{where}: {path} is not a readable .npz file ({error}); write it with "
                                 "numpy.savez") from None


def columns_table(path: Path, kind: str, id_column: str, where: str) -> dict[str, np.ndarray]:
    import pyarrow as pa

    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:
            import pyarrow.csv as pa_csv

            # ids as text, so "007" stays "007" and a text id is never read as a number
            table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(column_types={id_column: pa.string()}))
    except (pa.ArrowInvalid, OSError) as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExternalModelError(f"{where}: {path} is not a readable {kind} file ({text}); write it with pandas "
                                 f"to_{kind} or pyarrow") from None
    columns = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type) or \
                pa.types.is_large_list(column.type):
            lengths = np.asarray(column.value_lengths().fill_null(-1))
            if lengths.size and (lengths != lengths[0]).any():
                bad = np.flatnonzero(lengths != lengths[0])
                raise ExternalModelError(f"{where}: {path}: column {name!r} holds lists of different lengths "
                                         f"({shown_rows(bad)} differ from row 0's {lengths[0]}); write one value "
                                         "per class in every row")
            flat = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
            columns[name] = flat.reshape(len(column), -1) if len(column) else np.empty((0, 0))
        else:
            columns[name] = column.to_numpy(zero_copy_only=False)
    return columns


def _class_columns(columns: dict[str, np.ndarray], kind: str) -> list[str]:
    """logits_0 … logits_{C-1} (every index from 0, none missing)."""
    found = sorted((int(name[len(kind) + 1:]), name) for name in columns
                   if name.startswith(kind + "_") and name[len(kind) + 1:].isdigit())
    return [name for index, name in found] if [i for i, _ in found] == list(range(len(found))) else []


def values_matrix(columns: dict[str, np.ndarray], kind: str, path: Path, where: str) -> np.ndarray | None:
    if kind in columns:
        values = np.asarray(columns[kind])
        if kind != "loss" and values.ndim != 2:
            raise ExternalModelError(f"{where}: {path}: {kind!r} must hold one value per class in each row "
                                     f"(a list column or an [N, C] array), got shape {values.shape}")
        if kind == "loss" and values.ndim != 1:
            raise ExternalModelError(f"{where}: {path}: 'loss' must be one number per row, got shape {values.shape}")
        return _floats(values, kind, path, where)
    names = _class_columns(columns, kind) if kind != "loss" else []
    if not names:
        return None
    return np.column_stack([_floats(columns[name], name, path, where) for name in names])


def _floats(values: np.ndarray, name: str, path: Path, where: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ExternalModelError(f"{where}: {path}: column {name!r} holds non-numbers; write numbers") from None


def _text_ids(raw: np.ndarray, name: str, path: Path, where: str) -> np.ndarray:
    raw = np.asarray(raw)
    if raw.dtype.kind == "f":
        whole = np.isfinite(raw) & (raw == np.round(raw))
        if not whole.all():
            raise ExternalModelError(f"{where}: {path}: id column {name!r} holds non-integer numbers "
                                     f"({shown_rows(np.flatnonzero(~whole))}); write integer or text ids")
        raw = raw.astype(np.int64)
    if raw.dtype.kind not in "iuOUS":
        raise ExternalModelError(f"{where}: {path}: id column {name!r} has type {raw.dtype}; write integer or text ids")
    missing = np.equal(raw, None) if raw.dtype.kind == "O" else np.zeros(raw.size, bool)
    if missing.any():
        raise ExternalModelError(f"{where}: {path}: id column {name!r} is empty in {shown_rows(np.flatnonzero(missing))}; "
                                 "give every row its example id")
    ids = np.char.strip(raw.astype(str)).astype(object)
    unique, first, counts = np.unique(ids.astype(str), return_index=True, return_counts=True)
    if (counts > 1).any():
        repeated = unique[counts > 1]
        rows = np.flatnonzero(np.isin(ids.astype(str), repeated))
        raise ExternalModelError(f"{where}: {path}: id column {name!r} repeats {len(repeated)} id(s) "
                                 f"({', '.join(repeated[:_SHOWN])}; {shown_rows(rows)}); write one row per example")
    return ids


def _membership(raw: np.ndarray, name: str, path: Path, where: str) -> np.ndarray:
    """1 (true, 1), 0 (false, 0) or -1 (empty) per row."""
    raw = np.asarray(raw, dtype=object)
    empty = np.asarray(pd.isna(raw), dtype=bool)
    text = np.char.lower(np.char.strip(np.where(empty, "", raw).astype(str)))
    out = np.full(len(raw), -1, dtype=np.int8)
    out[np.isin(text, ("1", "true", "1.0"))] = 1
    out[np.isin(text, ("0", "false", "0.0"))] = 0
    bad = np.flatnonzero((out < 0) & ~empty)
    if bad.size:
        raise ExternalModelError(f"{where}: {path}: column {name!r} holds {raw[bad[0]]!r} in {shown_rows(bad)}; "
                                 "write true or false (or leave a membership cell empty: neither member nor held out)")
    return out


def check_values(kind: str, values: np.ndarray, ids: np.ndarray, path: Path, where: str) -> None:
    column = repr(kind)
    flat = values.reshape(len(values), -1)
    bad = np.flatnonzero(~np.isfinite(flat).all(axis=1))
    if bad.size:
        raise ExternalModelError(f"{where}: {path}: NaN or inf in column {column} at {shown_rows(bad, ids)}; the "
                                 "model's outputs must be finite numbers (recompute them, or drop those rows from the "
                                 "file and from the member/held-out ids)")
    if kind == "loss":
        bad = np.flatnonzero(values < 0)
        if bad.size:
            raise ExternalModelError(f"{where}: {path}: negative loss at {shown_rows(bad, ids)}; a cross-entropy loss "
                                     "is ≥ 0 (write each example's −log p(label))")
    if kind == "probs":
        bad = np.flatnonzero(((values < 0) | (values > 1)).any(axis=1))
        if bad.size:
            raise ExternalModelError(f"{where}: {path}: probabilities outside [0, 1] at {shown_rows(bad, ids)}; "
                                     "write softmax outputs (or write logits instead)")
        sums = values.sum(axis=1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > PROBABILITY_TOLERANCE)
        if bad.size:
            raise ExternalModelError(
                f"{where}: {path}: probabilities that do not sum to 1 (±{PROBABILITY_TOLERANCE:g}) at "
                f"{shown_rows(bad, ids)} (row {bad[0]} sums to {sums[bad[0]]:.6g}); write each row's softmax over all "
                "classes, or write logits instead")


def read_outputs_file(path: str | Path, *, where: str, id_column: str = "example_id", kind: str = "auto",
                      membership_column: str | None = None, format: str | None = None) -> OutputsFile:
    """Read and check an outputs file (module docstring); ``where`` names its config entry in messages."""
    path = Path(path)
    fmt = file_format(path, format)
    if fmt is None:
        raise ExternalModelError(f"{where}: {path}: unknown file type; name it .parquet, .csv or .npz, or give "
                                 "format: parquet, csv or npz")
    if not path.is_file():
        raise ExternalModelError(f"{where}: outputs file {path} does not exist; write the path of the file (relative "
                                 "to the working directory) or create it")
    columns = columns_npz(path, where) if fmt == "npz" else columns_table(path, fmt, id_column, where)
    if id_column not in columns:
        raise ExternalModelError(f"{where}: {path} has no id column {id_column!r} (it has {sorted(columns)}); add "
                                 "the example ids there or name the column with id_column")
    ids = _text_ids(columns[id_column], id_column, path, where)
    found = {name: matrix for name in KINDS if (matrix := values_matrix(columns, name, path, where)) is not None}
    if kind == "auto":
        if not found:
            raise ExternalModelError(f"{where}: {path} has none of the output columns logits, probs, loss (or "
                                     f"logits_0 …, probs_0 …; it has {sorted(columns)}); write one of them")
        kind = next(name for name in KINDS if name in found)
    elif kind not in found:
        raise ExternalModelError(f"{where}: {path} has no {kind!r} column (nor {kind}_0 …; it has {sorted(columns)}); "
                                 "write it, or set outputs_kind to the column the file holds")
    values = found[kind]
    if len(values) != len(ids):
        raise ExternalModelError(f"{where}: {path}: {len(values)} {kind} rows for {len(ids)} ids; write one row per id")
    if kind != "loss" and values.shape[1] < 2:
        raise ExternalModelError(f"{where}: {path}: {kind} has {values.shape[1]} value per row; write one per class "
                                 "(two for a binary model: [1 − p, p] or its two logits)")
    check_values(kind, values, ids, path, where)
    labels = correct = membership = None
    if "label" in columns:
        raw = np.asarray(columns["label"])
        if raw.dtype.kind not in "iu":
            raise ExternalModelError(f"{where}: {path}: column 'label' must hold class indices 0 … C−1 (integers), "
                                     f"got type {raw.dtype}; write the indices or leave the column out")
        labels = raw.astype(np.int64)
    if "correct" in columns:
        correct = _membership(np.asarray(columns["correct"], dtype=object), "correct", path, where)
        if (correct < 0).any():
            raise ExternalModelError(f"{where}: {path}: column 'correct' is empty in "
                                     f"{shown_rows(np.flatnonzero(correct < 0))}; write true or false in every row")
        correct = correct.astype(bool)
    if membership_column is not None:
        if membership_column not in columns:
            raise ExternalModelError(f"{where}.membership_column: {path} has no column {membership_column!r} (it has "
                                     f"{sorted(columns)}); name the column that says true for members")
        membership = _membership(np.asarray(columns[membership_column], dtype=object), membership_column, path, where)
    return OutputsFile(path=str(path), format=fmt, kind=kind, ids=ids, values=values, labels=labels, correct=correct,
                       membership=membership, sha256=sha256_of(path))
