# Extraction of every trained model, in batches of runs (issue 36): per-example outputs and
# gradients. The pmp family's pairs are a rule of their own (rules/pmp.smk, pmp_pairs; issue 47):
# a PMP option never reruns an extraction.

# Threads of the jobs whose PMP work is BLAS matrix products (pmp_pairs, metric_pmp; issue 37);
# profiles/slurm/config.yaml gives them as many cpus_per_task.
PMP_THREADS = 2

for _batch in run_batches("extract_per_example", TRAINED):
    _files = batch_files(_batch, input={"examples": P.EXAMPLES, "info": P.DATASET_INFO, "model": P.MODEL},
                         output={"outputs": P.OUTPUTS, "gradients": P.GRADIENTS},
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
            code=CODE["extract_per_example"],
        threads: 1
        resources:
            **batch_resources("extract_per_example", _batch),
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
            for f in (P.OUTPUTS, P.GRADIENTS)]
