"""Whole-column checks of a user's table (issue 35): the rules ``dpaudit.data.table`` applies to
every cell of a column read as text, at parse time.

- A column is typed from all its cells, not from pyarrow's first block: a text column whose
  filled cells are numbers in at least ``NUMERIC_SHARE`` of its rows is a numeric column with a
  few bad cells, refused naming the first one (``numeric_typo``).
- A column empty in every row is refused as such (``empty_column``): dropping rows would empty
  the table.
- Label values that differ only in case are refused naming both (``case_collisions``) unless
  ``label_case: distinct``.
- Label values that are equal as numbers but written differently (``1`` and ``1.0``) are refused
  naming both and their first rows (``number_collisions``) unless ``label_numbers: merge``, which
  makes them one class named as first written (issue 46).
- Ids are kept as written (issue 46): integers in the int64 range written as such (no padding,
  no sign on a positive number) are the example_id; any other id (text such as ``000042``, a
  Parquet string column, integers out of the int64 range) is kept as text and mapped to an int64
  example_id (``id_kind``), and duplicates are judged as written (``duplicate_ids``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["NUMERIC_SHARE", "case_collisions", "duplicate_ids", "empty_column", "first_rows", "id_kind",
           "number_collisions", "numeric_mask", "numeric_typo", "trimmed"]

# A text column with at least this share of numbers among its filled cells is read as a
# numeric column holding typos, not as a categorical one: a real categorical column whose
# levels are 95 % numbers is rare, a typo in a survey's age column is not.
NUMERIC_SHARE = 0.95
NUMBER_PATTERN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
INTEGER_PATTERN = r"^[+-]?[0-9]+$"
# an integer as a number prints it: what an id must look like to be read as one (0042 and +42 are text)
CANONICAL_INTEGER = r"^(0|-?[1-9][0-9]*)$"


def trimmed(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Text of a column, trimmed of surrounding whitespace, with empty text as missing."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pc.cast(column, pa.string())
    column = pc.utf8_trim_whitespace(column)
    return pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column)


def numeric_mask(text: pa.Array) -> np.ndarray:
    """True where a (trimmed) cell is a decimal number; False for other text and missing cells."""
    matched = pc.match_substring_regex(text, NUMBER_PATTERN)
    return matched.fill_null(False).to_numpy(zero_copy_only=False)


def numeric_typo(name: str, text: pa.Array, where: str) -> str | None:
    """The refusal of a text column that is numbers in ≥ NUMERIC_SHARE of its filled rows, else None."""
    filled = int(len(text) - text.null_count)
    if filled == 0:
        return None
    numeric = numeric_mask(text)
    count = int(numeric.sum())
    if count == filled or count < NUMERIC_SHARE * filled:
        return None
    bad = np.flatnonzero(~numeric & ~text.is_null().to_numpy(zero_copy_only=False))
    row = int(bad[0])
    others = f" (and {bad.size - 1:,} more)" if bad.size > 1 else ""
    return (f"{where}: column {name!r} is numeric in {count:,} rows but data row {row + 1} holds "
            f"{text[row].as_py()!r}{others}; fix the cell, or list the column under categorical if it is not a "
            "number (or under drop)")


def empty_column(name: str, missing: int, rows: int, where: str) -> str | None:
    """The refusal of a column with no filled cell (``missing`` of ``rows`` cells), else None."""
    if rows and missing == rows:
        return (f"{where}: column {name!r} is empty in all {rows:,} rows; list it under drop (missing: "
                "drop_rows would drop every row)")
    return None


def case_collisions(counts: Mapping[str, int], label: str, where: str, dataset: str) -> str | None:
    """The refusal of label values that differ only in case (after trimming), else None."""
    groups: dict[str, list[str]] = {}
    for value in counts:
        groups.setdefault(value.casefold(), []).append(value)
    clashes = [sorted(values) for values in groups.values() if len(values) > 1]
    if not clashes:
        return None
    named = "; ".join(" and ".join(repr(v) for v in values) for values in clashes)
    return (f"{where}: label column {label!r} holds {named}, which differ only in case; write them one way in "
            f"the file, or write config.datasets.{dataset}.label_case: distinct to keep them separate classes")


def id_kind(text: pa.Array, declared_text: bool = False) -> tuple[str, int]:
    """("integer", 0) when every filled id is an integer in the int64 range written as one (no
    leading zeros, no '+'), else ("text", k) with k the ids that are integers out of that range.
    ``declared_text``: the file typed the column as text (a Parquet string column): text."""
    filled = text.drop_null()
    integer = pc.match_substring_regex(filled, CANONICAL_INTEGER).to_numpy(zero_copy_only=False)
    if declared_text or not integer.all():
        out_of_range = 0
        if integer.any():
            out_of_range = _out_of_int64(filled.filter(pa.array(integer)))
        return "text", out_of_range
    out_of_range = _out_of_int64(filled)
    return ("text", out_of_range) if out_of_range else ("integer", 0)


def _out_of_int64(integers: pa.Array) -> int:
    """How many integer literals lie outside the int64 range (compared as decimal strings)."""
    digits = pc.utf8_ltrim(pc.utf8_ltrim(integers, "+-"), "0")
    negative = pc.starts_with(integers, "-").to_numpy(zero_copy_only=False)
    length = pc.utf8_length(digits).to_numpy(zero_copy_only=False)
    text = digits.to_numpy(zero_copy_only=False).astype(str)
    limit = np.where(negative, "9223372036854775808", "9223372036854775807")
    # same length: decimal strings compare like their numbers
    return int(((length > 19) | ((length == 19) & (text > limit))).sum())


def first_rows(text: pa.Array) -> dict[str, tuple[int, int]]:
    """Each distinct filled value: (count, 0-based row of its first cell)."""
    encoded = pc.dictionary_encode(text)
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    values = encoded.dictionary.to_pylist()
    filled = codes >= 0
    counts = np.bincount(codes[filled], minlength=len(values))
    unique, first = np.unique(codes[filled], return_index=True)
    rows = np.flatnonzero(filled)[first]
    return {str(values[code]): (int(counts[code]), int(row)) for code, row in zip(unique, rows, strict=True)}


def number_collisions(seen: Mapping[str, tuple[int, int]], to_float, label: str, where: str,
                      dataset: str) -> tuple[str | None, dict[str, str]]:
    """Label values equal as numbers but written differently: the refusal naming them and their first
    rows, and the merge (each spelling -> the class named as first written); (None, {}) when none.
    ``seen``: first_rows of the label; ``to_float``: text -> float64 (nulls where not a number)."""
    spellings = list(seen)
    values = to_float(spellings)
    groups: dict[float, list[str]] = {}
    for spelling, value in zip(spellings, values, strict=True):
        if value is not None and np.isfinite(value):
            groups.setdefault(float(value), []).append(spelling)
    clashes = [sorted(group, key=lambda v: seen[v][1]) for group in groups.values() if len(group) > 1]
    if not clashes:
        return None, {}
    merge = {spelling: group[0] for group in clashes for spelling in group}
    named = "; ".join(" and ".join(f"{v!r} (first at data row {seen[v][1] + 1})" for v in group)
                      for group in clashes[:5])
    more = f" (and {len(clashes) - 5} more groups)" if len(clashes) > 5 else ""
    return (f"{where}: label column {label!r} holds {named}{more}, equal as numbers but written differently; "
            f"write them one way in the file, or write config.datasets.{dataset}.label_numbers: merge to make them "
            "one class (named as first written)"), merge


def duplicate_ids(text: pa.Array, kept: np.ndarray, column: str, where: str, integer: bool) -> str | None:
    """The refusal of an id written twice among the kept rows (compared as written), naming it and
    both data rows: the id whose second row comes first; else None."""
    codes = pc.dictionary_encode(text).indices.fill_null(-1).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(kept & (codes >= 0))
    if rows.size < 2:
        return None
    unique, first = np.unique(codes[rows], return_index=True)
    repeat = np.ones(rows.size, dtype=bool)
    repeat[first] = False
    if not repeat.any():
        return None
    second = int(rows[np.flatnonzero(repeat)[0]])
    earlier = int(rows[first[np.searchsorted(unique, codes[second])]])
    value = text[second].as_py()
    shown = value if integer else repr(value)
    return (f"{where}: id column {column!r} holds {shown} twice (data rows {earlier + 1} and {second + 1}); ids "
            "must be unique")
