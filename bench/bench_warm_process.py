"""Benchmark (issue 36): what the 2nd..Nth run costs in a warm process, against the first.

Run: ``PYTHONPATH=src .venv/bin/python bench/bench_warm_process.py [--datasets synthetic,digits]
[--families train,twin,pool] [--threads 1]``. One process does, per dataset of the config
(default ``config/config.yaml``: synthetic n=2000 d=20, breast_cancer, digits; MLP with 64 hidden
units), what the batched jobs of issue 36 would do one after another: ``train_model`` for every
run of the grid (with the pmp family's checkpoints, as the default run trains), ``canary_scores``
for every DP-SGD run (the config's canary options), ``build_reference_pool`` for every recipe
(the attacks family's K and seed); then the first call of each family once more, which costs
what an identical run costs warm (the first call's extra is the tracing of its steps and, for
the process's very first, TensorFlow's runtime start). That repeat's outputs are checked equal
to the first's (train.json and audit/pool records without timing fields, model weights).

Prints one JSON object per call (``{"bench": "warm_call", ...}``: seconds, the process's RSS
after it) and per (dataset, family) a summary: first call, median and max of the others, the
repeat of the first; ``startup_seconds`` is the imports a fresh job pays before its first run.
``--trace``: per run of a warm process, its first step's tracing against a later step's time.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from dpaudit import _tf  # noqa: E402,F401  (the TensorFlow import a training job pays)
from dpaudit.audit.twin import canary_scores  # noqa: E402
from dpaudit.reference.pool import build_reference_pool  # noqa: E402
from dpaudit.training.train import train_model  # noqa: E402

STARTUP = time.perf_counter() - _T0
TIMING = ("seconds", "wall_time_seconds", "train_seconds", "mechanism_check_seconds", "twin_train_seconds",
          "twin_loop_seconds", "released_train_seconds")
LOG = logging.getLogger("bench_warm_process")


def _emit(**record) -> None:
    print(json.dumps(record), flush=True)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _same(a, b) -> bool:
    return json.dumps(_strip(a), sort_keys=True, default=str) == json.dumps(_strip(b), sort_keys=True, default=str)


def _weights(path: Path) -> list[np.ndarray]:
    from dpaudit.training.models import load_model

    return load_model(path).get_weights()


def _config(path: str) -> dict:
    from dpaudit.config import validate_config
    from dpaudit.configfile import read_config_file

    return validate_config(read_config_file(path))


def _dataset(name: str, params: dict, delta, out: Path) -> tuple:
    """examples.parquet as the workflow writes and a job reads it, dataset.json's info, δ."""
    from dpaudit.contract.delta import resolve_delta
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.io import read_parquet, write_parquet

    table, info = prepare_dataset(name, {}, params)
    write_parquet(out / f"{name}.parquet", table)
    resolved, _ = resolve_delta(delta, info["n_members"], name="config.training.delta")
    return read_parquet(out / f"{name}.parquet"), info, resolved


