# Privacy profile (LeBlond et al. 2023): per numeric view, a base model, its
# worst-case and exact neighbours, mechanism samples, single and typical
# profiles, regime thresholds and Figs 1-8. No trained run is involved.

from dpaudit.data.registry import known_sources

PROFILE = config["profile"]
PROFILE_VIEWS = sorted(PROFILE["views"]) if PROFILE["enabled"] else []


def profile_view_spec(wildcards):
    return PROFILE["views"][wildcards.view]


def profile_raw_inputs(wildcards):
    source = PROFILE["views"][wildcards.view]["source"]
    if source == "adult":
        return {"raw": ancient(P.PROFILE_RAW_FILE.format(source="adult", filename="adult.data"))}
    return {}


def profile_download_sources(wildcards):
    return known_sources(wildcards.source, wildcards.filename)


def view_shape(wildcards, size):
    """n, d of a privacy-profile view (job_resources): its kept rows of the source and its columns."""
    spec = PROFILE["views"][wildcards.view]
    n, _, _ = dpresources.dataset_shape(None, spec["source"], {"n": spec.get("first_rows")})
    return {"n": n, "d": len(spec["columns"])}


def profile_metric_files():
    return [P.VIEW_METRIC.format(family="profile", view=view) for view in PROFILE_VIEWS]


def profile_targets():
    if not PROFILE["enabled"]:
        return []
    flat = [view for view in PROFILE_VIEWS if PROFILE["views"][view]["figures"]]
    figures = [P.PROFILE_FIGURE.format(view=view, k=k) for view in flat for k in range(2, 8)]
    exact = [P.PROFILE_EXACT.format(view=view) for view in PROFILE_VIEWS]
    samples = [P.PROFILE_FIGURE.format(view=view, k=k) for view in PROFILE["samples"]["views"] for k in (1, 8)]
    return figures + samples + exact


@intermediates
def profile_files():
    files = profile_metric_files()
    for view in PROFILE_VIEWS:
        files.append(P.PROFILE_BASE.format(view=view))
        if PROFILE["views"][view]["figures"]:  # the single-model profile feeds the figures only
            files.append(P.PROFILE_SINGLE.format(view=view))
    return files + [P.PROFILE_SAMPLES.format(view=view) for view in PROFILE["samples"]["views"]]


rule download_profile_data:
    output:
        P.PROFILE_RAW_FILE,
    params:
        sources=profile_download_sources,
        code=CODE["download_profile_data"],
    localrule: True
    log:
        P.log("download_profile_data", "{source}/{filename}"),
    benchmark:
        P.benchmark("download_profile_data", "{source}/{filename}")
    retries: 1
    script:
        "../scripts/download_profile_data.py"


rule profile_base:
    input:
        unpack(profile_raw_inputs),
    output:
        data=P.PROFILE_DATA,
        per_example=P.PROFILE_PER_EXAMPLE,
        worst_case=P.PROFILE_WORST_CASE,
        base=P.PROFILE_BASE,
    params:
        view=profile_view_spec,
        lam=PROFILE["lam"],
        code=CODE["profile_base"],
    resources:
        **job_resources("profile_base", sizes=view_shape),
    log:
        P.log("profile_base", P.VIEW_KEY),
    benchmark:
        P.benchmark("profile_base", P.VIEW_KEY)
    script:
        "../scripts/profile_base.py"


rule profile_exact:
    input:
        unpack(profile_raw_inputs),
        base=P.PROFILE_BASE,
        worst_case=P.PROFILE_WORST_CASE,
    output:
        P.PROFILE_EXACT,
    params:
        view=profile_view_spec,
        lam=PROFILE["lam"],
        code=CODE["profile_exact"],
    resources:
        **job_resources("profile_exact", sizes=view_shape),
    log:
        P.log("profile_exact", P.VIEW_KEY),
    benchmark:
        P.benchmark("profile_exact", P.VIEW_KEY)
    script:
        "../scripts/profile_exact.py"


