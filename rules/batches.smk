# Batches of per-run rules (issue 36): the helpers every batched family's rules are written with.
# Included right after rules/common.smk, whose run lookups and job_resources they read.
from pathlib import Path
from types import SimpleNamespace

from dpaudit import batching

# ---- batches (issue 36): a per-run rule is written once per batch of at most
# workflow.runs_per_job runs of a dataset (dpaudit.batching), so a job pays its interpreter's
# start-up once for many runs; every run's files stay where the contract puts them. A family's
# rule is a loop over its batches (`for batch in run_batches(...)`, `rule: name: batch.rule`);
# its script walks the runs with dpaudit.batching.run_jobs.
RUNS_PER_JOB = config["workflow"]["runs_per_job"]
# Batches that keep their runs (issue 47): the batches recorded under results/batches/ when their
# runs were first started (Snakefile onstart: write_batch_records) are kept while all their runs
# are in the grid, so a grown grid packs only its new runs; a parse-time read of small JSON files.
BATCH_RECORDS = batching.read_records(sorted(Path(P.BATCHES).glob("*/*/*.json")))
# Every batch written at parse time, in order: the onstart hook records the new ones.
BATCHES = []


class RunWildcards(dict):
    """The wildcards of one run (or recipe) of a batch, for the families' input and params functions."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def keeps_checkpoints(wildcards):
    """A run whose weight checkpoints the pmp family reads (Recipe B): a DP-SGD run clipping each
    example (microbatches clip group means; every other mechanism has no PMP rows to compute);
    dpaudit.extract.checkpoints.not_applicable says the same of its train.json."""
    return _keeps_checkpoints(run_params(wildcards))


def _keeps_checkpoints(params):
    return PMP["enabled"] and params["mechanism"] == "dpsgd" and not params.get("microbatches")


def grid_class(params):
    """The class of a run (or recipe) with grid values ``params`` (issue 47): its mechanism (the two
    linear ones read the same settings) and whether it keeps PMP checkpoints. Each class reads
    settings the others do not (the linear training keys, the DP-SGD twin's canary options, a
    non-DP run no canary option, metrics.pmp.checkpoints only the DP-SGD runs that keep them), so
    runs of two classes never share a batch of any per-run rule: a setting one class reads reruns
    that class's jobs and, by modification time, its own runs' later jobs, never another class's."""
    mechanism = params["mechanism"]
    return ("linear" if mechanism in dpconfig.LINEAR_MECHANISMS else mechanism, _keeps_checkpoints(params))


def run_class(wildcards):
    return grid_class(run_params(wildcards))


def recipe_class(wildcards):
    return grid_class(RECIPES[wildcards.dataset][wildcards.recipe]["params"])


def _classes(runs, classes, key):
    """dataset -> run -> class of ``classes(wildcards)`` (runs of two classes never share a batch)."""
    return {dataset: {name: classes(RunWildcards(dataset=dataset, **{key: name})) for name in names}
            for dataset, names in runs.items()}


def run_batches(kind, runs=None, whole_recipes=False):
    """The batches of per-run rule ``kind`` over ``runs`` (dataset -> run names in grid order; every
    run by default), runs of one class each (``run_class``); with ``whole_recipes`` a recipe's new
    seeds share a batch (its TensorFlow jobs)."""
    runs = {dataset: list(RUNS[dataset]) for dataset in DATASETS} if runs is None else runs
    found = batching.batches(kind, runs, RUNS_PER_JOB, RUN_RECIPE if whole_recipes else None,
                             _classes(runs, run_class, "run"), BATCH_RECORDS)
    BATCHES.extend(found)
    return found


def recipe_batches(kind, recipes=None):
    """The batches of per-recipe rule ``kind`` (at most workflow.runs_per_job recipes of one class each)."""
    recipes = {dataset: list(RECIPES[dataset]) for dataset in DATASETS} if recipes is None else recipes
    found = batching.batches(kind, recipes, RUNS_PER_JOB, None, _classes(recipes, recipe_class, "recipe"),
                             BATCH_RECORDS)
    BATCHES.extend(found)
    return found


