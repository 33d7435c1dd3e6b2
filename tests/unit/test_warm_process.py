"""Issue 36 part 4: a run trained in a warm process (after other runs, in one interpreter)
gives the outputs a fresh process gives, bit for bit.

Oracle: the same library call in another interpreter, where other cases ran before it or
none did. Two subprocesses run the same cases in opposite orders, so every case runs once
after a different history, and the first case of each order runs in a fresh interpreter
(the released DP-SGD run in one, a user-built CNN in the other): a leak of any
state from one run into the next (TensorFlow's global seed and op-seed counters, Keras'
name and seed counters, traced-function caches, numpy's global generator, module caches)
shows as a difference between the two copies of a case. Compared: every weight array of
the saved model (``np.array_equal`` after loading the file), the saved model's config,
train.json without its timing fields, the canary scores Parquet (bytes) and the audit
record, the reference pool's Parquet (bytes) and its record. And no run leaves its traced step
alive in TensorFlow's process-global gradient registry (memory that grew with every run).

Run as a script, this file is the worker: ``python test_warm_process.py OUT CASE...``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}
# issue 36: train.json keys (at any depth) that measure wall-clock time, not the run
TIMING_KEYS = frozenset({"seconds", "wall_time_seconds", "train_seconds", "mechanism_check_seconds",
                         "twin_train_seconds", "twin_loop_seconds", "released_train_seconds"})
# released-run recipes (the default grid's shape on tiny data)
_MLP = {"optimizer": "sgd", "momentum": 0.9, "hidden_units": [16], "activation": "relu", "dropout": 0.0,
        "delta": 1e-4, "accountant": "rdp", "sampling": "poisson", "epochs": 2, "batch_size": 20,
        "learning_rate": 0.05}
_DPSGD = {**_MLP, "mechanism": "dpsgd", "target_epsilon": 1.0, "clip_norm": 1.0}
_CNN = {**_DPSGD, "model": "cnn", "image_shape": [4, 4, 1], "conv_filters": [3], "hidden_units": [6],
        "epochs": 1}
CANARY = {"gradient_canaries": 200, "input_canaries": 10, "gradient_norm_factor": 10.0, "seed": 0,
          "confidence": 0.95}


def _frame(seed=0, n=(120, 60, 40), d=16):
    rng = np.random.default_rng(seed)
    total = sum(n)
    x = rng.normal(size=(total, d)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    return pd.DataFrame({"example_id": np.arange(total, dtype=np.int64) + 100,
                         "split": np.repeat(list(SPLITS.values()), n), "label": y, "x": list(x)})


# ------------------------------------------------------------------ the worker (in a subprocess)

def _save_model_outputs(out: Path, info: dict) -> None:
    from dpaudit.io import write_json
    from dpaudit.training.models import load_model

    write_json(out / "train.json", info)
    np.savez(out / "weights.npz", *load_model(out / "model.keras").get_weights())


def _train(out: Path, params: dict) -> None:
    from dpaudit.training.train import train_model

    info = train_model(_frame(), SPLITS, params, out / "model.keras", threads=1, log=_log())
    _save_model_outputs(out, info)


def _twin(out: Path, params: dict) -> None:
    from dpaudit.audit.twin import canary_scores
    from dpaudit.dp import accounting
    from dpaudit.io import write_json, write_parquet

    # the released run's train.json fields the twin checks, from the accountant alone (no
    # TensorFlow before the twin in this case)
    n, b, epochs = 120, params["batch_size"], params["epochs"]
    sigma = accounting.calibrate_noise(params["target_epsilon"], b / n, epochs * n // b, params["delta"],
                                       params["accountant"], params["sampling"])
    eps = accounting.dpsgd_epsilon(sigma, b / n, epochs * n // b, params["delta"], params["accountant"],
                                   params["sampling"])["epsilon"]
    train = {"noise_multiplier": sigma, "sampling_probability": b / n, "steps": epochs * n // b, "epsilon": eps}
    scores, record = canary_scores(_frame(), SPLITS, params, train, CANARY, threads=1, log=_log(), run="r")
    write_parquet(out / "scores.parquet", scores)
    write_json(out / "audit.json", record)


def _pool(out: Path, params: dict) -> None:
    from dpaudit.io import write_json, write_parquet
    from dpaudit.reference.pool import build_reference_pool

    recipe = {k: v for k, v in params.items() if k != "seed"}
    recorded = None
    if params["mechanism"] == "dpsgd":
        recipe = {**recipe, "noise_multiplier": 1.0, "target_epsilon": None}
    frame, info = build_reference_pool(_frame(), SPLITS, {**recipe, "n_classes": 2}, count=4, seed=3, threads=1,
                                       runs=["r"], recorded=recorded, log=_log())
    write_parquet(out / "outputs.parquet", frame)
    write_json(out / "pool.json", info)


def _threads(out: Path, params: dict) -> None:
    """Another thread count in a process whose pools are set: kept, warned about, recorded as kept."""
    import logging

    from dpaudit import _tf
    from dpaudit.io import write_json
    from dpaudit.training.train import train_model

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    messages: list[str] = []
    logging.getLogger("dpaudit.tf").addHandler(Keep())
    same = _tf.configure(1, 0)
    other = _tf.configure(2, 0)
    info = train_model(_frame(), SPLITS, params, out / "model.keras", threads=2, log=_log())
    write_json(out / "threads.json", {"same": same, "other": other, "recorded": info["threads"],
                                      "warnings": messages})


# A user's builder that names no layer (tests/unit/user_builders.py): Keras numbers such names
# per process. (A CNN reference pool, which trains its models one after another with
# train_model's seeding, is left out to keep this test short.)
_USER = {**_CNN, "model": "keras:tests.unit.user_builders:small_cnn"}
CASES = {
    "dpsgd_eps1_seed0": (_train, {**_DPSGD, "seed": 0}),
    "dpsgd_eps1_seed1": (_train, {**_DPSGD, "seed": 1}),
    "baseline_seed0": (_train, {**_MLP, "mechanism": "baseline", "seed": 0}),
    "baseline_dropout_seed1": (_train, {**_MLP, "mechanism": "baseline", "dropout": 0.3, "seed": 1}),
    "twin_eps1_seed0": (_twin, {**_DPSGD, "seed": 0}),
    # in the middle of both orders: a set process's pools asked for another count
    "threads": (_threads, {**_MLP, "mechanism": "baseline", "seed": 0}),
    "pool_dpsgd": (_pool, {**_DPSGD, "seed": 0}),
    "pool_baseline": (_pool, {**_MLP, "mechanism": "baseline", "seed": 0}),
    "user_dpsgd_seed0": (_train, {**_USER, "seed": 0}),
    "user_dpsgd_seed1": (_train, {**_USER, "seed": 1}),
}


def _log():
    import logging

    return logging.getLogger("warm_process")


def _work(out: Path, names: list[str]) -> None:
    from dpaudit import _tf  # noqa: F401  (TensorFlow through its one import boundary)

    ops = sys.modules["tensorflow.python.framework.ops"]  # TF's own registry: no public way to read it

    for name in names:
        function, params = CASES[name]
        (out / name).mkdir(parents=True)
        function(out / name, dict(params))
    # what a traced step left in TensorFlow's process-global gradient registry, which keeps the
    # step's graph alive (7.5 MB per DP-SGD run before ``gradient_paths.ONE_REPLICA``)
    kept = [key for key in ops._gradient_registry._registry if key.startswith("CustomGradient")]
    (out / "registry.json").write_text(json.dumps(kept))


# ------------------------------------------------------------------ the test (in pytest)

def _strip_timing(value):
    if isinstance(value, dict):
        return {k: _strip_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_strip_timing(v) for v in value]
    return value


def _model_config(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def _start(out: Path, names: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    out.mkdir(parents=True)
    with open(out / "worker.log", "w") as log:  # a file, not a pipe: two workers never block on output
        return subprocess.Popen([sys.executable, __file__, str(out), *names], env=env, stdout=log,
                                stderr=subprocess.STDOUT)


def _finish(worker: subprocess.Popen, out: Path, names: list[str]) -> None:
    if worker.wait(timeout=600):
        pytest.fail(f"worker {names} failed:\n{(out / 'worker.log').read_text()[-4000:]}")


def _differences(a: Path, b: Path) -> list[str]:
    """What differs between two copies of one case's outputs (empty when they are the same)."""
    problems = []
    files = sorted(p.name for p in a.iterdir())
    if files != sorted(p.name for p in b.iterdir()):
        return [f"files {files} vs {sorted(p.name for p in b.iterdir())}"]
    for name in files:
        if name == "weights.npz":
            wa, wb = np.load(a / name), np.load(b / name)
            if sorted(wa.files) != sorted(wb.files):
                problems.append("weight arrays")
            problems += [f"weight array {k}" for k in wa.files if not np.array_equal(wa[k], wb[k])]
        elif name == "model.keras":
            if _model_config(a / name) != _model_config(b / name):
                problems.append("model config")
        elif name.endswith(".json"):
            ja, jb = (_strip_timing(json.loads((d / name).read_text())) for d in (a, b))
            if ja != jb:
                keys = [k for k in ja if ja.get(k) != jb.get(k)]
                problems.append(f"{name} keys {keys}")
        elif name.endswith(".parquet"):
            if (a / name).read_bytes() != (b / name).read_bytes():
                same = pd.read_parquet(a / name).equals(pd.read_parquet(b / name))
                problems.append(f"{name} bytes (frames {'equal' if same else 'differ'})")
        else:
            problems.append(f"unexpected file {name}")
    return problems


