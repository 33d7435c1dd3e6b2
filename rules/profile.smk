# Privacy profile (LeBlond et al. 2023): per numeric view, a base model, its
# worst-case and exact neighbours, mechanism samples, single and typical
# profiles, regime thresholds and Figs 1-8. No trained run is involved.


rule download_profile_data:
    output:
        P.PROFILE_RAW_FILE,
    params:
        sources=profile_download_sources,
        code=CODE["download_profile_data"],
    log:
        P.log("download_profile_data", "{source}/{filename}"),
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
        **job_resources("profile_base"),
    log:
        P.log("profile_base", P.VIEW_KEY),
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
        **job_resources("profile_exact"),
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
        **job_resources("profile_samples"),
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
        **job_resources("profile_single"),
    log:
        P.log("profile_single", P.VIEW_KEY),
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
        **job_resources("profile_typical"),
    log:
        P.log("profile_typical", P.VIEW_KEY),
    benchmark:
        P.benchmark("profile_typical", P.VIEW_KEY)
    script:
        "../scripts/profile_typical.py"


rule plot_profile:
    input:
        base=P.PROFILE_BASE,
        worst_case=P.PROFILE_WORST_CASE,
        exact=P.PROFILE_EXACT,
        single=P.PROFILE_SINGLE,
        typical=P.PROFILE_TYPICAL,
        per_neighbour=P.PROFILE_PER_NEIGHBOUR,
        thresholds=P.PROFILE_THRESHOLDS,
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
    log:
        P.log("plot_profile", P.VIEW_KEY),
    script:
        "../scripts/plot_profile.py"


rule plot_profile_samples:
    input:
        P.PROFILE_SAMPLES,
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
    log:
        P.log("plot_profile_samples", P.VIEW_KEY),
    script:
        "../scripts/plot_profile_samples.py"
