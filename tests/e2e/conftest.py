"""The tiny end-to-end run, shared by every e2e module (one real run per test session)."""

import numpy as np
import pandas as pd
import pytest

from tests.workflow.helpers import finished_run

TINY_CONFIG = {
    "datasets": {"synthetic": {"n": 400, "d": 5, "classes": 2, "separation": 1.5, "seed": 3}},
    "training": {"hidden_units": [8]},
    "grid": [
        {"mechanism": ["baseline"], "epochs": [2], "batch_size": [32], "seed": [0]},
        {"mechanism": ["dpsgd"], "target_epsilon": [4], "clip_norm": [1.0], "epochs": [2],
         "batch_size": [32], "seed": [0]},
    ],
    # practical membership privacy, Recipe C from the DP-SGD recipe's reference pool of 4 models
    # (built for Recipe C; the attacks themselves stay off)
    "metrics": {"pmp": {"enabled": True, "recipe_c": True, "checkpoints": 2, "partners_max": 64},
                "attacks": {"reference_models": 4},
                # the canary audit's twin of the DP-SGD run, its rows, the ladder and both figures
                "canary": {"enabled": True, "gradient_canaries": 300, "input_canaries": 20}},
}


# Issue 25: one small table dataset (a CSV with numeric, text and true/false columns read
# through the table source), with one baseline run of its own.
TABLE_GRID = [{"mechanism": ["baseline"], "epochs": [2], "batch_size": [32], "seed": [0]}]


def write_tiny_table(path):
    rng = np.random.default_rng(5)
    n = 400
    label = rng.integers(0, 2, n)
    # text ids (issue 35): example_id is the data row, ids.parquet keeps them
    frame = pd.DataFrame({"row_id": [f"r{i:05d}" for i in range(1000, 1000 + n)], "income": (label + rng.normal(size=n)).round(3),
                          "region": rng.choice(["north", "south", "east"], n), "owner": rng.random(n) < 0.5,
                          "churned": np.where(label == 1, "yes", "no")})
    frame.to_csv(path, index=False)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    report = base / "work" / "results" / "report.html"
    write_tiny_table(base / "tiny_table.csv")
    table = {"source": "table", "path": str(base / "tiny_table.csv"), "label": "churned", "id": "row_id",
             "grid": TABLE_GRID}
    config = {**TINY_CONFIG, "datasets": {**TINY_CONFIG["datasets"], "tiny_table": table}}
    # issue 37: progress lines at every step of every long loop (dpaudit.progress), so the logs show them
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPAUDIT_PROGRESS_SECONDS", "0")
        return finished_run(base, config, "--report", str(report), "--report-after-run")
