"""Install and code-hygiene checks that CI must enforce, not just the before-stop hook."""

import subprocess
import sys
from pathlib import Path

from tests.workflow.helpers import ROOT

BIN = Path(sys.executable).parent

# tensorflow-privacy 0.9.0 publishes pins the verified stack must break
# (docs/stack.md, Pinned packages): these are the only complaints `pip check` may print.
KNOWN_PIP_CHECK = {
    "tensorflow-privacy 0.9.0 requires tensorflow-estimator, which is not installed.",
    "tensorflow-privacy 0.9.0 requires tensorflow-probability, which is not installed.",
    "tensorflow-privacy 0.9.0 has requirement dp-accounting==0.4.3, but you have dp-accounting 0.6.0.",
    "tensorflow-privacy 0.9.0 has requirement numpy~=1.21, but you have numpy 2.4.6.",
    "tensorflow-privacy 0.9.0 has requirement packaging~=22.0, but you have packaging 25.0.",
}


def test_pip_check_prints_only_known_tensorflow_privacy_complaints():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    lines = {line.strip() for line in result.stdout.splitlines() if line.strip()}
    assert lines == KNOWN_PIP_CHECK, f"unexpected: {lines - KNOWN_PIP_CHECK}; missing: {KNOWN_PIP_CHECK - lines}"


def test_lock_file_pins_every_installed_package():
    lock = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if "==" in line
    }
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout
    installed = {
        line.split("==")[0].lower().replace("_", "-") for line in freeze.splitlines() if "==" in line
    } - {"pip"}
    assert installed <= lock, f"installed but not locked: {sorted(installed - lock)}"


def test_ruff_is_clean_and_bans_tensorflow_imports_outside_tf_module(tmp_path):
    result = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:]
    offender = ROOT / "src" / "dpaudit" / "_ruff_probe_tmp.py"
    offender.write_text("import tensorflow as tf\n\nprint(tf)\n")
    try:
        probe = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", str(offender)],
                               capture_output=True, text=True)
    finally:
        offender.unlink()
    assert probe.returncode != 0 and "TID251" in probe.stdout


def test_common_rule_file_keeps_only_what_every_family_shares():
    # Issue 43: rules/common.smk stays at most 200 lines; a function one family uses lives in its
    # rule file, the batching helpers in rules/batches.smk.
    lines = len((ROOT / "rules" / "common.smk").read_text(encoding="utf-8").splitlines())
    assert lines <= 200, f"rules/common.smk has {lines} lines (at most 200)"
