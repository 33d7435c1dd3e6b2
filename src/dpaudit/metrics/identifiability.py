"""Identifiability scores of Bernau et al. (2021): the DI adversary's posterior belief
ρ_β and expected advantage ρ_α, their inverses, and RDP → (ε, δ) for full-batch DP-SGD.

The DI adversary knows both neighbouring datasets D and D′ and every released noisy
gradient, and decides which one was trained on. Its final belief in the true dataset
is at most ρ_β = expit(ε) (Theorem 1; with probability ≥ 1 − δ for (ε, δ)-DP), and its
expected advantage against the classically calibrated Gaussian mechanism is
ρ_α = 2Φ(ε / (2√(2 ln(1.25/δ)))) − 1 (Theorem 2), or 2Φ(√k / (2z)) − 1 when the k
full-batch steps are composed with RDP (Section 4.4). Neither is a bound for every
(ε, δ)-DP mechanism: that bound is (e^ε − 1 + 2δ)/(e^ε + 1)
(``dpaudit.dp.hypothesis.max_advantage``, row ``advantage_bound_any_dp``).

Every ε here carries the conversion that produced it (``CONVERSIONS``):

* ``legacy``: min over tensorflow-privacy's historical order grid
  ``LEGACY_ORDERS`` of R(α) + ln(1/δ)/(α − 1): the numbers of the paper's tables;
* ``continuous``: the same bound minimised over every real α > 1, closed form
  ε = M + 2√(M ln(1/δ)) for R(α) = αM;
* ``dp_accounting``: dp-accounting's current (tighter) RDP conversion, through
  ``dpaudit.dp.accounting``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from dpaudit.contract.delta import check_delta
from dpaudit.dp import accounting
from dpaudit.dp.composition import rdp_to_dp
from dpaudit.dp.hypothesis import max_advantage

CONVERSIONS = ("legacy", "continuous", "dp_accounting")
# tensorflow-privacy's order grid before 2020 (compute_dp_sgd_privacy), which the
# authors' code used: 1.1, 1.2, ..., 10.9 and 12, ..., 63.
LEGACY_ORDERS: tuple[float, ...] = tuple([1.0 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)))
# Bracket of the authors' bisection for the noise multiplier (scipy.optimize.bisect on [0.01, 2048]).
Z_BRACKET = (0.01, 2048.0)


def _out(value):
    value = np.asarray(value, dtype=np.float64)
    return float(value) if value.ndim == 0 else value


# ------------------------------------------------------------------ beliefs


def rho_beta(eps):
    """Maximum posterior belief 1/(1 + e^{−ε}) of the DI adversary (Theorem 1)."""
    eps = np.asarray(eps, dtype=np.float64)
    if np.any(eps < 0):
        raise ValueError(f"eps must be >= 0, got {eps}")
    return _out(special.expit(eps))


def rho_beta_expected(eps, delta):
    """δ-adjusted belief bound ρ_β + δ(1 − ρ_β) (the authors' Fig. 3a curve).

    Written as 1 − (1 − δ)·expit(−ε) so it stays exact when ρ_β is close to 1.
    """
    eps = np.asarray(eps, dtype=np.float64)
    # δ = 0 is the pure-ε belief bound ρ_β (dpaudit.contract.delta).
    delta = np.asarray(check_delta(delta, allow_pure=True), dtype=np.float64)
    return _out(1.0 - (1.0 - delta) * special.expit(-eps))


def epsilon_from_rho_beta(rho):
    """ε = logit ρ_β = ln ρ − ln(1 − ρ) (Eq. 10), for ρ_β ∈ [½, 1)."""
    rho = np.asarray(rho, dtype=np.float64)
    if np.any(~((rho >= 0.5) & (rho < 1.0))):
        raise ValueError(f"rho_beta must be in [0.5, 1), got {rho}")
    return _out(np.log(rho) - np.log1p(-rho))


# --------------------------------------------------------------- advantages


def _gaussian_scale(delta) -> np.ndarray:
    """√(2 ln(1.25/δ)): the classical calibration's σ/Δ·ε (Eq. 1)."""
    return np.sqrt(2.0 * np.log(1.25 / check_delta(delta)))


def _norm_sf(x):
    """Φ(−x), the standard Normal's upper tail: what ``scipy.stats.norm.sf`` computes (scipy.stats,
    a third of a second to import, stays out of the per-run job; tests compare the two)."""
    return special.ndtr(-np.asarray(x, dtype=np.float64))


def _ks_normal_pvalue(eta: np.ndarray) -> float:
    """p-value of the KS test of ``eta`` against N(0, 1) (NaN below two values)."""
    if eta.size <= 1:
        return math.nan
    from scipy import stats  # the audit's summaries only

    return float(stats.kstest(eta, "norm").pvalue)


def advantage_from_distance(distance):
    """2Φ(x/2) − 1 for Mahalanobis distance x between two equal-covariance Gaussians
    (Eq. 14), computed as 1 − 2Φ(−x/2) so values near 1 keep their digits."""
    distance = np.asarray(distance, dtype=np.float64)
    return _out(1.0 - 2.0 * _norm_sf(distance / 2.0))


def rho_alpha_thm2(eps, delta):
    """Expected advantage against the Gaussian mechanism calibrated classically to (ε, δ):
    2Φ(ε / (2√(2 ln(1.25/δ)))) − 1 (Theorem 2). The paper's parameter table.

    A property of that one mechanism, not a bound for (ε, δ)-DP: the analytically
    calibrated Gaussian reaches 0.369 at (2.197, 0.01), where this gives 0.276."""
    eps = np.asarray(eps, dtype=np.float64)
    return advantage_from_distance(eps / _gaussian_scale(delta))


def epsilon_from_rho_alpha(rho_alpha, delta):
    """Inverse of Theorem 2 (Eq. 15): ε = 2√(2 ln(1.25/δ))·Φ⁻¹((ρ_α + 1)/2).

    Negative ρ_α (an adversary worse than guessing, by chance) gives a negative ε;
    callers clamp and flag it (``clamp_epsilon``).
    """
    rho_alpha = np.asarray(rho_alpha, dtype=np.float64)
    if np.any(~((rho_alpha > -1) & (rho_alpha < 1))):
        raise ValueError(f"rho_alpha must be in (-1, 1), got {rho_alpha}")
    return _out(2.0 * _gaussian_scale(delta) * (0.0 - special.ndtri((1.0 - rho_alpha) / 2.0)))


def rho_alpha_rdp(steps, noise_multiplier, sensitivity=1.0):
    """Expected advantage of k full-batch steps with noise multiplier z composed as one
    k-dimensional Gaussian query: 2Φ(√k/(2z)) − 1 (Section 4.4).

    ``sensitivity`` is the L2 sensitivity of the clipped-gradient sum in units of C:
    1 for add/remove-one neighbours (the paper's formula), 2 for replace-one, which
    gives 2Φ(√k/z) − 1.
    """
    steps = np.asarray(steps, dtype=np.float64)
    z = np.asarray(noise_multiplier, dtype=np.float64)
    return advantage_from_distance(np.asarray(sensitivity, dtype=np.float64) * np.sqrt(steps) / z)


def rho_alpha_heterogeneous(sensitivities, sigmas):
    """Expected advantage when step t has sensitivity S_t and noise σ_t:
    2Φ(½√(Σ_t S_t²/σ_t²)) − 1 (the per-run prediction of GS runs)."""
    ratio = np.asarray(sensitivities, dtype=np.float64) / np.asarray(sigmas, dtype=np.float64)
    return advantage_from_distance(np.sqrt(np.sum(ratio**2, axis=-1)))


def yeom_bound(eps):
    """Yeom et al.'s membership advantage bound min(1, e^ε − 1) (Proposition 2), proved
    for pure ε-DP (Yeom et al. 2018, Theorem 1); not a bound when δ > 0."""
    eps = np.asarray(eps, dtype=np.float64)
    with np.errstate(over="ignore"):
        return _out(np.minimum(1.0, np.expm1(eps)))


def clamp_epsilon(eps):
    """(max(ε, 0), flag): ε′ from a non-positive advantage means "no leakage seen"."""
    eps = np.asarray(eps, dtype=np.float64)
    return _out(np.maximum(eps, 0.0)), np.asarray(eps <= 0)


# ------------------------------------------------------------- RDP → (ε, δ)


def rdp_epsilon(rdp_slope: float, delta: float, conversion: str = "legacy") -> dict:
    """(ε, δ) of a mechanism whose RDP curve is R(α) = α·M (Gaussian compositions).

    M = Σ_t S_t²/(2σ_t²); k full-batch steps with multiplier z give M = k/(2z²).
    Returns ε, the conversion and the order that attains it (NaN for dp_accounting,
    whose own grid is recorded by the accountant).
    """
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {CONVERSIONS}, got {conversion!r}")
    delta = float(check_delta(delta))
    m = float(rdp_slope)
    if not m >= 0:
        raise ValueError(f"RDP slope must be >= 0, got {rdp_slope}")
    log_inv_delta = math.log(1.0 / delta)
    if m == 0:
        return {"epsilon": 0.0, "conversion": conversion, "order": math.inf}
    if conversion == "legacy":
        orders = np.asarray(LEGACY_ORDERS)
        eps, order = rdp_to_dp(orders, orders * m, delta, conversion="classic")
    elif conversion == "continuous":
        eps = m + 2.0 * math.sqrt(m * log_inv_delta)
        order = 1.0 + math.sqrt(log_inv_delta / m)
    else:
        # One Gaussian with multiplier 1/√(2M) has exactly this RDP curve.
        eps = accounting.dpsgd_epsilon(1.0 / math.sqrt(2.0 * m), 1.0, 1, delta, "rdp", "poisson")["epsilon"]
        order = math.nan
    return {"epsilon": float(eps), "conversion": conversion, "order": float(order)}


def full_batch_epsilon(noise_multiplier: float, steps: int, delta: float, conversion: str = "legacy") -> float:
    """ε of k full-batch (q = 1) DP-SGD steps with multiplier z: R(α) = kα/(2z²)."""
    z = float(noise_multiplier)
    if not z > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier}")
    return rdp_epsilon(int(steps) / (2.0 * z * z), delta, conversion)["epsilon"]


