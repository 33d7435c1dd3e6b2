"""Every artifact path pattern of the workflow, declared once.

The rules (``rules/*.smk``, the ``Snakefile``) build every input, output, log and
benchmark path from these names (``from dpaudit.contract import paths as P`` in
``rules/common.smk``); no rule file writes a ``results/`` literal
(``tests/workflow/test_paths.py``). Patterns carry Snakemake wildcards in braces
(``{dataset}``, ``{run}``, ``{view}``, ...): a rule uses them as they are, a helper
fills them with ``str.format`` (all of them) or :func:`fill` (some of them).

Jobs never recover keys (dataset, run, grid values) from these paths: the rules
pass them as ``params:``. Paths are relative to the working directory.
"""

from __future__ import annotations

import re

RESULTS = "results"
RESOURCES = "resources"
LOGS = "logs"
BENCHMARKS = "benchmarks"

# ------------------------------------------------------------------ helpers


def fill(pattern: str, **values: object) -> str:
    """``pattern`` with the named wildcards replaced and every other wildcard kept.

    ``fill(METRIC, family="mia")`` is ``"results/metrics/mia/{dataset}/{run}.parquet"``.
    """
    unknown = set(values) - set(wildcards(pattern))
    if unknown:
        raise KeyError(f"{pattern!r} has no wildcard(s) {sorted(unknown)}")
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), pattern)


def wildcards(pattern: str) -> list[str]:
    """The wildcard names of ``pattern``, in order of appearance."""
    return re.findall(r"\{(\w+)\}", pattern)


def beside(path: str, suffix: str) -> str:
    """The file next to ``path`` with another extension: ``beside(figure, "pdf")``."""
    stem, dot, _ = path.rpartition(".")
    if not dot or "/" in _:
        raise ValueError(f"{path!r} has no extension")
    return f"{stem}.{suffix}"


def log(rule: str, key: str = "") -> str:
    """A job's log: ``logs/<rule>/<key>.log`` (``logs/<rule>.log`` for a single job)."""
    return f"{LOGS}/{rule}/{key}.log" if key else f"{LOGS}/{rule}.log"


def benchmark(rule: str, key: str = "") -> str:
    """A job's benchmark table: ``benchmarks/<rule>/<key>.tsv`` (``benchmarks/<rule>.tsv``)."""
    return f"{BENCHMARKS}/{rule}/{key}.tsv" if key else f"{BENCHMARKS}/{rule}.tsv"


# Keys of the logs and benchmarks of per-dataset, per-run and per-view jobs.
DATASET_KEY = "{dataset}"
RUN_KEY = "{dataset}/{run}"
VIEW_KEY = "{view}"
# Which runs one job of a per-run rule handled together (issue 47, dpaudit.batching.write_records):
# written when a run starts, read at parse time, so a batch keeps its runs when the grid grows.
BATCHES = f"{RESULTS}/batches"
BATCH_RECORD = f"{BATCHES}/{{kind}}/{{dataset}}/{{name}}.json"

# ------------------------------------------------------------------ raw downloads

RAW_FILE = f"{RESOURCES}/raw/{{dataset}}/{{filename}}"
PROFILE_RAW_FILE = f"{RESOURCES}/raw/profile/{{source}}/{{filename}}"

# ------------------------------------------------------------------ per dataset

EXAMPLES = f"{RESULTS}/data/{{dataset}}/examples.parquet"
DATASET_INFO = f"{RESULTS}/data/{{dataset}}/dataset.json"
# each example_id with the user's own id as text (a table's text ids; issue 35)
IDS = f"{RESULTS}/data/{{dataset}}/ids.parquet"

# ------------------------------------------------------------------ per run

