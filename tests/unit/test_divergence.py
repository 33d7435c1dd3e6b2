"""The "did not train" flag means the loss broke (issues 26, 35, 46); "no skill shown" says what the
majority rule measured; the notes of an overconfident or unstable model. On rules and on real tiny training.

Oracle of the majority rule: scipy.stats.binomtest (one-sided exact binomial test, alternative
"greater"), a second implementation of the Clopper-Pearson bound the rule uses: a run shows no
skill iff the test does not reject "accuracy <= majority rate" at level 0.05.
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
    instability_note,
    loss_divergence,
    majority_rate,
    no_skill_reason,
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
    for n, p0 in ((60, 0.6), (200, 0.5), (1000, 0.677), (7, 0.5)):
        for k in range(n + 1):
            reason = no_skill_reason(k, n, p0)
            rejected = stats.binomtest(k, n, p0, alternative="greater").pvalue <= MAJORITY_TEST_LEVEL
            # (a p-value within 1e-9 of the level is a tie the two implementations may break apart)
            if abs(stats.binomtest(k, n, p0, alternative="greater").pvalue - MAJORITY_TEST_LEVEL) > 1e-9:
                assert (reason is None) == rejected, (n, p0, k, reason)
    assert no_skill_reason(30, 60, 0.6) == "no skill shown above the majority rate (accuracy 0.5 vs majority 0.6, 60 held-out rows)"
    assert majority_rate(np.array([0, 1, 1, 2])) == 0.5 and math.isnan(majority_rate(np.array([], np.int64)))
    # the majority rule is not a loss rule: divergence_reason knows only the losses
    assert divergence_reason([{"epoch": 1, "loss": 0.5, "examples_seen": 10}], constant_loss=0.69,
                             final_loss=0.5) is None


def test_no_skill_says_what_was_measured_not_that_the_model_is_broken():
    """Issue 46's case: 0.61 accuracy against a 0.58 majority rate on 236 held-out rows (a logistic
    regression on the same features scored 0.617): not significantly above the majority rate,
    said in those words, without "did not train"."""
    y = np.array([0] * 137 + [1] * 99)  # majority rate 137/236 = 0.5805
    correct = 144  # 144/236 = 0.6102
    logits = np.zeros((236, 2))
    logits[np.arange(236), y] = 1.0
    wrong = np.arange(236) >= correct
    logits[wrong] = logits[wrong][:, ::-1]
    history = [{"epoch": 1, "loss": 0.69, "examples_seen": 236}, {"epoch": 2, "loss": 0.66, "examples_seen": 236}]
    verdict = training_verdict(history, y, logits, y, logits, learning_rate=0.1, run="r")
    # oracle: scipy's exact one-sided test does not reject accuracy <= 0.5805 at 0.05
    assert stats.binomtest(correct, 236, 137 / 236, alternative="greater").pvalue > 0.05
    assert verdict["no_skill"] is True and verdict["loss_diverged"] is False
    assert verdict["no_skill_reason"] == ("no skill shown above the majority rate (accuracy 0.61 vs majority 0.581, "
                                          "236 held-out rows)")
    assert verdict["loss_divergence_reason"] is None
    assert len(verdict["warnings"]) == 1 and "did not train" not in verdict["warnings"][0]
    assert "run 'r': no skill shown" in verdict["warnings"][0] and "binomial" in verdict["warnings"][0]


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
    assert verdict["loss_diverged"] is False and verdict["majority_test"]["split"] == "members"
    assert verdict["no_skill"] is True
    assert verdict["no_skill_reason"] == ("no skill shown above the majority rate (accuracy 0.8 vs majority 0.8, "
                                          "10 training rows)")
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
    assert info["loss_diverged"] is False and info["training_note"] is None
    assert info["no_skill"] is True and info["loss_divergence_reason"] is None
    test = info["majority_test"]
    assert info["no_skill_reason"] == (f"no skill shown above the majority rate (accuracy {test['accuracy']:.3g} vs "
                                       f"majority {test['majority_rate']:.3g}, {test['n']} held-out rows)")
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
    assert sane["no_skill"] is False and sane["no_skill_reason"] is None and sane["instability_note"] is None


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


def _epochs(losses, accuracies=None):
    return [{"epoch": i + 1, "loss": loss, "examples_seen": 100,
             **({} if accuracies is None else {"utility_accuracy": accuracies[i]})} for i, loss in enumerate(losses)]


def test_the_instability_note_names_the_spike_and_the_fall():
    """Issue 46's baseline CNN: loss 0.45, 0.12, 2.06, 38.2, 0.48, held-out accuracy 0.95 to 0.81."""
    history = _epochs([0.45, 0.12, 2.06, 38.2, 0.48], [0.9, 0.95, 0.7, 0.6, 0.81])
    note = instability_note(history, math.log(10), n_utility=400)
    assert note.startswith("training was unstable: the mean training loss spiked to 38.2 at epoch 4 "
                           "(from 0.12 at epoch 2; last epoch 0.48)")
    assert "held-out accuracy fell from 0.95 at epoch 2 to 0.81 at the last epoch (400 rows)" in note
    assert "the released model is the last epoch's" in note
    # no divergence flag: the last epoch is back below 2 x the first
    assert divergence_reason(history, constant_loss=math.log(10), final_loss=0.48) is None
    # each half alone
    assert "spiked" in instability_note(_epochs([0.45, 0.12, 2.06, 0.3]), math.log(2))
    fell = instability_note(_epochs([0.5, 0.3, 0.3], [0.9, 0.95, 0.85]), math.log(2), n_utility=100)
    assert "spiked" not in fell and "fell from 0.95 at epoch 2 to 0.85" in fell


def test_ordinary_training_carries_no_instability_note():
    # steady decrease; a rise by 3x that stays below the constant predictor's loss (noise near 0)
    assert instability_note(_epochs([0.7, 0.4, 0.2, 0.1], [0.7, 0.8, 0.85, 0.86]), math.log(2), 100) is None
    assert instability_note(_epochs([0.7, 0.01, 0.04]), math.log(2)) is None
    # a fall under ACCURACY_DROP (0.04), or of fewer than 3 rows (0.1 of 20 rows is 2 rows)
    assert instability_note(_epochs([0.7, 0.4, 0.3], [0.8, 0.9, 0.86]), math.log(2), 1000) is None
    assert instability_note(_epochs([0.7, 0.4, 0.3], [0.8, 0.9, 0.8]), math.log(2), 20) is None
    assert "fell" in instability_note(_epochs([0.7, 0.4, 0.3], [0.8, 0.9, 0.75]), math.log(2), 20)


def test_the_verdict_records_the_instability_note_beside_the_overconfidence_note():
    y = np.array([0, 1] * 50)
    logits = np.where(y[:, None] == np.array([[0, 1]]), 3.0, -3.0)  # every row right, confidently
    history = _epochs([0.6, 0.1, 1.9, 0.2], [0.9, 0.99, 0.7, 0.93])
    verdict = training_verdict(history, y, logits, y, logits, learning_rate=0.5)
    assert verdict["loss_diverged"] is False and verdict["no_skill"] is False and verdict["training_note"] is None
    assert "spiked to 1.9 at epoch 3" in verdict["instability_note"]
    assert "fell from 0.99 at epoch 2 to 0.93" in verdict["instability_note"]
    # a run that did not train carries the red flag, not the note
    broken = training_verdict(_epochs([0.6, 0.1, 9.0]), y, logits, y, logits, learning_rate=0.5)
    assert broken["loss_diverged"] is True and broken["instability_note"] is None
