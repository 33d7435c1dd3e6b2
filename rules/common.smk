# Parse-time set-up: validate the config, type the grids, build the run lookup,
# and hash the library code each rule uses. No TensorFlow, network or directory
# scans here.
from pathlib import Path
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
from snakemake.io import apply_wildcards
from snakemake.logging import logger

from dpaudit import config as dpconfig
from dpaudit.codehash import ScriptCodeHashes
from dpaudit.configfile import ConfigFileError, check_config_files
from dpaudit.contract import paths as P
from dpaudit.contract.metrics import MECHANISM_SHORT_LABELS
from dpaudit.data.download import known_files, known_sources

# The command line's config files as written (dpaudit.configfile): Snakemake runs the
# default config/config.yaml when one holds {}, so an empty or all-default file is
# refused here, naming it, before any job.
try:
    check_config_files(workflow.config_settings.configfiles)
except ConfigFileError as error:
    raise WorkflowError(str(error)) from None

try:
    _validated = dpconfig.validate_config(config)
except dpconfig.ConfigError as error:
    raise WorkflowError(str(error)) from None
config.clear()
config.update(_validated)

for _warning in dpconfig.epsilon_rule_of_thumb_warnings(config):
    logger.warning(f"dpaudit config: {_warning}")

DATASETS = sorted(config["datasets"])
GRIDS = dpconfig.dataset_grids(config)
RUNS = {dataset: dpconfig.run_lookup(table) for dataset, table in GRIDS.items()}
# allow_large_delta is a check made in prepare_dataset, not a training setting;
# a dataset's own training block overrides the shared one (its architecture).
TRAINING = {
    dataset: {
        **{k: v for k, v in config["training"].items() if k != "allow_large_delta"},
        **config["datasets"][dataset].get("training", {}),
    }
    for dataset in DATASETS
}
FAMILIES = ["mia", "privacy_card"] + [
    family
    for family in ("epsilon_star", "identifiability", "pmp", "canary")
    if config["metrics"][family]["enabled"]
]
RAW_FILES = {dataset: known_files(dataset) for dataset in DATASETS}
# A table dataset's one input is its file (issue 25): a changed file reruns what depends on it.
# A table path that is a raw file the workflow downloads (config/own_table.yaml reads
# resources/raw/adult/adult.data) is made by download_dataset.
TABLES = {dataset: config["datasets"][dataset]["path"] for dataset in DATASETS
          if config["datasets"][dataset].get("source") == "table"}
DOWNLOADED = sorted({*DATASETS, *(found[0] for path in TABLES.values() if (found := dpconfig.table_download(path)))})

# Each rule's code hash covers the dpaudit modules its adapter script reaches
# (static import parsing, dpaudit.codehash): adding a rule or an import needs no
# list here. download_dataset is pinned by checksum and carries none.
CODE = ScriptCodeHashes(Path(workflow.basedir) / "scripts", unhashed=["download_dataset"])


wildcard_constraints:
    dataset="|".join(DATASETS),
    run=r"[A-Za-z0-9.+\-~_]+",
    filename=r"[A-Za-z0-9._\-]+",


# On a cluster (profiles/slurm) these run in the Snakemake process on the submit
# host: downloads need the network, which compute nodes often lack; aggregation,
# the ledger and figures take seconds, less than a queue wait. A new quick rule
# (table, figure, report) joins this list; a new expensive rule does not.
localrules:
    download_dataset,
    budget_ledger,
    teaching_figures,
    epsilon_star_ks_fit,
    aggregate_metrics,
    plot_privacy_utility,
    plot_epsilon_star_landscape,
    download_profile_data,
    pmp_report,
    plot_identifiability,
    plot_profile,
    plot_profile_samples,
    pmp_gather_shadows,
    plot_audit,
    plot_model_figures,
    plot_canary,
    metric_canary,
    dossier,
    dossier_guidance,
    check_results,


def run_params(wildcards):
    return RUNS[wildcards.dataset].get(wildcards.run) or pmp_shadow_run(wildcards)["params"]


def training_params(wildcards):
    # Only the settings this run's mechanism uses, so a linear-only key (Λ) never
    # reruns the Keras runs and an MLP setting never reruns the linear ones.
    return dpconfig.training_for_mechanism(TRAINING[wildcards.dataset], run_params(wildcards)["mechanism"])


