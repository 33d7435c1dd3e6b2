"""DP-SGD accounting against published numbers."""

import math

import pytest

from dpaudit.dp.accounting import calibrate_noise, dpsgd_epsilon

# Abadi et al. 2016 / tensorflow-privacy's compute_dp_sgd_privacy tutorial setting:
# n = 60,000, batch 256, σ = 1.1, 60 epochs, δ = 1e-5 → ε ≈ 2.60 with RDP (the
# tutorial prints 2.60; DESIGN §9 records 2.597 from both tensorflow-privacy and
# dp-accounting) and 2.382 with PLD (DESIGN §9, dp-accounting PLD at 1e-4 grid).
N, BATCH, SIGMA, EPOCHS, DELTA = 60_000, 256, 1.1, 60, 1e-5
Q = BATCH / N
STEPS = EPOCHS * N // BATCH


def test_rdp_reference_value():
    out = dpsgd_epsilon(SIGMA, Q, STEPS, DELTA, "rdp", "poisson")
    assert out["epsilon"] == pytest.approx(2.597, abs=0.005)
    assert out["neighbouring_relation"] == "add_or_remove_one"
    assert out["accountant"] == "rdp" and out["orders"]


def test_pld_reference_value():
    out = dpsgd_epsilon(SIGMA, Q, STEPS, DELTA, "pld", "poisson")
    assert out["epsilon"] == pytest.approx(2.382, abs=0.01)
    assert out["orders"] is None


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_calibration_round_trip(accountant):
    target = 2.0
    sigma = calibrate_noise(target, Q, STEPS, DELTA, accountant, "poisson")
    eps = dpsgd_epsilon(sigma, Q, STEPS, DELTA, accountant, "poisson")["epsilon"]
    assert eps <= target
    assert target - eps <= 1e-3 * target + 1e-9
    # σ for ε = 2.597 must come back to ≈ 1.1 (the reference above).
    if accountant == "rdp":
        assert calibrate_noise(2.597, Q, STEPS, DELTA, "rdp") == pytest.approx(SIGMA, rel=2e-3)


def test_shuffle_uses_no_amplification_gaussian_composition():
    # 3 epochs, each example in one step per epoch; replace-one sensitivity 2C, noise σC.
    # Composition of 3 Gaussians = one Gaussian with μ = 2·sqrt(3)/σ; its exact δ(ε)
    # (Balle & Wang 2018, eq. 6) is δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
    sigma, epochs, n, batch = 4.0, 3, 1000, 100
    out = dpsgd_epsilon(sigma, batch / n, epochs * (n // batch), 1e-5, "pld", "shuffle")
    assert out["neighbouring_relation"] == "replace_one"
    mu = 2 * math.sqrt(epochs) / sigma
    phi = lambda t: 0.5 * math.erfc(-t / math.sqrt(2))  # noqa: E731
    eps = out["epsilon"]
    delta = phi(-eps / mu + mu / 2) - math.exp(eps) * phi(-eps / mu - mu / 2)
    assert delta == pytest.approx(1e-5, rel=1e-4)
    # RDP on the same event is a valid (looser) upper bound.
    rdp = dpsgd_epsilon(sigma, batch / n, epochs * (n // batch), 1e-5, "rdp", "shuffle")["epsilon"]
    assert eps <= rdp <= 1.5 * eps
    # Far above the (invalid for shuffling) Poisson number for the same run.
    poisson = dpsgd_epsilon(sigma, batch / n, epochs * (n // batch), 1e-5, "rdp", "poisson")["epsilon"]
    assert rdp > poisson


def test_zero_noise_is_infinite_epsilon():
    assert dpsgd_epsilon(0.0, Q, 10, DELTA)["epsilon"] == math.inf




# Exact pruning of RDP orders (dpaudit.dp.accounting._rdp_epsilons_pruned): the oracle is
# dp_accounting's RdpAccountant over every default order; the tolerance is zero (the same
# float), over small and large σ (low fractional orders that fail to converge), tiny q
# (the Bernoulli floor too small to trust), one step to many, δ from 1e-10 to 0.49.
@pytest.mark.parametrize("sigma", [0.3, 0.62, 1.17, 3.0, 100.0, 1e4])
@pytest.mark.parametrize("q", [1e-4, 0.0713, 0.5, 1.0])
@pytest.mark.parametrize("steps", [1, 140, 10_000])
def test_pruned_rdp_orders_give_the_full_accountants_epsilon(sigma, q, steps):
    from dp_accounting.rdp import rdp_privacy_accountant

    from dpaudit.dp import accounting

    deltas = [1e-10, 1e-5, 1.6e-4, 0.1, 0.49]
    full = rdp_privacy_accountant.RdpAccountant(accounting.DEFAULT_RDP_ORDERS)
    full.compose(accounting.dpsgd_event(sigma, q, steps, "poisson"))
    expected = [full.get_epsilon(d) for d in deltas]
    got = accounting.dpsgd_profile(sigma, q, steps, deltas)
    assert list(got) == expected
    assert [dpsgd_epsilon(sigma, q, steps, d)["epsilon"] for d in deltas] == expected


def test_pruning_evaluates_few_orders_and_calibrates_the_same_sigma(monkeypatch):
    # The default run's digits setting (q = 64/898, 140 steps): σ is the one the full
    # accountant calibrates (recorded in train.json before pruning), and each ε evaluates
    # a fraction of the 156 orders.
    from dpaudit.dp import accounting

    evaluated = []
    original = accounting._accountant

    def counting(accountant, sampling, orders):
        evaluated.append(len(orders))
        return original(accountant, sampling, orders)

    monkeypatch.setattr(accounting, "_accountant", counting)
    q, delta = 0.07126948775055679, 0.00016375851411323293
    expected = {1.0: 3.0656881241576763, 4.0: 1.174407912789563, 16.0: 0.6175177052698595}
    for target, sigma in expected.items():
        evaluated.clear()
        assert calibrate_noise(target, q, 140, delta) == sigma
        calls = sum(1 for n in evaluated if n == 11)  # one seed batch per ε evaluation
        assert calls >= 5 and sum(evaluated) <= 40 * calls < 156 * calls
