"""Many-runs audit of the pure-ε linear mechanisms (output and objective perturbation).

Training takes milliseconds, so the audit releases the mechanism R times on D (the
run's members, scaled into the unit ball as ``dpaudit.training.linear`` does) and R
times on a neighbour D′ (the mechanisms' relation is ``replace_one``: one row of D
replaced), scores every release by the EXACT log-density ratio
``score(w) = log p_D(w) − log p_D′(w)`` (the Neyman–Pearson statistic: no test of
D against D′ does better at any false-positive rate) and turns the two score
samples into a Clopper–Pearson ε lower bound with
``dpaudit.metrics.mia.epsilon_lower_bound`` (threshold chosen on one half, counted
on the other; member = a release on D, loss = −score).

Neighbour (default ``crafted_pair``). Both canary rows are crafted, unit norm and outside
the data: D = members ∪ {(x_in, +1)}, D′ = members ∪ {(x_out, +1)}, a replace-one pair
(n + 1 rows each, β and C computed with n + 1). A row (x = −v, t = +1) adds σ(w·v)v to
the summed gradient, and strong convexity of J_D′ gives ‖Δ‖ ≤ ‖g_out(w) − g_in(w)‖/(nΛ) at
w = A(D). The logistic gradient caps that numerator by 2·``ratio_ceiling``(‖w‖): 1 at w = 0
(v_out = −v_in) and → 2 only as ‖w‖ → ∞, so the sensitivity bound 2/(nΛ) is never reached:
Λ‖w‖ ≤ σ(‖w‖) bounds ‖w‖ by a* = 0.659 at Λ = 1, where the pair's ε (output perturbation,
β‖Δ‖) is ≤ 0.5242 ε on ANY data (0.5003 ε on breast_cancer's members, ‖w‖ = 0.07). The
search maximizes the first-order shift and refits the best candidates exactly; objective
perturbation maximizes ‖g_out − g_in‖ instead (its noise lives in gradient space).

Alternative neighbour (``worst_replacement``). The privacy loss of a pair grows with the shift
Δ = A(D′) − A(D) of the minimizer (output perturbation: sup |score| = β‖Δ‖ exactly).
To first order Δ ≈ H⁻¹(∇ℓ_i − ∇ℓ_z)/n (mean form, H the Hessian of J at A(D)).
A replacement row z in the unit ball with label t_z has gradient σ(w·v)·v with
v = −t_z z, so the replacement is a unit direction v (z = −t_i v keeps row i's
label; the loss of z, ln(1 + e^{w·v}), does not depend on the label). For every
row i, ‖H⁻¹(∇ℓ_i − σ(w·v)v)‖ is maximized over unit v by the ascent
v ← ∇F/‖∇F‖ (monotone for convex F, from three starts); the ``candidates`` rows
with the largest first-order shift, plus the row the privacy profile flags as most
exposed (argmax of its removal shifts δ_i, ``profile.neighbours.worst_case_shifts``),
are refitted exactly (Newton on D′) and the largest exact ‖Δ‖ wins.

Scores.

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

The CEILING stored beside the bound is what perfect separation certifies with the
same evaluation counts (TP = n_eval, FP = 0; ``dp.hypothesis.epsilon_from_counts``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from dpaudit.dp.tradeoff import pure_tradeoff
from dpaudit.profile import mechanisms as profile_mechanisms
from dpaudit.profile import model as profile_model
from dpaudit.profile import neighbours as profile_neighbours
from dpaudit.profile.profiles import privacy_loss
from dpaudit.training.linear import NEIGHBOURING_RELATION, feature_scale

__all__ = [
    "MECHANISMS",
    "SCORE_COLUMNS",
    "SOLVERS",
    "NEIGHBOURS",
    "THREAT_MODEL",
    "CraftedPair",
    "Replacement",
    "claim_rejects",
    "crafted_pair",
    "detectable_factor",
    "objective_scores_sampler",
    "output_scores_sampler",
    "ratio_ceiling",
    "linear_release_scores",
    "objective_log_ratio",
    "objective_perturbation_releases",
    "output_log_ratio",
    "perturbed_minimizers",
    "worst_replacement",
]

THREAT_MODEL = "many_runs"  # the canary family's name for this audit
SCORE_KIND = "log_density_ratio"
MECHANISMS = ("output_perturbation", "objective_perturbation")
SOLVERS = ("newton", "lbfgs")
SCORE_COLUMNS = ("canary_id", "included", "score", "threat_model")
NEIGHBOURS = ("crafted", "worst_replacement")
NEWTON_STEP_TOLERANCE = 1e-12
MAX_NEWTON_ITERATIONS = 50
ASCENT_ITERATIONS = 100
# Releases per block in the batched Newton and the objective scores: the largest array of a block
# (margins, Hessians or the Hessian products, see ``_block``) stays around 32 MB.
_BLOCK_ELEMENTS = 2**22
_OUTER_ELEMENTS = 2**24  # x_j x_jᵀ table (128 MB) above which Hessians are batched matmuls
# Noise streams: rng = default_rng([seed, stream]); D releases, D′ releases.
_STREAM_INCLUDED, _STREAM_EXCLUDED = 0, 1


@dataclass(frozen=True)
class Replacement:
    """The replace-one neighbour D′: row ``row`` of D replaced by (``x``, ``t``)."""

    row: int  # 0-based index into the members
    x: np.ndarray  # replacement features, ‖x‖ ≤ 1
    t: float  # its label, ±1 (row ``row``'s own label)
    shift: np.ndarray  # exact A(D′) − A(D)
    first_order_shift_norm: float  # ‖H⁻¹(∇ℓ_i − ∇ℓ_z)‖/n, the ranking criterion
    removal_rank: int  # rank of ``row`` among the profile's removal shifts δ_i (0 = most exposed)
    profile_row: int  # argmax δ_i, always among the refitted candidates
    refitted: int  # number of candidate rows refitted exactly

    @property
    def shift_norm(self) -> float:
        return float(np.linalg.norm(self.shift))


def _replace(x: np.ndarray, t: np.ndarray, row: int, z: np.ndarray, t_z: float) -> tuple[np.ndarray, np.ndarray]:
    x2, t2 = x.copy(), t.copy()
    x2[row], t2[row] = z, t_z
    return x2, t2


def _best_directions(weights: np.ndarray, gradients: np.ndarray, inverse: np.ndarray,
                     iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row i, the unit v maximizing F_i(v) = ½‖M(∇ℓ_i − σ(w·v)v)‖² (M = H⁻¹) and √(2F) there.

    ∇F = −(σ I + σ′ w vᵀ) M r with r = M(∇ℓ_i − σ v); v ← ∇F/‖∇F‖ increases a convex F
    monotonically (F is convex in v for fixed σ, and σ(w·v) varies slowly). Starts:
    −∇ℓ_i, −M∇ℓ_i and the top eigenvector of M signed against ∇ℓ_i.
    """
    n, d = gradients.shape
    _, eigenvectors = np.linalg.eigh(inverse)
    top = eigenvectors[:, -1]
    fallback = np.zeros(d)
    fallback[0] = 1.0

    def unit(v):
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return np.where(norms > 0, v / np.where(norms > 0, norms, 1.0), fallback[None, :])

    sign = np.where(gradients @ top > 0, -1.0, 1.0)[:, None]
    starts = (unit(-gradients), unit(-gradients @ inverse), sign * top[None, :])
    best_value, best_v = np.full(n, -np.inf), np.zeros((n, d))

    def value(v):
        s = expit(v @ weights)
        return np.linalg.norm((gradients - s[:, None] * v) @ inverse, axis=1)

    for v in starts:
        current = value(v)
        for _ in range(iterations):
            s = expit(v @ weights)
            r = (gradients - s[:, None] * v) @ inverse
            mr = r @ inverse
            grad = -(s[:, None] * mr + (s * (1 - s) * np.einsum("nd,nd->n", v, mr))[:, None] * weights[None, :])
            candidate = unit(grad)
            new = value(candidate)
            improved = new > current
            v = np.where(improved[:, None], candidate, v)
            current = np.where(improved, new, current)
            if not improved.any():
                break
        better = current > best_value
        best_v[better], best_value[better] = v[better], current[better]
    return best_v, best_value


