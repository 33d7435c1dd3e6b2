"""A user's CSV or Parquet table as a dataset (issue 25): ``source: table`` entries.

Two entry points, one set of rules:

- :func:`inspect_table` (parse time, no job): the file exists and opens, decodes with the
  ``encoding`` key's codec (``dpaudit.data.table_text``), a one-column header holding ``;``, a
  tab or ``|`` names the ``delimiter`` key, the header has no empty or duplicate names, the
  label, id, drop and categorical columns exist, the types of the first block propose each
  column's role, and one pass over every cell (``dpaudit.data.table_scan``, issue 46) settles
  it: numbers that are not numbers as the ``decimal`` and ``thousands`` keys write them are
  refused naming the key, a column of ≥ 95 % numbers with typos is refused naming the first,
  a column empty in every row is refused, missing cells are refused listing every column
  (``missing: refuse``) or their rows are dropped and counted (``drop_rows``), no
  categorical column exceeds ``max_levels``, the label (of the rows kept) has two or more
  classes each large enough for the stratified split and no two values differing only in
  case or equal as numbers (``label_case``, ``label_numbers``;
  ``dpaudit.data.table_columns``), and the ids are kept as written: integers in the int64
  range or else text, unique as written (``id_kind``, ``duplicate_ids``). A Parquet
  column's declared type is kept: a string column is never read as numbers. It gives the
  members count for the parse-time batch-size and canary checks, the file sizes for the
  job's memory and each decision taken from the cells (``TableSketch.decisions``).
- :func:`dpaudit.data.table_prepare.prepare_table` (the ``prepare_dataset`` job): streams the file batch by batch
  through pyarrow's CSV or Parquet reader (no hand-written parser), checks every cell again
  (the file may have changed since) naming the file, the column and the data row (1 = the
  first row after the header), splits stratified like the built-in tables, fits the scaling
  and the categories on the chosen split only (``fit_on``: members by default, or holdout),
  refuses a column whose standardization overflows float64 naming its largest value's row,
  and records every column's role and encoding and the decisions in ``dataset.json``.

Roles: ``label`` (mapped to 0..k-1 in sorted order of its values, recorded), ``id``
(int64 integers: the ``example_id``; text or larger integers: kept in ``ids.parquet`` and
the ``example_id`` is the 0-based data row, as without an id), ``dropped``,
``numeric`` (standardized: (x - mean) / std of the fit split, std 0 -> 1), ``categorical``
(one indicator per level seen in the fit split, sorted; a level not seen there gives an
all-zero block, counted per split) and ``boolean`` (one 0/1 feature). Text cells are
trimmed of surrounding whitespace; an empty cell (or one of pyarrow's null markers:
"NA", "NaN", "null", ...) is missing.
"""

from __future__ import annotations

import functools
import gzip
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpaudit.data.table_columns import (
    case_collisions,
    duplicate_ids,
    empty_column,
    first_rows,
    id_kind,
    number_collisions,
    trimmed,
)
from dpaudit.data.table_scan import column_decisions, missing_problem, padded_numbers, scan
from dpaudit.data.table_text import NumberFormat, encoding_problem, number_format
from dpaudit.logs import Refusal

__all__ = [
    "TABLE_DEFAULTS",
    "TABLE_KEYS",
    "TableError",
    "TableSketch",
    "inspect_table",
    "table_format",
]

TABLE_KEYS = ("source", "path", "format", "column_names", "label", "id", "categorical", "drop", "missing", "max_levels",
              "delimiter", "label_case", "label_numbers", "decimal", "thousands", "encoding")
TABLE_DEFAULTS: dict[str, Any] = {"categorical": "auto", "drop": [], "missing": "refuse", "max_levels": 100,
                                  "delimiter": ",", "label_case": "refuse", "label_numbers": "refuse",
                                  "encoding": "utf-8"}
