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


# ---------------------------------------------------------------- every cluster rule's declaration (issue 26)
import copy  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from dpaudit.resources import CONSTANT_MEMORY, canary_twin_resources, declared  # noqa: E402
from tests.workflow.helpers import ROOT  # noqa: E402

PROFILE = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
PROFILE_RULES = sorted(PROFILE["set-resources"])
RUN = {"mechanism": "dpsgd", "batch_size": 64, "epochs": 10, "clip_norm": 1.0}
TRAINING = {"hidden_units": [64]}
# bench/bench_memory.py --case canary_twin (n = 2,000, d = 20, 100,000 gradient and 100 input
# canaries, 10 epochs of batch 64): the twin's peak RSS on the 2-core test machine with the
# canaries as coordinates of the update (issue 22). The tour measured 1,424 MB with
# 1,000 MB declared when each canary was an input of the first layer.
TWIN_PEAK_MB = 1168


def _config(large: bool) -> dict:
    from dpaudit.config import validate_config

    config = validate_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    config = copy.deepcopy(config)
    config["simulations"]["epsilon_star"]["sizes"] = [1000, 10_000_000] if large else [1000]
    config["simulations"]["pmp"].update(trials_expmech=200 if large else 2, trials_gauss=200 if large else 2)
    return config


def _declaration(rule: str, large: bool) -> dict:
    n, d = (5_000_000, 300) if large else (500, 10)
    return declared(rule, _config(large), n=n, d=d, classes=2, training=TRAINING, run=RUN,
                    audit_runs=100_000 if large else 100, audit_n=100_000 if large else 100)


def _rule_block(rule: str) -> str:
    for path in (ROOT / "rules").glob("*.smk"):
        text = path.read_text()
        match = re.search(rf"^rule {rule}:\n(.*?)(?=^rule |\Z)", text, flags=re.MULTILINE | re.DOTALL)
        if match:
            return match.group(1)
    raise AssertionError(f"rule {rule} not found under rules/")


@pytest.mark.parametrize("rule", PROFILE_RULES)
def test_every_cluster_rule_declares_memory_that_grows_with_its_input(rule):
    entry = PROFILE["set-resources"][rule]
    assert not {"mem_mb", "runtime"} & set(entry), (
        f"profiles/slurm sets a constant for {rule}: declare it in dpaudit.resources.declared instead")
    # a family may pass what else its job grows with: job_resources("rule", sizes=...)
    assert re.search(rf'\*\*job_resources\("{rule}"(, sizes=\w+)?\)', _rule_block(rule)), \
        f"rule {rule} has no resources: **job_resources"
    small, large = _declaration(rule, False), _declaration(rule, True)
    if rule in CONSTANT_MEMORY:
        assert large["mem_mb"] == small["mem_mb"] and len(CONSTANT_MEMORY[rule]) > 40
    else:
        assert large["mem_mb"] > small["mem_mb"], (rule, small, large)
    assert large["runtime"] >= small["runtime"], (rule, small, large)
    assert declared(rule, _config(True), n=5_000_000, d=300, classes=2, training=TRAINING, run=RUN,
                    audit_runs=100_000, audit_n=100_000, attempt=2)["mem_mb"] == 2 * large["mem_mb"]


def test_every_rule_with_job_resources_is_in_the_profile_and_constants_are_profile_rules():
    used = set()
    for path in (ROOT / "rules").glob("*.smk"):
        used |= set(re.findall(r'\*\*job_resources\("(\w+)"(?:, sizes=\w+)?\)', path.read_text()))
    assert used == set(PROFILE_RULES)
    assert set(CONSTANT_MEMORY) <= set(PROFILE_RULES)


