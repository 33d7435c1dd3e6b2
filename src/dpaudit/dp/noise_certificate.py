"""The noise certificate of a DP-SGD training (issue 32): was the noise actually added the
noise the accountant analyses?

The accountant's guarantee holds for updates ``(Σ_i clip_C(g_i) + z_t) / B`` with
``z_t ~ N(0, σ²C²I)`` drawn afresh at every step, on every coordinate of the model. The
training loop (``dpaudit.audit.noise_monitor``) recovers the noise it actually added
from the very tensors handed to the optimizer, ``r_t = update_t · B − Σ_i clip_C(g_i)``,
and keeps only sufficient statistics per variable (Σr, Σr², Σr³, Σr⁴; the lag-one
products Σ r_t·r_{t−1} and their squares) and a fixed random sample of coordinates at
each recorded step. This module turns them into tests of H0: "every r is an independent
N(0, σ²C²) draw", each with an exact or a conservative p-value:

* ``variance``: Σr² / (σ²C²) ~ χ²_N under H0 (N = coordinates × steps), two-sided. Too
  little noise voids the guarantee (``privacy``); too much only costs utility (``utility``).
* ``mean``: Σr / (sC√N) ~ N(0, 1), two-sided, s = max(σ, the measured central standard deviation
  / C): under H0 a larger s only shrinks the statistic, and noise above the claim fails the variance
  test alone (a utility bug), not the mean at a scale it does not have.
* ``lag_one``: the self-normalized Σ r_t·r_{t−1} / √Σ(r_t·r_{t−1})². Under H0 the signs of
  the r are independent fair coins independent of their magnitudes, so the products' signs
  are too, and Hoeffding's inequality bounds the two-sided tail by 2·exp(−z²/2) whatever
  the number of terms (conservative, valid at every size). Noise reused from the previous
  step has correlation 1.
* ``skewness`` and ``kurtosis``: D'Agostino's and Anscombe & Glynn's (1983) normal
  transforms of the sample skewness and kurtosis (scipy's ``skewtest``/``kurtosistest``,
  computed from the moments), where N ≥ ``SHAPE_MIN_VALUES``; a Laplace draw of the right
  variance has kurtosis 6, a uniform one 1.8.
* ``goodness_of_fit``: the sampled coordinates (single coordinates, not projections: a
  projection of many coordinates is near-Gaussian whatever their law) against a Gaussian
  at the variable's measured scale (√(Σr²/N)) by Kolmogorov–Smirnov: the law's shape, the
  scale being the variance test's.

A certificate whose only failures are variances above σ²C² has ``passed`` false and
``privacy_failure`` false: more noise than claimed costs utility, and the verdict does not
count it (``dpaudit.metrics.canary.mechanism``).

Two tests read the sample matrix (recorded steps × sampled coordinates of all variables):

* ``coordinates_independent``: the largest Pearson correlation between two sampled
  coordinates across steps (noise shared between coordinates or variables);
* ``steps_independent``: the largest Pearson correlation between two recorded steps
  across coordinates (noise repeated at any lag, not only the previous step).

For independent Gaussian samples a Pearson correlation r of n pairs has
t = r√((n − 2)/(1 − r²)) ~ t_{n−2} exactly; each test takes the smallest p-value times
its number of pairs (Bonferroni).

Every p-value is compared with α / m, m the number of tests run (Bonferroni over
variables and tests), so a correct mechanism fails its certificate with probability at
most α (``FAMILY_ALPHA``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpaudit.dp.hypothesis import two_sided_chi2_p, two_sided_normal_p

__all__ = ["FAMILY_ALPHA", "SHAPE_MIN_VALUES", "certify", "certify_l2_laplace", "certify_l2_laplace_releases",
           "ks_normal_p", "moments_p_values", "summary_sentence"]

# A run's certificate fails by chance with probability ≤ FAMILY_ALPHA: the validity test
# runs 120 correct trainings (20 seeds, ε ∈ {1, 4}, three gradient paths) and allows one
# flag; at 1e-3 the expected count is 0.12 and two or more flags have probability 0.7 %.
FAMILY_ALPHA = 1e-3
# The shape tests' normal transforms are accurate in the far tail only with many values.
SHAPE_MIN_VALUES = 1000
MIN_PAIRS = 4


def _skew_p(b1: float, n: float) -> float:
    """D'Agostino's skewness test (scipy.stats.skewtest) from the sample skewness b1."""
    y = b1 * math.sqrt(((n + 1) * (n + 3)) / (6.0 * (n - 2)))
    beta2 = (3.0 * (n * n + 27 * n - 70) * (n + 1) * (n + 3)) / ((n - 2.0) * (n + 5) * (n + 7) * (n + 9))
    w2 = -1 + math.sqrt(2 * (beta2 - 1))
    delta = 1 / math.sqrt(0.5 * math.log(w2))
    alpha = math.sqrt(2.0 / (w2 - 1))
    y = y if y != 0 else 1.0
    z = delta * math.log(y / alpha + math.sqrt((y / alpha) ** 2 + 1))
    return two_sided_normal_p(z)


def _kurtosis_p(b2: float, n: float) -> float:
    """Anscombe & Glynn's kurtosis test (scipy.stats.kurtosistest) from the sample kurtosis b2."""
    e = 3.0 * (n - 1) / (n + 1)
    var_b2 = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) * (n + 1.0) * (n + 3) * (n + 5))
    x = (b2 - e) / math.sqrt(var_b2)
    sqrt_beta1 = 6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9)) * math.sqrt((6.0 * (n + 3) * (n + 5))
                                                                            / (n * (n - 2) * (n - 3)))
    a = 6.0 + 8.0 / sqrt_beta1 * (2.0 / sqrt_beta1 + math.sqrt(1 + 4.0 / (sqrt_beta1 ** 2)))
    term1 = 1 - 2 / (9.0 * a)
    denom = 1 + x * math.sqrt(2 / (a - 4.0))
    term2 = math.copysign(1.0, denom) * ((1 - 2.0 / a) / abs(denom)) ** (1 / 3.0) if denom != 0 else -math.inf
    z = (term1 - term2) / math.sqrt(2 / (9.0 * a))
    return two_sided_normal_p(z)


