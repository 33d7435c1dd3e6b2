"""The empirical ε*'s label-permutation null (dpaudit.metrics.epsilon_star.permutation).

Oracles: each relabelling's value equals ``empirical_epsilon_star`` run on the arrays that
relabelling makes (brute force, exact); the observed value equals the estimator's; the p-value is
(1 + #{null ≥ observed}) / (1 + B) (Phipson & Smyth 2010). Validity: with identical member and
non-member laws the flag is lowered (the value above the 0.95 quantile) in no more runs than a
level-0.05 test allows (binomial tail, 1e-3). Power: a member shift of one standard deviation is
above the null in every run.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpaudit.metrics.epsilon_star import empirical_epsilon_star
from dpaudit.metrics.epsilon_star.permutation import _relabelled, permutation_null
from dpaudit.metrics.epsilon_star.run import epsilon_star_metrics

DELTA = 1e-4


def _losses(seed, shift=0.0, n_tr=300, n_pop=150, ties=False):
    rng = np.random.default_rng(seed)
    tr, pop = rng.normal(size=n_tr) - shift, rng.normal(size=n_pop)
    if ties:  # losses of few distinct values: ties across the two sets
        tr, pop = np.round(tr, 1), np.round(pop, 1)
    return tr, pop


@pytest.mark.parametrize("ties", [False, True])
def test_each_relabelling_equals_the_estimator_on_its_arrays(ties):
    tr, pop = _losses(0, shift=0.4, ties=ties)
    null = permutation_null(tr, pop, DELTA, permutations=12, seed=3)
    assert null.observed == empirical_epsilon_star(tr, pop, DELTA).eps_star
    pooled = np.concatenate([tr, pop])
    ordered = pooled[np.argsort(pooled, kind="stable")]
    for k in range(12):
        member = _relabelled(3, k, tr.size, pooled.size)
        expected = empirical_epsilon_star(ordered[member], ordered[~member], DELTA).eps_star
        assert null.replicates[k] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    defined = null.replicates[np.isfinite(null.replicates)]
    assert null.p_value == (1 + np.count_nonzero(defined >= null.observed)) / (1 + defined.size)
    assert null.quantile == np.quantile(defined, 0.95, method="higher")


def test_validity_identical_laws_are_rarely_above_the_null():
    runs = 60
    above = sum(not permutation_null(*_losses(seed), DELTA, permutations=100, seed=seed).within
                for seed in range(runs))
    # a level-0.05 test: above in ≤ 5 % of runs on average; fail only past the binomial 1e-3 tail
    assert above <= stats.binom.ppf(1 - 1e-3, runs, 0.05)


def test_power_a_shifted_member_law_is_above_the_null():
    for seed in range(5):
        null = permutation_null(*_losses(seed, shift=1.0), DELTA, permutations=100, seed=seed)
        assert not null.within and null.p_value < 0.05


def test_the_row_in_the_long_format_table():
    tr, pop = _losses(1)
    frame = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical", "parametric"),
                                 grid_size=1000, null={"permutations": 50, "level": 0.9, "seed": 2})
    rows = frame[frame["metric"] == "within_permutation_null"]
    assert len(rows) == 1 and rows["estimator"].iloc[0] == "empirical"  # the parametric fit has none
    row = rows.iloc[0]
    null = permutation_null(tr, pop, DELTA, permutations=50, level=0.9, seed=2)
    assert bool(row["value_bool"]) == null.within and row["null_quantile"] == null.quantile
    assert row["null_p_value"] == null.p_value and row["null_permutations"] == 50 and row["null_level"] == 0.9
    assert str(frame["value_bool"].dtype) == "boolean"
    none = epsilon_star_metrics({"logit": tr}, {"logit": pop}, DELTA, estimators=("empirical",))
    assert "within_permutation_null" not in set(none["metric"])


@pytest.mark.parametrize(("kwargs", "message"), [({"permutations": 0}, "permutations"), ({"level": 1.0}, "level")])
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        permutation_null(*_losses(0), DELTA, **kwargs)
