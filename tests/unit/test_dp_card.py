"""Privacy cards (Geambasu's DP lecture) and roc_inside_dp_region in the card.

Oracles: closed forms written here (e^ε, e^ε/(1+e^ε), tanh(ε/2), e^ε·FPR), hand-made
compliant and violating ROCs, and Pillow reading the written PNG back.
"""

import math

import numpy as np
import pytest
from PIL import Image

from dpaudit.dp.card import (
    CardFigureRenderer,
    plain_language,
    privacy_card,
    privacy_card_from_info,
    roc_inside_dp_region,
)
from dpaudit.dp.roc import RocCurve

N = 10_000
FPR = np.array([0.0, 0.0005, 0.001, 0.01, 0.1, 0.5, 1.0])
TPR_OK = np.array([0.0, 0.0006, 0.0012, 0.012, 0.11, 0.52, 1.0])
TPR_BAD = np.array([0.0, 0.05, 0.08, 0.2, 0.4, 0.7, 1.0])


def _roc(fpr, tpr, n=N) -> RocCurve:
    """A hand-made ROC as metrics.mia's RocCurve: counts out of n per class, from flag-nobody (0, 0) on."""
    fp = np.rint(np.r_[0.0, fpr] * n).astype(np.int64)
    tp = np.rint(np.r_[0.0, tpr] * n).astype(np.int64)
    if fp[1] == 0 and tp[1] == 0:  # the arrays already start at flag-nobody
        fp, tp = fp[1:], tp[1:]
    return RocCurve(thresholds=np.r_[-np.inf, np.arange(fp.size - 1.0)], tp=tp, fp=fp, tpr=tp / n, fpr=fp / n,
                    n_members=n, n_nonmembers=n)


def test_theory_fields():
    row = privacy_card("r1", 1.0, 0.0).row
    assert row["exp_epsilon"] == pytest.approx(math.e, rel=1e-12)
    assert row["max_attack_accuracy_bound"] == pytest.approx(math.e / (1 + math.e), rel=1e-12)
    assert row["max_advantage_bound"] == pytest.approx(math.tanh(0.5), rel=1e-12)
    assert row["tpr_bound_at_fpr"][1e-3] == pytest.approx(1e-3 * math.e, rel=1e-12)
    assert row["tpr_bound_at_fpr"][1e-2] == pytest.approx(1e-2 * math.e, rel=1e-12)
    assert math.isnan(row["attack_auc"]) and row["roc_inside_dp_region"] is None


def test_nonprivate_card_shows_infinity():
    card = privacy_card("base", "inf", None, dataset="adult", mechanism="baseline")
    assert card.row["epsilon"] == math.inf and card.row["exp_epsilon"] == math.inf
    assert card.row["max_attack_accuracy_bound"] == 1.0
    assert "| ε | ∞ |" in card.markdown
    assert "without differential privacy" in card.markdown
    assert "∞" in card.html


def test_measurements_and_compliant_roc():
    card = privacy_card("r", 1.0, 1e-5, dataset="adult", roc=_roc(FPR, TPR_OK), generalization_gap=0.03,
                        utility=0.84)
    row = card.row
    assert row["roc_inside_dp_region"] is True and row["roc_violations"] == 0
    assert row["attack_tpr_at_fpr"][1e-3] == pytest.approx(0.0012)
    assert row["attack_tpr_at_fpr"][1e-2] == pytest.approx(0.012)
    # Trapezoid AUC of the hand-made ROC, computed here (the card takes metrics.mia's roc_auc).
    assert row["attack_auc"] == pytest.approx(np.trapezoid(TPR_OK, FPR), rel=1e-12)
    assert 0 <= row["dp_region_epsilon_lower_bound"] <= 1.0
    assert row["lower_bound_exceeds_epsilon"] is False
    assert row["generalization_gap"] == 0.03 and row["utility"] == 0.84
    assert "Warning" not in card.markdown
    assert "does not promise" in card.markdown


