"""Issue 46, what the pages say: architectures told apart where a dataset has several (overview,
ladders, privacy–utility figure, runs table, dossier title); "no skill shown above the majority
rate" instead of "did not train" for the majority rule; the instability note beside the
overconfidence note; ε* in the overview as this model's empirical privacy, with its flags."""

from __future__ import annotations

import html
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dpaudit.aggregate import flagged_model_lines, runs_frame, summary_html
from dpaudit.contract.architectures import architecture_label, shown_architectures
from dpaudit.io import write_json
from dpaudit.metrics import ladder as LD
from dpaudit.plots import ladder as L
from dpaudit.plots import privacy_utility
from dpaudit.report import overview as O
from dpaudit.report.banner import DID_NOT_TRAIN, model_banner
from dpaudit.report.dossier import build_dossier
from tests.unit.test_dossier import DATASET, model_rows, run_name, table_of

CNN, KERAS = "cnn", "keras:my_models.nets:small_cnn"
NO_SKILL = "no skill shown above the majority rate (accuracy 0.61 vs majority 0.581, 236 held-out rows)"


def _run(model: str) -> str:
    return run_name("dpsgd", 1.0, 0) + "_model~" + model.replace(":", "+")


def _star_rows(run: str, *, outside: bool) -> pd.DataFrame:
    """The logit-loss ε* rows of metric_epsilon_star with the issue-46 flag rows beside them."""
    common = {"family": "epsilon_star", "loss": "logit", "dataset": DATASET, "run": run, "n_tr": 284, "n_pop": 142}
    rows = []
    for estimator, value, low, high, term, count in (("empirical", 0.684, 0.884, 2.47, "m2", 1.0),
                                                     ("parametric", 0.29, 0.1, 2.12, "m2", 0.177)):
        rows += [{**common, "metric": "epsilon_star", "estimator": estimator, "value": value, "boot_low": low,
                  "boot_high": high, "boot_mean": 1.497, "term": term, "argmax_count": count},
                 {**common, "metric": "at_resolution", "estimator": estimator, "value": np.nan,
                  "value_bool": estimator == "empirical", "term": term, "argmax_count": count,
                  "resolution": 1 / 284},
                 {**common, "metric": "outside_bootstrap_interval", "estimator": estimator, "value": np.nan,
                  "value_bool": outside and estimator == "empirical", "boot_low": low, "boot_high": high,
                  "boot_mean": 1.497},
                 {**common, "metric": "epsilon_star_bias_corrected", "estimator": estimator,
                  "value": max(0.0, 2 * value - 1.497), "ci_lower": max(0.0, 2 * value - high),
                  "ci_upper": max(0.0, 2 * value - low), "boot_mean": 1.497}]
    # the empirical 0.684 lies below the no-signal null's 0.95 quantile 2.31 (284/142 rows)
    rows.append({**common, "metric": "within_permutation_null", "estimator": "empirical", "value": np.nan,
                 "value_bool": True, "null_quantile": 2.31, "null_p_value": 0.62, "null_level": 0.95,
                 "null_permutations": 200, "null_seed": 0})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return two_architecture_table()


def two_architecture_table() -> pd.DataFrame:
    """One dataset, two DP-SGD models alike but for their architecture (the CNN shows no skill, its
    empirical ε* lies outside its bootstrap interval), and a baseline CNN (also read by
    tests/e2e/test_overview_browser.py)."""
    frames = []
    for model in (CNN, KERAS):
        frame = model_rows("dpsgd", 1.0, 0)
        frame["run"], frame["model"] = _run(model), model
        frames += [frame, _star_rows(_run(model), outside=model == CNN)]
    base = model_rows("baseline", "NA", 0)
    base["run"], base["model"] = base["run"] + "_model~cnn", CNN
    frames.append(base)
    table = table_of(*frames)
    runs = table.dropna(subset=["mechanism"]).drop_duplicates("run").set_index("run")
    for column in ("mechanism", "target_epsilon", "seed", "model", "accountant_epsilon", "accountant_delta"):
        table[column] = table["run"].map(runs[column])
    table["loss_diverged"] = False
    table["no_skill"] = table["run"] == _run(CNN)
    table["no_skill_reason"] = np.where(table["run"] == _run(CNN), NO_SKILL, None)
    return table


def test_architecture_labels_only_where_a_dataset_has_several():
    assert architecture_label(KERAS) == "keras:small_cnn" and architecture_label("mlp") == "mlp"
    assert architecture_label(None) is None and architecture_label(pd.NA) is None
    runs = pd.DataFrame({"dataset": ["a", "a", "a", "b", "b"],
                         "model": ["mlp", KERAS, None, "mlp", None]})  # None: a linear mechanism
    assert shown_architectures(runs).tolist() == ["mlp", "keras:small_cnn", pd.NA, pd.NA, pd.NA]
    assert shown_architectures(pd.DataFrame({"dataset": ["a"]})).isna().all()  # a table without models