def raw_inputs(wildcards):
    if wildcards.dataset in TABLES:
        return {"table": TABLES[wildcards.dataset]}
    return {
        name: ancient(P.RAW_FILE.format(dataset=wildcards.dataset, filename=name))
        for name in RAW_FILES[wildcards.dataset]
    }


def download_sources(wildcards):
    return known_sources(wildcards.dataset, wildcards.filename)


def dataset_params(wildcards):
    return config["datasets"][wildcards.dataset]


# Every (dataset, run) of the grids, in the order all_runs() lists their files: jobs
# that read one file per run get these keys as params, never from the paths.
RUN_KEYS = [(dataset, run) for dataset in DATASETS for run in RUNS[dataset]]


def all_runs(pattern):
    """Expand a path pattern with {dataset} and {run} over every run of every dataset (RUN_KEYS order)."""
    return [pattern.format(dataset=d, run=r) for d, r in RUN_KEYS]


def metric_files():
    return [
        P.METRIC.format(family=family, dataset=dataset, run=run)
        for family in FAMILIES
        for dataset in DATASETS
        for run in RUNS[dataset]
    ]


def landscape_figures():
    if "epsilon_star" not in FAMILIES:
        return []
    return [P.LANDSCAPE_FIGURE.format(dataset=dataset) for dataset in DATASETS]


def ks_fit_runs(wildcards=None):
    """The first non-private and the first DP-SGD run of the Fig 6 dataset's grid."""
    dataset = config["simulations"]["ks_fit"]["dataset"]
    if dataset not in RUNS:
        raise WorkflowError(
            f"config.simulations.ks_fit.dataset: {dataset!r} is not among the datasets {DATASETS}"
        )
    runs = {}
    for run, params in RUNS[dataset].items():
        runs.setdefault(params["mechanism"], run)
    missing = {"baseline", "dpsgd"} - set(runs)
    if missing:
        raise WorkflowError(f"config.simulations.ks_fit: the {dataset} grid has no {sorted(missing)} run")
    return {"dataset": dataset, "baseline": runs["baseline"], "dpsgd": runs["dpsgd"]}


def ks_fit_inputs(wildcards):
    chosen = ks_fit_runs()
    return {
        mechanism: P.OUTPUTS.format(dataset=chosen["dataset"], run=chosen[mechanism])
        for mechanism in ("baseline", "dpsgd")
    } | {"info": P.DATASET_INFO.format(dataset=chosen["dataset"])}


def simulation_targets():
    targets = []
    if config["simulations"]["epsilon_star"]["enabled"]:
        targets.append(P.EPSILON_STAR_FIGURE.format(k=5))
    if config["simulations"]["ks_fit"]["enabled"]:
        ks_fit_runs()
        targets.append(P.EPSILON_STAR_FIGURE.format(k=6))
    return targets


# ---------------------------------------------------------------------------
# Privacy profile (LeBlond et al. 2023): per numeric view, no trained run.
PROFILE = config["profile"]
PROFILE_VIEWS = sorted(PROFILE["views"]) if PROFILE["enabled"] else []


def profile_view_spec(wildcards):
    return PROFILE["views"][wildcards.view]


def profile_raw_inputs(wildcards):
    source = PROFILE["views"][wildcards.view]["source"]
    if source == "adult":
        return {"raw": ancient(P.PROFILE_RAW_FILE.format(source="adult", filename="adult.data"))}
    return {}


def profile_download_sources(wildcards):
    return known_sources(wildcards.source, wildcards.filename)


def profile_metric_files():
    return [P.VIEW_METRIC.format(family="profile", view=view) for view in PROFILE_VIEWS]


def profile_targets():
    if not PROFILE["enabled"]:
        return []
    flat = [view for view in PROFILE_VIEWS if PROFILE["views"][view]["figures"]]
    figures = [P.PROFILE_FIGURE.format(view=view, k=k) for view in flat for k in range(2, 8)]
    exact = [P.PROFILE_EXACT.format(view=view) for view in PROFILE_VIEWS]
    samples = [P.PROFILE_FIGURE.format(view=view, k=k) for view in PROFILE["samples"]["views"] for k in (1, 8)]
    return figures + samples + exact
