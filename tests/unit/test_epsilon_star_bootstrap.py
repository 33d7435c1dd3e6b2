"""Parametric ε* bootstrap replicates (slices of the monotone grid, pruned by upper bounds), bit for bit.

Oracle: the replicates' eq. 7 as written before the slice path (``_oracle_values`` and
``_oracle_grid_best`` below, copied from bootstrap.py at 88e08a9: a fresh x per grid, the
tail/body pair chosen with ``np.where``, the kept set found with full boolean passes).
The sparse form (``sparse_grid.replicate_grid_best``: all replicates at once, x and tails only on the
segments that decide the value) is also checked grid by grid against the whole-grid slice path of
903e698 (``_monotone_grid_best``, unchanged, still the fallback); it rests on one measured property
of scipy's ndtr, checked here.
Tolerance: none; every comparison is exact equality, NaN included.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from scipy import special

from dpaudit.metrics.epsilon_star import bootstrap as bootstrap_module
from dpaudit.metrics.epsilon_star import sparse_grid
from dpaudit.metrics.epsilon_star.bootstrap import (
    bootstrap_epsilon_star,
    normal_epsilon_star_values,
)
from dpaudit.metrics.epsilon_star.estimators import quantile_levels


def _oracle_grid_best(x, lo, hi, lo_d, hi_d, delta, ndtr=special.ndtr):
    small = ndtr(-np.abs(x))
    big = 1.0 - small
    upper = x >= 0
    tail = np.where(upper, small, big)
    body = np.where(upper, big, small)
    keep = (tail > delta) & (body > delta)
    first = int(keep.argmax())
    if not keep[first]:
        return -np.inf
    last = keep.size - int(keep[::-1].argmax())
    kept = slice(first, last) if keep[first:last].all() else keep
    t, b, lo, hi, lo_d, hi_d = (a[kept] for a in (tail, body, lo, hi, lo_d, hi_d))
    return float(max((hi_d / t).max(), ((b - delta) / lo).max(), (lo_d / b).max(), ((t - delta) / hi).max()))


def _oracle_values(mu_tr, sd_tr, mu_pop, sd_pop, delta, grid_size, ndtr=special.ndtr):
    mu_tr, sd_tr, mu_pop, sd_pop = (np.atleast_1d(np.asarray(a, np.float64)) for a in (mu_tr, sd_tr, mu_pop, sd_pop))
    q, q_c, z = quantile_levels(int(grid_size))
    own = (q > delta) & (q_c > delta)
    q, q_c, z = q[own], q_c[own], z[own]
    q_d, q_c_d = q - delta, q_c - delta
    out = np.full(mu_tr.shape, np.nan)
    for i in range(mu_tr.size):
        if not (sd_tr[i] > 0 and sd_pop[i] > 0):
            continue
        best = -np.inf
        for x, rates in (
            ((mu_tr[i] + sd_tr[i] * z - mu_pop[i]) / sd_pop[i], (q, q_c, q_d, q_c_d)),
            ((mu_tr[i] - mu_pop[i] - sd_pop[i] * z) / sd_tr[i], (q_c, q, q_c_d, q_d)),
        ):
            best = max(best, _oracle_grid_best(x, *rates, delta, ndtr=ndtr))
        out[i] = np.log(max(1.0, best)) if best > -np.inf else np.nan
    return out


# (mu_tr, sd_tr, mu_pop, sd_pop) of fits the random draws rarely or never produce
EDGE_FITS = [
    (0.3, 1.0, 0.3, 1.0),  # identical fits: x = z on both grids
    (-1.04, 0.133, -1.052, 0.148),  # a bootstrap replicate of the digits run
    (0.0, 1.0, 60.0, 1.0), (0.0, 1.0, -60.0, 1.0),  # too far apart: nothing kept
    (0.0, 1.0, 6.0, 1.0), (0.0, 1.0, -5.0, 0.5),  # far tails: part of each grid kept
    (0.0, 1e-3, 0.0, 1.0), (0.0, 1.0, 0.0, 1e3),  # very unequal spreads: a narrow kept run
    (-0.0, 1e-320, 0.0, 1.0),  # subnormal sd: x has -0.0 next to +0.0
    (0.0, 1e308, 1.0, 1e-300),  # products and quotients overflow: x holds ±inf
    (1e308, 1.0, -1e308, 1.0),  # mu_tr - mu_pop overflows: the masked form
    (np.inf, 1.0, 0.0, 1.0), (np.inf, 1.0, np.inf, 1.0), (np.nan, 1.0, 0.0, 1.0),  # non-finite means
    (0.0, np.inf, 0.0, 1.0),  # infinite sd: 0·inf = NaN in x
    (0.0, 0.0, 0.0, 1.0), (0.0, 1.0, 0.0, np.nan), (0.0, -1.0, 0.0, 1.0),  # degenerate sd: NaN
]


def _fits(seed, n):
    rng = np.random.default_rng(seed)
    mu_tr, mu_pop = rng.normal(0.0, 2.0, n), rng.normal(0.0, 2.0, n)
    sd_tr, sd_pop = np.exp(rng.normal(0.0, 1.0, n)), np.exp(rng.normal(0.0, 1.0, n))
    near = slice(0, n // 3)  # close fits, as bootstrap replicates of one model are
    mu_pop[near] = mu_tr[near] + rng.normal(0.0, 0.05, n // 3)
    sd_pop[near] = sd_tr[near] * np.exp(rng.normal(0.0, 0.05, n // 3))
    edge = np.array(EDGE_FITS, dtype=np.float64).T
    return tuple(np.concatenate([a, e]) for a, e in zip((mu_tr, sd_tr, mu_pop, sd_pop), edge, strict=True))


@pytest.mark.parametrize(
    ("delta", "grid", "n"),
    [(0.0, 100, 400), (1.6e-4, 100, 400), (0.02, 100, 400), (0.2, 100, 400), (1e-3, 101, 400),
     (0.0, 100_000, 30), (1.6e-4, 100_000, 30)],
)
def test_replicates_equal_the_masked_form_bit_for_bit(delta, grid, n):
    fits = _fits(int(delta * 1e5) + grid, n)
    with np.errstate(all="ignore"):  # the overflowing edge fits warn in both forms
        fast = normal_epsilon_star_values(*fits, delta, grid)
        expected = _oracle_values(*fits, delta, grid)
    np.testing.assert_array_equal(fast, expected)
    assert np.isfinite(fast).sum() > n // 2 and np.isnan(fast).sum() >= 8  # values and NaNs both exercised
    if delta < 0.1:
        assert (fast[:n] > 0).sum() > n // 2  # not only the clamp at log 1


@pytest.mark.parametrize("chunk", [1, 2, 7, 64])
def test_replicates_do_not_depend_on_the_chunk_size(chunk, monkeypatch):
    # one-point chunks make every ratio's ceiling its exact value: a bound that is low by one
    # rounding would skip the maximum; small chunks also put the sign change of x mid-chunk
    monkeypatch.setattr(bootstrap_module, "CHUNK", chunk)
    for delta, grid in ((0.0, 100), (1e-3, 101), (1.6e-4, 2_000)):
        fits = _fits(chunk + grid, 120)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(normal_epsilon_star_values(*fits, delta, grid),
                                          _oracle_values(*fits, delta, grid))


@pytest.mark.parametrize("chunk", [1, 5, bootstrap_module.CHUNK])
def test_ceilings_bound_every_ratio_and_equal_it_on_one_point_segments(chunk, monkeypatch):
    # the pruning is exact only if no ceiling is ever below a ratio it bounds; on one-point
    # segments the ceiling is that ratio, so a bound low by a single rounding fails here
    monkeypatch.setattr(bootstrap_module, "CHUNK", chunk)
    delta, grid = 1e-3, 3_000
    z, grids = bootstrap_module._grids(grid, delta)
    x, small, big = np.empty(z.size), np.empty(z.size), np.empty(z.size)
    keep, keep_big = np.empty(z.size, dtype=bool), np.empty(z.size, dtype=bool)
    checked = 0
    for fit in zip(*(a[:30] for a in _fits(3, 30)), strict=True):
        for descending, (lo, hi, lo_d, hi_d), bounds in grids:
            bootstrap_module.standardized_thresholds(z, descending, *fit, out=x)
            p, first, last = bootstrap_module._kept_run(x, descending, delta, small, big, keep, keep_big)
            # the masked form's tails, filter and four ratios at every point
            small_o = special.ndtr(-np.abs(x))
            tail = np.where(x >= 0, small_o, 1.0 - small_o)
            body = np.where(x >= 0, 1.0 - small_o, small_o)
            kept = np.flatnonzero((tail > delta) & (body > delta))
            np.testing.assert_array_equal(small, small_o)
            np.testing.assert_array_equal(kept, np.arange(first, last))
            if first == last:
                continue
            starts, ends, on_upper, ceiling = bootstrap_module._ceilings(small, p, first, last, descending, bounds,
                                                                         delta)
            with np.errstate(divide="ignore", over="ignore"):  # zero and subnormal tails outside the kept run
                ratios = np.stack([hi_d / tail, (body - delta) / lo, lo_d / body, (tail - delta) / hi])[:, first:last]
            exact = np.maximum.reduceat(ratios, starts - first, axis=1)
            assert (exact <= ceiling).all()
            if chunk == 1:
                np.testing.assert_array_equal(exact, ceiling)
            checked += 1
    assert checked >= 40


def test_finite_fits_take_the_slice_path_and_non_finite_ones_the_masked_form(monkeypatch):
    calls = []
    masked = bootstrap_module._grid_best
    monkeypatch.setattr(bootstrap_module, "_grid_best", lambda *a: calls.append(1) or masked(*a))
    mu_tr, sd_tr, mu_pop, sd_pop = _fits(0, 50)
    with np.errstate(all="ignore"):
        normal_epsilon_star_values(mu_tr[:50], sd_tr[:50], mu_pop[:50], sd_pop[:50], 1e-3, 1_000)
        assert not calls
        normal_epsilon_star_values(np.inf, 1.0, 0.0, 1.0, 1e-3, 1_000)
    assert len(calls) == 2  # both grids of the one non-finite fit


def test_signed_zero_thresholds_are_in_the_edge_fits():
    # x = -0.0 falls in the x >= 0 piece, whose ndtr argument is -x = +0.0 where the masked
    # form has -|x| = -0.0: equal only because ndtr(+0.0) == ndtr(-0.0)
    _, _, z = quantile_levels(100_000)
    x = (np.float64(-0.0) + 1e-320 * z - 0.0) / 1.0
    assert (np.signbit(x) & (x == 0)).any() and (~np.signbit(x) & (x == 0)).any()
    assert special.ndtr(np.array([0.0, -0.0])).tolist() == [0.5, 0.5]


def _holey_ndtr(a, out=None):
    values = special.ndtr(a, out=out)
    values[(a > -0.30) & (a < -0.25)] = 0.0
    return values


def test_a_scattered_kept_set_falls_back_to_the_masked_form(monkeypatch):
    # A real ndtr keeps one run; an ndtr with a hole (0 on an interior band, as a
    # non-monotone rounding would give) keeps two, which the slice path must notice.
    # The hole breaks the sparse form's premise (sparse_grid.NDTR_WOBBLE): this is the whole-grid path's test.
    holey_ndtr = _holey_ndtr
    monkeypatch.setattr(bootstrap_module, "SPARSE_MIN_DELTA", np.inf)
    monkeypatch.setattr(bootstrap_module, "special", types.SimpleNamespace(ndtr=holey_ndtr))
    calls = []
    masked = bootstrap_module._grid_best
    monkeypatch.setattr(bootstrap_module, "_grid_best", lambda *a: calls.append(1) or masked(*a))
    mu_tr, sd_tr, mu_pop, sd_pop = _fits(7, 40)
    fits = (mu_tr[:40], sd_tr[:40], mu_pop[:40], sd_pop[:40])
    with np.errstate(all="ignore"):
        fast = normal_epsilon_star_values(*fits, 1e-3, 2_000)
        expected = _oracle_values(*fits, 1e-3, 2_000, ndtr=holey_ndtr)
    np.testing.assert_array_equal(fast, expected)
    assert calls  # some grid had a hole inside its kept run
    with np.errstate(all="ignore"):
        assert not np.array_equal(expected, _oracle_values(*fits, 1e-3, 2_000))  # the hole matters


def test_an_empty_own_filter_still_raises_as_the_masked_form():
    # δ = 0.3 on 2 levels (0.25, 0.75) leaves no threshold; the masked form's argmax of an
    # empty grid raised, and still does
    for values in (normal_epsilon_star_values, _oracle_values):
        with pytest.raises(ValueError, match="empty"):
            values(0.0, 1.0, 0.5, 1.0, 0.3, 2)


def test_parametric_bootstrap_replicates_equal_the_oracle_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(4)
    members, nonmembers = rng.gamma(2.0, 0.4, 300), rng.exponential(1.0, 150)
    kwargs = dict(estimator="parametric", resamples=30, seed=5, grid_size=5_000)
    fast = bootstrap_epsilon_star(members, nonmembers, 1.6e-4, **kwargs)
    monkeypatch.setattr(bootstrap_module, "normal_epsilon_star_values", _oracle_values)
    expected = bootstrap_epsilon_star(members, nonmembers, 1.6e-4, **kwargs)
    np.testing.assert_array_equal(fast.replicates, expected.replicates)
    assert (fast.low, fast.high, fast.se) == (expected.low, expected.high, expected.se)
    assert np.isfinite(fast.replicates).all() and fast.high > fast.low


def _whole_grid(z, descending, fit, rates, bounds, delta):
    """The whole-grid slice path on one grid (x and both tails at every point), as before the sparse form."""
    x, small, big, ratio = (np.empty(z.size) for _ in range(4))
    keep, keep_big = np.empty(z.size, dtype=bool), np.empty(z.size, dtype=bool)
    bootstrap_module.standardized_thresholds(z, descending, *fit, out=x)
    return bootstrap_module._monotone_grid_best(x, descending, *rates, bounds, delta, small, big, ratio, keep,
                                                keep_big)


@pytest.mark.parametrize(("chunk", "rounds", "delta", "grid"),
                         [(1, 12, 1e-3, 300), (3, 0, 1.6e-4, 1_000), (64, 1, 0.02, 5_000),
                          (256, 12, 1.6e-4, 100_000), (2048, 3, 6.2e-4, 100_000), (256, 12, 0.3, 1_000),
                          (256, 10**6, 0.45, 1_000), (256, 12, 1e-199, 20_000), (7, 2, 1e-3, 2_000)])
def test_the_sparse_form_equals_the_whole_grid_path_on_every_grid(chunk, rounds, delta, grid, monkeypatch):
    # rounds: ratios evaluated one by one (per replicate, by decreasing ceiling) before the rest at once
    monkeypatch.setattr(bootstrap_module, "CHUNK", chunk)
    monkeypatch.setattr(sparse_grid, "SEQUENTIAL_ROUNDS", rounds)
    z, grids = bootstrap_module._grids(grid, delta)
    n = 40 if grid > 10_000 else 150
    with np.errstate(over="ignore"):  # the sparse form's fits: positive sds, finite means and difference
        fits = [f for f in zip(*_fits(grid + chunk, n), strict=True)
                if f[1] > 0 and f[3] > 0 and np.isfinite(f).all() and np.isfinite(f[0] - f[2])]
    outcomes = set()
    for descending, rates, bounds in grids:
        with np.errstate(all="ignore"):  # overflowing edge fits
            sparse = sparse_grid.replicate_grid_best(z, descending, np.array(fits).T.copy(),
                                                     rates, bounds, delta, chunk)
            whole = [_whole_grid(z, descending, fit, rates, bounds, delta) for fit in fits]
        assert None not in whole and not np.isnan(sparse).any()
        np.testing.assert_array_equal(sparse, whole)
        outcomes |= {"none kept" if v == -np.inf else "1" if v == 1.0 else "above 1" for v in sparse}
    assert {"none kept", "above 1" if delta < 0.4 else "1"} <= outcomes  # every kind of grid exercised


def test_replicates_take_the_sparse_form_and_compute_few_tails(monkeypatch):
    ndtr_points, whole = [], []
    monkeypatch.setattr(sparse_grid, "special",
                        types.SimpleNamespace(ndtr=lambda a, out=None: ndtr_points.append(np.size(a))
                                              or special.ndtr(a, out=out)))
    monkeypatch.setattr(bootstrap_module, "standardized_thresholds", lambda *a, **k: whole.append(1))
    mu_tr, sd_tr, mu_pop, sd_pop = _fits(11, 30)
    fits = (mu_tr[:30], sd_tr[:30], mu_pop[:30], sd_pop[:30])
    values = normal_epsilon_star_values(*fits, 1.6e-4, 100_000)
    np.testing.assert_array_equal(values, _oracle_values(*fits, 1.6e-4, 100_000))
    assert not whole
    assert sum(ndtr_points) < 0.2 * 2 * 30 * 100_000  # the point: most tails never computed


def _dip_ndtr(delta):
    """ndtr with values in (1.3 δ, 2 δ) lowered to δ: a wobble of at most 40% (within a premise
    NDTR_WOBBLE = 0.4) that splits the kept points in two wherever a point lands in (δ, 1.3 δ]."""
    def ndtr(a, out=None):
        values = special.ndtr(a, out=out)
        values[(values > 1.3 * delta) & (values < 2.0 * delta)] = delta
        return values
    return ndtr


def test_a_kept_set_split_by_a_wobble_falls_back_to_the_whole_grid(monkeypatch):
    # Within its premise the sparse form must notice a kept set that is not one run (it computes
    # the segments its bounds leave undecided), give up, and leave it to the whole-grid path
    # (which falls back to the masked form)
    delta = 1e-3
    dip = _dip_ndtr(delta)
    monkeypatch.setattr(sparse_grid, "NDTR_WOBBLE", 0.4)
    for module in (bootstrap_module, sparse_grid):
        monkeypatch.setattr(module, "special", types.SimpleNamespace(ndtr=dip))
    sparse, gave_up = sparse_grid.replicate_grid_best, []
    monkeypatch.setattr(bootstrap_module, "replicate_grid_best",
                        lambda *a: (lambda r: gave_up.extend(np.isnan(r)) or r)(sparse(*a)))
    fits = _fits(7, 150)
    with np.errstate(all="ignore"):
        fast = normal_epsilon_star_values(*fits, delta, 2_000)
        expected = _oracle_values(*fits, delta, 2_000, ndtr=dip)
    np.testing.assert_array_equal(fast, expected)
    assert any(gave_up) and not all(gave_up)


def test_ndtr_wobbles_far_less_than_the_sparse_forms_allow():
    # The sparse forms' one premise: for u <= v, ndtr(u) <= max(ndtr(v), NDTR_FLOOR)·(1 + NDTR_WOBBLE)
    # (bootstrap: u, v <= 0; point estimate: any). Measured worst: 5.4e-13 (x near -38; the tail's
    # exp(-x²/2) inherits the rounding of x²), so this checks 1e-11, 100x below the allowance, on a
    # dense sweep and on runs of consecutive floats, around the branch points of Cephes' ndtr too.
    rng = np.random.default_rng(2)
    branches = [-1.0, -np.sqrt(2.0), -8.0 * np.sqrt(2.0), -37.5, -26.5, -0.0, -1e-300, 1e-300, 1.0, np.sqrt(2.0)]
    centres = np.concatenate([rng.uniform(-40.0, 9.0, 3_000), branches])
    steps = np.arange(-100, 101)
    clusters = (centres[:, None] + steps * np.spacing(np.abs(centres))[:, None]).ravel()
    u = np.sort(np.concatenate([np.linspace(-40.0, 9.0, 2_000_001), clusters]))
    value = special.ndtr(u)
    running_max = np.maximum.accumulate(value)
    allowed = np.maximum(value, sparse_grid.NDTR_FLOOR) * (1.0 + 1e-11)
    assert (running_max <= allowed).all()
    assert 1e-11 * 100 <= sparse_grid.NDTR_WOBBLE
    assert (value[1:] < value[:-1]).any()  # ndtr really is not monotone to the last bit


# --- empirical replicates --------------------------------------------------------------------
# Oracle: ``_eq7_max`` as it was at 903e698 (one array per term, ``np.maximum.reduce`` of the four);
# tolerance: none.


def _oracle_eq7_max(delta, fpr, fnr, tnr, tpr, keep):
    with np.errstate(divide="ignore", invalid="ignore"):
        best = np.maximum.reduce(
            [(tpr - delta) / fpr, (tnr - delta) / fnr, (fnr - delta) / tnr, (fpr - delta) / tpr]
        )
    best = np.where(keep, best, -np.inf).max(axis=-1)
    out = np.log(np.maximum(1.0, best))
    return np.where(keep.any(axis=-1), out, np.nan)


@pytest.mark.parametrize(("n_tr", "n_pop", "delta", "bound"),
                         [(7, 5, 1e-3, 1e-3), (300, 150, 1.6e-4, 1e-3), (40, 40, 0.0, 0.0), (1000, 3, 0.2, 0.25)])
def test_eq7_max_equals_the_stacked_form(n_tr, n_pop, delta, bound):
    # count fractions as the empirical replicates have them: ties, zero rates (0/0 at dropped
    # points), rows where nothing is kept
    rng = np.random.default_rng(n_tr + n_pop)
    c_tr = np.sort(rng.integers(0, n_tr + 1, (60, 50)), axis=1)
    c_pop = np.sort(rng.integers(0, n_pop + 1, (60, 50)), axis=1)
    c_tr[:3], c_pop[:3] = 0, n_pop  # nothing kept
    fpr, tnr = c_pop / n_pop, (n_pop - c_pop) / n_pop
    tpr, fnr = c_tr / n_tr, (n_tr - c_tr) / n_tr
    keep = (fpr > bound) & (fnr > bound) & (tnr > bound) & (tpr > bound)
    fast = bootstrap_module._eq7_max(delta, fpr, fnr, tnr, tpr, keep)
    np.testing.assert_array_equal(fast, _oracle_eq7_max(delta, fpr, fnr, tnr, tpr, keep))
    assert np.isnan(fast).sum() >= 3 and np.isfinite(fast).any()


def test_empirical_bootstrap_replicates_equal_the_oracle_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(8)
    members, nonmembers = np.round(rng.gamma(2.0, 0.4, 300), 2), np.round(rng.exponential(1.0, 150), 2)  # ties
    kwargs = dict(estimator="empirical", resamples=40, seed=3)
    fast = bootstrap_epsilon_star(members, nonmembers, 1.6e-4, **kwargs)
    monkeypatch.setattr(bootstrap_module, "_eq7_max", _oracle_eq7_max)
    monkeypatch.setattr(bootstrap_module, "BLOCK_ELEMENTS", 450 * 7)  # blocks of 7 replicates, uncached
    expected = bootstrap_epsilon_star(members, nonmembers, 1.6e-4, **kwargs)
    np.testing.assert_array_equal(fast.replicates, expected.replicates)


def test_resample_blocks_are_the_replicates_draws_and_read_only():
    idx_tr, idx_pop = bootstrap_module._resample_block(4, 3, 9, 17, 5)
    for row, k in enumerate(range(3, 9)):
        expected_tr, expected_pop = bootstrap_module.resample_indices(4, k, 17, 5)
        np.testing.assert_array_equal(idx_tr[row], expected_tr)
        np.testing.assert_array_equal(idx_pop[row], expected_pop)
    assert not idx_tr.flags.writeable and not idx_pop.flags.writeable
    assert bootstrap_module._resample_block(4, 3, 9, 17, 5)[0] is idx_tr  # cached across estimators
