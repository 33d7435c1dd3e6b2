"""Experiment configuration: validation against the JSON Schema, defaults, and the run grid.

Everything here runs at Snakefile parse time, so it is cheap (no TensorFlow, no
directory scans) and it fails before any job starts, naming the key path and the
allowed values.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpaudit.config_schema import (
    _coerce_numbers,
    _fill_defaults,
    _schema_errors,
    load_schema,
)
from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.mechanisms import LINEAR_MECHANISMS, MECHANISMS  # noqa: F401  (declared there, read here)
from dpaudit.logs import Refusal
from dpaudit.profile.config_checks import (  # noqa: F401  (the profile block's checks, re-exported)
    PROFILE_ADULT_NUMERIC_COLUMNS,
    PROFILE_SOURCE_COLUMNS,
    profile_problems,
)
from dpaudit.training.sampling import batch_size_problem

# Order fixes the run name; every row carries every column, so adding a row (or a
# block that sets a new key) never renames existing runs.
GRID_COLUMNS: dict[str, str] = {
    "mechanism": "string",
    "target_epsilon": "Float64",
    "clip_norm": "Float64",
    "microbatches": "Int64",
    "epochs": "Int64",
    "batch_size": "Int64",
    "learning_rate": "Float64",
    "seed": "Int64",
    # a baseline or dpsgd run's model (grid, else training.model); named only if not mlp (_grid_names)
    "model": "string",
}
DEFAULT_MODEL = "mlp"
# The mechanisms and their display names are declared in dpaudit.contract.metrics.
# Output and objective perturbation of L2-regularized logistic regression (source
# 000, Chaudhuri et al. 2011): one exact fit, no epochs, batches or clipping, and
# binary labels only.
# The grid columns each mechanism uses; the others are NA in its rows (mechanism
# itself is always set).
MECHANISM_COLUMNS: dict[str, tuple[str, ...]] = {
    "baseline": ("epochs", "batch_size", "learning_rate", "seed", "model"),
    "dpsgd": tuple(c for c in GRID_COLUMNS if c != "mechanism"),
    "output_perturbation": ("target_epsilon", "seed"),
    "objective_perturbation": ("target_epsilon", "seed"),
}
NEEDS_TARGET_EPSILON = ("dpsgd", *LINEAR_MECHANISMS)
# Classes of the datasets whose class count the config does not set (synthetic's
# is its ``classes`` key); checked against prepare_dataset in tests/unit/test_config.py.
DATASET_NAMES = ("synthetic", "breast_cancer", "digits", "adult", "purchase100", "mnist", "synthetic_images")
DATASET_CLASSES = {"breast_cancer": 2, "digits": 10, "adult": 2, "purchase100": 100, "mnist": 10}
# Training keys that apply only to the linear mechanisms, and the only shared
# training keys those use (the MLP architecture, optimizer, accountant and
# sampling do not apply to them): see ``training_for_mechanism``.
LINEAR_TRAINING_KEYS = ("linear_regularization",)
SYNTHETIC_ONLY_KEYS = ("n", "d", "classes", "separation", "seed")
# synthetic_images (dpaudit.data.arrays) shares n, classes and seed and has its own image keys.
IMAGES_KEYS = ("n", "classes", "seed", "image_size", "channels", "noise")
SYNTHETIC_DEFAULTS = {"n": 2000, "d": 20, "classes": 2, "separation": 1.0, "seed": 0}
# Features d of the datasets whose d the config does not set (the audit's ssim
# image_shape must multiply to it); checked against prepare_dataset in the tests.
DATASET_FEATURES = {"breast_cancer": 30, "digits": 64, "mnist": 784, "purchase100": 600}
# The one rule for every config value that becomes part of a file path (dataset and
# view names, grid values in run names, ...): letters, digits, '.', '_', '+', '-', not
# starting with '.' (so no '/', no '..', no hidden files). Grid values are numbers,
# whose text never holds the '_' that separates a run name's columns.
PATH_SAFE = re.compile(r"^(?!\.)[A-Za-z0-9._+\-]+$")
PATH_SAFE_TEXT = "letters, digits, '.', '_', '+', '-', not starting with '.'"
# PMP Recipe C splits the reference models into selection and evaluation halves
# (dpaudit.metrics.pmp.dpsgd.MIN_REFERENCE_MODELS; a test keeps the two equal).
RECIPE_C_MIN_MODELS = 4


class ConfigError(Refusal, ValueError):
    """An invalid experiment configuration; the message names every bad key path."""


def path_safe_problem(value: Any, where: str) -> str | None:
    """The message for a config value that cannot be part of a file path (None if it can)."""
    non_finite = isinstance(value, float) and not math.isfinite(value)
    if non_finite:
        return f"{where}: {value!r} is not path-safe (it becomes part of a file path); write a finite value"
    if isinstance(value, bool) or not PATH_SAFE.match(str(value)):
        return (f"{where}: {value!r} is not path-safe (it becomes part of a file path); a name may contain only "
                f"{PATH_SAFE_TEXT}")
    return None


def validate_config(config: Mapping, schema: Mapping | None = None) -> dict:
    """Return a validated copy of ``config`` with every default filled in.

    Raises ConfigError listing every problem with its key path and what to write
    instead: schema errors and non-finite numbers first (one line per key), then the
    cross-key checks the schema cannot express.
    """
    schema = load_schema() if schema is None else schema
    config = _coerce_numbers(copy.deepcopy(dict(config)), [schema], schema)
    problems = _schema_errors(config, schema)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    # Grid checks see the blocks as written, before defaults are filled in.
    grids = {"grid": config["grid"]}
    grids.update({f"datasets.{n}.grid": p["grid"] for n, p in config["datasets"].items() if "grid" in p})
    for where, grid in grids.items():
        problems.extend(_grid_problems(grid, f"config.{where}"))
    config = _fill_defaults(config, schema, schema)
    problems.extend(_path_problems(config))
    problems.extend(profile_problems(config["profile"]))
    problems.extend(_table_problems(config))
    problems.extend(_binary_problems(config))
    for name, params in config["datasets"].items():
        if name != "synthetic":
            allowed = IMAGES_KEYS if name == "synthetic_images" else ()
            misplaced = sorted(set(params) & set(SYNTHETIC_ONLY_KEYS) - set(allowed))
            image_keys = sorted(set(params) & set(IMAGES_KEYS[3:]))
            if image_keys and name != "synthetic_images":
                problems.append(f"config.datasets.{name}: key(s) {', '.join(image_keys)} apply to synthetic_images only")
            if misplaced:
                problems.append(
                    f"config.datasets.{name}: key(s) {', '.join(misplaced)} apply to synthetic only"
                    + (" (synthetic_images reads n, classes and seed)" if name == "synthetic_images" else "")
                )
        else:
            for key, value in SYNTHETIC_DEFAULTS.items():
                params.setdefault(key, value)
            if params["n"] < 4 * params["classes"]:
                problems.append(
                    f"config.datasets.synthetic.classes: {params['classes']} classes need n >= 4 x classes = "
                    f"{4 * params['classes']} examples and config.datasets.synthetic.n is {params['n']}; "
                    f"write classes <= {params['n'] // 4} or a larger n"
                )
    problems.extend(_size_problems(config, schema))
    from dpaudit.external.checks import (
        external_problems,  # issue 44: models trained elsewhere, empty grids
    )

    problems.extend(external_problems(config, dataset_classes, table_sketch, dataset_features))
    if not problems:  # the model is built on the dataset's shape: only once the datasets are valid
        from dpaudit.training.model_checks import model_problems

        grids = {name: _grid_blocks(config, name) for name in config["datasets"]}
        problems.extend(model_problems(config, grids, dataset_features, dataset_classes))
    problems.extend(_audit_problems(config))
    pmp, models = config["metrics"]["pmp"], config["metrics"]["attacks"]["reference_models"]
    if pmp["enabled"] and pmp["recipe_c"] and models < RECIPE_C_MIN_MODELS:
        problems.append(f"config.metrics.attacks.reference_models: {models} reference models, and "
                        f"config.metrics.pmp.recipe_c needs at least {RECIPE_C_MIN_MODELS} (selection and "
                        "evaluation halves); write a larger K or recipe_c: false")
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    return config


def table_download(path: str) -> tuple[str, str] | None:
    """(dataset, file) when a table's path is a raw file the workflow downloads (download_dataset makes it)."""
    from dpaudit.contract import paths as P
    from dpaudit.data.registry import KNOWN_FILES

    for dataset, files in KNOWN_FILES.items():
        for filename in files:
            if str(path) == P.RAW_FILE.format(dataset=dataset, filename=filename):
                return dataset, filename
    return None


