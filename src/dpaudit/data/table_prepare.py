"""Preparing a user's table (``source: table``, issue 25): the ``prepare_dataset`` job's half.

``prepare_table`` streams the file batch by batch through pyarrow's CSV or Parquet reader,
checks every cell naming the file, the column and the data row, splits stratified like the
built-in tables, fits the scaling and the categories on the chosen split only and records
every column's role and encoding in ``dataset.json``. The rules it shares with the
parse-time inspection (header, roles, readers) are ``dpaudit.data.table``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpaudit.data.table import (
    BATCH_ROWS,
    FIT_SPLITS,
    MEMBERS,
    TableError,
    _class_problems,
    _csv_options,
    _first_non_numeric,
    _fractions,
    _label_text,
    _levels_problem,
    _open_csv,
    _spec,
    _trimmed,
    _unreadable,
    _where,
    inspect_table,
)
from dpaudit.data.table_columns import NUMERIC_SHARE
from dpaudit.data.table_scan import FIRST_ROWS
from dpaudit.data.table_text import NumberFormat, number_format

__all__ = ["prepare_table"]


class _Levels:
    """A column's distinct values in first-seen order and each row's code."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.codes: list[np.ndarray] = []

    def add(self, column: pa.Array) -> None:
        encoded = pc.dictionary_encode(column)
        local = [self.index.setdefault(v, len(self.index)) for v in encoded.dictionary.to_pylist()]
        remap = np.asarray(local + [-1], dtype=np.int32)
        codes = encoded.indices.fill_null(len(local)).to_numpy(zero_copy_only=False)
        self.codes.append(remap[codes])

    def all_codes(self) -> np.ndarray:
        out = np.concatenate(self.codes) if self.codes else np.zeros(0, np.int32)
        self.codes = []
        return out


def _batches(path: Path, kind: str, spec: Mapping[str, Any], types: Mapping[str, pa.DataType],
             used: list[str], where: str, columns: tuple[str, ...] = (), empty_first: frozenset = frozenset()):
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            yield from pq.ParquetFile(str(path)).iter_batches(batch_size=BATCH_ROWS, columns=used)
            return
        yield from _open_csv(path, spec, types=types, include=used)
    except pa.ArrowInvalid as exc:
        match = re.search(r"CSV column #(\d+).*invalid value '(.*)'", str(exc))
        if match and kind == "csv":
            # pyarrow numbers the file's columns, the dropped ones included
            index = int(match.group(1))
            column = columns[index] if index < len(columns) else match.group(1)
            raise _cell_error(path, spec, column, where, column in empty_first) from exc
        raise _unreadable(where, exc, kind) from exc
    except (OSError, EOFError) as exc:
        raise _unreadable(where, exc, kind) from exc


def _cell_error(path: Path, spec: Mapping[str, Any], column: str, where: str, empty_first: bool = False) -> TableError:
    """The first non-numeric cell of a numeric CSV column (read again as text to find its row),
    with how many of its rows are numbers: a few typos, or a column that turns to text."""
    import pyarrow.csv as pa_csv

    read, parse, convert = _csv_options(spec, include=[column])
    convert.column_types = {column: pa.string()}
    text = _trimmed(pa_csv.read_csv(str(path), read_options=read, parse_options=parse,
                                    convert_options=convert).column(column))
    found = _first_non_numeric(text)
    cell = f"data row {found[0] + 1} holds {found[1]!r}" if found else "a cell is not a number"
    numbers = int(number_format(spec).mask(text).sum())
    filled = len(text) - text.null_count
    if numbers >= NUMERIC_SHARE * filled:
        return TableError(f"{where}: column {column!r} is numeric in {numbers:,} rows but {cell}; fix the cell, or "
                          "list the column under categorical (or drop) if it is not a number")
    first = "is empty in its first rows" if empty_first else "holds numbers in its first rows"
    return TableError(f"{where}: column {column!r} {first} but text in {filled - numbers:,} of its {filled:,} "
                      f"filled rows (first: {cell}); list it under categorical, or under drop")


