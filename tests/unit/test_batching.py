"""Batches of runs (issues 36, 47): how runs are packed into jobs, how a batch keeps its runs when the grid
grows, and what a batch job's script sees."""

import hashlib
import json
from types import SimpleNamespace

import pytest

from dpaudit import batching
from dpaudit.batching import Batch, Files, Record, assign, combined_resources, partition, run_jobs
from dpaudit.logs import job_logging


def test_partition_keeps_order_and_size():
    keys = [f"r{i}" for i in range(7)]
    assert partition(keys, 3) == [("r0", "r1", "r2"), ("r3", "r4", "r5"), ("r6",)]
    assert partition(keys, 1) == [(k,) for k in keys]
    assert partition(keys, 100) == [tuple(keys)]
    # every key exactly once, whatever the size (brute force over sizes)
    for size in range(1, 9):
        chunks = partition(keys, size)
        assert [k for chunk in chunks for k in chunk] == keys
        assert all(1 <= len(chunk) <= size for chunk in chunks)


def test_partition_never_splits_a_group_and_a_large_group_stands_alone():
    keys = ["a0", "a1", "b0", "b1", "c0", "c1", "c2", "d0"]
    groups = {k: k[0] for k in keys}
    assert partition(keys, 4, groups) == [("a0", "a1", "b0", "b1"), ("c0", "c1", "c2", "d0")]
    assert partition(keys, 2, groups) == [("a0", "a1"), ("b0", "b1"), ("c0", "c1", "c2"), ("d0",)]
    # a recipe's seeds listed apart (seed the first grid axis) still share a chunk, where the recipe first appears
    spread = ["a0", "b0", "a1", "b1"]
    assert partition(spread, 4, {k: k[0] for k in spread}) == [("a0", "a1", "b0", "b1")]
    assert partition(spread, 2, {k: k[0] for k in spread}) == [("a0", "a1"), ("b0", "b1")]


def test_partition_refuses_a_size_below_one():
    with pytest.raises(ValueError, match="workflow.runs_per_job must be at least 1, got 0"):
        partition(["a"], 0)


def test_batches_name_their_rule_and_benchmark_by_their_runs_and_refuse_colliding_datasets():
    found = batching.batches("metric_mia", {"my-data": ["r0", "r1", "r2"], "digits": ["x"]}, 2)
    # the name is a hash of the runs (oracle: sha256 of the keys joined by newlines), never a position
    first = "b" + hashlib.sha256(b"r0\nr1").hexdigest()[:12]
    assert [b.keys for b in found] == [("r0", "r1"), ("r2",), ("x",)]
    assert found[0].rule == f"metric_mia__my_data_{first}" and found[0].key == f"my-data/{first}"
    assert Batch("train_model", "other", ("r0", "r1")).name == first
    assert batching.rule_kind(found[0].rule) == "metric_mia" and batching.rule_kind("aggregate_metrics") == "aggregate_metrics"
    with pytest.raises(ValueError, match="datasets 'a-b' and 'a.b' name the same batch rules"):
        batching.batches("metric_mia", {"a-b": ["r"], "a.b": ["r"]}, 2)


def _record(keys, written, kind="train_model", dataset="d"):
    return Record(kind, dataset, tuple(keys), written)


def test_a_recorded_batch_keeps_its_runs_when_runs_are_added_anywhere():
    grid = ["a0", "a1", "b0", "b1", "c0", "c1"]
    groups = {k: k[0] for k in grid}
    before = assign("train_model", "d", grid, 4, groups=groups)
    assert [b.keys for b in before] == [("a0", "a1", "b0", "b1"), ("c0", "c1")]
    records = [_record(b.keys, 1.0) for b in before]
    # a seed added to every recipe (listed beside its recipe, as a grid with the seed last lists it)
    # and a recipe inserted before the others: the old batches stay as they were, the new runs
    # are packed among themselves (a recipe's new seeds together)
    grown = ["z0", "z1", "a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2"]
    after = assign("train_model", "d", grown, 4, groups={k: k[0] for k in grown}, records=records)
    assert {b.keys for b in after} >= {b.keys for b in before}
    new = [b.keys for b in after if b.keys not in {r.keys for r in records}]
    assert new == [("z0", "z1", "a2", "b2"), ("c2",)]
    assert [b.keys for b in after][0] == ("z0", "z1", "a2", "b2")  # listed by their first run's place in the grid
    # whatever the new size: a recorded batch is never cut again
    assert {b.keys for b in assign("train_model", "d", grid, 1, groups=groups, records=records)} == {
        b.keys for b in before}


def test_a_record_is_dropped_when_a_run_left_the_grid_and_the_newest_record_wins_a_run():
    grid = ["r0", "r1", "r2", "r3"]
    records = [_record(["r0", "r1"], 1.0), _record(["r2", "r9"], 1.0)]
    found = assign("metric_mia", "d", grid, 8, records=[_record(r.keys, r.written, "metric_mia") for r in records])
    assert [b.keys for b in found] == [("r0", "r1"), ("r2", "r3")]
    # r1 in two records (a batch remade after r0 left the grid, then r0 came back): the newer one holds it
    clash = [_record(["r0", "r1"], 1.0, "metric_mia"), _record(["r1", "r2"], 2.0, "metric_mia")]
    assert [b.keys for b in assign("metric_mia", "d", grid, 8, records=clash)] == [("r0", "r3"), ("r1", "r2")]
    # records of another rule or dataset are not this rule's
    other = [_record(["r0", "r1"], 1.0, "metric_mia", "e"), _record(["r2", "r3"], 1.0, "privacy_card")]
    assert [b.keys for b in assign("metric_mia", "d", grid, 8, records=other)] == [tuple(grid)]


