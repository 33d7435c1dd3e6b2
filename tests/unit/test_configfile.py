"""Config files as written (issue 26): empty, all-default, tabs and missing files are named, before any job."""

import subprocess
import sys
from pathlib import Path

import pytest

from dpaudit.configfile import ConfigFileError, check_config_file, main, read_config_file
from tests.workflow.helpers import ROOT


@pytest.mark.parametrize(("text", "shown"), [("{}\n", "({})"), ("", "nothing but comments"),
                                             ("# only a comment\n\n", "nothing but comments")])
def test_an_empty_file_is_refused_naming_it_with_the_hint(tmp_path, text, shown):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as error:
        check_config_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}: the config file is empty") and shown in message
    assert "copy config/config.yaml" in message


def test_all_default_values_are_refused_and_one_changed_value_is_not(tmp_path):
    path = tmp_path / "defaults.yaml"
    path.write_text("training:\n  optimizer: sgd\n  momentum: 0.9\nmetrics:\n  mia: {alpha: 0.05}\n")
    with pytest.raises(ConfigFileError, match=r"defaults\.yaml: every key it sets \(training, metrics\) has its "
                                              r"default value.*copy config/config\.yaml"):
        check_config_file(path)
    path.write_text("training:\n  optimizer: adam\n")  # not a default: validation names the missing keys
    assert check_config_file(path) == {"training": {"optimizer": "adam"}}


def test_a_tab_names_the_file_and_line(tmp_path):
    path = tmp_path / "tabs.yaml"
    path.write_text("datasets:\n  digits: {}\ngrid:\n\t- mechanism: [baseline]\n")
    with pytest.raises(ConfigFileError, match=rf"^{path}: line 4, column 1: a tab character"):
        read_config_file(path)


def test_other_yaml_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("datasets:\n  digits: {n: 100\ngrid: []\n")
    with pytest.raises(ConfigFileError, match=rf"^{path}: line \d+, column \d+: not valid YAML"):
        read_config_file(path)


def test_a_list_is_refused(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- datasets\n")
    with pytest.raises(ConfigFileError, match="is a mapping of keys"):
        check_config_file(path)


def test_every_shipped_config_passes():
    for path in sorted((ROOT / "config").rglob("*.yaml")):
        assert isinstance(check_config_file(path), dict), path


def test_a_missing_file_is_one_line_without_traceback(tmp_path):
    missing = tmp_path / "nope.yaml"
    result = subprocess.run([sys.executable, "-m", "dpaudit.configfile", str(missing)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"dpaudit config: config file {missing} does not exist "
                                                  "(check the path given to --configfile / CONFIG=)"]
    assert main([str(ROOT / "config" / "config.yaml")]) == 0


def test_the_makefile_checks_the_config_before_snakemake():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("run", "dry-run", "unlock"):
        recipe = makefile.split(f"\n{target}: $(STAMP)\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert recipe[0].strip() == "$(CHECK_CONFIG)" and "snakemake" in recipe[1], (target, recipe)
    assert "CHECK_CONFIG = @$(BIN)/python -m dpaudit.configfile $(CONFIG)" in makefile


def test_the_start_line_names_the_experiment_config_once():
    from dpaudit.configfile import config_source_line

    assert config_source_line([]) == ("dpaudit: experiment config config/config.yaml (the default; --configfile "
                                      "FILE runs another)")
    assert config_source_line([str(Path("config/config.yaml").resolve())]) == (
        "dpaudit: experiment config config/config.yaml")
    line = config_source_line(["config/mine.yaml"])
    assert line.startswith("dpaudit: experiment config config/mine.yaml; config/config.yaml is not used")
    # the default is resolved against the workflow's directory, not the working directory
    # (`make lint` once said "config/config.yaml is not used" of config/config.yaml itself)
    assert config_source_line(["/elsewhere/project/config/config.yaml"], root="/elsewhere/project") == (
        "dpaudit: experiment config config/config.yaml")


def test_a_refusal_while_the_snakefile_is_read_is_one_line_per_problem_naming_the_file():
    from dpaudit.configfile import refusal_lines

    message = "invalid configuration:\n  config.training.delta: 1.5 is not below 1\n  config.grid[0].seed: -1 < 0"
    assert refusal_lines(message, ["mine.yaml"]) == [
        "dpaudit refused (config mine.yaml): config.training.delta: 1.5 is not below 1",
        "dpaudit refused (config mine.yaml): config.grid[0].seed: -1 < 0"]
    assert refusal_lines("mine.yaml: the config file is empty ({})", []) == [
        "dpaudit refused (config config/config.yaml): mine.yaml: the config file is empty ({})"]