# keys that say how a CSV file is written: a Parquet file's cells are typed UTF-8
CSV_ONLY_KEYS = ("decimal", "thousands", "encoding", "delimiter", "column_names")
# A one-column CSV header holding one of these is a file separated by it, read with ','.
OTHER_DELIMITERS = (";", "\t", "|")
SUFFIXES = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet"}
SAMPLE_BYTES = 1 << 20
BATCH_ROWS = 1 << 16
# a label of numbers with more distinct values than this, some too rare to split, is called continuous
CONTINUOUS_CLASSES = 20
FIRST_CLASSES = 5
MEMBERS, HOLDOUT = "members", "holdout"
FIT_SPLITS = {MEMBERS: "train", HOLDOUT: "holdout"}


class TableError(Refusal, ValueError):
    """A table that cannot become a dataset; the message names the file, column and row."""


@dataclass(frozen=True)
class TableSketch:
    """What parse time knows of a table (nothing of its cells beyond the first block and the label)."""

    path: str
    format: str
    columns: tuple[str, ...]
    roles: dict[str, str]
    types: dict[str, str]
    label_counts: dict[str, int] = field(default_factory=dict)
    file_bytes: int = 0
    text_bytes: int = 0
    rows: int = 0
    features: int = 0
    # "integer": the id column's integers are the example_id; "text": ids mapped to int64 (issue 35)
    id_kind: str = "integer"
    ids_out_of_int64: int = 0
    # rows without a missing cell in a used column (all rows unless missing: drop_rows drops some);
    # label_counts are theirs (issue 46)
    rows_kept: int = 0
    missing_cells: dict[str, int] = field(default_factory=dict)
    # numeric columns prepare_dataset reads as text and converts with the table's number format
    text_numbers: tuple[str, ...] = ()
    # label_numbers: merge: each spelling of a label value -> its class (the first spelling written)
    label_merge: dict[str, str] = field(default_factory=dict)
    # what was decided from the file's cells, one sentence each (dataset.json; printed by prepare_dataset)
    decisions: tuple[str, ...] = ()

    @property
    def classes(self) -> int:
        return len(self.label_counts)


def table_format(path: str | Path, declared: str | None = None) -> str | None:
    """csv or parquet: the ``format`` key if given, else the file's suffix (None: neither)."""
    if declared:
        return declared
    name = str(path).lower()
    return next((kind for suffix, kind in SUFFIXES.items() if name.endswith(suffix)), None)


def _where(name: str, path: Any) -> str:
    return f"config.datasets.{name}: table {path}"


def _spec(params: Mapping[str, Any]) -> dict[str, Any]:
    return {**TABLE_DEFAULTS, **{k: v for k, v in params.items() if v is not None}}


# ---------------------------------------------------------------------------
# reading


def _csv_options(spec: Mapping[str, Any], *, types: Mapping[str, pa.DataType] | None = None,
                 include: list[str] | None = None, block_size: int | None = None):
    import pyarrow.csv as pa_csv

    read = pa_csv.ReadOptions(column_names=list(spec["column_names"]) if spec.get("column_names") else None,
                              block_size=block_size or (1 << 22), encoding=spec.get("encoding") or "utf8")
    convert = pa_csv.ConvertOptions(column_types=dict(types or {}), strings_can_be_null=True,
                                    include_columns=include or [])
    return read, pa_csv.ParseOptions(delimiter=spec.get("delimiter") or ","), convert


def _open_csv(path: Path, spec: Mapping[str, Any], **options):
    import pyarrow.csv as pa_csv

    read, parse, convert = _csv_options(spec, **options)
    return pa_csv.open_csv(str(path), read_options=read, parse_options=parse, convert_options=convert)


def _unreadable(where: str, exc: Exception, kind: str) -> TableError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = ("an empty file" if "Empty CSV" in text else
            "cut off or not Parquet" if kind == "parquet" else "not a readable CSV")
    return TableError(f"{where}: cannot be read ({hint}: {text}); write a complete .csv, .csv.gz or .parquet file")


