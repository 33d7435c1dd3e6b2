"""The tests' Snakemake calls (helpers.snakemake) go through tests/snakemake_fork.py: a forked
child of a process that has imported Snakemake. Oracle: the same command as a plain subprocess
(the console script), which is what the helper ran before. The child must see the call's
environment, PYTHONPATH (the copy of the code under test, not the installed one), working
directory and arguments, and give the same return code and output."""

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.workflow.helpers import SNAKEMAKE, _fork_server

SNAKEFILE = textwrap.dedent("""
    import os, sys
    import probe_module

    print("ENV", os.environ.get("DPAUDIT_FORK_PROBE"), file=sys.stderr)
    print("CWD", os.getcwd(), file=sys.stderr)
    print("PROBE", probe_module.__file__, file=sys.stderr)
    print("PATH0", sys.path[0], file=sys.stderr)
    print("ARGV0", sys.argv[0], file=sys.stderr)
    print("DPAUDIT", "dpaudit" in sys.modules, file=sys.stderr)

    rule all:
        input: "out.txt"

    rule one:
        output: "out.txt"
        shell: "echo $DPAUDIT_FORK_PROBE > {output}"
""")


def _lines(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines() if line.split(" ", 1)[0] in
                {"ENV", "CWD", "PROBE", "PATH0", "ARGV0", "DPAUDIT"})


@pytest.fixture
def project(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "probe_module.py").write_text("")
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    return tmp_path


def _call(project: Path, workdir: Path, through_server: bool, *extra: str):
    command = [SNAKEMAKE, "--snakefile", str(project / "Snakefile"), "--directory", str(workdir),
               "--cores", "1", *extra]
    env = {**os.environ, "PYTHONPATH": str(project / "code"), "DPAUDIT_FORK_PROBE": "from-the-call"}
    if through_server:
        return _fork_server().run(command, env, timeout=120)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_a_forked_call_sees_what_a_subprocess_sees(project):
    results = {}
    for through_server in (False, True):
        workdir = project / f"work_{through_server}"
        workdir.mkdir()
        result = _call(project, workdir, through_server)
        assert result.returncode == 0, result.stderr[-3000:]
        assert (workdir / "out.txt").read_text() == "from-the-call\n"
        results[through_server] = _lines(result.stderr)
        assert results[through_server].pop("CWD") == str(workdir)  # Snakemake's --directory
    assert results[True] == results[False]
    seen = results[True]
    assert seen["ENV"] == "from-the-call" and seen["PROBE"] == str(project / "code" / "probe_module.py")
    assert seen["PATH0"] == str(project) and seen["ARGV0"] == SNAKEMAKE  # Snakemake puts the Snakefile's folder first
    # the server imports no dpaudit: a call's copy of it comes from the call's PYTHONPATH
    assert seen["DPAUDIT"] == "False"


def test_a_failing_call_returns_snakemakes_code_and_message(project):
    for through_server in (False, True):
        result = _call(project, project, through_server, "no_such_target")
        assert result.returncode == 1
        assert "MissingRuleException" in result.stderr or "No rule to produce no_such_target" in result.stderr, \
            result.stderr[-2000:]


def test_a_call_past_its_timeout_is_killed_and_raises(tmp_path):
    (tmp_path / "Snakefile").write_text('import time\ntime.sleep(30)\nrule all:\n    output: "x"\n    shell: "touch x"\n')
    command = [SNAKEMAKE, "--snakefile", str(tmp_path / "Snakefile"), "--directory", str(tmp_path), "--cores", "1"]
    with pytest.raises(subprocess.TimeoutExpired):
        _fork_server().run(command, dict(os.environ), timeout=2)
    # the server still answers after a killed call
    version = _fork_server().run([SNAKEMAKE, "--version"], dict(os.environ), timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == subprocess.run(
        [SNAKEMAKE, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
