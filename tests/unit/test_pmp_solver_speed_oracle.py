"""The PMP solver's faster evaluation of the Gaussian profile against its previous implementation.

Oracles: ``_reference_gaussian_log_terms`` and ``_reference_profile_epsilon_per_row`` below are
copied verbatim (names aside) from ``dpaudit.dp.mechanisms._gaussian_log_terms`` and
``dpaudit.metrics.pmp.bounds.profile_epsilon_per_row`` at commit 903e698, before the solver
evaluated its cells in place, in cache-sized blocks, each row sorted by μ, and checked only the
roots that need it. Tolerance: 0 (every float bit for bit, NaN and the sign of zero included:
the arrays' bytes are compared).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from dpaudit.contract.delta import check_delta
from dpaudit.dp import mechanisms, profile_solver
from dpaudit.metrics.pmp import bounds, gaussian


def _reference_gaussian_log_terms(eps, sigma, sensitivity):
    """mechanisms._gaussian_log_terms at 903e698."""
    eps = np.asarray(eps, dtype=np.float64)
    r = np.asarray(sensitivity, dtype=np.float64) / float(sigma)
    if np.any(r < 0) or np.any(np.isnan(r)):
        raise ValueError("sensitivity must be >= 0 (and sigma > 0)")
    positive = r > 0
    safe_r = np.where(positive, r, 1.0)
    a = special.log_ndtr(safe_r / 2.0 - eps / safe_r)
    b = eps + special.log_ndtr(-safe_r / 2.0 - eps / safe_r)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a + np.log1p(-np.exp(np.minimum(b - a, 0.0)))
    return np.where(positive & (b < a), out, -np.inf), b, positive


def _reference_gaussian_delta(sigma, eps, sensitivity=1.0):
    """mechanisms.gaussian_delta at 903e698 (through _gaussian_log_delta)."""
    out = np.exp(_reference_gaussian_log_terms(eps, sigma, sensitivity)[0])
    return float(out) if out.ndim == 0 else out


def _reference_gaussian_delta_and_slope(eps, sensitivity):
    """mechanisms.gaussian_delta_and_slope at 903e698."""
    log_delta, log_subtracted, positive = _reference_gaussian_log_terms(eps, 1.0, sensitivity)
    return np.exp(log_delta), np.where(positive, np.exp(log_subtracted), 0.0)


def _reference_profile_epsilon_per_row(mu, delta, *, weights=None, tol=1e-10, max_iter=100):
    """bounds.profile_epsilon_per_row at 903e698, on the reference δ_G above."""
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    delta = check_delta(delta)
    if weights is None:
        weights = np.full(mu.shape, 1.0 / mu.shape[1])
    log_delta = math.log(delta)

    def log_row_delta(eps_rows, mu_rows, w_rows, with_slope=False):
        e = eps_rows[:, None]
        if not with_slope:
            value = np.sum(w_rows * _reference_gaussian_delta(1.0, e, mu_rows), axis=1)
            with np.errstate(divide="ignore"):
                return np.log(value)
        deltas, slope_terms = _reference_gaussian_delta_and_slope(e, mu_rows)
        value = np.sum(w_rows * deltas, axis=1)
        with np.errstate(divide="ignore"):
            log_value = np.log(value)
        slope = -np.sum(w_rows * slope_terms, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return log_value, slope / value

    n_rows = mu.shape[0]
    out = np.zeros(n_rows)
    rows = np.arange(n_rows)
    mu_a, w_a = mu, weights
    zero = np.zeros(n_rows, dtype=bool)
    lo = np.zeros(rows.size)
    hi = np.full(rows.size, np.inf)
    x = np.zeros(rows.size)
    root = np.zeros(rows.size)
    active = np.arange(rows.size)
    for _ in range(max_iter):
        g, slope = log_row_delta(x[active], mu_a[active], w_a[active], with_slope=True)
        g = g - log_delta
        above = g > 0
        if active.size == n_rows and not x.any():
            zero = ~above
        lo[active] = np.where(above, x[active], lo[active])
        hi[active] = np.where(above, hi[active], x[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x[active] - g / slope
        lo_a, hi_a = lo[active], hi[active]
        open_above = ~np.isfinite(hi_a)
        expand = 2.0 * np.maximum(lo_a, 0.5)
        fallback = np.where(open_above, expand, 0.5 * (lo_a + hi_a))
        inside = np.isfinite(step) & (step >= lo_a) & (step <= hi_a)
        new_x = np.where(inside, np.where(open_above, np.minimum(step, expand), step), fallback)
        if np.any(new_x > 1e6):
            raise FloatingPointError("no finite ε bounds the profile: μ is too large")
        done = (np.abs(new_x - x[active]) <= tol * np.maximum(1.0, new_x)) | (np.isfinite(hi_a) & (hi_a - lo_a <= tol * np.maximum(1.0, hi_a)))
        x[active] = new_x
        root[active[done]] = new_x[done]
        active = active[~done]
        if active.size == 0:
            break
    root[active] = hi[active]
    nudged = root * (1.0 + 10 * tol) + tol
    check = np.flatnonzero(~zero)
    if check.size:
        feasible = log_row_delta(nudged[check], mu_a[check], w_a[check]) <= log_delta
        out[rows[check]] = np.where(feasible, np.minimum(nudged[check], hi[check]), hi[check])
    return out


def _same_bits(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


# ------------------------------------------------------------- the cells: log δ_G and its slope term

EDGE_SENSITIVITIES = np.array([0.0, -0.0, 5e-324, 1e-310, 1e-160, 1e-9, 1e-3, 0.05, 0.3, 1.0, 2.0, 7.5, 40.0,
                               300.0, 1e200, np.inf])
EDGE_EPS = np.array([0.0, -0.0, 1e-12, 0.1, 1.0, 4.0, 16.0, 49.0, 750.0, 1e6, 1e300, np.inf, np.nan, -1.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the same overflow/invalid warnings as the oracle's
@pytest.mark.parametrize("sigma", [1.0, 0.37, 8.0])
@pytest.mark.parametrize("shapes", ["grid", "scalar_eps", "scalar_sensitivity", "both_scalar", "rows"])
def test_gaussian_log_terms_equal_the_previous_implementation(sigma, shapes):
    rng = np.random.default_rng(11)
    if shapes == "grid":  # every edge ε against every edge Δ: (ε, 1) × (1, Δ)
        eps, sens = EDGE_EPS[:, None], EDGE_SENSITIVITIES[None, :]
    elif shapes == "scalar_eps":
        eps, sens = 2.5, np.concatenate([EDGE_SENSITIVITIES, rng.gamma(2.0, 0.5, 50)])
    elif shapes == "scalar_sensitivity":
        eps, sens = np.concatenate([EDGE_EPS, rng.uniform(0, 30, 50)]), 1.3
    elif shapes == "both_scalar":
        eps, sens = 0.7, 0.9
    else:  # the solver's layout: one ε per row, a row of partners' μ
        eps, sens = rng.uniform(0, 20, (7, 1)), rng.gamma(1.5, 0.6, (7, 33))
    got = mechanisms._gaussian_log_terms(eps, sigma, sens)
    want = _reference_gaussian_log_terms(eps, sigma, sens)
    for g, w in zip(got, want, strict=True):
        assert _same_bits(g, w)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_public_gaussian_profile_functions_are_unchanged():
    eps, sens = EDGE_EPS[:, None], EDGE_SENSITIVITIES[None, :]
    for g, w in zip(mechanisms.gaussian_delta_and_slope(eps, sens), _reference_gaussian_delta_and_slope(eps, sens),
                    strict=True):
        assert _same_bits(g, w)
    assert _same_bits(mechanisms.gaussian_delta(0.8, eps, sens), _reference_gaussian_delta(0.8, eps, sens))
    for e in (0.0, 0.5, 3.0, 40.0):
        for s in (0.05, 0.8, 3.0):  # scalars stay Python floats
            got, want = mechanisms.gaussian_delta(s, e), _reference_gaussian_delta(s, e)
            assert type(got) is float and _same_bits(got, want)
            assert mechanisms._gaussian_log_delta_one(e, s) == float(_reference_gaussian_log_terms(e, s, 1.0)[0])


@pytest.mark.parametrize("bad", [-1e-12, np.nan])
def test_invalid_sensitivity_raises_as_before(bad):
    sens = np.array([0.5, bad, 1.0])
    for function in (mechanisms._gaussian_log_terms, _reference_gaussian_log_terms):
        with pytest.raises(ValueError, match="sensitivity must be >= 0"):
            function(1.0, 1.0, sens)
    with pytest.raises(ValueError, match="sensitivity must be >= 0"):
        bounds.profile_epsilon_per_row(np.array([[0.5, 1.0], [bad, 2.0]]), 1e-5)


def test_exp_in_place_equals_np_exp():
    # np.exp's value on every lane, the lanes it would underflow (< −750, −inf) set directly
    values = np.concatenate([np.linspace(-760.0, -700.0, 200_001), [-np.inf, np.inf, np.nan, -0.0, 0.0, 709.0, 710.0,
                                                                     -745.13321910194, -745.1332191019412, -750.0],
                             np.random.default_rng(5).normal(0.0, 300.0, 10_000)])
    rng = np.random.default_rng(6)
    values = values[rng.permutation(values.size)].reshape(-1, 1)  # any layout the solver's blocks have
    with np.errstate(over="ignore"):
        want = np.exp(values)
        got = profile_solver._exp_in_place(values.copy(), np.empty(values.size, dtype=bool))
    assert _same_bits(got, want)
    assert not np.exp(np.linspace(-1e4, profile_solver.EXP_UNDERFLOWS_BELOW, 1_000_001)).any()  # the constant's premise


# ------------------------------------------------------------- the per-row solver


def _matrices():
    rng = np.random.default_rng(2024)
    spread = rng.gamma(2.0, 0.4, (150, 37))
    spread[:5] = 1e-9  # rows private at ε = 0
    spread[5:10, :30] = 0.0  # μ = 0 cells
    spread[10] = 6.0  # many Newton steps
    close = np.exp(rng.uniform(np.log(1e-3), np.log(3.0), (40, 300)))  # partners far closer than ε needs: δ_G underflows
    close[3, 7] = 0.0
    mixed = rng.gamma(0.6, 0.5, (64, 129))
    mixed[::7, ::5] = 0.0
    ties = rng.integers(0, 4, (30, 50)) * 0.5  # many equal μ per row (the sort's ties), zeros among them
    ties[:, -3:] = np.inf  # δ_G = 1 at every ε: only solvable with zero weight there
    return {
        "spread": (spread, 1e-4, None),
        "close_partners": (close, 1e-5, None),
        "mixed_zeros": (mixed, 1e-3, None),
        "huge_mu": (np.array([[9.0] * 7, [8.5] * 7, [20.0] * 7, [0.3] * 7, [35.0, 0.1, 2.0, 4.0, 0.0, 60.0, 1.0]]),
                    1e-5, None),
        "all_zero_rows": (np.vstack([np.zeros(12), rng.gamma(2.0, 0.5, 12), np.zeros(12)]), 1e-5, None),
        "tiny_and_subnormal_mu": (np.array([[5e-324, 1e-300, 1e-12, 0.5, 1.0], [1e-200, 2.0, 3.0, 1e-310, 0.2]]),
                                  1e-6, None),
        "single_row": (rng.gamma(2.0, 0.5, (1, 41)), 1e-5, None),
        "single_column": (rng.gamma(2.0, 0.5, (23, 1)), 1e-5, None),
        "one_cell": (np.array([[1.7]]), 1e-2, None),
        "one_dimensional": (rng.gamma(2.0, 0.5, 19), 1e-5, None),
        "row_wider_than_a_block": (rng.gamma(2.0, 0.4, (3, profile_solver.ROW_CHUNK_CELLS + 77)), 1e-5, None),
        "many_blocks_of_rows": (rng.gamma(2.0, 0.4, (700, 97)), 1e-5, None),
        "weights_with_zeros": (spread, 1e-4, "zeros"),
        "weights_uneven": (mixed, 1e-3, "uneven"),
        "weights_one_per_row": (close, 1e-5, "column"),
        "ties_and_infinite_mu_without_weight": (ties, 1e-4, "zero_at_inf"),
    }


def _weights(kind, shape, rng):
    if kind is None:
        return None
    if kind == "column":  # (rows, 1): one weight per row, broadcast over its partners
        return np.full((shape[0], 1), 1.0 / shape[1])
    if kind == "zero_at_inf":
        w = np.ones(shape)
        w[:, -3:] = 0.0
        return w / w.sum(axis=1, keepdims=True)
    w = rng.uniform(0.0, 1.0, shape)
    if kind == "zeros":
        w[rng.random(shape) < 0.3] = 0.0
    return w / w.sum(axis=1, keepdims=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("tol", "max_iter"), [(1e-10, 100), (1e-3, 100), (0.3, 100), (1e-10, 3)])
@pytest.mark.parametrize("case", list(_matrices()))
def test_profile_epsilon_per_row_equals_the_previous_solver(case, tol, max_iter):
    # loose tolerances and few iterations: more rows end below their bracket's upper end, whose
    # nudged root is then checked
    mu, delta, weight_kind = _matrices()[case]
    weights = _weights(weight_kind, np.atleast_2d(mu).shape, np.random.default_rng(8))
    got = bounds.profile_epsilon_per_row(mu, delta, weights=weights, tol=tol, max_iter=max_iter)
    want = _reference_profile_epsilon_per_row(mu, delta, weights=weights, tol=tol, max_iter=max_iter)
    assert _same_bits(got, want)


def test_profile_epsilon_per_row_raises_where_the_previous_solver_raises():
    mu = np.full((2, 3), 2000.0)  # δ_G(0) = 1 to double precision: no ε ≤ 1e6 bounds it
    for solver in (bounds.profile_epsilon_per_row, _reference_profile_epsilon_per_row):
        with pytest.raises(FloatingPointError, match="no finite ε bounds the profile"):
            solver(mu, 1e-5)


@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-9])
def test_gaussian_pmp_equals_the_previous_solver_on_a_distance_matrix(delta):
    rng = np.random.default_rng(13)
    features = rng.normal(0.0, 1.0, (90, 6)) * rng.uniform(0.01, 1.0, (90, 1))
    features[5] = features[4]  # a duplicate: μ = 0 partners
    sigma = 0.4
    res = gaussian.gaussian_pmp(features, sigma, delta, sensitivity_global=1.0, block_rows=17)
    distances = gaussian.pairwise_distances(features)
    mu = (distances[~np.eye(90, dtype=bool)] / sigma).reshape(90, 89)
    assert _same_bits(res["eps_pmp_x"], _reference_profile_epsilon_per_row(mu, delta))
