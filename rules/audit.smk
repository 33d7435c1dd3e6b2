# Bernau et al. 2021 (identifiability): bounds for every trained DP-SGD run,
# and the DI adversary's audit of full-batch DP-SGD with its own training loop.
from dpaudit.metrics.identifiability_grid import audit_configs as _audit_configs
from dpaudit.metrics.identifiability_grid import blocks as _audit_blocks
from dpaudit.metrics.identifiability_grid import target_problems as _audit_target_problems

# The audit's configurations per dataset and the blocks of runs each job trains, as
# parse-time lookups (every audited dataset is also under config.datasets: checked by
# dpaudit.config).
AUDIT = config["audit"]
AUDIT_SHARED = {k: v for k, v in AUDIT.items() if k != "datasets"}
AUDIT_DATASETS = sorted(AUDIT["datasets"]) if AUDIT["enabled"] else []
_unreachable = [
    problem for dataset in AUDIT_DATASETS for problem in _audit_target_problems(dataset, AUDIT["datasets"][dataset], AUDIT)
]
if _unreachable:
    refuse_config("invalid configuration:\n  " + "\n  ".join(_unreachable))
AUDIT_CONFIGS = {
    dataset: _audit_configs(AUDIT["datasets"][dataset], AUDIT) for dataset in AUDIT_DATASETS
}


def audit_block_files(kind):
    return [
        P.AUDIT_BLOCK.format(dataset=dataset, audit_config=name, block=block, kind=kind)
        for dataset in AUDIT_DATASETS
        for name, params in AUDIT_CONFIGS[dataset].items()
        for block in _audit_blocks(params["runs"], AUDIT["block_size"])
    ]


def audit_options(wildcards):
    return AUDIT["datasets"][wildcards.dataset]


def audit_config_params(wildcards):
    return AUDIT_CONFIGS[wildcards.dataset][wildcards.audit_config]


def audit_members(wildcards, size):
    """The members the audit keeps (job_resources): audit.datasets.<name>.n, or the dataset's n."""
    return {"audit_n": int(AUDIT["datasets"][wildcards.dataset].get("n") or size["n"])}


def audit_runs(wildcards, size):
    """The audit's runs over every block (job_resources of audit_aggregate)."""
    return {"audit_runs": sum(params["runs"] for dataset in AUDIT_DATASETS for params in AUDIT_CONFIGS[dataset].values())}


def audit_figures():
    if not AUDIT_DATASETS:
        return []
    return [P.IDENTIFIABILITY_FIGURE.format(k=i) for i in range(1, 7)] + [
        P.IDENTIFIABILITY_AUDIT_FIGURE.format(dataset=dataset) for dataset in AUDIT_DATASETS
    ] + [P.IDENTIFIABILITY_TABLES_PAGE]


@intermediates
def audit_files():
    files = audit_block_files("runs") + [P.AUDIT_NEIGHBOURS.format(dataset=d) for d in AUDIT_DATASETS]
    return files + ([P.AUDIT_SUMMARY] if AUDIT_DATASETS else [])


for _batch in run_batches("metric_identifiability"):
    _files = batch_files(_batch, input={"train": P.TRAIN_INFO}, output=P.metric("identifiability"),
                         log=P.log("metric_identifiability", P.RUN_KEY))

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            code=CODE["metric_identifiability"],
        resources:
            **batch_resources("metric_identifiability", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("metric_identifiability", _batch.key)
        script:
            "../scripts/metric_identifiability.py"


rule audit_neighbours:
    input:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
    output:
        P.AUDIT_NEIGHBOURS,
    params:
        options=audit_options,
        top=AUDIT["neighbour_top"],
        code=CODE["audit_neighbours"],
    resources:
        **job_resources("audit_neighbours", sizes=audit_members),
    log:
        P.log("audit_neighbours", P.DATASET_KEY),
    benchmark:
        P.benchmark("audit_neighbours", P.DATASET_KEY)
    script:
        "../scripts/audit_neighbours.py"


rule audit_block:
    input:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
        neighbours=P.AUDIT_NEIGHBOURS,
    output:
        runs=P.audit_block("runs"),
        steps=P.audit_block("steps"),
        vectors=P.audit_block("vectors"),
    wildcard_constraints:
        audit_config=r"(bounded|unbounded)-(ls|gs)-rho[0-9.e+\-]+-(max[0-9]+|min[0-9]+|explicit)",
        block=r"\d+",
    params:
        options=audit_options,
        audit=AUDIT_SHARED,
        config=audit_config_params,
        code=CODE["audit_block"],
    resources:
        **job_resources("audit_block", sizes=audit_members),
    log:
        P.log("audit_block", "{dataset}/{audit_config}/block{block}"),
    benchmark:
        P.benchmark("audit_block", "{dataset}/{audit_config}/block{block}")
    script:
        "../scripts/audit_block.py"


rule audit_aggregate:
    input:
        runs=audit_block_files("runs"),
        steps=audit_block_files("steps"),
    output:
        runs=P.AUDIT_RUNS,
        steps=P.AUDIT_STEPS,
        summary=P.AUDIT_SUMMARY,
    params:
        alpha=AUDIT["alpha"],
        code=CODE["audit_aggregate"],
    resources:
        **job_resources("audit_aggregate", sizes=audit_runs),
    log:
        P.log("audit_aggregate"),
    script:
        "../scripts/audit_aggregate.py"


rule plot_identifiability:
    input:
        **rules.audit_aggregate.output,
    output:
        **{
            f"fig{i}": report(
                P.IDENTIFIABILITY_FIGURE.format(k=i),
                caption=f"../workflow/report/identifiability_fig{i}.rst",
                category="Identifiability",
                labels={"figure": f"Fig. {i}"},
            )
            for i in range(1, 7)
        },
        **{f"fig{i}_pdf": P.beside(P.IDENTIFIABILITY_FIGURE.format(k=i), "pdf") for i in range(1, 7)},
        **{
            f"audit_{dataset}": report(
                P.IDENTIFIABILITY_AUDIT_FIGURE.format(dataset=dataset),
                caption="../workflow/report/identifiability_audit.rst",
                category="Identifiability",
                labels={"figure": f"Figs. 7-9: {dataset}"},
            )
            for dataset in AUDIT_DATASETS
        },
        **{f"audit_{dataset}_pdf": P.beside(P.IDENTIFIABILITY_AUDIT_FIGURE.format(dataset=dataset), "pdf") for dataset in AUDIT_DATASETS},
        tables=report(
            P.IDENTIFIABILITY_TABLES_PAGE,
            caption="../workflow/report/identifiability_tables.rst",
            category="Identifiability",
            labels={"figure": "Tables"},
        ),
        parameters=P.IDENTIFIABILITY_PARAMETERS,
    params:
        datasets={dataset: AUDIT["datasets"][dataset] for dataset in AUDIT_DATASETS},
        steps=AUDIT["steps"],
        conversion=AUDIT["conversion"],
        code=CODE["plot_identifiability"],
    localrule: True
    log:
        P.log("plot_identifiability"),
    script:
        "../scripts/plot_identifiability.py"
