"""Composition, amplification, group/parallel, RDP (Geambasu's DP lecture: properties and accounting, its worked examples; RDP checks).

Oracles: the lecture's worked examples, recomputed, brute-force loops over k
written here, dp_accounting's RdpAccountant called directly, and exact Laplace
privacy-loss computations. Tolerances are stated per assertion.
"""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc
from scipy import optimize, stats

from dpaudit.dp import composition as C

L6 = math.log(1e6)


def test_basic_composition():
    assert C.basic_composition([0.1, 0.2, 0.3], [1e-6, 0, 2e-6]) == pytest.approx((0.6, 3e-6))
    assert C.basic_composition([0.5] * 4) == (2.0, 0.0)


def test_advanced_composition_formula_second_term_outside_root():
    # Dwork, Rothblum & Vadhan 2010 (the slide differs): the standard form keeps kε(e^ε − 1) outside the square root.
    eps, k, dp = 0.1, 100, 1e-6
    e, d = C.advanced_composition(eps, 1e-7, k, dp)
    assert e == pytest.approx(eps * math.sqrt(2 * k * L6) + k * eps * (math.exp(eps) - 1), rel=1e-12)
    assert d == pytest.approx(k * 1e-7 + dp, rel=1e-12)


def test_e12_global_budget_k_50000():
    k, dp = 50_000, 1e-6
    assert C.split_budget(1.0, k, "basic") == pytest.approx(2e-5, rel=1e-12)
    # The slide's "7e-4 suffices": total 0.847 (recomputed), 3 decimals.
    assert C.advanced_composition(7e-4, 0.0, k, dp)[0] == pytest.approx(0.847, abs=5e-4)
    best = C.split_budget(1.0, k, "advanced", dp)
    assert best == pytest.approx(8.22e-4, abs=5e-7)
    assert C.advanced_composition(best, 0.0, k, dp)[0] == pytest.approx(1.0, abs=1e-9)
    # The approximation ε_g/√(2k ln(1/δ′)) gives 8.5e-4 (too large); factor ≈ 41 over basic
    # (the slide says 35).
    assert 1.0 / math.sqrt(2 * k * L6) == pytest.approx(8.5e-4, abs=5e-6)
    assert best / 2e-5 == pytest.approx(41, abs=0.2)


def brute_crossover(eps, dp, k_max):
    for k in range(1, k_max + 1):
        adv = eps * math.sqrt(2 * k * math.log(1 / dp)) + k * eps * math.expm1(eps)
        if adv < k * eps:
            return k
    return None


@pytest.mark.parametrize(("eps", "expected"), [(0.1, 35), (0.5, 224), (0.3, None)])
def test_e13_crossover_by_search(eps, expected):
    dp = 1e-6
    brute = brute_crossover(eps, dp, 100_000)
    if expected is not None:
        assert C.advanced_beats_basic_crossover(eps, dp) == expected == brute
        # Corrected closed form 2 ln(1/δ′)/(2 − e^ε)², rounded up (the slide's form does not follow from its formula).
        assert math.ceil(2 * L6 / (2 - math.exp(eps)) ** 2) == expected
    else:
        assert C.advanced_beats_basic_crossover(eps, dp) == brute
    if eps == 0.1:
        # The slide's 2 ln(1/δ′)/(e^ε − 1)² gives about 2,500, which is wrong.
        assert 2 * L6 / math.expm1(eps) ** 2 == pytest.approx(2500, rel=0.01)


def test_crossover_never_at_or_above_ln2():
    for eps in (math.log(2), 0.7, 1.0):
        assert C.advanced_beats_basic_crossover(eps, 1e-6, k_max=10**8) is None
        assert brute_crossover(eps, 1e-6, 20_000) is None