def _first_block(path: Path, kind: str, spec: Mapping[str, Any], where: str) -> tuple[list[str], pa.Table]:
    """The file's column names and its first block (types inferred by pyarrow)."""
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            handle = pq.ParquetFile(str(path))
            names = list(handle.schema_arrow.names)
            batch = next(handle.iter_batches(batch_size=BATCH_ROWS), None)
            block = pa.Table.from_batches([batch]) if batch is not None else handle.schema_arrow.empty_table()
            return names, block
        reader = _open_csv(path, spec, block_size=SAMPLE_BYTES)
        names = list(reader.schema.names)
        try:
            block = pa.Table.from_batches([reader.read_next_batch()])
        except StopIteration:
            block = reader.schema.empty_table()
        return names, block
    except (pa.ArrowInvalid, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise _unreadable(where, exc, kind) from exc


def _header_problems(names: list[str], spec: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    empty = [i for i, n in enumerate(names) if not str(n).strip()]
    if empty:
        problems.append(f"{where}: column(s) at position {empty} have an empty name; name every column in the "
                        "header (or give config key column_names for a file without one)")
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if n in seen and str(n).strip():
            problems.append(f"{where}: column name {n!r} appears twice (positions {seen[n]} and {i}); "
                            "rename one of them")
        seen.setdefault(n, i)
    if problems:
        return problems
    existing = ", ".join(names)
    label = spec.get("label")
    if label not in names:
        problems.append(f"{where}: label column {label!r} does not exist; columns: {existing}")
    if spec.get("id") is not None and spec["id"] not in names:
        problems.append(f"{where}: id column {spec['id']!r} does not exist; columns: {existing}")
    for key in ("drop", "categorical"):
        listed = spec.get(key)
        if not isinstance(listed, list):
            continue
        unknown = [c for c in listed if c not in names]
        if unknown:
            problems.append(f"{where}: {key} column(s) {unknown} do not exist; columns: {existing}")
        clash = [c for c in listed if c in (label, spec.get("id"))]
        if clash:
            problems.append(f"{where}: {key} lists {clash}, the label or id column; remove them from {key}")
    if label is not None and label == spec.get("id"):
        problems.append(f"{where}: label and id are the same column {label!r}; give the id column or remove id")
    return problems


def _role_of(name: str, kind: pa.DataType, spec: Mapping[str, Any]) -> str | None:
    if name == spec["label"]:
        return "label"
    if name == spec.get("id"):
        return "id"
    if name in spec["drop"]:
        return "dropped"
    if isinstance(spec["categorical"], list):
        if name in spec["categorical"]:
            return "categorical"
        return "boolean" if pa.types.is_boolean(kind) else "numeric"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind):
        return "numeric"
    if _is_text(kind):
        return "categorical"
    return None


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind)


def _roles(block: pa.Table, spec: Mapping[str, Any], where: str, kind: str) -> tuple[dict[str, str], list[str]]:
    roles, problems = {}, []
    for name, column_type in zip(block.column_names, block.schema.types, strict=True):
        role = _role_of(name, column_type, spec)
        if role is None:
            problems.append(f"{where}: column {name!r} holds {column_type} values, neither numbers, text nor "
                            "booleans; list it under drop or under categorical")
            continue
        if role == "numeric" and kind == "parquet" and _is_text(column_type):
            # the file's declared type is kept (issue 46): a string column is never read as numbers
            value = _first_non_numeric(block.column(name))
            row = f" (data row {value[0] + 1}: {value[1]!r})" if value else ""
            problems.append(f"{where}: column {name!r} is a string column of the Parquet file{row} and not under "
                            "categorical; add it to categorical, or write it as a number column in the file")
        roles[name] = role
    return roles, problems


_trimmed = trimmed


_NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")


