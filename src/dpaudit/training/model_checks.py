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

__all__ = ["image_shape_before_prepare", "model_problems"]


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


def model_problems(config: Mapping, grids: Mapping[str, tuple[str, list[dict]]],
                   features_of: Callable[[str, Mapping], int | None],
                   classes_of: Callable[[str, Mapping], int | None]) -> list[str]:
    """One message per dataset whose model cannot train (naming the key and the fix)."""
    from dpaudit.training.architectures import check_model, model_kind

    problems = []
    for name, params in config["datasets"].items():
        own = params.get("training", {})
        training = {**config["training"], **own}
        model = str(training.get("model", "mlp"))
        key = f"config.datasets.{name}.training.model" if "model" in own else "config.training.model"
        mechanisms = {m for block in grids[name][1] for m in block["mechanism"]}
        if model == "mlp" or not mechanisms & {"baseline", "dpsgd"}:
            continue
        try:
            kind = model_kind(model)
        except ValueError as err:
            problems.append(f"{key}: {err}")
            continue
        shape = image_shape_before_prepare(name, params)
        d = features_of(name, params) if shape is None else int(shape[0] * shape[1] * shape[2])
        classes = classes_of(name, params)
        if kind == "cnn" and shape is None and params.get("source") not in ("table", "arrays"):
            problems.append(f"{key}: cnn needs an image dataset and {name} has no image shape; use model mlp "
                            "or an image dataset (digits, mnist, synthetic_images, source: arrays)")
            continue
        if d is None or classes is None:
            continue  # known once the file is downloaded; the training job checks it then
        run = {k: v for k, v in training.items() if k not in ("delta", "allow_large_delta")}
        try:
            check_model(d, {**run, "n_classes": classes, "image_shape": shape}, seed=0,
                        dpsgd="dpsgd" in mechanisms)
        except ValueError as err:
            problems.append(f"{key} (dataset {name}): {str(err).removeprefix('training.model: ')}")
    return problems