# ---------------------------------------------------------------- audit (Bernau et al. 2021)
# The identifiability audit (Bernau et al. 2021): configurations per dataset and the
# blocks of runs each job trains, as parse-time lookups.
from dpaudit.metrics.identifiability_grid import audit_configs as _audit_configs
from dpaudit.metrics.identifiability_grid import blocks as _audit_blocks
from dpaudit.metrics.identifiability_grid import target_problems as _audit_target_problems

AUDIT = config["audit"]
AUDIT_SHARED = {k: v for k, v in AUDIT.items() if k != "datasets"}
AUDIT_DATASETS = sorted(AUDIT["datasets"]) if AUDIT["enabled"] else []
# (every audited dataset is also under config.datasets: checked by dpaudit.config)
_unreachable = [
    problem for dataset in AUDIT_DATASETS for problem in _audit_target_problems(dataset, AUDIT["datasets"][dataset], AUDIT)
]
if _unreachable:
    raise WorkflowError("invalid configuration:\n  " + "\n  ".join(_unreachable))
AUDIT_CONFIGS = {
    dataset: _audit_configs(AUDIT["datasets"][dataset], AUDIT) for dataset in AUDIT_DATASETS
}


def audit_block_files(kind):
    return [
        P.AUDIT_BLOCK.format(dataset=dataset, audit_config=name, block=block, kind=kind)
        for dataset in AUDIT_DATASETS
        for name, params in AUDIT_CONFIGS[dataset].items()
        for block in _audit_blocks(params["runs"], AUDIT["block_size"])
    ]


def audit_options(wildcards):
    return AUDIT["datasets"][wildcards.dataset]


def audit_config_params(wildcards):
    return AUDIT_CONFIGS[wildcards.dataset][wildcards.audit_config]


def audit_figures():
    if not AUDIT_DATASETS:
        return []
    return [P.IDENTIFIABILITY_FIGURE.format(k=i) for i in range(1, 7)] + [
        P.IDENTIFIABILITY_AUDIT_FIGURE.format(dataset=dataset) for dataset in AUDIT_DATASETS
    ] + [P.IDENTIFIABILITY_TABLES_PAGE]


# ---------------------------------------------------------------- pmp (Lowy et al. 2024)
# Recipe C shadow models are extra runs of train_model/extract_per_example named
# <run>_pmpshadow~<r>; they live in their own lookup so aggregation never sees them.
# Each shadow trains with its own seed (init, batches, DP noise), derived from the
# run's seed and its index; the grid runs' own params are untouched.
from dpaudit.training.shadow_seeds import shadow_seed as _shadow_seed

PMP = config["metrics"]["pmp"]
PMP_SHADOWS = {
    dataset: {
        f"{run}_pmpshadow~{index}": {
            "params": {**params, "seed": _shadow_seed(params["seed"], index)},
            "target": run,
            "index": index,
        }
        for run, params in RUNS[dataset].items()
        if params["mechanism"] == "dpsgd"
        for index in range(PMP["shadow_models"] if PMP["enabled"] else 0)
    }
    for dataset in DATASETS
}


def pmp_shadow_run(wildcards):
    try:
        return PMP_SHADOWS[wildcards.dataset][wildcards.run]
    except KeyError:
        raise WorkflowError(f"run {wildcards.run!r} is neither in the {wildcards.dataset} grid nor a PMP shadow model") from None


def pmp_train_outputs():
    """train_model writes weight checkpoints only when the pmp family is enabled."""
    if not PMP["enabled"]:
        return {}
    return {"checkpoints": P.CHECKPOINTS}


def pmp_train_params():
    if not PMP["enabled"]:
        return {}
    return {"checkpoints": PMP["checkpoints"], "pmp_shadow": pmp_shadow_training}


def pmp_extract_inputs():
    """extract_per_example computes what Recipes A and B need of the per-example gradients at
    every checkpoint (metric_pmp starts no TensorFlow) when the pmp family is enabled."""
    if not PMP["enabled"]:
        return {}
    return {"checkpoints": P.CHECKPOINTS}


def pmp_extract_outputs():
    if not PMP["enabled"]:
        return {}
    return {"pmp_pairs": P.PMP_PAIRS}


def pmp_extract_params():
    if not PMP["enabled"]:
        return {}
    return {"pmp": pmp_parent_options}