def table_sketch(name: str, params: Mapping):
    """The parse-time inspection of a table dataset (dpaudit.data.table.TableSketch), or None when
    the entry is not a table, its file is still to be downloaded, or it is refused (the
    refusal is reported by validate_config)."""
    from dpaudit.data.table import TableError, inspect_table

    if params.get("source") != "table" or "path" not in params:
        return None
    if table_download(params["path"]) is not None and not Path(params["path"]).exists():
        return None
    try:
        return inspect_table(name, params)
    except TableError:
        return None


def _table_problems(config: Mapping) -> list[str]:
    """Which entries are tables, their keys, and the parse-time checks of their files (dpaudit.data.table):
    a refusal names the file, the column and what to write."""
    from dpaudit.data.table import (
        TABLE_DEFAULTS,
        TABLE_KEYS,
        TableError,
        inspect_table,
        table_format,
    )

    problems = []
    for name, params in config["datasets"].items():
        where = f"config.datasets.{name}"
        builtin = name in DATASET_NAMES
        if params.get("source") == "arrays":
            from dpaudit.data.arrays import arrays_config_problems

            problems.extend(arrays_config_problems(name, params, builtin))
            continue
        if params.get("source") != "table":
            keys = sorted(set(params) & set(TABLE_KEYS))
            if not builtin:
                problems.append(f"{where}: {name!r} is not a built-in dataset ({', '.join(DATASET_NAMES)}); "
                                "to audit your own table write source: table, path: <file> and label: <column>")
            elif keys:
                problems.append(f"{where}: key(s) {', '.join(keys)} apply to source: table only")
            continue
        if builtin:
            problems.append(f"{where}: {name!r} is a built-in dataset; give your table another name")
            continue
        missing = [key for key in ("path", "label") if key not in params]
        if missing:
            problems.append(f"{where}: source: table needs {' and '.join(missing)} (the file and the column to "
                            "predict)")
            continue
        for key, value in TABLE_DEFAULTS.items():
            params.setdefault(key, value)
        if table_download(params["path"]) is not None and not Path(params["path"]).exists():
            if table_format(params["path"], params.get("format")) is None:
                problems.append(f"{where}: table {params['path']}: unknown file type; give format: csv or "
                                "format: parquet")
            continue  # download_dataset fetches it; prepare_dataset checks it
        try:
            sketch = inspect_table(name, params)
        except TableError as error:
            problems.extend(str(error).split("\n  "))
            continue
        problems.extend(_table_canary_problems(config, name, sketch))
    return problems


