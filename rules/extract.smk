rule extract_per_example:
    input:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
        model=P.MODEL,
        train=P.TRAIN_INFO,
        **pmp_extract_inputs(),
    output:
        outputs=P.OUTPUTS,
        gradients=P.GRADIENTS,
        **pmp_extract_outputs(),
    params:
        run=run_params,
        extract=config["extract"],
        **pmp_extract_params(),
        code=CODE["extract_per_example"],
    threads: 1
    resources:
        **job_resources("extract_per_example"),
    log:
        P.log("extract_per_example", P.RUN_KEY),
    benchmark:
        P.benchmark("extract_per_example", P.RUN_KEY)
    script:
        "../scripts/extract_per_example.py"
