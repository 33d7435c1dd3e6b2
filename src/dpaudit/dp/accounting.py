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
    acc = _accountant(accountant, sampling, orders)
    acc.compose(dpsgd_event(noise_multiplier, sampling_probability, steps, sampling))
    return np.array([acc.get_epsilon(d) for d in deltas], dtype=np.float64)


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