def _table_canary_problems(config: Mapping, name: str, sketch) -> list[str]:
    """Input canaries are drawn from the non-member split: a table's holdout must hold them."""
    from dpaudit.data.table import holdout_count

    canary = config["metrics"]["canary"]
    holdout = holdout_count(sketch, config["datasets"][name])
    if not canary["enabled"] or holdout is None or int(canary["input_canaries"]) <= holdout:
        return []
    return [f"config.metrics.canary.input_canaries: {canary['input_canaries']} input canaries are drawn from the "
            f"non-members of table {sketch.path} (dataset {name}), which has {holdout}; write input_canaries <= "
            f"{holdout} or use a larger table"]


def _grid_blocks(config: Mapping, name: str) -> tuple[str, list[dict]]:
    params = config["datasets"][name]
    if "grid" in params:
        return f"config.datasets.{name}.grid", params["grid"]
    return "config.grid", config["grid"]


def _size_problems(config: Mapping, schema: Mapping) -> list[str]:
    """Checks against a dataset's members n where n is known before any job (synthetic and
    the bundled breast_cancer and digits; dpaudit.data.datasets.members_before_download):
    microbatches <= batch_size <= n, and a numeric training.delta below 1/n."""
    from dpaudit.contract.delta import large_delta_problem
    from dpaudit.data.datasets import members_before_download

    defaults = {key: spec["default"] for key, spec in schema["$defs"]["grid"]["items"]["properties"].items()
                if "default" in spec}
    problems: list[str] = []
    seen: set[str] = set()
    delta = config["training"]["delta"]
    for name, params in config["datasets"].items():
        where, grid = _grid_blocks(config, name)
        n = members_before_download(name, params)
        sketch = table_sketch(name, params)
        if sketch is not None:
            from dpaudit.data.table import members_count

            n = members_count(sketch, params)
        for index, block in enumerate(grid):
            keras = [m for m in block["mechanism"] if m in ("baseline", "dpsgd")]
            if not keras:
                continue
            sizes = block.get("batch_size", defaults["batch_size"])
            if "dpsgd" in keras:
                for position, k in enumerate(block.get("microbatches", [])):
                    smaller = [b for b in sizes if k > b]
                    message = (f"{where}[{index}].microbatches[{position}]: microbatches={k} exceeds batch_size "
                               f"{smaller} (most groups would be empty in every step); write microbatches <= "
                               f"{min(sizes)}")
                    if smaller and message not in seen:
                        seen.add(message)
                        problems.append(message)
            if n is None:
                continue
            for position, b in enumerate(sizes):
                key = f"{where}[{index}].batch_size" + (f"[{position}]" if "batch_size" in block else " (default)")
                label = name if sketch is None else f"{name} (table {sketch.path})"
                message = batch_size_problem(b, n, label, key)
                if message is not None and message not in seen:
                    seen.add(message)
                    problems.append(message)
        if n is not None and delta != "auto" and not config["training"]["allow_large_delta"]:
            problem = large_delta_problem(float(delta), n)
            if problem is not None:
                problems.append(f"config.training.delta: dataset {name}: {problem}")
    return problems


