"""Bootstrap interval of Epsilon* over examples (an extension: Negoescu et al. 2023 report no interval).

Members and non-members are resampled separately with replacement (their sizes,
hence the estimator's ceiling, stay fixed) and eps* is recomputed per resample;
the interval is the percentile interval of the replicates. Replicate k draws its
indices from ``numpy.random.default_rng([seed, k])`` (members first), so a
replicate does not depend on how replicates are batched and can be recomputed
on its own (the tests do exactly that).

Both estimators are vectorized over the examples of a batch of replicates:

* empirical: a resample only reweights the original losses, so the rates at the
  original distinct losses are cumulative sums of the resample counts in the
  pooled sort order. A distinct loss absent from the resample repeats the rates
  of the next smaller present one, or has FPR = TPR = 0 and is filtered, so the
  maximum equals the estimator run on the resampled arrays.
* parametric: min-max transform, Gaussian MLE, then eq. 7 on the quantile grid
  of the fitted Normals. Only the member-grid rates need the Normal CDF; each
  tail pair is taken from one ``ndtr`` call on the non-positive side, which is
  exact there. The grid may be coarser than the point estimate's (recorded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpaudit.metrics.epsilon_star.estimators import (
    EMPIRICAL_FILTER,
    _as_losses,
    _check_filter,
    quantile_levels,
)

# elements of the (replicates x examples) blocks processed at once: bounds memory
# (a handful of float64 arrays of this size) whatever n and B are
BLOCK_ELEMENTS = 2**21


@dataclass(frozen=True)
class BootstrapInterval:
    """Percentile interval of eps* over ``resamples`` replicates (NaN replicates: ``undefined``)."""

    low: float
    high: float
    se: float
    level: float
    resamples: int
    seed: int
    grid_size: int | None
    undefined: int
    replicates: np.ndarray


def resample_indices(seed: int, k: int, n_tr: int, n_pop: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of replicate k: members then non-members, each with replacement."""
    rng = np.random.default_rng([int(seed), int(k)])
    return rng.integers(0, n_tr, n_tr), rng.integers(0, n_pop, n_pop)


def _eq7_max(delta: float, fpr, fnr, tnr, tpr, keep) -> np.ndarray:
    """log max(1, max over kept points of m1..m4) along the last axis; NaN where nothing is kept."""
    with np.errstate(divide="ignore", invalid="ignore"):
        best = np.maximum.reduce(
            [(tpr - delta) / fpr, (tnr - delta) / fnr, (fnr - delta) / tnr, (fpr - delta) / tpr]
        )
    best = np.where(keep, best, -np.inf).max(axis=-1)
    out = np.log(np.maximum(1.0, best))
    return np.where(keep.any(axis=-1), out, np.nan)


def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """Row-wise bincount of a (b, n) index block."""
    b = indices.shape[0]
    flat = indices + (np.arange(b) * n)[:, None]
    return np.bincount(flat.ravel(), minlength=b * n).reshape(b, n)


def _empirical_block(
    idx_tr: np.ndarray, idx_pop: np.ndarray, rank: np.ndarray, ends: np.ndarray,
    n_tr: int, n_pop: int, delta: float, bound: float,
) -> np.ndarray:
    # resample counts laid out directly in the pooled sort order (rank = position of each example)
    c_tr = np.cumsum(_counts(rank[:n_tr][idx_tr], rank.size), axis=1)[:, ends]
    c_pop = np.cumsum(_counts(rank[n_tr:][idx_pop], rank.size), axis=1)[:, ends]
    fpr, tnr = c_pop / n_pop, (n_pop - c_pop) / n_pop
    tpr, fnr = c_tr / n_tr, (n_tr - c_tr) / n_tr
    keep = (fpr > bound) & (fnr > bound) & (tnr > bound) & (tpr > bound)
    return _eq7_max(delta, fpr, fnr, tnr, tpr, keep)


def _transform_rows(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, alpha: float) -> np.ndarray:
    s = (values - lo[:, None]) / (hi - lo)[:, None] + alpha
    return -s - np.log1p(-np.exp(-s))


