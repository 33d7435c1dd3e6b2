"""Releases of the pure-ε linear mechanisms and their exact log-density ratios.

The many-runs audit (``dpaudit.audit.linear_audit``) releases a mechanism R times on
D and R times on its neighbour D′ (``dpaudit.audit.linear_neighbours``) and
scores each release w by score(w) = log p_D(w) − log p_D′(w).

* Output perturbation: w = A(D) + b, density ∝ exp(−β‖b‖), β = nΛε/2, so
  score(w) = β(‖w − A(D′)‖ − ‖w − A(D)‖) (``profile.profiles.privacy_loss``,
  cancellation-free), |score| ≤ β‖Δ‖ ≤ ε.
* Objective perturbation (diffprivlib 0.6.3 variant, ``profile.mechanisms``):
  the release minimizes L_D(w) + bᵀw with L_D(w) = Σ_j ln(1 + e^{−t_j wᵀx_j}) +
  ½ρ‖w‖² (ρ = 1/C + Δ_extra). The first-order condition makes the noise a function
  of the release, b = −∇L_D(w), a bijection with Jacobian −∇²L_D(w); the noise has
  a Gamma(d, s) radius and a uniform direction, density ∝ exp(−‖b‖/s), s the noise
  scale. Hence p_D(w) ∝ exp(−‖∇L_D(w)‖/s)·det ∇²L_D(w) and
  score(w) = (‖∇L_D′(w)‖ − ‖∇L_D(w)‖)/s + ln det ∇²L_D(w) − ln det ∇²L_D′(w),
  with ∇L_D′ = ∇L_D − ∇ℓ_i + ∇ℓ_z and the determinant ratio of the rank-2 update
  by the matrix determinant lemma. The formula is exact at the exact minimizer
  (``solver="newton"``, batched, to ‖step‖ < 1e−12); with the library's L-BFGS
  (``solver="lbfgs"``: pgtol 1e−4) b(w) differs from the drawn noise by the
  residual gradient, which moves a score by at most ~√d·1e−4/s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit

from dpaudit.profile import mechanisms as profile_mechanisms
from dpaudit.profile import model as profile_model
from dpaudit.profile.profiles import privacy_loss

__all__ = [
    "MAX_NEWTON_ITERATIONS",
    "NEWTON_STEP_TOLERANCE",
    "SOLVERS",
    "objective_log_ratio",
    "objective_perturbation_noise",
    "objective_perturbation_noise_of",
    "objective_perturbation_releases",
    "output_log_ratio",
    "perturbed_minimizers",
    "sum_gradients_and_hessians",
]

SOLVERS = ("newton", "lbfgs")
NEWTON_STEP_TOLERANCE = 1e-12
MAX_NEWTON_ITERATIONS = 50
# Releases per block in the batched Newton and the objective scores: the largest array of a block
# (margins, Hessians or the Hessian products, see ``_block``) stays around 32 MB.
_BLOCK_ELEMENTS = 2**22
_OUTER_ELEMENTS = 2**24  # x_j x_jᵀ table (128 MB) above which Hessians are batched matmuls


# ----------------------------------------------------------------- output perturbation


def output_log_ratio(releases: np.ndarray, center: np.ndarray, shift: np.ndarray, beta: float) -> np.ndarray:
    """β(‖w − A(D′)‖ − ‖w − A(D)‖) for releases w (R × d), A(D) = ``center``, A(D′) = center + shift."""
    return privacy_loss(np.atleast_2d(releases) - center[None, :], shift[None, :], beta)[:, 0]


# -------------------------------------------------------------- objective perturbation


def _block(n: int, d: int, outer: np.ndarray | None) -> int:
    """Releases per block: B × n margins and B × d² Hessians, or B × d × n products without the outer table."""
    per_release = max(n, d * d) if outer is not None else n * d
    return int(max(1, _BLOCK_ELEMENTS // max(per_release, 1)))


def _outer_rows(x: np.ndarray) -> np.ndarray | None:
    """x_j x_jᵀ flattened (n × d²) when small enough: the Hessians of a block are then one BLAS product."""
    n, d = x.shape
    if n * d * d > _OUTER_ELEMENTS:
        return None
    return (x[:, :, None] * x[:, None, :]).reshape(n, d * d)


def sum_gradients_and_hessians(x, t, ridge, w, outer=None):
    """∇L(w) (B × d) and ∇²L(w) (B × d × d) of L(w) = Σ ln(1 + e^{−t xᵀw}) + ½ρ‖w‖² for a block of points."""
    d = x.shape[1]
    s = expit(-(w @ x.T) * t[None, :])  # σ(−m), B × n
    gradient = (-(t[None, :] * s)) @ x + ridge * w
    h = s * (1.0 - s)
    if outer is not None:
        hessian = (h @ outer).reshape(-1, d, d)
    else:
        hessian = np.matmul(x.T[None, :, :] * h[:, None, :], x)
    hessian[:, np.arange(d), np.arange(d)] += ridge
    return gradient, hessian


def perturbed_minimizers(x: np.ndarray, t: np.ndarray, ridge: float, noise: np.ndarray, *,
                         tol: float = NEWTON_STEP_TOLERANCE) -> tuple[np.ndarray, int]:
    """argmin_w L(w) + bᵀw for every noise row b (R × d), batched Newton; returns (R × d, iterations).

    Warm start: w₀ − H₀⁻¹b from the non-private minimizer w₀ (mean form with Λ = ρ/n).
    """
    n, d = x.shape
    noise = np.atleast_2d(noise)
    base = profile_model.fit(x, t, ridge / n, allow_zero_rows=True).weights
    outer = _outer_rows(x)
    _, h0 = sum_gradients_and_hessians(x, t, ridge, base[None, :], outer)
    weights = base[None, :] - np.linalg.solve(h0[0], noise.T).T
    most = 0
    block = _block(n, d, outer)
    for start in range(0, noise.shape[0], block):
        stop = min(noise.shape[0], start + block)
        active = np.arange(start, stop)
        for iteration in range(1, MAX_NEWTON_ITERATIONS + 1):  # noqa: B007 (read after the loop)
            gradient, hessian = sum_gradients_and_hessians(x, t, ridge, weights[active], outer)
            step = np.linalg.solve(hessian, (gradient + noise[active])[..., None])[..., 0]
            weights[active] -= step
            active = active[np.linalg.norm(step, axis=1) >= tol * np.maximum(1.0, np.linalg.norm(weights[active],
                                                                                                    axis=1))]
            if active.size == 0:
                break
        else:
            raise RuntimeError(f"batched Newton left {active.size} releases above ‖step‖ {tol} "
                               f"after {MAX_NEWTON_ITERATIONS} iterations")
        most = max(most, iteration)
    return weights, most


def objective_perturbation_noise(rng: np.random.Generator, count: int, d: int, scale: float) -> np.ndarray:
    """diffprivlib 0.6.3's noise: radius = sum of four Gamma(d/4, scale) draws, uniform direction."""
    radii = rng.gamma(d / 4, scale, size=(count, 4)).sum(axis=1)
    return radii[:, None] * profile_mechanisms.unit_directions(rng, count, d)