def _first_non_numeric(column: pa.ChunkedArray | pa.Array) -> tuple[int, str] | None:
    """(row, text) of the first non-empty cell of a text column that is not a finite number."""
    values = _trimmed(column).to_pylist()
    for row, value in enumerate(values):
        if value is not None and not _NUMBER.match(value):
            return row, value
    return None


def _levels_problem(name: str, levels: int, limit: int, where: str, dataset: str, rows: str) -> str:
    return (f"{where}: categorical column {name!r} has {levels} distinct values {rows}, more than max_levels = "
            f"{limit}; raise config.datasets.{dataset}.max_levels, drop the column, or (for numbers) remove it "
            "from categorical")


def _gzip_size(path: Path) -> int:
    """Uncompressed size of a single-member gzip file (its trailer, mod 2^32)."""
    with open(path, "rb") as handle:
        handle.seek(-4, 2)
        return struct.unpack("<I", handle.read(4))[0]


def _text_bytes(path: Path, kind: str) -> int:
    size = path.stat().st_size
    if kind == "parquet":
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(str(path)).metadata
        return max(size, sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)))
    if str(path).lower().endswith(".gz"):
        try:
            return max(size, _gzip_size(path))
        except (OSError, struct.error):
            return size
    return size


def _delimiter_problem(names: list[str], kind: str, spec: Mapping[str, Any], where: str, name: str) -> str | None:
    if kind != "csv" or len(names) != 1:
        return None
    found = [d for d in OTHER_DELIMITERS if d in names[0] and d != spec.get("delimiter")]
    if not found:
        return None
    shown = {"\t": "\\t"}.get(found[0], found[0])
    return (f"{where}: the header is one column {names[0][:80]!r}: the file looks separated by '{shown}', not by "
            f"{spec.get('delimiter') or ','!r}; write config.datasets.{name}.delimiter: \"{shown}\"")


def _label_text(column: pa.Array) -> pa.Array:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or pa.types.is_dictionary(column.type):
        return _trimmed(column)
    return column


def _class_problems(counts: Mapping[str, int], fractions, label: str, where: str) -> list[str]:
    from dpaudit.data.examples import _share

    if len(counts) < 2:
        only = ", ".join(repr(k) for k in counts) or "no value"
        return [f"{where}: label column {label!r} has one class ({only}); a classifier needs two or more — "
                "choose another label column"]
    need = next(n for n in range(1, 10_000) if _class_fits(n, fractions, _share))
    small = {k: v for k, v in counts.items() if v < need}
    if not small:
        return []
    rows = sum(counts.values())
    numbers = NumberFormat().mask(pa.array(list(counts), pa.string()))
    if len(counts) > CONTINUOUS_CLASSES and numbers.all():
        return [f"{where}: label column {label!r} has {len(counts):,} distinct values in {rows:,} rows "
                f"({len(small):,} with fewer than {need} rows): is this a regression target? dpaudit audits "
                "classifiers; choose a column of classes, or bin the values into a few classes in the file"]
    shown = dict(list(small.items())[:FIRST_CLASSES])
    more = f" and {len(small) - FIRST_CLASSES:,} more" if len(small) > FIRST_CLASSES else ""
    return [f"{where}: label column {label!r}: class(es) {shown}{more} have fewer than {need} rows, too few for "
            f"the stratified split {list(fractions)} (every class needs a row in train, holdout and test); merge or "
            "drop the rare classes"]


def _class_fits(n: int, fractions, share) -> bool:
    train, holdout = share(fractions[0], n), share(fractions[1], n)
    return train >= 1 and holdout >= 1 and n - train - holdout >= 1


def _fractions(params: Mapping[str, Any]) -> tuple[float, float, float]:
    from dpaudit.data.examples import DEFAULT_FRACTIONS

    return tuple(float(f) for f in params.get("split_fractions", DEFAULT_FRACTIONS))  # type: ignore[return-value]


