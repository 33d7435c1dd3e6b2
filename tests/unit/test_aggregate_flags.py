"""A training run's loss-divergence flag reaches every metric row of that run (issue 16)."""

import math

import pandas as pd

from dpaudit.aggregate import collect_metrics, runs_frame
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import write_parquet


def _info(diverged):
    return {"epsilon": math.inf, "delta": None, "noise_multiplier": 0.0, "accountant": None, "sampling": "poisson",
            **({} if diverged is None else {"loss_diverged": diverged})}


def test_loss_diverged_is_a_boolean_run_column_joined_to_every_row(tmp_path):
    runs = {"toy": {"a": {"mechanism": "baseline", "seed": 0}, "b": {"mechanism": "baseline", "seed": 1},
                    "c": {"mechanism": "baseline", "seed": 2}}}
    frame = runs_frame(runs, {("toy", "a"): _info(True), ("toy", "b"): _info(False), ("toy", "c"): _info(None)})
    assert frame["loss_diverged"].dtype == "boolean"
    assert frame.set_index("run")["loss_diverged"].to_dict() == {"a": True, "b": False, "c": False}
    files = []
    for run in ("a", "b", "c"):
        rows = metric_rows("mia", pd.DataFrame({"metric": ["test_accuracy"], "value": [0.9], "loss": ["loss_ce"],
                                                "n_members": [10], "n_nonmembers": [10]}), dataset="toy", run=run)
        path = tmp_path / f"{run}.parquet"
        write_parquet(path, rows)
        files.append(path)
    table = collect_metrics(files, frame)
    assert table.set_index("run")["loss_diverged"].to_dict() == {"a": True, "b": False, "c": False}


def test_runs_page_shows_the_flag_and_its_reason_as_a_filterable_column():
    from dpaudit.aggregate import RUNS_GLOSSARY, summary_html

    runs = {"toy": {"a": {"mechanism": "dpsgd", "seed": 0}, "b": {"mechanism": "baseline", "seed": 1}}}
    reason = "final training loss 1.946e+04 > 0.6931, the loss of predicting the class frequencies"
    frame = runs_frame(runs, {("toy", "a"): {**_info(True), "loss_divergence_reason": reason},
                              ("toy", "b"): {**_info(False), "loss_divergence_reason": None}})
    assert frame.set_index("run")["loss_divergence_reason"].to_dict()["a"] == reason
    assert pd.isna(frame.set_index("run")["loss_divergence_reason"]["b"])
    assert list(RUNS_GLOSSARY).index("loss_diverged") < list(RUNS_GLOSSARY).index("test_accuracy")
    page = summary_html(frame)
    assert "did not train" in page and "1.946e+04" in page
    assert "1 run(s) did not train" in page and "toy/a" in page
    # the flag is a yes/no column of the filterable table
    from dpaudit.aggregate import runs_glossary
    from dpaudit.report.tables import display_frame

    shown = display_frame(frame, runs_glossary(frame.columns))
    assert shown.set_index("run")["did not train"].to_dict() == {"a": "yes", "b": "no"}


def test_a_training_note_is_its_own_column_and_a_mild_line_not_a_flag():
    from dpaudit.aggregate import summary_html

    runs = {"toy": {"a": {"mechanism": "dpsgd", "seed": 0}, "b": {"mechanism": "baseline", "seed": 1}}}
    note = "mean training loss 2.5 is above the constant predictor's 0.69 because of confident errors (max loss 96.5)"
    frame = runs_frame(runs, {("toy", "a"): {**_info(False), "training_note": note}, ("toy", "b"): _info(False)})
    assert frame.set_index("run")["training_note"].to_dict()["a"] == note
    assert pd.isna(frame.set_index("run")["training_note"]["b"])
    page = summary_html(frame)
    assert "1 run(s) learned but carry a training note" in page and "max loss 96.5" in page
    assert "did not train (column" not in page  # no red line: nothing is flagged


def test_terminal_lines_name_each_flagged_then_each_noted_model(tmp_path):
    from dpaudit.aggregate import flagged_model_lines
    from dpaudit.io import write_json

    template = str(tmp_path / "{dataset}" / "{run}" / "train.json")
    infos = {"a": {"loss_diverged": True, "loss_divergence_reason": "held-out accuracy 0.4 is not better"},
             "b": {"loss_diverged": False, "training_note": "mean training loss 2.5 is above"},
             "c": {"loss_diverged": False, "training_note": None}}
    for run, info in infos.items():
        path = tmp_path / "toy" / run / "train.json"
        path.parent.mkdir(parents=True)
        write_json(path, info)
    lines = flagged_model_lines([("toy", "b"), ("toy", "a"), ("toy", "c"), ("toy", "not_trained_yet")], template)
    assert len(lines) == 2
    assert lines[0].startswith("dpaudit: DID NOT TRAIN toy/a: held-out accuracy 0.4 is not better")
    assert lines[1] == "dpaudit: note toy/b: mean training loss 2.5 is above"
