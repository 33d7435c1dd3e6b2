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

import jsonschema
import pandas as pd
import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"

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
}
# Output and objective perturbation of L2-regularized logistic regression (source
# 000, Chaudhuri et al. 2011): one exact fit, no epochs, batches or clipping, and
# binary labels only.
LINEAR_MECHANISMS = ("output_perturbation", "objective_perturbation")
# The grid columns each mechanism uses; the others are NA in its rows (mechanism
# itself is always set).
MECHANISM_COLUMNS: dict[str, tuple[str, ...]] = {
    "baseline": ("epochs", "batch_size", "learning_rate", "seed"),
    "dpsgd": tuple(c for c in GRID_COLUMNS if c != "mechanism"),
    "output_perturbation": ("target_epsilon", "seed"),
    "objective_perturbation": ("target_epsilon", "seed"),
}
NEEDS_TARGET_EPSILON = ("dpsgd", *LINEAR_MECHANISMS)
# Classes of the datasets whose class count the config does not set (synthetic's
# is its ``classes`` key); checked against prepare_dataset in tests/unit/test_config.py.
DATASET_CLASSES = {"breast_cancer": 2, "digits": 10, "adult": 2, "purchase100": 100, "mnist": 10}
# Training keys that apply only to the linear mechanisms, and the only shared
# training keys those use (the MLP architecture, optimizer, accountant and
# sampling do not apply to them): see ``training_for_mechanism``.
LINEAR_TRAINING_KEYS = ("linear_regularization",)
SYNTHETIC_ONLY_KEYS = ("n", "d", "classes", "separation", "seed")
SYNTHETIC_DEFAULTS = {"n": 2000, "d": 20, "classes": 2, "separation": 1.0, "seed": 0}
PATH_SAFE = re.compile(r"^[A-Za-z0-9.+\-]+$")


class ConfigError(ValueError):
    """An invalid experiment configuration; the message names every bad key path."""


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    with open(path) as handle:
        return yaml.safe_load(handle)


def _key_path(parts) -> str:
    text = "config"
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _allowed(schema: Mapping) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    if "oneOf" in schema:
        return " or ".join(_allowed(option) for option in schema["oneOf"])
    bits = []
    if "type" in schema:
        bits.append(str(schema["type"]))
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
                      ("exclusiveMaximum", "<")):
        if key in schema:
            bits.append(f"{sign} {schema[key]}")
    if "minItems" in schema:
        bits.append(f"at least {schema['minItems']} item(s)")
    if "items" in schema and isinstance(schema["items"], Mapping):
        bits.append(f"items: {_allowed(schema['items'])}")
    if schema.get("additionalProperties") is False and "properties" in schema:
        bits.append("keys: " + ", ".join(schema["properties"]))
    if "propertyNames" in schema:
        bits.append("names: " + _allowed(schema["propertyNames"]))
    return " ".join(bits) or "see workflow/schemas/config.schema.yaml"


def _schema_errors(config: Mapping, schema: Mapping) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    messages = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        where = _key_path(error.absolute_path)
        if error.validator == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            messages.append(
                f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed keys: "
                + ", ".join(error.schema.get("properties", {}))
            )
        elif error.validator == "propertyNames":
            messages.append(f"{where}: {error.message}; allowed: {_allowed(error.schema['propertyNames'])}")
        else:
            messages.append(f"{where}: {error.message}; allowed: {_allowed(error.schema)}")
    return messages


