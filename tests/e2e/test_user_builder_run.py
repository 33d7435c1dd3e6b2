"""A model built by the user's own function through the whole DAG (issue 33): a real run of a
tiny image dataset whose training.model is ``keras:my_builders:small_cnn``, a module that
lives outside the project (on PYTHONPATH only), with every per-run family on."""

import textwrap

import numpy as np
import pytest
import yaml

from dpaudit.contract import paths as P
from dpaudit.io import read_json, read_parquet
from tests.workflow.helpers import copy_project, snakemake

BUILDER = textwrap.dedent('''
    import tf_keras as keras


    def small_cnn(input_shape, n_classes, params, seed):
        init = keras.initializers.GlorotUniform
        return keras.Sequential([
            keras.Input(shape=input_shape),
            keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=init(seed)),
            keras.layers.GroupNormalization(2),
            keras.layers.Activation("relu"),
            keras.layers.AveragePooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(n_classes, kernel_initializer=init(seed + 1)),
        ])
''')
MODEL = "keras:my_builders:small_cnn"
CONFIG = {
    "datasets": {"synthetic_images": {"n": 240, "image_size": 8, "classes": 3, "noise": 0.8, "seed": 1}},
    "training": {"model": MODEL},
    # one DP-SGD run: every per-run family reads it (the baseline path of a user model is the
    # same build; a second run would double the test's cost, issue 33)
    "grid": [{"mechanism": ["dpsgd"], "target_epsilon": [4], "clip_norm": [1.0], "epochs": [2], "batch_size": [32],
              "seed": [0]}],
    "metrics": {"pmp": {"enabled": True, "recipe_c": True, "checkpoints": 2, "partners_max": 64},
                "attacks": {"enabled": True, "reference_models": 4},
                "canary": {"enabled": True, "gradient_canaries": 300, "input_canaries": 10}},
}


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("user_builder")
    project = copy_project(base / "project")
    (base / "builders").mkdir()
    (base / "builders" / "my_builders.py").write_text(BUILDER)
    workdir = base / "work"
    workdir.mkdir()
    config = base / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    env = {"PYTHONPATH": f"{project / 'src'}:{base / 'builders'}"}
    # every family's rows are what the test reads: the metrics table is the target (the dossiers,
    # figures and pages read the same rows and take the run's time without adding a check)
    result = snakemake(workdir, P.METRICS_TABLE, "--cores", "2", "--configfile", str(config), env=env, root=project,
                       timeout=1800)
    return {"workdir": workdir, "log": result}


def test_a_user_built_model_goes_through_every_family(user_run):
    table = read_parquet(user_run["workdir"] / "results" / "tables" / "metrics.parquet")
    runs = set(table["run"])
    assert len(runs) == 1 and all(run.endswith("_model~keras+my_builders+small_cnn") for run in runs)
    assert {"mia", "pmp", "canary", "epsilon_star", "privacy_card"} <= set(table["family"])
    # the reference-model attacks' rows (family mia)
    assert set(table.loc[table["family"] == "mia", "attack"].dropna()) >= {"lira_online", "lira_offline", "rmia"}
    for run in runs:
        train = read_json(user_run["workdir"] / P.TRAIN_INFO.format(dataset="synthetic_images", run=run))
        assert train["model"] == MODEL and train["image_shape"] == [8, 8, 1]
        if train["mechanism"] == "dpsgd":
            assert train["dp_implementation"] == "layerwise_clipping" and train["noise_check"]["passed"] is True
            audit = read_json(user_run["workdir"] / P.CANARY_AUDIT.format(dataset="synthetic_images", run=run))
            assert audit["norm_checks"] > 0 and audit["dp_implementation"] == "layerwise_clipping"
    pmp = table[(table["family"] == "pmp") & (table["mechanism"] == "dpsgd")]
    assert set(pmp.loc[pmp["metric"] == "epsilon_pmp", "status"]) == {"ok"}
    assert np.isfinite(pmp.loc[pmp["metric"] == "epsilon_pmp", "value"].astype(float)).all()
