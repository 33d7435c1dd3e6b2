"""Per-record risk (issue 24, items 4-5): the dossier's attack ranking and the exposed-rows page,
checked against brute force on tiny synthetic scores."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest

from dpaudit.plots.exposed import epsilon_positions, plot_exposed_rows, row_trajectories
from dpaudit.report import dossier as D
from dpaudit.report import exposed_page as E
from dpaudit.report import exposure as X
from tests.unit.test_dossier import DATASET, check_numbers, model_rows, run_name, table_of


def scores_table(member_scores, nonmember_scores, *, attack="lira_online", start=0, **others):
    n_m, n_n = len(member_scores), len(nonmember_scores)
    frame = pd.DataFrame({"example_id": np.arange(start, start + n_m + n_n),
                          "is_member": [True] * n_m + [False] * n_n,
                          "label": np.arange(n_m + n_n) % 2,
                          attack: np.asarray([*member_scores, *nonmember_scores], dtype=float)})
    for name, values in others.items():
        frame[name] = np.asarray(values, dtype=float)
    return frame


# ------------------------------------------------------------------ ranking


def test_nonmembers_at_or_above_is_the_brute_force_count():
    rng = np.random.default_rng(3)
    non = rng.integers(0, 6, 40).astype(float)  # many ties
    non[[3, 7]] = np.nan
    scores = np.r_[rng.integers(-1, 8, 30).astype(float), non[:5]]
    expected = [int(sum(1 for v in non if not math.isnan(v) and v >= s)) for s in scores]
    assert X.nonmembers_at_or_above(scores, non).tolist() == expected


def test_attack_exposed_ranks_members_with_competition_ranks_and_ties():
    frame = scores_table([0.5, 3.0, 1.0, 3.0, np.nan, 2.0], [2.5, 0.1, 3.0, 0.2])
    ranked = X.attack_exposed(frame, "lira_online", top=None)
    # brute force: members sorted by score (desc), ties by example id; NaN member left out
    members = frame[frame["is_member"] & frame["lira_online"].notna()]
    order = sorted(members.itertuples(), key=lambda r: (-r.lira_online, r.example_id))
    assert ranked["example_id"].tolist() == [r.example_id for r in order] == [1, 3, 5, 2, 0]
    for row in ranked.itertuples():
        higher = int((members["lira_online"] > row.score).sum())
        assert row.rank == higher + 1
        assert row.tied == int((members["lira_online"] == row.score).sum())
        assert row.nonmembers_at_or_above == sum(v >= row.score for v in (2.5, 0.1, 3.0, 0.2))
    assert ranked["rank"].tolist() == [1, 1, 3, 4, 5] and ranked["n_nonmembers"].eq(4).all()
    assert X.attack_exposed(frame, "lira_online", top=2)["example_id"].tolist() == [1, 3]


def test_strongest_attack_is_the_highest_finite_auc_first_in_order_on_a_tie():
    assert X.strongest_attack({"loss": 0.51, "lira_online": 0.6, "rmia": 0.58}) == "lira_online"
    assert X.strongest_attack({"loss": 0.6, "lira_online": 0.6}) == "loss"
    assert X.strongest_attack({"loss": 0.51, "lira_online": math.nan}) == "loss"
    assert X.strongest_attack({"loss": 0.51, "lira_online": 0.7}, available=["loss", "rmia"]) == "loss"
    assert X.strongest_attack({}) is None


def test_attack_aucs_reads_the_runs_attack_rows_only():
    table = pd.DataFrame({"dataset": DATASET, "run": ["a", "a", "a", "b", "a"], "family": "mia",
                          "metric": ["attack_auc", "attack_auc", "tpr_at_fpr", "attack_auc", "attack_auc"],
                          "attack": ["rmia", "loss", "rmia", "lira_online", pd.NA],
                          "value": [0.6, 0.55, 0.1, 0.9, 0.52]})
    aucs = X.attack_aucs(table, DATASET, "a")
    assert list(aucs) == ["loss", "rmia"] and float(aucs["rmia"]["value"]) == 0.6
    assert X.attack_aucs(table.drop(columns="attack"), DATASET, "a") == {}


def test_flagged_rows_maps_the_profile_row_and_names_the_audits():
    table = pd.DataFrame([
        {"dataset": "breast_cancer", "run": pd.NA, "family": "profile", "metric": "delta_max", "value": 0.1,
         "view": "v2", "y_max_row_id": 76},
        {"dataset": "breast_cancer", "run": pd.NA, "family": "profile", "metric": "delta_max", "value": 0.2,
         "view": "v1", "y_max_row_id": 76},
        {"dataset": "breast_cancer", "run": pd.NA, "family": "profile", "metric": "epsilon_low", "value": 1.0,
         "view": "v1", "y_max_row_id": pd.NA},
    ])
    records = {"r1": {"example_id": 152, "shift_norm": 0.01}, "r2": {"example_id": 152, "shift_norm": 0.01},
               "r3": {"example_id": None, "shift_norm": 0.02}}
    audit = pd.DataFrame({"dataset": ["breast_cancer", "breast_cancer", "digits"], "pair": ["max1", "min1", "max1"],
                          "example_id_xstar": [7, 7, 9]})
    flags = X.flagged_rows(table, "breast_cancer", canary_records=records, audit_runs=audit)
    # source rows are 1-based, example ids 0-based: row 76 is example 75
    assert flags[75] == ["privacy-profile δ_max row of view v1 (source row 76)",
                         "privacy-profile δ_max row of view v2 (source row 76)"]
    assert flags[152] == ["worst-case neighbour of the linear canary audit (2 runs)"]
    assert flags[7] == ["x* of the identifiability audit (pair max1, min1)"] and 9 not in flags
    # a dataset whose ids are not the profile source's rows gets no profile flag
    assert X.flagged_rows(table.assign(dataset="synthetic"), "synthetic") == {}


# ------------------------------------------------------------------ the dossier's section 4


def attacked_table():
    run = run_name("dpsgd", 1.0, 0)
    aucs = pd.DataFrame({"dataset": DATASET, "run": run, "family": "mia", "metric": "attack_auc",
                         "attack": ["loss", "lira_online", "rmia"], "value": [0.52, 0.5912, 0.58],
                         "ci_lower": [0.46, 0.55, 0.54], "ci_upper": [0.58, 0.63, 0.62]})
    return table_of(model_rows("dpsgd", 1.0, 0), aucs), run


def test_dossier_ranks_by_the_strongest_attack_and_counts_nonmembers_at_or_above():
    table, run = attacked_table()
    rng = np.random.default_rng(0)
    member, non = rng.normal(1, 1, 30), rng.normal(0, 1, 50)
    scores = scores_table(member, non, loss=rng.normal(size=80), rmia=rng.uniform(size=80))
    page = D.build_dossier(table, DATASET, run, attack_scores=scores, row_flags={int(np.argmax(member)): ["flag A"]})
    assert "Ranked by <strong>LiRA online</strong>, the strongest attack" in page
    assert "holds the runner-up" in page  # 0.58 lies in [0.55, 0.63]
    assert "loss ranking" not in page
    section = page.split("<h2>4 Exposure")[1].split("<h2>5")[0]
    shown = re.findall(r'data-field="example_id">(\d+)</span>.*?data-h="non-members scoring ≥ it">(\d+) of (\d+)',
                       section)
    best = np.argsort(-member, kind="stable")[:5]
    assert [int(e) for e, _, _ in shown] == best.tolist()
    for (_example, k, n), expected in zip(shown, best, strict=True):
        assert int(k) == int((non >= member[expected]).sum()) and int(n) == 50
    assert "flag A" in section
    assert check_numbers(page, table) >= 3  # the AUCs are traced to their rows


def test_dossier_says_it_is_the_loss_ranking_without_scores_and_when_auc_holds_half():
    table, run = attacked_table()
    outputs = pd.DataFrame({"example_id": [1, 2, 3, 4], "split": ["train", "train", "holdout", "holdout"],
                            "label": [0, 1, 0, 1], "loss_ce": [0.2, 0.01, 0.1, 0.3]})
    page = D.build_dossier(table, DATASET, run, outputs=outputs, splits={"members": "train", "nonmembers": "holdout"})
    assert "This is the <strong>loss ranking</strong> (no reference-model attack scores" in page
    weak = table.assign(ci_lower=np.where(table["metric"] == "attack_auc", 0.49, np.nan))
    scores = scores_table([1.0, 2.0], [0.5, 1.5], loss=[0, 0, 0, 0], rmia=[0, 0, 0, 0])
    assert "not distinguishable from guessing" in D.build_dossier(weak, DATASET, run, attack_scores=scores)
    tied = scores_table([1.0] * 8, [0.5, 1.5], loss=[0] * 10, rmia=[0] * 10)
    text = D.build_dossier(table, DATASET, run, attack_scores=tied)
    assert "3 more member(s) tie with the last row shown" in text and "1 (8 tied)" in text


# ------------------------------------------------------------------ the exposed-rows page


def grid_scores():
    """Three runs over the same 6 members (ids 0-5) and 4 non-members (ids 6-9)."""
    runs = {"b0": {"mechanism": "baseline", "target_epsilon": None, "seed": 0},
            "e1s0": {"mechanism": "dpsgd", "target_epsilon": 1.0, "seed": 0},
            "e1s1": {"mechanism": "dpsgd", "target_epsilon": 1.0, "seed": 1}}
    scores = {"b0": scores_table([6, 5, 4, 3, 2, 1], [0, 0, 0, 7]),
              "e1s0": scores_table([1, 5, 5, 5, 0, 0], [0, 1, 2, 3]),  # ties at the cut (k = 2)
              "e1s1": scores_table([0, 9, 8, 1, 1, 1], [0, 0, 0, 0])}
    return scores, runs


def test_top_rows_weights_are_the_chance_of_making_the_cut_under_random_tie_order():
    scores, runs = grid_scores()
    top = E.top_rows_per_run(scores, dict.fromkeys(scores, "lira_online"), top=2)
    e1 = top[top["run"] == "e1s0"].set_index("example_id")["weight"]
    assert e1.to_dict() == pytest.approx({1: 2 / 3, 2: 2 / 3, 3: 2 / 3})
    assert top.groupby("run")["weight"].sum().tolist() == pytest.approx([2, 2, 2])
    # brute force: every order of the tied rows, the expected overlap of e1s0's and e1s1's top 2
    tied = [1, 2, 3]
    overlaps = [len(set(order[:2]) & {1, 2}) / 2 for order in itertools.permutations(tied)]
    matrix = E.overlap_matrix(top, {r: (math.inf if r == "b0" else 1.0) for r in runs}, 2)
    assert matrix.loc[1.0, 1.0] == pytest.approx(np.mean(overlaps))
    # baseline's top 2 is {0, 1}: against e1s0 (1 with 2/3) and e1s1 (1 surely), mean of 1/3 and 1/2
    assert matrix.loc[math.inf, 1.0] == pytest.approx(np.mean([(2 / 3) / 2, 1 / 2]))
    assert math.isnan(matrix.loc[math.inf, math.inf])  # one seed: no pair


def test_persistence_counts_runs_and_sorts_by_expected_count():
    scores, runs = grid_scores()
    targets = {r: (math.inf if r == "b0" else 1.0) for r in runs}
    top = E.top_rows_per_run(scores, dict.fromkeys(scores, "lira_online"), top=2)
    table = E.persistence(top, targets).set_index("example_id")
    assert table.loc[1, "runs_in_top"] == 2 and table.loc[1, "runs_tied"] == 1
    assert table.loc[1, "expected"] == pytest.approx(2 + 2 / 3)
    assert table.loc[1, "epsilons"] == [1.0, math.inf] and table.loc[1, "best_rank"] == 1
    assert E.persistence(top, targets)["example_id"].iloc[0] == 1
    assert E.dataset_attack({"a": "rmia", "b": "loss", "c": "rmia"}, {}) == "rmia"
    assert E.dataset_attack({"a": "rmia", "b": "loss"}, {"a": {"rmia": 0.6}, "b": {"loss": 0.7}}) == "loss"


def test_positions_put_the_baseline_apart_and_trajectories_count_nonmembers():
    assert epsilon_positions([4.0, math.inf, 1.0, 16.0]) == {1.0: 0.0, 4.0: 1.0, 16.0: 2.0, math.inf: 3.7}
    assert epsilon_positions([math.inf]) == {math.inf: 0.0}
    scores, runs = grid_scores()
    lines = row_trajectories(scores, runs, "lira_online", [1, 2])
    row = lines[(lines["run"] == "b0") & (lines["example_id"] == 1)].iloc[0]
    assert row["target"] == math.inf and row["score"] == 5 and row["nonmembers_at_or_above"] == 1
    assert row["nonmember_median"] == 0.0 and len(lines) == 6


def test_exposed_page_answers_with_the_overlap_and_draws_the_figure(tmp_path):
    scores, runs = grid_scores()
    rows = [{"dataset": DATASET, "run": run, "family": "mia", "metric": "attack_auc", "attack": attack,
             "value": value, "ci_lower": value - 0.05, "ci_upper": value + 0.05}
            for run in runs for attack, value in (("lira_online", 0.7), ("loss", 0.6))]
    table = pd.DataFrame(rows)
    analysis = E.exposed_analysis(table, DATASET, scores, runs, top=2)
    plot_exposed_rows(**analysis.figure(), dataset=DATASET, png=tmp_path / "f.png", pdf=tmp_path / "f.pdf")
    page = E.build_exposed_page(analysis, DATASET, png=tmp_path / "f.png",
                                flags={1: ["privacy-profile δ_max row of view v"]})
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "f.pdf").stat().st_size > 0
    assert "The same rows at every ε?" in page and "∞ (baseline)" in page
    assert "<strong>1</strong> row(s) are in the top 2 of some model at every ε" in page
    assert "privacy-profile δ_max row of view v" in page and page.rstrip().endswith("</html>")
    nothing = E.exposed_analysis(table, DATASET, {}, {})
    plot_exposed_rows(**nothing.figure(), dataset=DATASET, png=tmp_path / "e.png")
    empty = E.build_exposed_page(nothing, DATASET, png=tmp_path / "e.png")
    assert "nothing to rank" in empty