def objective_perturbation_releases(x: np.ndarray, t: np.ndarray, epsilon: float, lam: float, count: int,
                                    rng: np.random.Generator, *, solver: str = "newton",
                                    noise_factor: float = 1.0) -> tuple[np.ndarray, dict[str, Any]]:
    """``count`` releases of the objective perturbation mechanism on (x, t), C = 1/(nΛ) as the training job.

    ``solver="lbfgs"`` calls ``profile.mechanisms.objective_perturbation`` once per release (the
    mechanism as trained); ``"newton"`` draws the same noise law and solves all perturbed
    objectives exactly, batched. ``noise_factor`` (tests only; newton only) scales the noise.
    """
    n, d = x.shape
    c_value = 1.0 / (n * lam)
    params = profile_mechanisms.objective_perturbation_parameters(epsilon, c_value, 1.0)
    info = {**params, "C": c_value, "ridge": 1.0 / c_value + params["extra_regularizer"], "solver": solver}
    if solver == "lbfgs":
        if noise_factor != 1.0:
            raise ValueError("noise_factor is only supported with solver='newton'")
        releases = np.array([profile_mechanisms.objective_perturbation(x, t, epsilon, c_value, rng, data_norm=1.0)[0]
                             for _ in range(count)])
        return releases, info | {"newton_iterations": None}
    if solver != "newton":
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    noise = noise_factor * objective_perturbation_noise(rng, count, d, params["noise_scale"])
    releases, iterations = perturbed_minimizers(x, t, info["ridge"], noise)
    return releases, info | {"newton_iterations": iterations}


