"""The per-target solver of Lowy et al. 2024's Gaussian profiles: ε̃ per row of μ.

``profile_epsilon_per_row`` is the one home of this solve (Prop. 12's per-target step, Recipes A
and B of the pmp family). It lives in ``dp/`` (floor 1) so that the extraction (floor 2), which
sizes Recipe B's partner count from a pilot's standard error (``dpaudit.extract.pmp_pairs``),
and the metrics (``dpaudit.metrics.pmp.bounds`` re-exports it) share it.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.contract.delta import check_delta
from dpaudit.dp import mechanisms

__all__ = ["EXP_UNDERFLOWS_BELOW", "ROW_CHUNK_CELLS", "SE_BLOCK_CELLS", "profile_epsilon_per_row",
           "profile_epsilon_standard_error"]

ROW_CHUNK_CELLS = 1 << 15  # μ cells per pass of the row sums: their buffers stay in the L2 cache
# exp(x) is exactly +0.0 for x below this (e^−745.14 is already half the smallest subnormal);
# np.exp sends such arguments (and −inf) down a slow special-case path, ~15× a normal one.
EXP_UNDERFLOWS_BELOW = -750.0


def profile_epsilon_per_row(mu: np.ndarray, delta: float, *, weights: np.ndarray | None = None,
                            tol: float = 1e-10, max_iter: int = 100, start: np.ndarray | None = None) -> np.ndarray:
    """Per row i, the smallest ε ≥ 0 with mean_j δ_G(ε; μ_ij) ≤ δ.

    This is the per-target step of Prop. 12 (Lowy et al.) and of Recipe B: each
    row holds the Gaussian-profile parameters of one target's partners. The row
    mean is decreasing in ε, so every row has one root; all rows are solved at
    once by Newton's method on log δ̃(ε) (dδ_G/dε = −e^ε Φ(−μ/2 − ε/μ)),
    safeguarded by a bracket that is bisected whenever a step leaves it. Rows
    with mean δ_G(0) ≤ δ get 0. ``weights`` (rows summing to 1) replace the
    plain mean; zero weight masks a cell. The returned value is the bracket's
    upper end, so δ̃(ε̃) ≤ δ holds at the returned ε̃. ``start`` (one guess per row, e.g. the root
    on a subsample of the row's cells): after the pass at ε = 0 each row's Newton iteration starts
    there instead of growing the bracket from 0 (fewer iterations; the same root to ``tol``).
    """
    start = None if start is None else np.asarray(start, dtype=np.float64).reshape(-1)
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    delta = check_delta(delta)
    # The plain mean's weight 1/m as one scalar: w·δ is the same float whether w is a scalar or an array.
    weights = 1.0 / mu.shape[1] if weights is None else np.asarray(weights)
    log_delta = math.log(delta)
    cells = _ProfileCells(mu)

    def log_row_delta(eps_rows, rows, with_slope=False):
        value, slope_sum = cells.row_sums(eps_rows, rows, weights, with_slope=with_slope)
        with np.errstate(divide="ignore"):
            log_value = np.log(value)
        if not with_slope:
            return log_value
        slope = -slope_sum
        with np.errstate(divide="ignore", invalid="ignore"):
            return log_value, slope / value

    n_rows = mu.shape[0]
    out = np.zeros(n_rows)
    zero = np.zeros(n_rows, dtype=bool)  # rows already private at ε = 0 (found in the first pass)
    # Newton from ε = 0 with an open bracket [lo, hi]; hi stays inf until a step overshoots.
    lo = np.zeros(n_rows)
    hi = np.full(n_rows, np.inf)
    x = np.zeros(n_rows)
    root = np.zeros(n_rows)
    active = np.arange(n_rows)
    for iteration in range(max_iter):
        g, slope = log_row_delta(x[active], active, with_slope=True)
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
        # With no upper end yet, a nearly flat log δ̃ (every partner's μ large, δ̃(0) ≈ 1) sends
        # Newton to absurd ε: grow the bracket at most geometrically until a step overshoots.
        new_x = np.where(inside, np.where(open_above, np.minimum(step, expand), step), fallback)
        if iteration == 0 and start is not None:  # after ε = 0 has set the bracket: jump to the guess
            guess = start[active]
            new_x = np.where(above & (guess > 0) & np.isfinite(guess), guess, new_x)
        if np.any(new_x > 1e6):
            raise FloatingPointError("no finite ε bounds the profile: μ is too large")
        # Newton converging from one side never shrinks the bracket, so stop on the step size too.
        done = (np.abs(new_x - x[active]) <= tol * np.maximum(1.0, new_x)) | (np.isfinite(hi_a) & (hi_a - lo_a <= tol * np.maximum(1.0, hi_a)))
        x[active] = new_x
        root[active[done]] = new_x[done]
        active = active[~done]
        if active.size == 0:
            break
    root[active] = hi[active]
    # Nudge the converged root to the feasible side; fall back to the bracket's upper end.
    nudged = root * (1.0 + 10 * tol) + tol
    # A row whose nudged root is not below hi gets hi whatever its check says (min(nudged, hi)
    # = hi; a NaN nudged fails the check), so only the others need δ̃ at the nudged root: Newton
    # mostly ends just above the root (24 rows in 25 on the default run need no check).
    reaches_hi = ~zero & ~(nudged < hi)
    out[reaches_hi] = hi[reaches_hi]
    check = np.flatnonzero(~zero & (nudged < hi))
    if check.size:
        feasible = log_row_delta(nudged[check], check) <= log_delta
        out[check] = np.where(feasible, np.minimum(nudged[check], hi[check]), hi[check])
    return out


class _ProfileCells:
    """The μ matrix of ``profile_epsilon_per_row`` with what δ_G needs of it at every ε.

    The cells are those of ``mechanisms.gaussian_delta_and_slope``: log δ_G from
    ``mechanisms._gaussian_log_terms_into`` on r = μ (r = 1 where μ = 0, whose δ_G and slope
    term are then set to 0, as there), with r/2 and (−r)/2 computed once here instead of at
    every Newton step.

    Each row's cells are held sorted by μ. The arguments of log Φ then run monotonically (or
    up and down once) along a row, so ``scipy.special.log_ndtr``'s branches on them are
    predictable: it costs about 10 instead of 17 ns a cell. Every cell's value is computed
    alone (elementwise ufuncs, lane by lane), so the order changes none of them; the row sums
    put the terms back in μ's order (``unsort``) before ``np.sum``, so they are the same
    floats too.
    """

    def __init__(self, mu: np.ndarray):
        lowest = mu.min(initial=np.inf)  # NaN if any μ is NaN
        if not lowest >= 0:
            raise ValueError("sensitivity must be >= 0 (and sigma > 0)")  # mechanisms.gaussian_delta's check
        n_rows, n_cols = mu.shape
        order = np.argsort(mu, axis=1)
        sorted_mu = np.take_along_axis(mu, order, axis=1)
        # unsort[i, k]: where row i's k-th cell in μ's order sits in the sorted row
        self.unsort = np.empty(mu.shape, dtype=np.intp)
        np.put_along_axis(self.unsort, order, np.arange(n_cols, dtype=np.intp)[None, :], axis=1)
        if lowest > 0:
            self.positive, self.rows_positive = None, np.ones(n_rows, dtype=bool)
            self.r = sorted_mu
        else:
            self.positive = sorted_mu > 0
            self.rows_positive = self.positive.all(axis=1)
            self.r = np.where(self.positive, sorted_mu, 1.0)
        self.half_r = self.r / 2.0
        self.minus_half_r = np.negative(self.half_r)  # (−r)/2.0: division is exact in sign

    def row_sums(self, eps_rows, rows, weights, *, with_slope: bool):
        """(Σ_j w_ij δ_G(ε_i; μ_ij), Σ_j w_ij e^ε_i Φ(−μ_ij/2 − ε_i/μ_ij) or None) for each row i
        of ``rows`` (increasing), ε_i = ``eps_rows``; ``weights`` a scalar or an array whose rows
        are μ's rows.

        Each row is summed whole by ``np.sum`` as one C-contiguous row of a (rows × m) array in
        μ's order, so every sum is the same float whichever rows are evaluated together. Going
        ``ROW_CHUNK_CELLS`` cells at a time through reused buffers keeps the dozen passes over
        each cell in cache and allocates nothing per pass.
        """
        n_cols = self.r.shape[1]
        chunk = max(1, ROW_CHUNK_CELLS // max(n_cols, 1))
        value = np.empty(rows.size)
        slope_sum = np.empty(rows.size) if with_slope else None
        size = min(chunk, rows.size) * n_cols
        buffers = np.empty((7, size))
        positions = np.empty(size, dtype=np.intp)
        underflows = np.empty(size, dtype=bool)
        for start in range(0, rows.size, chunk):
            stop = min(start + chunk, rows.size)
            chunk_rows = rows[start:stop]
            shape = (stop - start, n_cols)
            r, half_r, minus_half_r, log_delta, log_subtracted, scratch, terms = (
                buf[:shape[0] * n_cols].reshape(shape) for buf in buffers)
            unsorted_at = positions[:shape[0] * n_cols].reshape(shape)
            if chunk_rows[-1] - chunk_rows[0] == shape[0] - 1:  # consecutive rows: read them in place
                block = slice(chunk_rows[0], chunk_rows[-1] + 1)
                r, half_r, minus_half_r = self.r[block], self.half_r[block], self.minus_half_r[block]
                unsort = self.unsort[block]
            else:
                for source, target in ((self.r, r), (self.half_r, half_r), (self.minus_half_r, minus_half_r)):
                    np.take(source, chunk_rows, axis=0, out=target, mode="clip")
                unsort = np.take(self.unsort, chunk_rows, axis=0, out=unsorted_at, mode="clip")
            # flat index, into this chunk's sorted cells, of each cell in μ's order
            np.add(unsort, (np.arange(shape[0], dtype=np.intp) * n_cols)[:, None], out=unsorted_at)
            eps = eps_rows[start:stop, None]
            mechanisms._gaussian_log_terms_into(eps, r, half_r, minus_half_r, log_delta, log_subtracted, scratch)
            mu_zero = None if self.rows_positive[chunk_rows].all() else ~self.positive[chunk_rows]
            if mu_zero is not None:
                np.copyto(log_delta, -np.inf, where=mu_zero)
            w = weights if np.ndim(weights) == 0 else np.take(weights, chunk_rows, axis=0)
            deltas = np.take(_exp_in_place(log_delta, underflows), unsorted_at, out=terms, mode="clip")
            value[start:stop] = np.sum(np.multiply(w, deltas, out=deltas), axis=1)
            if with_slope:
                slope_terms = _exp_in_place(log_subtracted, underflows)
                if mu_zero is not None:
                    np.copyto(slope_terms, 0.0, where=mu_zero)
                slope_terms = np.take(slope_terms, unsorted_at, out=terms, mode="clip")
                slope_sum[start:stop] = np.sum(np.multiply(w, slope_terms, out=slope_terms), axis=1)
        return value, slope_sum


def _exp_in_place(values: np.ndarray, underflows: np.ndarray) -> np.ndarray:
    """``np.exp(values, out=values)``, the same floats: arguments below ``EXP_UNDERFLOWS_BELOW``
    (a tenth of the solver's cells: partners far closer than ε needs) get their +0.0 directly
    instead of through np.exp's slow path; ``underflows`` is a boolean buffer of at least
    ``values.size``. np.exp works lane by lane, so leaving some lanes out changes no other."""
    below = np.less(values, EXP_UNDERFLOWS_BELOW, out=underflows[:values.size].reshape(values.shape))
    if not below.any():
        return np.exp(values, out=values)
    np.putmask(values, below, 0.0)
    np.exp(values, out=values)
    np.putmask(values, below, 0.0)
    return values


SE_BLOCK_CELLS = 1 << 20  # μ cells of the standard error's pass at once


def profile_epsilon_standard_error(mu: np.ndarray, eps: np.ndarray, *, population: int | None = None) -> np.ndarray:
    """Delta-method standard error of each row's ε̃ (``profile_epsilon_per_row``) when the row's
    k cells are a random sample, without replacement, of ``population`` partners (None: with
    replacement, or an infinite population).

    ε̃ solves F̂(ε) = mean_j δ_G(ε; μ_j) = δ; at fixed ε, F̂ has variance s²/k·(N − k)/(N − 1)
    (s² the cells' sample variance of δ_G(ε̃; μ_j)), and F̂'s slope is −mean_j e^ε Φ(−μ_j/2 − ε/μ_j)
    (``mechanisms.gaussian_delta_and_slope``), so SE(ε̃) = sd(F̂(ε̃))/|F̂'(ε̃)|. 0 when every
    partner is in the row (k ≥ N) or the cells agree; +inf where the slope is 0 (every μ = 0).
    Rows go ``SE_BLOCK_CELLS`` cells at a time.
    """
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    eps = np.asarray(eps, dtype=np.float64).reshape(-1)
    n_rows, k = mu.shape
    out = np.empty(n_rows)
    finite = 1.0
    if population is not None:
        if k >= int(population):
            return np.zeros(n_rows)
        finite = (int(population) - k) / max(int(population) - 1, 1)
    rows = max(1, SE_BLOCK_CELLS // max(k, 1))
    for start in range(0, n_rows, rows):
        stop = min(start + rows, n_rows)
        value, slope = mechanisms.gaussian_delta_and_slope(eps[start:stop, None], mu[start:stop])
        variance = value.var(axis=1, ddof=1) if k > 1 else np.zeros(stop - start)
        mean_slope = slope.mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[start:stop] = np.where(mean_slope > 0, np.sqrt(variance * finite / k) / mean_slope,
                                       np.where(variance > 0, np.inf, 0.0))
    return out
