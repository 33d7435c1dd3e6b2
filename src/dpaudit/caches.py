"""Where dpaudit keeps what it may compute again at will (parse-time caches, no results)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_folder"]


def cache_folder() -> Path | None:
    """dpaudit's folder of parse-time caches (``dpaudit.codehash``'s import statements,
    ``dpaudit.data.sketch_cache``'s table sketches): DPAUDIT_CACHE_DIR, else
    $XDG_CACHE_HOME/dpaudit or ~/.cache/dpaudit; None where there is no folder for it (no home
    directory, nothing set). Losing it costs time, never a result."""
    folder = os.environ.get("DPAUDIT_CACHE_DIR")
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        if base.startswith("~"):  # no home directory to expand: never a folder named ~ in the cwd
            return None
        folder = os.path.join(base, "dpaudit")
    return Path(folder)