def pmp_parent_options(wildcards):
    """The parent set X of a run's PMP metric and Recipe B's partner draw and projection
    (the extraction computes the pairs); None for a shadow model (its file has no rows)."""
    if wildcards.run in PMP_SHADOWS[wildcards.dataset]:
        return None
    return {key: PMP[key] for key in ("parent_seed", "nonmember_pool", "partners", "projection_dim", "seed")}


def pmp_shadow_training(wildcards):
    """Which random half of X a shadow model trains on; None for an ordinary run."""
    shadow = PMP_SHADOWS[wildcards.dataset].get(wildcards.run)
    if shadow is None:
        return None
    return {"index": shadow["index"], "seed": PMP["parent_seed"], "pool": PMP["nonmember_pool"]}


def pmp_shadow_loss_files(wildcards):
    return {
        name: P.OUTPUTS.format(dataset=wildcards.dataset, run=name)
        for name, shadow in PMP_SHADOWS[wildcards.dataset].items()
        if shadow["target"] == wildcards.run
    }


def pmp_shadow_indices(wildcards):
    return {name: PMP_SHADOWS[wildcards.dataset][name]["index"] for name in pmp_shadow_loss_files(wildcards)}


def pmp_metric_files():
    return [P.METRIC.format(family="pmp", dataset=dataset, run=run) for dataset in DATASETS for run in RUNS[dataset]]


def pmp_metric_inputs(wildcards):
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    inputs = {
        "examples": P.EXAMPLES.format(**keys),
        "info": P.DATASET_INFO.format(**keys),
        "train": P.TRAIN_INFO.format(**keys),
        "pairs": P.PMP_PAIRS.format(**keys),
    }
    if pmp_shadow_loss_files(wildcards):
        inputs["shadows"] = P.PMP_SHADOW_SCORES.format(**keys)
    return inputs


def pmp_targets():
    targets = [P.PMP_RUNS_PAGE] if PMP["enabled"] else []
    if config["simulations"]["pmp"]["enabled"]:
        targets += [P.PMP_FIGURE.format(k=k) for k in range(1, 7)]
    return targets


# ---- per-dataset report figures (issue 8): audit figure, figures over all models of a dataset
MODEL_FIGURES = {
    "roc": "attack ROCs (log–log)",
    "tpr_at_low_fpr": "TPR at FPR 1e-3 and 1e-2",
    "loss_histograms": "member vs non-member losses",
    "training_curves": "training curves",
    "utility": "utility across seeds",
}


def dataset_runs(pattern):
    """Input function: ``pattern`` expanded over every run of the job's dataset (dataset_run_names order)."""

    def files(wildcards):
        return [pattern.format(dataset=wildcards.dataset, run=run) for run in dataset_run_names(wildcards)]

    return files


def dataset_run_names(wildcards):
    """Params function: the runs of the job's dataset, in the order dataset_runs() lists their files."""
    return list(RUNS[wildcards.dataset])


def report_figures():
    return [
        P.DATASET_FIGURE.format(name=name, dataset=dataset)
        for name in ["audit", *MODEL_FIGURES]
        for dataset in DATASETS
    ]

# Teaching figures of the DP lecture: output name -> what the report calls it.
TEACHING_FIGURES = {
    "f1": "Laplace vs Gaussian noise",
    "f2": "Laplace error vs count",
    "f3": "composition of many queries",
    "f4": "exponential mechanism",
    "f5": "DP region in ROC space",
}


def card_labels(wildcards):
    """Short report label of a privacy card: mechanism, target ε, seed.

    One label, not three: the report turns a second label with two values into a
    toggle and crashes when the grid does not cross them (a baseline has no ε).
    The report sorts labels as text, so numbers are padded with figure spaces
    (U+2007, digit-wide, sorted before digits): ε = 4 comes before ε = 16.
    """
    params = RUNS[wildcards.dataset][wildcards.run]
    target = params.get("target_epsilon")
    has_target = target is not None and target == target
    seed = params.get("seed")
    mechanism = MECHANISM_SHORT_LABELS[params["mechanism"]]
    epsilon = f"ε = {f'{target:g}'.rjust(3, chr(0x2007))}" if has_target else "ε = ∞ (no DP)"
    seed_text = "" if seed is None else f" · seed {str(seed).rjust(2, chr(0x2007))}"
    return {"model": f"{mechanism} · {epsilon}{seed_text}"}