def _path_problems(config: Mapping) -> list[str]:
    """Every config value that becomes part of a file path passes ``path_safe_problem``
    (grid values are checked with the grid)."""
    names = [(f"config.datasets key {name!r}", name) for name in config["datasets"]]
    names += [(f"config.audit.datasets key {name!r}", name) for name in config["audit"]["datasets"]]
    names += [(f"config.profile.views key {name!r}", name) for name in config["profile"]["views"]]
    names += [(f"config.profile.samples.views[{i}]", name)
              for i, name in enumerate(config["profile"]["samples"]["views"])]
    names += [("config.simulations.ks_fit.dataset", config["simulations"]["ks_fit"]["dataset"])]
    names += [(f"config.external_models key {name!r}", name) for name in config.get("external_models") or {}]
    return [problem for where, value in names if (problem := path_safe_problem(value, where)) is not None]


def _audit_problems(config: Mapping) -> list[str]:
    """Cross-key checks of an enabled audit that would otherwise fall back silently or
    fail only inside its jobs: at least one audited dataset, each also under datasets;
    ``runs_per_rho`` keys name one of the dataset's targets; every audited dataset lists
    the ``sensitivity_pairs`` target; pair ``explicit`` has a ``neighbour``; a sigmoid
    output has a binary dataset; ``ssim`` knows its image shape, which multiplies to
    the dataset's d. (Whether each target is reachable needs the RDP conversion:
    ``audit_grid.target_problems``, run at parse time by rules/audit.smk, so this
    module imports no metric code.)"""
    audit = config["audit"]
    if not audit["enabled"]:
        return []
    if not audit["datasets"]:
        return ["config.audit.enabled: true but config.audit.datasets is empty, so nothing would be audited; "
                "add a dataset under config.audit.datasets or set config.audit.enabled: false"]
    problems = []
    extra = audit.get("sensitivity_pairs")
    for name, options in audit["datasets"].items():
        where = f"config.audit.datasets.{name}"
        if name not in config["datasets"]:
            problems.append(f"{where}: {name} must also be listed under config.datasets (it is prepared there); "
                            f"add it there or remove it here")
            continue
        targets = [float(rho) for rho in options["rho_beta"]]
        for key in options["runs_per_rho"]:
            try:
                known = float(key) in targets
            except ValueError:
                known = False
            if not known:
                problems.append(f"{where}.runs_per_rho: key {key!r} is not one of {where}.rho_beta "
                                f"{targets}; allowed: those values (it would otherwise be ignored)")
        if extra and float(extra["rho_beta"]) not in targets:
            problems.append(f"config.audit.sensitivity_pairs.rho_beta: {extra['rho_beta']:g} is not among "
                            f"{where}.rho_beta {targets}; every audited dataset must list it")
        if "explicit" in audit["pairs"] and "neighbour" not in options:
            problems.append(f"{where}: config.audit.pairs lists 'explicit' but {where}.neighbour is missing; "
                            "write neighbour: {x_star: <member example_id>, x_prime: <non-member example_id>}")
        classes = dataset_classes(name, config["datasets"][name])
        if options["output"] == "sigmoid" and classes not in (2, None):
            problems.append(f"{where}.output: sigmoid is one unit for binary labels and {name} has {classes} "
                            "classes; write output: softmax")
        problems.extend(_ssim_problems(name, options, config["datasets"][name], where))
    return problems


