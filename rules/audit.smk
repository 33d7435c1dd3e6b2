# Bernau et al. 2021 (identifiability): bounds for every trained DP-SGD run,
# and the DI adversary's audit of full-batch DP-SGD with its own training loop.


rule metric_identifiability:
    input:
        train="results/models/{dataset}/{run}/train.json",
    output:
        "results/metrics/identifiability/{dataset}/{run}.parquet",
    params:
        code=CODE["metric_identifiability"],
    resources:
        **job_resources("metric_identifiability"),
    log:
        "logs/metric_identifiability/{dataset}/{run}.log",
    script:
        "../scripts/metric_identifiability.py"


rule audit_neighbours:
    input:
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
    output:
        "results/audit/{dataset}/neighbours.parquet",
    params:
        options=audit_options,
        top=AUDIT["neighbour_top"],
        code=CODE["audit_neighbours"],
    resources:
        **job_resources("audit_neighbours"),
    log:
        "logs/audit_neighbours/{dataset}.log",
    benchmark:
        "benchmarks/audit_neighbours/{dataset}.tsv"
    script:
        "../scripts/audit_neighbours.py"


rule audit_block:
    input:
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
        neighbours="results/audit/{dataset}/neighbours.parquet",
    output:
        runs="results/audit/{dataset}/{audit_config}/block{block}_runs.parquet",
        steps="results/audit/{dataset}/{audit_config}/block{block}_steps.parquet",
        vectors="results/audit/{dataset}/{audit_config}/block{block}_vectors.parquet",
    wildcard_constraints:
        audit_config=r"(bounded|unbounded)-(ls|gs)-rho[0-9.e+\-]+-(max[0-9]+|min[0-9]+|explicit)",
        block=r"\d+",
    params:
        options=audit_options,
        audit=AUDIT_SHARED,
        config=audit_config_params,
        code=CODE["audit_block"],
    resources:
        **job_resources("audit_block"),
    log:
        "logs/audit_block/{dataset}/{audit_config}/block{block}.log",
    benchmark:
        "benchmarks/audit_block/{dataset}/{audit_config}/block{block}.tsv"
    script:
        "../scripts/audit_block.py"


rule audit_aggregate:
    input:
        runs=audit_block_files("runs"),
        steps=audit_block_files("steps"),
    output:
        runs="results/tables/audit_runs.parquet",
        steps="results/tables/audit_steps.parquet",
        summary="results/tables/audit_summary.parquet",
    params:
        alpha=AUDIT["alpha"],
        code=CODE["audit_aggregate"],
    log:
        "logs/audit_aggregate.log",
    script:
        "../scripts/audit_aggregate.py"


rule plot_identifiability:
    input:
        runs="results/tables/audit_runs.parquet",
        steps="results/tables/audit_steps.parquet",
        summary="results/tables/audit_summary.parquet",
    output:
        **{
            f"fig{i}": report(
                f"results/figures/identifiability_fig{i}.png",
                caption=f"../workflow/report/identifiability_fig{i}.rst",
                category="Identifiability",
                labels={"figure": f"Fig. {i}"},
            )
            for i in range(1, 7)
        },
        **{f"fig{i}_pdf": f"results/figures/identifiability_fig{i}.pdf" for i in range(1, 7)},
        **{
            f"audit_{dataset}": report(
                f"results/figures/identifiability_audit_{dataset}.png",
                caption="../workflow/report/identifiability_audit.rst",
                category="Identifiability",
                labels={"figure": f"Figs. 7-9: {dataset}"},
            )
            for dataset in AUDIT_DATASETS
        },
        **{f"audit_{dataset}_pdf": f"results/figures/identifiability_audit_{dataset}.pdf" for dataset in AUDIT_DATASETS},
        tables=report(
            "results/tables/identifiability_tables.html",
            caption="../workflow/report/identifiability_tables.rst",
            category="Identifiability",
            labels={"figure": "Tables"},
        ),
        parameters="results/tables/identifiability_parameters.parquet",
    params:
        datasets={dataset: AUDIT["datasets"][dataset] for dataset in AUDIT_DATASETS},
        steps=AUDIT["steps"],
        conversion=AUDIT["conversion"],
        code=CODE["plot_identifiability"],
    log:
        "logs/plot_identifiability.log",
    script:
        "../scripts/plot_identifiability.py"
