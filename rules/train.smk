# Training: every run of the grids, in batches of whole recipes (issue 36).
import os

from dpaudit.training.model_checks import image_shape_before_prepare


# The image shape [H, W, C] of each dataset (what its dataset.json records; known from the
# config before it is prepared), handed to the runs whose model reshapes the features
# into images (any model but the mlp; dpaudit.training.architectures).
IMAGE_SHAPES = {dataset: image_shape_before_prepare(dataset, config["datasets"][dataset]) for dataset in DATASETS}


def model_training(dataset, params):
    """The training settings of a run (or recipe) with grid values ``params``: only those its
    mechanism uses, so a linear-only key (Λ) never reruns the Keras runs and an MLP setting
    never reruns the linear ones; the image shape only where the model reads it."""
    training = dpconfig.training_for_mechanism(TRAINING[dataset], params["mechanism"])
    if (params.get("model") or training.get("model", "mlp")) != "mlp":
        training["image_shape"] = IMAGE_SHAPES[dataset]
    return training


def training_params(wildcards):
    return model_training(wildcards.dataset, run_params(wildcards))


def train_outputs(wildcards):
    """A run's model and train.json, and its checkpoints when the pmp family reads them."""
    return {"model": P.MODEL, "info": P.TRAIN_INFO, **({"checkpoints": P.CHECKPOINTS} if keeps_checkpoints(wildcards)
                                                       else {})}


def train_run_params(wildcards):
    """A run's grid values and training settings, and metrics.pmp.checkpoints only for a run that
    keeps them (issue 47: a changed count retrains those runs alone)."""
    params = {"run": run_params(wildcards), "training": training_params(wildcards)}
    if keeps_checkpoints(wildcards):
        params["checkpoints"] = PMP["checkpoints"]
    return params


def train_gpus():
    """GPUs per training job on SLURM: DPAUDIT_SLURM_TRAIN_GPUS (none unless a site sets it; a GPU
    site also needs a TensorFlow build with CUDA: docs/stack.md, SLURM and GPUs)."""
    gpus = int(os.environ.get("DPAUDIT_SLURM_TRAIN_GPUS", "0"))
    return {"gpu": gpus} if gpus else {}


# One job per batch of whole recipes (issue 36): the seeds of a recipe, one after the other in one
# TensorFlow process (dpaudit.training.train is safe to call again in the same process); a recipe's
# seeds added later form a batch of their own (issue 47).
for _batch in run_batches("train_model", TRAINED, whole_recipes=True):
    _files = batch_files(_batch, input={"examples": P.EXAMPLES, "info": P.DATASET_INFO}, output=train_outputs,
                        log=P.log("train_model", P.RUN_KEY), params=train_run_params)

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            code=CODE["train_model"],
        threads: 1
        resources:
            **batch_resources("train_model", _batch), **train_gpus(),
        log:
            _files.log,
        benchmark:
            P.benchmark("train_model", _batch.key)
        script:
            "../scripts/train_model.py"


@intermediates
def model_files():
    """Every trained model with train.json (and checkpoints)."""
    return [pattern.format(dataset=dataset, run=run) for dataset in DATASETS for run in TRAINED[dataset]
            for pattern in train_outputs(RunWildcards(dataset=dataset, run=run)).values()]
