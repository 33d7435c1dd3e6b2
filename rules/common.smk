# What every family shares, set up at parse time: the validated config, the grids' runs,
# the code hashes, the path patterns (P) and the resources helper; the batching of per-run
# rules is in rules/batches.smk. Each family's own lookups and input functions live beside
# its rules in rules/<family>.smk (docs/architecture.md, "Where things are"). No TensorFlow,
# network or directory scans here.
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from dpaudit import config as dpconfig
from dpaudit import resources as dpresources
from dpaudit.codehash import ScriptCodeHashes
from dpaudit.configfile import (
    ConfigFileError,
    check_config_files,
    config_source_line,
    overridden_batch_size,
    refusal_lines,
)
from dpaudit.contract import paths as P
from dpaudit.contract.external import EXTERNAL as EXTERNAL_MECHANISM
from dpaudit.io import read_json as _read_json


def refuse_config(message):
    """A refusal while the Snakefile is read: one line per problem naming the config file, and
    exit 1. Snakemake prints any exception raised here with the frame of the file that raised it
    (`File ".../rules/common.smk", line N, in <module>`, snakemake.exceptions.format_error), which
    reads like a crash; SystemExit is the one exit its CLI lets through unprinted (issue 46)."""
    for line in refusal_lines(message, workflow.config_settings.configfiles):
        logger.error(line)
    raise SystemExit(1)


# The command line's config files as written (dpaudit.configfile): Snakemake runs the
# default config/config.yaml when one holds {}, so an empty or all-default file is
# refused here, naming it, before any job.
try:
    _config_files = check_config_files(workflow.config_settings.configfiles)
except ConfigFileError as error:
    refuse_config(str(error))
logger.info(config_source_line(workflow.config_settings.configfiles, root=workflow.basedir))

try:
    _validated = dpconfig.validate_config(config)
except dpconfig.ConfigError as error:
    refuse_config(str(error))
config.clear()
config.update(_validated)

for _warning in dpconfig.epsilon_rule_of_thumb_warnings(config):
    logger.warning(f"dpaudit config: {_warning}")
_overridden = overridden_batch_size(_config_files, config["workflow"]["runs_per_job"])
if _overridden:
    logger.warning(f"dpaudit config: {_overridden}")

DATASETS = sorted(config["datasets"])
GRIDS = dpconfig.dataset_grids(config)
# Models trained elsewhere (issue 44, rules/external.smk): runs of their dataset, grid values NA but the
# mechanism; TRAINED lists the runs dpaudit trains itself (training, extraction and the recipes read it).
EXTERNAL = dpconfig.external_runs(config)
TRAINED = {dataset: list(dpconfig.run_lookup(table)) for dataset, table in GRIDS.items()}
RUNS = {dataset: {**dpconfig.run_lookup(table), **EXTERNAL[dataset]} for dataset, table in GRIDS.items()}
# allow_large_delta is a check made in prepare_dataset, not a training setting;
# a dataset's own training block overrides the shared one (its architecture).
TRAINING = {
    dataset: {
        **{k: v for k, v in config["training"].items() if k != "allow_large_delta"},
        **config["datasets"][dataset].get("training", {}),
    }
    for dataset in DATASETS
}
# The per-run metric files aggregate_metrics joins (rules/aggregate.smk, metric_files).
FAMILIES = ["mia", "privacy_card"] + [
    family
    for family in ("epsilon_star", "identifiability", "pmp", "canary")
    if config["metrics"][family]["enabled"]
]

# Each rule's code hash covers the dpaudit modules its adapter script reaches
# (static import parsing, dpaudit.codehash): adding a rule or an import needs no
# list here. download_dataset is pinned by checksum and carries none.
CODE = ScriptCodeHashes(Path(workflow.basedir) / "scripts", unhashed=["download_dataset"])


wildcard_constraints:
    dataset="|".join(DATASETS),
    run=r"[A-Za-z0-9.+\-~_]+",
    filename=r"[A-Za-z0-9._\-]+",


# Rules marked `localrule: True` (downloads, aggregation, tables, figures, pages) run in
# the Snakemake process on a cluster's submit host (profiles/slurm): downloads need the
# network, which compute nodes often lack; the others take seconds, less than a queue
# wait. A new quick rule says so in its own rule; a new expensive rule does not.

# ---- the runs: every (dataset, run) of the grids. The pmp family's options are read by
# training (checkpoints, rules/batches.smk keeps_checkpoints) and its own rules (the pairs, the rows).
PMP = config["metrics"]["pmp"]


