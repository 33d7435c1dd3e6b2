"""The per-run ε* entry point the workflow calls (dpaudit.metrics.epsilon_star_run_metrics)."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from dpaudit.metrics.epsilon_star import epsilon_star_metrics, epsilon_star_run_metrics


def _outputs(seed=0, n=400):
    rng = np.random.default_rng(seed)
    split = np.repeat(["train", "holdout", "test"], n)
    label = rng.integers(0, 2, split.size)
    logit_loss = rng.normal(np.where(split == "train", -2.0, -1.0), 1.0)
    p_true = expit(-logit_loss)
    return pd.DataFrame({
        "example_id": np.arange(split.size), "split": split, "label": label,
        "loss_logit": logit_loss, "loss_ce": np.log1p(np.exp(logit_loss)), "p_true": p_true,
        "correct": p_true > 0.5,
    })


def test_run_metrics_equal_the_library_on_the_split_losses_plus_a_utility_row():
    outputs = _outputs()
    frame = epsilon_star_run_metrics(outputs, members_split="train", nonmembers_split="holdout",
                                     utility_split="test", classes=2, delta=1e-4, grid_size=10_000)
    members, nonmembers = outputs[outputs["split"] == "train"], outputs[outputs["split"] == "holdout"]
    # Oracle: the library called directly on the same arrays (the entry point only selects rows).
    direct = epsilon_star_metrics(
        {"logit": members["loss_logit"], "ce": members["loss_ce"]},
        {"logit": nonmembers["loss_logit"], "ce": nonmembers["loss_ce"]}, 1e-4, grid_size=10_000)
    np.testing.assert_allclose(frame["value"].to_numpy()[:-1], direct["value"].to_numpy(), rtol=0, atol=0)
    utility = frame.iloc[-1]
    assert utility["metric"] == "landscape_utility" and utility["utility_kind"] == "auroc"
    # AUROC by brute-force pair counting on the test split (ties count ½).
    test = outputs[outputs["split"] == "test"]
    p_pos = np.where(test["label"] == 1, test["p_true"], 1 - test["p_true"])
    pos, neg = p_pos[test["label"] == 1], p_pos[test["label"] == 0]
    auc = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (pos.size * neg.size)
    assert utility["value"] == pytest.approx(auc, abs=1e-12)
    assert pd.isna(utility["n_tr"]) and str(frame["n_tr"].dtype) == "Int64"
    two = pd.concat([frame, frame], ignore_index=True)
    assert two.dtypes.equals(frame.dtypes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_utility_auroc_is_sklearns(seed):
    # Oracle: sklearn's roc_auc_score (what utility() called before it used dpaudit.dp.roc). Ours
    # is the exact pair count divided once; sklearn's trapezoids may differ in the last bit.
    from sklearn.metrics import roc_auc_score

    from dpaudit.metrics.utility import utility

    outputs = _outputs(seed)
    outputs["p_true"] = np.round(outputs["p_true"], 2 if seed == 1 else 12)  # seed 1: many ties
    test = outputs[outputs["split"] == "test"]
    p_pos = np.where(test["label"] == 1, test["p_true"], 1 - test["p_true"])
    ours = utility(outputs, utility_split="test", classes=2)
    assert ours["utility_kind"] == "auroc" and ours["n_utility"] == len(test)
    assert ours["utility"] == pytest.approx(roc_auc_score(test["label"], p_pos), rel=0, abs=4e-16)


def test_non_finite_losses_are_refused_with_ids():
    outputs = _outputs()
    outputs.loc[5, "loss_logit"] = np.inf
    with pytest.raises(ValueError, match=r"example_id\(s\) \[5\]"):
        epsilon_star_run_metrics(outputs, members_split="train", nonmembers_split="holdout",
                                 utility_split="test", classes=2, delta=1e-4, grid_size=1000)
