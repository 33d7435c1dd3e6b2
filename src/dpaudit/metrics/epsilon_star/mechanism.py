"""Mechanism-level bound of Epsilon* (Negoescu et al., Theorems 2 and 4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpaudit.metrics.epsilon_star.estimators import NormalFit


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
    """Mechanism-level eps_bar over the seeds of one strategy (Negoescu et al. 2023, eq. 19).

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


