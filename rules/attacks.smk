# Reference-model membership-inference attacks (issue 24): LiRA (Carlini et al. 2022) and
# RMIA (Zarifzadeh et al. 2024). One pool of K reference models per training recipe (a grid
# row without its seed; dpaudit.config.recipe_lookup), shared by every seed of the recipe;
# every attacked run gets mia-family rows with an attack column and per-example scores.
# Input and params functions of these rules live here (not in common.smk).

ATTACKS = config["metrics"]["attacks"]
# Every recipe (RECIPES, rules/common.smk) has a reference pool: the MLP mechanisms' K models
# stacked on a model axis, the linear mechanisms' K exact fits one after another
# (dpaudit.reference.pool_training); the pools of a batch of recipes train in one process (issue 36).


wildcard_constraints:
    recipe=r"[A-Za-z0-9.+\-~_]+",


localrules:
    plot_attacks,


def recipe_params(wildcards):
    """The recipe's grid values (no seed)."""
    return RECIPES[wildcards.dataset][wildcards.recipe]["params"]


def recipe_training(wildcards):
    return model_training(wildcards.dataset, recipe_params(wildcards))


def recipe_runs(wildcards):
    return RECIPES[wildcards.dataset][wildcards.recipe]["runs"]


def recipe_train_info(wildcards):
    """The train.json of the recipe's first run: its σ is the pool's and its ε the pool's record of
    the target's (no second calibration); each reference model's own ε (its rate B/n_k on its half)
    is the accountant's (dpaudit.reference.accounting)."""
    return P.TRAIN_INFO.format(dataset=wildcards.dataset, run=recipe_runs(wildcards)[0])


def recipe_population(wildcards):
    """A model trained elsewhere's recipe (external~<run>, issue 44): its P.OUTPUTS, whose members and
    held-out rows are the pool's audit population P (a grid recipe's P is the dataset's split)."""
    runs = recipe_runs(wildcards)
    if runs[0] not in EXTERNAL[wildcards.dataset]:
        return []
    return P.OUTPUTS.format(dataset=wildcards.dataset, run=runs[0])


# The attacked runs of each dataset: every trained run (its recipe's pool) and every model trained
# elsewhere whose entry gives reference outputs (REFERENCED, rules/external.smk) or a reference
# recipe (in RUN_RECIPE; issue 44).
ATTACKED = {dataset: [run for run in RUNS[dataset] if run in RUN_RECIPE[dataset] or run in REFERENCED[dataset]]
            for dataset in DATASETS}


def attack_inputs(wildcards):
    """The reference outputs a run is attacked with: its recipe's pool, or the ones its entry gives."""
    if wildcards.run in REFERENCED[wildcards.dataset]:
        keys = {"dataset": wildcards.dataset, "run": wildcards.run}
        return {"pool": P.EXTERNAL_POOL.format(**keys), "pool_info": P.EXTERNAL_POOL_INFO.format(**keys)}
    return attack_pool_inputs(wildcards)


def run_recipe(wildcards):
    """Params function: the name of the run's recipe (its pool's record says which recipe it is); None for a
    model trained elsewhere attacked with the reference outputs its entry gives (their record names none)."""
    return RUN_RECIPE[wildcards.dataset].get(wildcards.run)


def attacked_runs(wildcards):
    """Params function: the dataset's attacked runs, in the order attack_dataset_files lists them."""
    return ATTACKED[wildcards.dataset]


def attack_dataset_files(pattern):
    def files(wildcards):
        return [pattern.format(dataset=wildcards.dataset, run=run) for run in attacked_runs(wildcards)]

    return files


def dataset_recipes(wildcards):
    """Params function: the dataset's recipes with their runs, in the order recipe_pool_files lists them."""
    return {name: recipe["runs"] for name, recipe in RECIPES[wildcards.dataset].items()}


def recipe_pool_files(wildcards):
    return [P.REFERENCE_POOL_INFO.format(dataset=wildcards.dataset, recipe=name) for name in dataset_recipes(wildcards)]


def attacked_run_params(wildcards):
    return {run: RUNS[wildcards.dataset][run] for run in attacked_runs(wildcards)}


def attack_metric_files():
    """aggregate_metrics' extra inputs: every attacked run's mia rows (attack column)."""
    if not ATTACKS["enabled"]:
        return []
    return [P.ATTACK_METRIC.format(dataset=d, run=r) for d in DATASETS for r in ATTACKED[d]]


@intermediates
def attack_intermediate_files():
    """Pools and per-run scores (intermediate_files() in common.smk adds them)."""
    if not ATTACKS["enabled"]:
        return []
    pools = [P.REFERENCE_POOL.format(dataset=d, recipe=name) for d in DATASETS for name in RECIPES[d]]
    scores = [P.ATTACK_SCORES.format(dataset=d, run=r) for d in DATASETS for r in ATTACKED[d]]
    return pools + scores + attack_metric_files()