def test_poisson_amplification_exact_and_shortcut_refused():
    # The lecture's amplification slide: q = 0.01, ε = 4: exact 0.43 (2 d.p.) while 2qε = 0.08.
    e, d = C.amplify_poisson(4.0, 1e-5, 0.01)
    assert e == pytest.approx(0.43, abs=0.005)
    assert d == pytest.approx(1e-7)
    with pytest.raises(ValueError, match="amplify_poisson"):
        C.amplify_linear(4.0, 1e-5, 0.01)
    assert C.amplify_linear(1.0, 1e-5, 0.01) == pytest.approx((0.02, 1e-7))


def test_linear_shortcut_is_an_upper_bound_for_eps_at_most_one():
    eps = np.linspace(1e-4, 1.0, 500)
    for q in (1e-4, 1e-3, 0.01, 0.1, 0.5, 1.0):
        exact, _ = C.amplify_poisson(eps, 0.0, q)
        assert np.all(2 * q * eps >= exact - 1e-15)
    # Where the slide's 2qε fails: e^ε − 1 = 2ε at ε ≈ 1.256 for small q; 1.28 at q = 0.01.
    assert optimize.brentq(lambda x: math.expm1(x) - 2 * x, 0.5, 3) == pytest.approx(1.256, abs=5e-4)
    root = optimize.brentq(lambda x: 2 * 0.01 * x - C.amplify_poisson(x, 0, 0.01)[0], 0.5, 5)
    assert root == pytest.approx(1.28, abs=0.005)


def laplace_loss(a, b, scale):
    """Worst-case privacy loss sup_y (|y − b| − |y − a|)/scale of Laplace noise between
    query values a and b, on a grid containing both (oracle for |a − b|/scale)."""
    y = np.linspace(-50, 50, 20001)
    return float(((np.abs(y - b) - np.abs(y - a)) / scale).max())


def test_group_privacy_matches_laplace_distance_k():
    # A count at distance k moves by k: the exact Laplace loss is kε (oracle: grid).
    eps = 0.4
    for k in (1, 2, 5):
        assert laplace_loss(0.0, float(k), 1 / eps) == pytest.approx(C.group_privacy(eps, 0, k)[0],
                                                                    rel=1e-9)
    assert C.group_privacy(0.5, 1e-6, 3) == pytest.approx((1.5, 3 * math.exp(1.0) * 1e-6))


def test_parallel_composition_histogram():
    # Per-bin Laplace with ε_i. Oracle: exact loss of the whole noisy histogram.
    eps_bins = np.array([0.3, 0.9, 0.5])
    scales = 1 / eps_bins

    def loss(h1, h2):
        y = np.linspace(-40, 40, 8001)
        return sum((np.abs(y - b) - np.abs(y - a)).max() / s
                   for a, b, s in zip(h1, h2, scales, strict=True))

    base = [3.0, 1.0, 2.0]
    add_loss = max(loss(base, [b + (i == j) for j, b in enumerate(base)]) for i in range(3))
    assert add_loss == pytest.approx(C.parallel_composition(eps_bins, 0.0, "add_remove")[0], rel=1e-9)
    # replace-one: a record moves between two bins, cost = the two largest ε.
    move = max(loss(base, [b + (j == i) - (j == k) for j, b in enumerate(base)])
               for i in range(3) for k in range(3) if i != k)
    assert move == pytest.approx(C.parallel_composition(eps_bins, 0.0, "replace_one")[0], rel=1e-9)
    assert move == pytest.approx(0.9 + 0.5)


def test_rdp_gaussian_simple_conversion_5_30():
    # The lecture's RDP example: σ = 1, δ = 1e-5: ≈ 5.30 at α ≈ 5.8. Closed-form optimum (oracle):
    # α* = 1 + σ√(2 ln(1/δ)), ε* = 1/(2σ²) + √(2 ln(1/δ))/σ.
    orders = np.linspace(1.01, 100, 100_000)
    eps, alpha = C.rdp_to_dp(orders, C.rdp_gaussian(orders, 1.0), 1e-5, "classic")
    closed = 0.5 + math.sqrt(2 * math.log(1e5))
    assert eps == pytest.approx(closed, abs=1e-6)
    assert eps == pytest.approx(5.30, abs=0.005)
    assert alpha == pytest.approx(1 + math.sqrt(2 * math.log(1e5)), abs=0.01)
    assert alpha == pytest.approx(5.8, abs=0.01)