def inspect_table(name: str, params: Mapping[str, Any], path: str | Path | None = None) -> TableSketch:
    """Parse-time checks of a table dataset; raises TableError listing every problem."""
    spec = _spec(params)
    path = Path(path if path is not None else spec["path"])
    stat = path.stat() if path.is_file() else None
    if stat is None or stat.st_size == 0:
        return _inspect(name, _frozen(spec), str(path), stat.st_size if stat else -1, -1)
    from dpaudit.data.sketch_cache import cached_sketch

    parts = (name, _frozen(spec), str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return cached_sketch(TableSketch, parts, lambda: _inspect(name, parts[1], str(path), stat.st_size,
                                                                stat.st_mtime_ns))


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in value}


@functools.lru_cache(maxsize=64)
def _inspect(name: str, frozen: tuple, path_text: str, size: int, mtime: int) -> TableSketch:
    spec = _thawed(frozen)
    path = Path(path_text)
    where = _where(name, path)
    kind = table_format(path, spec.get("format"))
    if kind is None:
        raise TableError(f"{where}: unknown file type; write a path ending in {', '.join(SUFFIXES)} or give "
                         "format: csv or format: parquet")
    if not path.exists():
        raise TableError(f"{where}: no such file (relative paths start in the working directory {Path.cwd()}); "
                         "write the path of an existing file")
    if not path.is_file():
        raise TableError(f"{where}: not a regular file; write the path of a .csv, .csv.gz or .parquet file")
    if size == 0:
        raise TableError(f"{where}: the file is empty; write a table with a header row and data rows")
    if kind == "parquet":
        written = [k for k in CSV_ONLY_KEYS if k in spec and spec[k] != TABLE_DEFAULTS.get(k)]
        if written:
            raise TableError(f"{where}: key(s) {', '.join(written)} say how a CSV file is written; a Parquet file's "
                             f"cells are typed: remove them from config.datasets.{name}")
    else:
        if spec.get("decimal") and spec.get("decimal") == spec.get("thousands"):
            raise TableError(f"{where}: decimal and thousands are both {spec['decimal']!r}; write two different "
                             f"characters in config.datasets.{name}")
        wrong = encoding_problem(path, spec.get("encoding") or "utf-8", spec.get("delimiter") or ",", where, name,
                                 spec.get("column_names"))
        if wrong:
            raise TableError(wrong)
    names, block = _first_block(path, kind, spec, where)
    wrong_delimiter = _delimiter_problem(names, kind, spec, where, name)
    if wrong_delimiter:
        raise TableError(wrong_delimiter)
    problems = _header_problems(names, spec, where)
    if problems:
        raise TableError("\n  ".join(problems))
    roles, problems = _roles(block, spec, where, kind)
    if problems:
        raise TableError("\n  ".join(problems))
    if block.num_rows == 0:
        raise TableError(f"{where}: the file has a header but no data rows; write a table with data rows")
    fmt = number_format(spec)
    types = dict(zip(block.column_names, block.schema.types, strict=True))
    found = _scan_file(path, kind, spec, roles, types, fmt, where)
    settled = column_decisions(found, roles, types, kind, spec, fmt, where, name, block.num_rows)
    roles, problems, decisions = settled.roles, list(settled.problems), list(settled.decisions)
    if kind == "csv":
        decisions += _padded_numbers(path, spec, [c for c, r in roles.items() if r == "numeric"])
    used = [c for c in names if roles[c] != "dropped"]
    problems += [p for c in used if c != spec["label"] and roles[c] != "id"
                 for p in [empty_column(c, found.missing[c][0], found.rows, where)] if p]
    empty = {c for c in used if found.missing[c][0] == found.rows}
    if spec["missing"] == "refuse":
        problems += [p for p in [missing_problem(found, [c for c in used if c not in empty], where, name)] if p]
    limit = int(spec["max_levels"])
    features = 0
    for column, role in roles.items():
        if column in settled.refused:
            features += 1  # refused above; counted so that no "no feature column" follows
            continue
        if role == "categorical":
            levels = pc.count_distinct(found.whole[column]).as_py()
            if levels > limit and column in settled.parquet_numbers:
                problems.append(f"{where}: column {column!r} is a string column of the Parquet file whose {levels} "
                                f"distinct values are all numbers, more than max_levels = {limit}; its type is kept "
                                "(never read as numbers): write it as a number column in the file, list it under "
                                f"drop, or raise config.datasets.{name}.max_levels")
            elif levels > limit:
                problems.append(_levels_problem(column, levels, limit, where, name, "in the file"))
            features += min(limit, 2 * max(levels, 1))
        elif role in ("numeric", "boolean"):
            features += 1
    if not features:
        problems.append(f"{where}: no feature column is left (every column is the label, the id or dropped); "
                        "keep at least one column out of drop")
    if problems:
        raise TableError("\n  ".join(problems))
    kept = found.kept
    counts, merge, problems = _label_classes(found, spec, fmt, where, name, decisions)
    kind_of_ids: tuple[str, int] = ("integer", 0)
    if spec.get("id") is not None:
        kind_of_ids = _ids(found, spec["id"], types, kind, where, problems, decisions)
    if problems:
        raise TableError("\n  ".join(problems))
    if spec["missing"] != "refuse" and not kept.all():
        decisions.append(f"missing: drop_rows drops {int((~kept).sum()):,} of {found.rows:,} rows with a missing "
                         "cell")
    return TableSketch(path=str(path), format=kind, columns=tuple(names), roles=roles,
                       types={c: str(t) for c, t in types.items()},
                       label_counts=counts, file_bytes=size, text_bytes=_text_bytes(path, kind),
                       rows=found.rows, features=max(features, 1), id_kind=kind_of_ids[0],
                       ids_out_of_int64=kind_of_ids[1], rows_kept=int(kept.sum()),
                       missing_cells={c: found.missing[c][0] for c in used}, text_numbers=tuple(settled.text_numbers),
                       label_merge=merge, decisions=tuple(decisions))