def _central_moments(n: float, s1: float, s2: float, s3: float, s4: float) -> tuple[float, float, float, float]:
    """(mean, m2, m3, m4) about the sample mean from raw power sums."""
    mean = s1 / n
    r2, r3, r4 = s2 / n, s3 / n, s4 / n
    m2 = r2 - mean ** 2
    m3 = r3 - 3 * mean * r2 + 2 * mean ** 3
    m4 = r4 - 4 * mean * r3 + 6 * mean ** 2 * r2 - 3 * mean ** 4
    return mean, m2, m3, m4


def moments_p_values(stats: Mapping[str, float], scale: float) -> dict[str, Any]:
    """The per-variable tests from one variable's power sums (``certify``'s module docstring).

    ``stats``: count (N values), s1..s4 (Σr^k), lag (Σ r_t·r_{t−1}), lag_sq (Σ(r_t·r_{t−1})²),
    lag_count (number of products). ``scale``: σC, the claimed standard deviation.
    """
    n = float(stats["count"])
    out: dict[str, Any] = {"values": int(n), "p_values": {}}
    if n < 1:
        return out
    s1, s2, s3, s4 = (float(stats[k]) for k in ("s1", "s2", "s3", "s4"))
    variance = s2 / n
    out["variance_ratio"] = variance / scale ** 2
    out["std_ratio"] = math.sqrt(out["variance_ratio"])
    out["p_values"]["variance"] = two_sided_chi2_p(s2 / scale ** 2, n)
    # the mean at the larger of the claimed and the measured (central) scale: under H0 the larger scale
    # only shrinks z (valid), and noise above the claim (a utility bug, e.g. σC added to the mean: B× the
    # noise) is the variance test's alone instead of also failing the mean at the claimed scale
    central = max(0.0, variance - (s1 / n) ** 2)
    out["mean_scale_ratio"] = max(1.0, math.sqrt(central) / scale)
    out["p_values"]["mean"] = two_sided_normal_p(s1 / (scale * out["mean_scale_ratio"] * math.sqrt(n)))
    lag_count = float(stats["lag_count"])
    if lag_count >= MIN_PAIRS and s2 > 0:
        lag, lag_sq = float(stats["lag"]), float(stats["lag_sq"])
        out["lag_one_correlation"] = lag / (s2 * lag_count / n)
        z = lag / math.sqrt(lag_sq) if lag_sq > 0 else 0.0
        out["p_values"]["lag_one"] = float(min(1.0, 2.0 * math.exp(-0.5 * z * z)))
    if n >= SHAPE_MIN_VALUES:
        _, m2, m3, m4 = _central_moments(n, s1, s2, s3, s4)
        if m2 > 0:
            out["skewness"] = m3 / m2 ** 1.5
            out["kurtosis"] = m4 / m2 ** 2
            out["p_values"]["skewness"] = _skew_p(out["skewness"], n)
            out["p_values"]["kurtosis"] = _kurtosis_p(out["kurtosis"], n)
    return out