Q_TFP = 256 / 60_000
STEPS_TFP = 14_063  # 60 epochs of 60,000 / 256


def test_dpsgd_example_classic_conversion_2_92():
    # tensorflow-privacy's documented example: 2.92 with the simple
    # conversion over orders 1.1–63, best α ≈ 9.1.
    eps, alpha = C.dpsgd_epsilon(Q_TFP, 1.12, STEPS_TFP, 1e-5, conversion="classic")
    assert eps == pytest.approx(2.92, abs=0.005)
    assert alpha == pytest.approx(9.1)


def test_dpsgd_example_dp_accounting_conversion_2_52():
    eps, alpha = C.dpsgd_epsilon(Q_TFP, 1.12, STEPS_TFP, 1e-5, conversion="dp_accounting")
    assert eps == pytest.approx(2.52, abs=0.005)
    # Oracle: dp_accounting's own accountant end to end (default orders).
    acc = rdp_acc.RdpAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(
        Q_TFP, dp_accounting.GaussianDpEvent(1.12)), STEPS_TFP)
    assert eps == pytest.approx(acc.get_epsilon(1e-5), abs=2e-3)
    # DESIGN §9: σ = 1.1 gives 2.597 with RDP.
    assert C.dpsgd_epsilon(Q_TFP, 1.1, STEPS_TFP, 1e-5)[0] == pytest.approx(2.597, abs=0.001)


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.1), (0.05, 0.6), (1.0, 2.0), (0.004, 3.0)])
def test_inhouse_integer_rdp_matches_dp_accounting(q, sigma):
    orders = np.arange(2, 129)
    ours = C.rdp_poisson_subsampled_gaussian_int(q, sigma, orders, steps=7)
    acc = rdp_acc.RdpAccountant(list(orders.astype(float)))
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), 7)
    assert np.allclose(ours, acc.rdp, rtol=1e-9, atol=0)


def test_rdp_laplace_matches_dp_accounting():
    orders = [1.5, 2.0, 3.0, 10.0, 64.0]
    acc = rdp_acc.RdpAccountant(orders)
    acc.compose(dp_accounting.LaplaceDpEvent(1 / 0.3))
    assert np.allclose(C.rdp_laplace(orders, 0.3), acc.rdp, rtol=1e-12)


def test_rdp_pure_dp_bound_and_rdp_beats_advanced_for_many_queries():
    orders = C.LEDGER_RDP_ORDERS
    assert np.all(C.rdp_pure_dp(orders, 0.1) <= 0.1)
    # k = 10,000 Laplace(ε = 0.01) queries at δ = 1e-6: RDP total < advanced < basic.
    k, eps, d = 10_000, 0.01, 1e-6
    rdp = C.rdp_to_dp(orders, k * C.rdp_laplace(orders, eps), d, "dp_accounting")[0]
    adv = C.advanced_composition(eps, 0, k, d)[0]
    assert rdp < adv < k * eps


def test_rdp_conversion_classic_vs_dp_accounting_on_random_curves():
    # The tighter conversion never exceeds the classic one (same curve, same orders).
    rng = np.random.default_rng(0)
    orders = np.arange(2, 64, dtype=float)
    for _ in range(20):
        rdp = stats.uniform(0.01, 2).rvs(random_state=rng) * orders
        a = C.rdp_to_dp(orders, rdp, 1e-5, "classic")[0]
        b = C.rdp_to_dp(orders, rdp, 1e-5, "dp_accounting")[0]
        assert b <= a + 1e-12