MODEL = f"{RESULTS}/models/{{dataset}}/{{run}}/model.keras"
TRAIN_INFO = f"{RESULTS}/models/{{dataset}}/{{run}}/train.json"
CHECKPOINTS = f"{RESULTS}/models/{{dataset}}/{{run}}/checkpoints.npz"
OUTPUTS = f"{RESULTS}/per_example/{{dataset}}/{{run}}/outputs.parquet"
GRADIENTS = f"{RESULTS}/per_example/{{dataset}}/{{run}}/gradients.parquet"
PMP_PAIRS = f"{RESULTS}/per_example/{{dataset}}/{{run}}/pmp_pairs.parquet"
# Long metric rows of one run and family (dpaudit.contract.metrics.metric_rows).
METRIC = f"{RESULTS}/metrics/{{family}}/{{dataset}}/{{run}}.parquet"
# Rows of a dataset-level family (the privacy profile): one file per view.
VIEW_METRIC = f"{RESULTS}/metrics/{{family}}/{{view}}.parquet"
CARD = f"{RESULTS}/cards/{{dataset}}/{{run}}.html"
CARD_FIGURE = f"{RESULTS}/cards/{{dataset}}/{{run}}.png"
CANARY_SCORES = f"{RESULTS}/canary/{{dataset}}/{{run}}/scores.parquet"
CANARY_AUDIT = f"{RESULTS}/canary/{{dataset}}/{{run}}/audit.json"
DOSSIER = f"{RESULTS}/dossiers/{{dataset}}/{{run}}.html"
# The guidance page to choose ε (one per dataset) has its own folder: no model's dossier can
# share its name, whatever the run is called.
GUIDANCE = f"{RESULTS}/guidance/{{dataset}}.html"
# The rows the reference-model attacks single out across a dataset's grid (issue 24), one page
# per dataset with its figure beside it; a folder of its own for the same reason.
EXPOSED_ROWS = f"{RESULTS}/exposed/{{dataset}}.html"
# Reference-model attacks (issue 24): one pool of K reference models per training recipe
# (a grid row without its seed), per-example attack scores and mia rows per run.
REFERENCE_POOL = f"{RESULTS}/attacks/{{dataset}}/recipes/{{recipe}}/reference_outputs.parquet"
REFERENCE_POOL_INFO = f"{RESULTS}/attacks/{{dataset}}/recipes/{{recipe}}/reference_pool.json"
ATTACK_SCORES = f"{RESULTS}/attacks/{{dataset}}/{{run}}/scores.parquet"
# A model trained elsewhere (issue 44): the reference outputs its entry gives (K models' outputs with
# their inclusion bits), as a pool table (dpaudit.reference.pool.POOL_COLUMNS), and its record.
EXTERNAL_POOL = f"{RESULTS}/attacks/{{dataset}}/{{run}}/given_reference_outputs.parquet"
EXTERNAL_POOL_INFO = f"{RESULTS}/attacks/{{dataset}}/{{run}}/given_reference_outputs.json"
ATTACK_METRIC = f"{RESULTS}/attacks/{{dataset}}/{{run}}/mia_rows.parquet"
RECIPE_KEY = "{dataset}/{recipe}"
PMP_PER_EXAMPLE = f"{RESULTS}/pmp/{{dataset}}/{{run}}/per_example.parquet"


def metric(family: str) -> str:
    """The per-run metric file pattern of ``family`` (wildcards ``{dataset}``, ``{run}``)."""
    return fill(METRIC, family=family)


def view_metric(family: str) -> str:
    """The per-view metric file pattern of a dataset-level ``family`` (wildcard ``{view}``)."""
    return fill(VIEW_METRIC, family=family)


# ------------------------------------------------------------------ identifiability audit

AUDIT_NEIGHBOURS = f"{RESULTS}/audit/{{dataset}}/neighbours.parquet"
# kind: runs, steps or vectors
AUDIT_BLOCK = f"{RESULTS}/audit/{{dataset}}/{{audit_config}}/block{{block}}_{{kind}}.parquet"


def audit_block(kind: str) -> str:
    """The pattern of one kind of an audit block's files (wildcards dataset, audit_config, block)."""
    return fill(AUDIT_BLOCK, kind=kind)


# ------------------------------------------------------------------ privacy profile (per view)

PROFILE_DIR = f"{RESULTS}/profile/{{view}}"
PROFILE_DATA = f"{PROFILE_DIR}/data.parquet"
PROFILE_PER_EXAMPLE = f"{PROFILE_DIR}/per_example.parquet"
PROFILE_WORST_CASE = f"{PROFILE_DIR}/worst_case.parquet"
PROFILE_BASE = f"{PROFILE_DIR}/base.json"
PROFILE_EXACT = f"{PROFILE_DIR}/exact.parquet"
PROFILE_SAMPLES = f"{PROFILE_DIR}/samples.parquet"
PROFILE_SINGLE = f"{PROFILE_DIR}/single_model.parquet"
PROFILE_TYPICAL = f"{PROFILE_DIR}/typical.parquet"
PROFILE_PER_NEIGHBOUR = f"{PROFILE_DIR}/per_neighbour.parquet"
PROFILE_THRESHOLDS = f"{PROFILE_DIR}/thresholds.json"

# ------------------------------------------------------------------ simulations (no trained model)