_BLAS = None


def _one_blas_thread():
    """The Gram matrices here are small (≤ 2,048 × a few hundred): OpenBLAS's second thread, woken
    while TensorFlow's pools still hold the cores, cost 8–13 ms a product after training, one
    thread 0.1–0.4 ms (measured on the default MLP's certificate)."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def ks_normal_p(values: np.ndarray) -> float:
    """``scipy.stats.kstest(values, "norm").pvalue`` (two-sided, exact ``kstwo`` law) from one sort:
    scipy's wrappers sort the sample four times and cost ~1 ms a variable after training."""
    from scipy.special import ndtr
    from scipy.stats import kstest, kstwo

    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = x.size
    if not n or not (np.isfinite(x[0]) and np.isfinite(x[-1])):  # NaN sorts last: scipy's own handling
        return float(kstest(values, "norm").pvalue)
    cdf = ndtr(x)
    d_plus = float(np.max(np.arange(1.0, n + 1) / n - cdf))
    d_minus = float(np.max(cdf - np.arange(0.0, n) / n))
    return float(np.clip(kstwo.sf(d_plus if d_plus > d_minus else d_minus, n), 0.0, 1.0))


def _max_correlation_p(columns: np.ndarray) -> tuple[float, float, int]:
    """(largest |Pearson r| between two columns, Bonferroni p-value, pairs) of a [n, k] matrix."""
    from scipy.special import stdtr

    n, k = columns.shape
    if k < 2 or n < MIN_PAIRS:
        return math.nan, 1.0, 0
    centred = columns - columns.mean(axis=0)
    norms = np.sqrt(np.einsum("ij,ij->j", centred, centred))
    keep = norms > 0
    if keep.sum() < 2:
        return math.nan, 1.0, 0
    unit = centred[:, keep] / norms[keep]
    with _one_blas_thread():
        corr = unit.T @ unit
    upper = np.abs(corr[np.triu_indices(corr.shape[0], 1)])
    pairs = upper.size
    largest = float(min(1.0, upper.max()))
    if largest >= 1.0 - 1e-12:
        return largest, 0.0, pairs
    t = largest * math.sqrt((n - 2) / (1.0 - largest ** 2))
    return largest, float(min(1.0, pairs * 2.0 * stdtr(n - 2, -t))), pairs


