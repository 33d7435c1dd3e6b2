"""Project-wide test policy: a skipped test is a failed test (docs/stack.md, Tests); the
suite keeps its parse-time caches to itself."""

import atexit
import os
import shutil
import tempfile

import pytest

# dpaudit.caches: the suite (and every workflow it starts, which inherits the environment) reads and
# writes a cache folder of its own, never the user's ~/.cache/dpaudit: a test's result must not hang on
# what an earlier run of the project left there
_CACHE = tempfile.mkdtemp(prefix="dpaudit-test-cache-")
os.environ["DPAUDIT_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped tests count as failures in dpaudit: {reason}"


LONGEST_FIRST = ("tests/workflow/test_slurm.py", "tests/e2e/", "tests/unit/test_profile_adult.py",
                 "tests/unit/test_warm_process.py")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Make ``--dist loadgroup`` group again under pytest 9.2.

    pytest-xdist 3.8 marks a grouped test by appending ``@group`` to ``item._nodeid`` on the
    worker, but pytest 9.2 keeps the node id in ``item._id`` and ignores ``_nodeid``, so every
    xdist_group mark was silently dropped: both workers built their own tiny run and SLURM
    cluster. This does what xdist meant to do, once, and stands aside when xdist's own suffix
    is there (a fixed xdist or an older pytest).
    """
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    # The longest groups first: the SLURM cluster's (mostly waiting on the scheduler) beside the
    # tiny run's, instead of the SLURM group starting last while the other worker idles; then the
    # single tests of half a minute or more (Adult's 32,561 retrainings, the warm-process
    # interpreters), so that none of them is the last thing a worker runs.
    items.sort(key=lambda item: next((rank for rank, prefix in enumerate(LONGEST_FIRST)
                                      if item.nodeid.startswith(prefix)), len(LONGEST_FIRST)))

    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if not names and _uses_module_fixture(item):
            # A module fixture is built once per worker that runs the module: keep its tests together.
            names = [item.nodeid.split("::")[0]]
        if names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


def _uses_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(definition.scope in ("module", "package", "session")
               for definitions in info.name2fixturedefs.values() for definition in definitions
               if definition.baseid)
