"""L2-regularized logistic regression without intercept, in mean form.

J(f; D) = (1/|D|) Σ_j ln(1 + exp(−t_j fᵀx_j)) + (Λ/2)‖f‖², labels t ∈ {−1, +1}.
Solved by Newton's method to ‖step‖ < 1e−14: the neighbour shifts this family
measures are around 1e−5 of parameters around 1e−2 (LeBlond et al. 2023).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

STEP_TOLERANCE = 1e-14
MAX_NEWTON_ITERATIONS = 100
# Rows must lie in the unit ball (sensitivity 2/(nΛ)); allow float rounding of the scaling.
NORM_SLACK = 1e-12


@dataclass(frozen=True)
class BaseModel:
    weights: np.ndarray  # A(x), shape (d,)
    lam: float
    n: int
    objective: float
    gradient_norm: float
    n_iter: int
    last_step_norm: float

    def record(self) -> dict:
        return {
            "n": self.n, "d": int(self.weights.size), "lam": self.lam, "fit_intercept": False,
            **{f"w_{k}": float(v) for k, v in enumerate(self.weights)},
            "objective": self.objective, "gradient_norm": self.gradient_norm, "n_iter": self.n_iter,
            "last_step_norm": self.last_step_norm, "solver": "newton", "step_tolerance": STEP_TOLERANCE,
            "dtype": "float64",
        }


@dataclass(frozen=True)
class PerExample:
    margins: np.ndarray  # m_j = t_j fᵀx_j
    losses: np.ndarray  # ln(1 + e^{−m_j})
    weights: np.ndarray  # s_j = σ(−m_j)
    hessian_weights: np.ndarray  # s_j (1 − s_j)
    gradients: np.ndarray  # ∇ℓ_j = −t_j s_j x_j, shape (n, d)


def check_regularization(lam: float, key: str = "lam") -> float:
    lam = float(lam)
    if not np.isfinite(lam) or lam <= 0:
        raise ValueError(f"{key} must be a finite positive regularization strength Λ, got {lam!r}")
    return lam


def check_view(features: np.ndarray, labels: np.ndarray, row_ids: np.ndarray | None = None, *,
               allow_zero_rows: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Refuse views the paper's guarantees do not cover, naming the offending rows.

    Zero rows are refused by default (the profile perturbs along each row); a fit
    that only needs the minimizer (a grid mechanism) passes ``allow_zero_rows``.
    """
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels)
    if features.ndim != 2 or labels.shape != (features.shape[0],):
        raise ValueError(f"features must be (n, d) and labels (n,), got {features.shape} and {labels.shape}")
    ids = np.arange(1, features.shape[0] + 1) if row_ids is None else np.asarray(row_ids)

    def _rows(mask: np.ndarray) -> str:
        bad = ids[mask]
        return f"{bad[:20].tolist()}{' …' if bad.size > 20 else ''} ({bad.size} rows)"

    nonfinite = ~np.isfinite(features).all(axis=1)
    if nonfinite.any():
        raise ValueError(f"non-finite features in row ids {_rows(nonfinite)}")
    if not np.isin(labels, (-1, 1)).all():
        raise ValueError(f"labels must be −1 or +1; row ids {_rows(~np.isin(labels, (-1, 1)))} are not")
    norms = np.linalg.norm(features, axis=1)
    if not allow_zero_rows and (norms == 0).any():
        raise ValueError(f"zero-norm feature rows (no direction to perturb) in row ids {_rows(norms == 0)}")
    if (norms > 1 + NORM_SLACK).any():
        raise ValueError(f"rows outside the unit ball (‖x‖ > 1) in row ids {_rows(norms > 1 + NORM_SLACK)}")
    return features, labels.astype(np.float64)


def per_example(features: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> PerExample:
    margins = labels * (features @ weights)
    s = expit(-margins)
    return PerExample(
        margins=margins,
        losses=np.logaddexp(0.0, -margins),
        weights=s,
        hessian_weights=s * (1.0 - s),
        gradients=(-labels * s)[:, None] * features,
    )


def objective(features: np.ndarray, labels: np.ndarray, weights: np.ndarray, lam: float) -> float:
    margins = labels * (features @ weights)
    return float(np.mean(np.logaddexp(0.0, -margins)) + 0.5 * lam * weights @ weights)


def fit(features: np.ndarray, labels: np.ndarray, lam: float = 1.0, *, allow_zero_rows: bool = False) -> BaseModel:
    """A(x): the exact minimizer of J, by Newton's method from 0."""
    features, labels = check_view(features, labels, allow_zero_rows=allow_zero_rows)
    lam = check_regularization(lam)
    n, d = features.shape
    weights = np.zeros(d)
    step_norm = np.inf
    for iteration in range(1, MAX_NEWTON_ITERATIONS + 1):  # noqa: B007 (read after the loop)
        ex = per_example(features, labels, weights)
        gradient = ex.gradients.mean(axis=0) + lam * weights
        hessian = (features.T * ex.hessian_weights) @ features / n + lam * np.eye(d)
        step = np.linalg.solve(hessian, gradient)
        weights = weights - step
        step_norm = float(np.linalg.norm(step))
        if step_norm < STEP_TOLERANCE:
            break
    else:
        raise RuntimeError(f"Newton did not reach ‖step‖ < {STEP_TOLERANCE} in {MAX_NEWTON_ITERATIONS} iterations "
                           f"(last step {step_norm:.3g})")
    ex = per_example(features, labels, weights)
    gradient = ex.gradients.mean(axis=0) + lam * weights
    return BaseModel(weights=weights, lam=lam, n=n, objective=objective(features, labels, weights, lam),
                     gradient_norm=float(np.linalg.norm(gradient)), n_iter=iteration, last_step_norm=step_norm)
