"""What the many-runs linear audit could have caught: the detectable noise factor of its releases.

The claim-curve test of the releases (``dpaudit.dp.canary_bounds.claim_curve_test``, against
pure ε-DP, δ = 0) either rejects or not; the *detectable noise factor* says how strong it
was: the largest f ≤ 1 such that an implementation drawing noise f·b instead of the claimed
b is rejected by this very test (same R releases per side, thresholds, confidence and
neighbour pair) with probability ≥ ``DETECTION_POWER``. The bisection over f and the test's
decision are ``dpaudit.dp.canary_power.detectable_factor_batched``; this module supplies the
simulated implementations, all ``DETECTION_REPETITIONS`` repetitions at once, their noise
drawn once from ``default_rng([seed, DETECTION_STREAM])`` and scaled by f (common random
numbers across f):

* output perturbation (``output_scores_sampler``): the exact law of the scores, from the
  noise radius and its cosine with Δ;
* objective perturbation (``objective_scores_sampler``): exact batched Newton releases, or
  the frozen-Hessian approximation (default; a test checks the two agree).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.special import expit

from dpaudit.audit.linear_neighbours import replace_row
from dpaudit.audit.linear_releases import (
    objective_log_ratio,
    objective_perturbation_noise,
    perturbed_minimizers,
    sum_gradients_and_hessians,
)
from dpaudit.dp.canary_power import detectable_factor_batched
from dpaudit.dp.tradeoff import pure_tradeoff
from dpaudit.profile import model as profile_model

__all__ = [
    "DETECTION_POWER",
    "DETECTION_REPETITIONS",
    "DETECTION_ROUTES",
    "DETECTION_SMALLEST_FACTOR",
    "DETECTION_STREAM",
    "DETECTION_TOLERANCE",
    "linear_detectable_factor",
    "objective_scores_sampler",
    "output_scores_sampler",
]

DETECTION_POWER = 0.8
DETECTION_REPETITIONS = 60
DETECTION_TOLERANCE = 0.01
DETECTION_SMALLEST_FACTOR = 0.02
DETECTION_STREAM = 2  # rng = default_rng([seed, 2]): the simulated implementations' noise
DETECTION_ROUTES = ("frozen_hessian", "exact")  # objective perturbation's simulated releases


def _distance_difference(radius: np.ndarray, cosine: np.ndarray, shift_norm: float, sign: float) -> np.ndarray:
    """‖a − sign·Δ‖ − ‖a‖ for ‖a‖ = radius and cos∠(a, Δ) = cosine, cancellation-free."""
    numerator = shift_norm**2 - 2.0 * sign * radius * cosine * shift_norm
    far = np.sqrt(np.maximum(radius**2 - 2.0 * sign * radius * cosine * shift_norm + shift_norm**2, 0.0))
    denominator = far + radius
    return np.divide(numerator, denominator, out=np.full_like(numerator, shift_norm), where=denominator > 0)


def _uniform_cosines(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> np.ndarray:
    """u·e for u uniform on the unit sphere of R^d and a fixed unit e: ±1 (d = 1), else 2·Beta((d−1)/2, (d−1)/2) − 1."""
    if d == 1:
        return rng.choice(np.array([-1.0, 1.0]), size=shape)
    return 2.0 * rng.beta((d - 1) / 2, (d - 1) / 2, size=shape) - 1.0


def output_scores_sampler(*, d: int, beta: float, shift_norm: float, releases: int, repetitions: int,
                          rng: np.random.Generator):
    """f ↦ scores (repetitions × 2R; D releases first) of output perturbation drawing noise f·b, scored by
    the claimed β. Exact law: a release's score depends on its noise b only through ‖b‖ ~ Gamma(d, 1/β)
    and cos∠(b, Δ), so both are drawn once (common random numbers across f)."""
    radius = rng.gamma(shape=d, scale=1.0 / beta, size=(repetitions, 2 * releases))
    cosine = _uniform_cosines(rng, (repetitions, 2 * releases), d)

    def scores(factor: float) -> np.ndarray:
        r = factor * radius
        # on D: w − A(D) = f b, score β(‖f b − Δ‖ − ‖f b‖); on D′: w − A(D) = Δ + f b, score β(‖f b‖ − ‖f b + Δ‖)
        return np.concatenate([beta * _distance_difference(r[:, :releases], cosine[:, :releases], shift_norm, 1.0),
                               -beta * _distance_difference(r[:, releases:], cosine[:, releases:], shift_norm, -1.0)],
                              axis=1)

    return scores


def objective_scores_sampler(*, x: np.ndarray, t: np.ndarray, ridge: float, scale: float, row: int, z: np.ndarray,
                             t_z: float, releases: int, repetitions: int, rng: np.random.Generator,
                             route: str = "frozen_hessian"):
    """f ↦ scores (repetitions × 2R) of objective perturbation on D = (x, t) and D′ (row ``row`` → (z, t_z))
    drawing noise f·b (the claimed noise law), scored by the claimed log-density ratio.

    ``route="exact"``: batched Newton releases and ``objective_log_ratio`` (R·n·d² per Newton
    iteration and release: seconds per f at n ~ 300, d = 30). ``"frozen_hessian"``: the release
    w̃ = w₀ − H₀⁻¹ f b (one Newton step from the non-private minimizer w₀ of each side, H₀ its
    Hessian) enters only through the canary rows' two margins; the norm term uses the drawn
    noise itself, ∇L(w) = −f b, and the determinant-lemma term the frozen H₀ of D. Its
    error is second order in ‖H₀⁻¹ f b‖ (a test checks the factor against the exact route).
    """
    if route not in DETECTION_ROUTES:
        raise ValueError(f"route must be 'exact' or 'frozen_hessian', got {route!r}")
    n, d = x.shape
    x_prime, t_prime = replace_row(x, t, row, z, t_z)
    if route == "exact":
        noise = np.stack([objective_perturbation_noise(rng, 2 * releases, d, scale) for _ in range(repetitions)])

        def exact(factor: float) -> np.ndarray:
            out = np.empty((repetitions, 2 * releases))
            for k in range(repetitions):
                w_in, _ = perturbed_minimizers(x, t, ridge, factor * noise[k, :releases])
                w_out, _ = perturbed_minimizers(x_prime, t_prime, ridge, factor * noise[k, releases:])
                out[k] = objective_log_ratio(np.vstack([w_in, w_out]), x, t, ridge, scale, row, z, t_z)
            return out

        return exact
    centers, inverses = [], []
    for features, labels in ((x, t), (x_prime, t_prime)):
        w0 = profile_model.fit(features, labels, ridge / n, allow_zero_rows=True).weights
        _, h0 = sum_gradients_and_hessians(features, labels, ridge, w0[None, :])
        centers.append(w0)
        inverses.append(np.linalg.inv(h0[0]))
    u = np.stack([x[row], z], axis=1)  # d × 2
    gram = u.T @ inverses[0] @ u  # Uᵀ H₀⁻¹ U of D
    # Everything the score needs is linear in b: its projections on x_row, z and H₀⁻¹x_row, H₀⁻¹z of
    # the side it was released on, and ‖b‖ (drawn once, scaled by f).
    on_u, on_h = np.empty((repetitions, 2 * releases, 2)), np.empty((repetitions, 2 * releases, 2))
    radius = np.empty((repetitions, 2 * releases))
    projections = np.concatenate([u, inverses[0] @ u, inverses[1] @ u], axis=1)  # d × 6
    for k in range(repetitions):  # one repetition's noise at a time (the same draws as one big call)
        noise = objective_perturbation_noise(rng, 2 * releases, d, scale)
        p = noise @ projections
        on_u[k], radius[k] = p[:, :2], np.sqrt(np.einsum("rd,rd->r", noise, noise))
        on_h[k, :releases], on_h[k, releases:] = p[:releases, 2:4], p[releases:, 4:6]
    base_margins = np.concatenate([np.broadcast_to(centers[0] @ u, (releases, 2)),
                                   np.broadcast_to(centers[1] @ u, (releases, 2))])  # 2R × 2
    sign = np.repeat([1.0, -1.0], releases)  # on D: ∇L_D(w) = −b; on D′: ∇L_D′(w) = −b
    xx, zz, xz = x[row] @ x[row], z @ z, x[row] @ z

    def frozen(factor: float) -> np.ndarray:
        margins = base_margins[None] - factor * on_h  # w̃·x_row, w̃·z
        s_i, s_z = expit(-t[row] * margins[..., 0]), expit(-t_z * margins[..., 1])
        a_i, a_z = t[row] * s_i, -t_z * s_z  # ∇L_D′ − ∇L_D at w̃ = a_i x_row + a_z z
        along = factor * (a_i * on_u[..., 0] + a_z * on_u[..., 1])  # b·change
        change2 = a_i**2 * xx + a_z**2 * zz + 2 * a_i * a_z * xz
        b2 = (factor * radius) ** 2
        # on D: ‖−b + c‖ − ‖b‖; on D′: ‖b‖ − ‖b + c‖ (c = change); as (num)/(sum of the norms)
        inner = np.where(sign > 0, b2 - 2 * along + change2, b2 + 2 * along + change2)
        other = np.sqrt(np.maximum(inner, 0.0))
        numerator = -2 * along + sign * change2
        difference = np.divide(numerator, other + factor * radius, out=np.zeros_like(numerator),
                               where=other + factor * radius > 0)
        c1, c2 = -s_i * (1 - s_i), s_z * (1 - s_z)
        det = (1 + c1 * gram[0, 0]) * (1 + c2 * gram[1, 1]) - c1 * c2 * gram[0, 1] * gram[1, 0]
        return difference / scale - np.log(det)

    return frozen


def linear_detectable_factor(*, mechanism: str, epsilon: float, alpha: float, per_tail: int | None, seed: int,
                             releases: int, x: np.ndarray, t: np.ndarray, row: int, z: np.ndarray, t_z: float,
                             shift_norm: float, beta: float | None = None, ridge: float | None = None,
                             noise_scale: float | None = None, neighbour: str,
                             repetitions: int = DETECTION_REPETITIONS,
                             route: str = "frozen_hessian") -> dict[str, Any]:
    """``detectable_noise_factor`` and its details (the audit record's keys) of the claim-curve test at
    (``alpha``, ``per_tail``, δ = 0, ``releases`` per side) for the pair D = (x, t), D′ = row ``row``
    replaced by (z, t_z): output perturbation needs ``beta`` (its noise is drawn by the exact law, so
    ``route`` is ``"exact_law"`` in the record), objective perturbation ``ridge`` and ``noise_scale``."""
    start = time.perf_counter()
    rng = np.random.default_rng([seed, DETECTION_STREAM])
    if mechanism == "output_perturbation":
        sampler = output_scores_sampler(d=x.shape[1], beta=beta, shift_norm=shift_norm, releases=releases,
                                        repetitions=repetitions, rng=rng)
        route = "exact_law"
    else:
        sampler = objective_scores_sampler(x=x, t=t, ridge=ridge, scale=noise_scale, row=row, z=z, t_z=t_z,
                                           releases=releases, repetitions=repetitions, rng=rng, route=route)
    included = np.repeat([True, False], releases)  # D releases first, as the audit's scores
    found = detectable_factor_batched(lambda factor: (sampler(factor), included), curve=pure_tradeoff(epsilon),
                                      alpha=alpha, per_tail=per_tail, power=DETECTION_POWER,
                                      tolerance=DETECTION_TOLERANCE, lower=DETECTION_SMALLEST_FACTOR)
    return {"detectable_noise_factor": found["factor"],
            "detectable_noise_factor_details": {
                "rejection_rate_at_factor": found["power_at_factor"],
                "rejection_rate_at_claim": found["powers"][1.0], "evaluations": found["evaluations"],
                "rates": {f"{k:.6g}": v for k, v in found["powers"].items()},
                "power": DETECTION_POWER, "repetitions": int(repetitions),
                "seed": [int(seed), DETECTION_STREAM], "tolerance": DETECTION_TOLERANCE,
                "smallest_factor": DETECTION_SMALLEST_FACTOR, "releases": int(releases),
                "alpha": float(alpha), "per_tail": per_tail, "delta": 0.0,
                "curve": "pure", "route": route, "neighbour": neighbour,
                "seconds": time.perf_counter() - start}}
