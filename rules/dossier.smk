# Privacy dossiers (issue 18): every family's answer for one model on one page, and the
# guidance page per dataset to choose ε. Both read results/tables/metrics.parquet through
# the metric vocabulary (dpaudit.report.dossier) and are standalone HTML files.

# guidance.html would also match {run}.html
ruleorder: dossier_guidance > dossier


rule dossier:
    input:
        unpack(dossier_inputs),
    output:
        html=report(
            "results/dossiers/{dataset}/{run}.html",
            caption="../workflow/report/dossier.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels=card_labels,
        ),
    params:
        loss=config["metrics"]["mia"]["loss"],
        code=CODE["dossier"],
    log:
        "logs/dossier/{dataset}/{run}.log",
    script:
        "../scripts/dossier.py"


rule dossier_guidance:
    input:
        table="results/tables/metrics.parquet",
    output:
        html=report(
            "results/dossiers/{dataset}/guidance.html",
            caption="../workflow/report/dossier_guidance.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels={"model": "guidance: choosing ε"},
        ),
        png=report(
            "results/dossiers/{dataset}/guidance.png",
            caption="../workflow/report/dossier_guidance_figure.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels={"model": "guidance: privacy–utility frontier"},
        ),
        pdf="results/dossiers/{dataset}/guidance.pdf",
    params:
        targets=config["guidance"],
        code=CODE["dossier_guidance"],
    log:
        "logs/dossier_guidance/{dataset}.log",
    script:
        "../scripts/dossier_guidance.py"
