# Practical membership privacy (Lowy et al. 2024): per-run PMP rows and the paper's Figs 1-6.
# Recipe C reads the run's recipe reference pool (rules/attacks.smk, reference_pool): the
# one home of reference models. The pool joins the DAG when metrics.attacks is enabled or
# when metrics.pmp.recipe_c is (then for the DP-SGD recipes only); its size is
# metrics.attacks.reference_models either way.
from types import SimpleNamespace

PMP_RECIPE_C = PMP["enabled"] and PMP["recipe_c"]


def pmp_pool_inputs(wildcards):
    """Recipe C's pool of a run: its recipe's reference outputs on P and their record (the
    attack family's lookup, attack_pool_inputs), for a DP-SGD run with per-example clipping
    (the runs Recipes A-C apply to); {} otherwise or when Recipe C is off."""
    params = RUNS[wildcards.dataset][wildcards.run]
    if (not PMP_RECIPE_C or params["mechanism"] != "dpsgd" or params.get("microbatches")
            or wildcards.run not in RUN_RECIPE[wildcards.dataset]):
        return {}
    return attack_pool_inputs(wildcards)


def pmp_metric_inputs(wildcards):
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    return {
        # a model trained elsewhere (issue 44): its parent set is drawn from its own members and held-out
        # rows (its P.OUTPUTS' split); only a model file of Dense layers has pairs (Recipe A), written by
        # external_outputs (GRADIENTED, rules/external.smk); the others' rows are not applicable
        "examples": (P.OUTPUTS if wildcards.run in EXTERNAL[wildcards.dataset] else P.EXAMPLES).format(**keys),
        "info": P.DATASET_INFO.format(**keys),
        "train": P.TRAIN_INFO.format(**keys),
        **({} if wildcards.run in EXTERNAL[wildcards.dataset] and wildcards.run not in GRADIENTED[wildcards.dataset]
           else {"pairs": P.PMP_PAIRS.format(**keys)}),
        **pmp_pool_inputs(wildcards),
    }


def pmp_chosen_partners(wildcards, size):
    """The partners per target the run's extraction chose (issue 37: a pilot sizes them), read from
    its pmp pairs file's metadata once it exists; metrics.pmp.partners_max before (resources only)."""
    import json

    import pyarrow.parquet as pq

    path = P.PMP_PAIRS.format(dataset=wildcards.dataset, run=wildcards.run)
    try:
        meta = json.loads((pq.read_schema(path).metadata or {}).get(b"dpaudit.pmp_pairs", b"{}"))
    except (OSError, ValueError):
        return {}
    return {"pmp_partners": int(meta["partners"])} if meta.get("partners") else {}


def pmp_targets():
    targets = [P.PMP_RUNS_PAGE] if PMP["enabled"] else []
    if config["simulations"]["pmp"]["enabled"]:
        targets += [P.PMP_FIGURE.format(k=k) for k in range(1, 7)]
    return targets


@intermediates
def pmp_pool_files():
    """The pools Recipe C reads (built even when metrics.attacks is disabled)."""
    if not PMP_RECIPE_C:
        return []
    return list(dict.fromkeys(path for dataset in DATASETS for run in RUNS[dataset]
                              for path in pmp_pool_inputs(SimpleNamespace(dataset=dataset, run=run)).values()))


for _batch in run_batches("metric_pmp"):
    _files = batch_files(_batch, unpack=pmp_metric_inputs,
                         output={"metrics": P.metric("pmp"), "per_example": P.PMP_PER_EXAMPLE},
                         log=P.log("metric_pmp", P.RUN_KEY))

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            options=config["metrics"]["pmp"],
            code=CODE["metric_pmp"],
        # Recipe A's Gram blocks and the largest-distance search are BLAS matrix products (issue 37)
        threads: PMP_THREADS
        resources:
            **batch_resources("metric_pmp", _batch, threads=PMP_THREADS, sizes=pmp_chosen_partners),
        log:
            _files.log,
        benchmark:
            P.benchmark("metric_pmp", _batch.key)
        script:
            "../scripts/metric_pmp.py"


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
        metrics=all_runs(P.metric("pmp")),
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
