"""Parse-time validation beyond the schema (dpaudit.config): non-finite numbers, path
safety, sizes known before any job, the audit's cross-key checks, message shape."""

import copy
import math
from pathlib import Path

import pytest
import yaml

from dpaudit.config import ConfigError, validate_config
from dpaudit.config_schema import load_schema

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
NAN, INF = float("nan"), float("inf")


def invalid(mutate, config=None):
    config = copy.deepcopy(DEFAULT if config is None else config)
    mutate(config)
    with pytest.raises(ConfigError) as error:
        validate_config(config)
    return str(error.value)


def lines(message):
    return message.splitlines()[1:]


# ---------------------------------------------------------------- δ written as YAML 1.1 reads it


def test_unquoted_delta_1e_5_is_accepted_as_a_number():
    config = copy.deepcopy(DEFAULT)
    config.update(yaml.safe_load("training: {delta: 1e-5}"))
    assert config["training"]["delta"] == "1e-5"  # YAML 1.1: a string
    assert validate_config(config)["training"]["delta"] == 1e-5


def test_other_numeric_strings_become_numbers_where_the_schema_expects_one():
    config = copy.deepcopy(DEFAULT)
    config["metrics"]["mia"]["fpr_targets"] = ["1e-3", 0.01]
    config["audit"]["datasets"]["digits"]["delta"] = "1e-2"
    out = validate_config(config)
    assert out["metrics"]["mia"]["fpr_targets"] == [1e-3, 0.01]
    assert out["audit"]["datasets"]["digits"]["delta"] == 0.01
    # a string where a string is expected stays one; a non-number string is still refused
    assert out["training"]["optimizer"] == "sgd"
    message = invalid(lambda c: c["training"].update(delta="often"))
    assert "config.training.delta" in message


# ---------------------------------------------------------------- non-finite numbers anywhere


@pytest.mark.parametrize(("path", "value"), [
    (("training", "momentum"), NAN),
    (("training", "dropout"), NAN),
    (("training", "linear_regularization"), INF),
    (("metrics", "mia", "alpha"), NAN),
    (("metrics", "mia", "fpr_targets", 0), NAN),
    (("metrics", "epsilon_star", "alpha"), NAN),
    (("metrics", "epsilon_star", "empirical_filter"), NAN),
    (("datasets", "synthetic", "separation"), INF),
    (("audit", "clip_norm"), NAN),
    (("audit", "datasets", "digits", "learning_rate"), INF),
    (("profile", "log10_epsilons", 0), NAN),
    (("profile", "single_model_log10_epsilon"), -INF),
    (("grid", 1, "clip_norm", 0), INF),
])
def test_non_finite_number_anywhere_is_refused_naming_the_key(path, value):
    def mutate(config):
        node = config
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
        node[path[-1]] = value

    message = invalid(mutate)
    where = "config" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    assert lines(message) == [line for line in lines(message) if line.strip().startswith(where)]
    assert f"{where}: {value!r} is not a finite number; write a finite number" in message
    assert len(lines(message)) == 1  # one problem, one line (no bound or order errors besides)


def test_non_finite_allowed_only_where_the_schema_says_so():
    schema = copy.deepcopy(load_schema())
    schema["properties"]["profile"]["properties"]["single_model_log10_epsilon"]["x-allow-non-finite"] = True
    config = copy.deepcopy(DEFAULT)
    config["profile"]["single_model_log10_epsilon"] = INF
    assert validate_config(config, schema)["profile"]["single_model_log10_epsilon"] == INF
    config["profile"]["lam"] = INF
    with pytest.raises(ConfigError, match=r"config\.profile\.lam: inf is not a finite number"):
        validate_config(config, schema)


def test_nan_in_log10_epsilons_blames_its_own_position():
    message = invalid(lambda c: c["profile"].update(log10_epsilons=[NAN, -1, 0, 1]))
    assert lines(message) == ["  config.profile.log10_epsilons[0]: nan is not a finite number; "
                              "write a finite number; allowed: number"]


def test_one_problem_one_line_momentum_above_one():
    message = invalid(lambda c: c["training"].update(momentum=1.5))
    assert len(lines(message)) == 1 and "config.training.momentum" in message and "< 1" in message


# ---------------------------------------------------------------- path safety


@pytest.mark.parametrize("where", ["datasets", "audit.datasets", "profile.views", "profile.samples.views",
                                   "simulations.ks_fit.dataset"])
