"""The faster detectable noise factor (dpaudit.dp.canary_power) against its previous implementation.

The oracles below are the implementation the module had before it was made faster (commit 903e698
of dpaudit/dp/canary_power.py: ``_BracketedCurve``, ``_sorted_errors``, ``_rejections``,
``_TabulatedAudits``, ``_tabulated_factor`` and the ``candidate_thresholds`` they called), copied
verbatim up to names; the pieces that did not change (``_ScoreTable``, the bisection ``_search``,
``_factor_record`` and the argument checks) are the module's own. Tolerance: none, the records,
decisions and error counts must be equal (``==``), only the wall-clock ``seconds`` is left out.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.dp import canary_power as cp
from dpaudit.dp.hypothesis import clopper_pearson_upper
from dpaudit.dp.mechanisms import gaussian_delta
from dpaudit.dp.tradeoff import ClaimedCurve, pure_tradeoff

# ------------------------------------------------------------------ oracles (previous implementation)


class _OldBracketedCurve:
    def __init__(self, curve, points: int = 4000):
        self.curve = curve
        self.grid = np.concatenate([[0.0], np.geomspace(1e-12, 1.0, points)])
        self.values = np.asarray(curve.fnr(self.grid), dtype=np.float64)

    def below(self, fpr, fnr):
        i = np.clip(np.searchsorted(self.grid, fpr, side="right") - 1, 0, self.grid.size - 2)
        upper, lower = self.values[i], self.values[i + 1]
        out = fnr < lower
        unsure = ~out & (fnr < upper)
        if unsure.any():
            out[unsure] = fnr[unsure] < np.asarray(self.curve.fnr(fpr[unsure]))
        return out


def _old_candidate_thresholds(scores, per_tail, *, presorted=False):
    if per_tail is None:
        return np.unique(scores)
    per_tail = int(per_tail)
    ordered = np.asarray(scores) if presorted else np.sort(scores)
    m = ordered.size
    ranks = np.unique(np.round(np.geomspace(1, max(m / 2, 1), per_tail)).astype(np.int64))
    ranks = ranks[(ranks >= 1) & (ranks <= m)]
    return np.unique(np.concatenate([ordered[m - ranks], ordered[np.minimum(ranks, m - 1)]]))


def _old_sorted_errors(positives, negatives, alpha, per_tail):
    n_pos, n_neg = positives.size, negatives.size
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"the claim-curve test needs included and excluded trials, got {n_pos} and {n_neg}")
    pooled = np.sort(np.concatenate([positives, negatives]), kind="stable")
    thresholds = _old_candidate_thresholds(pooled, per_tail, presorted=True)
    fn = np.searchsorted(positives, thresholds, side="left")
    fp = n_neg - np.searchsorted(negatives, thresholds, side="left")
    return fp, n_neg, fn, n_pos, alpha / (2 * thresholds.size)


def _old_rejections(bracket, errors):
    sizes = np.array([len(e[0]) for e in errors])
    levels = np.repeat([e[4] for e in errors], sizes)
    fpr_ub = np.atleast_1d(clopper_pearson_upper(np.concatenate([e[0] for e in errors]),
                                                 np.repeat([e[1] for e in errors], sizes), levels))
    fnr_ub = np.atleast_1d(clopper_pearson_upper(np.concatenate([e[2] for e in errors]),
                                                 np.repeat([e[3] for e in errors], sizes), levels))
    below = bracket.below(fpr_ub, fnr_ub) | bracket.below(fnr_ub, fpr_ub)
    return np.logical_or.reduceat(below, np.concatenate([[0], np.cumsum(sizes)[:-1]]))


def _old_claim_curve_rejects(scores, included, bracket, *, alpha, per_tail=40):
    scores = np.asarray(scores, dtype=np.float64)
    included = np.asarray(included, dtype=bool)
    errors = _old_sorted_errors(np.sort(scores[included]), np.sort(scores[~included]), alpha, per_tail)
    return bool(_old_rejections(bracket, [errors])[0])


class _OldTabulatedAudits:
    def __init__(self, m, q, steps, sigma, *, repetitions, seed):
        self.q, self.sigma, self.run_steps = float(q), float(sigma), int(steps)
        self.uniforms = []
        for r in range(repetitions):
            rng = np.random.default_rng([seed, r])
            included = cp._included_bits(m, rng)
            uniforms = rng.random(int(m))
            self.uniforms.append((np.sort(uniforms[included]), np.sort(uniforms[~included])))

    @staticmethod
    def _ascending(values):
        return values if values.size < 2 or bool((values[1:] >= values[:-1]).all()) else np.sort(values)

    def power(self, f, bracket, alpha, per_tail):
        table = cp._ScoreTable(self.q, self.sigma, self.run_steps, float(f), self.q, 1.0)
        errors = [_old_sorted_errors(self._ascending(table.quantile("in", u_in)),
                                     self._ascending(table.quantile("out", u_out)), alpha, per_tail)
                  for u_in, u_out in self.uniforms]
        return int(_old_rejections(bracket, errors).sum()) / len(self.uniforms)


def _old_tabulated_factor(canaries, q, steps, sigma, *, curve, alpha, per_tail, power=0.8, repetitions=100,
                          seed=0, tolerance=cp.DEFAULT_TOLERANCE, lower=cp.DEFAULT_LOWER, upper=1.0):
    alpha = cp._check_detection(alpha, power, lower, upper, tolerance)
    repetitions, seed = cp._check_repetitions(repetitions, seed)
    bracket = _OldBracketedCurve(curve)
    audits = _OldTabulatedAudits(canaries, q, steps, sigma, repetitions=repetitions, seed=seed)
    lo, hi, measured = cp._search(lambda f: audits.power(f, bracket, alpha, per_tail), power=power,
                                  tolerance=tolerance, lower=lower, upper=upper)
    return cp._factor_record(lo, hi, measured, power=float(power), repetitions=repetitions, seed=seed,
                             tolerance=float(tolerance), lower=float(lower), upper=float(upper), alpha=alpha,
                             per_tail=per_tail)


# ------------------------------------------------------------------ inputs


def _profile_curve(sigma: float, points=()) -> ClaimedCurve:
    """A tabulated-profile curve (the accountant's kind) of a Gaussian mechanism, with extra points."""
    eps = np.linspace(0.0, 40.0, 20001)
    return ClaimedCurve(profile_eps=eps, profile_delta=np.asarray(gaussian_delta(sigma, eps)), points=tuple(points))


CURVES = {
    "pure": lambda: pure_tradeoff(2.0),
    "gdp": lambda: ClaimedCurve(gaussian_mu=1.2),
    "profile": lambda: _profile_curve(1.5, points=[(2.0, 1e-5)]),
}


def _new_record(**kw) -> dict:
    out = cp._tabulated_factor(**kw)
    out.pop("seconds")  # wall clock
    return out


class _TiedGenerator:
    """A generator whose uniforms are rounded to 1/500: ties within and across repetitions."""

    def __init__(self, seed):
        self.rng = _TiedGenerator.default_rng(seed)

    def random(self, size):
        return np.round(self.rng.random(size) * 500) / 500

    default_rng = staticmethod(np.random.default_rng)


# ------------------------------------------------------------------ the comparisons


@pytest.mark.parametrize("curve", sorted(CURVES))
def test_bracketed_curve_decides_as_before(curve):
    # random points, points on the grid, the ends, and points just off the curve (the exact calls);
    # asked twice, so the second answers come from what the first computed
    claimed = CURVES[curve]()
    old, new = _OldBracketedCurve(claimed), cp._BracketedCurve(claimed)
    rng = np.random.default_rng(0)
    fpr = np.concatenate([rng.random(3000), 10.0 ** rng.uniform(-14, 0, 3000), old.grid[::7], [0.0, 1.0, -0.0, 1e-300]])
    on_curve = np.asarray(claimed.fnr(fpr))
    for fnr in (rng.random(fpr.size), on_curve, np.nextafter(on_curve, 2.0), np.nextafter(on_curve, -1.0),
                on_curve * (1 + 1e-9), on_curve):
        np.testing.assert_array_equal(new.below(fpr, fnr), old.below(fpr, fnr))
        np.testing.assert_array_equal(new.below(fnr, fpr), old.below(fnr, fpr))


@pytest.mark.parametrize("per_tail", [None, 1, 10, 40])
def test_claim_curve_rejects_decides_as_before(per_tail):
    claimed = CURVES["profile"]()
    old_bracket = _OldBracketedCurve(claimed)
    new_bracket = cp._BracketedCurve(claimed)
    rng = np.random.default_rng(per_tail or 0)
    for m, shift in ((50, 2.0), (400, 0.0), (400, 1.0), (3000, 0.4), (3000, 0.25)):
        included = rng.random(m) < 0.5
        scores = rng.standard_normal(m) + shift * included
        for s in (scores, np.round(scores, 1)):
            assert (cp.claim_curve_rejects(s, included, new_bracket, alpha=0.05, per_tail=per_tail)
                    == _old_claim_curve_rejects(s, included, old_bracket, alpha=0.05, per_tail=per_tail))


@pytest.mark.parametrize("per_tail", [1, 3, 40, 200])
def test_pooled_errors_are_each_repetitions_errors(per_tail):
    # all repetitions at once (thresholds by bisection on pooled ranks) against one at a time
    rng = np.random.default_rng(per_tail)
    for m in (2, 3, 7, 100, 1001, 6000):
        repetitions = int(rng.integers(1, 7))
        positives, negatives = [], []
        for _ in range(repetitions):
            included = rng.random(m) < rng.uniform(0.05, 0.95)
            included[0], included[-1] = True, False  # both classes present
            kind = rng.integers(3)
            scores = (rng.standard_normal(m) if kind == 0 else np.round(rng.standard_normal(m), 1) if kind == 1
                      else rng.integers(0, 3, m).astype(float))  # continuous, ties, a few values
            positives.append(np.sort(scores[included]))
            negatives.append(np.sort(scores[~included]))
        expected = cp._flat([_old_sorted_errors(a, b, 0.05, per_tail) for a, b in zip(positives, negatives, strict=True)])
        runs = []
        for parts in (positives, negatives):
            values = np.concatenate(parts)
            order = np.argsort(values, kind="stable")  # positions ascend within each run
            index = np.empty_like(order)
            index[order] = np.arange(order.size)
            runs.append(cp._Runs(values[order], index, np.concatenate([[0], np.cumsum([p.size for p in parts])])))
        got = cp._pooled_errors(*runs, 0.05, per_tail)
        for new, old in zip(got, expected, strict=True):
            assert new.dtype == old.dtype and np.array_equal(new, old)


@pytest.mark.parametrize(("m", "q", "steps", "sigma", "repetitions", "seed", "per_tail", "curve", "bisected"), [
    (2000, 0.1, 40, 1.0, 30, 0, 40, "profile", True),
    (5000, 64 / 284, 40, 1.3, 20, 3, 40, "gdp", True),
    (1500, 0.05, 100, 2.0, 25, 1, 10, "pure", True),
    (20000, 0.0713, 140, 3.07, 8, 0, 40, "profile", True),  # the default run's digits twin at ε = 1
    (300, 0.2, 20, 0.8, 20, 2, None, "gdp", True),  # every distinct score a threshold
    (800, 0.5, 5, 0.6, 15, 4, 1, "profile", False),  # not even the lowest f is caught: factor 0
])
def test_detectable_factor_is_the_previous_record(m, q, steps, sigma, repetitions, seed, per_tail, curve, bisected):
    kw = dict(canaries=m, q=q, steps=steps, sigma=sigma, curve=CURVES[curve](), alpha=0.05, per_tail=per_tail,
              power=0.8, repetitions=repetitions, seed=seed, tolerance=cp.DEFAULT_TOLERANCE)
    new = _new_record(**kw)
    assert new == _old_tabulated_factor(**kw)
    assert (new["evaluations"] > 3) == bisected


def test_detectable_factor_with_tied_uniforms_is_the_previous_record(monkeypatch):
    # ties within and across repetitions: the positions of tied uniforms, equal scores, repeated thresholds
    monkeypatch.setattr(np.random, "default_rng", _TiedGenerator)
    kw = dict(canaries=3000, q=0.1, steps=40, sigma=1.0, curve=CURVES["profile"](), alpha=0.05, per_tail=40,
              power=0.8, repetitions=12, seed=5, tolerance=cp.DEFAULT_TOLERANCE)
    assert _new_record(**kw) == _old_tabulated_factor(**kw)


def test_detectable_factor_with_scores_out_of_order_is_the_previous_record(monkeypatch):
    # an inverse CDF whose values do not ascend (as rounding could make them): each repetition's scores
    # are sorted again, one repetition at a time
    quantile = cp._ScoreTable.quantile
    monkeypatch.setattr(cp._ScoreTable, "quantile",
                        lambda self, name, u: quantile(self, name, u) + 0.3 * np.sin(4000.0 * np.asarray(u)))
    kw = dict(canaries=2000, q=0.1, steps=40, sigma=1.0, curve=CURVES["gdp"](), alpha=0.05, per_tail=40,
              power=0.8, repetitions=10, seed=1, tolerance=cp.DEFAULT_TOLERANCE)
    assert _new_record(**kw) == _old_tabulated_factor(**kw)


def test_an_empty_class_is_refused_as_before():
    kw = dict(canaries=2, q=0.1, steps=10, sigma=1.0, curve=CURVES["gdp"](), alpha=0.05, per_tail=40,
              power=0.8, repetitions=20, seed=0, tolerance=cp.DEFAULT_TOLERANCE)
    with pytest.raises(ValueError, match="needs included and excluded trials") as new:
        _new_record(**kw)
    with pytest.raises(ValueError, match="needs included and excluded trials") as old:
        _old_tabulated_factor(**kw)
    assert str(new.value) == str(old.value)


def test_each_repetitions_uniforms_are_read_in_order_despite_ties(monkeypatch):
    # the layout the tabulated audits read: run r through the positions is repetition r's sorted uniforms
    # (the previous implementation's), and the positions ascend within each run, tied uniforms included
    monkeypatch.setattr(np.random, "default_rng", _TiedGenerator)
    new = cp._TabulatedAudits(3000, 0.1, 40, 1.0, repetitions=12, seed=5)
    old = _OldTabulatedAudits(3000, 0.1, 40, 1.0, repetitions=12, seed=5)
    for column, name in enumerate(("in", "out")):
        runs = cp._Runs(new.ascending[name], new.position[name], new.starts[name])
        for r, uniforms in enumerate(old.uniforms):
            np.testing.assert_array_equal(runs.run(r), uniforms[column])
            assert (np.diff(runs.index[runs.starts[r]:runs.starts[r + 1]]) > 0).all()