def worst_replacement(x: np.ndarray, t: np.ndarray, lam: float, *, candidates: int = 16,
                      iterations: int = ASCENT_ITERATIONS) -> Replacement:
    """The replace-one neighbour whose exact minimizer shift ‖A(D′) − A(D)‖ is largest (module docstring).

    ``x`` (n × d, rows in the unit ball) and ``t`` (±1) are the scaled members.
    """
    x, t = profile_model.check_view(x, t, allow_zero_rows=True)
    lam = profile_model.check_regularization(lam)
    n, d = x.shape
    base = profile_model.fit(x, t, lam, allow_zero_rows=True)
    ex = profile_model.per_example(x, t, base.weights)
    hessian = (x.T * ex.hessian_weights) @ x / n + lam * np.eye(d)
    inverse = np.linalg.inv(hessian)
    directions, first_order = _best_directions(base.weights, ex.gradients, inverse, iterations)
    first_order = first_order / n
    _, removal = profile_neighbours.worst_case_shifts(base.weights, ex.gradients, lam)
    profile_row = int(np.argmax(removal))
    order = np.argsort(-first_order, kind="stable")
    rows = list(dict.fromkeys([*order[:max(1, candidates)].tolist(), profile_row]))
    best: tuple[float, int, np.ndarray, np.ndarray] | None = None
    for row in rows:
        z = -t[row] * directions[row]
        z = z / max(1.0, float(np.linalg.norm(z)))
        x2, t2 = _replace(x, t, row, z, t[row])
        shift = profile_model.fit(x2, t2, lam, allow_zero_rows=True).weights - base.weights
        norm = float(np.linalg.norm(shift))
        if best is None or norm > best[0]:
            best = (norm, row, z, shift)
    _, row, z, shift = best
    removal_rank = int(np.flatnonzero(np.argsort(-removal, kind="stable") == row)[0])
    return Replacement(row=int(row), x=z, t=float(t[row]), shift=shift,
                       first_order_shift_norm=float(first_order[row]), removal_rank=removal_rank,
                       profile_row=profile_row, refitted=len(rows))


