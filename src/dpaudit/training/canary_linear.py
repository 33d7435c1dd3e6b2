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

Neighbour (``worst_replacement``). The privacy loss of a pair grows with the shift
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

from dpaudit.profile import mechanisms as profile_mechanisms
from dpaudit.profile import model as profile_model
from dpaudit.profile import neighbours as profile_neighbours
from dpaudit.profile.profiles import privacy_loss
from dpaudit.training.linear import NEIGHBOURING_RELATION, feature_scale

__all__ = [
    "MECHANISMS",
    "SCORE_COLUMNS",
    "SOLVERS",
    "THREAT_MODEL",
    "Replacement",
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


# ------------------------------------------------------------------------- the audit


def linear_release_scores(x_members: np.ndarray, labels: np.ndarray, *, mechanism: str, epsilon: float,
                          lam: float, releases: int, seed: int, solver: str = "newton", candidates: int = 16,
                          noise_factor: float = 1.0, example_ids: np.ndarray | None = None) -> dict[str, Any]:
    """``releases`` releases of a linear mechanism on D and as many on the worst D′, scored.

    The bound from these scores is ``dpaudit.metrics.canary.many_runs`` (``audit_linear``
    runs both); this half trains and scores only, so the canary_scores job does not depend
    on the attack statistics.

    ``x_members`` are the raw member features (scaled here by their largest row norm, as the
    training job does), ``labels`` 0/1.
    ``noise_factor`` scales the drawn noise: 1 is the mechanism; tests pass 0.1 to break it
    (never a config value). Returns the bound, its ceiling, counts, threshold (in score units:
    a release with score ≥ threshold is called "on D"), the neighbour and the per-release
    scores (``SCORE_COLUMNS``; canary_id = release index, D releases first). ``row`` is the
    0-based position of the replaced member; ``example_id`` its id when ``example_ids`` (one per
    member row) is given. ``replacement_x`` is in the scaled feature space (× ``feature_scale``
    for raw units).
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
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
    x, t = x_raw / scale, 2.0 * y.astype(np.float64) - 1.0
    n, d = x.shape
    neighbour = worst_replacement(x, t, lam, candidates=candidates)
    x_prime, t_prime = _replace(x, t, neighbour.row, neighbour.x, neighbour.t)
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
        released_out = (center + neighbour.shift)[None, :] + noise_factor * profile_mechanisms.l2_laplace_noise(
            rng_out, releases, d, beta)
        release_seconds = time.perf_counter() - t0
        scores_in = output_log_ratio(released_in, center, neighbour.shift, beta)
        scores_out = output_log_ratio(released_out, center, neighbour.shift, beta)
        record |= {"beta": beta, "pair_epsilon": beta * neighbour.shift_norm}
    else:
        released_in, info = objective_perturbation_releases(x, t, epsilon, lam, releases, rng_in, solver=solver,
                                                            noise_factor=noise_factor)
        released_out, info_out = objective_perturbation_releases(x_prime, t_prime, epsilon, lam, releases, rng_out,
                                                                 solver=solver, noise_factor=noise_factor)
        release_seconds = time.perf_counter() - t0
        args = (x, t, info["ridge"], info["noise_scale"], neighbour.row, neighbour.x, neighbour.t)
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
    return {
        "mechanism": mechanism, "epsilon": float(epsilon), "lam": float(lam),
        "seed": int(seed), "releases": releases, "solver": solver,
        "noise_factor": float(noise_factor), "neighbouring_relation": NEIGHBOURING_RELATION,
        "threat_model": THREAT_MODEL, "n": int(n), "d": int(d), "feature_scale": scale,
        "row": neighbour.row,
        "example_id": None if example_ids is None else np.asarray(example_ids)[neighbour.row].item(),
        "replacement_x": neighbour.x, "replacement_t": neighbour.t,
        "shift_norm": neighbour.shift_norm, "sensitivity": 2.0 / (n * lam), "removal_rank": neighbour.removal_rank,
        "profile_row": neighbour.profile_row, "score_max_abs": float(np.abs(np.concatenate([scores_in, scores_out])).max()),
        **record,
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
                                   example_ids=members["example_id"].to_numpy(np.int64))
    scores = result.pop("scores").assign(score_kind=SCORE_KIND, example_id=pd.NA)
    scores["example_id"] = scores["example_id"].astype("Int64")
    record = {key: (value.tolist() if isinstance(value, np.ndarray) else value) for key, value in result.items()}
    log.info("linear releases: %d per side scored in %.1fs (replaced member row %d, shift %.3g)",
             result["releases"], result["wall_seconds"], result["row"], result["shift_norm"])
    return scores, record
