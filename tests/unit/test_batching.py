"""Batches of runs (issue 36): how runs are packed into jobs and what a batch job's script sees."""

from types import SimpleNamespace

import pytest

from dpaudit import batching
from dpaudit.batching import Batch, Files, combined_resources, partition, run_jobs
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


def test_batches_name_their_rule_and_benchmark_and_refuse_colliding_datasets():
    found = batching.batches("metric_mia", {"my-data": ["r0", "r1", "r2"], "digits": ["x"]}, 2)
    assert [b.rule for b in found] == ["metric_mia__my_data_0", "metric_mia__my_data_1", "metric_mia__digits_0"]
    assert found[0].key == "my-data/batch0" and found[1].keys == ("r2",)
    assert batching.rule_kind(found[0].rule) == "metric_mia" and batching.rule_kind("aggregate_metrics") == "aggregate_metrics"
    with pytest.raises(ValueError, match="datasets 'a-b' and 'a.b' name the same batch rules"):
        batching.batches("metric_mia", {"a-b": ["r"], "a.b": ["r"]}, 2)


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
    batch = Batch("train_model", "digits", 0, ("a", "b"))
    assert {batch: 1}[Batch("train_model", "digits", 0, ("a", "b"))] == 1
