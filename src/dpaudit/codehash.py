"""Content hashes of library modules, put in each rule's params so that a change
to the code a job uses reruns exactly the jobs that use it (Snakemake sees script
changes, not library changes).

The module set of a rule is derived from its adapter script's imports, followed
transitively inside ``dpaudit`` by static parsing (``ast``): nothing is imported,
so parsing the workflow never starts TensorFlow, and a new import in a library
module is seen without anyone keeping a list in step with the code.
"""

from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "dpaudit"
PACKAGE_ROOT = Path(__file__).resolve().parent
# Parsing ~200 sources with ``ast`` is a fifth of every Snakefile parse (each dry-run, each
# cluster job). What a source imports depends on its text alone, so the parse is kept on disk
# keyed by the text's sha256 (as Python keeps bytecode): an edited file has another key and is
# parsed again. DPAUDIT_CACHE_DIR moves the folder; an unreadable or unwritable cache is
# parsed around, never an error.
CACHE_VERSION = 1
CACHE_ENTRIES_MAX = 5_000  # about 200 modules in 25 versions, ~1.5 MB


def module_path(module: str, root: Path = PACKAGE_ROOT) -> Path:
    """Path of a dpaudit module's source without importing it (no TF at parse time).

    ``root`` is the ``dpaudit`` package folder (another copy of it in tests).
    """
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        raise ValueError(f"{module!r} is not a dpaudit module")
    parts = module.split(".")[1:]
    if not parts:
        return root / "__init__.py"
    relative = Path(*parts)
    for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    # No importlib fallback: find_spec("a.b.c") imports a.b, which could start
    # TensorFlow at parse time.
    raise ModuleNotFoundError(f"no source file for {module!r} under {root}")


def is_module(module: str, root: Path = PACKAGE_ROOT) -> bool:
    try:
        module_path(module, root)
    except (ModuleNotFoundError, ValueError):
        return False
    return True


def _is_package(module: str, root: Path) -> bool:
    return module_path(module, root).name == "__init__.py"


def _parents(module: str) -> list[str]:
    """Packages whose ``__init__`` runs when ``module`` is imported."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _statements(node: ast.AST):
    """Every statement under ``node``: an import is a statement, never inside an expression, so
    the walk skips expressions (a fifth of ``ast.walk``'s nodes, the issue-32 codehash test's cost)."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()) or ():
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                yield child
                yield from _statements(child)


