"""Metric families start no TensorFlow: per-example gradients are the extraction stage's job.

Every module under ``dpaudit/metrics/`` is parsed (imports inside functions included,
as ``dpaudit.codehash`` reads them); none may import ``dpaudit._tf`` or TensorFlow,
Keras or tensorflow-privacy. For the pmp family, whose job used to start TensorFlow,
every dpaudit module it reaches is checked too, and so for the canary family, which reads
the scores the canary_scores job wrote and reaches no ``dpaudit.training`` module at all
(the linear releases and their detectable noise factor are training-side:
``dpaudit.audit.linear_audit``).
"""

import ast

import pytest

from dpaudit import codehash

TF_MODULES = ("tensorflow", "tf_keras", "keras", "tensorflow_privacy")
METRIC_MODULES = sorted(
    ".".join(("dpaudit", *path.relative_to(codehash.PACKAGE_ROOT).with_suffix("").parts)).removesuffix(".__init__")
    for path in (codehash.PACKAGE_ROOT / "metrics").rglob("*.py")
)


def _third_party_imports(module: str) -> set[str]:
    tree = ast.parse(codehash.module_path(module).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return {name for name in names if name.split(".")[0] in TF_MODULES}


def test_every_metrics_module_is_found():
    assert "dpaudit.metrics.pmp.run" in METRIC_MODULES and "dpaudit.metrics.mia" in METRIC_MODULES
    assert "dpaudit.metrics" in METRIC_MODULES and "dpaudit.metrics.pmp" in METRIC_MODULES


@pytest.mark.parametrize("module", METRIC_MODULES)
def test_metrics_module_imports_no_tensorflow(module):
    direct = codehash.imported_modules(codehash.module_path(module).read_text(), importer=module)
    assert "dpaudit._tf" not in direct, f"{module} imports dpaudit._tf"
    assert not _third_party_imports(module), f"{module} imports {sorted(_third_party_imports(module))}"


TRANSITIVELY_CHECKED = [m for m in METRIC_MODULES if m.startswith(("dpaudit.metrics.pmp", "dpaudit.metrics.canary"))]


@pytest.mark.parametrize("module", TRANSITIVELY_CHECKED)
def test_module_reaches_no_tensorflow(module):
    cache: dict[str, set[str]] = {}
    reached = codehash.module_closure([module], cache=cache)
    assert "dpaudit._tf" not in reached, (
        f"{module} reaches dpaudit._tf through "
        f"{sorted(m for m in reached if 'dpaudit._tf' in cache.get(m, set()))}")
    offenders = {m: sorted(names) for m in sorted(reached) if (names := _third_party_imports(m))}
    assert not offenders, f"{module} reaches TensorFlow imports: {offenders}"


@pytest.mark.parametrize("module", [m for m in METRIC_MODULES if m.startswith("dpaudit.metrics.canary")])
def test_canary_module_reaches_no_training_module(module):
    reached = codehash.module_closure([module], cache={})
    assert not sorted(m for m in reached if m.startswith("dpaudit.training")), module


def test_the_check_catches_a_lazy_tf_import(tmp_path):
    # The same parse sees an import inside a function (the old metric_pmp started TF that way).
    source = "def f():\n    from dpaudit import _tf\n    return _tf\n"
    assert "dpaudit._tf" in codehash.imported_modules(source, importer="dpaudit.metrics.x")
    tree = "def g():\n    import tensorflow as tf\n"
    path = tmp_path / "m.py"
    path.write_text(tree)
    assert any(isinstance(n, ast.Import) and n.names[0].name == "tensorflow" for n in ast.walk(ast.parse(tree)))
