"""A throw-away single-node SLURM cluster for tests (Debian's slurm-wlm 22.05 + munge).

Needs root: it installs the packages when they are missing, writes
``/etc/slurm/slurm.conf`` (the path SLURM's client commands read) and starts
munged (as the ``munge`` user), slurmctld and slurmd in the foreground so that it
holds their pids and stops exactly those. Every wait is bounded; a failure carries
the daemons' logs. The machine has no systemd, so nothing else starts them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SLURM_CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# written by dpaudit tests/slurm_cluster.py (a test cluster; removed after the test)"
PACKAGES = ("slurm-wlm", "munge")
BINARIES = ("munged", "mungekey", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scancel",
            "sinfo", "scontrol", "srun")
LOCK = Path("/run/lock/dpaudit-slurm-test.lock")
HOW_TO_RUN = (
    "The SLURM test starts a real single-node SLURM cluster and needs root (apt-get install of "
    "slurm-wlm and munge, /etc/slurm/slurm.conf, daemons). CI runs the suite as root; on a "
    "workstation run it in a root container or as `sudo .venv/bin/python -m pytest "
    "tests/workflow/test_slurm.py`."
)


class ClusterError(RuntimeError):
    """The test cluster could not be set up or stopped; the message carries the daemons' logs."""


def require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError(HOW_TO_RUN)


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if shutil.which(name) is None]


def install_packages(timeout: int = 900) -> str:
    """apt-get install slurm-wlm and munge when any of their programs is missing; returns what it did."""
    if not missing_binaries():
        return "slurm-wlm and munge already installed"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    result = subprocess.run(install, capture_output=True, text=True, timeout=timeout, env=env)
    if result.returncode != 0:
        # A clean machine's package lists may be stale or absent.
        update = subprocess.run(["apt-get", "update"], capture_output=True, text=True,
                                timeout=timeout, env=env)
        result = subprocess.run(install, capture_output=True, text=True, timeout=timeout, env=env)
        if result.returncode != 0:
            raise ClusterError(
                f"apt-get install {' '.join(PACKAGES)} failed ({result.returncode}):\n"
                f"{update.stdout[-2000:]}{update.stderr[-2000:]}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
    still_missing = missing_binaries()
    if still_missing:
        raise ClusterError(f"after apt-get install {' '.join(PACKAGES)}, still missing: {still_missing}")
    return f"installed {' '.join(PACKAGES)}"


def node_line(min_memory_mb: int = 65536) -> str:
    """This machine's node definition as slurmd detects it (CPUs, sockets must match).

    Memory is advertised as at least ``min_memory_mb``: the profile's requests
    (4 GB, 8 GB at a second attempt) must be schedulable on a small CI machine, and
    nothing enforces them here (no cgroups); the tiny jobs use a fraction of it.
    """
    detected = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True)
    line = next(x for x in detected.stdout.splitlines() if x.startswith("NodeName="))
    fields = dict(item.split("=", 1) for item in line.split())
    fields["RealMemory"] = str(max(int(fields.get("RealMemory", "0")), min_memory_mb))
    return " ".join(f"{key}={value}" for key, value in fields.items())


