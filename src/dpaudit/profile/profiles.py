"""Coverage, privacy loss and privacy profiles under L2-Laplace output noise.

LeBlond et al. 2023: the coverage of neighbour y at output M is the density of
𝒜(y) at M; the privacy loss l(x, y, M) = −log[C(y, M)/C(x, M)] = β(‖A(y) − M‖ − ‖A(x) − M‖).
Every function works on the shifts Δ_i = A(y_i) − A(x) and the offsets u = M − A(x).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, roots_legendre

from dpaudit.profile.mechanisms import output_perturbation_beta, unit_directions

# Chunk of noise draws whose K_chunk × n loss matrix is built and sorted at once: 4 MB arrays stay in
# cache through the in-place loss arithmetic (2**19 elements: 52 s for n = 32,561, K = 1000, 25 ε;
# 2**23, 64 MB: 62 s).
SORT_CHUNK_ELEMENTS = 2**19
TAU_LOW = 0.05
TAU_MID = 0.5
TAU_HIGH = 0.95
# t_d(τ) of LeBlond-style per-neighbour progress, quoted for the report (our reproduction, independently recomputed
# by ``transition_t``): d -> τ -> t.
REFERENCE_TRANSITION_T = {2: {0.05: 3.24, 0.5: 10.0, 0.95: 109.0}, 6: {0.05: 2.80, 0.5: 14.6, 0.95: 179.0}}


def log_kappa(d: int) -> float:
    """log κ_d, κ_d = Γ(d/2)/(2π^{d/2}Γ(d)): the L2-Laplace density is κ_d β^d exp(−β‖b‖)."""
    return float(gammaln(d / 2) - np.log(2) - (d / 2) * np.log(np.pi) - gammaln(d))


def log_coverage(points: np.ndarray, centre: np.ndarray, beta: float) -> np.ndarray:
    """Analytic coverage (c → 0): log density of 𝒜 = centre + L2-Laplace(β) at each point."""
    points = np.atleast_2d(points)
    d = points.shape[1]
    return log_kappa(d) + d * np.log(beta) - beta * np.linalg.norm(points - centre[None, :], axis=1)


def empirical_coverage(samples: np.ndarray, point: np.ndarray, cutoff: float) -> float:
    """Ĉ(y, M): the fraction of samples of 𝒜(y) within distance c of M (LeBlond et al. Eq. 5)."""
    if not cutoff > 0:
        raise ValueError(f"coverage cutoff c must be positive, got {cutoff!r}")
    return float(np.mean(np.linalg.norm(samples - point[None, :], axis=1) < cutoff))


def distance_difference(offsets: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """‖Δ_i − u‖ − ‖u‖ for each offset u (K × d) and shift Δ_i (n × d), in cancellation-free form.

    (‖Δ‖² − 2⟨u, Δ⟩)/(‖u − Δ‖ + ‖u‖), where ‖u − Δ‖ is summed from the coordinate differences (its
    expanded square ‖u‖² − 2⟨u, Δ⟩ + ‖Δ‖² loses half the digits when u ≈ Δ). One coordinate at a time,
    so only K × n arrays are alive (never K × n × d). Returns K × n (or n for a single offset).
    """
    single = np.ndim(offsets) == 1
    offsets = np.atleast_2d(offsets)
    # In place throughout: at K × n = 32M elements every temporary costs as much as the arithmetic.
    numerator = offsets @ shifts.T
    numerator *= -2.0
    numerator += np.einsum("nd,nd->n", shifts, shifts)[None, :]
    gap = np.zeros(numerator.shape)
    difference = np.empty(numerator.shape)
    for k in range(offsets.shape[1]):
        np.subtract.outer(offsets[:, k], shifts[:, k], out=difference)
        gap += np.square(difference, out=difference)
    denominator = np.sqrt(gap, out=gap)
    denominator += np.linalg.norm(offsets, axis=1)[:, None]
    out = np.divide(numerator, denominator, out=numerator, where=denominator > 0)
    out[~(denominator > 0)] = 0.0
    return out[0] if single else out


def privacy_loss(offsets: np.ndarray, shifts: np.ndarray, beta: float) -> np.ndarray:
    """l(x, y_i, M) = β(‖A(y_i) − M‖ − ‖A(x) − M‖), positive when M is nearer A(x)."""
    loss = distance_difference(offsets, shifts)
    loss *= beta
    return loss


@dataclass(frozen=True)
class SingleProfile:
    abs_loss: np.ndarray  # ascending |l|
    row_index: np.ndarray  # 0-based row of each rank (stable order among ties)
    loss: np.ndarray  # signed l per row, in row order


def single_profile(offset: np.ndarray, shifts: np.ndarray, beta: float) -> SingleProfile:
    loss = privacy_loss(offset, shifts, beta)
    order = np.argsort(np.abs(loss), kind="stable")
    return SingleProfile(abs_loss=np.abs(loss)[order], row_index=order, loss=loss)


@dataclass(frozen=True)
class TypicalProfiles:
    epsilon: np.ndarray
    beta: np.ndarray
    draws: int
    seed: int
    mean_abs_loss: np.ndarray  # (n_ε, n): sort-then-average, per rank
    se_abs_loss: np.ndarray  # standard error per rank
    mean_loss: np.ndarray  # (n_ε, n): per neighbour, KL(𝒜(x) ‖ 𝒜(y_i))
    mean_abs_loss_per_row: np.ndarray  # (n_ε, n): per neighbour E|l|
    var_loss: np.ndarray  # (n_ε, n): per neighbour variance of l

    @property
    def average_then_sort(self) -> np.ndarray:
        """The other order of operations (per-neighbour mean |l|, then sorted): not the paper's profile."""
        return np.sort(self.mean_abs_loss_per_row, axis=1)