def dataset_features(name: str, params: Mapping) -> int | None:
    """Number of features d of a configured dataset when known before it is prepared."""
    if name == "synthetic":
        return int(params.get("d", SYNTHETIC_DEFAULTS["d"]))
    from dpaudit.training.model_checks import image_shape_before_prepare

    shape = None if params.get("source") == "table" else image_shape_before_prepare(name, params)
    return math.prod(shape) if shape is not None else DATASET_FEATURES.get(name)


def _ssim_problems(name: str, options: Mapping, params: Mapping, where: str) -> list[str]:
    if options["distance"] != "ssim":
        given = [key for key in ("image_shape", "data_range") if key in options]
        if given:
            return [f"{where}: {', '.join(given)} apply to distance ssim only and distance is "
                    f"{options['distance']!r}; remove them or write distance: ssim"]
        return []
    shape = options.get("image_shape")
    if shape is None:
        if name == "mnist":  # prepare_dataset records MNIST's image shape
            return []
        return [f"{where}.image_shape: distance ssim compares images and {name} records no image shape; "
                "write image_shape: [height, width] (e.g. [8, 8] for digits)"]
    d = dataset_features(name, params)
    if d is not None and math.prod(shape) != d:
        return [f"{where}.image_shape: {list(shape)} has {math.prod(shape)} pixels but {name} has d = {d} "
                f"features; write an image_shape whose product is {d}"]
    return []


def dataset_classes(name: str, params: Mapping) -> int | None:
    """Number of classes of a configured dataset, known before it is prepared (a table's from
    its label column; None while its file is still to be downloaded)."""
    if name == "synthetic":
        return int(params.get("classes", SYNTHETIC_DEFAULTS["classes"]))
    if params.get("source") == "table":
        sketch = table_sketch(name, params)
        return None if sketch is None else sketch.classes
    if params.get("source") == "arrays" or name == "synthetic_images":
        from dpaudit.data.arrays import classes_before_prepare

        return classes_before_prepare(name, params)
    return DATASET_CLASSES.get(name)