def certify(variables: Sequence[Mapping[str, Any]], samples: np.ndarray, sample_columns: Sequence[int], *,
            noise_multiplier: float, clip_norm: float, alpha: float = FAMILY_ALPHA) -> dict[str, Any]:
    """The certificate of one training's noise.

    ``variables``: per variable its name, ``coordinates`` and the power sums of
    ``moments_p_values``. ``samples``: [recorded steps, sampled coordinates] of r (all
    variables side by side); ``sample_columns``: how many columns each variable owns, in
    order. Returns the record train.json keeps under ``noise_check``.
    """
    scale = float(noise_multiplier) * float(clip_norm)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"the claimed noise scale σC must be finite and > 0, got {scale!r}")
    samples = np.asarray(samples, dtype=np.float64)
    per_variable = []
    tests: list[tuple[str, str, float]] = []
    offset = 0
    for spec, width in zip(variables, sample_columns, strict=True):
        result = moments_p_values(spec, scale)
        column = samples[:, offset:offset + int(width)].ravel()
        offset += int(width)
        if column.size >= MIN_PAIRS and result.get("variance_ratio", 0.0) > 0:
            # the law's shape at the measured scale (the variance test judges the scale): with
            # the scale taken from all N values the KS p-value is exact up to that estimate's
            # error, conservative where the sample is every value (Lilliefors)
            measured = scale * math.sqrt(result["variance_ratio"])
            result["p_values"]["goodness_of_fit"] = ks_normal_p(column / measured)
        result.update(name=str(spec["name"]), coordinates=int(spec["coordinates"]),
                      steps=int(spec.get("steps", 0)), sampled=int(column.size))
        per_variable.append(result)
        tests.extend((result["name"], test, p) for test, p in result["p_values"].items())
    global_tests = {}
    if samples.size:
        coordinate_r, coordinate_p, coordinate_pairs = _max_correlation_p(samples)
        step_r, step_p, step_pairs = _max_correlation_p(samples.T)
        global_tests = {"coordinates_independent": {"largest_correlation": coordinate_r, "pairs": coordinate_pairs,
                                                    "p_value": coordinate_p},
                        "steps_independent": {"largest_correlation": step_r, "pairs": step_pairs,
                                              "p_value": step_p}}
        tests.extend(("(all sampled coordinates)", name, g["p_value"]) for name, g in global_tests.items())
    level = alpha / max(1, len(tests))
    failures = [{"variable": name, "test": test, "p_value": p} for name, test, p in tests if p <= level]
    for result in per_variable:
        result["passed"] = all(p > level for p in result["p_values"].values())
    ratios = [r["variance_ratio"] for r in per_variable if "variance_ratio" in r]
    by_name = {r["name"]: r for r in per_variable}
    # more noise than claimed costs utility, not privacy: such a failure alone voids nothing
    utility_only = bool(failures) and all(f["test"] == "variance" and by_name.get(f["variable"], {}).get(
        "std_ratio", 0.0) > 1.0 for f in failures)
    return {
        "passed": not failures,
        "privacy_failure": bool(failures) and not utility_only,
        "certified": True,
        "noise_multiplier": float(noise_multiplier),
        "clip_norm": float(clip_norm),
        "family_alpha": float(alpha),
        "tests": len(tests),
        "level": level,
        "coordinates": int(sum(r["coordinates"] for r in per_variable)),
        "steps": int(max((r["steps"] for r in per_variable), default=0)),
        "variance_ratio_min": float(min(ratios)) if ratios else math.nan,
        "variance_ratio_max": float(max(ratios)) if ratios else math.nan,
        "failures": failures,
        "variables": per_variable,
        "sample_tests": global_tests,
        "sampled_steps": int(samples.shape[0]) if samples.ndim == 2 else 0,
    }


