"""Recipe B's drawn partners at any size: block-shared draws, Gram-block products, a partner
count sized from a precision target (issue 37).

**The draw** (``partner_blocks``). Targets go in blocks of ``PARTNER_BLOCK`` consecutive rows of
X; each block draws one random ordered (k + 1)-subset S of X without replacement (one
``Generator.choice`` per block). A target drops itself from S when it is there and S's last
element otherwise, so its k partners are a uniform k-subset of the other 2n − 1 points (given
t ∉ S, S is a uniform ordered sample of X \\ {t} and its first k a uniform k-subset; given t ∈ S,
S \\ {t} is one). Each target's estimate is therefore the same Monte Carlo estimate as with
independent draws; only targets of one block share partners. With k ≥ 2n − 1, S is X in order
and every target gets all its partners (exact). The draw depends on (2n, k, seed) only.

**The products.** A block's inner products are one Gram block G = F_B F_Sᵀ (B × (k + 1)) per
factor, a matrix product, where gathering each pair's factors (the old path) moved 2·k·W floats
per target through memory: n·(k + 1)·W multiply-adds and no n·k index arrays. Recipe B's χ sums
take them in float32 (``CHI_DTYPE``): ⟨g_t, g_p⟩ to about 1e-6 of ‖g_t‖‖g_p‖ (W ≤ a few hundred
terms of float32 products accumulated by BLAS), which moves ε̃_x by far less than the
partner-sampling standard error (``tests/unit/test_pmp_partners.py`` measures both).

**The partner count** (``choose_partner_count``). A pilot of ``PILOT_PARTNERS`` partners
per target gives each ε̃_x and its delta-method standard error (``profile_epsilon_standard_error``);
the standard error shrinks as √((N − k)/(k (N − 1))) (N = 2n − 1 partners, drawn without
replacement), so the count that brings the pilot's standard error at its largest ε̃_x to the
relative target is solved for, within [``PILOT_PARTNERS``, ``partners_max``].
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from dpaudit.dp.profile_solver import profile_epsilon_per_row, profile_epsilon_standard_error

__all__ = ["CHI_DTYPE", "PARTNER_BLOCK", "PILOT_PARTNERS", "block_inner_products", "choose_partner_count",
           "draw_partners", "partner_blocks", "partners_drawn", "partners_for_standard_error"]

PARTNER_BLOCK = 512  # targets sharing one draw: the Gram block's rows
PILOT_PARTNERS = 32
CHI_DTYPE = np.float32


def partners_drawn(n_parent: int, n_partners: int) -> int:
    """The partners each target gets: ``n_partners``, or all 2n − 1 when that is fewer."""
    return max(1, min(int(n_partners), int(n_parent) - 1))


def partner_blocks(n_parent: int, n_partners: int, seed: int, *,
                   block_rows: int = PARTNER_BLOCK) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Yield ``(start, stop, shared, columns)`` per block of targets start:stop: ``shared`` the
    block's drawn rows S of X (k + 1 of them), ``columns`` (stop − start) × k positions in S of each
    target's partners (module docstring)."""
    n = int(n_parent)
    k = partners_drawn(n, n_partners)
    rng = np.random.default_rng(seed)
    everyone = k >= n - 1
    base = np.arange(k + 1)
    for start in range(0, n, int(block_rows)):
        stop = min(start + int(block_rows), n)
        shared = np.arange(n) if everyone else rng.choice(n, size=k + 1, replace=False)
        targets = np.arange(start, stop)
        where = np.full(targets.size, k)  # S's last element is dropped unless the target is in S
        if everyone:
            where = targets.copy()
        else:
            order = np.argsort(shared)
            found = np.minimum(np.searchsorted(shared[order], targets), k)
            inside = shared[order[found]] == targets
            where[inside] = order[found[inside]]
        columns = np.broadcast_to(base[:k], (targets.size, k)).copy()
        columns += columns >= where[:, None]
        yield start, stop, shared, columns