def slurm_conf(state: Path, node: str, host: str) -> str:
    return f"""{MARKER}
ClusterName=dpaudittest
# Loopback addresses: the test must not depend on the host name resolving.
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# Use the node definition below as written (its RealMemory is raised, see node_line).
SlurmdParameters=config_overrides
# No cgroups in the container: track processes by parent pid, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
StateSaveLocation={state}/slurmctld
SlurmdSpoolDir={state}/slurmd
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
# Cores and memory are consumable, so several one-core jobs share the node.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Finished jobs stay visible to squeue for 5 minutes: the Snakemake plugin reads
# their final state from squeue (there is no slurmdbd for sacct here).
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# One line per finished job (state, time limit, exit code): the test's record of
# what went through the scheduler.
JobCompType=jobcomp/filetxt
JobCompLoc={state}/jobcomp.txt
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """Start with ``start()``, always ``stop()`` (also after a failed start)."""

    def __init__(self, state: Path):
        self.state = state
        self.processes: dict[str, subprocess.Popen] = {}
        self.wrote_conf = False
        self.lock_file = None
        self.setup_notes: list[str] = []

    # -- logs --------------------------------------------------------------------------
    def logs(self, tail: int = 4000) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log", "jobcomp.txt"):
            path = self.state / name
            text = path.read_text(errors="replace")[-tail:] if path.exists() else "(missing)"
            parts.append(f"--- {path} ---\n{text}")
        for name, process in self.processes.items():
            parts.append(f"--- {name}: pid {process.pid}, returncode {process.poll()}")
        return "\n".join(parts)

    def fail(self, message: str) -> ClusterError:
        return ClusterError(f"{message}\n{self.logs()}")

    # -- start -------------------------------------------------------------------------
    def start(self, lock_timeout: float = 900) -> None:
        require_root()
        self._take_lock(lock_timeout)
        self.setup_notes.append(install_packages())
        if SLURM_CONF.exists() and MARKER not in SLURM_CONF.read_text():
            raise ClusterError(
                f"{SLURM_CONF} exists and was not written by this test: this machine has its own "
                "SLURM set-up, which the test will not overwrite. Run the test on a machine (or "
                "container) without one."
            )
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "slurmctld").mkdir(exist_ok=True)
        (self.state / "slurmd").mkdir(exist_ok=True)
        self._start_munge()
        host = socket.gethostname().split(".")[0]
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SLURM_CONF.write_text(slurm_conf(self.state, node_line(), host))
        self.wrote_conf = True
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait(lambda: self._run(["scontrol", "ping"]).returncode == 0, 60,
                   "slurmctld did not answer `scontrol ping` within 60 s")
        self._spawn("slurmd", ["slurmd", "-D"])
        self._wait(self._node_idle, 90, "the node did not become idle in `sinfo` within 90 s")

    def _take_lock(self, timeout: float) -> None:
        # Two test sessions on one machine would fight over /etc/slurm and the ports.
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        self.lock_file = LOCK.open("w")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self.lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ClusterError(f"another SLURM test held {LOCK} for {timeout:.0f} s") from None
                time.sleep(2)

    def _munge_answers(self) -> bool:
        encoded = self._run(["munge", "-n"])
        if encoded.returncode != 0:
            return False
        return subprocess.run(["unmunge"], input=encoded.stdout, capture_output=True, text=True,
                              timeout=10).returncode == 0

    def _start_munge(self) -> None:
        if self._munge_answers():
            # A munged already serves the default socket (not ours: we leave it running).
            self.setup_notes.append("reused a running munged")
            return
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True, timeout=60,
                           capture_output=True)
        for directory in (Path("/run/munge"), Path("/var/lib/munge"), Path("/var/log/munge"), key.parent):
            directory.mkdir(parents=True, exist_ok=True)
            shutil.chown(directory, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        key.chmod(0o600)
        log = self.state / "munged.log"
        log.touch()
        shutil.chown(log, "munge", "munge")
        shutil.chown(self.state, "root", "root")
        self.state.chmod(0o755)
        # --force: a stale socket left by a killed munged must not block the start.
        self._spawn("munged", ["munged", "--foreground", "--force", f"--log-file={log}"],
                    user="munge", group="munge")
        self._wait(self._munge_answers, 30, "munged did not answer `munge -n | unmunge` within 30 s")

    def _spawn(self, name: str, command: list[str], **kwargs) -> None:
        output = (self.state / f"{name}.stdout").open("w")
        self.processes[name] = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, **kwargs)

    def _run(self, command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, timeout=30)

    def _node_idle(self) -> bool:
        states = self._run(["sinfo", "-h", "-o", "%T"]).stdout.split()
        return bool(states) and all(s.rstrip("*") == "idle" for s in states)

    def _wait(self, condition, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise self.fail(f"{name} exited with {process.returncode} while waiting: {message}")
            if condition():
                return
            time.sleep(0.5)
        raise self.fail(message)

    # -- queries -----------------------------------------------------------------------
    def queue(self) -> list[dict[str, str]]:
        """Jobs squeue still shows (MinJobAge keeps finished ones): id, state, name, comment."""
        result = self._run(["squeue", "--states=all", "--noheader", "--format=%i|%T|%j|%k"])
        rows = []
        for line in result.stdout.splitlines():
            parts = line.split("|", 3)
            if len(parts) == 4:
                rows.append(dict(zip(("job_id", "state", "name", "comment"), parts, strict=True)))
        return rows

    def completed_jobs(self) -> list[dict[str, str]]:
        """Finished jobs from the jobcomp file: one dict of KEY=VALUE fields per job."""
        path = self.state / "jobcomp.txt"
        if not path.exists():
            return []
        jobs = []
        for line in path.read_text().splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            if fields:
                jobs.append(fields)
        return jobs

    # -- stop --------------------------------------------------------------------------
    def stop(self, timeout: float = 30) -> None:
        problems = []
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            # Nothing of ours may keep running: cancel every job this cluster still has.
            self._run(["scancel", "--full", "--user", "root"])
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                problems.append(f"{name} (pid {process.pid}) ignored SIGTERM for {timeout} s; killed")
                process.kill()
                process.wait(10)
        if self.wrote_conf and SLURM_CONF.exists() and MARKER in SLURM_CONF.read_text():
            SLURM_CONF.unlink()
        if self.lock_file is not None:
            fcntl.flock(self.lock_file, fcntl.LOCK_UN)
            self.lock_file.close()
            self.lock_file = None
        if problems:
            raise self.fail("; ".join(problems))