def test_the_overview_names_each_architecture_and_says_no_skill(table):
    page = O.build_overview(table)
    rows = dict(re.findall(r'<tr(?: class="\w+")? data-dataset="toy" data-run="([^"]+)">(.*?)</tr>', page))
    names = {run: re.search(r'<a class="dossier"[^>]*>([^<]+)</a>', cells).group(1) for run, cells in rows.items()}
    assert names[_run(CNN)] == "DP-SGD · ε = 1 · seed 0 · cnn"
    assert names[_run(KERAS)] == "DP-SGD · ε = 1 · seed 0 · keras:small_cnn"
    assert len(set(names.values())) == len(names)
    unskilled = rows[_run(CNN)]
    assert '<span class="badge noskill">no skill shown</span>' in unskilled and NO_SKILL in unskilled
    assert "did not train" not in page  # the majority rule's words are what it measured
    assert '<tr class="noskill" data-dataset="toy" data-run="' + _run(CNN) in page
    assert "1 with no skill shown above the majority rate" in page


def test_one_architecture_keeps_the_names_as_they_were(table):
    one = table[table["run"] != _run(KERAS)].copy()
    one = one[~one["run"].str.startswith("mechanism~baseline")]
    page = O.build_overview(one)
    assert ">DP-SGD · ε = 1 · seed 0<" in page and "· cnn" not in page


