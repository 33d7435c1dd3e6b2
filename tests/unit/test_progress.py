"""dpaudit.progress (issue 37): progress lines in a job's log, one terminal line per long job."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import numpy as np
import pytest

from dpaudit import logs, progress
from dpaudit.progress import Progress

LINE = re.compile(r"(?P<label>.+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) \((?P<pct>\d+)%\), "
                  r"(?P<rate>[0-9.e+]+) \w+/s, ETA (?P<eta>[0-9.]+ (s|min|h)|\?), [0-9.]+ (s|min|h) elapsed")


def test_lines_say_done_total_rate_and_eta(caplog, monkeypatch):
    monkeypatch.setenv("DPAUDIT_PROGRESS_SECONDS", "0")
    log = logging.getLogger("test.progress")
    with caplog.at_level(logging.INFO, logger="test.progress"), \
            Progress("chi sums", total=4, unit="blocks", log=log) as bar:
        for _ in range(4):
            bar.advance()
    lines = [r.getMessage() for r in caplog.records]
    parsed = [LINE.fullmatch(line) for line in lines[:-1]]
    assert all(parsed) and [int(p["done"]) for p in parsed] == [1, 2, 3, 4]
    assert {p["total"] for p in parsed} == {"4"} and parsed[-1]["pct"] == "100"
    assert lines[-1].startswith("chi sums: done, 4 blocks in ")


def test_a_loop_shorter_than_the_interval_logs_nothing(caplog):
    log = logging.getLogger("test.quiet")
    with caplog.at_level(logging.INFO, logger="test.quiet"), Progress("fast", total=3, log=log, interval=60) as bar:
        for _ in range(3):
            bar.advance()
    assert caplog.records == []


@pytest.mark.parametrize("value", ["ten", "-1"])
def test_a_bad_interval_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("DPAUDIT_PROGRESS_SECONDS", value)
    with pytest.raises(ValueError, match="DPAUDIT_PROGRESS_SECONDS"):
        progress.progress_interval()


def test_progress_lines_reach_the_job_log_and_one_line_the_terminal(tmp_path, monkeypatch, capfd):
    """A job (``job_logging``, the log file) running Recipe B's sized chi sums with the interval set
    to 0: its log holds the progress lines of the pilot and the final pass; with the terminal delay
    at 0 and the terminal interval long, exactly one line reaches the job's original stderr."""
    from dpaudit.extract.pmp_pairs import sized_trajectory_chi_sums

    monkeypatch.setenv("DPAUDIT_PROGRESS_SECONDS", "0")
    monkeypatch.setenv("DPAUDIT_PROGRESS_TERMINAL_SECONDS", "0")
    rng = np.random.default_rng(0)
    checkpoints = [{"steps": 10, "inputs": rng.random((1200, 5)).astype(np.float32),
                    "deltas": rng.standard_normal((1200, 4)).astype(np.float32), "layers": [(3, 2), (2, 2)]}
                   for _ in range(2)]
    fake = SimpleNamespace(log=[str(tmp_path / "job.log")], rule="extract_per_example",
                           wildcards={"dataset": "synthetic", "run": "r1"})
    with logs.job_logging(fake) as log:
        # a long terminal interval after the first line: one line per job, not one per progress line
        first = []

        def once():
            first.append(1)
            return 0.0 if len(first) == 1 else 3600.0

        monkeypatch.setattr(progress, "terminal_interval", once)
        sums = sized_trajectory_chi_sums(lambda: iter(checkpoints), n_parent=1200, n_checkpoints=2,
                                         noise_multiplier=1.0, clip=1.0, seed=0, sampling_rate=0.1, delta=1e-3,
                                         relative_standard_error=0.01, partners_max=64, log=log)
    assert sums["total"].shape[0] == 1200
    text = (tmp_path / "job.log").read_text()
    assert len(re.findall(r"Recipe B pilot chi sums: \d+/6 blocks", text)) == 6
    assert len(re.findall(r"Recipe B chi sums: \d+/6 blocks", text)) == 6
    assert "Recipe B chi sums: done, 6 blocks" in text
    terminal = capfd.readouterr().err.splitlines()
    assert len(terminal) == 1 and terminal[0].startswith("[extract_per_example dataset=synthetic run=r1] Recipe B")


def test_outside_a_job_nothing_goes_to_the_terminal(capfd):
    assert not logs.terminal_write("x", every=0.0)
    assert capfd.readouterr().err == ""


def test_the_epsilon_star_bootstrap_reports_its_resamples(caplog, monkeypatch):
    from dpaudit.metrics.epsilon_star.bootstrap import bootstrap_epsilon_star

    monkeypatch.setenv("DPAUDIT_PROGRESS_SECONDS", "0")
    rng = np.random.default_rng(0)
    with caplog.at_level(logging.INFO, logger="dpaudit.progress"):
        bootstrap_epsilon_star(rng.exponential(1.0, 300), rng.exponential(1.3, 300), 1e-3, estimator="empirical",
                               resamples=40)
    lines = [LINE.fullmatch(r.getMessage()) for r in caplog.records if r.getMessage().startswith("eps* bootstrap")
             and "done," not in r.getMessage()]
    assert lines and all(lines) and lines[-1]["done"] == lines[-1]["total"] == "40"


def test_training_and_reference_pools_report_their_steps(caplog, monkeypatch, tmp_path):
    """issue 37: the training loop (and the twin, the same loop) and the reference pools log progress."""
    import numpy as np

    from dpaudit.reference.pool_training import train_reference_models
    from dpaudit.training.train import train_model

    from .test_training import SPLITS, _dp_params, _frame

    monkeypatch.setenv("DPAUDIT_PROGRESS_SECONDS", "0")
    log = logging.getLogger("test.training_progress")
    with caplog.at_level(logging.INFO):
        train_model(_frame(), SPLITS, _dp_params(epochs=1), tmp_path / "m.keras", threads=1, log=log)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(200, 5)).astype(np.float32)
        train_reference_models(x, (x[:, 0] > 0).astype(np.int64), _dp_params(epochs=1), n_members=120, count=2, seed=1)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("training steps: ") and "/6 steps" in line for line in lines)
    assert any(line.startswith("training steps: done, 6 steps") for line in lines)
    assert any(line.startswith("2 reference models' steps (stacked): ") for line in lines)
