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
  The other set's standardized thresholds are monotone along a grid, so their
  sign splits it into two slices and the kept points form one run: replicates
  work on slices of reused scratch arrays, and a ratio is evaluated only on the
  chunks of the run where its upper bound beats the largest value found so far.
  For finite fits (all replicates at once, ``sparse_grid.replicate_grid_best``)
  x and its tails are computed only on those chunks and on the two where the run
  starts and ends: elsewhere the tails at a chunk's two ends bound them, as ndtr
  is monotone to within ``sparse_grid.NDTR_WOBBLE`` (measured and tested; the one
  premise beyond IEEE rounding). Evaluated values come from the same operations
  on the same numbers as in the masked form (``_grid_best``, the last fallback),
  so replicates are bit-identical to it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpaudit.metrics.epsilon_star.estimators import (
    EMPIRICAL_FILTER,
    _as_losses,
    _check_filter,
    levels_increasing,
    quantile_levels,
)
from dpaudit.metrics.epsilon_star.sparse_grid import (
    SPARSE_MIN_DELTA,
    ratio_ceilings,
    replicate_grid_best,
    standardized_thresholds,
)
from dpaudit.progress import Progress

# elements of the (replicates x examples) blocks processed at once: bounds memory
# (a handful of float64 arrays of this size) whatever n and B are
BLOCK_ELEMENTS = 2**21
# grid points per chunk of the replicates' bound-and-prune maximum: coarse enough that the
# per-chunk bookkeeping is small, fine enough that few chunks survive the bound
CHUNK = 256


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


