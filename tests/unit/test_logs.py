"""job_logging: the log gets the job's lines; a job Snakemake runs skips interpreter teardown
once it has succeeded (issue 23), a failing one exits normally with its traceback."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import atexit, sys
    from pathlib import Path
    from snakemake.iocontainers import Namedlist, Snakemake
    from dpaudit.logs import job_logging

    out, fail = Path(sys.argv[1]), sys.argv[2] == "fail"
    atexit.register(lambda: (out.parent / "teardown.txt").write_text("ran"))
    sm = Snakemake.__new__(Snakemake)  # the class Snakemake's script preamble unpickles
    sm.rule, sm.wildcards, sm.log = "demo", Namedlist(), Namedlist([str(out.parent / "demo.log")])
    with job_logging(sm) as log:
        with open(out, "w") as handle:
            handle.write("x" * 100000)
        log.info("wrote it")
        if fail:
            raise RuntimeError("planted failure")
""")


@pytest.mark.parametrize("fail", [False, True])
def test_a_snakemake_job_skips_teardown_only_when_it_succeeded(tmp_path, fail):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "out.txt"), "fail" if fail else "ok"],
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "demo.log").read_text()
    assert (tmp_path / "out.txt").read_text() == "x" * 100000  # the output is whole either way
    assert "wrote it" in log
    if fail:
        assert done.returncode == 1
        assert "job failed" in log and "RuntimeError: planted failure" in log
        assert (tmp_path / "teardown.txt").exists()  # the normal exit: atexit handlers ran
    else:
        assert done.returncode == 0, done.stderr
        assert "done in" in log
        assert not (tmp_path / "teardown.txt").exists()  # os._exit: no teardown


def test_a_test_stand_in_keeps_the_normal_exit(tmp_path):
    from dpaudit.logs import job_logging

    class Fake:
        rule, wildcards, log = "demo", {}, [str(tmp_path / "demo.log")]

    with job_logging(Fake()) as log:
        log.info("inside")
    assert "done in" in (tmp_path / "demo.log").read_text()  # and this test process is still alive