def simulation(name: str) -> str:
    """``results/simulations/<name>.parquet``."""
    return f"{RESULTS}/simulations/{name}.parquet"


EPSILON_STAR_GAMMA = simulation("epsilon_star_gamma")
EPSILON_STAR_FIG3_TABLE = simulation("epsilon_star_fig3")
PMP_SIM_EXPMECH = simulation("pmp_sim_expmech")
PMP_SIM_GAUSS = simulation("pmp_sim_gauss")
PMP_SIM_SUMMARY = simulation("pmp_sim_fig_summary")

# ------------------------------------------------------------------ tables


def table(name: str, suffix: str = "parquet") -> str:
    """``results/tables/<name>.<suffix>``."""
    return f"{RESULTS}/tables/{name}.{suffix}"


METRICS_TABLE = table("metrics")
# the HTML report `snakemake --report` writes (make run), not a job's output
REPORT = f"{RESULTS}/report.html"
# check_results' record: every final table and figure read whole (dpaudit.checks)
RESULTS_CHECK = f"{RESULTS}/checked.json"
RUNS_PAGE = table("runs", "html")
BUDGET_LEDGER = table("budget_ledger")
BUDGET_TOTALS = table("budget_totals")
BUDGET_LEDGER_PAGE = table("budget_ledger", "html")
EPSILON_STAR_STRATEGIES = table("epsilon_star_strategies_{dataset}")
EPSILON_STAR_RUNS = table("epsilon_star_runs_{dataset}")
EPSILON_STAR_RUNS_PAGE = table("epsilon_star_runs_{dataset}", "html")
EPSILON_STAR_KS_FIT = table("epsilon_star_ks_fit")
AUDIT_RUNS = table("audit_runs")
AUDIT_STEPS = table("audit_steps")
AUDIT_SUMMARY = table("audit_summary")
IDENTIFIABILITY_TABLES_PAGE = table("identifiability_tables", "html")
IDENTIFIABILITY_PARAMETERS = table("identifiability_parameters")
PMP_RUNS = table("pmp_runs")
PMP_RUNS_PAGE = table("pmp_runs", "html")

# ------------------------------------------------------------------ figures (PNG; the PDF is beside it)


def figure(name: str, suffix: str = "png") -> str:
    """``results/figures/<name>.<suffix>`` (``beside(figure(name), "pdf")`` is its PDF)."""
    return f"{RESULTS}/figures/{name}.{suffix}"


PRIVACY_UTILITY_FIGURE = figure("privacy_utility")
LANDSCAPE_FIGURE = figure("epsilon_star_landscape_{dataset}")
# The per-dataset figures over all models of a dataset (audit, ROC, ...): {name}_{dataset}.
DATASET_FIGURE = figure("{name}_{dataset}")
CANARY_FIGURE = figure("canary_{kind}_{dataset}")
TEACHING_FIGURE = figure("teaching_{name}")
EPSILON_STAR_FIGURE = figure("epsilon_star_fig{k}")  # Negoescu et al. 2023, Figs 3-6
IDENTIFIABILITY_FIGURE = figure("identifiability_fig{k}")  # Bernau et al. 2021, Figs 1-6
IDENTIFIABILITY_AUDIT_FIGURE = figure("identifiability_audit_{dataset}")  # Figs 7-9
PMP_FIGURE = figure("pmp_fig{k}")  # Lowy et al. 2024, Figs 1-6
ATTACK_FIGURE = figure("attacks_{kind}_{dataset}")  # kind: roc, tpr, reference_accuracy
PROFILE_FIGURE = figure("profile/{view}/fig{k}")  # LeBlond et al. 2023, Figs 1-8

# ------------------------------------------------------------------ the overview (issue 34)

# Every model on one page: verdict, strongest attack, largest certified bound, ε*, dossier links.
OVERVIEW = f"{RESULTS}/index.html"
# The overview as the report's landing view: an iframe of it that workflow/report/workflow.rst
# includes (Snakemake renders the workflow description beside the rule graph on the first view).
OVERVIEW_LANDING = f"{RESULTS}/report_landing.html"
# Each model's ladder figure (PDF and the Parquet of its rungs beside it), drawn by the dossier job.
LADDER_FIGURE = f"{RESULTS}/ladders/{{dataset}}/{{run}}.png"
# A dataset's models as small multiples of the ladder (PDF and Parquet beside it).
LADDER_GRID_FIGURE = fill(DATASET_FIGURE, name="ladder")
