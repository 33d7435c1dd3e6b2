"""Parse-time checks of ``training.model`` per dataset (``dpaudit.config.validate_config`` calls them).

The model each dataset's runs train with (``training`` with the dataset's own ``training``
keys over it) is built once on the dataset's shape (``architectures.check_model``): a cnn
needs an image dataset, a user's builder is imported and called, and under DP-SGD every
layer must have an exact per-example path. The dataset's shape comes from
``image_shape_before_prepare`` (images) or the config's feature count; where neither is known
before the data are prepared (a table or arrays file still to be downloaded) the check waits
for the training job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

__all__ = ["image_shape_before_prepare", "model_problems", "model_run_suffix"]


def image_shape_before_prepare(name: str, params: Mapping[str, Any]) -> list[int] | None:
    """[H, W, C] of an image dataset known before it is prepared (None otherwise)."""
    from dpaudit.data.arrays import IMAGES_DEFAULTS, inspect_arrays
    from dpaudit.data.datasets import IMAGE_SHAPES

    if params.get("source") == "arrays":
        try:
            return list(inspect_arrays(name, params).image_shape)
        except ValueError:
            return None  # refused by the arrays check, which names the problem
    if params.get("source") is None and name == "synthetic_images":
        size = int(params.get("image_size", IMAGES_DEFAULTS["image_size"]))
        return [size, size, int(params.get("channels", IMAGES_DEFAULTS["channels"]))]
    if params.get("source") is None:
        shape = IMAGE_SHAPES.get(name)
        return None if shape is None else list(shape)
    return None


def model_run_suffix(model) -> str:
    """What a run's (and a recipe's) model adds to its name: nothing for the MLP (or NA: a
    linear mechanism), else ``_model~<model>`` with keras:pkg.module:function written
    keras+pkg.module+function (a ':' has no place in a file name)."""
    if model is None or model is pd.NA or str(model) == "mlp":
        return ""
    return "_model~" + str(model).replace(":", "+")


def model_problems(config: Mapping, grids: Mapping[str, tuple[str, list[dict]]],
                   features_of: Callable[[str, Mapping], int | None],
                   classes_of: Callable[[str, Mapping], int | None]) -> list[str]:
    """One message per model of a dataset's runs (training.model, the grid's model values) that
    cannot train, naming the key and the fix."""
    problems = []
    for name, params in config["datasets"].items():
        own = params.get("training", {})
        training = {**config["training"], **own}
        default = str(training.get("model", "mlp"))
        key = f"config.datasets.{name}.training.model" if "model" in own else "config.training.model"
        models: dict[str, set[str]] = {}  # each model of the dataset's runs → the mechanisms it trains with
        for block in grids[name][1]:
            for model in block.get("model", [default]):
                models.setdefault(str(model), set()).update(set(block["mechanism"]) & {"baseline", "dpsgd"})
        for model, mechanisms in models.items():
            if model != "mlp" and mechanisms:
                where = key if model == default else f"{grids[name][0]} model {model!r}"
                problems.extend(_model_problems(name, params, training, model, mechanisms, where, features_of,
                                                classes_of))
    return problems


def _model_problems(name, params, training, model, mechanisms, key, features_of, classes_of) -> list[str]:
    """The problems of one model of a dataset's runs (``model_problems``)."""
    from dpaudit.training.architectures import check_model, model_kind

    try:
        kind = model_kind(model)
    except ValueError as err:
        return [f"{key}: {err}"]
    shape = image_shape_before_prepare(name, params)
    d = features_of(name, params) if shape is None else int(shape[0] * shape[1] * shape[2])
    classes = classes_of(name, params)
    if kind == "cnn" and shape is None and params.get("source") not in ("table", "arrays"):
        return [f"{key}: cnn needs an image dataset and {name} has no image shape; use model mlp "
                "or an image dataset (digits, mnist, synthetic_images, source: arrays)"]
    if d is None or classes is None:
        return []  # known once the file is downloaded; the training job checks it then
    run = {k: v for k, v in training.items() if k not in ("delta", "allow_large_delta")}
    try:
        check_model(d, {**run, "model": model, "n_classes": classes, "image_shape": shape}, seed=0,
                    dpsgd="dpsgd" in mechanisms)
    except ValueError as err:
        return [f"{key} (dataset {name}): {str(err).removeprefix('training.model: ')}"]
    return []