def trace_costs(threads: int, d: int = 20, hidden: int = 64, batch: int = 64) -> None:
    """Per run, the tracing a warm process still pays: each run builds its own model and step
    functions, so its first step (and first noise-only step) trace again; later steps do not."""
    from dpaudit.audit.mechanism_checks import monitor_for
    from dpaudit.training.models import build_mlp, logits_model
    from dpaudit.training.steps import build_train_step

    tf = _tf.tf
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, d)).astype(np.float32))
    y = tf.constant(rng.integers(0, 2, batch).astype(np.int64))
    for mechanism in ("baseline", "dpsgd"):
        for run in range(3):
            _tf.configure(threads, run)
            net = logits_model(build_mlp(d, {"hidden_units": [hidden], "n_classes": 2}, seed=run))
            monitor = monitor_for(net, steps=64, seed=run) if mechanism == "dpsgd" else None
            step, noise_step, _ = build_train_step(net, mechanism=mechanism, optimizer="sgd", learning_rate=0.05,
                                                   momentum=0.9, clip_norm=1.0, noise_multiplier=1.0,
                                                   expected_batch_size=batch, noise_monitor=monitor)
            t0 = time.perf_counter()
            step(x, y)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(20):
                step(x, y)
            later = (time.perf_counter() - t0) / 20
            noise = None
            if noise_step is not None:
                t0 = time.perf_counter()
                noise_step()
                noise = round(time.perf_counter() - t0, 4)
            _emit(bench="warm_trace", mechanism=mechanism, run_in_process=run, first_step_seconds=round(first, 4),
                  later_step_seconds=round(later, 5), first_noise_step_seconds=noise, d=d, hidden=hidden, batch=batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--datasets", default=None, help="comma-separated; default: every dataset of the config")
    parser.add_argument("--families", default="train,twin,pool")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trace", action="store_true", help="also time one step's tracing per run (MLP 64)")
    args = parser.parse_args()
    from dpaudit import config as dpconfig

    config = _config(args.config)
    families = args.families.split(",")
    datasets = args.datasets.split(",") if args.datasets else sorted(config["datasets"])
    grids = dpconfig.dataset_grids(config)
    pmp = config["metrics"]["pmp"]
    checkpoints = pmp["checkpoints"] if pmp["enabled"] else 0
    canary = config["metrics"]["canary"]
    attacks = config["metrics"]["attacks"]
    _emit(bench="warm_startup", startup_seconds=round(STARTUP, 2), rss_mb=round(_rss_mb(), 1))
    out = Path(tempfile.mkdtemp(prefix="bench_warm_"))
    for name in datasets:
        examples, info, delta = _dataset(name, config["datasets"][name], config["training"]["delta"], out)
        runs = dpconfig.run_lookup(grids[name])
        recipes = dpconfig.recipe_lookup(runs)

        # rules/common.smk's TRAINING and rules/train.smk's model_training (MLP datasets)
        training = {**{k: v for k, v in config["training"].items() if k != "allow_large_delta"},
                    **config["datasets"][name].get("training", {})}

        def params_of(row, delta=delta, training=training):
            return {**dpconfig.training_for_mechanism(training, row["mechanism"]), **row, "delta": delta}

        trained: dict[str, dict] = {}

        def train(run, tag="", name=name, examples=examples, info=info, runs=runs, trained=trained):
            path = out / f"{name}_{run}{tag}.keras"
            result = train_model(examples, info["splits"], params_of(runs[run]), path, threads=args.threads, log=LOG,
                                 checkpoints=checkpoints, checkpoint_path=out / f"{name}_{run}{tag}.npz", run=run,
                                 dataset=name)
            trained.setdefault(run, result)
            return result, path

        def twin(run, examples=examples, info=info, runs=runs, trained=trained):
            return canary_scores(examples, info["splits"], params_of(runs[run]), trained[run], canary,
                                 threads=args.threads, log=LOG, run=run)

        def pool(recipe, examples=examples, info=info, recipes=recipes, trained=trained):
            spec = recipes[recipe]
            params = {**params_of(spec["params"]), "n_classes": int(info["classes"])}
            return build_reference_pool(examples, info["splits"], params, count=attacks["reference_models"],
                                        seed=attacks["seed"], threads=args.threads, runs=spec["runs"],
                                        recorded=trained.get(spec["runs"][0]), log=LOG)

        calls = {"train": (train, list(runs)),
                 "twin": (twin, [r for r in runs if runs[r]["mechanism"] == "dpsgd"] if canary["enabled"] else []),
                 "pool": (pool, list(recipes) if attacks["enabled"] else [])}
        for family in ("train", "twin", "pool"):  # twins and pools read the trained runs' train.json
            if family not in families and not (family == "train" and {"twin", "pool"} & set(families)):
                continue
            function, keys = calls[family]
            seconds, first = [], None
            for key in keys:
                t0 = time.perf_counter()
                result = function(key)
                seconds.append(time.perf_counter() - t0)
                first = first if first is not None else result
                _emit(bench="warm_call", dataset=name, family=family, key=key, seconds=round(seconds[-1], 3),
                      rss_mb=round(_rss_mb(), 1))
            if not keys or family not in families:
                continue
            t0 = time.perf_counter()
            again = function(keys[0], "_again") if family == "train" else function(keys[0])
            repeat = time.perf_counter() - t0
            if family == "train":  # the same run under another file name
                same = _same({**first[0], "model_file": None}, {**again[0], "model_file": None}) and all(
                    np.array_equal(a, b) for a, b in zip(_weights(first[1]), _weights(again[1]), strict=True))
            else:
                same = first[0].equals(again[0]) and _same(first[1], again[1])
            rest = seconds[1:]
            _emit(bench="warm_summary", dataset=name, family=family, calls=len(seconds),
                  first_seconds=round(seconds[0], 3),
                  others_median_seconds=round(statistics.median(rest), 3) if rest else None,
                  others_max_seconds=round(max(rest), 3) if rest else None,
                  first_again_seconds=round(repeat, 3), repeat_identical=bool(same), rss_mb=round(_rss_mb(), 1))
    if args.trace:
        trace_costs(args.threads)


if __name__ == "__main__":
    main()
