# Practical membership privacy (Lowy et al. 2024): per-run PMP rows and the paper's Figs 1-6.
# Recipe C reads the run's recipe reference pool (rules/attacks.smk, reference_pool): the
# one home of reference models. The pool joins the DAG when metrics.attacks is enabled or
# when metrics.pmp.recipe_c is (then for the DP-SGD recipes only); its size is
# metrics.attacks.reference_models either way.
from types import SimpleNamespace

from dpaudit.contract import job_options

PMP_RECIPE_C = PMP["enabled"] and PMP["recipe_c"]


def pmp_pool_inputs(wildcards):
    """Recipe C's pool of a run: its recipe's reference outputs on P and their record (the
    attack family's lookup, attack_pool_inputs), for a DP-SGD run with per-example clipping
    (the runs Recipes A-C apply to, keeps_checkpoints); {} otherwise or when Recipe C is off."""
    if not PMP_RECIPE_C or not keeps_checkpoints(wildcards) or wildcards.run not in RUN_RECIPE[wildcards.dataset]:
        return {}
    return attack_pool_inputs(wildcards)


def pmp_runs():
    """The runs of each dataset Recipes A and B apply to: their pmp pairs are computed (issue 47)."""
    return {dataset: [run for run in RUNS[dataset] if keeps_checkpoints(RunWildcards(dataset=dataset, run=run))]
            for dataset in DATASETS}


def pmp_applies(wildcards):
    """A run the recipes may apply to: a DP-SGD run clipping each example (keeps_checkpoints), or a model
    trained elsewhere whose file dpaudit takes gradients of (GRADIENTED, rules/external.smk: Recipe A)."""
    return keeps_checkpoints(wildcards) or wildcards.run in GRADIENTED[wildcards.dataset]


def pmp_metric_inputs(wildcards):
    """train.json of every run (its rows say why the recipes do not apply to one); the examples, the
    pmp pairs and Recipe C's pool of a run they apply to."""
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    if not pmp_applies(wildcards):
        return {"train": P.TRAIN_INFO.format(**keys)}
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


def pmp_metric_params(wildcards):
    """The pmp options a run's rows read: every one the recipes use for a run they apply to, the
    parent set's (columns of every row) for the others (issue 47: a recipe option reruns only the
    runs the recipes apply to)."""
    keys = job_options.PMP_ROWS if pmp_applies(wildcards) else job_options.PMP_NOT_APPLICABLE_ROWS
    return {"options": job_options.subset(PMP, keys)}


def pmp_chosen_partners(wildcards, size):
    """The partners per target the run's pmp_pairs job chose (issue 37: a pilot sizes them), read from
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


# What Recipes A and B need of the parent set's per-example gradients at the final weights and at
# every checkpoint (dpaudit.extract.pmp_pairs), a rule of its own (issue 47; it was part of the
# extraction): only the options that draw the pairs are its params, and no PMP option reruns an
# extraction.
PMP_PAIR_OPTIONS = job_options.subset(PMP, job_options.PMP_PAIRS)

for _batch in run_batches("pmp_pairs", pmp_runs()):
    _files = batch_files(_batch, input={"examples": P.EXAMPLES, "info": P.DATASET_INFO, "model": P.MODEL,
                                        "train": P.TRAIN_INFO, "checkpoints": P.CHECKPOINTS},
                         output=P.PMP_PAIRS, log=P.log("pmp_pairs", P.RUN_KEY))

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            pmp=PMP_PAIR_OPTIONS,
            code=CODE["pmp_pairs"],
        # Recipe B's Gram blocks are BLAS matrix products (dpaudit.extract.pmp_partners)
        threads: PMP_THREADS
        resources:
            **batch_resources("pmp_pairs", _batch, threads=PMP_THREADS),
        log:
            _files.log,
        benchmark:
            P.benchmark("pmp_pairs", _batch.key)
        script:
            "../scripts/pmp_pairs.py"


@intermediates
def pmp_pairs_files():
    return [P.PMP_PAIRS.format(dataset=dataset, run=run) for dataset, runs in pmp_runs().items() for run in runs]


for _batch in run_batches("metric_pmp"):
    _files = batch_files(_batch, unpack=pmp_metric_inputs,
                         output={"metrics": P.metric("pmp"), "per_example": P.PMP_PER_EXAMPLE},
                         log=P.log("metric_pmp", P.RUN_KEY), params=pmp_metric_params)

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
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
