"""Teaching figures F1–F5 (Geambasu's DP lecture) write real PNGs; F3's budgets match the lecture's composition example.

Oracle for the PNGs: Pillow reads them back; for F3, the lecture's composition numbers (recomputed) and a
direct RDP recomputation.
"""

import numpy as np
import pytest
from PIL import Image

from dpaudit.dp.composition import rdp_laplace, rdp_to_dp
from dpaudit.plots import teaching as T


def assert_png(path, min_colours=8):
    with Image.open(path) as im:
        assert im.format == "PNG"
        assert im.size[0] >= 300 and im.size[1] >= 300
        assert len(im.convert("RGB").getcolors(maxcolors=1_000_000)) >= min_colours


def test_f1_laplace_vs_gaussian(tmp_path):
    out = T.figure_laplace_vs_gaussian(tmp_path / "f1.png")
    assert_png(out)


def test_f2_laplace_error(tmp_path):
    assert_png(T.figure_laplace_error(tmp_path / "f2.png"))


def test_f3_composition_and_per_query_budget(tmp_path):
    assert_png(T.figure_composition(tmp_path / "f3.png", k_max=10_000))
    # RDP per-query budget at k = 50,000, δ = 1e-6 is larger than advanced (8.22e-4, the lecture's composition example).
    per_query = T.rdp_per_query_budget(1.0, 50_000, 1e-6)
    assert per_query > 8.22e-4
    orders = np.concatenate([np.linspace(1.05, 2, 20), np.linspace(2.25, 12, 40),
                             np.arange(13, 257)])
    total = rdp_to_dp(orders, 50_000 * rdp_laplace(orders, per_query), 1e-6, "dp_accounting")[0]
    assert total == pytest.approx(1.0, abs=1e-6)


def test_f4_exponential_selection(tmp_path):
    assert_png(T.figure_exponential_selection(tmp_path / "f4.png"))


def test_f5_dp_roc_region_with_empirical_roc(tmp_path):
    fpr = np.logspace(-4, 0, 50)
    tpr = np.minimum(1, fpr * 1.5)
    assert_png(T.figure_dp_roc_region(tmp_path / "f5.png", fpr=fpr, tpr=tpr))
    assert_png(T.figure_dp_roc_region(tmp_path / "f5_lin.png", eps_list=(1.0, np.inf), log=False))
