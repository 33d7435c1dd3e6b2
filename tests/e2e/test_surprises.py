"""Issues 26, 35 and 46 on a real tiny run: a baseline at learning rate 30 for one epoch does not
beat the majority class on held-out data and shows "no skill above the majority rate" where users
look (train.json, metrics.parquet, runs.html, its privacy card, its dossier, the terminal), in
those words and not as "did not train" (issue 46: the red banner is a broken loss's); a one-epoch DP-SGD
run at learning rate 10^3 learned (held-out accuracy 0.78 against 0.5) but is overconfident,
and gets the milder note, not the banner. The files of a run removed from the grid are listed
by make clean-orphans."""

import json
import sys

import pandas as pd
import pytest
import yaml

from tests.workflow.helpers import SNAKEMAKE, finished_run

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("surprises")

BROKEN = {"mechanism": ["baseline"], "epochs": [1], "batch_size": [32], "learning_rate": [30.0], "seed": [0]}
OVERCONFIDENT = {"mechanism": ["dpsgd"], "target_epsilon": [4], "clip_norm": [1.0], "epochs": [1],
                 "batch_size": [32], "learning_rate": [1000.0], "seed": [0]}
CONFIG = {
    "datasets": {"synthetic": {"n": 400, "d": 5, "classes": 2, "separation": 1.5, "seed": 3}},
    "training": {"hidden_units": [8]},
    "grid": [{"mechanism": ["baseline"], "epochs": [4], "batch_size": [32], "learning_rate": [0.2], "seed": [0]},
             BROKEN, OVERCONFIDENT],
    "metrics": {"epsilon_star": {"enabled": False}},
}
BANNER = "this model did not train; its privacy numbers describe a broken model"
NO_SKILL = "no skill shown above the majority rate (accuracy"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return finished_run(tmp_path_factory.mktemp("surprises"), CONFIG)


def _train_infos(workdir):
    return {path.parent.name: json.loads(path.read_text())
            for path in (workdir / "results" / "models" / "synthetic").glob("*/train.json")}


def _by_learning_rate(workdir, learning_rate):
    (name,) = [run for run, info in _train_infos(workdir).items() if info["learning_rate"] == learning_rate]
    return name


def _broken(workdir):
    return _by_learning_rate(workdir, 30.0)


def test_the_run_that_did_not_learn_is_flagged_in_train_json_and_every_metric_row(run):
    infos = _train_infos(run["workdir"])
    broken, noted = _broken(run["workdir"]), _by_learning_rate(run["workdir"], 1000.0)
    assert infos[broken]["no_skill"] is True and infos[broken]["loss_diverged"] is False
    assert infos[broken]["no_skill_reason"].startswith(NO_SKILL)
    assert infos[noted]["loss_diverged"] is False and infos[noted]["training_note"].startswith("mean training loss")
    assert infos[noted]["majority_test"]["accuracy"] > 0.7
    (baseline,) = set(infos) - {broken, noted}
    assert infos[baseline]["loss_diverged"] is False and infos[baseline]["training_note"] is None
    table = pd.read_parquet(run["workdir"] / "results" / "tables" / "metrics.parquet")
    flags = table[table["run"].notna()].groupby("run")["no_skill"].agg(["min", "max"])
    assert flags.loc[broken].tolist() == [True, True] and flags.loc[baseline].tolist() == [False, False]
    assert flags.loc[noted].tolist() == [False, False]


def test_runs_page_card_dossier_and_terminal_show_it(run):
    workdir = run["workdir"]
    broken, noted = _broken(workdir), _by_learning_rate(workdir, 1000.0)
    runs = (workdir / "results" / "tables" / "runs.html").read_text()
    assert "1 run(s) show no skill above the majority rate" in runs and f"synthetic/{broken}" in runs
    assert "run(s) did not train" not in runs
    assert "1 run(s) learned but carry a training note" in runs
    dossier = (workdir / "results" / "dossiers" / "synthetic" / f"{broken}.html").read_text()
    assert NO_SKILL.capitalize() in dossier.split("<h2>")[0] and BANNER not in dossier
    card = (workdir / "results" / "cards" / "synthetic" / f"{broken}.html").read_text()
    assert NO_SKILL.capitalize() in card.split("<body>", 1)[1][:3000]
    others = [p for p in (workdir / "results" / "dossiers" / "synthetic").glob("*.html") if p.stem != broken]
    assert others and all(BANNER not in p.read_text() and NO_SKILL.capitalize() not in p.read_text() for p in others)
    noted_head = (workdir / "results" / "dossiers" / "synthetic" / f"{noted}.html").read_text().split("<h2>")[0]
    assert "Training note" in noted_head and "overconfident" in noted_head
    terminal = run["log"].stdout + run["log"].stderr
    assert f"dpaudit: NO SKILL synthetic/{broken}: {NO_SKILL}" in terminal
    assert f"dpaudit: note synthetic/{noted}: mean training loss" in terminal


def test_the_orphan_listing_names_a_removed_runs_files(run, tmp_path):
    import subprocess

    workdir = run["workdir"]
    broken = _broken(workdir)
    smaller = tmp_path / "smaller.yaml"
    smaller.write_text(yaml.safe_dump({**CONFIG, "grid": [CONFIG["grid"][0]]}))
    command = [sys.executable, "-m", "dpaudit.orphans", "--workdir", str(workdir), "--", SNAKEMAKE,
               "--snakefile", str(run["project"] / "Snakefile"), "--directory", str(workdir),
               "--workflow-profile", str(run["project"] / "profiles" / "default"),
               "--list-untracked", "--configfile", str(smaller)]
    env = {**__import__("os").environ, **run["env"]}
    listed = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, check=True).stdout
    for expected in (f"results/models/synthetic/{broken}/train.json", f"results/metrics/mia/synthetic/{broken}.parquet",
                     f"results/dossiers/synthetic/{broken}.html", f"logs/train_model/synthetic/{broken}.log"):
        assert f"  {expected}" in listed, listed
    assert "results/tables/metrics.parquet" not in listed and "results/report.html" not in listed
    assert (workdir / f"results/models/synthetic/{broken}/train.json").exists()  # listing removes nothing
    removed = subprocess.run([*command[:3], "--remove", *command[3:]], capture_output=True, text=True,
                             timeout=600, env=env, check=True).stdout
    assert "removed" in removed and not (workdir / f"results/models/synthetic/{broken}").exists()
    assert (workdir / "results" / "tables" / "metrics.parquet").exists()
