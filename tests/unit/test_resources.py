"""dpaudit.resources: mem_mb and runtime grow with the data, not with a constant."""

from dpaudit.resources import (
    BUNDLED_SHAPES,
    audit_resources,
    dataset_shape,
    extract_resources,
    metric_resources,
    mlp_parameters,
    model_parameters,
    train_resources,
)


def test_mlp_parameters_count_weights_and_biases():
    assert mlp_parameters(100, [64], 2) == 100 * 64 + 64 + 64 * 2 + 2 == 6594
    assert mlp_parameters(3, [], 2) == 8
    assert model_parameters(30, 2, {"hidden_units": [64]}, "objective_perturbation") == 60


def test_shape_from_dataset_json_then_config_then_bundled_size():
    assert dataset_shape({"n": 10, "d": 3, "classes": 4}, "synthetic", {"n": 99, "d": 9}) == (10, 3, 4)
    assert dataset_shape(None, "synthetic", {"n": 99, "d": 9, "classes": 2}) == (99, 9, 2)
    assert dataset_shape(None, "digits", {}) == BUNDLED_SHAPES["digits"]
    assert dataset_shape(None, "digits", {"n": 100})[0] == 100


def test_extraction_memory_grows_with_n_but_not_with_n_times_p():
    small = extract_resources(10_000, 100, 6594, full_gradients=True)["mem_mb"]
    large = extract_resources(1_000_000, 100, 6594, full_gradients=False)["mem_mb"]
    assert small < large
    # Streamed vectors: 10x more examples with full gradients adds the per-row columns,
    # not 10x the N x P matrix (100,000 x 6,594 float32 alone would be 2.6 GB).
    full = extract_resources(100_000, 100, 6594, full_gradients=True)["mem_mb"]
    assert full < 5207 / 2
    assert full - small < 1000


def test_every_value_scales_with_the_attempt():
    run = {"mechanism": "dpsgd", "batch_size": 64, "epochs": 10}
    for make in (
        lambda a: extract_resources(5000, 20, 1500, full_gradients=False, attempt=a),
        lambda a: train_resources(5000, 20, 1500, run, attempt=a),
        lambda a: metric_resources(5000, grid_size=10**6, attempt=a),
        lambda a: audit_resources(100, 64, runs=50, steps=30, attempt=a),
    ):
        one, two = make(1), make(2)
        assert two["mem_mb"] == 2 * one["mem_mb"] and two["runtime"] == 2 * one["runtime"]


def test_training_grows_with_epochs_model_and_dp():
    base = {"mechanism": "baseline", "batch_size": 64, "epochs": 50}
    big = train_resources(197_324, 600, 90_000, base)
    dp = train_resources(197_324, 600, 90_000, {**base, "mechanism": "dpsgd", "clip_norm": 1.0})
    tiny = train_resources(400, 5, 60, base)
    assert tiny["mem_mb"] < big["mem_mb"] <= dp["mem_mb"]
    assert tiny["runtime"] < big["runtime"] < dp["runtime"]
    # NA hyperparameters (NaN in the run lookup) fall back to defaults
    assert train_resources(400, 5, 60, {"mechanism": "baseline", "batch_size": float("nan")})["mem_mb"] > 0
