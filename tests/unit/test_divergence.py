"""The "did not train" flag means the model did not learn (issues 26, 35), on rules and on real tiny training.

Oracle of the majority rule: scipy.stats.binomtest (one-sided exact binomial test, alternative
"greater"), a second implementation of the Clopper-Pearson bound the rule uses: a run is flagged
iff the test does not reject "accuracy <= majority rate" at level 0.05.
"""

import logging
import math

import numpy as np
import pytest
from scipy import stats

from dpaudit import _tf
from dpaudit.training.divergence import (
    LOSS_DIVERGENCE_RATIO,
    MAJORITY_TEST_LEVEL,
    constant_predictor_loss,
    divergence_reason,
    loss_divergence,
    majority_rate,
    per_example_losses,
    training_verdict,
)
from dpaudit.training.train import train_model
from tests.unit.test_training import SPLITS, _frame

LOG = logging.getLogger("test_divergence")


def test_loss_rules_and_constant_predictor():
    assert LOSS_DIVERGENCE_RATIO == 2.0
    assert loss_divergence([{"loss": 1.0}, {"loss": 2.0}], 0.1) == (False, None)  # exactly 2x: not flagged
    diverged, warning = loss_divergence([{"loss": 0.7}, {"loss": 0.3}, {"loss": 1.5}], 0.5, "run~a")
    assert diverged and "run 'run~a'" in warning and "learning_rate=0.5" in warning and "1.5" in warning
    assert "did not train" in warning
    assert loss_divergence([{"loss": 0.7}], 0.5) == (False, None)  # one epoch, nothing else known
    assert constant_predictor_loss(np.array([0, 1, 0, 1])) == pytest.approx(math.log(2))
    assert constant_predictor_loss(np.array([2, 2, 2]), 3) == 0.0
    assert constant_predictor_loss(np.array([0, 0, 0, 1])) == pytest.approx(
        -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    # 2x the first epoch but below the constant predictor's loss: still learning something
    assert divergence_reason([{"loss": 0.1}, {"loss": 0.3}], constant_loss=0.69) is None
    assert "final epoch 1.5" in divergence_reason([{"loss": 0.7}, {"loss": 1.5}], constant_loss=0.69)
    # a final training loss above the constant predictor's is no longer a flag on its own
    one = [{"epoch": 1, "loss": 19459.0, "examples_seen": 100}]
    assert divergence_reason(one, constant_loss=0.69, final_loss=19459.0) is None
    # non-finite epoch (with examples) or final losses are
    assert "non-finite" in divergence_reason([{"epoch": 1, "loss": math.inf, "examples_seen": 3}])
    assert divergence_reason([{"epoch": 1, "loss": math.nan, "examples_seen": 0}]) is None  # an empty epoch
    assert "non-finite" in divergence_reason([{"loss": 0.5}], constant_loss=0.69, final_loss=math.nan)


def test_majority_rule_agrees_with_scipy_binomtest():
    history = [{"epoch": 1, "loss": 0.5, "examples_seen": 10}]
    for n, p0 in ((60, 0.6), (200, 0.5), (1000, 0.677), (7, 0.5)):
        for k in range(n + 1):
            reason = divergence_reason(history, constant_loss=0.69, final_loss=0.5, correct=k, n_scored=n,
                                       majority=p0)
            rejected = stats.binomtest(k, n, p0, alternative="greater").pvalue <= MAJORITY_TEST_LEVEL
            # (a p-value within 1e-9 of the level is a tie the two implementations may break apart)
            if abs(stats.binomtest(k, n, p0, alternative="greater").pvalue - MAJORITY_TEST_LEVEL) > 1e-9:
                assert (reason is None) == rejected, (n, p0, k, reason)
    reason = divergence_reason(history, correct=30, n_scored=60, majority=0.6)
    assert reason.startswith("held-out accuracy 0.5 (30 of 60) is not better than the majority-class rate 0.6")
    assert majority_rate(np.array([0, 1, 1, 2])) == 0.5 and math.isnan(majority_rate(np.array([], np.int64)))


def test_per_example_losses_are_cross_entropies():
    z = np.array([[0.0, 0.0], [3.0, -1.0], [1e3, -1e3]])
    y = np.array([0, 1, 1])
    want = [math.log(2), 4.0 + math.log1p(math.exp(-4.0)), 2e3]  # closed form: logsumexp(z) - z_y
    np.testing.assert_allclose(per_example_losses(z, y), want, rtol=1e-12)


def test_verdict_without_utility_rows_scores_the_members():
    y = np.array([0] * 8 + [1] * 2)
    constant_logits = np.tile([2.0, 0.0], (10, 1))  # predicts class 0 everywhere: 0.8 = the majority rate
    verdict = training_verdict([{"epoch": 1, "loss": 0.5, "examples_seen": 10}], y, constant_logits,
                               np.zeros(0, np.int64), None, learning_rate=0.1, run="r")
    assert verdict["loss_diverged"] is True and verdict["majority_test"]["split"] == "members"
    assert "training (no utility rows) accuracy 0.8" in verdict["loss_divergence_reason"]
    assert verdict["warnings"] and "run 'r'" in verdict["warnings"][0]


def _noisy_scaled_frame():
    """Separable-by-a-line data with 10 % of the training labels flipped and features × 30: one
    large step makes the model confident, so the flipped rows get huge losses."""
    df = _frame(seed=1)
    rng = np.random.default_rng(3)
    df["x"] = [row * np.float32(30.0) for row in df["x"]]
    flip = (df["split"] == "train").to_numpy() & (rng.random(len(df)) < 0.1)
    df.loc[flip, "label"] = 1 - df.loc[flip, "label"]
    return df


def test_an_overconfident_model_that_learned_is_not_flagged_and_gets_the_note(tmp_path):
    params = {"mechanism": "baseline", "epochs": 1, "batch_size": 40, "learning_rate": 1.0, "hidden_units": [],
              "seed": 0, "sampling": "shuffle"}
    info = train_model(_noisy_scaled_frame(), SPLITS, params, tmp_path / "m.keras", threads=2, log=LOG)
    test = info["majority_test"]
    assert info["final_train_loss"] > info["constant_predictor_loss"]  # the old rule would have flagged it
    assert test["split"] == "utility" and test["accuracy"] > test["majority_rate"] + 0.2
    assert info["loss_diverged"] is False and info["loss_divergence_reason"] is None and info["warnings"] == []
    note = info["training_note"]
    assert note.startswith(f"mean training loss {info['final_train_loss']:.3g} is above the constant predictor's")
    assert f"max loss {info['max_train_loss']:.3g}" in note and f"accuracy {test['accuracy']:.3g}" in note
    assert info["max_train_loss"] > 10 * info["final_train_loss"]


def test_a_model_predicting_one_class_is_flagged(tmp_path):
    df = _frame()
    params = {"mechanism": "baseline", "epochs": 1, "batch_size": 20, "learning_rate": 30.0, "hidden_units": [8, 8],
              "seed": 0}
    info = train_model(df, SPLITS, params, tmp_path / "m.keras", threads=2, log=LOG, run="lr~30")
    model = _tf.keras.models.load_model(tmp_path / "m.keras")
    predicted = np.argmax(model.predict(np.stack(df["x"].to_numpy()), verbose=0), axis=1)
    assert np.unique(predicted).size == 1  # the learning rate killed every hidden unit: one class
    assert info["loss_diverged"] is True and info["training_note"] is None
    assert info["loss_divergence_reason"].startswith("held-out (utility split) accuracy")
    assert "not better than the majority-class rate" in info["loss_divergence_reason"]
    assert "run 'lr~30'" in info["warnings"][0] and "learning_rate=30" in info["warnings"][0]


def test_an_exploding_loss_is_flagged_on_real_training(tmp_path):
    params = {"mechanism": "baseline", "epochs": 2, "batch_size": 20, "learning_rate": 10.0, "hidden_units": [8],
              "seed": 0}
    info = train_model(_frame(), SPLITS, params, tmp_path / "m.keras", threads=2, log=LOG)
    first, last = (record["loss"] for record in info["history"])
    assert last > LOSS_DIVERGENCE_RATIO * first
    assert info["loss_diverged"] is True and info["loss_divergence_reason"].startswith("training loss diverged")


def test_a_sane_dpsgd_run_is_neither_flagged_nor_noted(tmp_path):
    params = {"mechanism": "dpsgd", "epochs": 1, "batch_size": 20, "learning_rate": 1.0, "hidden_units": [8],
              "clip_norm": 1.0, "target_epsilon": 50.0, "delta": 1e-3, "seed": 0}
    sane = train_model(_frame(), SPLITS, params, tmp_path / "s.keras", threads=2, log=LOG)
    assert sane["loss_diverged"] is False and sane["loss_divergence_reason"] is None
    assert sane["training_note"] is None and sane["final_train_loss"] < sane["constant_predictor_loss"]


def test_the_note_says_whether_a_tail_or_most_rows_lift_the_mean():
    y = np.array([0, 1] * 50)
    history = [{"epoch": 1, "loss": 0.5, "examples_seen": 100}]
    tail = np.where(np.arange(100)[:, None] < 95, 4.0, -40.0) * np.where(y[:, None] == np.array([[0, 1]]), 1, -1)
    verdict = training_verdict(history, y, tail, y, tail, learning_rate=0.1)
    # 95 rows right with margin 8 (loss ~3e-4), 5 rows wrong with margin 80: mean ~4 > ln 2, median tiny
    assert verdict["loss_diverged"] is False and "because of confident errors (max loss 80" in verdict["training_note"]
    # three classes: 40 % right and sure, 60 % wrong with p(true) = 0.1 (loss ln 10 > ln 3, the constant's)
    y3 = np.tile([0, 1, 2], 1000)
    logits = np.log(np.full((3000, 3), 0.4))
    logits[np.arange(3000), y3] = np.log(0.1)
    logits[np.arange(3000), (y3 + 1) % 3] = np.log(0.5)
    right = np.arange(3000) < 1200
    logits[right] = 0.0
    logits[right, y3[right]] = 30.0
    verdict = training_verdict(history, y3, logits, y3, logits, learning_rate=0.1)
    assert verdict["loss_diverged"] is False and verdict["majority_test"]["accuracy"] == 0.4
    assert "with most rows above it too (max loss 2.3, median 2.3)" in verdict["training_note"]