def heterogeneous_epsilon(effective_multipliers, delta: float, conversion: str = "legacy") -> float:
    """ε′ from per-step effective multipliers z′_t = σ_t/LS_t (Section 5.3 (i)):
    R(α) = α Σ_t 1/(2 z′_t²)."""
    z = np.asarray(effective_multipliers, dtype=np.float64)
    return rdp_epsilon(float(np.sum(0.5 / z**2)), delta, conversion)["epsilon"]


def _rho_beta_gap(rho: float, steps: int, delta: float, conversion: str):
    """(ε target, gap(log z) = ε(z) − ε target); refuses a target no z in ``Z_BRACKET``
    reaches, saying why (the legacy grid's largest order 63 puts a floor
    ln(1/δ)/62 under ε however large z is)."""
    eps = float(epsilon_from_rho_beta(rho))
    if eps <= 0:
        raise ValueError("rho_beta = 0.5 (eps = 0) needs infinite noise")

    def gap(log_z: float) -> float:
        return full_batch_epsilon(math.exp(log_z), steps, delta, conversion) - eps

    if gap(math.log(Z_BRACKET[1])) > 0:
        why = (f"; the legacy order grid (alpha <= 63) keeps eps >= ln(1/delta)/62 = {math.log(1 / delta) / 62:.4g} "
               "for every z: use conversion continuous or dp_accounting, a larger rho_beta or a larger delta"
               if conversion == "legacy" else "")
        raise ValueError(f"rho_beta={rho:g} (eps={eps:.4g}) is unreachable at delta={delta:g}, k={int(steps)} with the "
                         f"{conversion} conversion: no noise multiplier in {Z_BRACKET} brings eps that low{why}")
    if gap(math.log(Z_BRACKET[0])) < 0:
        raise ValueError(f"rho_beta={rho:g} (eps={eps:.4g}) at delta={delta:g}, k={int(steps)} ({conversion}) needs "
                         f"a noise multiplier below {Z_BRACKET[0]}")
    return eps, gap