def _parsed_import_statements(source: str) -> tuple[tuple[int, str | None, tuple[str, ...]], ...]:
    out = []
    for node in _statements(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.append((0, None, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
    return tuple(out)


def cache_path() -> Path | None:
    """The cache file, or None where there is no folder for it (``cache_folder``)."""
    from dpaudit.caches import cache_folder

    folder = cache_folder()
    if folder is None:
        return None
    # the Python version is in the name: another ``ast`` may read a text differently
    return Path(folder) / f"import-statements-v{CACHE_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}.json"


class _ImportCache:
    """sha256 of a source text -> its import statements, read from disk once per process and
    written back at exit when something was added (merged with what other processes wrote
    meanwhile, then renamed into place, so a reader never sees half a file)."""

    def __init__(self):
        self.entries: dict[str, list] | None = None
        self.added: dict[str, list] = {}
        self.registered = False

    @staticmethod
    def _read(path: Path | None) -> dict[str, list]:
        if path is None:
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, source: str):
        if self.entries is None:
            self.entries = self._read(cache_path())
        key = hashlib.sha256(source.encode()).hexdigest()
        stored = self.entries.get(key)
        if isinstance(stored, list):
            try:
                return tuple((int(level), module, tuple(names)) for level, module, names in stored)
            except (TypeError, ValueError):
                pass  # a damaged entry is parsed again and overwritten
        statements = _parsed_import_statements(source)
        self.added[key] = self.entries[key] = [list(statement) for statement in statements]
        if not self.registered:
            atexit.register(self.save)
            self.registered = True
        return statements

    def save(self) -> None:
        if not self.added:
            return
        path = cache_path()
        if path is None:
            return
        merged = {**self._read(path), **self.added}
        if len(merged) > CACHE_ENTRIES_MAX:
            merged = dict(list(merged.items())[-CACHE_ENTRIES_MAX:])
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(merged, separators=(",", ":")))
            os.replace(temporary, path)
        except OSError:
            try:
                temporary.unlink(missing_ok=True)
            except OSError:
                pass  # the folder itself could not be made
            return
        self.added = {}


_IMPORT_CACHE = _ImportCache()


@functools.lru_cache(maxsize=4096)
def _import_statements(source: str) -> tuple[tuple[int, str | None, tuple[str, ...]], ...]:
    """(level, module, names) of every import statement of ``source`` (``import a`` as (0, None,
    ("a",))): parsed once per distinct text (the disk cache, ``cache_path``), the file system
    consulted by the caller."""
    return _IMPORT_CACHE.get(source)


def imported_modules(source: str, importer: str | None = None, root: Path = PACKAGE_ROOT) -> set[str]:
    """dpaudit modules named by the import statements of ``source``.

    ``importer`` is the importing module's dotted name, needed to resolve relative
    imports. ``from dpaudit.x import y`` counts ``dpaudit.x.y`` when ``y`` is a
    submodule, else ``dpaudit.x``. Imports inside functions count too: they run
    when the function does.
    """
    found: set[str] = set()
    for level, module, names in _import_statements(source):
        if level == 0 and module is None:  # import a, b
            found.update(name for name in names if name == PACKAGE or name.startswith(PACKAGE + "."))
            continue
        if level:
            if importer is None:
                continue
            base_parts = importer.split(".")
            if not _is_package(importer, root):
                base_parts = base_parts[:-1]
            base_parts = base_parts[: len(base_parts) - (level - 1)]
            base = ".".join(base_parts + ([module] if module else []))
        else:
            base = module or ""
        if base != PACKAGE and not base.startswith(PACKAGE + "."):
            continue
        for name in names:
            candidate = f"{base}.{name}"
            found.add(candidate if name != "*" and is_module(candidate, root) else base)
    return {module for module in found if is_module(module, root)}


def module_closure(roots: Iterable[str], root: Path = PACKAGE_ROOT,
                   cache: dict[str, set[str]] | None = None) -> set[str]:
    """Every dpaudit module that importing ``roots`` executes (with parent packages).

    ``cache`` maps a module to its direct imports; pass one dict to share parsing
    across calls that see the same sources.
    """
    cache = {} if cache is None else cache
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        stack.extend(parent for parent in _parents(module) if parent not in seen)
        if module not in cache:
            source = module_path(module, root).read_text()
            cache[module] = imported_modules(source, importer=module, root=root)
        stack.extend(cache[module] - seen)
    return seen


def script_modules(script: str | Path, root: Path = PACKAGE_ROOT,
                   cache: dict[str, set[str]] | None = None) -> set[str]:
    """dpaudit modules an adapter script reaches, directly or through other modules."""
    return module_closure(imported_modules(Path(script).read_text(), root=root), root, cache)


def code_hash(modules: Iterable[str], root: Path = PACKAGE_ROOT) -> str:
    """sha256 (first 16 hex digits) over the named modules' source, in sorted order."""
    digest = hashlib.sha256()
    for module in sorted(set(modules)):
        digest.update(module.encode())
        digest.update(module_path(module, root).read_bytes())
    return digest.hexdigest()[:16]


class ScriptCodeHashes:
    """``hashes[rule]``: the code hash of ``scripts/<rule>.py``'s derived module set.

    Computed on first use and cached, so the Snakefile never lists modules by hand.
    A rule in ``unhashed`` (a checksum-pinned download) has no code hash: asking for
    one is an error, so the exception cannot spread by accident.
    """

    def __init__(self, scripts_dir: str | Path, unhashed: Iterable[str] = (), root: Path = PACKAGE_ROOT):
        self.scripts_dir = Path(scripts_dir)
        self.root = Path(root)
        self.unhashed = frozenset(unhashed)
        self._cache: dict[str, str] = {}
        self._imports: dict[str, set[str]] = {}

    def modules(self, rule: str) -> set[str]:
        script = self.scripts_dir / f"{rule}.py"
        if not script.is_file():
            raise KeyError(f"no adapter script {script} for rule {rule!r}")
        return script_modules(script, self.root, self._imports)

    def __getitem__(self, rule: str) -> str:
        if rule in self.unhashed:
            raise KeyError(f"rule {rule!r} is declared without a code hash")
        if rule not in self._cache:
            self._cache[rule] = code_hash(self.modules(rule), self.root)
        return self._cache[rule]
