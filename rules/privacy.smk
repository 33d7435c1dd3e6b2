# Geambasu's DP lecture: a privacy card per model, the budget ledger, teaching figures.
from dpaudit.contract.architectures import architecture_label
from dpaudit.contract.mechanisms import MECHANISM_SHORT_LABELS

# Teaching figures of the DP lecture: output name -> what the report calls it.
TEACHING_FIGURES = {
    "f1": "Laplace vs Gaussian noise",
    "f2": "Laplace error vs count",
    "f3": "composition of many queries",
    "f4": "exponential mechanism",
    "f5": "DP region in ROC space",
}


def card_labels(wildcards):
    """Short report label of a model's page (privacy card, dossier): mechanism, target ε, seed.

    One label, not three: the report turns a second label with two values into a
    toggle and crashes when the grid does not cross them (a baseline has no ε).
    The report sorts labels as text, so numbers are padded with figure spaces
    (U+2007, digit-wide, sorted before digits): ε = 4 comes before ε = 16.
    """
    params = RUNS[wildcards.dataset][wildcards.run]
    if params["mechanism"] == EXTERNAL_MECHANISM:  # named by its config entry (issue 44)
        return {"model": f"{wildcards.run} (trained elsewhere)"}
    target = params.get("target_epsilon")
    has_target = target is not None and target == target
    seed = params.get("seed")
    mechanism = MECHANISM_SHORT_LABELS[params["mechanism"]]
    epsilon = f"ε = {f'{target:g}'.rjust(3, chr(0x2007))}" if has_target else "ε = ∞ (no DP)"
    seed_text = "" if seed is None else f" · seed {str(seed).rjust(2, chr(0x2007))}"
    # a dataset with several architectures names each model's (issue 46, dpaudit.contract.architectures)
    kinds = {architecture_label(p.get("model")) for p in RUNS[wildcards.dataset].values()} - {None}
    shown = architecture_label(params.get("model")) if len(kinds) > 1 else None
    return {"model": f"{mechanism} · {epsilon}{seed_text}" + (f" · {shown}" if shown else "")}


def canary_card_input():
    """The privacy card shows the run's ε ladder when the canary family is on."""
    return {"canary": P.metric("canary")} if "canary" in FAMILIES else {}


def privacy_card_page(wildcards):
    """A run's card, in the report under its dataset with its model label."""
    return report(
        P.CARD.format(**wildcards),
        caption="../workflow/report/privacy_card.rst",
        category="Privacy cards",
        subcategory=wildcards.dataset,
        labels=card_labels(wildcards),
    )


for _batch in run_batches("privacy_card"):
    _files = batch_files(_batch, input={"outputs": P.OUTPUTS, "mia": P.metric("mia"), "train": P.TRAIN_INFO,
                                        "info": P.DATASET_INFO, **canary_card_input()},
                         output={"card": privacy_card_page, "figure": P.CARD_FIGURE,
                                 "metrics": P.metric("privacy_card")},
                         log=P.log("privacy_card", P.RUN_KEY))

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            alpha=config["metrics"]["mia"]["alpha"],
            loss=config["metrics"]["mia"]["loss"],
            code=CODE["privacy_card"],
        resources:
            **batch_resources("privacy_card", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("privacy_card", _batch.key)
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
    localrule: True
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
    localrule: True
    log:
        P.log("teaching_figures"),
    script:
        "../scripts/teaching_figures.py"
