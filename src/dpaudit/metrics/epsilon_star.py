"""Epsilon* (Negoescu et al., arXiv 2307.11280v3): empirical privacy of one model instance.

A global-threshold loss attack is read as a hypothesis test; every threshold gives
an (FPR, FNR) pair and four lower bounds on e^eps (Theorem 3, eq. 7):

    m1 = (TPR - delta) / FPR      m2 = (TNR - delta) / FNR
    m3 = (FNR - delta) / TNR      m4 = (FPR - delta) / TPR

    eps* = ln max(1, max over kept thresholds of m1..m4)        (nats)

Two estimators of the rates are provided (spec seed002 §2.5-2.6):

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

The module also holds the mechanism-level bound of Theorems 2/4 (spec §2.7),
the GMM/KS goodness-of-fit sweep (§2.8), the per-strategy aggregation and the
long-format metric table persisted per model.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import special, stats

__all__ = [
    "EMPIRICAL_FILTER",
    "GRID_SIZE",
    "TERMS",
    "EpsilonStarResult",
    "MechanismBound",
    "NormalFit",
    "Rates",
    "aggregate_strategies",
    "distribution_epsilon_star",
    "distribution_rates",
    "empirical_epsilon_star",
    "empirical_rates",
    "epsilon_star_from_rates",
    "epsilon_star_metrics",
    "epsilon_star_terms",
    "fit_normals",
    "gmm_ks_goodness_of_fit",
    "log_mean_exp",
    "mechanism_epsilon_bar",
    "normal_epsilon_star",
    "normal_rates",
    "parametric_epsilon_star",
    "quantile_levels",
    "transform_losses",
]

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
        nan = float("nan")
        return EpsilonStarResult(0.0, (nan, nan, nan, nan), None, nan, nan, None, **common)
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
    return EpsilonStarResult(
        eps_star=float(np.log(max(1.0, maxima[best]))),
        m=maxima,  # type: ignore[arg-type]
        term=TERMS[best],
        argmax_fpr=float(fpr[i]),
        argmax_fnr=float(fnr[i]),
        on_boundary=on_boundary,
        **common,
    )


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
    """Empirical-CDF eps* (spec §2.5): all distinct thresholds, filter (0.001, 0.999)."""
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
    """eps* of two fitted Normals; filter (lower, 1 - lower), lower defaulting to delta."""
    lower = delta if lower is None else lower
    return epsilon_star_from_rates(normal_rates(fit, grid_size), delta, lower=lower, fit=fit)


def parametric_epsilon_star(
    member_losses: ArrayLike,
    nonmember_losses: ArrayLike,
    delta: float,
    *,
    grid_size: int = GRID_SIZE,
    alpha: float = 1.0,
) -> EpsilonStarResult:
    """Parametric eps* (spec §2.6): transform, Gaussian MLE, 2*grid_size thresholds, filter delta."""
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
    lv = quantile_levels(GRID_SIZE)[0] if levels is None else np.asarray(levels, np.float64)
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


# ---------------------------------------------------------------------------
# mechanism level (Theorems 2 and 4)
# ---------------------------------------------------------------------------


def log_mean_exp(values: ArrayLike) -> float:
    """log mean e^x, computed stably: the Theorem 2 bound log E_theta[e^eps*]."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("log_mean_exp of an empty set")
    return float(special.logsumexp(x) - np.log(x.size))


@dataclass(frozen=True)
class MechanismBound:
    """eps_bar estimate and the per-instance eps* on the same grid and filter."""

    eps_bar: float
    log_mean_exp_eps_star: float
    eps_star: np.ndarray
    n_grid: int
    delta: float


