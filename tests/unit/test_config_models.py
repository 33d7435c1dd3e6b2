"""training.model and the image datasets in the config: parse-time checks naming the key and the fix."""

import copy

import numpy as np
import pytest

from dpaudit.config import ConfigError, dataset_classes, dataset_features, validate_config

USER = "keras:tests.unit.user_builders:"
BASE = {
    "datasets": {"digits": {}},
    "grid": [{"mechanism": ["baseline"]}, {"mechanism": ["dpsgd"], "target_epsilon": [4.0]}],
}


def _config(model=None, datasets=None, **training):
    config = copy.deepcopy(BASE)
    if datasets is not None:
        config["datasets"] = datasets
    if model is not None:
        training["model"] = model
    config["training"] = training
    return config


def _refused(config, *words):
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    for word in words:
        assert word in str(err.value)
    return str(err.value)


def test_cnn_on_digits_and_synthetic_images_validates_with_its_defaults():
    config = validate_config(_config("cnn", {"digits": {}, "synthetic_images": {"n": 200, "image_size": 12}},
                                     group_norm_groups=4))
    training = config["training"]
    assert training["model"] == "cnn" and training["conv_filters"] == [16, 32] and training["pooling"] == "max"
    assert dataset_features("synthetic_images", {"image_size": 12, "channels": 3}) == 432
    assert dataset_classes("synthetic_images", {"classes": 5}) == 5


def test_a_user_builder_validates_and_mlp_is_the_default():
    assert validate_config(_config())["training"]["model"] == "mlp"
    validate_config(_config(USER + "small_cnn"))


def test_cnn_on_a_dataset_without_images_is_refused_naming_the_key():
    _refused(_config("cnn", {"synthetic": {}}), "config.training.model", "cnn needs an image dataset", "mlp")


def test_batch_normalization_under_dpsgd_is_refused_at_parse_time_with_the_suggestion():
    _refused(_config(USER + "with_batch_norm"), "config.training.model (dataset digits)", "BatchNormalization",
             "GroupNormalization")
    # a baseline-only grid may use it
    config = _config(USER + "with_batch_norm")
    config["grid"] = [{"mechanism": ["baseline"]}]
    validate_config(config)


def test_a_dataset_s_own_model_is_named_with_its_key():
    config = _config(datasets={"digits": {"training": {"model": USER + "absent_function"}}})
    _refused(config, "config.datasets.digits.training.model", "no function 'absent_function'")
    _refused(_config("keras:no_such_package.mod:f"), "config.training.model", "no_such_package", "PYTHONPATH")
    _refused(_config("resnet"), "training.model")  # the schema's pattern


def test_group_norm_groups_must_divide_the_filters():
    _refused(_config("cnn", conv_filters=[6], group_norm_groups=4), "config.training.model",
             "does not divide conv_filters")


def test_image_keys_belong_to_synthetic_images():
    _refused(_config(datasets={"digits": {"image_size": 8}}), "image_size apply to synthetic_images only")
    _refused(_config(datasets={"synthetic_images": {"d": 8}}), "d apply to synthetic only")


def test_source_arrays_is_checked_at_parse_time(tmp_path):
    x = np.random.default_rng(0).normal(size=(40, 6, 6))
    y = np.arange(40) % 2
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    np.savez(good, x=x, y=y)
    x[7, 2, 3] = np.nan
    np.savez(bad, x=x, y=y)
    config = validate_config(_config("cnn", {"mine": {"source": "arrays", "path": str(good)}}))
    assert dataset_features("mine", config["datasets"]["mine"]) == 36
    assert dataset_classes("mine", config["datasets"]["mine"]) == 2
    _refused(_config(datasets={"mine": {"source": "arrays", "path": str(bad)}}), "config.datasets.mine",
             "array x", "index [7, 2, 3]")
    _refused(_config(datasets={"mine": {"source": "arrays"}}), "source: arrays needs path")
    _refused(_config(datasets={"mine": {"source": "arrays", "path": str(good), "label": "y"}}),
             "label apply to source: table only")