def certify_l2_laplace(noise_norm: float, dimension: int, scale: float, *, claimed_from: str,
                       alpha: float = FAMILY_ALPHA) -> dict[str, Any]:
    """The certificate of one L2-Laplace draw of a linear mechanism (density ∝ exp(−‖b‖/scale)
    in ``dimension`` coordinates): its norm is Gamma(dimension, scale) under the claim, a
    two-sided exact test of the scale the promise implies (``claimed_from`` says how it was
    derived). One draw cannot test the direction's uniformity: the record says so."""
    from scipy.special import gammainc, gammaincc

    x = float(noise_norm) / float(scale)
    p = float(min(1.0, 2.0 * min(gammainc(dimension, x), gammaincc(dimension, x))))
    ratio = float(noise_norm) / (dimension * float(scale))
    return {"certified": True, "passed": p > alpha, "privacy_failure": p <= alpha and ratio < 1.0,
            "family_alpha": float(alpha), "tests": 1, "level": float(alpha),
            "law": "l2_laplace", "coordinates": int(dimension), "steps": 1, "noise_norm": float(noise_norm),
            "claimed_scale": float(scale), "claimed_from": claimed_from, "norm_ratio": ratio,
            "variance_ratio_min": ratio ** 2, "variance_ratio_max": ratio ** 2,
            "p_values": {"norm": p},
            "failures": [] if p > alpha else [{"variable": "weights", "test": "norm", "p_value": p}],
            "untested": "the direction's uniformity (one draw)"}


def certify_l2_laplace_releases(noise: np.ndarray, scale: float, *, claimed_from: str,
                                alpha: float = FAMILY_ALPHA) -> dict[str, Any]:
    """The certificate of R draws of one L2-Laplace mechanism's noise (R × d, density ∝
    exp(−‖b‖/scale) each, independent): the many-runs audit's releases certified in aggregate
    (issue 45). Under the claim the norms are Gamma(d, scale) and the directions uniform on the
    sphere, independent of the norms. Tests, Bonferroni at ``alpha``:

    * ``norm``: Σ‖b‖/scale ~ Gamma(R·d, 1), exact, two-sided (the scale; below it: too little noise);
    * ``norm_law``: the R norms against Gamma(d, their measured scale), Kolmogorov–Smirnov (the
      law's shape; the scale is the norm test's);
    * ``direction_mean``: Rayleigh's test, d·R·‖ū‖² ~ χ²_d for the mean ū of the unit directions
      (a preferred direction, e.g. noise biased by the data);
    * ``direction_spread``: Bingham's test, R·d(d + 2)/2·(tr T² − 1/d) ~ χ²_{(d−1)(d+2)/2} for the
      scatter T = Σ u uᵀ / R (more noise on some coordinates than on others);
    * ``direction_axes``: the mean of Σ_j u_j⁴, 3/(d + 2) under uniformity with variance
      ((9d + 96)/((d + 2)(d + 4)(d + 6)) − 9/(d + 2)²)/R, normal, two-sided (directions drawn
      towards the axes, e.g. independent Laplace coordinates rescaled to the right norm).

    One draw repeated (a seeding bug) shows in every test. The three direction tests are
    asymptotic in R (their far tails want R ≥ 100)."""
    from scipy.special import chdtrc, gammainc, gammaincc
    from scipy.stats import gamma, kstest

    b = np.atleast_2d(np.asarray(noise, dtype=np.float64))
    r, d = b.shape
    scale = float(scale)
    norms = np.linalg.norm(b, axis=1)
    total = float(norms.sum() / scale)
    p_values = {"norm": float(min(1.0, 2.0 * min(gammainc(r * d, total), gammaincc(r * d, total))))}
    if r >= 2 and total > 0:
        # the shape at the measured scale (the norm test judges the scale): conservative, as Lilliefors
        p_values["norm_law"] = float(kstest(norms, gamma(d, scale=float(norms.mean()) / d).cdf).pvalue)
    out: dict[str, Any] = {"releases": int(r), "norm_ratio": total / (r * d)}
    if d >= 2 and r >= 2 and np.all(norms > 0):
        u = b / norms[:, None]
        mean = u.mean(axis=0)
        rayleigh = float(d * r * mean @ mean)
        # tr T² = ‖Uᵀ U‖²_F / R²: the d × d or the R × R Gram matrix, whichever is smaller
        gram = u.T @ u if d <= r else u @ u.T
        trace = float(np.sum(gram * gram)) / r ** 2
        bingham = r * d * (d + 2) / 2.0 * (trace - 1.0 / d)
        fourth = float(np.mean(np.sum(u ** 4, axis=1)))
        variance = ((9.0 * d + 96.0) / ((d + 2.0) * (d + 4.0) * (d + 6.0)) - 9.0 / (d + 2.0) ** 2) / r
        p_values["direction_mean"] = float(chdtrc(d, rayleigh))
        p_values["direction_spread"] = float(chdtrc((d - 1) * (d + 2) / 2.0, bingham))
        p_values["direction_axes"] = two_sided_normal_p((fourth - 3.0 / (d + 2.0)) / math.sqrt(variance))
        out.update(rayleigh=rayleigh, bingham=bingham, fourth_moment=fourth)
    level = alpha / len(p_values)
    failures = [{"variable": "release noise", "test": k, "p_value": p} for k, p in p_values.items() if p <= level]
    # more noise than claimed, and nothing else, costs utility only
    utility_only = bool(failures) and all(f["test"] == "norm" for f in failures) and out["norm_ratio"] > 1.0
    return {"certified": True, "passed": not failures, "privacy_failure": bool(failures) and not utility_only,
            "family_alpha": float(alpha), "tests": len(p_values), "level": level, "law": "l2_laplace_releases",
            "coordinates": int(d), "steps": int(r), "claimed_scale": scale, "claimed_from": claimed_from,
            "variance_ratio_min": out["norm_ratio"] ** 2, "variance_ratio_max": out["norm_ratio"] ** 2,
            "p_values": p_values, "failures": failures, **out}