def objective_perturbation_noise_of(releases: np.ndarray, x: np.ndarray, t: np.ndarray, ridge: float) -> np.ndarray:
    """The noise b = −∇L(w) that objective perturbation releases w (R × d) on (x, t) were drawn with:
    the first-order condition ∇L(w) + b = 0 (exact at the exact minimizer; with L-BFGS off by the
    residual gradient). The many-runs audit certifies these draws (issue 45)."""
    releases = np.atleast_2d(releases)
    out = np.empty_like(releases, dtype=np.float64)
    block = int(max(1, _BLOCK_ELEMENTS // max(x.shape[0], 1)))
    for start in range(0, releases.shape[0], block):
        w = releases[start:start + block]
        s = expit(-(w @ x.T) * t[None, :])
        out[start:start + block] = (t[None, :] * s) @ x - ridge * w
    return out


def objective_log_ratio(releases: np.ndarray, x: np.ndarray, t: np.ndarray, ridge: float, scale: float,
                        row: int, z: np.ndarray, t_z: float) -> np.ndarray:
    """log p_D(w) − log p_D′(w) of objective perturbation releases w (R × d); D′ = D with row ``row`` → (z, t_z).

    (‖∇L_D′(w)‖ − ‖∇L_D(w)‖)/s − ln det(I₂ + C Uᵀ ∇²L_D(w)⁻¹ U), U = [x_row, z], C = diag(−h_row, h_z):
    the determinant lemma for ∇²L_D′ = ∇²L_D − h_row x_row x_rowᵀ + h_z z zᵀ.
    """
    releases = np.atleast_2d(releases)
    n, d = x.shape
    scores = np.empty(releases.shape[0])
    u = np.stack([x[row], z], axis=1)  # d × 2
    outer = _outer_rows(x)
    block = _block(n, d, outer)
    for start in range(0, releases.shape[0], block):
        w = releases[start:start + block]
        gradient, hessian = sum_gradients_and_hessians(x, t, ridge, w, outer)
        m_i, m_z = t[row] * (w @ x[row]), t_z * (w @ z)
        s_i, s_z = expit(-m_i), expit(-m_z)
        change = (-t_z * s_z)[:, None] * z[None, :] - (-t[row] * s_i)[:, None] * x[row][None, :]
        other = gradient + change
        norm_d, norm_other = np.linalg.norm(gradient, axis=1), np.linalg.norm(other, axis=1)
        numerator = 2.0 * np.einsum("bd,bd->b", gradient, change) + np.einsum("bd,bd->b", change, change)
        denominator = norm_d + norm_other
        norm_difference = np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)
        solved = np.linalg.solve(hessian, np.broadcast_to(u, (w.shape[0], d, 2)))  # B × d × 2
        gram = np.einsum("dk,bdl->bkl", u, solved)  # Uᵀ H⁻¹ U
        coefficients = np.stack([-s_i * (1 - s_i), s_z * (1 - s_z)], axis=1)  # B × 2
        lemma = np.eye(2)[None, :, :] + coefficients[:, :, None] * gram
        sign, logdet = np.linalg.slogdet(lemma)
        if (sign <= 0).any():
            raise FloatingPointError("a Hessian of the neighbour's objective is not positive definite")
        scores[start:start + w.shape[0]] = norm_difference / scale - logdet
    return scores