def _missing_rows(column: pa.Array, offset: int) -> list[int]:
    rows = np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))
    return [int(r) + offset + 1 for r in rows[:FIRST_ROWS]]


def _numbers(column: pa.Array, name: str, offset: int, where: str, fmt: NumberFormat) -> np.ndarray:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        text = _trimmed(column)
        bad = np.flatnonzero(~fmt.mask(text) & ~text.is_null().to_numpy(zero_copy_only=False))
        if bad.size:
            raise TableError(f"{where}: column {name!r} is numeric but data row {int(bad[0]) + offset + 1} holds "
                             f"{text[int(bad[0])].as_py()!r} ({fmt.words()}); fix the cell, or list the column "
                             "under categorical (or drop)")
        column = fmt.to_float(text)
    values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(~np.isfinite(values) & ~column.is_null().to_numpy(zero_copy_only=False))
    if bad.size:
        raise TableError(f"{where}: column {name!r} data row {int(bad[0]) + offset + 1} holds {float(values[bad[0]])!r}, "
                         "not a finite number; fix the cell or drop the column")
    return values


def prepare_table(name: str, path: str | Path,
                  params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any], np.ndarray | None]:
    """The examples table, the dataset.json info and the user's text ids of a ``source: table``
    dataset (one per example, in row order; None when its ids are integers or it has none)."""
    from dpaudit.data.examples import _info, _sha256, _to_table, stratified_split

    spec = _spec(params)
    path = Path(path)
    sketch = inspect_table(name, params, path)
    where = _where(name, path)
    roles = sketch.roles
    used = [c for c in sketch.columns if roles[c] != "dropped"]
    label = spec["label"]
    text_ids = sketch.id_kind == "text"
    types = {c: {"numeric": pa.float64(), "boolean": pa.bool_(), "id": pa.string() if text_ids else pa.int64(),
                 "categorical": pa.string(), "label": pa.string()}[roles[c]] for c in used}
    # numbers written with the declared separators, or typed as text by pyarrow: read as text, converted here
    types.update(dict.fromkeys(sketch.text_numbers, pa.string()))
    fmt = number_format(spec)
    empty_first = frozenset(c for c in used if sketch.types.get(c) == "null")
    limit = int(spec["max_levels"])
    numeric: dict[str, list[np.ndarray]] = {c: [] for c in used if roles[c] in ("numeric", "boolean")}
    levels = {c: _Levels() for c in used if roles[c] in ("categorical", "label")}
    ids: list[np.ndarray] = []
    keep: list[np.ndarray] = []
    missing_total = dict.fromkeys(used, 0)
    offset = 0
    for batch in _batches(path, sketch.format, spec, types, used, where, sketch.columns, empty_first):
        size = batch.num_rows
        row_ok = np.ones(size, dtype=bool)
        for column_name in used:
            column = batch.column(column_name)
            if roles[column_name] == "categorical":
                column = _trimmed(column)
            elif roles[column_name] == "label":
                column = _label_text(column)
            if column.null_count:
                missing_total[column_name] += column.null_count
                if spec["missing"] == "refuse":
                    rows = _missing_rows(column, offset)
                    raise TableError(f"{where}: column {column_name!r} has missing cells (first at data row(s) "
                                     f"{rows}); fill them, or write missing: drop_rows to drop such rows "
                                     "(recorded in dataset.json)")
                row_ok &= ~column.is_null().to_numpy(zero_copy_only=False)
            role = roles[column_name]
            if role in ("numeric",):
                numeric[column_name].append(_numbers(column, column_name, offset, where, fmt))
            elif role == "boolean":
                numeric[column_name].append(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False))
            elif role == "id" and text_ids:
                ids.append(_trimmed(column).to_numpy(zero_copy_only=False))
            elif role == "id":
                ids.append(pc.cast(column, pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False))
            else:
                levels[column_name].add(column)
                if role == "categorical" and len(levels[column_name].index) > limit:
                    raise TableError(_levels_problem(column_name, len(levels[column_name].index), limit, where,
                                                     name, f"by data row {offset + size}"))
        keep.append(row_ok)
        offset += size
    if offset == 0:
        raise TableError(f"{where}: the file has a header but no data rows; write a table with data rows")
    kept = np.concatenate(keep)
    rows_dropped = int((~kept).sum())
    row_number = np.flatnonzero(kept)
    user_ids = np.concatenate(ids)[kept] if ids else None
    if text_ids:
        # text ids (or integers out of the int64 range): example_id is the 0-based data row,
        # the user's id is kept beside the examples (ids.parquet)
        _check_ids(user_ids.astype(str), row_number, spec["id"], where)
        example_id = row_number.astype(np.int64)
    else:
        example_id = user_ids if ids else row_number.astype(np.int64)
        if ids:
            _check_ids(example_id, row_number, spec["id"], where)

    label_codes = levels[label].all_codes()[kept]
    # label_numbers: merge: every spelling of a value becomes the class named as first written
    spelled = [str(v) if sketch.label_merge else v for v in levels[label].index]
    classes = list(dict.fromkeys(sketch.label_merge.get(v, v) for v in spelled))
    order = sorted(range(len(classes)), key=lambda k: _sort_key(classes[k]))
    position = np.empty(len(classes), dtype=np.int64)
    position[order] = np.arange(len(classes))
    of_class = {c: k for k, c in enumerate(classes)}
    y = position[np.asarray([of_class[sketch.label_merge.get(v, v)] for v in spelled], dtype=np.int64)[label_codes]]
    values = classes
    label_names = [str(values[k]) for k in order]
    counts = {label_names[k]: int(c) for k, c in enumerate(np.bincount(y, minlength=len(values)))}
    problems = _class_problems({k: v for k, v in counts.items() if v}, _fractions(params), label, where)
    if problems:
        raise TableError("\n  ".join(problems))
    seed = int(params.get("split_seed", 0))
    fractions = _fractions(params)
    split = stratified_split(y, seed, fractions)
    fit_on = str(params.get("fit_on", MEMBERS))
    fit = split == FIT_SPLITS[fit_on]

    feature_columns = [c for c in used if roles[c] in ("numeric", "boolean", "categorical")]
    blocks: dict[str, tuple[str, Any, list[str]]] = {}
    d = 0
    for column_name in feature_columns:
        if roles[column_name] == "categorical":
            codes = levels[column_name].all_codes()[kept]
            seen = np.unique(codes[fit])
            names_all = list(levels[column_name].index)
            fitted = sorted((names_all[k] for k in seen), key=str)
            blocks[column_name] = ("categorical", codes, fitted)
            d += len(fitted)
        else:
            blocks[column_name] = (roles[column_name], np.concatenate(numeric.pop(column_name))[kept], [])
            d += 1
    x = np.zeros((y.size, d), dtype=np.float32)
    column_info, feature_names, start = [], [], 0
    for column_name in sketch.columns:
        role = roles[column_name]
        entry: dict[str, Any] = {"name": column_name, "role": role, "missing_cells": missing_total.get(column_name)}
        if column_name in blocks:
            kind, data, fitted = blocks.pop(column_name)
            if kind == "numeric":
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    mean, std = float(data[fit].mean()), float(data[fit].std())
                    scale = std if std > 0 else 1.0
                    x[:, start] = (data - mean) / scale
                if not (math.isfinite(mean) and math.isfinite(std) and np.isfinite(x[:, start]).all()):
                    largest = int(np.argmax(np.abs(data)))
                    raise TableError(f"{where}: column {column_name!r} cannot be standardized in float64 (mean "
                                     f"{mean:.4g}, std {std:.4g} over the {fit_on} split; data row "
                                     f"{int(row_number[largest]) + 1} holds {float(data[largest]):.4g}); rescale "
                                     "the column (e.g. divide it by a power of ten) or list it under drop")
                entry.update(encoding="standardized", mean=mean, std=std, scale=scale, features=[start])
                feature_names.append(column_name)
                start += 1
            elif kind == "boolean":
                x[:, start] = data
                entry.update(encoding="0/1 indicator (false 0, true 1), not standardized", features=[start])
                feature_names.append(column_name)
                start += 1
            else:
                names_all = list(levels[column_name].index)
                lookup = {v: i for i, v in enumerate(fitted)}
                target = np.asarray([lookup.get(v, -1) for v in names_all] or [-1], dtype=np.int64)
                where_in = target[data]
                rows = np.flatnonzero(where_in >= 0)
                x[rows, start + where_in[rows]] = 1.0
                unseen = {s: int(np.sum((where_in < 0) & (split == s))) for s in ("train", "holdout", "test")}
                entry.update(encoding="one-hot (levels of the fit split, sorted; unseen level = all zeros)",
                             levels=[str(v) for v in fitted], unseen_rows=unseen,
                             features=list(range(start, start + len(fitted))))
                feature_names += [f"{column_name}={v}" for v in fitted]
                start += len(fitted)
        elif role == "label":
            entry.update(encoding="label 0..k-1 in sorted order of its values", classes=label_names)
        elif role == "id" and text_ids:
            out = (f"; {sketch.ids_out_of_int64} of them integers out of the int64 range"
                   if sketch.ids_out_of_int64 else "")
            entry.update(encoding="user ids (text" + out + ") kept in ids.parquet beside the examples; example_id "
                         "is the 0-based data row", ids="text")
        elif role == "id":
            entry.update(encoding="example_id (integers as written)")
        else:
            entry.update(encoding="not used")
        column_info.append(entry)
    del blocks, levels

    digest = _sha256(path)
    table_record = {
        "path": str(spec.get("path", path)), "format": sketch.format, "sha256": digest,
        **({"delimiter": spec["delimiter"], "encoding": spec.get("encoding") or "utf-8", "decimal": fmt.decimal,
            "thousands": fmt.thousands} if sketch.format == "csv" else {}),
        "bytes": path.stat().st_size, "rows": offset, "columns": len(sketch.columns),
        "rows_dropped": rows_dropped, "rows_used": int(y.size),
        "columns_dropped": [c for c in sketch.columns if roles[c] == "dropped"],
        "column_roles": column_info,
        # what was decided from the file's cells (dpaudit.data.table_scan), printed by prepare_dataset
        "decisions": list(sketch.decisions),
        **({"label_merged": sketch.label_merge} if sketch.label_merge else {}),
    }
    preprocessing = {
        "split": {"method": "stratified", "split_seed": seed, "fractions": list(fractions)},
        "fit_on": fit_on,
        "fitted_on_members": fit_on == MEMBERS,
        "missing": spec["missing"],
        "rows_dropped_for_missing_cells": rows_dropped,
        "label": {"column": label, "order": label_names},
        "text": "cells trimmed of surrounding whitespace; empty text is missing",
        "example_id": (f"0-based data row of the file; the user's ids of column {spec['id']!r} in ids.parquet"
                       if text_ids else f"column {spec['id']!r}" if spec.get("id") else "0-based data row of the file"),
    }
    table = _to_table(example_id, split, y, x)
    info = _info(name, y, split, d, len(label_names), "test", preprocessing,
                 {"source": {"kind": "table", "path": table_record["path"], "format": sketch.format}},
                 table=table_record, feature_names=feature_names, label_names=label_names,
                 raw_files={Path(path).name: {"sha256": digest, "bytes": table_record["bytes"],
                                              "sources": [table_record["path"]]}})
    return table, info, (user_ids.astype(str) if text_ids else None)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
        return (0, float(value), "")
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _check_ids(ids: np.ndarray, rows: np.ndarray, column: str, where: str) -> None:
    order = np.argsort(ids, kind="stable")
    same = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if same.size:
        first = order[same[0]]
        second = order[same[0] + 1]
        shown = int(ids[first]) if np.issubdtype(ids.dtype, np.integer) else repr(str(ids[first]))
        raise TableError(f"{where}: id column {column!r} holds {shown} twice (data rows "
                         f"{int(rows[first]) + 1} and {int(rows[second]) + 1}); ids must be unique")