def test_dot_dot_slash_in_every_name_that_becomes_a_path_is_refused(where):
    bad = "../evil"

    def mutate(config):
        if where == "datasets":
            config["datasets"][bad] = {}
        elif where == "audit.datasets":
            config["audit"]["datasets"][bad] = copy.deepcopy(config["audit"]["datasets"]["digits"])
        elif where == "profile.views":
            config["profile"]["views"][bad] = {"source": "breast_cancer", "columns": [0, 1]}
        elif where == "profile.samples.views":
            config["profile"]["views"][bad] = {"source": "breast_cancer", "columns": [0, 1]}
            config["profile"]["samples"]["views"] = [bad]
        else:
            config.setdefault("simulations", {}).setdefault("ks_fit", {})["dataset"] = bad

    message = invalid(mutate)
    assert f"config.{where}" in message and repr(bad) in message


@pytest.mark.parametrize("name", ["../x", "..", ".hidden", "a/b", "a b", "a~b"])
def test_profile_view_name_path_rule(name):
    message = invalid(lambda c: c["profile"]["views"].update({name: {"source": "breast_cancer", "columns": [0, 1]}}))
    assert f"config.profile.views key {name!r}: {name!r} is not path-safe" in message


def test_path_rule_is_the_grid_rule():
    from dpaudit import config as dpconfig

    assert dpconfig.path_safe_problem("breast_cancer_2f", "k") is None
    assert dpconfig.path_safe_problem(1.5, "k") is None
    for bad in ("../x", "..", NAN, INF, "a/b", True):
        assert "not path-safe" in dpconfig.path_safe_problem(bad, "k")


# ---------------------------------------------------------------- sizes known before any job


def test_microbatches_above_batch_size_refused():
    message = invalid(lambda c: c["grid"][1].update(microbatches=[128], batch_size=[64]))
    assert "config.grid[1].microbatches[0]: microbatches=128 exceeds batch_size [64]" in message
    assert "write microbatches <= 64" in message


def test_microbatches_above_default_batch_size_refused():
    def mutate(c):
        c["grid"][1].pop("batch_size")
        c["grid"][1]["microbatches"] = [65]

    assert "config.grid[1].microbatches[0]" in invalid(mutate)


def test_batch_size_above_synthetic_members_refused():
    message = invalid(lambda c: c["datasets"]["synthetic"].update(n=100))  # 50 members < 64
    assert ("config.grid[0].batch_size[0]: batch_size=64 exceeds the 50 members (training examples) of "
            "dataset synthetic; write batch_size <= 50") in message


def test_batch_size_above_breast_cancer_members_refused():
    message = invalid(lambda c: c["grid"][0].update(batch_size=[285]))  # breast_cancer: 284 members
    assert "batch_size=285 exceeds the 284 members (training examples) of dataset breast_cancer" in message
    config = copy.deepcopy(DEFAULT)
    config["datasets"] = {"breast_cancer": {}}
    config["audit"]["enabled"] = False
    config["grid"][0]["batch_size"] = [284]
    validate_config(config)


def test_batch_size_message_is_the_training_jobs():
    from dpaudit.training.sampling import batch_size_problem

    assert batch_size_problem(64, 64, "adult", "k") is None
    assert batch_size_problem(65, 64, "adult", "k") == (
        "k: batch_size=65 exceeds the 64 members (training examples) of dataset adult; write batch_size <= 64")


def test_known_members_match_prepared_datasets():
    from dpaudit.data.datasets import members_before_download, prepare_dataset

    for name, params in [("synthetic", {"n": 103, "classes": 3, "d": 2}), ("breast_cancer", {}), ("digits", {})]:
        _, info = prepare_dataset(name, {}, params)
        assert members_before_download(name, params) == info["n_members"], name
    assert members_before_download("adult", {}) is None


def test_synthetic_classes_above_n_over_4_refused():
    message = invalid(lambda c: c["datasets"]["synthetic"].update(n=40, classes=11))
    assert "config.datasets.synthetic.classes: 11 classes need n >= 4 x classes = 44" in message


def test_delta_at_least_one_over_n_refused_where_n_is_known():
    message = invalid(lambda c: c["training"].update(delta=1 / 284))  # breast_cancer: 284 members
    assert "config.training.delta: dataset breast_cancer: delta=0.00352113 >= 1/n" in message
    assert "allow_large_delta" in message
    config = copy.deepcopy(DEFAULT)
    config["training"].update(delta=1 / 284, allow_large_delta=True)
    validate_config(config)
    config["training"].update(delta=1e-5, allow_large_delta=False)
    validate_config(config)