def write_batch_records():
    """The Snakefile's onstart: record every batch of this run's DAG (a job to run or one up to date;
    not a disabled family's) that no record holds yet, before any job runs (a cluster job's own
    parse then finds the same batches)."""
    in_dag = {job.rule.name for job in workflow.dag.jobs}
    written = batching.write_records([batch for batch in BATCHES if batch.rule in in_dag], P.BATCH_RECORD,
                                     BATCH_RECORDS)
    if written:
        logger.info(f"dpaudit: {len(written)} new batches recorded under {P.BATCHES}/")


def _batch_wildcards(batch, name, key):
    return RunWildcards(dataset=batch.dataset, **{key: name})


def _fill(value, wildcards):
    """A rule-style input/output value for one run: a callable's result (the run's own paths, flags
    such as report() kept) or a pattern filled in."""
    if callable(value):
        return value(wildcards)
    if isinstance(value, str):
        return value.format(**wildcards)
    return [item.format(**wildcards) for item in value]


def _flat(values):
    for value in values:
        if isinstance(value, str):
            yield value
        else:
            yield from value


def _per_run(values, wildcards):
    """A batch_files argument for one run: a function of its wildcards (a dict of what this run
    has), or a dict (or a single pattern) every run has."""
    return values(wildcards) if callable(values) else values


def batch_files(batch, *, output, log, input=None, unpack=None, params=None, key="run"):
    """What a batch rule declares: every run's inputs (``input`` values and ``unpack(wildcards)``'s,
    as in a one-run rule), outputs and logs, flat, and ``jobs``: each run's own, for
    dpaudit.batching.run_jobs (params values may be params functions of the run's wildcards).
    ``output`` and ``params`` may be functions of a run's wildcards giving its own dict: a file or
    value only some runs have."""
    jobs, inputs, outputs, logs = [], {}, [], []
    for name in batch.keys:
        wildcards = _batch_wildcards(batch, name, key)
        run_input = {k: _fill(v, wildcards) for k, v in (input or {}).items()}
        if unpack is not None:
            run_input.update({k: _fill(v, wildcards) for k, v in unpack(wildcards).items()})
        run_output = _per_run(output, wildcards)
        if isinstance(run_output, dict):
            run_output = {k: _fill(v, wildcards) for k, v in run_output.items()}
        else:
            run_output = [_fill(run_output, wildcards)]
        run_log = [_fill(log, wildcards)]
        run_params = {k: batching.evaluate(v, wildcards) for k, v in (_per_run(params, wildcards) or {}).items()}
        jobs.append(batching.job_spec(wildcards, input=run_input, output=run_output, log=run_log, params=run_params))
        inputs.update(dict.fromkeys(_flat(run_input.values())))
        outputs.extend(_flat(run_output.values() if isinstance(run_output, dict) else run_output))
        logs.extend(run_log)
    return SimpleNamespace(input=list(inputs), output=outputs, log=logs, jobs=jobs)


def batch_resources(name, batch, threads=1, sizes=None, key="run"):
    """mem_mb and runtime of a batch job (dpaudit.batching.combined_resources over its runs'
    dpaudit.resources.declared, computed once per attempt), and cpus_per_task = its threads for
    the SLURM executor (a generated rule's name is not one a profile can list)."""
    combined = {}

    def one(resource):
        def evaluate(wildcards, attempt):
            if attempt not in combined:
                combined[attempt] = batching.combined_resources(
                    [_job_resources(name, _batch_wildcards(batch, k, key), attempt, sizes) for k in batch.keys])
            return combined[attempt][resource]

        return evaluate

    return {"mem_mb": one("mem_mb"), "runtime": one("runtime"), "cpus_per_task": threads}
