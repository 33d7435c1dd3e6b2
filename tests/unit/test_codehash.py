"""Code hashes derived from the adapter scripts' imports (dpaudit.codehash).

Oracle: the modules Python really loads. A subprocess imports what each adapter
script imports and lists the ``dpaudit`` modules in ``sys.modules``; the static
derivation must contain every one of them (it may hold more: imports inside
functions run only when called).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpaudit import codehash
from dpaudit.codehash import ScriptCodeHashes, imported_modules, script_modules

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
HASHED_SCRIPTS = sorted(p.stem for p in SCRIPTS.glob("*.py") if p.stem != "download_dataset")


def _import_lines(script: Path) -> list[str]:
    """The script's own top-level dpaudit import statements, as source lines."""
    tree = ast.parse(script.read_text())
    lines = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            text = ast.unparse(node)
            if "dpaudit" in text:
                lines.append(text)
    return lines


# Third-party modules the adapters share, loaded once before the per-script forks (never a
# dpaudit module: the oracle is what each script's own imports load).
_PRELOAD = ("numpy", "pandas", "pyarrow", "pyarrow.parquet", "scipy", "scipy.special", "scipy.stats",
            "matplotlib", "yaml")
_FORKED = """
import json, os, sys
for name in {preload!r}:
    __import__(name)
assert not [m for m in sys.modules if m == "dpaudit" or m.startswith("dpaudit.")]
for rule, lines in json.loads(sys.stdin.read()):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one script's imports in a fresh copy of the preloaded process
        os.close(read)
        try:
            exec("\\n".join(lines), {{}})
            found = sorted(m for m in sys.modules if m == "dpaudit" or m.startswith("dpaudit."))
            os.write(write, json.dumps({{"rule": rule, "modules": found}}).encode())
        except BaseException as error:
            os.write(write, json.dumps({{"rule": rule, "error": repr(error)}}).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    print(b"".join(chunks).decode(), flush=True)
"""


