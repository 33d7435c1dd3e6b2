"""A user's table as written (issue 46): its character encoding, and numbers written with separators.

- ``encoding_problem`` decodes the whole file with the ``encoding`` key's codec (UTF-8 by default)
  before pyarrow reads it: a file that is not that text is refused naming the data row, the column
  and the first bad byte, and the key; a UTF-16 byte-order mark or a NUL byte in a file read as
  UTF-8 names ``encoding: utf-16``. pyarrow would otherwise read such cells as binary values, or
  fail inside a job with its own traceback.
- ``NumberFormat`` is a number as the ``decimal`` and ``thousands`` keys say it is written
  (``3,750`` with ``thousands: ","``, ``39,1`` with ``decimal: ","``): which cells are numbers, and
  their float64 values. ``NumberStats`` counts a column's cells batch by batch, and
  ``separator_problem`` tells a column of numbers written with separators the keys do not declare
  (refused naming the key that reads them) from a column of text: such a column is never one-hot
  encoded.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["NumberFormat", "NumberStats", "encoding_problem", "number_format", "separator_problem"]

CHUNK_BYTES = 1 << 23
UTF16_MARKS = {codecs.BOM_UTF16_LE: "utf-16", codecs.BOM_UTF16_BE: "utf-16", codecs.BOM_UTF32_LE: "utf-32",
               codecs.BOM_UTF32_BE: "utf-32"}


# ---------------------------------------------------------------------------
# encodings


def _open_bytes(path: Path):
    # pyarrow decompresses a file whose name ends in .gz; so does this
    return gzip.open(path, "rb") if str(path).lower().endswith(".gz") else open(path, "rb")  # noqa: SIM115


def _fields(line: str, delimiter: str) -> list[str]:
    return next(csv.reader([line], delimiter=delimiter), [])


def encoding_problem(path: Path, encoding: str, delimiter: str, where: str, dataset: str,
                     column_names: list[str] | None = None) -> str | None:
    """The refusal of a CSV file that is not ``encoding`` text, naming the first bad byte's data row,
    column and value and the key to write; None when the whole file decodes."""
    key = f"config.datasets.{dataset}.encoding"
    try:
        codec = codecs.lookup(encoding)
    except LookupError:
        return (f"{where}: encoding {encoding!r} is not a known character encoding; write {key} as a Python "
                "codec name such as utf-8, cp1252, latin-1 or utf-16")
    try:
        return _decode_all(path, codec, where, key, delimiter, column_names)
    except (OSError, EOFError):
        return None  # a damaged .gz file: pyarrow's reader says so, naming the file


def _decode_all(path: Path, codec: codecs.CodecInfo, where: str, key: str, delimiter: str,
                column_names: list[str] | None) -> str | None:
    utf8 = codec.name in ("utf-8", "utf-8-sig")
    decoder = codec.incrementaldecoder("strict")
    newlines, tail, header, offset = 0, "", None, 0
    with _open_bytes(path) as handle:
        while True:
            chunk = handle.read(CHUNK_BYTES)
            if utf8 and offset == 0:
                mark = next((m for m in UTF16_MARKS if chunk.startswith(m)), None)
                if mark is not None:
                    return (f"{where}: the file is {UTF16_MARKS[mark].upper()} text (it starts with the byte-order "
                            f"mark {mark.hex(' ')}); write {key}: {UTF16_MARKS[mark]}, or save the file as UTF-8")
            nul = chunk.find(b"\0") if utf8 else -1
            data = chunk[:nul] if nul >= 0 else chunk
            try:
                text = decoder.decode(data, final=not chunk or nul >= 0)
                bad, reason = (nul, "a NUL byte") if nul >= 0 else (None, None)
            except UnicodeDecodeError as error:
                # the decoder's error counts from the bytes it held back from the last chunk
                pending = len(error.object) - len(data)
                bad, reason = error.start - pending, f"byte 0x{error.object[error.start]:02x}"
                text = error.object[:error.start].decode(codec.name, errors="replace")
            if header is None and "\n" in tail + text:
                header = (tail + text).split("\n", 1)[0].rstrip("\r")
            if bad is not None:
                before = tail + text
                line = newlines + before.count("\n")
                current = before.rsplit("\n", 1)[-1]
                return _bad_byte(where, key, codec.name, utf8, reason, offset + bad + 1, line, current, header,
                                 delimiter, column_names)
            if not chunk:
                return None
            newlines += text.count("\n")
            last = text.rfind("\n")
            tail = text[last + 1:][-(1 << 16):] if last >= 0 else (tail + text)[-(1 << 16):]
            offset += len(chunk)


def _bad_byte(where: str, key: str, encoding: str, utf8: bool, reason: str, offset: int, line: int, current: str,
              header: str | None, delimiter: str, column_names: list[str] | None) -> str:
    names = list(column_names) if column_names else (_fields(header, delimiter) if header is not None else [])
    position = max(len(_fields(current, delimiter)) - 1, 0)
    column = f"column {names[position]!r}" if position < len(names) else f"column {position + 1}"
    row = line + 1 if column_names else line
    place = "the header" if row == 0 else f"data row {row:,}, {column}"
    if reason == "a NUL byte":
        return (f"{where}: {place} holds a NUL byte (byte {offset:,} of the file): UTF-16 text without a "
                f"byte-order mark, or not a text file; write {key}: utf-16-le (or utf-16-be), or save the file as "
                "UTF-8")
    fix = ("the file's encoding (e.g. cp1252 for Windows files, latin-1 for ISO 8859-1), or save the file as UTF-8"
           if utf8 else "the file's encoding")
    cell = (_fields(current, delimiter) or [""])[-1]
    return (f"{where}: not {encoding} text: {place} holds {reason} (byte {offset:,} of the file) after "
            f"{cell[-20:]!r}; write {key}: {fix}")


# ---------------------------------------------------------------------------
# numbers with separators


@dataclass(frozen=True)
class NumberFormat:
    """How a table's numbers are written: the decimal mark and the thousands separator (None: none)."""

    decimal: str = "."
    thousands: str | None = None

    @property
    def declared(self) -> bool:
        return self.decimal != "." or self.thousands is not None

    @property
    def pattern(self) -> str:
        point = re.escape(self.decimal)
        integer = "[0-9]+"
        if self.thousands:
            integer = f"(?:[0-9]{{1,3}}(?:{re.escape(self.thousands)}[0-9]{{3}})+|[0-9]+)"
        return f"^[+-]?(?:{integer}(?:{point}[0-9]*)?|{point}[0-9]+)(?:[eE][+-]?[0-9]+)?$"

    def mask(self, text: pa.Array) -> np.ndarray:
        """True where a trimmed cell is a number written this way; False for other text and missing cells."""
        return pc.match_substring_regex(text, self.pattern).fill_null(False).to_numpy(zero_copy_only=False)

    def to_float(self, text: pa.Array) -> pa.Array:
        """float64 of cells that are numbers written this way (``mask``); null for any other cell."""
        text = pc.if_else(pa.array(self.mask(text)), text, pa.scalar(None, text.type))
        if self.thousands:
            text = pc.replace_substring(text, self.thousands, "")
        if self.decimal != ".":
            text = pc.replace_substring(text, self.decimal, ".")
        return pc.cast(text, pa.float64())

    def words(self) -> str:
        return f"decimal {self.decimal!r}, " + (f"thousands {self.thousands!r}" if self.thousands else
                                                  "no thousands separator")


