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


REFUSING = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np, pandas as pd
    from snakemake.iocontainers import Namedlist, Snakemake
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.io import read_parquet
    from dpaudit.logs import job_logging

    case, tmp = sys.argv[1], Path(sys.argv[2])
    sm = Snakemake.__new__(Snakemake)
    sm.rule, sm.wildcards, sm.log = "prepare_dataset", Namedlist(), Namedlist([str(tmp / "job.log")])
    n = 200
    frame = pd.DataFrame({"id": np.arange(n), "x": np.linspace(0.0, 1.0, n), "y": ["a", "b"] * (n // 2)})
    if case == "missing":
        frame.loc[5, "x"] = np.nan
    elif case == "duplicate":
        frame.loc[7, "id"] = 3
    elif case == "inf":
        frame["x"] = frame["x"].astype(object)
        frame.loc[9, "x"] = "inf"
    elif case == "late_typo":
        frame = pd.concat([frame] * 300, ignore_index=True)
        frame["id"] = np.arange(len(frame))
        frame["x"] = frame["x"].astype(object)
        frame.loc[55_000, "x"] = "thirty"
    path = tmp / "t.csv"
    frame.to_csv(path, index=False)
    if case == "damaged":
        (tmp / "t.parquet").write_bytes(b"PAR1 not really a parquet file")
    with job_logging(sm) as log:
        if case == "damaged":
            read_parquet(tmp / "t.parquet")
        prepare_dataset("mine", {"table": path}, {"source": "table", "path": str(path), "label": "y", "id": "id"})
""")


@pytest.mark.parametrize(("case", "words"), [
    ("missing", "1 column(s) have missing cells: 'x' (1 cell, first at data row(s) [6])"),
    ("duplicate", "id column 'id' holds 3 twice (data rows 4 and 8)"),
    ("inf", "column 'x' data row 10 holds inf, not a finite number"),
    ("late_typo", "column 'x' is numeric in 59,999 rows but data row 55001 holds 'thirty'"),
    ("damaged", "t.parquet: cannot be read"),
])
def test_an_own_refusal_is_one_message_and_status_1_without_a_traceback(tmp_path, case, words):
    script = tmp_path / "job.py"
    script.write_text(REFUSING)
    done = subprocess.run([sys.executable, str(script), case, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("dpaudit refused (prepare_dataset): ") and words in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(f"(log: {tmp_path / 'job.log'})")
    log = (tmp_path / "job.log").read_text()
    assert "refused: " in log and words in log and "Traceback" not in log


PEAKS = textwrap.dedent("""
    import sys
    import numpy as np
    from pathlib import Path
    from dpaudit.logs import job_logging

    class Run:
        rule, wildcards = "demo", {}

        def __init__(self, name):
            self.log = [str(Path(sys.argv[1]) / f"{name}.log")]

    big = Run("big")
    with job_logging(big):
        held = np.ones(2**27 // 8)  # 128 MiB written: every page resident
        del held
    with job_logging(Run("small")):
        held = np.ones(2**25 // 8)  # 32 MiB
""")


def test_each_run_logs_its_own_kernel_peak(tmp_path):
    """Issue 47: the log's closing line gives the run's peak resident memory as the kernel counts it
    (VmHWM), reset at each run's start, so a batch's later run reports its own peak. Oracle: the
    bytes of the arrays written (a fresh interpreter holds far less than 128 MiB besides)."""
    import re

    script = tmp_path / "peaks.py"
    script.write_text(PEAKS)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    peaks = {}
    for name in ("big", "small"):
        line = (tmp_path / f"{name}.log").read_text().splitlines()[-1]
        found = re.search(r"done in [0-9.]+ s; peak resident memory ([0-9]+) MB \(kernel VmHWM\)", line)
        assert found, line
        peaks[name] = int(found.group(1))
    assert peaks["big"] >= 128 and peaks["small"] >= 32
    # the second run's peak was counted from its own start: not the first run's 128 MiB
    assert peaks["small"] < peaks["big"] - 64, peaks