def draw_partners(n_parent: int, n_partners: int, seed: int, *,
                  block_rows: int = PARTNER_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """(targets, partners), flat and target-major, of ``partner_blocks`` (n·k of each: for
    small parent sets and the tests; the large paths go block by block)."""
    targets, partners = [], []
    for start, stop, shared, columns in partner_blocks(n_parent, n_partners, seed, block_rows=block_rows):
        targets.append(np.repeat(np.arange(start, stop), columns.shape[1]))
        partners.append(shared[columns].ravel())
    return np.concatenate(targets), np.concatenate(partners)


def block_inner_products(views: Sequence[tuple[np.ndarray, np.ndarray]], start: int, stop: int,
                         shared: np.ndarray, columns: np.ndarray, *, dtype=np.float64) -> np.ndarray:
    """⟨g_t, g_p⟩ = Σ_l (⟨a_lt, a_lp⟩ + 1)·⟨δ_lt, δ_lp⟩ of targets start:stop and their partners
    (``partner_blocks``), (stop − start) × k float64: one Gram block per factor, its products in
    ``dtype`` (float32 for Recipe B's χ, module docstring), combined in float64."""
    gram = None
    for a, d in views:
        inner_a = np.asarray(a[start:stop], dtype=dtype) @ np.asarray(a[shared], dtype=dtype).T
        inner_d = np.asarray(d[start:stop], dtype=dtype) @ np.asarray(d[shared], dtype=dtype).T
        term = (inner_a.astype(np.float64) + 1.0) * inner_d
        gram = term if gram is None else gram + term
    return np.take_along_axis(gram, columns, axis=1)


def partners_for_standard_error(standard_error: float, k0: int, population: int, target: float,
                                partners_max: int) -> int:
    """The k with SE(k) = ``target`` when k₀ partners (of ``population``, without replacement) gave
    ``standard_error``: SE(k)² = s²(N − k)/(k(N − 1)), so k = s²N/(target²(N − 1) + s²); within
    [k₀, ``partners_max``] and at most N."""
    if k0 >= population:
        return int(population)
    if not standard_error > 0 or not np.isfinite(standard_error):
        k = k0
    elif not target > 0:
        k = int(partners_max)
    else:
        s2 = standard_error**2 * k0 * (population - 1) / (population - k0)
        k = math.ceil(s2 * population / (target**2 * (population - 1) + s2))
    return int(min(max(k, k0), int(partners_max), population))


def choose_partner_count(pilot_chi: np.ndarray, n_parent: int, *, sampling_rate: float, delta: float,
                         relative_standard_error: float, partners_max: int) -> dict:
    """Recipe B's partner count from a pilot: ``pilot_chi`` (2n × k₀, Σ_k T_k χ_k of each target's
    k₀ pilot partners). Returns ``partners`` (k, or 2n − 1 for all of them), the pilot's
    ``pilot_epsilon`` (its largest ε̃_x) and ``pilot_standard_error`` there.

    k: ``partners_for_standard_error`` with target = ``relative_standard_error`` × the pilot's
    largest ε̃_x (its standard error is the one the row states for epsilon_pmp)."""
    pilot_chi = np.asarray(pilot_chi, dtype=np.float64)
    k0 = pilot_chi.shape[1]
    population = int(n_parent) - 1
    if k0 >= population:
        return {"partners": population, "pilot_epsilon": math.nan, "pilot_standard_error": 0.0}
    mu = float(sampling_rate) * np.sqrt(pilot_chi)
    eps = profile_epsilon_per_row(mu, delta)
    top = int(np.argmax(eps))
    se = float(profile_epsilon_standard_error(mu[top:top + 1], eps[top:top + 1], population=population)[0])
    k = partners_for_standard_error(se, k0, population, float(relative_standard_error) * float(eps[top]),
                                    partners_max)
    return {"partners": int(k), "pilot_epsilon": float(eps[top]), "pilot_standard_error": se}
