"""Project-wide test policy: a skipped test is a failed test (docs/stack.md, Tests)."""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped tests count as failures in dpaudit: {reason}"


# `make test` runs two pytest-xdist workers (--dist loadgroup, pyproject.toml). Tests that
# share one expensive session or module fixture stay on one worker: the tiny end-to-end run
# (every module under tests/e2e) and the SLURM cluster (one per module, started as root).
_SHARED_FIXTURE_GROUPS = {"e2e": "tiny_run", "test_slurm.py": "slurm_cluster"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = item.path.parts
        for key, group in _SHARED_FIXTURE_GROUPS.items():
            if key in parts:
                item.add_marker(pytest.mark.xdist_group(group))