def run_params(wildcards):
    """Params function: the grid values of the job's run."""
    try:
        return RUNS[wildcards.dataset][wildcards.run]
    except KeyError:
        raise WorkflowError(f"run {wildcards.run!r} is not in the {wildcards.dataset} grid") from None


# Training recipes (issue 24): a grid row without its seed (dpaudit.config.recipe_lookup); a
# recipe's seeds share a reference pool and are batched together (issue 36); plus a model trained
# elsewhere's reference_recipe (issue 44, external~<run>: its pool is trained on its own P).
RECIPES = {dataset: {**dpconfig.recipe_lookup({run: RUNS[dataset][run] for run in TRAINED[dataset]}),
                     **dpconfig.external_recipes(config, dataset)} for dataset in DATASETS}
RUN_RECIPE = {dataset: {run: name for name, recipe in RECIPES[dataset].items() for run in recipe["runs"]}
              for dataset in DATASETS}


def attack_pool_inputs(wildcards):
    """The run's recipe reference pool (its outputs on P and its record): the attacks' and PMP
    Recipe C's input (rules/attacks.smk, rules/pmp.smk), read when their batches are written."""
    keys = {"dataset": wildcards.dataset, "recipe": RUN_RECIPE[wildcards.dataset][wildcards.run]}
    return {"pool": P.REFERENCE_POOL.format(**keys), "pool_info": P.REFERENCE_POOL_INFO.format(**keys)}


# Every (dataset, run) of the grids, in the order all_runs() lists their files: jobs
# that read one file per run get these keys as params, never from the paths.
RUN_KEYS = [(dataset, run) for dataset in DATASETS for run in RUNS[dataset]]


def all_runs(pattern):
    """Expand a path pattern with {dataset} and {run} over every run of every dataset (RUN_KEYS order)."""
    return [pattern.format(dataset=d, run=r) for d, r in RUN_KEYS]


def dataset_runs(pattern):
    """Input function: ``pattern`` expanded over every run of the job's dataset (dataset_run_names order)."""

    def files(wildcards):
        return [pattern.format(dataset=wildcards.dataset, run=run) for run in dataset_run_names(wildcards)]

    return files


def dataset_run_names(wildcards):
    """Params function: the runs of the job's dataset, in the order dataset_runs() lists their files."""
    return list(RUNS[wildcards.dataset])


# ---- resources that grow with the data (issues 19, 26): dpaudit.resources.declared computes
# mem_mb and runtime of every rule a cluster runs from what its job holds (n, d, the model
# size, full gradients, the twin's canaries, a view's rows, the config's simulation sizes);
# the SLURM profile sets neither, so this value (times the attempt) is what a job gets.
def dataset_shape(dataset):
    """(n, d, classes): the prepared dataset.json once it exists, the config before."""
    info = Path(P.DATASET_INFO.format(dataset=dataset))
    payload = _read_json(info) if info.exists() else None
    return dpresources.dataset_shape(payload, dataset, config["datasets"][dataset])


def _job_resources(name, wildcards, attempt, sizes):
    """dpaudit.resources.declared for one job: the sizes it grows with, read from its wildcards."""
    keys, size = dict(wildcards.items()), {}
    if "dataset" in keys:
        size["n"], size["d"], size["classes"] = dataset_shape(wildcards.dataset)
        if "run" in keys:
            size["run"] = run_params(wildcards)
            size["training"] = TRAINING[wildcards.dataset]
    if sizes is not None:
        size.update(sizes(wildcards, size))
    return dpresources.declared(name, config, **size, attempt=attempt)


def job_resources(name, sizes=None):
    """mem_mb and runtime of the named job kind as callables (``resources: **job_resources(name)``).

    A job grows with its dataset's n, d and classes and its run; ``sizes(wildcards, size)``
    returns what else a family's job grows with (a profile view's shape, the audit's runs).
    """

    def one(resource):
        def evaluate(wildcards, attempt):
            return _job_resources(name, wildcards, attempt, sizes)[resource]

        return evaluate

    return {"mem_mb": one("mem_mb"), "runtime": one("runtime")}


# ---- a complete results/ (issue 19): every file a job writes is a target. Each family
# registers the function listing its per-run and per-dataset files; rules/check.smk adds
# every other output of their jobs and names them all in rule all (complete_results).
INTERMEDIATES = []


def intermediates(files):
    """Decorator: register a family's function listing its intermediate files."""
    INTERMEDIATES.append(files)
    return files