def _problem(failure: Mapping[str, Any], variables: Mapping[str, Mapping]) -> str:
    test, name = failure["test"], failure["variable"]
    result = variables.get(name, {})
    if test == "variance":
        ratio = result.get("std_ratio", math.nan)
        kind = ("too little noise (a privacy bug)" if ratio < 1
                else "too much noise (a utility bug, not a privacy one: the verdict does not count it)")
        return f"{name}: noise std {ratio:.3g}× the claimed σC, {kind}"
    if test == "norm":
        ratio = result.get("norm_ratio", math.nan)
        return f"noise norm {ratio:.3g}× its expected value under the claimed scale"
    if test == "lag_one":
        return f"{name}: noise correlated with the previous step's (r = {result.get('lag_one_correlation', math.nan):.3g})"
    if test in ("kurtosis", "skewness", "goodness_of_fit"):
        return (f"{name}: noise not Gaussian ({test}; kurtosis {result.get('kurtosis', math.nan):.3g}, 3 for a "
                "Gaussian)")
    if test.startswith("direction_") or test == "norm_law":
        what = {"direction_mean": "a preferred direction", "direction_spread": "more noise on some coordinates",
                "direction_axes": "directions drawn towards the axes", "norm_law": "norms not Gamma(d, scale)"}
        return f"the releases' noise is not L2-Laplace: {what[test]}"
    if test == "coordinates_independent":
        return "noise shared between coordinates"
    if test == "steps_independent":
        return "noise repeated across steps"
    if test == "weights_rule":  # the weight certificate (dpaudit.audit.weight_certificate, issue 45)
        return (f"{name} moved outside the optimizer's rule applied to the certified update (first after update "
                f"{failure.get('after_update', '?')}, {float(failure.get('deviation', math.nan)):.3g} rounding units)")
    if test == "clipped_sum" and name == "(norms)":  # the clipping certificate (dpaudit.audit.clip_monitor)
        return (f"the norms the path clipped by are not its gradients' (data step {failure.get('after_update', '?')}, "
                f"{float(failure.get('deviation', math.nan)):.3g} relative): the sum's sensitivity is not C")
    if test == "clipped_sum":
        return (f"{name}: the sum the noise was added to is not Σ min(1, C/‖g_i‖)·g_i (data step "
                f"{failure.get('after_update', '?')}, {float(failure.get('deviation', math.nan)):.3g} rounding units): "
                "its sensitivity is not C")
    if test == "released_file":
        return f"the saved model file is not the certified model: {failure.get('reason', 'its weights differ')}"
    if test == "batch_rows":
        return f"the batch of data step {failure.get('after_update', '?')} is not the rows the sampler drew"
    return f"{name}: {test}"


