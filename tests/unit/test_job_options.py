"""Issue 47: a job's params hold only what it reads. The option lists of dpaudit.contract.job_options
equal the keys each job's code reads of its options (read from the source with ast: every
``options["key"]``, ``options.get("key")`` and, in the PMP rows, ``o["key"]``), so a changed option
reruns exactly the jobs that read it and a job never misses one it reads."""

import ast
from pathlib import Path

from dpaudit.config_schema import load_schema
from dpaudit.contract import job_options

SRC = Path(__file__).resolve().parents[2] / "src" / "dpaudit"


def read_keys(path: Path, names=("options",), function: str | None = None) -> set[str]:
    """String keys subscripted (``x["k"]``) or got (``x.get("k")``) on a variable of ``names`` in
    ``path`` (inside ``function`` only, when given)."""
    tree = ast.parse(path.read_text())
    if function is not None:
        tree = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == function)
    keys = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            keys.add(node.slice.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and isinstance(node.func.value, ast.Name) and node.func.value.id in names and node.args
              and isinstance(node.args[0], ast.Constant)):
            keys.add(node.args[0].value)
    return keys


def schema_keys(family: str) -> set[str]:
    return set(load_schema()["properties"]["metrics"]["properties"][family]["properties"])


def test_the_canary_jobs_get_exactly_the_options_they_read():
    canary = schema_keys("canary")
    assert read_keys(SRC / "audit" / "twin.py") == set(job_options.CANARY_TWIN)
    # linear_neighbour is read with a default and is no config key (the crafted neighbour, always)
    assert read_keys(SRC / "audit" / "linear_audit.py") & canary == set(job_options.CANARY_LINEAR)
    assert read_keys(SRC / "metrics" / "canary" / "rows.py", function="run_canary_metrics") == set(
        job_options.CANARY_ROWS)
    for keys in (job_options.CANARY_TWIN, job_options.CANARY_LINEAR, job_options.CANARY_ROWS):
        assert set(keys) <= canary


def test_the_pmp_jobs_get_exactly_the_options_they_read():
    from dpaudit.extract.extract import PMP_PAIR_OPTIONS

    pmp = schema_keys("pmp")
    assert read_keys(SRC / "extract" / "extract.py", names=("parent",)) == set(job_options.PMP_PAIRS)
    assert PMP_PAIR_OPTIONS == job_options.PMP_PAIRS
    rows = SRC / "metrics" / "pmp" / "run.py"
    assert read_keys(rows, names=("o",)) == set(job_options.PMP_ROWS)
    for keys in (job_options.PMP_PAIRS, job_options.PMP_ROWS, job_options.PMP_NOT_APPLICABLE_ROWS):
        assert set(keys) <= pmp


def test_read_keys_finds_subscripts_and_gets(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f(options, o):\n    return options['a'] + options.get('b', 1) + o['c'] + other['d']\n")
    assert read_keys(source) == {"a", "b"} and read_keys(source, names=("o",)) == {"c"}


def test_a_run_the_pmp_recipes_do_not_apply_to_reads_only_the_parent_set_options():
    import logging

    import pandas as pd

    from dpaudit.metrics.pmp.run import OPTION_DEFAULTS, pmp_run_metrics

    log = logging.getLogger("test")
    changed = {**OPTION_DEFAULTS, "partners_relative_standard_error": 0.3, "partners_max": 7, "recipe_c": True,
               "alpha": 0.2, "seed": 9, "recipe_a_exact_max": 10, "parent_seed": 4, "nonmember_pool": "nonmembers"}
    for train in ({"epsilon": float("inf"), "delta": 1e-5, "mechanism": "baseline"},
                  {"epsilon": 2.0, "delta": 1e-5, "mechanism": "output_perturbation"},
                  {"epsilon": 2.0, "delta": 1e-5, "mechanism": "dpsgd", "microbatches": 4}):
        full, _ = pmp_run_metrics(None, None, train, gradients_path=None, options=changed, log=log)
        given = job_options.subset(changed, job_options.PMP_NOT_APPLICABLE_ROWS)
        rows, per_example = pmp_run_metrics(None, None, train, gradients_path=None, options=given, log=log)
        pd.testing.assert_frame_equal(rows, full)
        assert per_example.empty and set(rows["status"]) == {"not_applicable"}
        assert set(rows["parent_seed"]) == {4} and set(rows["nonmember_pool"]) == {"nonmembers"}
