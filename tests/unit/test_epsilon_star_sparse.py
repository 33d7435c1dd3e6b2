"""The parametric point estimate computed sparsely (``sparse_grid``), bit for bit.

Oracle: ``normal_epsilon_star`` as it was before the sparse form (estimators.py at 903e698:
``epsilon_star_from_rates(normal_rates(fit, grid_size), delta, lower=lower, fit=fit)``), copied
below as ``_oracle`` with every rate at every grid point and boolean masks.
Tolerance: none; every field of the result is compared exactly (signed zeros and NaN included).
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from scipy import special

from dpaudit.metrics.epsilon_star import estimators, sparse_grid
from dpaudit.metrics.epsilon_star.estimators import (
    TERMS,
    EpsilonStarResult,
    NormalFit,
    normal_epsilon_star,
    quantile_levels,
)


def _oracle(fit, delta, grid_size, lower=None, ndtr=special.ndtr):
    lower = delta if lower is None else lower
    if not (fit.sd_tr > 0 and fit.sd_pop > 0):
        raise ValueError(f"degenerate Gaussian fit (sd_tr={fit.sd_tr}, sd_pop={fit.sd_pop})")
    q, q_c, z = quantile_levels(int(grid_size))
    c_tr = fit.mu_tr + fit.sd_tr * z
    c_pop = fit.mu_pop + fit.sd_pop * z
    x_pop = (c_tr - fit.mu_pop) / fit.sd_pop
    x_tr = (c_pop - fit.mu_tr) / fit.sd_tr
    threshold = np.concatenate([c_tr, c_pop])
    fpr, tnr = np.concatenate([ndtr(-x_pop), q_c]), np.concatenate([ndtr(x_pop), q])
    fnr, tpr = np.concatenate([q, ndtr(x_tr)]), np.concatenate([q_c, ndtr(-x_tr)])
    delta = float(delta)
    keep = (fpr > lower) & (fnr > lower) & (tnr > lower) & (tpr > lower)
    n_kept = int(np.count_nonzero(keep))
    common = dict(n_kept=n_kept, grid_size=threshold.size, delta=delta, filter_lo=float(lower),
                  filter_hi=float(1.0 - lower), fit=fit)
    if n_kept == 0:
        nan = float("nan")
        return EpsilonStarResult(nan, (nan, nan, nan, nan), None, nan, nan, None, **common)
    fpr, fnr, tpr, tnr, threshold = fpr[keep], fnr[keep], tpr[keep], tnr[keep], threshold[keep]
    terms = ((tpr - delta) / fpr, (tnr - delta) / fnr, (fnr - delta) / tnr, (fpr - delta) / tpr)
    arg = [int(np.argmax(t)) for t in terms]
    maxima = tuple(float(t[i]) for t, i in zip(terms, arg, strict=True))
    best = int(np.argmax(maxima))
    i = arg[best]
    return EpsilonStarResult(
        eps_star=float(np.log(max(1.0, maxima[best]))), m=maxima, term=TERMS[best],
        argmax_fpr=float(fpr[i]), argmax_fnr=float(fnr[i]),
        on_boundary=bool(threshold[i] == threshold.min() or threshold[i] == threshold.max()),
        argmax_denominator=float((fpr, fnr, tnr, tpr)[best][i]), **common,
    )


def _same(a: float, b: float) -> bool:
    return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (a != a and b != b)


def _assert_identical(fast: EpsilonStarResult, expected: EpsilonStarResult) -> None:
    for name in EpsilonStarResult.__dataclass_fields__:
        got, want = getattr(fast, name), getattr(expected, name)
        if isinstance(want, tuple):
            assert all(_same(g, w) for g, w in zip(got, want, strict=True)), name
        elif isinstance(want, float):
            assert _same(got, want), (name, got, want)
        else:
            assert got == want, name


def _fits(seed: int, n: int) -> list[NormalFit]:
    rng = np.random.default_rng(seed)
    fits = []
    for k in range(n):
        mu_tr, mu_pop = rng.normal(0.0, 2.0, 2)
        sd_tr, sd_pop = np.exp(rng.normal(0.0, 1.0, 2))
        if k % 3 == 0:  # close fits, as the losses of one model give
            mu_pop, sd_pop = mu_tr + rng.normal(0.0, 0.05), sd_tr * np.exp(rng.normal(0.0, 0.05))
        fits.append(NormalFit(float(mu_tr), float(sd_tr), float(mu_pop), float(sd_pop)))
    return fits + EDGE_FITS


EDGE_FITS = [
    NormalFit(0.3, 1.0, 0.3, 1.0),  # identical fits: the grids mirror each other, terms tie across them
    NormalFit(-1.04, 0.133, -1.052, 0.148),  # a digits model
    NormalFit(0.0, 1.0, 60.0, 1.0), NormalFit(0.0, 1.0, -60.0, 1.0),  # too far apart: nothing kept
    NormalFit(0.0, 1.0, 6.0, 1.0), NormalFit(0.0, 1.0, -5.0, 0.5),  # far tails: part of each grid kept
    NormalFit(0.0, 1e-3, 0.0, 1.0), NormalFit(0.0, 1.0, 0.0, 1e3),  # very unequal spreads
    NormalFit(0.0, 1e-320, 0.0, 1.0),  # subnormal sd
    NormalFit(0.0, 1e308, 1.0, 1e-300),  # products and quotients overflow: ±inf thresholds
    NormalFit(np.inf, 1.0, 0.0, 1.0),  # non-finite: the whole-grid form
]


@pytest.mark.parametrize(
    ("delta", "grid", "lower"),
    [(1.6e-4, 1_000, None), (1e-3, 101, None), (0.02, 5_000, None), (0.3, 1_000, None),
     (1e-5, 100_000, None), (6.2e-4, 20_000, 1e-2), (0.02, 3_000, 1e-6), (1e-4, 2_000, 1e-250),
     (0.0, 2_000, 1e-3)],
)
def test_the_point_estimate_equals_the_whole_grid_form_bit_for_bit(delta, grid, lower):
    # lower != delta: numerators (rate − δ) of either sign; 1e-250: below SPARSE_MIN_DELTA (whole grid)
    kinds = set()
    for fit in _fits(int(delta * 1e6) + grid, 45):
        with np.errstate(all="ignore"):  # the overflowing edge fit warns in both forms
            fast = normal_epsilon_star(fit, delta, grid_size=grid, lower=lower)
            expected = _oracle(fit, delta, grid, lower)
        _assert_identical(fast, expected)
        kinds.add("none kept" if fast.n_kept == 0 else fast.term)
    assert "none kept" in kinds and len(kinds) >= 3


def test_the_default_grid_equals_the_whole_grid_form():
    # the workflow's 10^6 levels per set, at the default run's δ
    for fit in _fits(5, 4)[:5]:
        _assert_identical(normal_epsilon_star(fit, 1.6e-4), _oracle(fit, 1.6e-4, 10**6))


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_the_point_estimate_does_not_depend_on_the_segment_size(chunk, monkeypatch):
    # one-point segments: every bound is that point's value within the wobble, so ties between
    # segments (and between the mirrored grids of identical fits) reach the first-argmax rule
    monkeypatch.setattr(sparse_grid, "POINT_CHUNK", chunk)
    for delta, grid in ((1e-3, 300), (1.6e-4, 2_000)):
        for fit in _fits(chunk + grid, 30):
            with np.errstate(all="ignore"):
                _assert_identical(normal_epsilon_star(fit, delta, grid_size=grid), _oracle(fit, delta, grid))


def test_ordinary_fits_take_the_sparse_form_and_compute_few_rates(monkeypatch):
    points = []
    monkeypatch.setattr(sparse_grid, "special",
                        types.SimpleNamespace(ndtr=lambda a: points.append(np.size(a)) or special.ndtr(a)))
    whole = []
    monkeypatch.setattr(estimators, "normal_rates", lambda *a: whole.append(1))
    for fit in _fits(3, 6)[:6]:
        normal_epsilon_star(fit, 1.6e-4, grid_size=200_000)
    assert not whole
    assert sum(points) < 0.5 * 6 * 4 * 200_000  # four rate arrays per fit in the whole-grid form


def _dip_ndtr(delta):
    """ndtr with values in (1.3 δ, 2 δ) lowered to δ: a wobble of at most 40% (within a premise
    NDTR_WOBBLE = 0.4) that splits the kept points in two wherever a point lands in (δ, 1.3 δ]."""
    def ndtr(a):
        values = special.ndtr(a)
        values[(values > 1.3 * delta) & (values < 2.0 * delta)] = delta
        return values
    return ndtr


def test_a_kept_set_split_by_a_wobble_falls_back_to_the_whole_grid_form(monkeypatch):
    # Within its premise (here NDTR_WOBBLE = 0.4) the sparse form must notice a kept set that is
    # not one run, give up, and leave it to the whole-grid form
    delta = 1e-3
    dip = _dip_ndtr(delta)
    monkeypatch.setattr(sparse_grid, "NDTR_WOBBLE", 0.4)
    monkeypatch.setattr(sparse_grid, "special", types.SimpleNamespace(ndtr=dip))
    monkeypatch.setattr(estimators, "special", types.SimpleNamespace(ndtr=dip, ndtri=special.ndtri))
    sparse, gave_up = estimators.sparse_normal_extremes, []
    monkeypatch.setattr(estimators, "sparse_normal_extremes",
                        lambda *a: (lambda r: gave_up.append(r is None) or r)(sparse(*a)))
    for fit in _fits(7, 150):
        with np.errstate(all="ignore"):
            _assert_identical(normal_epsilon_star(fit, delta, grid_size=2_000),
                              _oracle(fit, delta, 2_000, ndtr=dip))
    assert any(gave_up) and not all(gave_up)


def test_invalid_arguments_raise_as_before():
    good = NormalFit(0.0, 1.0, 0.5, 1.0)
    cases = ((NormalFit(0.0, 0.0, 0.5, 1.0), 1e-3, 100, None), (good, float("nan"), 100, None),
             (good, 1.5, 100, None), (good, 1e-3, 100, 0.7), (good, 1e-3, 0, None),
             (NormalFit(0.0, 1.0, 0.5, -1.0), 2.0, 100, None))
    for fit, delta, grid, lower in cases:
        with pytest.raises(ValueError) as raised:
            normal_epsilon_star(fit, delta, grid_size=grid, lower=lower)
        with pytest.raises(ValueError) as expected:  # the composition normal_epsilon_star was
            estimators.epsilon_star_from_rates(estimators.normal_rates(fit, grid), delta,
                                               lower=delta if lower is None else lower)
        assert str(raised.value) == str(expected.value)