def test_violating_roc_is_flagged_in_row_and_text():
    card = privacy_card("r", 1.0, 0.0, roc=_roc(FPR, TPR_BAD))
    assert card.row["roc_inside_dp_region"] is False
    assert card.row["roc_violations"] >= 3
    assert card.row["lower_bound_exceeds_epsilon"] is True
    assert "Warning" in card.markdown and "warning" in card.html
    check = roc_inside_dp_region(FPR, TPR_BAD, 1.0, 0.0, N, N, 0.05)
    assert not check["inside"] and set(check["violations"]["index"]) >= {1, 2, 3}
    assert roc_inside_dp_region(FPR, TPR_OK, 1.0, 1e-5, N, N, 0.05)["inside"]


def test_passed_lower_bound_is_used_and_flagged():
    card = privacy_card("r", 2.0, 1e-5, eps_lower_bound=3.1)
    assert card.row["dp_region_epsilon_lower_bound"] == 3.1
    assert card.row["lower_bound_exceeds_epsilon"] is True


def test_figure_written_and_html_escaped(tmp_path):
    renderer = CardFigureRenderer()
    card = privacy_card("<run&1>", 1.0, 1e-5, roc=_roc(FPR, TPR_OK), figure_path=tmp_path / "card.png",
                        renderer=renderer)
    png = tmp_path / "card.png"
    assert card.figure_path == str(png) and card.row["figure"] == str(png)
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 200 and im.size[1] > 200
        # Not blank: the DP region and lines put many colours on the canvas.
        assert len(im.convert("RGB").getcolors(maxcolors=100_000)) > 10
    assert "&lt;run&amp;1&gt;" in card.html and "<run&1>" not in card.html
    assert "card.png" in card.markdown and 'src="card.png"' in card.html
    # The renderer is reusable; a non-private card draws without a region bound.
    privacy_card("b", math.inf, 0.0, figure_path=tmp_path / "b.png", renderer=renderer)
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_card_from_train_info():
    info = {"dataset": "adult", "run": "dp1", "mechanism": "dpsgd", "epsilon": 2.5,
            "delta": 1e-5, "accountant": "rdp", "neighbouring_relation": "add_remove",
            "sampling": "poisson"}
    card = privacy_card_from_info(info, utility=0.8)
    assert card.row["accountant"] == "rdp" and card.row["sampling"] == "poisson"
    assert "| accountant | rdp |" in card.markdown
    assert "| neighbouring relation | add_remove |" in card.markdown


def test_card_uses_the_ledgers_relation_name_and_baselines_say_not_applicable():
    # train.json spells Poisson sampling's relation "add_or_remove_one"; the ledger calls it add_remove.
    dp = privacy_card_from_info({"run": "dp", "mechanism": "dpsgd", "epsilon": 1.0, "delta": 1e-5,
                                 "accountant": "rdp", "neighbouring_relation": "add_or_remove_one",
                                 "sampling": "poisson"})
    assert dp.row["neighbouring_relation"] == "add_remove"
    base = privacy_card_from_info({"run": "base", "mechanism": "baseline", "epsilon": "inf", "delta": 1e-5,
                                   "sampling": "poisson"}, roc=_roc([0.1, 1.0], [0.5, 1.0], n=100))
    for line in ("| δ |", "| sampling (as the accountant assumes) |", "| ROC inside DP region (up to sampling error) |",
                 "| neighbouring relation |", "| accountant |"):
        assert f"{line} not applicable (no DP, ε = ∞) |" in base.markdown, line
    assert "| ε | ∞ |" in base.markdown
    base = privacy_card_from_info({"run": "b", "mechanism": "baseline"})
    assert base.row["epsilon"] == math.inf


def test_plain_language_mentions_vacuous_bound_for_large_eps():
    assert "protects little" in plain_language(10.0, 1e-5)
    assert "protects little" not in plain_language(1.0, 1e-5)



def test_plain_language_names_the_neighbouring_change():
    assert "adding or removing any one training example" in plain_language(1.0, 1e-5)
    assert "adding or removing" in plain_language(1.0, 1e-5, "add_remove")
    text = plain_language(1.0, 0.0, "replace_one")
    assert "replacing any one training example by another" in text and "adding" not in text
    card = privacy_card_from_info({"run": "op", "mechanism": "output_perturbation", "epsilon": 1.0, "delta": 0.0,
                                   "accountant": "pure", "neighbouring_relation": "replace_one"})
    assert "replacing any one training example" in card.markdown and "replacing any one" in card.html