def summary_sentence(check: Mapping[str, Any] | None) -> str:
    """The certificate in words (the dossier's promise section, the rows' note)."""
    if not check:
        return "the noise actually added was not measured (a run trained before the noise certificate existed)"
    if not check.get("certified", False):
        return f"the noise actually added was not measured: {check.get('reason', 'no certificate')}"
    coordinates, steps = int(check["coordinates"]), int(check["steps"])
    if check.get("law") == "l2_laplace_releases":
        verdict = "consistent with" if check["passed"] else "NOT consistent with"
        problems = "; ".join(dict.fromkeys(_problem(f, {"release noise": check}) for f in check["failures"]))
        return (f"the noise of the audit's {steps:,} releases ({coordinates} coordinates each) was read: norms "
                f"{check['norm_ratio']:.3g}× their expectation, {verdict} the L2-Laplace law of scale "
                f"{check['claimed_scale']:.4g} ({check['claimed_from']}; norm and direction tests, family-wise level "
                f"{check['family_alpha']:g})" + (f": {problems}" if problems else ""))
    if check.get("law") == "l2_laplace":
        verdict = "consistent with" if check["passed"] else "NOT consistent with"
        return (f"the one noise vector drawn ({coordinates} coordinates) has norm {check['noise_norm']:.4g}, "
                f"{check['norm_ratio']:.3g}× its expectation: {verdict} the scale {check['claimed_scale']:.4g} "
                f"({check['claimed_from']}; two-sided Gamma test p = {check['p_values']['norm']:.2g}); "
                f"{check['untested']} is not tested")
    low, high = math.sqrt(check["variance_ratio_min"]), math.sqrt(check["variance_ratio_max"])
    within = max(abs(1 - low), abs(high - 1)) * 100
    where = f"on all {coordinates:,} coordinates over {steps:,} steps"
    if check["passed"]:
        weights = check.get("weights")
        reached = (f"; the weights moved only by the optimizer's rule applied to the updates it was read from "
                   f"(largest deviation {weights['largest_deviation']:.2g} float rounding units)") if weights else ""
        return (f"the noise actually added was measured {where}: σC within {within:.1f} %, Gaussian and independent "
                f"across steps and coordinates ({check['tests']} tests, family-wise level {check['family_alpha']:g})"
                f"{reached}")
    variables = {v["name"]: v for v in check.get("variables", [])}
    problems = "; ".join(dict.fromkeys(_problem(f, variables) for f in check["failures"]))
    if not check.get("privacy_failure", True):
        return (f"the noise actually added, measured {where}, is more than the accountant assumes: {problems}; "
                "the guarantee holds, the model pays for noise it was not promised")
    if all(f["test"] in ("clipped_sum", "batch_rows") for f in check["failures"]):
        return (f"the noise actually added was measured {where}, but not added to a sum of sensitivity C over the "
                f"rows drawn: {problems}; the released model exists, but its DP guarantee does not hold")
    if all(f["test"] == "weights_rule" for f in check["failures"]):
        return (f"the noise actually added was measured {where}, but the weights did not move by the updates it "
                f"was read from: {problems}; the released model exists, but its DP guarantee does not hold")
    return (f"the noise actually added, measured {where}, is not the noise the accountant analyses: {problems}; "
            "the released model exists, but its DP guarantee does not hold")