def _binary_problems(config: Mapping) -> list[str]:
    """The linear mechanisms are binary logistic regression: refuse multi-class datasets."""
    problems = []
    for name, params in config["datasets"].items():
        where, grid = _grid_blocks(config, name)
        linear = sorted({m for block in grid for m in block["mechanism"] if m in LINEAR_MECHANISMS})
        classes = dataset_classes(name, params)
        if linear and classes not in (2, None):
            problems.append(
                f"config.datasets.{name}: mechanism {', '.join(linear)} (from {where}) is binary logistic "
                f"regression, but dataset {name} has {classes} classes; give {name} its own grid without it"
            )
    return problems


def _grid_problems(grid: list[dict], where: str) -> list[str]:
    problems = []
    for index, block in enumerate(grid):
        mechanisms = set(block["mechanism"])
        for mechanism in sorted(mechanisms & set(NEEDS_TARGET_EPSILON)):
            if "target_epsilon" not in block:
                problems.append(f"{where}[{index}]: {mechanism} needs target_epsilon (a list of ε > 0)")
        for key in block:
            if key == "mechanism" or any(key in MECHANISM_COLUMNS[m] for m in mechanisms):
                continue
            users = [m for m, columns in MECHANISM_COLUMNS.items() if key in columns]
            problems.append(
                f"{where}[{index}].{key}: not applicable to mechanism {', '.join(sorted(mechanisms))} "
                f"({', '.join(users)} only)"
            )
        for key, values in block.items():
            if key == "mechanism":
                # Names fixed by the schema's enum; the '_' in output_perturbation is
                # unambiguous in a run name because the column names around it are fixed.
                continue
            for position, value in enumerate(values):
                value = value.replace(":", "+") if key == "model" else value  # its run-name form
                problem = path_safe_problem(value, f"{where}[{index}].{key}[{position}]")
                if problem is not None:
                    problems.append(problem)
    return problems


def grid_table(grid: list[dict], schema: Mapping | None = None, model: str = DEFAULT_MODEL) -> pd.DataFrame:
    """Expand grid blocks into one typed row per run (NA = not applicable); ``model``: a block's default."""
    schema = load_schema() if schema is None else schema
    defaults = {
        key: spec["default"]
        for key, spec in schema["$defs"]["grid"]["items"]["properties"].items()
        if "default" in spec
    }
    defaults["model"] = [str(model)]
    rows = []
    for block in grid:
        block = {**defaults, **block}
        keys = list(GRID_COLUMNS)
        for combo in itertools.product(*(block.get(k, [None]) for k in keys)):
            row = dict(zip(keys, combo, strict=True))
            for key in keys[1:]:
                if key not in MECHANISM_COLUMNS[row["mechanism"]]:
                    row[key] = None
            rows.append(row)
    if not rows and grid:
        raise ConfigError("the grid expands to no runs")
    # an empty grid (a dataset audited only through external_models, issue 44) trains no run
    table = pd.DataFrame(rows, columns=list(GRID_COLUMNS))
    table = table.astype(GRID_COLUMNS)
    return table.drop_duplicates(ignore_index=True)


def _plain(value: Any) -> Any:
    if value is pd.NA or value is None:
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def external_runs(config: Mapping) -> dict[str, dict[str, dict]]:
    """dataset -> the runs of its models trained elsewhere (issue 44): grid values NA but the mechanism."""
    return {dataset: {name: {**dict.fromkeys(GRID_COLUMNS), "mechanism": EXTERNAL}
                      for name, entry in config["external_models"].items() if entry["dataset"] == dataset}
            for dataset in sorted(config["datasets"])}


def external_recipes(config: Mapping, dataset: str) -> dict[str, dict]:
    """The dataset's recipes of models trained elsewhere with a reference_recipe (issue 44), as
    ``recipe_lookup`` gives a grid's (``dpaudit.external.recipe``)."""
    from dpaudit.external.recipe import external_recipes as recipes

    return recipes(config, dataset)