def test_every_case_gives_the_same_outputs_after_any_history(tmp_path):
    names = list(CASES)
    orders = {"forward": names, "backward": names[::-1]}
    # one thread each, both at once: the wall time of one
    workers = {order: _start(tmp_path / order, run) for order, run in orders.items()}
    for order, worker in workers.items():
        _finish(worker, tmp_path / order, orders[order])
    forward, backward = tmp_path / "forward", tmp_path / "backward"
    problems = {name: d for name in names if (d := _differences(forward / name, backward / name))}
    assert problems == {}, f"outputs depend on what ran before in the process: {problems}"
    for order in orders:  # nothing a run traced outlives it in TensorFlow's global registry
        assert json.loads((tmp_path / order / "registry.json").read_text()) == []
    threads = json.loads((forward / "threads" / "threads.json").read_text())
    assert (threads["same"], threads["other"], threads["recorded"]) == (1, 1, 1)
    assert len(threads["warnings"]) == 2 and all("asked for 2 and runs on 1" in w for w in threads["warnings"])


def test_the_comparison_sees_a_one_bit_change(tmp_path):
    """The checker itself: a different seed, a changed weight bit or a changed Parquet byte is a difference."""
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        np.savez(d / "weights.npz", np.arange(4, dtype=np.float32))
        (d / "train.json").write_text(json.dumps({"seed": 0, "history": [{"seconds": 1.0, "loss": 0.5}],
                                                  "train_seconds": 2.0}))
    (b / "train.json").write_text(json.dumps({"seed": 0, "history": [{"seconds": 9.0, "loss": 0.5}],
                                              "train_seconds": 3.0}))
    assert _differences(a, b) == []  # timings only
    np.savez(b / "weights.npz", np.nextafter(np.arange(4, dtype=np.float32), 9))
    (b / "train.json").write_text(json.dumps({"seed": 0, "history": [{"seconds": 1.0, "loss": 0.50001}]}))
    assert _differences(a, b) == ["train.json keys ['history']", "weight array arr_0"]


if __name__ == "__main__":
    _work(Path(sys.argv[1]), sys.argv[2:])
