"""A Keras model file of a model trained elsewhere (issue 44): data, not code.

Only the ``.keras`` format is read: a zip of ``config.json`` (the architecture as data) and the
weights (HDF5). ``.h5`` and SavedModel files can carry code (a Lambda layer's marshalled bytecode,
TensorFlow functions), and nothing is ever unpickled, so they are refused with the way to re-save.
Before any job, ``inspect_keras_file`` reads ``config.json`` with the standard library alone: a
``Lambda`` layer (its function is code) is refused, so is any object from a module other than
Keras' own and the one the config names (``custom_objects_module``), and the input shape is
compared with the dataset's features. The job loads it with Keras' safe mode
(``load_model(safe_mode=True, compile=False)``, TensorFlow through ``dpaudit._tf``) with custom
objects taken only from that module, and runs it in inference mode on the dataset's features as
``prepare_dataset`` wrote them (``examples.parquet``'s ``x``): a model file must have been trained
on those features; one trained on other features is audited from its outputs file instead.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpaudit.external.outputs_file import ExternalModelError

__all__ = ["KerasSketch", "custom_objects", "inspect_keras_file", "keras_outputs"]

# config.json's "module" of Keras' own objects (tf_keras writes "keras.layers", "keras.initializers", ...)
KERAS_MODULES = ("keras", "tf_keras")
# Layers whose config holds code (a function's bytecode): never deserialized.
CODE_LAYERS = ("Lambda",)
_PREDICT_BATCH = 4096


@dataclass(frozen=True)
class KerasSketch:
    """What config.json says: the input shape (without the batch axis), the custom objects' (module, class)."""

    path: str
    input_shape: tuple[int | None, ...] | None
    custom: tuple[tuple[str, str], ...]
    softmax_output: bool = False  # its last layer ends in a softmax: it outputs probabilities


def _nodes(value):
    """Every mapping of a config tree that names a class."""
    if isinstance(value, dict):
        if "class_name" in value:
            yield value
        for child in value.values():
            yield from _nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _nodes(child)


def _keras_module(module) -> bool:
    return module is None or str(module).split(".")[0] in KERAS_MODULES


def inspect_keras_file(path: str | Path, where: str, custom_module: str | None = None) -> KerasSketch:
    """The model file's architecture read as data (module docstring); refusals name the layer and the fix."""
    path = Path(path)
    if path.suffix != ".keras":
        raise ExternalModelError(f"{where}: {path}: only .keras model files are read (.h5 and SavedModel files can "
                                 "carry code); save it with model.save('model.keras'), or give its outputs file")
    if not path.is_file():
        raise ExternalModelError(f"{where}: model file {path} does not exist; write the path of the file (relative "
                                 "to the working directory) or create it")
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, OSError) as error:
        raise ExternalModelError(f"{where}: {path} does not load: not a .keras archive with a config.json ({error}); "
                                 "save it again with model.save('model.keras')") from None
    custom, shape = [], None
    # the architecture only: compile_config (optimizer, loss) is never deserialized (compile=False)
    architecture = {key: value for key, value in config.items() if key != "compile_config"}
    for node in _nodes(architecture):
        name = str(node["class_name"])
        layer = (node.get("config") or {}).get("name", "?") if isinstance(node.get("config"), dict) else "?"
        if name in CODE_LAYERS:
            raise ExternalModelError(f"{where}: {path}: layer {layer!r} is a {name} layer, whose function is code; "
                                     "a model file is read as data (Keras safe mode): write it as a custom layer class "
                                     "in a module and name that module with custom_objects_module")
        module = node.get("module")
        if not _keras_module(module):
            if custom_module is None or str(module) != custom_module:
                raise ExternalModelError(
                    f"{where}: {path}: {name} (layer {layer!r}) comes from module {module!r}"
                    + (f", not from custom_objects_module {custom_module!r}" if custom_module else "")
                    + "; custom objects are loaded only from the module the config names: write "
                      f"custom_objects_module: {module}")
            custom.append((str(module), name))
        if name == "InputLayer" and shape is None:
            conf = node.get("config") or {}
            given = conf.get("batch_input_shape") or conf.get("batch_shape")
            shape = tuple(given[1:]) if given else None
    layers = (config.get("config") or {}).get("layers") or [{}]
    last = layers[-1] if isinstance(layers[-1], dict) else {}
    softmax = last.get("class_name") == "Softmax" or (last.get("config") or {}).get("activation") == "softmax"
    return KerasSketch(path=str(path), input_shape=shape, custom=tuple(dict.fromkeys(custom)), softmax_output=softmax)


def input_problem(sketch: KerasSketch, d: int | None, dataset: str, where: str) -> str | None:
    """The message when the model's flat input is not the dataset's d features (None when it is or is unknown)."""
    if d is None or sketch.input_shape is None or None in sketch.input_shape:
        return None
    width = int(np.prod(sketch.input_shape))
    if width == int(d):
        return None
    return (f"{where}: {sketch.path} expects input shape {list(sketch.input_shape)} ({width} features) but dataset "
            f"{dataset} has d = {d} features as dpaudit prepares them; a model file is run on those features "
            "(results/data/<dataset>/examples.parquet, x): give the outputs file of a model trained on others")


def custom_objects(module_name: str | None, where: str) -> dict:
    """The Keras classes a module defines (its layers, models and other Keras objects), by class name."""
    if module_name is None:
        return {}
    import importlib
    import inspect

    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ExternalModelError(f"{where}.custom_objects_module: {module_name!r} does not import ({error}); put "
                                 "its folder on PYTHONPATH") from None
    return {name: value for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__}


def keras_outputs(path: str | Path, x: np.ndarray, where: str, custom_module: str | None = None,
                  threads: int = 1) -> np.ndarray:
    """[N, C] float32 outputs of the model file on ``x`` (inference mode), loaded in Keras' safe mode, on
    ``threads`` TensorFlow threads (the job's: unconfigured, TensorFlow takes every core of a shared node)."""
    sketch = inspect_keras_file(path, where, custom_module)
    problem = input_problem(sketch, x.shape[1], "of this audit", where)
    if problem is not None:
        raise ExternalModelError(problem)
    from dpaudit import _tf

    _tf.configure(threads, 0)
    objects = custom_objects(custom_module, where)
    try:
        model = _tf.keras.models.load_model(str(path), custom_objects=objects, compile=False, safe_mode=True)
    except Exception as error:  # noqa: BLE001 (any failure to load is the file's: said with its reason)
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExternalModelError(f"{where}: {path} does not load in Keras' safe mode: {text}") from None
    shape = tuple(model.input_shape[1:]) if hasattr(model, "input_shape") else None
    batch = x.reshape((len(x), *shape)) if shape and None not in shape else x
    outputs = model.predict(batch, batch_size=_PREDICT_BATCH, verbose=0)
    outputs = np.asarray(outputs, dtype=np.float32)
    if outputs.ndim != 2:
        raise ExternalModelError(f"{where}: {path}: the model's output has shape {list(outputs.shape)}; an audited "
                                 "model outputs one value per class, [batch, C]")
    return outputs
