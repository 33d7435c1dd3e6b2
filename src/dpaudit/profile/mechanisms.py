"""DP mechanisms for the linear model of the privacy-profile family.

Output perturbation (Chaudhuri et al. 2011, Alg. 1) adds L2-Laplace noise,
density ∝ exp(−β‖b‖₂) with β = nΛε/2, to the exact minimizer. Objective
perturbation reimplements diffprivlib 0.6.3's LogisticRegression (with
scikit-learn < 1.4) without an intercept, as LeBlond et al. 2023 used for Fig. 1.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import fmin_l_bfgs_b
from scipy.special import expit

from dpaudit.profile.model import check_regularization

OBJECTIVE_PERTURBATION_ALGORITHM = "diffprivlib-0.6.3-logistic-regression(sklearn<1.4,fit_intercept=False)"
_DIFFPRIVLIB_C = 0.25  # bound on the logistic loss' second derivative
_LBFGS_MAXITER = 100
_LBFGS_PGTOL = 1e-4


def output_perturbation_beta(n: int, lam: float, epsilon: np.ndarray | float) -> np.ndarray | float:
    """β = nΛε/2: the L2-Laplace rate for the argmin's sensitivity 2/(nΛ)."""
    lam = check_regularization(lam)
    epsilon = np.asarray(epsilon, dtype=np.float64)
    if (epsilon <= 0).any() or not np.isfinite(epsilon).all():
        raise ValueError(f"ε must be finite and positive, got {epsilon.ravel()[:5].tolist()}")
    beta = n * lam * epsilon / 2.0
    return float(beta) if beta.ndim == 0 else beta


def unit_directions(rng: np.random.Generator, count: int, d: int) -> np.ndarray:
    z = rng.standard_normal((count, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def l2_laplace_noise(rng: np.random.Generator, count: int, d: int, beta: float) -> np.ndarray:
    """count draws of b with density ∝ exp(−β‖b‖₂): radius Gamma(d, 1/β) times a uniform direction."""
    if not beta > 0:
        raise ValueError(f"β must be positive, got {beta!r}")
    radii = rng.gamma(shape=d, scale=1.0 / beta, size=count)
    return radii[:, None] * unit_directions(rng, count, d)


def output_perturbation(weights: np.ndarray, beta: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """count samples of 𝒜(D) = A(D) + b."""
    return weights[None, :] + l2_laplace_noise(rng, count, weights.size, beta)


def objective_perturbation_parameters(epsilon: float, C: float, data_norm: float = 1.0) -> dict:
    """ε′ and the extra regularizer Δ of diffprivlib 0.6.3 (its 0.5α variant of Chaudhuri Alg. 2)."""
    if not epsilon > 0 or not C > 0 or not data_norm > 0:
        raise ValueError(f"objective perturbation needs ε, C, data_norm > 0, got {epsilon}, {C}, {data_norm}")
    alpha = 1.0 / C
    epsilon_prime = epsilon - 2 * np.log(1 + _DIFFPRIVLIB_C * data_norm / (0.5 * alpha))
    extra_regularizer = 0.0
    if epsilon_prime <= 0:
        extra_regularizer = _DIFFPRIVLIB_C * data_norm / (np.expm1(epsilon / 4)) - 0.5 * alpha
        epsilon_prime = epsilon / 2
    return {"epsilon_prime": float(epsilon_prime), "extra_regularizer": float(extra_regularizer),
            "noise_scale": 2 * data_norm / float(epsilon_prime), "algorithm": OBJECTIVE_PERTURBATION_ALGORITHM}


def objective_perturbation(features: np.ndarray, labels: np.ndarray, epsilon: float, C: float,
                           rng: np.random.Generator, data_norm: float = 1.0) -> tuple[np.ndarray, dict]:
    """One model from diffprivlib 0.6.3's objective perturbation (sum-form loss, no intercept)."""
    norms = np.linalg.norm(features, axis=1)
    clipped = features / np.maximum(1.0, norms / data_norm)[:, None]
    d = features.shape[1]
    params = objective_perturbation_parameters(epsilon, C, data_norm)
    # diffprivlib draws the norm as a sum of four Gamma(d/4) variables: Gamma(d) in distribution.
    radius = rng.gamma(d / 4, params["noise_scale"], size=4).sum()
    noise = radius * unit_directions(rng, 1, d)[0]
    ridge = 1.0 / C + params["extra_regularizer"]

    def value_and_gradient(w):
        margins = labels * (clipped @ w)
        loss = np.logaddexp(0.0, -margins).sum() + 0.5 * ridge * w @ w + noise @ w
        grad = clipped.T @ (-labels * expit(-margins)) + ridge * w + noise
        return loss, grad

    weights, _, info = fmin_l_bfgs_b(value_and_gradient, np.zeros(d), maxiter=_LBFGS_MAXITER, pgtol=_LBFGS_PGTOL)
    return weights, {**params, "noise_norm": float(radius), "lbfgs_iterations": int(info["nit"]), "C": C}
