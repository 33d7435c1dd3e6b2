"""The parse-time pass over every cell of a user's table (issue 46), and the column decisions it settles.

``dpaudit.data.table`` reads the file once, batch by batch, every used column as text (a CSV) or
as typed (a Parquet file), and ``scan`` keeps what the checks made before any job need:

- each column's missing cells (count and first data rows) and the rows without any, so that
  ``missing: drop_rows`` leaves the parse-time counts (members, non-members, classes) known;
- for every column read as numbers, its cells against the table's ``NumberFormat`` (the first
  cell that is not a number, and which separators would read the others);
- the first cell of a true/false column that pyarrow will not read as one, and the first
  non-finite number of a typed Parquet column;
- the label, the id and every text column whole (levels, classes, ids).

``column_decisions`` then settles each feature column's role from all its cells, never from
pyarrow's first block alone: numbers are numeric, numbers written with undeclared separators are
refused naming the key, a few bad cells are refused naming the first, a column empty in its
first rows and text below is categorical (recorded), and a Parquet string column stays text.
Every decision taken from the file is returned as one sentence, which ``dataset.json`` records
and ``prepare_dataset`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpaudit.data.table_columns import NUMERIC_SHARE, trimmed
from dpaudit.data.table_text import NumberFormat, NumberStats, separator_problem

__all__ = ["FIRST_ROWS", "Scan", "column_decisions", "missing_problem", "padded_numbers", "scan"]

FIRST_ROWS = 5
FIRST_COLUMNS = 5
# pyarrow's CSV reader's true and false spellings (pyarrow.csv.ConvertOptions defaults)
BOOLEAN_TEXT = ("1", "True", "TRUE", "true", "0", "False", "FALSE", "false")
NOT_FINITE = r"^[+-]?(inf|infinity)$"


@dataclass
class Scan:
    """What one pass over every cell keeps (rows are 0-based)."""

    rows: int = 0
    kept: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    missing: dict[str, list] = field(default_factory=dict)
    whole: dict[str, pa.Array] = field(default_factory=dict)
    numbers: dict[str, NumberStats] = field(default_factory=dict)
    booleans: dict[str, tuple[int, str]] = field(default_factory=dict)
    nonfinite: dict[str, tuple[int, float]] = field(default_factory=dict)


def scan(batches: Iterable[pa.RecordBatch], columns: list[str], *, whole: set[str], numeric: set[str],
         boolean: set[str], fmt: NumberFormat, label: str | None = None) -> Scan:
    """One pass over ``batches``: ``numeric`` columns' text checked against ``fmt``, ``boolean``
    columns' text against pyarrow's spellings, typed float columns for non-finite values, and
    ``whole`` columns kept (text trimmed; the label as written if typed)."""
    out = Scan(missing={c: [0, []] for c in columns})
    parts: dict[str, list[pa.Array]] = {c: [] for c in whole}
    kept: list[np.ndarray] = []
    for batch in batches:
        ok = np.ones(batch.num_rows, dtype=bool)
        for name in columns:
            column = batch.column(name)
            typed = not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
                         or pa.types.is_dictionary(column.type))
            values = column if typed and (name == label or not pa.types.is_null(column.type)) else trimmed(column)
            null = values.is_null().to_numpy(zero_copy_only=False)
            if null.any():
                record = out.missing[name]
                record[0] += int(null.sum())
                if len(record[1]) < FIRST_ROWS:
                    record[1] += [out.rows + int(r) for r in np.flatnonzero(null)[:FIRST_ROWS - len(record[1])]]
                ok &= ~null
            if name in whole:
                parts[name].append(values)
            if name in numeric and not typed:
                out.numbers.setdefault(name, NumberStats()).add(values, fmt, out.rows)
            elif name in boolean and not typed and name not in out.booleans:
                bad = np.flatnonzero(~null & ~pc.is_in(values, pa.array(BOOLEAN_TEXT)).to_numpy(zero_copy_only=False))
                if bad.size:
                    out.booleans[name] = (out.rows + int(bad[0]), values[int(bad[0])].as_py())
            elif typed and pa.types.is_floating(column.type) and name not in out.nonfinite:
                data = column.to_numpy(zero_copy_only=False)
                bad = np.flatnonzero(~np.isfinite(data) & ~null)
                if bad.size:
                    out.nonfinite[name] = (out.rows + int(bad[0]), float(data[bad[0]]))
        kept.append(ok)
        out.rows += batch.num_rows
    out.kept = np.concatenate(kept) if kept else np.zeros(0, dtype=bool)
    out.whole = {c: pa.concat_arrays(p) if p else pa.array([], pa.string()) for c, p in parts.items()}
    return out


def missing_problem(found: Scan, columns: Iterable[str], where: str, dataset: str) -> str | None:
    """The refusal listing every column with missing cells (the first few, with a count), else None."""
    listed = [(c, found.missing[c]) for c in columns if found.missing[c][0]]
    if not listed:
        return None
    shown = ", ".join(f"{c!r} ({count:,} cell{'s' if count > 1 else ''}, first at data row(s) "
                      f"{[r + 1 for r in rows]})" for c, (count, rows) in listed[:FIRST_COLUMNS])
    more = f" and {len(listed) - FIRST_COLUMNS} more column(s)" if len(listed) > FIRST_COLUMNS else ""
    return (f"{where}: {len(listed)} column(s) have missing cells: {shown}{more}; fill them, or write "
            f"config.datasets.{dataset}.missing: drop_rows to drop such rows (recorded in dataset.json)")


@dataclass
class Decisions:
    """Each feature column's role from all its cells, the numeric columns read as text and converted
    with the table's NumberFormat, the sentences recording what was decided, and the refusals."""

    roles: dict[str, str]
    text_numbers: list[str] = field(default_factory=list)
    parquet_numbers: list[str] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    decisions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _bad_cell(name: str, stats: NumberStats, first_empty: int | None, where: str) -> str:
    row, text = stats.first_bad
    others = f" (and {stats.other - 1:,} more)" if stats.other > 1 else ""
    if pc.match_substring_regex(pa.array([text]), NOT_FINITE, ignore_case=True)[0].as_py():
        return f"{where}: column {name!r} data row {row + 1} holds {text}, not a finite number; fix the cell or " \
               "drop the column"
    if stats.numbers >= NUMERIC_SHARE * stats.filled:
        return (f"{where}: column {name!r} is numeric in {stats.numbers:,} rows but data row {row + 1} holds "
                f"{text!r}{others}; fix the cell, or list the column under categorical if it is not a number (or "
                "under drop)")
    if first_empty is not None:
        return (f"{where}: column {name!r} is empty in its first {first_empty:,} rows and holds text in "
                f"{stats.other:,} of its {stats.filled:,} filled rows (first: data row {row + 1}, {text!r}); list "
                "it under categorical, or under drop")
    return (f"{where}: column {name!r} holds numbers in its first rows but text in {stats.other:,} of its "
            f"{stats.filled:,} filled rows (first: data row {row + 1}, {text!r}); list it under categorical, or "
            "under drop")


