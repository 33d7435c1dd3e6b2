"""The linear mechanisms' many-runs releases certified in aggregate (issue 45): the norm's law and
the direction's uniformity of the R noise draws (``noise_certificate.certify_l2_laplace_releases``).

Oracles: scipy.stats (gamma, kstest, chi2, norm) on the raw draws to 1e-9; the fourth-moment
test's variance against the sphere's moments integrated numerically (d = 3) and in closed form
(d = 2). Power: too little noise, directions towards the axes, noise on half the coordinates, a
preferred direction, one draw repeated; through ``linear_release_scores`` a code drawing half the
noise, decided by the noise check of the releases. Validity: 1,000 correct sets of draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpaudit.audit import linear_audit
from dpaudit.dp.noise_certificate import certify_l2_laplace_releases, summary_sentence
from dpaudit.metrics.canary.mechanism import mechanism_failure, mechanism_rows
from dpaudit.profile import mechanisms as profile_mechanisms

RTOL = 1e-9


def _draws(rng, r, d, scale):
    return profile_mechanisms.l2_laplace_noise(rng, r, d, 1.0 / scale)


def test_statistics_equal_scipy_on_the_raw_draws():
    rng = np.random.default_rng(4)
    r, d, scale = 300, 7, 0.3
    b = _draws(rng, r, d, scale)
    check = certify_l2_laplace_releases(b, scale, claimed_from="test")
    p = check["p_values"]
    norms = np.linalg.norm(b, axis=1)
    total = stats.gamma(r * d, scale=scale)
    assert p["norm"] == pytest.approx(2 * min(total.cdf(norms.sum()), total.sf(norms.sum())), rel=RTOL)
    measured = stats.gamma(d, scale=norms.mean() / d)
    assert p["norm_law"] == pytest.approx(stats.kstest(norms, measured.cdf).pvalue, rel=RTOL)
    u = b / norms[:, None]
    rayleigh = d * r * float(np.sum(u.mean(axis=0) ** 2))
    assert p["direction_mean"] == pytest.approx(stats.chi2.sf(rayleigh, d), rel=RTOL)
    scatter = sum(np.outer(v, v) for v in u) / r
    bingham = r * d * (d + 2) / 2 * (np.trace(scatter @ scatter) - 1 / d)
    assert p["direction_spread"] == pytest.approx(stats.chi2.sf(bingham, (d - 1) * (d + 2) / 2), rel=1e-7)
    assert check["passed"] and check["tests"] == 5


def test_fourth_moment_variance_is_the_spheres():
    def variance(d):
        return (9 * d + 96) / ((d + 2) * (d + 4) * (d + 6)) - 9 / (d + 2) ** 2

    # d = 2: u = (cos θ, sin θ), Σu⁴ = 1 − sin²(2θ)/2, variance Var(sin² 2θ)/4 = (3/8 − 1/4)/4
    assert variance(2) == pytest.approx(1 / 32, rel=1e-12)
    # d = 3: E[(Σu⁴)²] over the sphere by quadrature (area element sin θ dθ dφ / 4π)

    def s_squared(theta, phi):
        x, y, z = math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi), math.cos(theta)
        return (x ** 4 + y ** 4 + z ** 4) ** 2 * math.sin(theta) / (4 * math.pi)

    second, _ = integrate.dblquad(s_squared, 0, 2 * math.pi, 0, math.pi, epsabs=1e-12, epsrel=1e-12)
    assert variance(3) == pytest.approx(second - (3 / 5) ** 2, rel=1e-8)


def test_correct_draws_keep_the_family_level():
    # family-wise 1e-3: expected 1 flag in 1,000; six or more has probability 6e-4
    rng = np.random.default_rng(5)
    flags = sum(not certify_l2_laplace_releases(_draws(rng, 200, d, 0.5), 0.5, claimed_from="t")["passed"]
                for d in (2, 10) for _ in range(500))
    assert flags <= 5


def _unit(rng, r, d):
    z = rng.standard_normal((r, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


@pytest.mark.parametrize("bug", ["less_noise", "towards_axes", "half_the_coordinates", "preferred_direction",
                                 "one_draw_repeated", "more_noise"])
def test_broken_draws_are_flagged(bug):
    rng = np.random.default_rng(6)
    r, d, scale = 400, 10, 0.5
    radii = rng.gamma(d, scale, r)[:, None]
    if bug == "less_noise":
        b = 0.8 * _draws(rng, r, d, scale)
    elif bug == "more_noise":
        b = 1.3 * _draws(rng, r, d, scale)
    elif bug == "towards_axes":  # independent Laplace coordinates, rescaled to an L2-Laplace norm
        z = rng.laplace(size=(r, d))
        b = radii * z / np.linalg.norm(z, axis=1, keepdims=True)
    elif bug == "half_the_coordinates":
        z = rng.standard_normal((r, d)) * np.where(np.arange(d) < d // 2, 1.0, 0.5)
        b = radii * z / np.linalg.norm(z, axis=1, keepdims=True)
    elif bug == "preferred_direction":
        z = _unit(rng, r, d) + 0.3 * np.eye(d)[0]
        b = radii * z / np.linalg.norm(z, axis=1, keepdims=True)
    else:
        b = np.repeat(_draws(rng, 1, d, scale), r, axis=0)
    check = certify_l2_laplace_releases(b, scale, claimed_from="test")
    assert not check["passed"]
    assert check["privacy_failure"] is (bug != "more_noise")
    failed = {f["test"] for f in check["failures"]}
    expected = {"less_noise": "norm", "more_noise": "norm", "towards_axes": "direction_axes",
                "half_the_coordinates": "direction_spread", "preferred_direction": "direction_mean",
                "one_draw_repeated": "direction_mean"}[bug]
    assert expected in failed, failed
    assert "NOT consistent" in summary_sentence(check)


@pytest.mark.parametrize("mechanism", linear_audit.MECHANISMS)
def test_the_many_runs_audit_certifies_its_releases(mechanism):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)) * 2 + 0.5
    y = (x[:, 0] + rng.normal(size=40) > 0.5).astype(np.int64)
    from dpaudit.dp.noise_certificate import certify_l2_laplace

    train = {"mechanism": mechanism, "noise_check": certify_l2_laplace(3.0, 3, 1.0, claimed_from="test")}
    result = linear_audit.linear_release_scores(x, y, mechanism=mechanism, epsilon=2.0, lam=1.0, releases=300,
                                                seed=1, alpha=None)
    check = result["noise_check"]
    assert check["passed"] and check["steps"] == 600 and check["coordinates"] == 3
    assert mechanism_failure(mechanism_rows(train, result)) == (None, None)
    broken = linear_audit.linear_release_scores(x, y, mechanism=mechanism, epsilon=2.0, lam=1.0, releases=300,
                                                seed=1, alpha=None, noise_factor=0.5)
    assert not broken["noise_check"]["passed"] and broken["noise_check"]["privacy_failure"]
    rows = mechanism_rows(train, broken)
    assert {r["checked_model"] for r in rows} == {"released", "releases"}
    assert mechanism_failure(rows) == ("noise_check", "releases")
