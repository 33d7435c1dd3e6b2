"""The neighbour D′ of the many-runs linear audit (``dpaudit.audit.linear_audit``).

The linear mechanisms' relation is ``replace_one`` (one row of D replaced); the audit
needs the pair (D, D′) whose releases are easiest to tell apart. Two searches, on the
members scaled into the unit ball (``dpaudit.training.linear.feature_scale``):

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

Orientation and ties. A pair and its swap (D ↔ D′) are equally strong for output perturbation
(Δ → −Δ: ‖Δ‖ and the privacy loss distribution unchanged), and under the gradient criterion every
rotation of an optimal pair about w is optimal in d ≥ 3. Which tied pair won used to be decided by
rounding (OpenBLAS's Haswell and SkylakeX kernels swapped the canaries on the same data), and with
it which realization of the releases' scores a seed gives. So every candidate tied (relative 1e−9)
with the ``refits``-th best is refitted, both orientations of each are compared, a challenger must
win by more than a relative 1e−9, and the canonical orientation comes first: the first coordinate
of x_in − x_out (above 1e−6 of its largest) is positive.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from dpaudit.profile import model as profile_model
from dpaudit.profile import neighbours as profile_neighbours

__all__ = [
    "ASCENT_ITERATIONS",
    "CraftedPair",
    "Replacement",
    "crafted_pair",
    "ratio_ceiling",
    "replace_row",
    "worst_replacement",
]

ASCENT_ITERATIONS = 100
# Relative margin by which a refitted candidate must beat the best so far: values equal up to rounding
# (a pair and its swap under the minimizer criterion, one optimum reached from two starts) keep the first.
_TIE_TOLERANCE = 1e-9


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


def replace_row(x: np.ndarray, t: np.ndarray, row: int, z: np.ndarray, t_z: float) -> tuple[np.ndarray, np.ndarray]:
    """Copies of (x, t) with row ``row`` replaced by (``z``, ``t_z``): D′ of a replace-one pair."""
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
        x2, t2 = replace_row(x, t, row, z, t[row])
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


def _canonical_orientation(v_a: np.ndarray, v_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(v_in, v_out) of the pair {v_a, v_b} such that the first coordinate of x_in − x_out = v_out − v_in
    above 1e-6 of its largest is positive (module docstring, "Orientation and ties")."""
    difference = v_b - v_a
    largest = float(np.abs(difference).max())
    if largest == 0.0:
        return v_a, v_b
    first = difference[np.flatnonzero(np.abs(difference) > 1e-6 * largest)[0]]
    return (v_a, v_b) if first > 0 else (v_b, v_a)


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
    (v_in = e, v_out = −e) and their tilts towards w; the ``refits`` best (and any tied with the last
    of them) are refitted exactly, in both orientations, and the largest exact ‖Δ‖ (or ‖g_out − g_in‖
    at A(D)) wins, ties going to the canonical orientation (module docstring, "Orientation and ties").
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
    found = sorted(_pair_search(base, metric, starts), key=lambda item: -item[0])
    # Candidates tied with the last one kept are refitted too (module docstring, "Orientation and ties").
    cut = found[min(max(1, int(refits)), len(found)) - 1][0] * (1.0 - _TIE_TOLERANCE)
    found = [item for item in found if item[0] >= cut]
    ones = np.ones(1)
    best = None
    for _, v_a, v_b in found:
        v_a, v_b = _canonical_orientation(v_a, v_b)
        first_order = float(np.linalg.norm(inverse @ (_canary_gradient(base, v_a) - _canary_gradient(base, v_b))))
        w_a = profile_model.fit(np.vstack([x, -v_a]), np.concatenate([t, ones]), lam, allow_zero_rows=True).weights
        w_b = profile_model.fit(np.vstack([x, -v_b]), np.concatenate([t, ones]), lam, allow_zero_rows=True).weights
        # Both orientations of the pair, the canonical one first: the other wins only by more than rounding.
        for v_in, v_out, w_in, w_out in ((v_a, v_b, w_a, w_b), (v_b, v_a, w_b, w_a)):
            change = float(np.linalg.norm(_canary_gradient(w_in, v_out) - _canary_gradient(w_in, v_in)))
            shift = w_out - w_in
            value = float(np.linalg.norm(shift)) if criterion == "minimizer" else change
            if best is None or value > best[0] * (1.0 + _TIE_TOLERANCE):
                best = (value, -v_in, -v_out, shift, first_order, change, w_in)
    _, x_in, x_out, shift, first_order, change, w_in = best
    return CraftedPair(x_in=x_in, t_in=1.0, x_out=x_out, t_out=1.0, shift=shift, criterion=criterion,
                       first_order_shift_norm=first_order / (n + 1), gradient_change_norm=change,
                       shift_bound=change / ((n + 1) * lam), weights_norm=float(np.linalg.norm(w_in)))
