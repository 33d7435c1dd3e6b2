"""The documentation resolves inside the repository.

* No tracked file cites a document the reader does not have: the design and developer notes
  and the per-source specification files that the project was built from (their content lives
  in docs/; sources are cited by author, year and equation, section or figure).
* Every relative link, repository path and ``dpaudit.*`` name cited in README.md, config/README.md
  and docs/*.md exists.
* README.md lists every rule file.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()
# Built from pieces so that this file does not match itself.
FORBIDDEN = {
    "design notes": re.compile("DESIGN" + r"\.md"),
    "developer notes": re.compile("DEVELOPERS" + r"\.md"),
    "a source specification by number": re.compile("seed" + "00", re.I),
    "a source by number instead of author and year": re.compile(r"\bsources? " + "00" + r"[0-4]\b", re.I),
    # "spec §2.6", "Spec M2", "spec P3", "the spec's table", "spec prototype": the per-source
    # specifications are not part of the repository (Python's importlib "spec" is not prose).
    "a specification": re.compile(r"\b" + "spec" + r"('s)?\s+(§|[A-Z]\d|prototype|seed)|\bthe " + "spec" + r"\b", re.I),
}
DOCS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Generated or user-side locations the documentation names but the repository does not hold.
NOT_IN_REPOSITORY = ("results/", "logs/", ".snakemake/", ".venv/", "~/", "/")


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    files = [name for name in out.stdout.decode().split("\0") if name]
    assert len(files) > 100, "git ls-files found too few files: not a checkout of the project?"
    return files


def test_no_reference_to_documents_outside_the_repository():
    found = []
    for name in tracked_files():
        if name == THIS or not (ROOT / name).is_file():
            continue
        text = (ROOT / name).read_bytes().decode("utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            found.extend(f"{name}:{lineno}: {what}: {line.strip()[:120]}"
                         for what, pattern in FORBIDDEN.items() if pattern.search(line))
    assert not found, "references to documents that are not in the repository:\n" + "\n".join(found)


def _top_level() -> set[str]:
    return {name.split("/")[0] for name in tracked_files()}


def _cited_paths(text: str) -> list[str]:
    """Repository paths in code spans: a first component that is a tracked top-level entry,
    no placeholders ({dataset}, <run>, *, ...) and no spaces."""
    top = _top_level()
    paths = []
    for span in CODE_SPAN.findall(text):
        span = span.strip().rstrip(".,;:")
        if " " in span or any(c in span for c in "{}<>*$=~|"):
            continue
        if span.split("/")[0] in top and ("/" in span or "." in span):
            paths.append(span)
    return paths


def _dpaudit_name_exists(dotted: str) -> bool:
    """``dpaudit.a.b.NAME``: the longest module prefix is a file or package under src/, and a
    remaining name (if any) is defined at the top level of that module."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT / "src" / Path(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            if not rest:
                return True
            source = module.read_text(encoding="utf-8")
            name = re.escape(rest[0])
            return re.search(rf"^(def|class) {name}\b|^{name}\s*[:=]|^from \S+ import .*\b{name}\b", source,
                             re.M) is not None
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documented_links_and_paths_exist(doc):
    text = doc.read_text(encoding="utf-8")
    missing = []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            missing.append(f"link {target}")
    for path in _cited_paths(text):
        if not path.startswith(NOT_IN_REPOSITORY) and not (ROOT / path).exists():
            missing.append(f"path {path}")
    for dotted in re.findall(r"`(dpaudit(?:\.\w+)+)", text):
        if not _dpaudit_name_exists(dotted):
            missing.append(f"name {dotted}")
    assert not missing, f"{doc.relative_to(ROOT)} cites what the repository does not hold: {missing}"


def test_readme_lists_every_rule_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rule_files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "rules").glob("*.smk"))
    assert len(rule_files) >= 11
    missing = [name for name in rule_files if f"`{name}`" not in readme]
    assert not missing, f"README.md does not list {missing}"