@pytest.fixture(scope="module")
def loaded_modules() -> dict[str, set[str]]:
    """rule -> dpaudit modules in sys.modules after running the script's imports: one forked
    child per script of a process that preloaded only third-party modules (41 interpreter
    starts with numpy, pandas and pyarrow cost ~50 s)."""
    scripts = [(rule, _import_lines(SCRIPTS / f"{rule}.py")) for rule in HASHED_SCRIPTS]
    result = subprocess.run([sys.executable, "-c", _FORKED.format(preload=_PRELOAD)], input=json.dumps(scripts),
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            assert "error" not in record, f"{record['rule']}: {record.get('error')}"
            loaded[record["rule"]] = set(record["modules"])
    assert set(loaded) == set(HASHED_SCRIPTS)
    return loaded


def test_every_adapter_has_a_code_hash():
    hashes = ScriptCodeHashes(SCRIPTS, unhashed=["download_dataset"])
    for rule in HASHED_SCRIPTS:
        assert len(hashes[rule]) == 16
    with pytest.raises(KeyError, match="without a code hash"):
        hashes["download_dataset"]
    with pytest.raises(KeyError, match="no adapter script"):
        hashes["no_such_rule"]


@pytest.mark.parametrize("rule", HASHED_SCRIPTS)
def test_derived_set_contains_every_module_python_loads(rule, loaded_modules):
    derived = script_modules(SCRIPTS / f"{rule}.py")
    missing = loaded_modules[rule] - derived
    assert not missing, f"{rule}: loaded but not hashed: {sorted(missing)}"
    assert loaded_modules[rule], f"{rule} imports no dpaudit module at all"


def test_relative_and_from_imports_resolve():
    assert imported_modules("from dpaudit.dp import hypothesis") == {"dpaudit.dp.hypothesis"}
    assert imported_modules("from dpaudit.dp.hypothesis import clopper_pearson") == {"dpaudit.dp.hypothesis"}
    assert imported_modules("import dpaudit.io as io") == {"dpaudit.io"}
    assert imported_modules("from .hypothesis import x", importer="dpaudit.dp.card") == {"dpaudit.dp.hypothesis"}
    assert imported_modules("from . import hypothesis", importer="dpaudit.dp") == {"dpaudit.dp.hypothesis"}
    assert imported_modules("import numpy\nfrom scipy import stats") == set()
    # imports inside functions run when the function does, so they count
    assert imported_modules("def f():\n    from dpaudit import io\n") == {"dpaudit.io"}


def _copy_package(tmp_path: Path) -> Path:
    package = tmp_path / "dpaudit"
    shutil.copytree(codehash.PACKAGE_ROOT, package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def _indirect_modules(loaded_modules) -> set[str]:
    """Modules some script loads that no script imports itself."""
    direct = set()
    for rule in HASHED_SCRIPTS:
        direct |= imported_modules((SCRIPTS / f"{rule}.py").read_text())
    reached = set().union(*loaded_modules.values())
    return {m for m in reached - direct if not codehash.module_path(m).name == "__init__.py"}


def _lazily_imported() -> set[str]:
    """Modules some library function imports inside its body (loaded only when it runs), and
    what those import in turn (``metrics.epsilon_star.run`` imports ``metrics.utility`` in a
    function, which imports ``dp.roc`` at its top: ``dp.roc`` too loads only then)."""
    lazy = set()
    for path in codehash.PACKAGE_ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    lazy |= imported_modules(ast.unparse(node))
    frontier = list(lazy)
    while frontier:
        module = frontier.pop()
        try:
            source = codehash.module_path(module).read_text()
        except (ValueError, FileNotFoundError):
            continue
        for reached in imported_modules(source, importer=module) - lazy:
            lazy.add(reached)
            frontier.append(reached)
    return lazy


def test_editing_an_indirect_module_changes_exactly_the_rules_that_reach_it(tmp_path, loaded_modules):
    indirect = sorted(_indirect_modules(loaded_modules))
    assert indirect, "expected library modules reached only through other modules"
    package = _copy_package(tmp_path)
    before = ScriptCodeHashes(SCRIPTS, root=package)
    before_hashes = {rule: before[rule] for rule in HASHED_SCRIPTS}
    lazy = _lazily_imported()
    exact = 0
    for module in indirect:
        path = codehash.module_path(module, package)
        original = path.read_text()
        path.write_text(original + "\n# an edit\n")
        try:
            after = ScriptCodeHashes(SCRIPTS, root=package)
            changed = {rule for rule in HASHED_SCRIPTS if after[rule] != before_hashes[rule]}
        finally:
            path.write_text(original)
        # oracle: the rules whose script really loads the module at import time; a
        # module also imported inside some function body is loaded only when that
        # function runs, which the import-time oracle cannot see, so there the
        # derived set may be larger (never smaller)
        expected = {rule for rule in HASHED_SCRIPTS if module in loaded_modules[rule]}
        if module in lazy:
            assert changed >= expected, f"editing {module}: changed {sorted(changed)}, expected ⊇ {sorted(expected)}"
        else:
            assert changed == expected, f"editing {module}: changed {sorted(changed)}, expected {sorted(expected)}"
            exact += 1
    assert exact >= 5, "too few modules checked exactly"


def test_a_new_import_is_followed_without_any_list(tmp_path):
    package = _copy_package(tmp_path)
    (package / "brand_new.py").write_text("X = 1\n")
    hashes_before = ScriptCodeHashes(SCRIPTS, root=package)["metric_mia"]
    io_module = package / "io.py"
    io_module.write_text("from dpaudit import brand_new  # noqa: F401\n" + io_module.read_text())
    derived = ScriptCodeHashes(SCRIPTS, root=package)
    assert "dpaudit.brand_new" in derived.modules("metric_mia")
    (package / "brand_new.py").write_text("X = 2\n")
    assert ScriptCodeHashes(SCRIPTS, root=package)["metric_mia"] != hashes_before


def test_deriving_every_hash_imports_nothing():
    # Parse time must not start TensorFlow (docs/architecture.md, Rerun triggers): the derivation reads
    # sources only. Oracle: sys.modules of a fresh interpreter afterwards.
    program = (
        "import sys, json\n"
        "from dpaudit.codehash import ScriptCodeHashes\n"
        f"h = ScriptCodeHashes({str(SCRIPTS)!r}, unhashed=['download_dataset'])\n"
        f"[h[r] for r in {HASHED_SCRIPTS!r}]\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('dpaudit', 'tensorflow', 'keras')))))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    # dpaudit.caches: where the parse-time caches live (os and pathlib only)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ["dpaudit", "dpaudit.caches", "dpaudit.codehash"]


# The disk cache of parsed import statements (a fifth of each Snakefile parse). Oracle: ``ast``
# on the same text, through a cache object with its own folder.
SOURCE = "import os\nfrom dpaudit import io\n\ndef f():\n    from .x import (a,\n        b)\n"


def _fresh_cache(monkeypatch, folder):
    monkeypatch.setenv("DPAUDIT_CACHE_DIR", str(folder))
    return codehash._ImportCache()


def test_the_import_cache_returns_what_ast_parses_and_reads_it_back_without_parsing(tmp_path, monkeypatch):
    cache = _fresh_cache(monkeypatch, tmp_path)
    expected = codehash._parsed_import_statements(SOURCE)
    assert expected == ((0, None, ("os",)), (0, "dpaudit", ("io",)), (1, "x", ("a", "b")))
    assert cache.get(SOURCE) == expected
    cache.save()
    assert codehash.cache_path().parent == tmp_path and codehash.cache_path().is_file()

    def parse(source):
        raise AssertionError("parsed although the cache holds this text")

    monkeypatch.setattr(codehash, "_parsed_import_statements", parse)
    assert _fresh_cache(monkeypatch, tmp_path).get(SOURCE) == expected


def test_an_edited_text_is_parsed_again(tmp_path, monkeypatch):
    cache = _fresh_cache(monkeypatch, tmp_path)
    cache.get(SOURCE)
    cache.save()
    edited = SOURCE + "import dpaudit.plots\n"
    assert _fresh_cache(monkeypatch, tmp_path).get(edited)[-1] == (0, None, ("dpaudit.plots",))


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", "ENTRY"])
def test_a_damaged_cache_is_parsed_around_and_replaced(tmp_path, monkeypatch, damage):
    cache = _fresh_cache(monkeypatch, tmp_path)
    path = codehash.cache_path()
    key = codehash.hashlib.sha256(SOURCE.encode()).hexdigest()
    path.write_text(json.dumps({key: [[1, 2]]}) if damage == "ENTRY" else damage)
    assert cache.get(SOURCE) == codehash._parsed_import_statements(SOURCE)
    cache.save()
    assert json.loads(path.read_text())[key] == [[0, None, ["os"]], [0, "dpaudit", ["io"]], [1, "x", ["a", "b"]]]


def test_saving_keeps_what_another_process_wrote_meanwhile(tmp_path, monkeypatch):
    first, second = _fresh_cache(monkeypatch, tmp_path), _fresh_cache(monkeypatch, tmp_path)
    first.get(SOURCE)
    second.get("import json\n")
    first.save()
    second.save()
    assert len(json.loads(codehash.cache_path().read_text())) == 2
    assert not list(tmp_path.glob("*.tmp"))


def test_an_unwritable_cache_folder_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = _fresh_cache(monkeypatch, blocker / "cache")  # a folder under a file cannot be made
    assert cache.get(SOURCE) == codehash._parsed_import_statements(SOURCE)
    cache.save()
    assert ScriptCodeHashes(SCRIPTS)["metric_mia"]


def test_without_a_home_directory_nothing_is_written_in_the_working_directory(tmp_path, monkeypatch):
    for name in ("DPAUDIT_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(codehash.os.path, "expanduser", lambda path: path)  # what Python does without a home
    monkeypatch.chdir(tmp_path)
    assert codehash.cache_path() is None
    cache = codehash._ImportCache()
    assert cache.get(SOURCE) == codehash._parsed_import_statements(SOURCE)
    cache.save()
    assert list(tmp_path.iterdir()) == []


def test_the_cache_folder_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("DPAUDIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert codehash.cache_path().parent == tmp_path / "dpaudit"
