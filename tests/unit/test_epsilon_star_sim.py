"""Epsilon* simulations of Negoescu et al. 2023, App. B (Figs 3-6).

Reference numbers come from our reproduction of Negoescu et al. 2023, Figs 3-5 (the paper has no tables; our
values were computed by its author with an independent numpy/scipy script,
delta = 1e-5, 10 repeats). Monte Carlo tolerances compare two independent means of
10 repeats: 4 * sqrt(sd_ours^2/10 + sd_ref^2/10), plus half a unit of the reference's
last printed digit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import special

from dpaudit.metrics.epsilon_star import empirical_rates, epsilon_star_from_rates
from dpaudit.plots.epsilon_star_simulations import plot_fig3, plot_fig4, plot_fig5, plot_fig6
from dpaudit.simulations.epsilon_star import (
    gamma_true_epsilon_star,
    normal_true_epsilon_star,
    simulate_fig3,
    simulate_gamma,
    summarize_gamma,
)

# Our reproduction of Fig. 5 (delta = 1e-5, n = 10^5): d -> (true, empirical, parametric)
FIG5_REFERENCE = {
    0: (0.0, 0.19, 0.055),
    1: (4.32, 2.79, 4.98),
    2: (6.62, 4.24, 7.42),
    3: (8.04, 5.13, 8.88),
}
# Our reproduction of Fig. 4 (d = 0): (method, n) -> (mean, sd)
FIG4_REFERENCE = {
    ("empirical", 1000): (1.08, 0.27),
    ("empirical", 10000): (0.51, 0.14),
    ("empirical", 100000): (0.19, 0.07),
    ("parametric", 1000): (0.52, 0.48),
    ("parametric", 10000): (0.13, 0.09),
    ("parametric", 100000): (0.055, 0.025),
}
# The paper's 10^6-level grid vs the exact boundary supremum: up to ~6e-4 at delta = 1e-5
# and ~2e-3 at delta = 3.9e-7 (the parametric estimator's threshold grid).
GRID_TOL = 2e-3


def mc_tolerance(sd_ours: float, sd_ref: float, ref_digits: int) -> float:
    return 4 * math.sqrt(sd_ours**2 / 10 + sd_ref**2 / 10) + 0.5 * 10.0**-ref_digits


@pytest.fixture(scope="module")
def gamma_n1e5() -> pd.DataFrame:
    # the one full-size run: d in {0..3}, n = 10^5, 10 repeats, 10^6-level grid
    return simulate_gamma(
        distances=(0, 1, 2, 3), sizes=(10**5,), n_repeats=10, delta=1e-5, seed=2024
    )


def test_gamma_n1e5_matches_reference_table(gamma_n1e5):
    # Source: our reproduction of Fig. 5 and the d = 0 column of Fig. 4.
    summary = summarize_gamma(gamma_n1e5).set_index(["d", "method"])
    sd_ref = {"empirical": 0.07, "parametric": 0.025}  # only d = 0 has published sds
    for d, (true, emp, par) in FIG5_REFERENCE.items():
        assert summary.loc[(d, "true"), "mean"] == pytest.approx(true, abs=0.005 + GRID_TOL)
        for method, ref in (("empirical", emp), ("parametric", par)):
            row = summary.loc[(d, method)]
            assert row["count"] == 10
            # for d > 0 our reproduction has no sd; take ours for both means
            ref_sd = sd_ref[method] if d == 0 else row["std"]
            digits = 3 if (method, d) == ("parametric", 0) else 2
            tol = mc_tolerance(row["std"], ref_sd, digits)
            assert abs(row["mean"] - ref) <= tol, (d, method, row["mean"], ref, tol)


def test_gamma_n1e5_paper_claims(gamma_n1e5):
    # Source: App. B.1 claims, checked on the same run: at d = 0 the empirical variant
    # overshoots 0 more than the parametric one; for d > 0 it undershoots the truth
    # more than the parametric one misses it; the empirical variant never exceeds ln 999.
    s = summarize_gamma(gamma_n1e5).set_index(["d", "method"])["mean"]
    assert s[(0, "empirical")] > s[(0, "parametric")] > 0
    for d in (1, 2, 3):
        assert s[(d, "true")] - s[(d, "empirical")] > abs(s[(d, "parametric")] - s[(d, "true")])
    emp = gamma_n1e5[gamma_n1e5["method"] == "empirical"]["eps_star"]
    assert (emp < math.log(999)).all()


def test_gamma_small_n_matches_fig4_table():
    # Source: our reproduction of Fig. 4 (identical Gamma(2, 5), delta = 1e-5), n = 10^3, 10^4.
    frame = simulate_gamma(
        distances=(0,), sizes=(10**3, 10**4), n_repeats=10, seed=7, include_true=False
    )
    summary = summarize_gamma(frame).set_index(["method", "n"])
    for (method, n), (mean_ref, sd_ref) in FIG4_REFERENCE.items():
        if n == 10**5:
            continue
        row = summary.loc[(method, n)]
        tol = mc_tolerance(row["std"], sd_ref, 2)
        assert abs(row["mean"] - mean_ref) <= tol, (method, n, row["mean"], mean_ref, tol)


def test_gamma_true_values_with_auto_delta():
    # Source: Negoescu et al. 2023, Fig. 5 text: "with delta = 1/(n ln n) and n = 10^5 they are 5.14, 7.86 and 9.54".
    delta = 1 / (1e5 * math.log(1e5))
    for d, ref in ((1, 5.14), (2, 7.86), (3, 9.54)):
        res = gamma_true_epsilon_star(d, delta)
        assert res.eps_star == pytest.approx(ref, abs=0.005 + GRID_TOL)
        # the supremum sits where the filter binds (ε* depends on δ there)
        assert res.on_boundary is True


def test_true_cdf_normals_fig3():
    # Source: Negoescu et al. 2023, Fig. 3: N(0,1) vs N(3,1), true CDFs, FPR/FNR < 1e-9 removed, delta = 0:
    # eps* ~ 14.12. Independent closed form: the supremum is m1 at FPR = 1e-9, i.e.
    # tau = 3 + Phi^-1(1e-9) and eps* = ln(Phi(tau) / 1e-9). Tolerance 1e-3 (grid).
    res = normal_true_epsilon_star(0.0, 3.0, delta=0.0, cut=1e-9)
    closed_form = math.log(special.ndtr(3.0 + special.ndtri(1e-9)) / 1e-9)
    assert res.eps_star == pytest.approx(14.12, abs=0.005 + 1e-3)
    assert res.eps_star == pytest.approx(closed_form, abs=1e-3)
    assert res.eps_star <= closed_form + 1e-9  # a grid can only under-estimate the supremum


def test_empirical_fig3_values():
    # Source: Negoescu et al. 2023, Fig. 3: empirical CDFs give about 6.3 and 8.0 for n = 10^3, 10^4
    # (means over 20 draws; single draws vary by +-0.15-0.2). Tolerance:
    # 4 * 0.2 * sqrt(2/20) + 0.05 (one printed decimal).
    tol = 4 * 0.2 * math.sqrt(2 / 20) + 0.05
    for n, ref in ((10**3, 6.3), (10**4, 8.0)):
        values = []
        for rep in range(20):
            rng = np.random.default_rng([11, n, rep])
            rates = empirical_rates(rng.normal(0, 1, n), rng.normal(3, 1, n))
            values.append(
                epsilon_star_from_rates(rates, 0.0, lower=1e-9, upper_margin=0.0).eps_star
            )
        assert abs(np.mean(values) - ref) <= tol, (n, np.mean(values))


def test_fig3_frame_and_plot(tmp_path):
    # Source: our output columns (sim_fig3) and Negoescu et al. 2023, Fig. 3 (true curves peak at e^14.12);
    # tolerance 0.05 nats for the 20k-level plotting grid. Files checked by magic bytes.
    frame = simulate_fig3(n=10**4, seed=3)
    assert list(frame.columns) == [
        "panel",
        "x_half_tpr_fpr",
        "term1",
        "term2",
        "n",
        "delta",
        "seed",
    ]
    assert set(frame["panel"]) == {"true", "empirical"}
    true = frame[frame["panel"] == "true"]
    assert true["n"].isna().all()
    # the true curves reach the cut: max term ~ e^14.12 (Fig. 3), on a coarser grid here
    assert math.log(true[["term1", "term2"]].to_numpy().max()) == pytest.approx(14.12, abs=0.05)
    emp = frame[frame["panel"] == "empirical"]
    assert (emp["n"] == 10**4).all() and len(emp) > 1000
    plot_fig3(frame, [tmp_path / "fig3.png", tmp_path / "fig3.pdf"])
    assert (tmp_path / "fig3.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "fig3.pdf").read_bytes()[:5] == b"%PDF-"


def test_gamma_frame_reproducible_and_plots(tmp_path):
    # Source: our output columns (sim_gamma); reproducibility is exact (frame equality).
    kwargs = dict(distances=(0, 2), sizes=(500, 2000), n_repeats=3, seed=5, grid_size=20_000)
    a = simulate_gamma(**kwargs)
    b = simulate_gamma(**kwargs)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns) == [
        "d",
        "n",
        "rep",
        "method",
        "delta",
        "eps_star",
        "on_boundary",
        "n_kept",
        "seed",
    ]
    assert len(a) == 2 * (1 + 2 * 3 * 2)
    true = a[a["method"] == "true"]
    assert true["n"].isna().all() and true["rep"].isna().all()
    # one cell rerun alone reproduces its row (seeded by [seed, d, n, rep])
    one = simulate_gamma(
        distances=(2,), sizes=(2000,), n_repeats=3, seed=5, grid_size=20_000, include_true=False
    )
    pd.testing.assert_frame_equal(
        one.reset_index(drop=True),
        a[(a["d"] == 2) & (a["n"] == 2000)].reset_index(drop=True),
    )
    plot_fig4(a, [tmp_path / "fig4.png", tmp_path / "fig4.pdf"])
    plot_fig5(a, tmp_path / "fig5.png")
    for name in ("fig4.png", "fig4.pdf", "fig5.png"):
        assert (tmp_path / name).stat().st_size > 1000
    with pytest.raises(ValueError, match="png or .pdf"):
        plot_fig5(a, tmp_path / "fig5.svg")


def test_fig6_from_loss_arrays(tmp_path):
    # Source: Negoescu et al. 2023, App. B.2, and our output columns (gof_ks); p-values are probabilities (exact bounds).
    rng = np.random.default_rng(12)
    panels = {
        "without DP": (rng.gamma(1.0, 1.0, 4000), rng.gamma(1.5, 1.0, 2000)),
        "with DP-SGD": (rng.normal(0.0, 1.0, 4000), rng.normal(0.1, 1.0, 2000)),
    }
    table = plot_fig6(
        panels, tmp_path / "fig6.png", n_components=[1, 2, 3], n_samples=[100, 300], n_repeats=2
    )
    assert list(table.columns) == [
        "panel",
        "n_components",
        "n_samples",
        "rep",
        "ks_stat",
        "p_value",
    ]
    assert len(table) == 2 * 3 * 2 * 2
    assert table["p_value"].between(0, 1).all()
    assert (tmp_path / "fig6.png").stat().st_size > 1000