def _fpr_grid(delta: float, n_grid: int) -> tuple[np.ndarray, np.ndarray]:
    """Log-spaced FPR levels in (delta, 1 - delta), dense in both tails, with exact complements."""
    half = max(int(n_grid) // 2, 2)
    small = np.logspace(np.log10(delta), np.log10(0.5), half + 1)[1:]  # (delta, 0.5]
    big_c = small[:-1][::-1]  # TNR levels of the upper half, 0.5 excluded (no duplicate)
    t = np.concatenate([small, 1.0 - big_c])
    t_c = np.concatenate([1.0 - small, big_c])
    return t, t_c


def mechanism_epsilon_bar(
    fits: Sequence[NormalFit], delta: float, *, n_grid: int = 200_000
) -> MechanismBound:
    """Mechanism-level eps_bar over the seeds of one strategy (spec §2.7, eq. 19).

    Each instance's threshold is its own non-member t-quantile, so FPR = t on a
    common grid; the FNR is averaged over instances and eq. 7 is applied to
    (t, mean FNR). The per-instance eps* are recomputed on the same grid with
    the filter on t only, which makes eps_bar <= log-mean-exp(eps*) hold exactly
    (Jensen; every term is convex in the FNR for delta < t < 1 - delta).
    """
    if len(fits) == 0:
        raise ValueError("no fitted instances")
    t, t_c = _fpr_grid(delta, n_grid)
    n_small = (t.size + 1) // 2
    # z = Phi^-1(1 - t), from whichever of t, 1 - t is small
    z = np.concatenate([-special.ndtri(t[:n_small]), special.ndtri(t_c[n_small:])])
    mu_tr = np.array([f.mu_tr for f in fits])[:, None]
    sd_tr = np.array([f.sd_tr for f in fits])[:, None]
    mu_pop = np.array([f.mu_pop for f in fits])[:, None]
    sd_pop = np.array([f.sd_pop for f in fits])[:, None]
    x = (mu_pop + sd_pop * z - mu_tr) / sd_tr
    fnr, tpr = special.ndtr(x), special.ndtr(-x)

    def eps(fnr_: np.ndarray, tpr_: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            m = np.maximum.reduce(
                [(tpr_ - delta) / t, (t_c - delta) / fnr_, (fnr_ - delta) / t_c, (t - delta) / tpr_]
            )
        return np.log(np.maximum(1.0, m.max(axis=-1)))

    per_instance = eps(fnr, tpr)
    eps_bar = float(eps(fnr.mean(axis=0), tpr.mean(axis=0)))
    return MechanismBound(
        eps_bar=eps_bar,
        log_mean_exp_eps_star=log_mean_exp(per_instance),
        eps_star=per_instance,
        n_grid=int(t.size),
        delta=float(delta),
    )


# ---------------------------------------------------------------------------
# goodness of fit (App. B.2, Fig. 6)
# ---------------------------------------------------------------------------


def gmm_ks_goodness_of_fit(
    values: ArrayLike,
    *,
    n_components: Iterable[int] = range(1, 21),
    n_samples: Iterable[int] = range(100, 1001, 100),
    n_repeats: int = 10,
    seed: int = 0,
) -> pd.DataFrame:
    """KS p-values of GMM fits against held-out values (spec §2.8).

    Per repeat, one random block of max(n_samples) values is held out and the
    GMMs are fitted to the rest; each n_samples compares the first n_samples of
    that block with n_samples draws from the GMM (``scipy.stats.ks_2samp``).
    Sharing one fit across n_samples (the paper refits per n_samples) cuts the
    fits tenfold and changes the fitting set by at most max(n_samples) points.

    Returns columns n_components, n_samples, rep (int64), ks_stat, p_value.
    """
    from sklearn.mixture import GaussianMixture

    x = np.asarray(values, dtype=np.float64).ravel()
    comps = [int(k) for k in n_components]
    sizes = [int(s) for s in n_samples]
    block = max(sizes)
    if x.size <= block + max(comps):
        raise ValueError(
            f"{x.size} values are too few to hold out {block} and fit {max(comps)} components"
        )
    rows: list[tuple[int, int, int, float, float]] = []
    for rep in range(n_repeats):
        rng = np.random.default_rng([seed, rep])
        perm = rng.permutation(x.size)
        held, fit_set = x[perm[:block]], x[perm[block:]].reshape(-1, 1)
        for k in comps:
            gmm = GaussianMixture(n_components=k, random_state=int(rng.integers(2**31))).fit(
                fit_set
            )
            weights = gmm.weights_ / gmm.weights_.sum()
            means = gmm.means_.ravel()
            sds = np.sqrt(gmm.covariances_.reshape(k, -1)[:, 0])
            for ns in sizes:
                comp = rng.choice(k, size=ns, p=weights)
                draws = rng.normal(means[comp], sds[comp])
                res = stats.ks_2samp(held[:ns], draws)
                rows.append((k, ns, rep, float(res.statistic), float(res.pvalue)))
    frame = pd.DataFrame(rows, columns=["n_components", "n_samples", "rep", "ks_stat", "p_value"])
    return frame.astype(
        {
            "n_components": "int64",
            "n_samples": "int64",
            "rep": "int64",
            "ks_stat": "float64",
            "p_value": "float64",
        }
    )


# ---------------------------------------------------------------------------
# per-model long-format table
# ---------------------------------------------------------------------------

_METRIC_COLUMNS: dict[str, str] = {
    "metric": "str",
    "value": "float64",
    "loss": "str",
    "estimator": "str",
    "term": "str",
    "argmax_fpr": "float64",
    "argmax_fnr": "float64",
    "on_boundary": "boolean",
    "mu_tr": "float64",
    "sd_tr": "float64",
    "mu_pop": "float64",
    "sd_pop": "float64",
    "lo": "float64",
    "hi": "float64",
    "alpha": "float64",
    "delta": "float64",
    "filter_lo": "float64",
    "filter_hi": "float64",
    "n_tr": "int64",
    "n_pop": "int64",
    "grid_size": "int64",
    "n_kept": "int64",
}


def _result_rows(
    res: EpsilonStarResult, loss: str, estimator: str, n_tr: int, n_pop: int
) -> list[dict]:
    nan = float("nan")
    fit = res.fit or NormalFit(nan, nan, nan, nan)
    params = {
        "loss": loss,
        "estimator": estimator,
        "term": res.term,
        "argmax_fpr": res.argmax_fpr,
        "argmax_fnr": res.argmax_fnr,
        "on_boundary": res.on_boundary,
        "mu_tr": fit.mu_tr,
        "sd_tr": fit.sd_tr,
        "mu_pop": fit.mu_pop,
        "sd_pop": fit.sd_pop,
        "lo": fit.lo,
        "hi": fit.hi,
        "alpha": fit.alpha,
        "delta": res.delta,
        "filter_lo": res.filter_lo,
        "filter_hi": res.filter_hi,
        "n_tr": n_tr,
        "n_pop": n_pop,
        "grid_size": res.grid_size,
        "n_kept": res.n_kept,
    }
    values = [("eps_star", res.eps_star), *zip(TERMS, res.m, strict=True)]
    return [{"metric": name, "value": value, **params} for name, value in values]


def epsilon_star_metrics(
    member_losses_by_variant: Mapping[str, ArrayLike],
    nonmember_losses_by_variant: Mapping[str, ArrayLike],
    delta: float,
    *,
    grid_size: int = GRID_SIZE,
    alpha: float = 1.0,
    empirical_filter: float = EMPIRICAL_FILTER,
    estimators: Sequence[str] = ("empirical", "parametric"),
) -> pd.DataFrame:
    """Long-format eps* table of one model: one row per (loss, estimator, metric).

    Metrics are eps_star and m1..m4 (each term's maximum over kept thresholds,
    not floored; NaN when no threshold survives the filter). Every row carries
    the parameters of its computation; fit columns (mu/sd, lo, hi, alpha) are
    NaN for the empirical estimator. Column dtypes are fixed (see
    ``_METRIC_COLUMNS``) so frames of many runs concatenate cleanly.
    """
    if set(member_losses_by_variant) != set(nonmember_losses_by_variant):
        raise ValueError("member and non-member loss variants differ")
    unknown = set(estimators) - {"empirical", "parametric"}
    if unknown:
        raise ValueError(f"unknown estimators {sorted(unknown)}")
    rows: list[dict] = []
    for loss in member_losses_by_variant:
        tr = np.asarray(member_losses_by_variant[loss], dtype=np.float64).ravel()
        pop = np.asarray(nonmember_losses_by_variant[loss], dtype=np.float64).ravel()
        for estimator in estimators:
            if estimator == "empirical":
                res = empirical_epsilon_star(tr, pop, delta, filter_bound=empirical_filter)
            else:
                res = parametric_epsilon_star(tr, pop, delta, grid_size=grid_size, alpha=alpha)
            rows.extend(_result_rows(res, str(loss), estimator, tr.size, pop.size))
    frame = pd.DataFrame(rows, columns=list(_METRIC_COLUMNS))
    return frame.astype(_METRIC_COLUMNS)


# ---------------------------------------------------------------------------
# strategy aggregation (Figs 1-2)
# ---------------------------------------------------------------------------


def aggregate_strategies(
    frame: pd.DataFrame,
    by: Sequence[str],
    *,
    eps_col: str = "eps_star",
    util_col: str = "utility",
    pareto_within: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mean/min/max over seeds of eps* and utility per strategy (spec §2.8, §9.13).

    ``frame`` has one row per model. Adds n_models and log_mean_exp_eps_star
    (Theorem 2's bound). With ``pareto_within`` (columns, [] = all rows as one
    plane) the strategy means are also marked ``nondominated`` and
    ``on_pareto`` (vertex of the upper convex hull; see ``dpaudit.metrics.pareto``).
    """
    from dpaudit.metrics.pareto import pareto_frontier

    by = list(by)
    grouped = frame.groupby(by, sort=True, dropna=False)
    out = grouped.agg(
        n_models=(eps_col, "size"),
        eps_star_mean=(eps_col, "mean"),
        eps_star_min=(eps_col, "min"),
        eps_star_max=(eps_col, "max"),
        util_mean=(util_col, "mean"),
        util_min=(util_col, "min"),
        util_max=(util_col, "max"),
        log_mean_exp_eps_star=(eps_col, log_mean_exp),
    ).reset_index()
    out = out.astype(
        {
            "n_models": "int64",
            **{
                c: "float64"
                for c in (
                    "eps_star_mean",
                    "eps_star_min",
                    "eps_star_max",
                    "util_mean",
                    "util_min",
                    "util_max",
                    "log_mean_exp_eps_star",
                )
            },
        }
    )
    if pareto_within is not None:
        nondominated = np.zeros(len(out), dtype=bool)
        on_pareto = np.zeros(len(out), dtype=bool)
        keys = list(pareto_within)
        groups = (
            out.groupby(keys, sort=False, dropna=False).indices
            if keys
            else {(): np.arange(len(out))}
        )
        for idx in groups.values():
            idx = np.asarray(idx)
            front = pareto_frontier(
                out["eps_star_mean"].to_numpy()[idx], out["util_mean"].to_numpy()[idx]
            )
            nondominated[idx] = front.nondominated
            on_pareto[idx] = front.on_frontier
        out["nondominated"] = nondominated
        out["on_pareto"] = on_pareto
    return out


# ---------------------------------------------------------------------------
# one trained model, as the workflow's metric rule computes it
# ---------------------------------------------------------------------------

LOSS_VARIANTS = {"logit": "loss_logit", "ce": "loss_ce"}


def epsilon_star_run_metrics(
    outputs: pd.DataFrame,
    *,
    members_split: str,
    nonmembers_split: str,
    utility_split: str,
    classes: int,
    delta: float,
    grid_size: int = GRID_SIZE,
    alpha: float = 1.0,
    empirical_filter: float = EMPIRICAL_FILTER,
) -> pd.DataFrame:
    """ε* of one model on both loss variants and both estimators, plus its utility row.

    Members are the training split, the population sample is the non-member split
    (seed002 §3: all of them, unbalanced). δ is the run's δ (the one DP training used).
    """
    from dpaudit.metrics.utility import utility

    for column in ("split", *LOSS_VARIANTS.values()):
        if column not in outputs.columns:
            raise ValueError(f"outputs lack column {column!r}")
    members = outputs[outputs["split"] == members_split]
    nonmembers = outputs[outputs["split"] == nonmembers_split]
    if members.empty or nonmembers.empty:
        raise ValueError(
            f"need members ({members_split!r}: {len(members)}) and non-members "
            f"({nonmembers_split!r}: {len(nonmembers)})"
        )
    for column in LOSS_VARIANTS.values():
        bad = ~np.isfinite(outputs[column].to_numpy(dtype=np.float64))
        if bad.any():
            ids = outputs.loc[bad, "example_id"].head(20).tolist()
            raise ValueError(f"non-finite {column} for example_id(s) {ids}")
    frame = epsilon_star_metrics(
        {name: members[col].to_numpy(np.float64) for name, col in LOSS_VARIANTS.items()},
        {name: nonmembers[col].to_numpy(np.float64) for name, col in LOSS_VARIANTS.items()},
        delta,
        grid_size=grid_size,
        alpha=alpha,
        empirical_filter=empirical_filter,
    )
    measured = utility(outputs, utility_split=utility_split, classes=classes)
    # The utility row has no grid or kept-point counts: counts become nullable here
    # (NA = not applicable), the same for every run, so run frames still concatenate.
    dtypes = {k: ("Int64" if v == "int64" else v) for k, v in _METRIC_COLUMNS.items()}
    utility_row = pd.DataFrame([{"metric": "utility", "value": measured["utility"], "delta": delta,
                                 "n_pop": measured["n_utility"]}])
    frame = pd.concat([frame.astype(dtypes), utility_row.astype({k: dtypes[k] for k in utility_row})],
                      ignore_index=True)
    frame["utility_kind"] = pd.array([None] * (len(frame) - 1) + [measured["utility_kind"]], dtype="string")
    return frame.astype(dtypes)
