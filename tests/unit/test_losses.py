"""dpaudit.losses against closed forms (Negoescu et al. 2023, footnote 1)."""

import numpy as np
import pytest

from dpaudit.losses import per_example_losses


def _naive(z, y):
    """Direct softmax formulas in float64 (fine for moderate logits)."""
    z = np.asarray(z, dtype=np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    py = p[np.arange(len(y)), y]
    return -np.log(py), np.log1p(-py) - np.log(py), py


def test_matches_softmax_closed_form_on_moderate_logits():
    rng = np.random.default_rng(0)
    z = rng.normal(scale=3.0, size=(500, 5)).astype(np.float32)
    y = rng.integers(0, 5, size=500)
    out = per_example_losses(z, y, np.arange(500))
    ce, logit, py = _naive(z, y)
    # float64 arithmetic on both sides; 1e-10 leaves room for log1p vs log-sum-exp rounding.
    np.testing.assert_allclose(out["loss_ce"], ce, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["loss_logit"], logit, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(out["p_true"], py, rtol=1e-12)
    np.testing.assert_array_equal(out["correct"], z.argmax(axis=1) == y)
    for key in ("loss_ce", "loss_logit", "p_true"):
        assert out[key].dtype == np.float64


def test_binary_closed_form_and_ce_relation():
    rng = np.random.default_rng(1)
    z = rng.normal(scale=4.0, size=(300, 2))
    y = rng.integers(0, 2, size=300)
    out = per_example_losses(z, y, np.arange(300))
    # Binary: logit of class 1 relative to class 0 is s = z1 - z0 and ℓ = (1 - 2y)·s
    # (Negoescu et al. 2023, footnote 1), i.e. ℓ = z_other - z_y.
    s = z[:, 1] - z[:, 0]
    np.testing.assert_allclose(out["loss_logit"], (1 - 2 * y) * s, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["loss_logit"], z[np.arange(300), 1 - y] - z[np.arange(300), y], atol=1e-12)
    # ℓ = log(e^CE − 1) (Negoescu et al. 2023, footnote 1); expm1 keeps small CE exact.
    np.testing.assert_allclose(out["loss_logit"], np.log(np.expm1(out["loss_ce"])), rtol=1e-9, atol=1e-9)


def test_large_logit_gaps_stay_finite():
    # p_true rounds to 1.0 in float32 (and float64) for gaps ≥ ~40; ℓ must still be
    # the closed form z_other − z_y, never −inf.
    gaps = np.array([20.0, 40.0, 80.0, 200.0, 1e4], dtype=np.float32)
    z = np.stack([np.zeros_like(gaps), gaps], axis=1)
    y = np.ones(len(gaps), dtype=np.int64)
    out = per_example_losses(z, y, np.arange(len(gaps)))
    assert np.float32(1.0 / (1.0 + np.exp(-80.0, dtype=np.float32))) == 1.0
    np.testing.assert_allclose(out["loss_logit"], -gaps.astype(np.float64), rtol=1e-12)
    assert np.all(np.isfinite(out["loss_ce"])) and np.all(np.isfinite(out["loss_logit"]))
    # CE = log(1 + e^{-gap}) ≈ e^{-gap} for large gaps (Taylor, relative error < e^{-gap}).
    np.testing.assert_allclose(out["loss_ce"][:3], np.exp(-gaps[:3].astype(np.float64)), rtol=1e-8)
    # Wrong-class confidence: ℓ = +gap, CE ≈ gap.
    out_wrong = per_example_losses(z, np.zeros(len(gaps), dtype=np.int64), np.arange(len(gaps)))
    np.testing.assert_allclose(out_wrong["loss_logit"], gaps.astype(np.float64), rtol=1e-12)
    np.testing.assert_allclose(out_wrong["loss_ce"], gaps.astype(np.float64), rtol=1e-8)


def test_multiclass_other_classes_logsumexp():
    z = np.array([[1000.0, 999.0, -5.0]])
    out = per_example_losses(z, np.array([2]), np.array([7]))
    # logsumexp(1000, 999) = 1000 + log(1 + e^-1); ℓ = that − (−5).
    np.testing.assert_allclose(out["loss_logit"], [1005.0 + np.log1p(np.exp(-1.0))], rtol=1e-14)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_logits_name_example_ids(bad):
    z = np.zeros((4, 3))
    z[2, 1] = bad
    with pytest.raises(ValueError, match=r"example_id: \[1002\]"):
        per_example_losses(z, np.array([0, 1, 2, 0]), np.array([1000, 1001, 1002, 1003]))


def test_rejects_single_class_and_bad_labels():
    with pytest.raises(ValueError, match="K >= 2"):
        per_example_losses(np.zeros((3, 1)), np.zeros(3, dtype=int), np.arange(3))
    with pytest.raises(ValueError, match="labels must lie"):
        per_example_losses(np.zeros((3, 2)), np.array([0, 1, 2]), np.arange(3))
