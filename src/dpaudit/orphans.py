"""Files of the output folders that no current target produces (issue 26, ``make clean-orphans``).

Removing a run from the grid (or a dataset, or a family) leaves its files under results/,
logs/ and benchmarks/: Snakemake never deletes what no job of the current config writes.
``snakemake --list-untracked`` lists every file of the working directory the workflow
does not use; this keeps those under the output folders (never resources/, the
checksummed downloads, the report ``--report`` writes, nor the batch records under
results/batches/), prints them and, with
``--remove``, deletes them and the folders they leave empty.

``python -m dpaudit.orphans [--remove] [--workdir DIR] -- <snakemake command with --list-untracked>``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from dpaudit.contract import paths as P

ROOTS = (P.RESULTS, P.LOGS, P.BENCHMARKS)
KEPT = frozenset({P.REPORT})
# The batch records (issue 47, dpaudit.batching): no job writes them, and the batches they keep would be
# cut anew without them (a grown grid could then rerun runs whose batch changed); a stale one is ignored.
KEPT_FOLDERS = (P.BATCHES,)


def orphan_files(untracked: Iterable[str]) -> list[str]:
    """The untracked paths (relative to the working directory) under the output folders."""
    found = []
    for line in untracked:
        path = line.strip()
        if not path or path in KEPT or any(Path(path).is_relative_to(folder) for folder in KEPT_FOLDERS):
            continue
        if Path(path).parts[:1] and Path(path).parts[0] in ROOTS:
            found.append(Path(path).as_posix())
    return sorted(found)


def remove(files: Iterable[str], workdir: Path = Path(".")) -> int:
    """Delete the files, then the folders under the output roots they leave empty."""
    count = 0
    folders = set()
    for name in files:
        path = workdir / name
        if path.is_file() or path.is_symlink():
            path.unlink()
            count += 1
            folders.update(parent for parent in path.parents if parent != workdir and parent.is_relative_to(workdir))
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder.relative_to(workdir).parts[0] in ROOTS and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remove", action="store_true", help="delete the listed files")
    parser.add_argument("--workdir", type=Path, default=Path("."),
                        help="the working directory the command lists (its --directory; default: here)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the snakemake --list-untracked command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if "--list-untracked" not in command:
        parser.error("give the snakemake command with --list-untracked after --")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        return result.returncode
    files = orphan_files(result.stdout.splitlines())
    if not files:
        print("no orphaned files: every file under results/, logs/ and benchmarks/ belongs to a current target")
        return 0
    if args.remove:
        removed = remove(files, args.workdir)
        print(f"removed {removed} file(s) no current target produces")
        return 0
    print(f"{len(files)} file(s) under results/, logs/ and benchmarks/ that no current target produces "
          "(runs, datasets or families no longer in the config):")
    print("\n".join(f"  {name}" for name in files))
    print("remove them with: make clean-orphans CONFIRM=1 (same CONFIG=...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
