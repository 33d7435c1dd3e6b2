# Source figures that need no trained model (Negoescu et al. 2023, Figs 3-5), and the
# goodness-of-fit figure (Fig 6) that reads two trained runs' losses.


def ks_fit_runs(wildcards=None):
    """The first non-private and the first DP-SGD run of the Fig 6 dataset's grid."""
    dataset = config["simulations"]["ks_fit"]["dataset"]
    if dataset not in RUNS:
        refuse_config(f"config.simulations.ks_fit.dataset: {dataset!r} is not among the datasets {DATASETS}")
    runs = {}
    for run, params in RUNS[dataset].items():
        runs.setdefault(params["mechanism"], run)
    missing = {"baseline", "dpsgd"} - set(runs)
    if missing:
        refuse_config(f"config.simulations.ks_fit: the {dataset} grid has no {sorted(missing)} run")
    return {"dataset": dataset, "baseline": runs["baseline"], "dpsgd": runs["dpsgd"]}


def ks_fit_inputs(wildcards):
    chosen = ks_fit_runs()
    return {
        mechanism: P.OUTPUTS.format(dataset=chosen["dataset"], run=chosen[mechanism])
        for mechanism in ("baseline", "dpsgd")
    } | {"info": P.DATASET_INFO.format(dataset=chosen["dataset"])}


def simulation_targets():
    targets = []
    if config["simulations"]["epsilon_star"]["enabled"]:
        targets.append(P.EPSILON_STAR_FIGURE.format(k=5))
    if config["simulations"]["ks_fit"]["enabled"]:
        ks_fit_runs()
        targets.append(P.EPSILON_STAR_FIGURE.format(k=6))
    return targets


rule simulate_epsilon_star:
    output:
        table=P.EPSILON_STAR_GAMMA,
        fig3_table=P.EPSILON_STAR_FIG3_TABLE,
        fig3=report(
            P.EPSILON_STAR_FIGURE.format(k=3),
            caption="../workflow/report/epsilon_star_fig3.rst",
            category="Epsilon*",
            labels={"figure": "Fig 3 (simulation)"},
        ),
        fig4=report(
            P.EPSILON_STAR_FIGURE.format(k=4),
            caption="../workflow/report/epsilon_star_fig4.rst",
            category="Epsilon*",
            labels={"figure": "Fig 4 (simulation)"},
        ),
        fig5=report(
            P.EPSILON_STAR_FIGURE.format(k=5),
            caption="../workflow/report/epsilon_star_fig5.rst",
            category="Epsilon*",
            labels={"figure": "Fig 5 (simulation)"},
        ),
    params:
        options=config["simulations"]["epsilon_star"],
        code=CODE["simulate_epsilon_star"],
    resources:
        **job_resources("simulate_epsilon_star"),
    log:
        P.log("simulate_epsilon_star"),
    benchmark:
        P.benchmark("simulate_epsilon_star")
    script:
        "../scripts/simulate_epsilon_star.py"


rule epsilon_star_ks_fit:
    input:
        unpack(ks_fit_inputs),
    output:
        table=P.EPSILON_STAR_KS_FIT,
        figure=report(
            P.EPSILON_STAR_FIGURE.format(k=6),
            caption="../workflow/report/epsilon_star_fig6.rst",
            category="Epsilon*",
            labels={"figure": "Fig 6 (goodness of fit)"},
        ),
    params:
        options=config["simulations"]["ks_fit"],
        runs=ks_fit_runs,
        code=CODE["epsilon_star_ks_fit"],
    localrule: True
    log:
        P.log("epsilon_star_ks_fit"),
    benchmark:
        P.benchmark("epsilon_star_ks_fit")
    script:
        "../scripts/epsilon_star_ks_fit.py"