def test_config_readme_key_tables_are_generated_from_the_schema():
    # Drift test: after a schema change, `python -m dpaudit.docs_gen` rewrites config/README.md.
    from dpaudit import docs_gen
    from dpaudit.config_schema import load_schema

    readme = docs_gen.README_PATH.read_text(encoding="utf-8")
    assert docs_gen.render_readme(readme, load_schema()) == readme, (
        "config/README.md differs from workflow/schemas/config.schema.yaml: run "
        "`PYTHONPATH=src .venv/bin/python -m dpaudit.docs_gen` and commit the result")
    # Every key of the schema has its row; each generated block is one unbroken table.
    for key in ("grid[].microbatches", "datasets.<name>.training.dropout", "simulations.epsilon_star.sizes",
                "simulations.ks_fit.dataset", "metrics.pmp.recipe_c", "simulations.pmp.seed"):
        assert f"| `{key}` |" in readme, key
    keys = [row[0] for row in docs_gen.key_rows(load_schema())]
    assert len(keys) == len(set(keys)) and all(f"| `{key}` |" in readme for key in keys)
    for block in docs_gen.BLOCK.finditer(readme):
        body = block.group("body").strip("\n").split("\n")
        assert len(body) > 2 and all(line.startswith("|") and line.endswith("|") for line in body)


def test_key_table_renderer_on_a_small_schema():
    from dpaudit import docs_gen

    schema = {
        "type": "object", "required": ["grid"],
        "properties": {
            "grid": {"$ref": "#/$defs/grid"},
            "sets": {"type": "object", "description": "Per set.", "propertyNames": {"enum": ["a", "b"]},
                     "additionalProperties": {"type": "object", "properties": {
                         "grid": {"$ref": "#/$defs/grid", "description": "Own grid."},
                         "k": {"type": "integer", "minimum": 2, "description": "Size | count of <run>~r, ε* (`a|b*`)."}}}},
            "rate": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5, "default": 0.05},
            "delta": {"oneOf": [{"type": "string", "enum": ["auto"]}, {"type": "number", "minimum": 0}],
                      "default": "auto"},
            "rows": {"type": ["integer", "null"], "minimum": 2, "default": None},
        },
        "$defs": {"grid": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["m"], "properties": {
                "m": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}}}}},
    }
    rows = {key: (kind, default, meaning) for key, kind, default, meaning in docs_gen.key_rows(schema)}
    assert list(rows) == ["grid", "grid[].m", "sets", "sets.<name>.grid", "sets.<name>.k", "rate", "delta", "rows"]
    assert rows["grid"][:2] == ("list of mappings, at least 1", "required")
    assert rows["grid[].m"] == ("list of x, y", "required", "")
    assert rows["sets"][0] == "mapping, names in {a, b}"
    assert rows["sets.<name>.grid"][2] == "Own grid. Keys as under `grid`."
    assert rows["sets.<name>.k"][:2] == ("integer ≥ 2", "—")
    assert rows["rate"][:2] == ("number in (0, 0.5)", "`0.05`")
    assert rows["delta"][:2] == ("auto or number ≥ 0", '`"auto"`')
    assert rows["rows"][:2] == ("integer ≥ 2 or null", "`null`")
    text = "intro\n<!-- keys:begin -->\nstale\n<!-- keys:end -->\nmiddle\n<!-- keys:begin sets -->\n<!-- keys:end -->\n"
    out = docs_gen.render_readme(text, schema)
    first, second = out.split("middle")
    assert "stale" not in out and "`sets.<name>.k`" in second and "`sets.<name>.k`" not in first
    # GFM: | escaped everywhere; <, ~, * escaped outside code spans only.
    assert r"Size \| count of &lt;run>\~r, ε\* (`a\|b*`)." in second and "`rate`" in first
    assert docs_gen.render_readme(out, schema) == out


def test_cited_docs_pages_and_sections_exist():
    # "docs/stack.md, Pinned packages" in a comment must name a page and one of its headings.
    cited = re.compile(r"(docs/[\w-]+\.md)(?:, ([A-Z][A-Za-z ]*[a-z]))?")
    problems = []
    for name in tracked_files():
        if name == THIS or not name.endswith((".py", ".smk", ".yaml", ".toml", ".md", ".rst", "Makefile", "Snakefile")):
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for page, section in cited.findall(text):
            if not (ROOT / page).is_file():
                problems.append(f"{name}: {page}")
                continue
            headings = {h.strip() for h in re.findall(r"^#+ (.+)$", (ROOT / page).read_text(encoding="utf-8"), re.M)}
            if section and not any(h.startswith(section) for h in headings):
                problems.append(f"{name}: {page}, {section}")
    assert not problems, problems