def column_decisions(found: Scan, roles: Mapping[str, str], types: Mapping[str, pa.DataType], kind: str,
                     spec: Mapping, fmt: NumberFormat, where: str, dataset: str, first_rows: int) -> Decisions:
    """Roles settled from every cell (module docstring); ``types``: pyarrow's types of the first block."""
    out = Decisions(roles=dict(roles))
    auto = spec["categorical"] == "auto"
    plain = NumberFormat()
    for name, role in roles.items():
        first_empty = first_rows if pa.types.is_null(types[name]) else None
        if role == "boolean" and name in found.booleans:
            row, text = found.booleans[name]
            out.problems.append(f"{where}: column {name!r} is true/false in its first rows but data row {row + 1} "
                                f"holds {text!r}; fix the cell, or list the column under categorical")
        elif role == "numeric" and name in found.nonfinite:
            row, value = found.nonfinite[name]
            out.problems.append(f"{where}: column {name!r} data row {row + 1} holds {value!r}, not a finite number; "
                                "fix the cell or drop the column")
        elif role == "numeric" and name in found.numbers:
            stats = found.numbers[name]
            if not stats.other:
                # read as text here (separators declared, or a cell pyarrow would not convert): prepare reads
                # it the same way
                out.text_numbers.append(name)
                continue
            problem = separator_problem(name, stats, fmt, where, dataset)
            if problem is None and auto and first_empty is not None and stats.numbers < NUMERIC_SHARE * stats.filled:
                out.roles[name] = "categorical"
                out.decisions.append(f"column {name!r}: empty in its first {first_empty:,} rows and text below "
                                     f"(data row {stats.first_bad[0] + 1}: {stats.first_bad[1]!r}): categorical")
                continue
            out.problems.append(problem or _bad_cell(name, stats, first_empty, where))
            out.refused.add(name)
        elif role == "categorical" and auto and kind == "csv" and name in found.whole:
            text = found.whole[name]
            stats = NumberStats()
            stats.add(text, fmt)
            if stats.all_numbers:
                out.roles[name] = "numeric"
                out.text_numbers.append(name)
                written = f"written with {fmt.words()}" if int(plain.mask(text).sum()) < stats.numbers else "numbers"
                out.decisions.append(f"column {name!r}: text in pyarrow's first rows, but every filled cell is a "
                                     f"number ({written}): numeric")
                continue
            problem = separator_problem(name, stats, fmt, where, dataset)
            if problem is None and stats.filled and stats.numbers >= NUMERIC_SHARE * stats.filled:
                problem = _bad_cell(name, stats, None, where)
            if problem:
                out.problems.append(problem)
                out.refused.add(name)
        elif role == "categorical" and auto and kind == "parquet" and name in found.whole:
            text = found.whole[name]
            filled = len(text) - text.null_count
            if filled and int(plain.mask(text).sum()) == filled:
                out.parquet_numbers.append(name)
                out.decisions.append(f"column {name!r}: a string column of the Parquet file whose cells are all "
                                     "numbers, kept as text (categorical); write it as a number column in the file "
                                     "to use it as numbers")
    return out


def padded_numbers(block: pa.RecordBatch | None, numeric: list[str]) -> list[str]:
    """The decision to read as numbers a column whose ``block`` (the first rows, as text) holds
    numbers written with leading zeros (00037: a code, perhaps), one sentence per column."""
    out = []
    for name in numeric if block is not None else []:
        text = trimmed(block.column(name))
        padded = pc.match_substring_regex(text, r"^[+-]?0[0-9]").fill_null(False).to_numpy(zero_copy_only=False)
        if padded.any():
            row = int(np.flatnonzero(padded)[0])
            out.append(f"column {name!r}: numbers written with leading zeros (data row {row + 1}: "
                       f"{text[row].as_py()!r}) read as numbers; list it under categorical to keep them as written "
                       "(codes such as zip codes)")
    return out
