"""Every import in src/dpaudit runs down the floors, there are no import cycles, and no file is
over 600 lines (issue 23).

Imports are read with ``ast`` (imports inside functions included, as ``dpaudit.codehash``
reads them). Floors, lowest first (docs/architecture.md): the contract, io, logs, ``_tf`` and
the config schema; ``dp``; data, training, profile, extract and the config; metrics and
simulations; plots and report; aggregate and the workflow tools. A module may import its
own floor or lower, never higher.
"""

import ast
from pathlib import Path

import dpaudit

ROOT = Path(dpaudit.__file__).resolve().parent
FLOORS = {
    "dpaudit.contract": 0, "dpaudit.io": 0, "dpaudit.logs": 0, "dpaudit._tf": 0, "dpaudit.config_schema": 0,
    "dpaudit.losses": 0, "dpaudit.progress": 0, "dpaudit.batching": 0, "dpaudit.caches": 0,
    "dpaudit.dp": 1,
    "dpaudit.data": 2, "dpaudit.external": 2, "dpaudit.training": 2, "dpaudit.audit": 2, "dpaudit.reference": 2, "dpaudit.profile": 2, "dpaudit.extract": 2, "dpaudit.config": 2,
    "dpaudit.configfile": 2,
    "dpaudit.metrics": 3, "dpaudit.simulations": 3,
    "dpaudit.plots": 4, "dpaudit.report": 4,
    "dpaudit.aggregate": 5, "dpaudit.resources": 5, "dpaudit.scheduling": 5, "dpaudit.checks": 5, "dpaudit.orphans": 5,
    "dpaudit.docs_gen": 5, "dpaudit.codehash": 5, "dpaudit.lint": 5,
}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("dpaudit", *path.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts).removesuffix(".__init__")] = path
    return out


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def known(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(known(a.name) for a in node.names if a.name.startswith("dpaudit"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join([*parts[:len(parts) - node.level + 1], *([base] if base else [])])
                if base.startswith("dpaudit"):
                    found.update(known(f"{base}.{a.name}") if f"{base}.{a.name}" in modules else known(base)
                                 for a in node.names)
        graph[module] = found - {module, "dpaudit", ""}
    return graph


def _floor(module: str) -> int | None:
    prefixes = [p for p in FLOORS if module == p or module.startswith(p + ".")]
    return FLOORS[max(prefixes, key=len)] if prefixes else None


def test_every_module_has_a_floor():
    assert [m for m in _modules() if m != "dpaudit" and _floor(m) is None] == []


def test_no_import_runs_up_the_floors():
    graph = _graph(_modules())
    upward = sorted(f"{a} (floor {_floor(a)}) imports {b} (floor {_floor(b)})"
                    for a, targets in graph.items() for b in targets if _floor(b) > _floor(a))
    assert upward == []


def test_no_import_cycles():
    graph = _graph(_modules())
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(module, path):
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def _imports_of_room(room: str) -> list[str]:
    graph = _graph(_modules())
    return sorted(f"{a} imports {b}" for a, targets in graph.items()
                  if a == room or a.startswith(room + ".") for b in targets)


def test_training_imports_neither_the_audit_nor_the_reference_models():
    # Issue 43: what trains a model knows nothing of what watches it (dpaudit.audit) or of the
    # reference models (dpaudit.reference); the audit reaches training through
    # dpaudit.training.observer, which training declares and audit implements.
    found = [line for line in _imports_of_room("dpaudit.training")
             if " imports dpaudit.audit" in line or " imports dpaudit.reference" in line]
    assert found == []


def test_the_report_draws_no_figure():
    # Issue 43: a page's figures come from plots/ through their rules; shared labels live in contract/.
    assert [line for line in _imports_of_room("dpaudit.report") if " imports dpaudit.plots" in line] == []


def test_the_room_checks_see_an_upward_import(tmp_path, monkeypatch):
    # Power: a planted import of the audit inside a training module is found.
    import shutil
    import sys

    copy = tmp_path / "dpaudit"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    train = copy / "training" / "sampling.py"
    train.write_text(train.read_text() + "\nfrom dpaudit.audit import twin  # planted\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", copy)
    assert any("dpaudit.training.sampling imports dpaudit.audit" in line
               for line in _imports_of_room("dpaudit.training"))


def test_no_source_file_is_over_600_lines():
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


# Issue 36: what a per-run job's modules import before any work is paid once per job. These
# library modules (the per-run families, the card, the extraction and the audit) import
# none of the heavy packages below at module level; the functions that need one import it.
PER_RUN_MODULES = (
    "dpaudit.io", "dpaudit.contract.metrics", "dpaudit.contract.delta", "dpaudit.metrics.mia",
    "dpaudit.metrics.epsilon_star", "dpaudit.metrics.pmp.pool", "dpaudit.metrics.pmp.run",
    "dpaudit.metrics.canary.rows", "dpaudit.metrics.attack_rows", "dpaudit.metrics.identifiability",
    "dpaudit.metrics.identifiability_audit", "dpaudit.report.cards", "dpaudit.extract.extract",
    "dpaudit.metrics.pmp.report",
)
HEAVY = ("scipy.stats", "scipy.optimize", "scipy.signal", "dp_accounting", "sklearn", "matplotlib",
         "jsonschema", "tensorflow")


def _loaded_after(code: str) -> list[str]:
    import json
    import subprocess
    import sys

    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_per_run_modules_import_no_heavy_package():
    # Oracle: sys.modules of a fresh interpreter after the imports.
    assert _loaded_after("\n".join(f"import {m}" for m in PER_RUN_MODULES)) == []


def test_the_aggregate_module_loads_no_schema_validator():
    # the jobs that read dpaudit.config's grid columns (aggregate, figures, dossier) validate nothing
    assert "jsonschema" not in _loaded_after("import dpaudit.aggregate, dpaudit.config")
