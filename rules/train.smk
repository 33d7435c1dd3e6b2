# One training job per run of the grids.


def training_params(wildcards):
    # Only the settings this run's mechanism uses, so a linear-only key (Λ) never
    # reruns the Keras runs and an MLP setting never reruns the linear ones.
    return dpconfig.training_for_mechanism(TRAINING[wildcards.dataset], run_params(wildcards)["mechanism"])


def pmp_train_outputs():
    """train_model writes weight checkpoints only when the pmp family is enabled."""
    if not PMP["enabled"]:
        return {}
    return {"checkpoints": P.CHECKPOINTS}


def pmp_train_params():
    if not PMP["enabled"]:
        return {}
    return {"checkpoints": PMP["checkpoints"]}


rule train_model:
    input:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
    output:
        model=P.MODEL,
        info=P.TRAIN_INFO,
        **pmp_train_outputs(),
    params:
        run=run_params,
        training=training_params,
        **pmp_train_params(),
        code=CODE["train_model"],
    threads: 1
    resources:
        **job_resources("train_model"),
    log:
        P.log("train_model", P.RUN_KEY),
    benchmark:
        P.benchmark("train_model", P.RUN_KEY)
    script:
        "../scripts/train_model.py"


@intermediates
def model_files():
    """Every trained model with train.json (and checkpoints)."""
    return [f for dataset in DATASETS for run in RUNS[dataset]
            for f in expand(rules.train_model.output, dataset=dataset, run=run)]
