# Practical membership privacy (Lowy et al. 2024): per-run PMP rows,
# Recipe C's shadow-model losses gathered per run, and the paper's Figs 1-6.


rule metric_pmp:
    input:
        unpack(pmp_metric_inputs),
    output:
        metrics="results/metrics/pmp/{dataset}/{run}.parquet",
        per_example="results/pmp/{dataset}/{run}/per_example.parquet",
    params:
        options=config["metrics"]["pmp"],
        code=CODE["metric_pmp"],
    threads: 1
    resources:
        **job_resources("metric_pmp"),
    log:
        "logs/metric_pmp/{dataset}/{run}.log",
    benchmark:
        "benchmarks/metric_pmp/{dataset}/{run}.tsv"
    script:
        "../scripts/metric_pmp.py"


rule pmp_gather_shadows:
    input:
        unpack(pmp_shadow_loss_files),
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
    output:
        "results/pmp/{dataset}/{run}/shadow_scores.parquet",
    params:
        options=config["metrics"]["pmp"],
        shadows=pmp_shadow_indices,
        code=CODE["pmp_gather_shadows"],
    log:
        "logs/pmp_gather_shadows/{dataset}/{run}.log",
    script:
        "../scripts/pmp_gather_shadows.py"


rule simulate_pmp:
    output:
        expmech="results/simulations/pmp_sim_expmech.parquet",
        gauss="results/simulations/pmp_sim_gauss.parquet",
        summary="results/simulations/pmp_sim_fig_summary.parquet",
        fig1=report("results/figures/pmp_fig1.png", caption="../workflow/report/pmp_fig1.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 1 (exponential mechanism, σ)"}),
        fig2=report("results/figures/pmp_fig2.png", caption="../workflow/report/pmp_fig2.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 2 (exponential mechanism, C)"}),
        fig3=report("results/figures/pmp_fig3.png", caption="../workflow/report/pmp_fig3.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 3 (exponential mechanism, d)"}),
        fig4=report("results/figures/pmp_fig4.png", caption="../workflow/report/pmp_fig4.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 4 (Gaussian, ε)"}),
        fig5=report("results/figures/pmp_fig5.png", caption="../workflow/report/pmp_fig5.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 5 (Gaussian, C)"}),
        fig6=report("results/figures/pmp_fig6.png", caption="../workflow/report/pmp_fig6.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 6 (Gaussian, d)"}),
        pdfs=expand("results/figures/pmp_fig{k}.pdf", k=range(1, 7)),
    params:
        options=config["simulations"]["pmp"],
        code=CODE["simulate_pmp"],
    threads: 1
    log:
        "logs/simulate_pmp.log",
    benchmark:
        "benchmarks/simulate_pmp.tsv"
    script:
        "../scripts/simulate_pmp.py"


rule pmp_report:
    input:
        metrics=pmp_metric_files(),
    output:
        table="results/tables/pmp_runs.parquet",
        html=report("results/tables/pmp_runs.html", caption="../workflow/report/pmp_runs.rst",
                    category="Practical membership privacy", labels={"figure": "per-run PMP of DP-SGD models"}),
    params:
        code=CODE["pmp_report"],
    log:
        "logs/pmp_report.log",
    script:
        "../scripts/pmp_report.py"
