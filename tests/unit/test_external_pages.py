"""A model trained elsewhere on the shared pages (issue 44): the privacy–utility figure and the dossier's
verdict with the canary family disabled."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpaudit.plots import privacy_utility


def test_models_trained_elsewhere_are_drawn_and_named_on_the_privacy_utility_figure(monkeypatch, tmp_path):
    kept = {}

    def keep(fig, png, pdf=None):
        top = fig.axes[0]
        kept["legend"] = [t.get_text() for t in top.get_legend().get_texts()]
        kept["names"] = [t.get_text() for t in top.texts if t.get_text() not in ("//",)]
        kept["points"] = [c.get_offsets().data.tolist() for c in top.collections if c.get_label() == "trained elsewhere"]
        plt.close(fig)

    monkeypatch.setattr(privacy_utility, "save_figure", keep)
    summary = pd.DataFrame({"dataset": "d", "run": ["grid_run", "a", "b", "c"],
                            "mechanism": ["dpsgd", "external", "external", "external"],
                            "accountant_epsilon": [4.0, 4.0, 4.0, np.inf], "test_accuracy": [0.8, 0.8, 0.8, 0.7],
                            "attack_auc": [0.55, 0.55, 0.55, 0.6], "model": None})
    privacy_utility.plot_privacy_utility(summary, tmp_path / "pu.png")
    assert kept["legend"] == ["DP-SGD", "trained elsewhere"]
    assert sorted(kept["names"]) == ["a, b", "c"]  # two models at one point share a label
    (points,) = kept["points"]
    assert len(points) == 3 and points[0] == [4.0, 0.8]  # c (no promise) sits at the ∞ position


def test_the_dossier_reads_a_models_verdict_rows_even_with_the_canary_family_disabled():
    from dpaudit.report.run_view import RunView

    table = pd.DataFrame({"dataset": "d", "run": ["ext", "ext", "grid"], "family": ["mia", "canary", "mia"],
                          "metric": ["attack_auc", "measured_above_promise", "attack_auc"]})
    assert RunView(table, "d", "ext").missing_family("canary") is None  # its verdict row is there
    assert RunView(table[table["family"] == "mia"], "d", "ext").missing_family("canary") == (
        "not computed in this run (family canary disabled)")
