"""The audit twin of a CNN run (issue 33): the twin trains the released CNN with the
layerwise_clipping path, its per-step norm check (one tape per example) passes, a planted half
norm in that path stops it, and the claim-curve verdict on a correct run is not above_promise."""

import logging

import numpy as np
import pandas as pd
import pytest

from dpaudit.audit.twin import run_canary_twin
from dpaudit.metrics.canary.rows import canary_rows, claimed_curve, recorded_claims
from dpaudit.training.steps import MechanismPolicy

LOG = logging.getLogger("test_canary_twin_cnn")
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}
# q = 20/160, 2 epochs = 16 steps; δ = 1e-5 keeps the one-run bound's 2mδ small with m = 1,000
PARAMS = {"mechanism": "dpsgd", "model": "cnn", "image_shape": [6, 6, 1], "conv_filters": [4, 6],
          "group_norm_groups": 2, "hidden_units": [8], "epochs": 2, "batch_size": 20, "learning_rate": 0.05,
          "clip_norm": 1.0, "target_epsilon": 1.0, "delta": 1e-5, "seed": 3}


def _frame(seed=0, n=(160, 60, 40)):
    rng = np.random.default_rng(seed)
    total = sum(n)
    y = rng.integers(0, 3, size=total).astype(np.int64)
    x = (rng.normal(size=(total, 36)) + y[:, None] * np.linspace(-1, 1, 36)).astype(np.float32)
    return pd.DataFrame({"example_id": np.arange(total, dtype=np.int64), "split": np.repeat(list(SPLITS.values()), n),
                         "label": y, "x": list(x)})


def _twin(policy=None):
    return run_canary_twin(_frame(), SPLITS, PARAMS, gradient_canaries=1000, input_canaries=20,
                           gradient_norm_factor=10.0, seed=0, threads=1, log=LOG, policy=policy or MechanismPolicy())


def test_the_twin_of_a_correct_cnn_run_checks_its_norms_and_is_not_above_promise():
    scores, record = _twin()
    assert record["dp_implementation"] == "layerwise_clipping"
    assert record["norm_checks"] > 0 and record["observed_steps"] == record["steps"] == 16
    assert record["noise_check"]["passed"] is True and record["noise_check"]["weights"]["passed"]
    rows = canary_rows(scores, accountant_epsilon=record["epsilon"], delta=record["delta"], alpha=0.05,
                       one_run_claims=recorded_claims(record), claim_curve=claimed_curve(record))
    flag = rows.loc[rows["metric"] == "measured_above_promise", "verdict"]
    assert len(flag) == 1 and flag.iloc[0] != "above_promise"


def test_a_planted_half_norm_in_the_conv_path_stops_the_twin():
    with pytest.raises(RuntimeError, match="on the layerwise_clipping path but the gradient it summed has norm"):
        _twin(MechanismPolicy(norm_factor=0.5))
