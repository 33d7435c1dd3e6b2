"""Config validation, defaults and the run grid (dpaudit.config)."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpaudit.config import (
    ConfigError,
    dataset_grids,
    epsilon_rule_of_thumb_warnings,
    grid_table,
    run_lookup,
    validate_config,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def invalid(mutate):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    with pytest.raises(ConfigError) as error:
        validate_config(config)
    return str(error.value)


@pytest.mark.parametrize("path", sorted((ROOT / "config").rglob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_validates(path):
    validate_config(yaml.safe_load(path.read_text()))


def test_unknown_key_is_named_with_allowed_keys():
    message = invalid(lambda c: c["training"].update(learnig_rate=0.1))
    assert "config.training" in message and "'learnig_rate'" in message
    assert "allowed keys" in message and "optimizer" in message


def test_wrong_type_names_key_path():
    message = invalid(lambda c: c["grid"][0].update(epochs=["ten"]))
    assert "config.grid[0].epochs[0]" in message and "integer" in message


@pytest.mark.parametrize("epsilon", [0, -1.0])
def test_non_positive_epsilon_refused(epsilon):
    message = invalid(lambda c: c["grid"][1].update(target_epsilon=[epsilon]))
    assert "config.grid[1].target_epsilon[0]" in message and "> 0" in message


@pytest.mark.parametrize("delta", [0, 1, 1.5, -0.1])
def test_delta_outside_unit_interval_refused(delta):
    message = invalid(lambda c: c["training"].update(delta=delta))
    assert "config.training.delta" in message and "auto" in message


def test_empty_grid_refused():
    # an empty grid trains nothing: allowed only for a dataset external_models audits (issue 44)
    message = invalid(lambda c: c.update(grid=[]))
    assert "config.grid: empty, so dataset synthetic would have no model" in message
    assert "external_models" in message


def test_empty_value_list_refused():
    message = invalid(lambda c: c["grid"][0].update(seed=[]))
    assert "config.grid[0].seed" in message


def test_unknown_dataset_lists_allowed_names():
    message = invalid(lambda c: c["datasets"].update(cifar10={}))
    assert "config.datasets" in message and "'cifar10'" in message and "breast_cancer" in message


def test_unknown_mechanism_lists_allowed_values():
    message = invalid(lambda c: c["grid"][0].update(mechanism=["dp-sgd"]))
    assert "config.grid[0].mechanism[0]" in message and "'dpsgd'" in message


def test_dpsgd_without_target_epsilon_refused():
    message = invalid(lambda c: c["grid"][1].pop("target_epsilon"))
    assert "config.grid[1]" in message and "target_epsilon" in message


def test_target_epsilon_on_baseline_refused():
    message = invalid(lambda c: c["grid"][0].update(target_epsilon=[1.0]))
    assert "config.grid[0].target_epsilon" in message and "not applicable" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_path_safe_grid_value_refused(value):
    # YAML's .nan / .inf pass the schema's numeric bounds but would put "nan" or
    # "inf" into run names and paths.
    message = invalid(lambda c: c["grid"][1].update(target_epsilon=[value]))
    assert "config.grid[1].target_epsilon[0]" in message and "not a finite number" in message
    assert message.count("\n") == 1  # one line: the finite-number check, not also the path rule


def test_synthetic_only_key_on_other_dataset_refused():
    message = invalid(lambda c: c["datasets"]["digits"].update(n=100))
    assert "config.datasets.digits" in message and "synthetic only" in message


def test_pmp_recipe_c_with_fewer_than_four_reference_models_refused():
    # Recipe C splits the recipe pool's models into selection and evaluation halves and needs 4
    # (dpsgd.empirical_pmp would raise inside metric_pmp after the pool was trained).
    def three(c):
        c["metrics"]["pmp"].update(enabled=True, recipe_c=True)
        c["metrics"].setdefault("attacks", {})["reference_models"] = 3

    message = invalid(three)
    assert "config.metrics.attacks.reference_models" in message and "recipe_c needs at least 4" in message


@pytest.mark.parametrize(("recipe_c", "models"), [(True, 4), (True, 63), (False, 3)])
def test_pmp_recipe_c_and_reference_models_accepted(recipe_c, models):
    config = copy.deepcopy(DEFAULT)
    config["metrics"]["pmp"].update(enabled=True, recipe_c=recipe_c)
    config["metrics"].setdefault("attacks", {})["reference_models"] = models
    validated = validate_config(config)
    assert validated["metrics"]["pmp"]["recipe_c"] is recipe_c
    assert validated["metrics"]["attacks"]["reference_models"] == models


def test_pmp_recipe_c_minimum_is_recipe_c_minimum_and_shadow_models_is_gone():
    from dpaudit.config import RECIPE_C_MIN_MODELS
    from dpaudit.metrics.pmp.dpsgd import MIN_REFERENCE_MODELS

    assert RECIPE_C_MIN_MODELS == MIN_REFERENCE_MODELS
    assert validate_config(copy.deepcopy(DEFAULT))["metrics"]["pmp"]["recipe_c"] is False
    # the shadow-model path is gone: its key is refused, not silently ignored
    assert "shadow_models" in invalid(lambda c: c["metrics"]["pmp"].update(shadow_models=16))


def test_every_problem_is_reported_at_once():
    def two(c):
        c["training"]["delta"] = 2
        c["grid"][0]["epochs"] = [0]

    message = invalid(two)
    assert "config.training.delta" in message and "config.grid[0].epochs[0]" in message


def test_defaults_are_filled():
    config = validate_config({"datasets": {"synthetic": {}}, "grid": [{"mechanism": ["baseline"]}]})
    assert config["training"]["delta"] == "auto"
    assert config["metrics"]["mia"]["fpr_targets"] == [0.001, 0.01, 0.1]
    assert config["datasets"]["synthetic"]["n"] == 2000


def test_grid_is_typed_and_baselines_have_na_dp_columns():
    table = grid_table(validate_config(DEFAULT)["grid"])
    assert len(table) == 2 + 3 * 2
    assert str(table["epochs"].dtype) == "Int64" and str(table["target_epsilon"].dtype) == "Float64"
    baseline = table[table["mechanism"] == "baseline"]
    assert baseline["target_epsilon"].isna().all() and baseline["clip_norm"].isna().all()


def test_run_lookup_gives_plain_python_values():
    lookup = run_lookup(grid_table(validate_config(DEFAULT)["grid"]))
    for params in lookup.values():
        for value in params.values():
            assert value is None or type(value) in (int, float, str), (value, type(value))
    baseline = next(p for p in lookup.values() if p["mechanism"] == "baseline")
    assert baseline["target_epsilon"] is None and isinstance(baseline["epochs"], int)


def test_run_names_show_integers_without_decimals_and_na_for_not_applicable():
    names = list(run_lookup(grid_table(validate_config(DEFAULT)["grid"])))
    assert "mechanism~baseline_target_epsilon~NA_clip_norm~NA_microbatches~NA_epochs~10_batch_size~64_learning_rate~0.05_seed~0" in names
    assert any("target_epsilon~4.0_clip_norm~1.0_microbatches~NA_epochs~10_batch_size~64" in n for n in names)


def test_adding_a_row_never_renames_existing_runs():
    config = validate_config(DEFAULT)
    before = set(run_lookup(grid_table(config["grid"])))
    extended = copy.deepcopy(DEFAULT)
    extended["grid"].append({"mechanism": ["dpsgd"], "target_epsilon": [2], "clip_norm": [5.0], "epochs": [3]})
    after = set(run_lookup(grid_table(validate_config(extended)["grid"])))
    assert before < after and len(after - before) == 1


def test_dataset_grid_replaces_top_level_grid():
    config = copy.deepcopy(DEFAULT)
    config["datasets"]["digits"]["grid"] = [{"mechanism": ["baseline"], "seed": [7]}]
    grids = dataset_grids(validate_config(config))
    assert len(grids["digits"]) == 1 and len(grids["synthetic"]) == 8
    assert isinstance(grids["digits"], pd.DataFrame)


def test_large_target_epsilon_warns_once_per_config():
    # Geambasu's DP lecture (choosing ε): ε > 8 makes the MIA bound vacuous (best accuracy e^ε/(1+e^ε) ≥ 0.9997).
    config = validate_config(DEFAULT)
    config["grid"][1]["target_epsilon"] = [1, 8]
    assert epsilon_rule_of_thumb_warnings(config) == []
    config["grid"][1]["target_epsilon"] = [4, 16, 100]
    warnings = epsilon_rule_of_thumb_warnings(config)
    assert len(warnings) == 1 and "16, 100" in warnings[0] and "vacuous" in warnings[0]


def test_audit_runs_per_rho_key_must_name_a_target():
    # A mistyped key used to fall back to audit.runs silently.
    message = invalid(lambda c: c["audit"]["datasets"]["digits"].update(runs_per_rho={"0.95": 7}))
    assert "config.audit.datasets.digits.runs_per_rho" in message and "'0.95'" in message
    message = invalid(lambda c: c["audit"]["datasets"]["digits"].update(runs_per_rho={"rho0.9": 7}))
    assert "config.audit.datasets.digits.runs_per_rho" in message and "rho0.9" in message
    # Matched by value: "0.90" is the target 0.9, and the audit grid uses it.
    from dpaudit.metrics.identifiability_grid import audit_configs

    config = copy.deepcopy(DEFAULT)
    config["audit"]["datasets"]["digits"]["runs_per_rho"] = {"0.90": 7}
    audit = validate_config(config)["audit"]
    assert {p["runs"] for p in audit_configs(audit["datasets"]["digits"], audit).values()} == {7}


def test_audit_sensitivity_pairs_target_must_be_a_dataset_target():
    message = invalid(lambda c: c["audit"].update(sensitivity_pairs={"pairs": ["max2"], "rho_beta": 0.75, "runs": 5}))
    assert "config.audit.sensitivity_pairs.rho_beta" in message and "config.audit.datasets.digits.rho_beta" in message


def test_audit_unreachable_target_is_refused_at_parse_time():
    # The legacy order grid (α ≤ 63) keeps ε ≥ ln(1/δ)/62 = 0.111 at δ = 0.001,
    # above logit(0.52) = 0.080; before, only each audit_block job raised. rules/audit.smk
    # runs this check right after validate_config (tests/workflow: the dry-run stops).
    from dpaudit.metrics.identifiability_grid import target_problems

    config = copy.deepcopy(DEFAULT)
    config["audit"]["datasets"]["digits"].update(delta=0.001, rho_beta=[0.9, 0.52])
    audit = validate_config(config)["audit"]
    problems = target_problems("digits", audit["datasets"]["digits"], audit)
    assert len(problems) == 1
    assert "config.audit.datasets.digits.rho_beta[1]" in problems[0] and "unreachable" in problems[0]
    assert "legacy" in problems[0] and "config.audit.conversion" in problems[0]
    # Reachable with the closed-form conversion, and at δ = 0.01 with the legacy grid.
    assert target_problems("digits", audit["datasets"]["digits"], {**audit, "conversion": "continuous"}) == []
    assert target_problems("digits", {**audit["datasets"]["digits"], "delta": 0.01}, audit) == []


# ---- output_perturbation / objective_perturbation (binary logistic regression)

LINEAR = {"mechanism": ["output_perturbation", "objective_perturbation"], "target_epsilon": [1, 10], "seed": [0, 1]}


def _binary(grid):
    return {"datasets": {"breast_cancer": {}}, "grid": grid}


def test_linear_mechanisms_expand_with_na_for_keras_columns():
    config = validate_config(_binary([{"mechanism": ["baseline"]}, LINEAR]))
    table = dataset_grids(config)["breast_cancer"]
    linear = table[table["mechanism"] != "baseline"]
    assert len(linear) == 2 * 2 * 2 and len(table) == 9
    for column in ("clip_norm", "microbatches", "epochs", "batch_size", "learning_rate"):
        assert linear[column].isna().all(), column
    assert linear["target_epsilon"].notna().all() and config["training"]["linear_regularization"] == 1.0
    names = list(run_lookup(table))
    assert ("mechanism~output_perturbation_target_epsilon~1.0_clip_norm~NA_microbatches~NA_epochs~NA_"
            "batch_size~NA_learning_rate~NA_seed~0") in names


def test_linear_rows_never_rename_existing_runs():
    before = set(run_lookup(grid_table(validate_config(DEFAULT)["grid"])))
    config = copy.deepcopy(DEFAULT)
    config["grid"].append({"mechanism": ["output_perturbation"], "target_epsilon": [4]})
    config["datasets"] = {"synthetic": config["datasets"]["synthetic"]}
    config["audit"]["enabled"] = False  # its dataset (digits) is no longer prepared
    after = set(run_lookup(grid_table(validate_config(config)["grid"])))
    assert before < after and len(after - before) == 1


@pytest.mark.parametrize("mechanism", ["output_perturbation", "objective_perturbation"])
def test_linear_mechanism_needs_target_epsilon(mechanism):
    with pytest.raises(ConfigError, match=rf"config.grid\[0\]: {mechanism} needs target_epsilon"):
        validate_config(_binary([{"mechanism": [mechanism]}]))


@pytest.mark.parametrize("key", ["clip_norm", "microbatches", "epochs", "batch_size", "learning_rate"])
def test_keras_column_on_linear_block_refused(key):
    value = 0.5 if key in ("clip_norm", "learning_rate") else 2
    with pytest.raises(ConfigError) as error:
        validate_config(_binary([{**LINEAR, key: [value]}]))
    message = str(error.value)
    assert f"config.grid[0].{key}" in message and "not applicable to mechanism objective_perturbation" in message


def test_mixed_block_keeps_keras_columns_for_the_keras_mechanism():
    block = {"mechanism": ["dpsgd", "output_perturbation"], "target_epsilon": [2], "epochs": [3, 4]}
    table = dataset_grids(validate_config(_binary([block])))["breast_cancer"]
    assert len(table) == 2 + 1  # the linear row does not multiply over epochs
    assert table.loc[table["mechanism"] == "dpsgd", "epochs"].tolist() == [3, 4]


def test_multiclass_dataset_with_linear_mechanism_is_refused_naming_the_key():
    message = invalid(lambda c: c["grid"].append({"mechanism": ["output_perturbation"], "target_epsilon": [1]}))
    # DEFAULT has synthetic (2 classes), breast_cancer (2) and digits (10).
    assert "config.datasets.digits" in message and "output_perturbation" in message and "10 classes" in message
    assert "config.datasets.synthetic" not in message and "config.datasets.breast_cancer" not in message
    message = invalid(lambda c: (c["datasets"]["synthetic"].update(classes=3),
                                 c["datasets"]["digits"].update(grid=[{"mechanism": ["baseline"]}]),
                                 c["grid"].append({"mechanism": ["objective_perturbation"], "target_epsilon": [1]})))
    assert "config.datasets.synthetic" in message and "3 classes" in message and "digits" not in message


def test_multiclass_dataset_with_its_own_keras_grid_is_accepted():
    config = copy.deepcopy(DEFAULT)
    config["datasets"]["digits"]["grid"] = [{"mechanism": ["baseline"]}]
    config["grid"].append({"mechanism": ["output_perturbation"], "target_epsilon": [1]})
    grids = dataset_grids(validate_config(config))
    assert "output_perturbation" in set(grids["synthetic"]["mechanism"])
    assert set(grids["digits"]["mechanism"]) == {"baseline"}


def test_linear_regularization_must_be_positive():
    message = invalid(lambda c: c["training"].update(linear_regularization=0))
    assert "config.training.linear_regularization" in message and "> 0" in message


def test_dataset_classes_match_prepared_datasets():
    from dpaudit.config import DATASET_CLASSES, dataset_classes
    from dpaudit.data import adult, datasets, purchase

    for name in ("breast_cancer", "digits"):
        _, info = datasets.prepare_dataset(name, {}, {})
        assert info["classes"] == DATASET_CLASSES[name] == dataset_classes(name, {}), name
    _, info = datasets.prepare_dataset("synthetic", {}, {"n": 40, "d": 2, "classes": 4})
    assert info["classes"] == dataset_classes("synthetic", {"classes": 4}) == 4
    assert DATASET_CLASSES["adult"] == len(set(adult.ADULT_LABELS.values()))
    assert DATASET_CLASSES["purchase100"] == purchase.PURCHASE_CLASSES
    assert set(DATASET_CLASSES) | {"synthetic", "synthetic_images"} == set(datasets.DATASETS)


def test_training_settings_per_mechanism():
    from dpaudit.config import training_for_mechanism

    training = validate_config(DEFAULT)["training"]
    keras = training_for_mechanism(training, "dpsgd")
    assert "linear_regularization" not in keras and keras["hidden_units"] == training["hidden_units"]
    assert training_for_mechanism(training, "baseline") == keras
    assert training_for_mechanism(training, "output_perturbation") == {"linear_regularization": 1.0}


def test_the_schema_read_with_libyaml_is_the_pure_python_readers_and_each_caller_gets_its_own():
    import yaml

    from dpaudit.config_schema import SCHEMA_PATH, load_schema

    assert yaml.__with_libyaml__, "PyYAML without libyaml: the schema is read with the slow loader"
    oracle = yaml.safe_load(SCHEMA_PATH.read_text())  # PyYAML's pure-Python loader
    first = load_schema()
    assert first == oracle
    first["properties"].clear()
    assert load_schema() == oracle


def test_an_edited_schema_is_read_again(tmp_path):
    import os

    from dpaudit.config_schema import load_schema

    path = tmp_path / "schema.yaml"
    path.write_text("type: object\n")
    assert load_schema(path) == {"type": "object"}
    path.write_text("type: array\n")
    os.utime(path, ns=(1, 10**18))  # a new modification time even on a coarse clock
    assert load_schema(path) == {"type": "array"}
