"""Whole-column checks of a user's table (issue 35): the rules ``dpaudit.data.table`` applies to
every cell of a column read as text, at parse time.

- A column is typed from all its cells, not from pyarrow's first block: a text column whose
  filled cells are numbers in at least ``NUMERIC_SHARE`` of its rows is a numeric column with a
  few bad cells, refused naming the first one (``numeric_typo``).
- A column empty in every row is refused as such (``empty_column``): dropping rows would empty
  the table.
- Label values that differ only in case are refused naming both (``case_collisions``) unless
  ``label_case: distinct``.
- Ids: integers in the int64 range are the example_id as written; any other id (text, or
  integers out of the int64 range) is mapped to an int64 example_id (``id_kind``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["NUMERIC_SHARE", "case_collisions", "empty_column", "id_kind", "numeric_mask", "numeric_typo"]

# A text column with at least this share of numbers among its filled cells is read as a
# numeric column holding typos, not as a categorical one: a real categorical column whose
# levels are 95 % numbers is rare, a typo in a survey's age column is not.
NUMERIC_SHARE = 0.95
NUMBER_PATTERN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
INTEGER_PATTERN = r"^[+-]?[0-9]+$"


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


def empty_column(name: str, text: pa.Array, where: str) -> str | None:
    """The refusal of a column with no filled cell, else None."""
    if len(text) and text.null_count == len(text):
        return (f"{where}: column {name!r} is empty in all {len(text):,} rows; list it under drop (missing: "
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


def id_kind(text: pa.Array) -> tuple[str, int]:
    """("integer", 0) when every filled id is an integer in the int64 range, else ("text", k)
    with k the ids that are integers out of that range."""
    filled = text.drop_null()
    integer = pc.match_substring_regex(filled, INTEGER_PATTERN).to_numpy(zero_copy_only=False)
    if not integer.all():
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