def recipe_sizes(wildcards, size):
    """A reference pool grows with its recipe's grid values (``job_resources``'s sizes)."""
    return {"run": RECIPES[wildcards.dataset][wildcards.recipe]["params"], "training": TRAINING[wildcards.dataset]}


def attack_figures():
    if not ATTACKS["enabled"]:
        return []
    return [P.ATTACK_FIGURE.format(kind="roc", dataset=d) for d in DATASETS if RECIPES[d]]


def pooled_recipes():
    """The recipes whose pool a job reads: every recipe with the attacks on, else PMP Recipe C's
    (pmp_pool_files): a batch's job writes all its pools, so it holds only pools that are read."""
    if ATTACKS["enabled"]:
        return {dataset: list(RECIPES[dataset]) for dataset in DATASETS}
    read = set(pmp_pool_files())
    return {dataset: [name for name in RECIPES[dataset] if P.REFERENCE_POOL.format(dataset=dataset, recipe=name) in read]
            for dataset in DATASETS}


# A pool's params are its recipe's values and training settings, not the recipe's runs (issue 47): a
# seed added to the recipe reruns no pool.
for _batch in recipe_batches("reference_pool", pooled_recipes()):
    _files = batch_files(_batch, key="recipe", input={"examples": P.EXAMPLES, "info": P.DATASET_INFO,
                                                      "train": recipe_train_info, "population": recipe_population},
                         output={"outputs": P.REFERENCE_POOL, "info": P.REFERENCE_POOL_INFO},
                         log=P.log("reference_pool", P.RECIPE_KEY),
                         params={"recipe": recipe_params, "training": recipe_training})

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            reference_models=ATTACKS["reference_models"],
            seed=ATTACKS["seed"],
            code=CODE["reference_pool"],
        threads: 1
        resources:
            **batch_resources("reference_pool", _batch, sizes=recipe_sizes, key="recipe"),
        log:
            _files.log,
        benchmark:
            P.benchmark("reference_pool", _batch.key)
        script:
            "../scripts/reference_pool.py"


# the trained runs first, then the models trained elsewhere with reference models (issue 44)
for _batch in run_batches("metric_attacks", ATTACKED):
    _files = batch_files(_batch, unpack=attack_inputs, input={"outputs": P.OUTPUTS, "train": P.TRAIN_INFO},
                         output={"rows": P.ATTACK_METRIC, "scores": P.ATTACK_SCORES},
                         log=P.log("metric_attacks", P.RUN_KEY), params={"recipe": run_recipe})

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            options={key: value for key, value in ATTACKS.items() if key != "enabled"},
            code=CODE["metric_attacks"],
        resources:
            **batch_resources("metric_attacks", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("metric_attacks", _batch.key)
        script:
            "../scripts/metric_attacks.py"


rule plot_attacks:
    input:
        table=P.METRICS_TABLE,
        scores=attack_dataset_files(P.ATTACK_SCORES),
        pools=recipe_pool_files,
    output:
        roc=report(
            P.fill(P.ATTACK_FIGURE, kind="roc"),
            caption="../workflow/report/attacks_roc.rst",
            category="Attacks and training",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "figure": "LiRA, RMIA and loss ROCs (log–log)"},
        ),
        roc_pdf=P.beside(P.fill(P.ATTACK_FIGURE, kind="roc"), "pdf"),
        tpr=report(
            P.fill(P.ATTACK_FIGURE, kind="tpr"),
            caption="../workflow/report/attacks_tpr.rst",
            category="Attacks and training",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "figure": "attack TPR at FPR 1e-3 and 1e-2 vs ε"},
        ),
        tpr_pdf=P.beside(P.fill(P.ATTACK_FIGURE, kind="tpr"), "pdf"),
        reference_accuracy=report(
            P.fill(P.ATTACK_FIGURE, kind="reference_accuracy"),
            caption="../workflow/report/attacks_reference_accuracy.rst",
            category="Attacks and training",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "figure": "reference models vs targets: accuracy"},
        ),
        reference_accuracy_pdf=P.beside(P.fill(P.ATTACK_FIGURE, kind="reference_accuracy"), "pdf"),
    params:
        runs=attacked_runs,
        run_params=attacked_run_params,
        recipes=dataset_recipes,
        attacks=ATTACKS["attacks"],
        code=CODE["plot_attacks"],
    log:
        P.log("plot_attacks", P.DATASET_KEY),
    script:
        "../scripts/plot_attacks.py"