def _label_classes(found, spec: Mapping[str, Any], fmt: NumberFormat, where: str, name: str,
                   decisions: list[str]) -> tuple[dict[str, int], dict[str, str], list[str]]:
    """The label's class counts over the rows kept, the merge of values equal as numbers
    (``label_numbers: merge``) and the refusals of the label; a merge is appended to ``decisions``."""
    label = found.whole[spec["label"]]
    merge: dict[str, str] = {}
    problems = []
    if not (pa.types.is_integer(label.type) or pa.types.is_floating(label.type) or pa.types.is_boolean(label.type)):
        collision, merge = number_collisions(first_rows(label), lambda values: fmt.to_float(
            pa.array(values, pa.string())).to_pylist() if values else [], spec["label"], where, name)
        if collision and spec["label_numbers"] != "merge":
            problems.append(collision)
            merge = {}
        elif merge:
            decisions.append(f"label column {spec['label']!r}: values equal as numbers merged into one class each "
                             "(label_numbers: merge): " + "; ".join(f"{k!r} -> {v!r}" for k, v in merge.items()
                                                                     if k != v))
    counts: dict[str, int] = {}
    for value, count in _value_counts(label.filter(pa.array(found.kept))).items():
        key = merge.get(str(value), str(value))
        counts[key] = counts.get(key, 0) + int(count)
    problems += _class_problems(counts, _fractions(spec), spec["label"], where)
    collision = case_collisions(counts, spec["label"], where, name) if spec["label_case"] != "distinct" else None
    return counts, merge, problems + ([collision] if collision else [])


