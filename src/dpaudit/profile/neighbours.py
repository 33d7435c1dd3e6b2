"""Neighbouring models: Okumura sphere, worst-case points, exact retraining.

Neighbours y_i are the base dataset x with row i removed. Shifts are kept as
Δ = A(y) − A(x), never only as the absolute points: they are 1e−3 of A(x) and
would lose digits in a round trip (LeBlond et al. 2023, §5.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from dpaudit.profile.model import check_regularization
from dpaudit.progress import Progress

RETRAIN_STEP_TOLERANCE = 1e-14
MAX_RETRAIN_ITERATIONS = 50
MEMORY_BUDGET_BYTES = 2 * 1024**3  # per chunk of neighbours; stays well under 4 GB
# n × chunk arrays alive at once in one step (the margins, overwritten by σ, plus slack for BLAS).
_LIVE_ARRAYS = 2


def okumura_sphere(weights: np.ndarray, added_gradient_sum: np.ndarray, removed_gradient_sum: np.ndarray, *,
                   n_original: int, n_added: int, n_removed: int, lam: float) -> tuple[np.ndarray, float]:
    """Centre R and radius r of the ball holding A(y) for any add/remove neighbour (Okumura et al. 2015).

    Gradients are per-example loss gradients at A(x), summed over the added and the removed rows.
    """
    lam = check_regularization(lam)
    changed = n_added + n_removed
    if changed <= 0:
        raise ValueError("a neighbour must add or remove at least one row")
    n_modified = n_original + n_added - n_removed
    shift = (np.asarray(added_gradient_sum) - np.asarray(removed_gradient_sum)) / changed
    centre = (n_original + n_modified) / (2 * n_modified) * weights - changed / (2 * lam * n_modified) * shift
    radius = np.linalg.norm((n_added - n_removed) / (2 * n_modified) * weights + changed / (2 * lam * n_modified) * shift)
    return centre, float(radius)


def removal_spheres(weights: np.ndarray, gradients: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Single-removal form: R_i = (1 + 1/(2(n−1))) A(x) + ∇ℓ_i/(2Λ(n−1)), r_i = ‖A(x) + ∇ℓ_i/Λ‖/(2(n−1))."""
    lam = check_regularization(lam)
    n = gradients.shape[0]
    centres = (1 + 1 / (2 * (n - 1))) * weights[None, :] + gradients / (2 * lam * (n - 1))
    radii = np.linalg.norm(weights[None, :] + gradients / lam, axis=1) / (2 * (n - 1))
    return centres, radii