def normal_epsilon_star_values(
    mu_tr: ArrayLike, sd_tr: ArrayLike, mu_pop: ArrayLike, sd_pop: ArrayLike, delta: float,
    grid_size: int,
) -> np.ndarray:
    """eps* of many pairs of fitted Normals on the ``grid_size`` quantile grid, filter delta.

    Same thresholds and filter as ``normal_epsilon_star``; one value per pair
    (NaN where nothing is kept, or where a fit is degenerate).
    """
    mu_tr, sd_tr, mu_pop, sd_pop = (np.atleast_1d(np.asarray(a, np.float64)) for a in (mu_tr, sd_tr, mu_pop, sd_pop))
    q, q_c, z = quantile_levels(int(grid_size))
    # On a set's own quantile grid its two rates are the exact levels (q, q_c): their
    # filter is the same index range on both grids; only the other set's rates vary.
    own = (q > delta) & (q_c > delta)
    q, q_c, z = q[own], q_c[own], z[own]
    # (rate − δ) of each grid's own rates, the same for every pair: member grid (q, q_c), non-member grid (q_c, q)
    q_d, q_c_d = q - delta, q_c - delta
    out = np.full(mu_tr.shape, np.nan)
    for i in range(mu_tr.size):  # over replicates, never over examples
        if not (sd_tr[i] > 0 and sd_pop[i] > 0):
            continue
        best = -np.inf
        # member grid: FNR = q, TPR = q_c; non-member grid: TNR = q, FPR = q_c
        for x, rates in (
            ((mu_tr[i] + sd_tr[i] * z - mu_pop[i]) / sd_pop[i], (q, q_c, q_d, q_c_d)),
            ((mu_tr[i] - mu_pop[i] - sd_pop[i] * z) / sd_tr[i], (q_c, q, q_c_d, q_d)),
        ):
            best = max(best, _grid_best(x, *rates, delta))
        out[i] = np.log(max(1.0, best)) if best > -np.inf else np.nan
    return out


def _grid_best(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, lo_d: np.ndarray, hi_d: np.ndarray,
               delta: float) -> float:
    """Largest of eq. 7's four ratios over the kept points of one quantile grid (−inf if none):
    ``x`` the other set's standardized thresholds, ``lo``/``hi`` the grid's own two rates and
    ``lo_d``/``hi_d`` the same less δ."""
    # other set's tail beyond the threshold and its complement, each from the
    # non-positive side of one ndtr call (exact there)
    small = special.ndtr(-np.abs(x))
    big = 1.0 - small
    upper = x >= 0
    tail = np.where(upper, small, big)
    body = np.where(upper, big, small)
    keep = (tail > delta) & (body > delta)
    first = int(keep.argmax())
    if not keep[first]:
        return -np.inf
    # x is monotone along the grid, so the kept points are one run: slices, not mask copies
    last = keep.size - int(keep[::-1].argmax())
    kept = slice(first, last) if keep[first:last].all() else keep
    t, b, lo, hi, lo_d, hi_d = (a[kept] for a in (tail, body, lo, hi, lo_d, hi_d))
    # member grid: t, b, lo, hi = FPR, TNR, FNR, TPR, so the four ratios are m1, m2, m3, m4;
    # non-member grid (x mirrored): t, b, lo, hi = FNR, TPR, FPR, TNR, giving m2, m1, m4, m3
    # (no NaN: every denominator exceeds δ ≥ 0, so the largest of the four maxima is the maximum)
    return float(max((hi_d / t).max(), ((b - delta) / lo).max(), (lo_d / b).max(), ((t - delta) / hi).max()))


