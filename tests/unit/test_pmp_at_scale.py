"""Issue 37: PMP at 200,000 rows. The certified largest clipped distance, the block-shared
partner draw, Recipe B's partner count from a precision target and its stated standard error."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.extract.max_distance import largest_clipped_distance
from dpaudit.extract.pmp_pairs import (
    factor_norms_sq,
    max_clipped_distance,
    trajectory_chi_sums_from_factors,
)
from dpaudit.extract.pmp_partners import (
    PILOT_PARTNERS,
    choose_partner_count,
    partner_blocks,
    partners_for_standard_error,
)
from dpaudit.metrics.pmp.dpsgd import recipe_b_from_chi_sums

LAYERS = [(12, 8), (8, 3)]


def _factors(n, seed, *, antipodal=0, duplicates=0, dense=False):
    """(inputs, deltas, grad_norm) of random Dense-layer factors: ReLU-like inputs, signed bias
    gradients. ``antipodal``: rows 0..k−1 are the exact negatives of rows k..2k−1 (same inputs,
    negated δ: g' = −g); ``duplicates``: the last rows repeat the first ones (ties of every
    distance); ``dense``: isotropic inputs (gradients spread over many directions)."""
    rng = np.random.default_rng(seed)
    a0 = rng.standard_normal((n, 12)) if dense else rng.random((n, 12))
    h = np.maximum(rng.standard_normal((n, 8)), 0.0)
    d1 = rng.standard_normal((n, 8)) * (h > 0) * np.exp(rng.normal(0, 0.5, (n, 1)))
    d2 = rng.standard_normal((n, 3)) * np.exp(rng.normal(0, 0.5, (n, 1)))
    k = antipodal
    if k:
        a0[:k], h[:k], d1[:k], d2[:k] = a0[k:2 * k], h[k:2 * k], -d1[k:2 * k], -d2[k:2 * k]
    if duplicates:
        for part in (a0, h, d1, d2):
            part[n - duplicates:] = part[:duplicates]
    inputs = np.concatenate([a0, h], axis=1).astype(np.float32)
    deltas = np.concatenate([d1, d2], axis=1).astype(np.float32)
    return inputs, deltas, np.sqrt(factor_norms_sq(inputs, deltas, LAYERS))


CASES = {  # n, seed, clip (a quantile of the norms: 1.0 = none clipped), factors' options
    "random_unclipped": (3000, 0, 1.0, {}),
    "random_half_clipped": (2500, 1, 0.5, {}),
    "all_clipped": (2000, 2, 0.0, {}),
    "antipodal_unclipped": (3000, 3, 1.0, {"antipodal": 40}),
    "antipodal_clipped": (1500, 4, 0.0, {"antipodal": 5}),
    "ties": (2000, 5, 0.7, {"duplicates": 600}),
    "dense_clipped": (1200, 6, 0.2, {"dense": True}),
    "tiny": (7, 7, 0.5, {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_largest_distance_equals_the_all_pairs_maximum(case):
    """Oracle: ``max_clipped_distance``, every pair in row blocks (the exact path). The search
    (forced with exact_max = 0) must say it is exact and give the same number: 1e-12 relative for
    the certified search (the same formula on the same floats, other BLAS blocks), 1e-9 for the
    ceiling stop (a pair within 1e-9 of r₁ + r₂)."""
    n, seed, quantile, options = CASES[case]
    inputs, deltas, norms = _factors(n, seed, **options)
    clip = float(np.quantile(norms, quantile)) * (1.0 + 1e-12) if quantile < 1 else 1e9
    want = max_clipped_distance(inputs, deltas, norms, LAYERS, clip)
    got = largest_clipped_distance(inputs, deltas, norms, LAYERS, clip, exact_max=0, seed=seed)
    assert got["exact"] and got["method"] in ("branch_and_bound", "ceiling")
    assert got["value"] == pytest.approx(want, rel=1e-9 if got["method"] == "ceiling" else 1e-12)
    if case.startswith("antipodal_clipped"):  # c and −c at norm C: the ceiling 2C is reached
        assert got["method"] == "ceiling" and got["value"] == pytest.approx(2 * clip, rel=1e-9)


@pytest.mark.parametrize("budget", [1, 2_000, 50_000, 400_000])
@pytest.mark.parametrize("case", ["random_half_clipped", "dense_clipped", "ties"])
def test_a_stated_upper_bound_is_never_below_the_exact_value(case, budget):
    """A pair budget too small for the certificate gives an upper bound: never below the exact
    all-pairs value (oracle as above, with 1e-12 of rounding), never above the ceiling r₁ + r₂."""
    n, seed, quantile, options = CASES[case]
    inputs, deltas, norms = _factors(n, seed, **options)
    clip = float(np.quantile(norms, quantile))
    want = max_clipped_distance(inputs, deltas, norms, LAYERS, clip)
    got = largest_clipped_distance(inputs, deltas, norms, LAYERS, clip, exact_max=0, pair_budget=budget)
    clipped = np.sort(np.minimum(norms, clip))
    assert got["value"] >= want * (1 - 1e-12)
    assert got["value"] <= (clipped[-1] + clipped[-2]) * (1 + 1e-12)
    if got["exact"]:
        assert got["value"] == pytest.approx(want, rel=1e-9)
    else:
        assert got["method"] == "branch_and_bound_upper_bound"
        # issue 47: it stopped because the next block would pass the budget (the lower-bound sweeps
        # before it may have passed a small one already)
        assert got["pair_budget"] == budget and budget < got["pairs_evaluated"] + got["next_block"]


def test_the_budget_note_says_the_pairs_counted_the_budget_and_why_the_search_stopped():
    """Issue 47's case at 2·10^5 rows: 518,772,333 pairs evaluated of the 2²⁹ budget; the note said
    the budget "ran out". It must give both counts and the reason (the next block would pass it)."""
    from dpaudit.metrics.pmp.run import distance_search_note

    note = distance_search_note({"distance_method": "branch_and_bound_upper_bound", "distance_exact": False,
                                 "distance_pairs_evaluated": 518_772_333, "distance_pair_budget": 2**29,
                                 "distance_next_block": 21_233_664})
    assert "518,772,333 pairs of its budget of 536,870,912 (96.6%)" in note
    assert "next cluster pair's block of 21,233,664 pairs would have passed the budget (540,005,997 pairs)" in note
    assert "ran out" not in note and "branch_and_bound_upper_bound" in note
    swept = distance_search_note({"distance_method": "branch_and_bound_upper_bound", "distance_pairs_evaluated": 178_000,
                                  "distance_pair_budget": 2_000, "distance_next_block": 900})
    assert "178,000 pairs, more than its budget of 2,000 (its lower-bound sweeps alone passed it)" in swept


def test_the_exact_path_stays_below_exact_max():
    inputs, deltas, norms = _factors(300, 9)
    got = largest_clipped_distance(inputs, deltas, norms, LAYERS, 1.0, exact_max=300)
    assert got == {"value": max_clipped_distance(inputs, deltas, norms, LAYERS, 1.0), "method": "all_pairs",
                   "exact": True, "pairs_evaluated": 300 * 299 // 2}


def test_block_shared_partners_are_uniform_distinct_and_never_the_target():
    """Each target's k partners: distinct, not itself, and (over 3,000 seeds) every other point
    equally likely: a chi-square goodness-of-fit test of the counts at level 1e-4 for targets
    inside and at the edge of a block (block of 8 rows in a parent set of 29)."""
    n, k, block = 29, 5, 8
    counts = np.zeros((n, n))
    for seed in range(3000):
        for start, stop, shared, columns in partner_blocks(n, k, seed, block_rows=block):
            partners = shared[columns]
            assert partners.shape == (stop - start, k)
            assert not np.any(partners == np.arange(start, stop)[:, None])
            assert all(np.unique(row).size == k for row in partners)
            np.add.at(counts, (np.repeat(np.arange(start, stop), k), partners.ravel()), 1)
    for target in (0, 7, 8, 28):
        observed = np.delete(counts[target], target)
        assert observed.sum() == 3000 * k
        assert stats.chisquare(observed).pvalue > 1e-4
    # k ≥ 2n − 1: every partner, in order (the exact average), whatever the seed
    for start, stop, shared, columns in partner_blocks(6, 10, 1, block_rows=4):
        np.testing.assert_array_equal(np.sort(shared[columns], axis=1),
                                      [[j for j in range(6) if j != t] for t in range(start, stop)])


def test_partner_count_formula_inverts_the_standard_error_law():
    """SE(k)² = s²(N − k)/(k(N − 1)) (sampling without replacement): the count for a target
    reproduces the target when fed back, and is clamped to [k₀, partners_max] and N."""
    k0, population, se0 = 32, 999, 0.05
    s2 = se0**2 * k0 * (population - 1) / (population - k0)
    k = partners_for_standard_error(se0, k0, population, 0.02, 10_000)
    assert math.sqrt(s2 * (population - k) / (k * (population - 1))) <= 0.02
    assert math.sqrt(s2 * (population - k + 1) / ((k - 1) * (population - 1))) > 0.02
    assert partners_for_standard_error(se0, k0, population, 0.02, 100) == 100
    assert partners_for_standard_error(se0, k0, population, 1.0, 10_000) == k0
    assert partners_for_standard_error(se0, k0, population, 1e-9, 10_000) == population
    assert partners_for_standard_error(0.0, k0, population, 0.02, 10_000) == k0


def _trajectory(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        inputs = np.abs(rng.standard_normal((n, 11)))
        deltas = rng.standard_normal((n, 8)) * np.exp(rng.normal(0, 0.7, (n, 1))) * 0.6
        out.append({"steps": 50, "inputs": inputs.astype(np.float32), "deltas": deltas.astype(np.float32),
                    "layers": [(6, 5), (5, 3)]})
    return out


@pytest.mark.parametrize("relative", [0.01, 0.002])
def test_recipe_b_at_the_chosen_partner_count_is_within_its_standard_error(relative):
    """2n = 1,000 points, 3 checkpoints; oracle: Recipe B with all 999 partners of every target.
    For 20 seeds of the draw (pilot and final), the estimate ε̂ of the target x* that attains the
    all-pairs maximum, at the chosen partner count, against its stated standard error (delta method,
    ``profile_epsilon_standard_error``): |z| ≤ 1 should hold with probability Φ(1) − Φ(−1) = 0.683.
    Pass: at least the binomial 0.1 % quantile of Bin(20, 0.683) seeds within one standard error
    (false alarm ≤ 0.1 % if the stated error is right), and no |z| > 5. The headline epsilon_pmp is
    the largest ε̂_x, which leans upward when many targets tie (its row's standard error is x*'s); it is
    checked against 6 standard errors plus that lean's scale, SE·√(2 ln 2n)."""
    n, q, delta = 1000, 0.05, 1e-4
    checkpoints = _trajectory(n, 0)
    kw = dict(noise_multiplier=1.0, clip=1.0)

    def recipe_b(sums):
        return recipe_b_from_chi_sums(sums["total"], n, sampling_rate=q, noise_multiplier=1.0, delta=delta,
                                      steps=sums["steps"], checkpoints=3, projection_dim=0)

    exact = recipe_b(trajectory_chi_sums_from_factors(checkpoints, n_partners=n, seed=0, **kw))
    assert exact["n_partners"] == n - 1 and exact["standard_error"] == 0.0
    top = int(np.argmax(exact["eps_pmp_x"]))
    z, counts = [], []
    for seed in range(20):
        pilot = trajectory_chi_sums_from_factors(checkpoints, n_partners=PILOT_PARTNERS, seed=[seed, 1], **kw)
        chosen = choose_partner_count(pilot["total"], n, sampling_rate=q, delta=delta,
                                      relative_standard_error=relative, partners_max=1024)
        res = recipe_b(trajectory_chi_sums_from_factors(checkpoints, n_partners=chosen["partners"], seed=seed, **kw))
        assert res["n_partners"] == chosen["partners"] < n - 1
        counts.append(chosen["partners"])
        se_top = res["standard_error_x"][top]
        z.append((res["eps_pmp_x"][top] - exact["eps_pmp_x"][top]) / se_top)
        lean = res["standard_error"] * math.sqrt(2 * math.log(n))
        assert abs(res["eps_pmp"] - exact["eps_pmp"]) <= 6 * res["standard_error"] + lean
    z = np.abs(np.array(z))
    assert np.sum(z <= 1) >= stats.binom.ppf(0.001, 20, 0.6827), (z, counts)
    assert z.max() < 5, (z, counts)
    if relative == 0.002:  # a tighter target asks for more partners than the pilot
        assert min(counts) > PILOT_PARTNERS