# ---- training.model as a grid key (issue 33): the MLP runs keep their names

# The run and recipe names of the default config's digits grid before the model column existed
# (commit d961d33), written out: adding the column must not rename one of them.
MLP_NAMES = [f"mechanism~{m}_target_epsilon~{e}_clip_norm~{c}_microbatches~NA_epochs~10_batch_size~64_"
             f"learning_rate~0.05_seed~{s}"
             for m, e, c in (("baseline", "NA", "NA"), ("dpsgd", "1.0", "1.0"), ("dpsgd", "4.0", "1.0"),
                             ("dpsgd", "16.0", "1.0")) for s in (0, 1)]


def _names(config, dataset="digits"):
    from dpaudit.config import dataset_grids, recipe_lookup, run_lookup

    runs = run_lookup(dataset_grids(validate_config(config))[dataset])
    return runs, recipe_lookup(runs)


def test_the_default_config_keeps_its_mlp_run_and_recipe_names():
    from pathlib import Path

    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "config.yaml").read_text())
    runs, recipes = _names(config)
    assert sorted(runs) == sorted(MLP_NAMES)
    assert sorted(recipes) == sorted({name.rsplit("_seed~", 1)[0] for name in MLP_NAMES})
    assert {params["model"] for params in runs.values()} == {"mlp"}


def test_a_grid_of_models_names_only_the_runs_that_are_not_the_mlp():
    config = _config()
    config["grid"] = [{"mechanism": ["baseline", "dpsgd"], "target_epsilon": [4.0],
                       "model": ["mlp", "cnn", USER + "small_cnn"]}]
    runs, recipes = _names(config)
    assert len(runs) == 6 and len(recipes) == 6
    plain = {name for name, params in runs.items() if params["model"] == "mlp"}
    assert not any("model~" in name for name in plain)
    others = {params["model"]: name for name, params in runs.items() if params["mechanism"] == "dpsgd"}
    assert others["cnn"].endswith("_seed~0_model~cnn")
    assert others[USER + "small_cnn"].endswith("_model~keras+tests.unit.user_builders+small_cnn")
    assert others["cnn"].removesuffix("_model~cnn") == others["mlp"]
    assert all(params["model"] in ("mlp", "cnn", USER + "small_cnn") for params in runs.values())


def test_training_model_names_every_run_of_a_dataset_and_linear_runs_have_no_model():
    config = _config("cnn", {"breast_cancer": {}})
    config["datasets"]["breast_cancer"]["training"] = {"model": "mlp"}
    config["datasets"]["digits"] = {"grid": [{"mechanism": ["baseline", "dpsgd"], "target_epsilon": [1.0]}]}
    config["grid"] = [{"mechanism": ["baseline"]}, {"mechanism": ["output_perturbation"], "target_epsilon": [1.0]}]
    digits, _ = _names(config, "digits")
    cancer, _ = _names(config, "breast_cancer")
    assert len(digits) == 2 and all(name.endswith("_model~cnn") for name in digits)
    assert not any("model~" in name for name in cancer)
    assert {params["model"] for params in cancer.values()} == {"mlp", None}  # NA for the linear release


def test_a_grid_model_is_checked_at_parse_time_naming_the_grid():
    config = _config()
    config["grid"] = [{"mechanism": ["dpsgd"], "target_epsilon": [4.0], "model": ["mlp", USER + "with_batch_norm"]}]
    _refused(config, "config.grid model 'keras:tests.unit.user_builders:with_batch_norm'", "GroupNormalization")
    config["grid"] = [{"mechanism": ["output_perturbation"], "target_epsilon": [4.0], "model": ["cnn"]}]
    _refused(config, "config.grid[0].model: not applicable to mechanism output_perturbation")
