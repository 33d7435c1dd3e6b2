# Source figures that need no trained model (Negoescu et al. 2023, Figs 3-5), and the
# goodness-of-fit figure (Fig 6) that reads two trained runs' losses.


rule simulate_epsilon_star:
    output:
        table="results/simulations/epsilon_star_gamma.parquet",
        fig3_table="results/simulations/epsilon_star_fig3.parquet",
        fig3=report(
            "results/figures/epsilon_star_fig3.png",
            caption="../workflow/report/epsilon_star_fig3.rst",
            category="Epsilon*",
            labels={"figure": "Fig 3 (simulation)"},
        ),
        fig4=report(
            "results/figures/epsilon_star_fig4.png",
            caption="../workflow/report/epsilon_star_fig4.rst",
            category="Epsilon*",
            labels={"figure": "Fig 4 (simulation)"},
        ),
        fig5=report(
            "results/figures/epsilon_star_fig5.png",
            caption="../workflow/report/epsilon_star_fig5.rst",
            category="Epsilon*",
            labels={"figure": "Fig 5 (simulation)"},
        ),
    params:
        options=config["simulations"]["epsilon_star"],
        code=CODE["simulate_epsilon_star"],
    log:
        "logs/simulate_epsilon_star.log",
    benchmark:
        "benchmarks/simulate_epsilon_star.tsv"
    script:
        "../scripts/simulate_epsilon_star.py"


rule epsilon_star_ks_fit:
    input:
        unpack(ks_fit_inputs),
    output:
        table="results/tables/epsilon_star_ks_fit.parquet",
        figure=report(
            "results/figures/epsilon_star_fig6.png",
            caption="../workflow/report/epsilon_star_fig6.rst",
            category="Epsilon*",
            labels={"figure": "Fig 6 (goodness of fit)"},
        ),
    params:
        options=config["simulations"]["ks_fit"],
        runs=ks_fit_runs,
        code=CODE["epsilon_star_ks_fit"],
    log:
        "logs/epsilon_star_ks_fit.log",
    benchmark:
        "benchmarks/epsilon_star_ks_fit.tsv"
    script:
        "../scripts/epsilon_star_ks_fit.py"
