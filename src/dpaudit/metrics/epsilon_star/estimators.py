"""Epsilon* estimators (Negoescu et al., arXiv 2307.11280v3): one model instance's empirical privacy.

A global-threshold loss attack is read as a hypothesis test; every threshold gives
an (FPR, FNR) pair and four lower bounds on e^eps (Theorem 3, eq. 7):

    m1 = (TPR - delta) / FPR      m2 = (TNR - delta) / FNR
    m3 = (FNR - delta) / TNR      m4 = (FPR - delta) / TPR

    eps* = ln max(1, max over kept thresholds of m1..m4)        (nats)

Two estimators of the rates are provided (Negoescu et al. 2023, Sec. 3.1 and App. B):

* empirical: every distinct value of the union of losses is a threshold and
  the rates are exact counts; thresholds with FPR or FNR outside (0.001, 0.999)
  are dropped (paper App. B.1);
* parametric (the paper's main metric): pooled min-max, shift alpha = 1,
  p = exp(-s), phi = logit(p); one Gaussian per set by maximum likelihood; the
  rates are evaluated on 10^6 quantile levels of each fitted Normal and
  thresholds with FPR or FNR outside (delta, 1 - delta) are dropped.

All four rates are carried separately (never formed as 1 - x) because the
supremum lives where one of them is tiny; within the filters every rate is at
least delta, so the plain ratios are exact enough in float64.

When no threshold survives the filter, eps* is undefined (NaN), never 0: fully
separated losses leave no kept threshold, and reporting 0 would call the most
exposed model the most private. Each estimator also has a ceiling, the largest
eps* its sample sizes and filter can produce (``empirical_ceiling``,
``parametric_ceiling``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpaudit.contract.delta import check_delta
from dpaudit.metrics.epsilon_star.sparse_grid import (
    SPARSE_MIN_DELTA,
    GridExtremes,
    sparse_normal_extremes,
)

TERMS: tuple[str, ...] = ("m1", "m2", "m3", "m4")
EMPIRICAL_FILTER = 1e-3  # App. B.1: FPR and FNR kept in (0.001, 0.999)
GRID_SIZE = 10**6  # App. B.1: 10^6 quantile levels of each fitted distribution


# ---------------------------------------------------------------------------
# rates and the closed-form LP solution
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rates:
    """Error rates of the test "predict member" at each candidate threshold.

    All four rates are stored because complements computed as 1 - x lose every
    significant digit exactly where the supremum usually sits.
    """

    threshold: np.ndarray
    fpr: np.ndarray
    fnr: np.ndarray
    tpr: np.ndarray
    tnr: np.ndarray

    def __len__(self) -> int:
        return int(self.threshold.shape[0])


@dataclass(frozen=True)
class NormalFit:
    """Maximum-likelihood Normals of the transformed scores phi (members score higher)."""

    mu_tr: float
    sd_tr: float
    mu_pop: float
    sd_pop: float
    lo: float = float("nan")
    hi: float = float("nan")
    alpha: float = float("nan")


@dataclass(frozen=True)
class EpsilonStarResult:
    """eps* and everything needed to audit it.

    ``m`` holds the maximum of each term over the kept thresholds (not floored
    at 1; NaN when nothing is kept). ``term``/``argmax_*`` describe the largest
    of the four even when the floor 1 wins (then eps_star == 0). ``on_boundary``
    says the argmax is the first or last kept threshold, i.e. the supremum may
    lie beyond the filter and eps* is driven by the filter bound.
    ``argmax_denominator`` is the rate in the winning term's denominator (FPR,
    FNR, TNR or TPR for m1..m4): times its set's size it is the number of
    examples the value rests on. When no threshold is kept, eps_star is NaN.
    """

    eps_star: float
    m: tuple[float, float, float, float]
    term: str | None
    argmax_fpr: float
    argmax_fnr: float
    on_boundary: bool | None
    n_kept: int
    grid_size: int
    delta: float
    filter_lo: float
    filter_hi: float
    fit: NormalFit | None = None
    argmax_denominator: float = float("nan")


def epsilon_star_terms(
    fpr: ArrayLike,
    fnr: ArrayLike,
    delta: float,
    tpr: ArrayLike | None = None,
    tnr: ArrayLike | None = None,
) -> np.ndarray:
    """The four bounds m1..m4 at each point, shape (4, k), in TPR/FPR form.

    ``tpr``/``tnr`` default to 1 - fnr / 1 - fpr; pass them when they are known
    more precisely than the complement.
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    fnr = np.asarray(fnr, dtype=np.float64)
    tpr = 1.0 - fnr if tpr is None else np.asarray(tpr, dtype=np.float64)
    tnr = 1.0 - fpr if tnr is None else np.asarray(tnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.stack(
            [(tpr - delta) / fpr, (tnr - delta) / fnr, (fnr - delta) / tnr, (fpr - delta) / tpr]
        )


def epsilon_star_from_rates(
    rates: Rates,
    delta: float,
    *,
    lower: float,
    upper_margin: float | None = None,
    fit: NormalFit | None = None,
) -> EpsilonStarResult:
    """eps* over the thresholds of ``rates`` whose FPR and FNR lie in (lower, 1 - upper_margin).

    The upper side is tested as TNR > upper_margin and TPR > upper_margin, which
    equals FPR, FNR < 1 - upper_margin without the cancellation of 1 - x.
    ``upper_margin`` defaults to ``lower`` (the symmetric filters of the paper);
    Fig. 3 uses lower = 1e-9 and upper_margin = 0.
    """
    if upper_margin is None:
        upper_margin = lower
    # δ = 0 is the pure-ε value of the simulations (Negoescu et al. 2023, Fig. 3; dpaudit.contract.delta).
    delta = check_delta(delta, allow_pure=True)
    lower, upper_margin = _check_filter(lower, upper_margin)
    keep = (
        (rates.fpr > lower)
        & (rates.fnr > lower)
        & (rates.tnr > upper_margin)
        & (rates.tpr > upper_margin)
    )
    n_kept = int(np.count_nonzero(keep))
    common = dict(
        n_kept=n_kept,
        grid_size=len(rates),
        delta=float(delta),
        filter_lo=float(lower),
        filter_hi=float(1.0 - upper_margin),
        fit=fit,
    )
    if n_kept == 0:
        # undefined, not 0: separated losses keep nothing and are the least private case
        nan = float("nan")
        return EpsilonStarResult(nan, (nan, nan, nan, nan), None, nan, nan, None, **common)
    fpr, fnr = rates.fpr[keep], rates.fnr[keep]
    tpr, tnr = rates.tpr[keep], rates.tnr[keep]
    threshold = rates.threshold[keep]
    terms = (
        (tpr - delta) / fpr,
        (tnr - delta) / fnr,
        (fnr - delta) / tnr,
        (fpr - delta) / tpr,
    )
    arg = [int(np.argmax(t)) for t in terms]
    maxima = tuple(float(t[i]) for t, i in zip(terms, arg, strict=True))
    best = int(np.argmax(maxima))
    i = arg[best]
    # Both rates are monotone in the threshold, so the kept set is an interval
    # of thresholds; its ends are where the filter (not the data) binds.
    on_boundary = bool(threshold[i] == threshold.min() or threshold[i] == threshold.max())
    denominator = (fpr, fnr, tnr, tpr)[best]
    return EpsilonStarResult(
        eps_star=float(np.log(max(1.0, maxima[best]))),
        m=maxima,  # type: ignore[arg-type]
        term=TERMS[best],
        argmax_fpr=float(fpr[i]),
        argmax_fnr=float(fnr[i]),
        on_boundary=on_boundary,
        argmax_denominator=float(denominator[i]),
        **common,
    )


def _check_filter(lower: float, upper_margin: float, name: str = "filter") -> tuple[float, float]:
    """A rate filter (lower, 1 − upper_margin) that can keep a threshold: finite bounds ≥ 0 with
    lower + upper_margin < 1. A NaN bound used to keep no threshold, so every ε* was NaN."""
    lo, margin = float(lower), float(upper_margin)
    if not (math.isfinite(lo) and math.isfinite(margin) and lo >= 0 and margin >= 0 and lo + margin < 1):
        raise ValueError(f"{name}: the rate filter ({lower!r}, 1 - {upper_margin!r}) keeps no threshold; "
                         "its bounds must be finite numbers >= 0 with lower + upper_margin < 1 "
                         "(the empirical filter a keeps FPR and FNR in (a, 1 - a), a in [0, 0.5))")
    return lo, margin


def _best_term_value(delta: float, fpr, fnr, tnr, tpr) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.array(
            [(tpr - delta) / fpr, (tnr - delta) / fnr, (fnr - delta) / tnr, (fpr - delta) / tpr]
        )
    return float(np.log(max(1.0, np.nanmax(terms))))


def empirical_ceiling(
    n_tr: int, n_pop: int, delta: float, filter_bound: float = EMPIRICAL_FILTER
) -> float:
    """Largest eps* the empirical estimator can return for n_tr members and n_pop non-members.

    Its rates are count fractions c_pop/n_pop and c_tr/n_tr, and any pair of
    counts is realised by some arrangement of the losses (put c_pop non-members
    and c_tr members below a threshold), so the ceiling is the maximum of eq. 7
    over every pair of counts the filter keeps: each term is monotone in each
    count, so only the extreme kept counts matter. The filter is tested with
    the same float comparisons as ``epsilon_star_from_rates``. NaN when the
    filter keeps no count of one of the sets (then nothing can ever be kept).
    """
    kept = []
    for n in (int(n_tr), int(n_pop)):
        counts = np.arange(n + 1)
        ok = (counts / n > filter_bound) & ((n - counts) / n > filter_bound)
        if not ok.any():
            return float("nan")
        kept.append((int(counts[ok].min()), int(counts[ok].max()), n))
    (tr_lo, tr_hi, n_tr), (pop_lo, pop_hi, n_pop) = kept
    # m1, m2 peak at the fewest non-members and most members below the threshold;
    # m3, m4 at the reverse corner.
    corners = np.array([[pop_lo, tr_hi], [pop_hi, tr_lo]], dtype=np.float64)
    c_pop, c_tr = corners[:, 0], corners[:, 1]
    return _best_term_value(
        delta, c_pop / n_pop, (n_tr - c_tr) / n_tr, (n_pop - c_pop) / n_pop, c_tr / n_tr
    )


def parametric_ceiling(delta: float, lower: float | None = None) -> float:
    """Supremum of the parametric eps* with rates in (lower, 1 - lower): ln((1 - lower - delta) / lower).

    Every term is (rate - delta) / rate' with both rates inside the open filter,
    so none exceeds (1 - lower - delta) / lower (a hard cap of the definition, Negoescu et al. 2023, eq. 7); two
    Normals whose tails cross the filter at the same threshold approach it.
    ``lower`` defaults to delta, the paper's filter.
    """
    lower = delta if lower is None else lower
    return float(np.log(max(1.0, (1.0 - lower - delta) / lower)))


# ---------------------------------------------------------------------------
# empirical estimator
# ---------------------------------------------------------------------------


def _as_losses(values: ArrayLike, name: str, *, finite: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError(f"{name}: no losses")
    bad = ~np.isfinite(arr) if finite else np.isnan(arr)
    if bad.any():
        kind = "non-finite" if finite else "NaN"
        raise ValueError(f"{name}: {int(bad.sum())} {kind} losses")
    return arr


def empirical_rates(member_losses: ArrayLike, nonmember_losses: ArrayLike) -> Rates:
    """Exact rates of "member iff loss <= tau" at every distinct observed loss."""
    tr = np.sort(_as_losses(member_losses, "member_losses", finite=False))
    pop = np.sort(_as_losses(nonmember_losses, "nonmember_losses", finite=False))
    tau = np.unique(np.concatenate([tr, pop]))
    c_pop = np.searchsorted(pop, tau, side="right")
    c_tr = np.searchsorted(tr, tau, side="right")
    n_pop, n_tr = pop.size, tr.size
    # every rate from its own integer count: no 1 - x anywhere
    return Rates(
        threshold=tau,
        fpr=c_pop / n_pop,
        tnr=(n_pop - c_pop) / n_pop,
        tpr=c_tr / n_tr,
        fnr=(n_tr - c_tr) / n_tr,
    )


def empirical_epsilon_star(
    member_losses: ArrayLike,
    nonmember_losses: ArrayLike,
    delta: float,
    *,
    filter_bound: float = EMPIRICAL_FILTER,
) -> EpsilonStarResult:
    """Empirical-CDF eps* (Negoescu et al. 2023, App. B.1): all distinct thresholds, filter (0.001, 0.999)."""
    _check_filter(filter_bound, filter_bound, "filter_bound")
    rates = empirical_rates(member_losses, nonmember_losses)
    return epsilon_star_from_rates(rates, delta, lower=filter_bound)


# ---------------------------------------------------------------------------
# parametric estimator
# ---------------------------------------------------------------------------


def transform_losses(
    member_losses: ArrayLike, nonmember_losses: ArrayLike, alpha: float = 1.0
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """App. B transform: pooled min-max to [0, 1], + alpha, p = e^-s, phi = logit(p).

    Returns (phi_members, phi_nonmembers, lo, hi). phi decreases with the loss,
    so members usually get the larger phi.
    """
    if not (math.isfinite(float(alpha)) and float(alpha) > 0):
        # a NaN alpha used to surface as "degenerate Gaussian fit"
        raise ValueError(f"alpha (the shift of the pseudo-probability transform) must be a finite number > 0, "
                         f"got {alpha!r}")
    tr = _as_losses(member_losses, "member_losses", finite=True)
    pop = _as_losses(nonmember_losses, "nonmember_losses", finite=True)
    lo = float(min(tr.min(), pop.min()))
    hi = float(max(tr.max(), pop.max()))
    if not hi > lo:
        raise ValueError("all losses are identical: the min-max normalisation is undefined")
    scale = hi - lo

    def phi(values: np.ndarray) -> np.ndarray:
        s = (values - lo) / scale + alpha
        # log(p) - log(1 - p) with p = e^-s, written without forming 1 - p
        return -s - np.log1p(-np.exp(-s))

    return phi(tr), phi(pop), lo, hi


def fit_normals(phi_members: ArrayLike, phi_nonmembers: ArrayLike) -> NormalFit:
    """Maximum-likelihood Normal per set (mean, ddof=0 sd), as ``scipy.stats.norm.fit``."""
    tr = np.asarray(phi_members, dtype=np.float64)
    pop = np.asarray(phi_nonmembers, dtype=np.float64)
    return NormalFit(float(tr.mean()), float(tr.std()), float(pop.mean()), float(pop.std()))


@functools.lru_cache(maxsize=4)
def quantile_levels(grid_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Levels q_j = (j + 0.5)/N, their exact complements and ndtri(q); cached, read-only."""
    if int(grid_size) < 1:
        raise ValueError(f"grid_size must be >= 1, got {grid_size!r}")
    j = np.arange(grid_size, dtype=np.float64)
    q = (j + 0.5) / grid_size
    q_c = (grid_size - j - 0.5) / grid_size  # 1 - q_j, correctly rounded
    z = special.ndtri(q)
    for arr in (q, q_c, z):
        arr.flags.writeable = False
    return q, q_c, z


def normal_rates(fit: NormalFit, grid_size: int = GRID_SIZE) -> Rates:
    """Rates of "member iff phi >= c" under the fitted Normals.

    Thresholds are grid_size quantiles of each fitted Normal (2*grid_size in
    total). On a set's own quantiles its rates are the levels themselves, so
    only the other set's rates need the Normal CDF (``ndtr`` for the lower and
    ``ndtr`` of the negated argument for the upper tail).
    """
    if not (fit.sd_tr > 0 and fit.sd_pop > 0):
        raise ValueError(f"degenerate Gaussian fit (sd_tr={fit.sd_tr}, sd_pop={fit.sd_pop})")
    q, q_c, z = quantile_levels(int(grid_size))
    c_tr = fit.mu_tr + fit.sd_tr * z
    c_pop = fit.mu_pop + fit.sd_pop * z
    x_pop = (c_tr - fit.mu_pop) / fit.sd_pop  # member-grid points in non-member units
    x_tr = (c_pop - fit.mu_tr) / fit.sd_tr  # non-member-grid points in member units
    return Rates(
        threshold=np.concatenate([c_tr, c_pop]),
        fpr=np.concatenate([special.ndtr(-x_pop), q_c]),
        tnr=np.concatenate([special.ndtr(x_pop), q]),
        fnr=np.concatenate([q, special.ndtr(x_tr)]),
        tpr=np.concatenate([q_c, special.ndtr(-x_tr)]),
    )


def normal_epsilon_star(
    fit: NormalFit, delta: float, *, grid_size: int = GRID_SIZE, lower: float | None = None
) -> EpsilonStarResult:
    """eps* of two fitted Normals; filter (lower, 1 - lower), lower defaulting to delta.

    ``epsilon_star_from_rates(normal_rates(...))`` to the last bit, with the Normal CDF computed
    only where it decides the result (``sparse_grid``) whenever that form applies.
    """
    lower = delta if lower is None else lower
    params = (fit.mu_tr, fit.sd_tr, fit.mu_pop, fit.sd_pop)
    if fit.sd_tr > 0 and fit.sd_pop > 0 and all(math.isfinite(v) for v in params):
        q, q_c, z = quantile_levels(int(grid_size))
        # the checks and their order of epsilon_star_from_rates
        delta = check_delta(delta, allow_pure=True)
        lower, _ = _check_filter(lower, lower)
        extremes = (sparse_normal_extremes(*params, q, q_c, z, delta, lower)
                    if lower >= SPARSE_MIN_DELTA and levels_increasing(int(grid_size)) else None)
        if extremes is not None:
            return _result_from_extremes(extremes, 2 * z.size, delta, lower, fit)
    return epsilon_star_from_rates(normal_rates(fit, grid_size), delta, lower=lower, fit=fit)


@functools.lru_cache(maxsize=4)
def levels_increasing(grid_size: int) -> bool:
    """Whether ndtri's levels z of ``quantile_levels(grid_size)`` are non-decreasing (not promised
    to the last bit; then so is every filtered subset): the sparse and slice forms need it."""
    z = quantile_levels(grid_size)[2]
    return bool((z[1:] >= z[:-1]).all())


def _result_from_extremes(extremes: GridExtremes, grid_size: int, delta: float, lower: float,
                          fit: NormalFit) -> EpsilonStarResult:
    """The EpsilonStarResult ``epsilon_star_from_rates`` builds, from the grids' extremes."""
    common = dict(n_kept=extremes.n_kept, grid_size=grid_size, delta=float(delta), filter_lo=float(lower),
                  filter_hi=float(1.0 - lower), fit=fit)
    if extremes.n_kept == 0:
        nan = float("nan")
        return EpsilonStarResult(nan, (nan, nan, nan, nan), None, nan, nan, None, **common)
    maxima = extremes.maxima
    best = int(np.argmax(maxima))
    threshold = extremes.threshold
    return EpsilonStarResult(
        eps_star=float(np.log(max(1.0, maxima[best]))),
        m=maxima,
        term=TERMS[best],
        argmax_fpr=extremes.rates[0],
        argmax_fnr=extremes.rates[1],
        on_boundary=bool(threshold == extremes.threshold_min or threshold == extremes.threshold_max),
        argmax_denominator=extremes.rates[best],
        **common,
    )


def parametric_epsilon_star(
    member_losses: ArrayLike,
    nonmember_losses: ArrayLike,
    delta: float,
    *,
    grid_size: int = GRID_SIZE,
    alpha: float = 1.0,
) -> EpsilonStarResult:
    """Parametric eps* (Negoescu et al. 2023, Sec. 3.1 and App. B): transform, Gaussian MLE, 2*grid_size thresholds, filter delta."""
    phi_tr, phi_pop, lo, hi = transform_losses(member_losses, nonmember_losses, alpha)
    base = fit_normals(phi_tr, phi_pop)
    fit = NormalFit(base.mu_tr, base.sd_tr, base.mu_pop, base.sd_pop, lo, hi, float(alpha))
    return normal_epsilon_star(fit, delta, grid_size=grid_size)


# ---------------------------------------------------------------------------
# known distributions (simulations: the "true CDF" curve)
# ---------------------------------------------------------------------------


def distribution_rates(
    member_dist: Any, nonmember_dist: Any, levels: ArrayLike | None = None
) -> Rates:
    """Rates of "member iff loss <= tau" for two frozen scipy distributions of the loss.

    Thresholds are the quantiles of both distributions at ``levels`` (default:
    the 10^6 levels (j + 0.5)/10^6); tails use ``cdf``/``sf`` of each
    distribution, never 1 - x.
    """
    lv = quantile_levels(GRID_SIZE)[0] if levels is None else np.asarray(levels, np.float64).ravel()
    if lv.size == 0 or not np.all((lv > 0) & (lv < 1)):
        raise ValueError(f"levels must be a non-empty array of numbers in (0, 1), no NaN; got {lv.size} value(s)")
    tau = np.concatenate([member_dist.ppf(lv), nonmember_dist.ppf(lv)])
    return Rates(
        threshold=tau,
        fpr=nonmember_dist.cdf(tau),
        tnr=nonmember_dist.sf(tau),
        tpr=member_dist.cdf(tau),
        fnr=member_dist.sf(tau),
    )


def distribution_epsilon_star(
    member_dist: Any,
    nonmember_dist: Any,
    delta: float,
    *,
    levels: ArrayLike | None = None,
    lower: float | None = None,
    upper_margin: float | None = None,
) -> EpsilonStarResult:
    """eps* from the true CDFs of known loss distributions (filter defaults to delta)."""
    lower = delta if lower is None else lower
    rates = distribution_rates(member_dist, nonmember_dist, levels)
    return epsilon_star_from_rates(rates, delta, lower=lower, upper_margin=upper_margin)


