"""PMP Recipe C from the recipe's reference pool (dpaudit.metrics.pmp.pool) against direct evaluation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.special import log_softmax

from dpaudit.dp.hypothesis import clopper_pearson_lower, clopper_pearson_upper
from dpaudit.metrics.pmp import dpsgd
from dpaudit.metrics.pmp.pool import (
    POOL_COLUMNS,
    pool_checks,
    pool_game,
    pool_recipe_c,
    reference_training,
)
from dpaudit.reference.pool import pool_frame
from tests.workflow.helpers import ROOT


def _pool(n_models=40, seed=0):
    """A hand-built pool: P = ids 100..111 (file order shuffled), X = 8 of P and 2 ids outside P,
    inclusion matrix and 3-class logits drawn at random; example 101 is perfectly separated
    (its true class dominates exactly when it is included), example 102 carries no signal."""
    rng = np.random.default_rng(seed)
    population = rng.permutation(np.arange(100, 112))
    labels = rng.integers(0, 3, population.size)
    inclusion = rng.random((n_models, population.size)) < 0.5
    logits = rng.normal(size=(n_models, population.size, 3))
    logits[:, :, :] += 0.8 * np.eye(3)[labels][None] * inclusion[:, :, None]
    at = np.flatnonzero(population == 101)[0]
    logits[:, at, :] = np.where(inclusion[:, at, None], 6.0, -6.0) * np.eye(3)[labels[at]] + rng.normal(
        scale=0.01, size=(n_models, 3))
    frame = pool_frame(logits, inclusion, population, labels)
    parent = np.array([105, 101, 999, 102, 110, 100, 998, 107, 111, 103])  # X: 8 in P, 2 outside
    loss = -np.take_along_axis(log_softmax(logits.astype(np.float64), axis=2), labels[None, :, None], 2)[..., 0]
    return frame.sample(frac=1.0, random_state=1), parent, population, inclusion, loss


def test_pool_game_matches_direct_evaluation_on_minus_loss():
    # Oracle: Recipe C evaluated directly on the hand-built matrices (score −loss of the model's
    # own logits, IN = inclusion bit), columns of X ∩ P in X's order. φ is a strictly increasing
    # function of −loss per example, so every count and bound is the same.
    frame, parent, population, inclusion, loss = _pool()
    game = pool_game(frame, parent)
    covered = np.isin(parent, population)
    assert game["covered"].tolist() == covered.tolist() and game["n_models"] == 40
    column = [np.flatnonzero(population == x)[0] for x in parent[covered]]
    np.testing.assert_array_equal(game["in_mask"], inclusion[:, column])
    direct = dpsgd.empirical_pmp(-loss[:, column], inclusion[:, column], delta=1e-4, alpha=0.05, seed=3)
    res = pool_recipe_c(frame, parent, delta=1e-4, alpha=0.05, seed=3)
    assert res["n_bounded"] == 8 and res["alpha_per_bound"] == 0.05 / (2 * 8)
    for key in ("emp_eps_lower_x", "emp_eps_certifiable_x", "emp_eps_point_x"):
        np.testing.assert_array_equal(res[f"{key}_bounded"], direct[key])
        np.testing.assert_array_equal(res[key][covered], direct[key])
        assert np.isnan(res[key][~covered]).all()
    assert res["emp_eps_lower"] == direct["emp_eps_lower"] > 0


def test_pool_recipe_c_perfect_example_against_hand_clopper_pearson():
    # Example 101: every evaluation IN model above every OUT model. Oracle: the evaluation half
    # (numpy's permutation with Recipe C's seed), its IN/OUT counts from the inclusion matrix,
    # and the one-sided Clopper–Pearson bounds at α/(2·|X ∩ P|).
    frame, parent, population, inclusion, _ = _pool()
    res = pool_recipe_c(frame, parent, delta=0.0, alpha=0.05, seed=3)
    evaluate = np.random.default_rng(3).permutation(40)[20:]
    bits = inclusion[evaluate, np.flatnonzero(population == 101)[0]]
    n_in, n_out, level = int(bits.sum()), int((~bits).sum()), 0.05 / 16
    expected = max(math.log(clopper_pearson_lower(n_in, n_in, level) / clopper_pearson_upper(0, n_out, level)),
                   math.log(clopper_pearson_lower(n_out, n_out, level) / clopper_pearson_upper(0, n_in, level)))
    at = np.flatnonzero(parent == 101)[0]
    assert res["emp_eps_lower_x"][at] == pytest.approx(expected, rel=1e-12)
    assert res["emp_eps_certifiable_x"][at] == pytest.approx(expected, rel=1e-12)


def test_pool_game_refuses_a_table_that_is_not_one_row_per_model_and_example():
    frame, parent, *_ = _pool(n_models=6)
    with pytest.raises(ValueError, match="more than one row"):
        pool_game(pd.concat([frame, frame.iloc[:1]]), parent)
    with pytest.raises(ValueError, match="misses some"):
        pool_game(frame.iloc[1:], parent)
    with pytest.raises(ValueError, match="numbered 0..K-1"):
        pool_game(frame.assign(model=frame["model"] + 1), parent)
    with pytest.raises(ValueError, match="lacks column"):
        pool_game(frame.drop(columns="phi"), parent)
    with pytest.raises(ValueError, match="no example of the parent set"):
        pool_recipe_c(frame, np.array([998, 999]), delta=0.0, alpha=0.05, seed=0)
    assert set(POOL_COLUMNS) <= set(frame.columns)


def test_pool_checks_name_what_is_not_dp_matched():
    train = {"noise_multiplier": 1.1, "sampling_probability": 0.1, "steps": 50}
    assert pool_checks(dict(train), train) == []
    problems = pool_checks({**train, "noise_multiplier": 1.3, "steps": 49}, train)
    assert len(problems) == 2 and problems[0].startswith("noise_multiplier") and "steps" in problems[1]
    # a record with the target's and the models' own accounting: only the target's is compared
    record = {"noise_multiplier": 1.1, "target_sampling_probability": 0.1, "target_steps": 50,
              "target_epsilon": 2.0, "reference_sampling_probability": [0.13, 0.14],
              "reference_steps": [36, 35], "reference_epsilon": [2.3, 2.4], "reference_epsilon_max": 2.4}
    assert pool_checks(record, train) == []
    assert pool_checks({**record, "target_steps": 36}, train) == ["steps: pool 36 vs run 50"]
    own = reference_training(record)
    assert own["reference_epsilon"] == 2.4
    assert "q_k = B/n_k in [0.13, 0.14], steps 35-36" in own["note"] and "up to 2.4 (the run's 2)" in own["note"]
    old = reference_training(train)  # a record before the models kept their own rates
    assert math.isnan(old["reference_epsilon"]) and old["note"] == ""


def _brute_k(n_bounded, alpha, delta, above=0.0):
    """Smallest K by brute force over every evaluation outcome (the unit test's oracle for
    certifiable_epsilon), evaluation half K − ⌊K/2⌋ split as evenly as possible."""
    from tests.unit.test_pmp import _brute_force_certifiable

    k = 4
    while True:
        evaluate = k - k // 2
        if _brute_force_certifiable(evaluate // 2, evaluate - evaluate // 2, alpha / (2 * n_bounded), delta) > above:
            return k
        k += 1


@pytest.mark.parametrize(("n_bounded", "expected"), [(750, 59), (1000, 61), (1500, 63), (2000, 65)])
def test_reference_models_to_certify(n_bounded, expected):
    k = dpsgd.reference_models_to_certify(n_bounded, 0.05, 1e-4)
    assert k == expected == _brute_k(n_bounded, 0.05, 1e-4)
    level = 0.05 / (2 * n_bounded)
    for models, positive in ((k - 1, False), (k, True)):
        evaluate = models - models // 2
        got = float(dpsgd.certifiable_epsilon(evaluate // 2, evaluate - evaluate // 2, level, 1e-4))
        assert (got > 0) is positive
    assert dpsgd.reference_models_to_certify(1500, 0.05, 1e-4, above=1.0) == 141


def _recipe_c_size(path):
    """(m = examples of X in the pool's population P, δ) of a paper config's synthetic dataset."""
    from dpaudit.config import validate_config
    from dpaudit.contract.delta import resolve_delta
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.reference.parent_set import build_parent_set
    from dpaudit.reference.pool import audit_population

    config = validate_config(yaml.safe_load(path.read_text()))
    table, info = prepare_dataset("synthetic", {}, config["datasets"]["synthetic"])
    examples = table.to_pandas()
    pmp = config["metrics"]["pmp"]
    parent = build_parent_set(examples, info["splits"], seed=pmp["parent_seed"], pool=pmp["nonmember_pool"])
    population = audit_population(examples, info["splits"])
    delta = resolve_delta(config["training"]["delta"], int(population["is_member"].sum()))[0]
    return config, int(np.isin(parent["ids"], population["example_id"].to_numpy()).sum()), delta


def test_paper_pmp_configs_have_the_reference_models_recipe_c_needs():
    # pmp.yaml: exactly the smallest K whose Recipe C can certify anything over its m examples
    # (the derivation in the config's comment and config/README.md); pmp_lite.yaml: at least that.
    config, m, delta = _recipe_c_size(ROOT / "config" / "paper" / "pmp.yaml")
    assert config["metrics"]["pmp"]["recipe_c"] and m == 1500
    needed = dpsgd.reference_models_to_certify(m, config["metrics"]["pmp"]["alpha"], delta)
    assert config["metrics"]["attacks"]["reference_models"] == needed == 63
    lite, m_lite, delta_lite = _recipe_c_size(ROOT / "config" / "paper" / "pmp_lite.yaml")
    assert lite["metrics"]["pmp"]["recipe_c"] and m_lite == 150
    assert lite["metrics"]["attacks"]["reference_models"] >= dpsgd.reference_models_to_certify(
        m_lite, lite["metrics"]["pmp"]["alpha"], delta_lite) == 51


def test_metric_pmp_memory_counts_the_recipe_pool():
    from dpaudit.resources import pmp_metric_resources

    without = pmp_metric_resources(20000, 1000, checkpoints=5)["mem_mb"]
    assert pmp_metric_resources(20000, 1000, checkpoints=5, reference_models=1024)["mem_mb"] > without + 2000
