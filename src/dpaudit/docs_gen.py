"""The generated documentation: the key tables of config/README.md and docs/metrics.md.

``python -m dpaudit.docs_gen`` rewrites both (``--check`` only compares; a path argument
renders that one file: ``docs/metrics.md`` or a README). ``tests/unit/test_docs.py`` and
``tests/unit/test_contract_metrics.py`` fail while a committed file differs.

Key tables of config/README.md, rendered from workflow/schemas/config.schema.yaml.

The README holds one or more blocks

    <!-- keys:begin -->                       every key no other block claims
    <!-- keys:begin metrics.pmp simulations.pmp -->   these keys and the keys below them
    <!-- keys:end -->

and everything between a begin and its end marker is generated: one row per schema key in
schema order with its path (``a.b``, ``<name>`` for the keys of a free mapping, ``[]`` for
the items of a list), type and allowed values, default and description. Nothing here knows
a key by name, so a schema change needs only ``python -m dpaudit.docs_gen`` (rewrites the
README); ``tests/unit/test_docs.py`` fails when the committed README differs from it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dpaudit.config_schema import SCHEMA_PATH, load_schema
from dpaudit.contract import metrics as vocabulary
from dpaudit.contract.mechanisms import MECHANISM_LABELS, MECHANISMS

README_PATH = Path(SCHEMA_PATH).resolve().parents[2] / "config" / "README.md"
METRICS_DOC_PATH = Path(SCHEMA_PATH).resolve().parents[2] / "docs" / "metrics.md"
BLOCK = re.compile(r"(<!-- keys:begin(?P<prefixes>[^>]*?)-->\n)(?P<body>.*?)(<!-- keys:end -->)", re.S)
HEADER = "| key | type / allowed | default | meaning |\n|---|---|---|---|\n"


def _resolve(node: Mapping, root: Mapping) -> dict:
    """The node with a local ``$ref`` merged in (the node's own keys win)."""
    node = dict(node)
    while "$ref" in node:
        ref = node.pop("$ref")
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, got {ref!r}")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = {**target, **node}
    return node


def _number(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _interval(node: Mapping) -> str:
    low = node.get("exclusiveMinimum", node.get("minimum"))
    high = node.get("exclusiveMaximum", node.get("maximum"))
    if low is not None and high is not None:
        left = "(" if "exclusiveMinimum" in node else "["
        right = ")" if "exclusiveMaximum" in node else "]"
        return f" in {left}{_number(low)}, {_number(high)}{right}"
    if low is not None:
        return f" {'>' if 'exclusiveMinimum' in node else '≥'} {_number(low)}"
    if high is not None:
        return f" {'<' if 'exclusiveMaximum' in node else '≤'} {_number(high)}"
    return ""


def describe_type(node: Mapping, root: Mapping) -> str:
    """Type and allowed values of one schema node, in words."""
    node = _resolve(node, root)
    if "const" in node:
        return _number(node["const"])
    if "enum" in node:
        return ", ".join(_number(v) for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            base = {k: v for k, v in node.items() if k not in (key, "description", "default")}
            parts = [describe_type({**base, **option}, root) for option in node[key]]
            return " or ".join(parts)
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(describe_type({**node, "type": k}, root) for k in kind)
    if kind == "array":
        items = _resolve(node.get("items", {}), root)
        text = "list of " + ("mappings" if items.get("type") == "object" else describe_type(items, root))
        if node.get("minItems") and node.get("minItems") == node.get("maxItems"):
            text += f", exactly {node['minItems']}"
        elif node.get("minItems"):
            text += f", at least {node['minItems']}"
        return text
    if kind == "object":
        names = node.get("propertyNames", {})
        if "enum" in names:
            return "mapping, names in {" + ", ".join(names["enum"]) + "}"
        if "pattern" in names:
            return "mapping, names matching `" + names["pattern"] + "`"
        return "mapping"
    if kind in ("integer", "number"):
        return f"{kind}{_interval(node)}"
    if kind == "string" and "pattern" in node:
        return "string matching `" + node["pattern"] + "`"
    if kind == "null":
        return "null"
    return str(kind) if kind else "any"


def _default(node: Mapping, required: bool) -> str:
    if "default" in node:
        return "`" + json.dumps(node["default"], ensure_ascii=False) + "`"
    return "required" if required else "—"


def _cell(text: str) -> str:
    """One table cell of Markdown: one line; outside code spans the characters GFM would read
    as HTML tags, emphasis or strikethrough are escaped, and ``|`` everywhere (GFM tables
    need ``\\|`` even inside code spans)."""
    parts = " ".join(str(text).split()).split("`")
    for k in range(0, len(parts), 2):  # even pieces lie outside code spans
        for char, escaped in (("\\", "\\\\"), ("*", "\\*"), ("~", "\\~"), ("<", "&lt;")):
            parts[k] = parts[k].replace(char, escaped)
    return "`".join(parts).replace("|", "\\|")


def key_rows(schema: Mapping) -> Iterator[tuple[str, str, str, str]]:
    """(key path, type / allowed, default, description) of every key below the root, in schema order.

    An object with ``properties`` contributes a row when it has a description (the section's
    meaning), then its properties; a free mapping (``additionalProperties`` schema) a row, then
    the keys of its values as ``<name>``; a list of objects a row, then its items' keys as ``[]``.
    """

    def walk(node: Mapping, path: str, required: bool, home: dict) -> Iterator[tuple[str, str, str, str]]:
        ref = node.get("$ref")
        if ref is not None:
            home.setdefault(ref, path)  # first pass: where each shared definition is met first
            if home[ref] != path:  # documented once, at its shortest path; elsewhere a pointer
                resolved = _resolve(node, schema)
                meaning = f"{resolved.get('description', '')} Keys as under `{home[ref]}`.".strip()
                yield path, describe_type(resolved, schema), _default(resolved, required), meaning
                return
        node = _resolve(node, schema)
        properties = node.get("properties")
        if path and (not properties or node.get("description")):
            yield path, describe_type(node, schema), _default(node, required), node.get("description", "")
        if properties:
            needed = set(node.get("required", ()))
            for name, child in properties.items():
                yield from walk(child, f"{path}.{name}" if path else name, name in needed, home)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping) and _resolve(extra, schema).get("properties"):
            yield from walk(extra, f"{path}.<name>", False, home)
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, Mapping) and _resolve(items, schema).get("properties"):
            yield from walk(items, f"{path}[]", False, home)

    # A first pass finds every path of each shared definition ($ref); it is expanded at the
    # shortest one (the top-level ``grid``, not ``datasets.<name>.grid``).
    seen: dict[str, list[str]] = {}

    def collect(node: Mapping, path: str) -> None:
        if "$ref" in node:
            seen.setdefault(node["$ref"], []).append(path)
            if len(seen[node["$ref"]]) > 1:
                return
        node = _resolve(node, schema)
        for name, child in node.get("properties", {}).items():
            collect(child, f"{path}.{name}" if path else name)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            collect(extra, f"{path}.<name>")
        if node.get("type") == "array" and isinstance(node.get("items"), Mapping):
            collect(node["items"], f"{path}[]")

    collect(schema, "")
    home = {ref: min(paths, key=lambda p: (p.count(".") + p.count("["), p)) for ref, paths in seen.items()}
    yield from walk(schema, "", False, home)


def _claims(prefixes: list[str], key: str) -> bool:
    return any(key == p or key.startswith((p + ".", p + "[", p + ".<")) for p in prefixes)


def render_table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = [f"| `{key}` | {_cell(kind)} | {_cell(default)} | {_cell(meaning)} |" for key, kind, default, meaning in rows]
    return HEADER + "".join(line + "\n" for line in lines)


def render_readme(text: str, schema: Mapping) -> str:
    """``text`` with the body of every keys block regenerated from ``schema``."""
    blocks = list(BLOCK.finditer(text))
    if not blocks:
        raise ValueError("no <!-- keys:begin --> ... <!-- keys:end --> block in the README")
    claimed = [m.group("prefixes").split() for m in blocks]
    rest = [p for prefixes in claimed for p in prefixes]
    rows = list(key_rows(schema))
    tables = []
    for prefixes in claimed:
        if prefixes:
            tables.append(render_table([r for r in rows if _claims(prefixes, r[0])]))
        else:
            tables.append(render_table([r for r in rows if not _claims(rest, r[0])]))
    out, last = [], 0
    for match, table in zip(blocks, tables, strict=True):
        out += [text[last:match.start("body")], table]
        last = match.end("body")
    out.append(text[last:])
    return "".join(out)


# ------------------------------------------------------------ docs/metrics.md


def _pipe(text: str) -> str:
    """A cell of docs/metrics.md: only ``|`` escaped (its meanings are plain sentences)."""
    return text.replace("|", "\\|")


def render_metrics_markdown() -> str:
    """docs/metrics.md: the metric vocabulary (dpaudit.contract.metrics) as a reference page."""
    v = vocabulary
    out = [
        "# Metric vocabulary",
        "",
        "<!-- Generated by `python -m dpaudit.docs_gen` from "
        "src/dpaudit/contract/metrics.py and mechanisms.py; do not edit by hand. -->",
        "",
        f"Every row of `results/tables/metrics.parquet` (schema version {v.SCHEMA_VERSION}, stored in the Parquet "
        f"key-value metadata under `{v.SCHEMA_VERSION_KEY!r}`) has the keys "
        + ", ".join(f"`{c}`" for c in v.KEY_COLUMNS)
        + ", a numeric value in `value` (float64) or, for a flag (type bool), a yes/no in `value_bool` "
        "(the other stays empty), and the parameter columns listed below. A metric name belongs to one "
        "family and has one meaning; parameters are columns, never parts of names. A parameter that shares "
        "its name with a run column is renamed `metric_<name>` in the joined table.",
        "",
        "Kinds:",
        "",
        *(f"- **{kind}**: {text}." for kind, text in v.KINDS.items()),
        "",
    ]
    for family in v.FAMILIES.values():
        level = " Dataset-level: rows carry no run." if family.level == "dataset" else ""
        out += [f"## `{family.name}`", "", f"{family.source[0].upper()}{family.source[1:]}.{level}", "",
                "| metric | kind | unit | type | meaning | parameter columns |", "|---|---|---|---|---|---|"]
        for m in v.METRICS:
            if m.family == family.name:
                params = ", ".join(f"`{p}`" for p in m.parameters) or "—"
                dtype = "bool" if m.dtype == "bool" else "float"
                out.append(f"| `{m.name}` | {m.kind} | {m.unit} | {dtype} | {_pipe(m.meaning)} | {params} |")
        out.append("")
    out += ["## Mechanisms", "", "| mechanism | label |", "|---|---|"]
    out += [f"| `{name}` | {MECHANISM_LABELS[name]} |" for name in MECHANISMS]
    out += ["", "## Changelog", "", "Schema version 2 (the vocabulary): renamed metrics, old → new.", "",
            "| family | old | new |", "|---|---|---|"]
    out += [f"| {family} | `{old}` | {_pipe(new)} |" for family, old, new in v.RENAMED]
    out.append("")
    return "\n".join(out)


def _rendered(path: Path) -> str:
    """What the generated file at ``path`` should hold: docs/metrics.md, or a README's key tables."""
    if path.name == METRICS_DOC_PATH.name:
        return render_metrics_markdown()
    return render_readme(path.read_text(encoding="utf-8"), load_schema())


def main(argv: list[str] | None = None) -> int:
    """Rewrite config/README.md and docs/metrics.md (or the one file given); ``--check`` only compares."""
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or [README_PATH, METRICS_DOC_PATH]
    stale = 0
    for path in paths:
        rendered = _rendered(path)
        if check:
            if not path.exists() or rendered != path.read_text(encoding="utf-8"):
                print(f"{path} differs from its source; run python -m dpaudit.docs_gen", file=sys.stderr)
                stale += 1
            continue
        path.write_text(rendered, encoding="utf-8")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