def number_format(spec: Mapping) -> NumberFormat:
    return NumberFormat(decimal=spec.get("decimal") or ".", thousands=spec.get("thousands") or None)


# The ways of writing numbers a cell that fails the declared one is tried against: plain numbers
# (1234.5), thousands ',' (3,750), decimal ',' (39,1), and decimal ',' with thousands '.' or ' '
# (1.234,5 and 1 234,5).
DOTTED_SAMPLE = 1000
ALTERNATIVES = (NumberFormat(), NumberFormat(thousands=","), NumberFormat(decimal=","),
                NumberFormat(decimal=",", thousands="."), NumberFormat(decimal=",", thousands=" "))


@dataclass
class NumberStats:
    """A column's cells against a NumberFormat, summed over batches: filled cells, numbers, the
    first other cell (data row, text), and how many of the other cells each alternative reads."""

    filled: int = 0
    numbers: int = 0
    first_bad: tuple[int, str] | None = None
    other: int = 0
    alternatives: list[int] = field(default_factory=lambda: [0] * len(ALTERNATIVES))
    # plain numbers with a '.' (decimal ',' reads none of them), and the first few of them: thousands
    # '.' beside a decimal ',' (1.234,5) reads them only when they are thousands groups (1.234)
    dotted: int = 0
    dotted_sample: list[str] = field(default_factory=list)
    first_alternative: tuple[int, str] | None = None

    def add(self, text: pa.Array, fmt: NumberFormat, offset: int = 0) -> np.ndarray | None:
        """Count a batch of trimmed text (its first row is data row offset + 1); the numbers' mask, or
        None when every filled cell is one."""
        filled_count = len(text) - text.null_count
        self.filled += filled_count
        if not fmt.declared:
            dots = pc.match_substring(text, ".")
            self.dotted += int(pc.sum(dots).as_py() or 0)
            if len(self.dotted_sample) < DOTTED_SAMPLE and self.dotted:
                self.dotted_sample += text.filter(dots).slice(0, DOTTED_SAMPLE - len(self.dotted_sample)).to_pylist()
            first = text.drop_null().slice(0, 1)
            try:
                if len(first) and not fmt.mask(first)[0]:
                    raise pa.ArrowInvalid("text")  # a failing cast of a text column costs a pass over it
                # pyarrow's cast reads exactly the cells of the pattern, and inf and nan spelled out
                values = pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False)
                if np.isfinite(values[~np.isnan(values)]).all() and not np.isnan(values).sum() > text.null_count:
                    self.numbers += filled_count
                    return None
            except pa.ArrowInvalid:
                pass
        filled = ~text.is_null().to_numpy(zero_copy_only=False)
        numbers = fmt.mask(text)
        self.numbers += int(numbers.sum())
        bad = np.flatnonzero(filled & ~numbers)
        if bad.size:
            if self.first_bad is None:
                self.first_bad = (offset + int(bad[0]), text[int(bad[0])].as_py())
            self.other += int(bad.size)
            others = text.take(pa.array(bad))
            if not fmt.declared:
                self.dotted -= int(pc.sum(pc.match_substring(others, ".")).as_py() or 0)
            for k, alternative in enumerate(ALTERNATIVES):
                # an alternative that missed a cell reads no column: not tried again (text columns cost
                # one cell per alternative)
                if self.alternatives[k] < self.other - bad.size or not alternative.mask(others.slice(0, 1))[0]:
                    continue
                hits = alternative.mask(others)
                self.alternatives[k] += int(hits.sum())
                if self.first_alternative is None and hits.any():
                    first = int(np.flatnonzero(hits)[0])
                    self.first_alternative = (offset + int(bad[first]), others[first].as_py())
        return numbers

    @property
    def all_numbers(self) -> bool:
        return self.filled > 0 and self.numbers == self.filled