def test_float32_pair_products_move_recipe_b_far_less_than_its_standard_error(monkeypatch):
    """The tolerance of Recipe B's float32 Gram blocks (``pmp_partners.CHI_DTYPE``): on the same
    draw, every ε̃_x within 1e-6 relative (plus 1e-9) of the float64 products' (the oracle), which
    is below 1 % of the smallest nonzero partner-sampling standard error of the row."""
    from dpaudit.extract import pmp_pairs

    n, q, delta = 1000, 0.05, 1e-4
    checkpoints = _trajectory(n, 1)
    kw = dict(noise_multiplier=1.0, clip=1.0, n_partners=64, seed=3)
    results = {}
    for dtype in (np.float64, np.float32):
        monkeypatch.setattr(pmp_pairs, "CHI_DTYPE", dtype)
        sums = trajectory_chi_sums_from_factors(checkpoints, **kw)
        results[dtype] = recipe_b_from_chi_sums(sums["total"], n, sampling_rate=q, noise_multiplier=1.0,
                                                delta=delta, steps=sums["steps"], checkpoints=3, projection_dim=0)
    single, double = results[np.float32]["eps_pmp_x"], results[np.float64]["eps_pmp_x"]
    np.testing.assert_allclose(single, double, rtol=1e-6, atol=1e-9)
    se = results[np.float64]["standard_error_x"]
    assert np.max(np.abs(single - double)) < 0.01 * se[se > 0].min()


def test_a_warm_start_finds_the_cold_solver_root():
    """``profile_epsilon_per_row(start=...)`` (Recipe A's final pass starts at its pilot's ε̃_x):
    the same roots as the cold start from ε = 0 (the oracle) to its 1e-10·max(1, ε) tolerance plus
    the feasibility nudge (1e-9 relative), from good, bad and absent guesses; rows private at ε = 0
    stay exactly 0."""
    from dpaudit.dp.profile_solver import profile_epsilon_per_row

    rng = np.random.default_rng(4)
    mu = rng.gamma(2.0, 0.6, (300, 40))
    mu[:5] *= 1e-6  # δ_G(0; μ) ≈ 0.4 μ < δ: private at ε = 0, root 0
    cold = profile_epsilon_per_row(mu, 1e-5)
    for guess in (cold * 1.05, cold * 0.2 + 3.0, np.full(300, np.nan), np.zeros(300), cold * 40):
        warm = profile_epsilon_per_row(mu, 1e-5, start=guess)
        np.testing.assert_allclose(warm, cold, rtol=2e-9, atol=2e-10)
        assert np.all(warm[:5] == 0.0) and np.all(cold[:5] == 0.0)
