"""The config's JSON Schema (workflow/schemas/config.schema.yaml) and the one walk over it.

``load_schema`` reads it; ``_schema_errors`` validates a config against it (every error
named by its key path, with the allowed values; numbers written as text are read as
numbers; no non-finite number unless the key allows it), ``_fill_defaults`` fills the
defaults. ``dpaudit.config.validate_config`` adds the cross-key checks;
``dpaudit.configfile`` and ``dpaudit.docs_gen`` walk the same schema.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ALLOW_NON_FINITE", "SCHEMA_PATH", "load_schema"]

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
# A schema node with this annotation admits ±inf and NaN (none does today); every
# other number in the config must be finite.
ALLOW_NON_FINITE = "x-allow-non-finite"
_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_NUMBER_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    """The schema as a fresh mapping (callers may change theirs): read once per process and
    file version, with libyaml's loader where PyYAML has it (a tenth of the pure-Python
    loader's time; the same mapping, checked in tests/unit/test_config.py)."""
    path = Path(path)
    modified = path.stat().st_mtime_ns
    return copy.deepcopy(_read_schema(str(path), modified))


@functools.lru_cache(maxsize=8)
def _read_schema(path: str, modified: int) -> dict:
    with open(path) as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


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


def _resolve(schema: Mapping, root: Mapping) -> Mapping:
    if "$ref" in schema:
        return root["$defs"][schema["$ref"].split("/")[-1]]
    return schema


def _child_schemas(schema: Mapping, key: Any, root: Mapping) -> list[Mapping]:
    """The schema nodes that describe ``instance[key]`` (one per oneOf/anyOf alternative)."""
    schema = _resolve(schema, root)
    out = []
    for option in [schema, *schema.get("oneOf", []), *schema.get("anyOf", [])]:
        option = _resolve(option, root)
        if isinstance(key, int):
            if isinstance(option.get("items"), Mapping):
                out.append(option["items"])
        elif key in option.get("properties", {}):
            out.append(option["properties"][key])
        elif isinstance(option.get("additionalProperties"), Mapping):
            out.append(option["additionalProperties"])
    return out


def _types(schema: Mapping, root: Mapping) -> set[str]:
    schema = _resolve(schema, root)
    kinds = schema.get("type", [])
    kinds = {kinds} if isinstance(kinds, str) else set(kinds)
    for option in [*schema.get("oneOf", []), *schema.get("anyOf", [])]:
        kinds |= _types(option, root)
    return kinds


def _coerce_numbers(instance: Any, schemas: list[Mapping], root: Mapping) -> Any:
    """Numeric strings where the schema expects a number become floats: YAML 1.1 reads a
    float only with a dot and a signed exponent, so ``delta: 1e-5`` arrives as '1e-5'; digit strings
    where it expects an integer become integers (Snakemake's ``--config key={a: 4}`` and a profile's
    ``config:`` read nested values as text)."""
    if isinstance(instance, str):
        text = instance.strip()
        if _INTEGER_TEXT.fullmatch(text) and any("integer" in _types(s, root) for s in schemas):
            return int(text)
        if _NUMBER_TEXT.match(text) and any("number" in _types(s, root) for s in schemas):
            return float(instance)
        return instance
    if isinstance(instance, dict):
        return {k: _coerce_numbers(v, [c for s in schemas for c in _child_schemas(s, k, root)], root)
                for k, v in instance.items()}
    if isinstance(instance, list):
        return [_coerce_numbers(v, [c for s in schemas for c in _child_schemas(s, i, root)], root)
                for i, v in enumerate(instance)]
    return instance


def _non_finite(instance: Any, schemas: list[Mapping], root: Mapping, parts: tuple) -> dict[str, str]:
    """One recursive walk: every ±inf or NaN anywhere in the config, by key path, unless the
    schema node of that key says ``x-allow-non-finite: true``."""
    found: dict[str, str] = {}
    if isinstance(instance, float) and not math.isfinite(instance):
        if not any(_resolve(s, root).get(ALLOW_NON_FINITE) for s in schemas):
            where = _key_path(parts)
            allowed = "; allowed: " + _allowed(_resolve(schemas[0], root)) if schemas else ""
            found[where] = f"{where}: {instance!r} is not a finite number; write a finite number{allowed}"
    elif isinstance(instance, dict) or isinstance(instance, list):
        items = instance.items() if isinstance(instance, dict) else enumerate(instance)
        for key, value in items:
            children = [c for s in schemas for c in _child_schemas(s, key, root)]
            found.update(_non_finite(value, children, root, (*parts, key)))
    return found


def _schema_errors(config: Mapping, schema: Mapping) -> list[str]:
    """One line per key path: the non-finite numbers, then the schema's errors (several
    errors of one key, e.g. two bounds, are joined on its one line)."""
    # imported here: the jobs that read GRID_COLUMNS through dpaudit.config validate nothing
    import jsonschema

    by_path = {where: [message] for where, message in _non_finite(config, [schema], schema, ()).items()}
    validator = jsonschema.Draft202012Validator(schema)
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        where = _key_path(error.absolute_path)
        if where in by_path and "finite" in by_path[where][0]:
            continue  # the non-finite value is the problem; its bounds say nothing more
        if error.validator == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            text = (f"unknown key(s) {', '.join(map(repr, extra))}; allowed keys: "
                    + ", ".join(error.schema.get("properties", {})))
        elif error.validator == "propertyNames":
            text = f"{error.message}; allowed: {_allowed(error.schema['propertyNames'])}"
        else:
            text = f"{error.message}; allowed: {_allowed(error.schema)}"
        by_path.setdefault(where, [])
        if text not in by_path[where]:
            by_path[where].append(text)
    messages = []
    for where, texts in by_path.items():
        if texts and texts[0].startswith(where + ":"):
            messages.append(texts[0])
        else:
            # several errors of one key: keep one line, the messages joined
            messages.append(f"{where}: " + " | ".join(texts))
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