def _parametric_block(
    tr: np.ndarray, pop: np.ndarray, idx_tr: np.ndarray, idx_pop: np.ndarray, delta: float,
    grid_size: int, alpha: float,
) -> np.ndarray:
    x_tr, x_pop = tr[idx_tr], pop[idx_pop]
    lo = np.minimum(x_tr.min(axis=1), x_pop.min(axis=1))
    hi = np.maximum(x_tr.max(axis=1), x_pop.max(axis=1))
    degenerate = ~(hi > lo)
    hi = np.where(degenerate, lo + 1.0, hi)  # placeholder; these replicates become NaN below
    phi_tr, phi_pop = _transform_rows(x_tr, lo, hi, alpha), _transform_rows(x_pop, lo, hi, alpha)
    values = normal_epsilon_star_values(
        phi_tr.mean(axis=1), phi_tr.std(axis=1), phi_pop.mean(axis=1), phi_pop.std(axis=1),
        delta, grid_size,
    )
    return np.where(degenerate, np.nan, values)


def bootstrap_epsilon_star(
    member_losses: ArrayLike,
    nonmember_losses: ArrayLike,
    delta: float,
    *,
    estimator: str,
    resamples: int = 200,
    level: float = 0.95,
    seed: int = 0,
    grid_size: int = 10**5,
    alpha: float = 1.0,
    empirical_filter: float = EMPIRICAL_FILTER,
) -> BootstrapInterval:
    """Percentile bootstrap interval of the empirical or parametric eps* (see module docstring).

    ``grid_size`` is the parametric replicates' quantile grid (ignored by the
    empirical estimator). ``se`` is the standard deviation of the defined
    replicates; ``undefined`` counts replicates where no threshold was kept
    (the interval is then taken over the defined ones and is NaN if none is).
    """
    if estimator not in ("empirical", "parametric"):
        raise ValueError(f"unknown estimator {estimator!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"bootstrap level must lie in (0, 1), got {level}")
    if int(resamples) < 1:
        raise ValueError(f"bootstrap resamples must be >= 1, got {resamples}")
    _check_filter(empirical_filter, empirical_filter, "empirical_filter")
    if not (np.isfinite(float(alpha)) and float(alpha) > 0):
        raise ValueError(f"alpha (the shift of the pseudo-probability transform) must be a finite number > 0, "
                         f"got {alpha!r}")
    finite = estimator == "parametric"
    tr = _as_losses(member_losses, "member_losses", finite=finite)
    pop = _as_losses(nonmember_losses, "nonmember_losses", finite=finite)
    n_tr, n_pop = tr.size, pop.size
    if estimator == "empirical":
        pooled = np.concatenate([tr, pop])
        order = np.argsort(pooled, kind="stable")
        ordered = pooled[order]
        ends = np.flatnonzero(np.append(ordered[1:] != ordered[:-1], True))
        rank = np.empty(pooled.size, dtype=np.int64)
        rank[order] = np.arange(pooled.size)
    per_block = max(1, BLOCK_ELEMENTS // (n_tr + n_pop))
    replicates = np.empty(int(resamples))
    for start in range(0, int(resamples), per_block):
        ks = range(start, min(start + per_block, int(resamples)))
        drawn = [resample_indices(seed, k, n_tr, n_pop) for k in ks]
        idx_tr = np.stack([d[0] for d in drawn])
        idx_pop = np.stack([d[1] for d in drawn])
        if estimator == "empirical":
            block = _empirical_block(idx_tr, idx_pop, rank, ends, n_tr, n_pop, delta, empirical_filter)
        else:
            block = _parametric_block(tr, pop, idx_tr, idx_pop, delta, grid_size, alpha)
        replicates[ks.start : ks.stop] = block
    defined = replicates[np.isfinite(replicates)]
    tail = (1.0 - level) / 2.0
    if defined.size:
        low, high = np.quantile(defined, [tail, 1.0 - tail])
        se = float(defined.std(ddof=1)) if defined.size > 1 else float("nan")
    else:
        low = high = se = float("nan")
    return BootstrapInterval(
        low=float(low),
        high=float(high),
        se=se,
        level=float(level),
        resamples=int(resamples),
        seed=int(seed),
        grid_size=int(grid_size) if estimator == "parametric" else None,
        undefined=int(replicates.size - defined.size),
        replicates=replicates,
    )