# ---------------------------------------------------------------- audit cross-checks


def test_audit_enabled_without_datasets_refused():
    message = invalid(lambda c: c["audit"].update(datasets={}))
    assert "config.audit.enabled: true but config.audit.datasets is empty" in message


def test_audit_dataset_not_prepared_refused():
    def mutate(c):
        c["datasets"].pop("digits")

    assert "config.audit.datasets.digits: digits must also be listed under config.datasets" in invalid(mutate)


def test_explicit_pair_without_neighbour_refused():
    message = invalid(lambda c: c["audit"].update(pairs=["max1", "explicit"]))
    assert "config.audit.datasets.digits: config.audit.pairs lists 'explicit'" in message
    config = copy.deepcopy(DEFAULT)
    config["audit"]["pairs"] = ["explicit"]
    config["audit"]["datasets"]["digits"]["neighbour"] = {"x_star": 0, "x_prime": 1}
    validate_config(config)


def test_sigmoid_output_on_multiclass_audit_dataset_refused():
    message = invalid(lambda c: c["audit"]["datasets"]["digits"].update(output="sigmoid"))
    assert "config.audit.datasets.digits.output: sigmoid is one unit for binary labels and digits has 10" in message


def test_ssim_without_image_shape_refused():
    message = invalid(lambda c: c["audit"]["datasets"]["digits"].pop("image_shape"))
    assert "config.audit.datasets.digits.image_shape: distance ssim compares images" in message


def test_ssim_image_shape_must_multiply_to_d():
    message = invalid(lambda c: c["audit"]["datasets"]["digits"].update(image_shape=[7, 7]))
    assert "[7, 7] has 49 pixels but digits has d = 64 features" in message


def test_image_shape_without_ssim_refused():
    message = invalid(lambda c: c["audit"]["datasets"]["digits"].update(distance="euclidean"))
    assert "image_shape, data_range apply to distance ssim only" in message


def test_dataset_features_match_prepared_datasets():
    from dpaudit.config import DATASET_FEATURES
    from dpaudit.data.datasets import prepare_dataset

    for name in ("breast_cancer", "digits"):
        assert prepare_dataset(name, {}, {})[1]["d"] == DATASET_FEATURES[name]


# ---------------------------------------------------------------- profile columns


def test_profile_column_out_of_range_names_view_key_and_range():
    message = invalid(lambda c: c["profile"]["views"]["breast_cancer_2f"].update(columns=[0, 30]))
    assert ("config.profile.views.breast_cancer_2f.columns[1]: column 30 does not exist in source breast_cancer "
            "(30 columns); write a column in 0..29") in message


def test_profile_adult_column_must_be_numeric():
    def mutate(c):
        c["profile"]["views"]["breast_cancer_2f"].update(source="adult", columns=[0, 1])

    assert "config.profile.views.breast_cancer_2f.columns[1]: adult column 1 is not numeric" in invalid(mutate)


def test_profile_source_columns_match_the_loaders():
    from dpaudit.config import PROFILE_ADULT_NUMERIC_COLUMNS, PROFILE_SOURCE_COLUMNS
    from dpaudit.data.adult import ADULT_NUMERIC
    from dpaudit.profile.data import ADULT_COLUMN_NAMES, ADULT_SIX_FEATURES, breast_cancer_view

    assert PROFILE_SOURCE_COLUMNS["adult"] == len(ADULT_COLUMN_NAMES)
    assert PROFILE_ADULT_NUMERIC_COLUMNS == ADULT_SIX_FEATURES
    assert {ADULT_COLUMN_NAMES[c] for c in PROFILE_ADULT_NUMERIC_COLUMNS} == set(ADULT_NUMERIC)
    breast_cancer_view([PROFILE_SOURCE_COLUMNS["breast_cancer"] - 1])
    with pytest.raises(ValueError, match=r"columns\[0\]: column 30 .*0\.\.29"):
        breast_cancer_view([30])


def test_finite_check_covers_every_number_type_of_the_schema():
    # every numeric key of the default config is finite after validation
    def walk(value):
        if isinstance(value, float):
            assert math.isfinite(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(validate_config(DEFAULT))