def check_rho_beta_reachable(rho: float, steps: int, delta: float, conversion: str = "legacy") -> None:
    """Raise ValueError (with the reason) unless ``noise_multiplier_for_rho_beta`` can
    solve this target: cheap, two evaluations, for config-time checks."""
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {CONVERSIONS}, got {conversion!r}")
    if conversion == "continuous":  # closed form: every ε > 0 has a z
        noise_multiplier_for_rho_beta(rho, steps, delta, conversion)
    else:
        _rho_beta_gap(rho, steps, delta, conversion)


def noise_multiplier_for_rho_beta(
    rho: float, steps: int, delta: float, conversion: str = "legacy", xtol: float = 1e-10
) -> float:
    """z such that k full-batch steps reach ε = logit ρ_β (root in log z).

    The continuous conversion has the closed-form inverse M = (√(L + ε) − √L)²,
    z = √(k/(2M)), L = ln(1/δ). The others are solved on the authors' bracket.
    """
    if conversion == "continuous":
        eps = float(epsilon_from_rho_beta(rho))
        if eps <= 0:
            raise ValueError("rho_beta = 0.5 (eps = 0) needs infinite noise")
        log_inv_delta = math.log(1.0 / float(check_delta(delta)))
        m = (math.sqrt(log_inv_delta + eps) - math.sqrt(log_inv_delta)) ** 2
        return math.sqrt(int(steps) / (2.0 * m))
    _, gap = _rho_beta_gap(rho, steps, delta, conversion)
    lo, hi = (math.log(b) for b in Z_BRACKET)
    # imported here: the audit blocks solve for z, metric_identifiability never does (~0.2 s per job)
    from scipy import optimize

    return math.exp(optimize.brentq(gap, lo, hi, xtol=xtol))


