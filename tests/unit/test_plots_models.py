"""Figures over all models of a dataset, built from generated per-example outputs
through the real mia metric code (so the tables have the workflow's shape)."""

import math

import numpy as np
import pandas as pd
import pytest

from dpaudit.aggregate import summary_frame
from dpaudit.metrics.mia import mia_metrics
from dpaudit.plots.models import (
    FIGURES,
    history_frame,
    plot_loss_histograms,
    plot_model_figures,
    plot_tpr_at_low_fpr,
    utility_spread,
)

SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}
GRID = [("baseline", math.nan, 0), ("baseline", math.nan, 1), ("dpsgd", 1.0, 0), ("dpsgd", 1.0, 1),
        ("dpsgd", 16.0, 0), ("dpsgd", 16.0, 1)]


def _outputs(gap: float, rng) -> pd.DataFrame:
    n = 300
    split = np.repeat(["train", "holdout", "test"], n)
    loss = rng.exponential(1.0, 3 * n) * np.where(split == "train", 1.0 - gap, 1.0)
    return pd.DataFrame({"example_id": np.arange(3 * n), "split": split, "is_member": split == "train",
                         "loss_ce": loss, "correct": loss < 0.7})


@pytest.fixture(scope="module")
def dataset():
    rng = np.random.default_rng(7)
    runs, outputs, infos, frames = [], {}, {}, []
    for mechanism, target, seed in GRID:
        run = f"{mechanism}_{target}_{seed}"
        eps = math.inf if mechanism == "baseline" else target * 0.98
        gap = {math.inf: 0.6, 1.0: 0.05, 16.0: 0.3}[math.inf if mechanism == "baseline" else target]
        outputs[run] = _outputs(gap, rng)
        rows = mia_metrics(outputs[run], members_split="train", nonmembers_split="holdout", utility_split="test",
                           delta=1e-3, accountant_epsilon=eps, seed=0, fpr_targets=(0.001, 0.01, 0.1))
        frames.append(rows.assign(dataset="toy", run=run, family="mia"))
        runs.append({"dataset": "toy", "run": run, "mechanism": mechanism, "target_epsilon": target, "seed": seed,
                     "accountant_epsilon": eps})
        history = [{"epoch": e, "loss": 1 / e, "accuracy": 1 - 0.5 / e} for e in (1, 2, 3)]
        if mechanism == "dpsgd":
            history = [{**h, "clipped_fraction": 0.9 - 0.1 * h["epoch"]} for h in history]
        infos[run] = {"history": history}
    runs = pd.DataFrame(runs)
    table = pd.concat(frames, ignore_index=True).merge(runs, on=["dataset", "run"])
    return {"runs": runs, "outputs": outputs, "infos": infos, "table": table,
            "summary": summary_frame(table, runs)}


def test_every_figure_written_with_truetype_pdf(dataset, tmp_path):
    paths = {name: (tmp_path / f"{name}.png", tmp_path / f"{name}.pdf") for name in FIGURES}
    plot_model_figures(dataset["table"], dataset["summary"], dataset["outputs"], dataset["infos"],
                       {"splits": SPLITS}, "loss_ce", "toy", paths)
    for png, pdf in paths.values():
        assert png.stat().st_size > 0
        data = pdf.read_bytes()
        assert b"/Type3" not in data, f"{pdf.name} embeds a Type 3 font"


def test_tpr_points_are_the_metrics_rows(dataset, tmp_path):
    data = plot_tpr_at_low_fpr(dataset["table"], dataset["summary"], "toy", tmp_path / "t.png")
    assert len(data) == 2 * len(GRID)  # FPR 1e-3 and 1e-2, every model
    rows = dataset["table"][dataset["table"]["metric"] == "tpr_at_fpr"].set_index(["run", "fpr_target"])
    for row in data.itertuples():
        assert row.value == rows.loc[(row.run, row.fpr_target), "value"]


def test_most_and_least_private_models(dataset, tmp_path):
    most, least = plot_loss_histograms(dataset["summary"], dataset["outputs"], SPLITS, "loss_ce", "toy",
                                       tmp_path / "h.png")
    assert most == "dpsgd_1.0_0" and least.startswith("baseline")


def test_utility_spread_matches_numpy(dataset):
    spread = utility_spread(dataset["summary"]).set_index("target")
    summary = dataset["summary"]
    for target, mechanism in ((math.inf, "baseline"), (1.0, "dpsgd")):
        chosen = summary[(summary["mechanism"] == mechanism)
                         & ((summary["target_epsilon"] == target) if mechanism == "dpsgd" else True)]
        accuracy = chosen["test_accuracy"].to_numpy(float)
        assert spread.loc[target, "mean"] == pytest.approx(np.mean(accuracy), rel=1e-12)
        assert spread.loc[target, "std"] == pytest.approx(np.std(accuracy, ddof=1), rel=1e-12)
        assert spread.loc[target, "n_seeds"] == 2


def test_history_frame_is_long_per_epoch(dataset):
    history = history_frame(dataset["infos"])
    assert len(history) == 3 * len(GRID)
    assert history.loc[history["run"].str.startswith("baseline"), "clipped_fraction"].isna().all()


def test_utility_spread_keeps_mechanisms_at_the_same_epsilon_apart():
    summary = pd.DataFrame({
        "mechanism": pd.array(["dpsgd", "dpsgd", "output_perturbation", "output_perturbation", "baseline"],
                              dtype="string"),
        "target_epsilon": pd.array([1.0, 1.0, 1.0, 1.0, None], dtype="Float64"),
        "seed": [0, 1, 0, 1, 0], "test_accuracy": [0.8, 0.9, 0.6, 0.7, 0.95]})
    spread = utility_spread(summary).set_index(["target", "mechanism"])
    assert len(spread) == 3
    assert spread.loc[(1.0, "dpsgd"), "mean"] == pytest.approx(0.85)
    assert spread.loc[(1.0, "output_perturbation"), "mean"] == pytest.approx(0.65)
    assert spread.loc[(math.inf, "baseline"), "n_seeds"] == 1
