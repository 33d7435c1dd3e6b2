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

__all__ = ["SOLVE_CELLS", "gaussian_pmp", "pairwise_distances", "partner_mu", "pmp_result", "row_blocks",
           "solve_rows"]


def pairwise_distances(features: np.ndarray) -> np.ndarray:
    """Euclidean distances between rows in float64 (Gram trick, clamped at 0)."""
    f = np.asarray(features, dtype=np.float64)
    sq = np.einsum("ij,ij->i", f, f)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (f @ f.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def partner_mu(distances: np.ndarray, sigma: float, *, start: int = 0) -> np.ndarray:
    """μ_ij = Δ_ij/σ for j ≠ i, as a 2n × (2n − 1) array (each target's partners).

    ``distances`` may be a block of rows of the 2n × 2n matrix whose first row is target
    ``start`` (b × 2n in, b × (2n − 1) out: each row drops its own column)."""
    distances = np.asarray(distances, dtype=np.float64)
    rows, m = distances.shape
    off = np.ones((rows, m), dtype=bool)
    off[np.arange(rows), start + np.arange(rows)] = False
    return (distances[off] / float(sigma)).reshape(rows, m - 1)


SOLVE_CELLS = 1 << 20  # μ cells the per-row solver holds at once (its temporaries are a few copies)


def solve_rows(mu_rows, delta: float, n_rows: int, *, block_rows: int | None = None) -> np.ndarray:
    """``profile_epsilon_per_row`` over blocks of rows: ``mu_rows(start, stop)`` returns the
    μ of targets start:stop. The solver's iterations are per row (each row's Newton steps,
    bracket and stopping test read only that row), so the result equals one call on the whole
    matrix bit for bit (``tests/unit/test_pmp_scale.py``) while holding ``block_rows`` rows
    (default: about ``SOLVE_CELLS`` cells) instead of all of them."""
    out = np.empty(int(n_rows))
    for start, stop in row_blocks(n_rows, block_rows):
        out[start:stop] = profile_epsilon_per_row(mu_rows(start, stop), delta)
    return out


def row_blocks(n_rows: int, block_rows: int | None = None):
    """(start, stop) of consecutive blocks of ``block_rows`` rows (default: ``SOLVE_CELLS`` / n_rows)."""
    n_rows = int(n_rows)
    block = int(block_rows) if block_rows else max(1, SOLVE_CELLS // max(n_rows, 1))
    return [(start, min(start + block, n_rows)) for start in range(0, n_rows, block)]


def pmp_result(eps_x: np.ndarray, sigma: float, delta: float, *, sensitivity_global: float, sens_x: float,
               mu_mean_x: np.ndarray, mu_max_x: np.ndarray, upper_bound: bool = True) -> dict:
    """G-PMP's result dict from the per-target ε̃ and the parent set's largest distance (see ``gaussian_pmp``)."""
    return {
        "eps_pmp": float(eps_x.max()),
        "eps_pmp_x": eps_x,
        "argmax_x": int(np.argmax(eps_x)),
        "eps_global": mechanisms.gaussian_epsilon_analytic(sigma / float(sensitivity_global), delta),
        "eps_X": (mechanisms.gaussian_epsilon_analytic(sigma / sens_x, delta) if sens_x > 0 else 0.0),
        "sens_X": float(sens_x),
        "sens_global": float(sensitivity_global),
        "mu_mean_x": mu_mean_x,
        "mu_max_x": mu_max_x,
        "pmp_is_upper_bound": bool(upper_bound),
    }


def gaussian_pmp(features: np.ndarray, sigma: float, delta: float, *, sensitivity_global: float,
                 distances: np.ndarray | None = None, block_rows: int | None = None) -> dict:
    """Algorithm G-PMP: the Prop. 12 bound ε̃ per target and its max, with the DP references.

    ``features`` are the per-record contributions f(x_i) (2n × d) of the additive
    query; ``sensitivity_global`` is the query's replace-one L2 sensitivity Δ
    (2C/n for the mean of points clipped to C). Returns ε̃ (``eps_pmp``, an
    upper bound), per-target ``eps_pmp_x``, the global ε(σ, δ, Δ) and the
    subpopulation ε(X) = ε(σ, δ, max_ij Δ_ij). Exact over all 2n − 1 partners; μ and
    the solver go ``block_rows`` targets at a time (``solve_rows``: the same bits as one
    block), so only the distance matrix is held whole.
    """
    if distances is None:
        distances = pairwise_distances(features)
    sigma = float(sigma)
    if not sigma > 0:
        raise ValueError(f"noise standard deviation must be > 0, got {sigma}")
    m = distances.shape[0]
    mu_mean, mu_max = np.empty(m), np.empty(m)

    def mu_rows(start, stop):
        mu = partner_mu(distances[start:stop], sigma, start=start)
        mu_mean[start:stop], mu_max[start:stop] = mu.mean(axis=1), mu.max(axis=1)
        return mu

    eps_x = solve_rows(mu_rows, delta, m, block_rows=block_rows)
    return pmp_result(eps_x, sigma, delta, sensitivity_global=sensitivity_global, sens_x=float(distances.max()),
                      mu_mean_x=mu_mean, mu_max_x=mu_max)