# ------------------------------------------------------ the adversary's belief


def log_likelihood_ratio(release, mu, mu_prime, sigma):
    """ln p(r|D) − ln p(r|D′) for isotropic Gaussian noise, in the inner-product form
    ⟨r − (μ + μ′)/2, μ − μ′⟩ / σ² (no cancellation of two large squared norms).

    Vectors lie along the last axis; computed in float64.
    """
    release = np.asarray(release, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    mu_prime = np.asarray(mu_prime, dtype=np.float64)
    diff = mu - mu_prime
    centred = release - 0.5 * (mu + mu_prime)
    return _out(np.sum(centred * diff, axis=-1) / np.asarray(sigma, dtype=np.float64) ** 2)


def _true_sign(b_true) -> np.ndarray:
    """+1 where D is the true dataset (b = 0), −1 where D′ is: turns quantities about D
    (the log-odds Λ, the LLR's drift) into quantities about the true dataset."""
    return np.where(np.asarray(b_true) == 0, 1.0, -1.0)


def standardized_llr(llr, sensitivity, sigma, b_true: int = 0):
    """η = (L − s·LS²/(2σ²))·σ/LS with s = +1 when D is the true dataset (b = 0) and −1
    when D′ is: the adversary's log-likelihood ratio L = ln p(r|D) − ln p(r|D′) (the
    sign of ``log_likelihood_ratio``) standardized under the true dataset.

    With r = μ^{(b)} + n, L = s·LS²/(2σ²) + ⟨n, d⟩/σ², so η = ⟨n, d⟩/(σ·LS) ~ N(0, 1)
    (Bernau et al. 2021, Lemma 1) if and only if the LLR path is right: a KS test of η then checks the
    adversary's arithmetic, not only the noise generator. NaN where LS = 0 (the step
    reveals nothing and η is undefined); callers count those steps.
    """
    llr = np.asarray(llr, dtype=np.float64)
    ls = np.asarray(sensitivity, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    sign = _true_sign(b_true)
    with np.errstate(divide="ignore", invalid="ignore"):
        eta = (llr - sign * ls**2 / (2.0 * sigma**2)) * sigma / ls
    return _out(np.where((ls > 0) & (sigma > 0), eta, np.nan))


def belief(log_odds):
    """β(D) = expit(Λ) from the cumulative log-odds (uniform prior)."""
    return _out(special.expit(np.asarray(log_odds, dtype=np.float64)))


def belief_in_true_dataset(log_odds, b_true):
    """β_k of the dataset actually trained on: expit(Λ) when it is D (b = 0), expit(−Λ)
    when it is D′ (b = 1), Λ being the log-odds of D."""
    sign = _true_sign(b_true)
    return _out(special.expit(sign * np.asarray(log_odds, dtype=np.float64)))


def predicted_win_probability(rdp_slope):
    """Pr[β_k(D) > ½] when Λ_k ~ N(M, 2M) (the analytic law of Lemma 1's log-odds): Φ(√(M/2))."""
    m = np.asarray(rdp_slope, dtype=np.float64)
    return _out(special.ndtr(np.sqrt(m / 2.0)))


def predicted_exceedance(rdp_slope, rho):
    """Pr[β_k(D) > ρ] under Λ_k ~ N(M, 2M): Φ((M − logit ρ)/√(2M))."""
    m = np.asarray(rdp_slope, dtype=np.float64)
    return _out(_norm_sf((special.logit(np.asarray(rho, dtype=np.float64)) - m) / np.sqrt(2.0 * m)))


def worst_case_release(mu, mu_prime, sigma, step_epsilon):
    """The release r = μ + (ε_i σ²/LS − LS/2)·d/LS whose log-likelihood ratio is exactly
    ε_i (the authors' worst_case check): the belief bound is attained."""
    mu = np.asarray(mu, dtype=np.float64)
    diff = mu - np.asarray(mu_prime, dtype=np.float64)
    ls = np.linalg.norm(diff)
    return mu + (step_epsilon * sigma**2 / ls - ls / 2.0) * diff / ls


def sequential_noise_multiplier(eps: float, steps: int, delta: float) -> float:
    """z_seq = k√(2 ln(1.25k/δ))/ε: each step (ε/k, δ/k)-DP classically, composed
    sequentially (the authors' ``-sq`` option)."""
    return int(steps) * math.sqrt(2.0 * math.log(1.25 * int(steps) / delta)) / float(eps)


# -------------------------------------------------- rows for a trained DP-SGD run


# How ``dpaudit.dp.accounting.dpsgd_epsilon`` turned a trained run's composition
# into ε(δ), by (accountant, sampling): dp-accounting's RDP accountant and its RDP →
# (ε, δ) conversion (named as in CONVERSIONS), its PLD accountant, or, for shuffled
# batches with "pld", the exact ε of the composed Gaussian (Balle & Wang 2018).
TRAIN_CONVERSIONS = {
    ("rdp", "poisson"): "dp_accounting", ("rdp", "shuffle"): "dp_accounting",
    ("pld", "poisson"): "pld", ("pld", "shuffle"): "analytic_gaussian",
}
# L2 sensitivity of the clipped-gradient sum in units of C, by neighbouring relation
# (train.json's ``neighbouring_relation``, set by the sampling scheme).
RELATION_SENSITIVITY = {"add_or_remove_one": 1.0, "replace_one": 2.0}


ANY_DP_FORMULA = "(e^eps - 1 + 2 delta)/(e^eps + 1) (any (eps, delta)-DP mechanism)"


def run_identifiability(train: dict) -> pd.DataFrame:
    """Identifiability rows of one trained run from its accountant's (ε, δ).

    Every row records the ``conversion`` that produced the ε (``TRAIN_CONVERSIONS``)
    and the ``neighbouring_relation`` the ε holds for. What each row is:

    * ``rho_beta`` and ``rho_beta_expected``: the DI adversary's posterior belief
      bound expit(ε) (Bernau et al. 2021, Theorem 1; for δ > 0 it holds with
      probability ≥ 1 − δ) and its δ-adjusted form, for any (ε, δ)-DP mechanism.
    * ``rho_alpha_thm2``: NOT a bound for any (ε, δ)-DP model. Theorem 2 is the
      expected advantage of the Gaussian mechanism calibrated classically,
      σ = Δ√(2 ln(1.25/δ))/ε: another (ε, δ)-DP mechanism can do better. The
      analytically calibrated Gaussian (Balle & Wang 2018), exactly (2.197, 0.01)-DP,
      has advantage 0.369 where Theorem 2 gives 0.276.
    * ``advantage_bound_any_dp``: the advantage bound of every (ε, δ)-DP mechanism,
      (e^ε − 1 + 2δ)/(e^ε + 1) (Kairouz et al. 2015; ``dpaudit.dp.hypothesis.max_advantage``);
      0.802 at (2.197, 0.01).
    * ``yeom_bound``: Yeom et al. 2018's min(1, e^ε − 1), proved for pure ε-DP (their
      Theorem 1); with δ > 0 it is the paper's reference line, not a guarantee (at
      small ε it lies below the δ of the line above).
    * ``rho_alpha_rdp``: the expected advantage of the run's own Gaussian steps
      composed by RDP, assuming full-batch steps, so it is written only for runs
      whose sampling probability is 1 (mini-batch runs would need the subsampled or
      shuffled analysis, which Bernau et al. 2021 leave open); its sensitivity follows
      the relation: C for add/remove-one (Poisson sampling, 2Φ(√k/(2z)) − 1), 2C for
      replace-one (shuffled batches, 2Φ(√k/z) − 1), the same sensitivity the
      accountant used for the ε.

    A non-private run gets rows with ``applicable = False`` and NaN values, never a
    made-up number.

    A pure ε-DP run of another mechanism (δ = 0: output or objective perturbation)
    gets ρ_β = expit(ε) (= the δ-adjusted ρ_β at δ = 0), the any-DP bound tanh(ε/2)
    and Yeom's bound, which hold for any ε-DP mechanism; the two ρ_α rows describe
    the Gaussian mechanism and are marked not applicable.
    """
    eps = float(train["epsilon"])
    delta = train.get("delta")
    base = {
        "accountant": train.get("accountant"),
        "conversion": None,
        "neighbouring_relation": train.get("neighbouring_relation"),
        "accountant_epsilon": eps,
        "delta": math.nan if delta is None else float(delta),
        "noise_multiplier": float(train.get("noise_multiplier") or math.nan),
        "steps": int(train.get("steps") or 0),
        "sampling_probability": float(train.get("sampling_probability") or math.nan),
        "formula": "",
        "applicable": True,
    }
    metrics = ("rho_beta", "rho_beta_expected", "rho_alpha_thm2", "advantage_bound_any_dp", "yeom_bound",
               "rho_alpha_rdp")
    if train.get("mechanism") != "dpsgd" and math.isfinite(eps) and delta is not None and float(delta) == 0.0:
        gaussian_only = "not applicable: the Gaussian mechanism's advantage; this run is pure epsilon-DP"
        base["conversion"] = "none: pure epsilon-DP, epsilon exact"
        return pd.DataFrame([
            {**base, "metric": "rho_beta", "value": rho_beta(eps), "formula": "expit(eps)"},
            {**base, "metric": "rho_beta_expected", "value": rho_beta_expected(eps, 0.0),
             "formula": "rho_beta + delta (1 - rho_beta), delta = 0"},
            {**base, "metric": "rho_alpha_thm2", "value": math.nan, "applicable": False, "formula": gaussian_only},
            {**base, "metric": "advantage_bound_any_dp", "value": max_advantage(eps, 0.0),
             "formula": ANY_DP_FORMULA},
            {**base, "metric": "yeom_bound", "value": yeom_bound(eps), "formula": "min(1, e^eps - 1)"},
            {**base, "metric": "rho_alpha_rdp", "value": math.nan, "applicable": False, "formula": gaussian_only},
        ])
    if train.get("accountant") == "stated" and math.isfinite(eps) and delta is not None:
        # issue 44: an (ε, δ) promise of a model trained elsewhere, no mechanism named: the rows that
        # hold for any (ε, δ)-DP mechanism; the two ρ_α rows describe the Gaussian mechanism
        unnamed = "not applicable: the Gaussian mechanism's advantage; the promise names no mechanism"
        base["conversion"] = "none: (epsilon, delta) as stated"
        return pd.DataFrame([
            {**base, "metric": "rho_beta", "value": rho_beta(eps), "formula": "expit(eps)"},
            {**base, "metric": "rho_beta_expected", "value": rho_beta_expected(eps, float(delta)),
             "formula": "rho_beta + delta (1 - rho_beta)"},
            {**base, "metric": "rho_alpha_thm2", "value": math.nan, "applicable": False, "formula": unnamed},
            {**base, "metric": "advantage_bound_any_dp", "value": max_advantage(eps, float(delta)),
             "formula": ANY_DP_FORMULA},
            {**base, "metric": "yeom_bound", "value": yeom_bound(eps), "formula": "min(1, e^eps - 1)"},
            {**base, "metric": "rho_alpha_rdp", "value": math.nan, "applicable": False, "formula": unnamed},
        ])
    # a model trained elsewhere whose promise is DP-SGD inputs is judged as DP-SGD (issue 44)
    if train.get("promised_mechanism", train.get("mechanism")) != "dpsgd" or not math.isfinite(eps) or delta is None:
        return pd.DataFrame([
            {**base, "metric": m, "value": math.nan, "applicable": False,
             "formula": "not applicable: no finite (epsilon, delta) guarantee"}
            for m in metrics
        ])
    delta = float(delta)
    sampling, relation = train.get("sampling"), train.get("neighbouring_relation")
    if (train.get("accountant"), sampling) not in TRAIN_CONVERSIONS:
        raise ValueError(f"train.json: accountant {train.get('accountant')!r} with sampling {sampling!r} is not one "
                         f"of {sorted(TRAIN_CONVERSIONS)}; the conversion behind epsilon is unknown")
    if relation != accounting.NEIGHBOURING[sampling]:
        raise ValueError(f"train.json: neighbouring_relation {relation!r} does not match sampling {sampling!r} "
                         f"({accounting.NEIGHBOURING[sampling]!r} expected)")
    base["conversion"] = TRAIN_CONVERSIONS[(train["accountant"], sampling)]
    rows = [
        {**base, "metric": "rho_beta", "value": rho_beta(eps), "formula": "expit(eps)"},
        {**base, "metric": "rho_beta_expected", "value": rho_beta_expected(eps, delta),
         "formula": "rho_beta + delta (1 - rho_beta)"},
        {**base, "metric": "rho_alpha_thm2", "value": rho_alpha_thm2(eps, delta),
         "formula": "2 Phi(eps / (2 sqrt(2 ln(1.25/delta)))) - 1 (classically calibrated Gaussian)"},
        {**base, "metric": "advantage_bound_any_dp", "value": max_advantage(eps, delta), "formula": ANY_DP_FORMULA},
        {**base, "metric": "yeom_bound", "value": yeom_bound(eps), "formula": "min(1, e^eps - 1)"},
    ]
    q = base["sampling_probability"]
    full_batch = q == 1.0
    sensitivity = RELATION_SENSITIVITY[relation]
    if full_batch:
        formula = ("2 Phi(sqrt(k) / (2 z)) - 1 (add/remove-one, sensitivity C)" if sensitivity == 1.0
                   else "2 Phi(sqrt(k) / z) - 1 (replace-one, sensitivity 2C)")
    elif sampling == "poisson":
        formula = "not applicable: sampling probability < 1 (needs subsampled RDP)"
    else:
        formula = "not applicable: shuffled mini-batches (sampling probability < 1), full-batch composition only"
    rows.append({
        **base, "metric": "rho_alpha_rdp",
        "value": rho_alpha_rdp(base["steps"], base["noise_multiplier"], sensitivity) if full_batch else math.nan,
        "applicable": full_batch, "formula": formula,
    })
    return pd.DataFrame(rows)


# ------------------------------------------------- aggregation over R audit runs

CONFIG_KEYS = ["dataset", "config", "neighbourhood", "sens_mode", "rho_target", "pair"]
LS_TOLERANCE = 1e-4  # per-example gradients are independent: LS_U ≤ C + 1e-4, LS_B ≤ 2C + 1e-4
# Family-wise level of the η_t ~ N(0, 1) health check (a pipeline health check of our own): one KS test per
# configuration, Bonferroni over the configurations of one aggregate (63 in the paper's
# grid, where an unadjusted p < 0.01 would flag one spuriously about half the time).
ETA_KS_LEVEL = 0.01


def _clamped(value: float) -> tuple[float, bool]:
    clamped, flag = clamp_epsilon(value)
    return float(clamped), bool(flag)


def summarize_audit(runs: pd.DataFrame, steps: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per audited configuration: empirical scores next to their bounds.

    ``runs`` has one row per run (``final_logodds``, ``b_true``, ``win``, ``mi_adv``,
    ``test_acc`` and the configuration columns of ``audit.describe``); ``steps`` one
    row per run and step (``ls_t``, ``sigma_t``, ``eta_t``, ``gs``); both carry
    ``CONFIG_KEYS``. η_t is the adversary's standardized LLR (``standardized_llr``);
    the steps where it is undefined (LS_t = 0) are counted in ``eta_undefined_steps``. The win-rate
    interval is Clopper–Pearson at two-sided level ``alpha``; the advantage interval
    is its image under 2p − 1. The η_t KS check flags a configuration when its p-value,
    Bonferroni-adjusted over the ``eta_ks_configurations`` configurations of this
    summary, is below ``ETA_KS_LEVEL`` (``eta_ks_failed``; raw ``eta_ks_pvalue`` kept).
    """
    from dpaudit.dp.hypothesis import clopper_pearson

    missing = [c for c in CONFIG_KEYS + ["run_id"] if c not in steps]
    if missing:
        raise ValueError(f"audit steps lack column(s) {missing}")
    step_groups = dict(tuple(steps.groupby(CONFIG_KEYS, sort=True)))
    rows = []
    for key, group in runs.groupby(CONFIG_KEYS, sort=True):
        first = group.iloc[0]
        delta, rho, eps_target = float(first["delta"]), float(first["rho_target"]), float(first["eps_target"])
        z, k = float(first["noise_multiplier"]), int(first["k"])
        r = len(group)
        wins = int(group["win"].sum())
        lo, hi = clopper_pearson(wins, r, alpha)
        adv = 2.0 * wins / r - 1.0
        logodds_true = _true_sign(group["b_true"].to_numpy()) * group["final_logodds"].to_numpy()
        belief_true = special.expit(logodds_true)
        # ε′ = logit(max belief) is the max log-odds itself: never through expit, which
        # rounds to 1 (logit ∞) once the log-odds exceed ~37.
        max_logodds = float(logodds_true.max())
        max_belief = float(special.expit(max_logodds))
        merged = step_groups[key]
        # z′_t = σ_t/LS_t; a step with LS_t = 0 (x* and x′ give the same clipped
        # gradient) reveals nothing and adds 0 to Σ 1/(2z′_t²).
        ratio = np.where(merged["ls_t"] > 0, merged["ls_t"] / merged["sigma_t"].where(merged["sigma_t"] > 0, 1.0), 0.0)
        slope = pd.Series(0.5 * ratio**2, index=merged.index).groupby(merged["run_id"]).sum()
        sens = np.array([rdp_epsilon(m, delta, first["conversion"])["epsilon"] for m in slope.to_numpy()])
        eta = merged["eta_t"].dropna().to_numpy()
        ls_excess = merged["ls_t"] - merged["gs"] - LS_TOLERANCE
        eps_belief, belief_flag = _clamped(max_logodds)
        eps_adv, adv_flag = _clamped(float(epsilon_from_rho_alpha(adv, delta)) if abs(adv) < 1 else math.copysign(math.inf, adv))
        rows.append({
            **dict(zip(CONFIG_KEYS, key, strict=True)), "eps_target": eps_target, "delta": delta, "k": k,
            "noise_multiplier": z, "conversion": first["conversion"], "runs": r, "wins": wins,
            "win_rate": wins / r, "alpha": alpha,
            "adv_empirical": adv, "adv_ci_low": 2 * float(lo) - 1, "adv_ci_high": 2 * float(hi) - 1,
            "delta_prime": float(np.mean(belief_true > rho)),
            "delta_prime_at_0.9": float(np.mean(belief_true > 0.9)),
            "max_belief": max_belief,
            "belief_quantile_1_minus_delta": float(special.expit(np.quantile(logodds_true, 1 - delta))),
            "mean_belief": float(belief_true.mean()),
            "eps_prime_sens_max": float(sens.max()), "eps_prime_sens_mean": float(sens.mean()),
            "eps_prime_belief": eps_belief, "eps_prime_belief_clamped": belief_flag,
            "eps_prime_adv": eps_adv, "eps_prime_adv_clamped": adv_flag,
            "rho_beta_bound": float(rho_beta(eps_target)),
            "rho_alpha_thm2": float(rho_alpha_thm2(eps_target, delta)),
            "rho_alpha_rdp": float(rho_alpha_rdp(k, z)),
            "rho_alpha_predicted": float(group["predicted_adv"].mean()),
            "predicted_delta_prime": float(np.mean(predicted_exceedance(group["M_sum"].to_numpy(), rho))),
            "yeom_bound": float(yeom_bound(eps_target)),
            "mi_adv_mean": float(group["mi_adv"].mean()),
            "test_acc_mean": float(group["test_acc"].mean()),
            "train_acc_mean": float(group["train_acc"].mean()),
            "eta_ks_pvalue": _ks_normal_pvalue(eta),
            "eta_undefined_steps": int(merged["eta_t"].isna().sum()),  # LS_t = 0: η_t undefined
            "eta_mean": float(eta.mean()) if eta.size else math.nan,
            "eta_std": float(eta.std(ddof=1)) if eta.size > 1 else math.nan,
            "ls_min": float(merged["ls_t"].min()), "ls_max": float(merged["ls_t"].max()),
            "ls_bound": float(merged["gs"].iloc[0]),
            "ls_violations": int((ls_excess > 0).sum()), "steps_total": int(len(merged)),
        })
    summary = pd.DataFrame(rows)
    # Bonferroni over the configurations with a KS p-value; the raw p-value stays.
    tested = int(summary["eta_ks_pvalue"].notna().sum())
    summary["eta_ks_configurations"] = tested
    summary["eta_ks_pvalue_bonferroni"] = np.minimum(1.0, summary["eta_ks_pvalue"] * tested)
    summary["eta_ks_failed"] = summary["eta_ks_pvalue_bonferroni"] < ETA_KS_LEVEL
    return summary