def typical_profiles(shifts: np.ndarray, epsilons: np.ndarray, *, n: int, lam: float, draws: int, seed: int,
                     sort_chunk_elements: int = SORT_CHUNK_ELEMENTS) -> TypicalProfiles:
    """P̄(k; ε): mean over M ~ 𝒜(x) of the k-th smallest |l|, for every ε of the grid.

    Common random numbers across ε: one set of directions û and unit-rate radii ρ₁ ~ Gamma(d, 1),
    b = (ρ₁/β)û at every β (exactly the L2-Laplace law). Only running means, centred sums of squares
    and sums per rank and per neighbour are kept; the K × n loss matrix exists one chunk of draws at a time.
    """
    epsilons = np.asarray(epsilons, dtype=np.float64)
    betas = np.atleast_1d(output_perturbation_beta(n, lam, epsilons))
    count, d = shifts.shape
    rng = np.random.default_rng(seed)
    directions = unit_directions(rng, draws, d)
    unit_radii = rng.gamma(shape=d, scale=1.0, size=draws)
    chunk = max(1, min(draws, sort_chunk_elements // max(count, 1)))
    shape = (epsilons.size, count)
    rank_mean, rank_m2 = np.zeros(shape), np.zeros(shape)
    row_mean, row_m2, row_abs = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for e, beta in enumerate(betas):
        for start in range(0, draws, chunk):
            offsets = (unit_radii[start:start + chunk] / beta)[:, None] * directions[start:start + chunk]
            loss = privacy_loss(offsets, shifts, beta)
            _merge_moments(row_mean[e], row_m2[e], start, loss)
            magnitude = np.abs(loss, out=loss)
            row_abs[e] += magnitude.sum(axis=0)
            magnitude.sort(axis=1)
            _merge_moments(rank_mean[e], rank_m2[e], start, magnitude)
    dof = max(draws - 1, 1)
    return TypicalProfiles(
        epsilon=epsilons, beta=betas, draws=draws, seed=seed, mean_abs_loss=rank_mean,
        se_abs_loss=np.sqrt(rank_m2 / dof / draws), mean_loss=row_mean, mean_abs_loss_per_row=row_abs / draws,
        var_loss=row_m2 / dof,
    )


def _merge_moments(mean: np.ndarray, m2: np.ndarray, seen: int, chunk: np.ndarray) -> None:
    """Fold a chunk (k × n) into running means and centred sums of squares, in place (Chan et al. 1979).

    Centred within the chunk, so the variance never comes from Σl²/K − mean², which cancels (and went
    negative) when |mean| ≫ sd, as at large β where l ≈ βδ_i.
    """
    k = chunk.shape[0]
    chunk_mean = chunk.mean(axis=0)
    centred = chunk - chunk_mean
    chunk_m2 = np.einsum("kn,kn->n", centred, centred)
    step = chunk_mean - mean
    total = seen + k
    mean += step * (k / total)
    m2 += chunk_m2 + step**2 * (seen * k / total)


# ---------------------------------------------------------------------------
# Universal per-neighbour curves: E l = G_d(βδ), E|l| = H_d(βδ) (L2-Laplace noise)


# Truncation of the Laplace weight: pieces where a(cosh u − 1) or a(1 − cos φ) exceeds d + 80 carry
# e^{−(d+80)} times a polynomial, below 1e-20 of G and H for d ≤ 6.
_WEIGHT_REACH = 80.0


def _quadrature_nodes(order: int, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [low_k, high_k] for every k: two (len(low), order) arrays."""
    x, w = roots_legendre(order)
    half = 0.5 * (np.asarray(high) - np.asarray(low))[:, None]
    return half * x[None, :] + (0.5 * (np.asarray(high) + np.asarray(low)))[:, None], half * w[None, :]


def universal_curves(t: np.ndarray, d: int, order: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """G_d(t) = E[‖g − tû‖ − ‖g‖] and H_d(t) = E|‖g − tû‖ − ‖g‖|, g ~ L2-Laplace(β = 1), by quadrature.

    Prolate spheroidal coordinates with foci 0 and tû (a = t/2): ‖g‖ = a(cosh u − cos φ),
    ‖g − tû‖ = a(cosh u + cos φ), so the difference is 2a cos φ, the sign change of H sits on the
    line φ = π/2, the volume element is a^d (sinh²u + sin²φ)(sinh u sin φ)^{d−2} du dφ dΩ_{d−2} and the
    weight e^{−‖g‖} = e^{−a(cosh u − 1)} e^{−a(1 − cos φ)} factorises. G and H are then sums of products
    of one-dimensional integrals of analytic functions (φ split at π/2), each by Gauss–Legendre with
    ``order`` nodes on the range where the weight exceeds e^{−(d+80)}; sinh² + sin² (not cosh² − cos²)
    keeps the large-t terms free of cancellation. Relative error below 1e-12 for d ∈ {2, 6} and
    1e-3 ≤ t ≤ 1e6 against mpmath (tests/unit/test_profile.py), where the former (ρ, θ) grid with
    400 nodes was off by 6e-5 at t ≤ 0.1. Needs d ≥ 2; vectorized over t.
    """
    if d < 2:
        raise ValueError(f"universal_curves needs d >= 2, got {d}")
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if not (t > 0).all():
        raise ValueError("universal_curves needs t > 0")
    a = t / 2
    reach = d + _WEIGHT_REACH
    u, u_w = _quadrature_nodes(order, np.zeros_like(a), np.arccosh(1 + reach / a))
    u_w = u_w * np.exp(-a[:, None] * (np.cosh(u) - 1)) * np.sinh(u) ** (d - 2)
    p0 = u_w.sum(axis=1)
    p2 = (u_w * np.sinh(u) ** 2).sum(axis=1)
    phi_max = np.arccos(np.maximum(-1.0, 1 - reach / a))
    phi_mid = np.minimum(phi_max, np.pi / 2)
    q_signed = np.zeros((2, t.size))  # ∫ sin^{d−2}φ (1, sin²φ) cos φ e^{−a(1 − cos φ)} dφ
    q_abs = np.zeros((2, t.size))  # the same with |cos φ|
    for low, high in ((np.zeros_like(a), phi_mid), (phi_mid, phi_max)):
        phi, phi_w = _quadrature_nodes(order, low, high)
        cos, sin = np.cos(phi), np.sin(phi)
        phi_w = phi_w * np.exp(-a[:, None] * (1 - cos)) * sin ** (d - 2)
        for j, factor in enumerate((1.0, sin**2)):
            q_signed[j] += (phi_w * factor * cos).sum(axis=1)
            q_abs[j] += (phi_w * factor * np.abs(cos)).sum(axis=1)
    # κ_d (the L2-Laplace constant) × |S^{d−2}| (the area of the unit sphere of R^{d−1}) × a^d × 2a.
    log_scale = (log_kappa(d) + np.log(2) + 0.5 * (d - 1) * np.log(np.pi) - gammaln((d - 1) / 2)
                 + np.log(2) + (d + 1) * np.log(a))
    scale = np.exp(log_scale)
    return scale * (p2 * q_signed[0] + p0 * q_signed[1]), scale * (p2 * q_abs[0] + p0 * q_abs[1])


def small_t_slope(d: int) -> float:
    """c_d = lim H_d(t)/t at t → 0 = E|⟨û, e⟩| = Γ(d/2)/(√π Γ((d+1)/2))."""
    return float(np.exp(gammaln(d / 2) - 0.5 * np.log(np.pi) - gammaln((d + 1) / 2)))


@lru_cache(maxsize=32)
def transition_t(d: int, tau: float) -> float:
    """t at which the per-neighbour progress (H_d(t)/t − c_d)/(1 − c_d) first reaches τ after its dip."""
    c_d = small_t_slope(d)

    def progress(t):
        return (universal_curves(t, d)[1][0] / t - c_d) / (1 - c_d) - tau

    grid = np.geomspace(0.05, 5e3, 60)
    values = np.array([progress(t) for t in grid])
    dip = int(np.argmin(values))
    above = np.nonzero(values[dip:] >= 0)[0]
    if above.size == 0:
        raise ValueError(f"progress never reaches τ = {tau} for d = {d}")
    k = dip + int(above[0])
    return float(brentq(progress, grid[k - 1], grid[k], xtol=1e-6))


def predicted_epsilon(t: float, *, n: int, lam: float, delta: float) -> float:
    """ε(τ) = 2 t_d(τ)/(nΛδ): the β at which β δ reaches t, as ε."""
    return 2.0 * t / (n * lam * delta)


@dataclass(frozen=True)
class Thresholds:
    eps_low: float
    eps_high: float
    rank_floor: int
    tau_low: float
    tau_high: float
    progress: np.ndarray  # τ_k(ε), (n_ε, n)


def regime_thresholds(epsilons: np.ndarray, profile_over_beta: np.ndarray, sorted_delta: np.ndarray, *,
                      tau_low: float = TAU_LOW, tau_high: float = TAU_HIGH, low_grid_points: int = 3) -> Thresholds:
    """ε_low / ε_high of the typical profile (LeBlond et al. 2023, Secs. 3.3 and 5.4, describe them qualitatively; these definitions are ours).

    τ_k(ε) = (P̄(k)/β − P_low(k))/(P_high(k) − P_low(k)), P_low = mean of the three smallest ε,
    P_high = sorted δ. ε_low: largest grid ε whose max τ_k over ranks k ≥ n/10 is ≤ τ_low, with every
    smaller ε also below; ε_high: smallest ε with τ ≥ τ_high at the top rank. NaN when the grid misses it:
    ε_low also when every grid ε is still on the low plateau (the threshold lies beyond the grid's end).
    """
    epsilons = np.asarray(epsilons, dtype=np.float64)
    if not (np.diff(epsilons) > 0).all():
        raise ValueError(f"the ε grid (profile.log10_epsilons) must be strictly increasing, got {epsilons.tolist()}")
    if epsilons.size < low_grid_points + 1:
        raise ValueError(f"need more than {low_grid_points} ε values to define the low plateau")
    low = profile_over_beta[:low_grid_points].mean(axis=0)
    span = sorted_delta - low
    count = sorted_delta.size
    rank_floor = count // 10
    usable = np.arange(count) >= rank_floor
    usable &= np.abs(span) > 1e-9 * np.abs(sorted_delta).max()
    with np.errstate(invalid="ignore", divide="ignore"):
        progress = (profile_over_beta - low[None, :]) / span[None, :]
    below = progress[:, usable].max(axis=1) <= tau_low
    leading = np.cumprod(below).astype(bool)
    eps_low = float(epsilons[leading][-1]) if leading.any() and not leading.all() else np.nan
    top = progress[:, -1] >= tau_high
    eps_high = float(epsilons[top][0]) if top.any() else np.nan
    return Thresholds(eps_low=eps_low, eps_high=eps_high, rank_floor=rank_floor, tau_low=tau_low,
                      tau_high=tau_high, progress=progress)