rule profile_samples:
    input:
        unpack(profile_raw_inputs),
        base=P.PROFILE_BASE,
        worst_case=P.PROFILE_WORST_CASE,
    output:
        P.PROFILE_SAMPLES,
    params:
        view=profile_view_spec,
        lam=PROFILE["lam"],
        samples=PROFILE["samples"],
        seed=PROFILE["seed"],
        code=CODE["profile_samples"],
    resources:
        **job_resources("profile_samples", sizes=view_shape),
    log:
        P.log("profile_samples", P.VIEW_KEY),
    benchmark:
        P.benchmark("profile_samples", P.VIEW_KEY)
    script:
        "../scripts/profile_samples.py"


rule profile_single:
    input:
        base=P.PROFILE_BASE,
        worst_case=P.PROFILE_WORST_CASE,
    output:
        P.PROFILE_SINGLE,
    params:
        lam=PROFILE["lam"],
        log10_epsilon=PROFILE["single_model_log10_epsilon"],
        seed=PROFILE["seed"],
        code=CODE["profile_single"],
    resources:
        **job_resources("profile_single", sizes=view_shape),
    log:
        P.log("profile_single", P.VIEW_KEY),
    benchmark:
        P.benchmark("profile_single", P.VIEW_KEY)
    script:
        "../scripts/profile_single.py"


rule profile_typical:
    input:
        base=P.PROFILE_BASE,
        worst_case=P.PROFILE_WORST_CASE,
    output:
        typical=P.PROFILE_TYPICAL,
        per_neighbour=P.PROFILE_PER_NEIGHBOUR,
        thresholds=P.PROFILE_THRESHOLDS,
        metrics=P.view_metric("profile"),
    params:
        lam=PROFILE["lam"],
        log10_epsilons=PROFILE["log10_epsilons"],
        draws=PROFILE["draws"],
        seed=PROFILE["seed"],
        code=CODE["profile_typical"],
    resources:
        **job_resources("profile_typical", sizes=view_shape),
    log:
        P.log("profile_typical", P.VIEW_KEY),
    benchmark:
        P.benchmark("profile_typical", P.VIEW_KEY)
    script:
        "../scripts/profile_typical.py"


rule plot_profile:
    input:
        base=rules.profile_base.output.base,
        worst_case=rules.profile_base.output.worst_case,
        exact=rules.profile_exact.output[0],
        single=rules.profile_single.output[0],
        typical=rules.profile_typical.output.typical,
        per_neighbour=rules.profile_typical.output.per_neighbour,
        thresholds=rules.profile_typical.output.thresholds,
    output:
        **{
            f"fig{k}": report(
                P.fill(P.PROFILE_FIGURE, k=k),
                caption=f"../workflow/report/profile_fig{k}.rst",
                category="Privacy profile",
                labels={"view": "{view}", "figure": f"Fig {k}"},
            )
            for k in range(2, 8)
        },
        **{f"fig{k}_pdf": P.beside(P.fill(P.PROFILE_FIGURE, k=k), "pdf") for k in range(2, 8)},
    params:
        code=CODE["plot_profile"],
    localrule: True
    log:
        P.log("plot_profile", P.VIEW_KEY),
    benchmark:
        P.benchmark("plot_profile", P.VIEW_KEY)
    script:
        "../scripts/plot_profile.py"


rule plot_profile_samples:
    input:
        rules.profile_samples.output,
    output:
        **{
            f"fig{k}": report(
                P.fill(P.PROFILE_FIGURE, k=k),
                caption=f"../workflow/report/profile_fig{k}.rst",
                category="Privacy profile",
                labels={"view": "{view}", "figure": f"Fig {k}"},
            )
            for k in (1, 8)
        },
        **{f"fig{k}_pdf": P.beside(P.fill(P.PROFILE_FIGURE, k=k), "pdf") for k in (1, 8)},
    params:
        code=CODE["plot_profile_samples"],
    localrule: True
    log:
        P.log("plot_profile_samples", P.VIEW_KEY),
    benchmark:
        P.benchmark("plot_profile_samples", P.VIEW_KEY)
    script:
        "../scripts/plot_profile_samples.py"