def run_lookup(table: pd.DataFrame) -> dict[str, dict]:
    """Map each run name (from Snakemake's Paramspace) to its plain-Python parameters."""
    names = _grid_names(table) if len(table) else []
    records = table.to_dict("records")
    lookup = {name: {k: _plain(v) for k, v in rec.items()} for name, rec in zip(names, records, strict=True)}
    if len(lookup) != len(records):
        raise ConfigError("two grid rows map to the same run name")
    return lookup


def recipe_lookup(runs: Mapping[str, Mapping]) -> dict[str, dict]:
    """Training recipes of a run lookup (issue 24): a recipe is a grid row without its seed.

    Maps each recipe name (Snakemake's Paramspace over the grid columns but the seed) to
    ``{"params": ..., "runs": [run names in grid order]}``. One reference pool serves every
    run of a recipe.
    """
    columns = [c for c in GRID_COLUMNS if c != "seed"]
    keys: dict[tuple, list[str]] = {}
    params: dict[tuple, dict] = {}
    for run, row in runs.items():
        key = tuple(repr(row.get(c)) for c in columns)
        keys.setdefault(key, []).append(run)
        params.setdefault(key, {c: row.get(c) for c in columns})
    table = pd.DataFrame([params[key] for key in keys], columns=columns).astype(
        {c: GRID_COLUMNS[c] for c in columns})
    names = _grid_names(table) if len(table) else []
    return {name: {"params": params[key], "runs": keys[key]} for name, key in zip(names, keys, strict=True)}


def _grid_names(table: pd.DataFrame) -> list[str]:
    """Paramspace names over every column but ``model``, plus ``_model~<model>`` where it is not
    the MLP (``model_checks.model_run_suffix``): adding the column renamed no MLP run."""
    from snakemake.utils import Paramspace

    from dpaudit.training.model_checks import model_run_suffix

    names = Paramspace(table.drop(columns=["model"]), filename_params="*").instance_patterns
    return [name + model_run_suffix(model) for name, model in zip(names, table["model"].tolist(), strict=True)]


def training_for_mechanism(training: Mapping, mechanism: str) -> dict:
    """The training settings one run of ``mechanism`` uses (its train_model params).

    The linear mechanisms get only ``LINEAR_TRAINING_KEYS``; the others get every
    shared key but those. A run's params thus change only with a setting it uses,
    and adding a linear-only key never reruns the existing Keras runs.
    """
    if mechanism in LINEAR_MECHANISMS:
        return {k: v for k, v in training.items() if k in LINEAR_TRAINING_KEYS}
    return {k: v for k, v in training.items() if k not in LINEAR_TRAINING_KEYS}


def dataset_grids(config: Mapping) -> dict[str, pd.DataFrame]:
    """One typed grid table per dataset (a dataset's own grid replaces the top-level one)."""
    schema = load_schema()
    return {
        name: grid_table(params.get("grid", config["grid"]), schema,
                         model=params.get("training", {}).get("model", config["training"].get("model", DEFAULT_MODEL)))
        for name, params in config["datasets"].items()
    }


def epsilon_rule_of_thumb_warnings(config: Mapping) -> list[str]:
    """Rules of thumb on the grid's target ε (Geambasu's DP lecture, the slides on choosing ε), one message per config."""
    from dpaudit.dp.hypothesis import VACUOUS_EPSILON

    large = sorted({
        float(eps)
        for params in config["datasets"].values()
        for block in params.get("grid", config["grid"])
        for eps in block.get("target_epsilon", [])
        if float(eps) > VACUOUS_EPSILON
    })
    if not large:
        return []
    return [
        f"target ε {', '.join(f'{e:g}' for e in large)} > {VACUOUS_EPSILON:g}: at such ε the DP bound on "
        "membership inference is vacuous (e^ε > 2980; the best attack accuracy it allows is ≥ 0.9997); "
        "the measured attack, not the guarantee, describes these models"
    ]
