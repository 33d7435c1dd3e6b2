"""PMP upper bound of the Gaussian mechanism (Lowy et al., Lemma 10, Prop. 12).

For an additive query q(D) = Σ_{x∈D} f(x) released as q(D) + N(0, σ²I), joint
convexity of the hockey-stick divergence gives, for every target x_i,

    δ̃_i(ε̃) = 1/(2n − 1) Σ_{j≠i} δ_G(ε̃; ‖f(x_i) − f(x_j)‖/σ),

and (ε̃, δ)-PMP holds once max_i δ̃_i(ε̃) ≤ δ. The candidate ε̃ goes inside Φ
(the paper reuses the DP ε's symbol there). This is an UPPER BOUND on the PMP
parameter, never the exact value. δ_G and the DP calibration come from
``dpaudit.dp.mechanisms``.
"""

from __future__ import annotations

import numpy as np

from dpaudit.dp import mechanisms
from dpaudit.metrics.pmp.bounds import profile_epsilon_per_row

__all__ = ["gaussian_pmp", "pairwise_distances", "partner_mu"]


def pairwise_distances(features: np.ndarray) -> np.ndarray:
    """Euclidean distances between rows in float64 (Gram trick, clamped at 0)."""
    f = np.asarray(features, dtype=np.float64)
    sq = np.einsum("ij,ij->i", f, f)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (f @ f.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def partner_mu(distances: np.ndarray, sigma: float) -> np.ndarray:
    """μ_ij = Δ_ij/σ for j ≠ i, as a 2n × (2n − 1) array (each target's partners)."""
    distances = np.asarray(distances, dtype=np.float64)
    m = distances.shape[0]
    off = ~np.eye(m, dtype=bool)
    return (distances[off] / float(sigma)).reshape(m, m - 1)


def gaussian_pmp(features: np.ndarray, sigma: float, delta: float, *, sensitivity_global: float,
                 distances: np.ndarray | None = None) -> dict:
    """Algorithm G-PMP: the Prop. 12 bound ε̃ per target and its max, with the DP references.

    ``features`` are the per-record contributions f(x_i) (2n × d) of the additive
    query; ``sensitivity_global`` is the query's replace-one L2 sensitivity Δ
    (2C/n for the mean of points clipped to C). Returns ε̃ (``eps_pmp``, an
    upper bound), per-target ``eps_pmp_x``, the global ε(σ, δ, Δ) and the
    subpopulation ε(X) = ε(σ, δ, max_ij Δ_ij).
    """
    if distances is None:
        distances = pairwise_distances(features)
    sigma = float(sigma)
    if not sigma > 0:
        raise ValueError(f"noise standard deviation must be > 0, got {sigma}")
    mu = partner_mu(distances, sigma)
    eps_x = profile_epsilon_per_row(mu, delta)
    sens_x = float(distances.max())
    return {
        "eps_pmp": float(eps_x.max()),
        "eps_pmp_x": eps_x,
        "argmax_x": int(np.argmax(eps_x)),
        "eps_global": mechanisms.gaussian_epsilon_analytic(sigma / float(sensitivity_global), delta),
        "eps_X": (mechanisms.gaussian_epsilon_analytic(sigma / sens_x, delta) if sens_x > 0 else 0.0),
        "sens_X": sens_x,
        "sens_global": float(sensitivity_global),
        "mu_mean_x": mu.mean(axis=1),
        "mu_max_x": mu.max(axis=1),
        "pmp_is_upper_bound": True,
    }
