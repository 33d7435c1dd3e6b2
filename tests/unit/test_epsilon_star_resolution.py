"""ε* as what it is (issue 46): the at_resolution and outside_bootstrap_interval flags and the
bias-corrected form, as rows of the metrics file, on tiny samples.

Oracles: a brute-force enumeration of every threshold of the pooled losses, written here
independently of the library (the four ratios of Negoescu et al. 2023 eq. 7 with their
denominators as whole counts), for the value and the count behind the winning ratio; the
estimator run on each replicate's explicitly resampled arrays (``resample_indices``) for the
bootstrap interval, its mean, the bias-corrected form and the basic interval.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.contract.metrics import metric_rows
from dpaudit.metrics.epsilon_star import (
    empirical_epsilon_star,
    epsilon_star_metrics,
    resample_indices,
)

DELTA = 1e-3
FILTER = 1e-3


def brute_force(tr: np.ndarray, pop: np.ndarray, delta: float = DELTA, a: float = FILTER):
    """(ε*, count in the winning ratio's denominator, its set's size, numerator count) by every threshold."""
    n_tr, n_pop = tr.size, pop.size
    best = (1.0, None, None, None)
    for tau in np.unique(np.concatenate([tr, pop])):
        c_tr, c_pop = int((tr <= tau).sum()), int((pop <= tau).sum())  # members / non-members flagged
        # every rate a count fraction (1 − x would round 1 − 1/1000 past the filter at 1000 rows)
        fpr, tpr, fnr, tnr = c_pop / n_pop, c_tr / n_tr, (n_tr - c_tr) / n_tr, (n_pop - c_pop) / n_pop
        if not (fpr > a and tnr > a and fnr > a and tpr > a):  # FPR and FNR in (a, 1 − a)
            continue
        # (ratio, denominator count, its set's size, numerator count)
        for ratio, den, n, num in (((tpr - delta) / fpr, c_pop, n_pop, c_tr), ((tnr - delta) / fnr, n_tr - c_tr, n_tr,
                                                                                n_pop - c_pop),
                                   ((fnr - delta) / tnr, n_pop - c_pop, n_pop, n_tr - c_tr),
                                   ((fpr - delta) / tpr, c_tr, n_tr, c_pop)):
            if ratio > best[0]:
                best = (ratio, den, n, num)
    return math.log(best[0]), best[1], best[2], best[3]


def _flag(frame, metric, estimator="empirical"):
    rows = frame[(frame["metric"] == metric) & (frame["estimator"] == estimator)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_the_resolution_binds_on_a_tiny_sample_and_is_flagged():
    # 12 members, 6 non-members: one member low among the non-members, the rest far above them; the
    # winner is m4 = (FPR − δ)/TPR = (5/6 − δ)/(1/12) (the filter drops FPR = 1), resting on that one member
    tr = np.array([0.25, 5.0, 5.1, 5.2, 5.3, 5.4, 5.5, 5.6, 5.7, 5.8, 5.9, 6.0])
    pop = np.array([0.0, 0.1, 0.2, 3.0, 3.1, 3.2])
    value, count, n, numerator = brute_force(tr, pop)
    assert (count, n, numerator) == (1, 12, 5)
    assert value == pytest.approx(math.log((5 / 6 - DELTA) * 12), abs=1e-12)  # a lattice value: ln(10 − 12δ)
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",),
                                 bootstrap={"resamples": 30, "seed": 0})
    written = metric_rows("epsilon_star", frame, dataset="d", run="r")  # declared flags, in value_bool
    star = _flag(written, "epsilon_star")
    assert star["value"] == pytest.approx(value, abs=1e-12) and star["argmax_count"] == 1
    at = _flag(written, "at_resolution")
    assert at["value_bool"] is np.True_ and math.isnan(at["value"])
    assert at["resolution"] == pytest.approx(1 / 12) and at["term"] == "m4" and at["n_tr"] == 12


def test_a_ratio_resting_on_several_records_is_not_at_the_resolution():
    # (most samples of a few hundred rows do sit at their resolution: this one, found by the oracle, does not)
    rng = np.random.default_rng(1)
    tr, pop = rng.normal(-0.2, 1.0, 200), rng.normal(0.0, 1.0, 100)
    value, count, n, _ = brute_force(tr, pop)
    assert (count, n) == (4, 200)  # the oracle's winning ratio rests on four members
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",))
    assert _flag(frame, "epsilon_star")["value"] == pytest.approx(value, abs=1e-12)
    assert _flag(frame, "at_resolution")["value_bool"] is np.False_
    # without a bootstrap there is neither an interval flag nor a bias-corrected row
    assert not frame["metric"].isin(["outside_bootstrap_interval", "epsilon_star_bias_corrected"]).any()


def test_from_1000_rows_the_filter_sets_the_resolution_at_two_records():
    """The empirical filter keeps rates above 0.001: of 1000 members the fewest a ratio may rest on
    is 2 (1/1000 is not above 0.001), so a ratio on 2 members is at the resolution, 2/1000."""
    rng = np.random.default_rng(0)
    tr, pop = rng.normal(-0.3, 1.0, 1000), rng.normal(0.0, 1.0, 500)
    value, count, n, _ = brute_force(tr, pop)
    assert (count, n) == (2, 1000)
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",))
    assert _flag(frame, "epsilon_star")["value"] == pytest.approx(value, abs=1e-12)
    at = _flag(frame, "at_resolution")
    assert at["value_bool"] is np.True_ and at["resolution"] == pytest.approx(2 / 1000)
    rng = np.random.default_rng(1)
    tr, pop = rng.normal(-0.3, 1.0, 1000), rng.normal(0.0, 1.0, 500)
    assert brute_force(tr, pop)[1:3] == (6, 1000)
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",))
    assert _flag(frame, "at_resolution")["value_bool"] is np.False_


def test_the_parametric_flag_says_the_fit_extrapolates_below_one_record():
    rng = np.random.default_rng(1)
    tr, pop = rng.normal(-0.3, 1.0, 60), rng.normal(0.0, 1.2, 30)
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("parametric",), grid_size=20_000)
    star, at = _flag(frame, "epsilon_star", "parametric"), _flag(frame, "at_resolution", "parametric")
    # the supremum sits at the δ filter: an expected count δ·n far below one record
    assert star["argmax_count"] < 1 and at["value_bool"] is np.True_
    assert at["resolution"] == pytest.approx(1 / (60 if star["term"] in ("m2", "m4") else 30))


def test_a_point_below_its_bootstrap_replicates_is_flagged_with_the_bias_corrected_form():
    """Identical member and non-member losses (true ε* = 0): the maximum over thresholds of the
    replicates' noisier ratios sits above the sample's own maximum."""
    rng = np.random.default_rng(12)
    tr, pop = rng.normal(0.0, 1.0, 200), rng.normal(0.0, 1.0, 100)
    resamples = 40
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",),
                                 bootstrap={"resamples": resamples, "seed": 3, "level": 0.9})
    # oracle: every replicate recomputed on its explicitly resampled arrays
    point = empirical_epsilon_star(tr, pop, DELTA).eps_star
    replicates = np.array([empirical_epsilon_star(tr[i], pop[j], DELTA).eps_star
                           for i, j in (resample_indices(3, k, tr.size, pop.size) for k in range(resamples))])
    low, high = np.quantile(replicates, [0.05, 0.95])
    assert point < low  # the case of issue 46 (digits, ε = 1: 0.684 below [0.884, 2.47])
    star = _flag(frame, "epsilon_star")
    assert star["value"] == pytest.approx(point) and star["boot_low"] == pytest.approx(low)
    assert star["boot_mean"] == pytest.approx(replicates.mean())
    out = _flag(frame, "outside_bootstrap_interval")
    assert out["value_bool"] is np.True_ and out["boot_mean"] == pytest.approx(replicates.mean())
    corrected = _flag(frame, "epsilon_star_bias_corrected")
    assert corrected["value"] == pytest.approx(max(0.0, 2 * point - replicates.mean()))
    assert corrected["ci_lower"] == pytest.approx(max(0.0, 2 * point - high))
    assert corrected["ci_upper"] == pytest.approx(max(0.0, 2 * point - low))
    assert corrected["ci_upper"] < point  # the basic interval moves down by the replicates' excess
    metric_rows("epsilon_star", frame, dataset="d", run="r")  # every row declared, flags in value_bool


def test_a_point_inside_its_interval_is_not_flagged():
    rng = np.random.default_rng(0)
    tr, pop = rng.normal(-1.5, 1.0, 300), rng.normal(0.0, 1.0, 150)
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",),
                                 bootstrap={"resamples": 40, "seed": 0})
    star = _flag(frame, "epsilon_star")
    assert star["boot_low"] <= star["value"] <= star["boot_high"]
    assert _flag(frame, "outside_bootstrap_interval")["value_bool"] is np.False_