@functools.lru_cache(maxsize=2)
def _resample_block(seed: int, start: int, stop: int, n_tr: int, n_pop: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of replicates [start, stop) stacked, read-only; cached because every (loss,
    estimator) of a run draws the same ones (one block of BLOCK_ELEMENTS at most per entry)."""
    drawn = [resample_indices(seed, k, n_tr, n_pop) for k in range(start, stop)]
    idx_tr, idx_pop = np.stack([d[0] for d in drawn]), np.stack([d[1] for d in drawn])
    idx_tr.flags.writeable = idx_pop.flags.writeable = False
    return idx_tr, idx_pop


def _eq7_max(delta: float, fpr, fnr, tnr, tpr, keep) -> np.ndarray:
    """log max(1, max over kept points of m1..m4) along the last axis; NaN where nothing is kept."""
    # the running maximum of m1..m4 in that order, in place (no stacked copy of the four)
    term = np.empty(np.shape(keep))
    with np.errstate(divide="ignore", invalid="ignore"):
        best = np.divide(tpr - delta, fpr)
        for numerator, denominator in ((tnr, fnr), (fnr, tnr), (fpr, tpr)):
            np.subtract(numerator, delta, out=term)
            np.divide(term, denominator, out=term)
            np.maximum(best, term, out=best)
    np.copyto(best, -np.inf, where=~keep)
    best = best.max(axis=-1)
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
    return counts_epsilon_star(c_tr, c_pop, n_tr, n_pop, delta, bound)


def counts_epsilon_star(c_tr: np.ndarray, c_pop: np.ndarray, n_tr: int, n_pop: int, delta: float,
                        bound: float) -> np.ndarray:
    """The empirical ε* of each row from its members' and non-members' counts at or below each distinct
    loss (the rates of a threshold there), the filter ``bound`` on all four rates."""
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
    z, grids = _grids(int(grid_size), delta)
    # The slice path needs x monotone along the grid: true of z (checked, as ndtri is not
    # promised monotone to the last bit) and kept by every rounded operation, except that
    # inf − inf and 0·inf give NaN, so non-finite fits take the general form.
    monotone_z = z.size > 0 and levels_increasing(int(grid_size))
    # scratch reused by every pair instead of a dozen grid-sized temporaries per grid
    x, small, big, ratio = (np.empty(z.size) for _ in range(4))
    keep, keep_big = np.empty(z.size, dtype=bool), np.empty(z.size, dtype=bool)
    valid = (sd_tr > 0) & (sd_pop > 0)
    with np.errstate(over="ignore", invalid="ignore"):
        finite = valid & np.isfinite(mu_tr) & np.isfinite(sd_tr) & np.isfinite(mu_pop) & np.isfinite(sd_pop) \
            & np.isfinite(mu_tr - mu_pop)
    # each grid's value for the pairs the sparse form decides (NaN: the whole grid decides)
    sparse_values = np.full((len(grids), mu_tr.size), np.nan)
    sparse = np.flatnonzero(finite & monotone_z & (delta >= SPARSE_MIN_DELTA))
    if sparse.size:
        fits = tuple(a[sparse] for a in (mu_tr, sd_tr, mu_pop, sd_pop))
        for g, (descending, rates, bounds) in enumerate(grids):
            sparse_values[g, sparse] = replicate_grid_best(z, descending, fits, rates, bounds, delta, CHUNK)
    out = np.full(mu_tr.shape, np.nan)
    for i in np.flatnonzero(valid):  # over replicates, never over examples
        fit = mu_tr[i], sd_tr[i], mu_pop[i], sd_pop[i]
        best = -np.inf
        for g, (descending, rates, bounds) in enumerate(grids):
            grid = float(sparse_values[g, i])
            if np.isnan(grid):  # the whole grid: every x and every tail
                standardized_thresholds(z, descending, *fit, out=x)
                grid = (_monotone_grid_best(x, descending, *rates, bounds, delta, small, big, ratio, keep,
                                            keep_big) if monotone_z and finite[i] else None)
                grid = _grid_best(x, *rates, delta) if grid is None else grid
            best = max(best, grid)
        out[i] = np.log(max(1.0, best)) if best > -np.inf else np.nan
    return out


def _grids(grid_size: int, delta: float) -> tuple[np.ndarray, tuple]:
    """z of the filtered quantile grid and, for the member then the non-member grid,
    (descending, (lo, hi, lo − δ, hi − δ), per CHUNK (min lo, min hi, max lo − δ, max hi − δ)).

    Member grid: FNR = q, TPR = q_c, thresholds ascending; non-member grid: TNR = q,
    FPR = q_c, thresholds descending (in the other set's standardized units).
    """
    q, q_c, z = quantile_levels(grid_size)
    # On a set's own quantile grid its two rates are the exact levels (q, q_c): their
    # filter is the same index range on both grids; only the other set's rates vary.
    own = (q > delta) & (q_c > delta)
    q, q_c, z = q[own], q_c[own], z[own]
    # (rate − δ) of each grid's own rates, the same for every pair
    q_d, q_c_d = q - delta, q_c - delta
    # the smallest denominators and largest numerators per chunk bound every ratio from above
    starts = np.arange(0, z.size, CHUNK)
    q_min, q_c_min, q_d_max, q_c_d_max = (
        (np.minimum if low else np.maximum).reduceat(a, starts) if z.size else a
        for a, low in ((q, True), (q_c, True), (q_d, False), (q_c_d, False)))
    return z, ((False, (q, q_c, q_d, q_c_d), (q_min, q_c_min, q_d_max, q_c_d_max)),
               (True, (q_c, q, q_c_d, q_d), (q_c_min, q_min, q_c_d_max, q_d_max)))


def _monotone_grid_best(
    x: np.ndarray, descending: bool, lo: np.ndarray, hi: np.ndarray, lo_d: np.ndarray, hi_d: np.ndarray,
    bounds: tuple[np.ndarray, ...], delta: float, small: np.ndarray, big: np.ndarray, ratio: np.ndarray,
    keep: np.ndarray, keep_big: np.ndarray,
) -> float | None:
    """``max(1, _grid_best(...))`` of a NaN-free ``x`` monotone along the grid; None when the
    kept points are not one run, for the caller to fall back on ``_grid_best``.

    ``bounds``: per CHUNK, the minima of ``lo`` and ``hi`` and the maxima of ``lo_d`` and
    ``hi_d``; ``small`` to ``keep_big``: scratch of x's size. Bit-identical to the masked form:
    every ratio evaluated goes through the same operations on the same numbers, and every one
    skipped is provably no larger than the maximum (or than 1, below which none counts).
    """
    run = _kept_run(x, descending, delta, small, big, keep, keep_big)
    if run is None or run[1] == run[2]:
        return None if run is None else -np.inf
    starts, ends, on_upper, ceiling = _ceilings(small, *run, descending, bounds, delta)
    best = 1.0
    for flat in np.argsort(-ceiling, axis=None):
        which, segment = divmod(int(flat), starts.size)
        if not ceiling[which, segment] > best:  # every ratio left is at most this ceiling
            break
        k = slice(int(starts[segment]), int(ends[segment]))
        best = max(best, _segment_max(which, k, bool(on_upper[segment]), small, big, lo, hi, lo_d, hi_d, delta,
                                      ratio))
    return best


def _kept_run(x: np.ndarray, descending: bool, delta: float, small: np.ndarray, big: np.ndarray,
              keep: np.ndarray, keep_big: np.ndarray) -> tuple[int, int, int] | None:
    """Fill ``small`` = ndtr(−|x|) and ``big`` = 1 − small; return (p, first, last): x >= 0 on
    [0, p) (descending) or [p, n) (ascending), the kept points [first, last) (empty if none);
    None when the kept points are not one run (ndtr is not promised monotone to the last bit)."""
    n = x.size
    # rounding is monotone, so x of a monotone grid is monotone too: ``x >= 0`` is one
    # contiguous piece, found by bisection instead of a mask
    if descending:
        p = n - int(np.searchsorted(x[::-1], 0.0))
        lower, upper = slice(p, n), slice(0, p)
    else:
        p = int(np.searchsorted(x, 0.0))
        lower, upper = slice(0, p), slice(p, n)
    # ndtr(-|x|): x itself where negative; on the upper piece -x (for x = -0.0 that is +0.0,
    # and ndtr(+0.0) = ndtr(-0.0) = 0.5)
    special.ndtr(x[lower], out=small[lower])
    np.negative(x[upper], out=small[upper])
    special.ndtr(small[upper], out=small[upper])
    np.subtract(1.0, small, out=big)
    # {tail, body} = {small, big} at every point, so the filter needs no per-piece choice
    np.greater(small, delta, out=keep)
    np.greater(big, delta, out=keep_big)
    np.logical_and(keep, keep_big, out=keep)
    first = int(keep.argmax())
    if not keep[first]:
        return p, first, first
    # forward searches only: argmax of a reversed (negative-stride) view is ~30x slower
    last = first + int(keep[first:].argmin())
    if keep[last]:
        return p, first, n
    return None if keep[last:].any() else (p, first, last)


def _ceilings(small: np.ndarray, p: int, first: int, last: int, descending: bool,
              bounds: tuple[np.ndarray, ...], delta: float) -> tuple[np.ndarray, ...]:
    """Segments [starts, ends) of the kept run, whether each lies where x >= 0, and a (4,
    segments) upper bound of eq. 7's four ratios on each.

    Segments are the CHUNKs cut at the sign change of x, so that on each the other set's tail
    t is one of small (x >= 0) or big (x < 0) and the body b the other. At kept points the
    numerators are positive and the denominators not negative (t, b > δ; own rates > δ), and a
    rounded quotient or difference is monotone in each operand, so
    fl(fl(num) / den) <= fl(fl(max num) / min den) (+inf for a zero denominator on both sides).
    """
    inner = np.arange((first // CHUNK + 1) * CHUNK, last, CHUNK)
    if first < p < last and p % CHUNK:
        at = int(np.searchsorted(inner, p))
        starts = np.concatenate(([first], inner[:at], [p], inner[at:]))
    else:
        starts = np.concatenate(([first], inner))
    on_upper = starts < p if descending else starts >= p
    offsets = starts - first
    s_min = np.minimum.reduceat(small[first:last], offsets)
    s_max = np.maximum.reduceat(small[first:last], offsets)
    ceiling = ratio_ceilings(s_min, s_max, on_upper, starts // CHUNK, bounds, delta)
    return starts, np.concatenate((starts[1:], [last])), on_upper, ceiling


def _segment_max(which: int, k: slice, on_upper: bool, small: np.ndarray, big: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray, lo_d: np.ndarray, hi_d: np.ndarray, delta: float, ratio: np.ndarray) -> float:
    """Largest of ratio ``which`` (m1..m4 of the member grid; m2, m1, m4, m3 of the non-member
    grid) on segment ``k``, by the masked form's operations; ``ratio``: scratch."""
    t, b = (small[k], big[k]) if on_upper else (big[k], small[k])
    r = ratio[k]
    if which == 0:
        np.divide(hi_d[k], t, out=r)
    elif which == 1:
        np.subtract(b, delta, out=r)
        np.divide(r, lo[k], out=r)
    elif which == 2:
        np.divide(lo_d[k], b, out=r)
    else:
        np.subtract(t, delta, out=r)
        np.divide(r, hi[k], out=r)
    return float(r.max())


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
    with Progress(f"eps* bootstrap ({estimator})", total=int(resamples), unit="resamples") as progress:
        for start in range(0, int(resamples), per_block):
            ks = range(start, min(start + per_block, int(resamples)))
            idx_tr, idx_pop = _resample_block(int(seed), ks.start, ks.stop, n_tr, n_pop)
            if estimator == "empirical":
                block = _empirical_block(idx_tr, idx_pop, rank, ends, n_tr, n_pop, delta, empirical_filter)
            else:
                block = _parametric_block(tr, pop, idx_tr, idx_pop, delta, grid_size, alpha)
            replicates[ks.start : ks.stop] = block
            progress.advance(len(ks))
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
