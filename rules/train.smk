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
