# dpaudit: download → prepare → train → extract → metrics → aggregate → report.
# Layout, data contracts and where a new metric family goes: docs/architecture.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# The report's first view (issue 34): this description, with the overview of every model in it.
report: "workflow/report/workflow.rst"


# profiles/default's "no job rate limit" (dpaudit.scheduling): Snakemake's limiter would
# wake the scheduling loop on a timer chain per finished job.
from dpaudit.scheduling import drop_unbinding_rate_limit


onstart:
    drop_unbinding_rate_limit(workflow)
    # issue 47: the new batches are recorded before any job, so a grown grid keeps them (rules/batches.smk)
    write_batch_records()


onsuccess:
    # The did-not-train flags and training notes reach the terminal, not only the job logs.
    from dpaudit.aggregate import flagged_model_lines

    for line in flagged_model_lines(RUN_KEYS, P.TRAIN_INFO):
        print(line)


include: "rules/common.smk"
include: "rules/batches.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/extract.smk"
include: "rules/external.smk"
include: "rules/metrics.smk"
include: "rules/simulate.smk"
include: "rules/privacy.smk"
include: "rules/profile.smk"
include: "rules/audit.smk"
include: "rules/pmp.smk"
include: "rules/canary.smk"
include: "rules/attacks.smk"
include: "rules/aggregate.smk"
include: "rules/dossier.smk"
include: "rules/check.smk"


rule all:
    input:
        P.METRICS_TABLE,
        P.RUNS_PAGE,
        P.OVERVIEW,
        P.PRIVACY_UTILITY_FIGURE,
        landscape_figures(),
        simulation_targets(),
        pmp_targets(),
        P.BUDGET_LEDGER_PAGE,
        P.TEACHING_FIGURE.format(name="f5"),
        report_figures(),
        profile_targets(),
        audit_figures(),
        canary_figures(),
        attack_figures(),
        dossier_targets(),
        # every final table and figure read whole (rules/check.smk): a damaged one fails here
        P.RESULTS_CHECK,
        # every intermediate and every other output of the jobs above: a deleted one is
        # rebuilt with everything made from it (docs/architecture.md, "A complete results/")
        complete_results,
    default_target: True
