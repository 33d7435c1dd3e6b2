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
# share one expensive fixture stay on one worker: every user of the session-wide tiny
# end-to-end run (tests/e2e/conftest.py), and each module whose tests share a module
# fixture of their own (a finished run under tests/e2e, the SLURM cluster).
_MODULE_FIXTURE_GROUPS = ("e2e", "test_slurm.py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tiny_run" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("tiny_run"))
        elif any(key in item.path.parts for key in _MODULE_FIXTURE_GROUPS):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
