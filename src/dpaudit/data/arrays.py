"""Image datasets: the user's arrays (``source: arrays``) and the offline ``synthetic_images``.

Both end as the examples table of every dataset (``dpaudit.data.examples``): each image is
flattened row-major to d = H·W·C features (the models' first layer reshapes it back,
``dpaudit.training.architectures``), pixels are standardized per position on the fit split,
and ``dataset.json`` gains ``image_shape`` [H, W, C].

``source: arrays`` reads an ``.npz`` file (``numpy.savez``) with ``x`` [N, H, W] or
[N, H, W, C] (numbers), ``y`` [N] (labels of any type, mapped to 0..k-1 in sorted order and
recorded as ``label_names``) and optionally ``ids`` [N] (unique integers, the example ids;
default the 0-based index). ``inspect_arrays`` checks it like a table is checked, each
refusal naming the array, the index and what to fix.

``synthetic_images``: class-dependent blobs. Class c's blob sits on a circle around the
image centre at angle 2πc/k; each image jitters its blob's position and brightness and adds
Gaussian pixel noise (``noise``), so classes overlap more as ``noise`` grows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpaudit.data.examples import _finish_tabular, _raw_file_info

__all__ = ["ARRAYS_KEYS", "IMAGES_DEFAULTS", "ArraysSketch", "arrays_config_problems", "classes_before_prepare",
           "inspect_arrays", "prepare_arrays", "synthetic_images"]

ARRAYS_KEYS = ("path",)
MIN_PER_CLASS = 4  # one image per split and one more, as synthetic's n >= 4·classes
IMAGES_DEFAULTS: dict[str, Any] = {"n": 2000, "image_size": 16, "channels": 1, "classes": 4, "noise": 0.5,
                                   "seed": 0}


@dataclass(frozen=True)
class ArraysSketch:
    """What the parse-time check learns of an arrays file."""

    path: str
    n: int
    image_shape: tuple[int, int, int]
    classes: int
    label_names: list[str]


def _load(name: str, params: Mapping[str, Any]):
    path = Path(str(params.get("path", "")))
    where = f"dataset {name}: arrays {path}"
    if not path.is_file():
        raise ValueError(f"{where}: no such file; give path: the .npz file saved with numpy.savez(x=..., y=...)")
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as err:  # noqa: BLE001 -- numpy raises several types for a non-npz file
        raise ValueError(f"{where}: not a .npz archive ({err}); save it with numpy.savez(path, x=..., y=...)") from err
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{where}: a single .npy array, not a .npz archive; save it with numpy.savez(path, x=..., "
                         "y=...)")
    with archive:
        found = sorted(archive.files)
        for key in ("x", "y"):
            if key not in found:
                raise ValueError(f"{where}: no array {key!r} (found {found}); save the images as x and the labels as "
                                 "y")
        extra = sorted(set(found) - {"x", "y", "ids"})
        if extra:
            raise ValueError(f"{where}: unknown array(s) {extra}; the archive holds x, y and optionally ids")
        try:
            arrays = {key: archive[key] for key in found}
        except ValueError as err:  # object arrays need pickle, which is refused
            raise ValueError(f"{where}: {err}; store numbers or strings, not Python objects") from err
    return path, where, arrays


def _check(where: str, arrays: Mapping[str, np.ndarray]):
    x, y = arrays["x"], arrays["y"]
    if x.ndim not in (3, 4):
        raise ValueError(f"{where}: array x has shape {list(x.shape)} (rank {x.ndim}); write [N, H, W] or "
                         "[N, H, W, C] images")
    if not (np.issubdtype(x.dtype, np.number) and not np.issubdtype(x.dtype, np.complexfloating)) \
            or x.dtype == np.bool_:
        raise ValueError(f"{where}: array x holds {x.dtype} values; store the pixels as numbers")
    if min(x.shape) < 1:
        raise ValueError(f"{where}: array x has shape {list(x.shape)}: no images or an empty axis")
    bad = ~np.isfinite(x)
    if bad.any():
        first = [int(i[0]) for i in np.nonzero(bad)]
        raise ValueError(f"{where}: array x holds {int(bad.sum())} non-finite pixel(s) (NaN or inf), the first at "
                         f"index {first}; replace those pixels or drop those images")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{where}: array y has shape {list(y.shape)} but x holds {x.shape[0]} images; write one "
                         "label per image, y of shape [N]")
    if np.issubdtype(y.dtype, np.floating):
        missing = np.flatnonzero(~np.isfinite(y))
        if missing.size:
            raise ValueError(f"{where}: array y holds {missing.size} missing label(s) (NaN), the first at index "
                             f"{int(missing[0])}; label every image or drop it")
    values, labels, counts = np.unique(y, return_inverse=True, return_counts=True)
    if values.size < 2:
        raise ValueError(f"{where}: array y holds one class ({values[0].item()!r}); a classifier needs images of at least "
                         "2 classes")
    small = np.flatnonzero(counts < MIN_PER_CLASS)
    if small.size:
        raise ValueError(f"{where}: class {values[small[0]].item()!r} of array y has {int(counts[small[0]])} image(s); each "
                         f"class needs at least {MIN_PER_CLASS} (members, non-members and test)")
    ids = arrays.get("ids")
    if ids is not None:
        if ids.ndim != 1 or ids.shape[0] != x.shape[0]:
            raise ValueError(f"{where}: array ids has shape {list(ids.shape)} but x holds {x.shape[0]} images; "
                             "write one id per image or leave ids out")
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"{where}: array ids holds {ids.dtype} values; ids must be integers")
        order = np.argsort(ids, kind="stable")
        same = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if same.size:
            i, j = sorted(int(k) for k in order[same[0]:same[0] + 2])
            raise ValueError(f"{where}: array ids repeats id {int(ids[i])} at indices {i} and {j}; ids must be "
                             "unique")
    shape = tuple(int(s) for s in x.shape[1:]) + ((1,) if x.ndim == 3 else ())
    return shape, values, labels.astype(np.int64)


def inspect_arrays(name: str, params: Mapping[str, Any]) -> ArraysSketch:
    """Read and check a ``source: arrays`` file (the parse-time check; refusals are ValueError)."""
    path, where, arrays = _load(name, params)
    shape, values, _ = _check(where, arrays)
    return ArraysSketch(str(path), int(arrays["x"].shape[0]), shape, int(values.size), [str(v) for v in values])


def arrays_config_problems(name: str, params: Mapping[str, Any], builtin: bool) -> list[str]:
    """The parse-time problems of a ``source: arrays`` entry of config.datasets: its name, keys and file."""
    from dpaudit.data.table import TABLE_KEYS

    where = f"config.datasets.{name}"
    if builtin:
        return [f"{where}: {name!r} is a built-in dataset; give your arrays another name"]
    if "path" not in params:
        return [f"{where}: source: arrays needs path (the .npz file with x, y and optional ids)"]
    keys = sorted(set(params) & set(TABLE_KEYS) - set(ARRAYS_KEYS) - {"source"})
    if keys:
        return [f"{where}: key(s) {', '.join(keys)} apply to source: table only"]
    try:
        inspect_arrays(name, params)
    except ValueError as error:
        return [f"{where}: {error}"]
    return []


def classes_before_prepare(name: str, params: Mapping[str, Any]) -> int | None:
    """Classes of synthetic_images or an arrays dataset before it is prepared (None if its file is refused)."""
    if params.get("source") != "arrays":
        return int(params.get("classes", IMAGES_DEFAULTS["classes"]))
    try:
        return inspect_arrays(name, params).classes
    except ValueError:
        return None  # arrays_config_problems names the problem


def prepare_arrays(name: str, path: Path, params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    """The examples table and info of a ``source: arrays`` dataset (its file is raw file ``arrays``)."""
    path, where, arrays = _load(name, {**params, "path": str(path)})
    shape, values, labels = _check(where, arrays)
    x = arrays["x"].reshape(len(labels), -1).astype(np.float64)
    raw = _raw_file_info({"arrays": path}, {})
    source = {"source": {"kind": "arrays", "files": ["arrays"]}, "raw_files": raw}
    table, info = _finish_tabular(name, x, labels, params, source, image_shape=list(shape),
                                  label_names=[str(v) for v in values])
    if "ids" in arrays:
        table = table.set_column(0, "example_id", pa.array(arrays["ids"].astype(np.int64)))
    return table, info


def synthetic_images(params: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    """The ``synthetic_images`` dataset (class-dependent blobs; keys ``IMAGES_DEFAULTS``)."""
    p = {key: params.get(key, default) for key, default in IMAGES_DEFAULTS.items()}
    n, size, channels, classes = int(p["n"]), int(p["image_size"]), int(p["channels"]), int(p["classes"])
    noise, seed = float(p["noise"]), int(p["seed"])
    if classes < 2 or n < MIN_PER_CLASS * classes or size < 4 or channels < 1 or not noise >= 0:
        raise ValueError(f"synthetic_images needs classes >= 2, n >= {MIN_PER_CLASS}·classes, image_size >= 4, "
                         f"channels >= 1 and noise >= 0: {p}")
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % classes)  # balanced, in random order
    angle = 2 * np.pi * y / classes
    centre = (size - 1) / 2 + 0.3 * size * np.stack([np.sin(angle), np.cos(angle)], axis=1)
    centre += rng.normal(scale=0.05 * size, size=(n, 2))
    width = 0.12 * size
    grid = np.arange(size, dtype=np.float64)
    rows = np.exp(-((grid[None, :] - centre[:, :1]) ** 2) / (2 * width ** 2))  # [n, H]
    cols = np.exp(-((grid[None, :] - centre[:, 1:]) ** 2) / (2 * width ** 2))  # [n, W]
    # Each class has its own colour (brightness per channel); each image its own brightness.
    colour = 0.5 + rng.uniform(size=(classes, channels))
    brightness = colour[y] * rng.uniform(0.7, 1.3, size=(n, 1))
    x = rows[:, :, None, None] * cols[:, None, :, None] * brightness[:, None, None, :]
    x = x + rng.normal(scale=noise, size=x.shape)
    source = {"source": {"kind": "generated", "generator": "class_blobs_images", "params": p}}
    return _finish_tabular("synthetic_images", x.reshape(n, -1), y, params, source,
                           image_shape=[size, size, channels], label_names=[str(c) for c in range(classes)])