# ------------------------------------------------------------------ the crafted canary pair


@dataclass(frozen=True)
class CraftedPair:
    """The replace-one pair D = members ∪ {(x_in, t_in)}, D′ = members ∪ {(x_out, t_out)} (n + 1 rows each).

    Both canary rows are crafted (unit norm, outside the data); the members are common to D and D′.
    """

    x_in: np.ndarray
    t_in: float
    x_out: np.ndarray
    t_out: float
    shift: np.ndarray  # exact A(D′) − A(D)
    criterion: str  # "minimizer" (output perturbation) or "gradient" (objective perturbation)
    first_order_shift_norm: float  # ‖H⁻¹(g_in − g_out)‖/(n + 1) at A(members)
    gradient_change_norm: float  # ‖g_out(w) − g_in(w)‖ at w = A(D): ≤ 2, the sensitivity's numerator
    shift_bound: float  # ‖g_out(w) − g_in(w)‖/((n + 1)Λ) at w = A(D): strong convexity bounds ‖Δ‖ by it
    weights_norm: float  # ‖A(D)‖: the logistic gradient σ(w·v)v caps ‖g_out − g_in‖ by 2·ratio_ceiling(‖w‖)

    @property
    def shift_norm(self) -> float:
        return float(np.linalg.norm(self.shift))


