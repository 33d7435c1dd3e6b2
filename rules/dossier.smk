# Privacy dossiers (issue 18): every family's answer for one model on one page, and the
# guidance page per dataset to choose ε. Both read the metrics table through
# the metric vocabulary (dpaudit.report.dossier, dpaudit.report.guidance) and are standalone
# HTML files.

# guidance.html would also match {run}.html
ruleorder: dossier_guidance > dossier


rule dossier:
    # the guidance page (guidance.html) is not a model's dossier
    wildcard_constraints:
        run=r"(?!guidance\.html$)[A-Za-z0-9.+\-~_]+",
    input:
        unpack(dossier_inputs),
    output:
        html=report(
            P.DOSSIER,
            caption="../workflow/report/dossier.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels=card_labels,
        ),
    params:
        loss=config["metrics"]["mia"]["loss"],
        code=CODE["dossier"],
    log:
        P.log("dossier", P.RUN_KEY),
    script:
        "../scripts/dossier.py"


rule dossier_guidance:
    input:
        table=P.METRICS_TABLE,
    output:
        html=report(
            P.GUIDANCE,
            caption="../workflow/report/dossier_guidance.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels={"model": "guidance: choosing ε"},
        ),
        png=report(
            P.beside(P.GUIDANCE, "png"),
            caption="../workflow/report/dossier_guidance_figure.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels={"model": "guidance: privacy–utility frontier"},
        ),
        pdf=P.beside(P.GUIDANCE, "pdf"),
    params:
        targets=config["guidance"],
        code=CODE["dossier_guidance"],
    log:
        P.log("dossier_guidance", P.DATASET_KEY),
    script:
        "../scripts/dossier_guidance.py"