# ---------------------------------------------------------------- canary audits (issue 17)
CANARY_MECHANISMS = ("dpsgd", *dpconfig.LINEAR_MECHANISMS)


def canary_audited(wildcards):
    return run_params(wildcards)["mechanism"] in CANARY_MECHANISMS


def canary_metric_inputs(wildcards):
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    inputs = {"train": P.TRAIN_INFO.format(**keys)}
    if canary_audited(wildcards):
        inputs["scores"] = P.CANARY_SCORES.format(**keys)
        inputs["record"] = P.CANARY_AUDIT.format(**keys)
    return inputs


def canary_dpsgd_files(wildcards, pattern):
    """A dataset's audit-twin files (``pattern``: DP-SGD runs only), in grid order."""
    return [
        pattern.format(dataset=wildcards.dataset, run=run)
        for run, params in RUNS[wildcards.dataset].items()
        if params["mechanism"] == "dpsgd"
    ]


def canary_figures():
    if "canary" not in FAMILIES:
        return []
    datasets = [d for d in DATASETS if any(p["mechanism"] == "dpsgd" for p in RUNS[d].values())]
    return [P.CANARY_FIGURE.format(kind=kind, dataset=d) for d in datasets for kind in ("guesses", "tradeoff")]


def canary_card_input():
    """The privacy card shows the run's ε ladder when the canary family is on."""
    return {"canary": P.metric("canary")} if "canary" in FAMILIES else {}


# ---- a complete, consistent results/ (issue 19): every file a job writes is a target
# Snakemake does not rebuild a missing intermediate while the files made from it are
# present, so the default target names every file of every job (a deleted one is rebuilt, and
# everything downstream follows by modification time). Per-run and per-dataset files
# are listed here; the other outputs of any job whose file is listed (PDFs beside PNGs,
# tables beside figures) are added from the rules' own output patterns.
# tests/workflow/test_complete_targets.py fails when a job's output is missing here.
def _rule_outputs(name, **wildcards):
    return [apply_wildcards(pattern, wildcards) for pattern in workflow.get_rule(name).output]


def _sibling_outputs(path):
    """Every output of the job that writes ``path`` (itself included)."""
    for candidate in workflow.rules:
        for pattern in candidate.output:
            match = pattern.match(path)
            if match:
                return [apply_wildcards(other, match.groupdict()) for other in candidate.output]
    return [path]


def intermediate_files():
    files = [f for dataset in DATASETS for f in _rule_outputs("prepare_dataset", dataset=dataset)]
    for dataset in DATASETS:
        for run in [*RUNS[dataset], *PMP_SHADOWS[dataset]]:
            files += _rule_outputs("train_model", dataset=dataset, run=run)
            files += _rule_outputs("extract_per_example", dataset=dataset, run=run)
        if PMP["enabled"]:
            for run in RUNS[dataset]:
                if pmp_shadow_loss_files(SimpleNamespace(dataset=dataset, run=run)):
                    files.append(P.PMP_SHADOW_SCORES.format(dataset=dataset, run=run))
    if "canary" in FAMILIES:
        for dataset in DATASETS:
            for run, params in RUNS[dataset].items():
                if params["mechanism"] in CANARY_MECHANISMS:
                    files.append(P.CANARY_SCORES.format(dataset=dataset, run=run))
    files += metric_files() + profile_metric_files()
    for view in PROFILE_VIEWS:
        files.append(P.PROFILE_BASE.format(view=view))
        if PROFILE["views"][view]["figures"]:  # the single-model profile feeds the figures only
            files.append(P.PROFILE_SINGLE.format(view=view))
    files += [P.PROFILE_SAMPLES.format(view=view) for view in PROFILE["samples"]["views"]]
    files += audit_block_files("runs") + [P.AUDIT_NEIGHBOURS.format(dataset=d) for d in AUDIT_DATASETS]
    if AUDIT_DATASETS:
        files.append(P.AUDIT_SUMMARY)
    return files


def final_outputs(wildcards=None):
    """The default target's named files and every other output of their jobs (tables, figures,
    pages with their PDFs and data), without intermediates: what check_results reads."""
    named = [f for f in workflow.get_rule("all").input if isinstance(f, str) and f != P.RESULTS_CHECK]
    files = {}
    for path in named:
        if path not in files:
            files.update(dict.fromkeys(_sibling_outputs(path)))
    return list(files)