def _keys(fmt: NumberFormat, dataset: str) -> str:
    keys = [f'config.datasets.{dataset}.decimal: "{fmt.decimal}"'] if fmt.decimal != "." else []
    keys += [f'config.datasets.{dataset}.thousands: "{fmt.thousands}"'] if fmt.thousands else []
    return " and ".join(keys)


def separator_problem(name: str, stats: NumberStats, fmt: NumberFormat, where: str, dataset: str) -> str | None:
    """The refusal of a column whose other cells are all numbers written with separators that the
    keys do not declare (naming the keys that read them), else None."""
    if stats.other == 0 or stats.first_alternative is None:
        return None
    grouped = bool(stats.dotted_sample) and bool(NumberFormat(thousands=".", decimal=",").mask(
        pa.array(stats.dotted_sample, pa.string())).all())
    readers = [alt for k, alt in enumerate(ALTERNATIVES) if stats.alternatives[k] == stats.other
               and not (alt.decimal == "," and stats.dotted and not (alt.thousands == "." and grouped))]
    if not readers:
        return None
    row, text = stats.first_alternative
    cell = f"(data row {row + 1}: {text!r})"
    if len(readers) > 1 and readers[0] == NumberFormat(thousands=",") and readers[1] == NumberFormat(decimal=","):
        return (f"{where}: column {name!r} holds numbers written with ',' {cell}; write {_keys(readers[0], dataset)} "
                f"if ',' separates thousands (3,750 = 3750) or {_keys(readers[1], dataset)} if it is the decimal "
                "mark (3,750 = 3.75); or list the column under categorical or drop")
    chosen = readers[0]
    if chosen == NumberFormat():
        return (f"{where}: column {name!r} holds numbers written with a decimal point {cell}, but the table's "
                f"numbers are declared as {fmt.words()}; write the file's numbers one way, or list the column "
                "under categorical or drop")
    said = ("',' between thousands" if chosen.decimal == "." else
            "a decimal comma" + (f" and {chosen.thousands!r} between thousands" if chosen.thousands else ""))
    return (f"{where}: column {name!r} holds numbers written with {said} {cell}, not numbers as the table's "
            f"keys read them ({fmt.words()}); write {_keys(chosen, dataset)} to read them, or list the column under categorical "
            "or drop")
