# Models trained outside dpaudit (issue 44): each external_models entry is a run of its dataset
# (EXTERNAL, rules/common.smk) whose per-example outputs table and record in place of train.json
# this job writes from the user's outputs file and ids files (dpaudit.external.importer), so every
# family that needs only outputs reads them as a trained run's; the files were checked at parse
# time (dpaudit.external.checks) and are checked again here against the prepared dataset.

from types import SimpleNamespace

from dpaudit.external.gradients import gradient_problem
from dpaudit.extract.extract import PMP_PAIR_OPTIONS as PMP_PAIR_KEYS

EXTERNAL_ENTRY_FILES = ("outputs", "model", "members", "held_out", "utility", "reference_outputs")
# The models trained elsewhere whose entry gives reference outputs: the reference-model attacks read them.
REFERENCED = {dataset: [run for run in EXTERNAL[dataset] if "reference_outputs" in config["external_models"][run]]
              for dataset in DATASETS}


# The models trained elsewhere whose per-example gradients dpaudit computes: a model file of Dense layers
# (dpaudit.external.gradients); with the pmp family on, also PMP Recipe A's pairs at its final weights.
GRADIENTED = {dataset: [run for run in EXTERNAL[dataset] if gradient_problem(config["external_models"][run]) is None]
              for dataset in DATASETS}


def external_gradient_outputs(wildcards):
    """P.GRADIENTS (and with the pmp family on P.PMP_PAIRS) of a model file with gradients, else nothing."""
    if wildcards.run not in GRADIENTED[wildcards.dataset]:
        return {}
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    patterns = {"gradients": P.GRADIENTS, **({"pmp_pairs": P.PMP_PAIRS} if PMP["enabled"] else {})}
    return {key: pattern.format(**keys) for key, pattern in patterns.items()}


def external_gradient_field(key):
    return lambda wildcards: external_gradient_outputs(wildcards).get(key, [])


def external_pool(pattern):
    """An output of the runs with reference outputs only (none for the others)."""
    return lambda wildcards: pattern.format(**wildcards) if wildcards.run in REFERENCED[wildcards.dataset] else []


def external_inputs(wildcards):
    """The entry's own files (a changed file reruns it) and its dataset's examples, info and ids."""
    entry = config["external_models"][wildcards.run]
    keys = {"dataset": wildcards.dataset}
    return {**{key: entry[key] for key in EXTERNAL_ENTRY_FILES if key in entry},
            "examples": P.EXAMPLES.format(**keys), "info": P.DATASET_INFO.format(**keys), "ids": P.IDS.format(**keys)}


def external_entry(wildcards):
    return config["external_models"][wildcards.run]


for _batch in run_batches("external_outputs", {dataset: list(EXTERNAL[dataset]) for dataset in DATASETS}):
    _files = batch_files(_batch, unpack=external_inputs, output={"outputs": P.OUTPUTS, "info": P.TRAIN_INFO,
                                                                  "pool": external_pool(P.EXTERNAL_POOL),
                                                                  "pool_info": external_pool(P.EXTERNAL_POOL_INFO),
                                                                  "gradients": external_gradient_field("gradients"),
                                                                  "pmp_pairs": external_gradient_field("pmp_pairs")},
                         log=P.log("external_outputs", P.RUN_KEY),
                         params={"entry": external_entry, "dataset_params": lambda wc: config["datasets"][wc.dataset]})

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            delta=config["training"]["delta"],
            allow_large_delta=config["training"]["allow_large_delta"],
            # the options that draw the parent set and Recipe B's partners (as the extraction's)
            **({"pmp": {key: PMP[key] for key in PMP_PAIR_KEYS}} if PMP["enabled"] else {}),
            code=CODE["external_outputs"],
        threads: 1
        resources:
            **batch_resources("external_outputs", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("external_outputs", _batch.key)
        script:
            "../scripts/external_outputs.py"


@intermediates
def external_files():
    """Every model trained elsewhere: its per-example outputs and its record."""
    return [pattern.format(dataset=dataset, run=run) for dataset in DATASETS for run in EXTERNAL[dataset]
            for pattern in (P.OUTPUTS, P.TRAIN_INFO)] + [
        path for dataset in DATASETS for run in GRADIENTED[dataset]
        for path in external_gradient_outputs(SimpleNamespace(dataset=dataset, run=run)).values()] + [
        pattern.format(dataset=dataset, run=run) for dataset in DATASETS for run in REFERENCED[dataset]
        for pattern in (P.EXTERNAL_POOL, P.EXTERNAL_POOL_INFO)]
