"""`make unlock` clears the lock a `kill -9`-ed run leaves behind (README, issue 7 §5); `make run` limits side-by-side jobs to the free memory."""

import os
import shlex
import signal
import subprocess
import time

import yaml

from tests.workflow.helpers import ROOT, SNAKEMAKE, snakemake

TINY_CONFIG = {
    "datasets": {"synthetic": {"n": 200, "d": 3, "classes": 2, "separation": 1.5, "seed": 3}},
    "training": {"hidden_units": [4]},
    "grid": [{"mechanism": ["baseline"], "epochs": [1], "batch_size": [16], "seed": [0]}],
}


def _unlock_command(config, extra: list[str]) -> list[str]:
    """The Makefile's `unlock` recipe for CONFIG and SNAKEMAKE_ARGS, as `make -n` prints it."""
    printed = subprocess.run(
        ["make", "-n", "unlock", f"CONFIG={config}", f"SNAKEMAKE_ARGS={shlex.join(extra)}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    lines = [line for line in printed.splitlines() if "--unlock" in line]
    assert len(lines) == 1, printed
    command = shlex.split(lines[0])
    # Run with this interpreter's snakemake, wherever its venv lives.
    assert command[0] == ".venv/bin/snakemake", command
    return [SNAKEMAKE, *command[1:]]


def test_make_unlock_clears_the_lock_of_a_killed_run(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_CONFIG))
    workdir = tmp_path / "work"
    workdir.mkdir()
    location = ["--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
                "--workflow-profile", str(ROOT / "profiles" / "default")]
    run = subprocess.Popen([SNAKEMAKE, *location, "--cores", "1", "--configfile", str(config)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    locks = workdir / ".snakemake" / "locks"
    try:
        deadline = time.monotonic() + 300
        while not (locks.is_dir() and any(locks.iterdir())):
            assert run.poll() is None, "the run ended before it took its lock"
            assert time.monotonic() < deadline, "no lock after 300 s"
            time.sleep(0.2)
    finally:
        # kill -9 of the run's own process group (Snakemake and any job it started).
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert any(locks.iterdir()), "SIGKILL leaves the lock behind"

    blocked = snakemake(workdir, "--cores", "1", "--configfile", str(config), "--until", "prepare_dataset",
                        check=False)
    assert blocked.returncode != 0
    assert "Directory cannot be locked" in blocked.stdout + blocked.stderr

    unlock = subprocess.run(_unlock_command(config, location), capture_output=True, text=True)
    assert unlock.returncode == 0, unlock.stderr[-3000:]
    assert not locks.exists() or not any(locks.iterdir())
    # The next run starts (and reruns whatever the kill interrupted).
    snakemake(workdir, "--cores", "1", "--configfile", str(config), "--until", "prepare_dataset")


def _run_command(*assignments: str) -> str:
    printed = subprocess.run(["make", "-n", "run", *assignments], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    lines = [line for line in printed.splitlines() if "--report-after-run" in line]
    assert len(lines) == 1, printed
    return lines[0]


def test_make_run_limits_side_by_side_jobs_to_the_free_memory():
    """Oracle: /proc/meminfo's MemAvailable at the time make reads it (± what moved since)."""
    command = shlex.split(_run_command())
    limit = int(command[command.index("--resources") + 1].removeprefix("mem_mb="))
    with open("/proc/meminfo") as meminfo:
        available = next(int(line.split()[1]) // 1024 for line in meminfo if line.startswith("MemAvailable:"))
    assert abs(limit - available) < 0.25 * available
    assert "--resources mem_mb=3000" in _run_command("MEM_MB=3000")
    assert "--resources" not in _run_command("MEM_MB=0")
