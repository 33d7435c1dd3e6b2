"""The tiny end-to-end run, shared by every e2e module (one real run per test session)."""

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
    # practical membership privacy with 4 shadow models (Recipe C) through train_model
    "metrics": {"pmp": {"enabled": True, "shadow_models": 4, "checkpoints": 2, "partners": 32},
                # the canary audit's twin of the DP-SGD run, its rows, the ladder and both figures
                "canary": {"enabled": True, "gradient_canaries": 300, "input_canaries": 20}},
}


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    report = base / "work" / "results" / "report.html"
    return finished_run(base, TINY_CONFIG, "--report", str(report), "--report-after-run")