def complete_results(wildcards):
    """The default target's named files with every intermediate and every job's other outputs."""
    named = [f for f in workflow.get_rule("all").input if isinstance(f, str)]
    files = {}
    for path in [*intermediate_files(), *named]:
        if path not in files:
            files.update(dict.fromkeys(_sibling_outputs(path)))
    return list(files)


# ---- resources that grow with the data (issues 19, 26): dpaudit.resources.declared computes
# mem_mb and runtime of every rule a cluster runs from what its job holds (n, d, the model
# size, full gradients, the twin's canaries, a view's rows, the config's simulation sizes);
# the SLURM profile sets neither, so this value (times the attempt) is what a job gets.
from dpaudit import resources as dpresources
from dpaudit.io import read_json as _read_json


def _dataset_shape(dataset):
    """(n, d, classes): the prepared dataset.json once it exists, the config before."""
    info = Path(P.DATASET_INFO.format(dataset=dataset))
    payload = _read_json(info) if info.exists() else None
    return dpresources.dataset_shape(payload, dataset, config["datasets"][dataset])


def _view_shape(view):
    """(n, d) of a privacy-profile view: its kept rows of the source and its columns."""
    spec = PROFILE["views"][view]
    n, _, _ = dpresources.dataset_shape(None, spec["source"], {"n": spec.get("first_rows")})
    return n, len(spec["columns"])


def _job_resources(name, wildcards, attempt):
    """dpaudit.resources.declared for one job: the sizes it grows with, read from its wildcards."""
    keys = dict(wildcards.items())
    size = {}
    if "view" in keys:
        size["n"], size["d"] = _view_shape(wildcards.view)
    elif "dataset" in keys:
        size["n"], size["d"], size["classes"] = _dataset_shape(wildcards.dataset)
        if name in ("audit_block", "audit_neighbours"):
            size["audit_n"] = int(AUDIT["datasets"][wildcards.dataset].get("n") or size["n"])
        if "run" in keys:
            size["run"] = run_params(wildcards)
            size["training"] = TRAINING[wildcards.dataset]
    if name == "audit_aggregate":
        size["audit_runs"] = sum(params["runs"] for dataset in AUDIT_DATASETS
                                 for params in AUDIT_CONFIGS[dataset].values())
    if name == "prepare_dataset" and wildcards.dataset in TABLES:
        size["table_sketch"] = _table_sketch(wildcards.dataset)
    return dpresources.declared(name, config, **size, attempt=attempt)


def _table_sketch(dataset):
    """A table dataset's parse-time inspection (its file exists when the job is scheduled); None otherwise."""
    if dataset not in TABLES:
        return None
    return dpconfig.table_sketch(dataset, config["datasets"][dataset])


def job_resources(name):
    """mem_mb and runtime of the named job kind as callables (``resources: **job_resources(name)``)."""

    def one(resource):
        def evaluate(wildcards, attempt):
            return _job_resources(name, wildcards, attempt)[resource]

        return evaluate

    return {"mem_mb": one("mem_mb"), "runtime": one("runtime")}


# ---------------------------------------------------------------- privacy dossiers (issue 18)
def dossier_inputs(wildcards):
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    inputs = {
        "table": P.METRICS_TABLE,
        "train": P.fill(P.TRAIN_INFO, **keys),
        "outputs": P.fill(P.OUTPUTS, **keys),
        "info": P.fill(P.DATASET_INFO, dataset=wildcards.dataset),
        "ledger": P.BUDGET_LEDGER,
    }
    if "canary" in FAMILIES and run_params(wildcards)["mechanism"] in dpconfig.LINEAR_MECHANISMS:
        # the worst-case neighbour of the privacy profile, as the many-runs audit replaced it
        inputs["record"] = P.fill(P.CANARY_AUDIT, **keys)
    return inputs


def dossier_targets():
    """A dossier per trained model and the guidance page (with its figure) per dataset."""
    return all_runs(P.DOSSIER) + [
        path for dataset in DATASETS
        for path in (P.fill(P.GUIDANCE, dataset=dataset), P.fill(P.beside(P.GUIDANCE, "png"), dataset=dataset))
    ]
