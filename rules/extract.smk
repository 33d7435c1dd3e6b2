# Extraction of every trained model, in batches of runs (issue 36): per-example outputs and
# gradients (and, with the pmp family on, the PMP parent set's gradients at every checkpoint).

# Threads of the jobs whose PMP work is BLAS matrix products (extraction with the pmp family on,
# metric_pmp; issue 37); profiles/slurm/config.yaml gives them as many cpus_per_task.
PMP_THREADS = 2


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
    # The parent set X of a run's PMP metric and Recipe B's partner draw, its precision target
    # and cap (the extraction computes the pairs: dpaudit.extract.extract.PMP_PAIR_OPTIONS).
    return {"pmp": {key: PMP[key] for key in ("parent_seed", "nonmember_pool", "partners_relative_standard_error",
                                              "partners_max", "seed")}}


# Recipe B's Gram blocks are BLAS matrix products (dpaudit.extract.pmp_partners): with the pmp
# family on, the job may use PMP_THREADS (Snakemake scales it down to the cores it has).
EXTRACT_THREADS = PMP_THREADS if PMP["enabled"] else 1

for _batch in run_batches("extract_per_example", TRAINED):
    _files = batch_files(_batch, input={"examples": P.EXAMPLES, "info": P.DATASET_INFO, "model": P.MODEL,
                                        "train": P.TRAIN_INFO, **pmp_extract_inputs()},
                         output={"outputs": P.OUTPUTS, "gradients": P.GRADIENTS, **pmp_extract_outputs()},
                         log=P.log("extract_per_example", P.RUN_KEY), params={"run": run_params})

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            extract=config["extract"],
            **pmp_extract_params(),
            code=CODE["extract_per_example"],
        threads: EXTRACT_THREADS
        resources:
            **batch_resources("extract_per_example", _batch, threads=EXTRACT_THREADS),
        log:
            _files.log,
        benchmark:
            P.benchmark("extract_per_example", _batch.key)
        script:
            "../scripts/extract_per_example.py"


@intermediates
def per_example_files():
    """Every trained model's per-example tables."""
    return [f.format(dataset=dataset, run=run) for dataset in DATASETS for run in TRAINED[dataset]
            for f in (P.OUTPUTS, P.GRADIENTS, *pmp_extract_outputs().values())]
