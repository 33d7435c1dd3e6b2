# Geambasu's DP lecture: a privacy card per model, the budget ledger, teaching figures.


rule privacy_card:
    input:
        outputs=P.OUTPUTS,
        mia=P.metric("mia"),
        train=P.TRAIN_INFO,
        info=P.DATASET_INFO,
        **canary_card_input(),
    output:
        card=report(
            P.CARD,
            caption="../workflow/report/privacy_card.rst",
            category="Privacy cards",
            subcategory="{dataset}",
            labels=card_labels,
        ),
        figure=P.CARD_FIGURE,
        metrics=P.metric("privacy_card"),
    params:
        alpha=config["metrics"]["mia"]["alpha"],
        loss=config["metrics"]["mia"]["loss"],
        code=CODE["privacy_card"],
    resources:
        **job_resources("privacy_card"),
    log:
        P.log("privacy_card", P.RUN_KEY),
    script:
        "../scripts/privacy_card.py"


rule budget_ledger:
    input:
        train=all_runs(P.TRAIN_INFO),
    output:
        runs=P.BUDGET_LEDGER,
        totals=P.BUDGET_TOTALS,
        html=report(
            P.BUDGET_LEDGER_PAGE,
            caption="../workflow/report/budget_ledger.rst",
            category="Tables",
        ),
    params:
        run_keys=RUN_KEYS,
        code=CODE["budget_ledger"],
    log:
        P.log("budget_ledger"),
    script:
        "../scripts/budget_ledger.py"


rule teaching_figures:
    output:
        **{
            name: report(
                P.TEACHING_FIGURE.format(name=name),
                caption=f"../workflow/report/teaching_{name}.rst",
                category="DP foundations",
                labels={"figure": label},
            )
            for name, label in TEACHING_FIGURES.items()
        },
        pdfs=[P.beside(P.TEACHING_FIGURE.format(name=name), "pdf") for name in TEACHING_FIGURES],
    params:
        code=CODE["teaching_figures"],
    log:
        P.log("teaching_figures"),
    script:
        "../scripts/teaching_figures.py"