def _ids(found, column: str, types: Mapping[str, pa.DataType], kind: str, where: str, problems: list[str],
         decisions: list[str]) -> tuple[str, int]:
    """id_kind of the id column, kept as written (a Parquet string column is text); a duplicate
    among the rows kept is appended to ``problems``, text ids to ``decisions``."""
    ids = trimmed(found.whole[column])
    kind_of_ids = id_kind(ids, _is_text(types[column]) and kind == "parquet")
    duplicate = duplicate_ids(ids, found.kept, column, where, kind_of_ids[0] == "integer")
    problems += [duplicate] if duplicate else []
    if kind_of_ids[0] == "text":
        example = next(iter(ids.drop_null().slice(0, 1).to_pylist()), "")
        decisions.append(f"id column {column!r}: ids kept as written, as text (e.g. {example!r}); example_id is the "
                         "0-based data row, the ids are in ids.parquet")
    return kind_of_ids


def _padded_numbers(path: Path, spec: Mapping[str, Any], numeric: list[str]) -> list[str]:
    """padded_numbers of the first block, read as text."""
    if not numeric:
        return []
    reader = _open_csv(path, spec, types=dict.fromkeys(numeric, pa.string()), include=numeric, block_size=SAMPLE_BYTES)
    return padded_numbers(next(iter(reader), None), numeric)


def _scan_file(path: Path, kind: str, spec: Mapping[str, Any], roles: Mapping[str, str],
               types: Mapping[str, pa.DataType], fmt, where: str):
    """One pass over every used column (dpaudit.data.table_scan): a CSV's cells as text, a Parquet
    file's as typed."""
    used = [c for c, role in roles.items() if role != "dropped"]
    whole = {c for c in used if roles[c] in ("label", "id", "categorical")
             or (roles[c] == "numeric" and pa.types.is_null(types[c]))}
    numeric = {c for c in used if roles[c] == "numeric"}
    boolean = {c for c in used if roles[c] == "boolean"}

    def batches(as_text: bool):
        if kind == "parquet":
            import pyarrow.parquet as pq

            yield from pq.ParquetFile(str(path)).iter_batches(batch_size=BATCH_ROWS, columns=used)
            return
        # First as pyarrow reads numbers (float64) and true/false, the fast way; a cell it cannot
        # convert (or numbers the keys say are written with separators) means every cell as text,
        # the way that finds and names it.
        typed = {c: pa.float64() if c in numeric and not as_text else pa.bool_() if c in boolean and not as_text
                 else pa.string() for c in used}
        yield from _open_csv(path, spec, types=typed, include=used)

    try:
        if kind == "csv" and not fmt.declared:
            try:
                return scan(batches(False), used, whole=whole, numeric=numeric, boolean=boolean, fmt=fmt,
                            label=spec["label"])
            except pa.ArrowInvalid as exc:
                if "conversion error" not in str(exc):
                    raise
        return scan(batches(True), used, whole=whole, numeric=numeric, boolean=boolean, fmt=fmt, label=spec["label"])
    except (pa.ArrowInvalid, OSError, EOFError, UnicodeDecodeError) as exc:
        raise _unreadable(where, exc, kind) from exc


def _value_counts(column: pa.Array) -> dict[Any, int]:
    counts = pc.value_counts(column.drop_null())
    return {v.as_py(): c.as_py() for v, c in zip(counts.field("values"), counts.field("counts"), strict=True)}


def members_count(sketch: TableSketch, params: Mapping[str, Any]) -> int:
    """Members of a table dataset, known at parse time: the label counts are those of the rows kept
    (every row, or under ``missing: drop_rows`` those without a missing cell; issue 46)."""
    from dpaudit.data.examples import _share

    fraction = _fractions(params)[0]
    return sum(_share(fraction, n) for n in sketch.label_counts.values())


def holdout_count(sketch: TableSketch, params: Mapping[str, Any]) -> int:
    """Non-members (the holdout split) of a table dataset, known at parse time (``members_count``)."""
    from dpaudit.data.examples import _share

    fraction = _fractions(params)[1]
    return sum(_share(fraction, n) for n in sketch.label_counts.values())
