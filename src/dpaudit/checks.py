"""Cheap integrity checks of the workflow's final outputs (issue 26, ``check_results``).

No job reads a final table or figure, so a file damaged after it was written (a truncated
copy, a full disk) would go unnoticed: Snakemake sees it present and says "Nothing to be
done". The ``check_results`` job reads what identifies each file as whole, never its
content: a Parquet file's footer (``pyarrow.parquet.read_metadata``), a PNG's signature,
header chunk and closing IEND chunk, a PDF's ``%PDF-`` header and ``%%EOF`` trailer, an
HTML page's closing ``</html>`` (a fragment's closing tag). A file cut short loses its
footer or trailer. Its job reruns whenever a final output is newer than its record (a
truncated file is), and fails naming every damaged file and the fix.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from dpaudit.logs import Refusal

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIX = "the file is damaged or truncated: delete it and run again (the workflow rebuilds it)"


class DamagedResultsError(Refusal, RuntimeError):
    """Final outputs that fail their integrity check; the message names each file and the fix."""


def _tail(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - size))
        return handle.read()


def _head(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def file_problem(path: str | os.PathLike) -> str | None:
    """What is wrong with one output file (None: its header and footer are whole)."""
    path = Path(path)
    if not path.exists():
        return "missing"
    if path.stat().st_size == 0:
        return "empty (0 bytes)"
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            pq.read_metadata(path)
        except Exception as error:  # noqa: BLE001 - any failure to read the footer is the finding
            return f"its Parquet footer cannot be read ({type(error).__name__}: {error})"
        return None
    if suffix == ".png":
        head = _head(path, 16)
        if head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
            return "not a PNG (no PNG signature and IHDR header)"
        if b"IEND" not in _tail(path, 12):
            return "a PNG without its closing IEND chunk (cut short)"
        return None
    if suffix == ".pdf":
        if _head(path, 5) != b"%PDF-":
            return "not a PDF (no %PDF- header)"
        if b"%%EOF" not in _tail(path, 1024):
            return "a PDF without its %%EOF trailer (cut short)"
        return None
    if suffix in (".html", ".htm"):
        tail = _tail(path, 512).lower()
        if b"<html" in _head(path, 1024).lower():
            if b"</html>" not in tail:
                return "an HTML page without its closing </html> (cut short)"
        elif not (tail.rstrip().endswith(b">") and b"</" in tail):  # a fragment (a table the report embeds)
            return "an HTML fragment that does not end with a closing tag (cut short)"
        return None
    return None


def check_results(paths: Iterable[str | os.PathLike]) -> dict:
    """Check every file; return what was checked per kind, or raise DamagedResultsError naming every bad file."""
    paths = [Path(p) for p in paths]
    problems = [(path, problem) for path in paths if (problem := file_problem(path)) is not None]
    if problems:
        lines = "\n".join(f"  {path}: {problem}" for path, problem in problems)
        raise DamagedResultsError(f"{len(problems)} damaged result file(s):\n{lines}\n{FIX[0].upper()}{FIX[1:]}: "
                                  f"rm {' '.join(str(path) for path, _ in problems)}")
    kinds = Counter(path.suffix.lower().lstrip(".") or "other" for path in paths)
    return {"checked": len(paths), "kinds": dict(sorted(kinds.items()))}
