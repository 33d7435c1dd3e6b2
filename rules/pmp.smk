# Practical membership privacy (Lowy et al. 2024): per-run PMP rows,
# Recipe C's shadow-model losses gathered per run, and the paper's Figs 1-6.
# The shadow models themselves (PMP_SHADOWS, rules/common.smk) are runs of train_model
# and extract_per_example; their checkpoints and gradients are declared beside those rules.
from types import SimpleNamespace


def pmp_shadow_loss_files(wildcards):
    return {
        name: P.OUTPUTS.format(dataset=wildcards.dataset, run=name)
        for name, shadow in PMP_SHADOWS[wildcards.dataset].items()
        if shadow["target"] == wildcards.run
    }


def pmp_shadow_indices(wildcards):
    return {name: PMP_SHADOWS[wildcards.dataset][name]["index"] for name in pmp_shadow_loss_files(wildcards)}


def pmp_metric_inputs(wildcards):
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    inputs = {
        "examples": P.EXAMPLES.format(**keys),
        "info": P.DATASET_INFO.format(**keys),
        "train": P.TRAIN_INFO.format(**keys),
        "pairs": P.PMP_PAIRS.format(**keys),
    }
    if pmp_shadow_loss_files(wildcards):
        inputs["shadows"] = P.PMP_SHADOW_SCORES.format(**keys)
    return inputs


def pmp_targets():
    targets = [P.PMP_RUNS_PAGE] if PMP["enabled"] else []
    if config["simulations"]["pmp"]["enabled"]:
        targets += [P.PMP_FIGURE.format(k=k) for k in range(1, 7)]
    return targets


@intermediates
def pmp_shadow_score_files():
    if not PMP["enabled"]:
        return []
    return [P.PMP_SHADOW_SCORES.format(dataset=dataset, run=run) for dataset in DATASETS for run in RUNS[dataset]
            if pmp_shadow_loss_files(SimpleNamespace(dataset=dataset, run=run))]


rule metric_pmp:
    input:
        unpack(pmp_metric_inputs),
    output:
        metrics=P.metric("pmp"),
        per_example=P.PMP_PER_EXAMPLE,
    params:
        options=config["metrics"]["pmp"],
        code=CODE["metric_pmp"],
    threads: 1
    resources:
        **job_resources("metric_pmp"),
    log:
        P.log("metric_pmp", P.RUN_KEY),
    benchmark:
        P.benchmark("metric_pmp", P.RUN_KEY)
    script:
        "../scripts/metric_pmp.py"


rule pmp_gather_shadows:
    input:
        unpack(pmp_shadow_loss_files),
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
    output:
        P.PMP_SHADOW_SCORES,
    params:
        options=config["metrics"]["pmp"],
        shadows=pmp_shadow_indices,
        code=CODE["pmp_gather_shadows"],
    localrule: True
    log:
        P.log("pmp_gather_shadows", P.RUN_KEY),
    benchmark:
        P.benchmark("pmp_gather_shadows", P.RUN_KEY)
    script:
        "../scripts/pmp_gather_shadows.py"


rule simulate_pmp:
    output:
        expmech=P.PMP_SIM_EXPMECH,
        gauss=P.PMP_SIM_GAUSS,
        summary=P.PMP_SIM_SUMMARY,
        fig1=report(P.PMP_FIGURE.format(k=1), caption="../workflow/report/pmp_fig1.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 1 (exponential mechanism, σ)"}),
        fig2=report(P.PMP_FIGURE.format(k=2), caption="../workflow/report/pmp_fig2.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 2 (exponential mechanism, C)"}),
        fig3=report(P.PMP_FIGURE.format(k=3), caption="../workflow/report/pmp_fig3.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 3 (exponential mechanism, d)"}),
        fig4=report(P.PMP_FIGURE.format(k=4), caption="../workflow/report/pmp_fig4.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 4 (Gaussian, ε)"}),
        fig5=report(P.PMP_FIGURE.format(k=5), caption="../workflow/report/pmp_fig5.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 5 (Gaussian, C)"}),
        fig6=report(P.PMP_FIGURE.format(k=6), caption="../workflow/report/pmp_fig6.rst",
                    category="Practical membership privacy", labels={"figure": "Fig 6 (Gaussian, d)"}),
        pdfs=expand(P.beside(P.PMP_FIGURE, "pdf"), k=range(1, 7)),
    params:
        options=config["simulations"]["pmp"],
        code=CODE["simulate_pmp"],
    threads: 1
    resources:
        **job_resources("simulate_pmp"),
    log:
        P.log("simulate_pmp"),
    benchmark:
        P.benchmark("simulate_pmp")
    script:
        "../scripts/simulate_pmp.py"


rule pmp_report:
    input:
        metrics=all_runs(rules.metric_pmp.output.metrics),
    output:
        table=P.PMP_RUNS,
        html=report(P.PMP_RUNS_PAGE, caption="../workflow/report/pmp_runs.rst",
                    category="Practical membership privacy", labels={"figure": "per-run PMP of DP-SGD models"}),
    params:
        code=CODE["pmp_report"],
    localrule: True
    log:
        P.log("pmp_report"),
    script:
        "../scripts/pmp_report.py"