def test_the_twin_declares_its_canaries_and_covers_its_measured_peak():
    from dpaudit.resources import mlp_parameters, train_resources

    twin = canary_twin_resources(2000, 20, 2, TRAINING, {**RUN, "learning_rate": 0.05},
                                 gradient_canaries=100_000, input_canaries=100)
    assert twin["mem_mb"] >= TWIN_PEAK_MB
    released = train_resources(2000, 20, mlp_parameters(20, [64], 2), RUN)
    assert released["mem_mb"] < twin["mem_mb"]  # the canaries' per-step vectors and observations count
    # through the dispatcher the rule uses, and growing with the canaries
    config = _config(False)
    config["metrics"]["canary"].update(gradient_canaries=100_000, input_canaries=100)
    assert declared("canary_scores", config, n=2000, d=20, classes=2, training=TRAINING, run=RUN) == twin
    config["metrics"]["canary"]["gradient_canaries"] = 1000
    assert declared("canary_scores", config, n=2000, d=20, classes=2, training=TRAINING, run=RUN)["mem_mb"] < \
        twin["mem_mb"]
    two = canary_twin_resources(2000, 20, 2, TRAINING, RUN, gradient_canaries=100_000, input_canaries=100,
                                attempt=2)
    assert two["mem_mb"] == 2 * twin["mem_mb"]


# On the 2-core test machine, one core: peak RSS of the whole metric_pmp job (pmp_run_metrics:
# pairs file read, Recipes A and B) on synthetic Dense-layer factors of Adult's MLP (width 237)
# at 2n = 32,560 (Recipe A on drawn partners; bench/bench_pmp_scale.py alone: 690 MB), and of
# bench_pmp_scale's exact path at its largest default size 2n = 4,096.
PMP_SAMPLED_PEAK_MB = 1138
PMP_EXACT_PEAK_MB = 573


def test_metric_pmp_declares_the_measured_recipe_a_peaks_and_adult_fits_in_2_gb():
    from dpaudit.resources import PMP_EXACT_MAX, mlp_factor_width, pmp_metric_resources

    width = mlp_factor_width(107, [64], 2)
    assert width == 237
    adult = declared("metric_pmp", _config(False), n=32_561, d=107, classes=2, training=TRAINING, run=RUN)
    assert adult == pmp_metric_resources(32_561, 7042, checkpoints=5, factor_width=width)
    assert PMP_SAMPLED_PEAK_MB <= adult["mem_mb"] <= 2000
    exact = pmp_metric_resources(PMP_EXACT_MAX, 7042, checkpoints=5, factor_width=width)
    assert exact["mem_mb"] >= PMP_EXACT_PEAK_MB
    # X has at most n points: just above the threshold the declaration still covers the exact path
    assert pmp_metric_resources(PMP_EXACT_MAX + 1, 7042, checkpoints=5, factor_width=width)["mem_mb"] >= \
        exact["mem_mb"]
    # the old declaration (2n × 2n float64 matrices): ~50 GB at Adult's size
    assert pmp_metric_resources(32_561, 7042, checkpoints=5, factor_width=width,
                                exact_max=40_000)["mem_mb"] > 50_000


# The measured peaks at n = 10^4, 10^5 and 2·10^5 (bench/bench_scale.py, issue 37 with Snakemake's
# max_rss, issue 47 with the kernel's VmHWM) are in bench/measured_peaks.json, held to the
# declarations by tests/unit/test_measured_peaks.py.
@pytest.mark.parametrize("n", [100_000, 200_000])
def test_metric_pmp_is_declared_at_partners_max_until_the_pairs_say_how_many(n):
    config = _config(True)
    training = {"hidden_units": [64]}
    run = {"mechanism": "dpsgd", "batch_size": 256, "epochs": 2, "clip_norm": 1.0}
    assert declared("metric_pmp", config, n=n, d=100, classes=10, training=training, run=run)["mem_mb"] >= \
        declared("metric_pmp", config, n=n, d=100, classes=10, training=training, run=run, pmp_partners=32)["mem_mb"]
    # a run the recipes do not apply to reads train.json only (issue 47): a metric job's floor
    baseline = declared("metric_pmp", config, n=n, d=100, classes=10, training=training, run={"mechanism": "baseline"})
    assert baseline == declared("metric_mia", config, n=0)
