"""Config files as a user writes them, checked before any job (issue 26).

Snakemake reads ``--configfile`` itself, and (9.x) treats a file holding ``{}`` as no
file at all: the workflow's default ``config/config.yaml`` would run instead. Its own
errors for an empty file or a YAML tab do not name the file, and a missing file is a
traceback. ``read_config_file`` is the one reader that says what is wrong in one
line naming the file (and the line, for YAML errors); ``check_config_files`` refuses
an empty file and one that sets only default values (it names no dataset or grid, so
it is no experiment). The workflow calls it on the command line's config files at
parse time (``rules/common.smk``); ``make run`` / ``dry-run`` / ``unlock`` call it first
(``python -m dpaudit.configfile FILE...``), so the errors Snakemake raises before
reading the workflow never reach a user of the Makefile.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from dpaudit.logs import Refusal

HINT = ("copy config/config.yaml and edit it (every file under config/ is a complete experiment; "
        "config/README.md lists every key)")


class ConfigFileError(Refusal, ValueError):
    """A config file that cannot be read or describes no experiment; the message names the file."""


def _yaml_problem(path: Path, text: str, error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f"{path}: line {mark.line + 1}, column {mark.column + 1}" if mark is not None else f"{path}"
    lines = text.splitlines()
    line = lines[mark.line] if mark is not None and mark.line < len(lines) else ""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if "\t" in line or "'\\t'" in str(error):
        return (f"{where}: a tab character; YAML indents with spaces only: replace the tab(s) on that line "
                "with spaces")
    return f"{where}: not valid YAML ({problem}); fix that line"


def read_config_file(path: str | Path) -> Any:
    """The parsed content of a config file, or ConfigFileError naming the file (and line)."""
    path = Path(path)
    if not path.exists():
        raise ConfigFileError(f"config file {path} does not exist (check the path given to --configfile / CONFIG=)")
    if path.is_dir():
        raise ConfigFileError(f"config file {path} is a directory, not a YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigFileError(f"{path}: not UTF-8 text (byte {error.start}); save it as UTF-8 YAML") from None
    except OSError as error:
        raise ConfigFileError(f"config file {path} cannot be read ({error.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigFileError(_yaml_problem(path, text, error)) from None


def _only_defaults(value: Any, schema: Mapping, root: Mapping) -> bool:
    """True when every leaf ``value`` sets equals its schema default (an empty mapping sets nothing)."""
    from dpaudit.config_schema import _child_schemas, _resolve

    schema = _resolve(schema, root)
    if "default" in schema and schema["default"] == value:
        return True
    if isinstance(value, dict):
        for key, item in value.items():
            children = _child_schemas(schema, key, root)
            if not children or not any(_only_defaults(item, child, root) for child in children):
                return False
        return True
    return False


def check_config_file(path: str | Path, schema: Mapping | None = None) -> dict:
    """The config file's mapping; ConfigFileError when it is empty, not a mapping or only defaults."""
    from dpaudit.config_schema import load_schema

    path = Path(path)
    data = read_config_file(path)
    if data is None or data == {}:
        shown = "nothing but comments or blank lines" if data is None else "{}"
        raise ConfigFileError(f"{path}: the config file is empty ({shown}), so it describes no experiment "
                              f"(Snakemake would silently run config/config.yaml instead): {HINT}")
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: line 1: a config file is a mapping of keys (datasets:, grid:, ...), "
                              f"not a {type(data).__name__}: {HINT}")
    schema = load_schema() if schema is None else schema
    if _only_defaults(data, schema, schema):
        raise ConfigFileError(f"{path}: every key it sets ({', '.join(map(str, data))}) has its default value and "
                              f"it names no datasets or grid, so it describes no experiment: {HINT}")
    return data


def check_config_files(paths: Iterable[str | Path], schema: Mapping | None = None) -> dict[str, dict]:
    """Each checked file's mapping, by path (check_config_file)."""
    return {str(path): check_config_file(path, schema) for path in paths}


def overridden_batch_size(files: Mapping[str, Any], runs_per_job: int) -> str | None:
    """The warning when a config file's ``workflow.runs_per_job`` is not the value the run uses (a
    profile's ``config:`` or the command line's ``--config`` override files): None when no file
    sets it or the values agree. ``files``: each file's mapping by path (check_config_files)."""
    for path, content in reversed(list(files.items())):
        written = (content.get("workflow") or {}).get("runs_per_job") if isinstance(content, dict) else None
        if written is not None:
            if str(written) == str(runs_per_job):
                return None
            return (f"{path} sets workflow.runs_per_job {written}, but this run uses {runs_per_job} (a profile's "
                    f"config: or --config overrides the file; profiles/slurm sets 4); pass --config "
                    f"\"workflow={{runs_per_job: {written}}}\" to keep the file's value")
    return None


def config_source_line(paths: Iterable[str | Path], default: str = "config/config.yaml",
                       root: str | Path | None = None) -> str:
    """The one line the workflow prints at start saying which file(s) the experiment is: Snakemake's
    own banner names the Snakefile's default even when ``--configfile`` replaced it (issue 35).
    ``root``: the workflow's directory, against which the default is resolved (the working
    directory may be another: ``--directory``)."""
    given = [str(p) for p in paths]
    default_path = (Path(root) / default) if root is not None else Path(default)
    if [Path(p).resolve() for p in given] == [default_path.resolve()]:
        return f"dpaudit: experiment config {default}"
    if not given:
        return f"dpaudit: experiment config {default} (the default; --configfile FILE runs another)"
    return (f"dpaudit: experiment config {', '.join(given)}; {default} is not used (Snakemake's line "
            f"'Config file {default} is replaced ...' says the same)")


def refusal_lines(message: str, paths: Iterable[str | Path], default: str = "config/config.yaml") -> list[str]:
    """A refusal made while the Snakefile is read, as the lines the workflow prints: one per problem,
    each naming the config file(s) the experiment is (issue 46). ``message``: a ConfigError's or
    ConfigFileError's text ("invalid configuration:" and one indented problem a line, or one line)."""
    files = ", ".join(str(p) for p in paths) or default
    problems = [line.strip() for line in str(message).splitlines() if line.strip()]
    if len(problems) > 1 and problems[0].rstrip(":") == "invalid configuration":
        problems = problems[1:]
    return [f"dpaudit refused (config {files}): {problem}" for problem in problems]


def main(argv: list[str] | None = None) -> int:
    """``python -m dpaudit.configfile FILE...``: one line per bad file on stderr, exit 1; silent when fine."""
    paths = sys.argv[1:] if argv is None else argv
    bad = 0
    for path in paths:
        try:
            check_config_file(path)
        except ConfigFileError as error:
            print(f"dpaudit config: {error}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