def test_ladders_name_each_architecture(table, tmp_path):
    rows = LD.ladder_rows(table)
    verdicts = LD.run_verdicts(table)
    names = {run: LD.model_name(group.iloc[0]) for run, group in rows.groupby("run")}
    assert names[_run(KERAS)].endswith("· keras:small_cnn") and names[_run(CNN)].endswith("· cnn")
    labels = [L._grid_label(run) for _, run in L._grid_runs(rows).iterrows()]
    assert labels == ["DP-SGD ε=1, seed 0, cnn", "DP-SGD ε=1, seed 0, keras:small_cnn", "baseline, seed 0, cnn"]
    # the drawn figure carries them: the grid's y tick labels and each ladder's subtitle
    drawn = {}
    real_save = L.save_figure

    def keep(fig, png, pdf=None):
        drawn[str(png)] = ([t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
                           + [ax.get_title(loc="left") for ax in fig.axes] + [t.get_text() for t in fig.texts]
                           + [t.get_text() for ax in fig.axes for t in ax.texts])
        real_save(fig, png, pdf)

    L.save_figure = keep
    try:
        L.plot_ladder_grid(rows, verdicts, tmp_path / "grid.png")
        mine = rows[rows["run"] == _run(CNN)]
        L.plot_ladder(mine, verdicts.set_index("run").loc[_run(CNN)], tmp_path / "cnn.png")
    finally:
        L.save_figure = real_save
    grid = drawn[str(tmp_path / "grid.png")]
    assert "DP-SGD ε=1, seed 0, keras:small_cnn" in grid and "no skill shown" in grid
    single = " ".join(drawn[str(tmp_path / "cnn.png")])
    assert "DP-SGD · ε = 1 · seed 0 · cnn · toy" in single
    assert ("NO SKILL SHOWN above the majority rate (accuracy 0.61 vs majority 0.581, 236 held-out rows)" in single
            and "DID NOT TRAIN" not in single)


def test_the_privacy_utility_figure_gives_each_architecture_a_legend_entry(table, monkeypatch, tmp_path):
    from dpaudit.aggregate import summary_from_table

    legends = []

    def keep(fig, png, pdf=None):
        legends.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        markers = {label: tuple(c.get_paths()[0].vertices.round(3).ravel()[:6])
                   for ax in fig.axes for c, label in zip(ax.collections, [c.get_label() for c in ax.collections],
                                                          strict=True)}
        legends.append(markers)
        plt.close(fig)

    monkeypatch.setattr(privacy_utility, "save_figure", keep)
    summary = summary_from_table(table)
    summary["attack_auc"] = summary.get("attack_auc", pd.Series(0.52, index=summary.index)).fillna(0.52)
    privacy_utility.plot_privacy_utility(summary, tmp_path / "pu.png")
    texts, markers = legends[:-1], legends[-1]
    assert {"DP-SGD · cnn", "DP-SGD · keras:small_cnn", "non-private (ε = ∞) · cnn"} <= set(texts)
    assert markers["DP-SGD · cnn"] != markers["DP-SGD · keras:small_cnn"]  # told apart by marker too


def test_the_runs_table_has_a_model_column_and_the_issue_46_flags():
    runs = {"toy": {"a": {"mechanism": "dpsgd", "seed": 0, "model": CNN},
                    "b": {"mechanism": "dpsgd", "seed": 0, "model": KERAS}}}
    base = {"epsilon": 1.0, "delta": 1e-5, "noise_multiplier": 1.1, "accountant": "rdp", "sampling": "poisson"}
    unstable = "training was unstable: the mean training loss spiked to 38.2 at epoch 4 (from 0.12 at epoch 2)"
    frame = runs_frame(runs, {("toy", "a"): {**base, "loss_diverged": False, "no_skill": True,
                                             "no_skill_reason": NO_SKILL},
                              ("toy", "b"): {**base, "loss_diverged": False, "instability_note": unstable}})
    assert frame["no_skill"].dtype == "boolean" and frame.set_index("run")["no_skill"].to_dict() == {"a": True,
                                                                                                   "b": False}
    from dpaudit.aggregate import runs_glossary
    from dpaudit.report.tables import display_frame

    shown = display_frame(frame, runs_glossary(frame.columns)).set_index("run")
    assert shown["model"].to_dict() == {"a": CNN, "b": KERAS}
    assert shown["no skill shown"].to_dict() == {"a": "yes", "b": "no"}
    assert shown.loc["b", "unstable training"] == unstable
    page = summary_html(frame)
    assert "1 run(s) show no skill above the majority rate" in page and "did not train (column" not in page
    assert "1 run(s) trained unstably" in page


def test_terminal_lines_say_no_skill_and_the_instability_note(tmp_path):
    infos = {"a": {"loss_diverged": False, "no_skill": True, "no_skill_reason": NO_SKILL},
             "b": {"loss_diverged": False, "instability_note": "training was unstable: held-out accuracy fell"}}
    for run, info in infos.items():
        write_json(tmp_path / f"{run}.json", info)
    lines = flagged_model_lines([("toy", "a"), ("toy", "b")], str(tmp_path / "{run}.json"))
    assert lines[0].startswith(f"dpaudit: NO SKILL toy/a: {NO_SKILL}") and "DID NOT TRAIN" not in "".join(lines)
    assert lines[1] == "dpaudit: note toy/b: training was unstable: held-out accuracy fell"


def test_banners_red_only_for_a_broken_loss():
    broken = model_banner({"loss_diverged": True, "loss_divergence_reason": "training loss became non-finite (nan)"})
    assert DID_NOT_TRAIN in broken and "role='alert'" in broken
    unskilled = model_banner({"loss_diverged": False, "no_skill": True, "no_skill_reason": NO_SKILL,
                              "learning_rate": 0.05})
    assert DID_NOT_TRAIN not in unskilled and "No skill shown above the majority rate (accuracy 0.61" in unskilled
    assert "class='no-skill'" in unskilled and "#b00020" not in unskilled
    noted = model_banner({"loss_diverged": False, "training_note": "mean training loss 2.5 is above",
                          "instability_note": "training was unstable: the mean training loss spiked"})
    assert "<b>Training note</b>" in noted and "<b>Unstable training</b>" in noted
    assert noted.index("Training note") < noted.index("Unstable training")
    # the metrics table's copy (numpy booleans) reads the same
    assert model_banner({"loss_diverged": np.False_, "no_skill": np.False_}) == ""


def test_the_dossier_title_names_the_architecture_and_says_no_skill(table):
    page = build_dossier(table, DATASET, _run(CNN))
    head = page.split("<h2>")[0]
    assert "Privacy dossier: DP-SGD · target ε = 1 · seed 0 · cnn · toy" in head
    assert "No skill shown above the majority rate" in head and DID_NOT_TRAIN not in head


def test_the_overview_star_cell_says_what_epsilon_star_is_and_flags_it(table):
    page = O.build_overview(table)
    rows = dict(re.findall(r'<tr(?: class="\w+")? data-dataset="toy" data-run="([^"]+)">(.*?)</tr>', page))
    star = html.unescape(re.findall(r"<td[^>]*>(.*?)</td>", rows[_run(CNN)])[-1])
    assert f'title="{O.STAR_TOOLTIP}"' in star
    assert "not a bound on the mechanism" in O.STAR_TOOLTIP and O.STAR_CAPTION in star
    # the empirical 0.684 is the larger logit estimate: outside [0.884, 2.47], bias-corrected 2·0.684 − 1.497 → 0
    assert 'data-value="0.684"' in star and "outside its bootstrap interval" in star
    assert re.search(r'data-metric="epsilon_star_bias_corrected"[^>]*>0<', star)
    assert "at the sample's resolution: rests on one member of" in star
    assert 'data-field="n_tr">284<' in star
    assert "within the no-signal null: random relabellings of members and non-members reach" in star
    assert re.search(r'data-metric="within_permutation_null"[^>]*data-field="null_quantile"[^>]*>2.31<', star)
    other = html.unescape(re.findall(r"<td[^>]*>(.*?)</td>", rows[_run(KERAS)])[-1])
    assert "outside its bootstrap interval" not in other and O.STAR_CAPTION in other


def test_the_dossier_flags_its_epsilon_star_rows(table):
    page = html.unescape(build_dossier(table, DATASET, _run(CNN)))
    section = page.split("<h3>Epsilon*</h3>")[1].split("<h3>")[0]
    assert "this model instance's empirical privacy over records, an estimate and not a bound" in section
    assert "at the sample's resolution: the ratio rests on one member of" in section
    assert "outside its own bootstrap interval" in section and "bias-corrected" in section
    assert "within the no-signal null" in section and "permutation p = " in section
    assert re.search(r'data-metric="epsilon_star_bias_corrected"[^>]*data-field="ci_upper"[^>]*>0.484<', section)
    # the parametric row is not outside its interval: no bias-corrected form beside it
    assert section.count("bias-corrected") == 1
