"""Privacy accounting for DP-SGD with dp_accounting (no TensorFlow).

Two batch schemes, each with an accounting that is valid for it:

* ``poisson``: every step keeps each example independently with probability q.
  This is the scheme of the Poisson-subsampled Gaussian analysis (Abadi et al.
  2016; Mironov et al. 2019), neighbouring relation add/remove one example.
* ``shuffle``: fixed-size batches from a random permutation, each example in
  exactly one step per epoch. No amplification-by-subsampling theorem covers
  shuffled batches (the ``SampledWithoutReplacementDpEvent`` analysis assumes a
  fresh independent subset every step, and Chua et al. 2024 show Poisson numbers
  underestimate ε for shuffling), so no amplification is claimed. Under
  replace-one neighbours the differing example enters exactly one step per
  epoch with L2 sensitivity 2C on the clipped sum (noise std σC); the other
  steps are post-processing given the data-independent permutation. ε is
  therefore that of ``epochs`` adaptive compositions of a Gaussian mechanism
  with noise multiplier σ/2 (relative to sensitivity 1). RDP composes it with the
  usual conversion; for "pld" the composition is itself one Gaussian with
  noise multiplier σ/(2√epochs), whose exact ε (Balle & Wang 2018, dp_accounting's
  ``gaussian_mechanism``) is what a PLD accountant approximates, without
  discretization and fast at large ε.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpaudit.contract.delta import check_delta

if TYPE_CHECKING:
    from dp_accounting import dp_event

# dp_accounting (and the scipy.signal/scipy.stats it imports, ~0.5 s) is imported by the
# functions that compose an event, not by this module: metric jobs that only read a
# constant or never reach an accountant do not pay for it (issue 23).

ACCOUNTANTS = ("rdp", "pld")
SAMPLINGS = ("poisson", "shuffle")
NEIGHBOURING = {"poisson": "add_or_remove_one", "shuffle": "replace_one"}

PLD_DISCRETIZATION = 1e-4


def _default_orders() -> list[float]:
    """dp_accounting's default RDP orders, also used by tensorflow-privacy's compute_dp_sgd_privacy."""
    from dp_accounting.rdp import rdp_privacy_accountant

    return [float(o) for o in rdp_privacy_accountant.DEFAULT_RDP_ORDERS]


def __getattr__(name: str):
    if name == "DEFAULT_RDP_ORDERS":  # read lazily (module docstring of the imports above)
        return _default_orders()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check(noise_multiplier, sampling_probability, steps, delta, accountant, sampling):
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    if not 0.0 < sampling_probability <= 1.0:
        raise ValueError(f"sampling_probability must be in (0, 1], got {sampling_probability}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    check_delta(delta)
    if noise_multiplier is not None and noise_multiplier < 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")


def dpsgd_event(noise_multiplier: float, q: float, steps: int, sampling: str) -> dp_event.DpEvent:
    """The dp_accounting event the accountant composes for a DP-SGD run (the one place
    σ, q, the step count and the batch scheme become a mechanism; every ε of this
    module and the claimed trade-off curve of ``dpaudit.dp.tradeoff`` read it)."""
    from dp_accounting import dp_event

    if sampling == "poisson":
        step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(noise_multiplier))
        return dp_event.SelfComposedDpEvent(step, int(steps))
    # shuffle: one sensitivity-2C Gaussian per epoch (module docstring); a partial
    # last epoch still touches every example at most once more.
    return dp_event.SelfComposedDpEvent(
        dp_event.GaussianDpEvent(noise_multiplier / 2.0), _shuffle_epochs(q, steps)
    )


def _shuffle_epochs(q: float, steps: int) -> int:
    # With q = B/n an epoch has floor(n/B) steps (the last short batch is dropped);
    # each started epoch can include a given example once.
    per_epoch = max(1, math.floor(1.0 / q + 1e-9))
    return math.ceil(int(steps) / per_epoch)


def _accountant(accountant: str, sampling: str, orders):
    # The shuffle event already encodes replace-one as sensitivity 2 on an
    # un-subsampled Gaussian, for which dp_accounting's add/remove code path is the
    # plain Gaussian composition; Poisson uses add/remove as its theorem states.
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    rel = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    if accountant == "rdp":
        return rdp_privacy_accountant.RdpAccountant(orders, rel)
    return pld_privacy_accountant.PLDAccountant(rel, value_discretization_interval=PLD_DISCRETIZATION)


def dpsgd_epsilon(
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    delta: float,
    accountant: str = "rdp",
    sampling: str = "poisson",
    orders: list[float] | None = None,
) -> dict[str, Any]:
    """ε(δ) of DP-SGD with Gaussian noise multiplier σ, sampling rate q, ``steps`` steps
    (one point of ``dpsgd_profile``, so a run's ε and its profile share one code path)."""
    eps = float(dpsgd_profile(noise_multiplier, sampling_probability, steps, [delta], accountant, sampling,
                              orders)[0])
    orders = list(_default_orders() if orders is None else orders)
    method = "analytic_gaussian" if sampling == "shuffle" and accountant == "pld" else accountant
    return {
        "epsilon": eps,
        "delta": float(delta),
        "noise_multiplier": float(noise_multiplier),
        "sampling_probability": float(sampling_probability),
        "steps": int(steps),
        "accountant": accountant,
        "method": method,
        "orders": orders if accountant == "rdp" else None,
        "pld_discretization": PLD_DISCRETIZATION if accountant == "pld" else None,
        "neighbouring_relation": NEIGHBOURING[sampling],
        "sampling": sampling,
        "amplification": "poisson_subsampling" if sampling == "poisson" else "none",
    }


def dpsgd_profile(
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    deltas,
    accountant: str = "rdp",
    sampling: str = "poisson",
    orders: list[float] | None = None,
) -> np.ndarray:
    """The accountant's privacy profile: ε(δ) at every δ of ``deltas`` (one composition)."""
    deltas = [float(d) for d in deltas]
    for delta in deltas:
        _check(noise_multiplier, sampling_probability, steps, delta, accountant, sampling)
    orders = list(_default_orders() if orders is None else orders)
    if noise_multiplier == 0:
        return np.full(len(deltas), math.inf)
    if sampling == "shuffle" and accountant == "pld":
        from dp_accounting import gaussian_mechanism

        sigma_total = noise_multiplier / 2.0 / math.sqrt(_shuffle_epochs(sampling_probability, steps))
        return np.array([gaussian_mechanism.get_epsilon_gaussian(sigma_total, d) for d in deltas], dtype=np.float64)
    event = dpsgd_event(noise_multiplier, sampling_probability, steps, sampling)
    if accountant == "rdp" and sampling == "poisson" and _prunable_orders(orders, deltas):
        return _rdp_epsilons_pruned(event, noise_multiplier, sampling_probability, int(steps), deltas, orders)
    acc = _accountant(accountant, sampling, orders)
    acc.compose(event)
    return np.array([acc.get_epsilon(d) for d in deltas], dtype=np.float64)


# Exact pruning of RDP orders (issue 23). dp_accounting's ε(δ) is max(0, min over orders
# of ε_α), each ε_α a function of that order's composed RDP r_α alone (``compute_epsilon``:
# r + log(1 - 1/α) - log(δα)/(α - 1), 0 when r < -log(1 - δ²) or r < 0, ∞ for α ≤ 1.01).
# The min over any subset holding the minimising order is the same float, so orders that
# provably cannot hold it are never evaluated. The proof is a lower bound on r_α:
# - Rényi divergence is non-decreasing in its order (van Erven & Harremoës 2014, Thm 3),
#   so r_α ≥ r_β for every evaluated β < α;
# - by data processing, the sampled Gaussian's D_α(μ‖μ0) (μ0 = N(0, σ²),
#   μ = (1 - q)μ0 + qN(1, σ²), Mironov et al. 2019) is at least that of the two
#   Bernoulli laws of one threshold test, a closed form.
# The bounds are shaded by _PRUNE_RTOL (and by the Bernoulli form's rounding) so that
# rounding in dp_accounting's own series never decides; an order whose bound does not
# clear the best ε found is evaluated. Low fractional orders, which cost up to 1,000
# series terms each (and often fail to converge for small σ), are what this skips.
_PRUNE_RTOL = 1e-9
_SEED_ORDERS = (2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 63.0)
# Bernoulli bounds below this (composed) are not trusted: rounding could exceed them.
_BERNOULLI_FLOOR_MIN = 1e-6


def _prunable_orders(orders, deltas) -> bool:
    values = np.asarray(orders, dtype=np.float64)
    return bool(values.size and np.all(np.isfinite(values)) and values.min() > 1.01
                and all(d > 0 for d in deltas))


def _bernoulli_rdp_floor(noise_multiplier: float, q: float, steps: int, orders: np.ndarray) -> np.ndarray:
    """A lower bound on the composed RDP at each order, from threshold tests z > c
    (data processing); 0 where the bound is too small to be trusted."""
    from scipy.special import log_ndtr

    sigma = float(noise_multiplier)
    best = np.zeros(orders.size)
    for c in (0.5, 0.5 + sigma, 0.5 + 2.0 * sigma):
        log_p0 = log_ndtr(-c / sigma)  # μ0(z > c)
        log_p1 = log_ndtr((1.0 - c) / sigma)  # N(1, σ²)(z > c)
        p0 = math.exp(log_p0)
        if not 0.0 < p0 < 1.0:
            continue
        diff = q * (math.exp(log_p1) - p0)  # μ(z > c) - μ0(z > c) ≥ 0
        u, v = diff / p0, -diff / (1.0 - p0)
        # Σ_x μ(x)^α μ0(x)^(1-α) - 1; its first-order terms cancel in exact arithmetic
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            a = p0 * np.expm1(orders * np.log1p(u))
            b = (1.0 - p0) * np.expm1(orders * np.log1p(v))
            rounding = 1e-13 * (np.abs(a) + np.abs(b)) + 1e-300
            excess = np.maximum(a + b - rounding, 0.0)  # NaN (∞ - ∞) stays NaN: no bound
            bound = steps * np.log1p(excess) / (orders - 1.0) * (1.0 - 1e-6)
        best = np.maximum(best, np.where(bound >= _BERNOULLI_FLOOR_MIN, bound, 0.0))
    return best


def _rdp_epsilons_pruned(event, noise_multiplier, q, steps, deltas, orders) -> np.ndarray:
    from dp_accounting.rdp import rdp_privacy_accountant

    values = np.asarray(orders, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    alphas = values[order]
    rdp = np.full(alphas.size, np.nan)  # composed RDP by sorted position; NaN = not evaluated

    def evaluate(positions) -> None:
        positions = np.asarray(positions, dtype=np.int64)
        acc = _accountant("rdp", "poisson", alphas[positions])
        acc.compose(event)
        rdp[positions] = acc.rdp

    seeds = np.flatnonzero(np.isin(alphas, _SEED_ORDERS))
    evaluate(seeds if seeds.size else np.unique(np.linspace(0, alphas.size - 1, 8).astype(np.int64)))
    bernoulli = _bernoulli_rdp_floor(noise_multiplier, q, steps, alphas)
    out = []
    for delta in deltas:
        kl_zero = -math.log1p(-delta * delta)  # r below this: dp_accounting's ε_α is 0
        conversion = np.log1p(-1.0 / alphas) - np.log(delta * alphas) / (alphas - 1.0)
        while True:
            done = ~np.isnan(rdp)
            best, best_order = rdp_privacy_accountant.compute_epsilon(alphas[done], rdp[done], delta)
            if done.all() or best <= 0.0:  # max(0, min) is 0 whatever the other orders hold
                break
            if not math.isfinite(best):  # nothing to prune against
                evaluate(np.flatnonzero(~done))
                continue
            finite = np.where(done & np.isfinite(rdp), rdp, -np.inf)
            below = np.concatenate([[-np.inf], np.maximum.accumulate(finite)[:-1]])
            floor = np.maximum(below, bernoulli) * (1.0 - _PRUNE_RTOL)
            bound = floor + conversion
            cleared = (floor > kl_zero * (1.0 + _PRUNE_RTOL)) & (
                bound - _PRUNE_RTOL * (np.abs(floor) + np.abs(conversion)) > best
            )
            open_ = np.flatnonzero(~done & ~cleared)
            if open_.size == 0:
                break
            # the two open orders nearest the best one: each evaluation raises the floor
            # of every order above it
            at = int(np.searchsorted(alphas, best_order))
            evaluate(open_[np.argsort(np.abs(open_ - at), kind="stable")[:2]])
        out.append(float(best))
    return np.array(out, dtype=np.float64)


def calibrate_noise(
    target_epsilon: float,
    sampling_probability: float,
    steps: int,
    delta: float,
    accountant: str = "rdp",
    sampling: str = "poisson",
    orders: list[float] | None = None,
    rtol: float = 1e-3,
) -> float:
    """Smallest σ (to relative ``rtol`` in ε) whose ε(δ) is ≤ ``target_epsilon``.

    Bisection in log σ: ε is monotone decreasing in σ, and the returned σ is the
    upper end of the final bracket, so ε(σ) ≤ target always holds.
    """
    _check(None, sampling_probability, steps, delta, accountant, sampling)
    target_epsilon = float(target_epsilon)
    if not 0.0 < target_epsilon < math.inf:
        raise ValueError(f"target_epsilon must be finite and > 0, got {target_epsilon}")

    def eps(sigma: float) -> float:
        return dpsgd_epsilon(sigma, sampling_probability, steps, delta, accountant, sampling, orders)[
            "epsilon"
        ]

    lo, hi = 0.1, 1.0
    while eps(hi) > target_epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"no noise multiplier below 1e6 reaches epsilon={target_epsilon}")
    while eps(lo) <= target_epsilon:
        lo, hi = lo / 2.0, lo
        if lo < 1e-4:
            return float(hi)
    e_hi = eps(hi)
    for _ in range(60):
        if target_epsilon - e_hi <= rtol * target_epsilon:
            break
        mid = float(np.sqrt(lo * hi))
        e_mid = eps(mid)
        if e_mid <= target_epsilon:
            hi, e_hi = mid, e_mid
        else:
            lo = mid
    return float(hi)
