"""dpaudit.dp.rdp_series (the accounting check's RDP recomputation) against dp_accounting's RDP
accountant, the implementation of Mironov, Talwar & Zhang (2019) the calibration uses, and against
the Gaussian mechanism's closed form."""

from __future__ import annotations

import logging

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpaudit.dp import rdp_series

ORDERS = [float(o) for o in rdp_lib.DEFAULT_RDP_ORDERS]


@pytest.fixture(autouse=True)
def _quiet_dp_accounting():
    # dp_accounting logs a warning for each order whose series does not converge (σ = 0.3)
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("sigma", [0.3, 0.6, 1.2, 3.2, 8.0, 30.0])
@pytest.mark.parametrize("q", [1e-4, 0.003, 0.05, 0.225, 0.7])
def test_every_order_matches_dp_accounting(sigma, q):
    ours = rdp_series.poisson_gaussian_rdp(sigma, q, ORDERS)
    theirs = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, sigma, ORDERS)
    # the orders whose fractional series does not stop within 1,000 terms are excluded (∞) by both
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    finite = np.isfinite(theirs)
    # the two sums round differently; where the RDP is ~1e-12 (q = 1e-4, σ = 30) only the absolute
    # difference is meaningful: 1e-15 nats, far below anything ε can see
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-8, atol=1e-15)


@pytest.mark.parametrize("steps", [1, 150, 25_800])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_epsilon_matches_dp_accounting(steps, delta):
    worst = 0.0
    for sigma in (0.6, 0.9, 1.2, 3.2, 30.0):
        for q in (1e-4, 0.05, 0.225):
            accountant = rdp_lib.RdpAccountant(ORDERS)
            accountant.compose(dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps))
            theirs = accountant.get_epsilon(delta)
            ours = rdp_series.epsilon(ORDERS, steps * rdp_series.poisson_gaussian_rdp(sigma, q, ORDERS), delta)
            assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12), (sigma, q)
            worst = max(worst, abs(ours - theirs) / max(theirs, 1e-300))
    assert worst < 1e-9


def test_closed_forms_at_the_ends():
    alphas = np.array([1.5, 2.0, 7.3, 64.0])
    # q = 1: the Gaussian mechanism, α / 2σ² (Mironov 2017, Prop. 7)
    np.testing.assert_allclose(rdp_series.poisson_gaussian_rdp(2.0, 1.0, alphas), alphas / 8.0, rtol=1e-15)
    assert np.all(rdp_series.poisson_gaussian_rdp(2.0, 0.0, alphas) == 0.0)
    assert np.all(np.isinf(rdp_series.poisson_gaussian_rdp(0.0, 0.1, alphas)))
    # integer order 2 of the subsampled Gaussian in closed form: log(1 + q²(e^{1/σ²} − 1))
    sigma, q = 1.3, 0.07
    assert rdp_series.poisson_gaussian_rdp(sigma, q, [2.0])[0] == pytest.approx(
        np.log1p(q * q * np.expm1(1.0 / sigma**2)), rel=1e-13)


def test_epsilon_conversion_edges():
    # below the KL bound's reach δ ≤ √(1 − e^{−r}) is already met: ε = 0
    assert rdp_series.epsilon([2.0, 3.0], [1e-12, 1e-12], 1e-3) == 0.0
    # orders ≤ 1.01 give no bound
    assert rdp_series.epsilon([1.005], [0.5], 1e-5) == np.inf


@pytest.mark.parametrize(("call", "message"), [
    (lambda: rdp_series.poisson_gaussian_rdp(1.0, 1.5, [2.0]), "sampling rate"),
    (lambda: rdp_series.poisson_gaussian_rdp(-1.0, 0.1, [2.0]), "noise multiplier"),
    (lambda: rdp_series.poisson_gaussian_rdp(1.0, 0.1, [1.0]), "orders must be > 1"),
    (lambda: rdp_series.epsilon([2.0], [0.1], 0.0), "delta"),
])
def test_bad_inputs_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
