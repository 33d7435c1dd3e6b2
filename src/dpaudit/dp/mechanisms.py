"""Basic DP mechanisms (Geambasu's DP lecture: basic mechanisms and the Google DP library's composite algorithms), numpy/scipy only.

Every sampler takes ``rng``: a ``numpy.random.Generator`` or anything
``numpy.random.default_rng`` accepts (an int seed), so results are reproducible
and no global random state is touched.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpaudit.contract.delta import check_delta

__all__ = [
    "approximate_bounds",
    "approximate_bounds_threshold",
    "bounded_mean",
    "bounded_mean_noise_scales",
    "bounded_sum",
    "exponential_mechanism",
    "exponential_mechanism_log_probabilities",
    "exponential_mechanism_probabilities",
    "exponential_mechanism_utility_bound",
    "gaussian_delta",
    "gaussian_delta_and_slope",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classical",
    "gaussian_mechanism",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classical",
    "laplace_mechanism",
    "laplace_scale",
    "randomized_response",
    "randomized_response_debias",
    "randomized_response_truth_probability",
]


def _rng(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _check_eps(eps: float, *, allow_zero: bool = False) -> float:
    eps = float(eps)
    if not (eps > 0 or (allow_zero and eps == 0)) or math.isnan(eps):
        raise ValueError(f"epsilon must be > 0, got {eps}")
    return eps


# ---------------------------------------------------------------- Laplace


def laplace_scale(sensitivity: float, eps: float) -> float:
    """Scale b = Δ1/ε of the Laplace noise that makes a query ε-DP."""
    if sensitivity < 0:
        raise ValueError("sensitivity must be >= 0")
    return float(sensitivity) / _check_eps(eps)


def laplace_mechanism(value, sensitivity: float, eps: float, rng=None) -> np.ndarray:
    """f(x) + Lap(Δ1/ε), independently on every coordinate of ``value``.

    ``sensitivity`` is the L1 sensitivity of the whole vector, not per coordinate.
    """
    value = np.asarray(value, dtype=np.float64)
    b = laplace_scale(sensitivity, eps)
    return value + _rng(rng).laplace(0.0, b, size=value.shape)


# ---------------------------------------------------------------- Gaussian


def gaussian_sigma_classical(sensitivity: float, eps: float, delta: float) -> float:
    """Classical calibration σ = Δ2·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1).

    The slides omit the theorem's condition ε < 1. The formula is still valid at
    ε = 1 (the exact δ is far below the target there) but fails for large ε
    (at δ = 1e-5, ε = 10 the true δ is 2.3e-5, Balle & Wang 2018), so ε > 1 is refused.
    """
    eps = _check_eps(eps)
    delta = check_delta(delta)
    if eps > 1:
        raise ValueError(
            f"the classical Gaussian calibration is only proved for eps <= 1 (got eps={eps}); "
            "use gaussian_sigma_analytic (Balle & Wang 2018), which is exact for every eps"
        )
    return float(sensitivity) * math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def gaussian_epsilon_classical(noise_multiplier: float, delta: float) -> float:
    """The slides' inverse, ε = √(2 ln(1.25/δ))/σ_mult (noise sd = σ_mult·Δ2).

    Refuses results above 1, where the formula it inverts is not proved: that is
    exactly the DP-SGD regime (σ_mult = 1.1 gives 4.40), which needs RDP or PLD.
    """
    delta = check_delta(delta)
    eps = math.sqrt(2.0 * math.log(1.25 / delta)) / float(noise_multiplier)
    if eps > 1:
        raise ValueError(
            f"noise multiplier {noise_multiplier} gives eps={eps:.3f} > 1 under the classical "
            "formula, outside its proved range; use gaussian_epsilon_analytic or an RDP accountant"
        )
    return eps


def _gaussian_log_delta(eps, sigma, sensitivity=1.0):
    """log δ(ε) of the Gaussian mechanism, exact (Balle & Wang 2018, Thm 8).

    δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ); evaluated with log Φ so that
    tiny δ (and large ε) do not underflow or cancel. ``eps`` and ``sensitivity``
    broadcast against each other (the PMP bounds of Lowy et al. 2024 evaluate one ε
    against a matrix of pairwise distances); Δ = 0 gives δ = 0 (log δ = −inf).
    """
    return _gaussian_log_terms(eps, sigma, sensitivity)[0]


def _gaussian_log_terms(eps, sigma, sensitivity):
    """(log δ(ε), log of the subtracted term e^ε Φ(−Δ/2σ − εσ/Δ), Δ > 0)."""
    eps = np.asarray(eps, dtype=np.float64)
    r = np.asarray(sensitivity, dtype=np.float64) / float(sigma)
    if np.any(r < 0) or np.any(np.isnan(r)):
        raise ValueError("sensitivity must be >= 0 (and sigma > 0)")
    positive = r > 0
    safe_r = np.where(positive, r, 1.0)
    shape = np.broadcast(eps, safe_r).shape
    log_delta, log_subtracted = np.empty(shape), np.empty(shape)
    _gaussian_log_terms_into(eps, safe_r, safe_r / 2.0, -safe_r / 2.0, log_delta, log_subtracted, np.empty(shape))
    if not positive.all():
        np.copyto(log_delta, -np.inf, where=~positive)  # Δ = 0: δ = 0
    return log_delta, log_subtracted, positive


def _gaussian_log_terms_into(eps, r, half_r, minus_half_r, log_delta, log_subtracted, scratch) -> None:
    """``_gaussian_log_terms`` where r = Δ/σ > 0, in place: ``log_delta`` and ``log_subtracted``
    (arrays of the broadcast shape of ``eps`` and ``r``) get log δ(ε) and
    b = ε + log Φ(−r/2 − ε/r); ``scratch`` is a third such array. ``half_r`` = r / 2.0 and
    ``minus_half_r`` = (−r) / 2.0 do not depend on ε, so a caller evaluating many ε keeps them.

    a = log Φ(r/2 − ε/r) and log δ = a + log1p(−e^min(b − a, 0)): each ufunc applied to the
    same operands in the same order as in that expression, so the same floats, written into the
    buffers instead of temporaries. Where b ≥ a (δ cancelled or underflowed) the expression is
    already log1p(−1) = −inf, or NaN when a = b = −inf or ε is NaN; ``fmax`` turns that NaN into
    −inf, which is what ``np.where(b < a, ..., −inf)`` gave. The PMP solver runs this on
    cache-sized blocks of cells (``dpaudit.metrics.pmp.bounds``).
    """
    ratio = np.divide(eps, r, out=scratch)
    a = np.subtract(half_r, ratio, out=log_delta)
    special.log_ndtr(a, out=a)
    b = np.subtract(minus_half_r, ratio, out=log_subtracted)
    special.log_ndtr(b, out=b)
    np.add(eps, b, out=b)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.subtract(b, a, out=scratch)
        np.minimum(gap, 0.0, out=gap)
        np.exp(gap, out=gap)
        np.negative(gap, out=gap)
        np.log1p(gap, out=gap)
        np.add(a, gap, out=a)
    np.fmax(a, -np.inf, out=a)  # NaN (a and b both −inf, or a NaN ε) -> −inf


def gaussian_delta_and_slope(eps, sensitivity) -> tuple[np.ndarray, np.ndarray]:
    """(δ(ε), −dδ/dε = e^ε Φ(−Δ/2 − ε/Δ)) of the Gaussian mechanism with σ = 1, broadcast
    like ``gaussian_delta`` (−dδ/dε = 0 where Δ = 0). The two share their log Φ
    evaluations: Newton's method on Lowy et al. 2024's profiles needs both at every step."""
    log_delta, log_subtracted, positive = _gaussian_log_terms(eps, 1.0, sensitivity)
    return np.exp(log_delta), np.where(positive, np.exp(log_subtracted), 0.0)


def _gaussian_log_delta_one(eps: float, sigma: float) -> float:
    """``_gaussian_log_delta(eps, sigma, 1.0)`` of one ε and σ > 0 without the array machinery
    (the same ufuncs on the same numbers, so the same float): the root searches below call it
    tens of times per solve."""
    if not float(sigma) > 0:
        return float(_gaussian_log_delta(eps, sigma, 1.0))  # its checks and edge cases
    r = 1.0 / float(sigma)
    eps = float(eps)
    a = special.log_ndtr(r / 2.0 - eps / r)
    b = eps + special.log_ndtr(-r / 2.0 - eps / r)
    if not b < a:
        return -math.inf
    return float(a + np.log1p(-np.exp(b - a)))


def gaussian_delta(sigma: float, eps, sensitivity=1.0):
    """Exact δ(ε) of the Gaussian mechanism N(0, σ²) on a query of L2 sensitivity Δ.

    Vectorised over ``eps`` and ``sensitivity`` (broadcast). With σ = 1 and
    ``sensitivity = μ`` this is the privacy profile δ_G(ε; μ) of Lemma 10 in
    Lowy et al. 2024.
    """
    out = np.exp(_gaussian_log_delta(eps, sigma, sensitivity))
    return float(out) if out.ndim == 0 else out


def gaussian_sigma_analytic(sensitivity: float, eps: float, delta: float) -> float:
    """Smallest σ with δ(ε) ≤ δ: the analytic Gaussian calibration (Balle & Wang 2018).

    Valid for every ε > 0, unlike the classical formula.
    """
    eps = _check_eps(eps)
    delta = check_delta(delta)
    log_delta = math.log(delta)

    def gap(log_sigma):
        return _gaussian_log_delta_one(eps, math.exp(log_sigma)) - log_delta

    lo, hi = math.log(1e-3), math.log(10.0)
    while gap(lo) < 0:
        lo -= 2.0
    while gap(hi) > 0:
        hi += 2.0
    # imported here: the PMP and extraction jobs import this module, few calibrate (issue 36)
    from scipy import optimize

    return float(sensitivity) * math.exp(optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14))


def gaussian_epsilon_analytic(noise_multiplier: float, delta: float) -> float:
    """Smallest ε with δ(ε) ≤ δ for noise sd = noise_multiplier·Δ2 (one release)."""
    delta = check_delta(delta)
    log_delta = math.log(delta)

    def gap(eps):
        return _gaussian_log_delta_one(eps, noise_multiplier) - log_delta

    if gap(0.0) <= 0:
        return 0.0
    hi = 1.0
    while gap(hi) > 0:
        hi *= 2.0
    from scipy import optimize

    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-13, rtol=1e-13))


def gaussian_mechanism(
    value, sensitivity: float, eps: float, delta: float, rng=None, calibration: str = "analytic"
) -> np.ndarray:
    """f(x) + N(0, σ²I) with σ from the analytic (default) or classical calibration.

    ``sensitivity`` is the L2 sensitivity of the whole vector.
    """
    if calibration == "analytic":
        sigma = gaussian_sigma_analytic(sensitivity, eps, delta)
    elif calibration == "classical":
        sigma = gaussian_sigma_classical(sensitivity, eps, delta)
    else:
        raise ValueError(f"calibration must be 'analytic' or 'classical', got {calibration!r}")
    value = np.asarray(value, dtype=np.float64)
    return value + _rng(rng).normal(0.0, sigma, size=value.shape)


# ---------------------------------------------------------------- exponential


def exponential_mechanism_log_probabilities(scores, eps: float, sensitivity: float = 1.0):
    """log Pr[y] ∝ ε·q(x,y)/(2Δq), normalised with log-sum-exp (no overflow for big scores).

    ``scores`` may be 2-D (one row per dataset); normalisation is over the last axis.
    """
    eps = _check_eps(eps)
    if sensitivity <= 0:
        raise ValueError("sensitivity must be > 0")
    logits = eps * np.asarray(scores, dtype=np.float64) / (2.0 * sensitivity)
    return logits - special.logsumexp(logits, axis=-1, keepdims=True)


def exponential_mechanism_probabilities(scores, eps: float, sensitivity: float = 1.0):
    return np.exp(exponential_mechanism_log_probabilities(scores, eps, sensitivity))


def exponential_mechanism(scores, eps: float, sensitivity: float = 1.0, rng=None, size=None):
    """Index of the selected output, sampled with the Gumbel-max trick.

    argmax(logit + Gumbel) has exactly the softmax distribution and never forms
    exp(logit), so it cannot overflow.
    """
    eps = _check_eps(eps)
    logits = eps * np.asarray(scores, dtype=np.float64) / (2.0 * sensitivity)
    if logits.ndim != 1:
        raise ValueError("scores must be 1-D (one score per candidate output)")
    shape = (logits.size,) if size is None else (int(size), logits.size)
    choice = np.argmax(logits + _rng(rng).gumbel(size=shape), axis=-1)
    return int(choice) if size is None else choice


def exponential_mechanism_utility_bound(
    eps: float, n_outputs: int, t: float, sensitivity: float = 1.0, n_optimal: int = 1
) -> tuple[float, float]:
    """(shortfall, probability): Pr[q(y*) ≤ OPT − shortfall] ≤ probability.

    shortfall = (2Δq/ε)(ln(|Y|/|Y_OPT|) + t), probability = e^−t (McSherry &
    Talwar 2007). Natural log: the slide's 7.4/ε for 5 outputs and t = 3 came
    from log10; the correct value is 9.22/ε.
    """
    eps = _check_eps(eps)
    shortfall = 2.0 * sensitivity / eps * (math.log(n_outputs / n_optimal) + t)
    return shortfall, math.exp(-t)


# ---------------------------------------------------------------- randomized response


def randomized_response_truth_probability(eps: float) -> float:
    """Pr[answer truthfully] = e^ε/(1+e^ε), written as a logistic to stay finite."""
    return float(special.expit(_check_eps(eps, allow_zero=True)))


def randomized_response(bits, eps: float, rng=None) -> np.ndarray:
    """Keep each bit with probability e^ε/(1+e^ε), flip it otherwise (ε-DP per bit)."""
    bits = np.asarray(bits).astype(bool)
    flip = _rng(rng).random(bits.shape) >= randomized_response_truth_probability(eps)
    return bits ^ flip


def randomized_response_debias(responses, eps: float) -> float:
    """Unbiased estimate of the true fraction of ones: ((e^ε+1)ȳ − 1)/(e^ε − 1)."""
    eps = _check_eps(eps)
    ybar = float(np.mean(np.asarray(responses, dtype=np.float64)))
    return ((math.exp(eps) + 1.0) * ybar - 1.0) / math.expm1(eps)


# ---------------------------------------------------------------- composite (§2.5)


def bounded_sum(values, lower: float, upper: float, eps: float, rng=None,
                relation: str = "add_remove") -> float:
    """Clamp to [L, U], sum, add Laplace noise at the sum's sensitivity.

    Sensitivity max(|L|,|U|) under add/remove, |U−L| under replace-one.
    """
    from dpaudit.dp.sensitivity import bounded_sum_sensitivity

    clipped = np.clip(np.asarray(values, dtype=np.float64), lower, upper)
    sens = bounded_sum_sensitivity(lower, upper, relation)
    return float(clipped.sum() + _rng(rng).laplace(0.0, laplace_scale(sens, eps)))


def bounded_mean_noise_scales(lower: float, upper: float, eps: float) -> tuple[float, float]:
    """Laplace scales (centred sum, count) of Google's bounded mean: (|U−L|/ε, 2/ε).

    Half the budget each; the centred sum Σ(x−mid) has sensitivity |U−L|/2 and the
    count 1 under add/remove.
    """
    eps = _check_eps(eps)
    return abs(upper - lower) / eps, 2.0 / eps


def bounded_mean(values, lower: float, upper: float, eps: float, rng=None) -> float:
    """mid + (Σx − N·mid + Lap(|U−L|/ε)) / (N + Lap(2/ε)), clamped to [L, U]."""
    x = np.clip(np.asarray(values, dtype=np.float64), lower, upper)
    gen = _rng(rng)
    mid = 0.5 * (lower + upper)
    b_sum, b_count = bounded_mean_noise_scales(lower, upper, eps)
    noisy_sum = float(np.sum(x - mid)) + gen.laplace(0.0, b_sum)
    # A noisy count below 1 would blow the ratio up; clamping it is post-processing.
    noisy_count = max(1.0, x.size + gen.laplace(0.0, b_count))
    return float(np.clip(mid + noisy_sum / noisy_count, lower, upper))


def approximate_bounds_threshold(eps: float, c: float, n_bins: int,
                                 variant: str = "slides") -> float:
    """Count threshold above which a bin is declared non-empty with confidence c.

    The slide prints t = (1/ε)·log(1 − c^{1/(base−1)}), which is garbled (it is
    negative). Its own value t = 3.5 (ε = 1, c = 0.9) is reproduced by
    t = −ln(2(1 − c^{1/(m−1)}))/ε with m = total bins (positive + negative) = 8:
    ``variant='slides'``. Google's current code uses the exponent 1/(2·n_bins),
    n_bins = bins per sign (3.64 for the same inputs): ``variant='google'``.
    """
    eps = _check_eps(eps)
    if variant == "slides":
        exponent = 1.0 / (2 * n_bins - 1)
    elif variant == "google":
        exponent = 1.0 / (2 * n_bins)
    else:
        raise ValueError("variant must be 'slides' or 'google'")
    # 1 − c^e computed as −expm1(e·ln c) to keep precision when c is close to 1.
    return -math.log(2.0 * -math.expm1(exponent * math.log(c))) / eps


def approximate_bounds(values, eps: float, rng=None, base: float = 2.0, n_bins: int = 4,
                       scale: float = 1.0, c: float = 0.9, noise: bool = True) -> dict:
    """DP range estimate with logarithmic bins (Google DP library, Wilson et al. 2020).

    Positive bins: [0, s], (s, s·b], (s·b, s·b²], ...; negative bins mirror them.
    Each bin gets a Laplace(1/ε) count (a histogram has sensitivity 1 under
    add/remove); L is the lower edge of the leftmost bin above the threshold, U
    the upper edge of the rightmost. ``noise=False`` gives the exact counts (for
    teaching and tests only: it is not DP). Values beyond the outermost bins are
    clamped into them.
    """
    x = np.asarray(values, dtype=np.float64)
    edges = scale * base ** np.arange(n_bins, dtype=np.float64)  # upper edges of positive bins
    mag = np.abs(x)
    idx = np.minimum(np.searchsorted(edges, mag, side="left"), n_bins - 1)
    pos = np.bincount(idx[x >= 0], minlength=n_bins).astype(np.float64)
    neg = np.bincount(idx[x < 0], minlength=n_bins).astype(np.float64)
    # Order bins left to right: most negative first.
    counts = np.concatenate([neg[::-1], pos])
    lower_edges = np.concatenate([-edges[::-1], np.r_[0.0, edges[:-1]]])
    upper_edges = np.concatenate([-np.r_[0.0, edges[:-1]][::-1], edges]) + 0.0  # no -0.0
    noisy = counts + (_rng(rng).laplace(0.0, 1.0 / _check_eps(eps), size=counts.size)
                      if noise else 0.0)
    t = approximate_bounds_threshold(eps, c, n_bins)
    above = np.flatnonzero(noisy > t)
    if above.size == 0:
        lower = upper = float("nan")
    else:
        lower, upper = float(lower_edges[above[0]]), float(upper_edges[above[-1]])
    return {
        "lower": lower,
        "upper": upper,
        "threshold": t,
        "counts": counts,
        "noisy_counts": noisy,
        "bin_lower": lower_edges,
        "bin_upper": upper_edges,
    }
