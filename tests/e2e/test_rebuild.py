"""Issue 19: `make run` brings results/ back to a complete, consistent state.

One tiny finished run (one model, --cores 1) is copied per case. For each kind of
intermediate: cut in half, the job that reads it fails naming the file and the fix;
deleted, the default target schedules the rule that makes it. Then all kinds deleted at
once and one real rerun: each producing rule runs, and every Parquet under results/ is
byte for byte the clean run's.
"""

import shutil

import pytest

from tests.workflow.helpers import finished_run, job_counts, snakemake

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("rebuild")

MINIMAL_CONFIG = {
    "datasets": {"synthetic": {"n": 120, "d": 3, "classes": 2, "separation": 1.5, "seed": 3}},
    "training": {"hidden_units": [4]},
    "grid": [{"mechanism": ["baseline"], "epochs": [1], "batch_size": [32], "seed": [0]}],
    "metrics": {"epsilon_star": {"enabled": False}},
}

# kind -> (path pattern under the work directory, the rule that rebuilds it, a file made
# by a job that reads it: the damaged run asks for that file only, so it runs the one job
# that must fail instead of everything downstream)
KINDS = {
    "model.keras": ("results/models/synthetic/*/model.keras", "train_model",
                    "results/per_example/synthetic/*/outputs.parquet"),
    "train.json": ("results/models/synthetic/*/train.json", "train_model", "results/metrics/mia/synthetic/*.parquet"),
    "examples.parquet": ("results/data/synthetic/examples.parquet", "prepare_dataset",
                         "results/models/synthetic/*/model.keras"),
    "outputs.parquet": ("results/per_example/synthetic/*/outputs.parquet", "extract_per_example",
                        "results/metrics/mia/synthetic/*.parquet"),
    "metric parquet": ("results/metrics/mia/synthetic/*.parquet", "metric_mia", "results/tables/metrics.parquet"),
}


def _parquet_bytes(workdir):
    return {
        str(path.relative_to(workdir)): path.read_bytes()
        for path in sorted((workdir / "results").rglob("*.parquet"))
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run = finished_run(tmp_path_factory.mktemp("rebuild"), MINIMAL_CONFIG, cores=1)
    return {**run, "parquet": _parquet_bytes(run["workdir"])}


def _copy(finished, tmp_path):
    workdir = tmp_path / "work"
    shutil.copytree(finished["workdir"], workdir, symlinks=True)  # copy2 keeps modification times

    def run(*args, check=True):
        return snakemake(workdir, "--cores", "1", *args, "--configfile", str(finished["config"]),
                         env=finished["env"], root=finished["project"], check=check)

    return workdir, run


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_damaged_intermediate_fails_its_reader_naming_the_file_and_a_deleted_one_is_scheduled(
        finished, kind, tmp_path):
    workdir, run = _copy(finished, tmp_path)
    pattern, rule, reader = KINDS[kind]
    (target,) = workdir.glob(pattern)
    (reader_output,) = workdir.glob(reader)
    relative = str(target.relative_to(workdir))

    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    failed = run(str(reader_output.relative_to(workdir)), check=False)
    assert failed.returncode != 0, failed.stdout[-3000:]
    said = failed.stdout + failed.stderr
    assert f"{relative}: cannot be read" in said and "delete it and run again" in said, said[-4000:]

    # the user deletes it: the default target alone (no file named) rebuilds it
    target.unlink()
    plan = run("-n")
    assert job_counts(plan.stdout + plan.stderr)[rule] == 1, plan.stdout[-3000:]


def test_deleted_intermediates_are_rebuilt_byte_identical(finished, tmp_path):
    # Every kind deleted at once, one real rerun: each producing rule runs, and every
    # Parquet under results/ is byte for byte the clean run's.
    workdir, run = _copy(finished, tmp_path)
    for pattern, _, _ in KINDS.values():
        for path in workdir.glob(pattern):
            path.unlink()
    rerun = run()
    counts = job_counts(rerun.stdout + rerun.stderr)
    assert all(counts[rule] == 1 for _, rule, _ in KINDS.values()), counts
    for pattern, _, _ in KINDS.values():
        assert list(workdir.glob(pattern)), pattern
    rebuilt = _parquet_bytes(workdir)
    assert rebuilt.keys() == finished["parquet"].keys()
    differ = [name for name in rebuilt if rebuilt[name] != finished["parquet"][name]]
    assert not differ, f"not byte-identical to the clean run: {differ}"


def test_a_truncated_final_table_fails_the_check_job_naming_it(finished, tmp_path):
    # issue 26: no job reads budget_totals.parquet; check_results does, on the next run
    workdir, run = _copy(finished, tmp_path)
    assert (workdir / "results" / "checked.json").exists()
    table = workdir / "results" / "tables" / "budget_totals.parquet"
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2])
    failed = run(check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0, said[-3000:]
    assert "results/tables/budget_totals.parquet: its Parquet footer cannot be read" in said, said[-4000:]
    assert "delete it and run again" in said
    assert job_counts(failed.stdout + failed.stderr).get("train_model", 0) == 0
    # the user does what it says: the default target rebuilds it and the check passes
    table.unlink()
    rerun = run()
    assert job_counts(rerun.stdout + rerun.stderr)["budget_ledger"] == 1
    assert table.read_bytes() == data