def test_runs_of_two_classes_never_share_a_batch_and_a_mixed_record_is_not_kept():
    grid = ["base0", "dp0", "base1", "dp1", "lin0"]
    classes = {k: k.rstrip("01") for k in grid}
    found = assign("train_model", "d", grid, 8, classes=classes)
    assert [b.keys for b in found] == [("base0", "base1"), ("dp0", "dp1"), ("lin0",)]
    mixed = [_record(["base0", "dp0"], 1.0)]
    assert [b.keys for b in assign("train_model", "d", grid, 8, classes=classes, records=mixed)] == [
        b.keys for b in found]


def test_records_are_written_once_and_read_back(tmp_path):
    pattern = str(tmp_path / "batches" / "{kind}" / "{dataset}" / "{name}.json")
    found = batching.batches("metric_mia", {"d": ["r0", "r1", "r2"]}, 2)
    written = batching.write_records(found, pattern, now=lambda: 5.0)
    assert len(written) == 2
    payload = json.loads(open(written[0]).read())
    assert payload == {"version": batching.RECORD_VERSION, "kind": "metric_mia", "dataset": "d",
                       "keys": ["r0", "r1"], "written": 5.0}
    records = batching.read_records(sorted((tmp_path / "batches").rglob("*.json")))
    assert sorted(r.keys for r in records) == [("r0", "r1"), ("r2",)]
    # a batch a record already holds is not written again (its time keeps its place among the records)
    assert batching.write_records(found, pattern, records, now=lambda: 9.0) == []
    # an unreadable record or one of another format is left out
    (tmp_path / "batches" / "broken.json").write_text("{")
    (tmp_path / "batches" / "old.json").write_text(json.dumps({**payload, "version": 0}))
    assert len(batching.read_records([tmp_path / "batches" / "broken.json", tmp_path / "batches" / "old.json"])) == 0


def test_files_reads_like_a_namedlist():
    named = Files({"model": "m.keras", "info": "train.json"})
    assert named.model == "m.keras" and named[1] == "train.json" and named["info"] == "train.json"
    assert named.get("checkpoints") is None and "model" in named.keys() and list(named) == ["m.keras", "train.json"]
    plain = Files(["rows.parquet"])
    assert plain[0] == "rows.parquet" and len(plain) == 1 and list(plain.keys()) == []
    with pytest.raises(AttributeError):
        _ = named.missing


def _batch_object(jobs, **shared):
    return SimpleNamespace(rule="metric_mia__toy_0", threads=2, params=Files({**shared, "jobs": jobs}))


def _spec(run, tmp_path):
    return batching.job_spec({"dataset": "toy", "run": run}, input={"train": f"{run}.json"},
                             output=[str(tmp_path / f"{run}.parquet")], log=[str(tmp_path / f"{run}.log")],
                             params={"run": {"seed": int(run[-1])}})


def test_run_jobs_gives_each_run_its_files_and_the_shared_params_under_its_own(tmp_path):
    jobs = list(run_jobs(_batch_object([_spec("r0", tmp_path), _spec("r1", tmp_path)], options={"alpha": 0.05},
                                       run="shared value hidden by the run's own")))
    assert [job.wildcards.run for job in jobs] == ["r0", "r1"]
    assert [job.last for job in jobs] == [False, True]
    assert jobs[1].input.train == "r1.json" and jobs[1].output[0].endswith("r1.parquet")
    assert jobs[1].params.options == {"alpha": 0.05} and jobs[1].params.run == {"seed": 1}
    assert jobs[0].params.get("jobs") is None and jobs[0].threads == 2 and jobs[0].rule == "metric_mia__toy_0"
    assert jobs[0].name == "dataset=toy run=r0"


def test_a_failing_run_is_named_on_the_terminal_and_in_its_own_log(tmp_path, capfd):
    jobs = run_jobs(_batch_object([_spec("r0", tmp_path), _spec("r1", tmp_path)]))
    first = next(jobs)
    with job_logging(first) as log:
        log.info("first run works")
    second = next(jobs)
    with pytest.raises(RuntimeError, match="broken"), job_logging(second):
        raise RuntimeError("broken input")
    terminal = capfd.readouterr().err
    assert "dpaudit: metric_mia__toy_0 dataset=toy run=r1 failed: RuntimeError: broken input" in terminal
    assert str(tmp_path / "r1.log") in terminal and "run=r0 failed" not in terminal
    assert "first run works" in (tmp_path / "r0.log").read_text()
    assert "broken input" in (tmp_path / "r1.log").read_text()
    assert "broken input" not in (tmp_path / "r0.log").read_text()


def test_combined_resources_take_the_largest_memory_and_the_summed_runtime():
    assert combined_resources([{"mem_mb": 1000, "runtime": 3}, {"mem_mb": 4000, "runtime": 5}]) == {
        "mem_mb": 4000, "runtime": 8}
    with pytest.raises(ValueError, match="at least one run"):
        combined_resources([])


def test_batch_is_hashable_and_plain():
    batch = Batch("train_model", "digits", ("a", "b"))
    assert {batch: 1}[Batch("train_model", "digits", ("a", "b"))] == 1