def worst_case_shifts(weights: np.ndarray, gradients: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Δ_i = A_wc(y_i) − A(x) = (A(x) + ∇ℓ_i/Λ)/(n−1), the antipode of A(x) on sphere i, and δ_i = ‖Δ_i‖."""
    lam = check_regularization(lam)
    n = gradients.shape[0]
    shifts = (weights[None, :] + gradients / lam) / (n - 1)
    return shifts, np.linalg.norm(shifts, axis=1)


@dataclass(frozen=True)
class ExactNeighbours:
    shifts: np.ndarray  # A(y_i) − A(x), (n, d)
    gradient_norms: np.ndarray  # ‖∇J(A(y_i); y_i)‖ at the returned A(y_i) = A(x) + shift
    n_iter: np.ndarray  # iterations each neighbour's chunk ran
    chunk_size: int


def neighbour_chunk_size(n: int, memory_budget_bytes: int = MEMORY_BUDGET_BYTES) -> int:
    return int(max(1, min(n, memory_budget_bytes // (_LIVE_ARRAYS * 8 * n))))


def retrain_removed(features: np.ndarray, labels: np.ndarray, weights: np.ndarray, lam: float, *,
                    rows: np.ndarray | None = None, memory_budget_bytes: int = MEMORY_BUDGET_BYTES,
                    tol: float = RETRAIN_STEP_TOLERANCE) -> ExactNeighbours:
    """Exact A(y_i) for row-removed neighbours, batched and warm-started from A(x).

    Every neighbour iterates D ← D − ∇J_i(A(x) + D) H₀⁻¹ with H₀ the Hessian of the
    (n−1)-row objective at A(x); chunks of B neighbours share one n × B matrix product
    per step. The fixed Hessian differs from each neighbour's own by O(1/n), so the
    iteration contracts by that factor per step (3–4 steps to machine precision).
    ``weights`` must be the exact A(x): the first step uses ∇J(A(x); x) = 0, which
    makes neighbour i's gradient at A(x) −(ΛA(x) + ∇ℓ_i)/(n−1) without an n × B pass.
    """
    lam = check_regularization(lam)
    n, d = features.shape
    rows = np.arange(n) if rows is None else np.asarray(rows)
    signed = -labels[:, None] * features  # −t_j x_j: its product with a point is minus the margin
    s = expit(-labels * (features @ weights))
    hessian = (features.T * (s * (1 - s))) @ features / (n - 1) + lam * np.eye(d)
    inverse_t = np.linalg.inv(hessian).T
    own_gradients = (-labels * s)[:, None] * features
    chunk = neighbour_chunk_size(n, memory_budget_bytes)
    shifts = np.zeros((rows.size, d))
    gradient_norms = np.empty(rows.size)
    n_iter = np.zeros(rows.size, dtype=np.int64)
    # One n × chunk buffer for every pass: a fresh array of that size is a new mapping whose pages
    # the kernel faults in and zeroes on every pass (half the time at Adult's n = 32,561).
    buffer = np.empty(n * min(chunk, rows.size))
    progress = Progress("exact retraining of row-removed neighbours", rows.size, unit="neighbours")
    for start in range(0, rows.size, chunk):
        batch = rows[start:start + chunk]
        margins = buffer[: n * batch.size].reshape(n, batch.size)
        gradient = -(lam * weights[None, :] + own_gradients[batch]) / (n - 1)
        delta = -gradient @ inverse_t
        for iteration in range(2, MAX_RETRAIN_ITERATIONS + 1):  # noqa: B007 (read after the loop)
            gradient = _neighbour_gradients(signed, weights + delta, features[batch], labels[batch], lam, margins)
            step = gradient @ inverse_t
            delta -= step
            if np.linalg.norm(step, axis=1).max() < tol:
                break
        else:
            raise RuntimeError(f"exact retraining of rows {batch[0]}..{batch[-1]} did not reach ‖step‖ < {tol}")
        shifts[start:start + batch.size] = delta
        # One more n × B pass: the gradient at the returned point, not at the iterate before the last step.
        gradient = _neighbour_gradients(signed, weights + delta, features[batch], labels[batch], lam, margins)
        gradient_norms[start:start + batch.size] = np.linalg.norm(gradient, axis=1)
        n_iter[start:start + batch.size] = iteration
        progress.advance(batch.size)
    progress.finish()
    return ExactNeighbours(shifts=shifts, gradient_norms=gradient_norms, n_iter=n_iter, chunk_size=chunk)


def _neighbour_gradients(signed, points, own_x, own_t, lam, margins):
    """∇J(P_b; x without row b) for a chunk of points P (B × d): full-data sum minus the row's own term.

    ``margins``: the caller's n × B float64 buffer, overwritten. σ(−m) = 1/(1 + e^m) in place
    with numpy's vectorized exp, half the time of scipy's expit over the n × B values: e^m
    overflows to inf for m > 709, and 1/(1 + inf) = 0, the float64 value of σ there (< 1e-308).
    """
    n = signed.shape[0]
    weights = np.matmul(signed, points.T, out=margins)  # −margins, (n, B)
    np.negative(weights, out=weights)
    with np.errstate(over="ignore"):
        np.exp(weights, out=weights)
    weights += 1.0
    np.reciprocal(weights, out=weights)  # σ(−m) = s
    full = (signed.T @ weights).T
    own = (-own_t * expit(-own_t * np.einsum("bd,bd->b", own_x, points)))[:, None] * own_x
    return (full - own) / (n - 1) + lam * points


def relative_deviation(worst_case: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """dev_i = ‖A_wc(y_i) − A(y_i)‖ / ‖A(y_i) − A(x)‖, computed from the shifts."""
    return np.linalg.norm(worst_case - exact, axis=1) / np.linalg.norm(exact, axis=1)