def _canary_gradient(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """∇ℓ of the row (x = −v, t = +1): σ(w·v)v (rows of v)."""
    return expit(v @ w)[..., None] * v


def ratio_ceiling(weights_norm: float, grid: int = 721) -> float:
    """½ sup_{‖v₁‖=‖v₂‖=1} ‖σ(w·v₁)v₁ − σ(w·v₂)v₂‖ at ‖w‖ = ``weights_norm``: the largest fraction of the
    sensitivity bound 2/(nΛ) any replace-one pair can shift a minimizer with this norm by (strong
    convexity: ‖Δ‖ ≤ ‖g_out(w) − g_in(w)‖/(nΛ)). The optimum is coplanar with w and symmetric
    about it (v = (cos φ, ±sin φ)), so ½ · max_φ ‖…‖ over a grid in φ; → 1 only as ‖w‖ → ∞."""
    phi = np.linspace(0.0, np.pi, int(grid))
    p1, p2 = phi[:, None], phi[None, :]
    s1, s2 = expit(weights_norm * np.cos(p1)), expit(weights_norm * np.cos(p2))
    gap = np.hypot(s1 * np.cos(p1) - s2 * np.cos(p2), s1 * np.sin(p1) + s2 * np.sin(p2))
    return float(gap.max() / 2.0)


def _pair_search(w: np.ndarray, metric: np.ndarray, starts: list[tuple[np.ndarray, np.ndarray]]
                 ) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Maximize ‖M(g(v₁) − g(v₂))‖ over unit v₁, v₂ (L-BFGS on unnormalized u, v = u/‖u‖) from each start."""
    from scipy.optimize import minimize

    d = w.size
    m2 = metric @ metric

    def objective(u):
        u1, u2 = u[:d], u[d:]
        n1, n2 = np.linalg.norm(u1), np.linalg.norm(u2)
        v1, v2 = u1 / n1, u2 / n2
        s1, s2 = expit(w @ v1), expit(w @ v2)
        r = s1 * v1 - s2 * v2
        y = m2 @ r
        value = 0.5 * r @ y
        # ∂/∂v of σ(w·v)v applied to y: σ y + σ′ w (v·y)
        g1 = s1 * y + s1 * (1 - s1) * w * (v1 @ y)
        g2 = -(s2 * y + s2 * (1 - s2) * w * (v2 @ y))
        g1 = (g1 - v1 * (v1 @ g1)) / n1
        g2 = (g2 - v2 * (v2 @ g2)) / n2
        return -value, -np.concatenate([g1, g2])

    out = []
    for v1, v2 in starts:
        result = minimize(objective, np.concatenate([v1, v2]), jac=True, method="L-BFGS-B",
                          options={"maxiter": 200, "gtol": 1e-12, "ftol": 1e-15})
        u1, u2 = result.x[:d], result.x[d:]
        v1, v2 = u1 / np.linalg.norm(u1), u2 / np.linalg.norm(u2)
        out.append((float(np.sqrt(-2.0 * objective(result.x)[0])), v1, v2))
    return out


def crafted_pair(x: np.ndarray, t: np.ndarray, lam: float, *, criterion: str = "minimizer",
                 refits: int = 3) -> CraftedPair:
    """The crafted replace-one pair whose canaries move the minimizer (``criterion="minimizer"``,
    output perturbation) or change the objective's gradient (``"gradient"``, objective
    perturbation) the most (module docstring, "Neighbour").

    A canary row (x = −v, t = +1), ‖v‖ = 1, adds σ(w·v)v to the summed gradient. To first order
    A(D′) − A(D) = H⁻¹(g(v_in) − g(v_out))/(n + 1) (H the mean-form Hessian at A(members)), so the
    search maximizes ‖M(g(v_in) − g(v_out))‖ with M = H⁻¹ (minimizer) or I (gradient: the noise
    of objective perturbation is drawn in gradient space) from the top eigenvectors e of H⁻¹
    (v_in = e, v_out = −e) and their tilts towards w; the ``refits`` best are refitted exactly and
    the largest exact ‖Δ‖ (or ‖g_out − g_in‖ at A(D)) wins.
    """
    if criterion not in ("minimizer", "gradient"):
        raise ValueError(f"criterion must be 'minimizer' or 'gradient', got {criterion!r}")
    x, t = profile_model.check_view(x, t, allow_zero_rows=True)
    lam = profile_model.check_regularization(lam)
    n, d = x.shape
    base = profile_model.fit(x, t, lam, allow_zero_rows=True).weights
    ex = profile_model.per_example(x, t, base)
    hessian = (x.T * ex.hessian_weights) @ x / (n + 1) + lam * np.eye(d)
    inverse = np.linalg.inv(hessian)
    metric = inverse if criterion == "minimizer" else np.eye(d)
    _, vectors = np.linalg.eigh(inverse)
    w_norm = float(np.linalg.norm(base))
    w_hat = base / w_norm if w_norm > 0 else None
    starts = []
    for k in range(1, min(d, 3) + 1):
        e = vectors[:, -k]
        starts.append((e, -e))
        if w_hat is not None:
            perp = e - w_hat * (w_hat @ e)
            if np.linalg.norm(perp) > 1e-6:
                perp /= np.linalg.norm(perp)
                for phi in (1.2,):
                    starts.append((np.cos(phi) * w_hat + np.sin(phi) * perp, np.cos(phi) * w_hat - np.sin(phi) * perp))
    found = sorted(_pair_search(base, metric, starts), key=lambda item: -item[0])[:max(1, int(refits))]
    ones = np.ones(1)
    best = None
    for _, v_in, v_out in found:
        x_in, x_out = -v_in, -v_out
        first_order = float(np.linalg.norm(inverse @ (_canary_gradient(base, v_in) - _canary_gradient(base, v_out))))
        w_in = profile_model.fit(np.vstack([x, x_in]), np.concatenate([t, ones]), lam, allow_zero_rows=True).weights
        w_out = profile_model.fit(np.vstack([x, x_out]), np.concatenate([t, ones]), lam,
                                  allow_zero_rows=True).weights
        change = float(np.linalg.norm(_canary_gradient(w_in, v_out) - _canary_gradient(w_in, v_in)))
        shift = w_out - w_in
        value = float(np.linalg.norm(shift)) if criterion == "minimizer" else change
        if best is None or value > best[0]:
            best = (value, x_in, x_out, shift, first_order, change, w_in)
    _, x_in, x_out, shift, first_order, change, w_in = best
    return CraftedPair(x_in=x_in, t_in=1.0, x_out=x_out, t_out=1.0, shift=shift, criterion=criterion,
                       first_order_shift_norm=first_order / (n + 1), gradient_change_norm=change,
                       shift_bound=change / ((n + 1) * lam), weights_norm=float(np.linalg.norm(w_in)))


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


def _sum_gradients_and_hessians(x, t, ridge, w, outer=None):
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
    _, h0 = _sum_gradients_and_hessians(x, t, ridge, base[None, :], outer)
    weights = base[None, :] - np.linalg.solve(h0[0], noise.T).T
    most = 0
    block = _block(n, d, outer)
    for start in range(0, noise.shape[0], block):
        stop = min(noise.shape[0], start + block)
        active = np.arange(start, stop)
        for iteration in range(1, MAX_NEWTON_ITERATIONS + 1):  # noqa: B007 (read after the loop)
            gradient, hessian = _sum_gradients_and_hessians(x, t, ridge, weights[active], outer)
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


def _objective_noise(rng: np.random.Generator, count: int, d: int, scale: float) -> np.ndarray:
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
    noise = noise_factor * _objective_noise(rng, count, d, params["noise_scale"])
    releases, iterations = perturbed_minimizers(x, t, info["ridge"], noise)
    return releases, info | {"newton_iterations": iterations}


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
        gradient, hessian = _sum_gradients_and_hessians(x, t, ridge, w, outer)
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


# ------------------------------------------------------------------ what the audit could have caught


DETECTION_POWER = 0.8
DETECTION_REPETITIONS = 60
DETECTION_TOLERANCE = 0.01
DETECTION_SMALLEST_FACTOR = 0.02
_STREAM_DETECTION = 2  # rng = default_rng([seed, 2]): the simulated implementations' noise


def claim_rejects(scores: np.ndarray, included: np.ndarray, curve, *, alpha: float, per_tail: int | None = 40) -> bool:
    """``dpaudit.dp.canary_bounds.claim_curve_test(...).rejected`` without its p-value search (the
    same thresholds, Clopper–Pearson bounds at α/(2K) and curve gaps; a test checks that the two agree)."""
    from dpaudit.dp.canary_bounds import candidate_thresholds
    from dpaudit.dp.hypothesis import clopper_pearson_upper

    pos, neg = np.sort(scores[included]), np.sort(scores[~included])
    thresholds = candidate_thresholds(scores, per_tail)
    per = alpha / (2 * thresholds.size)
    fn = np.searchsorted(pos, thresholds, side="left")
    fp = neg.size - np.searchsorted(neg, thresholds, side="left")
    fpr_ub = np.atleast_1d(clopper_pearson_upper(fp, neg.size, per))
    fnr_ub = np.atleast_1d(clopper_pearson_upper(fn, pos.size, per))
    gaps = np.maximum(np.asarray(curve.fnr(fpr_ub)) - fnr_ub, np.asarray(curve.fnr(fnr_ub)) - fpr_ub)
    return bool(gaps.max() > 0)


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
    if route not in ("exact", "frozen_hessian"):
        raise ValueError(f"route must be 'exact' or 'frozen_hessian', got {route!r}")
    n, d = x.shape
    x_prime, t_prime = _replace(x, t, row, z, t_z)
    if route == "exact":
        noise = np.stack([_objective_noise(rng, 2 * releases, d, scale) for _ in range(repetitions)])

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
        _, h0 = _sum_gradients_and_hessians(features, labels, ridge, w0[None, :])
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
        noise = _objective_noise(rng, 2 * releases, d, scale)
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


def detectable_factor(sampler, curve, *, alpha: float, per_tail: int | None, power: float = DETECTION_POWER,
                      tolerance: float = DETECTION_TOLERANCE,
                      smallest: float = DETECTION_SMALLEST_FACTOR) -> dict[str, Any]:
    """The largest noise factor f ≤ 1 whose implementation the claim-curve test rejects with
    probability ≥ ``power`` (bisection over f on the rejection rate of ``sampler(f)``'s
    repetitions; the rate falls as f grows). 1 when even the claimed noise is rejected that often,
    0 when f = ``smallest`` is not."""
    rates: dict[float, float] = {}

    def rate(factor: float) -> float:
        scores = sampler(factor)
        included = np.zeros(scores.shape[1], dtype=bool)
        included[: scores.shape[1] // 2] = True
        rates[factor] = float(np.mean([claim_rejects(s, included, curve, alpha=alpha, per_tail=per_tail)
                                       for s in scores]))
        return rates[factor]

    at_claim = rate(1.0)
    if at_claim >= power:
        factor = 1.0
    elif rate(smallest) < power:
        factor = 0.0
    else:
        lo, hi = smallest, 1.0
        while hi - lo > tolerance:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if rate(mid) >= power else (lo, mid)
        factor = lo
    return {"detectable_noise_factor": float(factor), "rejection_rate_at_factor": rates.get(factor),
            "rejection_rate_at_claim": at_claim, "evaluations": len(rates),
            "rates": {f"{k:.6g}": v for k, v in sorted(rates.items())}}


# ------------------------------------------------------------------------- the audit


def linear_release_scores(x_members: np.ndarray, labels: np.ndarray, *, mechanism: str, epsilon: float,
                          lam: float, releases: int, seed: int, solver: str = "newton", candidates: int = 16,
                          noise_factor: float = 1.0, example_ids: np.ndarray | None = None,
                          neighbour: str = "crafted", alpha: float | None = 0.05, per_tail: int | None = 40,
                          detection_repetitions: int = DETECTION_REPETITIONS,
                          detection_route: str = "frozen_hessian") -> dict[str, Any]:
    """``releases`` releases of a linear mechanism on D and as many on its neighbour D′, scored.

    The bound from these scores is ``dpaudit.metrics.canary.many_runs`` (``audit_linear``
    runs both); this half trains and scores only, so the canary_scores job does not depend
    on the attack statistics.

    ``x_members`` are the raw member features (scaled here by their largest row norm, as the
    training job does), ``labels`` 0/1.
    ``neighbour``: ``"crafted"`` (default; ``crafted_pair``: D = members ∪ {canary in},
    D′ = members ∪ {canary out}) or ``"worst_replacement"`` (D = members, D′ = one member
    replaced, ``worst_replacement``). ``row`` is the 0-based row of D that D′ replaces (n, the
    canary, for the crafted pair); ``example_id`` the replaced member's id when ``example_ids``
    is given (None for the crafted pair); ``replacement_x`` D′'s row and ``canary_x`` D's
    (None for worst_replacement), in the scaled feature space (× ``feature_scale`` for raw units).
    ``noise_factor`` scales the drawn noise: 1 is the mechanism; tests pass 0.1 to break it
    (never a config value). Returns the neighbour, the per-release scores (``SCORE_COLUMNS``;
    canary_id = release index, D releases first; ``included`` = released on D, score =
    log p_D − log p_D′, higher = "looks like D": the claim-curve test's convention) and, unless
    ``alpha`` is None, ``detectable_noise_factor`` of the claim-curve test at (``alpha``,
    ``per_tail``, δ = 0, these ``releases``) with its details (``detectable_factor``).
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if neighbour not in NEIGHBOURS:
        raise ValueError(f"neighbour must be one of {NEIGHBOURS}, got {neighbour!r}")
    if int(releases) < 2:
        raise ValueError(f"releases must be at least 2 per side, got {releases!r}")
    if not noise_factor > 0:
        raise ValueError(f"noise_factor must be positive, got {noise_factor!r}")
    releases = int(releases)
    wall0 = time.perf_counter()
    x_raw = np.asarray(x_members, dtype=np.float64)
    y = np.asarray(labels)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0/1 (binary logistic regression)")
    if example_ids is not None and len(example_ids) != len(x_raw):
        raise ValueError(f"example_ids has {len(example_ids)} entries for {len(x_raw)} member rows")
    scale = feature_scale(x_raw)
    x_scaled, t_scaled = x_raw / scale, 2.0 * y.astype(np.float64) - 1.0
    n_members, d = x_scaled.shape
    about: dict[str, Any]
    if neighbour == "crafted":
        pair = crafted_pair(x_scaled, t_scaled, lam,
                            criterion="minimizer" if mechanism == "output_perturbation" else "gradient")
        x, t = np.vstack([x_scaled, pair.x_in]), np.append(t_scaled, pair.t_in)
        row, z, t_z, shift = n_members, pair.x_out, pair.t_out, pair.shift
        about = {"row": row, "example_id": None, "canary_x": pair.x_in, "canary_t": pair.t_in,
                 "removal_rank": None, "profile_row": None, "criterion": pair.criterion,
                 "first_order_shift_norm": pair.first_order_shift_norm,
                 "gradient_change_norm": pair.gradient_change_norm, "shift_bound": pair.shift_bound,
                 "weights_norm": pair.weights_norm, "ratio_ceiling": ratio_ceiling(pair.weights_norm)}
    else:
        replacement = worst_replacement(x_scaled, t_scaled, lam, candidates=candidates)
        x, t = x_scaled, t_scaled
        row, z, t_z, shift = replacement.row, replacement.x, replacement.t, replacement.shift
        about = {"row": row,
                 "example_id": None if example_ids is None else np.asarray(example_ids)[row].item(),
                 "canary_x": None, "canary_t": None, "removal_rank": replacement.removal_rank,
                 "profile_row": replacement.profile_row, "criterion": "minimizer",
                 "first_order_shift_norm": replacement.first_order_shift_norm}
    n = x.shape[0]
    x_prime, t_prime = _replace(x, t, row, z, t_z)
    shift_norm = float(np.linalg.norm(shift))
    rng_in = np.random.default_rng([seed, _STREAM_INCLUDED])
    rng_out = np.random.default_rng([seed, _STREAM_EXCLUDED])
    t0 = time.perf_counter()
    record: dict[str, Any] = {}
    if mechanism == "output_perturbation":
        if solver != "newton":
            raise ValueError("output perturbation has no solver choice (exact Newton fit)")
        beta = float(profile_mechanisms.output_perturbation_beta(n, lam, epsilon))
        center = profile_model.fit(x, t, lam, allow_zero_rows=True).weights
        released_in = center[None, :] + noise_factor * profile_mechanisms.l2_laplace_noise(rng_in, releases, d, beta)
        released_out = (center + shift)[None, :] + noise_factor * profile_mechanisms.l2_laplace_noise(
            rng_out, releases, d, beta)
        release_seconds = time.perf_counter() - t0
        scores_in = output_log_ratio(released_in, center, shift, beta)
        scores_out = output_log_ratio(released_out, center, shift, beta)
        record |= {"beta": beta, "pair_epsilon": beta * shift_norm}
    else:
        released_in, info = objective_perturbation_releases(x, t, epsilon, lam, releases, rng_in, solver=solver,
                                                            noise_factor=noise_factor)
        released_out, info_out = objective_perturbation_releases(x_prime, t_prime, epsilon, lam, releases, rng_out,
                                                                 solver=solver, noise_factor=noise_factor)
        release_seconds = time.perf_counter() - t0
        args = (x, t, info["ridge"], info["noise_scale"], row, z, t_z)
        scores_in = objective_log_ratio(released_in, *args)
        scores_out = objective_log_ratio(released_out, *args)
        record |= {"noise_scale": info["noise_scale"], "ridge": info["ridge"], "epsilon_prime": info["epsilon_prime"],
                   "extra_regularizer": info["extra_regularizer"], "C": info["C"],
                   "newton_iterations": max(info["newton_iterations"] or 0, info_out["newton_iterations"] or 0)
                   if solver == "newton" else None,
                   "pair_epsilon": None}
    score_seconds = time.perf_counter() - t0 - release_seconds
    frame = pd.DataFrame({
        "canary_id": np.arange(2 * releases, dtype=np.int64),
        "included": np.repeat([True, False], releases),
        "score": np.concatenate([scores_in, scores_out]),
        "threat_model": pd.array([THREAT_MODEL] * (2 * releases), dtype="string"),
    })
    detection: dict[str, Any] = {"detectable_noise_factor": None, "detectable_noise_factor_details": None}
    if alpha is not None:
        t1 = time.perf_counter()
        rng = np.random.default_rng([seed, _STREAM_DETECTION])
        if mechanism == "output_perturbation":
            sampler = output_scores_sampler(d=d, beta=record["beta"], shift_norm=shift_norm, releases=releases,
                                            repetitions=detection_repetitions, rng=rng)
            route = "exact_law"
        else:
            sampler = objective_scores_sampler(x=x, t=t, ridge=record["ridge"], scale=record["noise_scale"], row=row,
                                               z=z, t_z=t_z, releases=releases, repetitions=detection_repetitions,
                                               rng=rng, route=detection_route)
            route = detection_route
        found = detectable_factor(sampler, pure_tradeoff(epsilon), alpha=alpha, per_tail=per_tail)
        detection = {"detectable_noise_factor": found.pop("detectable_noise_factor"),
                     "detectable_noise_factor_details": {
                         **found, "power": DETECTION_POWER, "repetitions": int(detection_repetitions),
                         "seed": [int(seed), _STREAM_DETECTION], "tolerance": DETECTION_TOLERANCE,
                         "smallest_factor": DETECTION_SMALLEST_FACTOR, "releases": releases,
                         "alpha": float(alpha), "per_tail": per_tail, "delta": 0.0,
                         "curve": "pure", "route": route, "neighbour": neighbour,
                         "seconds": time.perf_counter() - t1}}
    return {
        "mechanism": mechanism, "epsilon": float(epsilon), "lam": float(lam),
        "seed": int(seed), "releases": releases, "solver": solver,
        "noise_factor": float(noise_factor), "neighbouring_relation": NEIGHBOURING_RELATION,
        "threat_model": THREAT_MODEL, "n": int(n), "n_members": int(n_members), "d": int(d),
        "feature_scale": scale, "neighbour": neighbour,
        "replacement_x": z, "replacement_t": float(t_z),
        "shift_norm": shift_norm, "sensitivity": 2.0 / (n * lam),
        "shift_fraction": shift_norm / (2.0 / (n * lam)),
        **about,
        "score_max_abs": float(np.abs(np.concatenate([scores_in, scores_out])).max()),
        **record,
        **detection,
        "release_seconds": release_seconds, "score_seconds": score_seconds,
        "wall_seconds": time.perf_counter() - wall0,
        "scores": frame,
    }


def linear_canary_scores(examples: pd.DataFrame, splits: dict[str, str], params: dict[str, Any],
                         train: dict[str, Any], options: dict[str, Any], *, log) -> tuple[pd.DataFrame, dict]:
    """The canary family's scores and record of one released linear run (``train``: its
    train.json): ``linear_release_scores`` on the run's members with the run's ε and Λ."""
    from dpaudit.training.models import features

    hyper = train["hyperparameters"]
    members = examples[examples["split"] == splits["members"]]
    result = linear_release_scores(features(members).astype(np.float64), members["label"].to_numpy(np.int64),
                                   mechanism=str(params["mechanism"]), epsilon=float(hyper["target_epsilon"]),
                                   lam=float(hyper["linear_regularization"]),
                                   releases=int(options["linear_releases"]), seed=int(options["seed"]),
                                   example_ids=members["example_id"].to_numpy(np.int64),
                                   neighbour=str(options.get("linear_neighbour", "crafted")),
                                   alpha=1.0 - float(options.get("confidence", 0.95)),
                                   per_tail=options.get("gdp_thresholds_per_tail", 40))
    scores = result.pop("scores").assign(score_kind=SCORE_KIND, example_id=pd.NA)
    scores["example_id"] = scores["example_id"].astype("Int64")
    record = {key: (value.tolist() if isinstance(value, np.ndarray) else value) for key, value in result.items()}
    log.info("linear releases: %d per side scored in %.1fs (neighbour %s, row %d, shift %.3g = %.3g of the "
             "sensitivity; detectable noise factor %s)", result["releases"], result["wall_seconds"],
             result["neighbour"], result["row"], result["shift_norm"], result["shift_fraction"],
             result["detectable_noise_factor"])
    return scores, record