def _fill_defaults(instance: Any, schema: Mapping, root: Mapping) -> Any:
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        schema = root["$defs"][name]
    if isinstance(instance, dict):
        for key, sub in schema.get("properties", {}).items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                instance[key] = _fill_defaults(instance[key], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in set(instance) - set(schema.get("properties", {})):
                instance[key] = _fill_defaults(instance[key], extra, root)
    elif isinstance(instance, list) and isinstance(schema.get("items"), Mapping):
        return [_fill_defaults(item, schema["items"], root) for item in instance]
    return instance


def validate_config(config: Mapping, schema: Mapping | None = None) -> dict:
    """Return a validated copy of ``config`` with every default filled in.

    Raises ConfigError listing every problem with its key path and allowed values.
    """
    schema = load_schema() if schema is None else schema
    config = copy.deepcopy(dict(config))
    problems = _schema_errors(config, schema)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    # Grid checks see the blocks as written, before defaults are filled in.
    grids = {"grid": config["grid"]}
    grids.update({f"datasets.{n}.grid": p["grid"] for n, p in config["datasets"].items() if "grid" in p})
    for where, grid in grids.items():
        problems.extend(_grid_problems(grid, f"config.{where}"))
    config = _fill_defaults(config, schema, schema)
    problems.extend(_profile_problems(config["profile"]))
    problems.extend(_binary_problems(config))
    for name, params in config["datasets"].items():
        if name != "synthetic":
            misplaced = sorted(set(params) & set(SYNTHETIC_ONLY_KEYS))
            if misplaced:
                problems.append(
                    f"config.datasets.{name}: key(s) {', '.join(misplaced)} apply to synthetic only"
                )
        else:
            for key, value in SYNTHETIC_DEFAULTS.items():
                params.setdefault(key, value)
    problems.extend(_audit_problems(config["audit"]))
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    return config


def _audit_problems(audit: Mapping) -> list[str]:
    """Cross-key checks of an enabled audit that would otherwise fall back silently or
    fail only inside its jobs: ``runs_per_rho`` keys name one of the dataset's targets,
    and every audited dataset lists the ``sensitivity_pairs`` target. (Whether each
    target is reachable needs the RDP conversion: ``audit_grid.target_problems``, run
    at parse time by rules/common.smk, so this module imports no metric code.)"""
    if not audit["enabled"]:
        return []
    problems = []
    extra = audit.get("sensitivity_pairs")
    for name, options in audit["datasets"].items():
        where = f"config.audit.datasets.{name}"
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
    return problems


def dataset_classes(name: str, params: Mapping) -> int:
    """Number of classes of a configured dataset, known before it is prepared."""
    if name == "synthetic":
        return int(params.get("classes", SYNTHETIC_DEFAULTS["classes"]))
    return DATASET_CLASSES[name]


def _binary_problems(config: Mapping) -> list[str]:
    """The linear mechanisms are binary logistic regression: refuse multi-class datasets."""
    problems = []
    for name, params in config["datasets"].items():
        where = f"config.datasets.{name}.grid" if "grid" in params else "config.grid"
        grid = params.get("grid", config["grid"])
        linear = sorted({m for block in grid for m in block["mechanism"] if m in LINEAR_MECHANISMS})
        classes = dataset_classes(name, params)
        if linear and classes != 2:
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
                non_finite = isinstance(value, float) and not math.isfinite(value)
                if non_finite or not PATH_SAFE.match(str(value)):
                    problems.append(
                        f"{where}[{index}].{key}[{position}]: {value!r} is not path-safe; "
                        "allowed: finite values written with letters, digits, '.', '+', '-'"
                    )
    return problems


def _profile_problems(profile: Mapping) -> list[str]:
    """What the schema cannot say about the profile block: an increasing ε grid, two-feature figure views."""
    problems = []
    grid = profile["log10_epsilons"]
    unordered = [index for index in range(1, len(grid)) if not grid[index] > grid[index - 1]]
    if unordered:
        problems.append(f"config.profile.log10_epsilons: must be strictly increasing; position(s) {unordered} "
                        f"({[grid[i] for i in unordered]}) are not above the value before")
    views = profile["views"]
    for name, view in views.items():
        if view["figures"] and len(view["columns"]) != 2:
            problems.append(f"config.profile.views.{name}.figures: Figs 2-7 plot two parameter coordinates and this "
                            f"view has {len(view['columns'])} columns; set figures: false (its thresholds and exact "
                            "retraining still run)")
    for position, name in enumerate(profile["samples"]["views"]):
        if name not in views:
            problems.append(f"config.profile.samples.views[{position}]: {name!r} is not among profile.views "
                            f"{sorted(views)}")
        elif len(views[name]["columns"]) != 2:
            problems.append(f"config.profile.samples.views[{position}]: Figs 1 and 8 plot two parameter coordinates "
                            f"and view {name!r} has {len(views[name]['columns'])} columns")
    return problems


def grid_table(grid: list[dict], schema: Mapping | None = None) -> pd.DataFrame:
    """Expand grid blocks into one typed row per run (NA = not applicable)."""
    schema = load_schema() if schema is None else schema
    defaults = {
        key: spec["default"]
        for key, spec in schema["$defs"]["grid"]["items"]["properties"].items()
        if "default" in spec
    }
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
    if not rows:
        raise ConfigError("the grid expands to no runs")
    table = pd.DataFrame(rows, columns=list(GRID_COLUMNS))
    table = table.astype(GRID_COLUMNS)
    return table.drop_duplicates(ignore_index=True)


def _plain(value: Any) -> Any:
    if value is pd.NA or value is None:
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def run_lookup(table: pd.DataFrame) -> dict[str, dict]:
    """Map each run name (from Snakemake's Paramspace) to its plain-Python parameters."""
    from snakemake.utils import Paramspace

    space = Paramspace(table, filename_params="*")
    names = list(space.instance_patterns)
    records = table.to_dict("records")
    lookup = {name: {k: _plain(v) for k, v in rec.items()} for name, rec in zip(names, records, strict=True)}
    if len(lookup) != len(records):
        raise ConfigError("two grid rows map to the same run name")
    return lookup


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
        name: grid_table(params.get("grid", config["grid"]), schema)
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
