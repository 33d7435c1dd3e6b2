"""Privacy-profile family (LeBlond et al. 2023): every quantity against an independent oracle."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression

from dpaudit.profile import mechanisms, model, neighbours, profiles
from dpaudit.profile.data import make_view


def _toy(n=80, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) + 0.3
    x /= np.linalg.norm(x, axis=1).max()
    t = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    return x, t


def _sklearn_weights(x, t, lam):
    # sklearn minimizes C Σ loss + ½‖w‖²; dividing by nC gives the mean form with Λ = 1/(nC).
    clf = LogisticRegression(C=1.0 / (x.shape[0] * lam), fit_intercept=False, solver="newton-cholesky",
                             tol=1e-14, max_iter=1000)
    return clf.fit(x, t).coef_[0]


@pytest.mark.parametrize("lam", [1.0, 0.05])
def test_base_model_matches_sklearn(lam):
    x, t = _toy(d=3)
    base = model.fit(x, t, lam)
    # Oracle: scikit-learn's Newton–Cholesky solver; both reach ~1e-15, 1e-10 leaves room for its tolerance.
    np.testing.assert_allclose(base.weights, _sklearn_weights(x, t, lam), rtol=0, atol=1e-10)
    assert base.gradient_norm < 1e-13 and base.last_step_norm < model.STEP_TOLERANCE


def test_per_example_arrays_match_finite_differences():
    x, t = _toy(d=2)
    w = np.array([0.3, -0.2])
    ex = model.per_example(x, t, w)
    eps = 1e-6
    for k in range(2):
        e = np.zeros(2)
        e[k] = eps
        numeric = (model.per_example(x, t, w + e).losses - model.per_example(x, t, w - e).losses) / (2 * eps)
        np.testing.assert_allclose(ex.gradients[:, k], numeric, atol=1e-9)  # central difference error O(eps²)
    np.testing.assert_allclose(ex.losses, np.log1p(np.exp(-t * (x @ w))), rtol=1e-14)


def test_exact_retraining_matches_sklearn_per_neighbour():
    x, t = _toy(n=40, d=3, seed=3)
    lam = 1.0
    base = model.fit(x, t, lam)
    exact = neighbours.retrain_removed(x, t, base.weights, lam, memory_budget_bytes=40 * 8 * 2 * 7)
    assert exact.chunk_size == 7  # several chunks exercised
    for i in range(x.shape[0]):
        keep = np.arange(x.shape[0]) != i
        oracle = _sklearn_weights(x[keep], t[keep], lam)  # C = 1/((n−1)Λ) for the n−1 rows
        np.testing.assert_allclose(base.weights + exact.shifts[i], oracle, rtol=0, atol=1e-10)
        # final_grad_norm is ‖∇J(A(y_i); y_i)‖ at the returned point. Oracle: the mean-form gradient from
        # model.per_example on the n − 1 rows. Both sit at the rounding floor of a mean of O(1) terms
        # (a few 1e-17) and agree to 1e-16; the iterate before the last step (the old value) was ~1e-14.
        w = base.weights + exact.shifts[i]
        gradient = model.per_example(x[keep], t[keep], w).gradients.mean(axis=0) + lam * w
        assert abs(exact.gradient_norms[i] - np.linalg.norm(gradient)) < 1e-16
    assert exact.gradient_norms.max() < 1e-16


def test_neighbour_gradients_equal_scipys_expit_form_even_where_exp_overflows():
    # The in-place σ(−m) = 1/(1 + e^m) of neighbours._neighbour_gradients against scipy's expit on the
    # same margins, with margins of ±800 (e^800 overflows to inf: σ is 0 there, no warning).
    import warnings

    from scipy.special import expit

    rng = np.random.default_rng(4)
    x, t = rng.normal(size=(50, 3)), np.where(rng.random(50) < 0.5, 1.0, -1.0)
    x[:5] *= 400.0  # margins of several hundred
    points = rng.normal(size=(6, 3))
    signed = -t[:, None] * x
    oracle_s = expit(signed @ points.T)
    own = (-t[:4, None] * expit(-t[:4, None] * (x[:4] @ points[:4].T)).diagonal()[:, None]) * x[:4]
    oracle = ((signed.T @ oracle_s).T[:4] - own) / 49 + 0.5 * points[:4]
    assert np.abs(signed @ points.T).max() > 709
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = neighbours._neighbour_gradients(signed, points[:4], x[:4], t[:4], 0.5, np.empty((50, 4)))
    np.testing.assert_allclose(got, oracle, rtol=1e-13, atol=1e-15)


def test_okumura_sphere_geometry():
    x, t = _toy(n=60, d=3, seed=1)
    lam = 0.7
    base = model.fit(x, t, lam)
    w = base.weights
    grads = model.per_example(x, t, w).gradients
    centres, radii = neighbours.removal_spheres(w, grads, lam)
    # LeBlond et al. Eqs. 19–21: r_i = ‖R_i − A(x)‖ exactly, so A(x) is on every sphere.
    np.testing.assert_allclose(np.linalg.norm(centres - w, axis=1), radii, rtol=1e-12)
    # The general add/remove form (Eqs. 13–18) with one removed row is the single-removal form.
    for i in (0, 17):
        centre, radius = neighbours.okumura_sphere(w, np.zeros(3), grads[i], n_original=60, n_added=0,
                                                   n_removed=1, lam=lam)
        np.testing.assert_allclose(centre, centres[i], rtol=1e-13)
        assert radius == pytest.approx(radii[i], rel=1e-13)
    # Guarantee ‖A(y) − R‖ ≤ r, with exact retraining as the oracle, for removals and for an addition.
    exact = neighbours.retrain_removed(x, t, w, lam)
    assert (np.linalg.norm(w + exact.shifts - centres, axis=1) <= radii * (1 + 1e-9)).all()
    new_x, new_t = np.array([0.1, -0.5, 0.4]), 1.0
    added = model.fit(np.vstack([x, new_x]), np.append(t, new_t), lam).weights
    new_grad = model.per_example(new_x[None, :], np.array([new_t]), w).gradients[0]
    centre, radius = neighbours.okumura_sphere(w, new_grad, np.zeros(3), n_original=60, n_added=1,
                                               n_removed=0, lam=lam)
    assert np.linalg.norm(added - centre) <= radius
    assert np.linalg.norm(w - centre) == pytest.approx(radius, rel=1e-12)
    # A_wc is the antipode of A(x): 2R_i − A(x) = A(x) + Δ_i, δ_i = 2r_i.
    shifts, delta = neighbours.worst_case_shifts(w, grads, lam)
    np.testing.assert_allclose(w + shifts, 2 * centres - w, rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(delta, 2 * radii, rtol=1e-12)


def test_privacy_loss_stable_form_and_single_profile():
    rng = np.random.default_rng(5)
    shifts = rng.normal(size=(50, 2)) * 1e-3
    shifts[10] = shifts[3]  # a tie: the stable sort keeps row order
    offset = np.array([2e-3, -1e-3])
    beta = 123.0
    # Oracle: the plain difference of norms (no cancellation at this scale: values ~1e-3, errors ~1e-19).
    direct = beta * (np.linalg.norm(shifts - offset, axis=1) - np.linalg.norm(offset))
    got = profiles.privacy_loss(offset, shifts, beta)
    np.testing.assert_allclose(got, direct, rtol=1e-10, atol=1e-15)
    # At M = A(x) the loss is β δ_i (Fig. 4a).
    np.testing.assert_allclose(profiles.privacy_loss(np.zeros(2), shifts, beta),
                               beta * np.linalg.norm(shifts, axis=1), rtol=1e-14)
    # Log coverage ratio (Eq. 6) against the closed-form L2-Laplace densities.
    m = offset
    ratio = profiles.log_coverage(m, np.zeros(2), beta) - profiles.log_coverage(m, shifts[0], beta)
    assert ratio[0] == pytest.approx(got[0], rel=1e-9)
    single = profiles.single_profile(offset, shifts, beta)
    assert np.all(np.diff(single.abs_loss) >= 0)
    np.testing.assert_allclose(np.abs(direct)[single.row_index], single.abs_loss, rtol=1e-10)
    pos = {row: k for k, row in enumerate(single.row_index)}
    assert pos[3] < pos[10]


@pytest.mark.parametrize("d", [2, 6])
def test_distance_difference_near_u_equal_delta_against_mpmath(d):
    import mpmath

    mpmath.mp.dps = 60  # oracle: the same float64 inputs, exact to ~1e-60
    rng = np.random.default_rng(17 + d)
    shifts = rng.normal(size=(14, d)) * 1e-3
    # Offsets u_i ≈ Δ_i down to equality (the old expanded-square form was off by 2e-8 here), plus a far one.
    scale = np.array([1e-2, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12, 1e-14, 0.0, 0.0, 1e-9, 1e-7, 1e-5, 1e-3, 1e2])
    offsets = shifts * (1 + scale[:, None]) + scale[:, None] * 1e-3 * rng.normal(size=shifts.shape)
    got = profiles.distance_difference(offsets, shifts)

    def exact(u, shift):
        u, shift = [mpmath.mpf(float(v)) for v in u], [mpmath.mpf(float(v)) for v in shift]
        return (mpmath.sqrt(sum((a - b) ** 2 for a, b in zip(shift, u, strict=True)))
                - mpmath.sqrt(sum(a**2 for a in u)))

    eps = np.finfo(np.float64).eps
    for k in range(shifts.shape[0]):
        for i in range(shifts.shape[0]):
            reference = exact(offsets[k], shifts[i])
            error = float(abs(mpmath.mpf(float(got[k, i])) - reference))
            if i == k:  # u ≈ Δ: the result is ≈ −‖Δ‖, no cancellation; a few ulps (10 eps relative)
                assert error <= 10 * eps * float(abs(reference)), (k, error / float(abs(reference)))
            else:  # any pair: within the conditioning of a difference of norms, a few eps·(‖u‖ + ‖Δ‖)
                assert error <= 4 * eps * (np.linalg.norm(offsets[k]) + np.linalg.norm(shifts[i])), (k, i)
    np.testing.assert_allclose(profiles.distance_difference(offsets[3], shifts), got[3], rtol=1e-14)  # one offset


def test_coverage_density_is_normalized_and_self_coverage_closed_form():
    from scipy import integrate

    beta = 3.0
    # ∫ κ_2 β² e^{−βρ} 2πρ dρ = 1 over the plane (radial integral).
    total, _ = integrate.quad(lambda r: np.exp(profiles.log_kappa(2)) * beta**2 * np.exp(-beta * r) * 2 * np.pi * r,
                              0, np.inf)
    assert total == pytest.approx(1.0, rel=1e-10)
    # E_{M~𝒜(x)} C(x, M) = κ_d β^d 2^{−d} (LeBlond et al. 2023, Eqs. 5–8), Monte Carlo with 2e5 draws: 5 SE tolerance.
    rng = np.random.default_rng(11)
    for d in (2, 6):
        samples = mechanisms.l2_laplace_noise(rng, 200_000, d, beta)
        values = np.exp(profiles.log_coverage(samples, np.zeros(d), beta))
        expected = np.exp(profiles.log_kappa(d)) * beta**d * 2.0**-d
        assert abs(values.mean() - expected) < 5 * values.std() / np.sqrt(values.size)
    # Empirical coverage with a small cutoff approaches density × ball area (d = 2).
    samples = mechanisms.output_perturbation(np.zeros(2), beta, 400_000, rng)
    point, cutoff = np.array([0.2, 0.1]), 0.05
    p = np.exp(profiles.log_coverage(point, np.zeros(2), beta))[0] * np.pi * cutoff**2
    assert abs(profiles.empirical_coverage(samples, point, cutoff) - p) < 5 * np.sqrt(p / samples.shape[0]) + 0.01 * p


@pytest.mark.parametrize("d", [2, 6])
def test_noise_sampler_radius_and_direction(d):
    rng = np.random.default_rng(2024 + d)
    beta, count = 50.0, 100_000
    noise = mechanisms.l2_laplace_noise(rng, count, d, beta)
    radii = np.linalg.norm(noise, axis=1)
    # E‖b‖ = d/β, sd √d/β: 5 SE.
    assert abs(radii.mean() - d / beta) < 5 * np.sqrt(d) / beta / np.sqrt(count)
    # Radius law Gamma(d, 1/β): KS at α = 1e-3 (fixed seed).
    assert stats.kstest(radii, stats.gamma(d, scale=1 / beta).cdf).pvalue > 1e-3
    directions = noise / radii[:, None]
    # Uniform direction: mean 0 (per-coordinate sd 1/√d) and second moment I/d; Rayleigh-type power:
    # a mean-direction shift of 0.02 would be 6 SE at this count.
    assert np.abs(directions.mean(axis=0)).max() < 4 / np.sqrt(d * count)
    np.testing.assert_allclose(directions.T @ directions / count, np.eye(d) / d, atol=0.01)
    if d == 2:
        angle = np.arctan2(directions[:, 1], directions[:, 0])
        assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-3


def test_output_perturbation_beta():
    assert mechanisms.output_perturbation_beta(32_561, 1.0, 1.0) == pytest.approx(16_280.5)
    with pytest.raises(ValueError, match="lam"):
        mechanisms.output_perturbation_beta(10, 0.0, 1.0)


def test_objective_perturbation_parameters_and_noise():
    # diffprivlib 0.6.3 (LeBlond et al. 2023's Fig. 1 mechanism) with C = 0.01 (n = 100, Λ = 1), R = 1: α = 100,
    # ε′ = ε − 2 ln(1 + 0.25/50) > 0 for ε = 1, so no extra regularizer.
    p = mechanisms.objective_perturbation_parameters(1.0, 0.01)
    assert p["epsilon_prime"] == pytest.approx(1 - 2 * np.log(1.005), rel=1e-12)
    assert p["extra_regularizer"] == 0.0
    # With C = 100 (α = 0.01): ε′ = 0.1 − 2 ln(51) < 0 → Δ = 0.25/(e^{0.025} − 1) − 0.005, ε′ = 0.05.
    p = mechanisms.objective_perturbation_parameters(0.1, 100.0)
    assert p["epsilon_prime"] == pytest.approx(0.05)
    assert p["extra_regularizer"] == pytest.approx(0.25 / np.expm1(0.025) - 0.005, rel=1e-12)
    x, t = _toy(n=100, d=2)
    rng = np.random.default_rng(0)
    draws = [mechanisms.objective_perturbation(x, t, 1.0, 0.01, rng) for _ in range(300)]
    norms = np.array([info["noise_norm"] for _, info in draws])
    scale = 2 / (1 - 2 * np.log(1.005))
    assert abs(norms.mean() - 2 * scale) < 5 * np.sqrt(2) * scale / np.sqrt(norms.size)  # Gamma(2, scale)
    # ε → ∞ removes the noise: the result is the sum-form minimizer, i.e. sklearn with the same C.
    w, info = mechanisms.objective_perturbation(x, t, 1e9, 0.01, rng)
    assert info["algorithm"].startswith("diffprivlib-0.6.3")
    np.testing.assert_allclose(w, _sklearn_weights(x, t, 1.0), atol=1e-4)  # L-BFGS pgtol 1e-4


@pytest.mark.parametrize("d", [2, 6])
def test_universal_curves_against_monte_carlo(d):
    rng = np.random.default_rng(7 + d)
    count = 400_000
    g = mechanisms.l2_laplace_noise(rng, count, d, 1.0)
    ts = np.array([0.3, 2.0, 8.0, 40.0])
    g_quad, h_quad = profiles.universal_curves(ts, d)
    unit = np.zeros(d)
    unit[0] = 1.0
    for k, tk in enumerate(ts):
        diff = np.linalg.norm(g - tk * unit, axis=1) - np.linalg.norm(g, axis=1)
        se = diff.std() / np.sqrt(count)
        assert abs(diff.mean() - g_quad[k]) < 5 * se, (d, tk)
        assert abs(np.abs(diff).mean() - h_quad[k]) < 5 * np.abs(diff).std() / np.sqrt(count), (d, tk)
    # Limits (derived for LeBlond et al. 2023's Fig. 7): G ≈ t²/(2d), H/t → c_d at small t; both ≈ t − d at large t.
    g_small, h_small = profiles.universal_curves([1e-3], d)
    assert g_small[0] == pytest.approx(1e-6 / (2 * d), rel=1e-2)
    assert h_small[0] / 1e-3 == pytest.approx({2: 2 / np.pi, 6: 0.3395}[d], rel=1e-3)
    g_big, h_big = profiles.universal_curves([2000.0], d)
    assert g_big[0] == pytest.approx(2000 - d, rel=1e-4) and h_big[0] == pytest.approx(2000 - d, rel=1e-4)
    # Far past the transition (Fig. 7 reaches t ~ 1e5), at the figure's order 200 and the default 400:
    # ‖g − tû‖ = t − ρcosθ + ρ²sin²θ/(2t) + O(t⁻²) with E ρ² = d(d+1), E sin²θ = (d−1)/d, so
    # G = t − d + (d² − 1)/(2t) + O(t⁻²), and H = G up to P(‖g − tû‖ < ‖g‖) ~ e^{−t/2}.
    t = np.array([1e4, 1e5, 1e6])
    for order in (200, 400):
        g_far, h_far = profiles.universal_curves(t, d, order=order)
        np.testing.assert_allclose(g_far, t - d + (d * d - 1) / (2 * t), rtol=1e-9)
        np.testing.assert_allclose(h_far, g_far, rtol=1e-12)


# mpmath oracle (mpmath 1.4.1, mp.dps = 20): G and H as nested mpmath.quad (tanh–sinh) in the
# (ρ, θ) coordinates of the definition, ρ ~ Gamma(d, 1), θ with density ∝ sin^{d−2}θ, the ρ integral
# split at tcosθ (minimum of ‖g − tû‖) and t/(2cosθ) (its sign change), θ split at π/4 and π/2.
# Recomputing takes about 15 s a point, so the values are stored; (d, t) -> (G, H).
MPMATH_UNIVERSAL = {
    (2, 1e-3): (2.4999987161196346e-07, 6.366195809350881e-04),
    (2, 0.1): (2.494354097903869e-03, 6.359258040435911e-02),
    (2, 2.0): (0.79465287462204, 1.2555204209260018),
    (2, 40.0): (38.03752949263599, 38.037529507899734),
    (6, 1e-3): (8.333333268229169e-08, 3.39530549737695e-04),
    (6, 0.1): (8.332682454101047e-04, 3.395760140628694e-02),
    (6, 2.0): (0.3237423824071002, 0.7140919075697388),
    (6, 40.0): (34.4356606743596, 34.43566120731852),
}


def _quad_universal(t, d):
    """Independent live oracle: scipy.integrate.quad (QUADPACK) over ρ and θ (relative tolerances 1e-10 / 1e-12)."""
    from scipy import integrate
    from scipy.special import gammaln

    def inner(theta, absolute):
        c, s = np.cos(theta), np.sin(theta)

        def f(r):
            diff = t * (t - 2 * r * c) / (np.hypot(r - t * c, t * s) + r)  # no cancellation at r ≫ t
            return np.exp((d - 1) * np.log(r) - r - gammaln(d)) * (abs(diff) if absolute else diff)

        breaks = sorted(p for p in (t * c, t / (2 * c) if c > 0 else -1.0) if 0 < p < d + 100)
        edges = [0.0, *breaks, d + 120.0]
        return sum(integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-10, limit=200)[0]
                   for lo, hi in zip(edges[:-1], edges[1:], strict=True))

    norm = integrate.quad(lambda th: np.sin(th) ** (d - 2), 0, np.pi, epsabs=0, epsrel=1e-13)[0]
    pieces = ((0, np.pi / 4), (np.pi / 4, np.pi / 2), (np.pi / 2, np.pi))
    return [sum(integrate.quad(lambda th, a=absolute: np.sin(th) ** (d - 2) * inner(th, a), lo, hi, epsabs=0,
                               epsrel=1e-12, limit=200)[0] for lo, hi in pieces) / norm
            for absolute in (False, True)]


def test_universal_curves_match_high_precision_oracles():
    # Required accuracy: 1e-8 relative at every t (the former (ρ, θ) grid of order 400 was off by
    # 6e-5 at t ≤ 0.1). Observed: ≤ 3e-10 against mpmath (d = 6, t = 1e-3, H), ≤ 2e-14 elsewhere.
    for (d, t), (g_ref, h_ref) in MPMATH_UNIVERSAL.items():
        g, h = profiles.universal_curves([t], d)
        assert g[0] == pytest.approx(g_ref, rel=1e-9), (d, t)
        assert h[0] == pytest.approx(h_ref, rel=1e-9), (d, t)
    # Live QUADPACK oracle at small t (≤ 1e-10 of its own; below t = 1e-2 it loses digits).
    ts = [0.01, 0.1]
    for d in (2, 6):
        g, h = profiles.universal_curves(ts, d)
        for k, t in enumerate(ts):
            g_ref, h_ref = _quad_universal(t, d)
            assert g[k] == pytest.approx(g_ref, rel=1e-9), (d, t)
            assert h[k] == pytest.approx(h_ref, rel=1e-9), (d, t)
    # The figure's order 200 is the default; more nodes change nothing beyond 1e-11.
    t = np.geomspace(1e-3, 1e6, 40)
    for d in (2, 6):
        coarse, fine = profiles.universal_curves(t, d), profiles.universal_curves(t, d, order=800)
        np.testing.assert_allclose(coarse, fine, rtol=1e-10)


def test_transition_constants_match_reference():
    # Our reproduction gives t_2(τ) = 3.24, 10.0, 109 for τ = 0.05, 0.5, 0.95 (3 significant digits).
    for tau, reference in profiles.REFERENCE_TRANSITION_T[2].items():
        assert profiles.transition_t(2, tau) == pytest.approx(reference, rel=6e-3)
    assert profiles.transition_t(6, 0.05) == pytest.approx(2.80, rel=6e-3)
    assert profiles.small_t_slope(2) == pytest.approx(2 / np.pi, rel=1e-14)


def test_typical_profile_equals_brute_force_and_plateaus():
    rng = np.random.default_rng(3)
    n, d, lam = 300, 2, 1.0
    shifts = rng.normal(size=(n, d)) * rng.uniform(0.2, 1.0, size=(n, 1)) * 1e-3
    eps = np.array([1e-3, 1e-2, 1.0, 1e10])
    res = profiles.typical_profiles(shifts, eps, n=n, lam=lam, draws=500, seed=9, sort_chunk_elements=n * 64)
    # Oracle: the full K × n matrix per ε, built with the documented common random numbers.
    crn = np.random.default_rng(9)
    directions = mechanisms.unit_directions(crn, 500, d)
    radii = crn.gamma(d, 1.0, 500)
    for e, beta in enumerate(res.beta):
        u = (radii / beta)[:, None] * directions
        full = beta * (np.linalg.norm(u[:, None, :] - shifts[None], axis=2) - np.linalg.norm(u, axis=1)[:, None])
        np.testing.assert_allclose(res.mean_abs_loss[e], np.sort(np.abs(full), axis=1).mean(axis=0), rtol=1e-9)
        np.testing.assert_allclose(res.mean_loss[e], full.mean(axis=0), rtol=1e-8, atol=1e-12 * beta)
        np.testing.assert_allclose(res.mean_abs_loss_per_row[e], np.abs(full).mean(axis=0), rtol=1e-9)
        # Variances over 8 chunks of 64 draws against numpy's two-pass var (ddof = 1). At ε = 1e10,
        # l ≈ βδ_i ≈ 1e9 varies by ~1: both sides resolve that spread only to ~1e-7 (ulp of ‖Δ‖ over ‖b‖),
        # and Σl²/K − mean² (the previous formula) lost it entirely (cancellation at 1e18).
        rtol = 1e-6 if eps[e] > 1e6 else 1e-9
        np.testing.assert_allclose(res.var_loss[e], full.var(axis=0, ddof=1), rtol=rtol)
        ranked = np.sort(np.abs(full), axis=1)
        np.testing.assert_allclose(res.se_abs_loss[e], ranked.std(axis=0, ddof=1) / np.sqrt(500), rtol=rtol)
    delta = np.linalg.norm(shifts, axis=1)
    # β → ∞: P̄(k)/β → sorted δ (noise ‖b‖ ≈ 2/β ≈ 1e−12 against δ ≥ 5e−5).
    np.testing.assert_allclose(res.mean_abs_loss[-1] / res.beta[-1], np.sort(delta), rtol=1e-5)
    # β → 0: per-neighbour mean |l|/β → c_2 δ_i = (2/π) δ_i; MC error of E|⟨û, Δ⟩| with K = 500 is ~3 %.
    low = res.mean_abs_loss_per_row[0] / res.beta[0]
    ratio = low / delta
    assert abs(ratio.mean() - 2 / np.pi) < 0.01
    np.testing.assert_array_less(np.abs(res.average_then_sort[0] - np.sort(res.mean_abs_loss_per_row[0])), 1e-300 + 1e-15)


def test_regime_thresholds_on_a_known_transition():
    eps = np.logspace(-2, 4, 25)
    sorted_delta = np.linspace(1.0, 2.0, 100)
    low = 0.6 * sorted_delta
    # Progress is a step in log ε: 0 below ε = 1, 0.5 at 10, 1 from 100 on.
    progress = np.clip(np.log10(eps), 0, 2)[:, None] / 2 * np.ones(100)
    curve = low + progress * (sorted_delta - low)
    th = profiles.regime_thresholds(eps, curve, sorted_delta)
    assert th.eps_low == pytest.approx(1.0)  # last grid ε with progress ≤ 0.05 (next is 10^0.25 → 0.125)
    assert th.eps_high == pytest.approx(100.0)  # first with progress ≥ 0.95 (10^1.75 → 0.875)
    # A grid that ends on the low plateau (ε ≤ 10^−0.25, progress 0) brackets neither threshold.
    short = profiles.regime_thresholds(eps[:8], curve[:8], sorted_delta)
    assert np.isnan(short.eps_low) and np.isnan(short.eps_high)
    assert profiles.predicted_epsilon(3.24, n=32_561, lam=1.0, delta=1.528e-5) == pytest.approx(13.02, rel=1e-3)


def test_thresholds_report_predicted_beside_measured_with_the_reference_constants():
    import pandas as pd

    from dpaudit.profile.study import typical_artifacts

    rng = np.random.default_rng(4)
    n, lam = 50, 0.5
    shifts = rng.normal(size=(n, 2)) * 1e-3
    delta_max = np.linalg.norm(shifts, axis=1).max()
    worst = pd.DataFrame({"row_id": np.arange(1, n + 1), "Delta_0": shifts[:, 0], "Delta_1": shifts[:, 1],
                          "delta_norm": np.linalg.norm(shifts, axis=1)})
    out = typical_artifacts(worst, view_name="toy", dataset="breast_cancer", n=n, lam=lam,
                            log10_epsilons=[-1, 0, 1, 2], draws=10, seed=0)
    th = out["thresholds"]
    # Our reproduction, d = 2: t(0.05) = 3.24, t(0.5) = 10.0, t(0.95) = 109, quoted to 3 significant digits
    # (half a unit in the last digit is ≤ 5e-3 relative): ε(τ) = 2 t(τ)/(nΛδ_max).
    for key, reference in (("t_d_tau_low", 3.24), ("t_d_tau_mid", 10.0), ("t_d_tau_high", 109.0)):
        assert th[key] == pytest.approx(reference, rel=6e-3)
    assert th["eps_low_predicted"] == pytest.approx(2 * 3.24 / (n * lam * delta_max), rel=6e-3)
    assert th["eps_high_predicted"] == pytest.approx(2 * 109.0 / (n * lam * delta_max), rel=6e-3)
    assert th["beta_star"] == pytest.approx(n * lam * th["eps_low_predicted"] / 2, rel=1e-14)
    assert th["definitions"]["tau_mid"] == 0.5 and th["delta_max"] == delta_max
    metrics = out["metrics"]
    assert set(metrics["dataset"]) == {"breast_cancer"} and set(metrics["view"]) == {"toy"}
    assert metrics["run"].isna().all() and metrics["value"].dtype == np.float64
    single = metrics[metrics["metric"] != "t_d"].set_index("metric")
    for name, key in (("epsilon_low", "eps_low"), ("epsilon_low_predicted", "eps_low_predicted"),
                      ("epsilon_high", "eps_high"), ("epsilon_high_predicted", "eps_high_predicted"),
                      ("beta_star", "beta_star"), ("delta_max", "delta_max")):
        assert single.loc[name, "value"] == pytest.approx(th[key], nan_ok=True), name
    # the row behind δ_max is a parameter column of its row, never a value
    assert single.loc["delta_max", "y_max_row_id"] == th["y_max_row_id"]
    t_d = metrics[metrics["metric"] == "t_d"].set_index("tau")["value"]
    for tau, key in ((0.05, "t_d_tau_low"), (0.5, "t_d_tau_mid"), (0.95, "t_d_tau_high")):
        assert t_d[tau] == pytest.approx(th[key], rel=1e-15), key


def test_thresholds_read_back_as_floats_when_the_grid_misses_a_plateau(tmp_path):
    from dpaudit.io import read_json, write_json
    from dpaudit.profile.study import read_thresholds

    record = {"eps_low": 0.1, "eps_high": np.nan, "beta_star": np.inf, "y_max_row_id": 7,
              "definitions": {"low_plateau": "mean of the 3 smallest ε"}}
    write_json(tmp_path / "thresholds.json", record)
    assert read_json(tmp_path / "thresholds.json")["eps_high"] == "nan"  # dpaudit.io's JSON encoding
    back = read_thresholds(tmp_path / "thresholds.json")
    assert isinstance(back["eps_high"], float) and np.isnan(back["eps_high"]) and back["beta_star"] == np.inf
    assert back["eps_low"] == 0.1 and back["y_max_row_id"] == 7 and back["definitions"] == record["definitions"]


def test_bad_input_is_refused_with_row_ids_or_key():
    x, t = _toy(n=10)
    zero = x.copy()
    zero[[3, 7]] = 0.0
    with pytest.raises(ValueError, match=r"zero-norm.*\[4, 8\]"):
        model.fit(zero, t)
    labels = t.copy()
    labels[5] = 0
    with pytest.raises(ValueError, match=r"−1 or \+1.*\[6\]"):
        model.fit(x, labels)
    with pytest.raises(ValueError, match="lam must be a finite positive"):
        model.fit(x, t, lam=0.0)
    with pytest.raises(ValueError, match="lam"):
        neighbours.worst_case_shifts(np.zeros(2), np.zeros((10, 2)), -1.0)
    with pytest.raises(ValueError, match=r"unit ball.*\[1\]"):
        model.fit(x * np.where(np.arange(10) == 0, 2.0 / np.linalg.norm(x[0]), 1.0)[:, None], t)
    raw = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 2.0]])
    with pytest.raises(ValueError, match=r"constant feature column\(s\) \[1\]"):
        make_view(raw, np.array([1, -1, 1]), ("a", "b"), first_rows=None, scale_on_subset=True, metadata={})


def test_row_counts_beyond_the_data_are_refused_with_the_config_key():
    from dpaudit.profile.data import load_view
    from dpaudit.profile.study import base_artifacts, sample_artifact

    # scikit-learn's breast_cancer (WDBC) has 569 rows: no silent cut to the file length.
    spec = {"source": "breast_cancer", "columns": [0, 1], "first_rows": 570}
    with pytest.raises(ValueError, match=r"profile.views.bc.first_rows = 570: must be between 2 and the 569 rows"):
        load_view(spec, name="bc")
    with pytest.raises(ValueError, match=r"first_rows = 1: must be between 2"):
        make_view(np.eye(3), np.array([1, -1, 1]), ("a", "b", "c"), first_rows=1, scale_on_subset=True, metadata={})
    view = load_view({**spec, "first_rows": 569}, name="bc")
    assert view.features.shape == (569, 2) and view.row_ids[-1] == 569
    small = load_view({**spec, "first_rows": 12}, name="bc")
    artifacts = base_artifacts(small, 1.0)
    weights = np.array([artifacts["base"]["w_0"], artifacts["base"]["w_1"]])
    options = {"lam": 1.0, "log10_epsilons": [1.0], "samples": 1, "seed": 0}
    # No silent cut of the neighbours to the view's n either.
    with pytest.raises(ValueError, match=r"profile.samples.neighbours = 13: must be between 1 and the view's 12 rows"):
        sample_artifact(small, weights, artifacts["worst_case"], neighbour_count=13, **options)
    every = sample_artifact(small, weights, artifacts["worst_case"], neighbour_count=12, **options)
    assert sorted(every["neighbor_row_id"].unique()) == list(range(13))  # 0 = A(x), then rows 1..12


def test_collect_metrics_keeps_dataset_level_rows_and_refuses_runless_per_run_rows(tmp_path):
    import pandas as pd

    from dpaudit.aggregate import collect_metrics
    from dpaudit.io import write_parquet

    runs = pd.DataFrame({"dataset": ["d"], "run": ["r"], "mechanism": ["baseline"]})
    per_run = tmp_path / "a.parquet"
    from dpaudit.contract.metrics import metric_rows

    write_parquet(per_run, metric_rows("mia", [{"metric": "attack_auc", "value": 0.5, "loss": "loss_ce", "attack": "loss",
                                                "n_members": 2, "n_nonmembers": 2}], dataset="d", run="r"))
    view = tmp_path / "b.parquet"
    profile = {"view": "v", "n": 2, "d": 2, "lam": 1.0, "draws": 1, "profile_seed": 0, "epsilon_grid_min": 0.1,
               "epsilon_grid_max": 1.0, "tau_low": 0.05}
    write_parquet(view, metric_rows("profile", [{"metric": "epsilon_low", "value": 3.0, **profile}], dataset="d"))
    table = collect_metrics([per_run, view], runs)
    assert table.set_index("family").loc["mia", "mechanism"] == "baseline"
    assert pd.isna(table.set_index("family").loc["profile", "run"])
    orphan = tmp_path / "c.parquet"
    write_parquet(orphan, pd.DataFrame({"dataset": ["d"], "run": [None], "family": ["mia"], "metric": ["attack_auc"],
                                        "value": [0.5], "value_bool": pd.array([None], dtype="boolean")}))
    with pytest.raises(ValueError, match="missing 'run' key"):
        collect_metrics([per_run, orphan], runs)


def test_config_refuses_unordered_grids_and_figures_of_views_without_two_columns():
    from dpaudit.config import ConfigError, validate_config

    def problems(profile):
        config = {"datasets": {"synthetic": {}}, "grid": [{"mechanism": ["baseline"]}], "profile": profile}
        with pytest.raises(ConfigError) as error:
            validate_config(config)
        return str(error.value)

    flat = {"source": "breast_cancer", "columns": [0, 1]}
    message = problems({"log10_epsilons": [-1, 0, 0, 1, 0.5], "views": {"v": flat}})
    assert "config.profile.log10_epsilons: must be strictly increasing; position(s) [2, 4]" in message
    message = problems({"views": {"v": flat, "six": {"source": "breast_cancer", "columns": [0, 1, 2, 3, 4, 5]}},
                        "samples": {"views": ["v", "six", "gone"]}})
    assert "config.profile.views.six.figures: Figs 2-7 plot two parameter coordinates and this view has 6" in message
    assert "config.profile.samples.views[1]: Figs 1 and 8 plot two parameter coordinates and view 'six'" in message
    assert "config.profile.samples.views[2]: 'gone' is not among profile.views ['six', 'v']" in message
    assert "views.v." not in message and "samples.views[0]" not in message
    ok = validate_config({"datasets": {"synthetic": {}}, "grid": [{"mechanism": ["baseline"]}],
                          "profile": {"views": {"six": {"source": "breast_cancer", "columns": [0, 1, 2, 3, 4, 5],
                                                        "figures": False}}}})
    assert ok["profile"]["views"]["six"]["figures"] is False
    with pytest.raises(ValueError, match=r"profile.log10_epsilons\) must be strictly increasing"):
        profiles.regime_thresholds(np.array([0.1, 1.0, 1.0, 10.0]), np.ones((4, 3)), np.ones(3))
